//! What statements return: a message or rows, with their JSON form (the HTTP API) and the
//! text `SHOW CREATE TABLE` / `DESCRIBE` print.

use kafluss_convert::types::quote_identifier;
use serde_json::{json, Value};

use super::model::TableInfo;

/// The result of one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementResult {
    /// DDL and procedures that change something: what was done.
    Done { message: String },
    /// SHOW, DESCRIBE, list/get procedures: a table of strings.
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
    },
}

impl StatementResult {
    pub fn done(message: impl Into<String>) -> Self {
        StatementResult::Done {
            message: message.into(),
        }
    }

    pub fn rows(columns: &[&str], rows: Vec<Vec<String>>) -> Self {
        StatementResult::Rows {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }

    /// `{"kind":"done","message":...}` or `{"kind":"rows","columns":[...],"rows":[[...]]}`.
    pub fn to_json(&self) -> Value {
        match self {
            StatementResult::Done { message } => json!({ "kind": "done", "message": message }),
            StatementResult::Rows { columns, rows } => {
                json!({ "kind": "rows", "columns": columns, "rows": rows })
            }
        }
    }

    /// Parses [`StatementResult::to_json`] output (the CLI reads what the server sent).
    pub fn from_json(value: &Value) -> Option<Self> {
        match value.get("kind")?.as_str()? {
            "done" => Some(StatementResult::done(value.get("message")?.as_str()?)),
            "rows" => {
                let strings = |v: &Value| -> Option<Vec<String>> {
                    v.as_array()?
                        .iter()
                        .map(|s| s.as_str().map(str::to_string))
                        .collect()
                };
                let columns = strings(value.get("columns")?)?;
                let rows = value
                    .get("rows")?
                    .as_array()?
                    .iter()
                    .map(strings)
                    .collect::<Option<Vec<_>>>()?;
                Some(StatementResult::Rows { columns, rows })
            }
            _ => None,
        }
    }
}

/// `SHOW CREATE TABLE`: a statement that re-creates the table (options as stored, including
/// the `bucket.num` fixed at creation).
pub fn show_create_table(table: &TableInfo) -> String {
    let mut lines: Vec<String> = table
        .schema
        .columns
        .iter()
        .map(|c| format!("  {} {}", quote_identifier(&c.name), c.field_type))
        .collect();
    if !table.primary_key.is_empty() {
        lines.push(format!(
            "  PRIMARY KEY ({}) NOT ENFORCED",
            identifier_list(&table.primary_key)
        ));
    }
    let mut text = format!(
        "CREATE TABLE {}.{} (\n{}\n)",
        quote_identifier(&table.database),
        quote_identifier(&table.name),
        lines.join(",\n")
    );
    if !table.partition_keys.is_empty() {
        text.push_str(&format!(
            " PARTITIONED BY ({})",
            identifier_list(&table.partition_keys)
        ));
    }
    if !table.options.is_empty() {
        let options: Vec<String> = table
            .options
            .iter()
            .map(|(k, v)| format!("  {} = {}", string_literal(k), string_literal(v)))
            .collect();
        text.push_str(&format!(" WITH (\n{}\n)", options.join(",\n")));
    }
    text
}

/// `DESCRIBE`: name, type, null, key.
pub fn describe(table: &TableInfo) -> StatementResult {
    let rows = table
        .schema
        .columns
        .iter()
        .map(|column| {
            let key = if table.primary_key.contains(&column.name) {
                format!("PRI({})", table.primary_key.join(", "))
            } else {
                String::new()
            };
            vec![
                column.name.clone(),
                column.field_type.data_type.to_string(),
                if column.field_type.nullable {
                    "TRUE".to_string()
                } else {
                    "FALSE".to_string()
                },
                key,
            ]
        })
        .collect();
    StatementResult::rows(&["name", "type", "null", "key"], rows)
}

fn identifier_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| quote_identifier(n))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `'text'` with quotes doubled.
pub fn string_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
