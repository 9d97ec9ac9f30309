//! The Fluss ACL model: resources, operations, permissions, entries, filters, and the stable
//! one-line text form the catalog persists and `CALL sys.list_acl` prints.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use thiserror::Error;

use crate::principal::{shorten, Principal};

/// Canonical text of the principal that matches every principal. Fluss spells it `ALL` in
/// `CALL sys.*_acl` (stored there as `*:*`); `*`, `*:*` and `User:*` are accepted too.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Canonical text of the host that matches every client address.
pub const WILDCARD_HOST: &str = "*";

/// The filter keyword matching any value of a field (Fluss's `ANY`).
const ANY: &str = "ANY";

/// The resource name of the whole cluster, in any case: `CLUSTER`, and the first part of
/// Fluss's `cluster.db` and `cluster.db.t` forms. So that every resource text has one reading,
/// no database may be called this ([`Resource::is_cluster_name`]; the catalog refuses it).
pub const CLUSTER_RESOURCE: &str = "cluster";

/// Longest table or database name (Fluss's limit).
const MAX_NAME_LEN: usize = 200;

/// Longest persisted ACL line accepted by [`AclEntry::from_line`]; real lines are < 600 bytes.
const MAX_LINE_LEN: usize = 2048;

/// Why an ACL argument or a persisted ACL line was rejected. Messages quote at most 64
/// characters of the offending input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AclError {
    #[error("invalid resource `{value}`: expected CLUSTER, `db`, `db.table`, `cluster.db` or `cluster.db.table` (names: 1-200 of [a-zA-Z0-9_-])")]
    InvalidResource { value: String },
    #[error("invalid permission `{value}`: expected ALLOW or DENY")]
    InvalidPermission { value: String },
    #[error("invalid operation `{value}`: expected READ, WRITE, CREATE, DROP, ALTER, DESCRIBE or ALL")]
    InvalidOperation { value: String },
    #[error("invalid principal `{value}`: expected {expected}")]
    InvalidPrincipal { value: String, expected: &'static str },
    #[error("invalid principal `{value}`: the type must be `User`, spelled so (every connection's principal is User:<name>, so a principal of another type never matches), e.g. User:{name}")]
    PrincipalType { value: String, name: String },
    #[error("super.users entry `{value}` is a wildcard: super.users names users (User:name;User:other), none matches everyone")]
    SuperUsersWildcard { value: String },
    #[error("empty {field}: name a value, or ANY (or leave the argument out) to match every one")]
    EmptyFilterField { field: &'static str },
    #[error("invalid host `{value}`: expected * or an IP address")]
    InvalidHost { value: String },
    #[error("`ANY` is only valid when dropping or listing ACLs, not in {field} of a new ACL")]
    AnyInNewAcl { field: &'static str },
    #[error("super.users entry `{value}` contains `,`: separate principals with `;` (User:a;User:b)")]
    SuperUsersSeparator { value: String },
    #[error("malformed ACL line: {reason}")]
    MalformedLine { reason: &'static str },
}

/// What a principal wants to do. `All` in an ACL grants or denies every operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    Read,
    Write,
    Create,
    Drop,
    Alter,
    Describe,
    All,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Read => "READ",
            Operation::Write => "WRITE",
            Operation::Create => "CREATE",
            Operation::Drop => "DROP",
            Operation::Alter => "ALTER",
            Operation::Describe => "DESCRIBE",
            Operation::All => "ALL",
        }
    }

    /// Whether an ALLOW entry for `self` permits `requested`, following Fluss's
    /// `DefaultAuthorizer`: ALL permits everything, and READ, WRITE, CREATE, DROP and ALTER
    /// each also permit DESCRIBE. DENY entries do not use this (see `Authorizer`).
    pub fn allows(self, requested: Operation) -> bool {
        self == requested
            || self == Operation::All
            || (requested == Operation::Describe
                && matches!(
                    self,
                    Operation::Read
                        | Operation::Write
                        | Operation::Create
                        | Operation::Drop
                        | Operation::Alter
                ))
    }
}

impl FromStr for Operation {
    type Err = AclError;

    /// Case-insensitive.
    fn from_str(text: &str) -> Result<Self, AclError> {
        const ALL_OPERATIONS: [Operation; 7] = [
            Operation::Read,
            Operation::Write,
            Operation::Create,
            Operation::Drop,
            Operation::Alter,
            Operation::Describe,
            Operation::All,
        ];
        ALL_OPERATIONS
            .into_iter()
            .find(|op| op.as_str().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| AclError::InvalidOperation { value: shorten(text) })
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a matching entry grants or refuses. DENY beats ALLOW.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    Allow,
    Deny,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "ALLOW",
            Permission::Deny => "DENY",
        }
    }
}

impl FromStr for Permission {
    type Err = AclError;

    /// Case-insensitive.
    fn from_str(text: &str) -> Result<Self, AclError> {
        match text.trim() {
            t if t.eq_ignore_ascii_case("ALLOW") => Ok(Permission::Allow),
            t if t.eq_ignore_ascii_case("DENY") => Ok(Permission::Deny),
            _ => Err(AclError::InvalidPermission { value: shorten(text) }),
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an ACL protects. Hierarchy: CLUSTER ⊃ database ⊃ table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Cluster,
    Database(String),
    Table { database: String, table: String },
}

impl Resource {
    /// Whether `name` is [`CLUSTER_RESOURCE`] in any case: as a resource it names the whole
    /// cluster, so it cannot name a database.
    pub fn is_cluster_name(name: &str) -> bool {
        name.eq_ignore_ascii_case(CLUSTER_RESOURCE)
    }

    pub fn database(name: &str) -> Self {
        Resource::Database(name.to_owned())
    }

    pub fn table(database: &str, table: &str) -> Self {
        Resource::Table {
            database: database.to_owned(),
            table: table.to_owned(),
        }
    }
}

impl FromStr for Resource {
    type Err = AclError;

    /// Accepts the kafluss forms `CLUSTER`, `db`, `db.t` and Fluss's own forms `cluster`,
    /// `cluster.db`, `cluster.db.t` (`cluster` is case-insensitive). Because of the Fluss
    /// forms, a two-part name starting with `cluster` is a database; the catalog refuses a
    /// database named `cluster`, so that no text can also mean one of its tables (a data dir
    /// made before that rule may hold one: its ACLs are written `cluster.cluster[.t]`).
    fn from_str(text: &str) -> Result<Self, AclError> {
        let invalid = || AclError::InvalidResource { value: shorten(text) };
        let text = text.trim();
        let is_cluster = |part: &str| Resource::is_cluster_name(part);
        let name = |part: &str| valid_name(part).then(|| part.to_owned()).ok_or_else(invalid);
        let parts: Vec<&str> = text.splitn(4, '.').collect();
        match parts.as_slice() {
            [one] if is_cluster(one) => Ok(Resource::Cluster),
            [db] => Ok(Resource::Database(name(db)?)),
            [first, db] if is_cluster(first) => Ok(Resource::Database(name(db)?)),
            [db, table] => Ok(Resource::Table {
                database: name(db)?,
                table: name(table)?,
            }),
            [first, db, table] if is_cluster(first) => Ok(Resource::Table {
                database: name(db)?,
                table: name(table)?,
            }),
            _ => Err(invalid()),
        }
    }
}

impl fmt::Display for Resource {
    /// The inverse of `FromStr`: `cluster`, `db`, `db.t`, except that a database named like
    /// the cluster keyword gets the explicit `cluster.` prefix so the text parses back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = |db: &str| {
            if Resource::is_cluster_name(db) {
                "cluster."
            } else {
                ""
            }
        };
        match self {
            Resource::Cluster => f.write_str("cluster"),
            Resource::Database(db) => write!(f, "{}{db}", prefix(db)),
            Resource::Table { database, table } => write!(f, "{}{database}.{table}", prefix(database)),
        }
    }
}

/// Fluss names: 1–200 of `[a-zA-Z0-9_-]`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What an ACL's principal may be, for the message of one that is neither.
const ACL_PRINCIPAL: &str = "User:name (e.g. User:alice) or ALL";

/// The spellings of the principal that matches every principal: Fluss's `ALL`, `*`, `*:*` and
/// [`WILDCARD_PRINCIPAL`] (any case).
pub(crate) fn is_wildcard_principal(text: &str) -> bool {
    ["ALL", "*", "*:*", WILDCARD_PRINCIPAL]
        .iter()
        .any(|w| w.eq_ignore_ascii_case(text.trim()))
}

/// Canonical principal text for a new ACL: `User:name` ([`Principal::parse`]), or
/// [`WILDCARD_PRINCIPAL`].
fn parse_acl_principal(text: &str) -> Result<String, AclError> {
    if is_wildcard_principal(text) {
        return Ok(WILDCARD_PRINCIPAL.to_owned());
    }
    Principal::parse(text.trim(), ACL_PRINCIPAL).map(|p| p.as_str().to_owned())
}

/// [`parse_acl_principal`] that also takes a type other than `User`, which earlier versions
/// accepted and stored (such an entry never matches): for stored lines and filters, so that
/// a data dir holding one still opens and `drop_acl` can name it.
fn parse_stored_principal(text: &str) -> Result<String, AclError> {
    if is_wildcard_principal(text) {
        return Ok(WILDCARD_PRINCIPAL.to_owned());
    }
    Principal::parse_any_type(text.trim(), ACL_PRINCIPAL).map(|p| p.as_str().to_owned())
}

/// Canonical host text: `*`, or the address as `IpAddr` prints it (IPv4-mapped IPv6
/// addresses become IPv4), so that `::1` and `0:0::1` are the same host.
pub(crate) fn parse_host(text: &str) -> Result<String, AclError> {
    let text = text.trim();
    if text == WILDCARD_HOST {
        return Ok(WILDCARD_HOST.to_owned());
    }
    text.parse::<IpAddr>()
        .map(|ip| ip.to_canonical().to_string())
        .map_err(|_| AclError::InvalidHost { value: shorten(text) })
}

fn is_any(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case(ANY)
}

/// One ACL: `principal` is `permission`ed to do `operation` on `resource` from `host`.
/// Fields hold canonical values when built by [`AclEntry::parse`] or [`AclEntry::from_line`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclEntry {
    pub resource: Resource,
    pub permission: Permission,
    /// `Type:name` or [`WILDCARD_PRINCIPAL`].
    pub principal: String,
    pub operation: Operation,
    /// `*` or a canonical IP address.
    pub host: String,
}

impl AclEntry {
    /// Parses the arguments of `CALL sys.add_acl(resource, permission, principal, operation,
    /// host)`. Pass `"*"` as host when the call omitted it. `ANY` is refused in every field,
    /// and a principal must be `User:name` or the wildcard.
    pub fn parse(
        resource: &str,
        permission: &str,
        principal: &str,
        operation: &str,
        host: &str,
    ) -> Result<Self, AclError> {
        Self::parse_with(
            resource,
            permission,
            principal,
            operation,
            host,
            parse_acl_principal,
        )
    }

    fn parse_with(
        resource: &str,
        permission: &str,
        principal: &str,
        operation: &str,
        host: &str,
        parse_principal: fn(&str) -> Result<String, AclError>,
    ) -> Result<Self, AclError> {
        for (field, value) in [
            ("resource", resource),
            ("permission", permission),
            ("principal", principal),
            ("operation", operation),
            ("host", host),
        ] {
            if is_any(value) {
                return Err(AclError::AnyInNewAcl { field });
            }
        }
        Ok(AclEntry {
            resource: resource.parse()?,
            permission: permission.parse()?,
            principal: parse_principal(principal)?,
            operation: operation.parse()?,
            host: parse_host(host)?,
        })
    }

    /// Whether the entry's principal can match a connection: `User:name` or the wildcard (an
    /// entry stored by an earlier version may name another type, which never matches).
    pub fn principal_can_match(&self) -> bool {
        self.principal == WILDCARD_PRINCIPAL
            || self
                .principal
                .split_once(':')
                .is_some_and(|(principal_type, _)| principal_type == crate::principal::USER_TYPE)
    }

    /// The stable one-line text form (also what `list_acl` shows), in Fluss's list style:
    /// `resource="db.t";permission="ALLOW";principal="User:x";operation="WRITE";host="*"`.
    /// `\` and `"` inside values are escaped with `\`.
    pub fn to_line(&self) -> String {
        self.to_string()
    }

    /// Parses [`AclEntry::to_line`] output, validating every field as [`AclEntry::parse`] does,
    /// except that the principal may have a type other than `User`, as earlier versions
    /// stored ([`AclEntry::principal_can_match`] tells such an entry).
    pub fn from_line(line: &str) -> Result<Self, AclError> {
        let malformed = |reason| AclError::MalformedLine { reason };
        if line.len() > MAX_LINE_LEN {
            return Err(malformed("longer than 2048 bytes"));
        }
        let mut rest = line.trim();
        let mut values: [String; 5] = Default::default();
        for (index, key) in LINE_KEYS.iter().enumerate() {
            if index > 0 {
                rest = rest
                    .strip_prefix(';')
                    .ok_or(malformed("expected `;` between fields"))?;
            }
            rest = rest
                .strip_prefix(key)
                .and_then(|r| r.strip_prefix("=\""))
                .ok_or(malformed(
                    "fields must be resource, permission, principal, operation, host in order",
                ))?;
            let (value, after) = read_escaped_value(rest).ok_or(malformed("unterminated quoted value"))?;
            values[index] = value;
            rest = after;
        }
        if !rest.is_empty() {
            return Err(malformed("trailing text after host"));
        }
        let [resource, permission, principal, operation, host] = &values;
        AclEntry::parse_with(
            resource,
            permission,
            principal,
            operation,
            host,
            parse_stored_principal,
        )
    }
}

impl fmt::Display for AclEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = self.resource.to_string();
        let values = [
            resource.as_str(),
            self.permission.as_str(),
            &self.principal,
            self.operation.as_str(),
            &self.host,
        ];
        for (index, (key, value)) in LINE_KEYS.iter().zip(values).enumerate() {
            if index > 0 {
                f.write_str(";")?;
            }
            write!(f, "{key}=\"")?;
            for c in value.chars() {
                if c == '"' || c == '\\' {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("\"")?;
        }
        Ok(())
    }
}

impl FromStr for AclEntry {
    type Err = AclError;

    fn from_str(line: &str) -> Result<Self, AclError> {
        AclEntry::from_line(line)
    }
}

const LINE_KEYS: [&str; 5] = ["resource", "permission", "principal", "operation", "host"];

/// Reads a value up to its unescaped closing quote; returns it unescaped and the text after
/// the quote.
fn read_escaped_value(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[index + 1..])),
            '\\' => value.push(chars.next()?.1),
            _ => value.push(c),
        }
    }
    None
}

/// Selects ACL entries for `CALL sys.drop_acl` / `CALL sys.list_acl`. `None` matches any
/// value; `Some` matches exactly (no hierarchy: a database filter does not select the
/// database's table entries, as in Fluss).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclFilter {
    pub resource: Option<Resource>,
    pub permission: Option<Permission>,
    pub principal: Option<String>,
    pub operation: Option<Operation>,
    pub host: Option<String>,
}

impl AclFilter {
    /// Matches every entry.
    pub fn any() -> Self {
        Self::default()
    }

    /// Parses procedure arguments; an omitted argument (`None`) or `ANY` (case-insensitive)
    /// matches anything, and an empty one is refused ([`AclError::EmptyFilterField`]): it is
    /// no value, and must not select every entry. `ALL` as principal selects the
    /// wildcard-principal entries; `ALL` as operation selects the `ALL` entries; a principal
    /// may name a type other than `User`, to select entries an earlier version stored.
    pub fn parse(
        resource: Option<&str>,
        permission: Option<&str>,
        principal: Option<&str>,
        operation: Option<&str>,
        host: Option<&str>,
    ) -> Result<Self, AclError> {
        fn field<T>(
            field: &'static str,
            value: Option<&str>,
            parse: impl FnOnce(&str) -> Result<T, AclError>,
        ) -> Result<Option<T>, AclError> {
            match value {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Err(AclError::EmptyFilterField { field }),
                Some(v) if is_any(v) => Ok(None),
                Some(v) => parse(v).map(Some),
            }
        }
        Ok(AclFilter {
            resource: field("resource", resource, str::parse)?,
            permission: field("permission", permission, str::parse)?,
            principal: field("principal", principal, parse_stored_principal)?,
            operation: field("operation", operation, str::parse)?,
            host: field("host", host, parse_host)?,
        })
    }

    pub fn matches(&self, entry: &AclEntry) -> bool {
        self.resource.as_ref().is_none_or(|r| *r == entry.resource)
            && self.permission.is_none_or(|p| p == entry.permission)
            && self.principal.as_ref().is_none_or(|p| *p == entry.principal)
            && self.operation.is_none_or(|o| o == entry.operation)
            && self.host.as_ref().is_none_or(|h| *h == entry.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(resource: &str, permission: &str, principal: &str, operation: &str, host: &str) -> AclEntry {
        AclEntry::parse(resource, permission, principal, operation, host).unwrap()
    }

    #[test]
    fn resource_forms() {
        assert_eq!("CLUSTER".parse(), Ok(Resource::Cluster));
        assert_eq!("cluster".parse(), Ok(Resource::Cluster));
        assert_eq!("sales".parse(), Ok(Resource::database("sales")));
        assert_eq!("sales.orders".parse(), Ok(Resource::table("sales", "orders")));
        assert_eq!("cluster.sales".parse(), Ok(Resource::database("sales")));
        assert_eq!(
            "cluster.sales.orders".parse(),
            Ok(Resource::table("sales", "orders"))
        );
        assert_eq!("Cluster.cluster.t".parse(), Ok(Resource::table("cluster", "t")));
        for name in ["cluster", "CLUSTER", "Cluster"] {
            assert!(Resource::is_cluster_name(name), "{name}");
            assert_eq!(name.parse(), Ok(Resource::Cluster), "{name}");
        }
        for name in ["clusters", "cluster_a", "sales"] {
            assert!(!Resource::is_cluster_name(name), "{name}");
        }
        assert_eq!("sales.cluster".parse(), Ok(Resource::table("sales", "cluster")));
        for bad in [
            "",
            ".",
            "a.",
            ".b",
            "a.b.c",
            "a.b.c.d",
            "sa les",
            "a/b",
            &"x".repeat(201),
        ] {
            assert!(bad.parse::<Resource>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn resource_display_parses_back() {
        for r in [
            Resource::Cluster,
            Resource::database("sales"),
            Resource::database("cluster"),
            Resource::table("sales", "orders"),
            Resource::table("CLUSTER", "orders"),
        ] {
            assert_eq!(r.to_string().parse::<Resource>(), Ok(r.clone()), "{r}");
        }
    }

    #[test]
    fn operation_and_permission_parse_case_insensitively() {
        assert_eq!("write".parse(), Ok(Operation::Write));
        assert_eq!("ALL".parse(), Ok(Operation::All));
        assert!("ANY".parse::<Operation>().is_err());
        assert!("DELETE".parse::<Operation>().is_err());
        assert_eq!("deny".parse(), Ok(Permission::Deny));
        assert!("MAYBE".parse::<Permission>().is_err());
    }

    #[test]
    fn implied_operations_follow_fluss() {
        for op in [
            Operation::Read,
            Operation::Write,
            Operation::Create,
            Operation::Drop,
            Operation::Alter,
        ] {
            assert!(op.allows(Operation::Describe), "{op}");
            assert!(!Operation::Describe.allows(op), "{op}");
            assert!(Operation::All.allows(op));
        }
        assert!(!Operation::Write.allows(Operation::Read));
        assert!(!Operation::Alter.allows(Operation::Write));
    }

    #[test]
    fn entry_parse_canonicalises() {
        let e = entry("sales.orders", "allow", "ALL", "write", " ::ffff:127.0.0.1 ");
        assert_eq!(e.principal, WILDCARD_PRINCIPAL);
        assert_eq!(e.host, "127.0.0.1");
        assert_eq!(e.permission, Permission::Allow);
        assert_eq!(entry("cluster", "DENY", "User:bob", "ALL", "0:0::1").host, "::1");
    }

    #[test]
    fn entry_parse_rejects_any_and_garbage() {
        assert_eq!(
            AclEntry::parse("ANY", "ALLOW", "User:a", "READ", "*"),
            Err(AclError::AnyInNewAcl { field: "resource" })
        );
        assert!(AclEntry::parse("db", "ALLOW", "User:a", "any", "*").is_err());
        assert!(AclEntry::parse("db", "ALLOW", "alice", "READ", "*").is_err());
        assert!(AclEntry::parse("db", "ALLOW", "User:a", "READ", "localhost").is_err());
        assert!(AclEntry::parse("db", "ALLOW", "User:a", "READ", "10.0.0.0/8").is_err());
    }

    #[test]
    fn line_round_trip_with_awkward_principal() {
        let e = entry(
            "cluster.cluster.t",
            "DENY",
            "User:we\"ird;name\\x",
            "DESCRIBE",
            "::1",
        );
        let line = e.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(AclEntry::from_line(&line), Ok(e.clone()));
        let plain = entry("sales.orders", "ALLOW", "User:writer", "WRITE", "*");
        assert_eq!(
            plain.to_line(),
            r#"resource="sales.orders";permission="ALLOW";principal="User:writer";operation="WRITE";host="*""#
        );
        assert_eq!(plain.to_line().parse(), Ok(plain));
    }

    #[test]
    fn from_line_rejects_malformed() {
        let good = entry("db", "ALLOW", "User:a", "READ", "*").to_line();
        for bad in [
            "",
            &good[..good.len() - 1],
            &format!("{good}x"),
            &good.replace("permission", "perm"),
            &good.replace(';', ","),
            &good.replace("READ", "FLY"),
            &"a".repeat(5000),
        ] {
            assert!(AclEntry::from_line(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn filter_any_and_exact() {
        let a = entry("db", "ALLOW", "User:a", "READ", "*");
        let b = entry("db.t", "DENY", "ALL", "ALL", "127.0.0.1");
        assert!(AclFilter::any().matches(&a));
        let f = AclFilter::parse(Some("ANY"), None, Some("Any"), Some("any"), None).unwrap();
        assert_eq!(f, AclFilter::any());
        let by_db = AclFilter::parse(Some("db"), None, None, None, None).unwrap();
        assert!(by_db.matches(&a) && !by_db.matches(&b), "no hierarchy in filters");
        let wildcard = AclFilter::parse(None, None, Some("ALL"), None, None).unwrap();
        assert!(wildcard.matches(&b) && !wildcard.matches(&a));
        let all_ops = AclFilter::parse(None, None, None, Some("ALL"), None).unwrap();
        assert!(all_ops.matches(&b) && !all_ops.matches(&a));
        let host = AclFilter::parse(None, Some("deny"), None, None, Some("::ffff:127.0.0.1")).unwrap();
        assert!(host.matches(&b) && !host.matches(&a));
        assert!(AclFilter::parse(None, Some("nope"), None, None, None).is_err());
    }

    #[test]
    fn an_empty_filter_argument_is_refused_not_a_wildcard() {
        let fields = ["resource", "permission", "principal", "operation", "host"];
        for (index, field) in fields.into_iter().enumerate() {
            let mut arguments = [None; 5];
            arguments[index] = Some(" ");
            let [resource, permission, principal, operation, host] = arguments;
            let error = AclFilter::parse(resource, permission, principal, operation, host).unwrap_err();
            assert_eq!(error, AclError::EmptyFilterField { field });
            assert!(error.to_string().contains("ANY"), "{error}");
        }
    }

    #[test]
    fn new_acls_name_user_principals_and_stored_ones_of_other_types_still_load() {
        for other in ["user:bob", "Group:ops", "USER:bob"] {
            let error = AclEntry::parse("db", "ALLOW", other, "READ", "*").unwrap_err();
            assert!(
                matches!(error, AclError::PrincipalType { .. }),
                "{other}: {error}"
            );
            assert!(error.to_string().contains(other), "{error}");
        }
        for wildcard in ["ALL", "all", "*", "*:*", "User:*"] {
            let e = entry("db", "ALLOW", wildcard, "READ", "*");
            assert_eq!(e.principal, WILDCARD_PRINCIPAL, "{wildcard}");
            assert!(e.principal_can_match());
        }
        assert_eq!(
            AclEntry::parse("db", "ALLOW", "bob", "READ", "*")
                .unwrap_err()
                .to_string(),
            "invalid principal `bob`: expected User:name (e.g. User:alice) or ALL"
        );
        // What an earlier version stored loads (the data dir still opens), never matches, and
        // a filter can name it to drop it.
        let line = r#"resource="db";permission="ALLOW";principal="Group:ops";operation="READ";host="*""#;
        let stored = AclEntry::from_line(line).unwrap();
        assert!(!stored.principal_can_match());
        assert!(entry("db", "ALLOW", "User:ops", "READ", "*").principal_can_match());
        let filter = AclFilter::parse(None, None, Some("Group:ops"), None, None).unwrap();
        assert!(filter.matches(&stored));
    }
}
