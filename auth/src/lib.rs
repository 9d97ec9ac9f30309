//! SASL/PLAIN authentication and Fluss ACL authorization.
