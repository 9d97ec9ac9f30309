//! Differential tests against the `kafka-protocol` crate, both ways, for every API and every
//! version both crates support: ours encodes → theirs decodes the same fields; theirs encodes →
//! ours decodes the same value; and the bytes are identical.

mod common;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafluss_protocol::*;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn topic(value: &str) -> kp::TopicName {
    kp::TopicName(s(value))
}

fn uuid(value: Uuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(value.0)
}

fn tagged(fields: &[RawTaggedField]) -> std::collections::BTreeMap<i32, Bytes> {
    fields.iter().map(|f| (f.tag as i32, f.data.clone())).collect()
}

/// Checks one message at one version both ways.
fn check<O, T>(ours: &O, theirs: &T, version: i16)
where
    O: Message + PartialEq + std::fmt::Debug,
    T: Encodable + Decodable + PartialEq + std::fmt::Debug,
{
    let mut our_bytes = BytesMut::new();
    ours.encode(&mut our_bytes, version).unwrap();
    let mut their_bytes = BytesMut::new();
    theirs.encode(&mut their_bytes, version).unwrap();
    assert_eq!(
        our_bytes.to_vec(),
        their_bytes.to_vec(),
        "{} v{version}: encodings differ",
        O::API_KEY
    );
    let mut our_wire = our_bytes.freeze();
    let decoded_by_them = T::decode(&mut our_wire, version).unwrap();
    assert_eq!(
        &decoded_by_them,
        theirs,
        "{} v{version}: kafka-protocol read ours",
        O::API_KEY
    );
    let their_wire = their_bytes.freeze();
    let decoded_by_us = O::decode(&their_wire, version).unwrap();
    assert_eq!(
        &decoded_by_us,
        ours,
        "{} v{version}: we read kafka-protocol's",
        O::API_KEY
    );
}

#[test]
fn api_versions_matches_kafka_protocol() {
    for version in 0..=4 {
        let ours = common::api_versions_request(version);
        let theirs = kp::ApiVersionsRequest::default()
            .with_client_software_name(s(&ours.client_software_name))
            .with_client_software_version(s(&ours.client_software_version))
            .with_unknown_tagged_fields(tagged(&ours.unknown_tagged_fields));
        check(&ours, &theirs, version);

        let ours = common::api_versions_response(version);
        let theirs = kp::ApiVersionsResponse::default()
            .with_error_code(ours.error_code.code())
            .with_api_keys(
                ours.api_keys
                    .iter()
                    .map(|r| {
                        kp::api_versions_response::ApiVersion::default()
                            .with_api_key(r.api_key.0)
                            .with_min_version(r.min_version)
                            .with_max_version(r.max_version)
                    })
                    .collect(),
            )
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_supported_features(
                ours.supported_features
                    .iter()
                    .map(|f| {
                        kp::api_versions_response::SupportedFeatureKey::default()
                            .with_name(s(&f.name))
                            .with_min_version(f.min_version)
                            .with_max_version(f.max_version)
                    })
                    .collect(),
            )
            .with_finalized_features_epoch(ours.finalized_features_epoch)
            .with_finalized_features(
                ours.finalized_features
                    .iter()
                    .map(|f| {
                        kp::api_versions_response::FinalizedFeatureKey::default()
                            .with_name(s(&f.name))
                            .with_max_version_level(f.max_version_level)
                            .with_min_version_level(f.min_version_level)
                    })
                    .collect(),
            )
            .with_zk_migration_ready(ours.zk_migration_ready);
        check(&ours, &theirs, version);
    }
}

#[test]
fn metadata_matches_kafka_protocol() {
    for version in 0..=13 {
        let ours = common::metadata_request(version);
        let theirs = kp::MetadataRequest::default()
            .with_topics(ours.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| {
                        kp::metadata_request::MetadataRequestTopic::default()
                            .with_topic_id(uuid(t.topic_id))
                            .with_name(t.name.as_deref().map(topic))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(ours.allow_auto_topic_creation)
            .with_include_cluster_authorized_operations(ours.include_cluster_authorized_operations)
            .with_include_topic_authorized_operations(ours.include_topic_authorized_operations);
        check(&ours, &theirs, version);

        let ours = common::metadata_response(version);
        let theirs = kp::MetadataResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_brokers(
                ours.brokers
                    .iter()
                    .map(|b| {
                        kp::metadata_response::MetadataResponseBroker::default()
                            .with_node_id(kp::BrokerId(b.node_id))
                            .with_host(s(&b.host))
                            .with_port(b.port)
                            .with_rack(b.rack.as_deref().map(s))
                    })
                    .collect(),
            )
            .with_cluster_id(ours.cluster_id.as_deref().map(s))
            .with_controller_id(kp::BrokerId(ours.controller_id))
            .with_topics(
                ours.topics
                    .iter()
                    .map(|t| {
                        kp::metadata_response::MetadataResponseTopic::default()
                            .with_error_code(t.error_code.code())
                            .with_name(t.name.as_deref().map(topic))
                            .with_topic_id(uuid(t.topic_id))
                            .with_is_internal(t.is_internal)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        let ids = |v: &[i32]| v.iter().map(|id| kp::BrokerId(*id)).collect();
                                        kp::metadata_response::MetadataResponsePartition::default()
                                            .with_error_code(p.error_code.code())
                                            .with_partition_index(p.partition_index)
                                            .with_leader_id(kp::BrokerId(p.leader_id))
                                            .with_leader_epoch(p.leader_epoch)
                                            .with_replica_nodes(ids(&p.replica_nodes))
                                            .with_isr_nodes(ids(&p.isr_nodes))
                                            .with_offline_replicas(ids(&p.offline_replicas))
                                    })
                                    .collect(),
                            )
                            .with_topic_authorized_operations(t.topic_authorized_operations)
                    })
                    .collect(),
            )
            .with_cluster_authorized_operations(ours.cluster_authorized_operations)
            .with_error_code(ours.error_code.code());
        check(&ours, &theirs, version);
    }
}

#[test]
fn sasl_matches_kafka_protocol() {
    for version in 0..=1 {
        let ours = common::sasl_handshake_request(version);
        let theirs = kp::SaslHandshakeRequest::default().with_mechanism(s(&ours.mechanism));
        check(&ours, &theirs, version);
        let ours = common::sasl_handshake_response(version);
        let theirs = kp::SaslHandshakeResponse::default()
            .with_error_code(ours.error_code.code())
            .with_mechanisms(ours.mechanisms.iter().map(|m| s(m)).collect());
        check(&ours, &theirs, version);
    }
    for version in 0..=2 {
        let ours = common::sasl_authenticate_request(version);
        let theirs = kp::SaslAuthenticateRequest::default().with_auth_bytes(ours.auth_bytes.clone());
        check(&ours, &theirs, version);
        let ours = common::sasl_authenticate_response(version);
        let theirs = kp::SaslAuthenticateResponse::default()
            .with_error_code(ours.error_code.code())
            .with_error_message(ours.error_message.as_deref().map(s))
            .with_auth_bytes(ours.auth_bytes.clone())
            .with_session_lifetime_ms(ours.session_lifetime_ms);
        check(&ours, &theirs, version);
    }
}

#[test]
fn init_producer_id_matches_kafka_protocol() {
    // kafka-protocol 0.18 knows InitProducerId requests up to v5 and responses up to v6.
    for version in 0..=6 {
        if version <= 5 {
            let ours = common::init_producer_id_request(version);
            let theirs = kp::InitProducerIdRequest::default()
                .with_transactional_id(
                    ours.transactional_id
                        .as_deref()
                        .map(|t| kp::TransactionalId(s(t))),
                )
                .with_transaction_timeout_ms(ours.transaction_timeout_ms)
                .with_producer_id(kp::ProducerId(ours.producer_id))
                .with_producer_epoch(ours.producer_epoch);
            check(&ours, &theirs, version);
        }
        let ours = common::init_producer_id_response(version);
        let theirs = kp::InitProducerIdResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_error_code(ours.error_code.code())
            .with_producer_id(kp::ProducerId(ours.producer_id))
            .with_producer_epoch(ours.producer_epoch)
            .with_ongoing_txn_producer_id(kp::ProducerId(ours.ongoing_txn_producer_id))
            .with_ongoing_txn_producer_epoch(ours.ongoing_txn_producer_epoch);
        check(&ours, &theirs, version);
    }
}

#[test]
fn produce_matches_kafka_protocol() {
    for version in 3..=13 {
        let ours = common::produce_request(version);
        let theirs = kp::ProduceRequest::default()
            .with_transactional_id(
                ours.transactional_id
                    .as_deref()
                    .map(|t| kp::TransactionalId(s(t))),
            )
            .with_acks(ours.acks)
            .with_timeout_ms(ours.timeout_ms)
            .with_topic_data(
                ours.topics
                    .iter()
                    .map(|t| {
                        kp::produce_request::TopicProduceData::default()
                            .with_name(topic(&t.name))
                            .with_topic_id(uuid(t.topic_id))
                            .with_partition_data(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        kp::produce_request::PartitionProduceData::default()
                                            .with_index(p.index)
                                            .with_records(p.records.clone())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_unknown_tagged_fields(tagged(&ours.unknown_tagged_fields));
        check(&ours, &theirs, version);

        let ours = common::produce_response(version);
        let theirs = kp::ProduceResponse::default()
            .with_responses(
                ours.topics
                    .iter()
                    .map(|t| {
                        kp::produce_response::TopicProduceResponse::default()
                            .with_name(topic(&t.name))
                            .with_topic_id(uuid(t.topic_id))
                            .with_partition_responses(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        let leader = p.current_leader.map_or_else(
                                            kp::produce_response::LeaderIdAndEpoch::default,
                                            |l| {
                                                kp::produce_response::LeaderIdAndEpoch::default()
                                                    .with_leader_id(kp::BrokerId(l.leader_id))
                                                    .with_leader_epoch(l.leader_epoch)
                                            },
                                        );
                                        kp::produce_response::PartitionProduceResponse::default()
                                            .with_index(p.index)
                                            .with_error_code(p.error_code.code())
                                            .with_base_offset(p.base_offset)
                                            .with_log_append_time_ms(p.log_append_time_ms)
                                            .with_log_start_offset(p.log_start_offset)
                                            .with_record_errors(
                                                p.record_errors
                                                    .iter()
                                                    .map(|e| {
                                                        kp::produce_response::BatchIndexAndErrorMessage::default()
                                                            .with_batch_index(e.batch_index)
                                                            .with_batch_index_error_message(
                                                                e.batch_index_error_message.as_deref().map(s),
                                                            )
                                                    })
                                                    .collect(),
                                            )
                                            .with_error_message(p.error_message.as_deref().map(s))
                                            .with_current_leader(leader)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_node_endpoints(
                ours.node_endpoints
                    .iter()
                    .map(|n| {
                        kp::produce_response::NodeEndpoint::default()
                            .with_node_id(kp::BrokerId(n.node_id))
                            .with_host(s(&n.host))
                            .with_port(n.port)
                            .with_rack(n.rack.as_deref().map(s))
                    })
                    .collect(),
            );
        check(&ours, &theirs, version);
    }
}

#[test]
fn create_and_delete_topics_match_kafka_protocol() {
    for version in 2..=7 {
        let ours = common::create_topics_request(version);
        let theirs = kp::CreateTopicsRequest::default()
            .with_topics(
                ours.topics
                    .iter()
                    .map(|t| {
                        kp::create_topics_request::CreatableTopic::default()
                            .with_name(topic(&t.name))
                            .with_num_partitions(t.num_partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_assignments(
                                t.assignments
                                    .iter()
                                    .map(|(p, ids)| {
                                        kp::create_topics_request::CreatableReplicaAssignment::default()
                                            .with_partition_index(*p)
                                            .with_broker_ids(ids.iter().map(|id| kp::BrokerId(*id)).collect())
                                    })
                                    .collect(),
                            )
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(name, value)| {
                                        kp::create_topics_request::CreatableTopicConfig::default()
                                            .with_name(s(name))
                                            .with_value(value.as_deref().map(s))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_timeout_ms(ours.timeout_ms)
            .with_validate_only(ours.validate_only);
        check(&ours, &theirs, version);

        let ours = common::create_topics_response(version);
        let theirs = kp::CreateTopicsResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_topics(
                ours.topics
                    .iter()
                    .map(|t| {
                        kp::create_topics_response::CreatableTopicResult::default()
                            .with_name(topic(&t.name))
                            .with_topic_id(uuid(t.topic_id))
                            .with_error_code(t.error_code.code())
                            .with_error_message(t.error_message.as_deref().map(s))
                            .with_topic_config_error_code(t.topic_config_error_code)
                            .with_num_partitions(t.num_partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(if version >= 5 { None } else { Some(Vec::new()) })
                    })
                    .collect(),
            );
        check(&ours, &theirs, version);
    }
    for version in 1..=6 {
        let ours = common::delete_topics_request(version);
        let mut theirs = kp::DeleteTopicsRequest::default().with_timeout_ms(ours.timeout_ms);
        if version >= 6 {
            theirs.topics = ours
                .topics
                .iter()
                .map(|t| {
                    kp::delete_topics_request::DeleteTopicState::default()
                        .with_name(t.name.as_deref().map(topic))
                        .with_topic_id(uuid(t.topic_id))
                })
                .collect();
        } else {
            theirs.topic_names = ours
                .topics
                .iter()
                .map(|t| topic(t.name.as_deref().unwrap()))
                .collect();
        }
        check(&ours, &theirs, version);

        let ours = common::delete_topics_response(version);
        let theirs = kp::DeleteTopicsResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_responses(
                ours.responses
                    .iter()
                    .map(|t| {
                        kp::delete_topics_response::DeletableTopicResult::default()
                            .with_name(t.name.as_deref().map(topic))
                            .with_topic_id(uuid(t.topic_id))
                            .with_error_code(t.error_code.code())
                            .with_error_message(t.error_message.as_deref().map(s))
                    })
                    .collect(),
            );
        check(&ours, &theirs, version);
    }
}

#[test]
fn request_headers_match_kafka_protocol() {
    use kafka_protocol::messages::RequestHeader as KpHeader;
    for (key, version) in [
        (ApiKey::PRODUCE, 8),
        (ApiKey::PRODUCE, 9),
        (ApiKey::API_VERSIONS, 3),
        (ApiKey::METADATA, 12),
    ] {
        let ours = RequestHeader::new(key, version, 42, Some("client-1"));
        let theirs = KpHeader::default()
            .with_request_api_key(key.0)
            .with_request_api_version(version)
            .with_correlation_id(42)
            .with_client_id(Some(s("client-1")));
        let header_version = key.request_header_version(version);
        let mut their_bytes = BytesMut::new();
        theirs.encode(&mut their_bytes, header_version).unwrap();
        let mut our_bytes = BytesMut::new();
        ours.encode(&mut our_bytes).unwrap();
        assert_eq!(our_bytes, their_bytes, "{key} v{version}");
        let (decoded, rest) = RequestHeader::decode(&their_bytes.freeze()).unwrap();
        assert_eq!(decoded, ours);
        assert!(rest.is_empty());
    }
}
