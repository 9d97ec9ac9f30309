//! Comparing scanned rows with what was sent.
//!
//! Expected rows are JSON in the scan's encoding, with a few matchers where the exact value is
//! not known in advance or has several valid spellings (objects with one `$` key):
//! - `{"$ts_between": [lo, hi]}`: a TIMESTAMP_LTZ string whose instant is in [lo, hi] ms;
//! - `{"$any_of": [a, b, ...]}`: matches if any alternative matches;
//! - `{"$json": v}`: a string holding JSON equal to `v` (the compact `_kafka_rescue` text).
//!
//! Other strings that both parse as TIMESTAMP_LTZ compare as instants; numbers compare by value.
//! Rows match as a multiset (clients may reorder in flight); offsets are checked separately.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::server::ScanRow;
use crate::timestamp::parse_ltz_millis;

/// Matches a TIMESTAMP_LTZ between two instants (inclusive), in epoch milliseconds.
pub fn ts_between(lo: i64, hi: i64) -> Value {
    json!({ "$ts_between": [lo, hi] })
}

/// Matches any of the alternatives.
pub fn any_of(alternatives: Vec<Value>) -> Value {
    json!({ "$any_of": alternatives })
}

/// Matches a string holding this JSON value.
pub fn json_text(value: Value) -> Value {
    json!({ "$json": value })
}

/// Whether `actual` satisfies `expected` (see the module docs for matchers).
pub fn matches(expected: &Value, actual: &Value) -> bool {
    if let Some((matcher, argument)) = as_matcher(expected) {
        return match matcher {
            "$ts_between" => {
                let bounds = argument.as_array().filter(|b| b.len() == 2);
                let instant = actual.as_str().and_then(parse_ltz_millis);
                match (bounds, instant) {
                    (Some(bounds), Some(instant)) => {
                        let lo = bounds[0].as_i64().unwrap_or(i64::MAX);
                        let hi = bounds[1].as_i64().unwrap_or(i64::MIN);
                        (lo..=hi).contains(&instant)
                    }
                    _ => false,
                }
            }
            "$any_of" => argument.as_array().is_some_and(|alternatives| {
                alternatives
                    .iter()
                    .any(|alternative| matches(alternative, actual))
            }),
            "$json" => actual
                .as_str()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .is_some_and(|parsed| matches(argument, &parsed)),
            _ => false,
        };
    }
    match (expected, actual) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => a == b,
            _ => a.as_f64() == b.as_f64(),
        },
        (Value::String(a), Value::String(b)) => {
            a == b || matches!((parse_ltz_millis(a), parse_ltz_millis(b)), (Some(x), Some(y)) if x == y)
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| matches(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, x)| b.get(key).is_some_and(|y| matches(x, y)))
        }
        _ => false,
    }
}

fn as_matcher(value: &Value) -> Option<(&str, &Value)> {
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let (key, argument) = object.iter().next()?;
    key.starts_with('$').then_some((key.as_str(), argument))
}

/// What differs between expected and scanned rows; empty when they match.
#[derive(Debug, Default)]
pub struct RowDiff {
    pub missing: Vec<Value>,
    pub unexpected: Vec<Value>,
    pub offset_problems: Vec<String>,
}

impl RowDiff {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.offset_problems.is_empty()
    }

    /// A short human-readable account (first few rows of each kind).
    pub fn describe(&self) -> String {
        let mut text = String::new();
        for problem in self.offset_problems.iter().take(3) {
            text.push_str(&format!("offsets: {problem}\n"));
        }
        for row in self.missing.iter().take(3) {
            text.push_str(&format!("expected but not scanned: {}\n", abbreviate(row)));
        }
        for row in self.unexpected.iter().take(3) {
            text.push_str(&format!("scanned but not expected: {}\n", abbreviate(row)));
        }
        if self.missing.len() > 3 || self.unexpected.len() > 3 {
            text.push_str(&format!(
                "({} missing, {} unexpected in all)\n",
                self.missing.len(),
                self.unexpected.len()
            ));
        }
        text
    }
}

fn abbreviate(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 600 {
        format!("{}…", text.chars().take(600).collect::<String>())
    } else {
        text
    }
}

/// Compares rows (per bucket) with the scan: the same multiset of rows in every bucket, and each
/// bucket's offsets contiguous from `first_offset` in scan order.
pub fn compare_rows(expected: &BTreeMap<u32, Vec<Value>>, scanned: &[ScanRow], first_offset: i64) -> RowDiff {
    let mut diff = RowDiff::default();
    let mut by_bucket: BTreeMap<u32, Vec<&ScanRow>> = BTreeMap::new();
    for row in scanned {
        by_bucket.entry(row.bucket).or_default().push(row);
    }
    for (bucket, rows) in &by_bucket {
        for (index, row) in rows.iter().enumerate() {
            let wanted = first_offset + index as i64;
            if row.offset != wanted {
                diff.offset_problems.push(format!(
                    "bucket {bucket}: row {index} has offset {}, expected {wanted}",
                    row.offset
                ));
                break;
            }
        }
    }
    let buckets: std::collections::BTreeSet<u32> = expected.keys().chain(by_bucket.keys()).copied().collect();
    for bucket in buckets {
        let wanted = expected.get(&bucket).map(Vec::as_slice).unwrap_or_default();
        let got: Vec<&Value> = by_bucket
            .get(&bucket)
            .map(|rows| rows.iter().map(|row| &row.row).collect())
            .unwrap_or_default();
        let mut used = vec![false; got.len()];
        for expected_row in wanted {
            let found = got
                .iter()
                .enumerate()
                .find(|(index, actual)| !used[*index] && matches(expected_row, actual));
            match found {
                Some((index, _)) => used[index] = true,
                None => diff.missing.push(with_bucket(bucket, expected_row)),
            }
        }
        for (index, actual) in got.iter().enumerate() {
            if !used[index] {
                diff.unexpected.push(with_bucket(bucket, actual));
            }
        }
    }
    diff
}

fn with_bucket(bucket: u32, row: &Value) -> Value {
    let mut object = Map::new();
    object.insert("bucket".into(), json!(bucket));
    object.insert("row".into(), row.clone());
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_row(bucket: u32, offset: i64, row: Value) -> ScanRow {
        ScanRow { bucket, offset, row }
    }

    #[test]
    fn timestamps_compare_as_instants() {
        assert!(matches(
            &json!("2024-02-29T12:34:56.789Z"),
            &json!("2024-02-29T12:34:56.789000Z")
        ));
        assert!(!matches(
            &json!("2024-02-29T12:34:56.789Z"),
            &json!("2024-02-29T12:34:56.788Z")
        ));
        assert!(matches(
            &ts_between(1000, 2000),
            &json!("1970-01-01T00:00:01.500Z")
        ));
        assert!(!matches(
            &ts_between(1000, 2000),
            &json!("1970-01-01T00:00:02.001Z")
        ));
        assert!(!matches(&ts_between(1000, 2000), &Value::Null));
    }

    #[test]
    fn numbers_strings_and_structures() {
        assert!(matches(
            &json!({"a": [1, 2.5, "x"]}),
            &json!({"a": [1, 2.5, "x"]})
        ));
        assert!(matches(&json!(2.0), &json!(2)));
        assert!(!matches(&json!("12.30"), &json!("12.3")));
        assert!(!matches(&json!({"a": 1}), &json!({"a": 1, "b": null})));
        assert!(!matches(&json!([1]), &json!([1, 2])));
        assert!(!matches(&json!(null), &json!(0)));
    }

    #[test]
    fn matchers() {
        assert!(matches(&any_of(vec![json!({}), Value::Null]), &Value::Null));
        assert!(matches(&any_of(vec![json!({}), Value::Null]), &json!({})));
        assert!(!matches(
            &any_of(vec![json!({}), Value::Null]),
            &json!({"a": "b"})
        ));
        assert!(matches(
            &json_text(json!({"note": "x", "n": 1})),
            &json!("{\"n\":1,\"note\":\"x\"}")
        ));
        assert!(!matches(&json_text(json!({"note": "x"})), &json!("not json")));
    }

    #[test]
    fn compares_rows_as_multisets_per_bucket() {
        let expected = BTreeMap::from([
            (0, vec![json!({"v": 1}), json!({"v": 2})]),
            (1, vec![json!({"v": 3})]),
        ]);
        let scanned = vec![
            scan_row(0, 0, json!({"v": 2})),
            scan_row(0, 1, json!({"v": 1})),
            scan_row(1, 0, json!({"v": 3})),
        ];
        assert!(compare_rows(&expected, &scanned, 0).is_empty());

        let wrong_bucket = vec![
            scan_row(0, 0, json!({"v": 2})),
            scan_row(0, 1, json!({"v": 1})),
            scan_row(0, 2, json!({"v": 3})),
        ];
        let diff = compare_rows(&expected, &wrong_bucket, 0);
        assert_eq!(diff.missing.len(), 1);
        assert_eq!(diff.unexpected.len(), 1);
        assert!(diff.describe().contains("expected but not scanned"));
    }

    #[test]
    fn gaps_in_offsets_are_reported() {
        let expected = BTreeMap::from([(0, vec![json!({"v": 1}), json!({"v": 2})])]);
        let scanned = vec![scan_row(0, 0, json!({"v": 1})), scan_row(0, 2, json!({"v": 2}))];
        let diff = compare_rows(&expected, &scanned, 0);
        assert_eq!(diff.offset_problems.len(), 1, "{}", diff.describe());
    }

    #[test]
    fn duplicates_count() {
        let expected = BTreeMap::from([(0, vec![json!({"v": 1})])]);
        let scanned = vec![scan_row(0, 0, json!({"v": 1})), scan_row(0, 1, json!({"v": 1}))];
        assert_eq!(compare_rows(&expected, &scanned, 0).unexpected.len(), 1);
    }
}
