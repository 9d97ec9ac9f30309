//! The one grammar for sizes and durations, used by the server config keys
//! ([`crate::config`]) and by table options such as `table.log.ttl` ([`crate::log::parse_ttl`]).
//!
//! A value is a non-negative whole number, optional white space, and an optional unit (any
//! case):
//!
//! - sizes: `b` (or `bytes`, or none), `k`/`kb`/`kib`, `m`/`mb`/`mib`, `g`/`gb`/`gib`,
//!   `t`/`tb`/`tib`, in powers of 1024;
//! - durations: `ms` (or none, or `milli`, `millis`, `millisecond(s)`), `s` (`sec`, `secs`,
//!   `second(s)`), `min` (`m`, `mins`, `minute(s)`), `h` (`hour(s)`), `d` (`day(s)`).

use std::time::Duration;

/// `text` as a count when it is nothing but decimal digits (no sign, no blank, no unit; `None`
/// past `u64`): the counts of the config keys and the ids in data-dir names.
pub fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Why a size or duration does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("expected a number with an optional unit")]
    NoNumber,
    #[error("number too large: at most 18446744073709551615")]
    NumberTooLarge,
    #[error("unknown size unit (use b, kb, mb, gb)")]
    UnknownSizeUnit,
    #[error("size too large: at most 18446744073709551615 bytes (16 EiB)")]
    SizeTooLarge,
    #[error("unknown duration unit (use ms, s, min, h, d)")]
    UnknownDurationUnit,
    #[error("duration too large: at most 213503982d (about 584542 years)")]
    DurationTooLarge,
}

/// Splits `"100mb"` / `"60 s"` into the number and its lower-cased unit.
fn number_and_unit(value: &str) -> Result<(u64, String), UnitError> {
    let trimmed = value.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    if digits_end == 0 {
        return Err(UnitError::NoNumber);
    }
    let number: u64 = trimmed[..digits_end]
        .parse()
        .map_err(|_| UnitError::NumberTooLarge)?;
    Ok((number, trimmed[digits_end..].trim().to_ascii_lowercase()))
}

/// A size in bytes.
pub fn parse_size(value: &str) -> Result<u64, UnitError> {
    let (number, unit) = number_and_unit(value)?;
    let shift = match unit.as_str() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(UnitError::UnknownSizeUnit),
    };
    number.checked_mul(1u64 << shift).ok_or(UnitError::SizeTooLarge)
}

/// A duration; a bare number is milliseconds.
pub fn parse_duration(value: &str) -> Result<Duration, UnitError> {
    let (number, unit) = number_and_unit(value)?;
    let micros_per_unit: u64 = match unit.as_str() {
        "us" | "micro" | "micros" | "microsecond" | "microseconds" => 1,
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000,
        "h" | "hour" | "hours" => 3_600_000_000,
        "d" | "day" | "days" => 86_400_000_000,
        _ => return Err(UnitError::UnknownDurationUnit),
    };
    number
        .checked_mul(micros_per_unit)
        .filter(|micros| *micros <= MAX_DURATION_MICROS)
        .map(Duration::from_micros)
        .ok_or(UnitError::DurationTooLarge)
}

/// The largest duration taken, `213503982d`: the whole days that fit 64 bits of microseconds,
/// so the bound the error names is the bound in every unit (`5124095568h` is taken,
/// `18446744073709551615us` is not).
const MAX_DURATION_MICROS: u64 = 213_503_982 * 86_400_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases: &[(&str, Result<u64, UnitError>)] = &[
            ("100mb", Ok(100 << 20)),
            ("512", Ok(512)),
            ("512 bytes", Ok(512)),
            (" 2 KiB ", Ok(2048)),
            ("3G", Ok(3 << 30)),
            ("1tb", Ok(1 << 40)),
            ("99999999999999gb", Err(UnitError::SizeTooLarge)),
            ("99999999999999999999", Err(UnitError::NumberTooLarge)),
            ("lots", Err(UnitError::NoNumber)),
            ("-1", Err(UnitError::NoNumber)),
            ("1.5mb", Err(UnitError::UnknownSizeUnit)),
            ("5 pb", Err(UnitError::UnknownSizeUnit)),
        ];
        for (text, expected) in cases {
            assert_eq!(&parse_size(text), expected, "{text:?}");
        }
    }

    #[test]
    fn durations() {
        let ms = |n: u64| Ok(Duration::from_millis(n));
        let cases: &[(&str, Result<Duration, UnitError>)] = &[
            ("60s", ms(60_000)),
            ("7 Days", ms(7 * 86_400_000)),
            ("5m", ms(300_000)),
            ("30 MIN", ms(1_800_000)),
            ("1 hour", ms(3_600_000)),
            ("250", ms(250)),
            ("250 millis", ms(250)),
            ("0s", ms(0)),
            ("50us", Ok(Duration::from_micros(50))),
            ("1500 micros", Ok(Duration::from_micros(1500))),
            ("s", Err(UnitError::NoNumber)),
            ("+5s", Err(UnitError::NoNumber)),
            ("1.5h", Err(UnitError::UnknownDurationUnit)),
            ("7 weeks", Err(UnitError::UnknownDurationUnit)),
            ("99999999999999999d", Err(UnitError::DurationTooLarge)),
            ("99999999999999999ms", Err(UnitError::DurationTooLarge)),
            // The bound the error names holds in every unit (hours and microseconds past
            // `213503982d` that still fit 64 bits of microseconds were taken).
            ("213503982d", ms(213_503_982 * 86_400_000)),
            ("5124095568h", ms(213_503_982 * 86_400_000)),
            ("5124095569h", Err(UnitError::DurationTooLarge)),
            ("5124095576h", Err(UnitError::DurationTooLarge)),
            ("18446744073709551615us", Err(UnitError::DurationTooLarge)),
            ("99999999999999999999d", Err(UnitError::NumberTooLarge)),
        ];
        for (text, expected) in cases {
            assert_eq!(&parse_duration(text), expected, "{text:?}");
        }
    }
}
