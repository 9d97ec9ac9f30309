//! CRC32C (Castagnoli), the checksum of Kafka record batches and of kafluss's stored batches:
//! the one implementation both use. `crc-fast` folds with carry-less multiplication (PCLMULQDQ,
//! VPCLMULQDQ where the CPU has it), about twice the rate of the `crc32` instruction loop of the
//! `crc32c` crate on this project's machines (docs/benchmarks.md).

use crc_fast::{CrcAlgorithm, Digest};

/// The CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// The CRC32C of the bytes `crc` is the CRC32C of, followed by `bytes`:
/// `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`, and `crc32c_append(0, b) == crc32c(b)`.
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    let mut digest = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(bytes);
    digest.finalize() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_value_of_the_catalogue() {
        // CRC-32/ISCSI's check value (reveng CRC catalogue), and the empty input.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c_append(0, b"123456789"), 0xe306_9283);
    }

    #[test]
    fn agrees_with_the_crc32c_crate_at_every_length_and_split() {
        let data: Vec<u8> = (0..5_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..300).chain([1_023, 1_024, 1_025, 4_096, 5_000]) {
            let bytes = &data[..len];
            assert_eq!(crc32c(bytes), ::crc32c::crc32c(bytes), "{len} bytes");
            for split in [0, 1, len / 3, len / 2, len] {
                let (a, b) = bytes.split_at(split.min(len));
                assert_eq!(
                    crc32c_append(crc32c(a), b),
                    ::crc32c::crc32c(bytes),
                    "{len} split at {split}"
                );
                assert_eq!(
                    crc32c_append(0x1234_5678, b),
                    ::crc32c::crc32c_append(0x1234_5678, b)
                );
            }
        }
    }
}
