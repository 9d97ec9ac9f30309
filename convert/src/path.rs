//! The JSON path of a value, for the messages that refuse it: `customer.items[2].qty`, shown
//! below `$` (`$.customer.items[2].qty`, `$[0]`).

use std::fmt;

use crate::error::quote_truncated;

/// The path of the value being written, as a chain on the stack (rendered only on error).
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
    Key(&'a Path<'a>, &'a str),
}

impl Path<'_> {
    /// `customer.items[2].qty`, `m["k"]`; names that are not plain words are quoted.
    pub(crate) fn render(&self) -> String {
        let mut segments = Vec::new();
        let mut at = self;
        loop {
            match at {
                Path::Root => break,
                Path::Field(parent, _) | Path::Index(parent, _) | Path::Key(parent, _) => {
                    segments.push(at);
                    at = parent;
                }
            }
        }
        let mut out = String::new();
        for segment in segments.iter().rev() {
            match segment {
                Path::Field(_, name) if is_plain_name(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Path::Field(_, name) | Path::Key(_, name) => {
                    out.push('[');
                    out.push_str(&quote_truncated(name));
                    out.push(']');
                }
                Path::Index(_, i) => {
                    out.push_str(&format!("[{i}]"));
                }
                Path::Root => {}
            }
        }
        out
    }
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b == b'_' || b == b'$' || b.is_ascii_alphanumeric())
}

/// `rendered` (a [`Path::render`]) below `$`: `$.a.b`, `$[0]`, or `$` for the root.
pub(crate) fn write_rooted(f: &mut impl fmt::Write, rendered: &str) -> fmt::Result {
    match rendered {
        "" => f.write_str("$"),
        _ if rendered.starts_with('[') => write!(f, "${rendered}"),
        _ => write!(f, "$.{rendered}"),
    }
}
