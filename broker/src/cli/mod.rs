//! Client subcommands of the `kafluss` binary that talk to a running server over HTTP: a
//! module of the binary only (the server library has no HTTP client). HTTP/1.1 is `ureq`'s.

use std::io::{self, Write};
use std::time::Duration;

use base64::Engine;

pub mod scan;
pub mod sql;

/// Environment variables holding the Basic-auth credentials of `kafluss sql` and `kafluss scan`.
pub const USER_ENV: &str = "KAFLUSS_USER";
pub const PASSWORD_ENV: &str = "KAFLUSS_PASSWORD";

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Status line plus headers larger than this are refused.
const MAX_HEADER_BYTES: usize = 64 << 10;

/// One request per connection to `server` (each request says `Connection: close`): every status is an answer (not an error), no
/// redirects, a head of at most [`MAX_HEADER_BYTES`], the connect bounded by
/// [`CONNECT_TIMEOUT`], each read and write by `io_timeout` (the longest silence accepted).
pub(crate) fn agent(io_timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .max_idle_connections(0)
        .max_response_header_size(MAX_HEADER_BYTES)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_per_read(Some(io_timeout))
        .timeout_per_write(Some(io_timeout))
        .build()
        .into()
}

/// Output that could not be written (a full disk, a closed pipe): `cannot write stdout: ...`
/// or `cannot write FILE: ...`. The commands report it and exit 1 instead of panicking, as
/// `print!` would.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct OutputError {
    /// `stdout`, or the file's path.
    pub path: String,
    #[source]
    pub source: io::Error,
}

impl OutputError {
    pub fn stdout(source: io::Error) -> Self {
        OutputError {
            path: "stdout".to_string(),
            source,
        }
    }
}

/// Writes `bytes` to stdout and flushes it.
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<(), OutputError> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(OutputError::stdout)
}

/// The URL of `target` (path and query) on `server` (HOST:PORT).
pub(crate) fn url(server: &str, target: &str) -> String {
    format!("http://{server}{target}")
}

/// Credentials for a Fluss listener mapped to `sasl` (HTTP Basic, checked against
/// `security.sasl.plain.credentials`): `--user U --password P`, else `KAFLUSS_USER` and
/// `KAFLUSS_PASSWORD`. `--user U:P` also works (then the password options are not read).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Credentials {
    /// User for HTTP Basic auth, when the Fluss listener requires SASL (or `USER:PASSWORD`).
    #[arg(long, env = USER_ENV, hide_env_values = true)]
    pub user: Option<String>,
    /// Password of --user.
    #[arg(long, env = PASSWORD_ENV, hide_env_values = true)]
    pub password: Option<String>,
}

/// Credentials that cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("--user {user} needs a password: give --password (or {PASSWORD_ENV}), or --user USER:PASSWORD")]
    MissingPassword { user: String },
    #[error("--password needs a user: give --user (or {USER_ENV})")]
    MissingUser,
}

impl Credentials {
    #[cfg(test)]
    pub fn new(user: &str, password: &str) -> Self {
        Credentials {
            user: Some(user.to_string()),
            password: Some(password.to_string()),
        }
    }

    /// (user, password), or `None` when no credentials are given.
    pub fn user_password(&self) -> Result<Option<(String, String)>, CredentialsError> {
        match (&self.user, &self.password) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(CredentialsError::MissingUser),
            (Some(user), _) if user.contains(':') => {
                let (user, password) = user.split_once(':').unwrap_or((user, ""));
                Ok(Some((user.to_string(), password.to_string())))
            }
            (Some(user), Some(password)) => Ok(Some((user.clone(), password.clone()))),
            (Some(user), None) => Err(CredentialsError::MissingPassword { user: user.clone() }),
        }
    }

    /// The `Authorization` header's value (`Basic ...`), or `None` without credentials.
    pub fn authorization(&self) -> Result<Option<String>, CredentialsError> {
        Ok(self.user_password()?.map(|(user, password)| {
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {token}")
        }))
    }

    /// What to tell the user when the server answered 401.
    pub fn refused_message(&self) -> String {
        match self.user_password() {
            Ok(Some((user, _))) => format!(
                "the server refused the credentials of user '{user}': wrong user or password"
            ),
            _ => format!(
                "the server requires credentials: give --user and --password (or set {USER_ENV} and {PASSWORD_ENV})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_from_options_or_user_password() {
        assert_eq!(Credentials::default().user_password(), Ok(None));
        assert_eq!(Credentials::default().authorization(), Ok(None));
        assert_eq!(
            Credentials::new("admin", "pw").user_password(),
            Ok(Some(("admin".into(), "pw".into())))
        );
        let joined = Credentials {
            user: Some("admin:p:w".into()),
            password: Some("ignored".into()),
        };
        assert_eq!(joined.user_password(), Ok(Some(("admin".into(), "p:w".into()))));
        assert_eq!(
            Credentials::new("admin", "pw")
                .authorization()
                .unwrap()
                .as_deref(),
            Some("Basic YWRtaW46cHc=")
        );
        let no_password = Credentials {
            user: Some("admin".into()),
            password: None,
        };
        assert!(matches!(
            no_password.user_password(),
            Err(CredentialsError::MissingPassword { .. })
        ));
        let no_user = Credentials {
            user: None,
            password: Some("pw".into()),
        };
        assert_eq!(no_user.user_password(), Err(CredentialsError::MissingUser));
        assert!(Credentials::new("admin", "secret")
            .refused_message()
            .contains("'admin'"));
        assert!(!Credentials::new("admin", "secret")
            .refused_message()
            .contains("secret"));
        assert!(Credentials::default().refused_message().contains("--user"));
    }
}
