//! The classic Prometheus text format (0.0.4), for scrapers and tools that ask for it
//! (`Accept: text/plain`, `promtool check metrics`), converted from the OpenMetrics text the
//! registry writes.
//!
//! Why a conversion rather than a second encoder: `prometheus-client` writes OpenMetrics only,
//! and the two formats differ in a few lines, not in their samples: classic text has no `# EOF`
//! and no `# UNIT`, names a counter's family after its `_total` samples, and has no `info` type
//! (an info family becomes the gauge its `_info` samples are).

use std::collections::HashMap;

/// The media type of [`convert`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The classic text of the OpenMetrics text `open_metrics`.
pub fn convert(open_metrics: &str) -> String {
    // Each family's type, from its `# TYPE` line (which follows its `# HELP` line).
    let kinds: HashMap<&str, &str> = open_metrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    let rename = |family: &str| -> (String, &'static str) {
        match kinds.get(family).copied().unwrap_or("") {
            "counter" if !family.ends_with("_total") => (format!("{family}_total"), "counter"),
            "counter" => (family.to_owned(), "counter"),
            "info" => (format!("{family}_info"), "gauge"),
            "gauge" => (family.to_owned(), "gauge"),
            "histogram" => (family.to_owned(), "histogram"),
            "summary" => (family.to_owned(), "summary"),
            _ => (family.to_owned(), "untyped"),
        }
    };
    let mut classic = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some((family, help)) = line
            .strip_prefix("# HELP ")
            .and_then(|rest| rest.split_once(' '))
        {
            classic.push_str(&format!("# HELP {} {help}\n", rename(family).0));
            continue;
        }
        if let Some((family, _)) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_once(' '))
        {
            let (name, kind) = rename(family);
            classic.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        // Samples are named alike in both formats; `_created` ones have no classic form.
        let sample = line.split(['{', ' ']).next().unwrap_or(line);
        if sample
            .strip_suffix("_created")
            .is_some_and(|family| kinds.contains_key(family))
        {
            continue;
        }
        classic.push_str(line);
        classic.push('\n');
    }
    classic
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_info_are_named_after_their_samples_and_eof_and_units_go() {
        let open_metrics = "# HELP airq_readings Readings.\n# TYPE airq_readings counter\n\
            airq_readings_total 3\n# HELP airq_build Build.\n# TYPE airq_build info\n\
            airq_build_info{version=\"0.1.0\"} 1\n# HELP airq_up Up.\n# TYPE airq_up gauge\n\
            # UNIT airq_up seconds\nairq_up 1\n# EOF\n";
        assert_eq!(
            convert(open_metrics),
            "# HELP airq_readings_total Readings.\n# TYPE airq_readings_total counter\n\
             airq_readings_total 3\n# HELP airq_build_info Build.\n# TYPE airq_build_info gauge\n\
             airq_build_info{version=\"0.1.0\"} 1\n# HELP airq_up Up.\n# TYPE airq_up gauge\n\
             airq_up 1\n"
        );
    }
}
