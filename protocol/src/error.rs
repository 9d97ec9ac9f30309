//! Typed decode and encode errors of the wire layer. Kafka error codes live apart in
//! [`crate::ErrorCode`]; which code (or a closed connection) answers which error is decided by
//! the broker, except for record-batch errors, whose mapping `behaviour.md` fixes and
//! this crate offers as [`crate::RecordBatchError::error_code`].

use crate::ApiKey;

/// A request, response or header could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the message did.
    #[error("input ended early")]
    Truncated,
    /// An array announced more elements than the remaining input could possibly hold.
    #[error("array of {count} elements cannot fit in the {remaining} remaining bytes")]
    ArrayTooLong {
        /// The announced element count.
        count: usize,
        /// Bytes left in the input.
        remaining: usize,
    },
    /// A request named more entries (a Produce request's topics and partitions) than its
    /// decoder was allowed to take.
    #[error("more than {limit} topics and partitions")]
    TooManyEntries {
        /// The bound.
        limit: usize,
    },
    /// A varint ran past its maximum length or value range.
    #[error("malformed varint")]
    MalformedVarint,
    /// A string field was not valid UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A field that may not be null was null.
    #[error("field {0} may not be null")]
    UnexpectedNull(&'static str),
    /// Tagged fields were not in strictly increasing tag order.
    #[error("tagged field {tag} out of order")]
    TagOrder {
        /// The offending tag.
        tag: u32,
    },
    /// A known tagged field did not consume exactly its announced size.
    #[error("tagged field {tag} is malformed")]
    MalformedTaggedField {
        /// The tag.
        tag: u32,
    },
    /// Bytes were left over after the message body.
    #[error("{0} trailing bytes after the message")]
    TrailingBytes(usize),
    /// The API is known but this crate does not decode it at this version.
    #[error("{api_key} version {version} is not supported")]
    UnsupportedVersion {
        /// The API.
        api_key: ApiKey,
        /// The requested version.
        version: i16,
    },
    /// The API key has no decoder in this crate.
    #[error("{0} is not supported")]
    UnsupportedApi(ApiKey),
    /// A low-level parser failed in a way not covered above.
    #[error("malformed input ({0:?})")]
    Malformed(nom::error::ErrorKind),
}

impl<'a> nom::error::ParseError<&'a [u8]> for DecodeError {
    fn from_error_kind(_input: &'a [u8], kind: nom::error::ErrorKind) -> Self {
        match kind {
            nom::error::ErrorKind::Eof | nom::error::ErrorKind::Complete => DecodeError::Truncated,
            other => DecodeError::Malformed(other),
        }
    }

    fn append(_input: &'a [u8], _kind: nom::error::ErrorKind, other: Self) -> Self {
        other
    }
}

impl From<nom::Err<DecodeError>> for DecodeError {
    fn from(err: nom::Err<DecodeError>) -> Self {
        match err {
            nom::Err::Incomplete(_) => DecodeError::Truncated,
            nom::Err::Error(e) | nom::Err::Failure(e) => e,
        }
    }
}

/// A message could not be encoded at the requested version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// This crate does not encode this API at this version.
    #[error("{api_key} version {version} cannot be encoded")]
    UnsupportedVersion {
        /// The API.
        api_key: ApiKey,
        /// The requested version.
        version: i16,
    },
    /// A string or byte field is longer than its length prefix can express.
    #[error("field {field} is {len} bytes, over the wire limit")]
    TooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A value cannot be expressed at this version (e.g. a null where the version has none).
    #[error("field {field} cannot be encoded at version {version}: {reason}")]
    NotRepresentable {
        /// Which field.
        field: &'static str,
        /// The version being encoded.
        version: i16,
        /// Why.
        reason: &'static str,
    },
}

/// Decoding result of the hand-written nom parsers.
pub(crate) type PResult<'a, T> = nom::IResult<&'a [u8], T, DecodeError>;

/// Fails the parse with `err` (a non-recoverable nom error).
pub(crate) fn fail<T>(err: DecodeError) -> Result<T, nom::Err<DecodeError>> {
    Err(nom::Err::Failure(err))
}
