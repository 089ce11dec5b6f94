//! AQI charts as inline SVG, drawn on the server: a page that shows them needs no script.
//!
//! A chart spans a whole bucket plan (24 hours by hour, 30 days by day): each non-empty bucket
//! is one point at the middle of its bucket, coloured by its AQI category; consecutive buckets
//! are joined by a line, a gap (a bucket without data) breaks it. The AQI categories are the
//! background bands, so a reader sees at a glance which band the air was in.

use chrono::{DateTime, Utc};
use maud::{html, Markup};

use crate::domain::timeline::Bucket;
use crate::domain::{AqiCategory, Measurements};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 34.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 22.0;

/// One chart: its element id, a title for assistive technology, every bucket of its span (for
/// the axis), and the non-empty ones with their means (a series' points).
#[derive(Debug)]
pub struct AqiChart<'a> {
    /// The `id` of the `<svg>`.
    pub id: &'a str,
    /// What the chart shows, in words.
    pub title: &'a str,
    /// Every bucket of the span, oldest first.
    pub buckets: &'a [Bucket],
    /// The buckets that have data, with their means, oldest first.
    pub points: &'a [(Bucket, Measurements)],
    /// Label every this many buckets on the time axis.
    pub label_every: usize,
}

impl AqiChart<'_> {
    /// The chart as an `<svg>` element.
    pub fn render(&self) -> Markup {
        let (Some(first), Some(last)) = (self.buckets.first(), self.buckets.last()) else {
            return html! {};
        };
        let span = (first.start, last.end);
        let top_aqi = self.scale_top();
        let y = |aqi: f64| {
            TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - aqi.min(top_aqi as f64) / top_aqi as f64)
        };
        let x = |bucket: &Bucket| x_of(span, bucket.start + (bucket.end - bucket.start) / 2);
        let segments = self.segments();
        html! {
            svg id=(self.id) class="chart" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                role="img" aria-label=(self.title) xmlns="http://www.w3.org/2000/svg" {
                title { (self.title) }
                @for category in AqiCategory::ALL {
                    @if category.lowest() < top_aqi {
                        @let upper = category.highest().map_or(top_aqi, |h| h.min(top_aqi));
                        rect x=(LEFT) y=(fmt(y(upper as f64))) width=(WIDTH - LEFT - RIGHT)
                            height=(fmt(y(category.lowest() as f64) - y(upper as f64)))
                            fill=(category.colour()) fill-opacity="0.13" {}
                        line class="grid" x1=(LEFT) x2=(WIDTH - RIGHT)
                            y1=(fmt(y(upper as f64))) y2=(fmt(y(upper as f64))) {}
                        text x=(LEFT - 4.0) y=(fmt(y(upper as f64) + 4.0)) text-anchor="end" { (upper) }
                    }
                }
                text x=(LEFT - 4.0) y=(fmt(y(0.0))) text-anchor="end" { "0" }
                @for (index, bucket) in self.buckets.iter().enumerate() {
                    @if index % self.label_every.max(1) == 0 {
                        text x=(fmt(x(bucket))) y=(HEIGHT - 6.0) text-anchor="middle" { (bucket.label) }
                    }
                }
                @for segment in &segments {
                    @if segment.len() > 1 {
                        polyline class="line" points=(segment.iter().map(|(bucket, means)| {
                            format!("{},{}", fmt(x(bucket)), fmt(y(means.aqi() as f64)))
                        }).collect::<Vec<_>>().join(" ")) {}
                    }
                }
                @for (bucket, means) in self.points {
                    @let category = AqiCategory::of(means.aqi());
                    circle class="point" cx=(fmt(x(bucket))) cy=(fmt(y(means.aqi() as f64))) r="4"
                        fill=(category.colour()) data-aqi=(means.aqi()) data-label=(bucket.label) {
                        title { (bucket.label) ": AQI " (means.aqi()) " (" (category.name()) ")" }
                    }
                }
            }
        }
    }

    /// The top of the AQI axis: the upper edge of the highest category reached (at least
    /// "Moderate", at least 500 once "Hazardous"), so the bands a point lies in are whole.
    fn scale_top(&self) -> i64 {
        let highest = self
            .points
            .iter()
            .map(|(_, means)| means.aqi())
            .max()
            .unwrap_or(0);
        let category = AqiCategory::of(highest.max(AqiCategory::Moderate.lowest()));
        category.highest().unwrap_or(highest.max(500))
    }

    /// Runs of points in consecutive buckets.
    fn segments(&self) -> Vec<Vec<&(Bucket, Measurements)>> {
        let mut segments: Vec<Vec<&(Bucket, Measurements)>> = Vec::new();
        for point in self.points {
            match segments.last_mut() {
                Some(run)
                    if run
                        .last()
                        .is_some_and(|(previous, _)| previous.end == point.0.start) =>
                {
                    run.push(point);
                }
                _ => segments.push(vec![point]),
            }
        }
        segments
    }
}

/// The x coordinate of `at` on a chart spanning `span`.
fn x_of(span: (DateTime<Utc>, DateTime<Utc>), at: DateTime<Utc>) -> f64 {
    let total = (span.1 - span.0).num_milliseconds().max(1) as f64;
    let offset = (at - span.0).num_milliseconds() as f64;
    LEFT + (WIDTH - LEFT - RIGHT) * (offset / total).clamp(0.0, 1.0)
}

/// A coordinate with one decimal: enough for the eye, short in the page.
fn fmt(value: f64) -> String {
    format!("{value:.1}")
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::domain::Measure;

    fn bucket(hour: i64) -> Bucket {
        let start = DateTime::<Utc>::UNIX_EPOCH + TimeDelta::hours(hour);
        Bucket {
            start,
            end: start + TimeDelta::hours(1),
            label: format!("{hour:02}:00"),
        }
    }

    fn with_aqi(aqi: i64) -> Measurements {
        let mut means = Measurements::default();
        means[Measure::Aqi] = aqi as f64;
        means
    }

    fn chart(points: &[(Bucket, Measurements)]) -> String {
        let buckets: Vec<Bucket> = (0..24).map(bucket).collect();
        AqiChart {
            id: "c",
            title: "AQI <last day>",
            buckets: &buckets,
            points,
            label_every: 6,
        }
        .render()
        .into_string()
    }

    #[test]
    fn one_point_per_bucket_with_data_coloured_by_its_category() {
        let svg = chart(&[(bucket(1), with_aqi(20)), (bucket(5), with_aqi(160))]);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains(r##"fill="#00e400" data-aqi="20""##));
        assert!(svg.contains(r##"fill="#ff0000" data-aqi="160""##));
    }

    #[test]
    fn a_gap_breaks_the_line() {
        let svg = chart(&[
            (bucket(1), with_aqi(20)),
            (bucket(2), with_aqi(30)),
            (bucket(4), with_aqi(40)),
            (bucket(5), with_aqi(40)),
        ]);
        assert_eq!(svg.matches("<polyline").count(), 2);
    }

    #[test]
    fn the_title_is_escaped_and_the_axis_reaches_the_highest_band() {
        let svg = chart(&[(bucket(3), with_aqi(120))]);
        assert!(svg.contains("AQI &lt;last day&gt;"));
        assert!(
            svg.contains(">150<"),
            "the axis ends at the top of the band of 120"
        );
        assert!(!svg.contains(">200<"));
        assert_eq!(
            svg.matches("<text").count(),
            4 + 4,
            "3 band edges and 0, 4 time labels"
        );
    }

    #[test]
    fn no_data_draws_the_empty_axes() {
        let svg = chart(&[]);
        assert_eq!(svg.matches("<circle").count(), 0);
        assert!(svg.contains(">100<"), "at least up to Moderate");
    }
}
