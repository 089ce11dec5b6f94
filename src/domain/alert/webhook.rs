//! Webhook targets: an absolute `https` URL (or `http` where private targets are allowed) whose
//! host is not an address of this side of the network.
//!
//! Why: a webhook makes the server send requests where an owner says, so without this check an
//! owner could make it probe loopback services, the private network or a cloud metadata endpoint
//! (SSRF). A literal address is judged here, at the edge; a host name is judged by what it
//! resolves to, when the rule is written and again at every delivery (the delivering client
//! connects only to addresses it checked, so a name that changes its answers meanwhile, DNS
//! rebinding, gains nothing).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::domain::field_errors::Code;

/// The longest URL accepted.
pub const MAX_URL_LEN: usize = 2_048;

/// Whether webhook targets may be private (`AIRQ_ALERTS_ALLOW_PRIVATE_TARGETS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Loopback, private, link-local and metadata addresses, and `http://`, are allowed (tests,
    /// receivers on a trusted local network).
    pub allow_private: bool,
}

impl TargetPolicy {
    /// Whether the server may connect to `address` under this policy.
    pub fn permits(self, address: IpAddr) -> bool {
        self.allow_private || !is_internal(address)
    }
}

/// A webhook URL as accepted: scheme, host and the rest, already checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    text: String,
    host: Host,
}

/// The host of a webhook URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A literal address.
    Address(IpAddr),
    /// A name, lower case, to be resolved.
    Name(String),
}

impl WebhookUrl {
    /// Parses `text` under `policy`; the error is the code and detail of the problem.
    pub fn parse(text: &str, policy: TargetPolicy) -> Result<Self, (Code, String)> {
        if text.len() > MAX_URL_LEN {
            return Err((
                Code::MaxLength,
                format!("`webhook_url` may have at most {MAX_URL_LEN} bytes"),
            ));
        }
        let url = Self::read(text).ok_or_else(|| {
            (
                Code::Format,
                "`webhook_url` must be an absolute https URL such as https://example.com/hooks/airq"
                    .to_owned(),
            )
        })?;
        if url.text.starts_with("http://") && !policy.allow_private {
            return Err((
                Code::Format,
                "`webhook_url` must use https (http only with AIRQ_ALERTS_ALLOW_PRIVATE_TARGETS=true)"
                    .into(),
            ));
        }
        let refused = match &url.host {
            Host::Address(address) => !policy.permits(*address),
            Host::Name(name) => {
                !policy.allow_private && (name == "localhost" || name.ends_with(".localhost"))
            }
        };
        if refused {
            return Err((Code::Format, REFUSED.into()));
        }
        Ok(url)
    }

    /// A URL as stored (it was checked when written; delivery checks its addresses again).
    pub fn from_stored(text: String) -> Option<Self> {
        Self::read(&text)
    }

    /// Scheme, authority and the rest, without judging the host.
    fn read(text: &str) -> Option<Self> {
        let rest = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"))?;
        // No fragment: it is never sent, so a URL with one does not say where events go.
        if text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '#')
        {
            return None;
        }
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if authority.is_empty() || authority.contains('@') {
            return None;
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (inside, after) = bracketed.split_once(']')?;
                let v6: Ipv6Addr = inside.parse().ok()?;
                (Host::Address(IpAddr::V6(v6)), after.strip_prefix(':'))
            }
            None => {
                let (host, port) = match authority.split_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (authority, None),
                };
                let host = host.to_ascii_lowercase();
                let host = match host.parse::<Ipv4Addr>() {
                    Ok(v4) => Host::Address(IpAddr::V4(v4)),
                    Err(_) if is_host_name(&host) => Host::Name(host),
                    Err(_) => return None,
                };
                (host, port)
            }
        };
        if let Some(port) = port {
            port.parse::<u16>().ok().filter(|port| *port != 0)?;
        }
        Some(Self {
            text: text.to_owned(),
            host,
        })
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Its host.
    pub fn host(&self) -> &Host {
        &self.host
    }
}

impl fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The detail of a refused target.
pub const REFUSED: &str = "`webhook_url` must not point at a loopback, private, link-local, \
     shared (CGNAT), unique-local or metadata address (allowed only with \
     AIRQ_ALERTS_ALLOW_PRIVATE_TARGETS=true)";

/// Letters, digits, hyphens and dots, in labels of 1 to 63 characters, with at least one letter
/// somewhere (so `1.2.3` is not taken for a name).
fn is_host_name(host: &str) -> bool {
    host.len() <= 253
        && host.chars().any(|c| c.is_ascii_alphabetic())
        && host.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Whether `address` is one of this side of the network: unspecified, loopback, private,
/// link-local (the metadata endpoint 169.254.169.254 among them), shared (CGNAT), unique-local
/// (fd00:ec2::254 among them), multicast, broadcast or reserved; IPv4 inside IPv6 (mapped,
/// NAT64, 6to4) is judged as the IPv4 address it carries.
pub fn is_internal(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal_v4(v4);
            }
            let segments = v6.segments();
            let embedded = |high: u16, low: u16| {
                Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8)
            };
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_internal_v4(embedded(segments[6], segments[7]));
            }
            if segments[0] == 0x2002 {
                return is_internal_v4(embedded(segments[1], segments[2]));
            }
            v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                // IPv4-compatible (deprecated, ::a.b.c.d)
                || segments[..6] == [0; 6]
                // unique local fc00::/7
                || (segments[0] & 0xfe00) == 0xfc00
                // link-local fe80::/10
                || (segments[0] & 0xffc0) == 0xfe80
                // site-local fec0::/10 (deprecated, still routed internally somewhere)
                || (segments[0] & 0xffc0) == 0xfec0
        }
    }
}

fn is_internal_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_unspecified()
        || v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_broadcast()
        || v4.is_multicast()
        // "this network" 0.0.0.0/8
        || a == 0
        // shared address space (CGNAT) 100.64.0.0/10
        || (a == 100 && (b & 0xc0) == 64)
        // IETF protocol assignments 192.0.0.0/24
        || (a == 192 && b == 0 && v4.octets()[2] == 0)
        // benchmarking 198.18.0.0/15
        || (a == 198 && (b & 0xfe) == 18)
        // reserved 240.0.0.0/4
        || a >= 240
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: TargetPolicy = TargetPolicy {
        allow_private: false,
    };
    const LOOSE: TargetPolicy = TargetPolicy {
        allow_private: true,
    };

    #[test]
    fn internal_addresses_are_refused_and_public_ones_accepted() {
        for refused in [
            "https://127.0.0.1/x",
            "https://10.1.2.3/",
            "https://172.16.0.1/",
            "https://192.168.1.1:8443/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://[::1]/",
            "https://[fd00:ec2::254]/",
            "https://[fe80::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[64:ff9b::a9fe:a9fe]/",
            "https://localhost/",
            "https://api.localhost:9000/",
        ] {
            assert!(WebhookUrl::parse(refused, STRICT).is_err(), "{refused}");
            assert!(WebhookUrl::parse(refused, LOOSE).is_ok(), "{refused}");
        }
        for accepted in [
            "https://example.com/hooks/airq?x=1",
            "https://93.184.216.34/",
            "https://[2606:4700::1111]:8443/a",
        ] {
            assert!(WebhookUrl::parse(accepted, STRICT).is_ok(), "{accepted}");
        }
    }

    #[test]
    fn only_absolute_https_urls_without_credentials_are_urls() {
        for bad in [
            "ftp://example.com/",
            "example.com",
            "https://",
            "https://user:pw@example.com/",
            "https://exa mple.com/",
            "https://example.com:0/",
            "https://example.com:99999/",
            "https://-bad-.com/",
            "https://example.com/hook#part",
        ] {
            assert!(WebhookUrl::parse(bad, LOOSE).is_err(), "{bad}");
        }
        assert!(WebhookUrl::parse("http://example.com/", STRICT).is_err());
        assert!(WebhookUrl::parse("http://127.0.0.1:8080/", LOOSE).is_ok());
    }
}
