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
    let script = "CREATE DATABASE IF NOT EXISTS sales;

CREATE TABLE sales.orders (
    order_id BIGINT,
    amount DECIMAL(18, 2),
    _kafka_key BYTES,
    _kafka_headers MAP<STRING, BYTES>
) WITH (
    'table.kafka.enabled' = 'true'
);

ALTER TABLE sales.orders SET (
    'table.kafka.enabled' = 'true'
);
";
    let statements = parse_script(script).unwrap();
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

/// Every truncation and many seeded random mutations of valid scripts parse or fail with a
/// position inside the input; none panics.
#[test]
fn mangled_input_never_panics() {
    let valid = [
        "CREATE TABLE IF NOT EXISTS sales.orders (order_id BIGINT NOT NULL, m MAP<STRING, ARRAY<ROW<`a b` DECIMAL(10, 2)>>>, ts TIMESTAMP(3) WITH LOCAL TIME ZONE, PRIMARY KEY (order_id) NOT ENFORCED) PARTITIONED BY (order_id) WITH ('k' = 'v''w');",
        "/* c */ ALTER TABLE t RESET ('a'); -- x\nCALL sys.set_cluster_configs(config_pairs => 'k', 'v'); USE `db`; SHOW TABLES FROM db",
    ];
    let check = |text: &str| {
        if let Err(error) = parse_script(text) {
            let lines = text.split('\n').count();
            assert!(error.line >= 1 && error.line <= lines, "{text:?}: {error}");
            let line_text = text.split('\n').nth(error.line - 1).unwrap_or("");
            assert!(
                error.column >= 1 && error.column <= line_text.chars().count() + 1,
                "{text:?}: {error}"
            );
        }
    };
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
