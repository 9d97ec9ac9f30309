//! Reading rows back from bucket logs: `GET /v1/tables/{db}.{table}/scan` and `kafluss scan`.
//!
//! Runs on any thread (the admin HTTP thread): plain std::fs reads of the segment files with
//! arrow-ipc's `StreamReader`, bounded per bucket by the high watermark the owner core
//! publishes in the [`LogRegistry`], so half-written batches are never read.
//!
//! Output formats:
//! - `jsonl`: one line per row, `{"bucket":B,"offset":O,"row":{...}}`, row encoding in [`json`].
//! - `arrow`: one Arrow IPC stream. Its schema is `_bucket INT32 NOT NULL`, `_offset INT64 NOT
//!   NULL`, then the selected table columns; rows come bucket by bucket in offset order.
//!
//! Buckets are read in ascending order (all of them, or the one asked for); `from` applies to
//! each bucket; `limit` bounds the total rows; `columns` selects and orders columns.

pub mod json;
pub mod reader;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use crate::log::{bucket_dir, LogRegistry};

/// Name of the bucket column added to `arrow` output.
pub const BUCKET_COLUMN: &str = "_bucket";
/// Name of the offset column added to `arrow` output.
pub const OFFSET_COLUMN: &str = "_offset";
/// Rows are flushed to the output in chunks of about this many bytes (jsonl).
const JSONL_FLUSH_BYTES: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A query parameter is malformed or unknown (HTTP 400).
    #[error("invalid scan parameter {name}: {reason}")]
    BadParameter { name: String, reason: String },
    #[error("bucket {bucket} does not exist (the table has {bucket_count} buckets)")]
    NoSuchBucket { bucket: u32, bucket_count: u32 },
    #[error("column {0} does not exist")]
    NoSuchColumn(String),
    #[error("column {column} is {found} in a segment but {expected} in the table schema")]
    SchemaMismatch {
        column: String,
        found: DataType,
        expected: DataType,
    },
    #[error("cannot encode type {0} as JSON")]
    UnsupportedType(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupt log segment {path}: {reason}")]
    CorruptSegment { path: PathBuf, reason: String },
    #[error("cannot write Arrow output: {0}")]
    Arrow(#[source] ArrowError),
    /// Writing to the client failed (it went away): stop quietly.
    #[error("cannot write scan output: {0}")]
    Output(#[source] std::io::Error),
}

impl ScanError {
    fn corrupt(path: &Path, err: ArrowError) -> Self {
        ScanError::CorruptSegment {
            path: path.to_path_buf(),
            reason: err.to_string(),
        }
    }

    /// The HTTP status to answer with: 400 bad parameter, 404 unknown bucket or column, 500
    /// storage trouble.
    pub fn http_status(&self) -> u16 {
        match self {
            ScanError::BadParameter { .. } => 400,
            ScanError::NoSuchBucket { .. } | ScanError::NoSuchColumn(_) => 404,
            _ => 500,
        }
    }

    /// A stable code for `{"error":{"code":...}}`.
    pub fn code(&self) -> &'static str {
        match self {
            ScanError::BadParameter { .. } => "BAD_SCAN_PARAMETER",
            ScanError::NoSuchBucket { .. } => "NO_SUCH_BUCKET",
            ScanError::NoSuchColumn(_) => "NO_SUCH_COLUMN",
            ScanError::UnsupportedType(_) => "UNSUPPORTED_TYPE",
            ScanError::CorruptSegment { .. } => "CORRUPT_SEGMENT",
            ScanError::Io { .. } | ScanError::Arrow(_) | ScanError::SchemaMismatch { .. } => "STORAGE_ERROR",
            ScanError::Output(_) => "OUTPUT_ERROR",
        }
    }

    /// True for errors caused by the request (answer 4xx), false for server-side ones (5xx).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            ScanError::BadParameter { .. } | ScanError::NoSuchBucket { .. } | ScanError::NoSuchColumn(_)
        )
    }
}

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
    /// order, empty values ignored). Unknown parameters are refused so typos do not go unseen.
    pub fn from_query(query: &str) -> Result<ScanParams, ScanError> {
        let mut params = ScanParams::default();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = percent_decode(raw_name, "parameter name")?;
            let value = percent_decode(raw_value, &name)?;
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
                    params.columns = Some(value.split(',').map(|c| c.trim().to_string()).collect());
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

fn percent_decode(text: &str, what: &str) -> Result<String, ScanError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(index + 1..index + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| ScanError::BadParameter {
                        name: what.to_string(),
                        reason: "bad percent-encoding".to_string(),
                    })?;
                out.push(hex);
                index += 2;
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8(out).map_err(|_| ScanError::BadParameter {
        name: what.to_string(),
        reason: "not UTF-8".to_string(),
    })
}

/// Which table to read: resolved by the admin server from the catalog.
#[derive(Debug, Clone)]
pub struct ScanTarget {
    pub table_id: u64,
    /// `data.dir/<db>/<table>-<table_id>` (see [`crate::log::table_dir`]).
    pub table_dir: PathBuf,
    pub bucket_count: u32,
    /// The table's current Arrow schema (the converter's `arrow_schema`).
    pub schema: SchemaRef,
}

/// How many rows a scan wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSummary {
    pub rows: u64,
}

/// A scan whose parameters were checked against the table (bucket range, column names), so
/// the HTTP layer can answer 4xx before sending a 200 and streaming [`PreparedScan::run`].
#[derive(Debug, Clone)]
pub struct PreparedScan {
    target: ScanTarget,
    params: ScanParams,
    registry: Arc<LogRegistry>,
}

impl PreparedScan {
    /// Parses the raw query string and validates it against `target`.
    pub fn new(target: ScanTarget, query: &str, registry: Arc<LogRegistry>) -> Result<Self, ScanError> {
        let params = ScanParams::from_query(query)?;
        check_bucket(&target, params.bucket)?;
        Projection::new(&target.schema, params.columns.as_deref())?;
        Ok(PreparedScan {
            target,
            params,
            registry,
        })
    }

    pub fn params(&self) -> &ScanParams {
        &self.params
    }

    pub fn content_type(&self) -> &'static str {
        self.params.format.content_type()
    }

    /// Streams the rows (may run on another thread: everything here is `Send`).
    pub fn run(self, out: &mut dyn Write) -> Result<ScanSummary, ScanError> {
        scan_table(&self.target, &self.params, &self.registry, out)
    }
}

fn check_bucket(target: &ScanTarget, bucket: Option<u32>) -> Result<(), ScanError> {
    match bucket {
        Some(bucket) if bucket >= target.bucket_count => Err(ScanError::NoSuchBucket {
            bucket,
            bucket_count: target.bucket_count,
        }),
        _ => Ok(()),
    }
}

/// Rows per bucket for a table description: the published stats of buckets a core opened,
/// the segment files of the others (`(bucket, rows)` for every bucket `0..bucket_count`).
pub fn row_counts(target: &ScanTarget, registry: &LogRegistry) -> Vec<(u32, u64)> {
    (0..target.bucket_count)
        .map(|bucket| {
            let rows = match registry.get(target.table_id, bucket) {
                Some(stats) => {
                    let next = stats.next_offset.load(std::sync::atomic::Ordering::Acquire);
                    let start = stats.log_start_offset.load(std::sync::atomic::Ordering::Acquire);
                    next.saturating_sub(start)
                }
                None => reader::on_disk_offsets(&bucket_dir(&target.table_dir, bucket))
                    .map(|offsets| offsets.rows())
                    .unwrap_or(0),
            };
            (bucket, rows)
        })
        .collect()
}

/// Streams the rows `params` selects to `out` in the requested format.
pub fn scan_table(
    target: &ScanTarget,
    params: &ScanParams,
    registry: &LogRegistry,
    out: &mut dyn Write,
) -> Result<ScanSummary, ScanError> {
    check_bucket(target, params.bucket)?;
    let buckets: Vec<u32> = match params.bucket {
        Some(bucket) => vec![bucket],
        None => (0..target.bucket_count).collect(),
    };
    let projection = Projection::new(&target.schema, params.columns.as_deref())?;
    let mut sink: Box<dyn RowSink + '_> = match params.format {
        ScanFormat::Jsonl => Box::new(JsonlSink {
            out,
            fields: projection.fields.clone(),
            buffer: Vec::with_capacity(JSONL_FLUSH_BYTES + 4096),
        }),
        ScanFormat::Arrow => Box::new(ArrowSink::new(out, &projection)?),
    };
    let mut remaining = params.limit.unwrap_or(u64::MAX);
    let mut rows = 0u64;
    for bucket in buckets {
        if remaining == 0 {
            break;
        }
        let dir = bucket_dir(&target.table_dir, bucket);
        let high_watermark = registry.high_watermark(target.table_id, bucket);
        reader::read_bucket(&dir, params.from, high_watermark, &mut |read| {
            let take = remaining.min(read.batch.num_rows() as u64);
            let batch = read.batch.slice(0, take as usize);
            let columns = projection.apply(&batch)?;
            sink.write(bucket, read.first_offset, &columns, take as usize)?;
            remaining -= take;
            rows += take;
            Ok(remaining > 0)
        })?;
    }
    sink.finish()?;
    Ok(ScanSummary { rows })
}

/// The selected table columns, looked up by name in each segment batch (segments written
/// before a schema change may lack a column: it reads as null).
struct Projection {
    fields: Vec<Arc<Field>>,
}

impl Projection {
    fn new(schema: &SchemaRef, columns: Option<&[String]>) -> Result<Projection, ScanError> {
        let fields = match columns {
            None => schema.fields().iter().cloned().collect(),
            Some(names) => names
                .iter()
                .map(|name| {
                    schema
                        .field_with_name(name)
                        .map(|field| Arc::new(field.clone()))
                        .map_err(|_| ScanError::NoSuchColumn(name.clone()))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Projection { fields })
    }

    fn apply(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, ScanError> {
        let schema = batch.schema();
        self.fields
            .iter()
            .map(|field| match schema.index_of(field.name()) {
                Ok(index) => {
                    let column = batch.column(index);
                    if !types_match(column.data_type(), field.data_type()) {
                        return Err(ScanError::SchemaMismatch {
                            column: field.name().clone(),
                            found: column.data_type().clone(),
                            expected: field.data_type().clone(),
                        });
                    }
                    Ok(column.clone())
                }
                Err(_) => Ok(new_null_array(field.data_type(), batch.num_rows())),
            })
            .collect()
    }
}

/// Equal types, ignoring nested field nullability and metadata (only the arrow output cares,
/// and it declares the table's types).
fn types_match(found: &DataType, expected: &DataType) -> bool {
    found == expected || found.equals_datatype(expected)
}

trait RowSink {
    fn write(
        &mut self,
        bucket: u32,
        first_offset: u64,
        columns: &[ArrayRef],
        rows: usize,
    ) -> Result<(), ScanError>;
    fn finish(&mut self) -> Result<(), ScanError>;
}

struct JsonlSink<'a> {
    out: &'a mut dyn Write,
    fields: Vec<Arc<Field>>,
    buffer: Vec<u8>,
}

impl RowSink for JsonlSink<'_> {
    fn write(
        &mut self,
        bucket: u32,
        first_offset: u64,
        columns: &[ArrayRef],
        rows: usize,
    ) -> Result<(), ScanError> {
        for row in 0..rows {
            write!(
                self.buffer,
                "{{\"bucket\":{bucket},\"offset\":{},\"row\":",
                first_offset + row as u64
            )
            .expect("writing into a Vec cannot fail");
            json::write_columns(&mut self.buffer, &self.fields, columns, row)?;
            self.buffer.extend_from_slice(b"}\n");
            if self.buffer.len() >= JSONL_FLUSH_BYTES {
                self.out.write_all(&self.buffer).map_err(ScanError::Output)?;
                self.buffer.clear();
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), ScanError> {
        self.out.write_all(&self.buffer).map_err(ScanError::Output)?;
        self.buffer.clear();
        self.out.flush().map_err(ScanError::Output)
    }
}

struct ArrowSink<'a> {
    writer: StreamWriter<&'a mut dyn Write>,
    schema: SchemaRef,
}

impl<'a> ArrowSink<'a> {
    fn new(out: &'a mut dyn Write, projection: &Projection) -> Result<Self, ScanError> {
        let mut fields = vec![
            Arc::new(Field::new(BUCKET_COLUMN, DataType::Int32, false)),
            Arc::new(Field::new(OFFSET_COLUMN, DataType::Int64, false)),
        ];
        fields.extend(projection.fields.iter().cloned());
        let schema = Arc::new(Schema::new(fields));
        let writer = StreamWriter::try_new(out, &schema).map_err(ScanError::Arrow)?;
        Ok(ArrowSink { writer, schema })
    }
}

impl RowSink for ArrowSink<'_> {
    fn write(
        &mut self,
        bucket: u32,
        first_offset: u64,
        columns: &[ArrayRef],
        rows: usize,
    ) -> Result<(), ScanError> {
        let bucket = i32::try_from(bucket).unwrap_or(i32::MAX);
        let mut all: Vec<ArrayRef> = Vec::with_capacity(columns.len() + 2);
        all.push(Arc::new(Int32Array::from(vec![bucket; rows])));
        all.push(Arc::new(Int64Array::from_iter_values(
            (0..rows as u64).map(|row| (first_offset + row) as i64),
        )));
        all.extend(columns.iter().cloned());
        let batch = RecordBatch::try_new(self.schema.clone(), all).map_err(ScanError::Arrow)?;
        self.writer.write(&batch).map_err(ScanError::Arrow)
    }

    fn finish(&mut self) -> Result<(), ScanError> {
        self.writer.finish().map_err(ScanError::Arrow)
    }
}
