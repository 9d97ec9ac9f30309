//! HTTP Basic authentication (RFC 7617) for the admin endpoint when the Fluss listener is
//! mapped to `sasl`: same users and passwords as SASL/PLAIN.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use thiserror::Error;

use crate::credentials::CredentialStore;
use crate::plain::MAX_PLAIN_PART_LEN;
use crate::principal::Principal;

/// Longest `Authorization` header value considered: "Basic " plus the Base64 of a maximal
/// user, `:` and password.
const MAX_HEADER_LEN: usize = 6 + (2 * MAX_PLAIN_PART_LEN + 1).div_ceil(3) * 4;

/// Why an `Authorization` header is not usable Basic credentials. Never carries its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BasicAuthError {
    #[error("Authorization header is longer than {MAX_HEADER_LEN} bytes")]
    TooLong,
    #[error("Authorization scheme is not Basic")]
    NotBasic,
    #[error("Basic credentials are not valid Base64")]
    BadBase64,
    #[error("Basic credentials are not UTF-8 user:password")]
    Malformed,
}

/// Decoded Basic credentials. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicCredentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Parses an `Authorization` header value such as `Basic d3JpdGVyOmNoYW5nZS1tZQ==`. The
/// scheme is case-insensitive; the user name ends at the first `:`.
pub fn parse_basic_authorization(header_value: &str) -> Result<BasicCredentials, BasicAuthError> {
    let value = header_value.trim();
    if value.len() > MAX_HEADER_LEN {
        return Err(BasicAuthError::TooLong);
    }
    let (scheme, encoded) = value.split_once(' ').ok_or(BasicAuthError::NotBasic)?;
    if !scheme.eq_ignore_ascii_case("Basic") {
        return Err(BasicAuthError::NotBasic);
    }
    let decoded = STANDARD
        .decode(encoded.trim())
        .map_err(|_| BasicAuthError::BadBase64)?;
    let text = String::from_utf8(decoded).map_err(|_| BasicAuthError::Malformed)?;
    let (username, password) = text.split_once(':').ok_or(BasicAuthError::Malformed)?;
    if username.is_empty() || password.is_empty() {
        return Err(BasicAuthError::Malformed);
    }
    Ok(BasicCredentials {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

impl CredentialStore {
    /// `Some(User:<name>)` when `header_value` carries valid Basic credentials for a user
    /// of the current set.
    pub fn verify_basic(&self, header_value: &str) -> Option<Principal> {
        let credentials = parse_basic_authorization(header_value).ok()?;
        self.verify(&credentials.username, credentials.password.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::PlainCredentials;

    fn header(raw: &str) -> String {
        format!("Basic {}", STANDARD.encode(raw))
    }

    #[test]
    fn parses_and_verifies() {
        let parsed = parse_basic_authorization(&header("writer:pa:ss")).unwrap();
        assert_eq!(
            (parsed.username.as_str(), parsed.password.as_str()),
            ("writer", "pa:ss")
        );
        let store = CredentialStore::new(PlainCredentials::parse("writer:pa:ss").unwrap());
        assert_eq!(
            store.verify_basic(&header("writer:pa:ss")),
            Some(Principal::user("writer"))
        );
        assert_eq!(store.verify_basic(&header("writer:pa")), None);
        assert_eq!(
            store
                .verify_basic(&format!("basic {}", STANDARD.encode("writer:pa:ss")))
                .unwrap()
                .name(),
            "writer"
        );
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(
            parse_basic_authorization("Bearer abc"),
            Err(BasicAuthError::NotBasic)
        );
        assert_eq!(parse_basic_authorization("Basic"), Err(BasicAuthError::NotBasic));
        assert_eq!(
            parse_basic_authorization("Basic !!!"),
            Err(BasicAuthError::BadBase64)
        );
        assert_eq!(
            parse_basic_authorization(&header("nocolon")),
            Err(BasicAuthError::Malformed)
        );
        assert_eq!(
            parse_basic_authorization(&header(":pw")),
            Err(BasicAuthError::Malformed)
        );
        assert_eq!(
            parse_basic_authorization(&header("u:")),
            Err(BasicAuthError::Malformed)
        );
        let long = header(&format!("u:{}", "p".repeat(600)));
        assert_eq!(parse_basic_authorization(&long), Err(BasicAuthError::TooLong));
        let max = header(&format!("{}:{}", "u".repeat(255), "p".repeat(255)));
        assert!(parse_basic_authorization(&max).is_ok());
    }

    #[test]
    fn debug_hides_password() {
        let parsed = parse_basic_authorization(&header("writer:topsecret")).unwrap();
        assert!(!format!("{parsed:?}").contains("topsecret"));
    }
}
