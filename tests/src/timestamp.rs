//! TIMESTAMP_LTZ text as the scan writes it (`YYYY-MM-DDTHH:MM:SS[.fff]Z`) to and from epoch
//! milliseconds, so expectations compare instants rather than one spelling of them.

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `2024-02-29T12:34:56.789Z` for 1709210096789.
pub fn format_ltz_millis(epoch_millis: i64) -> String {
    let days = epoch_millis.div_euclid(MILLIS_PER_DAY);
    let in_day = epoch_millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Epoch milliseconds of an ISO date-time ending in `Z` or `+00:00`; sub-millisecond digits must
/// be zero. `None` for anything else (a local TIMESTAMP, a date, free text).
pub fn parse_ltz_millis(text: &str) -> Option<i64> {
    let body = text.strip_suffix('Z').or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = body.split_once('T')?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    if date_parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (clock, fraction) = match time.split_once('.') {
        Some((clock, fraction)) => (clock, fraction),
        None => (time, ""),
    };
    let mut clock_parts = clock.split(':');
    let hour: i64 = clock_parts.next()?.parse().ok()?;
    let minute: i64 = clock_parts.next()?.parse().ok()?;
    let second: i64 = clock_parts.next()?.parse().ok()?;
    if clock_parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let padded = format!("{fraction:0<9}");
    if padded[3..].bytes().any(|b| b != b'0') {
        return None;
    }
    let millis: i64 = padded[..3].parse().ok()?;
    let days = days_from_civil(year, month, day);
    Some(days * MILLIS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000 + millis)
}

/// Howard Hinnant's `days_from_civil`: days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_ltz_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ltz_millis(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
        assert_eq!(format_ltz_millis(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn parses_every_spelling_of_one_instant() {
        for text in [
            "2024-02-29T12:34:56.789Z",
            "2024-02-29T12:34:56.789000Z",
            "2024-02-29T12:34:56.789+00:00",
        ] {
            assert_eq!(parse_ltz_millis(text), Some(1_709_210_096_789), "{text}");
        }
        assert_eq!(parse_ltz_millis("2024-02-29T12:34:56Z"), Some(1_709_210_096_000));
    }

    #[test]
    fn rejects_non_instants() {
        for text in [
            "2024-02-29T12:34:56",
            "2024-02-29",
            "12.30",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:34:56.7891Z",
        ] {
            assert_eq!(parse_ltz_millis(text), None, "{text}");
        }
    }

    #[test]
    fn round_trips_over_a_wide_range() {
        let mut millis = -62_135_596_800_000_i64; // year 1
        while millis < 253_402_300_799_000 {
            assert_eq!(parse_ltz_millis(&format_ltz_millis(millis)), Some(millis));
            millis += 7_777_777_777_777;
        }
    }
}
