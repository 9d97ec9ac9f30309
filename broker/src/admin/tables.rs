//! The JSON answer of `GET /v1/tables/{db}.{table}`.

use kafluss_convert::mapping::{KafkaMapping, ValueLayout, ValueType};
use serde_json::{json, Value};

use crate::catalog::TableInfo;

/// The table's description; `row_counts` are `(bucket, rows)` from the storage, `None` when
/// no storage is attached (then `buckets` lists every bucket with `rows: null`).
pub fn table_json(table: &TableInfo, row_counts: Option<&[(u32, u64)]>) -> Value {
    let columns: Vec<Value> = table
        .schema
        .columns
        .iter()
        .map(|column| {
            json!({
                "name": column.name,
                "type": column.field_type.to_string(),
                "nullable": column.field_type.nullable,
            })
        })
        .collect();
    let buckets: Vec<Value> = (0..table.bucket_count)
        .map(|bucket| {
            let rows = row_counts.map(|counts| {
                counts
                    .iter()
                    .find(|(b, _)| *b == bucket)
                    .map_or(0, |(_, rows)| *rows)
            });
            json!({ "bucket": bucket, "rows": rows })
        })
        .collect();
    let total_rows: Option<u64> = row_counts.map(|counts| counts.iter().map(|(_, rows)| *rows).sum());
    let enabled = table
        .options
        .get(kafluss_convert::mapping::ENABLED_OPTION)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    json!({
        "database": table.database,
        "table": table.name,
        "id": table.id,
        "columns": columns,
        "primary_key": table.primary_key,
        "partition_keys": table.partition_keys,
        "options": table.options,
        "bucket_count": table.bucket_count,
        "log_format": table.log_format,
        "kafka": kafka_json(enabled, table.kafka.as_ref(), table.kafka_error.as_deref(), table),
        "buckets": buckets,
        "row_count": total_rows,
    })
}

fn kafka_json(
    enabled: bool,
    mapping: Option<&KafkaMapping>,
    error: Option<&str>,
    table: &TableInfo,
) -> Value {
    let Some(mapping) = mapping else {
        return json!({ "enabled": enabled, "served": false, "error": error });
    };
    let value_type = match mapping.value_type {
        ValueType::Binary => "binary",
        ValueType::String => "string",
        ValueType::ParseJson => "parse_json",
    };
    let layout = match mapping.layout {
        ValueLayout::Flat => "flat",
        ValueLayout::Nested => "nested",
    };
    let column = |index: Option<usize>| index.map(|i| table.schema.columns[i].name.clone());
    let system: Vec<String> = [
        mapping.system.key,
        mapping.system.headers,
        mapping.system.metadata,
        mapping.system.rescue,
        mapping.system.value,
    ]
    .into_iter()
    .filter_map(column)
    .collect();
    json!({
        "enabled": true,
        "served": true,
        "topic": table.path(),
        "topic_id": uuid_text(&table.topic_id),
        "value_type": value_type,
        "value_layout": layout,
        "key_type": if mapping.key_binary { Some("binary") } else { None },
        "system_columns": system,
        "error": null,
    })
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
