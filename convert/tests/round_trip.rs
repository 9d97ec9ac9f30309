//! Property test: random table schemas (flat or nested layout, every Fluss type, nested ROW,
//! ARRAY and MAP) and random JSON values that fit them convert, and the Arrow batch read
//! back equals the input exactly (numbers, decimals with their scale, strings with escapes,
//! Base64 bytes, dates, times and timestamps at their precision, LTZ offsets).

mod common;

use base64::Engine;
use common::*;
use kafluss_convert::{DataType, Field, FieldType, KafkaRecord};
use proptest::prelude::*;

/// A JSON text and the cell `common::cell` renders for what it must store.
type Sample = (String, String);

fn leaf_type() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::Boolean),
        Just(DataType::TinyInt),
        Just(DataType::SmallInt),
        Just(DataType::Int),
        Just(DataType::BigInt),
        Just(DataType::Float),
        Just(DataType::Double),
        (1u8..=38)
            .prop_flat_map(|p| (Just(p), 0..=p))
            .prop_map(|(precision, scale)| DataType::Decimal { precision, scale }),
        (1u32..6).prop_map(DataType::Char),
        Just(DataType::String),
        (1u32..5).prop_map(DataType::Binary),
        Just(DataType::Bytes),
        Just(DataType::Date),
        (0u8..=9).prop_map(DataType::Time),
        (0u8..=9).prop_map(DataType::Timestamp),
        (0u8..=9).prop_map(DataType::TimestampLtz),
    ]
}

fn fields(types: Vec<DataType>) -> Vec<Field> {
    types
        .into_iter()
        .enumerate()
        .map(|(i, t)| Field::new(format!("f{i}"), FieldType::nullable(t)))
        .collect()
}

fn data_type() -> impl Strategy<Value = DataType> {
    leaf_type().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(array),
            inner.clone().prop_map(map),
            prop::collection::vec(inner, 1..4).prop_map(|types| DataType::Row(fields(types))),
        ]
    })
}

fn escape_json(s: &str, ascii_only: bool) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ascii_only && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn date_text(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `HH:MM:SS[.f]` with exactly `precision` fraction digits.
fn time_text(nanos_of_day: i64, precision: u8) -> String {
    let seconds = nanos_of_day / 1_000_000_000;
    let mut text = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if precision > 0 {
        let fraction = format!("{:09}", nanos_of_day % 1_000_000_000);
        text.push('.');
        text.push_str(&fraction[..precision as usize]);
    }
    text
}

/// Stored integer and unit suffix of a temporal value given in nanoseconds.
fn in_unit(nanos: i64, precision: u8) -> (i64, &'static str) {
    match precision {
        0..=3 => (nanos.div_euclid(1_000_000), "ms"),
        4..=6 => (nanos.div_euclid(1_000), "us"),
        _ => (nanos, "ns"),
    }
}

/// Nanoseconds rounded down to `precision` digits.
fn at_precision(nanos: i64, precision: u8) -> i64 {
    let step = 10i64.pow(9 - u32::from(precision));
    nanos - nanos.rem_euclid(step)
}

const NANOS_PER_DAY: i64 = 86_400_000_000_000;
/// 1900-01-01 and 2200-01-01 as days: timestamps in between fit nanoseconds in i64.
const TS_DAYS: std::ops::Range<i64> = -25_567..84_006;

fn sample(data_type: &DataType) -> BoxedStrategy<Sample> {
    let null = Just(("null".to_string(), "null".to_string()));
    let value = non_null_sample(data_type);
    prop_oneof![1 => null, 6 => value].boxed()
}

fn non_null_sample(data_type: &DataType) -> BoxedStrategy<Sample> {
    let same = |v: String| (v.clone(), v);
    match data_type.clone() {
        DataType::Boolean => any::<bool>().prop_map(move |b| same(b.to_string())).boxed(),
        DataType::TinyInt => any::<i8>().prop_map(move |v| same(v.to_string())).boxed(),
        DataType::SmallInt => any::<i16>().prop_map(move |v| same(v.to_string())).boxed(),
        DataType::Int => any::<i32>().prop_map(move |v| same(v.to_string())).boxed(),
        DataType::BigInt => any::<i64>().prop_map(move |v| same(v.to_string())).boxed(),
        DataType::Float => (any::<f32>(), any::<bool>())
            .prop_filter("finite", |(v, _)| v.is_finite())
            .prop_map(|(v, exp)| {
                let text = if exp { format!("{v:e}") } else { format!("{v}") };
                (text, format!("{v:?}"))
            })
            .boxed(),
        DataType::Double => (any::<f64>(), any::<bool>())
            .prop_filter("finite", |(v, _)| v.is_finite())
            .prop_map(|(v, exp)| {
                let text = if exp { format!("{v:e}") } else { format!("{v}") };
                (text, format!("{v:?}"))
            })
            .boxed(),
        DataType::Decimal { precision, scale } => {
            let max = 10i128.pow(u32::from(precision)) - 1;
            (-max..=max, any::<bool>())
                .prop_map(move |(unscaled, as_string)| {
                    let text = format_decimal(unscaled, scale as i8);
                    let json = if as_string {
                        format!("\"{text}\"")
                    } else {
                        text.clone()
                    };
                    (json, format!("\"{text}\""))
                })
                .boxed()
        }
        DataType::Char(n) => (
            prop::collection::vec(any::<char>(), 0..=n as usize),
            any::<bool>(),
        )
            .prop_map(|(chars, ascii)| {
                let s: String = chars.into_iter().collect();
                (escape_json(&s, ascii), quote(&s))
            })
            .boxed(),
        DataType::String => (any::<String>(), any::<bool>())
            .prop_map(|(s, ascii)| (escape_json(&s, ascii), quote(&s)))
            .boxed(),
        DataType::Bytes => prop::collection::vec(any::<u8>(), 0..12)
            .prop_map(|bytes| {
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                (format!("\"{b64}\""), format!("b64:{b64}"))
            })
            .boxed(),
        DataType::Binary(n) => prop::collection::vec(any::<u8>(), n as usize)
            .prop_map(|bytes| {
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                (format!("\"{b64}\""), format!("b64:{b64}"))
            })
            .boxed(),
        DataType::Date => (-719_528i64..=2_932_896)
            .prop_map(|days| (format!("\"{}\"", date_text(days)), format!("d{days}")))
            .boxed(),
        DataType::Time(p) => (0..NANOS_PER_DAY)
            .prop_map(move |nanos| {
                let nanos = at_precision(nanos, p);
                let (v, unit) = in_unit(nanos, p);
                (format!("\"{}\"", time_text(nanos, p)), format!("t{v}{unit}"))
            })
            .boxed(),
        DataType::Timestamp(p) => (TS_DAYS, 0..NANOS_PER_DAY)
            .prop_map(move |(days, nanos)| {
                let nanos = at_precision(nanos, p);
                let (v, unit) = in_unit(days * NANOS_PER_DAY + nanos, p);
                let text = format!("\"{}T{}\"", date_text(days), time_text(nanos, p));
                (text, format!("ts{v}{unit}"))
            })
            .boxed(),
        DataType::TimestampLtz(p) => (TS_DAYS, 0..NANOS_PER_DAY, -1080i64..=1080, any::<bool>())
            .prop_map(move |(days, nanos, offset_minutes, as_millis)| {
                let utc = days * NANOS_PER_DAY + at_precision(nanos, p);
                let (v, unit) = in_unit(utc, p);
                let cell = format!("ts{v}{unit}@UTC");
                if as_millis && utc % 1_000_000 == 0 {
                    return ((utc / 1_000_000).to_string(), cell);
                }
                let local = utc + offset_minutes * 60_000_000_000;
                let (local_days, local_nanos) =
                    (local.div_euclid(NANOS_PER_DAY), local.rem_euclid(NANOS_PER_DAY));
                let sign = if offset_minutes < 0 { '-' } else { '+' };
                let offset = offset_minutes.abs();
                let text = format!(
                    "\"{}T{}{sign}{:02}:{:02}\"",
                    date_text(local_days),
                    time_text(local_nanos, p),
                    offset / 60,
                    offset % 60
                );
                (text, cell)
            })
            .boxed(),
        DataType::Array(element) => prop::collection::vec(sample(&element.data_type), 0..4)
            .prop_map(|items| {
                let json: Vec<_> = items.iter().map(|(j, _)| j.clone()).collect();
                let cells: Vec<_> = items.iter().map(|(_, c)| c.clone()).collect();
                (format!("[{}]", json.join(",")), format!("[{}]", cells.join(",")))
            })
            .boxed(),
        DataType::Map { value, .. } => {
            prop::collection::btree_map(any::<String>(), sample(&value.data_type), 0..4)
                .prop_map(|entries| {
                    let json: Vec<_> = entries
                        .iter()
                        .map(|(k, (j, _))| format!("{}:{j}", escape_json(k, false)))
                        .collect();
                    let cells: Vec<_> = entries
                        .iter()
                        .map(|(k, (_, c))| format!("{}:{c}", quote(k)))
                        .collect();
                    (
                        format!("{{{}}}", json.join(",")),
                        format!("{{{}}}", cells.join(",")),
                    )
                })
                .boxed()
        }
        DataType::Row(fields) => object_sample(&fields),
    }
}

/// A JSON object for a ROW: each member present or missing, members in shuffled order.
fn object_sample(fields: &[Field]) -> BoxedStrategy<Sample> {
    let members: Vec<BoxedStrategy<(String, Option<Sample>)>> = fields
        .iter()
        .map(|f| {
            let name = f.name.clone();
            prop::option::weighted(0.85, sample(&f.field_type.data_type))
                .prop_map(move |s| (name.clone(), s))
                .boxed()
        })
        .collect();
    (members, any::<prop::sample::Index>())
        .prop_map(|(members, rotation)| {
            let cells: Vec<String> = members
                .iter()
                .map(|(name, s)| {
                    let cell = s.as_ref().map_or("null".to_string(), |(_, c)| c.clone());
                    format!("{}:{cell}", quote(name))
                })
                .collect();
            let mut present: Vec<String> = members
                .iter()
                .filter_map(|(name, s)| s.as_ref().map(|(j, _)| format!("\"{name}\":{j}")))
                .collect();
            if !present.is_empty() {
                let by = rotation.index(present.len());
                present.rotate_left(by);
            }
            (
                format!("{{{}}}", present.join(",")),
                format!("{{{}}}", cells.join(",")),
            )
        })
        .boxed()
}

fn table() -> impl Strategy<Value = (Vec<DataType>, bool)> {
    (prop::collection::vec(data_type(), 1..5), any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn converted_values_read_back_equal(
        (types, nested, records) in table().prop_flat_map(|(types, nested)| {
            let row = fields(types.clone());
            (Just(types), Just(nested), prop::collection::vec(object_sample(&row), 1..4))
        })
    ) {
        let business = fields(types);
        let plan = if nested {
            nested_plan(vec![Field::new("_kafka_value", n(DataType::Row(business)))])
        } else {
            flat_plan(business)
        };
        let batch = plan
            .convert_batch(records.iter().map(|(json, _)| KafkaRecord::with_value(json.as_bytes())))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{records:?}")))?;
        prop_assert_eq!(batch.num_rows(), records.len());
        for (row, (json, cells)) in records.iter().enumerate() {
            let expected = if nested {
                format!("{{\"_kafka_value\":{cells}}}")
            } else {
                cells.clone()
            };
            prop_assert_eq!(render_row(&batch, row), expected, "input {}", json);
        }
    }
}

/// A table touching every conversion path, with and without rescue.
fn wide_plans() -> Vec<kafluss_convert::ConversionPlan> {
    let columns = || {
        vec![
            col("a", DataType::Int),
            col(
                "d",
                DataType::Decimal {
                    precision: 10,
                    scale: 3,
                },
            ),
            col("s", DataType::Char(4)),
            col("t", DataType::TimestampLtz(6)),
            col("r", row(vec![col("x", array(map(DataType::Double)))])),
            col("b", DataType::Binary(2)),
        ]
    };
    let mut with_rescue = columns();
    with_rescue.push(col("_kafka_rescue", DataType::String));
    vec![flat_plan(columns()), flat_plan(with_rescue)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary bytes, and valid values with one byte changed, never panic; every error
    /// stays within the message bound.
    #[test]
    fn arbitrary_input_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let valid = br#"{"a":1,"d":"12.5","s":"abc","t":"2024-02-29T12:00:00.5Z","r":{"x":[{"k":1.5e3}]},"b":"AQI=","zz":[1,{"q":null}]}"#;
        let mut mutated = valid.to_vec();
        let i = at.index(mutated.len());
        mutated[i] = byte;
        for plan in wide_plans() {
            for input in [&bytes, &mutated] {
                if let Err(e) = plan.convert_batch([KafkaRecord::with_value(input)]) {
                    prop_assert!(e.to_string().len() <= kafluss_convert::MAX_MESSAGE_BYTES);
                }
            }
        }
    }
}
