//! Scalar type rules of behaviour.md "Conversion of one record": text → stored value, exact,
//! never rounded. Each function returns the refusal reason as text; the caller adds the path.

use std::ops::RangeInclusive;

use arrow_schema::TimeUnit;

use crate::calendar::days_from_civil;
use crate::schema::time_unit;

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_DAY: i64 = 86_400 * NANOS_PER_SECOND;
/// The instants a TIMESTAMP_LTZ value may name, in nanoseconds since the epoch:
/// 0000-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999999Z (Flink's TIMESTAMP_LTZ range).
const LTZ_INSTANTS: RangeInclusive<i128> =
    -62_167_219_200 * NANOS_PER_SECOND as i128..=253_402_300_800 * NANOS_PER_SECOND as i128 - 1;
/// The instants a nanosecond Arrow timestamp holds (an `i64` of nanoseconds).
const NANOSECOND_INSTANTS: RangeInclusive<i128> = i64::MIN as i128..=i64::MAX as i128;
/// Largest DECIMAL precision Fluss allows (and Decimal128 holds).
pub const MAX_DECIMAL_PRECISION: u8 = 38;

/// An integer JSON number token in `[min, max]`. `1.0`, `1e2` are not integers.
pub(crate) fn integer(text: &str, min: i64, max: i64, type_name: &str) -> Result<i64, String> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    // Up to 18 digits cannot overflow i64: no saturation needed.
    if !digits.is_empty() && digits.len() <= 18 {
        let mut magnitude: i64 = 0;
        for &d in digits {
            let digit = d.wrapping_sub(b'0');
            if digit > 9 {
                return Err(format!("expected {type_name}, got non-integer number {text}"));
            }
            magnitude = magnitude * 10 + i64::from(digit);
        }
        let value = if negative { -magnitude } else { magnitude };
        if (min..=max).contains(&value) {
            return Ok(value);
        }
        return Err(format!(
            "{} is out of range for {type_name}",
            describe_number(text)
        ));
    }
    // Accumulate the magnitude in u64 (so that i64::MIN fits); saturate past it.
    let mut magnitude: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(format!("expected {type_name}, got non-integer number {text}"));
        }
        magnitude = magnitude.saturating_mul(10).saturating_add(u64::from(d - b'0'));
    }
    let value = if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    };
    match value {
        Some(v) if !digits.is_empty() && (min..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "{} is out of range for {type_name}",
            describe_number(text)
        )),
    }
}

/// A finite DOUBLE, correctly rounded from the token text.
pub(crate) fn double(text: &str) -> Result<f64, String> {
    if let Some((v, end)) = short_double(text.as_bytes(), 0) {
        if end == text.len() {
            return Ok(v);
        }
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{} is out of range for DOUBLE", describe_number(text))),
    }
}

/// A finite FLOAT, rounded once from the token text (not through f64).
pub(crate) fn float(text: &str) -> Result<f32, String> {
    if let Some((v, end)) = short_float(text.as_bytes(), 0) {
        if end == text.len() {
            return Ok(v);
        }
    }
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{} is out of range for FLOAT", describe_number(text))),
    }
}

/// The unscaled value of `text` at `scale`, if it has at most `precision` digits there.
/// Accepts JSON numbers and decimal literals `[+-]? (d+ [. d*] | . d+) ([eE] [+-]? d+)?`;
/// `quoted`: the text was a JSON string (what a refusal calls it).
pub(crate) fn decimal(text: &str, precision: u8, scale: u8, quoted: bool) -> Result<i128, String> {
    let refuse = || {
        format!(
            "expected DECIMAL({precision}, {scale}), got {}",
            describe_text(text)
        )
    };
    if let Some(unscaled) = plain_decimal(text.as_bytes(), precision, scale) {
        return Ok(unscaled);
    }
    let literal = DecimalLiteral::parse(text.as_bytes()).ok_or_else(refuse)?;
    // value = digits × 10^(exponent - fraction digits). Work on the significant digits:
    // no leading zeros, and trailing zeros dropped as far as the target scale allows.
    let digits = literal.significant();
    let mut value_scale = literal.fraction_len as i128 - i128::from(literal.exponent);
    let mut len = digits.len();
    while value_scale > i128::from(scale) && len > 0 && digits.at(len - 1) == 0 {
        len -= 1;
        value_scale -= 1;
    }
    if len == 0 {
        return Ok(0);
    }
    if value_scale > i128::from(scale) {
        return Err(format!(
            "{} has more than {scale} fraction digits for DECIMAL({precision}, {scale}) (never rounded)",
            describe_decimal(text, quoted)
        ));
    }
    let total_digits = len as i128 + (i128::from(scale) - value_scale);
    if total_digits > i128::from(precision) {
        return Err(format!(
            "{} has more than {} integer digits for DECIMAL({precision}, {scale})",
            describe_decimal(text, quoted),
            precision - scale
        ));
    }
    // At most 38 digits: fits i128 without overflow.
    let mut unscaled: i128 = 0;
    for i in 0..len {
        unscaled = unscaled * 10 + i128::from(digits.at(i));
    }
    for _ in 0..(i128::from(scale) - value_scale) {
        unscaled *= 10;
    }
    Ok(if literal.negative { -unscaled } else { unscaled })
}

/// The common case on a short path: `-?d+(.d+)?` with at most 18 digits and no more fraction
/// digits than `scale`. `None` sends everything else (and every refusal) the general way.
fn plain_decimal(bytes: &[u8], precision: u8, scale: u8) -> Option<i128> {
    let (negative, rest) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    if rest.is_empty() || rest.len() > 19 {
        return None;
    }
    let mut value: u64 = 0;
    let mut integer_digits = 0u32;
    let mut fraction_digits: Option<u32> = None;
    let mut leading_zeros = true;
    for &b in rest {
        match b {
            b'0'..=b'9' => {
                value = value * 10 + u64::from(b - b'0');
                match &mut fraction_digits {
                    Some(n) => *n += 1,
                    None if leading_zeros && b == b'0' => {}
                    None => {
                        leading_zeros = false;
                        integer_digits += 1;
                    }
                }
            }
            b'.' if fraction_digits.is_none() => fraction_digits = Some(0),
            _ => return None,
        }
    }
    let fraction_digits = fraction_digits.unwrap_or(0);
    // `1.` and `.5` are decimal literals too, but rare: the general path takes them.
    if fraction_digits > u32::from(scale) || rest.first() == Some(&b'.') || rest.last() == Some(&b'.') {
        return None;
    }
    if integer_digits + u32::from(scale) > u32::from(precision) {
        return None;
    }
    // At most 18 digits times 10^(38 - 0): within i128 since the precision check passed.
    let unscaled = i128::from(value) * 10i128.pow(u32::from(scale) - fraction_digits);
    Some(if negative { -unscaled } else { unscaled })
}

/// The parts of a decimal literal, borrowed from its text.
struct DecimalLiteral<'a> {
    negative: bool,
    integer: &'a [u8],
    fraction: &'a [u8],
    fraction_len: usize,
    exponent: i64,
}

/// The significant digits of a literal: integer then fraction digits, leading zeros skipped.
struct Digits<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

impl Digits<'_> {
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    fn at(&self, i: usize) -> u8 {
        let d = if i < self.head.len() {
            self.head[i]
        } else {
            self.tail[i - self.head.len()]
        };
        d - b'0'
    }
}

impl<'a> DecimalLiteral<'a> {
    fn parse(bytes: &'a [u8]) -> Option<Self> {
        let (negative, rest) = match bytes.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, bytes),
        };
        let integer_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let (integer, mut rest) = rest.split_at(integer_len);
        let mut fraction: &[u8] = &[];
        if let Some((b'.', after)) = rest.split_first() {
            let len = after.iter().take_while(|b| b.is_ascii_digit()).count();
            (fraction, rest) = after.split_at(len);
        }
        if integer.is_empty() && fraction.is_empty() {
            return None;
        }
        let mut exponent: i64 = 0;
        if let Some((b'e' | b'E', after)) = rest.split_first() {
            let (exp_negative, digits) = match after.split_first() {
                Some((b'-', d)) => (true, d),
                Some((b'+', d)) => (false, d),
                _ => (false, after),
            };
            if digits.is_empty() {
                return None;
            }
            for &d in digits {
                if !d.is_ascii_digit() {
                    return None;
                }
                // Saturate: any exponent this large fails the precision or scale check.
                exponent = exponent.saturating_mul(10).saturating_add(i64::from(d - b'0'));
            }
            if exp_negative {
                exponent = -exponent;
            }
        } else if !rest.is_empty() {
            return None;
        }
        Some(Self {
            negative,
            integer,
            fraction,
            fraction_len: fraction.len(),
            exponent,
        })
    }

    fn significant(&self) -> Digits<'a> {
        let leading = self.integer.iter().take_while(|&&d| d == b'0').count();
        if leading < self.integer.len() {
            return Digits {
                head: &self.integer[leading..],
                tail: self.fraction,
            };
        }
        let leading = self.fraction.iter().take_while(|&&d| d == b'0').count();
        Digits {
            head: &self.fraction[leading..],
            tail: &[],
        }
    }
}

/// A number's text for a message: at most [`MAX_QUOTED_CHARS`](crate::error::MAX_QUOTED_CHARS)
/// characters, `…` marking a cut.
fn describe_number(text: &str) -> String {
    match text.char_indices().nth(crate::error::MAX_QUOTED_CHARS) {
        Some((at, _)) => format!("number {}…", &text[..at]),
        None => format!("number {text}"),
    }
}

/// How a DECIMAL's value was written: messages name it as what it was.
fn describe_decimal(text: &str, quoted: bool) -> String {
    if quoted {
        describe_text(text)
    } else {
        describe_number(text)
    }
}

fn describe_text(text: &str) -> String {
    format!("string {}", crate::error::quote_truncated(text))
}

/// Days since 1970-01-01 of `yyyy-MM-dd`.
pub(crate) fn date(text: &str) -> Result<i32, String> {
    let bad = || format!("expected DATE yyyy-MM-dd, got {}", describe_text(text));
    let b = text.as_bytes();
    if b.len() != 10 {
        return Err(bad());
    }
    let days = parse_date(b).ok_or_else(bad)?;
    i32::try_from(days).map_err(|_| bad())
}

fn parse_date(b: &[u8]) -> Option<i64> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month as u32, day as u32))
}

fn digits(b: &[u8]) -> Option<i64> {
    let mut v = 0i64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(c - b'0');
    }
    Some(v)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Nanoseconds of the day of an ISO local time `HH:mm[:ss[.f{1,9}]]` with at most
/// `precision` fraction digits.
pub(crate) fn time(text: &str, precision: u8) -> Result<i64, String> {
    // Type names are formatted only on failure: this runs once per value.
    parse_time(text.as_bytes(), precision, "TIME").map_err(|why| {
        format!(
            "expected TIME({precision}) HH:mm[:ss[.fff]], got {}{why}",
            describe_text(text)
        )
    })
}

/// Parses a local time; the error is an optional detail appended to the reason. `kind`
/// names the type without its precision (`TIME`, `TIMESTAMP`, `TIMESTAMP_LTZ`).
fn parse_time(b: &[u8], precision: u8, kind: &str) -> Result<i64, String> {
    if b.len() < 5 || b[2] != b':' {
        return Err(String::new());
    }
    let hour = digits(&b[0..2]).ok_or_default()?;
    let minute = digits(&b[3..5]).ok_or_default()?;
    let mut second = 0;
    let mut nanos = 0;
    if b.len() > 5 {
        if b[5] != b':' || b.len() < 8 {
            return Err(String::new());
        }
        second = digits(&b[6..8]).ok_or_default()?;
        if b.len() > 8 {
            let fraction = &b[9..];
            if b[8] != b'.' || fraction.is_empty() || fraction.len() > 9 {
                return Err(String::new());
            }
            if fraction.len() > usize::from(precision) {
                return Err(format!(
                    " ({} fraction digits, {kind}({precision}) keeps {precision})",
                    fraction.len()
                ));
            }
            nanos = digits(fraction).ok_or_default()? * 10i64.pow(9 - fraction.len() as u32);
        }
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(String::new());
    }
    Ok(((hour * 60 + minute) * 60 + second) * NANOS_PER_SECOND + nanos)
}

trait OkOrDefault<T> {
    fn ok_or_default(self) -> Result<T, String>;
}

impl<T> OkOrDefault<T> for Option<T> {
    fn ok_or_default(self) -> Result<T, String> {
        self.ok_or_else(String::new)
    }
}

/// Nanoseconds since the epoch of an ISO local date-time `yyyy-MM-ddTHH:mm[:ss[.f]]`.
pub(crate) fn timestamp(text: &str, precision: u8) -> Result<i128, String> {
    parse_local_date_time(text.as_bytes(), precision, "TIMESTAMP").map_err(|why| {
        format!(
            "expected TIMESTAMP({precision}) yyyy-MM-ddTHH:mm:ss[.fff] without offset, got {}{why}",
            describe_text(text)
        )
    })
}

fn parse_local_date_time(b: &[u8], precision: u8, kind: &str) -> Result<i128, String> {
    if b.len() < 16 || b[10] != b'T' {
        return Err(String::new());
    }
    let days = parse_date(&b[..10]).ok_or_default()?;
    let nanos = parse_time(&b[11..], precision, kind)?;
    Ok(i128::from(days) * i128::from(NANOS_PER_DAY) + i128::from(nanos))
}

/// Nanoseconds since the epoch of an ISO date-time with `Z` or a `±HH:MM[:SS]` offset.
pub(crate) fn timestamp_ltz(text: &str, precision: u8) -> Result<i128, String> {
    let b = text.as_bytes();
    let bad = |why: String| {
        format!(
            "expected TIMESTAMP_LTZ({precision}) as ISO date-time with offset or epoch milliseconds, got {}{why}",
            describe_text(text)
        )
    };
    let (local, offset_seconds) = if let Some(local) = b.strip_suffix(b"Z") {
        (local, 0)
    } else {
        let sign_at = b
            .iter()
            .rposition(|&c| c == b'+' || c == b'-')
            .filter(|&at| at > 10)
            .ok_or_else(|| bad(String::new()))?;
        let offset = parse_offset(&b[sign_at..]).ok_or_else(|| bad(String::new()))?;
        (&b[..sign_at], offset)
    };
    let local_nanos = parse_local_date_time(local, precision, "TIMESTAMP_LTZ").map_err(bad)?;
    ltz_instant(
        local_nanos - i128::from(offset_seconds) * i128::from(NANOS_PER_SECOND),
        precision,
    )
}

/// `nanos` if TIMESTAMP_LTZ(`precision`) can store that instant: within [`LTZ_INSTANTS`],
/// and for precision 7 to 9 (nanoseconds) within [`NANOSECOND_INSTANTS`]. The range check of
/// both forms of the value (text with an offset, epoch milliseconds) on both conversion paths.
fn ltz_instant(nanos: i128, precision: u8) -> Result<i128, String> {
    let (instants, range) = if time_unit(precision) == TimeUnit::Nanosecond {
        (
            NANOSECOND_INSTANTS,
            "1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z",
        )
    } else {
        (
            LTZ_INSTANTS,
            "0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z",
        )
    };
    if instants.contains(&nanos) {
        Ok(nanos)
    } else {
        Err(format!(
            "value is out of the range TIMESTAMP_LTZ({precision}) can store ({range})"
        ))
    }
}

/// `±HH:MM` or `±HH:MM:SS` within ±18:00 → seconds east of UTC.
fn parse_offset(b: &[u8]) -> Option<i64> {
    if b.len() != 6 && b.len() != 9 {
        return None;
    }
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    if b[3] != b':' {
        return None;
    }
    let hours = digits(&b[1..3])?;
    let minutes = digits(&b[4..6])?;
    let seconds = if b.len() == 9 {
        if b[6] != b':' {
            return None;
        }
        digits(&b[7..9])?
    } else {
        0
    };
    if minutes > 59 || seconds > 59 {
        return None;
    }
    let total = hours * 3600 + minutes * 60 + seconds;
    (total <= 18 * 3600).then_some(sign * total)
}

/// Epoch milliseconds as nanoseconds, refusing sub-precision digits (`precision` < 3) and
/// instants TIMESTAMP_LTZ(`precision`) cannot store.
pub(crate) fn epoch_millis(text: &str, precision: u8) -> Result<i128, String> {
    let millis = integer(text, i64::MIN, i64::MAX, "epoch milliseconds")?;
    if precision < 3 && millis % 10i64.pow(3 - u32::from(precision)) != 0 {
        return Err(format!(
            "epoch milliseconds {millis} have more fraction digits than TIMESTAMP_LTZ({precision})"
        ));
    }
    ltz_instant(i128::from(millis) * 1_000_000, precision)
}

/// `nanos` in `unit`, exact (the parsers already limited the fraction digits).
pub(crate) fn nanos_to_unit(nanos: i128, unit: TimeUnit, type_name: &str) -> Result<i64, String> {
    let divisor: i128 = match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    };
    i64::try_from(nanos.div_euclid(divisor))
        .map_err(|_| format!("value is out of the range {type_name} can store"))
}

// Short numbers, read at an index of a JSON value's bytes without a token first: the one-pass
// path reads numbers this way while scanning, and DOUBLE and FLOAT take their fast path from
// here for a whole token too.

/// Digits a short number may have in all (so its value fits an `i64`).
pub(crate) const SHORT_DIGITS: usize = 18;

/// The decimal digits at `j` appended to `value`, and the index after them; `None` when there
/// are more than `room` of them.
#[inline(always)]
pub(crate) fn digit_run(b: &[u8], mut j: usize, mut value: u64, room: usize) -> Option<(u64, usize)> {
    let start = j;
    while let Some(&d) = b.get(j) {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        // Wraps only past `room` digits, which are refused below.
        value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
        j += 1;
    }
    (j - start <= room).then_some((value, j))
}

/// A JSON number of the form `-?(0|[1-9][0-9]*)(.[0-9]+)?` (no exponent) with at most 18
/// digits in all, read while scanning.
pub(crate) struct ShortNumber {
    /// All its digits as one integer (the point left out).
    pub digits: u64,
    /// Digits before the point, not counting a lone `0`.
    pub integer_digits: u32,
    /// Digits after the point.
    pub fraction_digits: u32,
    pub negative: bool,
    /// The index after it.
    pub end: usize,
}

/// The short number at `i`; `None` for anything else, which the caller parses the general way.
#[inline(always)]
pub(crate) fn short_number(b: &[u8], i: usize) -> Option<ShortNumber> {
    let negative = b.get(i) == Some(&b'-');
    let start = i + usize::from(negative);
    let (mut digits_value, mut j) = digit_run(b, start, 0, SHORT_DIGITS)?;
    let integer_len = j - start;
    if integer_len == 0 || (integer_len > 1 && b.get(start) == Some(&b'0')) {
        return None;
    }
    // No leading zeros: the integer part's significant digits are all of them, or none for 0.
    let integer_digits = if digits_value == 0 { 0 } else { integer_len as u32 };
    let mut fraction_digits = 0u32;
    if b.get(j) == Some(&b'.') {
        let fraction = j + 1;
        (digits_value, j) = digit_run(b, fraction, digits_value, SHORT_DIGITS - integer_len)?;
        fraction_digits = (j - fraction) as u32;
        if fraction_digits == 0 {
            return None;
        }
    }
    if let Some(b'e' | b'E') = b.get(j) {
        return None;
    }
    Some(ShortNumber {
        digits: digits_value,
        integer_digits,
        fraction_digits,
        negative,
        end: j,
    })
}

/// A short number whose digits and power of ten are both exact doubles (digits ≤ 2^53,
/// at most 22 after the point): one division of the two is the correctly rounded value, as
/// `str::parse::<f64>` gives it (Clinger's fast path). `None` for anything else.
#[inline(always)]
pub(crate) fn short_double(b: &[u8], i: usize) -> Option<(f64, usize)> {
    let n = short_number(b, i)?;
    if n.digits > 1 << 53 {
        return None;
    }
    let magnitude = n.digits as f64 / POWERS_OF_TEN_F64.get(n.fraction_digits as usize)?;
    Some((if n.negative { -magnitude } else { magnitude }, n.end))
}

/// The same for FLOAT: digits ≤ 2^24, at most 10 after the point (10^10 is the largest power
/// of ten that is an exact `f32`), one `f32` division.
#[inline(always)]
pub(crate) fn short_float(b: &[u8], i: usize) -> Option<(f32, usize)> {
    let n = short_number(b, i)?;
    if n.digits > 1 << 24 {
        return None;
    }
    let magnitude = n.digits as f32 / POWERS_OF_TEN_F32.get(n.fraction_digits as usize)?;
    Some((if n.negative { -magnitude } else { magnitude }, n.end))
}

const POWERS_OF_TEN_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];
const POWERS_OF_TEN_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn integers_agree_with_i128(text in "-?[0-9]{0,22}(\\.0)?", narrow in proptest::bool::ANY) {
            let (min, max) = if narrow { (i64::from(i32::MIN), i64::from(i32::MAX)) } else { (i64::MIN, i64::MAX) };
            let want = text
                .parse::<i128>()
                .ok()
                .filter(|v| (i128::from(min)..=i128::from(max)).contains(v))
                .map(|v| v as i64);
            proptest::prop_assert_eq!(integer(&text, min, max, "T").ok(), want);
        }
    }

    #[test]
    fn integers_are_range_checked() {
        let cases: &[(&str, i64, i64, Option<i64>)] = &[
            ("127", -128, 127, Some(127)),
            ("128", -128, 127, None),
            ("-128", -128, 127, Some(-128)),
            ("-129", -128, 127, None),
            ("32767", -32768, 32767, Some(32767)),
            ("-32769", -32768, 32767, None),
            (
                "2147483647",
                i32::MIN as i64,
                i32::MAX as i64,
                Some(i32::MAX as i64),
            ),
            ("2147483648", i32::MIN as i64, i32::MAX as i64, None),
            (
                "-2147483648",
                i32::MIN as i64,
                i32::MAX as i64,
                Some(i32::MIN as i64),
            ),
            ("9223372036854775807", i64::MIN, i64::MAX, Some(i64::MAX)),
            ("9223372036854775808", i64::MIN, i64::MAX, None),
            ("-9223372036854775808", i64::MIN, i64::MAX, Some(i64::MIN)),
            ("-9223372036854775809", i64::MIN, i64::MAX, None),
            ("-0", i64::MIN, i64::MAX, Some(0)),
            ("1.0", i64::MIN, i64::MAX, None),
            ("1e2", i64::MIN, i64::MAX, None),
        ];
        for (text, min, max, want) in cases {
            assert_eq!(integer(text, *min, *max, "T").ok(), *want, "{text}");
        }
        assert_eq!(
            integer("1.0", 0, 9, "INT").unwrap_err(),
            "expected INT, got non-integer number 1.0"
        );
    }

    #[test]
    fn floats_are_finite_and_exact() {
        assert_eq!(double("0.1").unwrap(), 0.1);
        assert!(double("-0.0").unwrap().is_sign_negative());
        assert!(double("-0").unwrap().is_sign_negative());
        assert_eq!(double("1.7976931348623157e308").unwrap(), f64::MAX);
        assert!(double("1e309").is_err());
        assert!(double("-1e309").is_err());
        assert_eq!(double("1e-400").unwrap(), 0.0);
        assert_eq!(
            double("123456789012345678901234567890").unwrap(),
            1.2345678901234568e29
        );
        assert_eq!(float("0.1").unwrap(), 0.1f32);
        assert_eq!(float("3.4028235e38").unwrap(), f32::MAX);
        assert!(float("3.5e38").is_err());
        // Rounded once: 1.00000005960464477539 is exactly halfway between two f32 values
        // plus a tiny bit; going through f64 first would round to even instead.
        assert_eq!(float("1.000000059604644775390625001").unwrap(), 1.0000001f32);
    }

    #[test]
    fn decimals_are_exact() {
        let ok: &[(&str, u8, u8, i128)] = &[
            ("12.30", 18, 2, 1230),
            ("12.3", 18, 2, 1230),
            ("12", 18, 2, 1200),
            ("-0.01", 18, 2, -1),
            ("-0.00", 18, 2, 0),
            ("0", 1, 0, 0),
            ("1.50", 5, 1, 15),
            ("1.5e2", 5, 0, 150),
            ("15e-1", 5, 1, 15),
            ("+7", 3, 0, 7),
            (".5", 3, 1, 5),
            ("5.", 3, 0, 5),
            ("0e1000000000000000000000", 3, 0, 0),
            ("999.99", 5, 2, 99999),
            (
                "99999999999999999999999999999999999999",
                38,
                0,
                10i128.pow(38) - 1,
            ),
            (
                "-9999999999999999999999999999.9999999999",
                38,
                10,
                -(10i128.pow(38) - 1),
            ),
            ("0.00000000000000000000000000000000000001", 38, 38, 1),
            ("000123.4500", 5, 2, 12345),
        ];
        for (text, p, s, want) in ok {
            assert_eq!(
                decimal(text, *p, *s, false),
                Ok(*want),
                "{text} as DECIMAL({p},{s})"
            );
        }
        let refused: &[(&str, u8, u8)] = &[
            ("1.234", 5, 2),
            ("1000.00", 5, 2),
            ("100000000000000000000000000000000000000", 38, 0),
            ("0.000000000000000000000000000000000000001", 38, 38),
            ("1e1000000000000000000000", 38, 0),
            ("1e-1000000000000000000000", 38, 38),
            ("abc", 5, 2),
            ("", 5, 2),
            ("1.2.3", 5, 2),
            ("1e", 5, 2),
            ("1 ", 5, 2),
            ("-", 5, 2),
            (".", 5, 2),
            ("NaN", 5, 2),
        ];
        for (text, p, s) in refused {
            assert!(
                decimal(text, *p, *s, false).is_err(),
                "{text} as DECIMAL({p},{s})"
            );
        }
    }

    #[test]
    fn dates_include_leap_days() {
        assert_eq!(date("1970-01-01"), Ok(0));
        assert_eq!(date("1969-12-31"), Ok(-1));
        assert_eq!(date("2000-02-29"), Ok(11016));
        assert_eq!(date("2024-02-29"), Ok(19782));
        assert_eq!(date("0000-01-01"), Ok(-719528));
        assert_eq!(date("9999-12-31"), Ok(2932896));
        for bad in [
            "2023-02-29",
            "1900-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "2024-1-01",
            "2024-01-01T00:00",
            "20240101",
            "2024/01/01",
            "",
        ] {
            assert!(date(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_respect_precision() {
        assert_eq!(time("00:00", 0), Ok(0));
        assert_eq!(time("23:59:59", 0), Ok(86_399 * NANOS_PER_SECOND));
        assert_eq!(time("12:34:56.789", 3), Ok(45_296_789_000_000));
        assert_eq!(time("12:34:56.1", 3), Ok(45_296_100_000_000));
        assert_eq!(time("00:00:00.123456789", 9), Ok(123_456_789));
        assert!(time("12:34:56.7891", 3)
            .unwrap_err()
            .contains("4 fraction digits"));
        assert!(time("12:34:56.1", 0).is_err());
        for bad in [
            "24:00",
            "12:60",
            "12:00:60",
            "1:00",
            "12:00:",
            "12:00:00.",
            "12:00:00.1234567890",
            "12-00",
            "12:00Z",
        ] {
            assert!(time(bad, 9).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_local_and_with_offset() {
        let s = i128::from(NANOS_PER_SECOND);
        assert_eq!(timestamp("1970-01-01T00:00:00", 0), Ok(0));
        assert_eq!(timestamp("1970-01-01T00:00", 0), Ok(0));
        assert_eq!(
            timestamp("2024-02-29T12:00:00.5", 1),
            Ok((19782 * 86400 + 43200) as i128 * s + 500_000_000)
        );
        assert!(timestamp("2024-02-29 12:00:00", 3).is_err());
        assert!(timestamp("2024-02-29T12:00:00Z", 3).is_err());
        assert!(timestamp("2024-02-29T12:00:00.1234", 3).is_err());
        assert_eq!(timestamp_ltz("1970-01-01T00:00:00Z", 3), Ok(0));
        assert_eq!(timestamp_ltz("1970-01-01T02:00:00+02:00", 3), Ok(0));
        assert_eq!(timestamp_ltz("1969-12-31T19:00:00-05:00", 3), Ok(0));
        assert_eq!(timestamp_ltz("1970-01-01T00:00:00+18:00", 3), Ok(-18 * 3600 * s));
        assert_eq!(timestamp_ltz("1970-01-01T00:00:30+00:00:30", 3), Ok(0));
        for bad in [
            "1970-01-01T00:00:00",
            "1970-01-01T00:00:00+19:00",
            "1970-01-01T00:00:00+0200",
            "1970-01-01T00:00:00+02",
            "1970-01-01T00:00:00.1234Z",
        ] {
            assert!(timestamp_ltz(bad, 3).is_err(), "{bad}");
        }
        assert_eq!(epoch_millis("1500", 3), Ok(1_500_000_000));
        assert!(epoch_millis("1500", 0).is_err());
        assert_eq!(epoch_millis("2000", 0), Ok(2_000_000_000));
        assert!(epoch_millis("1.5", 3).is_err());
    }

    #[test]
    fn ltz_instants_lie_in_years_0000_to_9999_utc() {
        let s = i128::from(NANOS_PER_SECOND);
        let day = i128::from(NANOS_PER_DAY);
        let (first, last) = (*LTZ_INSTANTS.start(), *LTZ_INSTANTS.end());
        assert_eq!(first, i128::from(days_from_civil(0, 1, 1)) * day);
        assert_eq!(last, i128::from(days_from_civil(10_000, 1, 1)) * day - 1);
        let ms = 1_000_000;
        for (text, precision, want) in [
            ("0000-01-01T00:00:00Z", 3, Some(first)),
            ("0000-01-01T01:00:00+01:00", 3, Some(first)),
            ("0000-01-01T00:00:00+01:00", 3, None),
            ("0000-01-01T00:00:00.999999+00:00:01", 6, None),
            ("9999-12-31T23:59:59.999Z", 3, Some(last + 1 - ms)),
            ("9999-12-31T23:59:59.999999Z", 6, Some(last + 1 - 1_000)),
            ("9999-12-31T23:59:59.999999-00:00:01", 6, None),
            ("9999-12-31T23:59:59Z", 0, Some(last + 1 - s)),
            ("9999-12-31T05:59:59.999-18:00", 3, Some(last + 1 - ms)),
            ("9999-12-31T06:00:00-18:00", 3, None),
            ("9999-12-31T23:59:59.999-00:00:01", 3, None),
        ] {
            assert_eq!(timestamp_ltz(text, precision).ok(), want, "{text}");
        }
        assert_eq!(
            timestamp_ltz("0000-01-01T00:00:00+01:00", 3).unwrap_err(),
            "value is out of the range TIMESTAMP_LTZ(3) can store \
             (0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z)"
        );
        for (text, precision, want) in [
            ("-62167219200000", 3, Some(first)),
            ("-62167219200001", 3, None),
            ("253402300799999", 3, Some(last + 1 - ms)),
            ("253402300800000", 3, None),
            ("-62167219200000", 0, Some(first)),
            ("253402300799000", 0, Some(last + 1 - s)),
            ("253402300800000", 0, None),
            ("9223372036854775807", 3, None),
            ("-9223372036854775808", 3, None),
        ] {
            assert_eq!(epoch_millis(text, precision).ok(), want, "{text}");
        }
        assert_eq!(
            epoch_millis("253402300800000", 3).unwrap_err(),
            "value is out of the range TIMESTAMP_LTZ(3) can store \
             (0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z)"
        );
    }

    #[test]
    fn nanosecond_ltz_instants_fit_an_i64() {
        let (min, max) = (i128::from(i64::MIN), i128::from(i64::MAX));
        for (text, precision, want) in [
            ("1677-09-21T00:12:43.145224192Z", 9, Some(min)),
            ("1677-09-21T00:12:43.145224191Z", 9, None),
            ("1677-09-21T01:12:43.145224192+01:00", 9, Some(min)),
            ("2262-04-11T23:47:16.854775807Z", 9, Some(max)),
            ("2262-04-11T23:47:16.854775808Z", 9, None),
            ("2262-04-11T17:47:16.854775807-06:00", 9, Some(max)),
            ("2262-04-11T23:47:16.8547758Z", 7, Some(max - 7)),
            ("2262-04-11T23:47:16.8547759Z", 7, None),
            ("1677-09-21T00:12:43.1452242Z", 7, Some(min + 8)),
            ("1677-09-21T00:12:43.1452241Z", 7, None),
        ] {
            assert_eq!(timestamp_ltz(text, precision).ok(), want, "{text}");
        }
        assert_eq!(
            timestamp_ltz("2262-04-11T23:47:16.854775808Z", 9).unwrap_err(),
            "value is out of the range TIMESTAMP_LTZ(9) can store \
             (1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z)"
        );
        assert_eq!(epoch_millis("9223372036854", 9), Ok(9_223_372_036_854_000_000));
        assert!(epoch_millis("9223372036855", 9).is_err());
        assert_eq!(epoch_millis("-9223372036854", 9), Ok(-9_223_372_036_854_000_000));
        assert!(epoch_millis("-9223372036855", 9).is_err());
    }

    #[test]
    fn units_are_checked() {
        assert_eq!(nanos_to_unit(1_500_000, TimeUnit::Millisecond, "T"), Ok(1));
        assert_eq!(nanos_to_unit(-1_000_000, TimeUnit::Millisecond, "T"), Ok(-1));
        assert!(nanos_to_unit(i128::from(i64::MAX) + 1, TimeUnit::Nanosecond, "T").is_err());
        let year_3000 = timestamp("3000-01-01T00:00:00", 9).unwrap();
        assert!(nanos_to_unit(year_3000, TimeUnit::Nanosecond, "TIMESTAMP(9)").is_err());
        assert!(nanos_to_unit(year_3000, TimeUnit::Microsecond, "TIMESTAMP(6)").is_ok());
    }

    #[test]
    fn short_floats_are_parsed_as_str_parse_does() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "0.1",
            "0.3",
            "2.675",
            "9007199254740992",
            "9007199254740993",
            "0.000000000000000000001",
            "123456789012345678",
            "16777216",
            "16777217",
            "0.0000000001",
            "3.4028235",
            "1.17549435",
            "-7.25",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        for _ in 0..20_000 {
            let integer = next() % 10u64.pow((next() % 12) as u32 + 1);
            let fraction_len = (next() % 12) as usize;
            let fraction: String = (0..fraction_len)
                .map(|_| char::from(b'0' + (next() % 10) as u8))
                .collect();
            let sign = if next() % 2 == 0 { "-" } else { "" };
            texts.push(if fraction.is_empty() {
                format!("{sign}{integer}")
            } else {
                format!("{sign}{integer}.{fraction}")
            });
        }
        let mut fast = (0, 0);
        for text in &texts {
            let b = format!("{text},");
            if let Some((v, end)) = short_double(b.as_bytes(), 0) {
                assert_eq!(end, text.len(), "{text}");
                assert_eq!(v.to_bits(), text.parse::<f64>().unwrap().to_bits(), "{text}");
                fast.0 += 1;
            }
            if let Some((v, end)) = short_float(b.as_bytes(), 0) {
                assert_eq!(end, text.len(), "{text}");
                assert_eq!(v.to_bits(), text.parse::<f32>().unwrap().to_bits(), "{text}");
                fast.1 += 1;
            }
        }
        // Most of these are short enough for the double's fast path, a fifth for the float's
        // (the rest go the general way).
        assert!(
            fast.0 > texts.len() / 2 && fast.1 > texts.len() / 10,
            "{fast:?} of {}",
            texts.len()
        );
        for refused in ["1e5", "01.5", "1.", "-", ".5", "1.5e3", "12345678901234567890"] {
            assert!(short_double(refused.as_bytes(), 0).is_none(), "{refused}");
        }
    }
}
