//! API keys and the per-API facts needed before a body is decoded: the name, the highest version
//! in the Kafka message definitions this crate was written against, and the first flexible
//! version (which decides between request header v1 and v2, response header v0 and v1).
//!
//! Source: `clients/src/main/resources/common/message/*Request.json` in apache/kafka at
//! 1eb7644349cb07139d6a3c1ad1986979647cac99.

/// A Kafka API key (`int16`). Any value is representable so that the header of an unknown API
/// still decodes and the broker can answer or close the connection on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiKey(pub i16);

/// Static facts about one API, from its JSON message definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiInfo {
    /// The key.
    pub key: ApiKey,
    /// The Kafka name, e.g. `Produce`.
    pub name: &'static str,
    /// Highest version in the message definitions (all start at 0).
    pub max_version: i16,
    /// First version using flexible (compact + tagged field) encoding; `None` if never.
    pub first_flexible_version: Option<i16>,
}

impl ApiInfo {
    /// Whether `version` of this API uses the flexible encoding.
    pub const fn is_flexible(&self, version: i16) -> bool {
        match self.first_flexible_version {
            Some(first) => version >= first,
            None => false,
        }
    }
}

impl ApiKey {
    /// `Produce` (0).
    pub const PRODUCE: ApiKey = ApiKey(0);
    /// `Fetch` (1).
    pub const FETCH: ApiKey = ApiKey(1);
    /// `ListOffsets` (2).
    pub const LIST_OFFSETS: ApiKey = ApiKey(2);
    /// `Metadata` (3).
    pub const METADATA: ApiKey = ApiKey(3);
    /// `LeaderAndIsr` (4).
    pub const LEADER_AND_ISR: ApiKey = ApiKey(4);
    /// `StopReplica` (5).
    pub const STOP_REPLICA: ApiKey = ApiKey(5);
    /// `UpdateMetadata` (6).
    pub const UPDATE_METADATA: ApiKey = ApiKey(6);
    /// `ControlledShutdown` (7).
    pub const CONTROLLED_SHUTDOWN: ApiKey = ApiKey(7);
    /// `OffsetCommit` (8).
    pub const OFFSET_COMMIT: ApiKey = ApiKey(8);
    /// `OffsetFetch` (9).
    pub const OFFSET_FETCH: ApiKey = ApiKey(9);
    /// `FindCoordinator` (10).
    pub const FIND_COORDINATOR: ApiKey = ApiKey(10);
    /// `JoinGroup` (11).
    pub const JOIN_GROUP: ApiKey = ApiKey(11);
    /// `Heartbeat` (12).
    pub const HEARTBEAT: ApiKey = ApiKey(12);
    /// `LeaveGroup` (13).
    pub const LEAVE_GROUP: ApiKey = ApiKey(13);
    /// `SyncGroup` (14).
    pub const SYNC_GROUP: ApiKey = ApiKey(14);
    /// `DescribeGroups` (15).
    pub const DESCRIBE_GROUPS: ApiKey = ApiKey(15);
    /// `ListGroups` (16).
    pub const LIST_GROUPS: ApiKey = ApiKey(16);
    /// `SaslHandshake` (17).
    pub const SASL_HANDSHAKE: ApiKey = ApiKey(17);
    /// `ApiVersions` (18).
    pub const API_VERSIONS: ApiKey = ApiKey(18);
    /// `CreateTopics` (19).
    pub const CREATE_TOPICS: ApiKey = ApiKey(19);
    /// `DeleteTopics` (20).
    pub const DELETE_TOPICS: ApiKey = ApiKey(20);
    /// `DeleteRecords` (21).
    pub const DELETE_RECORDS: ApiKey = ApiKey(21);
    /// `InitProducerId` (22).
    pub const INIT_PRODUCER_ID: ApiKey = ApiKey(22);
    /// `OffsetForLeaderEpoch` (23).
    pub const OFFSET_FOR_LEADER_EPOCH: ApiKey = ApiKey(23);
    /// `AddPartitionsToTxn` (24).
    pub const ADD_PARTITIONS_TO_TXN: ApiKey = ApiKey(24);
    /// `AddOffsetsToTxn` (25).
    pub const ADD_OFFSETS_TO_TXN: ApiKey = ApiKey(25);
    /// `EndTxn` (26).
    pub const END_TXN: ApiKey = ApiKey(26);
    /// `WriteTxnMarkers` (27).
    pub const WRITE_TXN_MARKERS: ApiKey = ApiKey(27);
    /// `TxnOffsetCommit` (28).
    pub const TXN_OFFSET_COMMIT: ApiKey = ApiKey(28);
    /// `DescribeAcls` (29).
    pub const DESCRIBE_ACLS: ApiKey = ApiKey(29);
    /// `CreateAcls` (30).
    pub const CREATE_ACLS: ApiKey = ApiKey(30);
    /// `DeleteAcls` (31).
    pub const DELETE_ACLS: ApiKey = ApiKey(31);
    /// `DescribeConfigs` (32).
    pub const DESCRIBE_CONFIGS: ApiKey = ApiKey(32);
    /// `AlterConfigs` (33).
    pub const ALTER_CONFIGS: ApiKey = ApiKey(33);
    /// `AlterReplicaLogDirs` (34).
    pub const ALTER_REPLICA_LOG_DIRS: ApiKey = ApiKey(34);
    /// `DescribeLogDirs` (35).
    pub const DESCRIBE_LOG_DIRS: ApiKey = ApiKey(35);
    /// `SaslAuthenticate` (36).
    pub const SASL_AUTHENTICATE: ApiKey = ApiKey(36);
    /// `CreatePartitions` (37).
    pub const CREATE_PARTITIONS: ApiKey = ApiKey(37);
    /// `CreateDelegationToken` (38).
    pub const CREATE_DELEGATION_TOKEN: ApiKey = ApiKey(38);
    /// `RenewDelegationToken` (39).
    pub const RENEW_DELEGATION_TOKEN: ApiKey = ApiKey(39);
    /// `ExpireDelegationToken` (40).
    pub const EXPIRE_DELEGATION_TOKEN: ApiKey = ApiKey(40);
    /// `DescribeDelegationToken` (41).
    pub const DESCRIBE_DELEGATION_TOKEN: ApiKey = ApiKey(41);
    /// `DeleteGroups` (42).
    pub const DELETE_GROUPS: ApiKey = ApiKey(42);
    /// `ElectLeaders` (43).
    pub const ELECT_LEADERS: ApiKey = ApiKey(43);
    /// `IncrementalAlterConfigs` (44).
    pub const INCREMENTAL_ALTER_CONFIGS: ApiKey = ApiKey(44);
    /// `AlterPartitionReassignments` (45).
    pub const ALTER_PARTITION_REASSIGNMENTS: ApiKey = ApiKey(45);
    /// `ListPartitionReassignments` (46).
    pub const LIST_PARTITION_REASSIGNMENTS: ApiKey = ApiKey(46);
    /// `OffsetDelete` (47).
    pub const OFFSET_DELETE: ApiKey = ApiKey(47);
    /// `DescribeClientQuotas` (48).
    pub const DESCRIBE_CLIENT_QUOTAS: ApiKey = ApiKey(48);
    /// `AlterClientQuotas` (49).
    pub const ALTER_CLIENT_QUOTAS: ApiKey = ApiKey(49);
    /// `DescribeUserScramCredentials` (50).
    pub const DESCRIBE_USER_SCRAM_CREDENTIALS: ApiKey = ApiKey(50);
    /// `AlterUserScramCredentials` (51).
    pub const ALTER_USER_SCRAM_CREDENTIALS: ApiKey = ApiKey(51);
    /// `Vote` (52).
    pub const VOTE: ApiKey = ApiKey(52);
    /// `BeginQuorumEpoch` (53).
    pub const BEGIN_QUORUM_EPOCH: ApiKey = ApiKey(53);
    /// `EndQuorumEpoch` (54).
    pub const END_QUORUM_EPOCH: ApiKey = ApiKey(54);
    /// `DescribeQuorum` (55).
    pub const DESCRIBE_QUORUM: ApiKey = ApiKey(55);
    /// `AlterPartition` (56).
    pub const ALTER_PARTITION: ApiKey = ApiKey(56);
    /// `UpdateFeatures` (57).
    pub const UPDATE_FEATURES: ApiKey = ApiKey(57);
    /// `Envelope` (58).
    pub const ENVELOPE: ApiKey = ApiKey(58);
    /// `FetchSnapshot` (59).
    pub const FETCH_SNAPSHOT: ApiKey = ApiKey(59);
    /// `DescribeCluster` (60).
    pub const DESCRIBE_CLUSTER: ApiKey = ApiKey(60);
    /// `DescribeProducers` (61).
    pub const DESCRIBE_PRODUCERS: ApiKey = ApiKey(61);
    /// `BrokerRegistration` (62).
    pub const BROKER_REGISTRATION: ApiKey = ApiKey(62);
    /// `BrokerHeartbeat` (63).
    pub const BROKER_HEARTBEAT: ApiKey = ApiKey(63);
    /// `UnregisterBroker` (64).
    pub const UNREGISTER_BROKER: ApiKey = ApiKey(64);
    /// `DescribeTransactions` (65).
    pub const DESCRIBE_TRANSACTIONS: ApiKey = ApiKey(65);
    /// `ListTransactions` (66).
    pub const LIST_TRANSACTIONS: ApiKey = ApiKey(66);
    /// `AllocateProducerIds` (67).
    pub const ALLOCATE_PRODUCER_IDS: ApiKey = ApiKey(67);
    /// `ConsumerGroupHeartbeat` (68).
    pub const CONSUMER_GROUP_HEARTBEAT: ApiKey = ApiKey(68);
    /// `ConsumerGroupDescribe` (69).
    pub const CONSUMER_GROUP_DESCRIBE: ApiKey = ApiKey(69);
    /// `ControllerRegistration` (70).
    pub const CONTROLLER_REGISTRATION: ApiKey = ApiKey(70);
    /// `GetTelemetrySubscriptions` (71).
    pub const GET_TELEMETRY_SUBSCRIPTIONS: ApiKey = ApiKey(71);
    /// `PushTelemetry` (72).
    pub const PUSH_TELEMETRY: ApiKey = ApiKey(72);
    /// `AssignReplicasToDirs` (73).
    pub const ASSIGN_REPLICAS_TO_DIRS: ApiKey = ApiKey(73);
    /// `ListClientMetricsResources` (74).
    pub const LIST_CLIENT_METRICS_RESOURCES: ApiKey = ApiKey(74);
    /// `DescribeTopicPartitions` (75).
    pub const DESCRIBE_TOPIC_PARTITIONS: ApiKey = ApiKey(75);
    /// `ShareGroupHeartbeat` (76).
    pub const SHARE_GROUP_HEARTBEAT: ApiKey = ApiKey(76);
    /// `ShareGroupDescribe` (77).
    pub const SHARE_GROUP_DESCRIBE: ApiKey = ApiKey(77);
    /// `ShareFetch` (78).
    pub const SHARE_FETCH: ApiKey = ApiKey(78);
    /// `ShareAcknowledge` (79).
    pub const SHARE_ACKNOWLEDGE: ApiKey = ApiKey(79);
    /// `AddRaftVoter` (80).
    pub const ADD_RAFT_VOTER: ApiKey = ApiKey(80);
    /// `RemoveRaftVoter` (81).
    pub const REMOVE_RAFT_VOTER: ApiKey = ApiKey(81);
    /// `UpdateRaftVoter` (82).
    pub const UPDATE_RAFT_VOTER: ApiKey = ApiKey(82);
    /// `InitializeShareGroupState` (83).
    pub const INITIALIZE_SHARE_GROUP_STATE: ApiKey = ApiKey(83);
    /// `ReadShareGroupState` (84).
    pub const READ_SHARE_GROUP_STATE: ApiKey = ApiKey(84);
    /// `WriteShareGroupState` (85).
    pub const WRITE_SHARE_GROUP_STATE: ApiKey = ApiKey(85);
    /// `DeleteShareGroupState` (86).
    pub const DELETE_SHARE_GROUP_STATE: ApiKey = ApiKey(86);
    /// `ReadShareGroupStateSummary` (87).
    pub const READ_SHARE_GROUP_STATE_SUMMARY: ApiKey = ApiKey(87);

    /// The static facts about this API, or `None` for a key this crate does not know.
    pub fn info(self) -> Option<&'static ApiInfo> {
        usize::try_from(self.0)
            .ok()
            .and_then(|index| API_TABLE.get(index))
            .filter(|info| info.key == self)
    }

    /// The Kafka name of the API, or `"Unknown"`.
    pub fn name(self) -> &'static str {
        self.info().map_or("Unknown", |info| info.name)
    }

    /// Whether requests and responses of this API at `version` use the flexible encoding.
    /// Unknown APIs are treated as not flexible.
    pub fn is_flexible(self, version: i16) -> bool {
        self.info().is_some_and(|info| info.is_flexible(version))
    }

    /// Request header version for this API at `version`: 0 (ControlledShutdown v0 only, which
    /// has no client id), 1, or 2 (flexible). Versions above the known maximum keep the
    /// flexibility of the highest known version, as the Java broker does when it parses the
    /// header of an ApiVersions request it cannot otherwise read.
    pub fn request_header_version(self, version: i16) -> i16 {
        if self == ApiKey::CONTROLLED_SHUTDOWN && version == 0 {
            0
        } else if self.is_flexible(version) {
            2
        } else {
            1
        }
    }

    /// Response header version for this API at `version`: 1 when flexible, else 0. ApiVersions
    /// always answers with header v0 so that a client that does not know the broker's versions
    /// can still read the correlation id.
    pub fn response_header_version(self, version: i16) -> i16 {
        if self != ApiKey::API_VERSIONS && self.is_flexible(version) {
            1
        } else {
            0
        }
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl From<i16> for ApiKey {
    fn from(key: i16) -> Self {
        ApiKey(key)
    }
}

/// Every API key in the definitions, indexed by key (keys are dense from 0).
pub static API_TABLE: &[ApiInfo] = &[
    ApiInfo {
        key: ApiKey::PRODUCE,
        name: "Produce",
        max_version: 11,
        first_flexible_version: Some(9),
    },
    ApiInfo {
        key: ApiKey::FETCH,
        name: "Fetch",
        max_version: 17,
        first_flexible_version: Some(12),
    },
    ApiInfo {
        key: ApiKey::LIST_OFFSETS,
        name: "ListOffsets",
        max_version: 10,
        first_flexible_version: Some(6),
    },
    ApiInfo {
        key: ApiKey::METADATA,
        name: "Metadata",
        max_version: 12,
        first_flexible_version: Some(9),
    },
    ApiInfo {
        key: ApiKey::LEADER_AND_ISR,
        name: "LeaderAndIsr",
        max_version: 7,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::STOP_REPLICA,
        name: "StopReplica",
        max_version: 4,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::UPDATE_METADATA,
        name: "UpdateMetadata",
        max_version: 8,
        first_flexible_version: Some(6),
    },
    ApiInfo {
        key: ApiKey::CONTROLLED_SHUTDOWN,
        name: "ControlledShutdown",
        max_version: 3,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::OFFSET_COMMIT,
        name: "OffsetCommit",
        max_version: 9,
        first_flexible_version: Some(8),
    },
    ApiInfo {
        key: ApiKey::OFFSET_FETCH,
        name: "OffsetFetch",
        max_version: 9,
        first_flexible_version: Some(6),
    },
    ApiInfo {
        key: ApiKey::FIND_COORDINATOR,
        name: "FindCoordinator",
        max_version: 6,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::JOIN_GROUP,
        name: "JoinGroup",
        max_version: 9,
        first_flexible_version: Some(6),
    },
    ApiInfo {
        key: ApiKey::HEARTBEAT,
        name: "Heartbeat",
        max_version: 4,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::LEAVE_GROUP,
        name: "LeaveGroup",
        max_version: 5,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::SYNC_GROUP,
        name: "SyncGroup",
        max_version: 5,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_GROUPS,
        name: "DescribeGroups",
        max_version: 5,
        first_flexible_version: Some(5),
    },
    ApiInfo {
        key: ApiKey::LIST_GROUPS,
        name: "ListGroups",
        max_version: 5,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::SASL_HANDSHAKE,
        name: "SaslHandshake",
        max_version: 1,
        first_flexible_version: None,
    },
    ApiInfo {
        key: ApiKey::API_VERSIONS,
        name: "ApiVersions",
        max_version: 4,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::CREATE_TOPICS,
        name: "CreateTopics",
        max_version: 7,
        first_flexible_version: Some(5),
    },
    ApiInfo {
        key: ApiKey::DELETE_TOPICS,
        name: "DeleteTopics",
        max_version: 6,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::DELETE_RECORDS,
        name: "DeleteRecords",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::INIT_PRODUCER_ID,
        name: "InitProducerId",
        max_version: 5,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::OFFSET_FOR_LEADER_EPOCH,
        name: "OffsetForLeaderEpoch",
        max_version: 4,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::ADD_PARTITIONS_TO_TXN,
        name: "AddPartitionsToTxn",
        max_version: 5,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::ADD_OFFSETS_TO_TXN,
        name: "AddOffsetsToTxn",
        max_version: 4,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::END_TXN,
        name: "EndTxn",
        max_version: 5,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::WRITE_TXN_MARKERS,
        name: "WriteTxnMarkers",
        max_version: 1,
        first_flexible_version: Some(1),
    },
    ApiInfo {
        key: ApiKey::TXN_OFFSET_COMMIT,
        name: "TxnOffsetCommit",
        max_version: 4,
        first_flexible_version: Some(3),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_ACLS,
        name: "DescribeAcls",
        max_version: 3,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::CREATE_ACLS,
        name: "CreateAcls",
        max_version: 3,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::DELETE_ACLS,
        name: "DeleteAcls",
        max_version: 3,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_CONFIGS,
        name: "DescribeConfigs",
        max_version: 4,
        first_flexible_version: Some(4),
    },
    ApiInfo {
        key: ApiKey::ALTER_CONFIGS,
        name: "AlterConfigs",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::ALTER_REPLICA_LOG_DIRS,
        name: "AlterReplicaLogDirs",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_LOG_DIRS,
        name: "DescribeLogDirs",
        max_version: 4,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::SASL_AUTHENTICATE,
        name: "SaslAuthenticate",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::CREATE_PARTITIONS,
        name: "CreatePartitions",
        max_version: 3,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::CREATE_DELEGATION_TOKEN,
        name: "CreateDelegationToken",
        max_version: 3,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::RENEW_DELEGATION_TOKEN,
        name: "RenewDelegationToken",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::EXPIRE_DELEGATION_TOKEN,
        name: "ExpireDelegationToken",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_DELEGATION_TOKEN,
        name: "DescribeDelegationToken",
        max_version: 3,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::DELETE_GROUPS,
        name: "DeleteGroups",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::ELECT_LEADERS,
        name: "ElectLeaders",
        max_version: 2,
        first_flexible_version: Some(2),
    },
    ApiInfo {
        key: ApiKey::INCREMENTAL_ALTER_CONFIGS,
        name: "IncrementalAlterConfigs",
        max_version: 1,
        first_flexible_version: Some(1),
    },
    ApiInfo {
        key: ApiKey::ALTER_PARTITION_REASSIGNMENTS,
        name: "AlterPartitionReassignments",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::LIST_PARTITION_REASSIGNMENTS,
        name: "ListPartitionReassignments",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::OFFSET_DELETE,
        name: "OffsetDelete",
        max_version: 0,
        first_flexible_version: None,
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_CLIENT_QUOTAS,
        name: "DescribeClientQuotas",
        max_version: 1,
        first_flexible_version: Some(1),
    },
    ApiInfo {
        key: ApiKey::ALTER_CLIENT_QUOTAS,
        name: "AlterClientQuotas",
        max_version: 1,
        first_flexible_version: Some(1),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_USER_SCRAM_CREDENTIALS,
        name: "DescribeUserScramCredentials",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::ALTER_USER_SCRAM_CREDENTIALS,
        name: "AlterUserScramCredentials",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::VOTE,
        name: "Vote",
        max_version: 1,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::BEGIN_QUORUM_EPOCH,
        name: "BeginQuorumEpoch",
        max_version: 1,
        first_flexible_version: Some(1),
    },
    ApiInfo {
        key: ApiKey::END_QUORUM_EPOCH,
        name: "EndQuorumEpoch",
        max_version: 1,
        first_flexible_version: Some(1),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_QUORUM,
        name: "DescribeQuorum",
        max_version: 2,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::ALTER_PARTITION,
        name: "AlterPartition",
        max_version: 3,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::UPDATE_FEATURES,
        name: "UpdateFeatures",
        max_version: 2,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::ENVELOPE,
        name: "Envelope",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::FETCH_SNAPSHOT,
        name: "FetchSnapshot",
        max_version: 1,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_CLUSTER,
        name: "DescribeCluster",
        max_version: 1,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_PRODUCERS,
        name: "DescribeProducers",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::BROKER_REGISTRATION,
        name: "BrokerRegistration",
        max_version: 4,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::BROKER_HEARTBEAT,
        name: "BrokerHeartbeat",
        max_version: 1,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::UNREGISTER_BROKER,
        name: "UnregisterBroker",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_TRANSACTIONS,
        name: "DescribeTransactions",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::LIST_TRANSACTIONS,
        name: "ListTransactions",
        max_version: 1,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::ALLOCATE_PRODUCER_IDS,
        name: "AllocateProducerIds",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::CONSUMER_GROUP_HEARTBEAT,
        name: "ConsumerGroupHeartbeat",
        max_version: 1,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::CONSUMER_GROUP_DESCRIBE,
        name: "ConsumerGroupDescribe",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::CONTROLLER_REGISTRATION,
        name: "ControllerRegistration",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::GET_TELEMETRY_SUBSCRIPTIONS,
        name: "GetTelemetrySubscriptions",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::PUSH_TELEMETRY,
        name: "PushTelemetry",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::ASSIGN_REPLICAS_TO_DIRS,
        name: "AssignReplicasToDirs",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::LIST_CLIENT_METRICS_RESOURCES,
        name: "ListClientMetricsResources",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::DESCRIBE_TOPIC_PARTITIONS,
        name: "DescribeTopicPartitions",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::SHARE_GROUP_HEARTBEAT,
        name: "ShareGroupHeartbeat",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::SHARE_GROUP_DESCRIBE,
        name: "ShareGroupDescribe",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::SHARE_FETCH,
        name: "ShareFetch",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::SHARE_ACKNOWLEDGE,
        name: "ShareAcknowledge",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::ADD_RAFT_VOTER,
        name: "AddRaftVoter",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::REMOVE_RAFT_VOTER,
        name: "RemoveRaftVoter",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::UPDATE_RAFT_VOTER,
        name: "UpdateRaftVoter",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::INITIALIZE_SHARE_GROUP_STATE,
        name: "InitializeShareGroupState",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::READ_SHARE_GROUP_STATE,
        name: "ReadShareGroupState",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::WRITE_SHARE_GROUP_STATE,
        name: "WriteShareGroupState",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::DELETE_SHARE_GROUP_STATE,
        name: "DeleteShareGroupState",
        max_version: 0,
        first_flexible_version: Some(0),
    },
    ApiInfo {
        key: ApiKey::READ_SHARE_GROUP_STATE_SUMMARY,
        name: "ReadShareGroupStateSummary",
        max_version: 0,
        first_flexible_version: Some(0),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_indexed_by_key() {
        for (index, info) in API_TABLE.iter().enumerate() {
            assert_eq!(info.key.0 as usize, index, "{}", info.name);
        }
        assert_eq!(ApiKey(-1).info(), None);
        assert_eq!(ApiKey(10_000).info(), None);
    }

    #[test]
    fn header_versions_follow_flexibility() {
        assert_eq!(ApiKey::PRODUCE.request_header_version(8), 1);
        assert_eq!(ApiKey::PRODUCE.request_header_version(9), 2);
        assert_eq!(ApiKey::PRODUCE.response_header_version(9), 1);
        assert_eq!(ApiKey::METADATA.request_header_version(12), 2);
        assert_eq!(ApiKey::SASL_HANDSHAKE.request_header_version(1), 1);
        assert_eq!(ApiKey::SASL_AUTHENTICATE.response_header_version(2), 1);
        // The famous special case: flexible request, v0 response header.
        assert_eq!(ApiKey::API_VERSIONS.request_header_version(3), 2);
        assert_eq!(ApiKey::API_VERSIONS.request_header_version(99), 2);
        assert_eq!(ApiKey::API_VERSIONS.response_header_version(3), 0);
        assert_eq!(ApiKey::CONTROLLED_SHUTDOWN.request_header_version(0), 0);
        assert_eq!(ApiKey(999).request_header_version(5), 1);
    }
}
