//! The SASL PLAIN message (RFC 4616): `[authzid] NUL authcid NUL passwd`.
//!
//! Rules enforced, each a [`PlainTokenError`] that never contains token bytes:
//! - exactly two NUL separators (a NUL inside the password is malformed, RFC 4616 `SAFE`);
//! - authcid (the user name) and password are non-empty;
//! - each part is at most [`MAX_PLAIN_PART_LEN`] bytes, the whole token at most
//!   [`MAX_PLAIN_TOKEN_LEN`]; the length is checked before anything is scanned;
//! - authzid and authcid are UTF-8; the authzid is empty or equal to the authcid (kafluss
//!   has no proxy authorization, as in Kafka);
//! - the password is kept as bytes and compared as bytes, so a non-UTF-8 password is simply
//!   a wrong password.

use std::fmt;

use thiserror::Error;

/// Longest authzid, user name or password, in bytes.
pub const MAX_PLAIN_PART_LEN: usize = 255;

/// Longest PLAIN token: three maximal parts and two NULs. A broker reading a raw (handshake
/// v0) token frame can refuse larger frames before reading them.
pub const MAX_PLAIN_TOKEN_LEN: usize = 3 * MAX_PLAIN_PART_LEN + 2;

/// Which part of a PLAIN message an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainPart {
    Authzid,
    Username,
    Password,
}

impl fmt::Display for PlainPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PlainPart::Authzid => "authorization id",
            PlainPart::Username => "user name",
            PlainPart::Password => "password",
        })
    }
}

/// Why a PLAIN message is malformed. Never carries any byte of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PlainTokenError {
    #[error("PLAIN message of {len} bytes exceeds {MAX_PLAIN_TOKEN_LEN} bytes")]
    TooLong { len: usize },
    #[error("PLAIN message needs exactly two NUL separators, found {found}")]
    WrongSeparatorCount { found: usize },
    #[error("PLAIN {part} is empty")]
    Empty { part: PlainPart },
    #[error("PLAIN {part} exceeds {MAX_PLAIN_PART_LEN} bytes")]
    PartTooLong { part: PlainPart },
    #[error("PLAIN {part} is not valid UTF-8")]
    NotUtf8 { part: PlainPart },
    #[error("PLAIN authorization id differs from the user name (proxy authorization is not supported)")]
    AuthzidMismatch,
}

/// A parsed PLAIN message borrowing from the token. `Debug` hides the password.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PlainToken<'a> {
    pub authzid: &'a str,
    pub username: &'a str,
    pub password: &'a [u8],
}

impl fmt::Debug for PlainToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainToken")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl<'a> PlainToken<'a> {
    pub fn parse(token: &'a [u8]) -> Result<Self, PlainTokenError> {
        if token.len() > MAX_PLAIN_TOKEN_LEN {
            return Err(PlainTokenError::TooLong { len: token.len() });
        }
        let found = token.iter().filter(|&&b| b == 0).count();
        if found != 2 {
            return Err(PlainTokenError::WrongSeparatorCount { found });
        }
        let mut parts = token.splitn(3, |&b| b == 0);
        let (Some(authzid), Some(username), Some(password)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(PlainTokenError::WrongSeparatorCount { found });
        };
        for (part, bytes) in [
            (PlainPart::Authzid, authzid),
            (PlainPart::Username, username),
            (PlainPart::Password, password),
        ] {
            if bytes.len() > MAX_PLAIN_PART_LEN {
                return Err(PlainTokenError::PartTooLong { part });
            }
        }
        let text = |part, bytes| std::str::from_utf8(bytes).map_err(|_| PlainTokenError::NotUtf8 { part });
        let username = text(PlainPart::Username, username)?;
        let authzid = text(PlainPart::Authzid, authzid)?;
        if username.is_empty() {
            return Err(PlainTokenError::Empty {
                part: PlainPart::Username,
            });
        }
        if password.is_empty() {
            return Err(PlainTokenError::Empty {
                part: PlainPart::Password,
            });
        }
        if !authzid.is_empty() && authzid != username {
            return Err(PlainTokenError::AuthzidMismatch);
        }
        Ok(PlainToken {
            authzid,
            username,
            password,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_and_without_authzid() {
        let t = PlainToken::parse(b"\0writer\0change-me").unwrap();
        assert_eq!(
            (t.authzid, t.username, t.password),
            ("", "writer", &b"change-me"[..])
        );
        let t = PlainToken::parse(b"writer\0writer\0pw:with:colons").unwrap();
        assert_eq!(
            (t.authzid, t.username, t.password),
            ("writer", "writer", &b"pw:with:colons"[..])
        );
    }

    #[test]
    fn every_malformed_shape_is_rejected() {
        use PlainPart::*;
        use PlainTokenError::*;
        let long = "x".repeat(256);
        let cases: Vec<(Vec<u8>, PlainTokenError)> = vec![
            (b"".to_vec(), WrongSeparatorCount { found: 0 }),
            (b"writer".to_vec(), WrongSeparatorCount { found: 0 }),
            (b"writer\0pw".to_vec(), WrongSeparatorCount { found: 1 }),
            (b"\0writer\0pw\0".to_vec(), WrongSeparatorCount { found: 3 }),
            (b"\0writer\0p\0w".to_vec(), WrongSeparatorCount { found: 3 }),
            (b"\0\0pw".to_vec(), Empty { part: Username }),
            (b"\0writer\0".to_vec(), Empty { part: Password }),
            (b"\0\0".to_vec(), Empty { part: Username }),
            (b"other\0writer\0pw".to_vec(), AuthzidMismatch),
            (b"\0wr\xffiter\0pw".to_vec(), NotUtf8 { part: Username }),
            (b"\xff\0writer\0pw".to_vec(), NotUtf8 { part: Authzid }),
            (
                format!("\0{long}\0pw").into_bytes(),
                PartTooLong { part: Username },
            ),
            (
                format!("\0u\0{long}").into_bytes(),
                PartTooLong { part: Password },
            ),
            (
                format!("{long}\0u\0pw").into_bytes(),
                PartTooLong { part: Authzid },
            ),
            (
                vec![b'a'; MAX_PLAIN_TOKEN_LEN + 1],
                TooLong {
                    len: MAX_PLAIN_TOKEN_LEN + 1,
                },
            ),
        ];
        for (token, expected) in cases {
            assert_eq!(PlainToken::parse(&token), Err(expected), "{token:?}");
        }
    }

    #[test]
    fn limits_are_inclusive() {
        let max = "x".repeat(MAX_PLAIN_PART_LEN);
        let token = format!("{max}\0{max}\0{max}");
        assert_eq!(token.len(), MAX_PLAIN_TOKEN_LEN);
        assert!(PlainToken::parse(token.as_bytes()).is_ok());
    }

    #[test]
    fn non_utf8_password_is_accepted_as_bytes() {
        assert_eq!(PlainToken::parse(b"\0u\0\xff\xfe").unwrap().password, b"\xff\xfe");
    }

    #[test]
    fn debug_and_errors_hide_the_password() {
        let token = PlainToken::parse(b"\0writer\0s3cret-pw").unwrap();
        assert!(!format!("{token:?}").contains("s3cret"));
        let err = PlainToken::parse(b"\0writer\0s3cret\0pw").unwrap_err();
        assert!(!format!("{err} {err:?}").contains("s3cret"));
    }
}
