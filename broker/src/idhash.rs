//! Hash maps keyed by numbers the server assigns itself: table ids, bucket numbers (checked
//! against the table's bucket count before any lookup), the mesh's request ids. Every produced
//! partition looks such keys up several times (its route, its bucket actor, its conversion
//! plan, its table's metrics), and std's SipHash costs more than the lookup itself. No client
//! chooses these keys, so the hash needs no defence against chosen collisions: one multiply per
//! word (the Fx hash of rustc) spreads them over the table. Maps keyed by anything a client
//! sends (producer ids, names) keep std's hasher.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map from server-assigned numbers (or tuples of them).
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
/// A set of server-assigned numbers (or tuples of them).
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Rustc's Fx hash: each word is mixed in with a rotate, an xor and one multiply; the multiply
/// carries every bit of the key into the high bits, which hashbrown's group tags are made of.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IdHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(n.into());
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.add(n.into());
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n.into());
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash<T: std::hash::Hash>(value: T) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(value)
    }

    #[test]
    fn keys_that_differ_hash_apart_and_equal_keys_alike() {
        // Table id and bucket: their order matters, and so does each bit of either.
        assert_eq!(hash((7u64, 3u32)), hash((7u64, 3u32)));
        assert_ne!(hash((7u64, 3u32)), hash((3u64, 7u32)));
        assert_ne!(hash(1u64), hash(2u64));
        // Byte strings: a trailing zero byte is not lost.
        assert_ne!(hash([1u8, 2, 3].as_slice()), hash([1u8, 2, 3, 0].as_slice()));
        assert_ne!(hash(&b"12345678"[..]), hash(&b"123456780"[..]));
    }

    #[test]
    fn consecutive_ids_spread_over_the_tag_bits() {
        // hashbrown tags each slot with the hash's top 7 bits: consecutive ids (as tables and
        // buckets are numbered) must not share them, or every probe compares every key.
        let tags: HashSet<u64> = (0..64u64).map(|id| hash((id, 0u32)) >> 57).collect();
        assert!(tags.len() > 32, "{} distinct tags of 64 keys", tags.len());
        let mut map: IdMap<(u64, u32), usize> = IdMap::default();
        for id in 0..1_000u64 {
            for bucket in 0..8u32 {
                map.insert((id, bucket), (id as usize) * 8 + bucket as usize);
            }
        }
        assert_eq!(map.len(), 8_000);
        assert_eq!(map[&(999, 7)], 7_999);
        assert!(!map.contains_key(&(1_000, 0)));
    }
}
