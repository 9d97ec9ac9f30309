//! `CALL sys.<procedure>(...)`: ACLs and dynamic cluster configs, as in Fluss. Every
//! procedure needs ALTER on CLUSTER. Changes are stored with the catalog (crash-safely) and
//! published to the runtime: a new authorizer snapshot, a credential-store swap.

use kafluss_auth::{
    displayable_config_value, AclEntry, AclFilter, Operation, PlainCredentials, Resource,
    PLAIN_CREDENTIALS_KEY,
};

use super::ddl::{Catalog, Session};
use super::error::SqlError;
use super::output::StatementResult;
use super::sql::CallArgument;

/// Dynamic config keys that `set_cluster_configs` accepts.
pub const DYNAMIC_CONFIG_KEYS: [&str; 1] = [PLAIN_CREDENTIALS_KEY];

const ACL_PARAMETERS: [&str; 5] = ["resource", "permission", "principal", "operation", "host"];
const ACL_COLUMNS: [&str; 5] = ACL_PARAMETERS;

/// Arguments bound to a procedure's parameters: positional ones in declared order, then
/// named ones (`name => 'v'`). Only the last parameter may be variadic.
struct Arguments {
    procedure: String,
    values: Vec<Option<Vec<String>>>,
}

impl Arguments {
    fn bind(
        procedure: &str,
        parameters: &[&str],
        variadic_last: bool,
        arguments: Vec<CallArgument>,
    ) -> Result<Self, SqlError> {
        let error = |message: String| SqlError::Procedure(format!("sys.{procedure}: {message}"));
        let mut values: Vec<Option<Vec<String>>> = vec![None; parameters.len()];
        let mut next_positional = 0;
        for argument in arguments {
            let index = match &argument.name {
                Some(name) => parameters
                    .iter()
                    .position(|p| p.eq_ignore_ascii_case(name))
                    .ok_or_else(|| {
                        error(format!(
                            "unknown argument '{name}'; the arguments are {}",
                            parameters.join(", ")
                        ))
                    })?,
                // Further positional values of a variadic last parameter extend it.
                None if variadic_last && next_positional == parameters.len() => {
                    let last = parameters.len() - 1;
                    if let Some(values) = values[last].as_mut() {
                        values.extend(argument.values);
                        continue;
                    }
                    return Err(error(format!(
                        "too many arguments; the arguments are {}",
                        parameters.join(", ")
                    )));
                }
                None => {
                    if next_positional >= parameters.len() {
                        return Err(error(format!(
                            "too many arguments; the arguments are {}",
                            parameters.join(", ")
                        )));
                    }
                    next_positional += 1;
                    next_positional - 1
                }
            };
            let is_variadic = variadic_last && index + 1 == parameters.len();
            if argument.values.len() > 1 && !is_variadic {
                return Err(error(format!("argument '{}' takes one value", parameters[index])));
            }
            if values[index].is_some() {
                return Err(error(format!("argument '{}' is given twice", parameters[index])));
            }
            values[index] = Some(argument.values);
        }
        Ok(Self {
            procedure: procedure.to_string(),
            values,
        })
    }

    fn single(&self, index: usize) -> Option<&str> {
        self.values[index]
            .as_ref()
            .and_then(|v| v.first())
            .map(String::as_str)
    }

    fn required(&self, index: usize, name: &str) -> Result<&str, SqlError> {
        self.single(index).ok_or_else(|| {
            SqlError::Procedure(format!("sys.{}: argument '{name}' is required", self.procedure))
        })
    }

    fn all(&self, index: usize) -> &[String] {
        self.values[index].as_deref().unwrap_or(&[])
    }
}

impl Catalog {
    pub(crate) fn call_procedure(
        &self,
        namespace: &str,
        procedure: &str,
        arguments: Vec<CallArgument>,
        session: &Session,
    ) -> Result<StatementResult, SqlError> {
        if !namespace.eq_ignore_ascii_case("sys") {
            return Err(SqlError::Procedure(format!(
                "unknown procedure '{namespace}.{procedure}': procedures live in 'sys'"
            )));
        }
        let name = procedure.to_ascii_lowercase();
        let known = [
            "add_acl",
            "drop_acl",
            "list_acl",
            "set_cluster_configs",
            "get_cluster_configs",
            "reset_cluster_configs",
        ];
        if !known.contains(&name.as_str()) {
            return Err(SqlError::Procedure(format!(
                "unknown procedure 'sys.{procedure}'; known: {}",
                known.map(|k| format!("sys.{k}")).join(", ")
            )));
        }
        self.authorize(session, Operation::Alter, Resource::Cluster)?;
        match name.as_str() {
            "add_acl" => self.add_acl(Arguments::bind(&name, &ACL_PARAMETERS, false, arguments)?),
            "drop_acl" => self.drop_acl(Arguments::bind(&name, &ACL_PARAMETERS, false, arguments)?),
            "list_acl" => self.list_acl(Arguments::bind(&name, &ACL_PARAMETERS, false, arguments)?),
            "set_cluster_configs" => {
                self.set_cluster_configs(Arguments::bind(&name, &["config_pairs"], true, arguments)?)
            }
            "get_cluster_configs" => {
                Ok(self.get_cluster_configs(Arguments::bind(&name, &["config_keys"], true, arguments)?))
            }
            _ => self.reset_cluster_configs(Arguments::bind(&name, &["config_keys"], true, arguments)?),
        }
    }

    fn add_acl(&self, args: Arguments) -> Result<StatementResult, SqlError> {
        let entry = AclEntry::parse(
            args.required(0, "resource")?,
            args.required(1, "permission")?,
            args.required(2, "principal")?,
            args.required(3, "operation")?,
            args.single(4).unwrap_or("*"),
        )
        .map_err(|e| SqlError::Procedure(format!("sys.add_acl: {e}")))?;
        self.change(|stored| {
            let message = if stored.acls.contains(&entry) {
                format!("ACL already present: {entry}")
            } else {
                stored.acls.push(entry.clone());
                stored.acls.sort();
                format!("ACL added: {entry}")
            };
            Ok((StatementResult::done(message), vec![]))
        })
    }

    fn acl_filter(args: &Arguments) -> Result<AclFilter, SqlError> {
        AclFilter::parse(
            args.single(0),
            args.single(1),
            args.single(2),
            args.single(3),
            args.single(4),
        )
        .map_err(|e| SqlError::Procedure(format!("sys.{}: {e}", args.procedure)))
    }

    fn drop_acl(&self, args: Arguments) -> Result<StatementResult, SqlError> {
        let filter = Self::acl_filter(&args)?;
        self.change(|stored| {
            let (dropped, kept): (Vec<AclEntry>, Vec<AclEntry>) =
                stored.acls.drain(..).partition(|entry| filter.matches(entry));
            stored.acls = kept;
            Ok((acl_rows(&dropped), vec![]))
        })
    }

    fn list_acl(&self, args: Arguments) -> Result<StatementResult, SqlError> {
        let filter = Self::acl_filter(&args)?;
        let authorizer = self.authorizer();
        let entries: Vec<AclEntry> = authorizer
            .entries()
            .iter()
            .filter(|entry| filter.matches(entry))
            .cloned()
            .collect();
        Ok(acl_rows(&entries))
    }

    fn set_cluster_configs(&self, args: Arguments) -> Result<StatementResult, SqlError> {
        let pairs = args.all(0);
        if pairs.is_empty() || !pairs.chunks_exact(2).remainder().is_empty() {
            return Err(SqlError::Procedure(
                "sys.set_cluster_configs: config_pairs takes key, value pairs: config_pairs => 'key', 'value'".to_string(),
            ));
        }
        let mut updates = Vec::new();
        for pair in pairs.chunks(2) {
            let (key, value) = (pair[0].trim(), &pair[1]);
            check_dynamic_key(key)?;
            let value = if key == PLAIN_CREDENTIALS_KEY {
                // Validate now (a stored value that does not parse would lock everyone out),
                // and store only salted hashes, never a password.
                PlainCredentials::parse(value)
                    .and_then(|credentials| credentials.to_stored())
                    .map_err(|e| SqlError::Procedure(format!("sys.set_cluster_configs: '{key}': {e}")))?
            } else {
                value.clone()
            };
            updates.push((key.to_string(), value));
        }
        self.change(|stored| {
            let keys: Vec<&str> = updates.iter().map(|(k, _)| k.as_str()).collect();
            let message = format!("Cluster configs set: {}", keys.join(", "));
            for (key, value) in &updates {
                stored.cluster_configs.insert(key.clone(), value.clone());
            }
            Ok((StatementResult::done(message), vec![]))
        })
    }

    fn get_cluster_configs(&self, args: Arguments) -> StatementResult {
        let wanted = args.all(0);
        let stored = self.stored_cluster_configs();
        let mut rows = Vec::new();
        for key in DYNAMIC_CONFIG_KEYS {
            if !wanted.is_empty() && !wanted.iter().any(|w| w.trim() == key) {
                continue;
            }
            let (value, source) = match stored.get(key) {
                Some(value) => (Some(value.as_str()), "DYNAMIC"),
                None if key == PLAIN_CREDENTIALS_KEY => {
                    (self.config().plain_credentials.as_deref(), "STATIC")
                }
                None => (None, "DEFAULT"),
            };
            let shown = value
                .map(|v| displayable_config_value(key, v).into_owned())
                .unwrap_or_default();
            rows.push(vec![key.to_string(), shown, source.to_string()]);
        }
        StatementResult::rows(&["config key", "config value", "config source"], rows)
    }

    fn reset_cluster_configs(&self, args: Arguments) -> Result<StatementResult, SqlError> {
        let keys = args.all(0);
        if keys.is_empty() {
            return Err(SqlError::Procedure(
                "sys.reset_cluster_configs: config_keys => 'key' [, 'key'...] is required".to_string(),
            ));
        }
        for key in keys {
            check_dynamic_key(key.trim())?;
        }
        self.change(|stored| {
            for key in keys {
                stored.cluster_configs.remove(key.trim());
            }
            let message = format!(
                "Cluster configs reset: {}",
                keys.iter().map(|k| k.trim()).collect::<Vec<_>>().join(", ")
            );
            Ok((StatementResult::done(message), vec![]))
        })
    }
}

fn check_dynamic_key(key: &str) -> Result<(), SqlError> {
    if DYNAMIC_CONFIG_KEYS.contains(&key) {
        return Ok(());
    }
    // Named only when it looks like a key: a pair given value first ('user:password', 'key')
    // must not put the password into the error, which is answered and logged.
    let looks_like_a_key = key.len() <= 100
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    let named = if looks_like_a_key {
        format!("config '{key}'")
    } else {
        "a config key that is not a key name (are key and value swapped?)".to_string()
    };
    Err(SqlError::Procedure(format!(
        "{named} cannot be changed at runtime; dynamic configs: {}",
        DYNAMIC_CONFIG_KEYS.join(", ")
    )))
}

fn acl_rows(entries: &[AclEntry]) -> StatementResult {
    let rows = entries
        .iter()
        .map(|entry| {
            vec![
                entry.resource.to_string(),
                entry.permission.to_string(),
                entry.principal.clone(),
                entry.operation.to_string(),
                entry.host.clone(),
            ]
        })
        .collect();
    StatementResult::rows(&ACL_COLUMNS, rows)
}
