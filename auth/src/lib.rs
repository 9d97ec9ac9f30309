//! SASL/PLAIN authentication and Fluss ACL authorization for kafluss, as a library with no
//! I/O: the broker owns sockets, persistence and snapshot swapping.
//!
//! # Public API
//!
//! Identity and ACLs ([`principal`], [`acl`], [`authorizer`]):
//! - [`Principal`]: `Type:name`; [`Principal::user`], [`Principal::anonymous`]
//!   (`User:ANONYMOUS`), [`Principal::parse`] (`User:name` only: every connection's
//!   principal is a user).
//! - [`Operation`] (READ, WRITE, CREATE, DROP, ALTER, DESCRIBE, ALL), [`Permission`]
//!   (ALLOW, DENY), [`Resource`] (`CLUSTER`, `db`, `db.t`; Fluss's `cluster.db[.t]` too),
//!   all `FromStr` + `Display`; [`Resource::is_cluster_name`] for the name no database may
//!   take ([`CLUSTER_RESOURCE`]).
//! - [`AclEntry`]: [`AclEntry::parse`]`(resource, permission, principal, operation, host)`
//!   for `CALL sys.add_acl`; [`AclEntry::to_line`] / [`AclEntry::from_line`] (also
//!   `Display`/`FromStr`) is the stable one-line form to persist and to print in `list_acl`:
//!   `resource="db.t";permission="ALLOW";principal="User:x";operation="WRITE";host="*"`.
//! - [`AclFilter`]: [`AclFilter::parse`] with `Option<&str>` arguments (`None` or `ANY`
//!   match anything, an empty one is refused), [`AclFilter::matches`], for `drop_acl` /
//!   `list_acl`.
//! - [`Authorizer`]: immutable snapshot; [`Authorizer::new`]`(enabled, super_users, acls)`,
//!   [`Authorizer::authorize`]`(&principal, host_ip, operation, &resource) -> bool`,
//!   [`Authorizer::with_acls`], [`Authorizer::entries`]; [`parse_super_users`] for
//!   `super.users` (`User:a;User:b`). Semantics in [`authorizer`]'s documentation.
//!
//! Credentials ([`credentials`], [`plain`], [`basic`]):
//! - [`PlainCredentials::parse`] for `security.sasl.plain.credentials`
//!   (`user:password,...`; a password may contain `:`), [`PlainCredentials::verify`];
//!   [`PlainCredentials::to_stored`] / [`PlainCredentials::parse_stored`] for the form the
//!   catalog stores (PBKDF2-HMAC-SHA256 hashes, `user:pbkdf2-sha256$<iterations>$<salt>$<hash>`).
//! - [`CredentialStore`]: swapped atomically at runtime ([`CredentialStore::replace`]),
//!   [`CredentialStore::verify`]`(user, password) -> Option<Principal>` in constant time,
//!   [`CredentialStore::verify_basic`] for the admin HTTP `Authorization` header.
//! - [`PlainToken::parse`]: RFC 4616 messages with their limits.
//!
//! Configuration ([`config`]): [`SecurityConfig::parse`] validates `security.protocol.map`
//! and `security.sasl.enabled.mechanisms` into [`ListenerSecurity`] per listener;
//! [`is_secret_config_key`] / [`displayable_config_value`] keep secrets out of output.
//!
//! The SASL exchange ([`sasl_state`]): [`SaslSession`] per connection, with
//! [`SaslSession::on_request`] → [`Gate`], [`SaslSession::on_handshake`] →
//! [`HandshakeOutcome`], [`SaslSession::on_authenticate`] / [`SaslSession::on_raw_token`] →
//! `Result<Principal, SaslFailure>`, [`SaslSession::expects_raw_token`],
//! [`SaslSession::principal`]. Kafka codes via [`SaslErrorCode::code`].
//!
//! Guessing ([`throttle`]): [`LoginThrottle`] delays the attempts of a client address or user
//! name after failures (exponential, bounded, shared by SASL and HTTP Basic).
//!
//! Secrets (passwords, PLAIN tokens) never appear in any `Debug`, `Display` or error of this
//! crate.

pub mod acl;
pub mod authorizer;
pub mod basic;
pub mod config;
pub mod credentials;
pub mod plain;
pub mod principal;
pub mod sasl_state;
pub mod throttle;

pub use acl::{
    AclEntry, AclError, AclFilter, Operation, Permission, Resource, CLUSTER_RESOURCE, WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
};
pub use authorizer::{parse_super_users, Authorizer};
pub use basic::{parse_basic_authorization, BasicAuthError, BasicCredentials};
pub use config::{
    displayable_config_value, is_secret_config_key, ListenerSecurity, SaslMechanism, SecurityConfig,
    SecurityConfigError, PLAIN_CREDENTIALS_KEY, REDACTED,
};
pub use credentials::{CredentialStore, CredentialsError, PlainCredentials};
pub use plain::{PlainToken, PlainTokenError, MAX_PLAIN_PART_LEN, MAX_PLAIN_TOKEN_LEN};
pub use principal::Principal;
pub use sasl_state::{FailureReason, Gate, HandshakeOutcome, SaslErrorCode, SaslFailure, SaslSession};
pub use throttle::{HeldTurn, LoginThrottle, ThrottleConfig};
