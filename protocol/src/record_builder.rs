//! Record batch encoder (magic 2, any codec): for the bench client and tests.

use bytes::{BufMut, Bytes, BytesMut};

use crate::compression::{compress, Compression, CompressionError};
use crate::primitives::{put_varint, put_varlong, varint_len, varlong_len};
use crate::record_batch::{BatchAttributes, TimestampType, BATCH_LENGTH_PREFIX, RECORD_BATCH_HEADER_LEN};

/// Builds one record batch. Records get consecutive offset deltas from 0; the first record's
/// timestamp becomes the base timestamp.
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    compression: Compression,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    count: i32,
    records: BytesMut,
}

impl RecordBatchBuilder {
    /// An empty batch compressed with `compression`; non-idempotent producer (id -1), CreateTime.
    pub fn new(compression: Compression) -> Self {
        Self {
            compression,
            timestamp_type: TimestampType::CreateTime,
            transactional: false,
            control: false,
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            base_timestamp: None,
            max_timestamp: -1,
            count: 0,
            records: BytesMut::new(),
        }
    }

    /// Sets the producer id, epoch and base sequence (idempotent producers).
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets the transactional and control flags.
    pub fn flags(mut self, transactional: bool, control: bool) -> Self {
        self.transactional = transactional;
        self.control = control;
        self
    }

    /// Sets the timestamp type.
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    /// Sets the base offset (producers send 0).
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// Number of records appended so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True before the first record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of (uncompressed) records appended so far.
    pub fn records_size(&self) -> usize {
        self.records.len()
    }

    /// Appends a record. Header keys are strings on the wire, given here as bytes.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) {
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let timestamp_delta = timestamp.wrapping_sub(base_timestamp);
        let offset_delta = self.count;
        let bytes_len =
            |value: Option<&[u8]>| value.map_or(varint_len(-1), |v| varint_len(v.len() as i32) + v.len());
        let body_len = 1
            + varlong_len(timestamp_delta)
            + varint_len(offset_delta)
            + bytes_len(key)
            + bytes_len(value)
            + varint_len(headers.len() as i32)
            + headers
                .iter()
                .map(|(k, v)| bytes_len(Some(k)) + bytes_len(*v))
                .sum::<usize>();
        let records = &mut self.records;
        records.reserve(body_len + 5);
        put_varint(records, body_len as i32);
        records.put_i8(0);
        put_varlong(records, timestamp_delta);
        put_varint(records, offset_delta);
        let mut put_bytes = |value: Option<&[u8]>| match value {
            None => put_varint(records, -1),
            Some(value) => {
                put_varint(records, value.len() as i32);
                records.put_slice(value);
            }
        };
        put_bytes(key);
        put_bytes(value);
        put_varint(records, headers.len() as i32);
        for (header_key, header_value) in headers {
            put_varint(records, header_key.len() as i32);
            records.put_slice(header_key);
            match header_value {
                None => put_varint(records, -1),
                Some(value) => {
                    put_varint(records, value.len() as i32);
                    records.put_slice(value);
                }
            }
        }
        self.count += 1;
    }

    /// Encodes the batch: header, CRC32C, (compressed) records.
    pub fn build(&self) -> Result<Bytes, CompressionError> {
        let records = compress(self.compression, &self.records)?;
        let mut out = BytesMut::with_capacity(RECORD_BATCH_HEADER_LEN + records.len());
        out.put_i64(self.base_offset);
        out.put_i32((RECORD_BATCH_HEADER_LEN - BATCH_LENGTH_PREFIX + records.len()) as i32);
        out.put_i32(self.partition_leader_epoch);
        out.put_i8(2);
        out.put_u32(0); // CRC, filled in below.
        let attributes = BatchAttributes::new(
            self.compression,
            self.timestamp_type,
            self.transactional,
            self.control,
        );
        out.put_i16(attributes.0);
        out.put_i32(self.count - 1);
        out.put_i64(self.base_timestamp.unwrap_or(-1));
        out.put_i64(self.max_timestamp);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.base_sequence);
        out.put_i32(self.count);
        out.put_slice(&records);
        let crc = crate::crc::crc32c(&out[21..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        Ok(out.freeze())
    }
}
