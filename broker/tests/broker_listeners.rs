//! Listener addresses another process already serves: start-up fails with "address already in
//! use" naming the listener, instead of a second server silently sharing the port through
//! SO_REUSEPORT (which splits the connections between two servers). The first server keeps
//! serving. A restart on the same ports binds while the stopped server's connections linger.
//! So does a restart at once after SIGKILL, and the first start beside the lingering
//! connections of an earlier version, which lack SO_REUSEADDR. Listeners that nothing would serve are a
//! configuration error. A stdout that cannot take the ready line does not stop the server.

#[path = "broker_support.rs"]
mod support;

use std::process::Command;
use std::time::Duration;

use support::{run_with_timeout, serve_with, Server};

/// Starts a second server with `listeners`; returns (exited with failure, stderr).
fn second_server(listeners: &str) -> (bool, String) {
    let temp = tempfile::tempdir().expect("temp dir");
    let (ok, stdout, stderr) = run_with_timeout(
        Command::new(support::binary()).args([
            "serve",
            "-D",
            &format!("bind.listeners={listeners}"),
            "-D",
            &format!("data.dir={}", temp.path().join("data").display()),
            "-D",
            "server.cores=1",
        ]),
        b"",
        Duration::from_secs(30),
    );
    assert!(
        !stdout.contains("kafluss ready"),
        "the second server must not become ready: {stdout}"
    );
    (!ok, stderr)
}

#[test]
fn a_busy_kafka_or_fluss_address_is_a_start_up_error() {
    let first = Server::start(2, &[]);

    let (failed, stderr) = second_server(&format!(
        "FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:{}",
        first.kafka.port()
    ));
    assert!(failed, "a second server on a busy Kafka port must exit non-zero");
    let message = stderr.to_lowercase();
    assert!(
        message.contains("address already in use") && stderr.contains("KAFKA"),
        "the error names the listener and the cause: {stderr}"
    );

    let (failed, stderr) = second_server(&format!(
        "FLUSS://127.0.0.1:{},KAFKA://127.0.0.1:0",
        first.fluss.port()
    ));
    assert!(failed, "a second server on a busy Fluss port must exit non-zero");
    assert!(
        stderr.to_lowercase().contains("address already in use") && stderr.contains("FLUSS"),
        "the error names the listener and the cause: {stderr}"
    );

    // The first server still owns both ports.
    let (status, _) = first.get("/healthz");
    assert_eq!(status, 200);
    first.sql_ok(
        "CREATE TABLE fluss.t (_kafka_value BYTES) WITH ('table.kafka.enabled' = 'true', 'table.kafka.convert.value.type' = 'binary')",
    );
    let (ok, _, stderr) = support::kcat_produce(&first, "t", 0, &["a", "b", "c"], &[]);
    assert!(ok, "kcat: {stderr}");
    assert_eq!(
        first.scan("fluss.t").len(),
        3,
        "every record reached the first server"
    );
}

/// A server stopped while clients stay connected closes their connections first, so its side of
/// each lingers (FIN-WAIT-2, then TIME_WAIT) for up to a minute; a restart on the same port
/// right away still binds (it failed with "Address already in use": the accepted sockets lacked
/// SO_REUSEADDR, which the start-up's exclusive bind check needs them to have).
#[test]
fn a_restart_on_the_same_port_binds_while_old_connections_linger() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let listeners = format!("bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:{port}");
    let mut server = Server::start(1, &[&listeners]);
    assert_eq!(server.kafka.port(), port);
    // Connections the server has accepted (each answered once), left open by their clients.
    let clients: Vec<support::Raw> = (0..3)
        .map(|_| {
            let mut raw = support::Raw::connect(server.kafka);
            let correlation = raw.send(3, &kafluss_protocol::ApiVersionsRequest::default());
            let _: kafluss_protocol::ApiVersionsResponse = raw.recv(3, correlation);
            raw
        })
        .collect();
    let status = server.terminate().expect("the first server exits");
    assert!(status.success(), "{status:?}");

    let restarted = Server::start_in(&server.data_dir, 1, &[&listeners]);
    assert_eq!(restarted.kafka.port(), port);
    assert_eq!(restarted.get("/healthz").0, 200);
    drop(clients);
}

/// The server-side sockets on `port` in TIME_WAIT, as this network namespace's
/// /proc/net/tcp lists them (state 06).
fn time_wait_sockets_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3
                && fields[3] == "06"
                && fields[1]
                    .rsplit_once(':')
                    .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok())
                    == Some(port)
        })
        .count()
}

/// A listener on 127.0.0.1:`port` as servers before SO_REUSEADDR on accepted sockets made
/// theirs (the kafluss of before 2026-12-07, whose glommio listener sets SO_REUSEPORT only).
fn listener_without_reuse_address(port: u16) -> socket2::Socket {
    let listener = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    listener.set_reuse_port(true).expect("SO_REUSEPORT");
    let address: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    listener.bind(&address.into()).expect("bind");
    listener.listen(8).expect("listen");
    listener
}

/// A server of an earlier version (before accepted sockets got SO_REUSEADDR), stopped with
/// clients connected, leaves its side of their connections in TIME_WAIT for a minute, and
/// those sockets lack SO_REUSEADDR. The first start of this version on the same port right
/// away binds beside them (it was refused "Address already in use" for that minute: the
/// start-up's check that no other server listens there is a bind that such sockets fail). A
/// live listener on the port, even one sharing it through SO_REUSEPORT, is still refused.
#[test]
fn a_start_binds_beside_lingering_connections_of_an_earlier_version() {
    use std::io::Read;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let address: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let old = listener_without_reuse_address(port);
    for _ in 0..3 {
        let mut client = std::net::TcpStream::connect(address).expect("connect");
        let (accepted, _) = old.accept().expect("accept");
        // The server closes first (as at its shutdown), then the client: the server's side
        // ends in TIME_WAIT.
        drop(accepted);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).expect("the server's close");
        drop(client);
    }
    drop(old);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while time_wait_sockets_on(port) < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        time_wait_sockets_on(port) >= 3,
        "the server's sockets are in TIME_WAIT"
    );
    // The exclusive bind (SO_REUSEADDR only) fails beside them: the case this test is about.
    let exclusive = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    exclusive.set_reuse_address(true).expect("SO_REUSEADDR");
    let refused = exclusive
        .bind(&address.into())
        .expect_err("TIME_WAIT sockets without SO_REUSEADDR block it");
    assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse, "{refused}");
    drop(exclusive);

    let listeners = format!("bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:{port}");
    let mut server = Server::start(1, &[&listeners]);
    assert_eq!(server.kafka.port(), port);
    assert!(
        time_wait_sockets_on(port) >= 3,
        "it started beside the TIME_WAIT sockets"
    );
    let mut client = support::Raw::connect(server.kafka);
    let correlation = client.send(3, &kafluss_protocol::ApiVersionsRequest::default());
    let _: kafluss_protocol::ApiVersionsResponse = client.recv(3, correlation);
    drop(client);
    let status = server.terminate().expect("the server exits");
    assert!(status.success(), "{status:?}");

    // A live listener on the port (same user, SO_REUSEPORT, which the cores' binds would
    // share) beside the same TIME_WAIT sockets: start-up is refused, naming the listener.
    let live = listener_without_reuse_address(port);
    let (code, stdout, stderr) = serve_with(&[&listeners]);
    assert_eq!(code, Some(1), "stdout {stdout} stderr {stderr}");
    assert!(!stdout.contains("kafluss ready"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "cannot bind listener KAFKA on 127.0.0.1:{port}: Address already in use"
        )),
        "{stderr}"
    );
    drop(live);
}

/// A server killed (SIGKILL, reaped) releases its listening sockets a moment after it is gone;
/// a restart at once on the same ports binds (it failed "Address already in use" in most tries:
/// start-up now retries such an address for up to 2 s).
#[test]
fn a_restart_at_once_after_sigkill_binds_the_same_ports() {
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port()
    };
    let (fluss, kafka) = (free_port(), free_port());
    let listeners = format!("bind.listeners=FLUSS://127.0.0.1:{fluss},KAFKA://127.0.0.1:{kafka}");
    let mut server = Server::start(1, &[&listeners]);
    for round in 0..6 {
        // A client of each listener, served (so the Kafka connection's socket has
        // SO_REUSEADDR; one without it is `a_start_binds_beside_lingering_connections_...`),
        // left connected, so each listener has I/O in flight when killed.
        let mut kafka_client = support::Raw::connect(server.kafka);
        let correlation = kafka_client.send(3, &kafluss_protocol::ApiVersionsRequest::default());
        let _: kafluss_protocol::ApiVersionsResponse = kafka_client.recv(3, correlation);
        let _fluss_client = std::net::TcpStream::connect(server.fluss).expect("connect");
        server.kill();
        let restarted = Server::start_in(&server.data_dir, 1, &[&listeners]);
        assert_eq!(
            (restarted.fluss.port(), restarted.kafka.port()),
            (fluss, kafka),
            "round {round}"
        );
        assert_eq!(restarted.get("/healthz").0, 200, "round {round}");
        server = restarted;
    }
}

#[test]
fn listeners_that_nothing_would_serve_are_a_start_up_error() {
    for (defines, named) in [
        // A third listener was never bound; no Fluss listener started without the admin API;
        // an advertised listener that is not bound was accepted.
        (
            vec!["bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0,OTHER://127.0.0.1:0"],
            ["bind.listeners", "OTHER"],
        ),
        (
            vec!["bind.listeners=KAFKA://127.0.0.1:0"],
            ["bind.listeners", "no Fluss listener"],
        ),
        (
            vec![
                "bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0",
                "advertised.listeners=NOPE://localhost:1",
            ],
            ["advertised.listeners", "NOPE"],
        ),
    ] {
        let (code, stdout, stderr) = serve_with(&defines);
        // Exit 2, as every other configuration error.
        assert_eq!(code, Some(2), "{defines:?}: stdout {stdout} stderr {stderr}");
        assert!(!stdout.contains("kafluss ready"), "{defines:?}: {stdout}");
        for word in named {
            assert!(stderr.contains(word), "{defines:?}: {stderr}");
        }
    }
}

#[test]
fn a_stdout_that_cannot_take_the_ready_line_does_not_stop_the_server() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let temp = tempfile::tempdir().expect("temp dir");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let mut child = Command::new(support::binary())
        .args([
            "serve",
            "-D",
            "bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0",
            "-D",
            &format!("data.dir={}", temp.path().join("data").display()),
            "-D",
            "server.cores=1",
        ])
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kafluss");
    // Lines until the warning (or the end of stderr, should the server die).
    // The reader stays open to the end: a server writing to a closed stderr is another test.
    let mut seen = String::new();
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("cannot write the ready line to stdout") {
            break;
        }
    }
    assert!(
        seen.contains("cannot write the ready line to stdout: No space left on device"),
        "{seen}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let running = child.try_wait().expect("wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    drop(lines);
    assert!(running, "the server stopped: {seen}");
}
