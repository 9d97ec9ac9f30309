//! The converter's input: one Kafka record as the broker decoded it, independent of the wire
//! crate so that benches and tests can build records directly.

/// One Kafka header: its key as raw bytes (a Kafka string, checked as UTF-8 only when the
/// table stores headers) and its value (`None` for a null header value).
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// The timestamp type of a record batch (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    /// `_kafka_metadata.timestamp_type` for a record with a timestamp: 0 or 1.
    pub fn code(self) -> i32 {
        match self {
            TimestampType::CreateTime => 0,
            TimestampType::LogAppendTime => 1,
        }
    }
}

/// Timestamp value meaning "no timestamp" (stored as a null timestamp with type -1).
pub const NO_TIMESTAMP: i64 = -1;

/// One record of a partition batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header<'a>],
    /// Epoch milliseconds to store, or [`NO_TIMESTAMP`]. With `LogAppendTime` the caller
    /// passes the append time here (the batch's timestamps are not stored then).
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    /// The partition the producer asked for (= the Fluss bucket).
    pub partition: i32,
}

impl<'a> KafkaRecord<'a> {
    /// A record with only a value: no key, no headers, no timestamp, partition 0.
    pub fn with_value(value: &'a [u8]) -> Self {
        Self {
            key: None,
            value: Some(value),
            headers: &[],
            timestamp: NO_TIMESTAMP,
            timestamp_type: TimestampType::CreateTime,
            partition: 0,
        }
    }

    /// Bytes this record brings into Arrow buffers at most (key, value, header keys and
    /// values); used to keep a batch's 32-bit Arrow offsets from overflowing.
    pub(crate) fn payload_len(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
            .sum();
        self.key.map_or(0, <[u8]>::len) + self.value.map_or(0, <[u8]>::len) + headers
    }
}
