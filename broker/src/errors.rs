//! The one place internal errors become Kafka error codes and messages.
//!
//! Handlers never pick a code for a failure themselves: they hand the typed error to a
//! function here, so the mapping of behaviour.md's tables lives in one file.

use kafluss_convert::ConvertError;
use kafluss_protocol::ErrorCode;
use kafluss_protocol::RecordBatchError;

use crate::catalog::resolve::TopicError;
use crate::log::LogError;

/// Longest error message a response carries (behaviour.md: ≤ 1 KiB each).
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// Cuts `message` to at most [`MAX_ERROR_MESSAGE`] bytes on a character boundary.
pub fn bounded_message(message: impl Into<String>) -> String {
    let mut message = message.into();
    if message.len() > MAX_ERROR_MESSAGE {
        let mut cut = MAX_ERROR_MESSAGE - 3;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...");
    }
    message
}

/// A topic that cannot be produced to or described (behaviour.md "Topics").
pub fn topic_error_code(error: &TopicError) -> ErrorCode {
    match error {
        TopicError::InvalidName(_) => ErrorCode::InvalidTopicException,
        TopicError::UnknownDatabase(_) | TopicError::UnknownTable(_) => ErrorCode::UnknownTopicOrPartition,
        TopicError::MappingDisabled(_) | TopicError::Ineligible { .. } => ErrorCode::InvalidTopicException,
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

/// A storage failure: nothing of the batch is visible.
pub fn log_error_code(_error: &LogError) -> ErrorCode {
    ErrorCode::KafkaStorageError
}

/// A record that does not convert: INVALID_RECORD with its `record_errors` entry.
pub fn convert_error_code(_error: &ConvertError) -> ErrorCode {
    ErrorCode::InvalidRecord
}

/// Why a partition's records were refused before conversion, as data (mapped in
/// [`batch_error_code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchRejection {
    #[error("the partition carries no records")]
    Empty,
    /// The wire batch itself: framing, CRC, magic, counts, varints, decompression.
    #[error("{0}")]
    Wire(RecordBatchError),
    #[error("idempotent or transactional producers are not supported: set enable.idempotence=false (and do not use transactions)")]
    Idempotent,
    #[error("control batches are not supported: set enable.idempotence=false (and do not use transactions)")]
    Control,
    #[error("record of {size} bytes is larger than kafka.max-record-size ({limit} bytes)")]
    RecordTooLarge { size: usize, limit: usize },
}

/// behaviour.md "Produce", per-partition table. Wire-level faults use the protocol crate's
/// classification (`RecordBatchError::error_code`: legacy magic → UNSUPPORTED_FOR_MESSAGE_FORMAT,
/// CRC mismatch or a broken batch frame → CORRUPT_MESSAGE, decompressed size over the limit →
/// MESSAGE_TOO_LARGE, malformed records → INVALID_RECORD).
pub fn batch_error_code(rejection: &BatchRejection) -> ErrorCode {
    match rejection {
        BatchRejection::Empty => ErrorCode::InvalidRecord,
        BatchRejection::Wire(error) => error.error_code(),
        BatchRejection::Idempotent | BatchRejection::Control => ErrorCode::InvalidRequest,
        BatchRejection::RecordTooLarge { .. } => ErrorCode::MessageTooLarge,
    }
}

#[cfg(test)]
mod tests {
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
    }

    #[test]
    fn batch_rejections_follow_behaviour_md() {
        assert_eq!(
            batch_error_code(&BatchRejection::Wire(RecordBatchError::CrcMismatch {
                expected: 1,
                computed: 2
            })),
            ErrorCode::CorruptMessage
        );
        assert_eq!(
            batch_error_code(&BatchRejection::Wire(RecordBatchError::LegacyMagic(1))),
            ErrorCode::UnsupportedForMessageFormat
        );
        assert_eq!(
            batch_error_code(&BatchRejection::Idempotent),
            ErrorCode::InvalidRequest
        );
        assert!(BatchRejection::Idempotent
            .to_string()
            .contains("enable.idempotence=false"));
        assert_eq!(
            batch_error_code(&BatchRejection::RecordTooLarge { size: 2, limit: 1 }),
            ErrorCode::MessageTooLarge
        );
        assert_eq!(batch_error_code(&BatchRejection::Empty), ErrorCode::InvalidRecord);
    }
}
