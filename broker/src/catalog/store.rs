//! The catalog on disk: one JSON document, `data.dir/catalog.json`, replaced crash-safely.
//!
//! A change is written to `catalog.json.tmp`, fsync'd, renamed over `catalog.json`, and the
//! directory is fsync'd, so after a crash the file holds either the old or the new catalog,
//! never a mix. A leftover `.tmp` (crash before the rename) is ignored and removed on load.
//! `catalog.max-size` bounds the file both ways: a change whose encoding would be larger is
//! refused before anything is written, and a larger file is refused at load, unread.
//!
//! A file that parses is also checked before it is used ([`check_consistency`]): table ids
//! unique and below `next_table_id`, and every database and table name one SQL accepts, since
//! the storage names each table's directory after them. A missing file is a first start only
//! when the directory holds no table directories ([`StoreError::MissingWithTables`]).
//! Database names cannot contain `.`, so the file never collides with a database directory.
//!
//! The document (serde types in the private `file` module) holds the cluster id, the next
//! table id, the catalog revision, databases and tables (types in Flink SQL syntax, parsed back
//! by `sql::parse_type`), the ACLs (one `AclEntry::to_line` each) and the dynamic cluster
//! configs. Credentials among those are salted hashes (`catalog::procedures` and
//! `catalog::ddl` hash them before they are stored); the file is still created with mode 0600.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use kafluss_auth::AclEntry;
use kafluss_convert::types::{Field, Schema};
use serde::Deserialize;
use thiserror::Error;

use super::config::MAX_SIZE_KEY;
use super::names::check_fluss_name;
use super::sql::parse_type;

pub const CATALOG_FILE: &str = "catalog.json";
const TEMP_SUFFIX: &str = ".tmp";
const FORMAT_VERSION: u64 = 1;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("catalog file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot encode the catalog for {path}: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The file is larger than `catalog.max-size`: it is not read (a foreign or runaway file
    /// must not make the server allocate without bound).
    #[error(
        "catalog file {path} is {size} bytes, more than {key} ({limit} bytes), so it was not \
         read: set {key} to at least {size} bytes to start with it",
        key = MAX_SIZE_KEY
    )]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    /// A change whose encoded catalog would be larger than `catalog.max-size`: nothing was
    /// written.
    #[error(
        "refused, nothing changed: after this change the catalog would be {size} bytes, more \
         than {key} ({limit} bytes); drop tables that are no longer needed, or raise {key}",
        key = MAX_SIZE_KEY
    )]
    ChangeTooLarge { size: u64, limit: u64 },
    /// The file parses but describes a catalog the server must not serve.
    #[error(
        "catalog file {path} is inconsistent: {problem}. The server does not start on it rather \
         than mix or delete tables' data: correct the file, or restore it from a backup"
    )]
    Inconsistent {
        path: PathBuf,
        #[source]
        problem: Inconsistency,
    },
    /// `catalog.json` is missing but the directory holds table directories: a new catalog
    /// would give their ids, and so their data, to new tables.
    #[error(
        "catalog file {path} is missing, but the data dir holds table directory {table_dir}, \
         written with a catalog that is gone: a new catalog would give its table id, and its \
         rows, to the next CREATE TABLE. Restore catalog.json from a backup; or, to start an \
         empty cluster without the old tables, move the database directories out of the data \
         dir (docs/storage.md, \"The catalog file\")"
    )]
    MissingWithTables { path: PathBuf, table_dir: PathBuf },
}

/// What makes a catalog that parses one the server must not serve ([`check_consistency`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Inconsistency {
    /// A database name SQL refuses: the storage joins it to `data.dir`.
    #[error("database {name:?} has a name SQL refuses: {reason}")]
    DatabaseName { name: String, reason: &'static str },
    /// A table name SQL refuses (`../../victim`): the storage joins it to `data.dir`.
    #[error("table {name:?} of database {database} has a name SQL refuses: {reason}")]
    TableName {
        database: String,
        name: String,
        reason: &'static str,
    },
    /// Two tables with one id would share a directory, a topic id and their rows.
    #[error("tables {first} and {second} have the same id {id} (one directory and one topic id for both)")]
    DuplicateTableId { id: u64, first: String, second: String },
    /// The next CREATE TABLE would be given the id of an existing table.
    #[error(
        "next_table_id is {next_table_id}, not above the id {id} of table {table}: a new table \
         would get an id in use"
    )]
    NextTableIdTooLow {
        next_table_id: u64,
        id: u64,
        table: String,
    },
}

/// One table as persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTable {
    pub id: u64,
    pub schema: Schema,
    pub options: BTreeMap<String, String>,
    pub partition_keys: Vec<String>,
    pub primary_key: Vec<String>,
    pub revision: u64,
}

/// The whole persisted catalog; the DDL side mutates a copy and saves it before publishing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredCatalog {
    pub cluster_id: String,
    pub next_table_id: u64,
    pub revision: u64,
    /// database → table name → table.
    pub databases: BTreeMap<String, BTreeMap<String, StoredTable>>,
    pub acls: Vec<AclEntry>,
    /// Dynamic cluster configs set with `CALL sys.set_cluster_configs`.
    pub cluster_configs: BTreeMap<String, String>,
}

/// Where a save can be interrupted, to simulate a crash in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteStage {
    /// The temp file is written and fsync'd; the rename has not happened.
    BeforeRename,
}

/// Reads and writes `catalog.json` in one directory.
#[derive(Debug)]
pub struct CatalogStore {
    dir: PathBuf,
    /// `catalog.max-size`.
    max_size: u64,
    /// Test seam: stop a save at this stage as if the process died there.
    crash_at: Option<WriteStage>,
}

impl CatalogStore {
    /// Uses `dir` (created if missing), for a catalog of at most `max_size` bytes
    /// (`catalog.max-size`).
    pub fn open(dir: &Path, max_size: u64) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            action: "create the data directory",
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            max_size,
            crash_at: None,
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(CATALOG_FILE)
    }

    /// Makes every later save stop at `stage`, simulating a crash there.
    #[cfg(test)]
    pub(crate) fn crash_at(&mut self, stage: Option<WriteStage>) {
        self.crash_at = stage;
    }

    /// The stored catalog, or `None` on first start.
    pub fn load(&self) -> Result<Option<StoredCatalog>, StoreError> {
        let path = self.path();
        let temp = temp_path(&path);
        if temp.exists() {
            // A crash before the rename: the old file is authoritative.
            tracing::warn!(path = %temp.display(), "removing an unfinished catalog write");
            let _ = fs::remove_file(&temp);
        }
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return match find_table_dir(&self.dir) {
                    Some(table_dir) => Err(StoreError::MissingWithTables { path, table_dir }),
                    None => Ok(None),
                };
            }
            Err(source) => {
                return Err(StoreError::Io {
                    action: "open",
                    path,
                    source,
                })
            }
        };
        let io_error = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { action, path, source }
        };
        let size = file.metadata().map_err(io_error("stat", &path))?.len();
        let too_large = |size| StoreError::TooLarge {
            path: path.clone(),
            size,
            limit: self.max_size,
        };
        if size > self.max_size {
            return Err(too_large(size));
        }
        let mut text = String::with_capacity(usize::try_from(size).unwrap_or_default());
        // One byte more than the limit: a file that grew since it was measured is refused too.
        (&mut file)
            .take(self.max_size.saturating_add(1))
            .read_to_string(&mut text)
            .map_err(io_error("read", &path))?;
        if text.len() as u64 > self.max_size {
            return Err(too_large(text.len() as u64));
        }
        let catalog = decode(&text).map_err(|reason| StoreError::Corrupt {
            path: path.clone(),
            reason,
        })?;
        check_consistency(&catalog).map_err(|problem| StoreError::Inconsistent { path, problem })?;
        Ok(Some(catalog))
    }

    /// Replaces the stored catalog crash-safely; refuses, writing nothing, a catalog whose
    /// encoding is larger than `catalog.max-size`.
    pub fn save(&self, catalog: &StoredCatalog) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(&encode(catalog)).map_err(|source| StoreError::Encode {
            path: self.path(),
            source,
        })?;
        let size = bytes.len() as u64;
        if size > self.max_size {
            return Err(StoreError::ChangeTooLarge {
                size,
                limit: self.max_size,
            });
        }
        write_atomically(&self.path(), &bytes, self.crash_at)
    }
}

/// Checks what the decoder cannot: every database and table name is one SQL accepts (the
/// rule of `CREATE`, [`check_fluss_name`]; a database named `cluster` by an earlier version
/// is still served, with a warning), no two tables share an id, and `next_table_id` is above
/// every table's id. The first problem found is returned.
pub fn check_consistency(catalog: &StoredCatalog) -> Result<(), Inconsistency> {
    let mut ids: BTreeMap<u64, String> = BTreeMap::new();
    for (database, tables) in &catalog.databases {
        check_fluss_name(database).map_err(|reason| Inconsistency::DatabaseName {
            name: database.clone(),
            reason,
        })?;
        for (name, table) in tables {
            check_fluss_name(name).map_err(|reason| Inconsistency::TableName {
                database: database.clone(),
                name: name.clone(),
                reason,
            })?;
            let path = format!("{database}.{name}");
            if table.id >= catalog.next_table_id {
                return Err(Inconsistency::NextTableIdTooLow {
                    next_table_id: catalog.next_table_id,
                    id: table.id,
                    table: path,
                });
            }
            if let Some(first) = ids.insert(table.id, path.clone()) {
                return Err(Inconsistency::DuplicateTableId {
                    id: table.id,
                    first,
                    second: path,
                });
            }
        }
    }
    Ok(())
}

/// A table directory in `data_dir`: `<db>/<table>-<id>`, a directory whose database and table
/// names are names and whose id is digits (the storage layout, `log::table_dir`).
fn find_table_dir(data_dir: &Path) -> Option<PathBuf> {
    // Not following links, as the entries' own file types.
    let is_dir = |path: &Path| fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir());
    crate::log::table_dirs(data_dir)
        .into_iter()
        .find(|found| {
            found
                .database
                .to_str()
                .is_some_and(|name| check_fluss_name(name).is_ok())
                && check_fluss_name(&found.table).is_ok()
                && found.path.parent().is_some_and(is_dir)
                && is_dir(&found.path)
        })
        .map(|found| found.path)
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(TEMP_SUFFIX);
    path.with_file_name(name)
}

/// Write temp, fsync, rename, fsync the directory. `crash_at` stops early (tests).
pub(crate) fn write_atomically(
    path: &Path,
    bytes: &[u8],
    crash_at: Option<WriteStage>,
) -> Result<(), StoreError> {
    let temp = temp_path(path);
    let io_error = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io { action, path, source }
    };
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temp).map_err(io_error("create", &temp))?;
    file.write_all(bytes).map_err(io_error("write", &temp))?;
    file.sync_all().map_err(io_error("fsync", &temp))?;
    drop(file);
    if crash_at == Some(WriteStage::BeforeRename) {
        return Err(StoreError::Io {
            action: "rename (simulated crash)",
            path: temp,
            source: io::Error::other("simulated crash before rename"),
        });
    }
    fs::rename(&temp, path).map_err(io_error("rename", &temp))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("fsync the directory", dir))?;
    Ok(())
}

/// The document as written: every struct below is one JSON object, fields in the order the
/// file has always had them (alphabetical), so a catalog written by an earlier version loads
/// unchanged and saving it again gives the same bytes.
mod file {
    use std::collections::BTreeMap;

    use kafluss_auth::AclEntry;
    use kafluss_convert::types::FieldType;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    pub(super) struct CatalogFile {
        #[serde(serialize_with = "acl_lines", deserialize_with = "parse_acl_lines")]
        pub acls: Vec<AclEntry>,
        pub cluster_configs: BTreeMap<String, String>,
        pub cluster_id: String,
        pub databases: BTreeMap<String, DatabaseFile>,
        pub format_version: u64,
        pub next_table_id: u64,
        pub revision: u64,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct DatabaseFile {
        pub tables: BTreeMap<String, TableFile>,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct TableFile {
        pub columns: Vec<ColumnFile>,
        pub id: u64,
        pub options: BTreeMap<String, String>,
        pub partition_keys: Vec<String>,
        pub primary_key: Vec<String>,
        pub revision: u64,
    }

    /// A column; its type in Flink SQL syntax, parsed back by `sql::parse_type`.
    #[derive(Serialize, Deserialize)]
    pub(super) struct ColumnFile {
        pub name: String,
        #[serde(
            rename = "type",
            serialize_with = "type_text",
            deserialize_with = "parse_type_text"
        )]
        pub field_type: FieldType,
    }

    fn acl_lines<S: Serializer>(acls: &[AclEntry], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(acls.iter().map(AclEntry::to_line))
    }

    fn parse_acl_lines<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<AclEntry>, D::Error> {
        Vec::<String>::deserialize(deserializer)?
            .iter()
            .map(|line| {
                AclEntry::from_line(line).map_err(|e| serde::de::Error::custom(format!("acl {line:?}: {e}")))
            })
            .collect()
    }

    fn type_text<S: Serializer>(field_type: &FieldType, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(field_type)
    }

    fn parse_type_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<FieldType, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::parse_type(&text).map_err(|e| serde::de::Error::custom(format!("type {text:?}: {e}")))
    }
}

fn encode(catalog: &StoredCatalog) -> file::CatalogFile {
    let databases = catalog
        .databases
        .iter()
        .map(|(name, tables)| {
            let tables = tables
                .iter()
                .map(|(table_name, table)| (table_name.clone(), encode_table(table)))
                .collect();
            (name.clone(), file::DatabaseFile { tables })
        })
        .collect();
    file::CatalogFile {
        acls: catalog.acls.clone(),
        cluster_configs: catalog.cluster_configs.clone(),
        cluster_id: catalog.cluster_id.clone(),
        databases,
        format_version: FORMAT_VERSION,
        next_table_id: catalog.next_table_id,
        revision: catalog.revision,
    }
}

fn encode_table(table: &StoredTable) -> file::TableFile {
    file::TableFile {
        columns: table
            .schema
            .columns
            .iter()
            .map(|column| file::ColumnFile {
                name: column.name.clone(),
                field_type: column.field_type.clone(),
            })
            .collect(),
        id: table.id,
        options: table.options.clone(),
        partition_keys: table.partition_keys.clone(),
        primary_key: table.primary_key.clone(),
        revision: table.revision,
    }
}

/// The catalog in `text`. The format version is checked first, so that a file of another
/// version is named as such rather than as a shape error; any other error names the path of
/// the offending field (`databases.sales.tables.orders.columns[1].type: ...`).
fn decode(text: &str) -> Result<StoredCatalog, String> {
    #[derive(serde::Deserialize)]
    struct Version {
        format_version: u64,
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let version = Version::deserialize(&value).map_err(|e| e.to_string())?;
    if version.format_version != FORMAT_VERSION {
        return Err(format!("unsupported format_version {}", version.format_version));
    }
    let file: file::CatalogFile =
        serde_path_to_error::deserialize(value).map_err(|e| format!("{}: {}", e.path(), e.inner()))?;
    let databases = file
        .databases
        .into_iter()
        .map(|(name, database)| {
            let tables = database
                .tables
                .into_iter()
                .map(|(table_name, table)| (table_name, decode_table(table)))
                .collect();
            (name, tables)
        })
        .collect();
    Ok(StoredCatalog {
        cluster_id: file.cluster_id,
        next_table_id: file.next_table_id,
        revision: file.revision,
        databases,
        acls: file.acls,
        cluster_configs: file.cluster_configs,
    })
}

fn decode_table(table: file::TableFile) -> StoredTable {
    StoredTable {
        id: table.id,
        revision: table.revision,
        schema: Schema::new(
            table
                .columns
                .into_iter()
                .map(|column| Field::new(column.name, column.field_type))
                .collect(),
        ),
        options: table.options,
        partition_keys: table.partition_keys,
        primary_key: table.primary_key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::config::DEFAULT_MAX_SIZE;
    use kafluss_convert::types::{DataType, FieldType};

    fn sample() -> StoredCatalog {
        let mut tables = BTreeMap::new();
        tables.insert(
            "orders".to_string(),
            StoredTable {
                id: 7,
                schema: Schema::new(vec![
                    Field::new("order_id", FieldType::nullable(DataType::BigInt)),
                    Field::new(
                        "`odd` name",
                        FieldType::not_null(DataType::Map {
                            key: Box::new(FieldType::not_null(DataType::String)),
                            value: Box::new(FieldType::nullable(DataType::TimestampLtz(3))),
                        }),
                    ),
                ]),
                options: [("bucket.num".to_string(), "3".to_string())].into(),
                partition_keys: vec![],
                primary_key: vec!["order_id".to_string()],
                revision: 4,
            },
        );
        StoredCatalog {
            cluster_id: "abc".to_string(),
            next_table_id: 8,
            revision: 5,
            databases: [
                ("sales".to_string(), tables),
                ("fluss".to_string(), BTreeMap::new()),
            ]
            .into(),
            acls: vec![AclEntry::parse("sales", "ALLOW", "User:writer", "WRITE", "*").unwrap()],
            cluster_configs: [("k".to_string(), "v".to_string())].into(),
        }
    }

    #[test]
    fn save_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        assert_eq!(store.load().unwrap(), None);
        store.save(&sample()).unwrap();
        assert_eq!(store.load().unwrap(), Some(sample()));
    }

    #[test]
    fn crash_before_rename_keeps_the_old_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        let old = sample();
        store.save(&old).unwrap();
        let mut new = old.clone();
        new.databases.clear();
        new.revision += 1;
        store.crash_at(Some(WriteStage::BeforeRename));
        assert!(store.save(&new).is_err());
        assert!(temp_path(&store.path()).exists(), "the crash left the temp file");
        let reopened = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        assert_eq!(reopened.load().unwrap(), Some(old));
        assert!(!temp_path(&store.path()).exists(), "load removes the leftover");
    }

    #[test]
    fn corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        fs::write(store.path(), b"{\"format_version\": 1, \"cluster_id\": 3}").unwrap();
        let error = store.load().unwrap_err().to_string();
        assert!(error.contains("catalog.json is corrupt"), "{error}");
        assert!(error.contains("cluster_id"), "{error}");
    }

    /// `catalog.max-size` bounds what a save writes: the limit itself is allowed, one byte
    /// more is refused before anything is written (no temp file either).
    #[test]
    fn a_save_over_the_size_limit_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        store.save(&sample()).unwrap();
        let stored = fs::read(store.path()).unwrap();
        let limit = stored.len() as u64;
        let bounded = CatalogStore::open(dir.path(), limit).unwrap();
        bounded.save(&sample()).expect("a catalog of exactly the limit");
        let mut bigger = sample();
        bigger.cluster_configs.insert("k2".to_string(), "v".to_string());
        let error = bounded.save(&bigger).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, StoreError::ChangeTooLarge { size, limit: l } if size > limit && l == limit),
            "{message}"
        );
        assert!(
            message.contains(&format!("more than catalog.max-size ({limit} bytes)")),
            "{message}"
        );
        assert!(message.contains("nothing changed"), "{message}");
        assert_eq!(fs::read(store.path()).unwrap(), stored, "the file is unchanged");
        assert!(!temp_path(&store.path()).exists(), "no temp file was written");
    }

    /// A file over `catalog.max-size` is refused unread, saying so: before, a file over the
    /// fixed 512 MiB read limit was cut there and reported "corrupt: EOF while parsing".
    #[test]
    fn a_file_over_the_size_limit_is_refused_by_size_not_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        store.save(&sample()).unwrap();
        let size = fs::metadata(store.path()).unwrap().len();
        let bounded = CatalogStore::open(dir.path(), size - 1).unwrap();
        let error = bounded.load().unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, StoreError::TooLarge { size: s, limit, .. } if s == size && limit == size - 1),
            "{message}"
        );
        assert!(
            message.contains(&format!(
                "catalog file {} is {size} bytes, more than catalog.max-size ({} bytes)",
                store.path().display(),
                size - 1
            )),
            "{message}"
        );
        assert!(message.contains(&format!("at least {size} bytes")), "{message}");
        assert!(!message.contains("corrupt"), "{message}");
        let exact = CatalogStore::open(dir.path(), size).unwrap();
        assert_eq!(exact.load().unwrap(), Some(sample()));
    }

    /// Damage that still parses, each as the audit made it by editing catalog.json: each is
    /// refused naming what is wrong (before, the server started on it and mixed or deleted
    /// tables' data, or deleted a directory outside data.dir at DROP TABLE).
    #[test]
    fn ids_and_names_are_checked_after_decoding() {
        assert_eq!(check_consistency(&sample()), Ok(()));
        let with = |change: &dyn Fn(&mut StoredCatalog)| {
            let mut catalog = sample();
            change(&mut catalog);
            check_consistency(&catalog).unwrap_err()
        };
        let too_low = |next_table_id| Inconsistency::NextTableIdTooLow {
            next_table_id,
            id: 7,
            table: "sales.orders".to_string(),
        };
        assert_eq!(with(&|c| c.next_table_id = 7), too_low(7));
        assert_eq!(with(&|c| c.next_table_id = 1), too_low(1));
        let twin = |c: &mut StoredCatalog| {
            let orders = c.databases["sales"]["orders"].clone();
            c.databases
                .get_mut("fluss")
                .unwrap()
                .insert("twin".to_string(), orders);
        };
        let duplicate = with(&twin);
        assert_eq!(
            duplicate,
            Inconsistency::DuplicateTableId {
                id: 7,
                first: "fluss.twin".to_string(),
                second: "sales.orders".to_string()
            }
        );
        assert_eq!(
            duplicate.to_string(),
            "tables fluss.twin and sales.orders have the same id 7 (one directory and one topic id for both)"
        );
        for bad in ["../../victim", "..", "a/b", "", "__internal"] {
            let rename = |c: &mut StoredCatalog| {
                let tables = c.databases.get_mut("sales").unwrap();
                let orders = tables.remove("orders").unwrap();
                tables.insert(bad.to_string(), orders);
            };
            let error = with(&rename);
            assert!(
                matches!(&error, Inconsistency::TableName { database, name, .. } if database == "sales" && name == bad),
                "{bad}: {error}"
            );
            let rename = |c: &mut StoredCatalog| {
                let tables = c.databases.remove("sales").unwrap();
                c.databases.insert(bad.to_string(), tables);
            };
            let error = with(&rename);
            assert!(
                matches!(&error, Inconsistency::DatabaseName { name, .. } if name == bad),
                "{bad}: {error}"
            );
        }
        // An earlier version's database named like the cluster's ACL resource is still served
        // (with a warning at start-up): the rule is SQL's name rule, not CREATE DATABASE's.
        let mut cluster = sample();
        cluster.databases.insert("cluster".to_string(), BTreeMap::new());
        assert_eq!(check_consistency(&cluster), Ok(()));
    }

    #[test]
    fn an_inconsistent_file_refuses_to_load_naming_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        let fixture = fs::read_to_string(FIXTURE).unwrap();
        let lowered = fixture.replace("\"next_table_id\": 3,", "\"next_table_id\": 2,");
        assert_ne!(lowered, fixture);
        fs::write(store.path(), lowered).unwrap();
        let error = store.load().unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(
                &error,
                StoreError::Inconsistent { problem: Inconsistency::NextTableIdTooLow { next_table_id: 2, id: 2, table }, .. }
                    if table == "fluss.plain"
            ),
            "{message}"
        );
        assert!(
            message.starts_with(&format!(
                "catalog file {} is inconsistent: next_table_id is 2, not above the id 2 of table fluss.plain",
                store.path().display()
            )),
            "{message}"
        );
        assert!(message.contains("restore it from a backup"), "{message}");
    }

    /// A missing catalog.json is a first start only when no table directory is left: before,
    /// the server started a new catalog (ids from 1 again) whose first table took over the old
    /// directory and its rows.
    #[test]
    fn a_missing_catalog_next_to_table_directories_is_not_a_first_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        // Nothing that is a table directory: a first start.
        fs::create_dir_all(dir.path().join("notes")).unwrap();
        fs::create_dir_all(dir.path().join("fluss").join("no-id")).unwrap();
        fs::create_dir_all(dir.path().join("fluss").join("..-1")).unwrap();
        fs::create_dir_all(dir.path().join("bad name").join("t-1")).unwrap();
        fs::write(dir.path().join("fluss").join("f-1"), b"a file").unwrap();
        fs::write(dir.path().join("producer-ids.next"), b"1000").unwrap();
        assert_eq!(store.load().unwrap(), None);

        let table = dir.path().join("fluss").join("t-1");
        fs::create_dir_all(table.join("bucket-0")).unwrap();
        let error = store.load().unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(&error, StoreError::MissingWithTables { table_dir, .. } if *table_dir == table),
            "{message}"
        );
        assert!(
            message.starts_with(&format!(
                "catalog file {} is missing, but the data dir holds table directory {}",
                store.path().display(),
                table.display()
            )),
            "{message}"
        );
        assert!(!store.path().exists(), "nothing written");
    }

    /// A catalog.json written by the hand-built encoder this module had before its serde
    /// types (kafluss at 54ac136): tables with nested types, an ACL, dynamic credentials.
    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/plaintext-credentials/catalog.json"
    );

    #[test]
    fn a_catalog_written_before_the_serde_types_loads_and_saves_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let written = fs::read(FIXTURE).unwrap();
        fs::write(dir.path().join(CATALOG_FILE), &written).unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        let catalog = store.load().unwrap().expect("a catalog");
        assert_eq!(catalog.cluster_id, "7Oy1_rDtY13Nni5VnLuVag");
        assert_eq!((catalog.next_table_id, catalog.revision), (3, 6));
        let orders = &catalog.databases["sales"]["orders"];
        assert_eq!(orders.id, 1);
        let types: Vec<String> = orders
            .schema
            .columns
            .iter()
            .map(|c| format!("{} {}", c.name, c.field_type))
            .collect();
        assert_eq!(
            types,
            [
                "order_id BIGINT",
                "amount DECIMAL(18, 2)",
                "tags MAP<STRING NOT NULL, ARRAY<INT>>",
                "ts TIMESTAMP_LTZ(3)",
                "_kafka_key BYTES"
            ]
        );
        assert_eq!(orders.options["table.kafka.enabled"], "true");
        let plain = &catalog.databases["fluss"]["plain"];
        assert_eq!(plain.primary_key, ["x"]);
        assert_eq!(plain.schema.columns[1].name, "odd name");
        assert_eq!(catalog.acls.len(), 1);
        assert_eq!(catalog.acls[0].principal, "User:writer");
        assert_eq!(
            catalog.cluster_configs["security.sasl.plain.credentials"],
            "admin:old-admin-secret,writer:old-writer-secret"
        );
        store.save(&catalog).unwrap();
        assert_eq!(
            String::from_utf8(fs::read(store.path()).unwrap()).unwrap(),
            String::from_utf8(written).unwrap(),
            "same format, same bytes"
        );
    }

    #[test]
    fn errors_name_the_field_and_other_versions_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        let fixture = fs::read_to_string(FIXTURE).unwrap();
        for (from, to, expected) in [
            (
                "\"format_version\": 1",
                "\"format_version\": 2",
                "unsupported format_version 2",
            ),
            (
                "\"type\": \"TIMESTAMP_LTZ(3)\"",
                "\"type\": \"TIMESTAMP_LTZ(x)\"",
                "databases.sales.tables.orders.columns[3].type",
            ),
            ("\"id\": 2,", "\"id\": -2,", "databases.fluss.tables.plain.id"),
            (
                "permission=\\\"ALLOW\\\"",
                "permission=\\\"MAYBE\\\"",
                "acls: acl",
            ),
            ("\"revision\": 6\n}", "\"revision\": \"6\"\n}", "revision"),
            ("\"next_table_id\": 3,", "", "missing field `next_table_id`"),
        ] {
            assert!(fixture.contains(from), "{from}");
            fs::write(store.path(), fixture.replace(from, to)).unwrap();
            let error = store.load().unwrap_err().to_string();
            assert!(error.contains("catalog.json is corrupt"), "{error}");
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn catalog_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path(), DEFAULT_MAX_SIZE).unwrap();
        store.save(&sample()).unwrap();
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
