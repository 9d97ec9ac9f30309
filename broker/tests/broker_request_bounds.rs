//! What one request may cost the server, against the real binary: requests other than Produce
//! are bounded in bytes (`kafka.max-other-request-size`), a Produce request in topics and
//! partitions (`kafka.max-request-partitions`), a Metadata request names each topic once in its
//! answer, one response carries at most 64 KiB of error messages, and a client that stops
//! reading its answers is closed after `kafka.connection.max-idle-time`.

#[path = "broker_support.rs"]
mod support;

use std::io::{Read, Write};
use std::time::Duration;

use kafluss_protocol::{
    DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse, ErrorCode, Message, MetadataRequest,
    MetadataRequestTopic, MetadataResponse, ProducePartitionData, ProduceRequest, ProduceResponse,
    ProduceTopicData, RecordBatchBuilder, Uuid,
};
use support::{Raw, Server};

fn metadata_request(names: &[String]) -> MetadataRequest {
    MetadataRequest {
        topics: Some(
            names
                .iter()
                .map(|name| MetadataRequestTopic {
                    topic_id: Uuid::ZERO,
                    name: Some(name.clone()),
                })
                .collect(),
        ),
        allow_auto_topic_creation: false,
        include_cluster_authorized_operations: false,
        include_topic_authorized_operations: false,
        unknown_tagged_fields: Vec::new(),
    }
}

fn delete_topics(names: impl Iterator<Item = String>) -> DeleteTopicsRequest {
    DeleteTopicsRequest {
        topics: names
            .map(|name| DeleteTopicState {
                name: Some(name),
                topic_id: Uuid::ZERO,
            })
            .collect(),
        timeout_ms: 1000,
    }
}

/// A Produce request naming `partitions` partitions of `topic`, each with `records`.
fn produce_to(topic: &str, partitions: i32, records: &bytes::Bytes) -> ProduceRequest {
    ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 5000,
        topics: vec![ProduceTopicData {
            name: topic.to_string(),
            topic_id: kafluss_protocol::Uuid::ZERO,
            partitions: (0..partitions)
                .map(|index| ProducePartitionData {
                    index,
                    records: Some(records.clone()),
                })
                .collect(),
        }],
        unknown_tagged_fields: Vec::new(),
    }
}

fn one_record() -> bytes::Bytes {
    let mut builder = RecordBatchBuilder::new(kafluss_protocol::Compression::None);
    builder.append(1_700_000_000_000, None, Some(br#"{"n": 1}"#.as_slice()), &[]);
    builder.build().unwrap()
}

#[test]
fn a_request_other_than_produce_over_its_bound_closes_and_produce_is_not_held_to_it() {
    // Both closes below are logged whole: the second comes more than a repeat interval after
    // the first (a close for the same kind of reason within it would only be counted).
    let server = Server::start(
        1,
        &[
            "kafka.max-other-request-size=2kb",
            "server.log-repeat-interval=10ms",
        ],
    );
    server.sql_ok("CREATE TABLE fluss.t (n INT, pad STRING) WITH ('table.kafka.enabled' = 'true')");
    let names: Vec<String> = (0..100)
        .map(|i| format!("a-topic-name-of-some-length-{i:03}"))
        .collect();

    let mut small = Raw::connect(server.kafka);
    let correlation = small.send(9, &metadata_request(&names[..10]));
    let answer: MetadataResponse = small.recv(9, correlation);
    assert_eq!(answer.topics.len(), 10);

    let mut large = Raw::connect(server.kafka);
    large.send(9, &metadata_request(&names));
    assert!(
        large.is_closed(),
        "a 3 KB Metadata request is over the 2 KB bound"
    );
    assert!(server.log_shows("kafka.max-other-request-size", Duration::from_secs(10)));

    std::thread::sleep(Duration::from_millis(50));
    // Refused from its first six bytes: a Metadata frame declaring 10 MB whose body never
    // comes is closed at once, not held (and its 10 MB reserved) until the idle time.
    let mut declared = Raw::connect(server.kafka);
    let mut head = (10_000_000i32).to_be_bytes().to_vec();
    head.extend_from_slice(&3i16.to_be_bytes());
    head.extend_from_slice(&9i16.to_be_bytes());
    declared.stream.write_all(&head).unwrap();
    assert!(
        declared.is_closed(),
        "a Metadata frame declared over the bound is refused before its body"
    );
    assert!(server.log_shows(
        "api key 3 request of 10000000 bytes is over kafka.max-other-request-size",
        Duration::from_secs(10)
    ));

    // A Produce request of 4 KB is bound by kafka.max-request-size only.
    let mut builder = RecordBatchBuilder::new(kafluss_protocol::Compression::None);
    let value = format!(r#"{{"n": 1, "pad": "{}"}}"#, "x".repeat(4000));
    builder.append(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
    let records = builder.build().unwrap();
    let mut producer = Raw::connect(server.kafka);
    let response: ProduceResponse = producer.produce(9, &produce_to("t", 1, &records));
    assert_eq!(response.topics[0].partitions[0].error_code, ErrorCode::None);
}

#[test]
fn a_produce_request_naming_more_partitions_than_its_bound_closes() {
    let server = Server::start(1, &["kafka.max-request-partitions=10"]);
    server.sql_ok("CREATE TABLE fluss.t (n INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '9')");
    let records = one_record();
    // One topic and nine partitions: ten entries, the bound.
    let mut at_bound = Raw::connect(server.kafka);
    let response = at_bound.produce(9, &produce_to("t", 9, &records));
    assert_eq!(response.topics[0].partitions.len(), 9);
    assert!(response.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == ErrorCode::None));

    let mut over = Raw::connect(server.kafka);
    over.send(9, &produce_to("t", 10, &records));
    assert!(over.is_closed(), "eleven entries are over the bound of ten");
    assert!(server.log_shows("more than 10 topics and partitions", Duration::from_secs(10)));
    assert_eq!(
        server.scan("fluss.t").len(),
        9,
        "the refused request stored nothing"
    );
}

#[test]
fn metadata_answers_each_named_topic_once() {
    let server = Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.t (n INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '4')");
    let mut names: Vec<String> = std::iter::repeat_n("t".to_string(), 50).collect();
    names.push("fluss.t".into());
    names.extend(std::iter::repeat_n("nope".to_string(), 3));
    names.push("t".into());
    let mut raw = Raw::connect(server.kafka);
    let correlation = raw.send(9, &metadata_request(&names));
    let answer: MetadataResponse = raw.recv(9, correlation);
    let listed: Vec<(Option<String>, usize, ErrorCode)> = answer
        .topics
        .iter()
        .map(|t| (t.name.clone(), t.partitions.len(), t.error_code))
        .collect();
    assert_eq!(
        listed,
        vec![
            (Some("t".into()), 4, ErrorCode::None),
            (Some("fluss.t".into()), 4, ErrorCode::None),
            (Some("nope".into()), 0, ErrorCode::UnknownTopicOrPartition),
        ]
    );
}

#[test]
fn one_answer_carries_at_most_64_kib_of_error_messages() {
    let server = Server::start(1, &[]);
    let mut raw = Raw::connect(server.kafka);
    let correlation = raw.send(5, &delete_topics((0..3000).map(|i| format!("t{i}"))));
    let answer: DeleteTopicsResponse = raw.recv(5, correlation);
    assert_eq!(answer.responses.len(), 3000);
    assert!(answer
        .responses
        .iter()
        .all(|r| r.error_code == ErrorCode::PolicyViolation));
    let with: Vec<usize> = answer
        .responses
        .iter()
        .map(|r| r.error_message.as_deref().map_or(0, str::len))
        .collect();
    let carried = with.iter().take_while(|&&n| n > 0).count();
    assert!(carried > 100, "the first topics carry the message: {carried}");
    assert!(
        with[carried..].iter().all(|&n| n == 0),
        "none after the budget ran out"
    );
    let total: usize = with.iter().sum();
    assert!(
        total <= 64 << 10 && total + with[0] > 64 << 10,
        "{total} bytes of messages"
    );

    // Produce: each refused partition's message, within the same budget.
    let records = one_record();
    let mut producer = Raw::connect(server.kafka);
    let response = producer.produce(9, &produce_to("no_such_table", 3000, &records));
    let partitions = &response.topics[0].partitions;
    assert_eq!(partitions.len(), 3000);
    assert!(partitions
        .iter()
        .all(|p| p.error_code == ErrorCode::UnknownTopicOrPartition));
    assert!(partitions[0].error_message.is_some());
    assert!(partitions[2999].error_message.is_none());
    let total: usize = partitions
        .iter()
        .map(|p| p.error_message.as_deref().map_or(0, str::len))
        .sum();
    assert!(total <= 64 << 10, "{total} bytes of messages");
}

#[test]
fn a_client_that_reads_no_answers_is_closed_after_the_idle_time() {
    let server = Server::start(1, &["kafka.connection.max-idle-time=1s"]);
    // Answers of about 200 KB each (names echoed back) into a socket nobody reads.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.kafka.into()).unwrap();
    let mut stuck: std::net::TcpStream = socket.into();
    stuck.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let request = {
        let header = kafluss_protocol::RequestHeader::new(
            kafluss_protocol::ApiKey::DELETE_TOPICS,
            5,
            1,
            Some("stuck"),
        );
        let mut buf = bytes::BytesMut::new();
        let names = (0..4000).map(|i| format!("{}{i}", "n".repeat(40)));
        kafluss_protocol::encode_request_frame(&mut buf, &header, &delete_topics(names)).unwrap();
        buf.freeze()
    };
    let writer = std::thread::spawn(move || {
        // Until the server stops reading (its in-flight window full behind the stuck answers)
        // or closes the connection.
        for _ in 0..200 {
            if stuck.write_all(&request).is_err() {
                break;
            }
        }
        stuck
    });
    assert!(
        server.log_shows(
            "its answers were not read within kafka.connection.max-idle-time",
            Duration::from_secs(30)
        ),
        "{}",
        server.logs()
    );
    drop(writer.join().unwrap());
    // The core serves others meanwhile and after.
    let mut other = Raw::connect(server.kafka);
    let correlation = other.send(9, &metadata_request(&["t".to_string()]));
    let answer: MetadataResponse = other.recv(9, correlation);
    assert_eq!(answer.topics.len(), 1);
}

/// A client that sends its requests a byte at a time: each read takes only what decides the
/// frame's reservation (its size prefix, then its API key), then the frame; every request is
/// answered, Metadata and Produce alike.
#[test]
fn requests_sent_a_byte_at_a_time_are_answered() {
    let server = Server::start(1, &[]);
    server.sql_ok("CREATE TABLE fluss.t (n INT, pad STRING) WITH ('table.kafka.enabled' = 'true')");
    let mut raw = Raw::connect(server.kafka);
    raw.stream.set_nodelay(true).unwrap();
    let mut trickle = |frame: &[u8]| {
        for byte in frame {
            raw.stream.write_all(std::slice::from_ref(byte)).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    let mut frame = bytes::BytesMut::new();
    let header = kafluss_protocol::RequestHeader::new(MetadataRequest::API_KEY, 9, 1, Some("slow"));
    kafluss_protocol::encode_request_frame(&mut frame, &header, &metadata_request(&["t".to_string()]))
        .unwrap();
    trickle(&frame);
    let mut records = RecordBatchBuilder::new(kafluss_protocol::Compression::None);
    records.append(1_700_000_000_000, None, Some(br#"{"n": 1, "pad": "x"}"#), &[]);
    let mut produce = bytes::BytesMut::new();
    let header = kafluss_protocol::RequestHeader::new(ProduceRequest::API_KEY, 9, 2, Some("slow"));
    kafluss_protocol::encode_request_frame(
        &mut produce,
        &header,
        &produce_to("t", 1, &records.build().unwrap()),
    )
    .unwrap();
    trickle(&produce);
    let answer: MetadataResponse = raw.recv(9, 1);
    assert_eq!(answer.topics.len(), 1);
    let answer: ProduceResponse = raw.recv(9, 2);
    assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
    assert_eq!(server.scan("fluss.t").len(), 1);
}

/// The peak resident memory of `pid` so far (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

/// A client that pipelines Produce requests naming many partitions and reads none of their
/// answers: each request counts 512 bytes per topic and partition against
/// `kafka.max-answer-memory` (here 1 MiB, less than one request needs: one request at a time)
/// until its answer is written, so the server stops taking its requests once one answer waits
/// in the socket. Before, every request of the in-flight window was decoded and routed, and each
/// held about 330 bytes per partition until its answer was written (1 GiB per connection
/// pipelining 40 requests of 100,000 partitions). Once the client reads, every request is
/// answered and stored.
#[test]
fn a_client_that_reads_no_answers_holds_no_more_than_the_answer_memory() {
    let server = Server::start(1, &["kafka.max-answer-memory=1mb"]);
    server.sql_ok("CREATE TABLE fluss.t (n INT) WITH ('table.kafka.enabled' = 'true')");
    let record = one_record();
    // One stored row and 50,000 refused partitions (an unknown topic): about 1.7 MB of answer,
    // of which the kernel's socket buffers take a few before the server's write waits.
    let mut request = produce_to("t", 1, &record);
    request.topics.push(ProduceTopicData {
        name: "no_such_table".to_string(),
        topic_id: kafluss_protocol::Uuid::ZERO,
        partitions: (0..50_000)
            .map(|index| ProducePartitionData {
                index,
                records: Some(record.clone()),
            })
            .collect(),
    });
    const REQUESTS: usize = 30;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.kafka.into()).unwrap();
    let stream: std::net::TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut raw = Raw {
        stream: stream.try_clone().unwrap(),
        correlation: 0,
    };
    let frames: Vec<bytes::Bytes> = (1..=REQUESTS as i32)
        .map(|correlation| {
            let header = kafluss_protocol::RequestHeader::new(
                kafluss_protocol::ApiKey::PRODUCE,
                9,
                correlation,
                Some("stuck"),
            );
            let mut buf = bytes::BytesMut::new();
            kafluss_protocol::encode_request_frame(&mut buf, &header, &request).unwrap();
            buf.freeze()
        })
        .collect();
    let writer = std::thread::spawn(move || {
        let mut stream = stream;
        for frame in frames {
            stream
                .write_all(&frame)
                .expect("the server reads on once answers are read");
        }
    });
    // Rows stop arriving while nothing is read.
    let mut stored = 0;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(500));
        let now = server.scan("fluss.t").len();
        if now == stored && now > 0 {
            break;
        }
        stored = now;
    }
    assert!(
        (1..=REQUESTS / 3).contains(&stored),
        "{stored} of {REQUESTS} requests were taken while their answers were not read"
    );
    // Reading the answers lets the rest through, in order, each stored.
    for correlation in 1..=REQUESTS as i32 {
        let answer: ProduceResponse = raw.recv(9, correlation);
        assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
        assert_eq!(answer.topics[1].partitions.len(), 50_000);
    }
    writer.join().unwrap();
    assert_eq!(server.scan("fluss.t").len(), REQUESTS);
}

/// One small Produce request whose partitions each carry a zstd batch that decompresses to
/// 8 MiB: the records decompressed for the partitions being appended count against
/// `kafka.max-append-memory` (here 8 MiB) until they are stored, so the partitions are
/// appended one after the other and the server's peak memory grows by a few of them, not by
/// all 16 (before: every partition decompressed and converted at once, about 256 MiB here;
/// 3 GB for a 215 KB request of 48 partitions of 100 MiB).
#[test]
fn decompressed_records_count_against_the_append_memory() {
    let server = Server::start(1, &["kafka.max-append-memory=8mb", "server.stall-threshold=0"]);
    server.sql_ok(
        "CREATE TABLE fluss.b (_kafka_value BYTES) WITH ('table.kafka.enabled' = 'true', \
         'table.kafka.convert.value.type' = 'binary', 'bucket.num' = '16', \
         'table.log.arrow.compression.type' = 'NONE')",
    );
    let batch = {
        let mut builder = RecordBatchBuilder::new(kafluss_protocol::Compression::Zstd);
        let value = vec![b'x'; 1 << 20];
        for _ in 0..8 {
            builder.append(1_700_000_000_000, None, Some(value.as_slice()), &[]);
        }
        builder.build().unwrap()
    };
    assert!(batch.len() < 64 << 10, "{} bytes", batch.len());
    let mut raw = Raw::connect(server.kafka);
    // One partition first: what any append costs once (buffers, the first segment).
    let answer = raw.produce(9, &produce_to("b", 1, &batch));
    assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
    let before = peak_rss(server.pid());
    let answer = raw.produce(9, &produce_to("b", 16, &batch));
    for partition in &answer.topics[0].partitions {
        assert_eq!(partition.error_code, ErrorCode::None, "{partition:?}");
        let after_first = if partition.index == 0 { 8 } else { 0 };
        assert_eq!(partition.base_offset, after_first, "{partition:?}");
    }
    let grew = peak_rss(server.pid()).saturating_sub(before);
    assert!(
        grew < 80 << 20,
        "peak memory grew by {} MiB for 16 partitions of 8 MiB",
        grew >> 20
    );
}

/// Empty headers are two bytes of a batch each and 40 bytes of the index the server builds of
/// a partition's records: a small zstd batch of 400,000 of them (under `kafka.max-record-size`
/// and the decompression bound) is refused MESSAGE_TOO_LARGE, as its index would pass
/// `kafka.max-request-size`, and nothing is stored (before: 52 million of them in a 3 KB request
/// held a core for a minute and 2.7 GB of memory, and were stored).
#[test]
fn a_batch_of_empty_headers_is_refused_by_its_index() {
    let server = Server::start(1, &["kafka.max-request-size=1mb"]);
    server.sql_ok(
        "CREATE TABLE fluss.h (_kafka_value BYTES) WITH ('table.kafka.enabled' = 'true', \
         'table.kafka.convert.value.type' = 'binary')",
    );
    let bomb = {
        let empty: Vec<(&[u8], Option<&[u8]>)> = vec![(b"", Some(b"")); 400_000];
        let mut builder = RecordBatchBuilder::new(kafluss_protocol::Compression::Zstd);
        builder.append(1_700_000_000_000, None, Some(b"x".as_slice()), &empty);
        builder.build().unwrap()
    };
    assert!(bomb.len() < 16 << 10, "{} bytes", bomb.len());
    let mut raw = Raw::connect(server.kafka);
    let answer = raw.produce(9, &produce_to("h", 1, &bomb));
    let partition = &answer.topics[0].partitions[0];
    assert_eq!(partition.error_code, ErrorCode::MessageTooLarge, "{partition:?}");
    let message = partition.error_message.as_deref().unwrap_or_default();
    assert!(message.contains("of index"), "{message}");
    // Nothing was stored: the next record is the table's first.
    let answer = raw.produce(9, &produce_to("h", 1, &one_record()));
    let partition = &answer.topics[0].partitions[0];
    assert_eq!(
        (partition.error_code, partition.base_offset),
        (ErrorCode::None, 0),
        "{partition:?}"
    );
}

/// A partition whose records decompress past 1 MiB is decoded on the core's blocking thread,
/// not on the core: a 90 MB zstd batch (100 values of 900 KB of zeros, a few KB on the wire) is
/// stored whole, and no stall warning names its decoding (before, decompressing and indexing it
/// held the core for as long as that took: 260 ms for 72 MB in a debug build).
#[test]
fn a_large_batch_is_decoded_off_the_core() {
    let server = Server::start(1, &["server.stall-threshold=120ms"]);
    server.sql_ok(
        "CREATE TABLE fluss.z (_kafka_value BYTES) WITH ('table.kafka.enabled' = 'true', \
         'table.kafka.convert.value.type' = 'binary')",
    );
    let batch = {
        let mut builder = RecordBatchBuilder::new(kafluss_protocol::Compression::Zstd);
        let value = vec![0u8; 900_000];
        for _ in 0..100 {
            builder.append(1_700_000_000_000, None, Some(value.as_slice()), &[]);
        }
        builder.build().unwrap()
    };
    assert!(batch.len() < 64 << 10, "{} bytes", batch.len());
    let mut raw = Raw::connect(server.kafka);
    let answer = raw.produce(9, &produce_to("z", 1, &batch));
    let partition = &answer.topics[0].partitions[0];
    assert_eq!(
        (partition.error_code, partition.base_offset),
        (ErrorCode::None, 0),
        "{partition:?}"
    );
    let answer = raw.produce(9, &produce_to("z", 1, &one_record()));
    assert_eq!(
        answer.topics[0].partitions[0].base_offset, 100,
        "all 100 records were stored"
    );
    let logs = server.logs();
    assert!(
        !logs.lines().any(|line| line.contains("by decoding")),
        "the decoding held the core:\n{}",
        logs.lines()
            .filter(|l| l.contains("held"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Clients that pipeline small requests with large answers (Metadata of a 1,024-bucket table:
/// 45 bytes asked, about 27 KB answered) and read none: an answer counts against
/// `kafka.max-answer-memory` (here 4 MiB) from its making until it is written, so a core holds
/// about that much of them, plus the one answer each waiting connection has made. Before, 100
/// such connections held the answers of their whole in-flight window (32 each).
#[test]
fn unread_answers_of_small_requests_count_against_the_answer_memory() {
    let server = Server::start(1, &["kafka.max-answer-memory=4mb", "server.stall-threshold=0"]);
    server.sql_ok(
        "CREATE TABLE fluss.wide (n INT) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '1024')",
    );
    let request = {
        let header =
            kafluss_protocol::RequestHeader::new(kafluss_protocol::ApiKey::METADATA, 9, 1, Some("stuck"));
        let mut buf = bytes::BytesMut::new();
        kafluss_protocol::encode_request_frame(&mut buf, &header, &metadata_request(&["wide".to_string()]))
            .unwrap();
        buf.freeze()
    };
    let mut probe = Raw::connect(server.kafka);
    let correlation = probe.send(9, &metadata_request(&["wide".to_string()]));
    let answer: MetadataResponse = probe.recv(9, correlation);
    assert_eq!(answer.topics[0].partitions.len(), 1024);
    let before = peak_rss(server.pid());
    let mut stuck = Vec::new();
    for _ in 0..100 {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&server.kafka.into()).unwrap();
        let mut stream: std::net::TcpStream = socket.into();
        stream.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..32 {
            stream.write_all(&request).unwrap();
        }
        stuck.push(stream);
    }
    std::thread::sleep(Duration::from_secs(2));
    let grew = peak_rss(server.pid()).saturating_sub(before);
    assert!(
        grew < 40 << 20,
        "peak memory grew by {} MiB for 100 connections not reading 32 answers of 27 KB",
        grew >> 20
    );
    drop(stuck);
}

/// A connection to `server` from the loopback address `source` (127.0.0.2: another client).
fn connect_from(server: std::net::SocketAddr, source: [u8; 4]) -> std::net::TcpStream {
    let stream = support::connect_from(server, source);
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    stream
}

/// Reads one answer's frame (None: nothing within the stream's read timeout, or closed).
fn read_answer(stream: &mut std::net::TcpStream) -> Option<bytes::Bytes> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(body.into())
}

/// An ApiVersions v0 request frame.
const API_VERSIONS_V0: [u8; 18] = [0, 0, 0, 14, 0, 18, 0, 0, 0, 0, 0, 9, 0, 4, b't', b'e', b's', b't'];

/// Connections that each send a Produce frame's size prefix (1 MiB, `kafka.max-request-size`)
/// and API key and nothing more: a frame's bytes count against its client address's allowance
/// (`kafka.max-request-memory-per-address`, one largest request by default) before the core's
/// `kafka.max-request-memory` (4 MiB), so six of them from 127.0.0.1 hold one frame's worth of
/// the core, and a client of another address (127.0.0.2) is answered at once. Before, three
/// held the core's whole budget, and every other connection's next request (ApiVersions
/// included) waited behind them for `kafka.connection.max-idle-time` (10 minutes).
#[test]
fn partial_frames_of_one_address_do_not_stop_other_clients() {
    let server = Server::start(1, &["kafka.max-request-size=1mb", "kafka.max-request-memory=4mb"]);
    let mut prefix = ((1i32 << 20).to_be_bytes()).to_vec();
    prefix.extend_from_slice(&ProduceRequest::API_KEY.0.to_be_bytes());
    let stuck: Vec<std::net::TcpStream> = (0..6)
        .map(|_| {
            let mut stream = connect_from(server.kafka, [127, 0, 0, 1]);
            stream.write_all(&prefix).unwrap();
            stream
        })
        .collect();
    // Time for the server to read the six bytes of each (and reserve what it reserves).
    std::thread::sleep(Duration::from_secs(2));
    let mut other = connect_from(server.kafka, [127, 0, 0, 2]);
    other.write_all(&API_VERSIONS_V0).unwrap();
    assert!(
        read_answer(&mut other).is_some(),
        "a client of another address is answered while one address's partial frames wait"
    );
    drop(stuck);
}

/// Two connections of one address (127.0.0.1), each sending a Produce request of about 700 KB:
/// the second frame waits for its address's allowance (one 1 MiB request: not both) while the
/// first holds it, though the core's `kafka.max-request-memory` (4 MiB) has room for both, and
/// is answered once the first is complete and answered. Before, the second was answered at once.
#[test]
fn a_frame_waits_for_its_address_earlier_frame() {
    let server = Server::start(1, &["kafka.max-request-size=1mb", "kafka.max-request-memory=4mb"]);
    server.sql_ok("CREATE TABLE fluss.t (n INT, pad STRING) WITH ('table.kafka.enabled' = 'true')");
    let request = |correlation: i32| {
        let value = format!(r#"{{"n": {correlation}, "pad": "{}"}}"#, "x".repeat(700_000));
        let mut records = RecordBatchBuilder::new(kafluss_protocol::Compression::None);
        records.append(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
        let header =
            kafluss_protocol::RequestHeader::new(ProduceRequest::API_KEY, 9, correlation, Some("same"));
        let mut frame = bytes::BytesMut::new();
        kafluss_protocol::encode_request_frame(
            &mut frame,
            &header,
            &produce_to("t", 1, &records.build().unwrap()),
        )
        .unwrap();
        frame.freeze()
    };
    let (first_frame, second_frame) = (request(1), request(2));
    let mut first = connect_from(server.kafka, [127, 0, 0, 1]);
    first.write_all(&first_frame[..6]).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let second = connect_from(server.kafka, [127, 0, 0, 1]);
    // Written from a thread: the server reads none of it while the frame waits.
    let sender = std::thread::spawn({
        let mut second = second.try_clone().unwrap();
        move || second.write_all(&second_frame).unwrap()
    });
    let mut second = second;
    second.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert!(
        read_answer(&mut second).is_none(),
        "the second frame of the address waits while the first holds the address's allowance"
    );
    first.write_all(&first_frame[6..]).unwrap();
    let answer = read_answer(&mut first).expect("the first frame is answered");
    let (_, answer) = kafluss_protocol::decode_response_frame::<ProduceResponse>(&answer, 9).unwrap();
    assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
    second.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let answer = read_answer(&mut second).expect("the second frame is answered after the first");
    let (header, answer) = kafluss_protocol::decode_response_frame::<ProduceResponse>(&answer, 9).unwrap();
    assert_eq!(header.correlation_id, 2);
    assert_eq!(answer.topics[0].partitions[0].error_code, ErrorCode::None);
    sender.join().unwrap();
    assert_eq!(server.scan("fluss.t").len(), 2);
}
