//! Table rules that need no Kafka knowledge: names, unique columns, keys, options. The Kafka
//! mapping rules live in `kafluss_convert::mapping`; `check_kafka` applies them.

use std::collections::{BTreeMap, BTreeSet};

use kafluss_convert::mapping::{
    validate_kafka_mapping, MappingError, MisspelledOption, TableShape, KAFKA_OPTIONS,
};
use kafluss_convert::types::{DataType, Field, FieldType, Schema};

use super::error::SqlError;
use super::model::{BUCKET_NUM_OPTION, DEFAULT_LOG_FORMAT, LOG_FORMAT_OPTION};
use super::resolve::{check_database_name, check_fluss_name, MAX_TOPIC_NAME_LEN};

/// Most columns of a PRIMARY KEY or a PARTITIONED BY clause (each key column's DESCRIBE line
/// names the whole key, so the answer grows with the square of its length).
pub const MAX_KEY_COLUMNS: usize = 64;
/// Most top-level columns of a table.
pub const MAX_COLUMNS: usize = 10_000;

/// Upper bound of `bucket.num`: each bucket is a directory and a log on some core.
pub const MAX_BUCKETS: u32 = 1024;
/// Retention of a table's log (read by the storage's retention task).
pub const LOG_TTL_OPTION: &str = "table.log.ttl";
/// Log formats Fluss knows; only `arrow` can be mapped to Kafka.
pub const LOG_FORMATS: [&str; 3] = ["arrow", "indexed", "compacted"];

/// The table options the catalog and the storage read (the `table.kafka.*` ones are the Kafka
/// mapping's, [`KAFKA_OPTIONS`]): a key differing from one only in ASCII case or surrounding
/// whitespace is refused ([`MisspelledOption`]).
pub(crate) const TABLE_OPTIONS: [&str; 5] = [
    BUCKET_NUM_OPTION,
    LOG_FORMAT_OPTION,
    LOG_TTL_OPTION,
    crate::log::compression::COMPRESSION_TYPE_OPTION,
    crate::log::compression::ZSTD_LEVEL_OPTION,
];

/// Options fixed at CREATE: changing them would reinterpret stored data.
pub(crate) const FIXED_OPTIONS: [&str; 2] = [BUCKET_NUM_OPTION, LOG_FORMAT_OPTION];

pub(crate) fn check_name(name: &str) -> Result<(), SqlError> {
    check_fluss_name(name).map_err(|reason| SqlError::InvalidName {
        name: name.to_string(),
        reason,
    })
}

/// [`check_name`] for a new database ([`check_database_name`]).
pub(crate) fn check_new_database_name(name: &str) -> Result<(), SqlError> {
    check_database_name(name).map_err(|reason| SqlError::InvalidName {
        name: name.to_string(),
        reason,
    })
}

/// Column and ROW field names are unique at each level (recursively).
pub(crate) fn check_unique_fields(fields: &[Field], prefix: &str) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for field in fields {
        let path = format!("{prefix}{}", field.name);
        if !seen.insert(field.name.as_str()) {
            return Err(format!("duplicate column '{path}'"));
        }
        check_unique_nested(&field.field_type, &path)?;
    }
    Ok(())
}

pub(crate) fn check_unique_nested(field_type: &FieldType, path: &str) -> Result<(), String> {
    match &field_type.data_type {
        DataType::Row(fields) => check_unique_fields(fields, &format!("{path}.")),
        DataType::Array(element) => check_unique_nested(element, &format!("{path}[]")),
        DataType::Map { key, value } => {
            check_unique_nested(key, &format!("{path}{{key}}"))?;
            check_unique_nested(value, &format!("{path}{{}}"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn check_key_columns(columns: &[Field], keys: &[String], clause: &str) -> Result<(), String> {
    if keys.len() > MAX_KEY_COLUMNS {
        return Err(format!(
            "{clause} names {} columns; at most {MAX_KEY_COLUMNS}",
            keys.len()
        ));
    }
    let names: BTreeSet<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let mut seen = BTreeSet::new();
    for key in keys {
        if !names.contains(key.as_str()) {
            return Err(format!("{clause} column '{key}' is not a column of the table"));
        }
        if !seen.insert(key) {
            return Err(format!("{clause} names column '{key}' twice"));
        }
    }
    Ok(())
}

/// The options of a CREATE or ALTER ... SET, each key once. A key written like one of
/// [`TABLE_OPTIONS`] but for case or surrounding spaces is refused here; the Kafka keys are
/// checked alike by [`check_kafka`] (which answers INVALID_KAFKA_MAPPING).
pub(crate) fn collect_options(pairs: Vec<(String, String)>) -> Result<BTreeMap<String, String>, String> {
    let mut options = BTreeMap::new();
    for (key, value) in pairs {
        if key.trim().is_empty() {
            return Err("option keys cannot be empty".to_string());
        }
        MisspelledOption::check(&key, &TABLE_OPTIONS).map_err(|error| error.to_string())?;
        if options.insert(key.clone(), value).is_some() {
            return Err(format!("option '{key}' is given twice"));
        }
    }
    Ok(options)
}

/// A key of ALTER ... RESET that the table does not hold as written must not be a misspelling
/// of an option kafluss reads: resetting it would change nothing while seeming to reset that
/// option. (A misspelled key a table holds, stored by an earlier version, may be reset.)
pub(crate) fn check_reset_key(
    path: &str,
    key: &str,
    options: &BTreeMap<String, String>,
) -> Result<(), SqlError> {
    if options.contains_key(key) {
        return Ok(());
    }
    MisspelledOption::check(key, &KAFKA_OPTIONS).map_err(|error| SqlError::KafkaMapping {
        table: path.to_string(),
        source: MappingError::MisspelledOption(error),
    })?;
    MisspelledOption::check(key, &TABLE_OPTIONS).map_err(|error| SqlError::InvalidTable {
        table: path.to_string(),
        reason: error.to_string(),
    })
}

pub(crate) fn parse_bucket_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n @ 1..=MAX_BUCKETS) => Ok(n),
        _ => Err(format!(
            "'{BUCKET_NUM_OPTION}' must be an integer between 1 and {MAX_BUCKETS}, got '{text}'"
        )),
    }
}

/// `ALTER ... SET` of an option fixed at CREATE ([`FIXED_OPTIONS`]): `Ok` (the caller changes
/// nothing) when `value` means the value in effect, compared as parsed, so `'01'` or `' 1 '`
/// for one bucket and `'ARROW'` for a table whose format is `arrow` (set or by default); else
/// why not, an invalid value saying what is valid. `default_buckets` is
/// `default.bucket.number`, in effect for a table stored without `bucket.num` (as
/// `publish::table_info` reads it).
pub(crate) fn check_fixed_unchanged(
    options: &BTreeMap<String, String>,
    key: &str,
    value: &str,
    default_buckets: u32,
) -> Result<(), String> {
    let (unchanged, current) = match key {
        BUCKET_NUM_OPTION => {
            let current = options
                .get(key)
                .and_then(|text| parse_bucket_count(text).ok())
                .unwrap_or(default_buckets);
            (parse_bucket_count(value)? == current, current.to_string())
        }
        LOG_FORMAT_OPTION => {
            let new = check_log_format(&BTreeMap::from([(key.to_string(), value.to_string())]))?;
            let current =
                check_log_format(options).unwrap_or_else(|_| options.get(key).cloned().unwrap_or_default());
            (new == current, current)
        }
        _ => {
            let current = options.get(key).cloned().unwrap_or_default();
            (current == value, current)
        }
    };
    if unchanged {
        Ok(())
    } else {
        Err(format!(
            "option '{key}' cannot be altered: it is fixed at CREATE ('{current}' for this table)"
        ))
    }
}

/// `table.log.ttl`, when set, must be a duration the retention task understands; one too
/// large for it says so, with the largest.
pub(crate) fn check_log_ttl(options: &BTreeMap<String, String>) -> Result<(), String> {
    let Some(value) = options.get(LOG_TTL_OPTION) else {
        return Ok(());
    };
    match crate::units::parse_duration(value) {
        Err(
            reason @ (crate::units::UnitError::NumberTooLarge | crate::units::UnitError::DurationTooLarge),
        ) => Err(format!(
            "'{LOG_TTL_OPTION}' is too large, got '{value}': {reason}"
        )),
        _ if crate::log::parse_ttl(value).is_none() => Err(format!(
            "'{LOG_TTL_OPTION}' must be a positive duration such as '7d', '12h' or '30min', got '{value}'"
        )),
        _ => Ok(()),
    }
}

/// `table.log.arrow.compression.type` and `.zstd.level`, when set, must be values Fluss accepts.
pub(crate) fn check_log_compression(options: &BTreeMap<String, String>) -> Result<(), String> {
    crate::log::ArrowCompression::from_options(options).map(|_| ())
}

/// The effective `table.log.format`, lowercase.
pub(crate) fn check_log_format(options: &BTreeMap<String, String>) -> Result<String, String> {
    let Some(value) = options.get(LOG_FORMAT_OPTION) else {
        return Ok(DEFAULT_LOG_FORMAT.to_string());
    };
    let format = value.trim().to_ascii_lowercase();
    if LOG_FORMATS.contains(&format.as_str()) {
        Ok(format)
    } else {
        Err(format!(
            "'{LOG_FORMAT_OPTION}' must be one of {}, got '{value}'",
            LOG_FORMATS.join(", ")
        ))
    }
}

pub(crate) fn check_kafka(
    path: &str,
    schema: &Schema,
    options: &BTreeMap<String, String>,
    partition_keys: &[String],
    primary_key: &[String],
    log_format: &str,
) -> Result<(), SqlError> {
    let shape = TableShape {
        partitioned: !partition_keys.is_empty(),
        has_primary_key: !primary_key.is_empty(),
        log_format,
    };
    let mapping =
        validate_kafka_mapping(schema, options, shape).map_err(|source| SqlError::KafkaMapping {
            table: path.to_string(),
            source,
        })?;
    // Every topic is listed as `db.table`, which Kafka clients accept only up to 249 bytes.
    if mapping.is_some() && path.len() > MAX_TOPIC_NAME_LEN {
        return Err(SqlError::InvalidTable {
            table: path.to_string(),
            reason: format!(
                "its Kafka topic name '<database>.<table>' is {} characters, Kafka allows at most {MAX_TOPIC_NAME_LEN}",
                path.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A misspelled key a table holds (stored before such keys were refused) may be reset; one
    /// it does not hold is refused, with the error kind of the option it resembles.
    #[test]
    fn reset_refuses_a_misspelled_key_unless_the_table_holds_it() {
        let held = BTreeMap::from([("TABLE.KAFKA.ENABLED".to_string(), "true".to_string())]);
        assert!(check_reset_key("fluss.t", "TABLE.KAFKA.ENABLED", &held).is_ok());
        let error = check_reset_key("fluss.t", "Table.Kafka.Enabled", &held).unwrap_err();
        assert_eq!(error.code(), "INVALID_KAFKA_MAPPING");
        let error = check_reset_key("fluss.t", "Bucket.Num", &held).unwrap_err();
        assert_eq!(error.code(), "INVALID_TABLE");
        assert!(
            error.to_string().contains("must be written 'bucket.num'"),
            "{error}"
        );
        assert!(check_reset_key("fluss.t", "table.log.ttl", &held).is_ok());
        assert!(check_reset_key("fluss.t", "anything", &held).is_ok());
    }
}
