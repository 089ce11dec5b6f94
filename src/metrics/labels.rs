//! The label sets of the metric families, and the fixed lists their values come from.
//!
//! Every label value is a `&'static str` taken from a list compiled into the binary (the route
//! table's templates, the methods below, status classes, cache and limit names), so no request can
//! create a series: the number of series is bounded whatever clients send.

use hyper::Method;
use prometheus_client::encoding::EncodeLabelSet;

/// The `route` value of a request that matched no route (the access log writes the same).
pub(super) const NO_ROUTE: &str = "-";

/// One series of the request-duration histogram.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct RequestLabels {
    /// The route template that matched (`/api/v1/devices/{id}`), or [`NO_ROUTE`].
    pub(super) route: &'static str,
    /// The request method, one of [`method`]'s values.
    pub(super) method: &'static str,
    /// The status class, one of [`CLASSES`].
    pub(super) class: &'static str,
}

/// The status classes, `1xx` to `5xx`, in order.
pub(super) const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The index into [`CLASSES`] of a status code (codes outside 100–599 count with the nearest).
pub(super) fn class_index(status: u16) -> usize {
    usize::from(status / 100).clamp(1, 5) - 1
}

/// The label of a method: the ones HTTP defines by name, `other` for any extension method (a
/// client chooses that token freely).
pub(super) fn method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// One series of `airq_http_responses_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ClassLabels {
    /// The status class, one of [`CLASSES`].
    pub(super) class: &'static str,
}

/// One series of `airq_rate_limited_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct LimitLabels {
    /// The limit's name (`device`, `public`).
    pub(super) limit: &'static str,
}

/// A cache whose lookups are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheName {
    /// Device credentials by `device_id` (the upload path).
    DeviceKeys,
    /// The public map's entries, read from the stores at most once per time to live.
    Map,
    /// The public map's rendered variants (format × bounding box).
    MapVariants,
}

impl CacheName {
    /// Every cache, in the order `/metrics` lists them.
    pub(super) const ALL: [Self; 3] = [Self::DeviceKeys, Self::Map, Self::MapVariants];

    /// Its `cache` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeviceKeys => "device_keys",
            Self::Map => "map",
            Self::MapVariants => "map_variants",
        }
    }
}

/// One series of `airq_cache_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct CacheLabels {
    /// [`CacheName::as_str`].
    pub(super) cache: &'static str,
    /// `hit` (served from the cache) or `miss` (this request loaded the value).
    pub(super) result: &'static str,
}

/// The labels of `airq_build_info`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct BuildLabels {
    /// The package version.
    pub(super) version: &'static str,
    /// The commit built from, `unknown` when the build could not tell.
    pub(super) commit: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_fall_into_their_class() {
        let class = |status| CLASSES[class_index(status)];
        assert_eq!(class(101), "1xx");
        assert_eq!(class(204), "2xx");
        assert_eq!(class(304), "3xx");
        assert_eq!(class(429), "4xx");
        assert_eq!(class(503), "5xx");
        assert_eq!(class(999), "5xx");
    }

    #[test]
    fn an_extension_method_is_other() {
        let custom = Method::from_bytes(b"PURGE").expect("a method token");
        assert_eq!(method(&custom), "other");
        assert_eq!(method(&Method::PATCH), "PATCH");
    }
}
