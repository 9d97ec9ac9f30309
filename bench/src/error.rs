//! The harness's one error type. Kafka answers that are not errors of the harness itself (a
//! partition answering NOT_LEADER, say) are counted in the results instead.

use std::io;

use kafluss_protocol::{CompressionError, DecodeError, EncodeError, ErrorCode, FrameError};

/// Everything that can stop a benchmark run or the null sink.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the peer.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A frame from the peer could not be decoded.
    #[error("{context}: cannot decode the answer: {source}")]
    Decode {
        /// What was being decoded.
        context: String,
        /// The underlying error.
        source: DecodeError,
    },
    /// A request could not be encoded (a field too long for its wire type).
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// The request.
        what: &'static str,
        /// The underlying error.
        source: EncodeError,
    },
    /// A batch could not be compressed.
    #[error("cannot compress a record batch: {0}")]
    Compress(#[from] CompressionError),
    /// The peer sent an impossible length prefix.
    #[error("{context}: bad frame: {source}")]
    Frame {
        /// The peer.
        context: String,
        /// The underlying error.
        source: FrameError,
    },
    /// The peer answered with a Kafka error where the harness cannot go on.
    #[error("{context}: the broker answered {code}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Broker {
        /// The request that failed.
        context: String,
        /// The Kafka error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
    },
    /// The peer does not offer an API version the harness can speak.
    #[error("{endpoint} does not support {api} in versions {min}..={max}")]
    NoCommonVersion {
        /// The broker.
        endpoint: String,
        /// The API name.
        api: &'static str,
        /// Lowest version the harness speaks.
        min: i16,
        /// Highest version the harness speaks.
        max: i16,
    },
    /// A response came back for another request than the oldest one in flight.
    #[error("{endpoint}: response correlation id {got} where {expected} was due")]
    OutOfOrder {
        /// The broker.
        endpoint: String,
        /// The id of the oldest request in flight.
        expected: i32,
        /// The id in the response.
        got: i32,
    },
    /// Metadata did not describe the topic usably.
    #[error("{endpoint}: metadata for topic {topic}: {reason}")]
    Metadata {
        /// The broker.
        endpoint: String,
        /// The topic.
        topic: String,
        /// What was wrong.
        reason: String,
    },
    /// The options given cannot make a run.
    #[error("invalid options: {0}")]
    Options(String),
    /// A worker thread panicked (a bug in the harness).
    #[error("a {0} thread panicked")]
    ThreadPanicked(&'static str),
}

impl BenchError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }
}
