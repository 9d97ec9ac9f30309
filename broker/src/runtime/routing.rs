//! Which core owns a bucket.
//!
//! A bucket's owner is chosen once, when the server first needs it, and kept until the table is
//! dropped or the server stops ([`BucketOwners`], one table shared by every core):
//!
//! - a bucket with data on disk at start-up belongs to the core the fixed rule
//!   [`owner_core`] names (`owner = (mix(table_id) + bucket) % cores`, where `mix` is a 64-bit
//!   finalizer, SplitMix64), so recovery spreads a table's buckets over the cores;
//! - any other bucket is claimed by the first core that routes a batch to it: that core takes
//!   it when it owns no more buckets than any other core, else the core owning the fewest
//!   (lowest index first) does. A connection that writes one bucket on a core that owns no more
//!   than the others thus appends without crossing cores; one connection writing many buckets
//!   still spreads them over every core.
//!
//! Each core keeps the answers it has seen, so the shared table (a mutex) is consulted once
//! per core and bucket.

use std::sync::Mutex;

use crate::idhash::IdMap;

/// SplitMix64 finalizer: a cheap, well-distributed, stable mix of the table id.
fn mix(table_id: u64) -> u64 {
    let mut z = table_id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The core the fixed rule gives bucket `bucket` of table `table_id` when `cores` cores serve
/// (the owner of a bucket recovered at start-up).
pub fn owner_core(table_id: u64, bucket: u32, cores: usize) -> usize {
    let cores = cores.max(1) as u64;
    ((mix(table_id) % cores + u64::from(bucket) % cores) % cores) as usize
}

/// The core that takes on one more bucket or connection, asked by core `me` when each core
/// carries `load[core]`: `me` while it carries no more than any other core, else the least
/// loaded core (lowest index first).
pub fn least_loaded(load: &[usize], me: usize) -> usize {
    let fewest = load.iter().copied().min().unwrap_or(0);
    match load.get(me) {
        Some(&mine) if mine <= fewest => me,
        _ => load.iter().position(|&n| n == fewest).unwrap_or(0),
    }
}

/// The owner of every bucket the server has used since it started, shared by the cores.
pub struct BucketOwners {
    inner: Mutex<Owners>,
}

struct Owners {
    owner: IdMap<(u64, u32), usize>,
    /// Buckets owned per core.
    owned: Vec<usize>,
}

impl BucketOwners {
    pub fn new(cores: usize) -> Self {
        Self {
            inner: Mutex::new(Owners {
                owner: IdMap::default(),
                owned: vec![0; cores.max(1)],
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        // Nothing panics while holding it; a poisoned table is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives `bucket` of `table_id` to the core of the fixed rule unless it has an owner (a
    /// bucket recovered at start-up); returns its owner.
    pub fn seed(&self, table_id: u64, bucket: u32) -> usize {
        self.owner_or(table_id, bucket, |owned| {
            owner_core(table_id, bucket, owned.len())
        })
    }

    /// The owner of `bucket` of `table_id`, if it has one.
    pub fn get(&self, table_id: u64, bucket: u32) -> Option<usize> {
        self.lock().owner.get(&(table_id, bucket)).copied()
    }

    /// The owner of `bucket` of `table_id`; when it has none, `core` (the one asking) claims
    /// it, or gives it to the core owning the fewest buckets when `core` owns more.
    pub fn claim(&self, table_id: u64, bucket: u32, core: usize) -> usize {
        self.owner_or(table_id, bucket, |owned| least_loaded(owned, core))
    }

    /// The owner of `bucket` of `table_id`; when it has none, the core `choose` picks from the
    /// buckets owned per core becomes its owner.
    fn owner_or(&self, table_id: u64, bucket: u32, choose: impl FnOnce(&[usize]) -> usize) -> usize {
        let mut guard = self.lock();
        let owners = &mut *guard;
        if let Some(&owner) = owners.owner.get(&(table_id, bucket)) {
            return owner;
        }
        let owner = choose(&owners.owned);
        owners.owner.insert((table_id, bucket), owner);
        owners.owned[owner] += 1;
        owner
    }

    /// Forgets the owners of a dropped table's buckets.
    pub fn forget_table(&self, table_id: u64) {
        let mut guard = self.lock();
        let owners = &mut *guard;
        let Owners { owner, owned } = owners;
        owner.retain(|&(id, _), &mut core| {
            if id == table_id {
                owned[core] -= 1;
            }
            id != table_id
        });
    }
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

    #[test]
    fn the_asking_core_takes_it_unless_another_carries_less() {
        assert_eq!(least_loaded(&[0, 0], 1), 1);
        assert_eq!(least_loaded(&[3, 3, 3], 2), 2);
        assert_eq!(least_loaded(&[1, 0], 0), 1);
        assert_eq!(
            least_loaded(&[2, 1, 1], 0),
            1,
            "lowest index among the least loaded"
        );
        assert_eq!(least_loaded(&[0, 5, 0], 1), 0);
        assert_eq!(least_loaded(&[4], 0), 0);
    }

    #[test]
    fn a_core_claims_what_it_writes_while_it_owns_no_more_than_the_others() {
        let owners = BucketOwners::new(2);
        // Two connections on different cores, each writing its own bucket: both stay local.
        assert_eq!(owners.claim(1, 0, 0), 0);
        assert_eq!(owners.claim(1, 1, 1), 1);
        // Answers do not change, whoever asks.
        assert_eq!(owners.claim(1, 0, 1), 0);
        assert_eq!(owners.claim(1, 1, 0), 1);
        assert_eq!(owners.get(1, 1), Some(1));
        assert_eq!(owners.get(1, 2), None);
    }

    #[test]
    fn one_core_writing_many_buckets_spreads_them() {
        let owners = BucketOwners::new(3);
        let claimed: Vec<usize> = (0..6).map(|bucket| owners.claim(9, bucket, 1)).collect();
        assert_eq!(claimed, vec![1, 0, 2, 1, 0, 2]);
    }

    #[test]
    fn seeded_buckets_follow_the_fixed_rule_and_count() {
        let owners = BucketOwners::new(2);
        let seeded = owners.seed(5, 0);
        assert_eq!(seeded, owner_core(5, 0, 2));
        assert_eq!(owners.seed(5, 0), seeded, "seeding twice changes nothing");
        // The seeded core owns one bucket, so the other core gets the next claim of it.
        assert_eq!(owners.claim(6, 0, seeded), 1 - seeded);
    }

    #[test]
    fn dropping_a_table_gives_its_share_back() {
        let owners = BucketOwners::new(2);
        assert_eq!(owners.claim(1, 0, 0), 0);
        assert_eq!(owners.claim(1, 1, 0), 1);
        assert_eq!(owners.claim(2, 0, 1), 1);
        // Core 1 owns 2 buckets, core 0 one: without the drop, core 1's next claim would go to
        // core 0; after it both own one, and core 1 keeps what it claims.
        owners.forget_table(2);
        assert_eq!(owners.get(2, 0), None);
        assert_eq!(owners.get(1, 1), Some(1));
        assert_eq!(owners.claim(3, 0, 1), 1);
    }

    #[test]
    fn cores_racing_for_one_bucket_agree() {
        let owners = std::sync::Arc::new(BucketOwners::new(4));
        let answers: Vec<usize> = (0..4)
            .map(|core| {
                let owners = owners.clone();
                std::thread::spawn(move || owners.claim(77, 3, core))
            })
            .map(|t| t.join().unwrap())
            .collect();
        assert!(answers.iter().all(|&a| a == answers[0]), "{answers:?}");
    }
}
