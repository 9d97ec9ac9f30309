//! Idempotent producers end to end, with raw Kafka requests against the real binary:
//! InitProducerId, retried batches answered with their original offsets (no extra rows), the
//! sequence and epoch errors, and the same answers after SIGKILL and a restart on the data
//! dir (behaviour.md "Idempotent producers").

#[path = "broker_support.rs"]
mod support;

use std::time::Duration;

use bytes::Bytes;
use kafluss_protocol::{
    Compression, ErrorCode, InitProducerIdRequest, InitProducerIdResponse, RecordBatchBuilder,
};
use support::{http_as, produce_request, sasl_plain_login, Raw, Server};

fn init(
    raw: &mut Raw,
    version: i16,
    transactional_id: Option<&str>,
    current: (i64, i16),
) -> InitProducerIdResponse {
    let request = InitProducerIdRequest {
        transactional_id: transactional_id.map(str::to_string),
        transaction_timeout_ms: 60_000,
        producer_id: current.0,
        producer_epoch: current.1,
        enable_2pc: false,
        keep_prepared_txn: false,
    };
    let correlation = raw.send(version, &request);
    raw.recv(version, correlation)
}

fn batch(producer: (i64, i16), first_seq: i32, ids: &[i64]) -> Bytes {
    let mut builder =
        RecordBatchBuilder::new(Compression::Snappy).producer(producer.0, producer.1, first_seq);
    for id in ids {
        builder.append(0, None, Some(format!(r#"{{"id":{id}}}"#).as_bytes()), &[]);
    }
    builder.build().unwrap()
}

/// Produce v9, acks=-1: (error, base offset).
fn produce(raw: &mut Raw, partition: i32, records: Bytes) -> (ErrorCode, i64) {
    let response = raw.produce(9, &produce_request(-1, "idem", partition, records));
    let answer = &response.topics[0].partitions[0];
    (answer.error_code, answer.base_offset)
}

fn ids(server: &Server) -> Vec<(i64, i64)> {
    server
        .scan("fluss.idem")
        .iter()
        .map(|row| {
            (
                row["bucket"].as_i64().unwrap(),
                row["row"]["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn retries_are_stored_once_even_after_sigkill_and_a_restart() {
    let mut server = Server::start(2, &[]);
    server.sql_ok(
        "CREATE TABLE fluss.idem (id BIGINT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '2')",
    );
    let mut raw = Raw::connect(server.kafka);

    let first = init(&mut raw, 4, None, (-1, -1));
    assert_eq!(first.error_code, ErrorCode::None);
    assert_eq!(first.producer_epoch, 0);
    let other = init(&mut raw, 0, None, (-1, -1));
    assert_ne!(other.producer_id, first.producer_id, "ids are unique");
    // KIP-360: the same id with the next epoch.
    let bumped = init(&mut raw, 3, None, (other.producer_id, 0));
    assert_eq!(
        (bumped.producer_id, bumped.producer_epoch),
        (other.producer_id, 1)
    );
    // Transactions: refused with a code clients treat as fatal.
    let transactional = init(&mut raw, 4, Some("tx"), (-1, -1));
    assert_eq!(transactional.error_code, ErrorCode::InvalidTransactionTimeout);
    assert_eq!(transactional.producer_id, -1);

    let producer = (first.producer_id, 0);
    let a = batch(producer, 0, &[1, 2, 3]);
    let b = batch(producer, 3, &[4]);
    let c = batch(producer, 0, &[10, 11]);
    assert_eq!(produce(&mut raw, 0, a.clone()), (ErrorCode::None, 0));
    assert_eq!(produce(&mut raw, 0, b.clone()), (ErrorCode::None, 3));
    assert_eq!(produce(&mut raw, 1, c.clone()), (ErrorCode::None, 0));
    // Retries: the original offsets, no error, nothing stored again.
    assert_eq!(produce(&mut raw, 0, a.clone()), (ErrorCode::None, 0));
    assert_eq!(produce(&mut raw, 0, b.clone()), (ErrorCode::None, 3));
    assert_eq!(produce(&mut raw, 1, c.clone()), (ErrorCode::None, 0));
    // A gap, a new epoch not starting at 0, an epoch older than the bucket's.
    assert_eq!(
        produce(&mut raw, 0, batch(producer, 7, &[9])).0,
        ErrorCode::OutOfOrderSequenceNumber
    );
    assert_eq!(
        produce(&mut raw, 0, batch((producer.0, 1), 4, &[9])).0,
        ErrorCode::OutOfOrderSequenceNumber
    );
    let bumped_producer = (bumped.producer_id, 1);
    assert_eq!(
        produce(&mut raw, 1, batch(bumped_producer, 0, &[20])),
        (ErrorCode::None, 2)
    );
    assert_eq!(
        produce(&mut raw, 1, batch((bumped.producer_id, 0), 1, &[9])).0,
        ErrorCode::InvalidProducerEpoch
    );
    let stored = vec![(0, 1), (0, 2), (0, 3), (0, 4), (1, 10), (1, 11), (1, 20)];
    assert_eq!(ids(&server), stored);

    // SIGKILL: everything acknowledged with acks=-1 is durable, and so is what makes a retry
    // a duplicate.
    server.kill();
    let data_dir = server.data_dir.clone();
    let server = Server::start_in(&data_dir, 2, &[]);
    let mut raw = Raw::connect(server.kafka);
    assert_eq!(produce(&mut raw, 0, a), (ErrorCode::None, 0));
    assert_eq!(produce(&mut raw, 0, b), (ErrorCode::None, 3));
    assert_eq!(produce(&mut raw, 1, c), (ErrorCode::None, 0));
    assert_eq!(
        produce(&mut raw, 1, batch((bumped.producer_id, 0), 1, &[9])).0,
        ErrorCode::InvalidProducerEpoch,
        "the epoch is remembered too"
    );
    assert_eq!(ids(&server), stored);
    assert_eq!(
        produce(&mut raw, 0, batch(producer, 4, &[5])),
        (ErrorCode::None, 4)
    );
    // Ids handed out after the restart are new.
    let after = init(&mut raw, 4, None, (-1, -1));
    assert!(
        after.producer_id > first.producer_id.max(other.producer_id),
        "{} after {}, {}",
        after.producer_id,
        first.producer_id,
        other.producer_id
    );
}

#[test]
fn init_producer_id_needs_write_somewhere_and_authentication_first() {
    let server = Server::start(1, support::SASL_ACL_SERVER);
    let admin = Some(("admin", "admin-secret"));
    let sql = |statement: &str| {
        let (status, body) = http_as(server.fluss, "POST", "/v1/sql", statement.as_bytes(), admin);
        assert_eq!(status, 200, "{body}");
    };
    sql("CREATE TABLE fluss.idem (id BIGINT) WITH ('table.kafka.enabled' = 'true')");

    // Before SASL authentication: closed without an answer, as every other request.
    let mut raw = Raw::connect(server.kafka);
    raw.send(
        4,
        &InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
            enable_2pc: false,
            keep_prepared_txn: false,
        },
    );
    assert!(
        raw.is_closed(),
        "InitProducerId before authentication closes the connection"
    );

    let login = |user: &str, password: &str| -> Raw {
        let (stream, authenticated) = sasl_plain_login(server.kafka, user, password);
        assert!(authenticated, "{user} logs in");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Raw {
            stream,
            correlation: 0,
        }
    };
    let mut writer = login("writer", "change-me");
    let refused = init(&mut writer, 4, None, (-1, -1));
    assert_eq!(refused.error_code, ErrorCode::ClusterAuthorizationFailed);
    sql(
        "CALL sys.add_acl(resource => 'fluss.idem', permission => 'ALLOW', principal => 'User:writer', \
         operation => 'WRITE', host => '*')",
    );
    let granted = init(&mut writer, 4, None, (-1, -1));
    assert_eq!((granted.error_code, granted.producer_epoch), (ErrorCode::None, 0));
    let mut admin_raw = login("admin", "admin-secret");
    assert_eq!(
        init(&mut admin_raw, 4, None, (-1, -1)).error_code,
        ErrorCode::None
    );
}

/// One idempotent producer writing a bucket through both names of its table, as a client
/// treats two topics: each name's batches numbered from 0. Every batch is stored once, at its
/// own offset, and a retry through either name is answered with its own offset, also after a
/// SIGKILL and a restart (before: the second name's batch matched the first name's cached batch
/// and was answered with its offset, acknowledged, and never stored). Metadata gives the two
/// names two topic ids (the Java client stops its sender on one id for two names).
#[test]
fn a_table_written_through_both_its_names_stores_every_batch() {
    let mut server = Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.idem (id BIGINT) WITH ('table.kafka.enabled' = 'true')");
    let mut raw = Raw::connect(server.kafka);
    let producer = init(&mut raw, 4, None, (-1, -1));
    let producer = (producer.producer_id, producer.producer_epoch);
    let send = |raw: &mut Raw, topic: &str, first_seq: i32, ids: &[i64]| {
        let request = produce_request(-1, topic, 0, batch(producer, first_seq, ids));
        let answer = raw.produce(9, &request).topics[0].partitions[0].clone();
        (answer.error_code, answer.base_offset)
    };
    assert_eq!(send(&mut raw, "idem", 0, &[1, 2]), (ErrorCode::None, 0));
    assert_eq!(send(&mut raw, "fluss.idem", 0, &[3, 4]), (ErrorCode::None, 2));
    assert_eq!(send(&mut raw, "idem", 2, &[5]), (ErrorCode::None, 4));
    assert_eq!(send(&mut raw, "fluss.idem", 2, &[6]), (ErrorCode::None, 5));
    let stored: Vec<(i64, i64)> = (1..=6).map(|id| (0, id)).collect();
    assert_eq!(ids(&server), stored);
    assert_eq!(send(&mut raw, "fluss.idem", 0, &[3, 4]), (ErrorCode::None, 2));
    assert_eq!(send(&mut raw, "idem", 2, &[5]), (ErrorCode::None, 4));

    let correlation = raw.send(
        10,
        &kafluss_protocol::MetadataRequest {
            topics: Some(
                ["idem", "fluss.idem"]
                    .iter()
                    .map(|name| kafluss_protocol::MetadataRequestTopic {
                        topic_id: kafluss_protocol::Uuid::ZERO,
                        name: Some(name.to_string()),
                    })
                    .collect(),
            ),
            allow_auto_topic_creation: false,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
            unknown_tagged_fields: Vec::new(),
        },
    );
    let metadata: kafluss_protocol::MetadataResponse = raw.recv(10, correlation);
    assert_eq!(metadata.topics.len(), 2);
    assert_ne!(metadata.topics[0].topic_id, metadata.topics[1].topic_id);

    server.kill();
    let data_dir = server.data_dir.clone();
    let server = Server::start_in(&data_dir, 1, &[]);
    let mut raw = Raw::connect(server.kafka);
    assert_eq!(send(&mut raw, "idem", 0, &[1, 2]), (ErrorCode::None, 0));
    assert_eq!(send(&mut raw, "fluss.idem", 2, &[6]), (ErrorCode::None, 5));
    assert_eq!(send(&mut raw, "fluss.idem", 3, &[7]), (ErrorCode::None, 6));
    assert_eq!(send(&mut raw, "idem", 3, &[8]), (ErrorCode::None, 7));
    let stored: Vec<(i64, i64)> = (1..=8).map(|id| (0, id)).collect();
    assert_eq!(ids(&server), stored);
}
