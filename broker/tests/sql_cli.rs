//! `kafluss sql` through the real binary against a running `kafluss serve`: the seed's
//! statements from `-e`, `-f` and standard input, readable output, exit 1 with the server's
//! message; scripts that stop at their first failure, `USE`, `SELECT`, the statement limit, a
//! script over the server's request size; a stdout that cannot be written; credentials under
//! the authorizer; what start-up says about dynamic configs and an unprotected Fluss listener.

#[path = "broker_support.rs"]
mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use kafluss_tests::seed_sql::SEED_CREATE;
use support::{binary, Server};

fn kafluss_sql(server: &Server, args: &[&str]) -> Output {
    kafluss_sql_with(server, args, &[], None)
}

/// `kafluss sql --server ... args`, with only the given credential variables set, and
/// `stdin` fed to it (else none).
fn kafluss_sql_with(server: &Server, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut command = sql_command(server, args, env, stdin);
    command.stdout(Stdio::piped());
    let mut child = command.spawn().expect("run kafluss sql");
    if let Some(text) = stdin {
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    child.wait_with_output().expect("kafluss sql output")
}

/// The `kafluss sql` command of [`kafluss_sql_with`], stdout left to the caller.
fn sql_command(server: &Server, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Command {
    let mut command = Command::new(binary());
    command
        .arg("sql")
        .arg("--server")
        .arg(server.fluss.to_string())
        .args(args)
        .env_remove("KAFLUSS_USER")
        .env_remove("KAFLUSS_PASSWORD")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped());
    command
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const SEED_ALTER: &str = "ALTER TABLE sales.orders SET (
    'table.kafka.enabled' = 'true'
);";

#[test]
fn seed_statements_run_through_kafluss_sql() {
    let server = Server::start(1, &[]);
    let script = server.data_dir.with_extension("seed.sql");
    std::fs::write(&script, SEED_CREATE).unwrap();

    let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "Database sales created\nTable sales.orders created\n"
    );

    let output = kafluss_sql(&server, &["-e", SEED_ALTER]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Table sales.orders altered\n");

    let output = kafluss_sql(&server, &["-e", "SHOW DATABASES; DESCRIBE sales.orders"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("| database name |"), "{text}");
    assert!(text.contains("| sales         |"), "{text}");
    assert!(
        text.contains("| _kafka_headers | MAP<STRING NOT NULL, BYTES> | TRUE |"),
        "{text}"
    );

    // The table description over HTTP shows the served mapping.
    let (status, body) = server.get("/v1/tables/sales.orders");
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["kafka"]["served"], true);
    assert_eq!(json["bucket_count"], 1);

    // Errors: exit 1 with the server's message on stderr.
    let output = kafluss_sql(
        &server,
        &[
            "-e",
            "CREATE TABLE sales.bad (q INT NOT NULL) WITH ('table.kafka.enabled' = 'true')",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("INVALID_KAFKA_MAPPING") && stderr(&output).contains("'q' must be nullable"),
        "{}",
        stderr(&output)
    );
    let output = kafluss_sql(&server, &["-e", "SELECT 1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("line 1, column 1"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn catalog_survives_a_server_restart() {
    let mut server = Server::start(1, &[]);
    let output = kafluss_sql(&server, &["-e", SEED_CREATE]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let data_dir = server.data_dir.clone();
    server.terminate();
    let server = Server::start_in(&data_dir, 1, &[]);
    let output = kafluss_sql(&server, &["-e", "SHOW TABLES FROM sales"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stdout(&output).contains("| orders     |"), "{}", stdout(&output));
}

#[test]
fn a_script_stops_at_its_first_failure_and_says_what_took_effect() {
    let server = Server::start(1, &[]);
    let script = server.data_dir.with_extension("three.sql");
    std::fs::write(
        &script,
        "CREATE DATABASE first_db;\nCREATE TABLE missing_db.t (x INT);\nCREATE DATABASE third_db;\n",
    )
    .unwrap();
    let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "Database first_db created\n",
        "statement 1 reports its outcome"
    );
    let err = stderr(&output);
    assert!(
        err.contains("DATABASE_NOT_FOUND: statement 2 (line 2): database 'missing_db' does not exist"),
        "{err}"
    );
    assert!(
        err.contains(
            "statement 2 (CREATE TABLE missing_db.t) failed; statement 1 before it took effect; \
             statement 3 after it was not run"
        ),
        "{err}"
    );
    let output = kafluss_sql(&server, &["-e", "SHOW DATABASES"]);
    let databases = stdout(&output);
    assert!(databases.contains("| first_db"), "{databases}");
    assert!(!databases.contains("third_db"), "{databases}");

    // The JSON answer: the error names the statement and carries what ran before it.
    let (status, body) = server.sql("SHOW DATABASES; DROP TABLE nope; SHOW DATABASES");
    assert_eq!(status, 404, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["error"]["code"], "TABLE_NOT_FOUND");
    assert_eq!(json["error"]["statement"], 2);
    assert_eq!(json["error"]["line"], 1);
    assert_eq!(json["error"]["summary"], "DROP TABLE nope");
    assert_eq!(json["statements"], 3);
    assert_eq!(json["results"].as_array().map(Vec::len), Some(1));
    assert_eq!(json["results"][0]["kind"], "rows");

    // A syntax error anywhere runs nothing, and says so.
    let output = kafluss_sql(
        &server,
        &[
            "-e",
            "CREATE DATABASE never_db; CREAT TABLE t (x INT); SHOW TABLES",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let err = stderr(&output);
    assert!(
        err.contains("SYNTAX_ERROR: syntax error at line 1, column 27"),
        "{err}"
    );
    assert!(
        err.contains("statement 2 (CREAT TABLE t ...) failed; nothing was run"),
        "{err}"
    );
    assert!(!stdout(&kafluss_sql(&server, &["-e", "SHOW DATABASES"])).contains("never_db"));
}

/// A script saved as "UTF-8 with BOM" (audit: `SYNTAX_ERROR: ... line 1, column 1: expected a
/// statement (...), found '\u{feff}'`) runs, through `-f` and through the HTTP body; a BOM
/// elsewhere is an error naming U+FEFF, at the column after the BOM's own.
#[test]
fn a_script_file_with_a_byte_order_mark_runs() {
    let server = Server::start(1, &[]);
    let script = server.data_dir.with_extension("bom.sql");
    std::fs::write(&script, "\u{FEFF}CREATE DATABASE bom;\nSHOW DATABASES;\n").unwrap();
    let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(
        stdout(&output).starts_with("Database bom created\n"),
        "{}",
        stdout(&output)
    );
    assert!(stdout(&output).contains("| bom "), "{}", stdout(&output));
    server.sql_ok("\u{FEFF}SHOW TABLES");

    // A USE alone is still recognised behind a BOM (exit 2, nothing sent).
    std::fs::write(&script, "\u{FEFF}USE bom\n").unwrap();
    let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));

    std::fs::write(&script, "\u{FEFF}SHOW DATABASES;\n\u{FEFF}SHOW TABLES\n").unwrap();
    let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("SYNTAX_ERROR: syntax error at line 2, column 1: expected a statement")
            && err.contains("found U+FEFF (a byte order mark"),
        "{err}"
    );
    assert!(!err.contains('\u{FEFF}'), "{err:?}");
}

#[test]
fn statements_from_stdin_use_select_and_the_statement_limit() {
    let server = Server::start(1, &["admin.max-sql-statements=4"]);

    // Standard input when neither -e nor -f is given.
    let output = kafluss_sql_with(
        &server,
        &[],
        &[],
        Some("CREATE DATABASE piped;\nSHOW DATABASES;\n"),
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(
        stdout(&output).starts_with("Database piped created\n"),
        "{}",
        stdout(&output)
    );
    assert!(stdout(&output).contains("| piped "), "{}", stdout(&output));

    // USE applies to the statements after it in the same script.
    let output = kafluss_sql(
        &server,
        &["-e", "USE piped; CREATE TABLE inside (x INT); SHOW TABLES"],
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "Using database piped\nTable piped.inside created\n+------------+\n| table name |\n+------------+\n| inside     |\n+------------+\n1 row in set\n"
    );
    // Alone it would do nothing: refused, saying why.
    let output = kafluss_sql(&server, &["-e", "USE piped"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("USE only applies to the statements after it in the same script"),
        "{}",
        stderr(&output)
    );

    // SELECT points to scan.
    let output = kafluss_sql(&server, &["-e", "SELECT * FROM piped.inside"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("UNSUPPORTED_STATEMENT"), "{err}");
    assert!(
        err.contains("kafluss scan DB.TABLE") && err.contains("GET /v1/tables/DB.TABLE/scan"),
        "{err}"
    );

    // More statements than admin.max-sql-statements: refused before any runs.
    let output = kafluss_sql(
        &server,
        &["-e", "CREATE DATABASE l1; CREATE DATABASE l2; CREATE DATABASE l3; CREATE DATABASE l4; CREATE DATABASE l5"],
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("TOO_MANY_STATEMENTS"), "{err}");
    assert!(
        err.contains("more than 4 statements") && err.contains("admin.max-sql-statements"),
        "{err}"
    );
    let (status, body) = server.sql("SHOW DATABASES");
    assert_eq!(status, 200);
    assert!(!body.contains("\"l1\""), "nothing ran: {body}");
    let output = kafluss_sql(
        &server,
        &[
            "-e",
            "CREATE DATABASE l1; CREATE DATABASE l2; CREATE DATABASE l3; CREATE DATABASE l4",
        ],
    );
    assert!(output.status.success(), "at the limit: {}", stderr(&output));
}

#[test]
fn a_stdout_that_cannot_be_written_is_exit_1_not_a_panic() {
    let server = Server::start(1, &[]);
    // A full disk.
    let mut command = sql_command(&server, &["-e", "SHOW DATABASES"], &[], None);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let output = command.stdout(full).output().expect("run kafluss sql");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("kafluss sql: cannot write stdout: No space left on device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A pipe whose reader is gone (`| head -c1` once head has exited).
    let mut child = sql_command(&server, &["-e", "SHOW DATABASES"], &[], None)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run kafluss sql");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("kafluss sql output");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("kafluss sql: cannot write stdout: Broken pipe"),
        "{err}"
    );
}

#[test]
fn a_huge_script_is_refused_quickly_and_the_server_keeps_serving() {
    let server = Server::start(1, &[]);
    // 200,000 statements (5 MB): parsing stops at statement 1,001, the default limit.
    let script = (0..200_000)
        .map(|i| format!("CREATE DATABASE d{i};\n"))
        .collect::<String>();
    let started = std::time::Instant::now();
    let (status, body) = server.sql(&script);
    let took = started.elapsed();
    assert_eq!(status, 400, "{}", &body[..body.len().min(500)]);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["error"]["code"], "TOO_MANY_STATEMENTS");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than 1000 statements"),
        "{json}"
    );
    // Generous: a quadratic parse of this script took minutes.
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    let (status, body) = server.sql("SHOW DATABASES");
    assert_eq!(status, 200);
    assert!(!body.contains("\"d0\""), "nothing ran: {body}");
}

#[test]
fn a_script_over_the_servers_request_size_prints_the_servers_answer() {
    // Far more than the socket buffers hold: sent without waiting, its write failed with
    // "Broken pipe" once the server had answered 413 and closed, and the answer was lost.
    let server = Server::start(1, &["admin.max-request-size=64kb"]);
    let script = server.data_dir.with_extension("big.sql");
    let text = format!("SHOW DATABASES;{}", " ".repeat(16 << 20));
    std::fs::write(&script, text).unwrap();
    for _ in 0..3 {
        let output = kafluss_sql(&server, &["-f", script.to_str().unwrap()]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "stderr: {err}");
        assert!(
            err.contains("REQUEST_TOO_LARGE") && err.contains("admin.max-request-size"),
            "the server's 413 is printed: {err}"
        );
        assert!(!err.contains("cannot reach"), "{err}");
    }
    let output = kafluss_sql(&server, &["-e", "SHOW DATABASES"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
}

/// A Fluss listener on SASL with the authorizer on: `admin` is a super user, `reader` is not.
const SECURED: [&str; 5] = [
    "security.protocol.map=FLUSS:sasl,KAFKA:sasl",
    "security.sasl.plain.credentials=admin:admin-secret,reader:reader-secret",
    "authorizer.enabled=true",
    "super.users=User:admin",
    // These tests send wrong and right credentials back to back; the login throttle that would
    // answer the right ones 429 for a while is tested in broker_login_throttle.rs.
    "security.login.failure-delay=0",
];

#[test]
fn credentials_from_options_or_environment_under_the_authorizer() {
    let server = Server::start(1, &SECURED);
    let admin = ["--user", "admin", "--password", "admin-secret"];

    let create = "CREATE TABLE fluss.guarded (x INT)";
    let output = kafluss_sql(&server, &[&admin[..], &["-e", create]].concat());
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Table fluss.guarded created\n");

    // The environment variables kafluss scan reads too.
    let env = [("KAFLUSS_USER", "admin"), ("KAFLUSS_PASSWORD", "admin-secret")];
    let output = kafluss_sql_with(&server, &["-e", "SHOW TABLES"], &env, None);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stdout(&output).contains("| guarded "), "{}", stdout(&output));
    let output = kafluss_sql(&server, &["--user", "admin:admin-secret", "-e", "SHOW TABLES"]);
    assert!(output.status.success(), "USER:PASSWORD: {}", stderr(&output));

    // Wrong: refused, naming the user, never the password.
    let output = kafluss_sql(
        &server,
        &["--user", "admin", "--password", "guess", "-e", "SHOW TABLES"],
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("refused the credentials of user 'admin'"), "{err}");
    assert!(err.contains("the server said: AUTHENTICATION_FAILED"), "{err}");
    assert!(!err.contains("guess"), "{err}");
    // Missing: says which options to give.
    let output = kafluss_sql(&server, &["-e", "SHOW TABLES"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("requires credentials: give --user and --password"),
        "{}",
        stderr(&output)
    );
    let output = kafluss_sql(&server, &["--user", "admin", "-e", "SHOW TABLES"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a user without a password is a usage error"
    );

    // Right credentials, no permission: the authorizer's answer, per statement.
    let reader = ["--user", "reader", "--password", "reader-secret"];
    let output = kafluss_sql(
        &server,
        &[&reader[..], &["-e", "DROP TABLE fluss.guarded"]].concat(),
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(
            "AUTHORIZATION_FAILED: principal User:reader is not authorized to DROP table 'fluss.guarded'"
        ),
        "{}",
        stderr(&output)
    );
    let output = kafluss_sql(&server, &[&reader[..], &["-e", "SHOW TABLES"]].concat());
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("not authorized to DESCRIBE database 'fluss'"),
        "SHOW TABLES without any DESCRIBE is refused, not empty: {}",
        stderr(&output)
    );
    // Authorization is checked for each statement when its turn comes: the first runs.
    let grant = "CALL sys.add_acl(resource => 'fluss.guarded', permission => 'ALLOW', \
                 principal => 'User:reader', operation => 'READ', host => '*')";
    assert!(kafluss_sql(&server, &[&admin[..], &["-e", grant]].concat())
        .status
        .success());
    let output = kafluss_sql(
        &server,
        &[
            &reader[..],
            &["-e", "SHOW TABLES; DROP TABLE fluss.guarded; SHOW DATABASES"],
        ]
        .concat(),
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("| guarded "), "{}", stdout(&output));
    assert!(
        stderr(&output)
            .contains("statement 2 (DROP TABLE fluss.guarded) failed; statement 1 before it took effect"),
        "{}",
        stderr(&output)
    );
    assert!(!server.logs().contains("admin-secret"), "secrets never logged");
}

#[test]
fn dynamic_credentials_win_over_the_configuration_and_start_up_says_so() {
    let mut extra = SECURED.to_vec();
    let mut server = Server::start(1, &extra);
    assert!(
        !server.logs().contains("comes from the dynamic configs"),
        "nothing dynamic yet"
    );
    let set = "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', \
               'admin:dynamic-secret')";
    let output = kafluss_sql(
        &server,
        &["--user", "admin", "--password", "admin-secret", "-e", set],
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let data_dir = server.data_dir.clone();
    server.terminate();

    // server.yaml / -D still say admin-secret: the stored dynamic value wins, and the log says
    // which key comes from the data dir, without its value.
    extra[1] = "security.sasl.plain.credentials=admin:static-secret";
    let server = Server::start_in(&data_dir, 1, &extra);
    let logs = server.logs();
    assert!(
        logs.contains(
            "config security.sasl.plain.credentials comes from the dynamic configs stored in the data dir"
        ),
        "{logs}"
    );
    assert!(logs.contains("the configured value is not used"), "{logs}");
    assert!(logs.contains("catalog.json"), "names the store: {logs}");
    assert!(
        !logs.contains("dynamic-secret") && !logs.contains("static-secret"),
        "{logs}"
    );
    let as_admin = |password: &str| {
        kafluss_sql(
            &server,
            &["--user", "admin", "--password", password, "-e", "SHOW DATABASES"],
        )
        .status
        .code()
    };
    assert_eq!(as_admin("static-secret"), Some(1));
    assert_eq!(as_admin("dynamic-secret"), Some(0));
}

#[test]
fn start_up_warns_when_only_the_kafka_listener_requires_sasl() {
    let warning = "Kafka listener KAFKA requires SASL, but Fluss listener FLUSS is plaintext and authorizer.enabled is false";
    let open = Server::start(
        1,
        &[
            "security.protocol.map=KAFKA:sasl",
            "security.sasl.plain.credentials=writer:w",
        ],
    );
    let logs = open.logs();
    let line = logs
        .lines()
        .find(|line| line.contains(warning))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("FLUSS:sasl,KAFKA:sasl"),
        "says how to fix it: {line}"
    );
    drop(open);
    let both = Server::start(1, &SECURED);
    assert!(!both.logs().contains(warning), "{}", both.logs());
}
