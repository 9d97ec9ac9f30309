//! Errors of catalog statements, each with a stable code (what the HTTP API returns in
//! `{"error":{"code":...}}`) and an HTTP status.

use std::io;

use kafluss_convert::mapping::MappingError;
use thiserror::Error;

use super::sql::SyntaxError;
use super::store::StoreError;

#[derive(Debug, Error)]
pub enum SqlError {
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    #[error("database '{0}' does not exist")]
    DatabaseNotFound(String),
    #[error("database '{0}' already exists")]
    DatabaseAlreadyExists(String),
    #[error("database '{0}' is not empty: drop its tables first or use DROP DATABASE {0} CASCADE")]
    DatabaseNotEmpty(String),
    #[error(
        "database '{0}' is the current database and cannot be dropped: USE another database \
         first (each request starts in kafka.default.database)"
    )]
    DatabaseInUse(String),
    #[error("table '{0}' does not exist")]
    TableNotFound(String),
    #[error("table '{0}' already exists")]
    TableAlreadyExists(String),
    #[error("invalid name '{name}': {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("invalid table '{table}': {reason}")]
    InvalidTable { table: String, reason: String },
    #[error("table '{table}': invalid Kafka mapping: {source}")]
    KafkaMapping {
        table: String,
        #[source]
        source: MappingError,
    },
    #[error("principal {principal} is not authorized to {operation} {resource}")]
    Unauthorized {
        principal: String,
        operation: String,
        resource: String,
    },
    #[error("{0}")]
    Procedure(String),
    /// The change would make the catalog larger than `catalog.max-size`
    /// ([`StoreError::ChangeTooLarge`]); nothing was written.
    #[error(transparent)]
    CatalogTooLarge(StoreError),
    #[error("catalog storage failed: {0}")]
    Storage(#[source] StoreError),
    #[error(
        "the script has more than {limit} statements, the most one request may hold \
         (admin.max-sql-statements): split it or raise the limit"
    )]
    TooManyStatements { limit: usize },
    #[error("statement {index} (line {line}): {source}")]
    InStatement {
        index: usize,
        line: usize,
        #[source]
        source: Box<SqlError>,
    },
}

impl From<StoreError> for SqlError {
    /// A change refused for the catalog's size is the statement's doing (it is answered as
    /// such, [`SqlError::code`]); any other storage error is the server's.
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::ChangeTooLarge { .. } => SqlError::CatalogTooLarge(error),
            other => SqlError::Storage(other),
        }
    }
}

impl SqlError {
    /// The innermost error (without the statement position).
    pub fn root(&self) -> &SqlError {
        match self {
            SqlError::InStatement { source, .. } => source.root(),
            other => other,
        }
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self.root() {
            SqlError::Syntax(error) if error.unsupported => "UNSUPPORTED_STATEMENT",
            SqlError::Syntax(_) => "SYNTAX_ERROR",
            SqlError::TooManyStatements { .. } => "TOO_MANY_STATEMENTS",
            SqlError::DatabaseNotFound(_) => "DATABASE_NOT_FOUND",
            SqlError::DatabaseAlreadyExists(_) => "DATABASE_ALREADY_EXISTS",
            SqlError::DatabaseNotEmpty(_) => "DATABASE_NOT_EMPTY",
            SqlError::DatabaseInUse(_) => "DATABASE_IN_USE",
            SqlError::TableNotFound(_) => "TABLE_NOT_FOUND",
            SqlError::TableAlreadyExists(_) => "TABLE_ALREADY_EXISTS",
            SqlError::InvalidName { .. } => "INVALID_NAME",
            SqlError::InvalidTable { .. } => "INVALID_TABLE",
            SqlError::KafkaMapping { .. } => "INVALID_KAFKA_MAPPING",
            SqlError::Unauthorized { .. } => "AUTHORIZATION_FAILED",
            SqlError::Procedure(_) => "INVALID_PROCEDURE_CALL",
            SqlError::CatalogTooLarge(_) => "CATALOG_TOO_LARGE",
            SqlError::Storage(_) => "STORAGE_ERROR",
            SqlError::InStatement { .. } => unreachable!("root() unwraps statements"),
        }
    }

    /// The HTTP status for this error.
    pub fn http_status(&self) -> u16 {
        match self.root() {
            SqlError::DatabaseNotFound(_) | SqlError::TableNotFound(_) => 404,
            SqlError::DatabaseAlreadyExists(_)
            | SqlError::TableAlreadyExists(_)
            | SqlError::DatabaseNotEmpty(_)
            | SqlError::DatabaseInUse(_) => 409,
            SqlError::Unauthorized { .. } => 403,
            SqlError::CatalogTooLarge(_) => 413,
            SqlError::Storage(_) => 500,
            _ => 400,
        }
    }
}

/// Errors opening the catalog at start-up.
#[derive(Debug, Error)]
pub enum CatalogError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid configuration '{key}': {reason}")]
    Config { key: &'static str, reason: String },
    #[error("cannot create the cluster id: {0}")]
    ClusterId(#[source] io::Error),
}
