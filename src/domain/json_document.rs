//! A parsed JSON body, held flat: one vector of nodes and one string arena.
//!
//! Why not simd-json's owned value: it allocates once per object, per key and per string, and a
//! batch of 100 readings holds about 2,000 of them; measured, glibc's malloc and free were a
//! quarter of the HTTP workers' time under batch uploads. Here a document is two allocations
//! however large it is, its drop is one free each, and nothing recurses (neither building nor
//! dropping nor reading), whatever the nesting.
//!
//! The nodes are in document order, as simd-json's tape lays them out: a container's node says
//! how many members it has and how many nodes follow inside it, so a reader skips a member in
//! one step. Of repeated members in an object, the last one counts (as in JavaScript and most
//! parsers).

use std::ops::Range;

use simd_json::{Node as TapeNode, StaticNode};

/// A whole JSON document.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonDocument {
    nodes: Vec<Node>,
    strings: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Static(StaticNode),
    /// A range of [`JsonDocument::strings`].
    String(Range<usize>),
    /// `len` elements, `count` nodes inside.
    Array {
        len: usize,
        count: usize,
    },
    /// `len` members (a key node and a value each), `count` nodes inside.
    Object {
        len: usize,
        count: usize,
    },
}

impl Node {
    /// This node and every node inside it.
    fn span(&self) -> usize {
        match self {
            Self::Array { count, .. } | Self::Object { count, .. } => count + 1,
            Self::Static(_) | Self::String(_) => 1,
        }
    }
}

impl JsonDocument {
    /// The document a simd-json tape describes (a tape from a successful parse). `None` if the
    /// tape is not a whole, well-formed document (simd-json's bug, refused rather than trusted).
    pub fn from_tape(tape: &[TapeNode<'_>]) -> Option<Self> {
        let mut strings = String::with_capacity(
            tape.iter()
                .map(|node| match node {
                    TapeNode::String(text) => text.len(),
                    _ => 0,
                })
                .sum(),
        );
        let nodes = tape
            .iter()
            .map(|node| match *node {
                TapeNode::Static(value) => Node::Static(value),
                TapeNode::String(text) => {
                    let start = strings.len();
                    strings.push_str(text);
                    Node::String(start..strings.len())
                }
                TapeNode::Array { len, count } => Node::Array { len, count },
                TapeNode::Object { len, count } => Node::Object { len, count },
            })
            .collect::<Vec<_>>();
        let document = Self { nodes, strings };
        document.is_whole().then_some(document)
    }

    /// Whether the root spans exactly the nodes and every container's members fit inside it
    /// (what the readers below rely on to never index out of bounds).
    fn is_whole(&self) -> bool {
        self.nodes.first().map(Node::span) == Some(self.nodes.len())
            && self.nodes.iter().enumerate().all(|(at, node)| match node {
                Node::Array { len, count } => self.members_fit(at, *len, *count, false),
                Node::Object { len, count } => self.members_fit(at, *len, *count, true),
                Node::Static(_) | Node::String(_) => true,
            })
    }

    /// Whether `len` members starting after `at` take exactly `count` nodes (an object's member
    /// is a string key and a value).
    fn members_fit(&self, at: usize, len: usize, count: usize, keyed: bool) -> bool {
        let end = at + 1 + count;
        let mut next = at + 1;
        for _ in 0..len {
            if keyed {
                match self.nodes.get(next) {
                    Some(Node::String(_)) if next < end => next += 1,
                    _ => return false,
                }
            }
            match self.nodes.get(next) {
                Some(node) if next + node.span() <= end => next += node.span(),
                _ => return false,
            }
        }
        next == end
    }

    /// The deepest nesting of arrays and objects (0 for a scalar), without recursion.
    pub fn depth(&self) -> usize {
        let mut open_until: Vec<usize> = Vec::new();
        let mut deepest = 0;
        for (at, node) in self.nodes.iter().enumerate() {
            while open_until.last().is_some_and(|&end| at >= end) {
                open_until.pop();
            }
            if let Node::Array { count, .. } | Node::Object { count, .. } = node {
                open_until.push(at + 1 + count);
                deepest = deepest.max(open_until.len());
            }
        }
        deepest
    }

    /// The document's value.
    pub fn root(&self) -> Json<'_> {
        self.value(0)
    }

    fn value(&self, at: usize) -> Json<'_> {
        match &self.nodes[at] {
            Node::Static(value) => Json::Static(*value),
            Node::String(range) => Json::String(&self.strings[range.clone()]),
            Node::Array { len, .. } => Json::Array(JsonArray {
                document: self,
                at,
                len: *len,
            }),
            Node::Object { len, .. } => Json::Object(JsonMap {
                document: self,
                at,
                len: *len,
            }),
        }
    }

    /// The index of the node after the value at `at` and everything inside it.
    fn skip(&self, at: usize) -> usize {
        at + self.nodes[at].span()
    }
}

/// A value inside a [`JsonDocument`].
#[derive(Debug, Clone, Copy)]
pub enum Json<'d> {
    /// `null`, a boolean or a number.
    Static(StaticNode),
    /// A string (unescaped).
    String(&'d str),
    /// An array.
    Array(JsonArray<'d>),
    /// An object.
    Object(JsonMap<'d>),
}

/// An array inside a [`JsonDocument`].
#[derive(Debug, Clone, Copy)]
pub struct JsonArray<'d> {
    document: &'d JsonDocument,
    at: usize,
    len: usize,
}

impl<'d> JsonArray<'d> {
    /// How many elements it has.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its elements, in order.
    pub fn iter(&self) -> impl Iterator<Item = Json<'d>> + 'd {
        let document = self.document;
        let mut next = self.at + 1;
        (0..self.len).map(move |_| {
            let value = document.value(next);
            next = document.skip(next);
            value
        })
    }
}

/// An object inside a [`JsonDocument`].
#[derive(Debug, Clone, Copy)]
pub struct JsonMap<'d> {
    document: &'d JsonDocument,
    at: usize,
    len: usize,
}

impl<'d> JsonMap<'d> {
    /// The value of `key` (of repeated members, the last), if the object has one.
    pub fn get(&self, key: &str) -> Option<Json<'d>> {
        // Compares keys on the nodes, building only the value found: every field of every
        // reading is looked up here, and building each member's value on the way was the
        // larger part of a batch's field reading (measured).
        let document = self.document;
        let mut next = self.at + 1;
        let mut found = None;
        for _ in 0..self.len {
            if let Node::String(range) = &document.nodes[next] {
                if document.strings.as_bytes().get(range.clone()) == Some(key.as_bytes()) {
                    found = Some(next + 1);
                }
            }
            next = document.skip(next + 1);
        }
        found.map(|at| document.value(at))
    }

    /// Its members, in order.
    pub fn members(&self) -> impl Iterator<Item = (&'d str, Json<'d>)> + 'd {
        let document = self.document;
        let mut next = self.at + 1;
        (0..self.len).filter_map(move |_| {
            let key = match document.value(next) {
                Json::String(key) => Some(key),
                _ => None,
            };
            let value = document.value(next + 1);
            next = document.skip(next + 1);
            key.map(|key| (key, value))
        })
    }
}

/// The document as serde_json sees it, to compare with what serde_json parses (tests only).
#[cfg(test)]
pub(crate) fn to_serde(value: Json<'_>) -> serde_json::Value {
    match value {
        Json::Static(StaticNode::Null) => serde_json::Value::Null,
        Json::Static(StaticNode::Bool(b)) => b.into(),
        Json::Static(StaticNode::I64(i)) => i.into(),
        Json::Static(StaticNode::U64(u)) => u.into(),
        Json::Static(StaticNode::F64(f)) => f.into(),
        Json::String(text) => text.into(),
        Json::Array(items) => items.iter().map(to_serde).collect(),
        Json::Object(map) => {
            let mut object = serde_json::Map::new();
            for (key, value) in map.members() {
                object.insert(key.to_owned(), to_serde(value));
            }
            object.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(text: &str) -> JsonDocument {
        let mut bytes = text.as_bytes().to_vec();
        let tape = simd_json::to_tape(&mut bytes).expect("valid JSON");
        JsonDocument::from_tape(&tape.0).expect("a whole document")
    }

    #[test]
    fn a_document_reads_back_as_serde_json_parses_it() {
        let text = r#"{"a": [1, -2, 3.5, "x\"y", null, true, {"b": {}}], "c": "é", "d": []}"#;
        let expected: serde_json::Value = serde_json::from_str(text).expect("valid");
        assert_eq!(to_serde(document(text).root()), expected);
    }

    #[test]
    fn a_member_is_found_past_nested_values_and_the_last_repeat_counts() {
        let parsed = document(r#"{"a": {"x": [1, [2, 3]]}, "b": 1, "b": "two"}"#);
        let Json::Object(map) = parsed.root() else {
            panic!("an object");
        };
        assert!(matches!(map.get("b"), Some(Json::String("two"))));
        assert!(matches!(map.get("a"), Some(Json::Object(_))));
        assert!(map.get("x").is_none());
    }

    #[test]
    fn depth_counts_the_deepest_nesting() {
        assert_eq!(document("1").depth(), 0);
        assert_eq!(document("[]").depth(), 1);
        assert_eq!(document(r#"[{"a": [[]]}, []]"#).depth(), 4);
        assert_eq!(document(r#"{"a": [1], "b": {"c": {}}}"#).depth(), 3);
    }

    #[test]
    fn a_tape_that_is_not_a_whole_document_is_refused() {
        let short = [
            TapeNode::Array { len: 2, count: 2 },
            TapeNode::Static(StaticNode::Null),
        ];
        assert!(JsonDocument::from_tape(&short).is_none());
        let key_missing = [
            TapeNode::Object { len: 1, count: 1 },
            TapeNode::Static(StaticNode::Null),
        ];
        assert!(JsonDocument::from_tape(&key_missing).is_none());
        let trailing = [TapeNode::Static(StaticNode::Null), TapeNode::String("x")];
        assert!(JsonDocument::from_tape(&trailing).is_none());
    }
}
