//! Start-up validation of `security.protocol.map` and `security.sasl.enabled.mechanisms`,
//! and redaction of secret configuration values.

use std::borrow::Cow;
use std::fmt;

use thiserror::Error;

use crate::principal::shorten;

pub const PROTOCOL_MAP_KEY: &str = "security.protocol.map";
pub const ENABLED_MECHANISMS_KEY: &str = "security.sasl.enabled.mechanisms";
pub const PLAIN_CREDENTIALS_KEY: &str = "security.sasl.plain.credentials";

/// What `get_cluster_configs`, logs and `/metrics` show instead of a secret value.
pub const REDACTED: &str = "******";

/// Whether a configuration key holds a secret that must never be shown.
pub fn is_secret_config_key(key: &str) -> bool {
    key.trim() == PLAIN_CREDENTIALS_KEY
}

/// The value to show for `key`: [`REDACTED`] for secrets, the value itself otherwise.
pub fn displayable_config_value<'a>(key: &str, value: &'a str) -> Cow<'a, str> {
    if is_secret_config_key(key) {
        Cow::Borrowed(REDACTED)
    } else {
        Cow::Borrowed(value)
    }
}

/// How a listener authenticates its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenerSecurity {
    /// No authentication; the principal is `User:ANONYMOUS`.
    #[default]
    Plaintext,
    /// SASL (PLAIN) before any other request (Kafka `SASL_PLAINTEXT`).
    Sasl,
}

impl ListenerSecurity {
    pub fn as_str(self) -> &'static str {
        match self {
            ListenerSecurity::Plaintext => "plaintext",
            ListenerSecurity::Sasl => "sasl",
        }
    }
}

impl fmt::Display for ListenerSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The only SASL mechanism kafluss implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
}

impl SaslMechanism {
    /// The name on the wire (SaslHandshake), case-sensitive there.
    pub const fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
        }
    }
}

/// Start-up errors, each naming the key and the offending listener or value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecurityConfigError {
    #[error(
        "{PROTOCOL_MAP_KEY}: entry `{entry}` is not LISTENER:protocol (e.g. FLUSS:plaintext,KAFKA:sasl)"
    )]
    MalformedProtocolMapEntry { entry: String },
    #[error("{PROTOCOL_MAP_KEY}: listener {listener} is mapped to `{protocol}`; only plaintext and sasl are supported")]
    UnsupportedListenerProtocol { listener: String, protocol: String },
    #[error("{PROTOCOL_MAP_KEY}: listener {listener} is mapped more than once")]
    DuplicateListener { listener: String },
    #[error("{PROTOCOL_MAP_KEY}: listener {listener} is not one of the configured listeners ({known})")]
    UnknownListener { listener: String, known: String },
    #[error("{ENABLED_MECHANISMS_KEY}: mechanism `{mechanism}` is not supported; only PLAIN is")]
    UnsupportedMechanism { mechanism: String },
    #[error("{ENABLED_MECHANISMS_KEY} must include PLAIN because listener {listener} is mapped to sasl")]
    PlainNotEnabled { listener: String },
}

/// The validated security settings of a server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityConfig {
    /// Listener name → security, in configuration order. Unlisted listeners are plaintext.
    listeners: Vec<(String, ListenerSecurity)>,
    mechanisms: Vec<SaslMechanism>,
}

impl SecurityConfig {
    /// Validates both keys; `None` means the key is not set. Defaults: every listener
    /// plaintext; mechanisms `PLAIN`. Listener names are case-sensitive; protocol and
    /// mechanism values are not.
    pub fn parse(
        protocol_map: Option<&str>,
        enabled_mechanisms: Option<&str>,
    ) -> Result<Self, SecurityConfigError> {
        let listeners = parse_protocol_map(protocol_map.unwrap_or(""))?;
        let mechanisms = match enabled_mechanisms {
            Some(text) => parse_mechanisms(text)?,
            None => vec![SaslMechanism::Plain],
        };
        if !mechanisms.contains(&SaslMechanism::Plain) {
            if let Some((listener, _)) = listeners.iter().find(|(_, s)| *s == ListenerSecurity::Sasl) {
                return Err(SecurityConfigError::PlainNotEnabled {
                    listener: listener.clone(),
                });
            }
        }
        Ok(Self {
            listeners,
            mechanisms,
        })
    }

    /// The security of `listener` (plaintext when the map does not name it).
    pub fn listener_security(&self, listener: &str) -> ListenerSecurity {
        self.listeners
            .iter()
            .find(|(name, _)| name == listener)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }

    /// The listeners the map names, in configuration order.
    pub fn mapped_listeners(&self) -> impl Iterator<Item = (&str, ListenerSecurity)> {
        self.listeners
            .iter()
            .map(|(name, security)| (name.as_str(), *security))
    }

    pub fn enabled_mechanisms(&self) -> &[SaslMechanism] {
        &self.mechanisms
    }

    /// Fails when the map names a listener that `bind.listeners` does not define (a typo
    /// there would otherwise silently leave a listener unauthenticated).
    pub fn check_listeners_exist(&self, configured: &[&str]) -> Result<(), SecurityConfigError> {
        match self
            .listeners
            .iter()
            .find(|(name, _)| !configured.contains(&name.as_str()))
        {
            Some((listener, _)) => Err(SecurityConfigError::UnknownListener {
                listener: listener.clone(),
                known: configured.join(", "),
            }),
            None => Ok(()),
        }
    }
}

fn parse_protocol_map(text: &str) -> Result<Vec<(String, ListenerSecurity)>, SecurityConfigError> {
    let mut listeners: Vec<(String, ListenerSecurity)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let malformed = || SecurityConfigError::MalformedProtocolMapEntry {
            entry: shorten(entry),
        };
        let (listener, protocol) = entry.split_once(':').ok_or_else(malformed)?;
        let (listener, protocol) = (listener.trim(), protocol.trim());
        let listener_ok = !listener.is_empty()
            && listener.len() <= 64
            && listener
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !listener_ok {
            return Err(malformed());
        }
        let security = if protocol.eq_ignore_ascii_case("plaintext") {
            ListenerSecurity::Plaintext
        } else if protocol.eq_ignore_ascii_case("sasl") {
            ListenerSecurity::Sasl
        } else {
            return Err(SecurityConfigError::UnsupportedListenerProtocol {
                listener: listener.to_owned(),
                protocol: shorten(protocol),
            });
        };
        if listeners.iter().any(|(name, _)| name == listener) {
            return Err(SecurityConfigError::DuplicateListener {
                listener: listener.to_owned(),
            });
        }
        listeners.push((listener.to_owned(), security));
    }
    Ok(listeners)
}

fn parse_mechanisms(text: &str) -> Result<Vec<SaslMechanism>, SecurityConfigError> {
    let mut mechanisms = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !name.eq_ignore_ascii_case("PLAIN") {
            return Err(SecurityConfigError::UnsupportedMechanism {
                mechanism: shorten(name),
            });
        }
        if !mechanisms.contains(&SaslMechanism::Plain) {
            mechanisms.push(SaslMechanism::Plain);
        }
    }
    Ok(mechanisms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_configuration() {
        let config = SecurityConfig::parse(Some("FLUSS:plaintext,KAFKA:sasl"), Some("PLAIN")).unwrap();
        assert_eq!(config.listener_security("KAFKA"), ListenerSecurity::Sasl);
        assert_eq!(config.listener_security("FLUSS"), ListenerSecurity::Plaintext);
        assert_eq!(config.listener_security("OTHER"), ListenerSecurity::Plaintext);
        assert_eq!(config.enabled_mechanisms(), &[SaslMechanism::Plain]);
        assert!(config.check_listeners_exist(&["FLUSS", "KAFKA"]).is_ok());
        let mapped: Vec<_> = config.mapped_listeners().collect();
        assert_eq!(
            mapped,
            vec![
                ("FLUSS", ListenerSecurity::Plaintext),
                ("KAFKA", ListenerSecurity::Sasl)
            ]
        );
    }

    #[test]
    fn defaults_and_leniency() {
        let config = SecurityConfig::parse(None, None).unwrap();
        assert_eq!(config.listener_security("KAFKA"), ListenerSecurity::Plaintext);
        assert_eq!(config.enabled_mechanisms(), &[SaslMechanism::Plain]);
        let config = SecurityConfig::parse(Some(" KAFKA : SASL , "), Some("plain,PLAIN")).unwrap();
        assert_eq!(config.listener_security("KAFKA"), ListenerSecurity::Sasl);
        assert_eq!(
            config.listener_security("kafka"),
            ListenerSecurity::Plaintext,
            "names are exact"
        );
        assert_eq!(config.enabled_mechanisms(), &[SaslMechanism::Plain]);
    }

    #[test]
    fn errors_name_the_listener_or_value() {
        let err = SecurityConfig::parse(Some("FLUSS:plaintext,KAFKA:ssl"), None).unwrap_err();
        assert_eq!(
            err,
            SecurityConfigError::UnsupportedListenerProtocol {
                listener: "KAFKA".into(),
                protocol: "ssl".into()
            }
        );
        assert!(err.to_string().contains("KAFKA") && err.to_string().contains(PROTOCOL_MAP_KEY));
        for bad in ["KAFKA", ":sasl", "KA FKA:sasl", "KAFKA=sasl"] {
            assert!(
                matches!(
                    SecurityConfig::parse(Some(bad), None),
                    Err(SecurityConfigError::MalformedProtocolMapEntry { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(
            SecurityConfig::parse(Some("KAFKA:sasl,KAFKA:plaintext"), None),
            Err(SecurityConfigError::DuplicateListener {
                listener: "KAFKA".into()
            })
        );
        assert_eq!(
            SecurityConfig::parse(None, Some("PLAIN,SCRAM-SHA-256")),
            Err(SecurityConfigError::UnsupportedMechanism {
                mechanism: "SCRAM-SHA-256".into()
            })
        );
        assert_eq!(
            SecurityConfig::parse(Some("KAFKA:sasl"), Some("")),
            Err(SecurityConfigError::PlainNotEnabled {
                listener: "KAFKA".into()
            })
        );
        assert!(SecurityConfig::parse(Some("KAFKA:plaintext"), Some("")).is_ok());
        let config = SecurityConfig::parse(Some("KAFAK:sasl"), None).unwrap();
        let err = config.check_listeners_exist(&["FLUSS", "KAFKA"]).unwrap_err();
        assert!(
            err.to_string().contains("KAFAK") && err.to_string().contains("FLUSS, KAFKA"),
            "{err}"
        );
    }

    #[test]
    fn secrets_are_redacted() {
        assert!(is_secret_config_key(PLAIN_CREDENTIALS_KEY));
        assert!(!is_secret_config_key(PROTOCOL_MAP_KEY));
        assert_eq!(displayable_config_value(PLAIN_CREDENTIALS_KEY, "w:pw"), REDACTED);
        assert_eq!(displayable_config_value("kafka.enabled", "true"), "true");
    }
}
