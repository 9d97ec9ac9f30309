//! The catalog on disk: one JSON document, `data.dir/catalog.json`, replaced crash-safely.
//!
//! A change is written to `catalog.json.tmp`, fsync'd, renamed over `catalog.json`, and the
//! directory is fsync'd, so after a crash the file holds either the old or the new catalog,
//! never a mix. A leftover `.tmp` (crash before the rename) is ignored and removed on load.
//! Database names cannot contain `.`, so the file never collides with a database directory.
//!
//! The document holds the cluster id, the next table id, the catalog revision, databases and
//! tables (types in Flink SQL syntax, parsed back by `sql::parse_type`), the ACLs (one
//! `AclEntry::to_line` each) and the dynamic cluster configs. It may hold a credential
//! secret, so it is created with mode 0600.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use kafluss_auth::AclEntry;
use kafluss_convert::types::{Field, Schema};
use serde_json::{json, Map, Value};
use thiserror::Error;

use super::sql::parse_type;

pub const CATALOG_FILE: &str = "catalog.json";
const TEMP_SUFFIX: &str = ".tmp";
const FORMAT_VERSION: u64 = 1;
/// The catalog file is ours, but a corrupt or foreign file must not make us allocate
/// without bound.
const MAX_CATALOG_FILE_LEN: u64 = 512 * 1024 * 1024;

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
    /// Test seam: stop a save at this stage as if the process died there.
    crash_at: Option<WriteStage>,
}

impl CatalogStore {
    /// Uses `dir` (created if missing).
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            action: "create the data directory",
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
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
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StoreError::Io {
                    action: "open",
                    path,
                    source,
                })
            }
        };
        let mut text = String::new();
        file.take(MAX_CATALOG_FILE_LEN)
            .read_to_string(&mut text)
            .map_err(|source| StoreError::Io {
                action: "read",
                path: path.clone(),
                source,
            })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        decode(&value)
            .map(Some)
            .map_err(|reason| StoreError::Corrupt { path, reason })
    }

    /// Replaces the stored catalog crash-safely.
    pub fn save(&self, catalog: &StoredCatalog) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(&encode(catalog)).expect("JSON values serialize");
        write_atomically(&self.path(), &bytes, self.crash_at)
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(TEMP_SUFFIX);
    path.with_file_name(name)
}

/// Write temp, fsync, rename, fsync the directory. `crash_at` stops early (tests).
fn write_atomically(path: &Path, bytes: &[u8], crash_at: Option<WriteStage>) -> Result<(), StoreError> {
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

fn encode(catalog: &StoredCatalog) -> Value {
    let databases: Map<String, Value> = catalog
        .databases
        .iter()
        .map(|(name, tables)| {
            let tables: Map<String, Value> = tables
                .iter()
                .map(|(table_name, table)| (table_name.clone(), encode_table(table)))
                .collect();
            (name.clone(), json!({ "tables": tables }))
        })
        .collect();
    json!({
        "format_version": FORMAT_VERSION,
        "cluster_id": catalog.cluster_id,
        "next_table_id": catalog.next_table_id,
        "revision": catalog.revision,
        "databases": databases,
        "acls": catalog.acls.iter().map(AclEntry::to_line).collect::<Vec<_>>(),
        "cluster_configs": catalog.cluster_configs,
    })
}

fn encode_table(table: &StoredTable) -> Value {
    let columns: Vec<Value> = table
        .schema
        .columns
        .iter()
        .map(|column| json!({ "name": column.name, "type": column.field_type.to_string() }))
        .collect();
    json!({
        "id": table.id,
        "revision": table.revision,
        "columns": columns,
        "options": table.options,
        "partition_keys": table.partition_keys,
        "primary_key": table.primary_key,
    })
}

fn decode(value: &Value) -> Result<StoredCatalog, String> {
    let version = u64_field(value, "format_version")?;
    if version != FORMAT_VERSION {
        return Err(format!("unsupported format_version {version}"));
    }
    let mut catalog = StoredCatalog {
        cluster_id: str_field(value, "cluster_id")?.to_string(),
        next_table_id: u64_field(value, "next_table_id")?,
        revision: u64_field(value, "revision")?,
        ..Default::default()
    };
    for (name, database) in object_field(value, "databases")? {
        let mut tables = BTreeMap::new();
        for (table_name, table) in object_field(database, "tables")? {
            let table = decode_table(table).map_err(|e| format!("table {name}.{table_name}: {e}"))?;
            tables.insert(table_name.clone(), table);
        }
        catalog.databases.insert(name.clone(), tables);
    }
    for line in array_field(value, "acls")? {
        let line = line.as_str().ok_or("acls must be strings")?;
        catalog
            .acls
            .push(AclEntry::from_line(line).map_err(|e| format!("acl {line:?}: {e}"))?);
    }
    catalog.cluster_configs = string_map(value, "cluster_configs")?;
    Ok(catalog)
}

fn decode_table(value: &Value) -> Result<StoredTable, String> {
    let mut columns = Vec::new();
    for column in array_field(value, "columns")? {
        let name = str_field(column, "name")?;
        let text = str_field(column, "type")?;
        let field_type = parse_type(text).map_err(|e| format!("column {name}: {e}"))?;
        columns.push(Field::new(name, field_type));
    }
    Ok(StoredTable {
        id: u64_field(value, "id")?,
        revision: u64_field(value, "revision")?,
        schema: Schema::new(columns),
        options: string_map(value, "options")?,
        partition_keys: string_list(value, "partition_keys")?,
        primary_key: string_list(value, "primary_key")?,
    })
}

fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value, String> {
    value.get(key).ok_or_else(|| format!("missing '{key}'"))
}

fn u64_field(value: &Value, key: &str) -> Result<u64, String> {
    field(value, key)?
        .as_u64()
        .ok_or_else(|| format!("'{key}' must be an unsigned integer"))
}

fn str_field<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    field(value, key)?
        .as_str()
        .ok_or_else(|| format!("'{key}' must be a string"))
}

fn object_field<'a>(value: &'a Value, key: &str) -> Result<&'a Map<String, Value>, String> {
    field(value, key)?
        .as_object()
        .ok_or_else(|| format!("'{key}' must be an object"))
}

fn array_field<'a>(value: &'a Value, key: &str) -> Result<&'a Vec<Value>, String> {
    field(value, key)?
        .as_array()
        .ok_or_else(|| format!("'{key}' must be an array"))
}

fn string_map(value: &Value, key: &str) -> Result<BTreeMap<String, String>, String> {
    object_field(value, key)?
        .iter()
        .map(|(k, v)| {
            v.as_str()
                .map(|v| (k.clone(), v.to_string()))
                .ok_or_else(|| format!("'{key}.{k}' must be a string"))
        })
        .collect()
}

fn string_list(value: &Value, key: &str) -> Result<Vec<String>, String> {
    array_field(value, key)?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("'{key}' must hold strings"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let store = CatalogStore::open(dir.path()).unwrap();
        assert_eq!(store.load().unwrap(), None);
        store.save(&sample()).unwrap();
        assert_eq!(store.load().unwrap(), Some(sample()));
    }

    #[test]
    fn crash_before_rename_keeps_the_old_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = CatalogStore::open(dir.path()).unwrap();
        let old = sample();
        store.save(&old).unwrap();
        let mut new = old.clone();
        new.databases.clear();
        new.revision += 1;
        store.crash_at(Some(WriteStage::BeforeRename));
        assert!(store.save(&new).is_err());
        assert!(temp_path(&store.path()).exists(), "the crash left the temp file");
        let reopened = CatalogStore::open(dir.path()).unwrap();
        assert_eq!(reopened.load().unwrap(), Some(old));
        assert!(!temp_path(&store.path()).exists(), "load removes the leftover");
    }

    #[test]
    fn corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path()).unwrap();
        fs::write(store.path(), b"{\"format_version\": 1, \"cluster_id\": 3}").unwrap();
        let error = store.load().unwrap_err().to_string();
        assert!(error.contains("catalog.json is corrupt"), "{error}");
        assert!(error.contains("cluster_id"), "{error}");
    }

    #[cfg(unix)]
    #[test]
    fn catalog_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = CatalogStore::open(dir.path()).unwrap();
        store.save(&sample()).unwrap();
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
