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

use crate::http::encodings::json_numbers;

/// Deepest nesting of arrays and objects in a body (the API's own bodies need 4 levels). The
/// same limit as serde_json's default recursion limit.
pub const MAX_DEPTH: usize = 128;

/// Why a body's text is not a value the server accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Not JSON; what is wrong and where (line and column, as an editor counts them), never the
    /// parser's internals.
    #[error("the body is not valid JSON: {0}")]
    Syntax(String),
    /// Valid JSON, nested deeper than [`MAX_DEPTH`].
    #[error("the body nests arrays and objects more than {MAX_DEPTH} levels deep")]
    TooDeep,
}

/// The document `text` holds, a whole JSON document.
pub fn parse(text: &[u8]) -> Result<JsonDocument, JsonError> {
    // simd-json decodes an escaped high surrogate without its low half as U+0000 (a character
    // the client never sent) instead of refusing it as it refuses a lone low half.
    if let Some(at) = unpaired_surrogate(text) {
        return Err(JsonError::Syntax(format!(
            "an unpaired UTF-16 surrogate escape {}",
            position(text, at)
        )));
    }
    // simd-json unescapes strings in place, so it gets a copy: the text may be needed again.
    let mut scratch = text.to_vec();
    let document = match simd_json::to_tape(&mut scratch) {
        Ok(tape) => JsonDocument::from_tape(&tape.0),
        Err(_) => {
            let saturated = json_numbers::saturate(text).ok_or_else(|| why_not_json(text))?;
            let mut scratch = saturated;
            let tape = simd_json::to_tape(&mut scratch).map_err(|_| why_not_json(text))?;
            JsonDocument::from_tape(&tape.0)
        }
    };
    // A tape from a successful parse is whole; a broken one would be simd-json's bug, and is
    // refused rather than trusted.
    let document =
        document.ok_or_else(|| JsonError::Syntax("the parser could not read it".into()))?;
    if document.depth() > MAX_DEPTH {
        return Err(JsonError::TooDeep);
    }
    Ok(document)
}

/// What is wrong with `text`, which simd-json refused, and where. simd-json's own error offset
/// is not where the fault is (it names byte 0 for text that is not UTF-8 or ends too soon), so
/// the text is read again here, on the error path only: its UTF-8 by the standard library, its
/// syntax by serde_json (whose recursion limit bounds the stack).
fn why_not_json(text: &[u8]) -> JsonError {
    if let Err(error) = std::str::from_utf8(text) {
        let at = error.valid_up_to();
        return JsonError::Syntax(format!("a byte that is not UTF-8 {}", position(text, at)));
    }
    match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
        Err(error) => JsonError::Syntax(error.to_string()),
        // Valid JSON that simd-json refuses even with its numbers saturated.
        Ok(_) => JsonError::Syntax("the parser could not read it".into()),
    }
}

/// "at line L column C" of byte offset `at` (both from 1; columns count bytes, as serde_json's).
fn position(text: &[u8], at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let line = before.iter().filter(|byte| **byte == b'\n').count() + 1;
    let column = at
        - before
            .iter()
            .rposition(|byte| *byte == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    format!("at line {line} column {column}")
}

/// The offset of the first `\uXXXX` escape of a UTF-16 surrogate that is not half of a pair
/// (a high half followed by an escaped low half), if any.
fn unpaired_surrogate(text: &[u8]) -> Option<usize> {
    let hex = |at: usize| -> Option<u16> {
        let digits = text.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let escape = |at: usize| -> Option<u16> {
        (text.get(at) == Some(&b'\\') && text.get(at + 1) == Some(&b'u'))
            .then(|| hex(at + 2))
            .flatten()
    };
    let mut at = 0;
    while let Some(found) = text[at..].iter().position(|byte| *byte == b'\\') {
        let slash = at + found;
        at = match escape(slash) {
            Some(0xD800..=0xDBFF) => match escape(slash + 6) {
                Some(0xDC00..=0xDFFF) => slash + 12,
                _ => return Some(slash),
            },
            Some(0xDC00..=0xDFFF) => return Some(slash),
            Some(_) => slash + 6,
            // Any other escape is two bytes (`\\` included, so its second half is not read as
            // the start of one); what is not an escape, the parser refuses.
            None => slash + 2,
        };
        if at >= text.len() {
            return None;
        }
    }
    None
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
        for (text, at) in [
            (r#"{"a": 1e}"#, "line 1 column 9"),
            (r#"{"a": 01}"#, "line 1 column 8"),
            ("[1, 2", "line 1 column 5"),
            ("{\n  \"a\": 1e400", "line 2 column 12"),
            ("tru", "line 1 column 3"),
            ("{\"a\": 1} x", "line 1 column 10"),
        ] {
            match parsed(text) {
                Err(JsonError::Syntax(detail)) => {
                    assert!(detail.ends_with(at), "{text}: {detail}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_where_it_stops_being_utf8() {
        let error = parse(b"{\"name\":\"caf\xe9 au lait\"}");
        assert_eq!(
            error,
            Err(JsonError::Syntax(
                "a byte that is not UTF-8 at line 1 column 13".into()
            ))
        );
    }

    #[test]
    fn an_escaped_surrogate_without_its_other_half_is_refused_where_it_stands() {
        for (text, column) in [
            (r#"{"a": "x\ud800y"}"#, 9),
            (r#"{"a": "x\ud800"}"#, 9),
            (r#"{"a": "\uDBFF\u0041"}"#, 8),
            (r#"{"a": "x\udc00"}"#, 9),
            (r#"{"a": "\ud83d\ude00\ud800"}"#, 20),
        ] {
            assert_eq!(
                parsed(text),
                Err(JsonError::Syntax(format!(
                    "an unpaired UTF-16 surrogate escape at line 1 column {column}"
                ))),
                "{text}"
            );
        }
    }

    #[test]
    fn paired_surrogates_and_escaped_backslashes_parse() {
        for text in [
            r#"{"a": "\ud83d\ude00"}"#,
            r#"{"a": "\\ud800"}"#,
            r#"{"a": "\\\\", "b": "\u00e9\n"}"#,
        ] {
            assert!(parsed(text).is_ok(), "{text}");
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
