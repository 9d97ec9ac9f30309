//! Server configuration: `server.yaml` (flat `key: value` lines) plus `-D key=value` overrides.
//!
//! Every key is listed in [`KEYS`] with its default; docs/configuration.md documents the same
//! list. An unknown key or a value that does not parse is a start-up error naming the key, so a
//! typo never silently falls back to a default.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::admin::{AdminLimits, MAX_HEADER_BYTES, MIN_HEADER_BYTES};
use crate::catalog::validate::MAX_BUCKETS;
use crate::log::FlushPolicy;

/// What `serve` uses when no file is given (interface.md "Two commands").
pub const EMBEDDED_DEFAULT: &str = "\
# kafluss embedded default configuration
data.dir: ./data
bind.listeners: FLUSS://localhost:9123,KAFKA://localhost:9092
kafka.enabled: true
kafka.listener.names: KAFKA
kafka.default.database: fluss
";

/// Every accepted key with its default (`None` = no default, the key is optional).
pub const KEYS: &[(&str, Option<&str>)] = &[
    (
        "bind.listeners",
        Some("FLUSS://localhost:9123,KAFKA://localhost:9092"),
    ),
    ("advertised.listeners", None),
    ("data.dir", Some("./data")),
    ("catalog.max-size", Some("512mb")),
    ("kafka.enabled", Some("true")),
    ("kafka.listener.names", Some("KAFKA")),
    ("kafka.default.database", Some("fluss")),
    ("security.protocol.map", Some("")),
    ("security.sasl.enabled.mechanisms", Some("PLAIN")),
    ("security.sasl.plain.credentials", Some("")),
    ("authorizer.enabled", Some("false")),
    ("super.users", Some("")),
    ("security.login.failure-delay", Some("100ms")),
    ("security.login.max-failure-delay", Some("10s")),
    ("security.login.max-tracked", Some("10000")),
    ("default.bucket.number", Some("1")),
    ("kafka.connection.max-idle-time", Some("10m")),
    ("kafka.shutdown-timeout", Some("5s")),
    ("kafka.max-request-size", Some("100mb")),
    ("kafka.max-record-size", Some("1mb")),
    ("kafka.max-other-request-size", Some("1mb")),
    ("kafka.max-request-partitions", Some("100000")),
    ("kafka.max-connections", Some("10000")),
    ("kafka.connection.max-inflight-requests", Some("32")),
    ("kafka.connection.move-after", Some("8")),
    ("kafka.max-request-memory", Some("256mb")),
    ("kafka.max-request-memory-per-address", None),
    ("kafka.max-answer-memory", Some("128mb")),
    ("kafka.max-append-memory", Some("512mb")),
    ("kafka.producer.id.expiration", Some("1d")),
    ("kafka.producer.max-per-bucket", Some("1000")),
    ("server.cores", None),
    ("log.flush.policy", Some("ack")),
    ("log.segment.size", Some("256mb")),
    ("log.writeback.size", Some("1mb")),
    ("log.preallocate.size", Some("8mb")),
    ("log.prewrite.size", Some("1mb")),
    ("log.inline-write.size", Some("1mb")),
    ("log.unsynced.size", Some("256mb")),
    ("table.log.ttl", Some("7d")),
    ("log.retention.check-interval", Some("5min")),
    ("admin.max-request-size", Some("16mb")),
    ("admin.max-header-size", Some("64kb")),
    ("admin.max-connections", Some("64")),
    ("admin.max-connections-per-address", None),
    ("admin.max-concurrent-requests", Some("8")),
    ("admin.max-concurrent-scans", Some("4")),
    ("admin.queue-timeout", Some("10s")),
    ("admin.header-timeout", Some("10s")),
    ("admin.body-timeout", Some("30s")),
    ("admin.write-timeout", Some("30s")),
    ("admin.shutdown-timeout", Some("5s")),
    ("server.log-repeat-interval", Some("10s")),
    ("server.log-repeat-keys", Some("1024")),
    ("server.stall-threshold", Some("10ms")),
    ("server.spin-before-park", Some("0ms")),
    ("admin.max-sql-statements", Some("1000")),
];

/// Highest accepted `admin.max-sql-statements`.
pub const MAX_SQL_STATEMENTS_LIMIT: u64 = 1_000_000;

/// A start-up configuration error; every variant names the key or line at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("config line {line}: expected `key: value`, got {text:?}")]
    Syntax { line: usize, text: String },
    #[error("config key {key:?} is given twice (line {line})")]
    Duplicate { key: String, line: usize },
    #[error("unknown config key {key:?}")]
    UnknownKey { key: String },
    #[error("-D expects key=value, got {0:?}")]
    BadOverride(String),
    #[error("config key {key:?}: invalid value {value:?}: {reason}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
    },
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// One `NAME://host:port` entry of `bind.listeners` / `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Listener {
    /// The first address `host:port` resolves to (bind target).
    pub fn socket_addr(&self) -> std::io::Result<SocketAddr> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        (host, self.port).to_socket_addrs()?.next().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} resolves to no address", self.host),
            )
        })
    }
}

/// The parsed, validated configuration. Security strings are kept raw here and validated by
/// `kafluss-auth` at start-up (it owns their grammar).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub bind_listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub data_dir: PathBuf,
    /// `catalog.max-size`: the largest `catalog.json` a change may write and start-up reads.
    pub catalog_max_size: u64,
    pub kafka_enabled: bool,
    pub kafka_listener_names: Vec<String>,
    pub kafka_default_database: String,
    pub security_protocol_map: String,
    pub sasl_enabled_mechanisms: String,
    pub sasl_plain_credentials: String,
    pub authorizer_enabled: bool,
    pub super_users: String,
    /// `security.login.*`: how failed logins slow the next attempts.
    pub login_throttle: kafluss_auth::ThrottleConfig,
    pub default_bucket_number: u32,
    pub connection_max_idle_time: Duration,
    /// `kafka.shutdown-timeout`: how long shutdown waits for Kafka connections to write the
    /// answers to the requests they read before it closes those still writing.
    pub kafka_shutdown_timeout: Duration,
    pub max_request_size: usize,
    pub max_record_size: usize,
    /// `kafka.max-other-request-size`: the largest frame of a request other than Produce.
    pub max_other_request_size: usize,
    /// `kafka.max-request-partitions`: topics and partitions one Produce request may name.
    pub max_request_partitions: usize,
    pub max_connections: usize,
    pub max_inflight_requests: usize,
    /// `kafka.connection.move-after`: produce requests in a row that append only on one other
    /// core before a connection moves to that core (0: never).
    pub connection_move_after: u32,
    /// Bytes of Kafka requests one core holds at once (being read or being answered).
    pub max_request_memory: usize,
    /// `kafka.max-request-memory-per-address`: bytes of request frames that the connections of
    /// one client address hold at once on one core.
    pub max_request_memory_per_address: usize,
    /// `kafka.max-answer-memory`: bytes one core holds, beyond request frames, for requests
    /// from their decoding until their answer is written.
    pub max_answer_memory: usize,
    /// `kafka.max-append-memory`: bytes one core holds for the partitions it appends, from
    /// their decoding until their rows are stored (beyond the frames they come in).
    pub max_append_memory: usize,
    /// `kafka.producer.id.expiration`: an idempotent producer's state in a bucket is dropped
    /// this long after its last append there.
    pub producer_id_expiration: Duration,
    /// `kafka.producer.max-per-bucket`: idempotent producers whose state a bucket keeps.
    pub producer_max_per_bucket: usize,
    pub cores: usize,
    pub flush_policy: FlushPolicy,
    pub segment_size: u64,
    /// `log.writeback.size`: every this many bytes appended to a segment, its new bytes are
    /// handed to the kernel's writeback and the clean pages before them dropped (0: never).
    pub writeback_size: u64,
    /// `log.preallocate.size`: the most bytes of blocks a segment keeps allocated past its end
    /// (0: none).
    pub preallocate_size: u64,
    /// `log.prewrite.size`: while acks=-1 appends wait for a bucket's fsyncs, the most bytes of
    /// zeros its segment keeps written and synced past its end (0: none).
    pub prewrite_size: u64,
    /// `log.inline-write.size`: segment writes of at most this many bytes are a `pwrite` on the
    /// core instead of an io_uring request (0: none).
    pub inline_write_size: u64,
    /// `log.unsynced.size`: the most bytes of a bucket appended and not yet fsync'd before
    /// acks=1 answers wait for the write-behind fsyncs in flight (0: they never wait).
    pub unsynced_size: u64,
    pub log_ttl: Duration,
    pub retention_check_interval: Duration,
    pub admin_max_request_size: usize,
    /// The other `admin.*` limits of the admin HTTP listener.
    pub admin_limits: AdminLimits,
    /// Shortest time between two log lines of the same (table, reason) on one core.
    pub log_repeat_interval: Duration,
    /// (table, reason) keys each core's log rate limiter remembers.
    pub log_repeat_keys: usize,
    /// `admin.max-sql-statements`: statements one `POST /v1/sql` may hold.
    pub admin_max_sql_statements: usize,
    /// `server.stall-threshold`: a task queue run longer than this is logged (0: not watched).
    pub stall_threshold: Duration,
    /// `server.spin-before-park`: how long an idle core polls before it sleeps (0: sleeps at once).
    pub spin_before_park: Duration,
}

/// Raw `key → value` pairs, after file and overrides are merged.
pub type RawConfig = BTreeMap<String, String>;

impl ServerConfig {
    /// Loads `file` (or the embedded default) and applies `-D key=value` overrides.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let text = match file {
            Some(path) => std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?,
            None => EMBEDDED_DEFAULT.to_string(),
        };
        let mut raw = parse_yaml(&text)?;
        for entry in overrides {
            let (key, value) = entry
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(entry.clone()))?;
            raw.insert(key.trim().to_string(), unquote(value.trim()).to_string());
        }
        Self::from_raw(&raw)
    }

    /// Makes every path key absolute, against the current working directory (`data.dir` is the
    /// only path key). `serve` calls this once at start-up, before anything opens a file.
    pub fn resolve_paths(&mut self) -> std::io::Result<()> {
        self.data_dir = std::path::absolute(&self.data_dir)?;
        Ok(())
    }

    /// Validates raw pairs: unknown keys and bad values are errors naming the key.
    pub fn from_raw(raw: &RawConfig) -> Result<Self, ConfigError> {
        if let Some(key) = raw.keys().find(|k| !KEYS.iter().any(|(known, _)| known == k)) {
            return Err(ConfigError::UnknownKey { key: key.clone() });
        }
        let get = |key: &str| -> Option<&str> {
            raw.get(key).map(String::as_str).or_else(|| {
                KEYS.iter()
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, default)| *default)
            })
        };
        let req = |key: &str| get(key).unwrap_or_default();

        let bind_listeners = parse_listeners("bind.listeners", req("bind.listeners"))?;
        if bind_listeners.is_empty() {
            return Err(invalid("bind.listeners", "", "at least one listener is needed"));
        }
        let advertised_listeners = match get("advertised.listeners") {
            Some(v) if !v.trim().is_empty() => parse_listeners("advertised.listeners", v)?,
            _ => bind_listeners.clone(),
        };
        let kafka_listener_names: Vec<String> = split_list(req("kafka.listener.names"))
            .map(str::to_string)
            .collect();
        let kafka_enabled = parse_bool("kafka.enabled", req("kafka.enabled"))?;
        if kafka_enabled {
            if kafka_listener_names.is_empty() {
                return Err(invalid(
                    "kafka.listener.names",
                    "",
                    "kafka.enabled is true but no Kafka listener is named",
                ));
            }
            for name in &kafka_listener_names {
                if !bind_listeners.iter().any(|l| &l.name == name) {
                    return Err(invalid(
                        "kafka.listener.names",
                        name,
                        "no listener of that name in bind.listeners",
                    ));
                }
            }
        }
        if req("data.dir").trim().is_empty() {
            return Err(invalid("data.dir", req("data.dir"), "must not be empty"));
        }
        check_listeners_served(
            req("bind.listeners"),
            &bind_listeners,
            &advertised_listeners,
            &kafka_listener_names,
        )?;
        let default_db = req("kafka.default.database").to_string();
        if default_db.is_empty() {
            return Err(invalid("kafka.default.database", "", "must not be empty"));
        }
        let cores = match get("server.cores") {
            Some(v) => {
                let n = parse_count("server.cores", v, 1024)?;
                if n == 0 || n > 1024 {
                    return Err(invalid("server.cores", v, "must be between 1 and 1024"));
                }
                n as usize
            }
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let bucket_number = parse_count(
            "default.bucket.number",
            req("default.bucket.number"),
            u64::from(MAX_BUCKETS),
        )?;
        if bucket_number == 0 || bucket_number > u64::from(MAX_BUCKETS) {
            return Err(invalid(
                "default.bucket.number",
                req("default.bucket.number"),
                format!("must be between 1 and {MAX_BUCKETS}"),
            ));
        }
        let flush_policy = FlushPolicy::parse(req("log.flush.policy")).ok_or_else(|| {
            invalid(
                "log.flush.policy",
                req("log.flush.policy"),
                "expected ack, always or never",
            )
        })?;
        let positive_size = |key: &str| -> Result<u64, ConfigError> {
            let n = parse_size(key, req(key))?;
            if n == 0 {
                return Err(invalid(key, req(key), "must be positive"));
            }
            Ok(n)
        };
        let positive_duration = |key: &str| -> Result<Duration, ConfigError> {
            let d = parse_duration(key, req(key))?;
            if d.is_zero() {
                return Err(invalid(key, req(key), "must be positive"));
            }
            Ok(d)
        };
        let max_request_size = positive_size("kafka.max-request-size")?;
        if max_request_size > i32::MAX as u64 {
            return Err(invalid(
                "kafka.max-request-size",
                req("kafka.max-request-size"),
                "must be below 2gb (Kafka frame sizes are i32)",
            ));
        }
        let max_inflight = parse_count(
            "kafka.connection.max-inflight-requests",
            req("kafka.connection.max-inflight-requests"),
            1024,
        )?;
        if max_inflight == 0 || max_inflight > 1024 {
            return Err(invalid(
                "kafka.connection.max-inflight-requests",
                req("kafka.connection.max-inflight-requests"),
                "must be between 1 and 1024",
            ));
        }
        let move_after = parse_count(
            "kafka.connection.move-after",
            req("kafka.connection.move-after"),
            1_000_000,
        )?;
        if move_after > 1_000_000 {
            return Err(invalid(
                "kafka.connection.move-after",
                req("kafka.connection.move-after"),
                "must be between 0 (never) and 1000000",
            ));
        }
        let max_request_memory = positive_size("kafka.max-request-memory")?;
        if max_request_memory < max_request_size + 4 {
            return Err(invalid(
                "kafka.max-request-memory",
                req("kafka.max-request-memory"),
                format!(
                    "must hold at least one request of kafka.max-request-size with its 4-byte size prefix: {} bytes or more",
                    max_request_size + 4
                ),
            ));
        }
        let per_address = "kafka.max-request-memory-per-address";
        let max_request_memory_per_address = match get(per_address) {
            Some(value) => {
                let n = parse_size(per_address, value)?;
                if n < max_request_size + 4 || n > max_request_memory {
                    return Err(invalid(
                        per_address,
                        value,
                        format!(
                            "must hold at least one request of kafka.max-request-size with its 4-byte size prefix ({} bytes) and at most kafka.max-request-memory ({max_request_memory} bytes)",
                            max_request_size + 4
                        ),
                    ));
                }
                n
            }
            None => max_request_size + 4,
        };
        let count = |key: &str, max: u64| -> Result<usize, ConfigError> {
            let n = parse_count(key, req(key), max)?;
            if n == 0 || n > max {
                return Err(invalid(key, req(key), format!("must be between 1 and {max}")));
            }
            Ok(n as usize)
        };
        let max_header_size = positive_size("admin.max-header-size")?;
        if max_header_size < MIN_HEADER_BYTES as u64 || max_header_size > MAX_HEADER_BYTES as u64 {
            return Err(invalid(
                "admin.max-header-size",
                req("admin.max-header-size"),
                "must be between 1kb and 256kb",
            ));
        }
        let max_connections = count("admin.max-connections", 100_000)?;
        // A quarter of the listener by default: one address cannot take all of it.
        let max_connections_per_address = match get("admin.max-connections-per-address") {
            Some(v) => {
                let n = parse_count("admin.max-connections-per-address", v, max_connections as u64)?;
                if n == 0 || n > max_connections as u64 {
                    return Err(invalid(
                        "admin.max-connections-per-address",
                        v,
                        format!("must be between 1 and admin.max-connections ({max_connections})"),
                    ));
                }
                n as usize
            }
            None => (max_connections / 4).max(1),
        };
        let admin_limits = AdminLimits {
            max_connections,
            max_connections_per_address,
            max_concurrent_requests: count("admin.max-concurrent-requests", 1024)?,
            max_concurrent_scans: count("admin.max-concurrent-scans", 1024)?,
            queue_timeout: positive_duration("admin.queue-timeout")?,
            header_timeout: positive_duration("admin.header-timeout")?,
            body_timeout: positive_duration("admin.body-timeout")?,
            write_timeout: positive_duration("admin.write-timeout")?,
            shutdown_timeout: positive_duration("admin.shutdown-timeout")?,
            max_header_bytes: max_header_size as usize,
        };
        let log_repeat_keys = parse_count("server.log-repeat-keys", req("server.log-repeat-keys"), 1 << 20)?;
        if log_repeat_keys == 0 || log_repeat_keys > 1 << 20 {
            return Err(invalid(
                "server.log-repeat-keys",
                req("server.log-repeat-keys"),
                "must be between 1 and 1048576",
            ));
        }
        let max_sql_statements = parse_count(
            "admin.max-sql-statements",
            req("admin.max-sql-statements"),
            MAX_SQL_STATEMENTS_LIMIT,
        )?;
        if max_sql_statements == 0 || max_sql_statements > MAX_SQL_STATEMENTS_LIMIT {
            return Err(invalid(
                "admin.max-sql-statements",
                req("admin.max-sql-statements"),
                format!("must be between 1 and {MAX_SQL_STATEMENTS_LIMIT}"),
            ));
        }
        Ok(ServerConfig {
            bind_listeners,
            advertised_listeners,
            data_dir: PathBuf::from(req("data.dir")),
            catalog_max_size: positive_size(crate::catalog::MAX_SIZE_KEY)?,
            kafka_enabled,
            kafka_listener_names,
            kafka_default_database: default_db,
            security_protocol_map: req("security.protocol.map").to_string(),
            sasl_enabled_mechanisms: req("security.sasl.enabled.mechanisms").to_string(),
            sasl_plain_credentials: req("security.sasl.plain.credentials").to_string(),
            authorizer_enabled: parse_bool("authorizer.enabled", req("authorizer.enabled"))?,
            super_users: req("super.users").to_string(),
            login_throttle: kafluss_auth::ThrottleConfig {
                failure_delay: parse_duration(
                    "security.login.failure-delay",
                    req("security.login.failure-delay"),
                )?,
                max_failure_delay: positive_duration("security.login.max-failure-delay")?,
                max_tracked: parse_number("security.login.max-tracked", req("security.login.max-tracked"))?
                    as usize,
            },
            default_bucket_number: bucket_number as u32,
            connection_max_idle_time: positive_duration("kafka.connection.max-idle-time")?,
            kafka_shutdown_timeout: positive_duration("kafka.shutdown-timeout")?,
            max_request_size: max_request_size as usize,
            max_record_size: positive_size("kafka.max-record-size")? as usize,
            max_other_request_size: positive_size("kafka.max-other-request-size")? as usize,
            max_request_partitions: count("kafka.max-request-partitions", 1 << 24)?,
            max_connections: parse_number("kafka.max-connections", req("kafka.max-connections"))? as usize,
            max_inflight_requests: max_inflight as usize,
            connection_move_after: move_after as u32,
            max_request_memory: max_request_memory as usize,
            max_request_memory_per_address: max_request_memory_per_address as usize,
            max_answer_memory: positive_size("kafka.max-answer-memory")? as usize,
            max_append_memory: positive_size("kafka.max-append-memory")? as usize,
            producer_id_expiration: positive_duration("kafka.producer.id.expiration")?,
            producer_max_per_bucket: count("kafka.producer.max-per-bucket", 1 << 20)?,
            cores,
            flush_policy,
            segment_size: positive_size("log.segment.size")?,
            writeback_size: parse_size("log.writeback.size", req("log.writeback.size"))?,
            preallocate_size: parse_size("log.preallocate.size", req("log.preallocate.size"))?,
            prewrite_size: parse_size("log.prewrite.size", req("log.prewrite.size"))?,
            inline_write_size: parse_size("log.inline-write.size", req("log.inline-write.size"))?,
            unsynced_size: parse_size("log.unsynced.size", req("log.unsynced.size"))?,
            log_ttl: positive_duration("table.log.ttl")?,
            retention_check_interval: positive_duration("log.retention.check-interval")?,
            admin_max_request_size: positive_size("admin.max-request-size")? as usize,
            admin_limits,
            log_repeat_interval: positive_duration("server.log-repeat-interval")?,
            log_repeat_keys: log_repeat_keys as usize,
            admin_max_sql_statements: max_sql_statements as usize,
            stall_threshold: parse_duration("server.stall-threshold", req("server.stall-threshold"))?,
            spin_before_park: parse_duration("server.spin-before-park", req("server.spin-before-park"))?,
        })
    }

    /// The bind listeners that serve Kafka (empty when Kafka is disabled).
    pub fn kafka_bind_listeners(&self) -> Vec<&Listener> {
        if !self.kafka_enabled {
            return Vec::new();
        }
        self.bind_listeners
            .iter()
            .filter(|l| self.kafka_listener_names.contains(&l.name))
            .collect()
    }

    /// The Fluss (admin HTTP) listener: the first bind listener not named in
    /// `kafka.listener.names` (whether Kafka is enabled or not). A loaded config has one.
    pub fn fluss_bind_listener(&self) -> Option<&Listener> {
        fluss_listener(&self.bind_listeners, &self.kafka_listener_names)
    }

    /// Where clients should connect for listener `name`: its advertised entry, else its bind
    /// entry (with `bound_port` when the bind port was 0).
    pub fn advertised(&self, name: &str) -> Option<&Listener> {
        self.advertised_listeners
            .iter()
            .find(|l| l.name == name)
            .or_else(|| self.bind_listeners.iter().find(|l| l.name == name))
    }
}

/// Parses flat YAML: `key: value` lines, `#` comments (whole line, or after whitespace outside
/// quotes), optional single or double quotes around the value.
pub fn parse_yaml(text: &str) -> Result<RawConfig, ConfigError> {
    let mut raw = RawConfig::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let content = strip_comment(line).trim();
        if content.is_empty() || content == "---" {
            continue;
        }
        let (key, value) = content.split_once(':').ok_or_else(|| ConfigError::Syntax {
            line: number,
            text: line.chars().take(120).collect(),
        })?;
        let key = unquote(key.trim());
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(ConfigError::Syntax {
                line: number,
                text: line.chars().take(120).collect(),
            });
        }
        if raw
            .insert(key.to_string(), unquote(value.trim()).to_string())
            .is_some()
        {
            return Err(ConfigError::Duplicate {
                key: key.to_string(),
                line: number,
            });
        }
    }
    Ok(raw)
}

/// Cuts a `#` comment that starts the line or follows whitespace, outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut previous_is_space = true;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && previous_is_space => return &line[..i],
            None => {}
        }
        previous_is_space = c.is_whitespace();
    }
    line
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn parse_listeners(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
    let mut listeners: Vec<Listener> = Vec::new();
    for entry in split_list(value) {
        let (name, address) = entry
            .split_once("://")
            .ok_or_else(|| invalid(key, entry, "expected NAME://host:port"))?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(invalid(key, entry, "listener name must be [A-Za-z0-9_-]+"));
        }
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| invalid(key, entry, "expected NAME://host:port"))?;
        if host.is_empty() {
            return Err(invalid(key, entry, "missing host"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| invalid(key, entry, "port must be a number 0-65535"))?;
        if listeners.iter().any(|l| l.name == name) {
            return Err(invalid(key, entry, "listener name used twice"));
        }
        listeners.push(Listener {
            name: name.to_string(),
            host: host.to_string(),
            port,
        });
    }
    Ok(listeners)
}

/// The first of `bind` not named in `kafka_names`: the Fluss (admin HTTP) listener.
fn fluss_listener<'a>(bind: &'a [Listener], kafka_names: &[String]) -> Option<&'a Listener> {
    bind.iter().find(|l| !kafka_names.contains(&l.name))
}

/// Every listener the config names can be served: `bind.listeners` holds one Fluss listener
/// (the first not in `kafka.listener.names`) and otherwise only Kafka listeners, and each
/// `advertised.listeners` entry names a bind listener. Anything else was silently never bound
/// (a third listener), left the server without its admin API (no Fluss listener), or told
/// clients of a listener that does not exist.
fn check_listeners_served(
    bind_value: &str,
    bind: &[Listener],
    advertised: &[Listener],
    kafka_names: &[String],
) -> Result<(), ConfigError> {
    let Some(fluss) = fluss_listener(bind, kafka_names) else {
        return Err(invalid(
            "bind.listeners",
            bind_value,
            "no Fluss listener: one listener not in kafka.listener.names must serve the admin HTTP API \
             (SQL, scan, metrics, /healthz), as FLUSS://localhost:9123",
        ));
    };
    if let Some(other) = bind
        .iter()
        .find(|l| l.name != fluss.name && !kafka_names.contains(&l.name))
    {
        return Err(invalid(
            "bind.listeners",
            bind_value,
            format!(
                "listener {} is neither the Fluss listener ({}, the first listener not in \
                 kafka.listener.names) nor in kafka.listener.names, so nothing would serve it",
                other.name, fluss.name
            ),
        ));
    }
    if let Some(unknown) = advertised.iter().find(|a| !bind.iter().any(|l| l.name == a.name)) {
        return Err(invalid(
            "advertised.listeners",
            &format!("{}://{}:{}", unknown.name, unknown.host, unknown.port),
            format!("listener {} is not in bind.listeners", unknown.name),
        ));
    }
    Ok(())
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "expected true or false")),
    }
}

/// A count of a key without a bound of its own (at most `u64::MAX`).
fn parse_number(key: &str, value: &str) -> Result<u64, ConfigError> {
    parse_count(key, value, u64::MAX)
}

/// A count of a key whose values go up to `max`: digits only (`u64::from_str` would also take
/// a leading `+`, which sizes and durations refuse). Digits too many for 64 bits are refused
/// as too large, naming `max`; the caller checks the range of a count that fits.
fn parse_count(key: &str, value: &str, max: u64) -> Result<u64, ConfigError> {
    let text = value.trim();
    match crate::units::digits(text) {
        Some(n) => Ok(n),
        None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
            Err(invalid(key, value, format!("too large: at most {max}")))
        }
        None => Err(invalid(key, value, "expected a non-negative integer")),
    }
}

/// Sizes: [`crate::units::parse_size`]; an error names `key`.
pub fn parse_size(key: &str, value: &str) -> Result<u64, ConfigError> {
    crate::units::parse_size(value).map_err(|reason| invalid(key, value, reason.to_string()))
}

/// Durations: [`crate::units::parse_duration`]; an error names `key`.
pub fn parse_duration(key: &str, value: &str) -> Result<Duration, ConfigError> {
    crate::units::parse_duration(value).map_err(|reason| invalid(key, value, reason.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server configuration with `pairs` as `-D key=value` settings and no file.
    fn load(pairs: &[&str]) -> Result<ServerConfig, ConfigError> {
        let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        ServerConfig::load(None, &pairs)
    }

    const SEED: &str = "kafka.enabled: true\nkafka.listener.names: KAFKA\nkafka.default.database: fluss\nbind.listeners: FLUSS://localhost:9123,KAFKA://localhost:9092\n";

    #[test]
    fn seed_server_yaml_works_as_written() {
        let raw = parse_yaml(SEED).unwrap();
        let config = ServerConfig::from_raw(&raw).unwrap();
        assert!(config.kafka_enabled);
        assert_eq!(config.kafka_bind_listeners()[0].port, 9092);
        assert_eq!(config.fluss_bind_listener().unwrap().port, 9123);
        assert_eq!(config.max_request_size, 100 << 20);
        // Kafka's broker default (connections.max.idle.ms = 600000): the Java client closes an
        // idle connection itself after 9 minutes, before the broker does, and librdkafka (no
        // idle close of its own) reports every close by the broker as an error event.
        assert_eq!(config.connection_max_idle_time, Duration::from_secs(600));
        assert_eq!(config.kafka_default_database, "fluss");
    }

    #[test]
    fn embedded_default_matches_the_readme() {
        let config = ServerConfig::load(None, &[]).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("./data"));
        assert_eq!(config.bind_listeners.len(), 2);
        assert!(config.cores >= 1);
    }

    #[test]
    fn request_memory_holds_one_largest_request() {
        assert_eq!(load(&[]).unwrap().max_request_memory, 256 << 20);
        let error = load(&["kafka.max-request-memory=50mb"]).unwrap_err();
        assert!(error.to_string().contains("kafka.max-request-memory"), "{error}");
        assert!(error.to_string().contains("kafka.max-request-size"), "{error}");
        let config = load(&["kafka.max-request-memory=8mb", "kafka.max-request-size=4mb"]).unwrap();
        assert_eq!(config.max_request_memory, 8 << 20);
        // A request's frame is its size prefix and at most kafka.max-request-size bytes.
        let equal = load(&[
            "kafka.max-request-memory=4194304",
            "kafka.max-request-size=4194304",
        ])
        .unwrap_err();
        assert!(equal.to_string().contains("4194308 bytes or more"), "{equal}");
        let config = load(&[
            "kafka.max-request-memory=4194308",
            "kafka.max-request-size=4194304",
        ])
        .unwrap();
        assert_eq!(config.max_request_memory, 4_194_308);
    }

    #[test]
    fn an_address_holds_one_largest_request_by_default_and_at_most_the_core_budget() {
        assert_eq!(load(&[]).unwrap().max_request_memory_per_address, (100 << 20) + 4);
        let config = load(&["kafka.max-request-size=1mb", "kafka.max-request-memory=4mb"]).unwrap();
        assert_eq!(config.max_request_memory_per_address, (1 << 20) + 4);
        let config = load(&[
            "kafka.max-request-size=1mb",
            "kafka.max-request-memory=4mb",
            "kafka.max-request-memory-per-address=4mb",
        ])
        .unwrap();
        assert_eq!(config.max_request_memory_per_address, 4 << 20);
        for bad in ["1048579", "4194305"] {
            let error = load(&[
                "kafka.max-request-size=1mb",
                "kafka.max-request-memory=4mb",
                &format!("kafka.max-request-memory-per-address={bad}"),
            ])
            .unwrap_err();
            let text = error.to_string();
            assert!(text.contains("kafka.max-request-memory-per-address"), "{text}");
            assert!(text.contains("1048580 bytes"), "{text}");
            assert!(text.contains("4194304 bytes"), "{text}");
        }
    }

    #[test]
    fn counts_take_digits_only() {
        assert_eq!(load(&["server.cores=2"]).unwrap().cores, 2);
        assert_eq!(load(&["server.cores= 3 "]).unwrap().cores, 3);
        for bad in [
            "server.cores=+4",
            "server.cores=-4",
            "server.cores=4k",
            "server.cores=",
        ] {
            let error = load(&[bad]).unwrap_err();
            assert!(error.to_string().contains("server.cores"), "{bad}: {error}");
            assert!(
                error.to_string().contains("non-negative integer"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn counts_too_large_for_64_bits_say_so_with_the_maximum() {
        for (entry, max) in [
            (
                "kafka.max-connections=99999999999999999999",
                "18446744073709551615",
            ),
            (
                "security.login.max-tracked=184467440737095516150",
                "18446744073709551615",
            ),
            ("server.cores=99999999999999999999", "1024"),
            ("admin.max-connections=99999999999999999999", "100000"),
            ("admin.max-concurrent-scans=99999999999999999999", "1024"),
        ] {
            let error = load(&[entry]).unwrap_err().to_string();
            let key = entry.split('=').next().unwrap();
            assert!(error.contains(key), "{entry}: {error}");
            assert!(
                error.contains(&format!("too large: at most {max}")),
                "{entry}: {error}"
            );
        }
    }

    #[test]
    fn listeners_that_nothing_would_serve_are_refused_naming_them() {
        for (entries, key, named) in [
            (
                vec!["bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0,OTHER://127.0.0.1:0"],
                "bind.listeners",
                "listener OTHER is neither the Fluss listener (FLUSS",
            ),
            (
                vec!["bind.listeners=KAFKA://127.0.0.1:0"],
                "bind.listeners",
                "no Fluss listener",
            ),
            (
                vec!["kafka.enabled=false", "bind.listeners=KAFKA://127.0.0.1:0"],
                "bind.listeners",
                "no Fluss listener",
            ),
            (
                vec!["advertised.listeners=NOPE://localhost:1"],
                "advertised.listeners",
                "listener NOPE is not in bind.listeners",
            ),
        ] {
            let error = load(&entries).unwrap_err().to_string();
            assert!(error.contains(&format!("{key:?}")), "{entries:?}: {error}");
            assert!(error.contains(named), "{entries:?}: {error}");
        }
        // What is served: the Fluss listener, Kafka listeners (bound once kafka.enabled), a
        // subset advertised, any order.
        for entries in [
            vec!["bind.listeners=KAFKA://127.0.0.1:0,ADMIN://127.0.0.1:0"],
            vec![
                "bind.listeners=FLUSS://127.0.0.1:0,A://127.0.0.1:0,B://127.0.0.1:0",
                "kafka.listener.names=A,B",
            ],
            vec!["kafka.enabled=false"],
            vec!["advertised.listeners=KAFKA://kafka.example:9092"],
        ] {
            let config = load(&entries).unwrap_or_else(|e| panic!("{entries:?}: {e}"));
            assert!(config.fluss_bind_listener().is_some(), "{entries:?}");
        }
        let config = load(&["bind.listeners=KAFKA://127.0.0.1:0,ADMIN://127.0.0.1:0"]).unwrap();
        assert_eq!(config.fluss_bind_listener().unwrap().name, "ADMIN");
    }

    #[test]
    fn an_empty_data_dir_is_refused_naming_the_key() {
        for entry in ["data.dir=", "data.dir= ", "data.dir=''"] {
            let error = load(&[entry]).unwrap_err().to_string();
            assert!(
                error.contains("data.dir") && error.contains("must not be empty"),
                "{entry}: {error}"
            );
        }
    }

    #[test]
    fn default_bucket_number_is_bounded_as_bucket_num_is() {
        assert_eq!(load(&[]).unwrap().default_bucket_number, 1);
        assert_eq!(
            load(&["default.bucket.number=1024"])
                .unwrap()
                .default_bucket_number,
            MAX_BUCKETS
        );
        for bad in ["default.bucket.number=0", "default.bucket.number=1025"] {
            let error = load(&[bad]).unwrap_err().to_string();
            assert!(error.contains("default.bucket.number"), "{error}");
            assert!(error.contains("between 1 and 1024"), "{error}");
        }
    }

    #[test]
    fn connection_move_after_defaults_to_8_allows_0_and_refuses_nonsense() {
        assert_eq!(load(&[]).unwrap().connection_move_after, 8);
        let never = load(&["kafka.connection.move-after=0"]).unwrap();
        assert_eq!(never.connection_move_after, 0);
        for bad in [
            "kafka.connection.move-after=-1",
            "kafka.connection.move-after=often",
            "kafka.connection.move-after=1000001",
        ] {
            let error = load(&[bad]).unwrap_err();
            assert!(
                error.to_string().contains("kafka.connection.move-after"),
                "{error}"
            );
        }
    }

    #[test]
    fn log_prewrite_size_defaults_to_1mb_allows_0_and_refuses_nonsense() {
        assert_eq!(load(&[]).unwrap().prewrite_size, 1 << 20);
        assert_eq!(load(&["log.prewrite.size=0"]).unwrap().prewrite_size, 0);
        assert_eq!(
            load(&["log.prewrite.size=256kb"]).unwrap().prewrite_size,
            256 << 10
        );
        for bad in [
            "log.prewrite.size=-1",
            "log.prewrite.size=lots",
            "log.prewrite.size=1.5mb",
        ] {
            let error = load(&[bad]).unwrap_err();
            assert!(error.to_string().contains("log.prewrite.size"), "{error}");
        }
    }

    #[test]
    fn log_inline_write_size_defaults_to_1mb_allows_0_and_refuses_nonsense() {
        assert_eq!(load(&[]).unwrap().inline_write_size, 1 << 20);
        assert_eq!(
            load(&[]).unwrap().inline_write_size,
            crate::log::file::DEFAULT_INLINE_WRITE_SIZE
        );
        assert_eq!(load(&["log.inline-write.size=0"]).unwrap().inline_write_size, 0);
        assert_eq!(
            load(&["log.inline-write.size=256kb"]).unwrap().inline_write_size,
            256 << 10
        );
        for bad in ["log.inline-write.size=-1", "log.inline-write.size=all"] {
            let error = load(&[bad]).unwrap_err();
            assert!(error.to_string().contains("log.inline-write.size"), "{error}");
        }
    }

    #[test]
    fn log_unsynced_size_defaults_to_256mb_allows_0_and_refuses_nonsense() {
        assert_eq!(load(&[]).unwrap().unsynced_size, 256 << 20);
        assert_eq!(load(&["log.unsynced.size=0"]).unwrap().unsynced_size, 0);
        assert_eq!(load(&["log.unsynced.size=4mb"]).unwrap().unsynced_size, 4 << 20);
        for bad in ["log.unsynced.size=-1", "log.unsynced.size=lots"] {
            let error = load(&[bad]).unwrap_err();
            assert!(error.to_string().contains("log.unsynced.size"), "{error}");
        }
    }

    #[test]
    fn catalog_max_size_defaults_to_512mb_and_refuses_nonsense() {
        assert_eq!(load(&[]).unwrap().catalog_max_size, 512 << 20);
        assert_eq!(
            load(&[]).unwrap().catalog_max_size,
            crate::catalog::DEFAULT_MAX_SIZE
        );
        assert_eq!(
            load(&["catalog.max-size=64KB"]).unwrap().catalog_max_size,
            64 << 10
        );
        assert_eq!(
            load(&["catalog.max-size=1 gb"]).unwrap().catalog_max_size,
            1 << 30
        );
        for bad in [
            "catalog.max-size=0",
            "catalog.max-size=-1",
            "catalog.max-size=big",
        ] {
            let error = load(&[bad]).unwrap_err();
            assert!(error.to_string().contains("catalog.max-size"), "{error}");
        }
    }

    #[test]
    fn kafka_shutdown_timeout_defaults_to_5s_and_refuses_nonsense() {
        assert_eq!(load(&[]).unwrap().kafka_shutdown_timeout, Duration::from_secs(5));
        assert_eq!(
            load(&["kafka.shutdown-timeout=250ms"])
                .unwrap()
                .kafka_shutdown_timeout,
            Duration::from_millis(250)
        );
        for bad in [
            "kafka.shutdown-timeout=0s",
            "kafka.shutdown-timeout=-1s",
            "kafka.shutdown-timeout=soon",
        ] {
            let error = load(&[bad]).unwrap_err();
            assert!(error.to_string().contains("kafka.shutdown-timeout"), "{error}");
        }
    }

    #[test]
    fn producer_state_keys_default_as_kafka_and_refuse_nonsense() {
        let config = load(&[]).unwrap();
        assert_eq!(config.producer_id_expiration, Duration::from_secs(86_400));
        assert_eq!(config.producer_max_per_bucket, 1000);
        let config = load(&[
            "kafka.producer.id.expiration=15 min",
            "kafka.producer.max-per-bucket=7",
        ])
        .unwrap();
        assert_eq!(config.producer_id_expiration, Duration::from_secs(900));
        assert_eq!(config.producer_max_per_bucket, 7);
        for bad in [
            "kafka.producer.id.expiration=0s",
            "kafka.producer.id.expiration=soon",
            "kafka.producer.max-per-bucket=0",
            "kafka.producer.max-per-bucket=2000000",
        ] {
            let error = load(&[bad]).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(error.to_string().contains(key), "{error}");
        }
    }

    #[test]
    fn relative_data_dir_resolves_against_the_working_directory() {
        let mut config = ServerConfig::load(None, &[]).unwrap();
        config.resolve_paths().unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(config.data_dir, cwd.join("data"));
        assert!(config.data_dir.is_absolute());

        let mut config = ServerConfig::load(None, &["data.dir=/var/x/../y".to_string()]).unwrap();
        config.resolve_paths().unwrap();
        assert_eq!(
            config.data_dir,
            PathBuf::from("/var/x/../y"),
            "absolute paths stay as given"
        );
    }

    #[test]
    fn comments_quotes_and_overrides() {
        let raw = parse_yaml(
            "# header\nsecurity.sasl.plain.credentials: \"writer:change-me\" # trailing\ndata.dir: '/tmp/x#y'\n",
        )
        .unwrap();
        assert_eq!(raw["security.sasl.plain.credentials"], "writer:change-me");
        assert_eq!(raw["data.dir"], "/tmp/x#y");
        let config = ServerConfig::load(
            None,
            &[
                "bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0".into(),
                "server.cores=2".into(),
            ],
        )
        .unwrap();
        assert_eq!(config.kafka_bind_listeners()[0].port, 0);
        assert_eq!(config.cores, 2);
        assert_eq!(
            config.admin_max_sql_statements,
            crate::catalog::DEFAULT_MAX_SQL_STATEMENTS,
            "the default in KEYS is the catalog's"
        );
    }

    #[test]
    fn unknown_key_and_bad_values_name_the_key() {
        let err = ServerConfig::load(None, &["kafka.enabeld=true".into()]).unwrap_err();
        assert_eq!(err.to_string(), "unknown config key \"kafka.enabeld\"");
        for (entry, key) in [
            ("kafka.max-request-size=lots", "kafka.max-request-size"),
            (
                "kafka.connection.max-idle-time=5 fortnights",
                "kafka.connection.max-idle-time",
            ),
            ("kafka.enabled=yes", "kafka.enabled"),
            ("bind.listeners=localhost:9092", "bind.listeners"),
            ("server.cores=0", "server.cores"),
            ("log.flush.policy=sometimes", "log.flush.policy"),
            ("kafka.listener.names=OTHER", "kafka.listener.names"),
            ("admin.max-sql-statements=0", "admin.max-sql-statements"),
            ("admin.max-sql-statements=many", "admin.max-sql-statements"),
        ] {
            let err = ServerConfig::load(None, &[entry.into()]).unwrap_err();
            assert!(err.to_string().contains(key), "{entry}: {err}");
        }
        assert!(matches!(
            parse_yaml("a: 1\na: 2"),
            Err(ConfigError::Duplicate { line: 2, .. })
        ));
        assert!(matches!(
            parse_yaml("no colon here"),
            Err(ConfigError::Syntax { line: 1, .. })
        ));
    }

    #[test]
    fn admin_limits_default_and_validate() {
        let config = ServerConfig::load(None, &[]).unwrap();
        assert_eq!(
            config.admin_limits,
            AdminLimits::default(),
            "KEYS and AdminLimits agree"
        );
        let config = ServerConfig::load(
            None,
            &[
                "admin.max-connections=3".into(),
                "admin.header-timeout=250ms".into(),
                "admin.max-header-size=2kb".into(),
            ],
        )
        .unwrap();
        assert_eq!(config.admin_limits.max_connections, 3);
        assert_eq!(config.admin_limits.header_timeout, Duration::from_millis(250));
        assert_eq!(config.admin_limits.max_header_bytes, 2048);
        assert_eq!(
            config.admin_limits.max_connections_per_address, 1,
            "a quarter of admin.max-connections, at least 1"
        );
        let config = ServerConfig::load(None, &["admin.max-connections=10".into()]).unwrap();
        assert_eq!(config.admin_limits.max_connections_per_address, 2);
        let config = ServerConfig::load(
            None,
            &[
                "admin.max-connections=10".into(),
                "admin.max-connections-per-address=10".into(),
            ],
        )
        .unwrap();
        assert_eq!(config.admin_limits.max_connections_per_address, 10);
        let err = ServerConfig::load(
            None,
            &[
                "admin.max-connections=10".into(),
                "admin.max-connections-per-address=11".into(),
            ],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("admin.max-connections-per-address\": invalid value \"11\": must be between 1 and admin.max-connections (10)"),
            "{err}"
        );
        for entry in [
            "admin.max-connections-per-address=0",
            "admin.max-connections=0",
            "admin.max-concurrent-requests=many",
            "admin.max-concurrent-scans=0",
            "admin.queue-timeout=0s",
            "admin.body-timeout=soon",
            "admin.write-timeout=0",
            "admin.shutdown-timeout=1 fortnight",
            "admin.max-header-size=100",
            "admin.max-header-size=1mb",
        ] {
            let err = ServerConfig::load(None, &[entry.into()]).unwrap_err();
            let key = entry.split('=').next().unwrap();
            assert!(err.to_string().contains(key), "{entry}: {err}");
        }
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("k", "100mb").unwrap(), 100 << 20);
        assert_eq!(parse_size("k", "512").unwrap(), 512);
        assert_eq!(parse_size("k", "2 KiB").unwrap(), 2048);
        assert!(parse_size("k", "99999999999999gb").is_err());
        assert_eq!(parse_duration("k", "60s").unwrap(), Duration::from_secs(60));
        assert_eq!(
            parse_duration("k", "7 d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("k", "250").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("k", "s").is_err());
    }
}
