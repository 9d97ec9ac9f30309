//! The scan request: query-string parameters of `GET /v1/tables/{db}.{table}/scan`.

use super::ScanError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanFormat {
    #[default]
    Jsonl,
    Arrow,
}

impl ScanFormat {
    pub fn parse(value: &str) -> Option<ScanFormat> {
        match value {
            "jsonl" | "json" => Some(ScanFormat::Jsonl),
            "arrow" => Some(ScanFormat::Arrow),
            _ => None,
        }
    }

    /// The HTTP Content-Type of this format.
    pub fn content_type(self) -> &'static str {
        match self {
            ScanFormat::Jsonl => "application/x-ndjson",
            ScanFormat::Arrow => "application/vnd.apache.arrow.stream",
        }
    }
}

/// What to read: the query parameters of the scan endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScanParams {
    pub bucket: Option<u32>,
    pub from: u64,
    pub limit: Option<u64>,
    pub columns: Option<Vec<String>>,
    pub format: ScanFormat,
}

impl ScanParams {
    /// Parses `bucket=&from=&limit=&format=jsonl|arrow&columns=a,b` (percent-encoded, any
    /// order, empty values ignored). Unknown parameters are refused so typos do not go unseen,
    /// and so is a parameter given twice (which of its values was meant is not known).
    pub fn from_query(query: &str) -> Result<ScanParams, ScanError> {
        let mut params = ScanParams::default();
        let mut names = std::collections::HashSet::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode_parameter(raw_name, "parameter name")?;
            let value = decode_parameter(raw_value, &name)?;
            if !names.insert(name.clone()) {
                return Err(ScanError::BadParameter {
                    name,
                    reason: "given more than once".to_string(),
                });
            }
            if value.is_empty() {
                continue;
            }
            let bad = |reason: &str| ScanError::BadParameter {
                name: name.clone(),
                reason: reason.to_string(),
            };
            match name.as_str() {
                "bucket" => params.bucket = Some(value.parse().map_err(|_| bad("expected a bucket number"))?),
                "from" => params.from = value.parse().map_err(|_| bad("expected an offset"))?,
                "limit" => params.limit = Some(value.parse().map_err(|_| bad("expected a row count"))?),
                "format" => {
                    params.format = ScanFormat::parse(&value).ok_or_else(|| bad("expected jsonl or arrow"))?
                }
                "columns" => {
                    let columns: Vec<String> = value.split(',').map(|c| c.trim().to_string()).collect();
                    let mut seen = std::collections::HashSet::new();
                    if let Some(twice) = columns.iter().find(|c| !seen.insert(c.as_str())) {
                        return Err(ScanError::BadParameter {
                            name: name.clone(),
                            reason: format!("column '{twice}' is named twice"),
                        });
                    }
                    params.columns = Some(columns);
                }
                _ => {
                    return Err(bad(
                        "unknown parameter (known: bucket, from, limit, format, columns)",
                    ))
                }
            }
        }
        Ok(params)
    }
}

/// Percent-encoded text that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PercentError {
    /// A `%` not followed by two hex digits.
    #[error("bad percent-encoding")]
    BadEscape,
    /// The decoded bytes are not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
}

/// Decodes the `%XX` escapes of `text`. `+` is a space in a query string (`plus_is_space`)
/// and itself in a path segment.
pub fn percent_decode(text: &str, plus_is_space: bool) -> Result<String, PercentError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(index + 1..index + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or(PercentError::BadEscape)?;
                out.push(hex);
                index += 2;
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8(out).map_err(|_| PercentError::NotUtf8)
}

/// A query parameter's name or value, decoded; `what` names it in the error.
fn decode_parameter(text: &str, what: &str) -> Result<String, ScanError> {
    percent_decode(text, true).map_err(|error| ScanError::BadParameter {
        name: what.to_string(),
        reason: error.to_string(),
    })
}
