//! Which core owns a bucket.
//!
//! Rule (docs/architecture.md): `owner = (mix(table_id) + bucket) % cores`, where `mix` is a
//! fixed 64-bit finalizer (SplitMix64). Consecutive buckets of one table land on consecutive
//! cores, so a table's buckets spread evenly; `mix` keeps different tables from all starting on
//! core 0. The rule depends only on (table_id, bucket, cores): every core computes the same
//! answer from its own copy, with no shared table and no lock.

/// SplitMix64 finalizer: a cheap, well-distributed, stable mix of the table id.
fn mix(table_id: u64) -> u64 {
    let mut z = table_id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The core that owns bucket `bucket` of table `table_id` when `cores` cores serve.
pub fn owner_core(table_id: u64, bucket: u32, cores: usize) -> usize {
    let cores = cores.max(1) as u64;
    ((mix(table_id) % cores + u64::from(bucket) % cores) % cores) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_in_range() {
        for cores in 1..8 {
            for table in 0..50 {
                for bucket in 0..20 {
                    let owner = owner_core(table, bucket, cores);
                    assert!(owner < cores);
                    assert_eq!(owner, owner_core(table, bucket, cores));
                }
            }
        }
        assert_eq!(owner_core(7, 3, 1), 0);
    }

    #[test]
    fn a_tables_buckets_cover_every_core() {
        for cores in 1..6 {
            let mut seen = vec![false; cores];
            for bucket in 0..cores as u32 {
                seen[owner_core(42, bucket, cores)] = true;
            }
            assert!(seen.iter().all(|s| *s), "cores={cores}");
        }
    }
}
