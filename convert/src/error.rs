//! Errors of plan compilation and record conversion.
//!
//! A `ConvertError` travels to the Kafka client inside `record_errors` and the partition's
//! `error_message`, so its `Display` is bounded: at most [`MAX_MESSAGE_BYTES`] bytes whatever
//! the input (long paths and reasons are shortened in the middle, quoted values are truncated).

use std::fmt;

/// Upper bound of `ConvertError::to_string().len()` (behaviour.md: error messages ≤ 1 KiB).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Longest rendered path kept in an error; longer ones keep their head and tail.
const MAX_PATH_BYTES: usize = 480;
/// Longest reason kept in an error.
const MAX_REASON_BYTES: usize = 480;
/// Longest quoted JSON value or key inside a path or reason.
pub(crate) const MAX_QUOTED_CHARS: usize = 64;

/// A table schema and mapping that cannot be compiled into a conversion plan. The catalog's
/// validation normally rules all of these out; the plan checks again so that it never relies
/// on an unchecked assumption.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("column `{column}` referenced by the Kafka mapping does not exist (index {index})")]
    MissingColumn { column: &'static str, index: usize },
    #[error("{path}: {data_type} is not allowed here: {rule}")]
    WrongType {
        path: String,
        data_type: String,
        rule: &'static str,
    },
    #[error("{path}: must be nullable so that a missing or unconvertible value can be null")]
    NotNullable { path: String },
    #[error("{path}: MAP keys must be STRING NOT NULL, got {data_type}")]
    MapKey { path: String, data_type: String },
    #[error("flat JSON layout needs at least one business column")]
    NoBusinessColumn,
    #[error("{path}: nesting deeper than {limit} levels")]
    TooDeep { path: String, limit: usize },
    #[error("value conversion {value_type} needs the `_kafka_value` column")]
    MissingValueColumn { value_type: &'static str },
    #[error("column `{column}` is neither a system column nor allowed by the {layout} mapping")]
    UnexpectedColumn { column: String, layout: &'static str },
}

/// One record of a partition batch could not be converted; the whole batch is refused.
///
/// `Display`: `record 3: $.customer.items[2].qty: expected INT, got string "x"`, or without a
/// path (whole-value failures) `record 0: invalid JSON: ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConvertError {
    /// Index of the record in its partition batch (Kafka `batch_index`).
    pub record_index: usize,
    /// JSON path below `$`, e.g. `customer.items[2].qty`; empty for whole-record failures.
    pub path: String,
    /// Why the value was refused.
    pub reason: String,
}

impl ConvertError {
    /// Builds an error, shortening `path` and `reason` so that the message stays bounded.
    pub fn new(record_index: usize, path: String, reason: String) -> Self {
        Self {
            record_index,
            path: shorten_middle(path, MAX_PATH_BYTES),
            reason: shorten_middle(reason, MAX_REASON_BYTES),
        }
    }
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {}: ", self.record_index)?;
        if !self.path.is_empty() {
            crate::path::write_rooted(f, &self.path)?;
            f.write_str(": ")?;
        }
        f.write_str(&self.reason)
    }
}

/// Keeps the head and tail of `text` with `…` between when it is over `limit` bytes.
fn shorten_middle(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let keep = (limit - 3) / 2;
    let mut head_end = keep;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - keep;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!("{}…{}", &text[..head_end], &text[tail_start..])
}

/// Renders `value` as a JSON string literal of at most [`MAX_QUOTED_CHARS`] characters,
/// ending in `…` when truncated.
pub(crate) fn quote_truncated(value: &str) -> String {
    let end = value
        .char_indices()
        .nth(MAX_QUOTED_CHARS)
        .map_or(value.len(), |(at, _)| at);
    let mut out = String::with_capacity(end + 8);
    crate::rescue::push_string(&mut out, &value[..end]);
    if end < value.len() {
        // Inside the closing quote.
        out.insert(out.len() - 1, '…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_record_path_and_reason() {
        let e = ConvertError::new(
            3,
            "customer.items[2].qty".into(),
            "expected INT, got string \"x\"".into(),
        );
        assert_eq!(
            e.to_string(),
            "record 3: $.customer.items[2].qty: expected INT, got string \"x\""
        );
        let e = ConvertError::new(0, String::new(), "invalid JSON".into());
        assert_eq!(e.to_string(), "record 0: invalid JSON");
        let e = ConvertError::new(1, "[\"k\"]".into(), "r".into());
        assert_eq!(e.to_string(), "record 1: $[\"k\"]: r");
    }

    #[test]
    fn messages_never_exceed_one_kib() {
        let e = ConvertError::new(usize::MAX, "é".repeat(5000), "ü".repeat(5000));
        let text = e.to_string();
        assert!(text.len() <= MAX_MESSAGE_BYTES, "{} bytes", text.len());
        assert!(text.contains('…'));
    }

    #[test]
    fn quoted_values_are_truncated() {
        let q = quote_truncated(&"x".repeat(1000));
        assert_eq!(q.chars().count(), MAX_QUOTED_CHARS + 3);
        assert!(q.ends_with("…\""));
        assert_eq!(quote_truncated("a\"b"), r#""a\"b""#);
    }
}
