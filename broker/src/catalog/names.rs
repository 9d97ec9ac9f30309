//! Fluss's rule for database and table names, the one rule of SQL (`validate`), Kafka topic
//! names (`resolve`), the catalog file's check (`store`) and the storage, which names each
//! table's directory after them (`log::table_dir`). It imports nothing, so any layer may use
//! it.

/// Fluss's limit on a database or table name.
pub const MAX_FLUSS_NAME_LEN: usize = 200;

/// Fluss's rule for database and table names: 1–200 of `[a-zA-Z0-9_-]`, no `__` prefix.
pub fn check_fluss_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("database and table names cannot be empty");
    }
    if name.len() > MAX_FLUSS_NAME_LEN {
        return Err("database and table names are at most 200 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err("database and table names use only ASCII letters, digits, '_' and '-'");
    }
    if name.starts_with("__") {
        return Err("names starting with '__' are reserved");
    }
    Ok(())
}
