//! Any bytes through every decompressor under a small bound: never panics, never returns more
//! than the bound.
#![no_main]

use kafluss_protocol::compression::{decompress, Compression};
use libfuzzer_sys::fuzz_target;

const MAX: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let codec = Compression::ALL[usize::from(selector) % Compression::ALL.len()];
    if let Ok(out) = decompress(codec, input, MAX) {
        assert!(out.len() <= MAX);
    }
});
