//! Properties over arbitrary input: no parser panics, text forms round-trip, and secrets
//! never leak into errors or `Debug` output.

use std::net::{IpAddr, Ipv4Addr};

use kafluss_auth::{
    AclEntry, AclFilter, Authorizer, CredentialStore, ListenerSecurity, Operation, PlainCredentials,
    PlainToken, Principal, Resource, SaslSession, SecurityConfig,
};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_-]{1,20}"
}

fn resource() -> impl Strategy<Value = Resource> {
    prop_oneof![
        Just(Resource::Cluster),
        name().prop_map(Resource::Database),
        (name(), name()).prop_map(|(database, table)| Resource::Table { database, table }),
    ]
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        Just(Operation::Read),
        Just(Operation::Write),
        Just(Operation::Create),
        Just(Operation::Drop),
        Just(Operation::Alter),
        Just(Operation::Describe),
        Just(Operation::All),
    ]
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_owned()),
        any::<IpAddr>().prop_map(|ip| ip.to_canonical().to_string())
    ]
}

/// Principal names: any printable text, including quotes, backslashes, `;` and `=`, but not
/// starting or ending with whitespace (ACL arguments are trimmed, so `"User: "` is no name).
fn principal() -> impl Strategy<Value = String> {
    "[^\\p{Cc}\\s]([^\\p{Cc}]{0,38}[^\\p{Cc}\\s])?".prop_map(|n| format!("User:{n}"))
}

fn entry() -> impl Strategy<Value = AclEntry> {
    (resource(), any::<bool>(), principal(), operation(), host()).prop_map(
        |(resource, allow, principal, operation, host)| {
            let permission = if allow { "ALLOW" } else { "DENY" };
            AclEntry::parse(
                &resource.to_string(),
                permission,
                &principal,
                operation.as_str(),
                &host,
            )
            .expect("generated entries are valid")
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn acl_lines_round_trip(entry in entry()) {
        let line = entry.to_line();
        prop_assert!(!line.contains('\n'));
        prop_assert_eq!(AclEntry::from_line(&line), Ok(entry.clone()));
        prop_assert!(AclFilter::any().matches(&entry));
    }

    #[test]
    fn text_parsers_never_panic(text in ".{0,300}") {
        let _ = AclEntry::from_line(&text);
        let _ = text.parse::<Resource>();
        let _ = Principal::parse(&text, "User:name");
        let _ = kafluss_auth::parse_super_users(&text);
        let _ = SecurityConfig::parse(Some(&text), Some(&text));
        let _ = AclFilter::parse(Some(&text), Some(&text), Some(&text), Some(&text), Some(&text));
        let _ = kafluss_auth::parse_basic_authorization(&text);
    }

    #[test]
    fn plain_parser_never_panics_and_respects_limits(token in proptest::collection::vec(any::<u8>(), 0..1000)) {
        if let Ok(parsed) = PlainToken::parse(&token) {
            prop_assert!(token.len() <= kafluss_auth::MAX_PLAIN_TOKEN_LEN);
            prop_assert!(!parsed.username.is_empty() && !parsed.password.is_empty());
            prop_assert!(parsed.authzid.is_empty() || parsed.authzid == parsed.username);
            prop_assert!(!parsed.password.contains(&0));
        }
    }

    #[test]
    fn session_survives_any_event_sequence(events in proptest::collection::vec((0u8..4, any::<i16>(), proptest::collection::vec(any::<u8>(), 0..40)), 0..12)) {
        let store = CredentialStore::new(PlainCredentials::parse("writer:change-me").unwrap());
        for security in [ListenerSecurity::Sasl, ListenerSecurity::Plaintext] {
            let mut session = SaslSession::new(security);
            for (kind, number, bytes) in &events {
                let was_failed = session.is_failed();
                match kind {
                    0 => { session.on_request(*number); }
                    1 => { session.on_handshake(*number, &String::from_utf8_lossy(bytes)); }
                    2 => { let _ = session.on_authenticate(bytes, &store); }
                    _ => { let _ = session.on_raw_token(bytes, &store); }
                }
                // Failure is terminal.
                prop_assert!(!was_failed || session.is_failed());
                // Only the right password authenticates on a SASL listener.
                if security == ListenerSecurity::Sasl {
                    prop_assert!(session.principal().is_none());
                }
            }
        }
    }

    #[test]
    fn credential_errors_never_contain_the_password(user in "[a-z]{1,8}", password in "[A-Z]{12,20}", junk in "[ ,:]{0,4}") {
        // Entries whose parse fails at or after reading the password.
        for text in [
            format!("{user}:{password},{junk}"),
            format!("{user}:{password},{user}:{password}"),
            password.clone(),
            format!("{user}:{password},{password}"),
            format!("{user}:{password}{}", "X".repeat(300)),
        ] {
            if let Err(err) = PlainCredentials::parse(&text) {
                let shown = format!("{err} {err:?}");
                prop_assert!(!shown.contains(&password), "{}", shown);
            }
        }
        let creds = PlainCredentials::parse(&format!("{user}:{password}")).unwrap();
        let shown = format!("{creds:?}");
        prop_assert!(!shown.contains(&password));
        prop_assert_eq!(creds.verify(&user, password.as_bytes()), Some(Principal::user(&user)));
    }

    #[test]
    fn deny_always_wins(entries in proptest::collection::vec(entry(), 0..12), target in resource(), op in operation()) {
        let alice = Principal::user("alice");
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut with_deny = entries.clone();
        with_deny.push(AclEntry::parse("cluster", "DENY", "User:alice", "ALL", "*").unwrap());
        let auth = Authorizer::new(true, vec![], with_deny);
        prop_assert!(!auth.authorize(&alice, local, op, &target));
        let mut with_allow = entries;
        with_allow.push(AclEntry::parse("cluster", "ALLOW", "ALL", "ALL", "*").unwrap());
        let auth = Authorizer::new(true, vec![], with_allow.clone());
        let denied_somewhere = with_allow.iter().any(|e| e.permission == kafluss_auth::Permission::Deny);
        prop_assert!(auth.authorize(&alice, local, op, &target) || denied_somewhere);
    }
}
