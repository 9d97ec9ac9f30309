//! The SASL/PLAIN state machine against behaviour.md "SASL/PLAIN": every message in every
//! state, and every malformed PLAIN message.

use kafluss_auth::sasl_state::{
    API_KEY_API_VERSIONS, API_KEY_SASL_AUTHENTICATE, API_KEY_SASL_HANDSHAKE, MAX_UNAUTHENTICATED_FRAME_LEN,
};
use kafluss_auth::{
    CredentialStore, FailureReason, Gate, ListenerSecurity, PlainCredentials, PlainTokenError, Principal,
    SaslErrorCode, SaslFailure, SaslSession, MAX_PLAIN_TOKEN_LEN,
};

const PRODUCE: i16 = 0;
const METADATA: i16 = 3;
const CREATE_TOPICS: i16 = 19;

/// A state to start from, named for assertion messages.
type NamedState = (&'static str, fn() -> SaslSession);

fn store() -> CredentialStore {
    CredentialStore::new(PlainCredentials::parse("writer:change-me,other:pw").unwrap())
}

fn good_token() -> &'static [u8] {
    b"\0writer\0change-me"
}

fn sasl() -> SaslSession {
    SaslSession::new(ListenerSecurity::Sasl)
}

/// Session after a successful v1 handshake.
fn after_handshake_v1() -> SaslSession {
    let mut s = sasl();
    assert_eq!(s.on_handshake(1, "PLAIN").error_code(), 0);
    s
}

fn after_handshake_v0() -> SaslSession {
    let mut s = sasl();
    assert_eq!(s.on_handshake(0, "PLAIN").error_code(), 0);
    assert!(s.expects_raw_token());
    s
}

fn authenticated() -> SaslSession {
    let mut s = after_handshake_v1();
    s.on_authenticate(good_token(), &store()).unwrap();
    s
}

fn failed() -> SaslSession {
    let mut s = after_handshake_v1();
    s.on_authenticate(b"\0writer\0wrong", &store()).unwrap_err();
    s
}

fn assert_closing(failure: &SaslFailure, code: SaslErrorCode) {
    assert_eq!(failure.code, code, "{failure}");
    assert!(failure.close_after, "{failure}");
}

fn assert_failed(session: &SaslSession) {
    assert!(session.is_failed());
    assert!(session.principal().is_none());
    assert!(!session.expects_raw_token());
}

#[test]
fn error_code_mapping() {
    assert_eq!(SaslErrorCode::None.code(), 0);
    assert_eq!(SaslErrorCode::UnsupportedSaslMechanism.code(), 33);
    assert_eq!(SaslErrorCode::IllegalSaslState.code(), 34);
    assert_eq!(SaslErrorCode::UnsupportedVersion.code(), 35);
    assert_eq!(SaslErrorCode::SaslAuthenticationFailed.code(), 58);
}

#[test]
fn happy_path_v1() {
    let mut s = sasl();
    assert!(!s.is_authenticated());
    assert_eq!(s.max_frame_len(), Some(MAX_UNAUTHENTICATED_FRAME_LEN));
    assert_eq!(s.on_request(API_KEY_API_VERSIONS), Gate::Serve);
    assert_eq!(s.on_request(API_KEY_SASL_HANDSHAKE), Gate::Serve);
    let outcome = s.on_handshake(1, "PLAIN");
    assert_eq!(outcome.result, Ok(()));
    assert_eq!((outcome.error_code(), outcome.close_after()), (0, false));
    assert_eq!(outcome.enabled_mechanisms, &["PLAIN"]);
    assert!(!s.expects_raw_token());
    assert_eq!(s.on_request(API_KEY_API_VERSIONS), Gate::Serve);
    assert_eq!(s.on_request(API_KEY_SASL_AUTHENTICATE), Gate::Serve);
    let principal = s.on_authenticate(good_token(), &store()).unwrap();
    assert_eq!(principal, Principal::user("writer"));
    assert_eq!(s.principal(), Some(&principal));
    assert_eq!(s.max_frame_len(), None);
    for key in [PRODUCE, METADATA, API_KEY_API_VERSIONS, CREATE_TOPICS] {
        assert_eq!(s.on_request(key), Gate::Serve);
    }
}

#[test]
fn happy_path_v0_raw_token() {
    let mut s = after_handshake_v0();
    assert_eq!(s.max_frame_len(), Some(MAX_PLAIN_TOKEN_LEN));
    let principal = s.on_raw_token(b"writer\0writer\0change-me", &store()).unwrap();
    assert_eq!(principal, Principal::user("writer"));
    assert!(!s.expects_raw_token());
    assert_eq!(s.on_request(PRODUCE), Gate::Serve);
}

#[test]
fn plaintext_listener_is_anonymous_and_refuses_sasl() {
    let mut s = SaslSession::new(ListenerSecurity::Plaintext);
    assert_eq!(s.principal(), Some(&Principal::anonymous()));
    assert_eq!(s.on_request(PRODUCE), Gate::Serve);
    assert_eq!(
        s.on_request(API_KEY_SASL_HANDSHAKE),
        Gate::Serve,
        "answered with an error, not dropped"
    );
    let outcome = s.on_handshake(1, "PLAIN");
    assert_closing(&outcome.result.unwrap_err(), SaslErrorCode::IllegalSaslState);
    assert_eq!((outcome.error_code(), outcome.close_after()), (34, true));
    assert!(outcome.enabled_mechanisms.is_empty());
    assert_failed(&s);

    let mut s = SaslSession::new(ListenerSecurity::Plaintext);
    let failure = s.on_authenticate(good_token(), &store()).unwrap_err();
    assert_closing(&failure, SaslErrorCode::IllegalSaslState);
    assert_eq!(failure.reason, FailureReason::PlaintextListener);
    assert_failed(&s);
}

#[test]
fn other_requests_before_authentication_close_silently() {
    let states: Vec<NamedState> = vec![("initial", sasl), ("after handshake v1", after_handshake_v1)];
    for (name, make) in states {
        for key in [PRODUCE, METADATA, CREATE_TOPICS, -1, 1000] {
            let mut s = make();
            assert_eq!(s.on_request(key), Gate::CloseSilently, "{name}: api {key}");
            assert_failed(&s);
            assert_eq!(
                s.on_request(API_KEY_API_VERSIONS),
                Gate::CloseSilently,
                "{name}: stays closed"
            );
        }
    }
}

#[test]
fn any_request_while_a_raw_token_is_due_closes() {
    for key in [API_KEY_API_VERSIONS, API_KEY_SASL_AUTHENTICATE, PRODUCE] {
        let mut s = after_handshake_v0();
        assert_eq!(s.on_request(key), Gate::CloseSilently);
        assert_failed(&s);
    }
}

#[test]
fn nothing_is_served_after_a_failure() {
    let mut s = failed();
    assert_failed(&s);
    for key in [
        API_KEY_API_VERSIONS,
        API_KEY_SASL_HANDSHAKE,
        API_KEY_SASL_AUTHENTICATE,
        PRODUCE,
    ] {
        assert_eq!(s.on_request(key), Gate::CloseSilently);
    }
    assert_closing(
        &s.on_handshake(1, "PLAIN").result.unwrap_err(),
        SaslErrorCode::IllegalSaslState,
    );
    assert_closing(
        &s.on_authenticate(good_token(), &store()).unwrap_err(),
        SaslErrorCode::IllegalSaslState,
    );
    assert_failed(&s);
}

#[test]
fn unsupported_mechanism_closes() {
    for mechanism in ["plain", "SCRAM-SHA-256", "GSSAPI", "", "PLAIN "] {
        for version in [0, 1] {
            let mut s = sasl();
            let outcome = s.on_handshake(version, mechanism);
            assert_closing(
                &outcome.result.unwrap_err(),
                SaslErrorCode::UnsupportedSaslMechanism,
            );
            assert_eq!(
                outcome.enabled_mechanisms,
                &["PLAIN"],
                "the client learns what is enabled"
            );
            assert_failed(&s);
        }
    }
}

#[test]
fn unsupported_handshake_version_closes() {
    for version in [-1, 2, 5] {
        let mut s = sasl();
        let failure = s.on_handshake(version, "PLAIN").result.unwrap_err();
        assert_closing(&failure, SaslErrorCode::UnsupportedVersion);
        assert_eq!(
            failure.reason,
            FailureReason::UnsupportedHandshakeVersion(version)
        );
        assert_failed(&s);
    }
}

#[test]
fn second_handshake_is_illegal_in_every_later_state() {
    let states: Vec<NamedState> = vec![
        ("after handshake v1", after_handshake_v1),
        ("after handshake v0", after_handshake_v0),
        ("authenticated", authenticated),
    ];
    for (name, make) in states {
        let mut s = make();
        let failure = s.on_handshake(1, "PLAIN").result.unwrap_err();
        assert_closing(&failure, SaslErrorCode::IllegalSaslState);
        assert!(
            matches!(
                failure.reason,
                FailureReason::OutOfOrder {
                    message: "SaslHandshake",
                    ..
                }
            ),
            "{name}"
        );
        assert_failed(&s);
    }
}

#[test]
fn authenticate_outside_the_handshake_state_is_illegal() {
    let states: Vec<NamedState> = vec![
        ("initial", sasl),
        ("after handshake v0", after_handshake_v0),
        ("authenticated (no re-authentication)", authenticated),
    ];
    for (name, make) in states {
        let mut s = make();
        let failure = s.on_authenticate(good_token(), &store()).unwrap_err();
        assert_closing(&failure, SaslErrorCode::IllegalSaslState);
        assert!(
            matches!(failure.reason, FailureReason::OutOfOrder { .. }),
            "{name}"
        );
        assert_failed(&s);
    }
}

#[test]
fn raw_token_outside_v0_mode_is_illegal() {
    let states: Vec<NamedState> = vec![
        ("initial", sasl),
        ("after handshake v1", after_handshake_v1),
        ("authenticated", authenticated),
    ];
    for (name, make) in states {
        let mut s = make();
        let failure = s.on_raw_token(good_token(), &store()).unwrap_err();
        assert_closing(&failure, SaslErrorCode::IllegalSaslState);
        assert!(
            matches!(failure.reason, FailureReason::OutOfOrder { .. }),
            "{name}"
        );
        assert_failed(&s);
    }
}

#[test]
fn bad_credentials_fail_with_fixed_message() {
    for token in [
        &b"\0writer\0wrong"[..],
        b"\0writer\0change-m",
        b"\0writer\0change-me ",
        b"\0nobody\0change-me",
        b"\0Writer\0change-me",
        b"\0other\0change-me",
    ] {
        for raw in [false, true] {
            let mut s = if raw {
                after_handshake_v0()
            } else {
                after_handshake_v1()
            };
            let failure = if raw {
                s.on_raw_token(token, &store()).unwrap_err()
            } else {
                s.on_authenticate(token, &store()).unwrap_err()
            };
            assert_closing(&failure, SaslErrorCode::SaslAuthenticationFailed);
            assert_eq!(failure.reason, FailureReason::InvalidCredentials);
            assert_eq!(
                failure.message,
                kafluss_auth::sasl_state::MESSAGE_AUTHENTICATION_FAILED
            );
            assert_failed(&s);
        }
    }
}

#[test]
fn every_malformed_plain_message_fails_authentication() {
    let long = vec![b'x'; 300];
    let mut too_long_user = b"\0".to_vec();
    too_long_user.extend_from_slice(&long);
    too_long_user.extend_from_slice(b"\0change-me");
    let cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"writer".to_vec(),
        b"writer\0change-me".to_vec(),
        b"\0writer\0change-me\0".to_vec(),
        b"\0\0change-me".to_vec(),
        b"\0writer\0".to_vec(),
        b"other\0writer\0change-me".to_vec(),
        b"\0wr\xffiter\0change-me".to_vec(),
        too_long_user,
        vec![0u8; MAX_PLAIN_TOKEN_LEN + 10],
    ];
    for token in cases {
        let mut s = after_handshake_v1();
        let failure = s.on_authenticate(&token, &store()).unwrap_err();
        assert_closing(&failure, SaslErrorCode::SaslAuthenticationFailed);
        assert!(
            matches!(failure.reason, FailureReason::MalformedToken(_)),
            "{token:?}: {failure}"
        );
        assert_eq!(failure.message, kafluss_auth::sasl_state::MESSAGE_MALFORMED_PLAIN);
        assert_failed(&s);
    }
    let mut s = after_handshake_v1();
    let failure = s
        .on_authenticate(b"admin\0writer\0change-me", &store())
        .unwrap_err();
    assert_eq!(
        failure.reason,
        FailureReason::MalformedToken(PlainTokenError::AuthzidMismatch)
    );
}

#[test]
fn failures_never_echo_the_secret() {
    let secret = "Sup3rS3cret";
    let tokens = [
        format!("\0writer\0{secret}"),
        format!("\0{secret}\0{secret}"),
        format!("{secret}\0writer\0{secret}"),
        format!("\0writer\0{secret}\0x"),
    ];
    for token in tokens {
        let mut s = after_handshake_v1();
        let failure = s.on_authenticate(token.as_bytes(), &store()).unwrap_err();
        let shown = format!("{failure} {failure:?} {} {s:?}", failure.message);
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[test]
fn credential_swap_applies_to_new_sessions_only() {
    let store = CredentialStore::new(PlainCredentials::parse("writer:old").unwrap());
    let mut established = after_handshake_v1();
    established.on_authenticate(b"\0writer\0old", &store).unwrap();

    store.replace(PlainCredentials::parse("writer:new").unwrap());
    assert_eq!(
        established.principal(),
        Some(&Principal::user("writer")),
        "identity kept"
    );
    assert_eq!(established.on_request(PRODUCE), Gate::Serve);

    let mut with_old = after_handshake_v1();
    assert!(with_old.on_authenticate(b"\0writer\0old", &store).is_err());
    let mut with_new = after_handshake_v1();
    assert_eq!(
        with_new.on_authenticate(b"\0writer\0new", &store),
        Ok(Principal::user("writer"))
    );
}
