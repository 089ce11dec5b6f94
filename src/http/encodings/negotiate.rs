//! Content negotiation: which of the representations a route offers the request's `Accept`
//! prefers (RFC 9110 §12.5.1). A route never answers 406: when `Accept` is missing or accepts
//! none of its representations, it answers its first (JSON).

use hyper::header::ACCEPT;
use hyper::HeaderMap;

/// The index in `offered` (media types, the server's preference first) of the representation
/// the request's `Accept` prefers: the highest `q`, then the most specific range that matched it
/// (`text/csv` beats `text/*` beats `*/*`), then the server's order. 0 when nothing matches.
pub fn preferred(headers: &HeaderMap, offered: &[&str]) -> usize {
    let ranges: Vec<(String, f32)> = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(media_range)
        .collect();
    let mut best: Option<(f32, u8, usize)> = None;
    for (index, media_type) in offered.iter().enumerate() {
        let Some((q, specificity)) = quality(&ranges, media_type) else {
            continue;
        };
        if q <= 0.0 {
            continue;
        }
        if best.is_none_or(|(best_q, best_specificity, _)| {
            q > best_q || (q == best_q && specificity > best_specificity)
        }) {
            best = Some((q, specificity, index));
        }
    }
    best.map_or(0, |(_, _, index)| index)
}

/// A media range of `Accept`, lower case without parameters, with its weight.
fn media_range(text: &str) -> Option<(String, f32)> {
    let mut parts = text.split(';').map(str::trim);
    let range = parts.next().filter(|range| range.contains('/'))?;
    let q = parts
        .filter_map(|parameter| parameter.split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
        .map_or(Some(1.0), |(_, value)| value.trim().parse::<f32>().ok())?;
    Some((range.to_ascii_lowercase(), q.clamp(0.0, 1.0)))
}

/// The weight the most specific range matching `media_type` gives it, with that specificity.
fn quality(ranges: &[(String, f32)], media_type: &str) -> Option<(f32, u8)> {
    let main = media_type.split('/').next().unwrap_or_default();
    ranges
        .iter()
        .filter_map(|(range, q)| {
            let specificity = if range == media_type {
                2
            } else if range.strip_suffix("/*") == Some(main) {
                1
            } else if range == "*/*" {
                0
            } else {
                return None;
            };
            Some((specificity, *q))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .map(|(specificity, q)| (q, specificity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    const OFFERED: &[&str] = &["application/json", "text/csv", "application/x-ndjson"];

    fn pick(accept: Option<&'static str>) -> &'static str {
        let mut headers = HeaderMap::new();
        if let Some(accept) = accept {
            headers.insert(ACCEPT, HeaderValue::from_static(accept));
        }
        OFFERED[preferred(&headers, OFFERED)]
    }

    #[test]
    fn the_first_representation_without_accept_or_without_a_match() {
        assert_eq!(pick(None), "application/json");
        assert_eq!(pick(Some("image/png")), "application/json");
        assert_eq!(pick(Some("text/csv;q=0")), "application/json");
        assert_eq!(pick(Some("garbage")), "application/json");
    }

    #[test]
    fn an_exact_match_wins() {
        assert_eq!(pick(Some("text/csv")), "text/csv");
        assert_eq!(pick(Some("Application/X-NDJSON")), "application/x-ndjson");
        assert_eq!(
            pick(Some("text/csv; charset=utf-8; header=present")),
            "text/csv"
        );
    }

    #[test]
    fn weights_then_specificity_then_the_servers_order() {
        assert_eq!(
            pick(Some("text/csv;q=0.5, application/x-ndjson")),
            "application/x-ndjson"
        );
        assert_eq!(pick(Some("text/csv, */*")), "text/csv");
        assert_eq!(pick(Some("text/*")), "text/csv");
        assert_eq!(pick(Some("*/*")), "application/json");
        assert_eq!(
            pick(Some(
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
            )),
            "application/json"
        );
        assert_eq!(pick(Some("*/*;q=0.1, text/csv;q=0")), "application/json");
    }
}
