//! One record value parsed as strict JSON in a single pass over its bytes, into a compact
//! tape of nodes that point back into the input (numbers and strings without escapes are
//! never copied, numbers are not converted here: the type rules parse each one once from its
//! text). The document-wide checks of behaviour.md follow the parse: root object, ≤ 10,000
//! members per container, no duplicate keys below the root (the row writer checks the root's
//! keys as it matches them to fields).
//!
//! Grammar: RFC 8259 (`{ } [ ] : ,`, the four whitespace bytes, `true false null`, numbers
//! `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` of any length, strings with the
//! escapes `\" \\ \/ \b \f \n \r \t \uXXXX`, surrogate escapes only as a high–low pair, no
//! raw control characters), strict UTF-8, nothing after the value, and at most
//! [`MAX_JSON_DEPTH`] containers nested below the root.

use std::collections::HashSet;

use crate::error::quote_truncated;
use crate::path::Path;
use crate::scan::{LexError, LexErrorKind, MAX_JSON_DEPTH};

/// Most members (object) or elements (array) in one JSON container.
pub const MAX_CONTAINER_MEMBERS: usize = 10_000;
/// Objects up to this size look for duplicate keys pairwise; larger ones hash.
const PAIRWISE_DUPLICATE_CHECK: usize = 16;

/// One tape node. Containers are followed by their members (an object's as key node, value
/// nodes), so a container's `count` nodes below it can be skipped at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    Null,
    True,
    False,
    /// A number token: its byte range in the input.
    Number {
        start: u32,
        end: u32,
    },
    /// A string without escapes: the byte range of its body in the input.
    Raw {
        start: u32,
        end: u32,
    },
    /// A string with escapes, decoded: its byte range in the scratch's decoded text.
    Decoded {
        start: u32,
        end: u32,
    },
    Array {
        len: u32,
        count: u32,
    },
    Object {
        len: u32,
        count: u32,
    },
}

/// Reusable buffers for parsing record values; one per converter, never shared.
#[derive(Default)]
pub struct JsonScratch {
    nodes: Vec<Node>,
    /// Decoded bodies of the strings that have escapes.
    decoded: String,
    /// The containers open at the parse position (the root first).
    open: Vec<Open>,
    /// Node index of every container, in document order (the order of the checks).
    containers: Vec<u32>,
    /// Convert every record on the two-pass path (parse to the tape, then write), never in
    /// one pass: for the differential tests and the fuzz target that compare the two.
    two_pass: bool,
    /// Tests only: parse with the previous parser (simd-json tape), to compare against.
    #[cfg(test)]
    reference: Option<Box<crate::json_reference::ReferenceScratch>>,
}

impl std::fmt::Debug for JsonScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonScratch").finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    node: u32,
    members: u32,
    object: bool,
}

/// A parsed, validated JSON object. Node indices address the tape; the root is node 0.
pub(crate) struct Doc<'s> {
    /// The input, valid UTF-8.
    text: &'s str,
    nodes: &'s [Node],
    decoded: &'s str,
}

impl JsonScratch {
    /// A scratch with which every JSON record takes the two-pass path (tape, then writer)
    /// instead of the one-pass path of the common case; the results are the same, which the
    /// differential tests and the `convert_batch` fuzz target check.
    pub fn two_pass() -> Self {
        Self {
            two_pass: true,
            ..Self::default()
        }
    }

    /// Whether records may be written in one pass.
    pub(crate) fn one_pass(&self) -> bool {
        !self.two_pass
    }

    /// A scratch that parses with the previous simd-json based parser (tests compare the two).
    #[cfg(test)]
    pub(crate) fn reference() -> Self {
        Self {
            reference: Some(Box::default()),
            two_pass: true,
            ..Self::default()
        }
    }

    /// Parses `input` as a strict JSON object. The error is the reason text, starting with
    /// "invalid JSON" or naming the non-object root.
    pub(crate) fn parse<'s>(&'s mut self, input: &'s [u8]) -> Result<Doc<'s>, String> {
        #[cfg(test)]
        if let Some(reference) = self.reference.as_mut() {
            let text = reference.parse_into(input, &mut self.nodes, &mut self.decoded)?;
            return Ok(Doc {
                text,
                nodes: &self.nodes,
                decoded: &self.decoded,
            });
        }
        if u32::try_from(input.len()).is_err() {
            return Err("invalid JSON: value larger than 4 GiB".into());
        }
        let text = std::str::from_utf8(input).map_err(|e| format!("invalid JSON: {e}"))?;
        self.nodes.clear();
        self.decoded.clear();
        self.open.clear();
        self.containers.clear();
        Parser {
            b: input,
            text,
            nodes: &mut self.nodes,
            decoded: &mut self.decoded,
            open: &mut self.open,
            containers: &mut self.containers,
        }
        .document()
        .map_err(|fail| fail.render(input))?;
        let doc = Doc {
            text,
            nodes: &self.nodes,
            decoded: &self.decoded,
        };
        match doc.nodes.first() {
            Some(Node::Object { .. }) => doc.check_containers(&self.containers)?,
            Some(other) => {
                return Err(format!(
                    "the JSON value must be an object, got {}",
                    describe_kind(*other)
                ))
            }
            None => return Err("invalid JSON: empty document".into()),
        }
        Ok(doc)
    }
}

/// The single pass over the bytes.
struct Parser<'a> {
    b: &'a [u8],
    text: &'a str,
    nodes: &'a mut Vec<Node>,
    decoded: &'a mut String,
    open: &'a mut Vec<Open>,
    containers: &'a mut Vec<u32>,
}

/// Where and why the parse stopped: small enough to travel in registers, rendered into the
/// reason text once, on failure.
#[derive(Debug, Clone, Copy)]
struct Fail {
    at: u32,
    why: Why,
}

#[derive(Debug, Clone, Copy)]
enum Why {
    Lex(LexErrorKind),
    Expected(Expected),
}

#[derive(Debug, Clone, Copy)]
enum Expected {
    Value,
    End,
    CommaOrBrace,
    CommaOrBracket,
    Key,
    Colon,
}

impl Expected {
    fn text(self) -> &'static str {
        match self {
            Expected::Value => "a value",
            Expected::End => "the end of the value",
            Expected::CommaOrBrace => "',' or '}'",
            Expected::CommaOrBracket => "',' or ']'",
            Expected::Key => "a string key",
            Expected::Colon => "':'",
        }
    }
}

fn lex_error(offset: usize, kind: LexErrorKind) -> Fail {
    Fail {
        at: at32(offset),
        why: Why::Lex(kind),
    }
}

fn syntax(at: usize, expected: Expected) -> Fail {
    Fail {
        at: at32(at),
        why: Why::Expected(expected),
    }
}

impl Fail {
    #[cold]
    fn render(self, b: &[u8]) -> String {
        let at = self.at as usize;
        let expected = match self.why {
            Why::Lex(kind) => return format!("invalid JSON: {}", LexError { offset: at, kind }),
            Why::Expected(expected) => expected.text(),
        };
        match b.get(at) {
            Some(&c) if c.is_ascii_graphic() => {
                format!(
                    "invalid JSON: expected {expected} at byte {at}, found '{}'",
                    c as char
                )
            }
            Some(c) => format!("invalid JSON: expected {expected} at byte {at}, found byte 0x{c:02x}"),
            None => format!("invalid JSON: expected {expected} at byte {at}, found the end of the value"),
        }
    }
}

pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = b.get(i) {
        i += 1;
    }
    i
}

/// `a..b` of `text`; the parser only cuts at ASCII bytes, which are character boundaries.
fn slice(text: &str, start: u32, end: u32) -> &str {
    text.get(start as usize..end as usize).unwrap_or_default()
}

/// Offsets fit in u32: the input length was checked.
fn at32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `v` that is zero (the lowest one exactly; higher ones may
/// be false positives, but only above a true zero byte).
fn zero_bytes(v: u64) -> u64 {
    v.wrapping_sub(ONES) & !v & HIGHS
}

/// The first index at or after `i` of `"`, `\` or a control byte, or `b.len()`.
pub(crate) fn string_stop(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let stops = string_stops(u64::from_le_bytes(word));
        if stops != 0 {
            return i + (stops.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if is_string_stop(c) {
            break;
        }
        i += 1;
    }
    i
}

/// The high bit of each byte of `w` that ends a string's plain run: `"`, `\` or a control
/// byte (the lowest exactly; higher ones may be false positives).
#[inline(always)]
fn string_stops(w: u64) -> u64 {
    zero_bytes(w ^ (ONES * u64::from(b'"')))
        | zero_bytes(w ^ (ONES * u64::from(b'\\')))
        | zero_bytes(w & (ONES * 0xE0))
}

#[inline(always)]
fn is_string_stop(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// `string_stop`, and whether the bytes from `i` up to it are all ASCII.
#[inline(always)]
pub(crate) fn string_stop_ascii(b: &[u8], mut i: usize) -> (usize, bool) {
    // The high bits of every byte passed so far.
    let mut high = 0u64;
    while let Some(chunk) = b.get(i..i + 8) {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_le_bytes(word);
        let stops = string_stops(w);
        if stops != 0 {
            let before = stops.trailing_zeros() / 8;
            // The bytes of `w` before the stop (at most 7 of them).
            high |= w & ((1u64 << (8 * before)) - 1);
            return (i + before as usize, high & HIGHS == 0);
        }
        high |= w;
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if is_string_stop(c) {
            break;
        }
        high |= u64::from(c);
        i += 1;
    }
    (i, high & HIGHS == 0)
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let mut unit = 0u32;
    for &d in digits {
        unit = (unit << 4) | (d as char).to_digit(16)?;
    }
    Some(unit)
}

/// The end of the number token `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` that
/// starts at `start`, or `None` when the bytes there are not one.
#[inline]
pub(crate) fn number_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = skip_digits(b, i + 1),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let digits = i + 1;
        i = skip_digits(b, digits);
        if i == digits {
            return None;
        }
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let digits = i;
        i = skip_digits(b, digits);
        if i == digits {
            return None;
        }
    }
    Some(i)
}

fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

impl Parser<'_> {
    fn document(&mut self) -> Result<(), Fail> {
        let b = self.b;
        let mut i = skip_ws(b, 0);
        'value: loop {
            // A value starts at `i`.
            match b.get(i) {
                Some(b'{') => {
                    self.open_container(i, true)?;
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&b'}') {
                        i += 1;
                        self.close_container();
                    } else {
                        self.first_member();
                        i = self.key(i)?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.open_container(i, false)?;
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&b']') {
                        i += 1;
                        self.close_container();
                    } else {
                        self.first_member();
                        continue 'value;
                    }
                }
                Some(b'"') => i = self.string(i)?,
                Some(b't') => i = self.literal(i, b"true", Node::True)?,
                Some(b'f') => i = self.literal(i, b"false", Node::False)?,
                Some(b'n') => i = self.literal(i, b"null", Node::Null)?,
                Some(b'-' | b'0'..=b'9') => i = self.number(i)?,
                _ => return Err(syntax(i, Expected::Value)),
            }
            // After a value: separators and closing brackets.
            loop {
                i = skip_ws(b, i);
                let Some(open) = self.open.last_mut() else {
                    if i != b.len() {
                        return Err(syntax(i, Expected::End));
                    }
                    return Ok(());
                };
                match (b.get(i), open.object) {
                    (Some(b','), object) => {
                        open.members = open.members.saturating_add(1);
                        i = skip_ws(b, i + 1);
                        if object {
                            i = self.key(i)?;
                        }
                        continue 'value;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        i += 1;
                        self.close_container();
                    }
                    (_, true) => return Err(syntax(i, Expected::CommaOrBrace)),
                    (_, false) => return Err(syntax(i, Expected::CommaOrBracket)),
                }
            }
        }
    }

    fn open_container(&mut self, at: usize, object: bool) -> Result<(), Fail> {
        // The root is the first open container; below it MAX_JSON_DEPTH more may nest.
        if self.open.len() > MAX_JSON_DEPTH {
            return Err(lex_error(at, LexErrorKind::TooDeep));
        }
        let node = at32(self.nodes.len());
        self.nodes.push(Node::Null);
        self.containers.push(node);
        self.open.push(Open {
            node,
            members: 0,
            object,
        });
        Ok(())
    }

    fn first_member(&mut self) {
        if let Some(open) = self.open.last_mut() {
            open.members = 1;
        }
    }

    fn close_container(&mut self) {
        let Some(open) = self.open.pop() else {
            return;
        };
        let at = open.node as usize;
        let count = at32(self.nodes.len() - at - 1);
        let node = if open.object {
            Node::Object {
                len: open.members,
                count,
            }
        } else {
            Node::Array {
                len: open.members,
                count,
            }
        };
        if let Some(slot) = self.nodes.get_mut(at) {
            *slot = node;
        }
    }

    /// An object key at `i` and its `:`; returns where the member's value starts.
    fn key(&mut self, i: usize) -> Result<usize, Fail> {
        let b = self.b;
        if b.get(i) != Some(&b'"') {
            return Err(syntax(i, Expected::Key));
        }
        let i = skip_ws(b, self.string(i)?);
        if b.get(i) != Some(&b':') {
            return Err(syntax(i, Expected::Colon));
        }
        Ok(skip_ws(b, i + 1))
    }

    fn literal(&mut self, i: usize, word: &[u8], node: Node) -> Result<usize, Fail> {
        if self.b.get(i..i + word.len()) != Some(word) {
            return Err(syntax(i, Expected::Value));
        }
        self.nodes.push(node);
        Ok(i + word.len())
    }

    fn number(&mut self, start: usize) -> Result<usize, Fail> {
        let i = number_end(self.b, start).ok_or_else(|| lex_error(start, LexErrorKind::BadNumber))?;
        self.nodes.push(Node::Number {
            start: at32(start),
            end: at32(i),
        });
        Ok(i)
    }

    /// The string whose opening quote is at `quote`; returns the index after its end.
    fn string(&mut self, quote: usize) -> Result<usize, Fail> {
        let b = self.b;
        let start = quote + 1;
        let stop = string_stop(b, start);
        match b.get(stop) {
            Some(b'"') => {
                self.nodes.push(Node::Raw {
                    start: at32(start),
                    end: at32(stop),
                });
                Ok(stop + 1)
            }
            Some(b'\\') => self.escaped_string(start, stop),
            Some(_) => Err(lex_error(stop, LexErrorKind::ControlCharacter)),
            None => Err(lex_error(b.len(), LexErrorKind::UnterminatedString)),
        }
    }

    /// A string body from `start` with its first escape at `escape`, decoded.
    fn escaped_string(&mut self, start: usize, mut escape: usize) -> Result<usize, Fail> {
        let b = self.b;
        let out_start = at32(self.decoded.len());
        self.decoded.push_str(slice(self.text, at32(start), at32(escape)));
        loop {
            // `escape` is at a backslash.
            let (c, next) = match b.get(escape + 1) {
                Some(b'"') => ('"', escape + 2),
                Some(b'\\') => ('\\', escape + 2),
                Some(b'/') => ('/', escape + 2),
                Some(b'b') => ('\u{8}', escape + 2),
                Some(b'f') => ('\u{c}', escape + 2),
                Some(b'n') => ('\n', escape + 2),
                Some(b'r') => ('\r', escape + 2),
                Some(b't') => ('\t', escape + 2),
                Some(b'u') => {
                    let Some(unit) = hex4(b, escape + 2) else {
                        return Err(lex_error(escape, LexErrorKind::BadEscape));
                    };
                    let (code, next) = match unit {
                        0xD800..=0xDBFF => {
                            let low = if b.get(escape + 6) == Some(&b'\\') && b.get(escape + 7) == Some(&b'u')
                            {
                                hex4(b, escape + 8)
                            } else {
                                None
                            };
                            match low {
                                Some(low @ 0xDC00..=0xDFFF) => {
                                    (0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), escape + 12)
                                }
                                _ => return Err(lex_error(escape, LexErrorKind::UnpairedSurrogate)),
                            }
                        }
                        0xDC00..=0xDFFF => return Err(lex_error(escape, LexErrorKind::UnpairedSurrogate)),
                        unit => (unit, escape + 6),
                    };
                    let Some(c) = char::from_u32(code) else {
                        return Err(lex_error(escape, LexErrorKind::BadEscape));
                    };
                    (c, next)
                }
                _ => return Err(lex_error(escape, LexErrorKind::BadEscape)),
            };
            self.decoded.push(c);
            let stop = string_stop(b, next);
            self.decoded.push_str(slice(self.text, at32(next), at32(stop)));
            match b.get(stop) {
                Some(b'"') => {
                    self.nodes.push(Node::Decoded {
                        start: out_start,
                        end: at32(self.decoded.len()),
                    });
                    return Ok(stop + 1);
                }
                Some(b'\\') => escape = stop,
                Some(_) => return Err(lex_error(stop, LexErrorKind::ControlCharacter)),
                None => return Err(lex_error(b.len(), LexErrorKind::UnterminatedString)),
            }
        }
    }
}

fn describe_kind(node: Node) -> &'static str {
    match node {
        Node::Raw { .. } | Node::Decoded { .. } => "a string",
        Node::Array { .. } => "an array",
        Node::Object { .. } => "an object",
        Node::Null => "null",
        Node::True | Node::False => "a boolean",
        Node::Number { .. } => "a number",
    }
}

fn check_members(len: u32) -> Result<(), String> {
    if len as usize > MAX_CONTAINER_MEMBERS {
        return Err(format!(
            "invalid JSON: a container has {len} members, more than {MAX_CONTAINER_MEMBERS}"
        ));
    }
    Ok(())
}

/// The refusal of an object at `at` (a rooted path, `$.r`) with `key` twice.
#[cold]
pub(crate) fn duplicate_key(key: &str, at: &str) -> String {
    format!(
        "invalid JSON: duplicate key {} in the object at {at}",
        quote_truncated(key)
    )
}

/// Length and first, middle and last bytes of a key: equal keys have equal prints.
fn fingerprint(key: &str) -> u64 {
    let b = key.as_bytes();
    match b.len() {
        0 => 0,
        len => {
            (len as u64) << 32
                | u64::from(b[0]) << 24
                | u64::from(b[len / 2]) << 16
                | u64::from(b[len - 1]) << 8
        }
    }
}

/// A JSON value of a document, as the converter sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum JsonValue<'d> {
    Null,
    Bool(bool),
    /// The number's exact source text.
    Number(&'d str),
    String(&'d str),
    Array(Members),
    Object(Members),
}

/// A container: its node index and member count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Members {
    pub node: usize,
    pub len: usize,
}

impl<'s> Doc<'s> {
    pub(crate) fn root(&self) -> Members {
        let len = match self.nodes.first() {
            Some(Node::Object { len, .. }) => *len as usize,
            _ => 0,
        };
        Members { node: 0, len }
    }

    /// The value starting at node `i`.
    pub(crate) fn value(&self, i: usize) -> JsonValue<'s> {
        match self.nodes.get(i).copied().unwrap_or(Node::Null) {
            Node::Null => JsonValue::Null,
            Node::True => JsonValue::Bool(true),
            Node::False => JsonValue::Bool(false),
            Node::Number { start, end } => JsonValue::Number(slice(self.text, start, end)),
            Node::Raw { start, end } => JsonValue::String(slice(self.text, start, end)),
            Node::Decoded { start, end } => JsonValue::String(slice(self.decoded, start, end)),
            Node::Array { len, .. } => JsonValue::Array(Members {
                node: i,
                len: len as usize,
            }),
            Node::Object { len, .. } => JsonValue::Object(Members {
                node: i,
                len: len as usize,
            }),
        }
    }

    /// The text of string node `i` (empty for any other node).
    fn string_at(&self, i: usize) -> &'s str {
        match self.nodes.get(i) {
            Some(&Node::Raw { start, end }) => slice(self.text, start, end),
            Some(&Node::Decoded { start, end }) => slice(self.decoded, start, end),
            _ => "",
        }
    }

    /// Index of the node after the value starting at `i`.
    fn skip(&self, i: usize) -> usize {
        match self.nodes.get(i) {
            Some(Node::Object { count, .. } | Node::Array { count, .. }) => i + 1 + *count as usize,
            _ => i + 1,
        }
    }

    /// `(key, value node)` of each member of an object, in input order.
    pub(crate) fn members(&self, object: Members) -> impl Iterator<Item = (&'s str, usize)> + '_ {
        let mut at = object.node + 1;
        (0..object.len).map(move |_| {
            let key = self.string_at(at);
            let value = at + 1;
            at = self.skip(value);
            (key, value)
        })
    }

    /// Node index of each element of an array, in order.
    pub(crate) fn elements(&self, array: Members) -> impl Iterator<Item = usize> + '_ {
        let mut at = array.node + 1;
        (0..array.len).map(move |_| {
            let element = at;
            at = self.skip(at);
            element
        })
    }

    /// The container checks in document order: member counts, and duplicate keys below
    /// the root.
    fn check_containers(&self, containers: &[u32]) -> Result<(), String> {
        for &container in containers {
            let container = container as usize;
            match self.nodes.get(container) {
                Some(&Node::Object { len, .. }) => {
                    check_members(len)?;
                    if container != 0 {
                        let object = Members {
                            node: container,
                            len: len as usize,
                        };
                        if let Err(key) = self.check_duplicate_keys(object) {
                            return Err(duplicate_key(key, &self.path_of(container)));
                        }
                    }
                }
                Some(&Node::Array { len, .. }) => check_members(len)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// The path of node `target` below the root, rooted (`$.r.s`, `$.a[1]`, `$`): a walk from
    /// the root, only made to refuse the document.
    #[cold]
    fn path_of(&self, target: usize) -> String {
        fn walk(doc: &Doc<'_>, node: usize, target: usize, path: &Path<'_>) -> Option<String> {
            if node == target {
                let mut rooted = String::new();
                crate::path::write_rooted(&mut rooted, &path.render()).ok()?;
                return Some(rooted);
            }
            let inside = |child: usize| child <= target && target < doc.skip(child);
            match *doc.nodes.get(node)? {
                Node::Object { len, .. } => {
                    let object = Members {
                        node,
                        len: len as usize,
                    };
                    let (key, value) = doc.members(object).find(|&(_, value)| inside(value))?;
                    walk(doc, value, target, &Path::Field(path, key))
                }
                Node::Array { len, .. } => {
                    let array = Members {
                        node,
                        len: len as usize,
                    };
                    let (index, element) = doc.elements(array).enumerate().find(|&(_, e)| inside(e))?;
                    walk(doc, element, target, &Path::Index(path, index))
                }
                _ => None,
            }
        }
        walk(self, 0, target, &Path::Root).unwrap_or_else(|| "$".to_string())
    }

    /// Refuses an object with a repeated key (the root is not checked when parsing): the key.
    pub(crate) fn check_duplicate_keys(&self, object: Members) -> Result<(), &'s str> {
        let len = object.len;
        if len < 2 {
            return Ok(());
        }
        if len == 2 {
            let mut keys = self.members(object).map(|(key, _)| key);
            return match (keys.next(), keys.next()) {
                (Some(a), Some(b)) if a == b => Err(b),
                _ => Ok(()),
            };
        }
        if len > PAIRWISE_DUPLICATE_CHECK {
            let mut seen = HashSet::with_capacity(len);
            for (key, _) in self.members(object) {
                if !seen.insert(key) {
                    return Err(key);
                }
            }
            return Ok(());
        }
        // Compare cheap fingerprints first; only equal ones compare bytes.
        let mut prints = [0u64; PAIRWISE_DUPLICATE_CHECK];
        let mut keys = [""; PAIRWISE_DUPLICATE_CHECK];
        for (n, (key, _)) in self.members(object).enumerate() {
            let print = fingerprint(key);
            for m in 0..n {
                if prints[m] == print && keys[m] == key {
                    return Err(key);
                }
            }
            prints[n] = print;
            keys[n] = key;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(input: &str) -> String {
        let mut scratch = JsonScratch::default();
        let result = scratch.parse(input.as_bytes()).err();
        result.unwrap_or_else(|| panic!("{input} parsed"))
    }

    #[test]
    fn walks_members_and_number_texts() {
        let mut scratch = JsonScratch::default();
        let input = br#"{"a": 1.50, "b": [true, null, -0, "x\n"], "c": {"d": 1e309}}"#;
        let doc = scratch.parse(input).unwrap();
        let members: Vec<_> = doc.members(doc.root()).collect();
        assert_eq!(members.len(), 3);
        assert_eq!(members[0].0, "a");
        assert!(matches!(doc.value(members[0].1), JsonValue::Number("1.50")));
        let JsonValue::Array(b) = doc.value(members[1].1) else {
            panic!()
        };
        let elems: Vec<_> = doc.elements(b).map(|i| doc.value(i)).collect();
        assert!(matches!(elems[0], JsonValue::Bool(true)));
        assert!(matches!(elems[1], JsonValue::Null));
        assert!(matches!(elems[2], JsonValue::Number("-0")));
        assert!(matches!(elems[3], JsonValue::String("x\n")));
        let JsonValue::Object(c) = doc.value(members[2].1) else {
            panic!()
        };
        let (k, v) = doc.members(c).next().unwrap();
        assert_eq!(k, "d");
        assert!(matches!(doc.value(v), JsonValue::Number("1e309")));
    }

    #[test]
    fn number_texts_and_whitespace() {
        let mut scratch = JsonScratch::default();
        let input = b"{ \"a\" : 1.50 ,\r\n\t\"b\" : [ -0 ,2E3,{\"c\":0.1e-2}], \"d\":\"-1\" , \"e\" : 7}";
        let doc = scratch.parse(input).unwrap();
        let mut texts = Vec::new();
        collect_numbers(&doc, 0, &mut texts);
        assert_eq!(texts, ["1.50", "-0", "2E3", "0.1e-2", "7"]);
    }

    fn collect_numbers(doc: &Doc<'_>, node: usize, out: &mut Vec<String>) {
        match doc.value(node) {
            JsonValue::Number(t) => out.push(t.to_string()),
            JsonValue::Array(m) => doc.elements(m).for_each(|e| collect_numbers(doc, e, out)),
            JsonValue::Object(m) => doc.members(m).for_each(|(_, v)| collect_numbers(doc, v, out)),
            _ => {}
        }
    }

    #[test]
    fn escapes_are_decoded() {
        let mut scratch = JsonScratch::default();
        let input = br#"{"k\"ey":"a\\b\/c\b\f\n\r\t\u0041\u00e9\ud83d\ude00z","long string without escapes":"0123456789abcdef"}"#;
        let doc = scratch.parse(input).unwrap();
        let members: Vec<_> = doc.members(doc.root()).collect();
        assert_eq!(members[0].0, "k\"ey");
        assert!(
            matches!(doc.value(members[0].1), JsonValue::String(s) if s == "a\\b/c\u{8}\u{c}\n\r\tAé😀z")
        );
        assert_eq!(members[1].0, "long string without escapes");
        assert!(matches!(
            doc.value(members[1].1),
            JsonValue::String("0123456789abcdef")
        ));
    }

    #[test]
    fn scratch_is_reusable() {
        let mut scratch = JsonScratch::default();
        for n in 0..3 {
            let text = format!(r#"{{"n":{n}}}"#);
            let doc = scratch.parse(text.as_bytes()).unwrap();
            let (_, v) = doc.members(doc.root()).next().unwrap();
            let JsonValue::Number(t) = doc.value(v) else {
                panic!()
            };
            assert_eq!(t, n.to_string());
        }
        assert!(scratch.parse(b"{").is_err());
        assert!(scratch.parse(b"{}").is_ok());
    }

    #[test]
    fn strictness() {
        for bad in [
            "",
            "   ",
            r#"{"a":1} x"#,
            r#"{"a":1}{}"#,
            r#"{"a":1,}"#,
            r#"{"a":tru}"#,
            r#"{'a':1}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e}"#,
            r#"{"a":+1}"#,
            r#"{"a":-}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"abc"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":[1 2]}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[1}"#,
            r#"{"a":{]}"#,
            r#"{1:2}"#,
            "{\"a\":1}\u{a0}",
            "\u{feff}{}",
        ] {
            assert!(parse_err(bad).starts_with("invalid JSON"), "{bad:?}");
        }
        assert!(parse_err(r#"{"a":"\ud800"}"#).contains("surrogate"));
        assert!(parse_err(r#"{"a":"\udc00"}"#).contains("surrogate"));
        assert!(parse_err(r#"{"a":"\ud800\u0041"}"#).contains("surrogate"));
        assert_eq!(
            parse_err(r#"{"x":{"a":1,"b":2,"a":3}}"#),
            r#"invalid JSON: duplicate key "a" in the object at $.x"#
        );
        // The message names where the object is (it named only the key, the same for every
        // place a document repeats it).
        for (value, at) in [
            (r#"{"r":{"s":{"a":1,"a":2}}}"#, "$.r.s"),
            (r#"{"arr":[{"a":1},{"a":1,"a":2}]}"#, "$.arr[1]"),
            (
                r#"{"m":{"a b":{"k":[[0,{"z":1,"z":2}]]}}}"#,
                r#"$.m["a b"].k[0][1]"#,
            ),
            (
                r#"{"a":1,"b":{"c":{},"d":[1,2,{}]},"e":{"f":{"g":1,"g":1}}}"#,
                "$.e.f",
            ),
        ] {
            assert!(
                parse_err(value).ends_with(&format!(" in the object at {at}")),
                "{value}: {}",
                parse_err(value)
            );
        }
        // 20 members (checked through a set): the same.
        let wide: String = (0..20).map(|i| format!(r#""k{}":{i},"#, i % 19)).collect();
        assert_eq!(
            parse_err(&format!(r#"{{"w":[{{{}"z":0}}]}}"#, wide)),
            r#"invalid JSON: duplicate key "k0" in the object at $.w[0]"#
        );
        // The root's keys are left to the row writer, which checks them as it matches.
        let mut scratch = JsonScratch::default();
        let doc = scratch.parse(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(doc.check_duplicate_keys(doc.root()), Err("a"));
        assert!(parse_err(r#"{"x":{"k":1,"k":2}}"#).contains("duplicate key \"k\""));
        assert!(parse_err(r#"{"x":{"k\u0041":1,"kA":2}}"#).contains("duplicate key \"kA\""));
        assert_eq!(parse_err("[1]"), "the JSON value must be an object, got an array");
        assert_eq!(parse_err(" 5 "), "the JSON value must be an object, got a number");
        assert_eq!(
            parse_err("\"s\""),
            "the JSON value must be an object, got a string"
        );
        assert_eq!(parse_err("null"), "the JSON value must be an object, got null");
        assert_eq!(
            parse_err("true"),
            "the JSON value must be an object, got a boolean"
        );
    }

    #[test]
    fn invalid_utf8_is_invalid_json() {
        let mut scratch = JsonScratch::default();
        let err = match scratch.parse(b"{\"a\":\"\xff\"}") {
            Ok(_) => panic!(),
            Err(e) => e,
        };
        assert!(err.starts_with("invalid JSON"), "{err}");
    }

    #[test]
    fn duplicate_keys_in_large_objects() {
        let mut members: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        let ok = format!("{{\"x\":{{{}}}}}", members.join(","));
        JsonScratch::default().parse(ok.as_bytes()).unwrap();
        members.push("\"k7\":0".into());
        let dup = format!("{{\"x\":{{{}}}}}", members.join(","));
        assert!(parse_err(&dup).contains("duplicate key \"k7\""));
    }

    #[test]
    fn member_limit() {
        let fits = format!("{{\"a\":[{}]}}", vec!["0"; MAX_CONTAINER_MEMBERS].join(","));
        JsonScratch::default().parse(fits.as_bytes()).unwrap();
        let over = format!("{{\"a\":[{}]}}", vec!["0"; MAX_CONTAINER_MEMBERS + 1].join(","));
        assert!(parse_err(&over).contains("more than 10000"));
        let keys: Vec<String> = (0..=MAX_CONTAINER_MEMBERS)
            .map(|i| format!("\"{i}\":0"))
            .collect();
        assert!(parse_err(&format!("{{{}}}", keys.join(","))).contains("more than 10000"));
    }

    #[test]
    fn depth_limit() {
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(64), "]".repeat(64));
        JsonScratch::default().parse(ok.as_bytes()).unwrap();
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(65), "]".repeat(65));
        assert!(parse_err(&deep).contains("deeper than 64"));
        // Brackets inside strings do not count.
        let quoted = format!("{{\"a\":\"{}\"}}", "[".repeat(100));
        JsonScratch::default().parse(quoted.as_bytes()).unwrap();
    }

    #[test]
    fn string_stops_are_found_in_every_lane() {
        for len in 0..40 {
            for stop in [b'"', b'\\', b'\n', 0x1f] {
                let mut b = vec![b'a'; len];
                b.push(stop);
                b.extend_from_slice(b"\"\"\"");
                assert_eq!(string_stop(&b, 0), len, "{len} {stop}");
            }
            // DEL and bytes above 0x7f are ordinary.
            let b = vec![0x7f; len];
            assert_eq!(string_stop(&b, 0), len);
            let b = "é".repeat(len);
            assert_eq!(string_stop(b.as_bytes(), 0), b.len());
        }
    }

    #[test]
    fn string_stops_say_whether_the_bytes_before_them_are_ascii() {
        for len in 0..40 {
            let mut b = vec![b'a'; len];
            b.push(b'"');
            // A non-ASCII byte after the stop, in the same word or the next, does not count.
            b.extend_from_slice("é".repeat(9).as_bytes());
            assert_eq!(string_stop_ascii(&b, 0), (len, true), "{len}");
            for high in 0..len {
                let mut c = b.clone();
                c[high] = 0x80;
                assert_eq!(string_stop_ascii(&c, 0), (len, false), "{len} {high}");
            }
            // No stop: the end of the input.
            assert_eq!(string_stop_ascii(&vec![b'a'; len], 0), (len, true));
            assert_eq!(string_stop_ascii(&vec![0xff; len], 0), (len, len == 0));
        }
    }
}
