//! Costs on the hot paths: one ACL check per produced partition, one PLAIN verification per
//! login (plaintext from the configuration, or a stored PBKDF2 hash: first login, remembered
//! login, wrong password).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, Criterion};
use kafluss_auth::{
    AclEntry, Authorizer, CredentialStore, ListenerSecurity, Operation, PlainCredentials, Principal,
    Resource, SaslSession,
};

/// `tables` databases with `tables` tables each, one ALLOW WRITE per table for its own user,
/// plus a database-level DENY for another user: realistic shapes, many entries.
fn authorizer(tables: usize) -> Authorizer {
    let mut acls = Vec::new();
    for db in 0..tables {
        for table in 0..tables {
            let resource = format!("db{db}.t{table}");
            acls.push(AclEntry::parse(&resource, "ALLOW", &format!("User:u{table}"), "WRITE", "*").unwrap());
        }
        acls.push(AclEntry::parse(&format!("db{db}"), "DENY", "User:intruder", "ALL", "*").unwrap());
    }
    Authorizer::new(true, vec![Principal::user("admin")], acls)
}

fn bench_authorize(c: &mut Criterion) {
    let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
    for tables in [1, 32] {
        let auth = authorizer(tables);
        let user = Principal::user(&format!("u{}", tables - 1));
        let resource = Resource::table(&format!("db{}", tables - 1), &format!("t{}", tables - 1));
        c.bench_function(&format!("authorize_allowed_{}_acls", auth.entries().len()), |b| {
            b.iter(|| {
                black_box(auth.authorize(black_box(&user), host, Operation::Write, black_box(&resource)))
            })
        });
        let stranger = Principal::user("stranger");
        c.bench_function(&format!("authorize_refused_{}_acls", auth.entries().len()), |b| {
            b.iter(|| {
                black_box(auth.authorize(black_box(&stranger), host, Operation::Write, black_box(&resource)))
            })
        });
    }
    let disabled = Authorizer::disabled();
    let resource = Resource::table("db", "t");
    let anonymous = Principal::anonymous();
    c.bench_function("authorize_disabled", |b| {
        b.iter(|| black_box(disabled.authorize(black_box(&anonymous), host, Operation::Write, &resource)))
    });
}

fn bench_login(c: &mut Criterion) {
    let users: Vec<String> = (0..1000).map(|i| format!("user{i}:password-{i}")).collect();
    let store = CredentialStore::new(PlainCredentials::parse(&users.join(",")).unwrap());
    c.bench_function("verify_1000_users", |b| {
        b.iter(|| black_box(store.verify(black_box("user500"), black_box(b"password-500"))))
    });
    // Same cost whether the password is right, wrong at the first byte, of another length, or
    // the user is unknown: the comparison is over padded 255-byte buffers.
    for (name, user, password) in [
        ("verify_wrong_first_byte", "user500", &b"Xassword-500"[..]),
        ("verify_wrong_length", "user500", &b"p"[..]),
        ("verify_unknown_user", "nobody", &b"password-500"[..]),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| black_box(store.verify(black_box(user), black_box(password))))
        });
    }
    c.bench_function("sasl_v1_exchange", |b| {
        b.iter(|| {
            let mut session = SaslSession::new(ListenerSecurity::Sasl);
            session.on_request(17);
            session.on_handshake(1, "PLAIN");
            session.on_request(36);
            black_box(
                session
                    .on_authenticate(black_box(b"\0user500\0password-500"), &store)
                    .is_ok(),
            )
        })
    });
}

fn bench_hashed_login(c: &mut Criterion) {
    let stored = PlainCredentials::parse("admin:admin-secret")
        .unwrap()
        .to_stored()
        .unwrap();
    let store = CredentialStore::new(PlainCredentials::parse_stored(&stored).unwrap());
    // A wrong password always costs the whole derivation (as does a first right one).
    c.bench_function("verify_hashed_wrong_password", |b| {
        b.iter(|| black_box(store.verify(black_box("admin"), black_box(b"guess"))))
    });
    c.bench_function("verify_hashed_unknown_user", |b| {
        b.iter(|| black_box(store.verify(black_box("nobody"), black_box(b"guess"))))
    });
    assert!(store.verify("admin", b"admin-secret").is_some());
    c.bench_function("verify_hashed_remembered", |b| {
        b.iter(|| black_box(store.verify(black_box("admin"), black_box(b"admin-secret"))))
    });
}

criterion_group!(benches, bench_authorize, bench_login, bench_hashed_login);
criterion_main!(benches);
