//! The proleptic Gregorian calendar as days since 1970-01-01 (H. Hinnant's algorithms): the one
//! place for date arithmetic, used to read DATE / TIMESTAMP text into Arrow and, by the broker,
//! to print them back in scans.

/// Days since 1970-01-01 of `year-month-day` (month 1..=12, day 1..=31; not checked here).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (month, day) = (i64::from(month), i64::from(day));
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 → (year, month, day); the inverse of [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        for (days, date) in [
            (0, (1970, 1, 1)),
            (-1, (1969, 12, 31)),
            (11_016, (2000, 2, 29)),
            (19_782, (2024, 2, 29)),
            (-719_528, (0, 1, 1)),
            (2_932_896, (9999, 12, 31)),
        ] {
            assert_eq!(civil_from_days(days), date, "{days}");
            assert_eq!(days_from_civil(date.0, date.1, date.2), days, "{date:?}");
        }
    }

    #[test]
    fn round_trips_every_day_of_many_centuries() {
        let mut previous = civil_from_days(days_from_civil(1583, 1, 1) - 1);
        for days in days_from_civil(1583, 1, 1)..days_from_civil(2500, 1, 1) {
            let date = civil_from_days(days);
            assert!(
                (1..=12).contains(&date.1) && (1..=31).contains(&date.2),
                "{date:?}"
            );
            assert!(date > previous, "{date:?} after {previous:?}");
            assert_eq!(days_from_civil(date.0, date.1, date.2), days);
            previous = date;
        }
    }
}
