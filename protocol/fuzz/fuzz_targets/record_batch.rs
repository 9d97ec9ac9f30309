//! Any bytes as a produce `records` field: batch splitting, CRC, decompression (bounded) and
//! record iteration must never panic nor allocate beyond the bound.
#![no_main]

use bytes::Bytes;
use kafluss_protocol::RecordBatches;
use libfuzzer_sys::fuzz_target;

/// Decompression bound, as the broker would pass it.
const MAX_DECOMPRESSED: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // Fuzzed inputs rarely carry a valid CRC; half the time fix it up so the record parser and
    // decompressors are reached as well.
    let mut bytes = data.to_vec();
    if bytes.first().is_some_and(|b| b & 1 == 1) && bytes.len() >= 61 {
        let crc = crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    for batch in RecordBatches::new(Bytes::from(bytes)) {
        let Ok(batch) = batch else { break };
        let Ok(mut records) = batch.records(MAX_DECOMPRESSED) else {
            continue;
        };
        while let Some(record) = records.next_ref() {
            let Ok(record) = record else { break };
            for header in record.headers {
                std::hint::black_box(header);
            }
        }
    }
});

/// CRC32C (Castagnoli), bitwise; avoids a dependency in the fuzz crate.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
