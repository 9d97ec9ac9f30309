//! The identity an authenticated connection acts as: `Type:name`, e.g. `User:writer`.

use std::fmt;

use crate::acl::AclError;

/// Longest principal name accepted anywhere (same bound as a PLAIN user name).
pub const MAX_PRINCIPAL_NAME_LEN: usize = 255;

/// The principal type every SASL/PLAIN login and every plaintext connection gets.
pub const USER_TYPE: &str = "User";

/// Name of the principal of unauthenticated (plaintext listener) connections.
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

/// A Fluss principal, kept as its canonical text `Type:name` so that ACL checks compare
/// strings without allocating.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// `Type:name`; the first `:` separates type from name.
    text: String,
    /// Byte length of the type part (position of the first `:`).
    type_len: usize,
}

impl Principal {
    /// `User:<name>`. The name is taken as is: a PLAIN user name was already bounded and
    /// checked by the token parser or the credential parser.
    pub fn user(name: &str) -> Self {
        Self {
            text: format!("{USER_TYPE}:{name}"),
            type_len: USER_TYPE.len(),
        }
    }

    /// `User:ANONYMOUS`, the principal of plaintext listeners.
    pub fn anonymous() -> Self {
        Self::user(ANONYMOUS_NAME)
    }

    /// Parses `User:name` (e.g. `User:alice`), as `super.users` and a new ACL name a
    /// principal: the name is 1–255 bytes without control characters (everything after the
    /// first `:`), and the type must be `User`, spelled so, since every connection's principal
    /// is `User:<name>` and a principal of another type (`user:bob`, `Group:ops`) would never
    /// match ([`AclError::PrincipalType`]). `expected` says what the caller accepts, for the
    /// message of a value that is not `Type:name` at all.
    pub fn parse(text: &str, expected: &'static str) -> Result<Self, AclError> {
        let principal = Self::parse_any_type(text, expected)?;
        if principal.principal_type() != USER_TYPE {
            return Err(AclError::PrincipalType {
                value: shorten(text),
                name: shorten(principal.name()),
            });
        }
        Ok(principal)
    }

    /// `Type:name` with any type of 1–32 ASCII letters: what ACL lines stored by earlier
    /// versions may hold, and what a filter may select to drop them.
    pub(crate) fn parse_any_type(text: &str, expected: &'static str) -> Result<Self, AclError> {
        let invalid = || AclError::InvalidPrincipal {
            value: shorten(text),
            expected,
        };
        let (principal_type, name) = text.split_once(':').ok_or_else(invalid)?;
        let type_ok = !principal_type.is_empty()
            && principal_type.len() <= 32
            && principal_type.bytes().all(|b| b.is_ascii_alphabetic());
        if !type_ok || !valid_principal_name(name) {
            return Err(invalid());
        }
        Ok(Self {
            text: text.to_owned(),
            type_len: principal_type.len(),
        })
    }

    /// The canonical text, `Type:name`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The type part, e.g. `User`.
    pub fn principal_type(&self) -> &str {
        &self.text[..self.type_len]
    }

    /// The name part, e.g. `writer`.
    pub fn name(&self) -> &str {
        &self.text[self.type_len + 1..]
    }
}

/// A principal name is 1–255 bytes with no control characters; this keeps ACL lines and
/// log lines single-line and unambiguous.
pub(crate) fn valid_principal_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_PRINCIPAL_NAME_LEN && !name.chars().any(char::is_control)
}

/// Bounds user-supplied text quoted back in error messages.
pub(crate) fn shorten(text: &str) -> String {
    const MAX_QUOTED_CHARS: usize = 64;
    if text.chars().count() <= MAX_QUOTED_CHARS {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(MAX_QUOTED_CHARS).collect();
        short.push('…');
        short
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Principal({})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_anonymous_have_canonical_text() {
        assert_eq!(Principal::user("writer").as_str(), "User:writer");
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(Principal::user("writer").principal_type(), "User");
        assert_eq!(Principal::user("writer").name(), "writer");
    }

    const EXPECTED: &str = "User:name";

    #[test]
    fn parse_splits_at_first_colon() {
        let p = Principal::parse("User:ops:eu", EXPECTED).unwrap();
        assert_eq!(p.principal_type(), "User");
        assert_eq!(p.name(), "ops:eu");
        assert_eq!(
            Principal::parse("User:alice", EXPECTED).unwrap(),
            Principal::user("alice")
        );
        let p = Principal::parse_any_type("Role:ops:eu", EXPECTED).unwrap();
        assert_eq!((p.principal_type(), p.name()), ("Role", "ops:eu"));
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in ["alice", ":alice", "User:", "Us3r:alice", "User:a\tb", "User:a\nb"] {
            assert!(Principal::parse(bad, EXPECTED).is_err(), "{bad:?} accepted");
        }
        assert!(Principal::parse(&format!("User:{}", "x".repeat(256)), EXPECTED).is_err());
        assert!(Principal::parse(&format!("User:{}", "x".repeat(255)), EXPECTED).is_ok());
        assert_eq!(
            Principal::parse("alice", EXPECTED).unwrap_err().to_string(),
            "invalid principal `alice`: expected User:name"
        );
    }

    #[test]
    fn only_the_user_type_is_a_principal() {
        for (text, name) in [("user:bob", "bob"), ("Group:ops", "ops"), ("USER:x:y", "x:y")] {
            let error = Principal::parse(text, EXPECTED).unwrap_err();
            assert_eq!(
                error,
                AclError::PrincipalType {
                    value: text.to_string(),
                    name: name.to_string()
                }
            );
            let message = error.to_string();
            assert!(
                message.contains(&format!("`{text}`")) && message.contains(&format!("User:{name}")),
                "{message}"
            );
        }
    }

    #[test]
    fn error_quotes_at_most_64_chars() {
        let err = Principal::parse(&"y".repeat(1000), EXPECTED)
            .unwrap_err()
            .to_string();
        assert!(err.len() < 200, "{err}");
        let err = Principal::parse(&format!("Group:{}", "y".repeat(1000)), EXPECTED)
            .unwrap_err()
            .to_string();
        assert!(err.len() < 300, "{err}");
    }
}
