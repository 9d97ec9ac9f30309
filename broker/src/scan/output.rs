//! Output of a scan: the column projection and the two formats (jsonl, Arrow IPC stream).

use std::io::Write;
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::{json, ScanError, BUCKET_COLUMN, OFFSET_COLUMN};

/// Rows are flushed to the output in chunks of about this many bytes (jsonl).
const JSONL_FLUSH_BYTES: usize = 64 << 10;

/// The selected table columns, looked up by name in each segment batch (segments written
/// before a schema change may lack a column: it reads as null).
pub(super) struct Projection {
    fields: Vec<Arc<Field>>,
}

impl Projection {
    pub(super) fn new(schema: &SchemaRef, columns: Option<&[String]>) -> Result<Projection, ScanError> {
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

    pub(super) fn apply(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, ScanError> {
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

pub(super) trait RowSink {
    fn write(
        &mut self,
        bucket: u32,
        first_offset: u64,
        columns: &[ArrayRef],
        rows: usize,
    ) -> Result<(), ScanError>;
    fn finish(&mut self) -> Result<(), ScanError>;
    /// After rows were written, the scan failed: say so in the output where the format can
    /// (the HTTP body is then cut short too, so no client mistakes it for a complete answer).
    fn fail(&mut self, _error: &ScanError) {}
}

pub(super) struct JsonlSink<'a> {
    out: &'a mut dyn Write,
    fields: Vec<Arc<Field>>,
    buffer: Vec<u8>,
}

impl<'a> JsonlSink<'a> {
    pub(super) fn new(out: &'a mut dyn Write, projection: &Projection) -> Self {
        JsonlSink {
            out,
            fields: projection.fields.clone(),
            buffer: Vec::with_capacity(JSONL_FLUSH_BYTES + 4096),
        }
    }
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

    /// A last line `{"error":{"code":..,"message":..}}` (never a row: rows have `bucket`).
    /// The rows still buffered go first; the client may be gone, so errors are ignored.
    fn fail(&mut self, error: &ScanError) {
        let line = serde_json::json!({"error": {"code": error.code(), "message": error.to_string()}});
        let _ = writeln!(self.buffer, "{line}");
        let _ = self.out.write_all(&self.buffer);
        self.buffer.clear();
        let _ = self.out.flush();
    }

    fn finish(&mut self) -> Result<(), ScanError> {
        self.out.write_all(&self.buffer).map_err(ScanError::Output)?;
        self.buffer.clear();
        self.out.flush().map_err(ScanError::Output)
    }
}

pub(super) struct ArrowSink<'a> {
    writer: StreamWriter<&'a mut dyn Write>,
    schema: SchemaRef,
}

impl<'a> ArrowSink<'a> {
    pub(super) fn new(out: &'a mut dyn Write, projection: &Projection) -> Result<Self, ScanError> {
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
