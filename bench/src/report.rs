//! Results as text (stdout), as JSON (`--json-out`), and side-by-side ratios for `--vs`.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::histogram::{ms, round3, run_histogram, LatencySummary};
use crate::producer::RunResult;
use crate::workload::{StopAfter, Workload};

/// One measured endpoint with the name it is reported under.
#[derive(Debug, Clone)]
pub struct NamedRun {
    /// e.g. `kafluss`, `sink`, `tansu`.
    pub name: String,
    /// Round number (0-based) in a `--vs` run.
    pub round: usize,
    /// What was measured.
    pub result: RunResult,
}

/// The workload as JSON (recorded with every result file).
pub fn workload_json(workload: &Workload) -> Value {
    json!({
        "topic": workload.topic,
        "connections": workload.connections,
        "inflight": workload.inflight,
        "batch_records": workload.batch_records,
        "records_per_request": workload.records_per_request(),
        "linger_ms": workload.linger.map(|linger| linger.as_secs_f64() * 1000.0),
        "acks": workload.acks,
        "compression": workload.compression.name(),
        "value": workload.value_kind.name(),
        "message_size": workload.message_size,
        "key_size": workload.key_size,
        "headers": workload.headers,
        "rate_records_per_s": workload.rate,
        "duration_s": match workload.stop { StopAfter::Duration(d) => Some(d.as_secs_f64()), StopAfter::Records(_) => None },
        "records": match workload.stop { StopAfter::Records(n) => Some(n), StopAfter::Duration(_) => None },
        "sasl": workload.sasl.is_some(),
        "idle_connections": workload.idle_connections,
    })
}

/// One run as JSON.
pub fn run_json(run: &NamedRun) -> Value {
    let result = &run.result;
    let server = result.server.map(|server| {
        json!({
            "pid": server.pid,
            "cpu_s": round3(server.cpu_seconds),
            "cpu_s_per_million_records": result.server_cpu_per_million_records().map(round3),
            "cpu_us_per_request": result.server_cpu_us_per_request().map(round3),
            "rss_kib_at_start": server.at_start.rss_kib,
            "rss_kib_before_load": server.before.rss_kib,
            "rss_kib_after": server.after.rss_kib,
            "peak_rss_kib": server.after.peak_rss_kib,
        })
    });
    json!({
        "name": run.name,
        "round": run.round,
        "endpoint": result.endpoint,
        "produce_version": result.versions.produce,
        "partitions": result.partitions,
        "elapsed_s": round3(result.elapsed.as_secs_f64()),
        "requests_sent": result.requests_sent,
        "records_sent": result.records_sent,
        "requests_acked": result.requests_acked,
        "records_acked": result.records_acked,
        "payload_bytes_acked": result.payload_bytes_acked,
        "wire_bytes_sent": result.wire_bytes_sent,
        "records_per_s": round3(result.records_per_second()),
        "requests_per_s": round3(result.requests_per_second()),
        "mb_per_s": round3(result.megabytes_per_second()),
        "warmup_s": round3(result.warmup.as_secs_f64()),
        "request_latency": LatencySummary::to_json(LatencySummary::of(&result.request_latency).as_ref()),
        "slow_threshold_ms": round3(result.slow_threshold.as_secs_f64() * 1000.0),
        "slow_requests_total": result.slow_requests_total,
        "slow_requests": result.slow_requests.iter().map(|slow| json!({
            "sent_at_s": round3(slow.sent_at_s),
            "latency_ms": round3(slow.latency_ms),
            "connection": slow.connection,
            "records": slow.records,
        })).collect::<Vec<_>>(),
        "record_latency": LatencySummary::to_json(LatencySummary::of(&result.record_latency).as_ref()),
        "errors": result.errors,
        "first_error": result.first_error,
        "server": server,
        "client_cpu_s": round3(result.client_cpu_seconds),
        "steal_s": result.steal_seconds.map(round3),
        "idle_connections_open": result.idle_connections_open,
        "idle_connections_error": result.idle_connections_error,
        "timeline": result.timeline.iter().map(|point| json!({
            "at_s": round3(point.at_s),
            "span_s": round3(point.span_s),
            "records": point.records,
            "payload_bytes": point.payload_bytes,
            "latency": LatencySummary::to_json(point.latency.as_ref()),
            "server_rss_kib": point.server_rss_kib,
            "steal_ms": point.steal_ms.map(round3),
        })).collect::<Vec<_>>(),
    })
}

/// Totals of one endpoint over all its rounds.
#[derive(Debug, Clone)]
pub struct Totals {
    /// The endpoint's name.
    pub name: String,
    /// Acknowledged records.
    pub records: u64,
    /// Acknowledged requests.
    pub requests: u64,
    /// Acknowledged payload bytes.
    pub payload_bytes: u64,
    /// Summed elapsed seconds.
    pub seconds: f64,
    /// Merged request latency.
    pub request_latency: Histogram<u64>,
    /// Merged record latency.
    pub record_latency: Histogram<u64>,
    /// Summed server CPU seconds (when measured every round).
    pub server_cpu_seconds: Option<f64>,
    /// Largest server RSS after a round, KiB.
    pub server_rss_kib: Option<u64>,
    /// The machine's steal time summed over the rounds (when read every round), CPU seconds.
    pub steal_seconds: Option<f64>,
    /// Partition errors.
    pub errors: u64,
}

impl Totals {
    /// Sums the runs named `name`.
    pub fn of(runs: &[NamedRun], name: &str) -> Self {
        let mut totals = Totals {
            name: name.to_owned(),
            records: 0,
            requests: 0,
            payload_bytes: 0,
            seconds: 0.0,
            request_latency: run_histogram(),
            record_latency: run_histogram(),
            server_cpu_seconds: Some(0.0),
            server_rss_kib: None,
            steal_seconds: Some(0.0),
            errors: 0,
        };
        for run in runs.iter().filter(|run| run.name == name) {
            let result = &run.result;
            totals.records += result.records_acked;
            totals.requests += result.requests_acked;
            totals.payload_bytes += result.payload_bytes_acked;
            totals.seconds += result.elapsed.as_secs_f64();
            totals.request_latency.add(&result.request_latency).ok();
            totals.record_latency.add(&result.record_latency).ok();
            totals.server_cpu_seconds = match (totals.server_cpu_seconds, result.server) {
                (Some(sum), Some(server)) => Some(sum + server.cpu_seconds),
                _ => None,
            };
            totals.steal_seconds = totals
                .steal_seconds
                .zip(result.steal_seconds)
                .map(|(sum, steal)| sum + steal);
            if let Some(server) = result.server {
                totals.server_rss_kib = Some(totals.server_rss_kib.unwrap_or(0).max(server.after.rss_kib));
            }
            totals.errors += result.errors.values().sum::<u64>();
        }
        totals
    }

    /// Records per second over all rounds.
    pub fn records_per_second(&self) -> f64 {
        self.records as f64 / self.seconds.max(1e-9)
    }

    /// Server CPU seconds per million records.
    pub fn cpu_per_million(&self) -> Option<f64> {
        let cpu = self.server_cpu_seconds?;
        (self.records > 0).then(|| cpu * 1e6 / self.records as f64)
    }

    /// Server CPU microseconds per request.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        let cpu = self.server_cpu_seconds?;
        (self.requests > 0).then(|| cpu * 1e6 / self.requests as f64)
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "records": self.records,
            "requests": self.requests,
            "seconds": round3(self.seconds),
            "records_per_s": round3(self.records_per_second()),
            "mb_per_s": round3(self.payload_bytes as f64 / 1e6 / self.seconds.max(1e-9)),
            "request_latency": LatencySummary::to_json(LatencySummary::of(&self.request_latency).as_ref()),
            "record_latency": LatencySummary::to_json(LatencySummary::of(&self.record_latency).as_ref()),
            "server_cpu_s_per_million_records": self.cpu_per_million().map(round3),
            "server_cpu_us_per_request": self.cpu_us_per_request().map(round3),
            "server_rss_kib": self.server_rss_kib,
            "steal_s": self.steal_seconds.map(round3),
            "errors": self.errors,
        })
    }
}

/// `subject / reference`, or `None` when the reference is zero.
fn ratio(subject: f64, reference: f64) -> Option<f64> {
    (reference != 0.0).then(|| subject / reference)
}

/// The ratio of the latency figure `pick` of two histograms, or `None` when either holds no
/// sample (a figure that does not exist has no ratio).
fn latency_ratio(
    subject: &Histogram<u64>,
    reference: &Histogram<u64>,
    pick: fn(&LatencySummary) -> f64,
) -> Option<f64> {
    let (subject, reference) = (LatencySummary::of(subject)?, LatencySummary::of(reference)?);
    ratio(pick(&subject), pick(&reference))
}

/// The first endpoint (the subject) relative to `reference`: throughput, latency percentiles
/// and server CPU per record, each `subject / reference`, as JSON.
pub fn ratios_json(subject: &Totals, reference: &Totals) -> Value {
    let latency =
        |pick| latency_ratio(&subject.request_latency, &reference.request_latency, pick).map(round3);
    json!({
        "subject": subject.name,
        "reference": reference.name,
        "records_per_s": ratio(subject.records_per_second(), reference.records_per_second()).map(round3),
        "request_p50": latency(|l| l.p50_us),
        "request_p99": latency(|l| l.p99_us),
        "request_p999": latency(|l| l.p999_us),
        "server_cpu_per_record": match (subject.cpu_per_million(), reference.cpu_per_million()) {
            (Some(cs), Some(cr)) => ratio(cs, cr).map(round3),
            _ => None,
        },
    })
}

/// The whole result file: workload, every run, totals per endpoint and the first endpoint's
/// ratios to each of the others.
pub fn results_json(workload: &Workload, runs: &[NamedRun], names: &[String]) -> Value {
    let totals: Vec<Totals> = names.iter().map(|name| Totals::of(runs, name)).collect();
    let comparison: Vec<Value> = match totals.split_first() {
        Some((subject, others)) => others.iter().map(|other| ratios_json(subject, other)).collect(),
        None => Vec::new(),
    };
    json!({
        "tool": "kafluss-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "machine": machine_line(),
        "workload": workload_json(workload),
        "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
        "totals": totals.iter().map(Totals::to_json).collect::<Vec<_>>(),
        "comparison": comparison,
    })
}

/// `2 cores (model), 23 GiB, Linux 6.x, ..., load average 1.0 0.5 0.2` from /proc (empty parts
/// left out).
pub fn machine_line() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib / (1024 * 1024));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|release| release.trim().to_owned())
        .ok();
    let model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|info| {
        let line = info.lines().find(|line| line.starts_with("model name"))?;
        Some(line.split(':').nth(1)?.trim().to_owned())
    });
    let mut line = format!("{cores} cores");
    if let Some(model) = model {
        let _ = write!(line, " ({model})");
    }
    if let Some(memory) = memory_gib {
        let _ = write!(line, ", {memory} GiB");
    }
    if let Some(kernel) = kernel {
        let _ = write!(line, ", Linux {kernel}");
    }
    line.push_str(", client and server on loopback");
    // Other work on the machine skews every figure; say how much there was.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let averages: Vec<&str> = load.split_whitespace().take(3).collect();
        let _ = write!(line, ", load average {}", averages.join(" "));
    }
    line
}

fn fmt_opt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |value| format!("{value:.digits$}"))
}

/// Slow requests listed in the text report per run (the JSON lists all that were kept).
pub const SLOW_LINES: usize = 50;

/// `  3 requests over 50 ms (warm-up 1 s not in the figures above):` and one line each.
fn slow_lines(out: &mut String, result: &RunResult) {
    let threshold_ms = result.slow_threshold.as_secs_f64() * 1000.0;
    let _ = writeln!(
        out,
        "  {} requests over {threshold_ms} ms (latency figures leave out the first {} s)",
        result.slow_requests_total,
        result.warmup.as_secs_f64()
    );
    for slow in result.slow_requests.iter().take(SLOW_LINES) {
        let _ = writeln!(
            out,
            "    sent at {:9.3} s: {:9.3} ms  (connection {}, {} records)",
            slow.sent_at_s, slow.latency_ms, slow.connection, slow.records
        );
    }
    let listed = result.slow_requests.len().min(SLOW_LINES) as u64;
    if result.slow_requests_total > listed {
        let _ = writeln!(
            out,
            "    … {} more (see --json-out)",
            result.slow_requests_total - listed
        );
    }
}

/// One text line per run plus, for `--vs`, totals and ratios.
pub fn text_report(runs: &[NamedRun], names: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:>5} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>9}",
        "endpoint",
        "round",
        "records/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "p99.99 ms",
        "max ms",
        "rec p99",
        "cpu s/Mrec",
        "errors"
    );
    for run in runs {
        let result = &run.result;
        let latency = LatencySummary::of(&result.request_latency);
        let record_latency = LatencySummary::of(&result.record_latency);
        let _ = writeln!(
            out,
            "{:<14} {:>5} {:>12.0} {:>9.2} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>9}",
            run.name,
            run.round,
            result.records_per_second(),
            result.megabytes_per_second(),
            ms(latency.as_ref(), |l| l.p50_us),
            ms(latency.as_ref(), |l| l.p99_us),
            ms(latency.as_ref(), |l| l.p999_us),
            ms(latency.as_ref(), |l| l.p9999_us),
            ms(latency.as_ref(), |l| l.max_us),
            ms(record_latency.as_ref(), |l| l.p99_us),
            fmt_opt(result.server_cpu_per_million_records(), 3),
            result.errors.values().sum::<u64>(),
        );
        if let Some(error) = &result.first_error {
            let _ = writeln!(out, "  first error: {error}");
        }
        slow_lines(&mut out, result);
        if let Some(server) = result.server {
            let _ = writeln!(
                out,
                "  server pid {}: {:.2} CPU s ({} µs/request), RSS KiB at start {}, before load {} \
                 ({} idle connections), after {}, peak {}",
                server.pid,
                server.cpu_seconds,
                fmt_opt(result.server_cpu_us_per_request(), 2),
                server.at_start.rss_kib,
                server.before.rss_kib,
                result.idle_connections_open,
                server.after.rss_kib,
                server.after.peak_rss_kib,
            );
        }
        if let Some(steal) = result.steal_seconds {
            let _ = writeln!(
                out,
                "  steal: {steal:.2} CPU s over the run (time the hypervisor kept this machine's \
                 CPUs from the work they had, all CPUs together)"
            );
        }
        if let Some(error) = &result.idle_connections_error {
            let _ = writeln!(
                out,
                "  idle connections: {} opened, then: {error}",
                result.idle_connections_open
            );
        }
    }
    if names.len() < 2 {
        return out;
    }
    let totals: Vec<Totals> = names.iter().map(|name| Totals::of(runs, name)).collect();
    for total in &totals {
        let latency = LatencySummary::of(&total.request_latency);
        let _ =
            writeln!(
            out,
            "overall {:<14} {:>12.0} rec/s  p50 {} ms  p99 {} ms  p99.9 {} ms  p99.99 {} ms  max {} ms  cpu {} s/Mrec  {} µs/req  rss {} KiB  steal {} s",
            total.name,
            total.records_per_second(),
            ms(latency.as_ref(), |l| l.p50_us),
            ms(latency.as_ref(), |l| l.p99_us),
            ms(latency.as_ref(), |l| l.p999_us),
            ms(latency.as_ref(), |l| l.p9999_us),
            ms(latency.as_ref(), |l| l.max_us),
            fmt_opt(total.cpu_per_million(), 3),
            fmt_opt(total.cpu_us_per_request(), 2),
            total.server_rss_kib.map_or_else(|| "-".to_owned(), |rss| rss.to_string()),
            fmt_opt(total.steal_seconds, 2),
        );
    }
    let subject = &totals[0];
    let rounds = runs.iter().map(|run| run.round + 1).max().unwrap_or(0);
    for reference in &totals[1..] {
        for round in 0..rounds {
            let find = |name: &str| runs.iter().find(|run| run.round == round && run.name == name);
            if let (Some(rs), Some(rr)) = (find(&subject.name), find(&reference.name)) {
                let p99 = latency_ratio(&rs.result.request_latency, &rr.result.request_latency, |l| {
                    l.p99_us
                });
                let _ = writeln!(
                    out,
                    "round {round} {}/{}: throughput {}  p99 {}",
                    subject.name,
                    reference.name,
                    fmt_opt(
                        ratio(rs.result.records_per_second(), rr.result.records_per_second()),
                        3
                    ),
                    fmt_opt(p99, 3),
                );
            }
        }
        let latency = |pick| latency_ratio(&subject.request_latency, &reference.request_latency, pick);
        let _ = writeln!(
            out,
            "overall ratio {}/{}: throughput {}  p50 {}  p99 {}  cpu/record {}",
            subject.name,
            reference.name,
            fmt_opt(
                ratio(subject.records_per_second(), reference.records_per_second()),
                3
            ),
            fmt_opt(latency(|l| l.p50_us), 3),
            fmt_opt(latency(|l| l.p99_us), 3),
            match (subject.cpu_per_million(), reference.cpu_per_million()) {
                (Some(cs), Some(cr)) => fmt_opt(ratio(cs, cr), 3),
                _ => "-".to_owned(),
            },
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::client::NegotiatedVersions;
    use crate::histogram::record;
    use crate::producer::{RunResult, TimelinePoint};

    /// A run of `records` records in `seconds` whose requests all took `latency_us`.
    pub(crate) fn fake_run(
        name: &str,
        round: usize,
        records: u64,
        seconds: u64,
        latency_us: u64,
    ) -> NamedRun {
        let mut request_latency = run_histogram();
        record(&mut request_latency, latency_us * 1000, records / 10);
        let mut record_latency = run_histogram();
        record(&mut record_latency, latency_us * 1000, records);
        let timeline = (1..=seconds)
            .map(|at| TimelinePoint {
                at_s: at as f64,
                span_s: 1.0,
                records: records / seconds,
                payload_bytes: records / seconds * 100,
                latency: LatencySummary::of(&request_latency),
                server_rss_kib: Some(1024),
                steal_ms: Some(0.0),
            })
            .collect();
        NamedRun {
            name: name.to_owned(),
            round,
            result: RunResult {
                endpoint: "127.0.0.1:1".into(),
                versions: NegotiatedVersions {
                    produce: 9,
                    metadata: 12,
                    sasl_authenticate: None,
                    sasl_handshake: None,
                },
                partitions: 1,
                records_per_request: 10,
                elapsed: Duration::from_secs(seconds),
                requests_sent: records / 10,
                records_sent: records,
                requests_acked: records / 10,
                records_acked: records,
                payload_bytes_acked: records * 100,
                wire_bytes_sent: records * 120,
                errors: BTreeMap::new(),
                first_error: None,
                request_latency,
                warmup: Duration::ZERO,
                slow_threshold: Duration::from_millis(50),
                slow_requests: Vec::new(),
                slow_requests_total: 0,
                record_latency,
                timeline,
                server: None,
                client_cpu_seconds: 0.5,
                steal_seconds: None,
                idle_connections_open: 0,
                idle_connections_error: None,
            },
        }
    }

    #[test]
    fn text_report_lists_slow_requests_with_their_send_time() {
        let mut run = fake_run("kafluss", 0, 1000, 1, 2000);
        run.result.warmup = Duration::from_secs(1);
        run.result.slow_requests_total = SLOW_LINES as u64 + 3;
        run.result.slow_requests = (0..SLOW_LINES + 3)
            .map(|i| crate::SlowRequest {
                sent_at_s: 1.0 + i as f64,
                latency_ms: 60.0 + i as f64,
                connection: i % 2,
                records: 10,
            })
            .collect();
        let text = text_report(&[run.clone()], &["kafluss".to_owned()]);
        assert!(text.contains("p99.99 ms"), "{text}");
        assert!(
            text.contains("53 requests over 50 ms (latency figures leave out the first 1 s)"),
            "{text}"
        );
        assert!(
            text.contains("sent at     1.000 s:    60.000 ms  (connection 0, 10 records)"),
            "{text}"
        );
        assert!(text.contains("… 3 more"), "{text}");
        assert!(!text.contains("steal:"), "{text}");
        let mut stolen = run.clone();
        stolen.result.steal_seconds = Some(0.47);
        let text = text_report(&[stolen.clone()], &["kafluss".to_owned()]);
        assert!(text.contains("  steal: 0.47 CPU s over the run"), "{text}");
        assert_eq!(run_json(&stolen)["steal_s"].as_f64(), Some(0.47));
        let json = run_json(&run);
        assert!(json["steal_s"].is_null());
        assert_eq!(json["slow_requests"].as_array().unwrap().len(), SLOW_LINES + 3);
        assert_eq!(json["slow_requests"][1]["latency_ms"].as_f64(), Some(61.0));
        assert_eq!(json["warmup_s"].as_f64(), Some(1.0));
        assert!(json["request_latency"]["p9999_us"].as_f64().is_some());
    }

    #[test]
    fn ratios_are_the_first_endpoint_over_each_other() {
        let runs = vec![
            fake_run("kafluss", 0, 1000, 1, 2000),
            fake_run("sink", 0, 4000, 1, 500),
            fake_run("sink", 1, 4000, 1, 500),
            fake_run("kafluss", 1, 1000, 1, 2000),
        ];
        let names = vec!["kafluss".to_owned(), "sink".to_owned()];
        let results = results_json(&workload_for_tests(), &runs, &names);
        let comparison = &results["comparison"][0];
        assert_eq!(comparison["subject"], "kafluss");
        assert_eq!(comparison["reference"], "sink");
        assert_eq!(comparison["records_per_s"], 0.25);
        let p99 = comparison["request_p99"].as_f64().unwrap();
        assert!((p99 - 4.0).abs() < 0.01, "{p99}");
        assert_eq!(results["totals"][1]["records"], 8000);
        // The fake runs read no steal, so their totals have none either.
        assert!(results["totals"][1]["steal_s"].is_null());
        let text = text_report(&runs, &names);
        assert!(text.contains("rss - KiB  steal - s"), "{text}");
        let mut stolen = runs.clone();
        for (run, steal) in stolen.iter_mut().zip([0.25, 0.0, 0.0, 0.5]) {
            run.result.steal_seconds = Some(steal);
        }
        let results = results_json(&workload_for_tests(), &stolen, &names);
        assert_eq!(results["totals"][0]["steal_s"].as_f64(), Some(0.75));
        assert_eq!(results["totals"][1]["steal_s"].as_f64(), Some(0.0));
        let text = text_report(&stolen, &names);
        assert!(text.contains("steal 0.75 s"), "{text}");
        assert!(text.contains("round 1 kafluss/sink: throughput 0.250"), "{text}");
        assert!(
            text.contains("overall ratio kafluss/sink: throughput 0.250"),
            "{text}"
        );
    }

    /// `run` with no latency sample (every request failed, acks=0, a warm-up as long as the run).
    fn without_samples(mut run: NamedRun) -> NamedRun {
        run.result.request_latency.reset();
        run.result.record_latency.reset();
        for point in &mut run.result.timeline {
            point.latency = None;
        }
        run
    }

    #[test]
    fn a_run_without_latency_samples_shows_no_figures_and_no_ratios() {
        let names = vec!["kafluss".to_owned(), "sink".to_owned()];
        let empty = without_samples(fake_run("kafluss", 0, 1000, 1, 2000));
        let runs = vec![empty.clone(), fake_run("sink", 0, 4000, 1, 500)];
        let text = text_report(&runs, &names);
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row.split_whitespace().skip(4).take(6).collect::<Vec<_>>(),
            ["-"; 6],
            "p50 … max and rec p99: {text}"
        );
        let overall = text
            .lines()
            .find(|line| line.starts_with("overall kafluss"))
            .unwrap();
        assert!(
            overall.contains("1000 rec/s  p50 - ms  p99 - ms  p99.9 - ms  p99.99 - ms  max - ms"),
            "{text}"
        );
        assert!(
            text.contains("round 0 kafluss/sink: throughput 0.250  p99 -\n"),
            "{text}"
        );
        assert!(
            text.contains("overall ratio kafluss/sink: throughput 0.250  p50 -  p99 -  cpu/record -"),
            "{text}"
        );
        let json = run_json(&empty);
        for histogram in ["request_latency", "record_latency"] {
            assert_eq!(json[histogram]["count"], 0);
            for figure in ["mean_us", "p50_us", "p99_us", "max_us"] {
                assert!(json[histogram][figure].is_null(), "{histogram}.{figure}: {json}");
            }
        }
        assert!(json["timeline"][0]["latency"]["p50_us"].is_null());
        let results = results_json(&workload_for_tests(), &runs, &names);
        assert!(results["totals"][0]["request_latency"]["p99_us"].is_null());
        let comparison = &results["comparison"][0];
        for ratio in ["request_p50", "request_p99", "request_p999"] {
            assert!(comparison[ratio].is_null(), "{ratio}: {comparison}");
        }
        assert_eq!(comparison["records_per_s"], 0.25);
        // And the other way round: a reference without samples.
        let reversed = vec![
            fake_run("kafluss", 0, 1000, 1, 2000),
            without_samples(fake_run("sink", 0, 4000, 1, 500)),
        ];
        let text = text_report(&reversed, &names);
        assert!(
            text.contains("overall ratio kafluss/sink: throughput 0.250  p50 -  p99 -"),
            "{text}"
        );
        let results = results_json(&workload_for_tests(), &reversed, &names);
        assert!(results["comparison"][0]["request_p99"].is_null());
    }

    #[test]
    fn a_single_endpoint_has_no_comparison() {
        let runs = vec![fake_run("a", 0, 100, 2, 10)];
        let results = results_json(&workload_for_tests(), &runs, &["a".to_owned()]);
        assert_eq!(results["comparison"].as_array().map(Vec::len), Some(0));
        assert_eq!(results["runs"][0]["timeline"].as_array().map(Vec::len), Some(2));
        assert!(!text_report(&runs, &["a".to_owned()]).contains("ratio"));
    }

    fn workload_for_tests() -> Workload {
        Workload {
            topic: "t".into(),
            connections: 1,
            inflight: 1,
            batch_records: 10,
            linger: None,
            acks: 1,
            compression: kafluss_protocol::Compression::None,
            value_kind: crate::values::ValueKind::Random,
            message_size: 100,
            key_size: 0,
            headers: 0,
            rate: None,
            stop: StopAfter::Records(100),
            sasl: None,
            distinct_requests: 1,
            idle_connections: 0,
            io_timeout: Duration::from_secs(1),
            progress: false,
            warmup: Duration::ZERO,
            slow_threshold: Duration::from_millis(50),
        }
    }
}
