//! The benchmark workloads, shared by the criterion bench and the CPU-time bench.

use kafluss_convert::mapping::{METADATA_COLUMN, VALUE_COLUMN};
use kafluss_convert::{
    ConversionPlan, DataType, Field, FieldType, KafkaMapping, KafkaRecord, Schema, SystemColumns,
    TimestampType, ValueLayout, ValueType,
};

/// Records per converted partition batch: 1000.
///
/// `KAFLUSS_BENCH_ROWS=N` makes it N (segment_compression: what the size of a stored message
/// costs a codec, each column buffer being compressed on its own).
pub fn batch() -> usize {
    std::env::var("KAFLUSS_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&rows: &usize| rows > 0)
        .unwrap_or(1000)
}

/// A named plan with the record values of one batch.
pub struct Workload {
    pub name: &'static str,
    pub plan: ConversionPlan,
    pub values: Vec<Vec<u8>>,
}

impl Workload {
    pub fn records(&self) -> Vec<KafkaRecord<'_>> {
        self.values
            .iter()
            .map(|v| KafkaRecord {
                timestamp: 1_700_000_000_000,
                timestamp_type: TimestampType::CreateTime,
                ..KafkaRecord::with_value(v)
            })
            .collect()
    }

    pub fn average_value_len(&self) -> usize {
        self.values.iter().map(Vec::len).sum::<usize>() / self.values.len().max(1)
    }
}

/// Builds a workload on demand (making the binary values takes a while).
pub type Build = fn() -> Workload;

/// Every workload by name.
pub fn all() -> Vec<(&'static str, Build)> {
    vec![
        ("flat_json_5_columns", flat_json),
        ("nested_json_array_map", nested_json),
        ("binary_1kib", binary_1k),
    ]
}

fn n(data_type: DataType) -> FieldType {
    FieldType::nullable(data_type)
}

fn col(name: &str, data_type: DataType) -> Field {
    Field::new(name, n(data_type))
}

fn mapping(schema: &Schema, value_type: ValueType, layout: ValueLayout) -> KafkaMapping {
    let find = |name: &str| schema.columns.iter().position(|c| c.name == name);
    KafkaMapping {
        value_type,
        layout,
        key_binary: false,
        system: SystemColumns {
            key: find("_kafka_key"),
            headers: None,
            metadata: find(METADATA_COLUMN),
            rescue: find("_kafka_rescue"),
            value: find(VALUE_COLUMN),
        },
    }
}

/// ~100 B JSON objects into 5 top-level columns.
pub fn flat_json() -> Workload {
    let schema = Schema::new(vec![
        col("order_id", DataType::BigInt),
        col("customer", DataType::String),
        col(
            "amount",
            DataType::Decimal {
                precision: 18,
                scale: 2,
            },
        ),
        col("quantity", DataType::Int),
        col("status", DataType::String),
    ]);
    let plan = ConversionPlan::compile(
        &schema,
        &mapping(&schema, ValueType::ParseJson, ValueLayout::Flat),
    )
    .expect("plan");
    let values: Vec<Vec<u8>> = (0..batch())
        .map(|i| {
            format!(
                r#"{{"order_id":{},"customer":"customer-{:06}","amount":{}.{:02},"quantity":{},"status":"SHIPPED"}}"#,
                1_000_000_000 + i,
                i % 5000,
                i * 7 % 100_000,
                i % 100,
                i % 50
            )
            .into_bytes()
        })
        .collect();
    Workload {
        name: "flat_json_5_columns",
        plan,
        values,
    }
}

/// Nested JSON with ARRAY, MAP and ARRAY<ROW> into `_kafka_value`.
pub fn nested_json() -> Workload {
    let item = DataType::Row(vec![col("sku", DataType::String), col("qty", DataType::Int)]);
    let schema = Schema::new(vec![
        col(
            "_kafka_value",
            DataType::Row(vec![
                col("id", DataType::BigInt),
                col("tags", DataType::Array(Box::new(n(DataType::String)))),
                col(
                    "attrs",
                    DataType::Map {
                        key: Box::new(FieldType::not_null(DataType::String)),
                        value: Box::new(n(DataType::Double)),
                    },
                ),
                col("items", DataType::Array(Box::new(n(item)))),
                col("created", DataType::TimestampLtz(3)),
            ]),
        ),
        col("_kafka_rescue", DataType::String),
    ]);
    let plan = ConversionPlan::compile(
        &schema,
        &mapping(&schema, ValueType::ParseJson, ValueLayout::Nested),
    )
    .expect("plan");
    let values: Vec<Vec<u8>> = (0..batch())
        .map(|i| {
            format!(
                r#"{{"id":{i},"tags":["red","blue","tag-{}"],"attrs":{{"weight":{}.5,"height":12.25}},"items":[{{"sku":"A-{}","qty":{}}},{{"sku":"B-1","qty":2}}],"created":"2024-02-29T12:00:00.123Z"}}"#,
                i % 10,
                i % 90,
                i % 1000,
                i % 9
            )
            .into_bytes()
        })
        .collect();
    Workload {
        name: "nested_json_array_map",
        plan,
        values,
    }
}

/// 1 KiB binary values with `_kafka_metadata`.
pub fn binary_1k() -> Workload {
    let schema = Schema::new(vec![
        col("_kafka_value", DataType::Bytes),
        col(
            METADATA_COLUMN,
            DataType::Row(vec![
                col("timestamp", DataType::TimestampLtz(3)),
                col("timestamp_type", DataType::Int),
                col("partition", DataType::Int),
            ]),
        ),
    ]);
    let plan = ConversionPlan::compile(&schema, &mapping(&schema, ValueType::Binary, ValueLayout::Flat))
        .expect("plan");
    let values: Vec<Vec<u8>> = (0..batch())
        .map(|i| (0..1024).map(|j| ((i + j) % 251) as u8).collect())
        .collect();
    Workload {
        name: "binary_1kib",
        plan,
        values,
    }
}

/// ~100 B of text (lower-case letters and spaces, xorshift) into a BYTES `_kafka_value`: the
/// table and values of `bench/scenarios/stock-client.sh` with `VALUE=binary` (not in [`all`]:
/// the row-path bench's own case).
#[allow(dead_code)]
pub fn text_100b() -> Workload {
    let schema = Schema::new(vec![col("_kafka_value", DataType::Bytes)]);
    let plan = ConversionPlan::compile(&schema, &mapping(&schema, ValueType::Binary, ValueLayout::Flat))
        .expect("plan");
    let mut random = Xorshift(0x9e37_79b9_7f4a_7c15);
    let values: Vec<Vec<u8>> = (0..batch())
        .map(|_| (0..100).map(|_| random.letter()).collect())
        .collect();
    Workload {
        name: "text_100b",
        plan,
        values,
    }
}

/// About 100 B flat JSON objects shaped as the load generator's `json-flat` values
/// (`kafluss-bench values --value json-flat`: `id`, `name`, `amount`, `active` and a `note` of
/// random letters padding the object to 100 bytes) into the table `kafluss-bench table-sql
/// --value json-flat` makes (not in [`all`]: the row-path bench's own case).
#[allow(dead_code)]
pub fn load_json_flat() -> Workload {
    let schema = Schema::new(vec![
        col("id", DataType::BigInt),
        col("name", DataType::String),
        col("amount", DataType::Double),
        col("active", DataType::Boolean),
        col("note", DataType::String),
    ]);
    let plan = ConversionPlan::compile(
        &schema,
        &mapping(&schema, ValueType::ParseJson, ValueLayout::Flat),
    )
    .expect("plan");
    let mut random = Xorshift(0x2545_f491_4f6c_dd1d);
    let values: Vec<Vec<u8>> = (0..batch() as u64)
        .map(|n| {
            let mut json = format!(
                r#"{{"id":{n},"name":"user-{}","amount":{}.{:02},"active":{},"note":""#,
                n % 10_000,
                random.next() % 100_000,
                random.next() % 100,
                n % 2 == 0
            );
            while json.len() + 2 < 100 {
                json.push(random.letter() as char);
            }
            json.push_str("\"}");
            json.into_bytes()
        })
        .collect();
    Workload {
        name: "load_json_flat",
        plan,
        values,
    }
}

/// xorshift64: the benches' reproducible random numbers.
#[allow(dead_code)]
struct Xorshift(u64);

#[allow(dead_code)]
impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A lower-case letter or a space, as the load generator's text.
    fn letter(&mut self) -> u8 {
        match self.next() % 27 {
            26 => b' ',
            letter => b'a' + letter as u8,
        }
    }
}
