//! The catalog on disk: restart keeps everything, ids are never reused, leftovers of an
//! interrupted write are ignored, ACLs and dynamic configs persist and apply at runtime.

use std::net::{IpAddr, Ipv4Addr};

use kafluss_auth::{Operation, Principal, Resource};
use kafluss_broker::catalog::{Catalog, CatalogConfig, Session, StatementResult};

fn localhost() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

fn session(catalog: &Catalog, principal: Principal) -> Session {
    catalog.session(principal, localhost())
}

fn run_as(catalog: &Catalog, principal: Principal, sql: &str) -> Result<Vec<StatementResult>, String> {
    let mut session = session(catalog, principal);
    catalog
        .execute(sql, &mut session)
        .map_err(|e| format!("{}: {e}", e.code()))
}

fn run(catalog: &Catalog, sql: &str) -> Vec<StatementResult> {
    run_as(catalog, Principal::anonymous(), sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn rows(result: &StatementResult) -> Vec<Vec<String>> {
    match result {
        StatementResult::Rows { rows, .. } => rows.clone(),
        other => panic!("rows expected, got {other:?}"),
    }
}

#[test]
fn catalog_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster_id, orders) = {
        let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
        run(
            &catalog,
            "CREATE DATABASE sales;
             CREATE TABLE sales.orders (order_id BIGINT, amount DECIMAL(18, 2), _kafka_key BYTES,
                 _kafka_headers MAP<STRING, BYTES>) WITH ('table.kafka.enabled' = 'true', 'bucket.num' = '4');
             CREATE TABLE sales.gone (x INT);
             DROP TABLE sales.gone",
        );
        let snapshot = catalog.snapshot();
        (
            snapshot.cluster_id.clone(),
            snapshot.resolve_topic("sales.orders").unwrap(),
        )
    };
    assert_eq!(cluster_id.len(), 22, "Kafka-style cluster id");

    let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
    let snapshot = catalog.snapshot();
    assert_eq!(snapshot.cluster_id, cluster_id, "cluster id is kept");
    let reloaded = snapshot.resolve_topic("sales.orders").unwrap();
    assert_eq!(*reloaded, *orders, "same id, schema, options, mapping, topic id");
    assert_eq!(reloaded.bucket_count, 4);
    assert!(snapshot.table("sales", "gone").is_none());

    // Ids are never reused, also across restarts: `gone` had the id after `orders`.
    run(&catalog, "CREATE TABLE sales.fresh (x INT)");
    let fresh = catalog.snapshot().table("sales", "fresh").unwrap().id;
    assert_eq!(fresh, orders.id + 2);
}

#[test]
fn a_leftover_temp_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    {
        let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
        run(&catalog, "CREATE TABLE t (x INT)");
    }
    // What a crash after writing the temp file (before the rename) leaves behind.
    std::fs::write(dir.path().join("catalog.json.tmp"), b"{\"half\": ").unwrap();
    let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
    assert!(catalog.snapshot().table("fluss", "t").is_some());
    assert!(!dir.path().join("catalog.json.tmp").exists());
}

#[test]
fn a_corrupt_catalog_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.json"), b"not json").unwrap();
    let error = Catalog::open(CatalogConfig::new(dir.path())).unwrap_err();
    assert!(error.to_string().contains("catalog.json is corrupt"), "{error}");
}

/// `catalog.max-size` bounds the catalog: a CREATE whose catalog would be larger is refused
/// (413 `CATALOG_TOO_LARGE`, naming the key, the size and the limit) before anything is
/// written or published, and a file over the limit refuses to open, saying so rather than
/// "corrupt". Before, nothing bounded a save, and the next start cut the file at a fixed 512 MiB
/// and called it corrupt.
#[test]
fn the_catalog_is_bounded_by_catalog_max_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    let mut config = CatalogConfig::new(dir.path());
    config.max_size = 4096;
    let catalog = Catalog::open(config.clone()).unwrap();
    run(&catalog, "CREATE TABLE small (x INT)");
    let stored = std::fs::read(&path).unwrap();
    let revision = catalog.snapshot().revision;

    // 300 fields of `fN DEC`, each stored as "`fN` DECIMAL(10, 0)": about 6.6 KB.
    let fields: Vec<String> = (0..300).map(|i| format!("f{i} DEC")).collect();
    let wide = format!("CREATE TABLE wide (c ROW<{}>)", fields.join(", "));
    let mut session = session(&catalog, Principal::anonymous());
    let error = catalog.execute(&wide, &mut session).unwrap_err();
    assert_eq!(
        (error.code(), error.http_status()),
        ("CATALOG_TOO_LARGE", 413),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("more than catalog.max-size (4096 bytes)") && message.contains("nothing changed"),
        "{message}"
    );
    let size: u64 = message
        .split("would be ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("the size: {message}"));
    assert!(size > 4096, "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), stored, "nothing written");
    assert!(!dir.path().join("catalog.json.tmp").exists());
    assert_eq!(catalog.snapshot().revision, revision, "nothing published");
    assert!(catalog.snapshot().table("fluss", "wide").is_none());
    drop(catalog);

    config.max_size = stored.len() as u64 - 1;
    let error = Catalog::open(config.clone()).unwrap_err().to_string();
    let expected = format!(
        "catalog file {} is {} bytes, more than catalog.max-size ({} bytes)",
        path.display(),
        stored.len(),
        stored.len() - 1
    );
    assert!(error.contains(&expected), "{expected}\n{error}");
    assert!(!error.contains("corrupt"), "{error}");

    config.max_size = stored.len() as u64;
    let catalog = Catalog::open(config).unwrap();
    assert!(catalog.snapshot().table("fluss", "small").is_some());
    assert!(catalog.snapshot().table("fluss", "wide").is_none());
}

fn secured(dir: &std::path::Path) -> CatalogConfig {
    let mut config = CatalogConfig::new(dir);
    config.authorizer_enabled = true;
    config.super_users = vec![Principal::user("admin")];
    config.plain_credentials = Some("admin:admin-secret,writer:change-me".to_string());
    config
}

#[test]
fn ddl_is_authorized_and_acls_persist() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let admin = Principal::user("admin");
    let alice = Principal::user("alice");

    let error = run_as(&catalog, alice.clone(), "CREATE DATABASE sales").unwrap_err();
    assert!(error.starts_with("AUTHORIZATION_FAILED"), "{error}");
    assert!(
        error.contains("User:alice") && error.contains("CREATE"),
        "{error}"
    );
    let error = run_as(&catalog, alice.clone(), "CALL sys.list_acl()").unwrap_err();
    assert!(error.starts_with("AUTHORIZATION_FAILED"), "{error}");

    run_as(
        &catalog,
        admin.clone(),
        "CREATE DATABASE sales; CREATE TABLE sales.t (x INT)",
    )
    .unwrap();
    let added = run_as(
        &catalog,
        admin.clone(),
        "CALL sys.add_acl(resource => 'sales', permission => 'ALLOW', principal => 'User:alice', operation => 'ALL', host => '*')",
    )
    .unwrap();
    assert!(matches!(&added[0], StatementResult::Done { message } if message.contains("ACL added")));
    run_as(
        &catalog,
        alice.clone(),
        "CREATE TABLE sales.u (x INT); DROP TABLE sales.t",
    )
    .unwrap();
    assert!(catalog.authorizer().authorize(
        &alice,
        localhost(),
        Operation::Write,
        &Resource::table("sales", "u")
    ));
    // Not on another database.
    assert!(run_as(&catalog, alice.clone(), "CREATE TABLE fluss.v (x INT)").is_err());
    // Alice sees only what she may describe.
    let listed = run_as(&catalog, alice.clone(), "SHOW DATABASES").unwrap();
    assert_eq!(rows(&listed[0]), vec![vec!["sales".to_string()]]);

    // Positional arguments follow the declared order; adding a present ACL changes nothing.
    let again = run_as(
        &catalog,
        admin.clone(),
        "CALL sys.add_acl('sales', 'ALLOW', 'User:alice', 'ALL', '*')",
    )
    .unwrap();
    assert!(matches!(&again[0], StatementResult::Done { message } if message.contains("already present")));
    let listed = run_as(&catalog, admin.clone(), "CALL sys.list_acl(resource => 'ANY')").unwrap();
    assert_eq!(
        rows(&listed[0]),
        vec![vec!["sales", "ALLOW", "User:alice", "ALL", "*"]]
    );
    drop(catalog);

    // ACLs persist.
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    assert!(catalog.authorizer().authorize(
        &alice,
        localhost(),
        Operation::Create,
        &Resource::database("sales")
    ));
    let dropped = run_as(
        &catalog,
        admin.clone(),
        "CALL sys.drop_acl(principal => 'User:alice')",
    )
    .unwrap();
    assert_eq!(rows(&dropped[0]).len(), 1);
    assert!(!catalog.authorizer().authorize(
        &alice,
        localhost(),
        Operation::Create,
        &Resource::database("sales")
    ));
    let error = run_as(
        &catalog,
        admin,
        "CALL sys.add_acl(resource => 'sales', permission => 'MAYBE', principal => 'User:a', operation => 'READ')",
    )
    .unwrap_err();
    assert!(error.starts_with("INVALID_PROCEDURE_CALL"), "{error}");
}

#[test]
fn credentials_change_at_runtime_persist_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let admin = Principal::user("admin");
    let store = catalog.credential_store();
    assert!(store.verify("writer", b"change-me").is_some());

    run_as(
        &catalog,
        admin.clone(),
        "CALL sys.set_cluster_configs('security.sasl.plain.credentials', 'admin:admin-secret,writer:positional')",
    )
    .unwrap();
    assert!(
        store.verify("writer", b"positional").is_some(),
        "positional pairs work too"
    );
    let results = run_as(
        &catalog,
        admin.clone(),
        "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'admin:admin-secret,writer:new-secret')",
    )
    .unwrap();
    let StatementResult::Done { message } = &results[0] else {
        panic!("done")
    };
    assert!(!message.contains("new-secret"), "{message}");
    let on_disk = std::fs::read_to_string(dir.path().join("catalog.json")).unwrap();
    assert!(
        !on_disk.contains("new-secret") && !on_disk.contains("positional"),
        "no password on disk: {on_disk}"
    );
    assert_eq!(on_disk.matches("pbkdf2-sha256$4096$").count(), 2, "{on_disk}");
    assert!(
        store.verify("writer", b"change-me").is_none(),
        "old password refused"
    );
    assert!(store.verify("writer", b"new-secret").is_some());

    let shown = run_as(&catalog, admin.clone(), "CALL sys.get_cluster_configs()").unwrap();
    let shown = rows(&shown[0]);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0][0], "security.sasl.plain.credentials");
    assert!(
        !shown[0][1].contains("secret"),
        "secret never shown: {:?}",
        shown[0]
    );
    assert_eq!(shown[0][2], "DYNAMIC");
    drop(catalog);

    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let store = catalog.credential_store();
    assert!(store.verify("writer", b"new-secret").is_some(), "persisted");
    run_as(
        &catalog,
        admin.clone(),
        "CALL sys.reset_cluster_configs(config_keys => 'security.sasl.plain.credentials')",
    )
    .unwrap();
    assert!(
        store.verify("writer", b"change-me").is_some(),
        "back to the configured set"
    );

    for (sql, expected) in [
        (
            "CALL sys.set_cluster_configs(config_pairs => 'kafka.enabled', 'false')",
            "cannot be changed at runtime",
        ),
        (
            "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials')",
            "key, value pairs",
        ),
        (
            "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'nopassword')",
            "security.sasl.plain.credentials",
        ),
        (
            "CALL sys.reset_cluster_configs(config_keys => 'bucket.num')",
            "cannot be changed at runtime",
        ),
        // Key and value swapped: the error names no part of the value.
        (
            "CALL sys.set_cluster_configs(config_pairs => 'admin:Oops-Secret', 'security.sasl.plain.credentials')",
            "are key and value swapped?",
        ),
        (
            "CALL sys.set_cluster_configs(pairs => 'a', 'b')",
            "unknown argument 'pairs'",
        ),
    ] {
        let error = run_as(&catalog, admin.clone(), sql).unwrap_err();
        assert!(error.contains(expected), "{sql}: {error}");
        assert!(!error.contains("Oops-Secret"), "{error}");
        assert!(
            !error.contains("nopassword") || !expected.contains("sasl"),
            "{error}"
        );
    }
    assert!(
        store.verify("writer", b"change-me").is_some(),
        "failed calls changed nothing"
    );
}

/// What the previous version wrote: dynamic credentials in plaintext.
const PLAINTEXT_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plaintext-credentials/catalog.json"
);

#[test]
fn plaintext_credentials_of_an_earlier_version_load_and_are_hashed_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    std::fs::copy(PLAINTEXT_FIXTURE, &path).unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(
        !on_disk.contains("old-admin-secret") && !on_disk.contains("old-writer-secret"),
        "rewritten at load: {on_disk}"
    );
    assert!(on_disk.contains("\"security.sasl.plain.credentials\": \"admin:pbkdf2-sha256$4096$"));
    let store = catalog.credential_store();
    assert!(store.verify("writer", b"old-writer-secret").is_some());
    assert!(store.verify("admin", b"old-admin-secret").is_some());
    assert!(
        store.verify("admin", b"admin-secret").is_none(),
        "the stored value wins"
    );
    assert!(catalog.snapshot().table("sales", "orders").is_some());
    drop(catalog);
    // Loading the hashed file again changes nothing.
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), on_disk);
    assert!(catalog
        .credential_store()
        .verify("writer", b"old-writer-secret")
        .is_some());
}

#[test]
fn a_credential_change_that_locks_out_every_super_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = secured(dir.path());
    config.admin_login_required = true;
    let catalog = Catalog::open(config.clone()).unwrap();
    let admin = Principal::user("admin");
    let store = catalog.credential_store();
    let path = dir.path().join("catalog.json");
    let before = std::fs::read(&path).unwrap();

    for value in ["writer:w2", ""] {
        let sql = format!(
            "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', '{value}')"
        );
        let error = run_as(&catalog, admin.clone(), &sql).unwrap_err();
        assert!(
            error.contains("refused, nothing changed")
                && error
                    .contains("no super user could log in: none of super.users (User:admin) has a password"),
            "{error}"
        );
        assert!(!error.contains("w2"), "{error}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing stored");
    assert!(
        store.verify("admin", b"admin-secret").is_some(),
        "nothing applied"
    );
    assert!(store.verify("writer", b"w2").is_none());

    // Keeping one super user is fine; going back to a configured set without any is not.
    run_as(
        &catalog,
        admin.clone(),
        "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'admin:a2,writer:w2')",
    )
    .unwrap();
    drop(catalog);
    config.plain_credentials = Some("writer:change-me".to_string());
    let catalog = Catalog::open(config.clone()).unwrap();
    let error = run_as(
        &catalog,
        admin.clone(),
        "CALL sys.reset_cluster_configs(config_keys => 'security.sasl.plain.credentials')",
    )
    .unwrap_err();
    assert!(error.contains("no super user could log in"), "{error}");
    assert!(catalog.credential_store().verify("admin", b"a2").is_some());

    // Where credentials cannot lock the administrators out, nothing is refused: a plaintext
    // admin listener, or the authorizer off.
    for (login, authorizer) in [(false, true), (true, false)] {
        let mut open = config.clone();
        open.admin_login_required = login;
        open.authorizer_enabled = authorizer;
        let catalog = Catalog::open(open).unwrap();
        run_as(
            &catalog,
            admin.clone(),
            "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'writer:w3')",
        )
        .unwrap();
        run_as(
            &catalog,
            admin.clone(),
            "CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', 'admin:a2,writer:w2')",
        )
        .unwrap();
    }
}

/// `cluster` is the ACL resource name of the whole cluster (and the first part of Fluss's
/// `cluster.db[.t]` forms), so no database may be called that, in any case: otherwise
/// `CALL sys.add_acl(resource => 'cluster', ...)` meant to cover one database granted the
/// whole cluster, and `'cluster.audit'` named database `audit`, not its table.
#[test]
fn no_database_is_named_like_the_cluster_resource() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let admin = Principal::user("admin");
    for name in ["cluster", "Cluster", "CLUSTER"] {
        let error = run_as(&catalog, admin.clone(), &format!("CREATE DATABASE {name}")).unwrap_err();
        assert!(
            error.starts_with("INVALID_NAME") && error.contains("whole cluster"),
            "{error}"
        );
    }
    assert!(!catalog
        .snapshot()
        .databases
        .keys()
        .any(|db| db.eq_ignore_ascii_case("cluster")));
    // A table may be called that: `db.cluster` has one reading.
    run_as(
        &catalog,
        admin.clone(),
        "CREATE DATABASE audit; CREATE TABLE audit.cluster (x INT)",
    )
    .unwrap();
    // So each resource text names one thing: `cluster` the cluster, `cluster.audit` database
    // audit (Fluss's form), `audit.cluster` a table.
    run_as(
        &catalog,
        admin.clone(),
        "CALL sys.add_acl(resource => 'cluster', permission => 'ALLOW', principal => 'User:alice', operation => 'DESCRIBE');
         CALL sys.add_acl(resource => 'cluster.audit', permission => 'DENY', principal => 'User:alice', operation => 'WRITE');
         CALL sys.add_acl(resource => 'audit.cluster', permission => 'ALLOW', principal => 'User:bob', operation => 'WRITE')",
    )
    .unwrap();
    let listed = run_as(&catalog, admin.clone(), "CALL sys.list_acl()").unwrap();
    let resources: Vec<String> = rows(&listed[0]).into_iter().map(|row| row[0].clone()).collect();
    assert_eq!(resources, ["cluster", "audit", "audit.cluster"]);
    drop(catalog);

    // Nor may kafka.default.database, created at start.
    let mut config = secured(dir.path());
    config.kafka_enabled = true;
    config.kafka_default_database = "Cluster".to_string();
    let error = Catalog::open(config).unwrap_err();
    assert!(
        error.to_string().contains("kafka.default.database") && error.to_string().contains("whole cluster"),
        "{error}"
    );
}

/// A new ACL names `User:name` or the wildcard: `user:bob` and `Group:ops` never matched a
/// connection (each is `User:<name>`) and are refused naming the value. An empty argument to
/// drop_acl or list_acl is refused, not read as "any": `principal => ''` dropped every
/// principal's entries of the resource, DENY entries included. Entries of other types that an
/// earlier version stored still load (the data dir opens) and can be dropped by name.
#[test]
fn acl_principals_are_users_and_empty_filter_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let admin = Principal::user("admin");
    for principal in ["user:bob", "Group:ops"] {
        let error = run_as(
            &catalog,
            admin.clone(),
            &format!(
                "CALL sys.add_acl(resource => 'fluss', permission => 'ALLOW', principal => '{principal}', operation => 'WRITE')"
            ),
        )
        .unwrap_err();
        assert!(
            error.starts_with("INVALID_PROCEDURE_CALL")
                && error.contains(&format!("`{principal}`"))
                && error.contains("the type must be `User`"),
            "{error}"
        );
    }
    run_as(
        &catalog,
        admin.clone(),
        "CALL sys.add_acl(resource => 'fluss.t', permission => 'DENY', principal => 'User:mallory', operation => 'ALL');
         CALL sys.add_acl(resource => 'fluss.t', permission => 'ALLOW', principal => 'ALL', operation => 'WRITE');
         CALL sys.add_acl(resource => 'fluss.t', permission => 'ALLOW', principal => 'User:bob', operation => 'READ')",
    )
    .unwrap();
    for field in ["resource", "permission", "principal", "operation", "host"] {
        for procedure in ["drop_acl", "list_acl"] {
            let error = run_as(
                &catalog,
                admin.clone(),
                &format!("CALL sys.{procedure}({field} => '')"),
            )
            .unwrap_err();
            assert!(
                error.starts_with("INVALID_PROCEDURE_CALL") && error.contains(&format!("empty {field}")),
                "{procedure}({field} => ''): {error}"
            );
        }
    }
    let error = run_as(
        &catalog,
        admin.clone(),
        "CALL sys.drop_acl(resource => 'fluss.t', principal => '', permission => 'ANY', operation => 'ANY', host => 'ANY')",
    )
    .unwrap_err();
    assert!(error.contains("empty principal"), "{error}");
    let listed = run_as(&catalog, admin.clone(), "CALL sys.list_acl()").unwrap();
    assert_eq!(rows(&listed[0]).len(), 3, "nothing was dropped");
    drop(catalog);

    // An entry an earlier version stored for Group:ops: the catalog still opens, the entry
    // never matches, and drop_acl names it.
    let path = dir.path().join("catalog.json");
    let mut stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    stored["acls"]
        .as_array_mut()
        .unwrap()
        .push(r#"resource="fluss";permission="ALLOW";principal="Group:ops";operation="ALL";host="*""#.into());
    std::fs::write(&path, serde_json::to_vec_pretty(&stored).unwrap()).unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    assert!(!catalog.authorizer().authorize(
        &Principal::user("ops"),
        localhost(),
        Operation::Write,
        &Resource::database("fluss")
    ));
    let dropped = run_as(&catalog, admin, "CALL sys.drop_acl(principal => 'Group:ops')").unwrap();
    assert_eq!(rows(&dropped[0]).len(), 1);
}

/// SHOW DATABASES lists what USE and SHOW TABLES accept: a database the principal may
/// DESCRIBE, or one of whose tables it may (WRITE implies DESCRIBE). A user with WRITE on
/// sales.orders only saw no database at all, though `USE sales; SHOW TABLES` worked.
#[test]
fn show_databases_lists_what_use_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(secured(dir.path())).unwrap();
    let admin = Principal::user("admin");
    let writer = Principal::user("writer");
    run_as(
        &catalog,
        admin,
        "CREATE DATABASE sales; CREATE TABLE sales.orders (v STRING); CREATE TABLE sales.refunds (v STRING);
         CREATE DATABASE empty;
         CALL sys.add_acl(resource => 'sales.orders', permission => 'ALLOW', principal => 'User:writer', operation => 'WRITE')",
    )
    .unwrap();
    let results = run_as(&catalog, writer.clone(), "SHOW DATABASES; USE sales; SHOW TABLES").unwrap();
    assert_eq!(rows(&results[0]), vec![vec!["sales".to_string()]]);
    assert_eq!(rows(&results[2]), vec![vec!["orders".to_string()]]);
    // A database it may see nothing of is neither listed nor accepted.
    for hidden in ["fluss", "empty", "nosuch"] {
        let error = run_as(&catalog, writer.clone(), &format!("USE {hidden}")).unwrap_err();
        assert!(error.starts_with("AUTHORIZATION_FAILED"), "{hidden}: {error}");
    }
}
