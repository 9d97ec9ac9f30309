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
//! Two kinds of secret:
//! - A plaintext password ([`PlainCredentials::parse`]: server.yaml, `-D`, and what
//!   `CALL sys.set_cluster_configs` is given). Compared in constant time with respect to its
//!   content and length: both sides are padded to [`MAX_PLAIN_PART_LEN`] bytes and compared
//!   with `subtle`.
//! - A salted, iterated hash ([`PlainCredentials::parse_stored`]: what the catalog stores), in
//!   the self-describing form `pbkdf2-sha256$<iterations>$<salt>$<hash>` (standard Base64 with
//!   padding; PBKDF2-HMAC-SHA256, [`HASH_ITERATIONS`] iterations and a 16-byte random salt when
//!   written here, see [`PlainCredentials::to_stored`]). Verifying derives the hash of the given
//!   password and compares the 32 bytes in constant time. A successful verification is
//!   remembered in memory (an HMAC-SHA256 of the password keyed with the stored hash, one per
//!   user, gone when the set is replaced), so a client that logs in again, such as an HTTP
//!   Basic client on every request, costs one HMAC instead of a PBKDF2 derivation; a wrong
//!   password always costs the full derivation.
//!
//! An unknown user costs the same work as a known one: a padded comparison against a dummy,
//! or a derivation with [`HASH_ITERATIONS`] when the set holds hashes.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use thiserror::Error;

use crate::plain::MAX_PLAIN_PART_LEN;
use crate::principal::{valid_principal_name, Principal};

/// Most users one credentials value may define.
pub const MAX_USERS: usize = 10_000;

/// The scheme name that starts a stored hash: `pbkdf2-sha256$<iterations>$<salt>$<hash>`.
pub const HASH_SCHEME: &str = "pbkdf2-sha256";
/// PBKDF2 iterations of the hashes written here (Kafka's SCRAM minimum; see
/// docs/configuration.md for what a verification costs).
pub const HASH_ITERATIONS: u32 = 4096;
/// Most iterations a stored hash may ask for, so that a damaged or foreign catalog cannot make
/// one verification run for minutes.
pub const MAX_HASH_ITERATIONS: u32 = 1_000_000;
const SALT_LEN: usize = 16;
/// Salt lengths a stored hash may have.
const STORED_SALT_LEN: std::ops::RangeInclusive<usize> = 8..=64;
const HASH_LEN: usize = 32;

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
    #[error("security.sasl.plain.credentials: cannot draw a random salt: {0}")]
    Salt(#[source] getrandom::Error),
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

    /// The password itself (parsing bounds it to [`MAX_PLAIN_PART_LEN`] bytes).
    fn as_bytes(&self) -> &[u8] {
        let len = usize::try_from(self.len).map_or(MAX_PLAIN_PART_LEN, |len| len.min(MAX_PLAIN_PART_LEN));
        &self.bytes[..len]
    }
}

/// A PBKDF2-HMAC-SHA256 hash of a password, with what a successful verification left behind.
#[derive(Clone)]
struct HashedSecret {
    iterations: u32,
    salt: Vec<u8>,
    hash: [u8; HASH_LEN],
    /// [`HashedSecret::remembered`] of the password that matched, once one has.
    verified: OnceLock<[u8; HASH_LEN]>,
}

impl HashedSecret {
    /// Hashes `password` with a fresh random salt and [`HASH_ITERATIONS`].
    fn new(password: &[u8]) -> Result<Self, CredentialsError> {
        let mut salt = vec![0u8; SALT_LEN];
        getrandom::fill(&mut salt).map_err(CredentialsError::Salt)?;
        let hash = derive(password, &salt, HASH_ITERATIONS);
        Ok(Self {
            iterations: HASH_ITERATIONS,
            salt,
            hash,
            verified: OnceLock::new(),
        })
    }

    /// Parses `pbkdf2-sha256$<iterations>$<salt>$<hash>`; `None` when `text` is not exactly that.
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('$');
        if parts.next()? != HASH_SCHEME {
            return None;
        }
        let iterations: u32 = parts.next()?.parse().ok()?;
        let salt = STANDARD.decode(parts.next()?).ok()?;
        let hash: [u8; HASH_LEN] = STANDARD.decode(parts.next()?).ok()?.try_into().ok()?;
        if parts.next().is_some()
            || !(1..=MAX_HASH_ITERATIONS).contains(&iterations)
            || !STORED_SALT_LEN.contains(&salt.len())
        {
            return None;
        }
        Some(Self {
            iterations,
            salt,
            hash,
            verified: OnceLock::new(),
        })
    }

    fn matches(&self, password: &[u8]) -> bool {
        let remembered = self.remembered(password);
        if let Some(verified) = self.verified.get() {
            if bool::from(verified.ct_eq(&remembered)) {
                return true;
            }
        }
        let matched: bool = derive(password, &self.salt, self.iterations)
            .ct_eq(&self.hash)
            .into();
        if matched {
            let _ = self.verified.set(remembered);
        }
        matched
    }

    /// What is remembered of a password that matched: an HMAC of it keyed with the stored
    /// hash, one cheap step instead of the derivation.
    fn remembered(&self, password: &[u8]) -> [u8; HASH_LEN] {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.hash).expect("HMAC takes keys of any length");
        mac.update(password);
        mac.finalize().into_bytes().into()
    }
}

impl fmt::Display for HashedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{HASH_SCHEME}${}${}${}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(self.hash)
        )
    }
}

fn derive(password: &[u8], salt: &[u8], iterations: u32) -> [u8; HASH_LEN] {
    let mut hash = [0u8; HASH_LEN];
    pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut hash);
    hash
}

/// One user's secret.
#[derive(Clone)]
enum Secret {
    Plain(PaddedSecret),
    Hashed(HashedSecret),
}

impl Secret {
    fn matches(&self, password: &[u8]) -> bool {
        match self {
            Secret::Plain(stored) => stored.ct_matches(&PaddedSecret::new(password)),
            Secret::Hashed(stored) => stored.matches(password),
        }
    }
}

/// A parsed, validated set of PLAIN users. `Debug` lists user names only; there is no
/// `Display`.
#[derive(Clone, Default)]
pub struct PlainCredentials {
    users: HashMap<String, Secret>,
    /// Whether some secret is a hash: then an unknown user costs a derivation.
    hashed: bool,
}

impl PlainCredentials {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses `user:password[,user:password...]` (see the module documentation): every
    /// password is plaintext, also one that looks like a hash.
    pub fn parse(text: &str) -> Result<Self, CredentialsError> {
        Self::parse_as(text, false)
    }

    /// Parses the stored form ([`PlainCredentials::to_stored`]): a password that is exactly
    /// `pbkdf2-sha256$<iterations>$<salt>$<hash>` is a hash, any other is plaintext (what a
    /// catalog written before hashing holds; see [`PlainCredentials::has_plaintext`]).
    pub fn parse_stored(text: &str) -> Result<Self, CredentialsError> {
        Self::parse_as(text, true)
    }

    fn parse_as(text: &str, stored: bool) -> Result<Self, CredentialsError> {
        let mut users = HashMap::new();
        let mut hashed = false;
        if text.trim().is_empty() {
            return Ok(Self { users, hashed });
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
            let secret = match stored.then(|| HashedSecret::parse(password)).flatten() {
                Some(hash) => {
                    hashed = true;
                    Secret::Hashed(hash)
                }
                None => Secret::Plain(PaddedSecret::new(password.as_bytes())),
            };
            if users.insert(user.to_owned(), secret).is_some() {
                return Err(CredentialsError::DuplicateUser {
                    user: user.to_owned(),
                });
            }
        }
        Ok(Self { users, hashed })
    }

    /// The form to store: `user:pbkdf2-sha256$...` for every user, sorted by name. Plaintext
    /// passwords are hashed now (one derivation each, with a fresh salt); hashes are kept.
    pub fn to_stored(&self) -> Result<String, CredentialsError> {
        let mut entries = Vec::with_capacity(self.users.len());
        for user in self.usernames() {
            let hash = match &self.users[user] {
                Secret::Plain(password) => HashedSecret::new(password.as_bytes())?,
                Secret::Hashed(hash) => hash.clone(),
            };
            entries.push(format!("{user}:{hash}"));
        }
        Ok(entries.join(","))
    }

    /// Whether some password is held in plaintext.
    pub fn has_plaintext(&self) -> bool {
        self.users
            .values()
            .any(|secret| matches!(secret, Secret::Plain(_)))
    }

    /// Whether `username` has a password.
    pub fn contains(&self, username: &str) -> bool {
        self.users.contains_key(username)
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
        match self.users.get(username) {
            Some(stored) if stored.matches(password) => Some(Principal::user(username)),
            Some(_) => None,
            None => {
                // Spend the same work as for a known user, so that response time does not
                // tell which user names exist.
                if self.hashed {
                    std::hint::black_box(derive(password, &[0u8; SALT_LEN], HASH_ITERATIONS));
                } else {
                    let dummy = PaddedSecret::new(b"");
                    std::hint::black_box(dummy.ct_matches(&PaddedSecret::new(password)));
                }
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
    fn pbkdf2_matches_the_rfc_7914_vector() {
        // RFC 7914 section 11: PBKDF2-HMAC-SHA256, P = "passwd", S = "salt", c = 1.
        let expected = "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc";
        let got: String = derive(b"passwd", b"salt", 1)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn stored_form_holds_salted_hashes_that_verify() {
        let creds = PlainCredentials::parse("writer:change-me,admin:pa:ss").unwrap();
        assert!(creds.has_plaintext());
        let stored = creds.to_stored().unwrap();
        assert!(
            !stored.contains("change-me") && !stored.contains("pa:ss"),
            "{stored}"
        );
        let entries: Vec<&str> = stored.split(',').collect();
        assert_eq!(entries.len(), 2);
        assert!(entries[0].starts_with("admin:pbkdf2-sha256$4096$"), "{stored}");
        assert!(entries[1].starts_with("writer:pbkdf2-sha256$4096$"), "{stored}");

        let loaded = PlainCredentials::parse_stored(&stored).unwrap();
        assert!(!loaded.has_plaintext());
        assert_eq!(loaded.usernames(), vec!["admin", "writer"]);
        assert_eq!(
            loaded.verify("writer", b"change-me"),
            Some(Principal::user("writer"))
        );
        assert_eq!(loaded.verify("admin", b"pa:ss"), Some(Principal::user("admin")));
        assert_eq!(loaded.verify("writer", b"change-m"), None);
        assert_eq!(loaded.verify("writer", b"pa:ss"), None);
        assert_eq!(loaded.verify("nobody", b"change-me"), None);
        // Storing again keeps the hashes as they are.
        assert_eq!(loaded.to_stored().unwrap(), stored);
        // A fresh salt each time: the same password hashes differently.
        let again = creds.to_stored().unwrap();
        assert_ne!(again, stored);
    }

    #[test]
    fn a_remembered_verification_still_refuses_other_passwords() {
        let stored = PlainCredentials::parse("u:right").unwrap().to_stored().unwrap();
        let creds = PlainCredentials::parse_stored(&stored).unwrap();
        let Secret::Hashed(hash) = &creds.users["u"] else {
            panic!("hashed")
        };
        assert!(hash.verified.get().is_none());
        assert_eq!(creds.verify("u", b"wrong"), None);
        assert!(hash.verified.get().is_none(), "a failure is never remembered");
        assert!(creds.verify("u", b"right").is_some());
        assert!(hash.verified.get().is_some(), "a success is");
        assert!(creds.verify("u", b"right").is_some());
        assert_eq!(creds.verify("u", b"wrong"), None);
        assert_eq!(creds.verify("u", b"righ"), None);
        assert_eq!(creds.verify("u", b""), None);
    }

    #[test]
    fn only_the_stored_form_reads_hashes() {
        let stored = PlainCredentials::parse("u:pw").unwrap().to_stored().unwrap();
        let hash_text = stored.strip_prefix("u:").unwrap();
        // Given as configuration, a hash-looking password is that text itself.
        let configured = PlainCredentials::parse(&stored).unwrap();
        assert!(configured.has_plaintext());
        assert!(configured.verify("u", hash_text.as_bytes()).is_some());
        assert_eq!(configured.verify("u", b"pw"), None);
        // A legacy plaintext entry in the stored form stays plaintext, next to a hash.
        let mixed = PlainCredentials::parse_stored(&format!("{stored},old:legacy-pw")).unwrap();
        assert!(mixed.has_plaintext());
        assert!(mixed.verify("u", b"pw").is_some());
        assert!(mixed.verify("old", b"legacy-pw").is_some());
        assert!(
            mixed.verify("u", hash_text.as_bytes()).is_none(),
            "no pass-the-hash"
        );
        // Anything not exactly a well-formed hash is plaintext.
        let (_, rest) = hash_text.split_once('$').unwrap();
        let (_, rest) = rest.split_once('$').unwrap();
        for odd in [
            format!("pbkdf2-sha256$0${rest}"),
            format!("pbkdf2-sha256$1000001${rest}"),
            format!("pbkdf2-sha256$x${rest}"),
            format!("pbkdf2-sha1$4096${rest}"),
            format!("{hash_text}$extra"),
            format!("{}AAAA", hash_text),
            "pbkdf2-sha256$4096$!!$AAAA".to_string(),
            "pbkdf2-sha256$4096".to_string(),
        ] {
            let creds = PlainCredentials::parse_stored(&format!("u:{odd}")).unwrap();
            assert!(creds.has_plaintext(), "{odd}");
            assert!(creds.verify("u", odd.as_bytes()).is_some(), "{odd}");
        }
    }

    #[test]
    fn debug_never_shows_hashes() {
        let stored = PlainCredentials::parse("writer:topsecret")
            .unwrap()
            .to_stored()
            .unwrap();
        let creds = PlainCredentials::parse_stored(&stored).unwrap();
        let text = format!("{creds:?}");
        assert!(text.contains("writer") && !text.contains("pbkdf2"), "{text}");
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
