//! Who a request comes from: the client address that public rate limits and export slots count
//! against, apart from the limits themselves (the same address keys both, and a third use would
//! need it too).
//!
//! The TCP peer is the client unless it is one of the operator's trusted proxies
//! (`AIRQ_TRUSTED_PROXIES`); then `X-Forwarded-For` names the client, read from the right, where
//! the trusted proxies appended what they saw, and never further left than the first hop that is
//! not a trusted proxy (everything left of it may have been written by the client). With no
//! proxy trusted the header is ignored, so a client cannot choose its own address.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use hyper::header::HeaderMap;
use ipnet::IpNet;

/// The header a trusted proxy names the client in.
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The networks whose `X-Forwarded-For` is believed: a comma-separated list of CIDR networks
/// (IPv4 and IPv6; a bare address is a network of one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses `10.0.0.0/8, fd00::/8, 192.0.2.7`; empty means none.
    pub fn parse(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                IpNet::from_str(item)
                    .map(|net| net.trunc())
                    .or_else(|_| IpAddr::from_str(item).map(IpNet::from))
                    .map_err(|_| {
                        format!(
                            "`{item}` is not a CIDR network such as 10.0.0.0/8 or fd00::/8 (nor an address)"
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether `address` lies in one of the networks.
    pub fn contains(&self, address: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&address))
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for TrustedProxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, net) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

/// The client a public request counts for: the peer, or, when the peer is a trusted proxy, the
/// right-most address of `X-Forwarded-For` that is not a trusted proxy itself (each proxy appends
/// the address it got the request from, so everything left of the first untrusted hop may have
/// been written by the client). When every listed hop is trusted, the left-most one counts; an
/// entry that is not an address ends the walk at the last trusted hop.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    let mut client = peer.to_canonical();
    if !trusted.contains(client) {
        return client;
    }
    let hops: Vec<&str> = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    for hop in hops.iter().rev() {
        let Some(address) = parse_hop(hop) else { break };
        client = address;
        if !trusted.contains(address) {
            break;
        }
    }
    client
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(address) = IpAddr::from_str(hop) {
        return Some(address.to_canonical());
    }
    if let Ok(socket) = std::net::SocketAddr::from_str(hop) {
        return Some(socket.ip().to_canonical());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                X_FORWARDED_FOR,
                HeaderValue::from_str(value).expect("a header value"),
            );
        }
        headers
    }

    fn trusted(text: &str) -> TrustedProxies {
        TrustedProxies::parse(text).expect("valid networks")
    }

    #[test]
    fn trusted_proxies_parse_cidr_lists_of_both_families() {
        let proxies = trusted(" 10.0.0.0/8, fd00::/8 ,192.0.2.7,");
        assert!(proxies.contains(ip("10.1.2.3")));
        assert!(proxies.contains(ip("fd12::1")));
        assert!(proxies.contains(ip("192.0.2.7")));
        assert!(!proxies.contains(ip("192.0.2.8")));
        assert!(!proxies.contains(ip("11.0.0.1")));
        assert_eq!(proxies.to_string(), "10.0.0.0/8,fd00::/8,192.0.2.7/32");
        assert!(trusted("").is_empty());
        assert!(trusted(" , ").is_empty());
        for bad in [
            "10.0.0.0/33",
            "fd00::/129",
            "nonsense",
            "10.0.0/8",
            "10.0.0.0/8;",
        ] {
            let error = TrustedProxies::parse(bad).expect_err(bad);
            assert!(error.contains("CIDR"), "{error}");
        }
    }

    #[test]
    fn the_peer_counts_unless_it_is_a_trusted_proxy() {
        let headers = forwarded(&["203.0.113.9"]);
        assert_eq!(
            client_address(ip("198.51.100.1"), &headers, &TrustedProxies::default()),
            ip("198.51.100.1")
        );
        assert_eq!(
            client_address(ip("198.51.100.1"), &headers, &trusted("10.0.0.0/8")),
            ip("198.51.100.1")
        );
        assert_eq!(
            client_address(ip("10.0.0.2"), &headers, &trusted("10.0.0.0/8")),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn the_right_most_untrusted_hop_counts() {
        let proxies = trusted("10.0.0.0/8");
        // The client wrote the left-most entries itself; the proxies appended the rest.
        let headers = forwarded(&["1.1.1.1, 203.0.113.9", "10.0.0.7"]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &headers, &proxies),
            ip("203.0.113.9")
        );
        // Every hop trusted: the left-most one.
        let headers = forwarded(&["10.0.0.9, 10.0.0.7"]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &headers, &proxies),
            ip("10.0.0.9")
        );
        // No header: the proxy itself.
        assert_eq!(
            client_address(ip("10.0.0.2"), &HeaderMap::new(), &proxies),
            ip("10.0.0.2")
        );
        // Garbage stops the walk at the last trusted hop.
        let headers = forwarded(&["203.0.113.9, unknown, 10.0.0.7"]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &headers, &proxies),
            ip("10.0.0.7")
        );
        // Ports and IPv6 are understood; a mapped IPv4 peer is its IPv4 address.
        let headers = forwarded(&["[2001:db8::1]:4711"]);
        assert_eq!(
            client_address(ip("::ffff:10.0.0.2"), &headers, &proxies),
            ip("2001:db8::1")
        );
        let headers = forwarded(&["203.0.113.9:4711"]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &headers, &proxies),
            ip("203.0.113.9")
        );
    }
}
