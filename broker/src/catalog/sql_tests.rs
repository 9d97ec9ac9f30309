use super::super::sql_lexer::SCANNED;
use super::*;
use kafluss_convert::types::{DataType, FieldType};

fn one(text: &str) -> Statement {
    parse_statement(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn parse_error(text: &str) -> SyntaxError {
    parse_script(text).expect_err("must not parse")
}

fn name(database: Option<&str>, table: &str) -> ObjectName {
    ObjectName {
        database: database.map(str::to_string),
        name: table.to_string(),
    }
}

fn n(data_type: DataType) -> FieldType {
    FieldType::nullable(data_type)
}

#[test]
fn seed_statements_parse_verbatim() {
    let script = kafluss_tests::seed_sql::seed_script();
    let statements = parse_script(&script).unwrap();
    assert_eq!(statements.len(), 3);
    assert_eq!(
        statements[0].statement,
        Statement::CreateDatabase {
            name: "sales".into(),
            if_not_exists: true
        }
    );
    assert_eq!(statements[1].line, 3);
    let Statement::CreateTable(create) = &statements[1].statement else {
        panic!("create table")
    };
    assert_eq!(create.table, name(Some("sales"), "orders"));
    assert_eq!(
        create.columns,
        vec![
            Field::new("order_id", n(DataType::BigInt)),
            Field::new(
                "amount",
                n(DataType::Decimal {
                    precision: 18,
                    scale: 2
                })
            ),
            Field::new("_kafka_key", n(DataType::Bytes)),
            Field::new(
                "_kafka_headers",
                n(DataType::Map {
                    key: Box::new(FieldType::not_null(DataType::String)),
                    value: Box::new(n(DataType::Bytes)),
                })
            ),
        ]
    );
    assert_eq!(
        create.options,
        vec![("table.kafka.enabled".into(), "true".into())]
    );
    assert_eq!(
        statements[2].statement,
        Statement::AlterTableSet {
            table: name(Some("sales"), "orders"),
            options: vec![("table.kafka.enabled".into(), "true".into())],
        }
    );
    assert_eq!(statements[2].line, 12);
}

#[test]
fn every_type_parses() {
    let cases: Vec<(&str, DataType)> = vec![
        ("BOOLEAN", DataType::Boolean),
        ("TINYINT", DataType::TinyInt),
        ("SMALLINT", DataType::SmallInt),
        ("INT", DataType::Int),
        ("INTEGER", DataType::Int),
        ("BIGINT", DataType::BigInt),
        ("FLOAT", DataType::Float),
        ("DOUBLE", DataType::Double),
        ("DOUBLE PRECISION", DataType::Double),
        (
            "DECIMAL(38, 10)",
            DataType::Decimal {
                precision: 38,
                scale: 10,
            },
        ),
        (
            "DECIMAL",
            DataType::Decimal {
                precision: 10,
                scale: 0,
            },
        ),
        (
            "NUMERIC(5)",
            DataType::Decimal {
                precision: 5,
                scale: 0,
            },
        ),
        ("CHAR(3)", DataType::Char(3)),
        ("CHAR", DataType::Char(1)),
        ("STRING", DataType::String),
        ("VARCHAR(100)", DataType::String),
        ("BINARY(16)", DataType::Binary(16)),
        ("BYTES", DataType::Bytes),
        ("VARBINARY(9)", DataType::Bytes),
        ("DATE", DataType::Date),
        ("TIME", DataType::Time(0)),
        ("TIME(3)", DataType::Time(3)),
        ("TIMESTAMP", DataType::Timestamp(6)),
        ("TIMESTAMP(3)", DataType::Timestamp(3)),
        ("TIMESTAMP(9) WITHOUT TIME ZONE", DataType::Timestamp(9)),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", DataType::TimestampLtz(3)),
        ("TIMESTAMP WITH LOCAL TIME ZONE", DataType::TimestampLtz(6)),
        ("TIMESTAMP_LTZ(3)", DataType::TimestampLtz(3)),
        ("TIMESTAMP_LTZ", DataType::TimestampLtz(6)),
        ("ARRAY<INT>", DataType::Array(Box::new(n(DataType::Int)))),
        (
            "MAP<STRING, ARRAY<BIGINT NOT NULL>>",
            DataType::Map {
                key: Box::new(FieldType::not_null(DataType::String)),
                value: Box::new(n(DataType::Array(Box::new(FieldType::not_null(
                    DataType::BigInt,
                ))))),
            },
        ),
        (
            "ROW<timestamp TIMESTAMP_LTZ(3), timestamp_type INT, `partition` INT NOT NULL>",
            DataType::Row(vec![
                Field::new("timestamp", n(DataType::TimestampLtz(3))),
                Field::new("timestamp_type", n(DataType::Int)),
                Field::new("partition", FieldType::not_null(DataType::Int)),
            ]),
        ),
        (
            "ROW(a INT, b STRING)",
            DataType::Row(vec![
                Field::new("a", n(DataType::Int)),
                Field::new("b", n(DataType::String)),
            ]),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_type(text), Ok(n(expected.clone())), "{text}");
        let not_null = format!("{text} NOT NULL");
        assert_eq!(
            parse_type(&not_null),
            Ok(FieldType::not_null(expected.clone())),
            "{not_null}"
        );
        assert_eq!(
            parse_type(&text.to_lowercase()),
            Ok(n(expected.clone())),
            "lowercase {text}"
        );
        // What the catalog persists parses back to the same type.
        let printed = FieldType::not_null(expected.clone()).to_string();
        assert_eq!(
            parse_type(&printed),
            Ok(FieldType::not_null(expected)),
            "{printed}"
        );
    }
}

#[test]
fn type_ranges_are_checked() {
    for (text, message) in [
        ("DECIMAL(0, 0)", "precision 0 out of range"),
        ("DECIMAL(39, 2)", "precision 39 out of range"),
        ("DECIMAL(5, 6)", "scale 6 out of range"),
        ("TIMESTAMP(10)", "precision 10 out of range"),
        ("TIME(12)", "precision 12 out of range"),
        ("CHAR(0)", "CHAR length must be at least 1"),
        ("BINARY(0)", "BINARY length must be at least 1"),
        ("CHAR(99999999999)", "too large"),
        ("INTT", "expected a type, found 'INTT'"),
        ("MAP<STRING>", "expected ','"),
        ("ARRAY<INT", "expected '>', found end of input"),
        ("ROW<>", "expected an identifier, found '>'"),
    ] {
        let error = parse_type(text).expect_err(text);
        assert!(error.message.contains(message), "{text}: {error}");
        assert_eq!(error.line, 1);
    }
}

#[test]
fn deeply_nested_types_are_refused_without_overflowing() {
    let deep = format!("{}INT{}", "ARRAY<".repeat(5000), ">".repeat(5000));
    let error = parse_type(&deep).unwrap_err();
    assert!(error.message.contains("nest deeper than 100"), "{error}");
    let ok = format!("{}INT{}", "ARRAY<".repeat(90), ">".repeat(90));
    assert!(parse_type(&ok).is_ok());
}

#[test]
fn every_statement_parses() {
    let cases: Vec<(&str, Statement)> = vec![
        (
            "CREATE DATABASE db",
            Statement::CreateDatabase {
                name: "db".into(),
                if_not_exists: false,
            },
        ),
        (
            "DROP DATABASE IF EXISTS db CASCADE",
            Statement::DropDatabase {
                name: "db".into(),
                if_exists: true,
                cascade: true,
            },
        ),
        (
            "DROP DATABASE db RESTRICT",
            Statement::DropDatabase {
                name: "db".into(),
                if_exists: false,
                cascade: false,
            },
        ),
        ("SHOW DATABASES", Statement::ShowDatabases),
        (
            "ALTER TABLE t RESET ('table.kafka.enabled', 'x')",
            Statement::AlterTableReset {
                table: name(None, "t"),
                keys: vec!["table.kafka.enabled".into(), "x".into()],
            },
        ),
        (
            "DROP TABLE IF EXISTS db.t",
            Statement::DropTable {
                table: name(Some("db"), "t"),
                if_exists: true,
            },
        ),
        (
            "DROP TABLE t",
            Statement::DropTable {
                table: name(None, "t"),
                if_exists: false,
            },
        ),
        ("SHOW TABLES", Statement::ShowTables { database: None }),
        (
            "SHOW TABLES FROM sales",
            Statement::ShowTables {
                database: Some("sales".into()),
            },
        ),
        (
            "SHOW TABLES IN sales",
            Statement::ShowTables {
                database: Some("sales".into()),
            },
        ),
        (
            "DESCRIBE sales.orders",
            Statement::Describe {
                table: name(Some("sales"), "orders"),
            },
        ),
        (
            "DESC orders",
            Statement::Describe {
                table: name(None, "orders"),
            },
        ),
        (
            "SHOW CREATE TABLE sales.orders",
            Statement::ShowCreateTable {
                table: name(Some("sales"), "orders"),
            },
        ),
        (
            "USE sales",
            Statement::Use {
                database: "sales".into(),
            },
        ),
        (
            "CALL sys.add_acl(resource => 'CLUSTER', permission => 'ALLOW', principal => 'User:x', operation => 'WRITE', host => '*')",
            Statement::Call {
                namespace: "sys".into(),
                procedure: "add_acl".into(),
                arguments: ["resource", "permission", "principal", "operation", "host"]
                    .iter()
                    .zip(["CLUSTER", "ALLOW", "User:x", "WRITE", "*"])
                    .map(|(k, v)| CallArgument {
                        name: Some(k.to_string()),
                        values: vec![v.to_string()],
                    })
                    .collect(),
            },
        ),
        (
            "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'writer:new-secret')",
            Statement::Call {
                namespace: "sys".into(),
                procedure: "set_cluster_configs".into(),
                arguments: vec![CallArgument {
                    name: Some("config_pairs".into()),
                    values: vec![
                        "security.sasl.plain.credentials".into(),
                        "writer:new-secret".into(),
                    ],
                }],
            },
        ),
        (
            "CALL sys.get_cluster_configs()",
            Statement::Call {
                namespace: "sys".into(),
                procedure: "get_cluster_configs".into(),
                arguments: vec![],
            },
        ),
        (
            "call SYS.list_acl('ANY')",
            Statement::Call {
                namespace: "SYS".into(),
                procedure: "list_acl".into(),
                arguments: vec![CallArgument {
                    name: None,
                    values: vec!["ANY".into()],
                }],
            },
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(one(text), expected, "{text}");
        assert_eq!(one(&format!("{text};")), expected, "{text};");
    }
}

#[test]
fn create_table_with_every_clause() {
    let statement = one("create table if not exists `my db`.`weird``name` (
            id BIGINT NOT NULL,
            `select` STRING,
            dt STRING,
            CONSTRAINT pk PRIMARY KEY (id, dt) NOT ENFORCED
        ) partitioned by (dt) with ('bucket.num' = '4', 'k' = 'it''s')");
    let Statement::CreateTable(create) = statement else {
        panic!("create table")
    };
    assert!(create.if_not_exists);
    assert_eq!(create.table, name(Some("my db"), "weird`name"));
    assert_eq!(create.columns.len(), 3);
    assert_eq!(create.columns[1].name, "select");
    assert_eq!(create.primary_key, vec!["id", "dt"]);
    assert_eq!(create.partition_keys, vec!["dt"]);
    assert_eq!(
        create.options,
        vec![("bucket.num".into(), "4".into()), ("k".into(), "it's".into())]
    );
    let Statement::CreateTable(bare) =
        one("CREATE TABLE t (primary INT, PRIMARY KEY (primary) NOT ENFORCED)")
    else {
        panic!("create table")
    };
    assert_eq!(bare.columns[0].name, "primary");
    assert_eq!(bare.primary_key, vec!["primary"]);
}

#[test]
fn keywords_are_case_insensitive() {
    assert_eq!(one("show databases"), Statement::ShowDatabases);
    assert_eq!(one("ShOw DaTaBaSeS"), Statement::ShowDatabases);
    assert_eq!(
        one("Create Database If Not Exists Sales"),
        Statement::CreateDatabase {
            name: "Sales".into(),
            if_not_exists: true
        }
    );
}

#[test]
fn comments_and_blank_statements_are_skipped() {
    let script =
        "-- leading comment\n/* block\n comment */ SHOW DATABASES; ;; -- trailing\nSHOW /* inline */ TABLES";
    let statements = parse_script(script).unwrap();
    assert_eq!(statements.len(), 2);
    assert_eq!(statements[0].statement, Statement::ShowDatabases);
    assert_eq!(statements[0].line, 3);
    assert_eq!(statements[1].statement, Statement::ShowTables { database: None });
    assert_eq!(statements[1].line, 4);
    assert_eq!(parse_script("  -- only a comment\n").unwrap(), vec![]);
    assert_eq!(parse_script("").unwrap(), vec![]);
}

#[test]
fn errors_carry_line_and_column() {
    let error = parse_error("SHOW DATABASES;\nCREATE TABLE t (\n  a INTT\n)");
    assert_eq!((error.line, error.column), (3, 5), "{error}");
    assert!(error.message.contains("expected a type, found 'INTT'"), "{error}");
    assert_eq!(
        error.to_string(),
        "syntax error at line 3, column 5: expected a type, found 'INTT'"
    );

    let error = parse_error("SELEKT 1");
    assert_eq!((error.line, error.column), (1, 1));
    assert!(error.message.contains("expected a statement"), "{error}");

    let error = parse_error("CREATE TABLE t (a INT) WITH ('k' 'v')");
    assert_eq!((error.line, error.column), (1, 34), "{error}");
    assert!(error.message.contains("expected '='"), "{error}");

    let error = parse_error("SHOW DATABASES extra");
    assert!(
        error
            .message
            .contains("expected ';' or end of input, found 'extra'"),
        "{error}"
    );

    let error = parse_error("CREATE TABLE t (a INT) WITH ('unterminated = 'v')");
    assert!(
        error.message.contains("expected '='") || error.message.contains("unterminated"),
        "{error}"
    );

    let error = parse_error("SHOW /* never closed");
    assert!(error.message.contains("unterminated comment"), "{error}");
    assert_eq!((error.line, error.column), (1, 6));

    let error = parse_error("CREATE TABLE t (`a INT)");
    assert!(
        error.message.contains("unterminated backquoted identifier"),
        "{error}"
    );

    let error = parse_error("CREATE TABLE t ()");
    assert!(
        error.message.contains("expected an identifier, found ')'"),
        "{error}"
    );

    let error = parse_error("DROP VIEW v");
    assert!(
        error.message.contains("expected DATABASE or TABLE, found 'VIEW'"),
        "{error}"
    );

    let error = parse_error("CALL sys.add_acl(resource 'x')");
    assert!(error.message.contains("expected '=>'"), "{error}");

    // Columns count characters, not bytes.
    let error = parse_error("-- é\nSHOW DATABASES ü");
    assert_eq!((error.line, error.column), (2, 16), "{error}");
}

/// A file saved as "UTF-8 with BOM" failed at line 1, column 1, found '\u{feff}' (printed
/// raw, so the message showed an empty pair of quotes). One leading BOM is skipped, columns
/// count from after it; one elsewhere, like any invisible character, is named by code point.
#[test]
fn a_leading_byte_order_mark_is_skipped_and_invisible_characters_are_named() {
    assert_eq!(
        parse_script("\u{FEFF}SHOW TABLES;\nSHOW DATABASES").unwrap(),
        parse_script("SHOW TABLES;\nSHOW DATABASES").unwrap()
    );
    assert_eq!(parse_script("\u{FEFF}").unwrap(), vec![]);
    let error = parse_error("\u{FEFF}SHOW TABLEZ");
    assert_eq!((error.line, error.column), (1, 6), "{error}");
    let error = parse_error("\u{FEFF}CREATE TABLE t (\n  a INTT)");
    assert_eq!((error.line, error.column), (2, 5), "{error}");

    // Only one, and only at the start.
    for (script, column) in [
        ("\u{FEFF}\u{FEFF}SHOW TABLES", 1),
        ("SHOW TABLES;\u{FEFF}SHOW DATABASES", 13),
    ] {
        let error = parse_error(script);
        assert_eq!((error.line, error.column), (1, column), "{error}");
        assert!(
            error.message.contains("found U+FEFF (a byte order mark"),
            "{error}"
        );
        assert!(!error.to_string().contains('\u{FEFF}'), "{error}");
    }
    for (invisible, named) in [
        ('\u{200B}', "U+200B"),
        ('\u{0007}', "U+0007"),
        ('\u{202E}', "U+202E"),
    ] {
        let error = parse_error(&format!("SHOW {invisible}TABLES"));
        assert!(
            error
                .message
                .contains(&format!("found {named} (an invisible character)")),
            "{error}"
        );
        assert!(!error.to_string().contains(invisible), "{error}");
    }
    // Nor does the failed statement's name print one.
    assert_eq!(leading_words("\u{FEFF}SHOW\u{200B}TABLES"), "SHOW TABLES");
    // Visible characters are still shown as they are.
    let error = parse_error("SHOW é");
    assert!(error.message.ends_with("found 'é'"), "{error}");
}

#[test]
fn a_syntax_error_anywhere_rejects_the_whole_script() {
    assert!(parse_script("CREATE DATABASE a; CREATE DATABSE b").is_err());
}

#[test]
fn positional_call_arguments_stay_separate() {
    let Statement::Call { arguments, .. } = one("CALL sys.add_acl('CLUSTER', 'ALLOW', 'User:x')") else {
        panic!("call")
    };
    assert_eq!(arguments.len(), 3);
    assert!(arguments.iter().all(|a| a.name.is_none() && a.values.len() == 1));
    let Statement::Call { arguments, .. } =
        one("CALL sys.set_cluster_configs(config_pairs => 'a', 'b', 'c', 'd')")
    else {
        panic!("call")
    };
    assert_eq!(arguments.len(), 1);
    assert_eq!(arguments[0].values, vec!["a", "b", "c", "d"]);
}

/// Parses; an error points inside the input and names a statement that exists.
fn check_error_position(text: &str) {
    if let Err(error) = parse_script(text) {
        let lines = text.split('\n').count();
        assert!(error.line >= 1 && error.line <= lines, "{text:?}: {error}");
        let line_text = text.split('\n').nth(error.line - 1).unwrap_or("");
        assert!(
            error.column >= 1 && error.column <= line_text.chars().count() + 1,
            "{text:?}: {error}"
        );
        assert!(error.statement >= 1, "{text:?}: {error}");
    }
}

/// Every truncation and many seeded random mutations of valid scripts parse or fail with a
/// position inside the input; none panics.
#[test]
fn mangled_input_never_panics() {
    let valid = [
        "CREATE TABLE IF NOT EXISTS sales.orders (order_id BIGINT NOT NULL, m MAP<STRING, ARRAY<ROW<`a b` DECIMAL(10, 2)>>>, ts TIMESTAMP(3) WITH LOCAL TIME ZONE, PRIMARY KEY (order_id) NOT ENFORCED) PARTITIONED BY (order_id) WITH ('k' = 'v''w');",
        "/* c */ ALTER TABLE t RESET ('a'); -- x\nCALL sys.set_cluster_configs(config_pairs => 'k', 'v'); USE `db`; SHOW TABLES FROM db",
    ];
    let check = check_error_position;
    for text in valid {
        assert!(parse_script(text).is_ok(), "{text}");
        for end in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
            check(&text[..end]);
        }
    }
    let alphabet: Vec<char> = "`'\"()<>,;=. -/*\naZ09_é".chars().collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    for round in 0..3000 {
        let mut chars: Vec<char> = valid[round % valid.len()].chars().collect();
        for _ in 0..1 + next(4) {
            let at = next(chars.len());
            match next(3) {
                0 => chars[at] = alphabet[next(alphabet.len())],
                1 => chars.insert(at, alphabet[next(alphabet.len())]),
                _ => {
                    chars.remove(at);
                }
            }
        }
        check(&chars.into_iter().collect::<String>());
    }
}

#[test]
fn summaries_hold_no_literals() {
    let call =
        one("CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'w:secret')");
    assert_eq!(call.summary(), "CALL sys.set_cluster_configs");
    let alter = one("ALTER TABLE db.t SET ('k' = 'secret')");
    assert_eq!(alter.summary(), "ALTER TABLE db.t SET");
}

#[test]
fn select_points_to_scan() {
    let error = parse_error("SHOW DATABASES; select * FROM sales.orders");
    assert!(error.unsupported, "{error}");
    assert_eq!(error.statement, 2);
    assert_eq!((error.line, error.column), (1, 17));
    assert!(error.message.contains("kafluss scan"), "{error}");
    assert!(error.message.contains("/scan"), "{error}");
    assert!(!parse_error("SELEKT 1").unsupported);
}

#[test]
fn syntax_errors_name_their_statement_and_its_first_words() {
    let script =
        "SHOW DATABASES;;\n-- c\nCREATE TABLE t (a INT);\nCREATE TABLE u (a INTT) WITH ('k' = 'secret')";
    let Err(ScriptError::Syntax { error, leading_words }) = parse_script_limited(script, 10) else {
        panic!("must fail")
    };
    assert_eq!(error.statement, 3, "empty statements are not counted");
    assert_eq!(error.line, 4);
    assert_eq!(leading_words, "CREATE TABLE u ...");
}

#[test]
fn leading_words_stop_before_literals() {
    assert_eq!(
        leading_words("CALL sys.set_cluster_configs(config_pairs => 'k', 'secret')"),
        "CALL sys.set_cluster_configs ..."
    );
    assert_eq!(leading_words("SHOW DATABASES; SHOW TABLES"), "SHOW DATABASES");
    assert_eq!(leading_words("SHOW   DATABASES"), "SHOW DATABASES");
    assert_eq!(leading_words("DROP TABLE a.b -- 'x'"), "DROP TABLE a.b ...");
    assert_eq!(leading_words("a b c d e f g h"), "a b c d e f ...");
    assert_eq!(leading_words(""), "");
}

#[test]
fn the_statement_limit_stops_parsing_at_the_first_statement_over_it() {
    let script = "SHOW DATABASES;".repeat(5);
    assert_eq!(parse_script_limited(&script, 5).unwrap().len(), 5);
    assert_eq!(
        parse_script_limited(&script, 4),
        Err(ScriptError::TooManyStatements { limit: 4 })
    );
    // Stops there: a script far over the limit costs what the limit allows, not its length.
    let huge = "SHOW DATABASES;".repeat(100_000);
    let before = SCANNED.with(|count| count.get());
    assert!(parse_script_limited(&huge, 10).is_err());
    let work = SCANNED.with(|count| count.get()) - before;
    assert!(work < 2_000, "{work} bytes examined for 11 statements");
}

/// Bytes the lexer examined while parsing `script`.
fn parse_work(script: &str) -> (usize, u64) {
    let before = SCANNED.with(|count| count.get());
    let statements = parse_script(script).expect("parses");
    (statements.len(), SCANNED.with(|count| count.get()) - before)
}

/// Linear time, counted as work rather than measured as time: the bytes the lexer examines
/// grow with the script, whatever the statement count. (Counting each statement's line from
/// the start of the script made this quadratic: 32,000 statements took 3.3 s.)
#[test]
fn scripts_parse_in_linear_time() {
    let pieces = [
        "SHOW DATABASES;\n",
        "CREATE TABLE IF NOT EXISTS t (a INT, `b c` MAP<STRING, BYTES>) WITH ('k' = 'v;--');\n",
        "/* comment ; */ USE `d`; -- trailing\n",
        "CALL sys.add_acl(resource => 'CLUSTER', permission => 'ALLOW', principal => 'User:x', operation => 'ALL');",
    ];
    let script = |statements: usize| -> String {
        let mut text = String::new();
        for i in 0..statements {
            text.push_str(pieces[i % pieces.len()]);
        }
        text
    };
    let small = script(2_000);
    let large = script(200_000);
    let (count, small_work) = parse_work(&small);
    assert_eq!(count, 2_000);
    let (count, large_work) = parse_work(&large);
    assert_eq!(count, 200_000);
    let per_byte = |work: u64, text: &str| work as f64 / text.len() as f64;
    assert!(
        per_byte(large_work, &large) < 4.0,
        "{large_work} bytes examined for a script of {} bytes",
        large.len()
    );
    assert!(
        per_byte(large_work, &large) < per_byte(small_work, &small) * 1.1,
        "work per byte grows with the script: {small_work} for {}, {large_work} for {}",
        small.len(),
        large.len()
    );
    // Lines are still right at the end of the script.
    let statements = parse_script(&large).unwrap();
    let last = statements.last().unwrap();
    assert_eq!(last.line, large.matches('\n').count() + 1);
    assert!(last.text.starts_with("CALL sys.add_acl"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A statement split the simplest way: `;` outside quotes and comments ends a statement;
    /// each statement's text runs from its first to its last character that is neither
    /// whitespace nor comment. Returns (line, text) for every non-empty statement.
    fn reference_split(script: &str) -> Vec<(usize, String)> {
        #[derive(Clone, Copy, PartialEq)]
        enum State {
            Code,
            Quote(char),
            LineComment,
            BlockComment,
        }
        let chars: Vec<(usize, char)> = script.char_indices().collect();
        let mut statements = Vec::new();
        let mut state = State::Code;
        let (mut first, mut last): (Option<usize>, usize) = (None, 0);
        let mut i = 0;
        while i < chars.len() {
            let (at, c) = chars[i];
            let next = chars.get(i + 1).map(|&(_, c)| c);
            let mut code = false;
            match state {
                State::Code => match (c, next) {
                    (';', _) => {
                        if let Some(start) = first.take() {
                            statements.push((start, script[start..last].to_string()));
                        }
                    }
                    ('-', Some('-')) => {
                        state = State::LineComment;
                        i += 1;
                    }
                    ('/', Some('*')) => {
                        state = State::BlockComment;
                        i += 1;
                    }
                    ('\'' | '`', _) => {
                        state = State::Quote(c);
                        code = true;
                    }
                    (c, _) => code = !c.is_whitespace(),
                },
                State::Quote(quote) => {
                    code = true;
                    if c == quote {
                        state = State::Code;
                    }
                }
                State::LineComment => {
                    if c == '\n' {
                        state = State::Code;
                    }
                }
                State::BlockComment => {
                    if c == '*' && next == Some('/') {
                        state = State::Code;
                        i += 1;
                    }
                }
            }
            if code {
                first.get_or_insert(at);
                last = at + c.len_utf8();
            }
            i += 1;
        }
        if let Some(start) = first {
            statements.push((start, script[start..last].to_string()));
        }
        statements
            .into_iter()
            .map(|(start, text)| (script[..start].matches('\n').count() + 1, text))
            .collect()
    }

    /// A plain identifier, other than `if`: keywords are not reserved, but `CREATE TABLE if (`
    /// reads as the start of `IF NOT EXISTS` and is rightly a syntax error. (31 keywords tried
    /// as each name of the statements below: only `if` fails, and only there.)
    fn identifier() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_]{0,8}".prop_filter("`if` starts IF NOT EXISTS", |word| word != "if")
    }

    /// A quoted token whose body may hold `;`, comment markers, newlines and the quote itself
    /// (doubled).
    fn quoted(quote: char) -> impl Strategy<Value = String> {
        "[a-z;'`/* \n-]{1,10}".prop_map(move |body| {
            let doubled = body.replace(quote, &format!("{quote}{quote}"));
            format!("{quote}{doubled}{quote}")
        })
    }

    fn statement() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("SHOW DATABASES".to_string()),
            identifier().prop_map(|db| format!("CREATE DATABASE IF NOT EXISTS {db}")),
            (identifier(), identifier()).prop_map(|(db, t)| format!("DROP TABLE IF EXISTS {db}.{t}")),
            (identifier(), quoted('`'), quoted('\''), quoted('\'')).prop_map(|(t, column, k, v)| format!(
                "CREATE TABLE {t} ({column} INT,\n  b MAP<STRING, BYTES>) WITH ({k} = {v})"
            )),
            (identifier(), quoted('\''), quoted('\''))
                .prop_map(|(t, k, v)| format!("ALTER TABLE {t} SET ({k} = {v})")),
            (quoted('\''), quoted('\''))
                .prop_map(|(k, v)| format!("CALL sys.set_cluster_configs(config_pairs => {k}, {v})")),
            quoted('`').prop_map(|db| format!("USE {db}")),
            identifier().prop_map(|t| format!("DESCRIBE /* a ; 'comment' */ {t}")),
        ]
    }

    /// What goes between statements: the `;` with whitespace, comments, empty statements.
    fn separator() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(";".to_string()),
            Just(";\n".to_string()),
            Just(" ; -- a ; 'comment\n".to_string()),
            Just(";/* x ; `y */\n".to_string()),
            Just(";; \n ;".to_string()),
            Just("\n;\n\n".to_string()),
        ]
    }

    fn script() -> impl Strategy<Value = String> {
        (
            prop::collection::vec((statement(), separator()), 0..12),
            prop::bool::ANY,
            prop_oneof![Just(""), Just("-- header ;\n"), Just("/* ; */ "), Just("\n\n ")],
        )
            .prop_map(|(statements, terminated, prefix)| {
                let mut text = prefix.to_string();
                let count = statements.len();
                for (index, (statement, separator)) in statements.into_iter().enumerate() {
                    text.push_str(&statement);
                    if index + 1 < count || terminated {
                        text.push_str(&separator);
                    }
                }
                text
            })
    }

    proptest! {
        #[test]
        fn splitting_agrees_with_the_reference(script in script()) {
            let parsed = parse_script(&script).map_err(|e| TestCaseError::fail(format!("{script:?}: {e}")))?;
            let expected = reference_split(&script);
            let got: Vec<(usize, String)> = parsed.into_iter().map(|p| (p.line, p.text)).collect();
            prop_assert_eq!(got, expected, "{:?}", script);
        }

        #[test]
        fn the_limit_refuses_exactly_the_scripts_over_it(script in script(), limit in 0usize..14) {
            let count = reference_split(&script).len();
            match parse_script_limited(&script, limit) {
                Ok(statements) => prop_assert!(statements.len() == count && count <= limit),
                Err(ScriptError::TooManyStatements { limit: refused }) => {
                    prop_assert!(count > limit && refused == limit)
                }
                Err(error) => prop_assert!(false, "{script:?}: {error}"),
            }
        }

        #[test]
        fn any_text_never_panics(text in any::<String>()) {
            check_error_position(&text);
        }

        #[test]
        fn token_soup_never_panics(tokens in prop::collection::vec(prop_oneof![
            Just("CREATE"), Just("TABLE"), Just("DATABASE"), Just("IF"), Just("NOT"), Just("EXISTS"),
            Just("ROW<"), Just("MAP<"), Just("ARRAY<"), Just(">"), Just("("), Just(")"), Just(","),
            Just("'"), Just("`"), Just("--"), Just("/*"), Just("*/"), Just(";"), Just("="), Just("=>"),
            Just("DECIMAL(38, 2)"), Just("INT"), Just("t"), Just("\n"), Just(" "), Just("SELECT"),
            Just("CALL"), Just("sys."), Just("WITH"), Just("é"), Just("99999999999"),
        ], 0..40)) {
            check_error_position(&tokens.concat());
        }
    }
}
