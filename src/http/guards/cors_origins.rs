//! The web origins an operator lets read the owner routes from a browser (`AIRQ_CORS_ORIGINS`):
//! parsed once at start, compared byte for byte with a request's `Origin`.
//!
//! A file of its own, apart from the policy ([`crate::http::cors`]): the list is configuration
//! and state every handler can reach, while the policy reads the route table, which reaches the
//! handlers; kept together they would close a circle.

use std::fmt;

use hyper::header::HeaderValue;

/// One web origin, `scheme://host[:port]`, as a browser sends it in `Origin` (scheme and host in
/// lower case, no path, no default-port normalisation: `https://a.example:443` is not
/// `https://a.example`, as for browsers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin(String);

impl Origin {
    /// Parses `https://app.example` or `http://localhost:5173`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("`{text}` is not a web origin such as https://app.example:8443 ({why})")
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad("the scheme is http or https"));
        }
        if rest.contains(['/', '?', '#', '@']) {
            return Err(bad("no path, query, fragment or user"));
        }
        let (host, port) = if rest.starts_with('[') {
            match rest.find(']') {
                Some(end) => match &rest[end + 1..] {
                    "" => (&rest[..=end], None),
                    after => (
                        &rest[..=end],
                        Some(after.strip_prefix(':').unwrap_or(after)),
                    ),
                },
                None => (rest, None),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        let host_ok = if let Some(inner) = host.strip_prefix('[') {
            inner
                .strip_suffix(']')
                .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
        } else {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        };
        if !host_ok {
            return Err(bad("the host is a name or an address"));
        }
        if let Some(port) = port {
            if port.is_empty()
                || !port.bytes().all(|b| b.is_ascii_digit())
                || port.parse::<u16>().map_or(true, |port| port == 0)
            {
                return Err(bad("the port is 1 to 65535"));
            }
        }
        Ok(Self(format!("{scheme}://{}", rest.to_ascii_lowercase())))
    }

    /// The origin as `Origin` spells it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The origins allowed on owner routes (`AIRQ_CORS_ORIGINS`); empty means none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsOrigins(Vec<Origin>);

impl CorsOrigins {
    /// Parses a comma-separated list of origins; empty means none.
    pub fn parse(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(Origin::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether no origin is allowed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The listed origin that `value` (a request's `Origin`) names exactly.
    pub fn allows(&self, value: &HeaderValue) -> bool {
        self.0
            .iter()
            .any(|origin| origin.as_str().as_bytes() == value.as_bytes())
    }
}

impl fmt::Display for CorsOrigins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, origin) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str(origin.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_exactly() {
        for good in [
            "https://app.example",
            "http://localhost:5173",
            "HTTPS://App.Example:8443",
            "http://[::1]:3000",
            "http://127.0.0.1",
        ] {
            assert!(Origin::parse(good).is_ok(), "{good}");
        }
        assert_eq!(
            Origin::parse("HTTPS://App.Example:8443").map(|o| o.0),
            Ok("https://app.example:8443".to_owned())
        );
        for bad in [
            "app.example",
            "ftp://app.example",
            "https://app.example/",
            "https://app.example/path",
            "https://",
            "https://app.example:",
            "https://app.example:0",
            "https://app.example:99999",
            "https://user@app.example",
            "https://app example",
            "*",
            "null",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
        let list =
            CorsOrigins::parse(" https://a.example , http://localhost:5173,").expect("test value");
        assert_eq!(list.to_string(), "https://a.example,http://localhost:5173");
        assert!(CorsOrigins::parse("").expect("test value").is_empty());
        assert!(CorsOrigins::parse("https://a.example,nope").is_err());
    }
}
