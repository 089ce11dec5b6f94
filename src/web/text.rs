//! How numbers and device names are written into pages, the same way everywhere.
//!
//! Numbers: the README's one rounding rule (half away from zero, as for `aqi`) applied to the
//! value as the API writes it (its shortest decimal form), so a page shows what a person rounding
//! the JSON by hand gets, and never a negative zero ("-0.0 °C" for -0.04 reads as a frost that
//! is not there). The map's script (`map.js`, `decimal`) implements the very same rule, so a
//! reading shows one value on the device page and in the map's popup.
//!
//! Names: a device name is user text that may hold right-to-left letters or bidi controls. Shown
//! as it is, an unterminated override (U+202E) reorders the page's own text after it. Names are
//! therefore shown isolated (`<bdi>` in markup, FSI … PDI in plain text such as `<title>`), and
//! without the embedding, override and isolate controls, since a stray PDI in the name would
//! close the isolation early. The name's letters keep their own direction.

use crate::domain::is_bidi_control;

/// `value` with `places` decimals, rounded half away from zero on its shortest decimal form,
/// without a negative zero. A value that is not finite (no stored value is) shows as "–".
pub fn decimal(value: f64, places: usize) -> String {
    if !value.is_finite() {
        return "–".to_owned();
    }
    // `Display` of an f64 is its shortest round-trip form, never in exponent notation.
    let shortest = value.abs().to_string();
    let (whole, fraction) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let mut digits: Vec<u8> = whole
        .bytes()
        .chain(fraction.bytes().chain(std::iter::repeat(b'0')).take(places))
        .map(|digit| digit - b'0')
        .collect();
    // Half away from zero on the magnitude: the first dropped digit decides.
    if fraction
        .as_bytes()
        .get(places)
        .is_some_and(|digit| *digit >= b'5')
    {
        let mut carry = true;
        for digit in digits.iter_mut().rev() {
            if *digit == 9 {
                *digit = 0;
            } else {
                *digit += 1;
                carry = false;
                break;
            }
        }
        if carry {
            digits.insert(0, 1);
        }
    }
    let whole_len = digits.len() - places;
    let mut out = String::with_capacity(digits.len() + 2);
    if value < 0.0 && digits.iter().any(|digit| *digit != 0) {
        out.push('-');
    }
    for (index, digit) in digits.iter().enumerate() {
        if index == whole_len {
            out.push('.');
        }
        out.push(char::from(b'0' + digit));
    }
    out
}

/// A device name for display: without scoped bidi controls (see the module's documentation).
/// Put it in a `<bdi>` in markup, or use [`isolated`] in plain text.
pub fn display_name(name: &str) -> String {
    name.chars().filter(|c| !is_bidi_control(*c)).collect()
}

/// A device name for plain text (a `<title>`, an `aria-label`), where no element can isolate
/// it: [`display_name`] between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE.
pub fn isolated(name: &str) -> String {
    format!("\u{2068}{}\u{2069}", display_name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_round_away_from_zero() {
        assert_eq!(decimal(12.25, 1), "12.3");
        assert_eq!(decimal(20.25, 1), "20.3");
        assert_eq!(decimal(50.5, 0), "51");
        assert_eq!(decimal(-2.25, 1), "-2.3");
        assert_eq!(decimal(-50.5, 0), "-51");
        assert_eq!(
            decimal(0.15, 1),
            "0.2",
            "rounded as written, not as stored in binary"
        );
        assert_eq!(decimal(1.15, 1), "1.2");
    }

    #[test]
    fn below_a_tie_rounds_down_and_carries_ripple() {
        assert_eq!(decimal(12.24999, 1), "12.2");
        assert_eq!(decimal(9.96, 1), "10.0");
        assert_eq!(decimal(99.95, 1), "100.0");
        assert_eq!(decimal(0.5, 0), "1");
        assert_eq!(decimal(0.49, 0), "0");
    }

    #[test]
    fn zero_is_never_negative() {
        assert_eq!(decimal(-0.04, 1), "0.0");
        assert_eq!(decimal(-0.0, 1), "0.0");
        assert_eq!(decimal(-0.4, 0), "0");
        assert_eq!(decimal(-0.05, 1), "-0.1");
    }

    #[test]
    fn short_values_are_padded_and_integers_get_their_decimals() {
        assert_eq!(decimal(12.0, 1), "12.0");
        assert_eq!(decimal(7.0, 0), "7");
        assert_eq!(decimal(52.52, 5), "52.52000");
        assert_eq!(decimal(0.0000001, 1), "0.0");
        assert_eq!(decimal(100_000.0, 1), "100000.0");
    }

    #[test]
    fn what_is_not_a_number_is_a_dash() {
        assert_eq!(decimal(f64::NAN, 1), "–");
        assert_eq!(decimal(f64::INFINITY, 0), "–");
    }

    #[test]
    fn names_lose_their_scoped_bidi_controls_but_keep_their_letters() {
        assert_eq!(display_name("\u{202E}evil device"), "evil device");
        assert_eq!(display_name("a\u{2066}b\u{2069}\u{202A}c\u{202C}"), "abc");
        assert_eq!(display_name("مستشعر\u{200F} 1"), "مستشعر\u{200F} 1");
        assert_eq!(isolated("\u{202E}x"), "\u{2068}x\u{2069}");
    }
}
