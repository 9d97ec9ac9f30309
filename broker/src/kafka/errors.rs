//! The one place Kafka error codes are chosen.
//!
//! Everything else refuses with a typed rejection (a `thiserror` type keeping its cause):
//! [`AppendError`] and [`BatchRejection`] from the append pipeline, [`TopicError`] from the
//! catalog, [`RequestRejection`] and [`PartitionRejection`] from the Produce checks,
//! [`SequenceError`] from the idempotent-producer state, [`InitProducerIdRejection`],
//! [`TopicLookupRejection`] from Metadata, [`SaslErrorCode`] from the SASL state machine. Each
//! implements [`KafkaCode`] here, so the mapping of behaviour.md's tables lives in one file.

use kafluss_auth::SaslErrorCode;
use kafluss_protocol::ErrorCode;

use crate::append::{AppendError, BatchRejection};
use crate::catalog::resolve::TopicError;
use crate::producer::ids::ProducerIdError;
use crate::producer::state::SequenceError;

/// Longest error message a response carries (behaviour.md: ≤ 1 KiB each).
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// Cuts `message` to at most [`MAX_ERROR_MESSAGE`] bytes on a character boundary.
pub fn bounded_message(message: impl Into<String>) -> String {
    let mut message = message.into();
    if message.len() > MAX_ERROR_MESSAGE {
        message.truncate(char_floor(&message, MAX_ERROR_MESSAGE - 3));
        message.push_str("...");
    }
    message
}

/// The largest character boundary of `text` at or below `at` (its length if shorter).
pub fn char_floor(text: &str, at: usize) -> usize {
    let mut cut = at.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    cut
}

/// Bytes of error messages (partition, topic and record messages) one response carries in
/// all; entries past them carry their code alone, so a request naming many refused entries
/// cannot make its answer many times its own size.
pub const RESPONSE_MESSAGE_BYTES: usize = 64 << 10;

/// What is left of one response's [`RESPONSE_MESSAGE_BYTES`].
pub struct MessageBudget {
    left: usize,
}

impl Default for MessageBudget {
    fn default() -> Self {
        Self {
            left: RESPONSE_MESSAGE_BYTES,
        }
    }
}

impl MessageBudget {
    /// `message` while it fits in what is left (taking its bytes), else None.
    pub fn admit(&mut self, message: Option<String>) -> Option<String> {
        let message = message?;
        let bytes = message.len();
        (bytes <= self.left).then(|| {
            self.left -= bytes;
            message
        })
    }
}

/// The Kafka error code a rejection is answered with.
pub trait KafkaCode {
    fn code(&self) -> ErrorCode;
}

/// A topic that cannot be produced to or described (behaviour.md "Topics").
impl KafkaCode for TopicError {
    fn code(&self) -> ErrorCode {
        match self {
            TopicError::InvalidName(_) => ErrorCode::InvalidTopicException,
            TopicError::UnknownDatabase(_) | TopicError::UnknownTable(_) => {
                ErrorCode::UnknownTopicOrPartition
            }
            TopicError::MappingDisabled(_) | TopicError::Ineligible { .. } => {
                ErrorCode::InvalidTopicException
            }
        }
    }
}

/// The message a producer gets for a topic that does not resolve. A disabled mapping names
/// the table option that is false and how to turn it on; the rest use the error's own text.
pub fn topic_error_message(error: &TopicError) -> String {
    match error {
        TopicError::MappingDisabled(table) => format!(
            "'table.kafka.enabled' is false for table '{table}': Kafka producers cannot write to it (ALTER TABLE {table} SET ('table.kafka.enabled' = 'true') allows it)"
        ),
        other => other.to_string(),
    }
}

/// behaviour.md "Produce", per-partition table. Wire-level faults use the protocol crate's
/// classification (`RecordBatchError::error_code`: legacy magic → UNSUPPORTED_FOR_MESSAGE_FORMAT,
/// CRC mismatch or a broken batch frame → CORRUPT_MESSAGE, decompressed size over the limit →
/// MESSAGE_TOO_LARGE, malformed records → INVALID_RECORD).
impl KafkaCode for BatchRejection {
    fn code(&self) -> ErrorCode {
        match self {
            BatchRejection::Empty => ErrorCode::InvalidRecord,
            BatchRejection::Wire(error) => error.error_code(),
            BatchRejection::Transactional | BatchRejection::Control => ErrorCode::InvalidRequest,
            BatchRejection::RecordTooLarge { .. } | BatchRejection::IndexTooLarge { .. } => {
                ErrorCode::MessageTooLarge
            }
        }
    }
}

/// behaviour.md "Idempotent producers", as Kafka's broker answers (`ProducerAppendInfo`): an
/// older epoch is INVALID_PRODUCER_EPOCH (not the fatal PRODUCER_FENCED, since Kafka 2.7), a
/// gap or a new epoch not starting at 0 is OUT_OF_ORDER_SEQUENCE_NUMBER, a negative epoch or
/// base sequence is INVALID_RECORD (Kafka's `LogValidator`). An unknown producer is never
/// refused (no UNKNOWN_PRODUCER_ID: Kafka ≥ 2.5 accepts it at any sequence, KIP-360).
impl KafkaCode for SequenceError {
    fn code(&self) -> ErrorCode {
        match self {
            SequenceError::StaleEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            SequenceError::OutOfOrder { .. } | SequenceError::NewEpochNotAtZero { .. } => {
                ErrorCode::OutOfOrderSequenceNumber
            }
            SequenceError::Invalid { .. } => ErrorCode::InvalidRecord,
        }
    }
}

/// A job that appended nothing. Storage failures (and a core that cannot take the job) are
/// KAFKA_STORAGE_ERROR: nothing of the batch is visible, and the producer may retry.
impl KafkaCode for AppendError {
    fn code(&self) -> ErrorCode {
        match self {
            AppendError::Batch(rejection) => rejection.code(),
            AppendError::Sequence(error) => error.code(),
            // A record that does not convert: INVALID_RECORD with its `record_errors` entry.
            AppendError::Convert(_) => ErrorCode::InvalidRecord,
            AppendError::Plan(_) => ErrorCode::InvalidTopicException,
            AppendError::TableDropped(_) => ErrorCode::UnknownTopicOrPartition,
            AppendError::Open(_)
            | AppendError::Storage(_)
            | AppendError::ShuttingDown
            | AppendError::BucketClosed
            | AppendError::NotOpen
            | AppendError::OwnerUnreachable
            | AppendError::WriterStopped => ErrorCode::KafkaStorageError,
        }
    }
}

/// A Produce request refused as a whole: every partition gets the same answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestRejection {
    #[error("Produce v0-2 (message sets of magic 0/1) is not supported: record batches (magic 2, Produce v3+) are")]
    LegacyVersion,
    #[error("transactions are not supported: do not set transactional.id (idempotent producers need none)")]
    Transactional,
    #[error("acks must be -1 (all), 0 or 1")]
    InvalidAcks,
    #[error("the request names the same topic partition twice")]
    DuplicatePartition,
}

impl KafkaCode for RequestRejection {
    fn code(&self) -> ErrorCode {
        match self {
            RequestRejection::LegacyVersion => ErrorCode::UnsupportedForMessageFormat,
            RequestRejection::Transactional | RequestRejection::DuplicatePartition => {
                ErrorCode::InvalidRequest
            }
            RequestRejection::InvalidAcks => ErrorCode::InvalidRequiredAcks,
        }
    }
}

/// A Produce partition refused on the connection's core, before it is routed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PartitionRejection {
    #[error("{}", topic_error_message(.0))]
    Topic(#[source] TopicError),
    #[error("partition {0} is negative")]
    NegativePartition(i32),
    #[error("topic {topic} has {partitions} partitions (the table's buckets); partition {partition} does not exist")]
    NoSuchPartition {
        topic: String,
        partitions: u32,
        partition: i32,
    },
    #[error("{principal} may not WRITE to {database}.{table}")]
    NotAuthorized {
        principal: String,
        database: String,
        table: String,
    },
    #[error("a partition of a Produce request carries exactly one record batch (as Kafka requires from v3); this one has {0} more bytes after its first")]
    SeveralBatches(usize),
}

impl KafkaCode for PartitionRejection {
    fn code(&self) -> ErrorCode {
        match self {
            PartitionRejection::Topic(error) => error.code(),
            PartitionRejection::NegativePartition(_) => ErrorCode::InvalidRequest,
            PartitionRejection::NoSuchPartition { .. } => ErrorCode::UnknownTopicOrPartition,
            PartitionRejection::NotAuthorized { .. } => ErrorCode::TopicAuthorizationFailed,
            PartitionRejection::SeveralBatches(_) => ErrorCode::InvalidRecord,
        }
    }
}

/// An InitProducerId request that gets no producer id.
#[derive(Debug, thiserror::Error)]
pub enum InitProducerIdRejection {
    #[error(
        "transactions are not supported: only idempotent producers (no transactional.id) get a producer id"
    )]
    Transactional,
    #[error("{principal} may not WRITE to any table, database or the cluster")]
    NotAuthorized { principal: String },
    #[error("{0}")]
    Ids(#[source] ProducerIdError),
}

impl InitProducerIdRejection {
    /// The key the refusal's log line is rate-limited under.
    pub fn reason(&self) -> &'static str {
        match self {
            InitProducerIdRejection::Transactional => "transactional",
            InitProducerIdRejection::NotAuthorized { .. } => "not authorized",
            InitProducerIdRejection::Ids(_) => "producer ids",
        }
    }
}

/// behaviour.md "Idempotent producers". A transactional id gets INVALID_TRANSACTION_TIMEOUT:
/// the InitProducerId response has no message field, so the code alone must stop the client,
/// and it is one that all three reference clients treat as fatal for InitProducerId (Java
/// kafka-clients `TransactionManager.InitProducerIdHandler`: any non-retriable code it does not
/// list is fatal, while since 3.3 it retries TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
/// CLUSTER_AUTHORIZATION_FAILED; librdkafka `rd_kafka_idemp_check_error`: fatal; franz-go
/// `doInitProducerID`: non-retriable, kept as the producer's error). The server logs that
/// transactions are not supported. Ids that cannot be reserved (the data dir cannot be
/// written) are KAFKA_STORAGE_ERROR, which clients retry.
impl KafkaCode for InitProducerIdRejection {
    fn code(&self) -> ErrorCode {
        match self {
            InitProducerIdRejection::Transactional => ErrorCode::InvalidTransactionTimeout,
            InitProducerIdRejection::NotAuthorized { .. } => ErrorCode::ClusterAuthorizationFailed,
            InitProducerIdRejection::Ids(_) => ErrorCode::KafkaStorageError,
        }
    }
}

/// A Metadata topic entry that cannot be described.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TopicLookupRejection {
    #[error("{0}")]
    Topic(#[source] TopicError),
    /// The principal may not DESCRIBE it (whether it exists or not, as Kafka answers).
    #[error("not authorized to describe the topic")]
    NotAuthorized,
    /// Lookups by topic id are not served.
    #[error("unknown topic id")]
    UnknownTopicId,
}

impl KafkaCode for TopicLookupRejection {
    fn code(&self) -> ErrorCode {
        match self {
            TopicLookupRejection::Topic(error) => error.code(),
            TopicLookupRejection::NotAuthorized => ErrorCode::TopicAuthorizationFailed,
            TopicLookupRejection::UnknownTopicId => ErrorCode::UnknownTopicId,
        }
    }
}

/// The SASL state machine's verdicts (`kafluss_auth`) as Kafka codes.
impl KafkaCode for SaslErrorCode {
    fn code(&self) -> ErrorCode {
        match self {
            SaslErrorCode::None => ErrorCode::None,
            SaslErrorCode::UnsupportedSaslMechanism => ErrorCode::UnsupportedSaslMechanism,
            SaslErrorCode::IllegalSaslState => ErrorCode::IllegalSaslState,
            SaslErrorCode::UnsupportedVersion => ErrorCode::UnsupportedVersion,
            SaslErrorCode::SaslAuthenticationFailed => ErrorCode::SaslAuthenticationFailed,
        }
    }
}

/// ApiVersions v3+ with client software fields that are not valid.
pub const INVALID_CLIENT_SOFTWARE: ErrorCode = ErrorCode::InvalidRequest;
/// CreateTopics and DeleteTopics: tables are created and dropped through Fluss SQL.
pub const TOPIC_ADMIN_REFUSED: ErrorCode = ErrorCode::PolicyViolation;
/// A known API at a version outside the registry.
pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode::UnsupportedVersion;

#[cfg(test)]
mod tests {
    use kafluss_protocol::RecordBatchError;

    use super::*;

    #[test]
    fn messages_are_bounded_on_char_boundaries() {
        let long = "é".repeat(2000);
        let bounded = bounded_message(long);
        assert!(bounded.len() <= MAX_ERROR_MESSAGE);
        assert!(bounded.ends_with("..."));
        assert_eq!(bounded_message("short"), "short");
    }

    #[test]
    fn a_disabled_mapping_names_the_option_that_is_false() {
        let message = topic_error_message(&TopicError::MappingDisabled("fluss.t".into()));
        assert!(
            message.contains("'table.kafka.enabled' is false for table 'fluss.t'"),
            "{message}"
        );
        assert_eq!(
            topic_error_message(&TopicError::UnknownTable("fluss.x".into())),
            "table 'fluss.x' does not exist"
        );
        assert_eq!(
            PartitionRejection::Topic(TopicError::MappingDisabled("fluss.t".into())).to_string(),
            message
        );
    }

    #[test]
    fn batch_rejections_follow_behaviour_md() {
        assert_eq!(
            BatchRejection::Wire(RecordBatchError::CrcMismatch {
                expected: 1,
                computed: 2
            })
            .code(),
            ErrorCode::CorruptMessage
        );
        assert_eq!(
            BatchRejection::Wire(RecordBatchError::LegacyMagic(1)).code(),
            ErrorCode::UnsupportedForMessageFormat
        );
        assert_eq!(BatchRejection::Transactional.code(), ErrorCode::InvalidRequest);
        assert!(BatchRejection::Transactional
            .to_string()
            .contains("transactional batches are not supported"));
        assert!(!BatchRejection::Control.to_string().contains("idempotence"));
        assert_eq!(
            BatchRejection::RecordTooLarge { size: 2, limit: 1 }.code(),
            ErrorCode::MessageTooLarge
        );
        assert_eq!(BatchRejection::Empty.code(), ErrorCode::InvalidRecord);
        let several = PartitionRejection::SeveralBatches(61);
        assert_eq!(several.code(), ErrorCode::InvalidRecord);
        assert!(
            several.to_string().contains("exactly one record batch"),
            "{several}"
        );
    }

    #[test]
    fn append_failures_that_are_not_the_records_fault_are_storage_errors() {
        assert_eq!(AppendError::ShuttingDown.code(), ErrorCode::KafkaStorageError);
        assert_eq!(AppendError::OwnerUnreachable.code(), ErrorCode::KafkaStorageError);
        assert_eq!(
            AppendError::TableDropped("fluss.t".into()).code(),
            ErrorCode::UnknownTopicOrPartition
        );
        assert_eq!(
            AppendError::Batch(BatchRejection::Control).code(),
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn sasl_codes_keep_their_kafka_numbers() {
        for code in [
            SaslErrorCode::None,
            SaslErrorCode::UnsupportedSaslMechanism,
            SaslErrorCode::IllegalSaslState,
            SaslErrorCode::UnsupportedVersion,
            SaslErrorCode::SaslAuthenticationFailed,
        ] {
            assert_eq!(KafkaCode::code(&code), ErrorCode::from(code.code()));
        }
    }
}
