//! Record contents: value generators (random bytes, text, flat JSON, nested JSON), keys and
//! headers, and the Fluss table each value kind maps into (`table-sql` prints it).
//!
//! Values are made once into a small pool and reused, so that the generator costs nothing while
//! the broker is measured; a deterministic PRNG keeps runs reproducible.

use std::fmt::Write as _;

/// What record values look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ValueKind {
    /// Random bytes (table: `_kafka_value BYTES`, binary conversion).
    Random,
    /// Printable ASCII words (table: `_kafka_value STRING`, string conversion).
    Text,
    /// A flat JSON object `{"id","name","amount","active","note"}` (flat layout).
    JsonFlat,
    /// A nested JSON object `{"id","user":{"name","tags":[..]},"amount","note"}` (nested layout).
    JsonNested,
}

impl ValueKind {
    /// The option spelling.
    pub fn name(self) -> &'static str {
        match self {
            ValueKind::Random => "random",
            ValueKind::Text => "text",
            ValueKind::JsonFlat => "json-flat",
            ValueKind::JsonNested => "json-nested",
        }
    }
}

/// Seed of every run's values ("kafluss" in ASCII): every run sends the same bytes.
pub const DEFAULT_SEED: u64 = 0x006b_6166_6c75_7373;

/// SplitMix64: tiny, fast, good enough to make payloads incompressible.
#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `len` random lower-case letters and spaces (valid in JSON strings and UTF-8 text).
    pub fn text(&mut self, len: usize) -> String {
        const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz  eaio";
        (0..len)
            .map(|_| ALPHABET[(self.next_u64() % 32) as usize] as char)
            .collect()
    }
}

/// Makes one value of `size` bytes for record number `n`; a JSON value is never below its
/// skeleton ([`smallest_value_size`] says from which size every value is exactly `size`).
pub fn make_value(kind: ValueKind, size: usize, n: u64, rng: &mut Prng) -> Vec<u8> {
    match kind {
        ValueKind::Random => rng.bytes(size),
        ValueKind::Text => rng.text(size).into_bytes(),
        ValueKind::JsonFlat | ValueKind::JsonNested => {
            let parts = [rng.next_u64(), rng.next_u64(), rng.next_u64()];
            let mut json = json_skeleton(kind, n, parts);
            pad_json_note(&mut json, size, rng);
            json.into_bytes()
        }
    }
}

/// The JSON object of record `n` up to its open `"note":"` string, its other fields taken from
/// the random `parts`.
fn json_skeleton(kind: ValueKind, n: u64, [a, b, c]: [u64; 3]) -> String {
    if kind == ValueKind::JsonNested {
        format!(
            r#"{{"id":{n},"user":{{"name":"user-{}","tags":["t{}","t{}"]}},"amount":{}.5,"note":""#,
            n % 10_000,
            a % 10,
            b % 10,
            c % 100_000
        )
    } else {
        format!(
            r#"{{"id":{n},"name":"user-{}","amount":{}.{:02},"active":{},"note":""#,
            n % 10_000,
            a % 100_000,
            b % 100,
            n.is_multiple_of(2)
        )
    }
}

/// The smallest `--message-size` at which each of `count` values of `kind` (records 0 to
/// `count - 1`) is exactly that size: 0 for random bytes and text; for JSON the longest
/// skeleton with its closing `"}` (a smaller size gets values longer than asked).
pub fn smallest_value_size(kind: ValueKind, count: u64) -> usize {
    if matches!(kind, ValueKind::Random | ValueKind::Text) || count == 0 {
        return 0;
    }
    let last = count - 1;
    // A skeleton's length depends on the id's digits, on those of `id % 10000` and on the id
    // being odd (`false`): the last 10,001 ids hold every remainder and parity of the longest
    // ids, and 9, 99, 999, ... are the longest of the shorter ones. The random fields are
    // taken at their widest.
    let shorter = (1..20)
        .map(|digits| 10u64.pow(digits) - 1)
        .take_while(|n| *n <= last);
    (last.saturating_sub(10_000)..=last)
        .chain(shorter)
        .map(|n| json_skeleton(kind, n, [u64::MAX; 3]).len())
        .max()
        .unwrap_or(0)
        + CLOSING.len()
}

/// What closes the `note` string and the object.
const CLOSING: &str = "\"}";

/// Fills the open `"note":"` string so the closed object is `size` bytes when possible.
fn pad_json_note(json: &mut String, size: usize, rng: &mut Prng) {
    let pad = size.saturating_sub(json.len() + CLOSING.len());
    json.push_str(&rng.text(pad));
    json.push_str(CLOSING);
}

/// The record contents a workload cycles through.
#[derive(Debug, Clone)]
pub struct RecordPool {
    /// Values, used round robin.
    pub values: Vec<Vec<u8>>,
    /// Keys (empty when records have no key).
    pub keys: Vec<Vec<u8>>,
    /// Header (name, value) pairs put on every record.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
}

impl RecordPool {
    /// `count` distinct values of `kind` and `value_size` bytes, keys of `key_size` bytes (none
    /// when 0) and `header_count` headers of 8-byte values.
    pub fn new(
        kind: ValueKind,
        value_size: usize,
        key_size: usize,
        header_count: usize,
        count: usize,
        seed: u64,
    ) -> Self {
        let mut rng = Prng::new(seed);
        let count = count.max(1);
        let values = (0..count as u64)
            .map(|n| make_value(kind, value_size, n, &mut rng))
            .collect();
        let keys = if key_size == 0 {
            Vec::new()
        } else {
            (0..count).map(|_| rng.text(key_size).into_bytes()).collect()
        };
        let headers = (0..header_count)
            .map(|i| (format!("h{i}").into_bytes(), rng.text(8).into_bytes()))
            .collect();
        Self {
            values,
            keys,
            headers,
        }
    }

    /// Payload bytes of record `n` (key + value + header names and values), the "MB" of MB/s.
    pub fn payload_len(&self, n: usize) -> usize {
        let value = self.values[n % self.values.len()].len();
        let key = self.keys.get(n % self.keys.len().max(1)).map_or(0, Vec::len);
        let headers: usize = self.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        value + key + headers
    }
}

/// Most buckets a kafluss table may have (`bucket.num`, and so `table-sql --partitions`): the
/// broker's bound (`kafluss_broker::catalog::validate::MAX_BUCKETS`; the harness does not
/// depend on the broker).
pub const MAX_PARTITIONS: u32 = 1024;

/// The `CREATE TABLE` statement for a table that accepts the records the harness sends with these
/// options (`table` may be `db.table`).
pub fn table_sql(
    table: &str,
    kind: ValueKind,
    partitions: u32,
    with_key: bool,
    with_headers: bool,
) -> String {
    let mut columns: Vec<&str> = match kind {
        ValueKind::Random => vec!["_kafka_value BYTES"],
        ValueKind::Text => vec!["_kafka_value STRING"],
        ValueKind::JsonFlat => vec!["id BIGINT", "name STRING", "amount DOUBLE", "active BOOLEAN", "note STRING"],
        ValueKind::JsonNested => vec![
            "_kafka_value ROW<id BIGINT, user ROW<name STRING, tags ARRAY<STRING>>, amount DOUBLE, note STRING>",
        ],
    };
    if with_key {
        columns.push("_kafka_key BYTES");
    }
    if with_headers {
        columns.push("_kafka_headers MAP<STRING, BYTES>");
    }
    let conversion = match kind {
        ValueKind::Random => ", 'table.kafka.convert.value.type' = 'binary'",
        ValueKind::Text => ", 'table.kafka.convert.value.type' = 'string'",
        ValueKind::JsonFlat => "",
        ValueKind::JsonNested => ", 'table.kafka.convert.value.layout' = 'nested'",
    };
    let mut sql = format!("CREATE TABLE IF NOT EXISTS {table} (");
    for (i, column) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(column);
    }
    let _ = write!(
        sql,
        ") WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '{partitions}'{conversion})"
    );
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_are_valid_objects_of_the_asked_size() {
        let mut rng = Prng::new(7);
        for kind in [ValueKind::JsonFlat, ValueKind::JsonNested] {
            let value = make_value(kind, 100, 42, &mut rng);
            assert_eq!(value.len(), 100, "{}", String::from_utf8_lossy(&value));
            let parsed: serde_json::Value = serde_json::from_slice(&value).unwrap();
            assert!(parsed.is_object());
            assert_eq!(parsed.pointer("/id").and_then(|v| v.as_u64()), Some(42));
        }
    }

    #[test]
    fn from_the_smallest_size_on_every_json_value_is_exact() {
        assert_eq!(smallest_value_size(ValueKind::Random, 1000), 0);
        assert_eq!(smallest_value_size(ValueKind::Text, 1000), 0);
        for kind in [ValueKind::JsonFlat, ValueKind::JsonNested] {
            for count in [1, 2, 10, 1024, 10_001, 23_456] {
                let smallest = smallest_value_size(kind, count);
                let mut rng = Prng::new(5);
                let lengths: Vec<usize> = (0..count)
                    .map(|n| make_value(kind, smallest, n, &mut rng).len())
                    .collect();
                assert!(
                    lengths.iter().all(|len| *len == smallest),
                    "{kind:?} x{count} at {smallest}"
                );
                if count < 1024 {
                    // Few values may all draw short random fields: the bound is for any draw.
                    continue;
                }
                // One byte less: some value comes out longer than asked.
                let mut rng = Prng::new(5);
                assert!(
                    (0..count).any(|n| make_value(kind, smallest - 1, n, &mut rng).len() > smallest - 1),
                    "{kind:?} x{count} at {}",
                    smallest - 1
                );
            }
        }
        assert_eq!(smallest_value_size(ValueKind::JsonFlat, 1024), 73);
    }

    #[test]
    fn small_json_sizes_keep_the_skeleton() {
        let value = make_value(ValueKind::JsonFlat, 10, 1, &mut Prng::new(1));
        assert!(value.len() > 10);
        serde_json::from_slice::<serde_json::Value>(&value).unwrap();
    }

    #[test]
    fn random_and_text_values_have_exact_sizes() {
        let mut rng = Prng::new(3);
        assert_eq!(make_value(ValueKind::Random, 1024, 0, &mut rng).len(), 1024);
        let text = make_value(ValueKind::Text, 33, 0, &mut rng);
        assert_eq!(text.len(), 33);
        assert!(std::str::from_utf8(&text).is_ok());
    }

    #[test]
    fn pool_payload_counts_key_value_and_headers() {
        let pool = RecordPool::new(ValueKind::Random, 100, 8, 2, 4, 1);
        assert_eq!(pool.payload_len(5), 100 + 8 + 2 * (2 + 8));
        let bare = RecordPool::new(ValueKind::Random, 100, 0, 0, 4, 1);
        assert_eq!(bare.payload_len(0), 100);
    }

    #[test]
    fn table_sql_declares_the_columns_the_options_need() {
        let sql = table_sql("fluss.t", ValueKind::JsonNested, 2, true, true);
        assert!(sql.starts_with("CREATE TABLE IF NOT EXISTS fluss.t (_kafka_value ROW<"));
        assert!(sql.contains("_kafka_key BYTES, _kafka_headers MAP<STRING, BYTES>"));
        assert!(sql.contains("'bucket.num' = '2'"));
        assert!(sql.contains("'table.kafka.convert.value.layout' = 'nested'"));
        let flat = table_sql("t", ValueKind::JsonFlat, 1, false, false);
        assert!(!flat.contains("_kafka"));
        assert!(!flat.contains("convert"));
    }
}
