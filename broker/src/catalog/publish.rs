//! Turning the stored catalog into what the runtime reads: the snapshot with its tables'
//! effective settings and Kafka mappings, and the credentials in force.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafluss_auth::principal::USER_TYPE;
use kafluss_auth::{PlainCredentials, Principal, PLAIN_CREDENTIALS_KEY};
use kafluss_convert::mapping::{validate_kafka_mapping, TableShape};

use super::config::CatalogConfig;
use super::error::CatalogError;
use super::model::{
    topic_id, CatalogSnapshot, DatabaseInfo, KafkaTopic, TableInfo, BUCKET_NUM_OPTION, LOG_FORMAT_OPTION,
};
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
    use super::{cluster_id_of, new_cluster_id};

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
