//! Sample messages for every API and version, with each field that exists at that version set
//! to a non-default value and each field that does not at the value decoding yields.
#![allow(dead_code)]

use bytes::Bytes;
use kafluss_protocol::*;

pub fn id(seed: u8) -> Uuid {
    Uuid([seed; 16])
}

pub fn api_versions_request(version: i16) -> ApiVersionsRequest {
    if version < 3 {
        return ApiVersionsRequest::default();
    }
    ApiVersionsRequest {
        client_software_name: "apache-kafka-java".into(),
        client_software_version: "3.9.0".into(),
        unknown_tagged_fields: vec![RawTaggedField {
            tag: 7,
            data: Bytes::from_static(b"xy"),
        }],
    }
}

pub fn api_versions_response(version: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::new(
        ErrorCode::None,
        vec![
            ApiVersionRange {
                api_key: ApiKey::PRODUCE,
                min_version: 3,
                max_version: 11,
            },
            ApiVersionRange {
                api_key: ApiKey::METADATA,
                min_version: 0,
                max_version: 12,
            },
        ],
    );
    if version >= 1 {
        response.throttle_time_ms = 17;
    }
    if version >= 3 {
        response.supported_features = vec![SupportedFeature {
            name: "metadata.version".into(),
            min_version: 1,
            max_version: 20,
        }];
        response.finalized_features_epoch = 42;
        response.finalized_features = vec![FinalizedFeature {
            name: "metadata.version".into(),
            max_version_level: 20,
            min_version_level: 1,
        }];
        response.zk_migration_ready = true;
    }
    response
}

pub fn metadata_request(version: i16) -> MetadataRequest {
    let topics = vec![
        MetadataRequestTopic {
            topic_id: if version >= 10 { id(3) } else { Uuid::ZERO },
            name: Some("sales.orders".into()),
        },
        MetadataRequestTopic {
            topic_id: Uuid::ZERO,
            name: Some("events".into()),
        },
    ];
    MetadataRequest {
        topics: Some(topics),
        allow_auto_topic_creation: version < 4 || version % 2 == 0,
        include_cluster_authorized_operations: (8..=10).contains(&version),
        include_topic_authorized_operations: version >= 8,
        unknown_tagged_fields: Vec::new(),
    }
}

pub fn metadata_response(version: i16) -> MetadataResponse {
    let partition = |index: i32| MetadataPartition {
        error_code: ErrorCode::None,
        partition_index: index,
        leader_id: 1,
        leader_epoch: if version >= 7 { 5 } else { -1 },
        replica_nodes: vec![1],
        isr_nodes: vec![1],
        offline_replicas: if version >= 5 { vec![2] } else { Vec::new() },
    };
    MetadataResponse {
        throttle_time_ms: if version >= 3 { 9 } else { 0 },
        brokers: vec![MetadataBroker {
            node_id: 1,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: if version >= 1 { Some("rack-a".into()) } else { None },
        }],
        cluster_id: if version >= 2 {
            Some("kafluss-cluster".into())
        } else {
            None
        },
        controller_id: if version >= 1 { 1 } else { -1 },
        topics: vec![
            MetadataTopic {
                error_code: ErrorCode::None,
                name: Some("sales.orders".into()),
                topic_id: if version >= 10 { id(7) } else { Uuid::ZERO },
                is_internal: false,
                partitions: vec![partition(0), partition(1)],
                topic_authorized_operations: if version >= 8 {
                    0x0f8
                } else {
                    AUTHORIZED_OPERATIONS_OMITTED
                },
            },
            MetadataTopic {
                error_code: ErrorCode::UnknownTopicOrPartition,
                name: Some("missing".into()),
                topic_id: Uuid::ZERO,
                is_internal: false,
                partitions: Vec::new(),
                topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            },
        ],
        cluster_authorized_operations: if (8..=10).contains(&version) {
            0x10
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        },
        error_code: if version >= 13 {
            ErrorCode::UnsupportedVersion
        } else {
            ErrorCode::None
        },
    }
}

pub fn sasl_handshake_request(_version: i16) -> SaslHandshakeRequest {
    SaslHandshakeRequest {
        mechanism: "PLAIN".into(),
    }
}

pub fn sasl_handshake_response(_version: i16) -> SaslHandshakeResponse {
    SaslHandshakeResponse {
        error_code: ErrorCode::UnsupportedSaslMechanism,
        mechanisms: vec!["PLAIN".into()],
    }
}

pub fn sasl_authenticate_request(_version: i16) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest {
        auth_bytes: Bytes::from_static(b"\0writer\0change-me"),
    }
}

pub fn sasl_authenticate_response(version: i16) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse {
        error_code: ErrorCode::SaslAuthenticationFailed,
        error_message: Some("Authentication failed: invalid username or password".into()),
        auth_bytes: Bytes::new(),
        session_lifetime_ms: if version >= 1 { 3_600_000 } else { 0 },
    }
}

pub fn init_producer_id_request(version: i16) -> InitProducerIdRequest {
    InitProducerIdRequest {
        transactional_id: (version % 2 == 1).then(|| "orders-tx".to_string()),
        transaction_timeout_ms: 60_000,
        producer_id: if version >= 3 { 4_000 } else { -1 },
        producer_epoch: if version >= 3 { 2 } else { -1 },
        enable_2pc: version >= 6,
        keep_prepared_txn: false,
    }
}

pub fn init_producer_id_response(version: i16) -> InitProducerIdResponse {
    InitProducerIdResponse {
        throttle_time_ms: version.into(),
        error_code: if version == 4 {
            ErrorCode::InvalidProducerEpoch
        } else {
            ErrorCode::None
        },
        producer_id: 4_000 + i64::from(version),
        producer_epoch: 3,
        ongoing_txn_producer_id: if version >= 6 { 17 } else { -1 },
        ongoing_txn_producer_epoch: if version >= 6 { 2 } else { -1 },
    }
}

/// A small valid record batch.
pub fn batch(compression: Compression, values: &[&str]) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    for (index, value) in values.iter().enumerate() {
        builder.append(
            1_700_000_000_000 + index as i64,
            Some(format!("k{index}").as_bytes()),
            Some(value.as_bytes()),
            &[(b"h".as_slice(), Some(b"v".as_slice()))],
        );
    }
    builder.build().unwrap()
}

/// A topic's name and id in a Produce body of `version`: named until v12, by id from v13.
fn produce_topic(version: i16, name: &str, seed: u8) -> (String, Uuid) {
    if version >= 13 {
        (String::new(), id(seed))
    } else {
        (name.to_owned(), Uuid::ZERO)
    }
}

pub fn produce_request(version: i16) -> ProduceRequest {
    let (orders, orders_id) = produce_topic(version, "sales.orders", 7);
    let (events, events_id) = produce_topic(version, "events", 8);
    ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![
            ProduceTopicData {
                name: orders,
                topic_id: orders_id,
                partitions: vec![
                    ProducePartitionData {
                        index: 0,
                        records: Some(batch(Compression::None, &["{\"order_id\":1}"])),
                    },
                    ProducePartitionData {
                        index: 1,
                        records: None,
                    },
                ],
            },
            ProduceTopicData {
                name: events,
                topic_id: events_id,
                partitions: vec![ProducePartitionData {
                    index: 3,
                    records: Some(batch(Compression::Zstd, &["a", "b"])),
                }],
            },
        ],
        unknown_tagged_fields: if version >= 9 {
            vec![RawTaggedField {
                tag: 3,
                data: Bytes::from_static(&[1, 2, 3]),
            }]
        } else {
            Vec::new()
        },
    }
}

pub fn produce_response(version: i16) -> ProduceResponse {
    let mut ok = ProducePartitionResponse::success(0, 100, if version >= 5 { 10 } else { -1 });
    if version >= 2 {
        ok.log_append_time_ms = 1_700_000_000_123;
    }
    let mut failed = ProducePartitionResponse::error(1, ErrorCode::InvalidRecord, None);
    if version >= 8 {
        failed.record_errors = vec![BatchIndexAndErrorMessage {
            batch_index: 2,
            batch_index_error_message: Some("record 2: $.amount: not a decimal".into()),
        }];
        failed.error_message = Some("record 2 failed conversion".into());
    }
    if version >= 10 {
        ok.current_leader = Some(LeaderIdAndEpoch {
            leader_id: 1,
            leader_epoch: 4,
        });
    }
    let (name, topic_id) = produce_topic(version, "sales.orders", 7);
    ProduceResponse {
        topics: vec![ProduceTopicResponse {
            name,
            topic_id,
            partitions: vec![ok, failed],
        }],
        throttle_time_ms: if version >= 1 { 3 } else { 0 },
        node_endpoints: if version >= 10 {
            vec![NodeEndpoint {
                node_id: 1,
                host: "localhost".into(),
                port: 9092,
                rack: None,
            }]
        } else {
            Vec::new()
        },
    }
}

pub fn create_topics_request(version: i16) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "new.topic".into(),
            num_partitions: 3,
            replication_factor: 1,
            assignments: vec![(0, vec![1, 2])],
            configs: vec![("retention.ms".into(), Some("1000".into())), ("x".into(), None)],
        }],
        timeout_ms: 5000,
        validate_only: version >= 1,
    }
}

pub fn create_topics_response(version: i16) -> CreateTopicsResponse {
    let mut result = CreatableTopicResult::error(
        "new.topic",
        ErrorCode::PolicyViolation,
        if version >= 1 {
            Some("create tables through Fluss SQL")
        } else {
            None
        },
    );
    if version >= 5 {
        result.topic_config_error_code = ErrorCode::PolicyViolation.code();
        result.num_partitions = 3;
        result.replication_factor = 1;
    }
    if version >= 7 {
        result.topic_id = id(9);
    }
    CreateTopicsResponse {
        throttle_time_ms: if version >= 2 { 5 } else { 0 },
        topics: vec![result],
    }
}

pub fn delete_topics_request(version: i16) -> DeleteTopicsRequest {
    DeleteTopicsRequest {
        topics: vec![
            DeleteTopicState {
                name: Some("sales.orders".into()),
                topic_id: Uuid::ZERO,
            },
            DeleteTopicState {
                name: if version >= 6 { None } else { Some("other".into()) },
                topic_id: if version >= 6 { id(4) } else { Uuid::ZERO },
            },
        ],
        timeout_ms: 1000,
    }
}

pub fn delete_topics_response(version: i16) -> DeleteTopicsResponse {
    DeleteTopicsResponse {
        throttle_time_ms: if version >= 1 { 2 } else { 0 },
        responses: vec![DeletableTopicResult {
            name: Some("sales.orders".into()),
            topic_id: if version >= 6 { id(5) } else { Uuid::ZERO },
            error_code: ErrorCode::PolicyViolation,
            error_message: if version >= 5 {
                Some("drop tables through Fluss SQL".into())
            } else {
                None
            },
        }],
    }
}
