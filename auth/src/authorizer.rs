//! An immutable snapshot of the authorization state, checked on every Produce, Metadata,
//! DDL and procedure call. The broker keeps it in an `ArcSwap<Authorizer>` and swaps a new
//! snapshot in after `add_acl`/`drop_acl`, so checks never lock.
//!
//! Decision order (Fluss's `DefaultAuthorizer`, plus the DENY rule of behaviour.md):
//! 1. authorizer disabled → allow;
//! 2. principal in `super.users` → allow;
//! 3. collect the entries of the resource and of its ancestors (table → its database →
//!    CLUSTER) whose principal is the caller or the wildcard and whose host is `*` or the
//!    caller's address;
//! 4. a DENY entry for the requested operation or for ALL → refuse (DENY beats ALLOW);
//! 5. an ALLOW entry whose operation [`Operation::allows`] the requested one → allow;
//! 6. otherwise refuse (no ACL means no access, as in Fluss).
//!
//! Implied operations follow Fluss: ALL implies every operation; READ, WRITE, CREATE, DROP
//! and ALTER each imply DESCRIBE. They widen ALLOW entries only: a DENY WRITE does not deny
//! DESCRIBE (Kafka's rule, which Fluss's model comes from).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use crate::acl::{
    is_wildcard_principal, AclEntry, AclError, Operation, Permission, Resource, WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
};
use crate::principal::{shorten, Principal};

/// Entries of one resource, host parsed once so that a check does not parse text.
#[derive(Debug, Clone, Default)]
struct EntryList(Vec<CompiledEntry>);

#[derive(Debug, Clone)]
struct CompiledEntry {
    permission: Permission,
    principal: String,
    operation: Operation,
    host: HostMatch,
}

#[derive(Debug, Clone, Copy)]
enum HostMatch {
    Any,
    Exact(IpAddr),
    /// A host text that is neither `*` nor an address (only possible when an `AclEntry` was
    /// built by hand): it can never match, so a broken entry fails closed.
    Never,
}

#[derive(Debug, Clone, Default)]
struct DatabaseEntries {
    own: EntryList,
    tables: HashMap<String, EntryList>,
}

/// The authorization snapshot. Cheap to share behind `Arc`; build a new one to change it.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    enabled: bool,
    super_users: HashSet<Principal>,
    cluster: EntryList,
    databases: HashMap<String, DatabaseEntries>,
    entries: Vec<AclEntry>,
}

impl Authorizer {
    /// Builds a snapshot. Duplicate entries are kept once; `entries()` returns them sorted.
    pub fn new(enabled: bool, super_users: Vec<Principal>, acls: Vec<AclEntry>) -> Self {
        let mut entries = acls;
        entries.sort();
        entries.dedup();
        let mut authorizer = Authorizer {
            enabled,
            super_users: super_users.into_iter().collect(),
            ..Default::default()
        };
        for entry in &entries {
            let compiled = CompiledEntry::from(entry);
            let list = match &entry.resource {
                Resource::Cluster => &mut authorizer.cluster,
                Resource::Database(db) => &mut authorizer.databases.entry(db.clone()).or_default().own,
                Resource::Table { database, table } => authorizer
                    .databases
                    .entry(database.clone())
                    .or_default()
                    .tables
                    .entry(table.clone())
                    .or_default(),
            };
            list.0.push(compiled);
        }
        authorizer.entries = entries;
        authorizer
    }

    /// Authorization off: every principal may do everything.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// The same settings with another ACL list (after `add_acl` / `drop_acl`).
    pub fn with_acls(&self, acls: Vec<AclEntry>) -> Self {
        Self::new(self.enabled, self.super_users.iter().cloned().collect(), acls)
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    pub fn is_super_user(&self, principal: &Principal) -> bool {
        // The emptiness test skips hashing the principal in the common no-super-user case.
        !self.super_users.is_empty() && self.super_users.contains(principal)
    }

    /// Every ACL of the snapshot, sorted, without duplicates.
    pub fn entries(&self) -> &[AclEntry] {
        &self.entries
    }

    /// May `principal`, connected from `host`, perform `operation` on `resource`?
    pub fn authorize(
        &self,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        resource: &Resource,
    ) -> bool {
        let target = match resource {
            Resource::Cluster => Target::Cluster,
            Resource::Database(db) => Target::Database(db),
            Resource::Table { database, table } => Target::Table(database, table),
        };
        self.check(principal, host, operation, target)
    }

    /// [`Authorizer::authorize`] for table `database`.`table`, without building its
    /// [`Resource`]: the produce path asks it for every partition.
    pub fn authorize_table(
        &self,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        database: &str,
        table: &str,
    ) -> bool {
        self.check(principal, host, operation, Target::Table(database, table))
    }

    fn check(&self, principal: &Principal, host: IpAddr, operation: Operation, target: Target<'_>) -> bool {
        if !self.enabled || self.is_super_user(principal) {
            return true;
        }
        let host = host.to_canonical();
        let lists = self.lists_covering(target);
        let applicable = || {
            lists
                .iter()
                .flatten()
                .flat_map(|list| list.0.iter())
                .filter(|e| e.applies_to(principal, host))
        };
        let denied = applicable().any(|e| {
            e.permission == Permission::Deny && (e.operation == operation || e.operation == Operation::All)
        });
        !denied && applicable().any(|e| e.permission == Permission::Allow && e.operation.allows(operation))
    }

    /// May `principal`, connected from `host`, perform `operation` on at least one resource
    /// (some table, database or the cluster)? InitProducerId asks it for WRITE: Kafka ≥ 2.8
    /// lets a principal with WRITE on any topic produce idempotently. Checking the resources
    /// of the applicable ALLOW entries is enough: a resource that is allowed has such an entry
    /// on itself or on an ancestor, and that ancestor is then allowed too.
    pub fn authorize_any(&self, principal: &Principal, host: IpAddr, operation: Operation) -> bool {
        if !self.enabled || self.is_super_user(principal) {
            return true;
        }
        let canonical = host.to_canonical();
        self.entries
            .iter()
            .filter(|entry| entry.permission == Permission::Allow && entry.operation.allows(operation))
            .filter(|entry| CompiledEntry::from(*entry).applies_to(principal, canonical))
            .any(|entry| self.authorize(principal, host, operation, &entry.resource))
    }

    /// The entry lists of `target` and of its ancestors.
    fn lists_covering(&self, target: Target<'_>) -> [Option<&EntryList>; 3] {
        let database = |name: &str| self.databases.get(name);
        match target {
            Target::Cluster => [Some(&self.cluster), None, None],
            Target::Database(db) => [Some(&self.cluster), database(db).map(|d| &d.own), None],
            Target::Table(db, table) => {
                let db_entries = database(db);
                [
                    Some(&self.cluster),
                    db_entries.map(|d| &d.own),
                    db_entries.and_then(|d| d.tables.get(table)),
                ]
            }
        }
    }
}

/// A [`Resource`] by borrowed names: what a check looks up.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Cluster,
    Database(&'a str),
    Table(&'a str, &'a str),
}

impl CompiledEntry {
    fn applies_to(&self, principal: &Principal, host: IpAddr) -> bool {
        let principal_matches = self.principal == principal.as_str() || self.principal == WILDCARD_PRINCIPAL;
        let host_matches = match self.host {
            HostMatch::Any => true,
            HostMatch::Exact(ip) => ip == host,
            HostMatch::Never => false,
        };
        principal_matches && host_matches
    }
}

impl From<&AclEntry> for CompiledEntry {
    fn from(entry: &AclEntry) -> Self {
        let host = if entry.host == WILDCARD_HOST {
            HostMatch::Any
        } else {
            entry
                .host
                .parse::<IpAddr>()
                .map_or(HostMatch::Never, |ip| HostMatch::Exact(ip.to_canonical()))
        };
        CompiledEntry {
            permission: entry.permission,
            principal: entry.principal.clone(),
            operation: entry.operation,
            host,
        }
    }
}

/// Parses `super.users`: principals separated by `;`, e.g. `User:admin;User:ops`. Blank
/// items (a trailing `;`) are ignored; anything else must be `User:name`: another type never
/// matches a connection, and no wildcard (`ALL`, `*`, `User:*`) is taken.
pub fn parse_super_users(text: &str) -> Result<Vec<Principal>, AclError> {
    let parse_item = |item: &str| {
        if item.contains(',') {
            // A principal name with `,` can never log in (credentials use `,` between
            // users), so this is a mistaken separator.
            return Err(AclError::SuperUsersSeparator { value: shorten(item) });
        }
        if is_wildcard_principal(item) {
            return Err(AclError::SuperUsersWildcard { value: shorten(item) });
        }
        Principal::parse(item, "User:name (e.g. User:alice)")
    };
    text.split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(parse_item)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));

    fn acl(resource: &str, permission: &str, principal: &str, operation: &str, host: &str) -> AclEntry {
        AclEntry::parse(resource, permission, principal, operation, host).unwrap()
    }

    fn enabled(acls: Vec<AclEntry>) -> Authorizer {
        Authorizer::new(true, vec![Principal::user("admin")], acls)
    }

    fn table() -> Resource {
        Resource::table("sales", "orders")
    }

    fn alice() -> Principal {
        Principal::user("alice")
    }

    #[test]
    fn write_anywhere_is_an_allowed_write_on_some_resource() {
        let bob = Principal::user("bob");
        let auth = enabled(vec![
            acl("sales.orders", "ALLOW", "User:alice", "WRITE", "*"),
            acl("sales", "DENY", "User:carol", "WRITE", "*"),
            acl("sales.orders", "ALLOW", "User:carol", "WRITE", "*"),
            acl("CLUSTER", "ALLOW", "User:dave", "ALL", "*"),
            acl("ops", "ALLOW", "User:erin", "WRITE", "10.1.2.3"),
            acl("sales.orders", "ALLOW", "User:bob", "READ", "*"),
        ]);
        assert!(auth.authorize_any(&alice(), LOCAL, Operation::Write));
        assert!(
            !auth.authorize_any(&bob, LOCAL, Operation::Write),
            "READ is not WRITE"
        );
        let carol = Principal::user("carol");
        assert!(
            !auth.authorize_any(&carol, LOCAL, Operation::Write),
            "DENY on the database wins"
        );
        assert!(auth.authorize_any(&Principal::user("dave"), LOCAL, Operation::Write));
        let erin = Principal::user("erin");
        assert!(auth.authorize_any(&erin, OTHER, Operation::Write));
        assert!(
            !auth.authorize_any(&erin, LOCAL, Operation::Write),
            "host must match"
        );
        assert!(auth.authorize_any(&Principal::user("admin"), LOCAL, Operation::Write));
        assert!(Authorizer::disabled().authorize_any(&bob, LOCAL, Operation::Write));
    }

    #[test]
    fn disabled_allows_everything() {
        let auth = Authorizer::disabled();
        assert!(auth.authorize(
            &Principal::anonymous(),
            OTHER,
            Operation::Alter,
            &Resource::Cluster
        ));
        let off = Authorizer::new(false, vec![], vec![acl("cluster", "DENY", "ALL", "ALL", "*")]);
        assert!(off.authorize(&alice(), LOCAL, Operation::Write, &table()));
    }

    #[test]
    fn no_acl_means_no_access() {
        let auth = enabled(vec![]);
        for op in [
            Operation::Read,
            Operation::Write,
            Operation::Describe,
            Operation::Alter,
        ] {
            assert!(!auth.authorize(&alice(), LOCAL, op, &table()));
        }
    }

    #[test]
    fn super_user_bypasses_even_deny() {
        let auth = enabled(vec![acl("cluster", "DENY", "User:admin", "ALL", "*")]);
        assert!(auth.authorize(
            &Principal::user("admin"),
            OTHER,
            Operation::Alter,
            &Resource::Cluster
        ));
        assert!(auth.authorize(&Principal::user("admin"), OTHER, Operation::Write, &table()));
        assert!(auth.is_super_user(&Principal::user("admin")));
        assert!(!auth.authorize(&alice(), OTHER, Operation::Write, &table()));
    }

    #[test]
    fn table_grant_is_exact() {
        let auth = enabled(vec![acl("sales.orders", "ALLOW", "User:alice", "WRITE", "*")]);
        assert!(auth.authorize(&alice(), LOCAL, Operation::Write, &table()));
        assert!(!auth.authorize(
            &alice(),
            LOCAL,
            Operation::Write,
            &Resource::table("sales", "refunds")
        ));
        assert!(!auth.authorize(&alice(), LOCAL, Operation::Read, &table()));
        assert!(!auth.authorize(&Principal::user("bob"), LOCAL, Operation::Write, &table()));
        assert!(!auth.authorize(&alice(), LOCAL, Operation::Write, &Resource::database("sales")));
    }

    #[test]
    fn database_grant_covers_its_tables_only() {
        let auth = enabled(vec![acl("sales", "ALLOW", "User:alice", "WRITE", "*")]);
        assert!(auth.authorize(&alice(), LOCAL, Operation::Write, &table()));
        assert!(auth.authorize(&alice(), LOCAL, Operation::Write, &Resource::table("sales", "x")));
        assert!(auth.authorize(&alice(), LOCAL, Operation::Write, &Resource::database("sales")));
        assert!(!auth.authorize(
            &alice(),
            LOCAL,
            Operation::Write,
            &Resource::table("hr", "orders")
        ));
        assert!(!auth.authorize(&alice(), LOCAL, Operation::Write, &Resource::Cluster));
    }

    #[test]
    fn cluster_grant_covers_all() {
        let auth = enabled(vec![acl("CLUSTER", "ALLOW", "User:alice", "CREATE", "*")]);
        assert!(auth.authorize(&alice(), LOCAL, Operation::Create, &Resource::Cluster));
        assert!(auth.authorize(&alice(), LOCAL, Operation::Create, &Resource::database("any")));
        assert!(auth.authorize(&alice(), LOCAL, Operation::Create, &Resource::table("a", "b")));
    }

    #[test]
    fn deny_beats_allow_at_any_level() {
        let allow = acl("sales.orders", "ALLOW", "User:alice", "WRITE", "*");
        for deny in [
            acl("sales.orders", "DENY", "User:alice", "WRITE", "*"),
            acl("sales", "DENY", "User:alice", "WRITE", "*"),
            acl("cluster", "DENY", "ALL", "WRITE", "*"),
            acl("sales", "DENY", "User:alice", "ALL", "127.0.0.1"),
        ] {
            let auth = enabled(vec![allow.clone(), deny.clone()]);
            assert!(
                !auth.authorize(&alice(), LOCAL, Operation::Write, &table()),
                "{deny}"
            );
        }
        // A DENY for another operation, principal or host leaves the ALLOW in force.
        for unrelated in [
            acl("sales.orders", "DENY", "User:alice", "READ", "*"),
            acl("sales.orders", "DENY", "User:bob", "WRITE", "*"),
            acl("sales.orders", "DENY", "User:alice", "WRITE", "10.1.2.3"),
            acl("sales.refunds", "DENY", "User:alice", "WRITE", "*"),
        ] {
            let auth = enabled(vec![allow.clone(), unrelated.clone()]);
            assert!(
                auth.authorize(&alice(), LOCAL, Operation::Write, &table()),
                "{unrelated}"
            );
        }
    }

    #[test]
    fn the_table_check_by_names_is_the_check_by_resource() {
        let grants = [
            vec![],
            vec![acl("sales.orders", "ALLOW", "User:alice", "WRITE", "*")],
            vec![acl("sales", "ALLOW", "User:alice", "WRITE", "*")],
            vec![acl("cluster", "ALLOW", "User:alice", "ALL", "*")],
            vec![
                acl("sales", "ALLOW", "User:alice", "WRITE", "*"),
                acl("sales.orders", "DENY", "User:alice", "WRITE", "127.0.0.1"),
            ],
        ];
        for acls in grants {
            let auth = enabled(acls.clone());
            for (principal, database, name) in [
                (alice(), "sales", "orders"),
                (alice(), "sales", "refunds"),
                (alice(), "hr", "orders"),
                (Principal::user("bob"), "sales", "orders"),
                (Principal::user("admin"), "hr", "orders"),
            ] {
                for op in [Operation::Write, Operation::Read, Operation::Describe] {
                    let by_resource = auth.authorize(&principal, LOCAL, op, &Resource::table(database, name));
                    let by_names = auth.authorize_table(&principal, LOCAL, op, database, name);
                    assert_eq!(
                        by_names, by_resource,
                        "{acls:?} {principal} {op} {database}.{name}"
                    );
                }
            }
        }
        assert!(
            enabled(vec![acl("sales.orders", "ALLOW", "User:alice", "WRITE", "*")]).authorize_table(
                &alice(),
                LOCAL,
                Operation::Write,
                "sales",
                "orders"
            )
        );
    }

    #[test]
    fn all_operation_covers_every_operation() {
        let auth = enabled(vec![acl("sales", "ALLOW", "User:alice", "ALL", "*")]);
        for op in [
            Operation::Read,
            Operation::Write,
            Operation::Create,
            Operation::Drop,
            Operation::Alter,
            Operation::Describe,
            Operation::All,
        ] {
            assert!(auth.authorize(&alice(), LOCAL, op, &table()), "{op}");
        }
    }

    #[test]
    fn implied_describe() {
        let auth = enabled(vec![acl("sales.orders", "ALLOW", "User:alice", "WRITE", "*")]);
        assert!(auth.authorize(&alice(), LOCAL, Operation::Describe, &table()));
        let describe_only = enabled(vec![acl("sales.orders", "ALLOW", "User:alice", "DESCRIBE", "*")]);
        assert!(describe_only.authorize(&alice(), LOCAL, Operation::Describe, &table()));
        assert!(!describe_only.authorize(&alice(), LOCAL, Operation::Write, &table()));
        // DENY WRITE does not deny the DESCRIBE a READ grant implies.
        let mixed = enabled(vec![
            acl("sales.orders", "ALLOW", "User:alice", "READ", "*"),
            acl("sales.orders", "DENY", "User:alice", "WRITE", "*"),
        ]);
        assert!(mixed.authorize(&alice(), LOCAL, Operation::Describe, &table()));
        assert!(!mixed.authorize(&alice(), LOCAL, Operation::Write, &table()));
    }

    #[test]
    fn host_match() {
        let auth = enabled(vec![
            acl("sales", "ALLOW", "User:alice", "WRITE", "127.0.0.1"),
            acl("sales", "ALLOW", "User:alice", "READ", "::1"),
        ]);
        assert!(auth.authorize(&alice(), LOCAL, Operation::Write, &table()));
        assert!(!auth.authorize(&alice(), OTHER, Operation::Write, &table()));
        let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        assert!(auth.authorize(&alice(), mapped, Operation::Write, &table()));
        assert!(auth.authorize(
            &alice(),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            Operation::Read,
            &table()
        ));
        assert!(!auth.authorize(&alice(), LOCAL, Operation::Read, &table()));
    }

    #[test]
    fn wildcard_principal_and_anonymous() {
        let auth = enabled(vec![acl("sales", "ALLOW", "ALL", "DESCRIBE", "*")]);
        assert!(auth.authorize(&Principal::anonymous(), LOCAL, Operation::Describe, &table()));
        assert!(auth.authorize(&alice(), LOCAL, Operation::Describe, &table()));
        assert!(!auth.authorize(&alice(), LOCAL, Operation::Write, &table()));
        let anon = enabled(vec![acl("sales", "ALLOW", "User:ANONYMOUS", "WRITE", "*")]);
        assert!(anon.authorize(&Principal::anonymous(), LOCAL, Operation::Write, &table()));
        assert!(!anon.authorize(&alice(), LOCAL, Operation::Write, &table()));
    }

    #[test]
    fn hand_built_entry_with_bad_host_fails_closed() {
        let mut entry = acl("sales", "ALLOW", "User:alice", "WRITE", "*");
        entry.host = "not-an-address".into();
        let auth = enabled(vec![entry]);
        assert!(!auth.authorize(&alice(), LOCAL, Operation::Write, &table()));
    }

    #[test]
    fn entries_are_sorted_and_deduplicated_and_swappable() {
        let a = acl("sales", "ALLOW", "User:alice", "WRITE", "*");
        let b = acl("cluster", "ALLOW", "User:bob", "ALTER", "*");
        let auth = enabled(vec![a.clone(), b.clone(), a.clone()]);
        assert_eq!(auth.entries(), &[b.clone(), a.clone()]);
        let dropped = auth.with_acls(vec![b.clone()]);
        assert!(dropped.is_enabled() && dropped.is_super_user(&Principal::user("admin")));
        assert!(!dropped.authorize(&alice(), LOCAL, Operation::Write, &table()));
        assert!(
            auth.authorize(&alice(), LOCAL, Operation::Write, &table()),
            "old snapshot unchanged"
        );
    }

    #[test]
    fn super_users_parse() {
        let users = parse_super_users(" User:a ; User:b;").unwrap();
        assert_eq!(users, vec![Principal::user("a"), Principal::user("b")]);
        assert_eq!(parse_super_users("").unwrap(), vec![]);
        assert!(parse_super_users("User:a;bob").is_err());
        for other in ["user:bob", "Group:ops"] {
            let error = parse_super_users(&format!("User:a;{other}")).unwrap_err();
            assert!(matches!(error, AclError::PrincipalType { .. }), "{error}");
            assert!(error.to_string().contains(other), "{error}");
        }
        for wildcard in ["ALL", "*", "*:*", "User:*"] {
            let error = parse_super_users(wildcard).unwrap_err();
            assert_eq!(
                error,
                AclError::SuperUsersWildcard {
                    value: wildcard.to_string()
                }
            );
            let message = error.to_string();
            assert!(
                !message.contains("or ALL") && message.contains("User:name"),
                "{message}"
            );
        }
        assert_eq!(
            parse_super_users("admin").unwrap_err().to_string(),
            "invalid principal `admin`: expected User:name (e.g. User:alice)"
        );
        assert!(matches!(
            parse_super_users("User:a,User:b"),
            Err(AclError::SuperUsersSeparator { .. })
        ));
    }
}
