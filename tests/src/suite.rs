//! One client through every case of the matrix against real servers: plan, produce, scan,
//! compare, and the same rows read from the segment files with pyarrow.
//!
//! Each client, under each [`Settings`] (idempotence off; idempotent), gets its own servers
//! (plaintext, then SASL) and its own database named after it, one table per case, so clients
//! and cases never see each other's rows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::clients::{check_available, run_plan, CaseOutcome, CaseSpec, Client, Plan, SaslUser, Settings};
use crate::expect::compare_rows;
use crate::process::{run_with_timeout, tail};
use crate::report::{CaseResult, ClientReport, SENT_UNCOMPRESSED};
use crate::server::{parse_jsonl_rows, KaflussServer, ScanRow, ServerConfig, ServerError};
use crate::tables::{
    compressible_samples, expected_by_bucket, invalid_json_samples, samples, Sample, ValueMode,
};
use crate::wire_tap::{BatchSeen, WireTap};

/// Records per value-mode case (the last one a null value).
const MODE_RECORDS: usize = 9;
/// Records per compression case.
const CODEC_RECORDS: usize = 40;
/// Records per acks case.
const ACKS_RECORDS: usize = 8;
/// Buckets of the multi-partition table.
const MULTI_BUCKETS: u32 = 3;
/// How long rows may take to become visible after the client was answered (acks=0: not at all).
const ROWS_VISIBLE_TIMEOUT: Duration = Duration::from_secs(15);
/// Slack around a case's send window for client-stamped CreateTimes.
const CLOCK_SLACK_MS: i64 = 2000;
/// The credentials of the seed's SASL example.
pub const SASL_USER: &str = "writer";
pub const SASL_PASSWORD: &str = "change-me";

/// A produce case, its table and what must land there.
struct ProduceCase {
    name: String,
    table: String,
    /// `None`: the topic has no table behind it.
    create_sql: Option<String>,
    /// The client must report an error and nothing may be stored.
    expect_error: bool,
    acks: i32,
    compression: &'static str,
    samples: Vec<Sample>,
}

impl ProduceCase {
    fn spec(&self, expect_error: bool) -> CaseSpec {
        CaseSpec::Produce {
            name: self.name.clone(),
            topic: self.table.clone(),
            compression: self.compression.to_owned(),
            acks: self.acks,
            records: self.samples.iter().map(|s| s.record.to_wire()).collect(),
            expect_error,
        }
    }
}

/// Runs every case for `client` under `settings` and returns what happened (the caller asserts
/// and writes it). `Err` only when the client itself is not available.
pub fn run_client(client: Client, settings: Settings) -> Result<ClientReport, crate::clients::ClientError> {
    let version = check_available(client)?;
    let mut cases = Vec::new();
    cases.extend(plaintext_cases(client, settings));
    cases.extend(sasl_cases(client, settings));
    Ok(ClientReport {
        client: settings.slug(client),
        version,
        cases,
    })
}

fn failed(name: &str, detail: impl Into<String>) -> CaseResult {
    CaseResult {
        name: name.to_owned(),
        passed: false,
        detail: detail.into(),
        note: None,
    }
}

fn passed(name: &str, detail: impl Into<String>) -> CaseResult {
    CaseResult {
        name: name.to_owned(),
        passed: true,
        detail: detail.into(),
        note: None,
    }
}

/// Every name in `names` fails for one reason (a server that would not start, say): the first
/// carries it in full, the others point there.
fn all_failed(names: &[&str], detail: &str) -> Vec<CaseResult> {
    names
        .iter()
        .enumerate()
        .map(|(index, name)| match index {
            0 => failed(name, detail),
            _ => failed(name, format!("not run: see {}", names[0])),
        })
        .collect()
}

/// The cases of the matrix. Idempotent producers send acks=-1 only (idempotence requires it):
/// every case uses it, and the acks=0 and acks=1 cases are left out.
fn plaintext_produce_cases(client: Client, settings: Settings) -> Vec<ProduceCase> {
    let db = &settings.slug(client);
    let idempotent = settings == Settings::Idempotent;
    let caps = client.capabilities();
    let mut cases = Vec::new();
    let multi = format!("{db}.multi");
    cases.push(ProduceCase {
        name: "partitions".into(),
        table: multi.clone(),
        create_sql: Some(ValueMode::Binary.create_table_sql(&multi, MULTI_BUCKETS)),
        expect_error: false,
        acks: -1,
        compression: "none",
        samples: samples(ValueMode::Binary, caps, 9, 1, MULTI_BUCKETS),
    });
    for (seed, mode) in (10..).zip(ValueMode::ALL) {
        let table = format!("{db}.{}", mode.name());
        cases.push(ProduceCase {
            name: mode.name().into(),
            create_sql: Some(mode.create_table_sql(&table, 1)),
            expect_error: false,
            table,
            acks: -1,
            compression: "none",
            samples: samples(mode, caps, MODE_RECORDS, seed, 1),
        });
    }
    for codec in client.codecs() {
        let table = format!("{db}.codec_{codec}");
        cases.push(ProduceCase {
            name: (*codec).into(),
            create_sql: Some(ValueMode::String.create_table_sql(&table, 1)),
            expect_error: false,
            table,
            acks: if idempotent { -1 } else { 1 },
            compression: codec,
            samples: compressible_samples(caps, CODEC_RECORDS, codec),
        });
    }
    for (seed, (name, acks)) in (20..).zip([("acks_0", 0), ("acks_1", 1), ("acks_all", -1)]) {
        if idempotent && acks != -1 {
            continue;
        }
        let table = format!("{db}.{name}");
        cases.push(ProduceCase {
            name: name.into(),
            create_sql: Some(ValueMode::String.create_table_sql(&table, 1)),
            expect_error: false,
            table,
            acks,
            compression: "none",
            samples: samples(ValueMode::String, caps, ACKS_RECORDS, seed, 1),
        });
    }
    // Must fail: no table behind the topic, and producing must not create one.
    cases.push(ProduceCase {
        name: "unknown_topic".into(),
        table: format!("{db}.no_such_table"),
        create_sql: None,
        expect_error: true,
        acks: -1,
        compression: "none",
        samples: samples(ValueMode::String, caps, 1, 40, 1),
    });
    // Must fail: a value that is not JSON fails its batch; nothing is stored.
    let rejects = format!("{db}.rejects");
    cases.push(ProduceCase {
        name: "invalid_json".into(),
        create_sql: Some(ValueMode::JsonFlat.create_table_sql(&rejects, 1)),
        table: rejects,
        expect_error: true,
        acks: -1,
        compression: "none",
        samples: invalid_json_samples(),
    });
    cases
}

fn plaintext_cases(client: Client, settings: Settings) -> Vec<CaseResult> {
    let produce_cases = plaintext_produce_cases(client, settings);
    let mut names: Vec<&str> = vec!["metadata", "segment_files"];
    names.extend(produce_cases.iter().map(|case| case.name.as_str()));

    // Every Kafka connection of the client goes through the tap: it is the advertised listener.
    let tap = match WireTap::start() {
        Ok(tap) => tap,
        Err(error) => return all_failed(&names, &format!("wire tap did not start: {error}")),
    };
    let config = ServerConfig::plaintext().with("advertised.listeners", &format!("KAFKA://{}", tap.addr()));
    let server = match KaflussServer::start(config) {
        Ok(server) => server,
        Err(error) => return all_failed(&names, &format!("plaintext server did not start: {error}")),
    };
    tap.set_upstream(server.kafka_addr());
    let db = &settings.slug(client);
    let mut setup = vec![format!("CREATE DATABASE {db}")];
    setup.extend(produce_cases.iter().filter_map(|case| case.create_sql.clone()));
    for sql in &setup {
        if let Err(error) = server.sql(sql) {
            return all_failed(&names, &format!("set-up SQL failed: {error}"));
        }
    }

    let mut specs = vec![CaseSpec::Metadata {
        name: "metadata".into(),
        topic: format!("{db}.multi"),
        partitions: MULTI_BUCKETS,
    }];
    specs.extend(produce_cases.iter().map(|case| case.spec(case.expect_error)));
    let plan = Plan {
        bootstrap: tap.addr().to_string(),
        sasl: None,
        idempotent: settings == Settings::Idempotent,
        cases: specs,
    };
    let outcomes = match run_plan(client, &plan) {
        Ok(outcomes) => outcomes,
        Err(error) => return all_failed(&names, &format!("{error}\nserver log:\n{}", server.log_tail())),
    };

    let mut metadata = metadata_result(&outcomes[0]);
    metadata
        .detail
        .push_str(&format!("; requests seen: {}", tap.versions_used()));
    let mut results = vec![metadata];
    let mut segment_checks = Vec::new();
    for (case, outcome) in produce_cases.iter().zip(&outcomes[1..]) {
        let mut result = check_produce(&server, case, outcome);
        if result.passed && !case.expect_error {
            result = check_wire(&tap, case, result, settings);
        }
        let mode_table = ValueMode::ALL.iter().any(|mode| mode.name() == case.name);
        if mode_table && result.passed {
            segment_checks.push((case, outcome));
        }
        results.push(result);
    }
    results.push(check_segment_files(&server, &segment_checks));
    drop(server);
    results
}

fn metadata_result(outcome: &CaseOutcome) -> CaseResult {
    CaseResult {
        name: "metadata".into(),
        passed: outcome.ok,
        detail: outcome.detail.clone(),
        note: None,
    }
}

fn send_window(outcome: &CaseOutcome) -> (i64, i64) {
    (
        outcome.started_ms - CLOCK_SLACK_MS,
        outcome.finished_ms + CLOCK_SLACK_MS,
    )
}

/// The client's answer, then the scan compared with what was sent.
fn check_produce(server: &KaflussServer, case: &ProduceCase, outcome: &CaseOutcome) -> CaseResult {
    if case.expect_error {
        return check_rejected(server, case, outcome);
    }
    if !outcome.ok {
        return failed(
            &case.name,
            format!(
                "client: {}\nserver log:\n{}",
                outcome.detail,
                tail(&server.log_tail(), 3000)
            ),
        );
    }
    let rows = match server.scan_until(&case.table, case.samples.len(), ROWS_VISIBLE_TIMEOUT) {
        Ok(rows) => rows,
        Err(error) => return failed(&case.name, format!("scan: {error}")),
    };
    compare_result(&case.name, &case.samples, outcome, &rows, "scan")
}

/// What the tap saw for the case's topic: its acks, its codec, v2 batches only, and a producer id
/// on every batch when idempotent, none (-1) when not.
fn check_wire(tap: &WireTap, case: &ProduceCase, result: CaseResult, settings: Settings) -> CaseResult {
    let seen = tap.produce_for(&case.table);
    if seen.is_empty() {
        return failed(
            &case.name,
            format!(
                "no Produce request for {} went through the wire tap; unreadable frames: {:?}",
                case.table,
                tap.unparsed()
            ),
        );
    }
    let versions: BTreeSet<i16> = seen.iter().map(|s| s.api_version).collect();
    let acks: BTreeSet<i16> = seen.iter().map(|s| s.acks).collect();
    let batches: Vec<&BatchSeen> = seen.iter().flat_map(|s| &s.batches).collect();
    let codecs: BTreeSet<&str> = batches.iter().map(|b| b.codec.as_str()).collect();
    let wire = format!(
        "Produce v{versions:?}, acks {acks:?}, {} batches, codecs {codecs:?}",
        batches.len()
    );
    if acks.iter().any(|a| i32::from(*a) != case.acks) {
        return failed(
            &case.name,
            format!("asked for acks {}, the client sent: {wire}", case.acks),
        );
    }
    let uncompressed = case.compression != "none" && codecs.iter().all(|codec| *codec == "none");
    if !uncompressed && codecs.iter().any(|codec| *codec != case.compression) {
        return failed(
            &case.name,
            format!(
                "asked for {} compression, the client sent: {wire}",
                case.compression
            ),
        );
    }
    let idempotent = settings == Settings::Idempotent;
    if let Some(batch) = batches
        .iter()
        .find(|b| b.magic != 2 || (b.producer_id >= 0) != idempotent)
    {
        return failed(
            &case.name,
            format!(
                "a batch with magic {} and producer id {}: {wire}",
                batch.magic, batch.producer_id
            ),
        );
    }
    let mut result = passed(&case.name, format!("{}; on the wire: {wire}", result.detail));
    if uncompressed {
        // The client chose not to compress (librdkafka decides from the ApiVersions answer);
        // the rows are right, and the matrix says what happened instead of a plain pass.
        result.note = Some(SENT_UNCOMPRESSED.to_owned());
    }
    result
}

/// A case that must fail: the client reported an error, and nothing was stored (no table was
/// created for an unknown topic; the existing table stayed empty).
fn check_rejected(server: &KaflussServer, case: &ProduceCase, outcome: &CaseOutcome) -> CaseResult {
    if !outcome.ok {
        return failed(
            &case.name,
            format!("the client reported no error: {}", outcome.detail),
        );
    }
    let refused = format!("refused: {}", tail(&outcome.detail, 300));
    if case.create_sql.is_none() {
        return match server.table_info(&case.table) {
            Err(ServerError::Rejected { status: 404, .. }) => passed(&case.name, refused),
            Ok(info) => failed(&case.name, format!("producing created {}: {info}", case.table)),
            Err(error) => failed(&case.name, format!("table info: {error}")),
        };
    }
    match server.scan(&case.table) {
        Ok(rows) if rows.is_empty() => passed(&case.name, refused),
        Ok(rows) => failed(
            &case.name,
            format!("{} rows stored although the batch was refused", rows.len()),
        ),
        Err(error) => failed(&case.name, format!("scan: {error}")),
    }
}

fn compare_result(
    name: &str,
    sent: &[Sample],
    outcome: &CaseOutcome,
    rows: &[ScanRow],
    source: &str,
) -> CaseResult {
    let expected = expected_by_bucket(sent, send_window(outcome));
    let diff = compare_rows(&expected, rows, 0);
    if diff.is_empty() {
        passed(
            name,
            format!("{} rows sent and read back through the {source}", sent.len()),
        )
    } else {
        failed(
            name,
            format!("{source} differs from what was sent:\n{}", diff.describe()),
        )
    }
}

/// The value-mode tables again, read from the segment files with pyarrow.
fn check_segment_files(server: &KaflussServer, cases: &[(&ProduceCase, &CaseOutcome)]) -> CaseResult {
    const NAME: &str = "segment_files";
    if cases.len() != ValueMode::ALL.len() {
        return failed(NAME, "a value-mode case failed, so its segments were not checked");
    }
    for (case, outcome) in cases {
        let rows = match read_segments(server.data_dir(), &case.table) {
            Ok(rows) => rows,
            Err(error) => return failed(NAME, format!("{}: {error}", case.table)),
        };
        let result = compare_result(NAME, &case.samples, outcome, &rows, "segment files");
        if !result.passed {
            return failed(NAME, format!("{}: {}", case.table, result.detail));
        }
    }
    passed(
        NAME,
        format!("{} tables read with pyarrow match what was sent", cases.len()),
    )
}

/// Rows of `db.table` straight from its Arrow IPC segments (`tests/clients/read_segments.py`).
pub fn read_segments(data_dir: &Path, table: &str) -> Result<Vec<ScanRow>, String> {
    let (db, name) = table
        .split_once('.')
        .ok_or_else(|| format!("{table} is not db.table"))?;
    let python = std::env::var_os("KAFLUSS_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::server::workspace_root().join(".venv/bin/python"));
    let script = crate::server::workspace_root().join("tests/clients/read_segments.py");
    let done = run_with_timeout(
        Command::new(python).arg(script).arg(data_dir).arg(db).arg(name),
        b"",
        Duration::from_secs(120),
    )
    .map_err(|error| error.to_string())?;
    if !done.status.success() {
        return Err(format!(
            "read_segments.py failed: {}",
            tail(&done.stderr_text(), 2000)
        ));
    }
    parse_jsonl_rows(&done.stdout_text())
}

fn sasl_cases(client: Client, settings: Settings) -> Vec<CaseResult> {
    let names = ["sasl_plain", "sasl_wrong_password"];
    let server = match KaflussServer::start(ServerConfig::sasl_plain(&[(SASL_USER, SASL_PASSWORD)])) {
        Ok(server) => server,
        Err(error) => return all_failed(&names, &format!("SASL server did not start: {error}")),
    };
    let db = &settings.slug(client);
    let table = format!("{db}.secured");
    let case = ProduceCase {
        name: "sasl_plain".into(),
        create_sql: Some(ValueMode::String.create_table_sql(&table, 1)),
        expect_error: false,
        table: table.clone(),
        acks: -1,
        compression: "none",
        samples: samples(ValueMode::String, client.capabilities(), 6, 30, 1),
    };
    for sql in [Some(format!("CREATE DATABASE {db}")), case.create_sql.clone()]
        .into_iter()
        .flatten()
    {
        if let Err(error) = server.sql(&sql) {
            return all_failed(&names, &format!("set-up SQL failed: {error}"));
        }
    }
    let user = |password: &str| SaslUser {
        username: SASL_USER.into(),
        password: password.into(),
    };
    let idempotent = settings == Settings::Idempotent;
    let good = Plan {
        bootstrap: server.kafka_bootstrap(),
        sasl: Some(user(SASL_PASSWORD)),
        idempotent,
        cases: vec![
            CaseSpec::Metadata {
                name: "sasl_metadata".into(),
                topic: table.clone(),
                partitions: 1,
            },
            case.spec(false),
        ],
    };
    let sasl_plain = match run_plan(client, &good) {
        Ok(outcomes) if !outcomes[0].ok => failed(
            "sasl_plain",
            format!("metadata after authentication: {}", outcomes[0].detail),
        ),
        Ok(outcomes) => check_produce(&server, &case, &outcomes[1]),
        Err(error) => failed("sasl_plain", error.to_string()),
    };

    let mut wrong_case = case.spec(true);
    if let CaseSpec::Produce { name, .. } = &mut wrong_case {
        *name = "sasl_wrong_password".into();
    }
    let bad = Plan {
        bootstrap: server.kafka_bootstrap(),
        sasl: Some(user("not-the-password")),
        idempotent,
        cases: vec![wrong_case],
    };
    let rows_before = match server.scan(&table) {
        Ok(rows) => rows.len(),
        Err(error) => {
            return vec![
                sasl_plain,
                failed("sasl_wrong_password", format!("scan: {error}")),
            ]
        }
    };
    let wrong = match run_plan(client, &bad) {
        Ok(outcomes) => check_refused(&server, &table, &outcomes[0], rows_before),
        Err(error) => failed("sasl_wrong_password", error.to_string()),
    };
    vec![sasl_plain, wrong]
}

/// The fixed message of the server's SASL_AUTHENTICATION_FAILED answer (lower case): a client
/// that reports it has read the server's answer, not only seen the connection end.
const AUTHENTICATION_FAILED: &str = "invalid username or password";

/// A wrong password must make the client fail with the server's authentication error (its
/// message in what the client raised or logged), and append nothing.
fn check_refused(
    server: &KaflussServer,
    table: &str,
    outcome: &CaseOutcome,
    rows_before: usize,
) -> CaseResult {
    const NAME: &str = "sasl_wrong_password";
    if !outcome.ok {
        return failed(NAME, format!("the client did not fail: {}", outcome.detail));
    }
    let Some(said) = outcome
        .detail
        .lines()
        .find(|line| line.to_lowercase().contains(AUTHENTICATION_FAILED))
    else {
        return failed(
            NAME,
            format!(
                "failed, but not with the server's authentication error (\"{AUTHENTICATION_FAILED}\"): {}",
                outcome.detail
            ),
        );
    };
    match server.scan(table) {
        Ok(rows) if rows.len() == rows_before => passed(NAME, format!("refused: {}", tail(said, 300))),
        Ok(rows) => failed(
            NAME,
            format!(
                "{} rows appended without authentication",
                rows.len() - rows_before
            ),
        ),
        Err(error) => failed(NAME, format!("scan: {error}")),
    }
}

/// Rows of a table grouped by bucket, for tests that look at one bucket.
pub fn rows_by_bucket(rows: &[ScanRow]) -> BTreeMap<u32, Vec<Value>> {
    let mut buckets: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
    for row in rows {
        buckets.entry(row.bucket).or_default().push(row.row.clone());
    }
    buckets
}

/// Makes a [`ServerError`] readable in an assertion message with the server's own output.
pub fn explain(error: &ServerError, server: Option<&KaflussServer>) -> String {
    match server {
        Some(server) => format!("{error}\nserver log:\n{}", server.log_tail()),
        None => error.to_string(),
    }
}
