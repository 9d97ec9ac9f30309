//! Kafka topic names → tables (behaviour.md "Topics"), on the hot path: no
//! locks, no allocation for a valid name that resolves.

use std::sync::Arc;

use thiserror::Error;

use super::model::{CatalogSnapshot, TableInfo};
pub use super::names::{check_fluss_name, MAX_FLUSS_NAME_LEN};

/// Kafka's limit on a topic name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Why a topic does not resolve. The broker maps these to Kafka codes: `InvalidName`,
/// `MappingDisabled` and `Ineligible` → INVALID_TOPIC_EXCEPTION; `UnknownDatabase` and
/// `UnknownTable` → UNKNOWN_TOPIC_OR_PARTITION.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopicError {
    #[error("invalid topic name: {0}")]
    InvalidName(&'static str),
    #[error("database '{0}' does not exist")]
    UnknownDatabase(String),
    #[error("table '{0}' does not exist")]
    UnknownTable(String),
    #[error("table '{0}' does not have Kafka mapping enabled (set 'table.kafka.enabled' = 'true')")]
    MappingDisabled(String),
    #[error("table '{table}' cannot be served as a Kafka topic: {reason}")]
    Ineligible { table: String, reason: String },
}

impl TopicError {
    /// UNKNOWN_TOPIC_OR_PARTITION rather than INVALID_TOPIC_EXCEPTION.
    pub fn is_unknown(&self) -> bool {
        matches!(self, TopicError::UnknownDatabase(_) | TopicError::UnknownTable(_))
    }
}

/// Whether a topic names its table without a database (`orders`, in `kafka.default.database`),
/// as [`split_topic`] reads it: to a client it is another topic than `db.orders`, with its own
/// topic id and its own idempotent sequences.
pub fn is_bare(topic: &str) -> bool {
    !topic.contains('.')
}

/// Splits a topic into (database, table): `db.table`, or a bare `table` in `default_db`.
pub fn split_topic<'a>(topic: &'a str, default_db: &'a str) -> Result<(&'a str, &'a str), TopicError> {
    if topic.is_empty() {
        return Err(TopicError::InvalidName("the name is empty"));
    }
    if topic.len() > MAX_TOPIC_NAME_LEN {
        return Err(TopicError::InvalidName("longer than 249 characters"));
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(TopicError::InvalidName(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    let (database, table) = match topic.split_once('.') {
        Some((_, rest)) if rest.contains('.') => {
            return Err(TopicError::InvalidName(
                "at most one '.' (between database and table) is allowed",
            ))
        }
        Some((database, table)) => (database, table),
        None => (default_db, topic),
    };
    check_fluss_name(database).map_err(TopicError::InvalidName)?;
    check_fluss_name(table).map_err(TopicError::InvalidName)?;
    Ok((database, table))
}

/// [`check_fluss_name`] for a database: its name is also not the ACL resource name of the
/// whole cluster (`cluster`, any case), which would make `cluster` and `cluster.t` in
/// `CALL sys.add_acl` mean two things.
pub fn check_database_name(name: &str) -> Result<(), &'static str> {
    check_fluss_name(name)?;
    if kafluss_auth::Resource::is_cluster_name(name) {
        return Err("'cluster' (in any case) names the whole cluster in ACLs (CALL sys.add_acl(resource => 'cluster', ...)), so no database may be called that");
    }
    Ok(())
}

/// Resolves a Kafka topic to its table.
pub fn resolve_topic(
    snapshot: &CatalogSnapshot,
    topic: &str,
    default_db: &str,
) -> Result<Arc<TableInfo>, TopicError> {
    let (database, table) = split_topic(topic, default_db)?;
    resolve_names(snapshot, database, table)
}

/// [`resolve_topic`] for a topic already split into its database and table names.
pub fn resolve_names(
    snapshot: &CatalogSnapshot,
    database: &str,
    table: &str,
) -> Result<Arc<TableInfo>, TopicError> {
    let Some(db) = snapshot.databases.get(database) else {
        return Err(TopicError::UnknownDatabase(database.to_string()));
    };
    let Some(info) = db.tables.get(table) else {
        return Err(TopicError::UnknownTable(format!("{database}.{table}")));
    };
    if let Some(reason) = &info.kafka_error {
        return Err(TopicError::Ineligible {
            table: info.path(),
            reason: reason.clone(),
        });
    }
    if info.kafka.is_none() {
        return Err(TopicError::MappingDisabled(info.path()));
    }
    Ok(Arc::clone(info))
}

impl CatalogSnapshot {
    /// [`resolve_topic`] with this snapshot's `kafka.default.database`.
    pub fn resolve_topic(&self, topic: &str) -> Result<Arc<TableInfo>, TopicError> {
        resolve_topic(self, topic, &self.default_database)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_with_and_without_database() {
        assert_eq!(split_topic("orders", "fluss"), Ok(("fluss", "orders")));
        assert_eq!(split_topic("fluss.orders", "x"), Ok(("fluss", "orders")));
        assert_eq!(split_topic("sales.orders", "fluss"), Ok(("sales", "orders")));
        assert_eq!(split_topic("a-b.c_d", "fluss"), Ok(("a-b", "c_d")));
    }

    #[test]
    fn refuses_invalid_names() {
        let long = "a".repeat(250);
        let long_part = format!("{}.t", "d".repeat(201));
        for bad in [
            "",
            "a.b.c",
            "a b",
            "orders!",
            "é",
            ".orders",
            "orders.",
            ".",
            "..",
            "__internal",
            "db.__t",
            long.as_str(),
            long_part.as_str(),
        ] {
            assert!(
                matches!(split_topic(bad, "fluss"), Err(TopicError::InvalidName(_))),
                "{bad:?} must be invalid"
            );
        }
        assert!(split_topic(&"a".repeat(200), "fluss").is_ok());
        assert!(split_topic(&"a".repeat(201), "fluss").is_err());
    }
}
