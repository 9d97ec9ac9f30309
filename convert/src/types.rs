//! The Fluss type system, with nullability at every level.
//!
//! Shared by the catalog (SQL parsing, Kafka-mapping validation, persistence) and the
//! converter (plans and Arrow schemas). `Display` prints Flink SQL type syntax, which is
//! also what the catalog persists and what `SHOW CREATE TABLE` prints, so `parse(display(t)) == t`.

use std::fmt;

/// A Fluss data type without its nullability.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataType {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    /// DECIMAL(precision, scale): 1 <= precision <= 38, 0 <= scale <= precision.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// CHAR(n), n >= 1 code points.
    Char(u32),
    /// STRING / VARCHAR(n): Fluss stores every VARCHAR as STRING.
    String,
    /// BINARY(n), exactly n bytes.
    Binary(u32),
    /// BYTES / VARBINARY(n).
    Bytes,
    Date,
    /// TIME(p), 0 <= p <= 9 fractional-second digits.
    Time(u8),
    /// TIMESTAMP(p) without time zone, 0 <= p <= 9.
    Timestamp(u8),
    /// TIMESTAMP_LTZ(p) = TIMESTAMP(p) WITH LOCAL TIME ZONE, 0 <= p <= 9.
    TimestampLtz(u8),
    Array(Box<FieldType>),
    Map {
        key: Box<FieldType>,
        value: Box<FieldType>,
    },
    Row(Vec<Field>),
}

/// A data type plus its nullability (`NOT NULL` makes `nullable` false).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldType {
    pub data_type: DataType,
    pub nullable: bool,
}

/// A named column or ROW field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: String,
    pub field_type: FieldType,
}

/// The columns of a table, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Schema {
    pub columns: Vec<Field>,
}

impl FieldType {
    pub fn nullable(data_type: DataType) -> Self {
        Self {
            data_type,
            nullable: true,
        }
    }

    pub fn not_null(data_type: DataType) -> Self {
        Self {
            data_type,
            nullable: false,
        }
    }
}

impl Field {
    pub fn new(name: impl Into<String>, field_type: FieldType) -> Self {
        Self {
            name: name.into(),
            field_type,
        }
    }
}

impl Schema {
    pub fn new(columns: Vec<Field>) -> Self {
        Self { columns }
    }

    pub fn column(&self, name: &str) -> Option<&Field> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// Backquotes an identifier when it is not a plain `[A-Za-z_][A-Za-z0-9_]*` word.
pub fn quote_identifier(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    if plain {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Boolean => f.write_str("BOOLEAN"),
            DataType::TinyInt => f.write_str("TINYINT"),
            DataType::SmallInt => f.write_str("SMALLINT"),
            DataType::Int => f.write_str("INT"),
            DataType::BigInt => f.write_str("BIGINT"),
            DataType::Float => f.write_str("FLOAT"),
            DataType::Double => f.write_str("DOUBLE"),
            DataType::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})"),
            DataType::Char(n) => write!(f, "CHAR({n})"),
            DataType::String => f.write_str("STRING"),
            DataType::Binary(n) => write!(f, "BINARY({n})"),
            DataType::Bytes => f.write_str("BYTES"),
            DataType::Date => f.write_str("DATE"),
            DataType::Time(p) => write!(f, "TIME({p})"),
            DataType::Timestamp(p) => write!(f, "TIMESTAMP({p})"),
            DataType::TimestampLtz(p) => write!(f, "TIMESTAMP_LTZ({p})"),
            DataType::Array(element) => write!(f, "ARRAY<{element}>"),
            DataType::Map { key, value } => write!(f, "MAP<{key}, {value}>"),
            DataType::Row(fields) => {
                f.write_str("ROW<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} {}", quote_identifier(&field.name), field.field_type)?;
                }
                f.write_str(">")
            }
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.data_type)?;
        if !self.nullable {
            f.write_str(" NOT NULL")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_flink_sql() {
        let t = FieldType::nullable(DataType::Row(vec![
            Field::new("timestamp", FieldType::nullable(DataType::TimestampLtz(3))),
            Field::new(
                "a b",
                FieldType::not_null(DataType::Map {
                    key: Box::new(FieldType::not_null(DataType::String)),
                    value: Box::new(FieldType::nullable(DataType::Array(Box::new(
                        FieldType::nullable(DataType::Decimal {
                            precision: 18,
                            scale: 2,
                        }),
                    )))),
                }),
            ),
        ]));
        assert_eq!(
            t.to_string(),
            "ROW<timestamp TIMESTAMP_LTZ(3), `a b` MAP<STRING NOT NULL, ARRAY<DECIMAL(18, 2)>> NOT NULL>"
        );
    }
}
