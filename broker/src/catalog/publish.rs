//! Turning the stored catalog into what the runtime reads: the snapshot with its tables'
//! effective settings and Kafka mappings, and the credentials in force.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafluss_auth::principal::USER_TYPE;
use kafluss_auth::{PlainCredentials, Principal, PLAIN_CREDENTIALS_KEY};
use kafluss_convert::mapping::{unreadable_kafka_keys, validate_kafka_mapping, TableShape, ENABLED_OPTION};
use kafluss_convert::types::quote_identifier;

use super::config::CatalogConfig;
use super::error::CatalogError;
use super::model::{
    topic_id, CatalogSnapshot, DatabaseInfo, KafkaTopic, TableInfo, BUCKET_NUM_OPTION, LOG_FORMAT_OPTION,
};
use super::output::string_literal;
use super::store::{StoredCatalog, StoredTable};
use super::validate::{check_log_format, parse_bucket_count};
use crate::log::ArrowCompression;

/// The snapshot for a stored catalog.
pub(crate) fn build_snapshot(config: &CatalogConfig, stored: &StoredCatalog) -> CatalogSnapshot {
    let mut databases = BTreeMap::new();
    let mut kafka_topics = Vec::new();
    for (database, tables) in &stored.databases {
        let mut infos = BTreeMap::new();
        for (name, table) in tables {
            let info = Arc::new(table_info(&stored.cluster_id, database, name, table, config));
            if info.is_kafka_topic() {
                kafka_topics.push(KafkaTopic {
                    name: info.path(),
                    table: Arc::clone(&info),
                });
            }
            infos.insert(name.clone(), info);
        }
        databases.insert(
            database.clone(),
            DatabaseInfo {
                name: database.clone(),
                tables: infos,
            },
        );
    }
    kafka_topics.sort_by(|a, b| a.name.cmp(&b.name));
    CatalogSnapshot {
        revision: stored.revision,
        cluster_id: stored.cluster_id.clone(),
        default_database: config.kafka_default_database.clone(),
        databases,
        kafka_topics,
    }
}

pub(crate) fn table_info(
    cluster_id: &str,
    database: &str,
    name: &str,
    table: &StoredTable,
    config: &CatalogConfig,
) -> TableInfo {
    let bucket_count = table
        .options
        .get(BUCKET_NUM_OPTION)
        .and_then(|text| parse_bucket_count(text).ok())
        .unwrap_or(config.default_bucket_number);
    let log_format =
        check_log_format(&table.options).unwrap_or_else(|_| table.options[LOG_FORMAT_OPTION].clone());
    // CREATE and ALTER refuse bad values; a catalog of another version may still hold one.
    let compression = ArrowCompression::from_options(&table.options).unwrap_or_default();
    let shape = TableShape {
        partitioned: !table.partition_keys.is_empty(),
        has_primary_key: !table.primary_key.is_empty(),
        log_format: &log_format,
    };
    let (kafka, kafka_error) = match validate_kafka_mapping(&table.schema, &table.options, shape) {
        Ok(mapping) => (mapping, None),
        Err(error) => (None, Some(error.to_string())),
    };
    TableInfo {
        id: table.id,
        database: database.to_string(),
        name: name.to_string(),
        schema: table.schema.clone(),
        options: table.options.clone(),
        bucket_count,
        log_format,
        compression,
        partition_keys: table.partition_keys.clone(),
        primary_key: table.primary_key.clone(),
        kafka,
        kafka_error,
        revision: table.revision,
        topic_id: topic_id(cluster_id, table.id),
    }
}

/// What to say at WARN of a table whose stored Kafka mapping is in error (`None` when it is
/// not): its topic is refused and so is every ALTER that leaves it in error, silently but for
/// the admin API. CREATE and ALTER refuse such a mapping, so only a catalog.json of an
/// earlier version holds one (a key it stored without reading). Names the table, the error
/// and, where one works, the one statement that fixes it (ALTER refuses a result still in
/// error, so one key at a time would not do): the RESET of the keys the mapping refuses when
/// the rest is a valid mapping, else that RESET with `table.kafka.enabled`'s, which leaves the
/// table without a topic.
pub(crate) fn kafka_error_warning(table: &TableInfo) -> Option<String> {
    let error = table.kafka_error.as_deref()?;
    let path = format!(
        "{}.{}",
        quote_identifier(&table.database),
        quote_identifier(&table.name)
    );
    let shape = TableShape {
        partitioned: !table.partition_keys.is_empty(),
        has_primary_key: !table.primary_key.is_empty(),
        log_format: &table.log_format,
    };
    let valid_without = |keys: &[&str]| {
        let mut rest = table.options.clone();
        for key in keys {
            rest.remove(*key);
        }
        validate_kafka_mapping(&table.schema, &rest, shape).is_ok()
    };
    let reset = |keys: &[&str]| {
        let list: Vec<String> = keys.iter().map(|key| string_literal(key)).collect();
        format!("ALTER TABLE {path} RESET ({})", list.join(", "))
    };
    let mut keys = unreadable_kafka_keys(&table.options);
    let fix = if !keys.is_empty() && valid_without(&keys) {
        format!(
            "{} (an earlier version stored {} without reading {}: the table then works as it \
             did there)",
            reset(&keys),
            if keys.len() == 1 { "this key" } else { "these keys" },
            if keys.len() == 1 { "it" } else { "them" },
        )
    } else {
        if table.options.contains_key(ENABLED_OPTION) {
            keys.push(ENABLED_OPTION);
        }
        if !keys.is_empty() && valid_without(&keys) {
            format!(
                "{} (the table then has no Kafka topic; its rows stay)",
                reset(&keys)
            )
        } else {
            "the table's table.kafka.* options, with ALTER TABLE SET or RESET, to the Kafka \
             mapping rules of docs/configuration.md"
                .to_string()
        }
    };
    Some(format!(
        "table {path}: its Kafka mapping is in error, so Kafka clients are refused its topic \
         (INVALID_TOPIC) and an ALTER TABLE that leaves it so is refused (INVALID_KAFKA_MAPPING); \
         its rows still scan. Error: {error}. Fix: {fix}"
    ))
}

/// The PLAIN credentials in force: the dynamic value when set (stored form: salted hashes, or
/// plaintext from a catalog written before hashing), else the configured one (plaintext).
pub(crate) fn effective_credentials(
    config: &CatalogConfig,
    dynamic: &BTreeMap<String, String>,
) -> Result<PlainCredentials, CatalogError> {
    let parsed = match (dynamic.get(PLAIN_CREDENTIALS_KEY), &config.plain_credentials) {
        (Some(stored), _) => PlainCredentials::parse_stored(stored),
        (None, Some(configured)) => PlainCredentials::parse(configured),
        (None, None) => Ok(PlainCredentials::empty()),
    };
    parsed.map_err(|error| CatalogError::Config {
        key: PLAIN_CREDENTIALS_KEY,
        reason: error.to_string(),
    })
}

/// Why `credentials` would leave no super user able to log in, when they would: the
/// authorizer is on, the admin listener requires a login, `super.users` names users, and
/// none of them has a password in `credentials`. Names no password.
pub(crate) fn super_user_lockout(config: &CatalogConfig, credentials: &PlainCredentials) -> Option<String> {
    let users: Vec<&Principal> = config
        .super_users
        .iter()
        .filter(|principal| principal.principal_type() == USER_TYPE)
        .collect();
    if !config.authorizer_enabled
        || !config.admin_login_required
        || users.is_empty()
        || users.iter().any(|user| credentials.contains(user.name()))
    {
        return None;
    }
    let names: Vec<&str> = users.iter().map(|user| user.as_str()).collect();
    Some(format!(
        "no super user could log in: none of super.users ({}) has a password in {PLAIN_CREDENTIALS_KEY}",
        names.join(";")
    ))
}

/// A new cluster id: 16 random bytes as URL-safe base64 without padding (22 characters,
/// the shape Kafka uses). Like Kafka's `Uuid.randomUuid()`, bytes are drawn again while the id
/// would start with '-' (a command line reads `--cluster-id -abc` as an option) or be all zero.
pub(crate) fn new_cluster_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    let mut bytes = [0u8; 16];
    loop {
        urandom.read_exact(&mut bytes)?;
        if let Some(id) = cluster_id_of(bytes) {
            return Ok(id);
        }
    }
}

/// The id these bytes make, or `None` where Kafka would draw again.
fn cluster_id_of(bytes: [u8; 16]) -> Option<String> {
    use base64::Engine;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    (bytes != [0; 16] && !id.starts_with('-')).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::{cluster_id_of, kafka_error_warning, new_cluster_id, table_info};
    use crate::catalog::config::CatalogConfig;
    use crate::catalog::sql_types::parse_type;
    use crate::catalog::store::StoredTable;
    use kafluss_convert::types::{Field, Schema};

    /// The start-up warning of a table with `columns` and `options` as stored.
    fn warning(columns: &[(&str, &str)], options: &[(&str, &str)]) -> Option<String> {
        let table = StoredTable {
            id: 1,
            schema: Schema::new(
                columns
                    .iter()
                    .map(|(name, text)| Field::new(*name, parse_type(text).unwrap()))
                    .collect(),
            ),
            options: options
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            partition_keys: Vec::new(),
            primary_key: Vec::new(),
            revision: 1,
        };
        let config = CatalogConfig::new("/nonexistent");
        kafka_error_warning(&table_info("id", "fluss", "my-t", &table, &config))
    }

    #[test]
    fn a_stored_mapping_in_error_is_named_with_the_one_statement_that_fixes_it() {
        let columns = [("_kafka_value", "STRING"), ("_kafka_key", "BYTES")];
        let enabled = ("table.kafka.enabled", "true");
        let string = ("table.kafka.convert.value.type", "string");
        // Valid, or without a mapping: nothing to say.
        assert_eq!(warning(&columns, &[enabled, string]), None);
        assert_eq!(warning(&columns, &[]), None);
        // Keys it refuses, the rest valid: their RESET, all in one statement.
        let text = warning(
            &columns,
            &[
                enabled,
                string,
                ("TABLE.KAFKA.KEY.TYPE", "binary"),
                (" table.kafka.enabled", "x'y"),
            ],
        )
        .unwrap();
        assert!(
            text.starts_with("table fluss.`my-t`: its Kafka mapping is in error")
                && text.contains("Error: option ' table.kafka.enabled' must be written 'table.kafka.enabled'")
                && text.contains(
                    "Fix: ALTER TABLE fluss.`my-t` RESET (' table.kafka.enabled', 'TABLE.KAFKA.KEY.TYPE') (an earlier version stored these keys"
                ),
            "{text}"
        );
        // A key it refuses and a schema the mapping refuses: the mapping off too.
        let strict = [("_kafka_value", "STRING NOT NULL")];
        let text = warning(&strict, &[enabled, string, ("Table.Kafka.X", "1")]).unwrap();
        assert!(
            text.contains(
                "Fix: ALTER TABLE fluss.`my-t` RESET ('Table.Kafka.X', 'table.kafka.enabled') (the table then has no Kafka topic"
            ),
            "{text}"
        );
        let text = warning(&strict, &[enabled, string]).unwrap();
        assert!(
            text.contains("Error: column '_kafka_value' must be nullable")
                && text.contains("Fix: ALTER TABLE fluss.`my-t` RESET ('table.kafka.enabled') (the table"),
            "{text}"
        );
        // A bad value that no RESET of keys it refuses or of the mapping's switch mends.
        let text = warning(&columns, &[("table.kafka.convert.value.type", "json")]).unwrap();
        assert!(
            text.contains("Error: invalid value 'json'")
                && text.contains("Fix: the table's table.kafka.* options, with ALTER TABLE SET or RESET"),
            "{text}"
        );
    }

    #[test]
    fn cluster_ids_are_kafka_shaped_and_never_start_with_a_dash() {
        // 0xF8 = 0b111110_00: the first base64 digit is 62, '-' in the URL-safe alphabet.
        let mut dash = [7u8; 16];
        dash[0] = 0xF8;
        assert_eq!(cluster_id_of(dash), None);
        assert_eq!(cluster_id_of([0; 16]), None);
        // 0xFC = 0b111111_00: digit 63, '_', is kept.
        let mut underscore = [7u8; 16];
        underscore[0] = 0xFC;
        assert!(cluster_id_of(underscore).unwrap().starts_with('_'));
        for _ in 0..2_000 {
            let id = new_cluster_id().unwrap();
            assert_eq!(id.len(), 22, "{id}");
            assert!(!id.starts_with('-'), "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{id}"
            );
        }
    }
}
