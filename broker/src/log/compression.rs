//! Arrow IPC buffer compression of the stored batches, as Fluss log tables do it.
//!
//! Table options (Fluss names and defaults): `table.log.arrow.compression.type` = `NONE`,
//! `LZ4_FRAME` or `ZSTD` (default `ZSTD`, case-insensitive) and
//! `table.log.arrow.compression.zstd.level` = 1–22 (default 3; read only with `ZSTD`). Each
//! record-batch message's buffers are compressed by arrow-ipc (`BodyCompression` in the message
//! header), which pyarrow and arrow-rs readers decompress on their own. A segment may mix
//! compressed and uncompressed batches (older segments, or an ALTER between two batches).

use std::collections::BTreeMap;

use arrow_ipc::writer::IpcWriteOptions;
use arrow_ipc::CompressionType;

/// The codec option key.
pub const COMPRESSION_TYPE_OPTION: &str = "table.log.arrow.compression.type";
/// The ZSTD level option key.
pub const ZSTD_LEVEL_OPTION: &str = "table.log.arrow.compression.zstd.level";
/// Fluss's default ZSTD level.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;
/// The ZSTD levels accepted (those of the zstd library, as Fluss).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// How the buffers of a stored batch are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrowCompression {
    None,
    Lz4Frame,
    Zstd { level: i32 },
}

impl Default for ArrowCompression {
    /// Fluss's default: ZSTD at level 3.
    fn default() -> Self {
        ArrowCompression::Zstd {
            level: DEFAULT_ZSTD_LEVEL,
        }
    }
}

impl ArrowCompression {
    /// The compression a table's options ask for; `Err` names the option and what it accepts.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<ArrowCompression, String> {
        let level = match options.get(ZSTD_LEVEL_OPTION) {
            None => DEFAULT_ZSTD_LEVEL,
            Some(text) => match text.trim().parse::<i32>() {
                Ok(level) if ZSTD_LEVELS.contains(&level) => level,
                _ => {
                    return Err(format!(
                        "'{ZSTD_LEVEL_OPTION}' must be an integer between {} and {}, got '{text}'",
                        ZSTD_LEVELS.start(),
                        ZSTD_LEVELS.end()
                    ))
                }
            },
        };
        let Some(kind) = options.get(COMPRESSION_TYPE_OPTION) else {
            return Ok(ArrowCompression::Zstd { level });
        };
        match kind.trim().to_ascii_uppercase().as_str() {
            "NONE" => Ok(ArrowCompression::None),
            "LZ4_FRAME" => Ok(ArrowCompression::Lz4Frame),
            "ZSTD" => Ok(ArrowCompression::Zstd { level }),
            _ => Err(format!(
                "'{COMPRESSION_TYPE_OPTION}' must be one of NONE, LZ4_FRAME, ZSTD, got '{kind}'"
            )),
        }
    }

    /// The IPC writer options that produce this compression.
    pub fn write_options(self) -> IpcWriteOptions {
        let options = IpcWriteOptions::default();
        let configured = match self {
            ArrowCompression::None => Ok(options),
            ArrowCompression::Lz4Frame => options.try_with_compression(Some(CompressionType::LZ4_FRAME)),
            ArrowCompression::Zstd { level } => options
                .try_with_compression(Some(CompressionType::ZSTD))
                .and_then(|o| o.try_with_compression_level(Some(level))),
        };
        // The default options are metadata V5 and both codecs are compiled in (Cargo.toml), and
        // levels come from `from_options`: none of these can fail.
        configured.expect("valid IPC compression options")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_fluss_zstd_level_3() {
        assert_eq!(
            ArrowCompression::from_options(&options(&[])),
            Ok(ArrowCompression::Zstd { level: 3 })
        );
        assert_eq!(ArrowCompression::default(), ArrowCompression::Zstd { level: 3 });
    }

    #[test]
    fn types_are_case_insensitive() {
        for (text, expected) in [
            ("none", ArrowCompression::None),
            ("NONE", ArrowCompression::None),
            ("lz4_frame", ArrowCompression::Lz4Frame),
            (" LZ4_Frame ", ArrowCompression::Lz4Frame),
            ("Zstd", ArrowCompression::Zstd { level: 3 }),
        ] {
            let parsed = ArrowCompression::from_options(&options(&[(COMPRESSION_TYPE_OPTION, text)]));
            assert_eq!(parsed, Ok(expected), "{text}");
        }
        let parsed = ArrowCompression::from_options(&options(&[
            (COMPRESSION_TYPE_OPTION, "ZSTD"),
            (ZSTD_LEVEL_OPTION, "22"),
        ]));
        assert_eq!(parsed, Ok(ArrowCompression::Zstd { level: 22 }));
    }

    #[test]
    fn bad_values_name_the_option() {
        let err = ArrowCompression::from_options(&options(&[(COMPRESSION_TYPE_OPTION, "gzip")])).unwrap_err();
        assert_eq!(
            err,
            "'table.log.arrow.compression.type' must be one of NONE, LZ4_FRAME, ZSTD, got 'gzip'"
        );
        for level in ["0", "23", "-1", "3.5", "three", ""] {
            let err = ArrowCompression::from_options(&options(&[(ZSTD_LEVEL_OPTION, level)])).unwrap_err();
            assert_eq!(
                err,
                format!("'table.log.arrow.compression.zstd.level' must be an integer between 1 and 22, got '{level}'")
            );
        }
        // The level is checked whatever the codec, as a typo would otherwise hide until a switch.
        let err = ArrowCompression::from_options(&options(&[
            (COMPRESSION_TYPE_OPTION, "LZ4_FRAME"),
            (ZSTD_LEVEL_OPTION, "99"),
        ]));
        assert!(err.is_err());
    }

    #[test]
    fn every_compression_has_writer_options() {
        for compression in [
            ArrowCompression::None,
            ArrowCompression::Lz4Frame,
            ArrowCompression::Zstd { level: 1 },
            ArrowCompression::Zstd { level: 22 },
        ] {
            let _ = compression.write_options();
        }
    }
}
