//! The suite's tables (one per value mode) and the records sent to them, each paired with the row
//! the scan must show for it.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::expect::{any_of, json_text, ts_between};
use crate::timestamp::format_ltz_millis;

/// System columns every suite table declares (the seed's exact types).
const SYSTEM_COLUMNS: &str = "_kafka_key BYTES,
  _kafka_headers MAP<STRING, BYTES>,
  _kafka_metadata ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, partition INT>";

/// How a table converts Kafka values (the seed's `table.kafka.convert.value.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueMode {
    Binary,
    String,
    JsonFlat,
    JsonNested,
}

impl ValueMode {
    pub const ALL: [ValueMode; 4] = [
        ValueMode::Binary,
        ValueMode::String,
        ValueMode::JsonFlat,
        ValueMode::JsonNested,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ValueMode::Binary => "binary",
            ValueMode::String => "string",
            ValueMode::JsonFlat => "json_flat",
            ValueMode::JsonNested => "json_nested",
        }
    }

    /// `CREATE TABLE` for `db.table` with this mode and `buckets` buckets.
    pub fn create_table_sql(self, table: &str, buckets: u32) -> String {
        let (columns, options) = match self {
            ValueMode::Binary => (
                format!("_kafka_value BYTES,\n  {SYSTEM_COLUMNS}"),
                "'table.kafka.convert.value.type' = 'binary'",
            ),
            ValueMode::String => (
                format!("_kafka_value STRING,\n  {SYSTEM_COLUMNS}"),
                "'table.kafka.convert.value.type' = 'string'",
            ),
            ValueMode::JsonFlat => (
                format!(
                    "id BIGINT,
  name STRING,
  price DECIMAL(10, 2),
  active BOOLEAN,
  ratio DOUBLE,
  tags ARRAY<STRING>,
  born DATE,
  seen TIMESTAMP_LTZ(3),
  attrs MAP<STRING, INT>,
  {SYSTEM_COLUMNS},
  _kafka_rescue STRING"
                ),
                "'table.kafka.convert.value.type' = 'parse_json'",
            ),
            ValueMode::JsonNested => (
                format!(
                    "_kafka_value ROW<id BIGINT, name STRING, price DECIMAL(10, 2), tags ARRAY<STRING>, \
                     detail ROW<flag BOOLEAN, score DOUBLE>, attrs MAP<STRING, INT>>,
  {SYSTEM_COLUMNS}"
                ),
                "'table.kafka.convert.value.type' = 'parse_json', 'table.kafka.convert.value.layout' = 'nested'",
            ),
        };
        format!(
            "CREATE TABLE {table} (\n  {columns}\n) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '{buckets}', {options})"
        )
    }
}

/// One Kafka record as a client sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// CreateTime in epoch ms; `None` lets the client stamp the send time.
    pub timestamp: Option<i64>,
    /// Explicit partition; `None` leaves it to the client's partitioner (single-bucket tables).
    pub partition: Option<i32>,
}

/// A record as the driver scripts read it (bytes as base64).
#[derive(Debug, Clone, Serialize)]
pub struct WireRecord {
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
    pub timestamp: Option<i64>,
    pub partition: Option<i32>,
}

impl Record {
    pub fn to_wire(&self) -> WireRecord {
        let encode = |bytes: &Option<Vec<u8>>| bytes.as_ref().map(|b| BASE64.encode(b));
        WireRecord {
            key: encode(&self.key),
            value: encode(&self.value),
            headers: self
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), encode(value)))
                .collect(),
            timestamp: self.timestamp,
            partition: self.partition,
        }
    }
}

/// What a client can express; records are generated within it.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    /// Per-record CreateTime.
    pub timestamps: bool,
    /// Header values that are null.
    pub null_header_values: bool,
    /// Header values that are not UTF-8.
    pub binary_header_values: bool,
    /// Payloads travel through kcat's stdin: no 0x1e/0x1f bytes, no empty keys or values.
    pub delimited_stdin: bool,
}

/// A record and the row (value columns plus system columns) it must become.
#[derive(Debug, Clone)]
pub struct Sample {
    pub record: Record,
    value_columns: Map<String, Value>,
}

impl Sample {
    /// The full expected row; `send_window` bounds the CreateTime a client stamps itself.
    pub fn expected_row(&self, send_window: (i64, i64)) -> Value {
        let mut row = self.value_columns.clone();
        let record = &self.record;
        row.insert("_kafka_key".into(), bytes_json(record.key.as_deref()));
        row.insert("_kafka_headers".into(), headers_json(&record.headers));
        let timestamp = match record.timestamp {
            Some(millis) => json!(format_ltz_millis(millis)),
            None => ts_between(send_window.0, send_window.1),
        };
        row.insert(
            "_kafka_metadata".into(),
            json!({
                "timestamp": timestamp,
                "timestamp_type": 0,
                "partition": record.partition.unwrap_or(0),
            }),
        );
        Value::Object(row)
    }
}

/// Expected rows per bucket for samples sent in `send_window`.
pub fn expected_by_bucket(samples: &[Sample], send_window: (i64, i64)) -> BTreeMap<u32, Vec<Value>> {
    let mut buckets: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
    for sample in samples {
        let bucket = sample.record.partition.unwrap_or(0).max(0) as u32;
        buckets
            .entry(bucket)
            .or_default()
            .push(sample.expected_row(send_window));
    }
    buckets
}

fn bytes_json(bytes: Option<&[u8]>) -> Value {
    bytes.map_or(Value::Null, |b| json!(BASE64.encode(b)))
}

/// `_kafka_headers`: last value wins for a repeated name; no headers may read as `{}` or null.
fn headers_json(headers: &[(String, Option<Vec<u8>>)]) -> Value {
    if headers.is_empty() {
        return any_of(vec![json!({}), Value::Null]);
    }
    let mut map = Map::new();
    for (name, value) in headers {
        map.insert(name.clone(), bytes_json(value.as_deref()));
    }
    Value::Object(map)
}

/// `count` varied records for `mode`: keys (some null), headers (repeated names, odd values),
/// timestamps (explicit where the client can, else its own clock), the last one a keyed null value.
/// `seed` keeps cases apart; `partitions` > 1 spreads records over explicit partitions.
pub fn samples(mode: ValueMode, caps: Capabilities, count: usize, seed: u64, partitions: u32) -> Vec<Sample> {
    (0..count)
        .map(|index| {
            let tombstone = index + 1 == count && count > 2;
            let value_and_columns = if tombstone {
                (None, null_value_columns(mode))
            } else {
                value_for(mode, caps, seed, index)
            };
            Sample {
                record: Record {
                    // A tombstone carries a key, as in compacted topics (and kafka-python and
                    // aiokafka refuse a record with neither key nor value).
                    key: if tombstone {
                        Some(format!("tombstone-{seed}").into_bytes())
                    } else {
                        key_for(caps, index)
                    },
                    value: value_and_columns.0,
                    headers: headers_for(caps, index),
                    timestamp: (caps.timestamps && index % 4 != 3)
                        .then(|| 1_700_000_000_000 + seed as i64 * 1000 + index as i64),
                    partition: (partitions > 1).then(|| (index % partitions as usize) as i32),
                },
                value_columns: value_and_columns.1,
            }
        })
        .collect()
}

/// `count` larger, compressible text records (for the compression cases), all keyed, all with the
/// same header (so kcat sends them in one run, one compressed batch).
pub fn compressible_samples(caps: Capabilities, count: usize, label: &str) -> Vec<Sample> {
    (0..count)
        .map(|index| {
            let text = format!("{label} record {index}: ").repeat(24);
            let mut value_columns = Map::new();
            value_columns.insert("_kafka_value".into(), json!(text));
            Sample {
                record: Record {
                    key: Some(format!("k{index}").into_bytes()),
                    value: Some(text.into_bytes()),
                    headers: vec![("codec".into(), Some(label.as_bytes().to_vec()))],
                    timestamp: caps.timestamps.then(|| 1_710_000_000_000 + index as i64),
                    partition: None,
                },
                value_columns,
            }
        })
        .collect()
}

/// One record whose value is not valid JSON (truncated object): it must fail its batch.
pub fn invalid_json_samples() -> Vec<Sample> {
    vec![Sample {
        record: Record {
            key: Some(b"bad".to_vec()),
            value: Some(br#"{"id": 1, "name": "truncated"#.to_vec()),
            headers: vec![],
            timestamp: None,
            partition: None,
        },
        value_columns: Map::new(),
    }]
}

fn key_for(caps: Capabilities, index: usize) -> Option<Vec<u8>> {
    match index % 3 {
        0 => Some(format!("key-{index}").into_bytes()),
        1 if !caps.delimited_stdin => Some(vec![0, 1, 0xfe, 0xff, b'k', index as u8]),
        1 => Some(format!("kéy-{index}").into_bytes()),
        _ => None,
    }
}

fn headers_for(caps: Capabilities, index: usize) -> Vec<(String, Option<Vec<u8>>)> {
    let text = |s: &str| Some(s.as_bytes().to_vec());
    match index % 4 {
        0 => vec![],
        1 => vec![("trace-id".into(), text(&format!("trace-{index}")))],
        2 => vec![
            ("dup".into(), text("first")),
            ("dup".into(), text("second")),
            ("origin".into(), text("kafluss-suite")),
        ],
        _ if caps.null_header_values => vec![("nullable".into(), None), ("other".into(), text("x"))],
        _ if caps.binary_header_values => vec![("bin".into(), Some(vec![0, 0xff, 0x80, 1]))],
        _ => vec![("üñí".into(), text("çödé ✓"))],
    }
}

fn null_value_columns(mode: ValueMode) -> Map<String, Value> {
    let mut columns = Map::new();
    match mode {
        ValueMode::Binary | ValueMode::String | ValueMode::JsonNested => {
            columns.insert("_kafka_value".into(), Value::Null);
        }
        ValueMode::JsonFlat => {
            for name in [
                "id",
                "name",
                "price",
                "active",
                "ratio",
                "tags",
                "born",
                "seen",
                "attrs",
                "_kafka_rescue",
            ] {
                columns.insert(name.into(), Value::Null);
            }
        }
    }
    columns
}

fn value_for(
    mode: ValueMode,
    caps: Capabilities,
    seed: u64,
    index: usize,
) -> (Option<Vec<u8>>, Map<String, Value>) {
    let mut columns = Map::new();
    match mode {
        ValueMode::Binary => {
            let bytes: Vec<u8> = (0..(3 + index * 7) % 300)
                .map(|i| ((i * 37 + index * 11 + seed as usize) % 256) as u8)
                .filter(|b| !caps.delimited_stdin || (*b != 0x1e && *b != 0x1f))
                .chain(std::iter::once(0xff))
                .collect();
            columns.insert("_kafka_value".into(), json!(BASE64.encode(&bytes)));
            (Some(bytes), columns)
        }
        ValueMode::String => {
            let text = format!("text {seed}/{index}: ünïcödé ✓ 漢字 🚀 \"quoted\" \\ tab\t.");
            columns.insert("_kafka_value".into(), json!(text));
            (Some(text.into_bytes()), columns)
        }
        ValueMode::JsonFlat => {
            let order = Order::new(seed, index);
            let (text, value_columns) = order.flat();
            (Some(text.into_bytes()), value_columns)
        }
        ValueMode::JsonNested => {
            let order = Order::new(seed, index);
            let (text, value) = order.nested();
            columns.insert("_kafka_value".into(), value);
            (Some(text.into_bytes()), columns)
        }
    }
}

/// A business payload for the JSON tables, written as raw JSON text so number spellings
/// (`12.30` versus `"12.30"`, integer epoch versus ISO timestamps) are under the suite's control.
struct Order {
    id: i64,
    index: usize,
    price_cents: i64,
    seen_millis: i64,
}

impl Order {
    fn new(seed: u64, index: usize) -> Self {
        Self {
            id: seed as i64 * 1000 + index as i64,
            index,
            price_cents: 1230 + index as i64 * 101,
            seen_millis: 1_709_210_096_789 + index as i64 * 61_000,
        }
    }

    fn price_text(&self) -> String {
        format!("{}.{:02}", self.price_cents / 100, self.price_cents % 100)
    }

    fn name(&self) -> String {
        format!("order {} ü 漢 \"q\"", self.index)
    }

    /// Members that this record leaves out (they must read back as null).
    fn omits_name_and_price(&self) -> bool {
        self.index % 5 == 4
    }

    fn tags(&self) -> Vec<String> {
        if self.index % 4 == 3 {
            vec![]
        } else {
            vec![format!("t{}", self.index), "x".into()]
        }
    }

    fn flat(&self) -> (String, Map<String, Value>) {
        let mut members: Vec<(String, String)> = vec![("id".into(), self.id.to_string())];
        let mut columns = Map::new();
        columns.insert("id".into(), json!(self.id));
        if self.omits_name_and_price() {
            columns.insert("name".into(), Value::Null);
            columns.insert("price".into(), Value::Null);
        } else {
            members.push(("name".into(), json!(self.name()).to_string()));
            // Alternate a JSON number and a string holding the decimal literal.
            let price = if self.index.is_multiple_of(2) {
                self.price_text()
            } else {
                json!(self.price_text()).to_string()
            };
            members.push(("price".into(), price));
            columns.insert("name".into(), json!(self.name()));
            columns.insert("price".into(), json!(self.price_text()));
        }
        members.push(("active".into(), (self.index.is_multiple_of(3)).to_string()));
        columns.insert("active".into(), json!(self.index.is_multiple_of(3)));
        let ratio = self.index as f64 + 0.25;
        members.push(("ratio".into(), format!("{ratio}")));
        columns.insert("ratio".into(), json!(ratio));
        members.push(("tags".into(), json!(self.tags()).to_string()));
        columns.insert("tags".into(), json!(self.tags()));
        members.push(("born".into(), "\"2024-02-29\"".into()));
        columns.insert("born".into(), json!("2024-02-29"));
        // Alternate epoch milliseconds and an ISO instant with Z.
        let seen = if self.index.is_multiple_of(2) {
            self.seen_millis.to_string()
        } else {
            json!(format_ltz_millis(self.seen_millis)).to_string()
        };
        members.push(("seen".into(), seen));
        columns.insert("seen".into(), json!(format_ltz_millis(self.seen_millis)));
        members.push(("attrs".into(), format!("{{\"a\":{},\"b\":-1}}", self.index)));
        columns.insert("attrs".into(), json!({"a": self.index, "b": -1}));
        // An unknown member goes to _kafka_rescue; without one the rescue column stays null.
        if self.index % 2 == 1 {
            let note = format!("extra-{}", self.index);
            members.push(("note".into(), json!(note).to_string()));
            columns.insert("_kafka_rescue".into(), json_text(json!({ "note": note })));
        } else {
            columns.insert("_kafka_rescue".into(), Value::Null);
        }
        (json_object_text(&members), columns)
    }

    fn nested(&self) -> (String, Value) {
        let mut members: Vec<(String, String)> = vec![("id".into(), self.id.to_string())];
        let mut value = Map::new();
        value.insert("id".into(), json!(self.id));
        if self.omits_name_and_price() {
            value.insert("name".into(), Value::Null);
            value.insert("price".into(), Value::Null);
        } else {
            members.push(("name".into(), json!(self.name()).to_string()));
            members.push(("price".into(), self.price_text()));
            value.insert("name".into(), json!(self.name()));
            value.insert("price".into(), json!(self.price_text()));
        }
        members.push(("tags".into(), json!(self.tags()).to_string()));
        value.insert("tags".into(), json!(self.tags()));
        let score = self.index as f64 * 1.5;
        if self.index % 3 == 2 {
            // A missing ROW reads back as null.
            value.insert("detail".into(), Value::Null);
        } else {
            members.push((
                "detail".into(),
                format!(
                    "{{\"flag\":{},\"score\":{score:?}}}",
                    self.index.is_multiple_of(2)
                ),
            ));
            value.insert(
                "detail".into(),
                json!({"flag": self.index.is_multiple_of(2), "score": score}),
            );
        }
        members.push(("attrs".into(), format!("{{\"n\":{}}}", self.index)));
        value.insert("attrs".into(), json!({ "n": self.index }));
        (json_object_text(&members), Value::Object(value))
    }
}

fn json_object_text(members: &[(String, String)]) -> String {
    let body: Vec<String> = members
        .iter()
        .map(|(name, value)| format!("{}:{value}", json!(name)))
        .collect();
    format!("{{{}}}", body.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: Capabilities = Capabilities {
        timestamps: true,
        null_header_values: true,
        binary_header_values: true,
        delimited_stdin: false,
    };
    const KCAT: Capabilities = Capabilities {
        timestamps: false,
        null_header_values: false,
        binary_header_values: false,
        delimited_stdin: true,
    };

    #[test]
    fn json_payloads_are_valid_json_objects() {
        for mode in [ValueMode::JsonFlat, ValueMode::JsonNested] {
            for sample in samples(mode, FULL, 12, 3, 1) {
                if let Some(value) = &sample.record.value {
                    let parsed: Value = serde_json::from_slice(value).unwrap();
                    assert!(parsed.is_object(), "{parsed}");
                }
            }
        }
    }

    #[test]
    fn kcat_payloads_avoid_its_delimiters_and_empty_parts() {
        for mode in ValueMode::ALL {
            for sample in samples(mode, KCAT, 12, 9, 1) {
                let record = &sample.record;
                for part in [&record.key, &record.value].into_iter().flatten() {
                    assert!(!part.is_empty());
                    assert!(!part.contains(&0x1e) && !part.contains(&0x1f), "{mode:?}");
                }
                assert!(record.timestamp.is_none());
                assert!(record
                    .headers
                    .iter()
                    .all(|(_, v)| v.as_ref().is_some_and(|v| std::str::from_utf8(v).is_ok())));
            }
        }
    }

    #[test]
    fn expected_row_carries_system_columns() {
        let sample = &samples(ValueMode::Binary, FULL, 4, 1, 1)[2];
        let row = sample.expected_row((0, 1));
        assert_eq!(
            row["_kafka_headers"],
            json!({"dup": BASE64.encode("second"), "origin": BASE64.encode("kafluss-suite")})
        );
        assert_eq!(row["_kafka_key"], Value::Null);
        assert_eq!(
            row["_kafka_metadata"]["timestamp"],
            json!("2023-11-14T22:13:21.002Z")
        );
        assert_eq!(row["_kafka_metadata"]["partition"], json!(0));
    }

    #[test]
    fn last_record_is_a_tombstone_and_partitions_spread() {
        let all = samples(ValueMode::JsonFlat, FULL, 6, 1, 3);
        assert!(all[5].record.value.is_none());
        assert_eq!(all[5].expected_row((0, 1))["id"], Value::Null);
        let buckets = expected_by_bucket(&all, (0, 1));
        assert_eq!(buckets.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn create_table_sql_names_the_mode() {
        let sql = ValueMode::JsonNested.create_table_sql("db.t", 2);
        assert!(sql.starts_with("CREATE TABLE db.t ("), "{sql}");
        assert!(sql.contains("'table.kafka.convert.value.layout' = 'nested'"));
        assert!(sql.contains("'bucket.num' = '2'"));
    }
}
