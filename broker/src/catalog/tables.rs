//! CREATE, ALTER and DROP TABLE.

use kafluss_auth::{Operation, Resource};
use kafluss_convert::types::Schema;

use super::ddl::{Catalog, Session};
use super::error::SqlError;
use super::model::{TableInfo, BUCKET_NUM_OPTION, MAX_TABLE_ID};
use super::output::StatementResult;
use super::sql::{CreateTable, ObjectName};
use super::store::StoredTable;
use super::validate::{
    check_fixed_unchanged, check_kafka, check_key_columns, check_log_compression, check_log_format,
    check_log_ttl, check_name, check_reset_key, check_unique_fields, collect_options, parse_bucket_count,
    FIXED_OPTIONS, MAX_COLUMNS,
};

/// What ALTER TABLE does to the options.
pub(crate) enum AlterOptions {
    Set(Vec<(String, String)>),
    Reset(Vec<String>),
}

impl Catalog {
    pub(crate) fn create_table(
        &self,
        create: CreateTable,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        let (database, name) = self.qualify(&create.table, session);
        check_name(&database)?;
        check_name(&name)?;
        let path = format!("{database}.{name}");
        self.authorize(session, Operation::Create, Resource::database(&database))?;
        let invalid = |reason: String| SqlError::InvalidTable {
            table: path.clone(),
            reason,
        };

        if create.columns.len() > MAX_COLUMNS {
            return Err(invalid(format!(
                "the table has {} columns; at most {MAX_COLUMNS}",
                create.columns.len()
            )));
        }
        check_unique_fields(&create.columns, "").map_err(invalid)?;
        let mut columns = create.columns;
        check_key_columns(&columns, &create.primary_key, "PRIMARY KEY").map_err(invalid)?;
        check_key_columns(&columns, &create.partition_keys, "PARTITIONED BY").map_err(invalid)?;
        // Primary key columns are implicitly NOT NULL, as in Flink and Fluss.
        for column in &mut columns {
            if create.primary_key.contains(&column.name) {
                column.field_type.nullable = false;
            }
        }
        let mut options = collect_options(create.options).map_err(invalid)?;
        let bucket_count = match options.get(BUCKET_NUM_OPTION) {
            Some(text) => parse_bucket_count(text).map_err(invalid)?,
            None => self.config().default_bucket_number,
        };
        options.insert(BUCKET_NUM_OPTION.to_string(), bucket_count.to_string());
        let log_format = check_log_format(&options).map_err(invalid)?;
        check_log_ttl(&options).map_err(invalid)?;
        check_log_compression(&options).map_err(invalid)?;
        let schema = Schema::new(columns);
        check_kafka(
            &path,
            &schema,
            &options,
            &create.partition_keys,
            &create.primary_key,
            &log_format,
        )?;

        let if_not_exists = create.if_not_exists;
        let partition_keys = create.partition_keys;
        let primary_key = create.primary_key;
        self.change(|stored| {
            let revision = stored.revision + 1;
            let Some(tables) = stored.databases.get_mut(&database) else {
                return Err(SqlError::DatabaseNotFound(database.clone()));
            };
            if tables.contains_key(&name) {
                if if_not_exists {
                    return Ok((
                        StatementResult::done(format!("Table {path} already exists")),
                        vec![],
                    ));
                }
                return Err(SqlError::TableAlreadyExists(path.clone()));
            }
            let id = stored.next_table_id;
            if id > MAX_TABLE_ID {
                return Err(invalid("the cluster ran out of table ids".to_string()));
            }
            stored.next_table_id += 1;
            tables.insert(
                name.clone(),
                StoredTable {
                    id,
                    schema,
                    options,
                    partition_keys,
                    primary_key,
                    revision,
                },
            );
            Ok((StatementResult::done(format!("Table {path} created")), vec![]))
        })
    }

    pub(crate) fn alter_table(
        &self,
        name: &ObjectName,
        alter: AlterOptions,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        let (database, table_name) = self.qualify(name, session);
        let path = format!("{database}.{table_name}");
        self.authorize(session, Operation::Alter, Resource::table(&database, &table_name))?;
        let invalid = |reason: String| SqlError::InvalidTable {
            table: path.clone(),
            reason,
        };
        self.change(|stored| {
            let revision = stored.revision + 1;
            let Some(tables) = stored.databases.get_mut(&database) else {
                return Err(SqlError::DatabaseNotFound(database.clone()));
            };
            let Some(table) = tables.get_mut(&table_name) else {
                return Err(SqlError::TableNotFound(path.clone()));
            };
            let mut options = table.options.clone();
            match alter {
                AlterOptions::Set(pairs) => {
                    for (key, value) in collect_options(pairs).map_err(invalid)? {
                        if FIXED_OPTIONS.contains(&key.as_str()) {
                            // The value in effect, perhaps written otherwise: the stored text
                            // stays (SHOW CREATE TABLE shows what CREATE stored).
                            check_fixed_unchanged(
                                &options,
                                &key,
                                &value,
                                self.config().default_bucket_number,
                            )
                            .map_err(invalid)?;
                            continue;
                        }
                        options.insert(key, value);
                    }
                }
                AlterOptions::Reset(keys) => {
                    for key in keys {
                        check_reset_key(&path, &key, &options)?;
                        if FIXED_OPTIONS.contains(&key.as_str()) {
                            return Err(invalid(format!("option '{key}' cannot be reset")));
                        }
                        options.remove(&key);
                    }
                }
            }
            let log_format = check_log_format(&options).map_err(invalid)?;
            check_log_ttl(&options).map_err(invalid)?;
            check_log_compression(&options).map_err(invalid)?;
            check_kafka(
                &path,
                &table.schema,
                &options,
                &table.partition_keys,
                &table.primary_key,
                &log_format,
            )?;
            table.options = options;
            table.revision = revision;
            Ok((StatementResult::done(format!("Table {path} altered")), vec![]))
        })
    }

    pub(crate) fn drop_table(
        &self,
        name: &ObjectName,
        if_exists: bool,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        let (database, table_name) = self.qualify(name, session);
        let path = format!("{database}.{table_name}");
        self.authorize(session, Operation::Drop, Resource::table(&database, &table_name))?;
        self.change(|stored| {
            // Read under the catalog's lock, so it is the snapshot of `stored`: taken before
            // the lock, a table created under this name meanwhile was removed from the catalog
            // without being dropped (its logs stayed open and its directory for ever).
            let snapshot = self.snapshot();
            let Some(tables) = stored.databases.get_mut(&database) else {
                if if_exists {
                    return Ok((
                        StatementResult::done(format!("Table {path} does not exist")),
                        vec![],
                    ));
                }
                return Err(SqlError::DatabaseNotFound(database.clone()));
            };
            if tables.remove(&table_name).is_none() {
                if if_exists {
                    return Ok((
                        StatementResult::done(format!("Table {path} does not exist")),
                        vec![],
                    ));
                }
                return Err(SqlError::TableNotFound(path.clone()));
            }
            let dropped = snapshot
                .table(&database, &table_name)
                .map(|table| TableInfo::clone(table))
                .into_iter()
                .collect();
            Ok((StatementResult::done(format!("Table {path} dropped")), dropped))
        })
    }
}
