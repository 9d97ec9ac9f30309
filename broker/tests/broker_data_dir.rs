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

/// A catalog.json that parses but cannot be served stops the start (exit 1) naming the file and
/// what is wrong, and so does a missing one next to table directories; the data is left as it
/// is. Before (audit F4), the server started on each: a lowered `next_table_id` gave a new
/// table an existing table's id (its rows went into the old table's directory), two tables
/// with one id made the start delete the other's directory as "dropped", a table named
/// `../../victim` made DROP TABLE delete a directory outside data.dir, and a deleted
/// catalog.json started a new cluster whose first table took over the old directory.
#[test]
fn a_start_refuses_a_catalog_that_would_mix_or_delete_data() {
    let mut server = Server::start(1, &[]);
    let data = server.data_dir.clone();
    server.sql_ok("CREATE TABLE fluss.t (x INT); CREATE TABLE fluss.u (x INT)");
    assert!(server.terminate().expect("exits").success());
    let path = data.join("catalog.json");
    let original = std::fs::read(&path).unwrap();
    let catalog: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let id = |table: &str| {
        catalog["databases"]["fluss"]["tables"][table]["id"]
            .as_u64()
            .unwrap()
    };
    let (t, u) = (id("t"), id("u"));
    // The directories a first append leaves.
    let dirs = [
        data.join("fluss").join(format!("t-{t}")),
        data.join("fluss").join(format!("u-{u}")),
    ];
    for dir in &dirs {
        std::fs::create_dir_all(dir.join("bucket-0")).unwrap();
    }
    let victim = data.parent().unwrap().join(format!("victim-{u}"));
    std::fs::create_dir_all(&victim).unwrap();

    let refused = |edit: &dyn Fn(&mut serde_json::Value), expected: &str| {
        let mut edited = catalog.clone();
        edit(&mut edited);
        std::fs::write(&path, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
        let (code, stdout, stderr) = serve_in(&data, &[FREE_PORTS]);
        assert_eq!(code, Some(1), "{expected}\nstdout: {stdout}\nstderr: {stderr}");
        let expected = format!("catalog file {} is inconsistent: {expected}", path.display());
        assert!(stderr.contains(&expected), "{expected}\n{stderr}");
        for dir in &dirs {
            assert!(dir.join("bucket-0").is_dir(), "{} kept", dir.display());
        }
        assert!(victim.is_dir());
    };
    refused(
        &|c| c["next_table_id"] = t.into(),
        &format!("next_table_id is {t}, not above the id {t} of table fluss.t"),
    );
    refused(
        &|c| c["databases"]["fluss"]["tables"]["u"]["id"] = t.into(),
        &format!("tables fluss.t and fluss.u have the same id {t}"),
    );
    refused(
        &|c| {
            let tables = c["databases"]["fluss"]["tables"].as_object_mut().unwrap();
            let u = tables.remove("u").unwrap();
            tables.insert("../../victim".to_string(), u);
        },
        "table \"../../victim\" of database fluss has a name SQL refuses",
    );

    std::fs::remove_file(&path).unwrap();
    let (code, stdout, stderr) = serve_in(&data, &[FREE_PORTS]);
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    let expected = format!(
        "catalog file {} is missing, but the data dir holds table directory {}/fluss/",
        path.display(),
        data.display()
    );
    assert!(stderr.contains(&expected), "{expected}\n{stderr}");
    assert!(!path.exists(), "no new catalog was written");

    std::fs::write(&path, &original).unwrap();
    let server = Server::start_in(&data, 1, &[]);
    let tables = server.sql_ok("SHOW TABLES");
    assert!(tables.contains("\"t\"") && tables.contains("\"u\""), "{tables}");
    for dir in &dirs {
        assert!(dir.is_dir(), "{} kept", dir.display());
    }
}
