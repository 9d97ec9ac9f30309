//! Idempotent producers (KIP-98, KIP-360), as behaviour.md "Idempotent producers" describes:
//!
//! - [`ids`]: node-wide producer ids, unique across restarts (blocks reserved durably in
//!   `data.dir/producer-ids.next` before any id of them is handed out). InitProducerId
//!   (`kafka::init_producer_id`) asks it; any core may.
//! - [`state`]: the per-bucket sequence state (epoch and the last 5 batches of every producer),
//!   kept by the bucket's owner core, checked before each idempotent append and rebuilt from
//!   the tags the log stores with every batch ([`state::PRODUCERS_KEY`]).
//!
//! Nothing here does I/O on the append path or knows about Kafka error codes: rejections are
//! typed ([`state::SequenceError`]); `kafka::errors` maps them.

pub mod ids;
pub mod state;
