//! What `kafluss serve` accepts as its data dir (real binary): one server per directory (a
//! second server on a directory in use refuses to start, naming it, and the first keeps
//! serving), and a catalog bounded by `catalog.max-size`.

#[path = "broker_support.rs"]
mod support;

use support::{serve_in, Server};

/// Listeners on free ports, so that a second server that did start would not collide with
/// the first on its ports.
const FREE_PORTS: &str = "bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0";

/// Two servers on one data dir each rewrote catalog.json from their own memory (one's
/// acknowledged CREATE vanished) and appended to the same segment files. The second now exits
/// 1 naming the directory and the holder, touching nothing there; the first keeps serving; once
/// it stops (SIGTERM, or SIGKILL), a new server starts at once.
#[test]
fn a_second_server_on_a_data_dir_in_use_refuses_to_start() {
    let mut first = Server::start(1, &[]);
    let data = first.data_dir.clone();
    first.sql_ok("CREATE TABLE fluss.kept (x INT)");
    let catalog = std::fs::read(data.join("catalog.json")).unwrap();

    let (code, stdout, stderr) = serve_in(&data, &[FREE_PORTS]);
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert!(!stdout.contains("kafluss ready"), "{stdout}");
    let expected = format!(
        "kafluss: data dir {} is in use by another kafluss server (pid {})",
        data.display(),
        first.pid()
    );
    assert!(stderr.contains(&expected), "{expected}\n{stderr}");
    assert!(stderr.contains(".lock"), "names the lock file: {stderr}");
    assert_eq!(
        std::fs::read(data.join("catalog.json")).unwrap(),
        catalog,
        "the refused server wrote nothing"
    );

    // The first server still serves, and its changes are what is stored.
    first.sql_ok("CREATE TABLE fluss.after (x INT)");
    assert!(first.is_running());
    assert!(first.terminate().expect("exits").success());

    let mut second = Server::start_in(&data, 1, &[]);
    let tables = second.sql_ok("SHOW TABLES");
    assert!(tables.contains("kept") && tables.contains("after"), "{tables}");
    second.kill();
    let third = Server::start_in(&data, 1, &[]);
    assert!(third.sql_ok("SHOW TABLES").contains("after"));
}

/// `catalog.max-size` through the real binary: a CREATE whose catalog would be larger is
/// answered 413 `CATALOG_TOO_LARGE` and changes nothing; a start on a catalog.json over the
/// limit exits 1 saying the file's size and the key (before: no such key, and a file over the
/// fixed 512 MiB read limit was cut and reported "corrupt: EOF while parsing a string").
#[test]
fn catalog_max_size_bounds_what_ddl_stores_and_what_a_start_reads() {
    let mut server = Server::start(1, &["catalog.max-size=4kb"]);
    let data = server.data_dir.clone();
    let path = data.join("catalog.json");
    server.sql_ok("CREATE TABLE fluss.small (x INT)");
    let stored = std::fs::read(&path).unwrap();
    let fields: Vec<String> = (0..300).map(|i| format!("f{i} DEC")).collect();
    let (status, body) = server.sql(&format!("CREATE TABLE fluss.wide (c ROW<{}>)", fields.join(", ")));
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("\"code\":\"CATALOG_TOO_LARGE\""), "{body}");
    assert!(body.contains("more than catalog.max-size (4096 bytes)"), "{body}");
    assert_eq!(std::fs::read(&path).unwrap(), stored, "nothing written");
    assert!(!server.sql_ok("SHOW TABLES").contains("wide"));
    assert!(server.terminate().expect("exits").success());

    let limit = stored.len() - 1;
    let (code, stdout, stderr) = serve_in(&data, &[FREE_PORTS, &format!("catalog.max-size={limit}")]);
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    let expected = format!(
        "catalog file {} is {} bytes, more than catalog.max-size ({limit} bytes)",
        path.display(),
        stored.len()
    );
    assert!(stderr.contains(&expected), "{expected}\n{stderr}");
    assert!(!stderr.contains("corrupt"), "{stderr}");

    let server = Server::start_in(&data, 1, &[]);
    assert!(server.sql_ok("SHOW TABLES").contains("small"));
}
