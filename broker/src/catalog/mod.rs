//! The Fluss catalog: databases and log tables, their Kafka mappings, ACLs and dynamic
//! cluster configs, persisted in `data.dir`, changed with SQL (`sql.rs` parses, `script.rs`
//! runs each statement, `ddl.rs`, `tables.rs` and `procedures.rs` execute them; `config.rs` is
//! what the catalog takes from the server configuration) and read lock-free by the cores
//! through `CatalogSnapshot`s (`resolve.rs` maps Kafka topics to tables).

pub mod config;
pub mod ddl;
pub mod error;
pub mod model;
pub mod names;
pub mod output;
pub mod procedures;
mod publish;
pub mod resolve;
pub mod script;
pub mod sql;
mod sql_lexer;
mod sql_types;
pub mod store;
mod tables;
pub mod validate;

pub use config::{
    CatalogConfig, DEFAULT_DATABASE, DEFAULT_MAX_SIZE, DEFAULT_MAX_SQL_STATEMENTS, MAX_SIZE_KEY,
};
pub use ddl::{Catalog, Session, TableDroppedHook};
pub use error::{CatalogError, SqlError};
pub use model::{topic_id, CatalogSnapshot, DatabaseInfo, KafkaTopic, TableInfo};
pub use output::StatementResult;
pub use resolve::{resolve_topic, TopicError};
pub use script::{ScriptFailure, ScriptOutcome};
pub use sql::{
    leading_words, parse_script, parse_script_limited, parse_statement, parse_type, ScriptError, Statement,
    SyntaxError,
};
