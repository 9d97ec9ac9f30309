//! The catalog: opening it, publishing snapshots, and executing SQL statements.
//!
//! Concurrency: the cores only ever `load` the published `Arc<CatalogSnapshot>` (and the
//! authorizer snapshot) from `ArcSwap`s, which never block. Statements that change anything
//! run under one `Mutex` on the admin side: they copy the stored catalog, change the copy,
//! save it crash-safely, and only then publish it, so what the cores see is always on disk.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use kafluss_auth::{
    Authorizer, CredentialStore, Operation, PlainCredentials, Principal, Resource, PLAIN_CREDENTIALS_KEY,
};

use super::config::{CatalogConfig, DEFAULT_DATABASE};
use super::error::{CatalogError, SqlError};
use super::model::{CatalogSnapshot, DatabaseInfo, TableInfo};
use super::output::StatementResult;
use super::publish::{
    build_snapshot, effective_credentials, kafka_error_warning, new_cluster_id, super_user_lockout,
};
use super::resolve::check_database_name;
use super::sql::ObjectName;
use super::store::{CatalogStore, StoredCatalog};
use super::validate::{check_new_database_name, MAX_BUCKETS};

/// Who runs statements, and from where (for ACL checks); `current_db` changes with `USE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub current_db: String,
    pub principal: Principal,
    pub host: IpAddr,
}

impl Session {
    pub fn new(current_db: impl Into<String>, principal: Principal, host: IpAddr) -> Self {
        Self {
            current_db: current_db.into(),
            principal,
            host,
        }
    }
}

/// Called with each dropped table after the drop is stored: the storage deletes
/// `data.dir/<db>/<table>-<id>/`. Runs on the thread that executed the statement.
pub type TableDroppedHook = Arc<dyn Fn(&TableInfo) + Send + Sync>;

struct DdlState {
    stored: StoredCatalog,
    store: CatalogStore,
    on_table_dropped: Option<TableDroppedHook>,
}

/// Databases and tables, ACLs and dynamic configs; see the module documentation.
pub struct Catalog {
    config: CatalogConfig,
    snapshot: ArcSwap<CatalogSnapshot>,
    authorizer: ArcSwap<Authorizer>,
    credentials: Arc<CredentialStore>,
    state: Mutex<DdlState>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("data_dir", &self.config.data_dir)
            .field("revision", &self.snapshot.load().revision)
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// Loads the catalog from `data.dir` (creating it on first start, with a new cluster id),
    /// creates the default databases, and publishes the first snapshot.
    pub fn open(config: CatalogConfig) -> Result<Self, CatalogError> {
        check_database_name(&config.kafka_default_database).map_err(|reason| CatalogError::Config {
            key: "kafka.default.database",
            reason: reason.to_string(),
        })?;
        if config.default_bucket_number == 0 || config.default_bucket_number > MAX_BUCKETS {
            return Err(CatalogError::Config {
                key: "default.bucket.number",
                reason: format!("must be between 1 and {MAX_BUCKETS}"),
            });
        }
        let store = CatalogStore::open(&config.data_dir, config.max_size)?;
        let loaded = store.load()?;
        let first_start = loaded.is_none();
        let mut stored = match loaded {
            Some(stored) => stored,
            None => StoredCatalog {
                cluster_id: new_cluster_id().map_err(CatalogError::ClusterId)?,
                next_table_id: 1,
                ..Default::default()
            },
        };
        let mut changed = first_start;
        if stored.databases.is_empty() {
            stored
                .databases
                .insert(DEFAULT_DATABASE.to_string(), BTreeMap::new());
            changed = true;
        }
        if config.kafka_enabled && !stored.databases.contains_key(&config.kafka_default_database) {
            stored
                .databases
                .insert(config.kafka_default_database.clone(), BTreeMap::new());
            changed = true;
        }
        changed |= hash_stored_plaintext(&mut stored, &store)?;
        if changed {
            stored.revision += 1;
            store.save(&stored)?;
        }

        log_dynamic_configs(&config, &store, &stored.cluster_configs);
        for entry in stored.acls.iter().filter(|entry| !entry.principal_can_match()) {
            tracing::warn!(
                acl = %entry,
                "a stored ACL names a principal whose type is not User (accepted before such \
                 principals were refused): it never matches, as every connection's principal is \
                 User:<name>; drop it with CALL sys.drop_acl(principal => '{}')",
                entry.principal
            );
        }
        for name in stored
            .databases
            .keys()
            .filter(|name| Resource::is_cluster_name(name))
        {
            tracing::warn!(
                database = %name,
                "a database is named like the whole cluster's ACL resource (made before such names \
                 were refused): in CALL sys.add_acl, '{name}' means the whole cluster and \
                 '{name}.t' database t; name this database 'cluster.{name}' and its tables \
                 'cluster.{name}.t'"
            );
        }
        let credentials = effective_credentials(&config, &stored.cluster_configs)?;
        if let Some(reason) = super_user_lockout(&config, &credentials) {
            tracing::error!(
                "{reason}: the administrators are locked out (SQL and admin HTTP requests of every \
                 super user are refused). Fix: set super.users to a user that has a password, or \
                 stop the server and remove \"{PLAIN_CREDENTIALS_KEY}\" from \"cluster_configs\" in {} \
                 to go back to the configured credentials",
                store.path().display()
            );
        }
        let authorizer = Authorizer::new(
            config.authorizer_enabled,
            config.super_users.clone(),
            stored.acls.clone(),
        );
        let snapshot = build_snapshot(&config, &stored);
        // Only here: CREATE and ALTER refuse a mapping in error, so no later snapshot has a
        // table in error that this one did not.
        for table in snapshot
            .databases
            .values()
            .flat_map(|database| database.tables.values())
        {
            if let Some(warning) = kafka_error_warning(table) {
                tracing::warn!(table = %table.path(), "{warning}");
            }
        }
        Ok(Self {
            snapshot: ArcSwap::from_pointee(snapshot),
            authorizer: ArcSwap::from_pointee(authorizer),
            credentials: Arc::new(CredentialStore::new(credentials)),
            state: Mutex::new(DdlState {
                stored,
                store,
                on_table_dropped: None,
            }),
            config,
        })
    }

    /// The current snapshot (lock-free; keep the `Arc` for a consistent view).
    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        self.snapshot.load_full()
    }

    /// The swap cell itself, for readers that want `load()` guards without refcounting.
    pub fn snapshot_cell(&self) -> &ArcSwap<CatalogSnapshot> {
        &self.snapshot
    }

    /// The authorizer in force (ACLs change with `CALL sys.add_acl` / `drop_acl`).
    pub fn authorizer(&self) -> Arc<Authorizer> {
        self.authorizer.load_full()
    }

    pub fn authorizer_cell(&self) -> &ArcSwap<Authorizer> {
        &self.authorizer
    }

    /// The PLAIN credentials in force; replaced by `CALL sys.set_cluster_configs`. Share this
    /// store with the SASL code: replacements apply to new authentications.
    pub fn credential_store(&self) -> Arc<CredentialStore> {
        Arc::clone(&self.credentials)
    }

    /// The id the next CREATE TABLE gets: every id below it was given to a table (ids are
    /// never reused), so one below it that is not in the catalog belongs to a dropped table.
    pub fn next_table_id(&self) -> u64 {
        self.lock().stored.next_table_id
    }

    pub fn cluster_id(&self) -> String {
        self.snapshot.load().cluster_id.clone()
    }

    pub fn config(&self) -> &CatalogConfig {
        &self.config
    }

    /// Installs the hook told about dropped tables (see [`TableDroppedHook`]).
    pub fn set_table_dropped_hook(&self, hook: TableDroppedHook) {
        self.lock().on_table_dropped = Some(hook);
    }

    /// The dynamic cluster configs as stored (secrets included: never print them).
    pub(crate) fn stored_cluster_configs(&self) -> BTreeMap<String, String> {
        self.lock().stored.cluster_configs.clone()
    }

    /// A session for `principal` starting in `kafka.default.database`, whether or not that
    /// database exists (as Flink's current database): a name without a database then means
    /// that one, and a statement naming a table in it while it is missing fails with
    /// `DATABASE_NOT_FOUND` naming it, rather than reaching a table of another database.
    pub fn session(&self, principal: Principal, host: IpAddr) -> Session {
        Session::new(self.config.kafka_default_database.clone(), principal, host)
    }

    fn lock(&self) -> MutexGuard<'_, DdlState> {
        // A panic while holding the lock cannot leave the stored catalog half-changed
        // (changes are made on a copy), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn authorize(
        &self,
        session: &Session,
        operation: Operation,
        resource: Resource,
    ) -> Result<(), SqlError> {
        self.authorize_as(&session.principal, session.host, operation, &resource)
    }

    /// `Ok` when `principal` at `host` may `operation` `resource`, else the refusal naming both.
    fn authorize_as(
        &self,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        resource: &Resource,
    ) -> Result<(), SqlError> {
        if self
            .authorizer
            .load()
            .authorize(principal, host, operation, resource)
        {
            Ok(())
        } else {
            Err(unauthorized(principal, operation, resource))
        }
    }

    /// `{db}.{table}` (a bare name is in `kafka.default.database`), for the admin HTTP
    /// endpoints, if `principal` may `operation` it. DESCRIBE is checked first, whether the
    /// table exists or not: a principal without it is told it is not authorized (and learns
    /// nothing about the table's existence); one with it learns the table is missing.
    pub fn authorized_table(
        &self,
        name: &str,
        operation: Operation,
        principal: &Principal,
        host: IpAddr,
    ) -> Result<Arc<TableInfo>, SqlError> {
        let snapshot = self.snapshot();
        let (database, table) = name
            .split_once('.')
            .unwrap_or((snapshot.default_database.as_str(), name));
        let resource = Resource::table(database, table);
        for operation in [Operation::Describe, operation] {
            self.authorize_as(principal, host, operation, &resource)?;
        }
        snapshot
            .table(database, table)
            .cloned()
            .ok_or_else(|| SqlError::TableNotFound(format!("{database}.{table}")))
    }

    fn may_describe(&self, session: &Session, resource: &Resource) -> bool {
        self.authorizer
            .load()
            .authorize(&session.principal, session.host, Operation::Describe, resource)
    }

    /// Applies `change` to a copy of the stored catalog, saves it, then publishes it. The
    /// change returns the statement result and the tables it dropped (hooked after the save).
    /// It runs under the catalog's lock: meanwhile [`Catalog::snapshot`] is the snapshot of
    /// the catalog it is given.
    pub(crate) fn change<T>(
        &self,
        change: impl FnOnce(&mut StoredCatalog) -> Result<(T, Vec<TableInfo>), SqlError>,
    ) -> Result<T, SqlError> {
        let mut state = self.lock();
        let mut next = state.stored.clone();
        let (result, dropped) = change(&mut next)?;
        if next == state.stored {
            // Nothing changed (IF NOT EXISTS, an ACL already present): nothing to store.
            return Ok(result);
        }
        let credentials = if next.cluster_configs != state.stored.cluster_configs {
            let credentials = effective_credentials(&self.config, &next.cluster_configs)
                .map_err(|error| SqlError::Procedure(error.to_string()))?;
            if let Some(reason) = super_user_lockout(&self.config, &credentials) {
                return Err(SqlError::Procedure(format!(
                    "refused, nothing changed: after this change {reason}; keep a password for at least one of them"
                )));
            }
            Some(credentials)
        } else {
            None
        };
        next.revision += 1;
        state.store.save(&next)?;
        let snapshot = build_snapshot(&self.config, &next);
        if next.acls != state.stored.acls {
            let authorizer = self.authorizer.load().with_acls(next.acls.clone());
            self.authorizer.store(Arc::new(authorizer));
        }
        if let Some(credentials) = credentials {
            self.credentials.replace(credentials);
        }
        self.snapshot.store(Arc::new(snapshot));
        state.stored = next;
        let hook = state.on_table_dropped.clone();
        drop(state);
        if let Some(hook) = hook {
            for table in &dropped {
                hook(table);
            }
        }
        Ok(result)
    }

    pub(crate) fn create_database(
        &self,
        name: &str,
        if_not_exists: bool,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        check_new_database_name(name)?;
        self.authorize(session, Operation::Create, Resource::Cluster)?;
        self.change(|stored| {
            if stored.databases.contains_key(name) {
                if if_not_exists {
                    return Ok((
                        StatementResult::done(format!("Database {name} already exists")),
                        vec![],
                    ));
                }
                return Err(SqlError::DatabaseAlreadyExists(name.to_string()));
            }
            stored.databases.insert(name.to_string(), BTreeMap::new());
            Ok((StatementResult::done(format!("Database {name} created")), vec![]))
        })
    }

    pub(crate) fn drop_database(
        &self,
        name: &str,
        if_exists: bool,
        cascade: bool,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        self.authorize(session, Operation::Drop, Resource::database(name))?;
        self.change(|stored| {
            // Under the lock: the snapshot of `stored` (see `drop_table`).
            let snapshot = self.snapshot();
            let Some(tables) = stored.databases.get(name) else {
                if if_exists {
                    return Ok((
                        StatementResult::done(format!("Database {name} does not exist")),
                        vec![],
                    ));
                }
                return Err(SqlError::DatabaseNotFound(name.to_string()));
            };
            // As Flink: the current database stays (names without a database mean it).
            if name == session.current_db {
                return Err(SqlError::DatabaseInUse(name.to_string()));
            }
            if !tables.is_empty() && !cascade {
                return Err(SqlError::DatabaseNotEmpty(name.to_string()));
            }
            let dropped: Vec<TableInfo> = tables
                .keys()
                .filter_map(|table| snapshot.table(name, table))
                .map(|table| TableInfo::clone(table))
                .collect();
            stored.databases.remove(name);
            Ok((StatementResult::done(format!("Database {name} dropped")), dropped))
        })
    }

    /// The databases the principal may see (see [`Catalog::visible_tables`]): those `USE`
    /// and `SHOW TABLES` accept.
    pub(crate) fn show_databases(&self, session: &Session) -> StatementResult {
        let snapshot = self.snapshot();
        let rows = snapshot
            .databases
            .iter()
            .filter(|(name, db)| self.visible_tables(session, name, db).is_some())
            .map(|(name, _)| vec![name.clone()])
            .collect();
        StatementResult::rows(&["database name"], rows)
    }

    /// The tables of a database the principal may DESCRIBE (see `describable_tables`).
    pub(crate) fn show_tables(
        &self,
        database: Option<String>,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        let database = database.unwrap_or_else(|| session.current_db.clone());
        let rows = self.describable_tables(&database, session)?;
        Ok(StatementResult::rows(
            &["table name"],
            rows.into_iter().map(|table| vec![table]).collect(),
        ))
    }

    /// `USE database`: the session's current database becomes `database`, under the rule of
    /// [`Catalog::describable_tables`] (so a principal that may see nothing of it is refused
    /// whether it exists or not).
    pub(crate) fn use_database(
        &self,
        database: String,
        session: &mut Session,
    ) -> Result<StatementResult, SqlError> {
        self.describable_tables(&database, session)?;
        let done = StatementResult::done(format!("Using database {database}"));
        session.current_db = database;
        Ok(done)
    }

    /// The tables of `database` the principal may DESCRIBE ([`Catalog::visible_tables`]). A
    /// principal that may see nothing of it is refused, whether the database exists or not
    /// (being told it is missing, or shown an empty list, would say whether it exists).
    fn describable_tables(&self, database: &str, session: &Session) -> Result<Vec<String>, SqlError> {
        let snapshot = self.snapshot();
        let resource = Resource::database(database);
        let Some(db) = snapshot.databases.get(database) else {
            if self.may_describe(session, &resource) {
                return Err(SqlError::DatabaseNotFound(database.to_string()));
            }
            return Err(unauthorized(&session.principal, Operation::Describe, &resource));
        };
        self.visible_tables(session, database, db)
            .ok_or_else(|| unauthorized(&session.principal, Operation::Describe, &resource))
    }

    /// The rule of SHOW DATABASES, SHOW TABLES and USE: the principal sees database `name`
    /// when it may DESCRIBE the database or one of its tables; then the tables it may
    /// describe, else `None`.
    fn visible_tables(&self, session: &Session, name: &str, db: &DatabaseInfo) -> Option<Vec<String>> {
        let tables: Vec<String> = db
            .tables
            .keys()
            .filter(|table| self.may_describe(session, &Resource::table(name, table)))
            .cloned()
            .collect();
        (!tables.is_empty() || self.may_describe(session, &Resource::database(name))).then_some(tables)
    }

    /// Whether `principal` may `operation` the cluster (`/metrics` needs DESCRIBE).
    pub fn authorized_cluster(
        &self,
        operation: Operation,
        principal: &Principal,
        host: IpAddr,
    ) -> Result<(), SqlError> {
        self.authorize_as(principal, host, operation, &Resource::Cluster)
    }

    pub(crate) fn qualify(&self, name: &ObjectName, session: &Session) -> (String, String) {
        let database = name
            .database
            .clone()
            .unwrap_or_else(|| session.current_db.clone());
        (database, name.name.clone())
    }

    pub(crate) fn describable_table(
        &self,
        name: &ObjectName,
        session: &Session,
    ) -> Result<Arc<TableInfo>, SqlError> {
        let (database, table) = self.qualify(name, session);
        self.authorize(session, Operation::Describe, Resource::table(&database, &table))?;
        let snapshot = self.snapshot();
        if !snapshot.databases.contains_key(&database) {
            return Err(SqlError::DatabaseNotFound(database));
        }
        snapshot
            .table(&database, &table)
            .cloned()
            .ok_or_else(|| SqlError::TableNotFound(format!("{database}.{table}")))
    }
}

/// Replaces plaintext passwords in the stored dynamic credentials (a catalog written before
/// they were hashed) by salted hashes; returns whether it changed `stored` (the caller saves).
/// A value that does not parse is left for `effective_credentials` to report.
fn hash_stored_plaintext(stored: &mut StoredCatalog, store: &CatalogStore) -> Result<bool, CatalogError> {
    let Some(text) = stored.cluster_configs.get(PLAIN_CREDENTIALS_KEY) else {
        return Ok(false);
    };
    let Ok(credentials) = PlainCredentials::parse_stored(text) else {
        return Ok(false);
    };
    if !credentials.has_plaintext() {
        return Ok(false);
    }
    let hashed = credentials.to_stored().map_err(|error| CatalogError::Config {
        key: PLAIN_CREDENTIALS_KEY,
        reason: error.to_string(),
    })?;
    stored
        .cluster_configs
        .insert(PLAIN_CREDENTIALS_KEY.to_string(), hashed);
    tracing::info!(
        store = %store.path().display(),
        "the stored {PLAIN_CREDENTIALS_KEY} held plaintext passwords (written by an earlier version): \
         rewritten as salted hashes"
    );
    Ok(true)
}

/// Says at start-up which keys come from the dynamic configs stored in the data dir (set
/// with `CALL sys.set_cluster_configs`), which win over server.yaml and `-D`. Never the values.
fn log_dynamic_configs(config: &CatalogConfig, store: &CatalogStore, dynamic: &BTreeMap<String, String>) {
    for key in dynamic.keys() {
        let configured = key == PLAIN_CREDENTIALS_KEY && config.plain_credentials.is_some();
        tracing::info!(
            key = %key,
            store = %store.path().display(),
            "config {key} comes from the dynamic configs stored in the data dir (set with CALL \
             sys.set_cluster_configs), which override server.yaml and -D{}; \
             CALL sys.reset_cluster_configs(config_keys => '{key}') goes back to the configured value",
            if configured {
                ": the configured value is not used"
            } else {
                ""
            }
        );
    }
}

/// The refusal of `operation` on `resource`, naming both (`table 'sales.orders'`).
fn unauthorized(principal: &Principal, operation: Operation, resource: &Resource) -> SqlError {
    let resource = match resource {
        Resource::Cluster => "the cluster".to_string(),
        Resource::Database(name) => format!("database '{name}'"),
        Resource::Table { database, table } => format!("table '{database}.{table}'"),
    };
    SqlError::Unauthorized {
        principal: principal.to_string(),
        operation: operation.to_string(),
        resource,
    }
}

#[cfg(test)]
impl Catalog {
    /// Makes later saves stop at `stage`, as if the process died there.
    fn crash_saves_at(&self, stage: Option<super::store::WriteStage>) {
        self.lock().store.crash_at(stage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::store::WriteStage;
    use std::net::Ipv4Addr;

    #[test]
    fn crash_between_temp_write_and_rename_keeps_the_old_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
        let mut session = catalog.session(Principal::anonymous(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        catalog
            .execute("CREATE TABLE kept (x INT)", &mut session)
            .unwrap();
        let before = catalog.snapshot();

        catalog.crash_saves_at(Some(WriteStage::BeforeRename));
        let error = catalog
            .execute("CREATE TABLE lost (x INT); DROP TABLE kept", &mut session)
            .unwrap_err();
        assert_eq!(error.code(), "STORAGE_ERROR");
        assert_eq!(error.http_status(), 500);
        // Nothing was published: the runtime never saw what is not on disk.
        assert_eq!(catalog.snapshot().revision, before.revision);
        assert!(catalog.snapshot().table("fluss", "lost").is_none());
        assert!(dir.path().join("catalog.json.tmp").exists());
        drop(catalog);

        let reopened = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
        let snapshot = reopened.snapshot();
        assert!(snapshot.table("fluss", "kept").is_some());
        assert!(snapshot.table("fluss", "lost").is_none());
        assert_eq!(snapshot.cluster_id, before.cluster_id);
        assert!(!dir.path().join("catalog.json.tmp").exists());
        // The id handed to the lost table was never stored, so it may be handed out again;
        // ids of stored tables stay unique.
        let mut session = reopened.session(Principal::anonymous(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        reopened
            .execute("CREATE TABLE next (x INT)", &mut session)
            .unwrap();
        let snapshot = reopened.snapshot();
        assert_ne!(
            snapshot.table("fluss", "next").unwrap().id,
            snapshot.table("fluss", "kept").unwrap().id
        );
    }
}
