//! The JOSE header's `crit` parameter (RFC 7515 §4.1.11): a token that names extensions the
//! recipient must understand, and which the recipient does not, must be refused.
//!
//! Why here: `jsonwebtoken` reads the header into a fixed struct and drops every member it does
//! not know, `crit` included, so a token whose issuer made its validity depend on an extension
//! would pass as if that extension were not there. airq understands no extension, so any `crit`
//! refuses the token, before its signature is even checked.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;

/// The part of a JOSE header this check reads: whether `crit` is present at all (a `null` or an
/// empty list is as invalid as any other value, §4.1.11: "MUST NOT" be empty).
#[derive(Deserialize)]
struct Header {
    #[serde(default, deserialize_with = "present")]
    crit: bool,
}

fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

/// Whether the compact JWS `token`'s header names critical extensions. A header that cannot be
/// read answers `false`: the verification that follows refuses such a token with its own reason.
pub(super) fn names_critical_extensions(token: &str) -> bool {
    let Some((header, _)) = token.split_once('.') else {
        return false;
    };
    URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Header>(&bytes).ok())
        .is_some_and(|header| header.crit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(header: &str) -> String {
        format!("{}.e30.sig", URL_SAFE_NO_PAD.encode(header))
    }

    #[test]
    fn a_header_with_crit_names_critical_extensions_whatever_its_value() {
        for crit in [r#"["exp"]"#, "[]", "null", r#""b64""#] {
            let header = format!(r#"{{"alg":"HS256","crit":{crit}}}"#);
            assert!(names_critical_extensions(&token(&header)), "{header}");
        }
    }

    #[test]
    fn a_header_without_crit_or_unreadable_names_none() {
        assert!(!names_critical_extensions(&token(
            r#"{"alg":"HS256","typ":"JWT"}"#
        )));
        assert!(!names_critical_extensions("garbage"));
        assert!(!names_critical_extensions("!!!.e30.sig"));
    }
}
