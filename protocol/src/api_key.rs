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

/// Writes, from one table, the `ApiKey` constants and [`API_TABLE`]: each API once, as
/// `CONST = key => "Name", max MAX_VERSION, flexible FIRST_FLEXIBLE_VERSION;`.
macro_rules! api_keys {
    ($($name:ident = $key:literal => $kafka_name:literal, max $max:literal, flexible $flexible:expr;)*) => {
        impl ApiKey {
            $(
                #[doc = concat!("`", $kafka_name, "` (", stringify!($key), ").")]
                pub const $name: ApiKey = ApiKey($key);
            )*
        }

        /// Every API key in the definitions, indexed by key (keys are dense from 0).
        pub static API_TABLE: &[ApiInfo] = &[
            $(ApiInfo {
                key: ApiKey::$name,
                name: $kafka_name,
                max_version: $max,
                first_flexible_version: $flexible,
            },)*
        ];
    };
}

api_keys! {
    PRODUCE = 0 => "Produce", max 12, flexible Some(9);
    FETCH = 1 => "Fetch", max 17, flexible Some(12);
    LIST_OFFSETS = 2 => "ListOffsets", max 10, flexible Some(6);
    METADATA = 3 => "Metadata", max 12, flexible Some(9);
    LEADER_AND_ISR = 4 => "LeaderAndIsr", max 7, flexible Some(4);
    STOP_REPLICA = 5 => "StopReplica", max 4, flexible Some(2);
    UPDATE_METADATA = 6 => "UpdateMetadata", max 8, flexible Some(6);
    CONTROLLED_SHUTDOWN = 7 => "ControlledShutdown", max 3, flexible Some(3);
    OFFSET_COMMIT = 8 => "OffsetCommit", max 9, flexible Some(8);
    OFFSET_FETCH = 9 => "OffsetFetch", max 9, flexible Some(6);
    FIND_COORDINATOR = 10 => "FindCoordinator", max 6, flexible Some(3);
    JOIN_GROUP = 11 => "JoinGroup", max 9, flexible Some(6);
    HEARTBEAT = 12 => "Heartbeat", max 4, flexible Some(4);
    LEAVE_GROUP = 13 => "LeaveGroup", max 5, flexible Some(4);
    SYNC_GROUP = 14 => "SyncGroup", max 5, flexible Some(4);
    DESCRIBE_GROUPS = 15 => "DescribeGroups", max 5, flexible Some(5);
    LIST_GROUPS = 16 => "ListGroups", max 5, flexible Some(3);
    SASL_HANDSHAKE = 17 => "SaslHandshake", max 1, flexible None;
    API_VERSIONS = 18 => "ApiVersions", max 4, flexible Some(3);
    CREATE_TOPICS = 19 => "CreateTopics", max 7, flexible Some(5);
    DELETE_TOPICS = 20 => "DeleteTopics", max 6, flexible Some(4);
    DELETE_RECORDS = 21 => "DeleteRecords", max 2, flexible Some(2);
    INIT_PRODUCER_ID = 22 => "InitProducerId", max 5, flexible Some(2);
    OFFSET_FOR_LEADER_EPOCH = 23 => "OffsetForLeaderEpoch", max 4, flexible Some(4);
    ADD_PARTITIONS_TO_TXN = 24 => "AddPartitionsToTxn", max 5, flexible Some(3);
    ADD_OFFSETS_TO_TXN = 25 => "AddOffsetsToTxn", max 4, flexible Some(3);
    END_TXN = 26 => "EndTxn", max 5, flexible Some(3);
    WRITE_TXN_MARKERS = 27 => "WriteTxnMarkers", max 1, flexible Some(1);
    TXN_OFFSET_COMMIT = 28 => "TxnOffsetCommit", max 4, flexible Some(3);
    DESCRIBE_ACLS = 29 => "DescribeAcls", max 3, flexible Some(2);
    CREATE_ACLS = 30 => "CreateAcls", max 3, flexible Some(2);
    DELETE_ACLS = 31 => "DeleteAcls", max 3, flexible Some(2);
    DESCRIBE_CONFIGS = 32 => "DescribeConfigs", max 4, flexible Some(4);
    ALTER_CONFIGS = 33 => "AlterConfigs", max 2, flexible Some(2);
    ALTER_REPLICA_LOG_DIRS = 34 => "AlterReplicaLogDirs", max 2, flexible Some(2);
    DESCRIBE_LOG_DIRS = 35 => "DescribeLogDirs", max 4, flexible Some(2);
    SASL_AUTHENTICATE = 36 => "SaslAuthenticate", max 2, flexible Some(2);
    CREATE_PARTITIONS = 37 => "CreatePartitions", max 3, flexible Some(2);
    CREATE_DELEGATION_TOKEN = 38 => "CreateDelegationToken", max 3, flexible Some(2);
    RENEW_DELEGATION_TOKEN = 39 => "RenewDelegationToken", max 2, flexible Some(2);
    EXPIRE_DELEGATION_TOKEN = 40 => "ExpireDelegationToken", max 2, flexible Some(2);
    DESCRIBE_DELEGATION_TOKEN = 41 => "DescribeDelegationToken", max 3, flexible Some(2);
    DELETE_GROUPS = 42 => "DeleteGroups", max 2, flexible Some(2);
    ELECT_LEADERS = 43 => "ElectLeaders", max 2, flexible Some(2);
    INCREMENTAL_ALTER_CONFIGS = 44 => "IncrementalAlterConfigs", max 1, flexible Some(1);
    ALTER_PARTITION_REASSIGNMENTS = 45 => "AlterPartitionReassignments", max 0, flexible Some(0);
    LIST_PARTITION_REASSIGNMENTS = 46 => "ListPartitionReassignments", max 0, flexible Some(0);
    OFFSET_DELETE = 47 => "OffsetDelete", max 0, flexible None;
    DESCRIBE_CLIENT_QUOTAS = 48 => "DescribeClientQuotas", max 1, flexible Some(1);
    ALTER_CLIENT_QUOTAS = 49 => "AlterClientQuotas", max 1, flexible Some(1);
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50 => "DescribeUserScramCredentials", max 0, flexible Some(0);
    ALTER_USER_SCRAM_CREDENTIALS = 51 => "AlterUserScramCredentials", max 0, flexible Some(0);
    VOTE = 52 => "Vote", max 1, flexible Some(0);
    BEGIN_QUORUM_EPOCH = 53 => "BeginQuorumEpoch", max 1, flexible Some(1);
    END_QUORUM_EPOCH = 54 => "EndQuorumEpoch", max 1, flexible Some(1);
    DESCRIBE_QUORUM = 55 => "DescribeQuorum", max 2, flexible Some(0);
    ALTER_PARTITION = 56 => "AlterPartition", max 3, flexible Some(0);
    UPDATE_FEATURES = 57 => "UpdateFeatures", max 2, flexible Some(0);
    ENVELOPE = 58 => "Envelope", max 0, flexible Some(0);
    FETCH_SNAPSHOT = 59 => "FetchSnapshot", max 1, flexible Some(0);
    DESCRIBE_CLUSTER = 60 => "DescribeCluster", max 1, flexible Some(0);
    DESCRIBE_PRODUCERS = 61 => "DescribeProducers", max 0, flexible Some(0);
    BROKER_REGISTRATION = 62 => "BrokerRegistration", max 4, flexible Some(0);
    BROKER_HEARTBEAT = 63 => "BrokerHeartbeat", max 1, flexible Some(0);
    UNREGISTER_BROKER = 64 => "UnregisterBroker", max 0, flexible Some(0);
    DESCRIBE_TRANSACTIONS = 65 => "DescribeTransactions", max 0, flexible Some(0);
    LIST_TRANSACTIONS = 66 => "ListTransactions", max 1, flexible Some(0);
    ALLOCATE_PRODUCER_IDS = 67 => "AllocateProducerIds", max 0, flexible Some(0);
    CONSUMER_GROUP_HEARTBEAT = 68 => "ConsumerGroupHeartbeat", max 1, flexible Some(0);
    CONSUMER_GROUP_DESCRIBE = 69 => "ConsumerGroupDescribe", max 0, flexible Some(0);
    CONTROLLER_REGISTRATION = 70 => "ControllerRegistration", max 0, flexible Some(0);
    GET_TELEMETRY_SUBSCRIPTIONS = 71 => "GetTelemetrySubscriptions", max 0, flexible Some(0);
    PUSH_TELEMETRY = 72 => "PushTelemetry", max 0, flexible Some(0);
    ASSIGN_REPLICAS_TO_DIRS = 73 => "AssignReplicasToDirs", max 0, flexible Some(0);
    LIST_CLIENT_METRICS_RESOURCES = 74 => "ListClientMetricsResources", max 0, flexible Some(0);
    DESCRIBE_TOPIC_PARTITIONS = 75 => "DescribeTopicPartitions", max 0, flexible Some(0);
    SHARE_GROUP_HEARTBEAT = 76 => "ShareGroupHeartbeat", max 0, flexible Some(0);
    SHARE_GROUP_DESCRIBE = 77 => "ShareGroupDescribe", max 0, flexible Some(0);
    SHARE_FETCH = 78 => "ShareFetch", max 0, flexible Some(0);
    SHARE_ACKNOWLEDGE = 79 => "ShareAcknowledge", max 0, flexible Some(0);
    ADD_RAFT_VOTER = 80 => "AddRaftVoter", max 0, flexible Some(0);
    REMOVE_RAFT_VOTER = 81 => "RemoveRaftVoter", max 0, flexible Some(0);
    UPDATE_RAFT_VOTER = 82 => "UpdateRaftVoter", max 0, flexible Some(0);
    INITIALIZE_SHARE_GROUP_STATE = 83 => "InitializeShareGroupState", max 0, flexible Some(0);
    READ_SHARE_GROUP_STATE = 84 => "ReadShareGroupState", max 0, flexible Some(0);
    WRITE_SHARE_GROUP_STATE = 85 => "WriteShareGroupState", max 0, flexible Some(0);
    DELETE_SHARE_GROUP_STATE = 86 => "DeleteShareGroupState", max 0, flexible Some(0);
    READ_SHARE_GROUP_STATE_SUMMARY = 87 => "ReadShareGroupStateSummary", max 0, flexible Some(0);
}

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
