//! The `_kafka_rescue` document of one record: compact JSON that mirrors the value's
//! structure and holds what could not be stored in the table's fields.
//!
//! Layout (behaviour.md "Rescue"): at every object level the members rescued whole (unknown
//! members, unconvertible values, flat-layout system-name conflicts) come first in input
//! order, then the places with rescued content further down, keyed by field name (ROW) or
//! map key (MAP), also in input order. An array with rescued elements keeps its length, with
//! `null` at the places that were stored. Numbers keep their exact source text; strings are
//! re-escaped like serde_json does (`\"`, `\\`, `\b \f \n \r \t`, other controls as
//! `\u00xx`, everything else literal).

use crate::json::{Doc, JsonValue};

/// Index of a rescue node in its `Rescue`.
pub(crate) type RescueId = usize;

/// What an array slot or object place holds.
#[derive(Debug, Clone, Copy)]
enum Content {
    /// The input value at this tape node, verbatim.
    Whole(usize),
    /// A rescue node with only the parts that failed.
    Nested(RescueId),
}

#[derive(Debug)]
enum Node<'d> {
    Object {
        whole: Vec<(&'d str, usize)>,
        nested: Vec<(&'d str, RescueId)>,
    },
    Array {
        len: usize,
        /// In ascending index order.
        slots: Vec<(usize, Content)>,
    },
}

/// The rescue tree of one record, built bottom-up while converting.
#[derive(Debug, Default)]
pub(crate) struct Rescue<'d> {
    nodes: Vec<Node<'d>>,
}

impl<'d> Rescue<'d> {
    pub(crate) fn new_object(&mut self) -> RescueId {
        self.nodes.push(Node::Object {
            whole: Vec::new(),
            nested: Vec::new(),
        });
        self.nodes.len() - 1
    }

    pub(crate) fn new_array(&mut self, len: usize) -> RescueId {
        self.nodes.push(Node::Array {
            len,
            slots: Vec::new(),
        });
        self.nodes.len() - 1
    }

    /// Rescues the member `key` of object node `object` whole.
    pub(crate) fn add_whole(&mut self, object: RescueId, key: &'d str, value_node: usize) {
        if let Some(Node::Object { whole, .. }) = self.nodes.get_mut(object) {
            whole.push((key, value_node));
        }
    }

    /// Records that member `key` of `object` has rescued parts in `child`.
    pub(crate) fn add_nested(&mut self, object: RescueId, key: &'d str, child: RescueId) {
        if let Some(Node::Object { nested, .. }) = self.nodes.get_mut(object) {
            nested.push((key, child));
        }
    }

    /// Rescues element `index` of array node `array` whole.
    pub(crate) fn set_whole(&mut self, array: RescueId, index: usize, value_node: usize) {
        if let Some(Node::Array { slots, .. }) = self.nodes.get_mut(array) {
            slots.push((index, Content::Whole(value_node)));
        }
    }

    /// Records that element `index` of `array` has rescued parts in `child`.
    pub(crate) fn set_nested(&mut self, array: RescueId, index: usize, child: RescueId) {
        if let Some(Node::Array { slots, .. }) = self.nodes.get_mut(array) {
            slots.push((index, Content::Nested(child)));
        }
    }

    /// Appends the compact JSON of node `id` to `out`.
    pub(crate) fn write(&self, doc: &Doc<'_>, id: RescueId, out: &mut String) {
        match &self.nodes[id] {
            Node::Object { whole, nested } => {
                out.push('{');
                let members = whole
                    .iter()
                    .map(|&(k, v)| (k, Content::Whole(v)))
                    .chain(nested.iter().map(|&(k, c)| (k, Content::Nested(c))));
                for (n, (key, content)) in members.enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    push_string(out, key);
                    out.push(':');
                    self.write_content(doc, content, out);
                }
                out.push('}');
            }
            Node::Array { len, slots } => {
                out.push('[');
                let mut slots = slots.iter().peekable();
                for index in 0..*len {
                    if index > 0 {
                        out.push(',');
                    }
                    match slots.next_if(|(at, _)| *at == index) {
                        Some(&(_, content)) => self.write_content(doc, content, out),
                        None => out.push_str("null"),
                    }
                }
                out.push(']');
            }
        }
    }

    fn write_content(&self, doc: &Doc<'_>, content: Content, out: &mut String) {
        match content {
            Content::Whole(node) => write_value(doc, node, out),
            Content::Nested(id) => self.write(doc, id, out),
        }
    }
}

/// Appends the compact JSON of the input value at tape node `node`.
pub(crate) fn write_value(doc: &Doc<'_>, node: usize, out: &mut String) {
    match doc.value(node) {
        JsonValue::Null => out.push_str("null"),
        JsonValue::Bool(true) => out.push_str("true"),
        JsonValue::Bool(false) => out.push_str("false"),
        JsonValue::Number(text) => out.push_str(text),
        JsonValue::String(s) => push_string(out, s),
        JsonValue::Array(members) => {
            out.push('[');
            for (n, element) in doc.elements(members).enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_value(doc, element, out);
            }
            out.push(']');
        }
        JsonValue::Object(members) => {
            out.push('{');
            for (n, (key, value)) in doc.members(members).enumerate() {
                if n > 0 {
                    out.push(',');
                }
                push_string(out, key);
                out.push(':');
                write_value(doc, value, out);
            }
            out.push('}');
        }
    }
}

/// Appends `s` as a JSON string literal, escaped by serde_json (the one JSON string escaper
/// of the workspace: `\"`, `\\`, `\b \f \n \r \t`, other controls as `\u00xx`).
pub(crate) fn push_string(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).expect("a str always serializes"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::JsonScratch;

    #[test]
    fn strings_escape_like_serde_json() {
        let mut out = String::new();
        push_string(&mut out, "a\"b\\c\n\t\u{1}\u{7f}é/");
        assert_eq!(out, r#""a\"b\\c\n\t\u0001é/""#.replace("é", "\u{7f}é"));
    }

    #[test]
    fn whole_values_are_compact_with_exact_numbers() {
        let mut scratch = JsonScratch::default();
        let input = br#" { "a" : [ 1.50 , -0 , 1e309 , true , null ] , "b" : { "c" : "\u0041\n" } } "#;
        let doc = scratch.parse(input).unwrap();
        let mut out = String::new();
        write_value(&doc, 0, &mut out);
        assert_eq!(out, r#"{"a":[1.50,-0,1e309,true,null],"b":{"c":"A\n"}}"#);
    }

    #[test]
    fn tree_orders_whole_members_before_nested_ones() {
        let mut scratch = JsonScratch::default();
        let input = br#"{"x":1,"r":{"a":"bad","z":2},"arr":[1,"q",3],"y":[true]}"#;
        let doc = scratch.parse(input).unwrap();
        let members: Vec<_> = doc.members(doc.root()).collect();
        let mut rescue = Rescue::default();
        let root = rescue.new_object();
        rescue.add_whole(root, members[0].0, members[0].1);
        // r: "a" failed, "z" unknown.
        let JsonValue::Object(r) = doc.value(members[1].1) else {
            panic!()
        };
        let r_members: Vec<_> = doc.members(r).collect();
        let r_node = rescue.new_object();
        rescue.add_whole(r_node, r_members[0].0, r_members[0].1);
        rescue.add_whole(r_node, r_members[1].0, r_members[1].1);
        rescue.add_nested(root, members[1].0, r_node);
        // arr: element 1 failed.
        let JsonValue::Array(arr) = doc.value(members[2].1) else {
            panic!()
        };
        let second = doc.elements(arr).nth(1).unwrap();
        let arr_node = rescue.new_array(arr.len);
        rescue.set_whole(arr_node, 1, second);
        rescue.add_nested(root, members[2].0, arr_node);
        rescue.add_whole(root, members[3].0, members[3].1);
        let mut out = String::new();
        rescue.write(&doc, root, &mut out);
        assert_eq!(
            out,
            r#"{"x":1,"y":[true],"r":{"a":"bad","z":2},"arr":[null,"q",null]}"#
        );
    }
}
