//! Crash test: a confluent-kafka producer with acks=-1 streams rows; the server is SIGKILLed
//! mid-stream and restarted on the same data dir. Every acknowledged row must be there exactly
//! once, in order, and producing continues at the next offset. A core that panics aborts the
//! server, and what was acknowledged is there after the restart.

#[path = "broker_support.rs"]
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use support::{kcat, kcat_produce, python, run_with_timeout, Raw, Server};

const STREAM: &str = r#"
import json, sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": False, "acks": "all",
              "linger.ms": 2, "message.timeout.ms": 4000, "retries": 0})
def cb(err, msg):
    if err is None:
        print(json.dumps({"seq": int(msg.key()), "offset": msg.offset()}), flush=True)
for seq in range(200000):
    while True:
        try:
            p.produce("crash", json.dumps({"seq": seq}).encode(), key=str(seq).encode(), partition=0, on_delivery=cb)
            break
        except BufferError:
            p.poll(0.01)
    p.poll(0)
p.flush(10)
"#;

/// How the server is stopped mid-stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill,
    Terminate,
}

/// Streams acks=-1 rows into `fluss.crash`, stops the server after `acks` acknowledgements,
/// restarts it, and checks every acknowledged row is stored once, in order, and that producing
/// continues at the next offset.
fn stop_mid_stream_and_check(stop: Stop, acks: usize) {
    let mut server = Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.crash (seq BIGINT) WITH ('table.kafka.enabled' = 'true')");

    let mut producer = Command::new(python())
        .arg("-c")
        .arg(STREAM)
        .arg(server.bootstrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start producer");
    let stdout = producer.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<(i64, i64)>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(ack) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send((ack["seq"].as_i64().unwrap(), ack["offset"].as_i64().unwrap()));
            }
        }
    });
    let mut acked: Vec<(i64, i64)> = Vec::new();
    while acked.len() < acks {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(ack) => acked.push(ack),
            Err(_) => panic!("producer stalled after {} acks\n{}", acked.len(), server.logs()),
        }
    }
    match stop {
        Stop::Kill => server.kill(),
        Stop::Terminate => {
            let status = server.terminate().expect("kafluss exits after SIGTERM");
            assert!(
                status.success(),
                "SIGTERM under load exits 0, got {status:?}\n{}",
                server.logs()
            );
        }
    }
    // Acks that arrived before the stop still count.
    while let Ok(ack) = rx.recv_timeout(Duration::from_secs(6)) {
        acked.push(ack);
    }
    let _ = producer.kill();
    let _ = producer.wait();
    let _ = reader.join();

    let data_dir = server.data_dir.clone();
    let restarted = Server::start_in(&data_dir, 1, &[]);
    let rows = restarted.scan("fluss.crash");
    let stored: Vec<(i64, i64)> = rows
        .iter()
        .map(|r| (r["row"]["seq"].as_i64().unwrap(), r["offset"].as_i64().unwrap()))
        .collect();
    // Offsets contiguous from 0, sequence numbers strictly increasing (in order, no duplicate).
    for (index, (seq, offset)) in stored.iter().enumerate() {
        assert_eq!(*offset, index as i64, "offsets are contiguous");
        if index > 0 {
            assert!(
                *seq > stored[index - 1].0,
                "rows in order, each once: {:?}",
                &stored[index - 1..=index]
            );
        }
    }
    let by_offset: HashMap<i64, i64> = stored.iter().map(|(seq, offset)| (*offset, *seq)).collect();
    for (seq, offset) in &acked {
        assert_eq!(
            by_offset.get(offset),
            Some(seq),
            "acknowledged seq {seq} at offset {offset} must be stored there"
        );
    }
    assert!(acked.len() >= acks);

    // Producing continues at the next offset.
    let next = stored.len() as i64;
    let (ok, _, err) = kcat_produce(&restarted, "crash", 0, &[r#"{"seq": 999999999}"#], &[]);
    assert!(ok, "{err}");
    let rows = restarted.scan("fluss.crash");
    assert_eq!(rows.len() as i64, next + 1);
    assert_eq!(rows[next as usize]["offset"].as_i64(), Some(next));
    assert_eq!(rows[next as usize]["row"]["seq"].as_i64(), Some(999_999_999));
}

#[test]
fn acknowledged_rows_survive_sigkill_exactly_once_in_order() {
    stop_mid_stream_and_check(Stop::Kill, 3000);
}

#[test]
fn sigterm_under_load_exits_zero_and_keeps_acknowledged_rows() {
    stop_mid_stream_and_check(Stop::Terminate, 1000);
}

/// A panic on a core (a bug; debug builds panic on request for this test) aborts the process
/// at once: the core's idle connection is closed instead of left open unserved, the panic is
/// logged, and the rows acknowledged before it (acks=1) are there after a restart.
#[test]
fn a_panicking_core_aborts_the_server_and_loses_no_acknowledged_row() {
    let mut server = Server::start_with(2, &[], |config| {
        config.with_env("KAFLUSS_DEBUG_PANIC_CLIENT_ID", "panic-now")
    });
    server.sql_ok("CREATE TABLE fluss.survive (seq BIGINT) WITH ('table.kafka.enabled' = 'true')");
    let lines = [r#"{"seq": 1}"#, r#"{"seq": 2}"#, r#"{"seq": 3}"#];
    let (ok, _, err) = kcat_produce(&server, "survive", 0, &lines, &["-X", "acks=1"]);
    assert!(ok, "{err}");
    // Idle connections, so that whichever core panics has one.
    let mut idle: Vec<Raw> = (0..4).map(|_| Raw::connect(server.kafka)).collect();

    let mut metadata = std::process::Command::new(kcat());
    metadata.args([
        "-L",
        "-b",
        &server.bootstrap(),
        "-X",
        "client.id=panic-now",
        "-m",
        "5",
    ]);
    let _ = run_with_timeout(&mut metadata, b"", Duration::from_secs(20));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while server.is_running() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server still runs 20 s after a core panicked\n{}",
            server.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = server.terminate().expect("the exit status");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(6), "aborted (SIGABRT): {status:?}");
    let logs = server.logs();
    assert!(
        logs.contains("a core panicked") && logs.contains("KAFLUSS_DEBUG_PANIC_CLIENT_ID"),
        "{logs}"
    );
    for connection in &mut idle {
        assert!(connection.is_closed(), "a connection stayed open after the abort");
    }

    let restarted = Server::start_in(&server.data_dir, 2, &[]);
    let seqs: Vec<i64> = restarted
        .scan("fluss.survive")
        .iter()
        .map(|row| row["row"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
}
