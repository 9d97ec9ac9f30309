//! The real-client suite: every client of the matrix against the real `kafluss` binary.
//!
//! One test per client and settings (idempotence off; idempotent, `*_idempotent`), each with its
//! own servers and database. A client that is not installed
//! fails the test when `KAFLUSS_REQUIRE_CLIENTS` is set (as `./test.sh` does); otherwise the test
//! says why it did not run. Results go to `target/kafluss-suite/<client>.json` for
//! `kafluss-suite-report` (summary line, compatibility matrix).

use kafluss_tests::clients::{clients_required, Client, Settings};
use kafluss_tests::suite::run_client;

fn check(client: Client) {
    check_with(client, Settings::IdempotenceOff);
}

fn check_idempotent(client: Client) {
    check_with(client, Settings::Idempotent);
}

fn check_with(client: Client, settings: Settings) {
    let report = match run_client(client, settings) {
        Ok(report) => report,
        Err(error) if !clients_required() => {
            eprintln!("{client:?} not run: {error} (set KAFLUSS_REQUIRE_CLIENTS=1 to make this a failure)");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    if let Err(error) = report.write() {
        eprintln!("could not write results: {error}");
    }
    println!("{}\n{}", report.summary_line(), report.describe());
    assert!(
        report.failed() == 0,
        "{}\n{}",
        report.summary_line(),
        report.describe()
    );
}

#[test]
fn kcat_with_debian_librdkafka() {
    check(Client::KcatDebian);
}

#[test]
fn kcat_with_wheel_librdkafka() {
    check(Client::KcatWheel);
}

#[test]
fn confluent_kafka() {
    check(Client::ConfluentKafka);
}

#[test]
fn kafka_python() {
    check(Client::KafkaPython);
}

#[test]
fn aiokafka() {
    check(Client::Aiokafka);
}

#[test]
fn kafkajs() {
    check(Client::Kafkajs);
}

#[test]
fn java_kafka_clients_3_9() {
    check(Client::Java39);
}

#[test]
fn java_kafka_clients_4() {
    check(Client::Java4);
}

#[test]
fn franz_go() {
    check(Client::FranzGo);
}

#[test]
fn sarama() {
    check(Client::Sarama);
}

#[test]
fn kcat_with_debian_librdkafka_idempotent() {
    check_idempotent(Client::KcatDebian);
}

#[test]
fn kcat_with_wheel_librdkafka_idempotent() {
    check_idempotent(Client::KcatWheel);
}

#[test]
fn confluent_kafka_idempotent() {
    check_idempotent(Client::ConfluentKafka);
}

#[test]
fn kafka_python_idempotent() {
    check_idempotent(Client::KafkaPython);
}

#[test]
fn aiokafka_idempotent() {
    check_idempotent(Client::Aiokafka);
}

#[test]
fn kafkajs_idempotent() {
    check_idempotent(Client::Kafkajs);
}

#[test]
fn java_kafka_clients_3_9_idempotent() {
    check_idempotent(Client::Java39);
}

#[test]
fn java_kafka_clients_4_idempotent() {
    check_idempotent(Client::Java4);
}

#[test]
fn franz_go_idempotent() {
    check_idempotent(Client::FranzGo);
}

#[test]
fn sarama_idempotent() {
    check_idempotent(Client::Sarama);
}
