//! What the catalog needs from the server configuration, and the defaults it starts from.

use std::path::PathBuf;

use kafluss_auth::Principal;

/// Default of `admin.max-sql-statements`: statements one request may hold.
pub const DEFAULT_MAX_SQL_STATEMENTS: usize = 1000;

/// `catalog.max-size`: the largest `catalog.json` a change may write and start-up reads.
pub const MAX_SIZE_KEY: &str = "catalog.max-size";

/// Default of `catalog.max-size` (512 MiB).
pub const DEFAULT_MAX_SIZE: u64 = 512 << 20;

/// The database created when the catalog has none.
pub const DEFAULT_DATABASE: &str = "fluss";

/// What the catalog needs from the server configuration.
#[derive(Debug, Clone)]
pub struct CatalogConfig {
    /// `data.dir`: holds `catalog.json` and the table directories.
    pub data_dir: PathBuf,
    /// `default.bucket.number`, for tables without `bucket.num`.
    pub default_bucket_number: u32,
    /// `kafka.enabled`: then `kafka_default_database` is created when missing.
    pub kafka_enabled: bool,
    /// `kafka.default.database`.
    pub kafka_default_database: String,
    /// `authorizer.enabled`.
    pub authorizer_enabled: bool,
    /// `super.users`.
    pub super_users: Vec<Principal>,
    /// `security.sasl.plain.credentials` from the configuration; a dynamic value set with
    /// `CALL sys.set_cluster_configs` overrides it until reset.
    pub plain_credentials: Option<String>,
    /// `admin.max-sql-statements`: statements one script may hold.
    pub max_sql_statements: usize,
    /// Whether the admin (Fluss) listener requires a login (it is mapped to `sasl`): then the
    /// credentials decide whether a super user can administer, and a change of them that would
    /// leave none able to log in is refused.
    pub admin_login_required: bool,
    /// `catalog.max-size`: the largest encoded catalog a change may save, and the largest
    /// `catalog.json` loaded at start-up (the whole catalog is held in memory and rewritten by
    /// every change).
    pub max_size: u64,
}

impl CatalogConfig {
    /// Defaults of interface.md for a data directory (tests start from this).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            default_bucket_number: 1,
            kafka_enabled: true,
            kafka_default_database: DEFAULT_DATABASE.to_string(),
            authorizer_enabled: false,
            super_users: Vec::new(),
            plain_credentials: None,
            max_sql_statements: DEFAULT_MAX_SQL_STATEMENTS,
            admin_login_required: false,
            max_size: DEFAULT_MAX_SIZE,
        }
    }
}
