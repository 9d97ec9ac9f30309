//! Fluss types in Flink SQL syntax: every type of interface.md, `NOT NULL` anywhere.

use kafluss_convert::types::{DataType, Field, FieldType};

use super::sql_lexer::{
    comma_list, expected, fail, identifier, optional_keywords, symbol, syntax_error, unsigned, word, ws,
    PResult, SyntaxError,
};

/// Deepest type nesting the parser accepts (ARRAY/MAP/ROW levels). Kafka mapping allows 64
/// business levels below a column; the bound keeps hostile input from exhausting the stack.
pub const MAX_TYPE_NESTING: usize = 100;

/// A type with its optional `NOT NULL` / `NULL`.
pub(crate) fn field_type(input: &str, depth: usize) -> PResult<'_, FieldType> {
    let (input, data_type) = data_type(input, depth)?;
    let (input, not_null) = optional_keywords(input, &["NOT", "NULL"])?;
    if not_null {
        return Ok((input, FieldType::not_null(data_type)));
    }
    let (input, _) = optional_keywords(input, &["NULL"])?;
    Ok((input, FieldType::nullable(data_type)))
}

/// `'(' n ')'` or nothing.
fn optional_length(input: &str) -> PResult<'_, Option<u32>> {
    match symbol('(')(input) {
        Ok((rest, ())) => {
            let (rest, value) = unsigned(rest)?;
            let (rest, ()) = symbol(')')(rest)?;
            Ok((rest, Some(value)))
        }
        Err(_) => Ok((input, None)),
    }
}

/// A fractional-seconds precision, 0..=9.
fn precision<'a>(at: &'a str, input: &'a str, default: u8) -> PResult<'a, u8> {
    let (rest, value) = optional_length(input)?;
    match value.unwrap_or(u32::from(default)) {
        p @ 0..=9 => Ok((rest, p as u8)),
        p => fail(at, format!("precision {p} out of range: must be between 0 and 9")),
    }
}

/// A length (CHAR/BINARY), at least 1.
fn length<'a>(at: &'a str, input: &'a str, type_name: &str) -> PResult<'a, u32> {
    let (rest, value) = optional_length(input)?;
    match value.unwrap_or(1) {
        0 => fail(at, format!("{type_name} length must be at least 1")),
        n if n > i32::MAX as u32 => fail(at, format!("{type_name} length {n} is too large")),
        n => Ok((rest, n)),
    }
}

fn data_type(input: &str, depth: usize) -> PResult<'_, DataType> {
    let (start, ()) = ws(input)?;
    if depth > MAX_TYPE_NESTING {
        return fail(start, format!("types nest deeper than {MAX_TYPE_NESTING} levels"));
    }
    let Ok((rest, name)) = word(start) else {
        return expected(start, "a type");
    };
    let name = name.to_ascii_uppercase();
    let simple = |data_type: DataType| -> PResult<'_, DataType> { Ok((rest, data_type)) };
    match name.as_str() {
        "BOOLEAN" => simple(DataType::Boolean),
        "TINYINT" => simple(DataType::TinyInt),
        "SMALLINT" => simple(DataType::SmallInt),
        "INT" | "INTEGER" => simple(DataType::Int),
        "BIGINT" => simple(DataType::BigInt),
        "FLOAT" => simple(DataType::Float),
        "DOUBLE" => {
            let (rest, _) = optional_keywords(rest, &["PRECISION"])?;
            Ok((rest, DataType::Double))
        }
        "DECIMAL" | "DEC" | "NUMERIC" => decimal(start, rest),
        "CHAR" => {
            let (rest, n) = length(start, rest, "CHAR")?;
            Ok((rest, DataType::Char(n)))
        }
        "VARCHAR" => {
            let (rest, _) = length(start, rest, "VARCHAR")?;
            Ok((rest, DataType::String))
        }
        "STRING" => simple(DataType::String),
        "BINARY" => {
            let (rest, n) = length(start, rest, "BINARY")?;
            Ok((rest, DataType::Binary(n)))
        }
        "VARBINARY" => {
            let (rest, _) = length(start, rest, "VARBINARY")?;
            Ok((rest, DataType::Bytes))
        }
        "BYTES" => simple(DataType::Bytes),
        "DATE" => simple(DataType::Date),
        "TIME" => {
            let (rest, p) = precision(start, rest, 0)?;
            let (rest, _) = optional_keywords(rest, &["WITHOUT", "TIME", "ZONE"])?;
            Ok((rest, DataType::Time(p)))
        }
        "TIMESTAMP" => {
            let (rest, p) = precision(start, rest, 6)?;
            let (rest, local) = optional_keywords(rest, &["WITH", "LOCAL", "TIME", "ZONE"])?;
            if local {
                return Ok((rest, DataType::TimestampLtz(p)));
            }
            let (rest, _) = optional_keywords(rest, &["WITHOUT", "TIME", "ZONE"])?;
            Ok((rest, DataType::Timestamp(p)))
        }
        "TIMESTAMP_LTZ" => {
            let (rest, p) = precision(start, rest, 6)?;
            Ok((rest, DataType::TimestampLtz(p)))
        }
        "ARRAY" => {
            let (rest, ()) = symbol('<')(rest)?;
            let (rest, element) = field_type(rest, depth + 1)?;
            let (rest, ()) = symbol('>')(rest)?;
            Ok((rest, DataType::Array(Box::new(element))))
        }
        "MAP" => {
            let (rest, ()) = symbol('<')(rest)?;
            let (rest, mut key) = field_type(rest, depth + 1)?;
            let (rest, ()) = symbol(',')(rest)?;
            let (rest, value) = field_type(rest, depth + 1)?;
            let (rest, ()) = symbol('>')(rest)?;
            // Fluss MAP keys are never null, whatever the declaration says.
            key.nullable = false;
            Ok((
                rest,
                DataType::Map {
                    key: Box::new(key),
                    value: Box::new(value),
                },
            ))
        }
        "ROW" => row_type(rest, depth),
        _ => expected(start, "a type"),
    }
}

/// `DECIMAL [(p [, s])]`, default (10, 0) as in Flink.
fn decimal<'a>(at: &'a str, input: &'a str) -> PResult<'a, DataType> {
    let (mut rest, mut precision, mut scale) = (input, 10u32, 0u32);
    if let Ok((after, ())) = symbol('(')(input) {
        let (after, p) = unsigned(after)?;
        precision = p;
        rest = after;
        if let Ok((after, ())) = symbol(',')(rest) {
            let (after, s) = unsigned(after)?;
            scale = s;
            rest = after;
        }
        (rest, ()) = symbol(')')(rest)?;
    }
    if !(1..=38).contains(&precision) {
        return fail(
            at,
            format!("DECIMAL precision {precision} out of range: must be between 1 and 38"),
        );
    }
    if scale > precision {
        return fail(
            at,
            format!("DECIMAL scale {scale} out of range: must be between 0 and the precision {precision}"),
        );
    }
    Ok((
        rest,
        DataType::Decimal {
            precision: precision as u8,
            scale: scale as u8,
        },
    ))
}

/// `ROW<name type, ...>` or `ROW(name type, ...)`.
fn row_type(input: &str, depth: usize) -> PResult<'_, DataType> {
    let (after_ws, ()) = ws(input)?;
    let close = match after_ws.chars().next() {
        Some('<') => '>',
        Some('(') => ')',
        _ => return expected(after_ws, "'<' after ROW"),
    };
    let rest = &after_ws[1..];
    let (rest, fields) = comma_list(rest, |i| {
        let (i, name) = identifier(i)?;
        let (i, field_type) = field_type(i, depth + 1)?;
        Ok((i, Field::new(name, field_type)))
    })?;
    let (rest, ()) = symbol(close)(rest)?;
    Ok((rest, DataType::Row(fields)))
}

/// Parses a type written alone (what the catalog persists): `parse(display(t)) == t`.
pub fn parse_type(text: &str) -> Result<FieldType, SyntaxError> {
    let result = field_type(text, 0).and_then(|(rest, t)| {
        let (rest, ()) = ws(rest)?;
        if rest.is_empty() {
            Ok((rest, t))
        } else {
            expected(rest, "end of type")
        }
    });
    result.map(|(_, t)| t).map_err(|e| syntax_error(text, e))
}
