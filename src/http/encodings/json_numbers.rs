//! JSON numbers beyond what simd-json represents, rewritten so that valid JSON parses.
//!
//! JSON puts no bound on numbers; simd-json holds them as `i64`, `u64` or finite `f64` and refuses
//! the rest. [`saturate`] rewrites each such number token of a text (outside strings) as the
//! nearest `f64`, `±f64::MAX` past its range: `1e400` becomes `1.7976931348623157e308`,
//! `-10000000000000000000` becomes `-1e19`. Every other float is rewritten as the shortest text of
//! the same `f64`, which reads back identically. A number's magnitude is all a field check looks
//! at, and every numeric field's bound is far below `f64::MAX`, so a saturated number in a known
//! field still fails that field's bound, and one in an unknown field is ignored.
//!
//! Only tokens that follow JSON's number grammar are rewritten, and only into tokens that follow
//! it, so text that is not JSON stays not JSON.

/// `text` with its out-of-range numbers saturated, or `None` when nothing needed rewriting.
pub fn saturate(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut changed = false;
    let mut rest = text;
    while let Some(&byte) = rest.first() {
        let taken = if byte == b'"' {
            string_len(rest)
        } else if byte == b'-' || byte.is_ascii_digit() {
            let len = rest
                .iter()
                .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .count();
            let (token, _) = rest.split_at(len);
            if let Some(rewritten) = rewrite(token).filter(|new| new.as_bytes() != token) {
                out.extend_from_slice(rewritten.as_bytes());
                changed = true;
                rest = rest.get(len..).unwrap_or_default();
                continue;
            }
            len
        } else {
            1
        };
        let (copied, tail) = rest.split_at(taken.min(rest.len()));
        out.extend_from_slice(copied);
        rest = tail;
    }
    changed.then_some(out)
}

/// The length of the string starting at `text[0]` (a quote), closing quote included; the rest of
/// the text when it is never closed.
fn string_len(text: &[u8]) -> usize {
    let mut escaped = false;
    for (at, &byte) in text.iter().enumerate().skip(1) {
        match byte {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return at + 1,
            _ => {}
        }
    }
    text.len()
}

/// The replacement of a number token: `None` when it is not a JSON number or is an integer that
/// fits 64 bits.
fn rewrite(token: &[u8]) -> Option<String> {
    if !is_number(token) {
        return None;
    }
    let text = std::str::from_utf8(token).ok()?;
    if !text.contains(['.', 'e', 'E']) {
        let fits = if text.starts_with('-') {
            text.parse::<i64>().is_ok()
        } else {
            text.parse::<u64>().is_ok()
        };
        if fits {
            return None;
        }
    }
    // Rust's parse is exact for any length and gives ±infinity past the range.
    let value = text.parse::<f64>().ok()?.clamp(f64::MIN, f64::MAX);
    Some(format!("{value:e}"))
}

/// Whether `token` is a whole JSON number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_number(token: &[u8]) -> bool {
    let unsigned = token.strip_prefix(b"-").unwrap_or(token);
    let mut rest = match unsigned {
        [b'0', tail @ ..] => tail,
        [b'1'..=b'9', tail @ ..] => skip_digits(tail),
        _ => return false,
    };
    if let [b'.', fraction @ ..] = rest {
        rest = skip_digits(fraction);
        if rest.len() == fraction.len() {
            return false;
        }
    }
    if let [b'e' | b'E', exponent @ ..] = rest {
        let digits = match exponent {
            [b'+' | b'-', digits @ ..] => digits,
            digits => digits,
        };
        rest = skip_digits(digits);
        if rest.len() == digits.len() {
            return false;
        }
    }
    rest.is_empty()
}

fn skip_digits(text: &[u8]) -> &[u8] {
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    text.get(digits..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saturated(text: &str) -> Option<String> {
        saturate(text.as_bytes()).map(|bytes| String::from_utf8(bytes).expect("UTF-8"))
    }

    #[test]
    fn numbers_past_f64_become_its_largest_magnitude() {
        assert_eq!(
            saturated(r#"{"a": 1e400, "b": [-2.5E+999]}"#).as_deref(),
            Some(r#"{"a": 1.7976931348623157e308, "b": [-1.7976931348623157e308]}"#)
        );
    }

    #[test]
    fn integers_past_64_bits_become_floats() {
        assert_eq!(
            saturated("[18446744073709551616, -9223372036854775809]").as_deref(),
            Some("[1.8446744073709552e19, -9.223372036854776e18]")
        );
    }

    #[test]
    fn integers_within_64_bits_and_text_without_numbers_are_left_alone() {
        for text in [
            "[18446744073709551615, -9223372036854775808, 0, -0]",
            r#"{"a": "1e400", "b\"1e400": true}"#,
            "",
        ] {
            assert_eq!(saturated(text), None, "{text}");
        }
    }

    #[test]
    fn numbers_inside_strings_are_never_touched() {
        assert_eq!(
            saturated(r#"["\"", 1e400, "1e400 \\", "x"]"#).as_deref(),
            Some(r#"["\"", 1.7976931348623157e308, "1e400 \\", "x"]"#)
        );
    }

    #[test]
    fn tokens_outside_the_number_grammar_stay_as_they_are() {
        for token in [
            "01", "1.", ".5", "1e", "1e+", "-", "+1", "1.2.3", "--1", "1e400e1",
        ] {
            assert!(!is_number(token.as_bytes()), "{token}");
            assert_eq!(saturated(&format!("[{token}]")), None, "{token}");
        }
        for token in ["0", "-0", "1.5", "1e400", "-12.5E-7", "0.0e+0"] {
            assert!(is_number(token.as_bytes()), "{token}");
        }
    }

    #[test]
    fn an_unclosed_string_runs_to_the_end() {
        assert_eq!(saturated(r#"["1e400"#), None);
    }
}
