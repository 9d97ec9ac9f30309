//! `security.sasl.plain.credentials` and the live credential store.
//!
//! Format: `user:password[,user:password...]`.
//! - Entries are separated by `,` and trimmed of surrounding whitespace, so a password can
//!   contain neither `,` nor leading/trailing whitespace.
//! - Each entry splits at its FIRST `:`: user names cannot contain `:`, passwords can
//!   (`app:pa:ss` is user `app`, password `pa:ss`).
//! - User names: 1–255 bytes, no control characters, not `*` (reserved for the wildcard
//!   principal `User:*`), unique. Passwords: 1–255 bytes (the PLAIN limits). At most
//!   [`MAX_USERS`] users.
//! - A blank value is an empty set: every login fails.
//!
//! Errors name the entry position and, when known, the user; never a password, and never an
//! unparsed entry (which may be a password typed without its user).
//!
//! Passwords are compared in constant time with respect to their content and length: both
//! sides are padded to [`MAX_PLAIN_PART_LEN`] bytes and compared with `subtle`, and an
//! unknown user costs the same comparison against a dummy.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use subtle::ConstantTimeEq;
use thiserror::Error;

use crate::plain::MAX_PLAIN_PART_LEN;
use crate::principal::{valid_principal_name, Principal};

/// Most users one credentials value may define.
pub const MAX_USERS: usize = 10_000;

/// Why a credentials value was rejected. Never contains a password.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CredentialsError {
    #[error("security.sasl.plain.credentials: entry {position} is empty (format: user:password[,user:password...])")]
    EmptyEntry { position: usize },
    #[error("security.sasl.plain.credentials: entry {position} has no `:` between user and password")]
    MissingSeparator { position: usize },
    #[error("security.sasl.plain.credentials: entry {position} has an empty user name")]
    EmptyUsername { position: usize },
    #[error("security.sasl.plain.credentials: entry {position}: user name must be 1-255 bytes without control characters and not `*`")]
    InvalidUsername { position: usize },
    #[error("security.sasl.plain.credentials: user `{user}` has an empty password")]
    EmptyPassword { user: String },
    #[error(
        "security.sasl.plain.credentials: the password of user `{user}` exceeds {MAX_PLAIN_PART_LEN} bytes"
    )]
    PasswordTooLong { user: String },
    #[error("security.sasl.plain.credentials: user `{user}` is defined more than once")]
    DuplicateUser { user: String },
    #[error("security.sasl.plain.credentials: more than {MAX_USERS} users")]
    TooManyUsers,
}

/// A password padded to the PLAIN maximum so that comparing two costs the same whatever
/// their lengths.
#[derive(Clone)]
struct PaddedSecret {
    bytes: [u8; MAX_PLAIN_PART_LEN],
    len: u64,
}

impl PaddedSecret {
    /// Longer input is truncated for the byte comparison but keeps its true length, so it
    /// never equals a stored password.
    fn new(secret: &[u8]) -> Self {
        let mut bytes = [0u8; MAX_PLAIN_PART_LEN];
        let kept = secret.len().min(MAX_PLAIN_PART_LEN);
        bytes[..kept].copy_from_slice(&secret[..kept]);
        Self {
            bytes,
            len: secret.len() as u64,
        }
    }

    fn ct_matches(&self, other: &PaddedSecret) -> bool {
        (self.bytes[..].ct_eq(&other.bytes[..]) & self.len.ct_eq(&other.len)).into()
    }
}

/// A parsed, validated set of PLAIN users. `Debug` lists user names only; there is no
/// `Display`.
#[derive(Clone, Default)]
pub struct PlainCredentials {
    users: HashMap<String, PaddedSecret>,
}

impl PlainCredentials {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses `user:password[,user:password...]` (see the module documentation).
    pub fn parse(text: &str) -> Result<Self, CredentialsError> {
        let mut users = HashMap::new();
        if text.trim().is_empty() {
            return Ok(Self { users });
        }
        for (index, entry) in text.split(',').enumerate() {
            let position = index + 1;
            if users.len() >= MAX_USERS {
                return Err(CredentialsError::TooManyUsers);
            }
            let entry = entry.trim();
            if entry.is_empty() {
                return Err(CredentialsError::EmptyEntry { position });
            }
            let (user, password) = entry
                .split_once(':')
                .ok_or(CredentialsError::MissingSeparator { position })?;
            if user.is_empty() {
                return Err(CredentialsError::EmptyUsername { position });
            }
            if user == "*" || !valid_principal_name(user) {
                return Err(CredentialsError::InvalidUsername { position });
            }
            if password.is_empty() {
                return Err(CredentialsError::EmptyPassword {
                    user: user.to_owned(),
                });
            }
            if password.len() > MAX_PLAIN_PART_LEN {
                return Err(CredentialsError::PasswordTooLong {
                    user: user.to_owned(),
                });
            }
            if users
                .insert(user.to_owned(), PaddedSecret::new(password.as_bytes()))
                .is_some()
            {
                return Err(CredentialsError::DuplicateUser {
                    user: user.to_owned(),
                });
            }
        }
        Ok(Self { users })
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// User names, sorted.
    pub fn usernames(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// `Some(User:<username>)` when the password is right.
    pub fn verify(&self, username: &str, password: &[u8]) -> Option<Principal> {
        let given = PaddedSecret::new(password);
        match self.users.get(username) {
            Some(stored) if stored.ct_matches(&given) => Some(Principal::user(username)),
            Some(_) => None,
            None => {
                // Spend the same comparison as for a known user, so that response time
                // does not tell which user names exist.
                let dummy = PaddedSecret::new(b"");
                std::hint::black_box(dummy.ct_matches(&given));
                None
            }
        }
    }
}

impl fmt::Debug for PlainCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("users", &self.usernames())
            .finish_non_exhaustive()
    }
}

/// The credentials in force, replaced atomically at runtime (`CALL sys.set_cluster_configs`).
/// Each verification reads one snapshot; an authenticated connection keeps the principal it
/// got, so replacing the set never affects established connections.
pub struct CredentialStore {
    current: ArcSwap<PlainCredentials>,
}

impl CredentialStore {
    pub fn new(credentials: PlainCredentials) -> Self {
        Self {
            current: ArcSwap::from_pointee(credentials),
        }
    }

    /// Installs a new set; new authentications use it from now on.
    pub fn replace(&self, credentials: PlainCredentials) {
        self.current.store(Arc::new(credentials));
    }

    /// The set in force now.
    pub fn snapshot(&self) -> Arc<PlainCredentials> {
        self.current.load_full()
    }

    /// Verifies against the set in force now.
    pub fn verify(&self, username: &str, password: &[u8]) -> Option<Principal> {
        self.current.load().verify(username, password)
    }
}

impl Default for CredentialStore {
    fn default() -> Self {
        Self::new(PlainCredentials::empty())
    }
}

impl fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CredentialStore")
            .field(&*self.current.load())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_verify() {
        let creds = PlainCredentials::parse("writer:change-me, reader:pa:ss ,x:y").unwrap();
        assert_eq!(creds.usernames(), vec!["reader", "writer", "x"]);
        assert_eq!(
            creds.verify("writer", b"change-me"),
            Some(Principal::user("writer"))
        );
        assert_eq!(creds.verify("reader", b"pa:ss"), Some(Principal::user("reader")));
        assert_eq!(creds.verify("writer", b"change-m"), None);
        assert_eq!(creds.verify("writer", b"change-me!"), None);
        assert_eq!(creds.verify("writer", b""), None);
        assert_eq!(
            creds.verify("Writer", b"change-me"),
            None,
            "user names are case-sensitive"
        );
        assert_eq!(creds.verify("nobody", b"change-me"), None);
        assert_eq!(creds.verify("reader", b"pa"), None);
    }

    #[test]
    fn long_given_password_never_matches_its_prefix() {
        let stored = "p".repeat(MAX_PLAIN_PART_LEN);
        let creds = PlainCredentials::parse(&format!("u:{stored}")).unwrap();
        assert!(creds.verify("u", stored.as_bytes()).is_some());
        assert!(creds.verify("u", format!("{stored}p").as_bytes()).is_none());
    }

    #[test]
    fn blank_is_empty() {
        assert!(PlainCredentials::parse("  ").unwrap().is_empty());
        assert_eq!(PlainCredentials::empty().verify("a", b"b"), None);
    }

    #[test]
    fn errors_name_position_or_user_never_password() {
        use CredentialsError::*;
        let long = "s".repeat(256);
        let cases = [
            ("a:secret1,", EmptyEntry { position: 2 }),
            ("a:secret1,,b:secret2", EmptyEntry { position: 2 }),
            ("a:secret1,secret2", MissingSeparator { position: 2 }),
            (":secret1", EmptyUsername { position: 1 }),
            ("*:secret1", InvalidUsername { position: 1 }),
            ("a\tb:secret1", InvalidUsername { position: 1 }),
            ("a:", EmptyPassword { user: "a".into() }),
            ("a:secret1,a:secret2", DuplicateUser { user: "a".into() }),
        ];
        for (text, expected) in cases {
            let err = PlainCredentials::parse(text).unwrap_err();
            assert!(!err.to_string().contains("secret"), "{err}");
            assert_eq!(err, expected, "{text}");
        }
        let err = PlainCredentials::parse(&format!("a:{long}")).unwrap_err();
        assert_eq!(err, PasswordTooLong { user: "a".into() });
        assert!(!err.to_string().contains("sss"));
    }

    #[test]
    fn user_count_is_bounded() {
        let many: Vec<String> = (0..=MAX_USERS).map(|i| format!("u{i}:p")).collect();
        assert_eq!(
            PlainCredentials::parse(&many.join(",")).unwrap_err(),
            CredentialsError::TooManyUsers
        );
        assert_eq!(
            PlainCredentials::parse(&many[..MAX_USERS].join(","))
                .unwrap()
                .len(),
            MAX_USERS
        );
    }

    #[test]
    fn debug_never_shows_passwords() {
        let creds = PlainCredentials::parse("writer:topsecret").unwrap();
        let store = CredentialStore::new(creds.clone());
        for text in [format!("{creds:?}"), format!("{store:?}"), format!("{creds:#?}")] {
            assert!(text.contains("writer"), "{text}");
            assert!(!text.contains("topsecret"), "{text}");
        }
    }

    #[test]
    fn swap_applies_to_new_verifications_only() {
        let store = CredentialStore::new(PlainCredentials::parse("writer:old").unwrap());
        let established = store.verify("writer", b"old").expect("old password works");
        let before = store.snapshot();
        store.replace(PlainCredentials::parse("writer:new").unwrap());
        assert_eq!(store.verify("writer", b"old"), None);
        assert_eq!(store.verify("writer", b"new"), Some(Principal::user("writer")));
        // What an established connection holds is its principal, untouched by the swap;
        // a snapshot taken before the swap still sees the old set.
        assert_eq!(established, Principal::user("writer"));
        assert!(before.verify("writer", b"old").is_some());
    }

    #[test]
    fn concurrent_swaps_and_verifications() {
        let store = Arc::new(CredentialStore::new(PlainCredentials::parse("u:a").unwrap()));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        // Exactly one of the two passwords is valid in any snapshot.
                        let snapshot = store.snapshot();
                        let a = snapshot.verify("u", b"a").is_some();
                        let b = snapshot.verify("u", b"b").is_some();
                        assert!(a ^ b);
                    }
                })
            })
            .collect();
        for i in 0..2_000 {
            let password = if i % 2 == 0 { "b" } else { "a" };
            store.replace(PlainCredentials::parse(&format!("u:{password}")).unwrap());
        }
        for reader in readers {
            reader.join().unwrap();
        }
    }
}
