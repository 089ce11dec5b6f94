//! A request body's JSON text turned into a value, safely for any text a client can send.
//!
//! simd-json does the parsing (its tape is built without recursion), but two of its behaviours
//! must not reach the handlers:
//! - Its value builder, and the value's drop, recurse once per level of nesting: a 20 KB body of
//!   `[[[[…` overflows a worker thread's stack and aborts the process. Here the tape becomes a
//!   flat [`JsonDocument`] (nothing recursive), and a body nested deeper than [`MAX_DEPTH`]
//!   levels is a syntax-level refusal (400) all the same: no body of the API nests past 4.
//! - It refuses valid JSON whose numbers lie beyond `f64` (`1e400`) or beyond the 64-bit integers
//!   (`-10000000000000000000`). JSON sets no such bound, and such a number in a field the server
//!   does not know must be ignored like the field. Such text is read again with those numbers
//!   saturated ([`super::json_numbers`]), so it parses, and a known field holding one fails its
//!   bound check (422 `maximum`/`minimum`) like any other value out of range.
//!
//! Of repeated members in an object, the last one counts (as in JavaScript and most parsers).

use crate::domain::JsonDocument;

use super::json_numbers;

/// Deepest nesting of arrays and objects in a body (the API's own bodies need 4 levels). The
/// same limit as serde_json's default recursion limit.
pub const MAX_DEPTH: usize = 128;

/// Why a body's text is not a value the server accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Not JSON; the byte offset where the parser gave up (never its internals).
    #[error("the body is not valid JSON: the parser stopped near byte {at}")]
    Syntax {
        /// Byte offset into the body (as decompressed).
        at: usize,
    },
    /// Valid JSON, nested deeper than [`MAX_DEPTH`].
    #[error("the body nests arrays and objects more than {MAX_DEPTH} levels deep")]
    TooDeep,
}

/// The document `text` holds, a whole JSON document.
pub fn parse(text: &[u8]) -> Result<JsonDocument, JsonError> {
    // simd-json unescapes strings in place, so it gets a copy: the text may be needed again.
    let mut scratch = text.to_vec();
    let document = match simd_json::to_tape(&mut scratch) {
        Ok(tape) => JsonDocument::from_tape(&tape.0),
        Err(error) => {
            let at = error.index();
            let saturated = json_numbers::saturate(text).ok_or(JsonError::Syntax { at })?;
            let mut scratch = saturated;
            let tape = simd_json::to_tape(&mut scratch).map_err(|_| JsonError::Syntax { at })?;
            JsonDocument::from_tape(&tape.0)
        }
    };
    // A tape from a successful parse is whole; a broken one would be simd-json's bug, and is
    // refused rather than trusted.
    let document = document.ok_or(JsonError::Syntax { at: 0 })?;
    if document.depth() > MAX_DEPTH {
        return Err(JsonError::TooDeep);
    }
    Ok(document)
}

#[cfg(test)]
mod tests {
    use simd_json::StaticNode;

    use super::*;
    use crate::domain::Json;

    fn parsed(text: &str) -> Result<JsonDocument, JsonError> {
        parse(text.as_bytes())
    }

    fn number(document: &JsonDocument, key: &str) -> Option<StaticNode> {
        match document.root() {
            Json::Object(map) => match map.get(key) {
                Some(Json::Static(node)) => Some(node),
                _ => None,
            },
            _ => None,
        }
    }

    #[test]
    fn a_plain_document_parses_as_simd_json_parses_it() {
        let text = r#"{"a": [1, -2, 3.5, "x\"y", null, true, {"b": {}}], "c": "é"}"#;
        let mut scratch = text.as_bytes().to_vec();
        let tape = simd_json::to_tape(&mut scratch).map(|tape| tape.0);
        let expected = tape.ok().as_deref().and_then(JsonDocument::from_tape);
        assert_eq!(parsed(text).ok(), expected);
    }

    #[test]
    fn nesting_up_to_the_limit_parses_and_one_level_more_is_too_deep() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(parsed(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(parsed(&nested(MAX_DEPTH + 1)), Err(JsonError::TooDeep));
        let objects = format!(
            "{}1{}",
            r#"{"a":"#.repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(parsed(&objects), Err(JsonError::TooDeep));
    }

    #[test]
    fn a_million_levels_of_nesting_is_refused_without_overflowing_the_stack() {
        let depth = 1 << 20;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(parsed(&text), Err(JsonError::TooDeep));
    }

    #[test]
    fn numbers_beyond_f64_and_64_bit_integers_saturate() {
        let value = parsed(
            r#"{"big": 1e400, "small": -1e400, "long": 123456789012345678901234567890,
                "negative": -10000000000000000000, "tiny": 1e-400, "fine": 42}"#,
        )
        .expect("valid JSON");
        assert_eq!(number(&value, "big"), Some(StaticNode::F64(f64::MAX)));
        assert_eq!(number(&value, "small"), Some(StaticNode::F64(f64::MIN)));
        assert_eq!(
            number(&value, "long"),
            Some(StaticNode::F64(123_456_789_012_345_678_901_234_567_890.0))
        );
        assert_eq!(number(&value, "negative"), Some(StaticNode::F64(-1e19)));
        assert_eq!(number(&value, "tiny"), Some(StaticNode::F64(0.0)));
        assert_eq!(number(&value, "fine"), Some(StaticNode::U64(42)));
    }

    #[test]
    fn invalid_json_names_where_the_parser_stopped() {
        for text in [
            r#"{"a": 1e}"#,
            r#"{"a": 01}"#,
            "[1, 2",
            r#"{"a": 1e400"#,
            "tru",
        ] {
            assert!(
                matches!(parsed(text), Err(JsonError::Syntax { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn the_last_of_repeated_members_counts() {
        let value = parsed(r#"{"a": 1, "a": 2}"#).expect("valid JSON");
        assert_eq!(number(&value, "a"), Some(StaticNode::U64(2)));
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        /// Any JSON document (nesting kept shallow, numbers of every kind).
        fn document() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<u64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
                any::<String>().prop_map(serde_json::Value::from),
            ];
            leaf.prop_recursive(6, 64, 8, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..8)
                        .prop_map(serde_json::Value::from),
                    proptest::collection::btree_map(any::<String>(), inner, 0..8)
                        .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            #[test]
            fn any_bytes_are_parsed_or_refused_without_panicking(
                bytes in proptest::collection::vec(any::<u8>(), 0..256)
            ) {
                let _ = parse(&bytes);
            }

            #[test]
            fn every_json_document_reads_back_as_it_was_written(document in document()) {
                let parsed = parse(document.to_string().as_bytes());
                prop_assert!(parsed.is_ok(), "{}", document);
                if let Ok(parsed) = parsed {
                    let read_back = crate::domain::json_document::to_serde(parsed.root());
                    prop_assert_eq!(read_back, document);
                }
            }

            #[test]
            fn every_json_number_parses_however_large(
                token in "-?(0|[1-9][0-9]{0,400})(\\.[0-9]{1,40})?([eE][+-]?[0-9]{1,7})?"
            ) {
                let text = format!(r#"{{"n": [{token}]}}"#);
                prop_assert!(parse(text.as_bytes()).is_ok(), "{}", text);
            }

            #[test]
            fn any_nesting_is_parsed_or_too_deep(opens in proptest::collection::vec(any::<bool>(), 0..400)) {
                let text: String = opens.iter().map(|&array| if array { '[' } else { '{' }).collect();
                let close: String = opens
                    .iter()
                    .rev()
                    .map(|&array| if array { "]" } else { "}" })
                    .collect();
                let inner = if opens.last() == Some(&false) { "" } else { "1" };
                let text = format!("{text}{inner}{close}");
                let parsed = parse(text.as_bytes());
                let objects_hold_members = opens.iter().all(|&array| array);
                if opens.len() <= MAX_DEPTH && objects_hold_members {
                    prop_assert!(parsed.is_ok(), "{}", text);
                } else if opens.len() > MAX_DEPTH && objects_hold_members {
                    prop_assert_eq!(parsed, Err(JsonError::TooDeep));
                }
            }
        }
    }
}
