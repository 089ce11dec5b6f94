//! The map clusters' zoom level: an integer from 0 (the whole world in one 256-pixel tile) to 22,
//! parsed at the edge so that the clustering never sees a level it has no grid for.
//!
//! Written as a plain integer (`0|[1-9][0-9]*`, a leading `-` read only to say "below 0"), so
//! that `1.0`, `+3`, `03` or `3 ` are refused like the map's `bbox` refuses non-plain decimals:
//! one spelling per value, one cache variant per value.

use super::field_errors::{Code, FieldErrors, In};

/// The query parameter's name.
pub const PARAMETER: &str = "zoom";

/// A valid zoom level, 0 to [`Zoom::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Zoom(u8);

impl Zoom {
    /// The deepest zoom a client may ask for (Leaflet's and most tile servers' last level).
    pub const MAX: u8 = 22;

    /// Parses the parameter's value; `None` (absent) and empty are `required`.
    pub fn parse(text: Option<&str>) -> Result<Self, FieldErrors> {
        let refuse = |code: Code, detail: String| {
            Err(FieldErrors::single(In::Query, PARAMETER, code, detail))
        };
        let text = match text {
            None | Some("") => {
                return refuse(
                    Code::Required,
                    format!("`zoom` is required: an integer from 0 to {}", Self::MAX),
                )
            }
            Some(text) => text,
        };
        let (negative, digits) = match text.strip_prefix('-') {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        let plain = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !plain || (negative && digits == "0") {
            return refuse(
                Code::Format,
                format!(
                    "`zoom` must be an integer from 0 to {}, not {text:?}",
                    Self::MAX
                ),
            );
        }
        if negative {
            return refuse(
                Code::Minimum,
                format!("`zoom` must be at least 0, not {text}"),
            );
        }
        match digits.parse::<u8>() {
            Ok(level) if level <= Self::MAX => Ok(Self(level)),
            _ => refuse(
                Code::Maximum,
                format!("`zoom` must be at most {}, not {text}", Self::MAX),
            ),
        }
    }

    /// The level.
    pub fn get(self) -> u8 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: Option<&str>) -> Option<Code> {
        Zoom::parse(text)
            .err()
            .and_then(|errors| errors.as_slice().first().map(|error| error.code))
    }

    #[test]
    fn every_level_from_0_to_22_parses() {
        for level in 0..=22u8 {
            assert_eq!(
                Zoom::parse(Some(&level.to_string())).map(Zoom::get),
                Ok(level)
            );
        }
    }

    #[test]
    fn anything_else_is_refused_with_its_code() {
        assert_eq!(code(None), Some(Code::Required));
        assert_eq!(code(Some("")), Some(Code::Required));
        for text in [
            "a", "1.0", "1.5", "+3", "03", " 3", "3 ", "1e1", "-0", "-", "0x1", "NaN",
        ] {
            assert_eq!(code(Some(text)), Some(Code::Format), "{text:?}");
        }
        assert_eq!(code(Some("-1")), Some(Code::Minimum));
        assert_eq!(code(Some("-99999999999999999999")), Some(Code::Minimum));
        assert_eq!(code(Some("23")), Some(Code::Maximum));
        assert_eq!(code(Some("256")), Some(Code::Maximum));
        assert_eq!(code(Some("99999999999999999999")), Some(Code::Maximum));
    }

    #[test]
    fn the_error_names_the_parameter_in_the_query() -> Result<(), String> {
        let errors = Zoom::parse(Some("x")).err().ok_or("refused")?;
        let error = errors.as_slice().first().ok_or("one error")?;
        assert_eq!((error.name.as_str(), error.location), ("zoom", In::Query));
        Ok(())
    }
}
