//! `kafluss-bench`: `produce` (load + latency, optionally `--vs` a second endpoint), `sink` (null
//! Kafka endpoint) and `table-sql` (the table a value generator writes into).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kafluss_bench::report::{results_json, text_report, NamedRun};
use kafluss_bench::values::{
    make_value, smallest_value_size, table_sql, Prng, ValueKind, DEFAULT_SEED, MAX_PARTITIONS,
};
use kafluss_bench::{plot, producer, sink, BenchError, StopAfter, Workload};
use kafluss_protocol::Compression;

#[derive(Debug, Parser)]
#[command(
    name = "kafluss-bench",
    version,
    about = "Kafka producer benchmark with HDR latency"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Produce load to one endpoint, or to two in alternation with --vs.
    Produce(Box<ProduceArgs>),
    /// Run a null Kafka sink: answers ApiVersions, Metadata and Produce with success, stores nothing.
    Sink {
        /// Address to listen on (port 0 picks one; the bound address is printed).
        #[arg(long, default_value = "127.0.0.1:9092")]
        listen: String,
        /// Partitions every topic has.
        #[arg(long, default_value_t = 1)]
        partitions: u32,
    },
    /// Measure the disk's own fsync latency: append --write-bytes to a file in --dir and
    /// fdatasync it, for --duration seconds; prints p50/p99/p99.9/max (and JSON with --json-out).
    FsyncProbe {
        /// Directory on the file system to measure (the broker's data directory's).
        #[arg(long)]
        dir: std::path::PathBuf,
        /// Seconds to probe.
        #[arg(long, default_value_t = 5)]
        duration: u64,
        /// Bytes appended before each fdatasync.
        #[arg(long, default_value_t = 65536)]
        write_bytes: usize,
        /// At most this many fsyncs.
        #[arg(long, default_value_t = 1_000_000)]
        max_syncs: u64,
        /// Write the figures as JSON here.
        #[arg(long)]
        json_out: Option<std::path::PathBuf>,
    },
    /// Print values of a generator, one per line (input for kcat -l; JSON and text only).
    Values {
        /// Value generator (json-flat, json-nested or text: values hold no newline).
        #[arg(long, value_enum, default_value = "json-flat")]
        value: ValueKind,
        /// Bytes per value.
        #[arg(long, default_value_t = 100)]
        message_size: usize,
        /// Values to print.
        #[arg(long)]
        count: u64,
    },
    /// Print the CREATE TABLE statement for the table a value generator writes into.
    TableSql {
        /// `db.table` or `table`.
        #[arg(long)]
        table: String,
        /// Value generator.
        #[arg(long, value_enum, default_value = "json-flat")]
        value: ValueKind,
        /// Buckets (= partitions), 1 to 1024.
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        /// Declare `_kafka_key` (when sending --key-size > 0).
        #[arg(long)]
        key: bool,
        /// Declare `_kafka_headers` (when sending --headers > 0).
        #[arg(long)]
        headers: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl From<Codec> for Compression {
    fn from(codec: Codec) -> Self {
        match codec {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

#[derive(Debug, Args)]
struct ProduceArgs {
    /// The endpoint measured (HOST:PORT).
    #[arg(long)]
    bootstrap: String,
    /// Its name in reports.
    #[arg(long, default_value = "a")]
    name: String,
    /// Another endpoint given the same workload, in alternation with the first (repeatable);
    /// ratios are the first endpoint's to each of these.
    #[arg(long)]
    vs: Vec<String>,
    /// Names of the --vs endpoints, in order (default b, c, ...).
    #[arg(long)]
    vs_name: Vec<String>,
    /// Rounds (each runs every endpoint; the order reverses every other round).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Topic.
    #[arg(long)]
    topic: String,
    /// Connections carrying load (connection i writes partition i mod partitions).
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1)]
    inflight: usize,
    /// Records per request.
    #[arg(long, default_value_t = 100)]
    batch_records: usize,
    /// With --rate: a batch leaves when full or when its first record is this old.
    #[arg(long, allow_negative_numbers = true)]
    linger_ms: Option<f64>,
    /// Acks: -1 (all), 0 (none) or 1 (leader).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    acks: i16,
    /// Batch compression.
    #[arg(long, value_enum, default_value = "none")]
    compression: Codec,
    /// Value bytes per record.
    #[arg(long, default_value_t = 100)]
    message_size: usize,
    /// Key bytes per record (0: null key).
    #[arg(long, default_value_t = 0)]
    key_size: usize,
    /// Headers per record.
    #[arg(long, default_value_t = 0)]
    headers: usize,
    /// Value generator; the default is the one `table-sql` defaults to, so that
    /// `table-sql --table T` creates the table a default run writes into.
    #[arg(long, value_enum, default_value = "json-flat")]
    value: ValueKind,
    /// Open-loop rate in records/s over all connections (`50000`, `50k/s`); latency is then
    /// measured from each request's scheduled time. Without it, send as fast as acks allow.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Seconds to send (default 10 unless --records).
    #[arg(long, conflicts_with = "records", allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Records to send in total.
    #[arg(long)]
    records: Option<u64>,
    /// SASL/PLAIN user.
    #[arg(long, requires = "sasl_password")]
    sasl_user: Option<String>,
    /// SASL/PLAIN password.
    #[arg(long, requires = "sasl_user")]
    sasl_password: Option<String>,
    /// Write results as JSON here.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Write an SVG plot of throughput and latency over time here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The first endpoint's server pid: report its CPU seconds per million records and RSS.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Server pids of the --vs endpoints, in order (0: not measured).
    #[arg(long)]
    vs_server_pid: Vec<u32>,
    /// Connections opened (ApiVersions + Metadata) and left idle during the load.
    #[arg(long, default_value_t = 0)]
    idle_connections: usize,
    /// Distinct request frames per connection, cycled (values differ between them).
    #[arg(long, default_value_t = 16)]
    distinct_requests: usize,
    /// Socket read timeout and Produce timeout, milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// Seconds at the start of each run left out of the latency figures (p50 … max); the
    /// timeline and throughput keep them. Default: a tenth of --duration, at most 1 s (none
    /// with --records).
    #[arg(long, allow_negative_numbers = true)]
    warmup_s: Option<f64>,
    /// Every request slower than this many milliseconds is listed with its send time (and
    /// marked in the plot).
    #[arg(long, default_value_t = 50.0, allow_negative_numbers = true)]
    slow_ms: f64,
}

/// `50000`, `50000/s`, `50k`, `1.5m/s` → records per second.
fn parse_rate(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches("/s");
    let (digits, scale) = match number.char_indices().last() {
        Some((at, 'k' | 'K')) => (&number[..at], 1e3),
        Some((at, 'm' | 'M')) => (&number[..at], 1e6),
        _ => (number, 1.0),
    };
    let value: f64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a rate like 50000, 50k or 50k/s"))?;
    if value.is_finite() && value > 0.0 {
        Ok(value * scale)
    } else {
        Err(format!("rate {text:?} must be positive"))
    }
}

/// `value` (in units of `unit` seconds) as a duration; `option` names it in the refusal of a
/// value that is negative, not a number, or too large.
fn duration_of(option: &str, value: f64, unit: f64) -> Result<Duration, BenchError> {
    Duration::try_from_secs_f64(value * unit)
        .map_err(|_| BenchError::Options(format!("{option} {value}: expected a number, 0 or more")))
}

impl ProduceArgs {
    fn workload(&self) -> Result<Workload, BenchError> {
        let stop = match (self.records, self.duration) {
            (Some(records), _) => StopAfter::Records(records),
            (None, duration) => {
                StopAfter::Duration(duration_of("--duration", duration.unwrap_or(10.0), 1.0)?)
            }
        };
        Ok(Workload {
            topic: self.topic.clone(),
            connections: self.connections,
            inflight: self.inflight,
            batch_records: self.batch_records,
            linger: self
                .linger_ms
                .map(|ms| duration_of("--linger-ms", ms, 1e-3))
                .transpose()?,
            acks: self.acks,
            compression: self.compression.into(),
            value_kind: self.value,
            message_size: self.message_size,
            key_size: self.key_size,
            headers: self.headers,
            rate: self.rate,
            stop,
            sasl: self.sasl_user.clone().zip(self.sasl_password.clone()),
            distinct_requests: self.distinct_requests,
            idle_connections: self.idle_connections,
            io_timeout: Duration::from_millis(self.timeout_ms.max(1)),
            progress: !self.quiet,
            warmup: match (self.warmup_s, stop) {
                (Some(seconds), _) => duration_of("--warmup-s", seconds, 1.0)?,
                (None, StopAfter::Duration(run)) => (run / 10).min(Duration::from_secs(1)),
                (None, StopAfter::Records(_)) => Duration::ZERO,
            },
            slow_threshold: duration_of("--slow-ms", self.slow_ms, 1e-3)?,
        })
    }

    /// The options that cannot make the runs asked, refused before any run: names or pids for
    /// `--vs` endpoints not given, a server pid of no process, an output file in a directory
    /// that does not exist.
    fn check(&self) -> Result<(), BenchError> {
        let refuse = |message: String| Err(BenchError::Options(message));
        if self.vs_name.len() > self.vs.len() {
            return refuse(format!(
                "--vs-name {} names no endpoint: {} --vs-name for {} --vs (give one --vs per --vs-name, in order)",
                self.vs_name[self.vs.len()],
                self.vs_name.len(),
                self.vs.len()
            ));
        }
        if self.vs_server_pid.len() > self.vs.len() {
            return refuse(format!(
                "--vs-server-pid {} belongs to no endpoint: {} --vs-server-pid for {} --vs (give one --vs per --vs-server-pid, in order)",
                self.vs_server_pid[self.vs.len()],
                self.vs_server_pid.len(),
                self.vs.len()
            ));
        }
        let pids = self
            .server_pid
            .map(|pid| ("--server-pid", pid))
            .into_iter()
            .chain(
                self.vs_server_pid
                    .iter()
                    .filter(|pid| **pid != 0)
                    .map(|pid| ("--vs-server-pid", *pid)),
            );
        for (option, pid) in pids {
            if kafluss_bench::proc_stat::sample(pid).is_none() {
                return refuse(format!(
                    "{option} {pid}: no such process (/proc/{pid} cannot be read)"
                ));
            }
        }
        for (option, path) in [("--json-out", &self.json_out), ("--plot", &self.plot)] {
            let Some(path) = path else { continue };
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => std::path::Path::new("."),
            };
            if !parent.is_dir() {
                return refuse(format!(
                    "{option} {}: the directory {} does not exist",
                    path.display(),
                    parent.display()
                ));
            }
            if path.is_dir() {
                return refuse(format!("{option} {}: is a directory", path.display()));
            }
        }
        Ok(())
    }
}

fn produce(args: &ProduceArgs) -> Result<bool, BenchError> {
    let workload = args.workload()?;
    workload.validate()?;
    args.check()?;
    let mut endpoints = vec![(args.name.clone(), args.bootstrap.clone(), args.server_pid)];
    for (i, vs) in args.vs.iter().enumerate() {
        let name = args
            .vs_name
            .get(i)
            .cloned()
            .unwrap_or_else(|| char::from(b'b' + (i % 25) as u8).to_string());
        if endpoints.iter().any(|(existing, _, _)| *existing == name) {
            return Err(BenchError::Options(format!("endpoint name {name} given twice")));
        }
        let pid = args.vs_server_pid.get(i).copied().filter(|pid| *pid != 0);
        endpoints.push((name, vs.clone(), pid));
    }
    let names: Vec<String> = endpoints.iter().map(|(name, _, _)| name.clone()).collect();
    let mut runs = Vec::new();
    for round in 0..args.rounds.max(1) {
        // Alternate which endpoint goes first so warm-up and drift do not favour one side.
        let mut order: Vec<&(String, String, Option<u32>)> = endpoints.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (name, bootstrap, pid) in order {
            if !args.quiet {
                eprintln!("== {name} ({bootstrap}) round {round}");
            }
            let result = producer::run(bootstrap, &workload, *pid)?;
            runs.push(NamedRun {
                name: name.clone(),
                round,
                result,
            });
        }
    }
    write_stdout(&text_report(&runs, &names))?;
    let results = results_json(&workload, &runs, &names);
    if let Some(path) = &args.json_out {
        let text = serde_json::to_string_pretty(&results).unwrap_or_default();
        std::fs::write(path, text)
            .map_err(|source| BenchError::io(format!("writing {}", path.display()), source))?;
    }
    if let Some(path) = &args.plot {
        let title = format!(
            "{} | {} B {} acks={} x{} conn, window {}, {} rec/req",
            names.join(" vs "),
            workload.message_size,
            workload.value_kind.name(),
            workload.acks,
            workload.connections,
            workload.inflight,
            workload.records_per_request()
        );
        std::fs::write(path, plot::timeline_svg(&title, &runs, &names))
            .map_err(|source| BenchError::io(format!("writing {}", path.display()), source))?;
    }
    let clean = runs.iter().all(|run| {
        run.result.errors.is_empty() && run.result.first_error.is_none() && run.result.records_acked > 0
    });
    Ok(clean)
}

fn print_values(kind: ValueKind, size: usize, count: u64) -> Result<u8, BenchError> {
    use std::io::Write as _;
    if kind == ValueKind::Random {
        return Err(BenchError::Options(
            "random values may hold newlines; use json-flat, json-nested or text".into(),
        ));
    }
    let smallest = smallest_value_size(kind, count);
    if size < smallest {
        return Err(BenchError::Options(format!(
            "--message-size {size} is below the smallest of {count} {} values, {smallest} bytes: give at \
             least {smallest} (smaller values would come out larger than asked)",
            kind.name()
        )));
    }
    let mut rng = Prng::new(DEFAULT_SEED);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for n in 0..count {
        let mut line = make_value(kind, size, n, &mut rng);
        line.push(b'\n');
        out.write_all(&line)
            .map_err(|source| BenchError::io("writing values to stdout", source))?;
    }
    out.flush()
        .map_err(|source| BenchError::io("writing values to stdout", source))?;
    Ok(0)
}

/// Writes `text` to stdout: a stdout that cannot take it (a full disk, a closed pipe) is an
/// error naming it, exit 1, not a panic of `print!`.
fn write_stdout(text: &str) -> Result<(), BenchError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| BenchError::io("writing to stdout", source))
}

fn run_sink(listen: &str, partitions: u32) -> Result<(), BenchError> {
    let handle = sink::start(listen, partitions)?;
    write_stdout(&format!(
        "kafluss-bench sink listening on {}\n",
        handle.local_addr()
    ))?;
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_secs(5));
        let stats = handle.stats();
        let records = stats.records.load(std::sync::atomic::Ordering::Relaxed);
        if records != last {
            eprintln!(
                "sink: {} connections, {} produce requests, {} records, {} rejected partitions",
                stats.connections.load(std::sync::atomic::Ordering::Relaxed),
                stats.produce_requests.load(std::sync::atomic::Ordering::Relaxed),
                records,
                stats
                    .rejected_partitions
                    .load(std::sync::atomic::Ordering::Relaxed)
            );
            last = records;
        }
    }
}

fn fsync_probe(
    dir: &std::path::Path,
    seconds: u64,
    write_bytes: usize,
    max_syncs: u64,
    json_out: Option<&std::path::Path>,
) -> Result<u8, BenchError> {
    let probe = kafluss_bench::fsync_probe::run(dir, Duration::from_secs(seconds), write_bytes, max_syncs)?;
    write_stdout(&format!("{}\n", probe.text(dir)))?;
    if let Some(path) = json_out {
        std::fs::write(path, probe.to_json().to_string()).map_err(|source| BenchError::Io {
            context: format!("writing {}", path.display()),
            source,
        })?;
    }
    Ok(0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Produce(args) => produce(&args).map(|clean| if clean { 0 } else { 3 }),
        Command::Sink { listen, partitions } => run_sink(&listen, partitions).map(|()| 0),
        Command::FsyncProbe {
            dir,
            duration,
            write_bytes,
            max_syncs,
            json_out,
        } => fsync_probe(&dir, duration, write_bytes, max_syncs, json_out.as_deref()),
        Command::Values {
            value,
            message_size,
            count,
        } => print_values(value, message_size, count),
        Command::TableSql { partitions, .. } if !(1..=MAX_PARTITIONS).contains(&partitions) => {
            Err(BenchError::Options(format!(
                "--partitions {partitions}: a table has 1 to {MAX_PARTITIONS} buckets ('bucket.num')"
            )))
        }
        Command::TableSql {
            table,
            value,
            partitions,
            key,
            headers,
        } => write_stdout(&format!(
            "{}\n",
            table_sql(&table, value, partitions, key, headers)
        ))
        .map(|()| 0),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("kafluss-bench: {error}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn rates_accept_suffixes() {
        assert_eq!(parse_rate("50000"), Ok(50000.0));
        assert_eq!(parse_rate("50k/s"), Ok(50000.0));
        assert_eq!(parse_rate("1.5M"), Ok(1_500_000.0));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-3").is_err());
    }
}
