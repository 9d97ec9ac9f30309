//! Conversion throughput on one core: `cargo bench -p kafluss-convert --bench convert`.
//! Each iteration converts one partition batch of `BATCH` records into an Arrow batch;
//! criterion reports elements (rows) per second.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kafluss_convert::mapping::{METADATA_COLUMN, VALUE_COLUMN};
use kafluss_convert::{
    ConversionPlan, DataType, Field, FieldType, JsonScratch, KafkaMapping, KafkaRecord, Schema,
    SystemColumns, TimestampType, ValueLayout, ValueType,
};

const BATCH: usize = 1000;

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

fn bench_batch(c: &mut Criterion, name: &str, plan: &ConversionPlan, values: &[Vec<u8>]) {
    let mut scratch = JsonScratch::default();
    let records: Vec<KafkaRecord<'_>> = values
        .iter()
        .map(|v| KafkaRecord {
            timestamp: 1_700_000_000_000,
            timestamp_type: TimestampType::CreateTime,
            ..KafkaRecord::with_value(v)
        })
        .collect();
    // Fail loudly instead of timing an error path.
    plan.convert_batch_with(&mut scratch, records.iter().copied())
        .expect("bench input converts");
    let bytes: usize = values.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(records.len() as u64));
    group.bench_function(
        format!("{} records, {} B avg", records.len(), bytes / records.len()),
        |b| {
            b.iter(|| {
                let batch = plan
                    .convert_batch_with(&mut scratch, black_box(records.iter().copied()))
                    .expect("converts");
                black_box(batch)
            })
        },
    );
    group.finish();
}

fn flat_json(c: &mut Criterion) {
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
    let values: Vec<Vec<u8>> = (0..BATCH)
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
    bench_batch(c, "flat_json_5_columns", &plan, &values);
}

fn nested_json(c: &mut Criterion) {
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
    let values: Vec<Vec<u8>> = (0..BATCH)
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
    bench_batch(c, "nested_json_array_map", &plan, &values);
}

fn binary_1k(c: &mut Criterion) {
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
    let values: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| (0..1024).map(|j| ((i + j) % 251) as u8).collect())
        .collect();
    bench_batch(c, "binary_1kib", &plan, &values);
}

criterion_group!(benches, flat_json, nested_json, binary_1k);
criterion_main!(benches);
