//! The catalog executing SQL: the seed's statements, DDL rules, Kafka validation on CREATE
//! and ALTER, topics, drop hooks, ACL and config procedures.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use kafluss_auth::Principal;
use kafluss_broker::catalog::{
    resolve_topic, Catalog, CatalogConfig, Session, SqlError, StatementResult, TableInfo, TopicError,
};

fn open(dir: &std::path::Path) -> Catalog {
    Catalog::open(CatalogConfig::new(dir)).expect("catalog opens")
}

fn anonymous(catalog: &Catalog) -> Session {
    catalog.session(Principal::anonymous(), IpAddr::V4(Ipv4Addr::LOCALHOST))
}

fn run(catalog: &Catalog, sql: &str) -> Vec<StatementResult> {
    let mut session = anonymous(catalog);
    catalog
        .execute(sql, &mut session)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn fails(catalog: &Catalog, sql: &str) -> SqlError {
    let mut session = anonymous(catalog);
    catalog.execute(sql, &mut session).expect_err(sql)
}

fn rows(result: &StatementResult) -> Vec<Vec<String>> {
    match result {
        StatementResult::Rows { rows, .. } => rows.clone(),
        other => panic!("rows expected, got {other:?}"),
    }
}

#[test]
fn seed_statements_run_and_map_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let results = run(&catalog, &kafluss_tests::seed_sql::seed_script());
    assert_eq!(results.len(), 3);
    assert_eq!(results[1], StatementResult::done("Table sales.orders created"));

    let snapshot = catalog.snapshot();
    let table = resolve_topic(&snapshot, "sales.orders", "fluss").unwrap();
    assert_eq!(table.path(), "sales.orders");
    assert_eq!(table.bucket_count, 1);
    assert_eq!(table.log_format, "arrow");
    let mapping = table.kafka.as_ref().unwrap();
    assert_eq!(mapping.system.key, Some(2));
    assert_eq!(mapping.system.headers, Some(3));
    assert_eq!(
        snapshot
            .kafka_topics
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        vec!["sales.orders"]
    );
    assert_eq!(snapshot.resolve_topic("sales.orders").unwrap().id, table.id);
    // The seed's mapping table.
    run(
        &catalog,
        "CREATE TABLE fluss.orders (id BIGINT) WITH ('table.kafka.enabled' = 'true')",
    );
    let snapshot = catalog.snapshot();
    assert_eq!(snapshot.resolve_topic("orders").unwrap().path(), "fluss.orders");
    assert_eq!(
        snapshot.resolve_topic("fluss.orders").unwrap().path(),
        "fluss.orders"
    );
    assert!(matches!(
        snapshot.resolve_topic("warehouse.events"),
        Err(TopicError::UnknownDatabase(db)) if db == "warehouse"
    ));
    assert!(matches!(
        snapshot.resolve_topic("fluss.missing"),
        Err(TopicError::UnknownTable(_))
    ));
    assert!(matches!(
        snapshot.resolve_topic("a.b.c"),
        Err(TopicError::InvalidName(_))
    ));
    let names: Vec<&str> = snapshot.kafka_topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["fluss.orders", "sales.orders"], "sorted");
}

#[test]
fn default_databases_exist() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    assert_eq!(
        rows(&run(&catalog, "SHOW DATABASES")[0]),
        vec![vec!["fluss".to_string()]]
    );

    // Kafka's default database is created even in a non-empty catalog.
    drop(catalog);
    let mut config = CatalogConfig::new(dir.path());
    config.kafka_default_database = "kafka_db".to_string();
    let catalog = Catalog::open(config.clone()).unwrap();
    assert_eq!(
        rows(&run(&catalog, "SHOW DATABASES")[0]),
        vec![vec!["fluss".to_string()], vec!["kafka_db".to_string()]]
    );
    assert_eq!(catalog.snapshot().default_database, "kafka_db");
    // Without Kafka, an empty catalog still gets `fluss`, and nothing else.
    let other = tempfile::tempdir().unwrap();
    config.data_dir = other.path().to_path_buf();
    config.kafka_enabled = false;
    let catalog = Catalog::open(config).unwrap();
    assert_eq!(
        rows(&run(&catalog, "SHOW DATABASES")[0]),
        vec![vec!["fluss".to_string()]]
    );
}

/// The session's current database is `kafka.default.database` whether or not it exists (as
/// Flink's): a name without a database never reaches another database, and the current
/// database is not dropped (DATABASE_IN_USE; `USE` another one first).
#[test]
fn the_current_database_is_the_configured_one_and_is_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    run(
        &catalog,
        "CREATE DATABASE analytics; CREATE TABLE analytics.orders (x INT)",
    );
    for sql in [
        "DROP DATABASE fluss",
        "DROP DATABASE IF EXISTS fluss CASCADE",
        "USE analytics; DROP DATABASE analytics CASCADE",
    ] {
        let error = fails(&catalog, sql);
        assert_eq!(error.code(), "DATABASE_IN_USE", "{sql}: {error}");
        assert_eq!(error.http_status(), 409);
        assert!(error.to_string().contains("is the current database"), "{error}");
    }
    assert!(catalog.snapshot().databases.contains_key("fluss"));
    run(&catalog, "USE analytics; DROP DATABASE fluss");
    let error = fails(&catalog, "DROP TABLE orders");
    assert_eq!(error.code(), "DATABASE_NOT_FOUND");
    assert_eq!(error.to_string(), "database 'fluss' does not exist");
    assert!(catalog.snapshot().table("analytics", "orders").is_some());

    // Without Kafka, `kafka.default.database` is not created at start, and is still the
    // current database: a name without a database is refused rather than put in `fluss`.
    let other = tempfile::tempdir().unwrap();
    let mut config = CatalogConfig::new(other.path());
    config.kafka_enabled = false;
    config.kafka_default_database = "kafka_db".to_string();
    let catalog = Catalog::open(config).unwrap();
    let error = fails(&catalog, "CREATE TABLE t (x INT)");
    assert_eq!(error.code(), "DATABASE_NOT_FOUND");
    assert!(error.to_string().contains("'kafka_db'"), "{error}");
    run(
        &catalog,
        "CREATE TABLE fluss.t (x INT); CREATE DATABASE kafka_db; CREATE TABLE t (x INT)",
    );
    assert!(catalog.snapshot().table("kafka_db", "t").is_some());
}

#[test]
fn bucket_count_comes_from_bucket_num_then_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CatalogConfig::new(dir.path());
    config.default_bucket_number = 3;
    let catalog = Catalog::open(config).unwrap();
    run(
        &catalog,
        "CREATE TABLE a (x INT) WITH ('bucket.num' = '5'); CREATE TABLE b (x INT)",
    );
    let snapshot = catalog.snapshot();
    assert_eq!(snapshot.table("fluss", "a").unwrap().bucket_count, 5);
    assert_eq!(snapshot.table("fluss", "b").unwrap().bucket_count, 3);
    assert_eq!(snapshot.table("fluss", "b").unwrap().options["bucket.num"], "3");
    for bad in ["0", "-1", "x", "100000"] {
        let error = fails(
            &catalog,
            &format!("CREATE TABLE c (x INT) WITH ('bucket.num' = '{bad}')"),
        );
        assert_eq!(error.code(), "INVALID_TABLE", "{error}");
        assert!(error.to_string().contains("bucket.num"), "{error}");
    }
    let error = fails(&catalog, "ALTER TABLE a SET ('bucket.num' = '6')");
    assert!(
        error.to_string().contains("'bucket.num' cannot be altered"),
        "{error}"
    );
    run(&catalog, "ALTER TABLE a SET ('bucket.num' = '5')");
}

/// `ALTER ... SET` of an option fixed at CREATE compares the value in effect, not the text:
/// `'bucket.num' = '01'` on a 1-bucket table and `'table.log.format' = 'arrow'` on a table
/// without the option (or created with `'ARROW'`) were refused as alterations. They change
/// nothing (the stored text stays, so SHOW CREATE TABLE shows what CREATE stored); another
/// value is still refused, naming the one in effect.
#[test]
fn setting_a_fixed_option_to_its_value_in_effect_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    run(
        &catalog,
        "CREATE TABLE a (x INT); CREATE TABLE b (x INT) WITH ('table.log.format' = 'ARROW'); \
         CREATE TABLE c (x INT) WITH ('table.log.format' = 'indexed', 'bucket.num' = '12')",
    );
    let before = catalog.snapshot();
    for sql in [
        "ALTER TABLE a SET ('bucket.num' = '01')",
        "ALTER TABLE a SET ('bucket.num' = ' 1 ')",
        "ALTER TABLE a SET ('bucket.num' = '1')",
        "ALTER TABLE a SET ('table.log.format' = 'arrow')",
        "ALTER TABLE a SET ('table.log.format' = ' Arrow ')",
        "ALTER TABLE b SET ('table.log.format' = 'arrow')",
        "ALTER TABLE c SET ('table.log.format' = 'INDEXED', 'bucket.num' = '012')",
    ] {
        run(&catalog, sql);
    }
    let snapshot = catalog.snapshot();
    for table in ["a", "b", "c"] {
        assert_eq!(
            snapshot.table("fluss", table).unwrap().options,
            before.table("fluss", table).unwrap().options,
            "{table}: the stored options stay"
        );
    }
    let shown = run(&catalog, "SHOW CREATE TABLE b");
    let StatementResult::Rows { rows, .. } = &shown[0] else {
        panic!("{shown:?}")
    };
    let text = rows[0][0].clone();
    assert!(text.contains("'table.log.format' = 'ARROW'"), "{text}");
    assert!(text.contains("'bucket.num' = '1'"), "{text}");

    // With another option, that one changes.
    run(
        &catalog,
        "ALTER TABLE a SET ('bucket.num' = '01', 'table.log.ttl' = '1d')",
    );
    let snapshot = catalog.snapshot();
    let options = &snapshot.table("fluss", "a").unwrap().options;
    assert_eq!(options["bucket.num"], "1");
    assert_eq!(options["table.log.ttl"], "1d");
    assert!(!options.contains_key("table.log.format"));

    for (sql, says) in [
        (
            "ALTER TABLE a SET ('bucket.num' = '2')",
            "option 'bucket.num' cannot be altered: it is fixed at CREATE ('1' for this table)",
        ),
        (
            "ALTER TABLE a SET ('table.log.format' = 'indexed')",
            "option 'table.log.format' cannot be altered: it is fixed at CREATE ('arrow' for this table)",
        ),
        (
            "ALTER TABLE c SET ('table.log.format' = 'arrow')",
            "option 'table.log.format' cannot be altered: it is fixed at CREATE ('indexed' for this table)",
        ),
        (
            "ALTER TABLE a SET ('bucket.num' = '0')",
            "'bucket.num' must be an integer between 1 and 1024",
        ),
        (
            "ALTER TABLE a SET ('table.log.format' = 'parquet')",
            "'table.log.format' must be one of",
        ),
        (
            "ALTER TABLE a RESET ('table.log.format')",
            "option 'table.log.format' cannot be reset",
        ),
    ] {
        let error = fails(&catalog, sql);
        assert_eq!(error.code(), "INVALID_TABLE", "{sql}: {error}");
        assert!(error.to_string().contains(says), "{sql}: {error}");
    }
}

#[test]
fn create_refuses_invalid_kafka_tables_with_the_column_path() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let error = fails(
        &catalog,
        "CREATE TABLE t (customer ROW<items ARRAY<ROW<qty INT NOT NULL>>>) WITH ('table.kafka.enabled' = 'true')",
    );
    assert_eq!(error.code(), "INVALID_KAFKA_MAPPING");
    assert_eq!(error.http_status(), 400);
    assert!(
        error
            .to_string()
            .contains("'customer.items[].qty' must be nullable"),
        "{error}"
    );
    let error = fails(
        &catalog,
        "CREATE TABLE t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('table.kafka.enabled' = 'true')",
    );
    assert!(error.to_string().contains("primary key"), "{error}");
    let error = fails(
        &catalog,
        "CREATE TABLE t (id BIGINT, dt STRING) PARTITIONED BY (dt) WITH ('table.kafka.enabled' = 'true')",
    );
    assert!(error.to_string().contains("partitioned"), "{error}");
    let error = fails(
        &catalog,
        "CREATE TABLE t (id BIGINT) WITH ('table.kafka.enabled' = 'true', 'table.log.format' = 'indexed')",
    );
    assert!(
        error.to_string().contains("'table.log.format' = 'arrow'"),
        "{error}"
    );
    let error = fails(
        &catalog,
        "CREATE TABLE t (id BIGINT) WITH ('table.kafka.enabld' = 'true')",
    );
    assert!(
        error
            .to_string()
            .contains("unknown table option 'table.kafka.enabld'"),
        "{error}"
    );
    let long_db = "d".repeat(150);
    run(&catalog, &format!("CREATE DATABASE {long_db}"));
    let long_table = "t".repeat(100);
    let error = fails(
        &catalog,
        &format!("CREATE TABLE {long_db}.{long_table} (id BIGINT) WITH ('table.kafka.enabled' = 'true')"),
    );
    assert!(error.to_string().contains("Kafka allows at most 249"), "{error}");
    run(
        &catalog,
        &format!("CREATE TABLE {long_db}.{long_table} (id BIGINT)"),
    );
    assert!(
        catalog.snapshot().table("fluss", "t").is_none(),
        "nothing was created"
    );
    // Disabled tables are not Kafka-validated.
    run(
        &catalog,
        "CREATE TABLE t (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)",
    );
    assert!(matches!(
        catalog.snapshot().resolve_topic("t"),
        Err(TopicError::MappingDisabled(_))
    ));
}

/// An option key written like one kafluss reads but for case or surrounding spaces was stored
/// as an unknown option: `'TABLE.KAFKA.ENABLED' = 'true'` left the table silently unmapped,
/// `' bucket.num' = '4'` silently one bucket. Each is refused with the error kind of its
/// option, naming the key as given and as it must be written, at CREATE, SET and RESET.
#[test]
fn option_keys_in_another_case_or_with_spaces_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let kafka = [
        ("TABLE.KAFKA.ENABLED", "table.kafka.enabled"),
        ("Table.Kafka.Enabled", "table.kafka.enabled"),
        (" table.kafka.enabled", "table.kafka.enabled"),
        (
            "table.kafka.convert.value.type ",
            "table.kafka.convert.value.type",
        ),
    ];
    let table = [
        ("BUCKET.NUM", "bucket.num"),
        (" bucket.num", "bucket.num"),
        ("Table.Log.Format", "table.log.format"),
        ("table.log.TTL", "table.log.ttl"),
        (
            "TABLE.LOG.ARROW.COMPRESSION.TYPE",
            "table.log.arrow.compression.type",
        ),
        (
            "table.log.arrow.compression.zstd.level\n",
            "table.log.arrow.compression.zstd.level",
        ),
    ];
    run(
        &catalog,
        "CREATE TABLE t (x INT) WITH ('table.kafka.enabled' = 'true')",
    );
    let before = catalog.snapshot().table("fluss", "t").unwrap().clone();
    for (code, cases) in [
        ("INVALID_KAFKA_MAPPING", &kafka[..]),
        ("INVALID_TABLE", &table[..]),
    ] {
        for (key, expected) in cases {
            let value = match *expected {
                "table.kafka.enabled" => "true",
                "table.kafka.convert.value.type" => "string",
                _ => "1",
            };
            for sql in [
                format!("CREATE TABLE u (x INT) WITH ('{key}' = '{value}')"),
                format!("CREATE TABLE u (x INT) WITH ('{expected}' = '{value}', '{key}' = '{value}')"),
                format!("ALTER TABLE t SET ('{key}' = '{value}')"),
                format!("ALTER TABLE t RESET ('{key}')"),
            ] {
                let error = fails(&catalog, &sql);
                assert_eq!(error.code(), code, "{sql}: {error}");
                let message = error.to_string();
                assert!(
                    message.contains(&format!("option '{key}' must be written '{expected}'")),
                    "{message}"
                );
            }
        }
    }
    assert!(catalog.snapshot().table("fluss", "u").is_none());
    assert_eq!(
        **catalog.snapshot().table("fluss", "t").unwrap(),
        *before,
        "unchanged"
    );
    // Keys kafluss does not read are still stored as given, in any case.
    run(
        &catalog,
        "CREATE TABLE v (x INT) WITH ('Owner.Team' = 'a', 'table.log.tiered.local-segments' = '2')",
    );
    assert_eq!(
        catalog.snapshot().table("fluss", "v").unwrap().options["Owner.Team"],
        "a"
    );
    run(&catalog, "ALTER TABLE v RESET ('OWNER.TEAM', 'nonexistent')");
}

#[test]
fn alter_revalidates_the_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    run(&catalog, "CREATE TABLE events (id BIGINT NOT NULL, body STRING)");
    let before = catalog.snapshot().table("fluss", "events").unwrap().clone();
    let error = fails(
        &catalog,
        "ALTER TABLE events SET ('table.kafka.enabled' = 'true')",
    );
    assert_eq!(error.code(), "INVALID_KAFKA_MAPPING");
    assert!(error.to_string().contains("'id' must be nullable"), "{error}");
    assert_eq!(
        **catalog.snapshot().table("fluss", "events").unwrap(),
        *before,
        "unchanged"
    );

    run(
        &catalog,
        "CREATE TABLE logs (_kafka_value BYTES, _kafka_key BYTES)",
    );
    let error = fails(&catalog, "ALTER TABLE logs SET ('table.kafka.enabled' = 'true')");
    assert!(error.to_string().contains("flat JSON layout"), "{error}");
    run(
        &catalog,
        "ALTER TABLE logs SET ('table.kafka.enabled' = 'true', 'table.kafka.convert.value.type' = 'BINARY')",
    );
    let logs = catalog.snapshot().resolve_topic("logs").unwrap();
    assert!(logs.revision > before.revision);
    // Changing the value type re-validates: STRING needs a STRING value column.
    let error = fails(
        &catalog,
        "ALTER TABLE logs SET ('table.kafka.convert.value.type' = 'string')",
    );
    assert!(error.to_string().contains("must have type STRING"), "{error}");
    // RESET disables again.
    run(&catalog, "ALTER TABLE logs RESET ('table.kafka.enabled')");
    assert!(matches!(
        catalog.snapshot().resolve_topic("logs"),
        Err(TopicError::MappingDisabled(_))
    ));
    assert!(catalog.snapshot().kafka_topics.is_empty());
    let error = fails(&catalog, "ALTER TABLE missing SET ('a' = 'b')");
    assert_eq!(error.code(), "TABLE_NOT_FOUND");
}

#[test]
fn drop_table_calls_the_hook_and_ids_are_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let dropped: Arc<Mutex<Vec<TableInfo>>> = Arc::default();
    let sink = Arc::clone(&dropped);
    catalog.set_table_dropped_hook(Arc::new(move |table: &TableInfo| {
        sink.lock().unwrap().push(table.clone())
    }));
    run(
        &catalog,
        "CREATE TABLE t (x INT) WITH ('table.kafka.enabled' = 'true')",
    );
    let first = catalog.snapshot().resolve_topic("t").unwrap();
    run(&catalog, "DROP TABLE t");
    assert_eq!(dropped.lock().unwrap().len(), 1);
    assert_eq!(dropped.lock().unwrap()[0].id, first.id);
    assert_eq!(
        dropped.lock().unwrap()[0].relative_dir().unwrap(),
        std::path::Path::new("fluss").join(format!("t-{}", first.id))
    );
    assert!(matches!(
        catalog.snapshot().resolve_topic("t"),
        Err(TopicError::UnknownTable(_))
    ));
    run(
        &catalog,
        "CREATE TABLE t (x INT) WITH ('table.kafka.enabled' = 'true')",
    );
    let second = catalog.snapshot().resolve_topic("t").unwrap();
    assert_ne!(second.id, first.id);
    assert_ne!(second.topic_id, first.topic_id);
    assert_eq!(fails(&catalog, "DROP TABLE nope").code(), "TABLE_NOT_FOUND");
    run(&catalog, "DROP TABLE IF EXISTS nope");
    assert_eq!(dropped.lock().unwrap().len(), 1);

    run(
        &catalog,
        "CREATE DATABASE d; CREATE TABLE d.a (x INT); CREATE TABLE d.b (x INT)",
    );
    let error = fails(&catalog, "DROP DATABASE d");
    assert_eq!(error.code(), "DATABASE_NOT_EMPTY");
    run(&catalog, "DROP DATABASE d CASCADE");
    let names: Vec<String> = dropped.lock().unwrap().iter().map(|t| t.path()).collect();
    assert_eq!(names, vec!["fluss.t", "d.a", "d.b"]);
    assert!(!catalog.snapshot().databases.contains_key("d"));
}

#[test]
fn a_log_ttl_too_large_says_so_with_the_largest() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    for ttl in ["99999999999999999d", "99999999999999999999999s"] {
        let error = fails(
            &catalog,
            &format!("CREATE TABLE u (a INT) WITH ('table.log.ttl' = '{ttl}')"),
        );
        assert_eq!(error.code(), "INVALID_TABLE", "{ttl}: {error}");
        let message = error.to_string();
        // It said "must be a positive duration".
        assert!(message.contains("too large"), "{ttl}: {message}");
        assert!(message.contains("at most"), "{ttl}: {message}");
        assert!(!message.contains("positive"), "{ttl}: {message}");
    }
    let error = fails(&catalog, "CREATE TABLE u (a INT) WITH ('table.log.ttl' = '0s')");
    assert!(error.to_string().contains("positive duration"), "{error}");
    run(
        &catalog,
        "CREATE TABLE u (a INT) WITH ('table.log.ttl' = '213503982d')",
    );
}

#[test]
fn ddl_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    run(&catalog, "CREATE DATABASE sales; CREATE TABLE sales.t (x INT)");
    let cases = [
        ("CREATE DATABASE sales", "DATABASE_ALREADY_EXISTS"),
        ("CREATE TABLE sales.t (y INT)", "TABLE_ALREADY_EXISTS"),
        ("CREATE TABLE nodb.t (y INT)", "DATABASE_NOT_FOUND"),
        ("CREATE TABLE u (a INT, a STRING)", "INVALID_TABLE"),
        ("CREATE TABLE u (a ROW<b INT, b INT>)", "INVALID_TABLE"),
        (
            "CREATE TABLE u (a INT, PRIMARY KEY (b) NOT ENFORCED)",
            "INVALID_TABLE",
        ),
        ("CREATE TABLE u (a INT) PARTITIONED BY (z)", "INVALID_TABLE"),
        (
            "CREATE TABLE u (a INT) WITH ('k' = '1', 'k' = '2')",
            "INVALID_TABLE",
        ),
        (
            "CREATE TABLE u (a INT) WITH ('table.log.format' = 'parquet')",
            "INVALID_TABLE",
        ),
        (
            "CREATE TABLE u (a INT) WITH ('table.log.ttl' = 'forever')",
            "INVALID_TABLE",
        ),
        (
            "ALTER TABLE sales.t SET ('table.log.ttl' = '0s')",
            "INVALID_TABLE",
        ),
        ("CREATE TABLE `a.b` (a INT)", "INVALID_NAME"),
        ("CREATE DATABASE __internal", "INVALID_NAME"),
        ("USE nowhere", "DATABASE_NOT_FOUND"),
        ("DESCRIBE sales.none", "TABLE_NOT_FOUND"),
        ("SHOW TABLES FROM nowhere", "DATABASE_NOT_FOUND"),
        ("CREATE TABEL x", "SYNTAX_ERROR"),
        ("CALL sys.nope()", "INVALID_PROCEDURE_CALL"),
        ("CALL other.add_acl()", "INVALID_PROCEDURE_CALL"),
    ];
    for (sql, code) in cases {
        let error = fails(&catalog, sql);
        assert_eq!(error.code(), code, "{sql}: {error}");
    }
    assert_eq!(fails(&catalog, "CREATE DATABASE sales").http_status(), 409);
    assert_eq!(fails(&catalog, "USE nowhere").http_status(), 404);
    run(
        &catalog,
        "CREATE DATABASE IF NOT EXISTS sales; CREATE TABLE IF NOT EXISTS sales.t (y INT)",
    );
    assert_eq!(
        catalog.snapshot().table("sales", "t").unwrap().schema.columns[0].name,
        "x",
        "IF NOT EXISTS left the table alone"
    );
}

#[test]
fn script_errors_name_the_statement_and_keep_earlier_work() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let error = fails(
        &catalog,
        "CREATE DATABASE one;\n\nCREATE DATABASE one;\nCREATE DATABASE two",
    );
    assert_eq!(error.code(), "DATABASE_ALREADY_EXISTS");
    assert!(error.to_string().starts_with("statement 2 (line 3): "), "{error}");
    let snapshot = catalog.snapshot();
    assert!(snapshot.databases.contains_key("one"));
    assert!(!snapshot.databases.contains_key("two"), "stopped at the error");
    // A syntax error anywhere runs nothing.
    let error = fails(&catalog, "CREATE DATABASE three; CREATE DATABSE four");
    assert_eq!(error.code(), "SYNTAX_ERROR");
    assert!(error.to_string().contains("line 1, column 31"), "{error}");
    assert!(!catalog.snapshot().databases.contains_key("three"));
}

#[test]
fn use_show_describe_and_show_create_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = anonymous(&catalog);
    catalog
        .execute(
            "CREATE DATABASE shop; USE shop; CREATE TABLE `odd-name` (
                id BIGINT NOT NULL,
                `my col` INT,
                ts TIMESTAMP(3) WITH LOCAL TIME ZONE,
                tags MAP<STRING, ARRAY<DECIMAL(10, 2)>>,
                dt STRING,
                PRIMARY KEY (id, dt) NOT ENFORCED
            ) PARTITIONED BY (dt) WITH ('bucket.num' = '2', 'note' = 'it''s')",
            &mut session,
        )
        .unwrap();
    assert_eq!(session.current_db, "shop");
    let results = catalog
        .execute(
            "SHOW TABLES; DESCRIBE `odd-name`; SHOW CREATE TABLE shop.`odd-name`",
            &mut session,
        )
        .unwrap();
    assert_eq!(rows(&results[0]), vec![vec!["odd-name".to_string()]]);
    let described = rows(&results[1]);
    assert_eq!(described[0], vec!["id", "BIGINT", "FALSE", "PRI(id, dt)"]);
    assert_eq!(described[1], vec!["my col", "INT", "TRUE", ""]);
    assert_eq!(described[2], vec!["ts", "TIMESTAMP_LTZ(3)", "TRUE", ""]);
    assert_eq!(described[4][2], "FALSE", "primary key columns become NOT NULL");
    let create = rows(&results[2])[0][0].clone();
    assert!(
        create.contains("CREATE TABLE shop.`odd-name` (") && create.contains("`my col` INT,"),
        "{create}"
    );
    assert!(create.contains("PRIMARY KEY (id, dt) NOT ENFORCED"), "{create}");
    assert!(create.contains("'note' = 'it''s'"), "{create}");

    let original = catalog.snapshot().table("shop", "odd-name").unwrap().clone();
    catalog.execute("DROP TABLE `odd-name`", &mut session).unwrap();
    catalog.execute(&create, &mut session).unwrap();
    let recreated = catalog.snapshot().table("shop", "odd-name").unwrap().clone();
    assert_eq!(recreated.schema, original.schema);
    assert_eq!(recreated.options, original.options);
    assert_eq!(recreated.primary_key, original.primary_key);
    assert_eq!(recreated.partition_keys, original.partition_keys);
}

#[test]
fn concurrent_ddl_loses_nothing_while_readers_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(open(dir.path()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (catalog, stop) = (Arc::clone(&catalog), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut last_revision = 0;
            let mut loads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let snapshot = catalog.snapshot();
                assert!(snapshot.revision >= last_revision, "snapshots never go back");
                last_revision = snapshot.revision;
                for topic in &snapshot.kafka_topics {
                    assert_eq!(snapshot.resolve_topic(&topic.name).unwrap().id, topic.table.id);
                }
                loads += 1;
            }
            loads
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let catalog = Arc::clone(&catalog);
            std::thread::spawn(move || {
                for i in 0..25 {
                    run(
                        &catalog,
                        &format!("CREATE TABLE t_{writer}_{i} (x INT) WITH ('table.kafka.enabled' = 'true')"),
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);

    let snapshot = catalog.snapshot();
    assert_eq!(snapshot.kafka_topics.len(), 100);
    let ids: std::collections::BTreeSet<u64> = snapshot.tables().map(|t| t.id).collect();
    assert_eq!(ids.len(), 100, "ids are unique");
    drop(catalog);
    let reopened = open(dir.path());
    assert_eq!(
        reopened.snapshot().kafka_topics.len(),
        100,
        "every change was stored"
    );
}

/// A key of 64 columns is taken and DESCRIBE names it on each of them; 65 are refused, and so
/// are 10,001 columns, with messages naming the bound (each key column's DESCRIBE line names
/// the whole key, so an unbounded key made its answer grow with the square of its length).
#[test]
fn keys_and_columns_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let create = |columns: usize, key: usize| {
        let list: Vec<String> = (0..columns).map(|i| format!("c{i} INT")).collect();
        let keys: Vec<String> = (0..key).map(|i| format!("c{i}")).collect();
        format!(
            "CREATE TABLE t{columns}_{key} ({}, PRIMARY KEY ({}) NOT ENFORCED)",
            list.join(", "),
            keys.join(", ")
        )
    };
    run(&catalog, &create(100, 64));
    let described = run(&catalog, "DESCRIBE t100_64");
    let lines = rows(&described[0]);
    let keyed = lines
        .iter()
        .filter(|line| line.iter().any(|cell| cell.starts_with("PRI(")))
        .count();
    assert_eq!(keyed, 64);
    let error = fails(&catalog, &create(100, 65)).to_string();
    assert!(error.contains("65 columns; at most 64"), "{error}");
    let error = fails(&catalog, &create(10_001, 1)).to_string();
    assert!(error.contains("10001 columns; at most 10000"), "{error}");
    let error = fails(&catalog, "CREATE TABLE p (a INT, b INT) PARTITIONED BY (a, b, a)").to_string();
    assert!(error.contains("names column 'a' twice"), "{error}");
}

/// DROP and CREATE of one name from several threads at once: every table that leaves the
/// catalog goes through the dropped hook (which closes its logs and deletes its directory).
/// The DROP read the snapshot before taking the catalog's lock, so a table created under the
/// name meanwhile was removed from the catalog and never dropped (leaked for good). The same
/// with DROP DATABASE ... CASCADE against CREATE TABLE in that database.
#[test]
fn concurrent_drops_and_creates_drop_every_table_they_remove() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(open(dir.path()));
    let dropped: Arc<Mutex<Vec<u64>>> = Arc::default();
    let sink = Arc::clone(&dropped);
    catalog.set_table_dropped_hook(Arc::new(move |table: &TableInfo| {
        sink.lock().unwrap().push(table.id)
    }));
    run(&catalog, "CREATE DATABASE d");
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let catalog = Arc::clone(&catalog);
            std::thread::spawn(move || {
                for _ in 0..60 {
                    let script = match worker {
                        0 => "DROP DATABASE IF EXISTS d CASCADE; CREATE DATABASE IF NOT EXISTS d",
                        1 => "CREATE TABLE IF NOT EXISTS d.x (v INT)",
                        _ => "DROP TABLE IF EXISTS fluss.r; CREATE TABLE IF NOT EXISTS fluss.r (v INT)",
                    };
                    let mut session = anonymous(&catalog);
                    let _ = catalog.run_script(script, &mut session);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let live: Vec<u64> = catalog.snapshot().tables().map(|table| table.id).collect();
    let dropped = dropped.lock().unwrap().clone();
    let max = live.iter().chain(&dropped).copied().max().unwrap_or(0);
    // Ids are handed out in order, one per created table: each is live or was dropped, once.
    let created = (0..=max)
        .filter(|id| live.contains(id) || dropped.contains(id))
        .count();
    let mut unique = dropped.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), dropped.len(), "a table dropped twice: {dropped:?}");
    let leaked: Vec<u64> = (1..=max)
        .filter(|id| !live.contains(id) && !dropped.contains(id))
        .collect();
    assert!(
        leaked.is_empty(),
        "removed from the catalog but never dropped: {leaked:?} ({created} seen)"
    );
}
