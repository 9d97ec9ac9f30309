//! The immutable catalog snapshot the cores read without locks: databases, tables and the
//! sorted list of Kafka topics. A new snapshot is built after every DDL change and published
//! through `arc_swap` (see `ddl.rs`); readers keep the `Arc` they loaded for as long as they
//! need a consistent view.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafluss_convert::mapping::KafkaMapping;
use kafluss_convert::types::Schema;

/// `table.log.format` when the table does not set it.
pub const DEFAULT_LOG_FORMAT: &str = "arrow";
pub const BUCKET_NUM_OPTION: &str = "bucket.num";
pub const LOG_FORMAT_OPTION: &str = "table.log.format";
/// Table ids stay below 2^62 so that [`topic_id`] stays injective.
pub const MAX_TABLE_ID: u64 = (1 << 62) - 1;

/// [`TableInfo::display_path`]: formats as `db.table`.
#[derive(Debug, Clone, Copy)]
pub struct DisplayPath<'a>(&'a TableInfo);

impl std::fmt::Display for DisplayPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0.database, self.0.name)
    }
}

/// One log table as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Unique in this cluster and never reused, also after DROP: a re-created table gets a
    /// new id, so a new storage directory and a new topic id.
    pub id: u64,
    pub database: String,
    pub name: String,
    pub schema: Schema,
    /// Every option as stored; `bucket.num` is always present (fixed at CREATE).
    pub options: BTreeMap<String, String>,
    pub bucket_count: u32,
    /// Effective `table.log.format`, lowercase (`arrow` when unset).
    pub log_format: String,
    /// Effective `table.log.arrow.compression.*` of the stored batches (ZSTD level 3 when unset).
    pub compression: crate::log::ArrowCompression,
    pub partition_keys: Vec<String>,
    pub primary_key: Vec<String>,
    /// `Some` only when `table.kafka.enabled` is true and the mapping is valid.
    pub kafka: Option<KafkaMapping>,
    /// Why an enabled mapping is not served (only possible for a catalog written by another
    /// version whose rules were looser; CREATE and ALTER refuse invalid mappings).
    pub kafka_error: Option<String>,
    /// Catalog revision of this table's last change: `(id, revision)` identifies a table
    /// version, e.g. to cache conversion plans.
    pub revision: u64,
    /// Stable Kafka topic id (see [`topic_id`]).
    pub topic_id: [u8; 16],
}

impl TableInfo {
    /// `db.table`, which is also the table's canonical Kafka topic name.
    pub fn path(&self) -> String {
        self.display_path().to_string()
    }

    /// `db.table` written where it is formatted, without a `String` of its own: for log lines
    /// and stall warnings built on the append path whether or not they are written.
    pub fn display_path(&self) -> DisplayPath<'_> {
        DisplayPath(self)
    }

    /// Storage directory relative to `data.dir`: [`crate::log::table_dir`] (the one layout,
    /// `<db>/<table>-<table_id>`) below an empty root; refused for a name that is not a name
    /// (which the catalog never holds: CREATE and the load of catalog.json check them).
    pub fn relative_dir(&self) -> Result<std::path::PathBuf, crate::log::LogError> {
        crate::log::table_dir(std::path::Path::new(""), &self.database, &self.name, self.id)
    }

    /// Whether Kafka clients can see and write this table: mapping enabled and valid.
    pub fn is_kafka_topic(&self) -> bool {
        self.kafka.is_some()
    }
}

/// The Kafka topic id of a table: a UUID derived from the cluster id and the table id, so it
/// is stable across restarts, differs between clusters, and changes when a table is dropped
/// and re-created (ids are never reused). Never the nil UUID nor Kafka's metadata topic id
/// (`...0001`), because the high half is a non-zero hash.
pub fn topic_id(cluster_id: &str, table_id: u64) -> [u8; 16] {
    let mut high = fnv1a64(cluster_id.as_bytes());
    if high == 0 {
        high = 1;
    }
    // Mark as a version-8 (custom) RFC 9562 UUID so tools print it as a well-formed UUID.
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&high.to_be_bytes());
    id[8..].copy_from_slice(&table_id.to_be_bytes());
    id[6] = (id[6] & 0x0f) | 0x80;
    id[8] = (id[8] & 0x3f) | 0x80;
    // The variant bits take the top two bits of the table id, which the catalog keeps
    // below 2^62 (`MAX_TABLE_ID`), so distinct ids give distinct topic ids.
    id
}

/// The topic id a table has under its name without a database (`orders` for `fluss.orders` in
/// the default database): `topic_id` with one bit of its high half flipped. A Kafka topic has one
/// name and one id, and clients index topics by id: the Java client stops its sender on two
/// names with one id ("Duplicate key"). So each name of a table is a topic of its own to a
/// client, with an id of its own, still derived from the table's.
pub fn bare_topic_id(topic_id: [u8; 16]) -> [u8; 16] {
    let mut id = topic_id;
    id[1] ^= 0x01;
    id
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A database and its tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatabaseInfo {
    pub name: String,
    pub tables: BTreeMap<String, Arc<TableInfo>>,
}

/// A Kafka topic: a Kafka-enabled, eligible table named `db.table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTopic {
    pub name: String,
    pub table: Arc<TableInfo>,
}

/// Everything the hot path reads, immutable.
#[derive(Debug, Clone, Default)]
pub struct CatalogSnapshot {
    /// Increases with every change of the catalog.
    pub revision: u64,
    pub cluster_id: String,
    /// `kafka.default.database`, for bare topic names.
    pub default_database: String,
    pub databases: BTreeMap<String, DatabaseInfo>,
    /// Every Kafka topic of every database, sorted by name (what an all-topics Metadata
    /// request lists).
    pub kafka_topics: Vec<KafkaTopic>,
}

impl CatalogSnapshot {
    pub fn table(&self, database: &str, table: &str) -> Option<&Arc<TableInfo>> {
        self.databases.get(database)?.tables.get(table)
    }

    pub fn table_by_id(&self, id: u64) -> Option<&Arc<TableInfo>> {
        self.databases
            .values()
            .flat_map(|database| database.tables.values())
            .find(|table| table.id == id)
    }

    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableInfo>> {
        self.databases
            .values()
            .flat_map(|database| database.tables.values())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_displayed_path_is_the_path() {
        let table = TableInfo {
            id: 7,
            database: "sales".into(),
            name: "orders_2".into(),
            schema: Schema { columns: Vec::new() },
            options: BTreeMap::new(),
            bucket_count: 1,
            log_format: DEFAULT_LOG_FORMAT.into(),
            compression: Default::default(),
            partition_keys: Vec::new(),
            primary_key: Vec::new(),
            kafka: None,
            kafka_error: None,
            revision: 1,
            topic_id: topic_id("c", 7),
        };
        assert_eq!(table.path(), "sales.orders_2");
        assert_eq!(format!("for {}", table.display_path()), "for sales.orders_2");
    }

    #[test]
    fn topic_ids_are_stable_distinct_and_well_formed() {
        let a = topic_id("cluster-a", 1);
        assert_eq!(a, topic_id("cluster-a", 1));
        assert_ne!(a, topic_id("cluster-a", 2));
        assert_ne!(a, topic_id("cluster-b", 1));
        assert_ne!(a, [0u8; 16]);
        assert_eq!(a[6] >> 4, 8, "version 8");
        assert_eq!(a[8] >> 6, 0b10, "RFC variant");
        assert_eq!(&a[9..], &1u64.to_be_bytes()[1..]);
        // The name without a database: another well-formed id, the same for the same table.
        let bare = bare_topic_id(a);
        assert_ne!(bare, a);
        assert_eq!(bare, bare_topic_id(topic_id("cluster-a", 1)));
        assert_ne!(bare, bare_topic_id(topic_id("cluster-a", 2)));
        assert_ne!(bare, topic_id("cluster-a", 2));
        assert_eq!((bare[6] >> 4, bare[8] >> 6), (8, 0b10));
    }
}
