//! `(table_id, bucket) → Arc<BucketStats>`: how threads other than the owner core (the admin
//! HTTP thread) learn high watermarks and log start offsets.
//!
//! The map is only touched when a bucket is opened or a table dropped, and by HTTP reads; the
//! append path holds its own `Arc<BucketStats>` and never looks here, so a plain `RwLock`
//! stays off the hot path.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use super::BucketStats;

#[derive(Debug, Default)]
pub struct LogRegistry {
    buckets: RwLock<BTreeMap<(u64, u32), Arc<BucketStats>>>,
}

impl LogRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The stats of a bucket, created empty on first use; pass them to `BucketLog::open`.
    pub fn register(&self, table_id: u64, bucket: u32) -> Arc<BucketStats> {
        let mut buckets = self
            .buckets
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        buckets.entry((table_id, bucket)).or_default().clone()
    }

    pub fn get(&self, table_id: u64, bucket: u32) -> Option<Arc<BucketStats>> {
        let buckets = self
            .buckets
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        buckets.get(&(table_id, bucket)).cloned()
    }

    /// The published high watermark (`next_offset`) of a bucket, once a core opened it.
    pub fn high_watermark(&self, table_id: u64, bucket: u32) -> Option<u64> {
        self.get(table_id, bucket)
            .and_then(|stats| stats.offsets())
            .map(|(_, next)| next)
    }

    /// Rows currently retained per opened bucket of a table: `(bucket, next - start)`.
    pub fn row_counts(&self, table_id: u64) -> Vec<(u32, u64)> {
        let buckets = self
            .buckets
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        buckets
            .range((table_id, 0)..=(table_id, u32::MAX))
            .filter_map(|(&(_, bucket), stats)| {
                let (start, next) = stats.offsets()?;
                Some((bucket, next.saturating_sub(start)))
            })
            .collect()
    }

    /// Forgets every bucket of a dropped table, marking each one's stats dropped first
    /// ([`BucketStats::dropped`]): scans running over the table still hold them. Call it
    /// before the table's files are deleted, so a scan that finds a file gone can tell a DROP
    /// from retention.
    pub fn remove_table(&self, table_id: u64) {
        let mut buckets = self
            .buckets
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        buckets.retain(|&(id, _), stats| {
            if id == table_id {
                stats.dropped.store(true, Ordering::Release);
            }
            id != table_id
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_shares_one_stats_per_bucket_and_remove_forgets_a_table() {
        let registry = LogRegistry::new();
        let a = registry.register(1, 0);
        let b = registry.register(1, 0);
        assert!(Arc::ptr_eq(&a, &b));
        a.next_offset.store(10, Ordering::Release);
        a.log_start_offset.store(4, Ordering::Release);
        // Not opened yet: the numbers are not published.
        assert_eq!(registry.high_watermark(1, 0), None);
        a.opened.store(true, Ordering::Release);
        let b = registry.register(1, 1);
        b.next_offset.store(3, Ordering::Release);
        b.opened.store(true, Ordering::Release);
        let c = registry.register(2, 0);
        c.next_offset.store(99, Ordering::Release);
        c.opened.store(true, Ordering::Release);
        assert_eq!(registry.high_watermark(1, 0), Some(10));
        assert_eq!(registry.row_counts(1), vec![(0, 6), (1, 3)]);
        assert!(!a.dropped() && !c.dropped());
        registry.remove_table(1);
        assert!(a.dropped() && b.dropped(), "stats still held see the drop");
        assert!(!c.dropped());
        assert_eq!(registry.high_watermark(1, 0), None);
        assert_eq!(registry.high_watermark(2, 0), Some(99));
    }
}
