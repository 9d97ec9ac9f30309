//! Turning one partition batch into rows of a bucket log, on the core that owns the bucket.
//!
//! - this file: the job ([`AppendJob`]) and its outcome ([`AppendOutcome`]: [`Appended`] or a
//!   typed [`AppendError`]; `kafka::errors` maps it to a Kafka error code), and the two seams
//!   the layers above plug into: [`Submit`] (hand a job to whoever appends it) and [`Reply`]
//!   (where an outcome goes).
//! - [`pipeline`]: parse → convert → append → (group commit) for one job, taking only what it
//!   uses ([`pipeline::Appender`]: configuration, log registry, plan cache, telemetry).
//! - [`bucket`]: the bucket actors of one core (one task per open bucket, fed by a bounded
//!   queue), opening, closing and dropping them.
//! - [`plan_cache`]: compiled conversion plans per table revision.
//!
//! Nothing here knows about sockets, the Kafka wire format of responses or the cross-core mesh.

pub mod bucket;
pub mod pipeline;
pub mod plan_cache;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use glommio::channels::local_channel::{LocalReceiver, LocalSender};
use kafluss_convert::ConvertError;
use kafluss_protocol::RecordBatchError;

use crate::catalog::model::TableInfo;
use crate::log::LogError;
use crate::producer::state::SequenceError;

pub use plan_cache::PlanError;

/// One partition's batch, owned, on its way to the bucket's owner core.
pub struct AppendJob {
    pub table: Arc<TableInfo>,
    pub bucket: u32,
    /// The Kafka partition as requested (= bucket); stored in `_kafka_metadata.partition`.
    pub partition: i32,
    /// The partition's `records` field, still compressed, sliced from the request frame.
    pub records: Option<Bytes>,
    /// -1 waits for group commit; 0 and 1 answer after the write.
    pub acks: i16,
    /// The topic was named without its database (`orders`, not `fluss.orders`): an idempotent
    /// producer's sequences through each name are apart ([`crate::producer::state::ProducerKey`]).
    pub bare_topic: bool,
}

/// Rows that reached the log (or, for a retried idempotent batch, the rows it stored before:
/// `rows` is then 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: u64,
    pub log_start_offset: u64,
    pub rows: u64,
}

/// What became of one job.
pub type AppendOutcome = Result<Appended, AppendError>;

/// Why a partition's records were refused before conversion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchRejection {
    #[error("the partition carries no records")]
    Empty,
    /// The wire batch itself: framing, CRC, magic, counts, varints, decompression.
    #[error("{0}")]
    Wire(#[source] RecordBatchError),
    #[error("transactional batches are not supported: kafluss takes idempotent producers but not transactions (do not set transactional.id)")]
    Transactional,
    #[error("control batches are not supported: they belong to transactions, which kafluss does not support (do not set transactional.id)")]
    Control,
    #[error("record of {size} bytes is larger than kafka.max-record-size ({limit} bytes)")]
    RecordTooLarge { size: usize, limit: usize },
    /// The index the server builds of a partition's records (a span per record and per
    /// header) would take more than its bound: many tiny records or empty headers, which a
    /// small compressed batch can carry by the million.
    #[error(
        "the partition's records and headers need more than kafka.max-request-size ({limit} bytes) \
         of index ({record_bytes} bytes a record, {header_bytes} a header): the bound was passed at \
         {records} records and {headers} headers"
    )]
    IndexTooLarge {
        records: usize,
        headers: usize,
        limit: usize,
        record_bytes: usize,
        header_bytes: usize,
    },
}

/// Why nothing of a job was appended. Every variant keeps its cause; the Kafka error code of
/// each is chosen in `kafka::errors`.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The bucket log could not be opened (or recovered).
    #[error("{0}")]
    Open(#[source] LogError),
    /// The table has no usable conversion plan.
    #[error("{0}")]
    Plan(#[source] PlanError),
    #[error("{0}")]
    Batch(#[source] BatchRejection),
    /// An idempotent batch out of sequence or of an old producer epoch.
    #[error("{0}")]
    Sequence(#[source] SequenceError),
    /// A record does not convert; its index and JSON path are in the error, with the later
    /// records of its batch that do not convert either.
    #[error("{0}")]
    Convert(#[source] Box<RecordErrors>),
    /// Writing or syncing the log failed.
    #[error("{0}")]
    Storage(#[source] LogError),
    #[error("table {0} was dropped")]
    TableDropped(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the bucket was closed")]
    BucketClosed,
    #[error("bucket not open")]
    NotOpen,
    #[error("the owner core is not reachable")]
    OwnerUnreachable,
    #[error("the bucket writer stopped")]
    WriterStopped,
}

/// Bytes of paths and reasons of the records found not to convert after the first of a
/// batch, past which no more are looked for: a Produce answer carries 64 KiB of messages in all
/// (`kafka::errors::RESPONSE_MESSAGE_BYTES`), so records found beyond it would be listed
/// without their reasons.
pub const RECORD_ERRORS_BYTES: usize = 64 << 10;

/// The records of one batch that do not convert: the first, which refuses the batch, and the
/// ones after it that do not convert either (each checked on its own), as Kafka lists every
/// invalid record of a batch in `record_errors`.
#[derive(Debug, thiserror::Error)]
#[error("{first}")]
pub struct RecordErrors {
    #[source]
    pub first: ConvertError,
    /// In record order; their paths and reasons take at most about [`RECORD_ERRORS_BYTES`].
    pub more: Vec<ConvertError>,
}

/// Where a bucket actor sends an outcome.
pub trait Reply: 'static {
    fn send(self, outcome: AppendOutcome) -> impl Future<Output = ()>;
}

/// A local answer: the receiver is on this core.
impl Reply for LocalSender<AppendOutcome> {
    async fn send(self, outcome: AppendOutcome) {
        let _ = self.try_send(outcome);
    }
}

/// Hands a job to the core that owns its bucket.
pub trait Submit {
    /// Queues `job` on its bucket's owner and returns where its outcome will arrive. The job is
    /// queued when the future resolves, so calling it in request order appends in request
    /// order; it waits only while the owner's queue is full (backpressure).
    fn submit(&self, job: AppendJob) -> Pin<Box<dyn Future<Output = LocalReceiver<AppendOutcome>> + '_>>;

    /// The core that owns `bucket` of `table_id`, once a job of it was submitted on this core.
    fn owner_of(&self, table_id: u64, bucket: u32) -> Option<usize>;
}

#[cfg(test)]
pub(crate) mod tests;
