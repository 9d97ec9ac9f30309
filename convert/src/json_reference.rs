//! The previous JSON parser, kept for tests only: simd-json's tape plus the exact source text
//! of every number (see `scan`), after the document-wide checks of behaviour.md (root object,
//! ≤ 10,000 members per container, no duplicate keys). `JsonScratch::reference()` parses with
//! it and translates its tape into the converter's nodes, so the differential tests can run
//! the whole conversion over both parsers and compare.

use std::collections::HashSet;

use simd_json::{Buffers, Node, StaticNode, Tape};

use crate::error::quote_truncated;
use crate::json::{Node as Converted, MAX_CONTAINER_MEMBERS};
use crate::scan::{self, Span, MAX_JSON_DEPTH};

/// Objects up to this size look for duplicate keys pairwise; larger ones hash.
const PAIRWISE_DUPLICATE_CHECK: usize = 16;

/// Reusable buffers for parsing record values; one per converter, never shared.
pub(crate) struct ReferenceScratch {
    /// simd-json's padded input for the first attempt: the value as it is.
    padded: Vec<u8>,
    /// The input of the second attempt, numbers blanked by `scan::prepare`.
    blanked: Vec<u8>,
    /// Number spans of the blanking pass (only its check matters here).
    numbers: Vec<Span>,
    /// Byte offset in the input where each tape node's value starts.
    node_starts: Vec<u32>,
    buffers: Buffers,
    /// The tape's allocation, kept between documents.
    tape: Tape<'static>,
}

impl Default for ReferenceScratch {
    fn default() -> Self {
        Self {
            padded: Vec::new(),
            blanked: Vec::new(),
            numbers: Vec::new(),
            node_starts: Vec::new(),
            // The root container plus MAX_JSON_DEPTH nested ones.
            buffers: Buffers::with_max_depth(1024, MAX_JSON_DEPTH + 1),
            tape: Tape(Vec::new()),
        }
    }
}

/// A parsed, validated JSON object. Node indices address `tape`; the root is node 0.
pub(crate) struct Doc<'s> {
    tape: Tape<'s>,
    /// The input, valid UTF-8 (simd-json checked it).
    text: &'s str,
    node_starts: &'s [u32],
    tape_slot: &'s mut Tape<'static>,
}

impl Drop for Doc<'_> {
    fn drop(&mut self) {
        // Hand the tape's allocation back for the next document.
        let tape = std::mem::replace(&mut self.tape, Tape(Vec::new()));
        *self.tape_slot = tape.reset();
    }
}

impl ReferenceScratch {
    /// Parses `input` as a strict JSON object. The error is the reason text, starting with
    /// "invalid JSON" or naming the non-object root.
    ///
    /// simd-json is as strict as behaviour.md asks (number grammar, escapes, surrogates,
    /// control characters, trailing content, depth), so the first attempt parses the value
    /// as it is and finds number texts through simd-json's structural indexes. simd-json also
    /// refuses numbers it cannot hold in 64 bits (`1e309`, long integers), which are valid
    /// JSON here; so when the first attempt fails, `scan::prepare` checks the value itself,
    /// blanks every number and simd-json parses again.
    pub(crate) fn parse<'s>(&'s mut self, input: &'s [u8]) -> Result<Doc<'s>, String> {
        if u32::try_from(input.len()).is_err() {
            return Err("invalid JSON: value larger than 4 GiB".into());
        }
        self.padded.clear();
        self.padded.extend_from_slice(input);
        self.padded.resize(input.len() + scan::PADDING, b' ');
        let mut tape = std::mem::replace(&mut self.tape, Tape(Vec::new())).reset();
        let first = simd_json::fill_tape_padded(&mut self.padded, input.len(), &mut self.buffers, &mut tape);
        if first.is_ok() {
            value_starts(input, self.buffers.structural_indexes(), &mut self.node_starts);
            return finish(tape, input, &self.node_starts, &mut self.tape);
        }
        let mut tape = tape.reset();
        if let Err(e) = scan::prepare(input, &mut self.blanked, &mut self.numbers) {
            self.tape = tape.reset();
            return Err(format!("invalid JSON: {e}"));
        }
        let second =
            simd_json::fill_tape_padded(&mut self.blanked, input.len(), &mut self.buffers, &mut tape);
        if let Err(e) = second {
            self.tape = tape.reset();
            return Err(format!("invalid JSON: {e}"));
        }
        // Blanking keeps every token in place, so the offsets are those of the input.
        value_starts(input, self.buffers.structural_indexes(), &mut self.node_starts);
        finish(tape, input, &self.node_starts, &mut self.tape)
    }

    /// Parses `input` and writes the tape as the converter's nodes (every string decoded
    /// into `decoded`); returns the input as text.
    pub(crate) fn parse_into<'s>(
        &mut self,
        input: &'s [u8],
        nodes: &mut Vec<Converted>,
        decoded: &mut String,
    ) -> Result<&'s str, String> {
        nodes.clear();
        decoded.clear();
        let doc = self.parse(input)?;
        let at32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        for (i, node) in doc.tape.0.iter().enumerate() {
            nodes.push(match node {
                Node::String(s) => {
                    let start = at32(decoded.len());
                    decoded.push_str(s);
                    Converted::Decoded {
                        start,
                        end: at32(decoded.len()),
                    }
                }
                Node::Object { len, count } => Converted::Object {
                    len: at32(*len),
                    count: at32(*count),
                },
                Node::Array { len, count } => Converted::Array {
                    len: at32(*len),
                    count: at32(*count),
                },
                Node::Static(StaticNode::Null) => Converted::Null,
                Node::Static(StaticNode::Bool(true)) => Converted::True,
                Node::Static(StaticNode::Bool(false)) => Converted::False,
                Node::Static(_) => {
                    let text = doc.number_text(i);
                    let start = doc.node_starts.get(i).map_or(0, |&s| s);
                    Converted::Number {
                        start,
                        end: start + at32(text.len()),
                    }
                }
            });
        }
        let text = std::str::from_utf8(input).map_err(|e| format!("invalid JSON: {e}"))?;
        Ok(text)
    }
}

/// The offset of each value's first byte, in document order, which is tape order: of
/// simd-json's structural indexes, the value starts are those at `{ [ " t f n - 0-9`, and
/// each of them is one tape node (`: , ] }` make none).
fn value_starts(input: &[u8], structurals: &[u32], starts: &mut Vec<u32>) {
    const fn value_start_table() -> [bool; 256] {
        let mut table = [false; 256];
        let starts = b"{[\"tfn-0123456789";
        let mut i = 0;
        while i < starts.len() {
            table[starts[i] as usize] = true;
            i += 1;
        }
        table
    }
    const VALUE_START: [bool; 256] = value_start_table();
    starts.clear();
    starts.extend(
        structurals
            .iter()
            .copied()
            .filter(|&at| input.get(at as usize).is_some_and(|&b| VALUE_START[b as usize])),
    );
}

/// The document checks on a parsed tape; on failure the tape's allocation goes back.
fn finish<'s>(
    tape: Tape<'s>,
    input: &'s [u8],
    node_starts: &'s [u32],
    tape_slot: &'s mut Tape<'static>,
) -> Result<Doc<'s>, String> {
    let refusal = match tape.0.first() {
        Some(Node::Object { .. }) => check_document(&tape, node_starts).err(),
        Some(other) => Some(format!(
            "the JSON value must be an object, got {}",
            describe_kind(other)
        )),
        None => Some("invalid JSON: empty document".into()),
    };
    let text = match (refusal, std::str::from_utf8(input)) {
        (None, Ok(text)) => text,
        (Some(reason), _) => {
            *tape_slot = tape.reset();
            return Err(reason);
        }
        (None, Err(e)) => {
            *tape_slot = tape.reset();
            return Err(format!("invalid JSON: {e}"));
        }
    };
    Ok(Doc {
        tape,
        text,
        node_starts,
        tape_slot,
    })
}

fn describe_kind(node: &Node<'_>) -> &'static str {
    match node {
        Node::String(_) => "a string",
        Node::Array { .. } => "an array",
        Node::Object { .. } => "an object",
        Node::Static(StaticNode::Null) => "null",
        Node::Static(StaticNode::Bool(_)) => "a boolean",
        Node::Static(_) => "a number",
    }
}

/// Container sizes, and duplicate keys below the root.
fn check_document(tape: &Tape<'_>, node_starts: &[u32]) -> Result<(), String> {
    let nodes = &tape.0;
    // Every node has its start offset (see `value_starts`); a mismatch would misplace
    // number texts, so it is refused rather than trusted.
    if nodes.len() != node_starts.len() {
        return Err("invalid JSON: structure out of step with the parser".into());
    }
    for (i, node) in nodes.iter().enumerate() {
        match node {
            // The root's keys are checked by the row writer, which matches each of them to a
            // field anyway (`Doc::check_duplicate_keys`).
            Node::Object { len, .. } if i == 0 => check_members(*len)?,
            Node::Object { len, .. } => {
                check_members(*len)?;
                check_duplicate_keys(nodes, i, *len)?;
            }
            Node::Array { len, .. } => check_members(*len)?,
            _ => {}
        }
    }
    Ok(())
}

fn check_members(len: usize) -> Result<(), String> {
    if len > MAX_CONTAINER_MEMBERS {
        return Err(format!(
            "invalid JSON: a container has {len} members, more than {MAX_CONTAINER_MEMBERS}"
        ));
    }
    Ok(())
}

fn check_duplicate_keys(nodes: &[Node<'_>], object: usize, len: usize) -> Result<(), String> {
    if len < 2 {
        return Ok(());
    }
    if len > PAIRWISE_DUPLICATE_CHECK {
        let mut seen = HashSet::with_capacity(len);
        for key in (ObjectKeys {
            nodes,
            at: object + 1,
            left: len,
        }) {
            if !seen.insert(key) {
                return Err(duplicate_key(key));
            }
        }
        return Ok(());
    }
    // Compare cheap fingerprints first; only equal ones compare bytes.
    let mut prints = [0u64; PAIRWISE_DUPLICATE_CHECK];
    let mut key_nodes = [0usize; PAIRWISE_DUPLICATE_CHECK];
    let mut at = object + 1;
    for n in 0..len {
        let Some(Node::String(key)) = nodes.get(at) else {
            break;
        };
        let print = fingerprint(key);
        for m in 0..n {
            if prints[m] == print && matches!(nodes.get(key_nodes[m]), Some(Node::String(k)) if k == key) {
                return Err(duplicate_key(key));
            }
        }
        prints[n] = print;
        key_nodes[n] = at;
        at = skip(nodes, at + 1);
    }
    Ok(())
}

#[cold]
fn duplicate_key(key: &str) -> String {
    format!("invalid JSON: duplicate key {}", quote_truncated(key))
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

/// Index of the node after the value starting at `i`.
fn skip(nodes: &[Node<'_>], i: usize) -> usize {
    match nodes[i] {
        Node::Object { count, .. } | Node::Array { count, .. } => i + 1 + count,
        _ => i + 1,
    }
}

struct ObjectKeys<'t, 'i> {
    nodes: &'t [Node<'i>],
    at: usize,
    left: usize,
}

impl<'t, 'i> Iterator for ObjectKeys<'t, 'i> {
    type Item = &'i str;
    fn next(&mut self) -> Option<&'i str> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let Node::String(key) = self.nodes.get(self.at)? else {
            return None;
        };
        self.at = skip(self.nodes, self.at + 1);
        Some(key)
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
        let len = match self.tape.0[0] {
            Node::Object { len, .. } => len,
            _ => 0,
        };
        Members { node: 0, len }
    }

    /// The value starting at node `i`.
    pub(crate) fn value(&self, i: usize) -> JsonValue<'_> {
        match self.tape.0[i] {
            Node::String(s) => JsonValue::String(s),
            Node::Object { len, .. } => JsonValue::Object(Members { node: i, len }),
            Node::Array { len, .. } => JsonValue::Array(Members { node: i, len }),
            Node::Static(StaticNode::Null) => JsonValue::Null,
            Node::Static(StaticNode::Bool(b)) => JsonValue::Bool(b),
            Node::Static(_) => JsonValue::Number(self.number_text(i)),
        }
    }

    fn number_text(&self, i: usize) -> &str {
        let start = self.node_starts.get(i).map_or(0, |&s| s as usize);
        let token = self.text.as_bytes().get(start..).unwrap_or_default();
        let len = token
            .iter()
            .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .count();
        // Number tokens are ASCII, so both ends are character boundaries.
        self.text.get(start..start + len).unwrap_or("0")
    }

    /// `(key, value node)` of each member of an object, in input order.
    pub(crate) fn members(&self, object: Members) -> impl Iterator<Item = (&str, usize)> + '_ {
        let nodes = &self.tape.0;
        let mut at = object.node + 1;
        (0..object.len).map_while(move |_| {
            let Node::String(key) = nodes.get(at)? else {
                return None;
            };
            let value = at + 1;
            at = skip(nodes, value);
            Some((*key, value))
        })
    }

    /// Refuses an object with a repeated key (the root is not checked when parsing).
    pub(crate) fn check_duplicate_keys(&self, object: Members) -> Result<(), String> {
        check_duplicate_keys(&self.tape.0, object.node, object.len)
    }

    /// Node index of each element of an array, in order.
    pub(crate) fn elements(&self, array: Members) -> impl Iterator<Item = usize> + '_ {
        let nodes = &self.tape.0;
        let mut at = array.node + 1;
        (0..array.len).map(move |_| {
            let element = at;
            at = skip(nodes, at);
            element
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(input: &str) -> String {
        let mut scratch = ReferenceScratch::default();
        let result = scratch.parse(input.as_bytes()).err();
        result.unwrap_or_else(|| panic!("{input} parsed"))
    }

    #[test]
    fn walks_members_and_number_texts() {
        let mut scratch = ReferenceScratch::default();
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
    fn number_texts_without_the_blanking_pass() {
        // Every number fits simd-json, so spans come from its structural indexes.
        let mut scratch = ReferenceScratch::default();
        let input = br#"{ "a" : 1.50 , "b" : [ -0 ,2E3,{"c":0.1e-2}], "d":"-1" , "e" : 7}"#;
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
    fn scratch_is_reusable() {
        let mut scratch = ReferenceScratch::default();
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
        assert!(parse_err("").starts_with("invalid JSON"));
        assert!(parse_err("   ").starts_with("invalid JSON"));
        assert!(parse_err(r#"{"a":1} x"#).starts_with("invalid JSON"));
        assert!(parse_err(r#"{"a":1}{}"#).starts_with("invalid JSON"));
        assert!(parse_err(r#"{"a":1,}"#).starts_with("invalid JSON"));
        assert!(parse_err(r#"{"a":tru}"#).starts_with("invalid JSON"));
        assert!(parse_err(r#"{'a':1}"#).starts_with("invalid JSON"));
        assert!(parse_err("{\"a\":\"\u{1}\"}").starts_with("invalid JSON"));
        assert!(parse_err(r#"{"a":"\ud800"}"#).contains("surrogate"));
        assert_eq!(
            parse_err(r#"{"x":{"a":1,"b":2,"a":3}}"#),
            r#"invalid JSON: duplicate key "a""#
        );
        // The root's keys are left to the row writer, which checks them as it matches.
        let mut scratch = ReferenceScratch::default();
        let doc = scratch.parse(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(
            doc.check_duplicate_keys(doc.root()),
            Err(r#"invalid JSON: duplicate key "a""#.to_string())
        );
        assert!(parse_err(r#"{"x":{"k":1,"k":2}}"#).contains("duplicate key \"k\""));
        assert_eq!(parse_err("[1]"), "the JSON value must be an object, got an array");
        assert_eq!(parse_err("5"), "the JSON value must be an object, got a number");
        assert_eq!(
            parse_err("\"s\""),
            "the JSON value must be an object, got a string"
        );
        assert_eq!(parse_err("null"), "the JSON value must be an object, got null");
    }

    #[test]
    fn invalid_utf8_is_invalid_json() {
        let mut scratch = ReferenceScratch::default();
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
        ReferenceScratch::default().parse(ok.as_bytes()).unwrap();
        members.push("\"k7\":0".into());
        let dup = format!("{{\"x\":{{{}}}}}", members.join(","));
        assert!(parse_err(&dup).contains("duplicate key \"k7\""));
    }

    #[test]
    fn member_limit() {
        let fits = format!("{{\"a\":[{}]}}", vec!["0"; MAX_CONTAINER_MEMBERS].join(","));
        ReferenceScratch::default().parse(fits.as_bytes()).unwrap();
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
        ReferenceScratch::default().parse(ok.as_bytes()).unwrap();
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(65), "]".repeat(65));
        assert!(parse_err(&deep).contains("deeper than 64"));
    }
}
