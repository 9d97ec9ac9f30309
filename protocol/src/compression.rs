//! Record compression codecs (batch attribute bits 0–2) with bounded decompression.
//!
//! Every decompressor stops at the caller's maximum: output beyond it is
//! [`CompressionError::DecompressedTooLarge`], and no buffer grows past `max + 1` bytes. Snappy
//! accepts both the raw format (librdkafka) and the xerial/snappy-java framing
//! (`\x82SNAPPY\0` + version + compat + length-prefixed blocks) sent by the Java client.

use std::io::{Read, Write};

/// The compression codec of a record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// 0: uncompressed.
    None,
    /// 1: gzip.
    Gzip,
    /// 2: snappy.
    Snappy,
    /// 3: LZ4 frame.
    Lz4,
    /// 4: zstd.
    Zstd,
}

impl Compression {
    /// All codecs, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec id in the batch attributes.
    pub const fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The Kafka name (`none`, `gzip`, `snappy`, `lz4`, `zstd`).
    pub const fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl TryFrom<u8> for Compression {
    type Error = CompressionError;

    fn try_from(id: u8) -> Result<Self, Self::Error> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(CompressionError::UnknownCodec(other)),
        }
    }
}

/// Compression or decompression failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// The codec id is not 0–4.
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    /// The decompressed data would exceed the caller's maximum.
    #[error("decompressed data exceeds the limit of {max} bytes")]
    DecompressedTooLarge {
        /// The limit.
        max: usize,
    },
    /// The compressed data is corrupt.
    #[error("corrupt {codec} data: {reason}")]
    Corrupt {
        /// Which codec.
        codec: &'static str,
        /// What the codec library said.
        reason: String,
    },
}

/// Magic at the start of xerial/snappy-java framed data.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic plus version and compatible-version fields.
const XERIAL_HEADER_LEN: usize = 16;
/// Largest zstd window accepted, in log2 bytes, when the caller's limit is smaller: enough for
/// the Java client's streaming encoder (2 MiB windows at default levels).
const ZSTD_MIN_WINDOW_LOG: u32 = 23;
/// zstd's own default maximum window (128 MiB).
const ZSTD_MAX_WINDOW_LOG: u32 = 27;
/// Read chunk for streaming decoders.
const READ_CHUNK: usize = 64 * 1024;

fn corrupt(codec: Compression, err: impl std::fmt::Display) -> CompressionError {
    CompressionError::Corrupt {
        codec: codec.name(),
        reason: err.to_string(),
    }
}

/// Decompresses `input` compressed with `codec`, producing at most `max` bytes.
/// [`Compression::None`] returns a copy of the input (if it fits).
pub fn decompress(codec: Compression, input: &[u8], max: usize) -> Result<Vec<u8>, CompressionError> {
    match codec {
        Compression::None => {
            if input.len() > max {
                return Err(CompressionError::DecompressedTooLarge { max });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(input), max),
        Compression::Snappy if input.starts_with(&XERIAL_MAGIC) => decompress_xerial(input, max),
        Compression::Snappy => {
            let mut out = Vec::new();
            decompress_snappy_block(input, max, &mut out)?;
            Ok(out)
        }
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(input), max),
        Compression::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|err| corrupt(codec, err))?;
            let needed_log = usize::BITS - max.leading_zeros();
            let window_log = needed_log.clamp(ZSTD_MIN_WINDOW_LOG, ZSTD_MAX_WINDOW_LOG);
            decoder
                .window_log_max(window_log)
                .map_err(|err| corrupt(codec, err))?;
            read_bounded(codec, decoder, max)
        }
    }
}

/// Reads a streaming decoder to the end, never holding more than `max + 1` bytes.
fn read_bounded(codec: Compression, mut reader: impl Read, max: usize) -> Result<Vec<u8>, CompressionError> {
    let mut out: Vec<u8> = Vec::new();
    let hard_cap = max.saturating_add(1);
    loop {
        if out.len() == out.capacity() {
            let grow = out
                .capacity()
                .max(READ_CHUNK)
                .min(hard_cap - out.len().min(hard_cap));
            if grow == 0 {
                return Err(CompressionError::DecompressedTooLarge { max });
            }
            out.reserve_exact(grow);
        }
        let start = out.len();
        // Zero only one chunk per read so that small reads into a large buffer stay linear.
        let window = (out.capacity() - start).min(READ_CHUNK);
        out.resize(start + window, 0);
        match reader.read(&mut out[start..]) {
            Ok(0) => {
                out.truncate(start);
                return Ok(out);
            }
            Ok(read) => {
                out.truncate(start + read);
                if out.len() > max {
                    return Err(CompressionError::DecompressedTooLarge { max });
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => out.truncate(start),
            Err(err) => return Err(corrupt(codec, err)),
        }
    }
}

/// Appends one raw snappy block to `out`, checking its announced length against what `max`
/// still allows before allocating.
fn decompress_snappy_block(block: &[u8], max: usize, out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let len = snap::raw::decompress_len(block).map_err(|err| corrupt(Compression::Snappy, err))?;
    if len > max.saturating_sub(out.len()) {
        return Err(CompressionError::DecompressedTooLarge { max });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|err| corrupt(Compression::Snappy, err))?;
    out.truncate(start + written);
    Ok(())
}

fn decompress_xerial(input: &[u8], max: usize) -> Result<Vec<u8>, CompressionError> {
    let mut rest = input
        .get(XERIAL_HEADER_LEN..)
        .ok_or_else(|| corrupt(Compression::Snappy, "truncated xerial header"))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(corrupt(Compression::Snappy, "truncated xerial block length"));
        };
        let len = usize::try_from(i32::from_be_bytes(*len))
            .map_err(|_| corrupt(Compression::Snappy, "negative xerial block length"))?;
        let block = tail
            .get(..len)
            .ok_or_else(|| corrupt(Compression::Snappy, "truncated xerial block"))?;
        decompress_snappy_block(block, max, &mut out)?;
        rest = &tail[len..];
    }
    Ok(out)
}

/// Compresses `input` with `codec` (snappy: raw format). For tests and the bench.
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(input).map_err(|err| corrupt(codec, err))?;
            encoder.finish().map_err(|err| corrupt(codec, err))
        }
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(input)
            .map_err(|err| corrupt(codec, err)),
        Compression::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(input).map_err(|err| corrupt(codec, err))?;
            encoder.finish().map_err(|err| corrupt(codec, err))
        }
        Compression::Zstd => zstd::bulk::compress(input, 3).map_err(|err| corrupt(codec, err)),
    }
}

/// Compresses `input` with snappy in the xerial/snappy-java framing, in blocks of at most
/// `block_size` uncompressed bytes (the Java client uses 32 KiB).
pub fn compress_snappy_xerial(input: &[u8], block_size: usize) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + input.len());
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in input.chunks(block_size.max(1)) {
        let block = encoder
            .compress_vec(chunk)
            .map_err(|err| corrupt(Compression::Snappy, err))?;
        let len = i32::try_from(block.len()).map_err(|err| corrupt(Compression::Snappy, err))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        for codec in Compression::ALL {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(decompress(codec, &packed, data.len()).unwrap(), data, "{codec:?}");
        }
        let xerial = compress_snappy_xerial(&data, 32 * 1024).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &xerial, data.len()).unwrap(),
            data
        );
    }

    #[test]
    fn every_codec_enforces_the_limit() {
        let data = sample();
        for codec in Compression::ALL {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &packed, data.len() - 1),
                Err(CompressionError::DecompressedTooLarge { max: data.len() - 1 }),
                "{codec:?}"
            );
        }
        let xerial = compress_snappy_xerial(&data, 32 * 1024).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &xerial, 1000),
            Err(CompressionError::DecompressedTooLarge { max: 1000 })
        );
    }

    #[test]
    fn a_bomb_is_refused_not_inflated() {
        let zeros = vec![0u8; 64 * 1024 * 1024];
        for codec in [
            Compression::Gzip,
            Compression::Lz4,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            let packed = compress(codec, &zeros).unwrap();
            assert!(packed.len() < 4 * 1024 * 1024, "{codec:?}");
            assert_eq!(
                decompress(codec, &packed, 1024 * 1024),
                Err(CompressionError::DecompressedTooLarge { max: 1024 * 1024 })
            );
        }
    }

    /// A zstd frame of unknown size that declares a window of 2^`log` bytes.
    fn zstd_with_window(log: u32, data: &[u8]) -> Vec<u8> {
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder
            .set_parameter(zstd::stream::raw::CParameter::WindowLog(log))
            .unwrap();
        std::io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    /// The window a frame may ask for is the next power of two above the limit, at least
    /// 2^23 and at most 2^27 (docs/configuration.md, "Fixed limits"): a larger one is refused
    /// as corrupt before its window is allocated.
    #[test]
    fn a_zstd_window_beyond_the_bound_is_refused() {
        let data = sample();
        // 100 MiB, kafka.max-request-size's default: windows up to 2^27.
        let max = 100 << 20;
        assert_eq!(
            decompress(Compression::Zstd, &zstd_with_window(27, &data), max).unwrap(),
            data
        );
        let refused = decompress(Compression::Zstd, &zstd_with_window(28, &data), max);
        assert!(
            matches!(refused, Err(CompressionError::Corrupt { .. })),
            "{refused:?}"
        );
        // A small limit still takes the 2^23 windows a Java client's encoder may declare.
        let small = 1 << 20;
        assert_eq!(
            decompress(Compression::Zstd, &zstd_with_window(23, &data), small).unwrap(),
            data
        );
        let refused = decompress(Compression::Zstd, &zstd_with_window(24, &data), small);
        assert!(
            matches!(refused, Err(CompressionError::Corrupt { .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn garbage_is_corrupt() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let result = decompress(codec, b"definitely not compressed data", 1 << 20);
            assert!(
                matches!(result, Err(CompressionError::Corrupt { .. })),
                "{codec:?}: {result:?}"
            );
        }
        assert!(matches!(
            decompress(Compression::Snappy, &XERIAL_MAGIC, 100),
            Err(CompressionError::Corrupt { .. })
        ));
    }

    #[test]
    fn unknown_codec_ids_are_rejected() {
        assert_eq!(Compression::try_from(5), Err(CompressionError::UnknownCodec(5)));
        for codec in Compression::ALL {
            assert_eq!(Compression::try_from(codec.id()), Ok(codec));
        }
    }
}
