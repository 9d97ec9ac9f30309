//! Any text as a `POST /v1/sql` script: the parser never panics, and stays within its limit.
//!
//! The statement limit (`admin.max-sql-statements`) is applied while parsing: a script that
//! parses under a limit of `n` holds at most `n` statements, and the same script parses to the
//! same statements with no limit at all.
#![no_main]

use kafluss_broker::catalog::sql::{parse_script, parse_script_limited};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(script) = std::str::from_utf8(data) else {
        return;
    };
    let unlimited = parse_script(script);
    let limit = 1 + data.len() % 7;
    if let Ok(limited) = parse_script_limited(script, limit) {
        assert!(limited.len() <= limit, "{} statements under a limit of {limit}", limited.len());
        let unlimited = unlimited.expect("a script that parses under a limit parses without one");
        assert_eq!(limited.len(), unlimited.len());
    }
});
