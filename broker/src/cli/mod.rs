//! Client subcommands of the `kafluss` binary that talk to a running server over HTTP.

pub mod scan;
pub mod sql;
