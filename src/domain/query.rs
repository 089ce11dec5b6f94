//! The queries of the historical and custom routes, parsed into types at the edge: a known
//! timeline, an IANA zone, a date range within the interval's span limit. What the buckets of a
//! parsed query are is [`super::timeline`]'s business.

use std::borrow::Cow;

use chrono::{DateTime, Months, NaiveDate, TimeDelta, Utc};
use chrono_tz::Tz;

use super::bbox::{self, BoundingBox};
use super::field_errors::{Code, FieldErrors, In};
use super::timeline::{DateRange, Interval, Timeline};
use super::zoom::{self, Zoom};

/// The parsed query of the historical routes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoricalQuery {
    /// Which timeline.
    pub timeline: Timeline,
    /// Zone of buckets and labels.
    pub tz: Tz,
}

/// The parsed query of the custom route.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CustomQuery {
    /// Days asked for.
    pub range: DateRange,
    /// Bucket size.
    pub interval: Interval,
    /// Zone of dates, buckets and labels.
    pub tz: Tz,
}

/// The parsed query of the map route.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MapQuery {
    /// Only the entries inside this box (`None`: all).
    pub bbox: Option<BoundingBox>,
}

impl MapQuery {
    /// `bbox` (optional; empty counts as absent).
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let bbox = match params.get(bbox::PARAMETER) {
            None | Some("") => None,
            Some(text) => Some(BoundingBox::parse(text)?),
        };
        Ok(Self { bbox })
    }
}

/// The parsed query of the map clusters route.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterQuery {
    /// The zoom level the clusters are cut for.
    pub zoom: Zoom,
    /// Only the devices inside this box (`None`: all).
    pub bbox: Option<BoundingBox>,
}

impl ClusterQuery {
    /// `zoom` (required, 0 to 22) and `bbox` (optional, exactly as on the map feed); the
    /// problems of both at once.
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let (zoom, map) = super::field_errors::both(
            Zoom::parse(params.get(zoom::PARAMETER)),
            MapQuery::parse(params),
        )?;
        Ok(Self {
            zoom,
            bbox: map.bbox,
        })
    }
}

/// The parsed query of the raw export routes: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportQuery {
    /// The first instant exported (inclusive).
    pub start: DateTime<Utc>,
    /// The instant the export stops before (exclusive).
    pub end: DateTime<Utc>,
}

/// Longest span of one export, in days.
pub const MAX_EXPORT_DAYS: i64 = 366;

impl ExportQuery {
    /// `start` and `end` (both required, RFC 3339 with an offset), `start < end`, at most
    /// [`MAX_EXPORT_DAYS`] apart.
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let start = parse_instant(params, "start", &mut errors);
        let end = parse_instant(params, "end", &mut errors);
        let (Some(start), Some(end)) = (start, end) else {
            return Err(errors);
        };
        if start >= end {
            errors.push(
                In::Query,
                "start",
                Code::Range,
                "`start` must be before `end` (`start` is included, `end` is not)",
            );
        } else if end - start > TimeDelta::days(MAX_EXPORT_DAYS) {
            errors.push(
                In::Query,
                "end",
                Code::Maximum,
                format!("an export spans at most {MAX_EXPORT_DAYS} days"),
            );
        }
        errors.into_result(|| Self { start, end })
    }
}

/// An RFC 3339 instant with its offset. A `+` sent unencoded in a query string arrives as a
/// space; an offset written that way is read as the `+` it was.
fn parse_instant(
    params: &QueryParams<'_>,
    name: &str,
    errors: &mut FieldErrors,
) -> Option<DateTime<Utc>> {
    let text = match params.get(name) {
        None | Some("") => {
            errors.push(
                In::Query,
                name,
                Code::Required,
                format!("`{name}` is required (RFC 3339, e.g. 2026-11-21T00:00:00Z)"),
            );
            return None;
        }
        Some(text) => text,
    };
    let parsed = DateTime::parse_from_rfc3339(text).ok().or_else(|| {
        let (before, offset) = text.rsplit_once(' ')?;
        DateTime::parse_from_rfc3339(&format!("{before}+{offset}")).ok()
    });
    if parsed.is_none() {
        errors.push(
            In::Query,
            name,
            Code::Format,
            format!(
                "`{name}` must be an RFC 3339 timestamp with an offset such as \
                 2026-11-21T14:05:00Z, not {text:?}"
            ),
        );
    }
    parsed.map(|at| at.with_timezone(&Utc))
}

/// The decoded pairs of a query string; the first occurrence of a name wins.
#[derive(Debug, Default)]
pub struct QueryParams<'q>(Vec<(Cow<'q, str>, Cow<'q, str>)>);

impl<'q> QueryParams<'q> {
    /// Decodes a raw query string (`None` when the URL had none).
    pub fn parse(query: Option<&'q str>) -> Self {
        Self(query.map_or_else(Vec::new, |query| {
            form_urlencoded::parse(query.as_bytes()).collect()
        }))
    }

    /// The decoded value of the first parameter called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_ref())
    }
}

impl HistoricalQuery {
    /// `timeline` (required) and `tz` (optional, IANA, default UTC).
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let timeline = match params.get("timeline") {
            None | Some("") => {
                errors.push(
                    In::Query,
                    "timeline",
                    Code::Required,
                    "`timeline` is required: daily, weekly, monthly or yearly",
                );
                None
            }
            Some(text) => {
                let found = Timeline::ALL
                    .iter()
                    .find(|(name, _)| *name == text)
                    .map(|(_, t)| *t);
                if found.is_none() {
                    errors.push(
                        In::Query,
                        "timeline",
                        Code::Enum,
                        format!(
                            "`timeline` must be daily, weekly, monthly or yearly, not {text:?}"
                        ),
                    );
                }
                found
            }
        };
        let tz = parse_tz(params, &mut errors);
        match (timeline, tz) {
            (Some(timeline), Some(tz)) if errors.is_empty() => Ok(Self { timeline, tz }),
            _ => Err(errors),
        }
    }
}

/// Longest custom range with hourly buckets, in days.
pub const MAX_HOUR_DAYS: i64 = 31;
/// Longest custom range with daily buckets, in days.
pub const MAX_DAY_DAYS: i64 = 366;
/// Longest custom range with monthly buckets, in years.
pub const MAX_MONTH_YEARS: u32 = 10;

impl CustomQuery {
    /// `start_date`, `end_date` (required), `interval` (hour, day or month; default day), `tz`.
    pub fn parse(params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let start = parse_date(params, "start_date", &mut errors);
        let end = parse_date(params, "end_date", &mut errors);
        let interval = match params.get("interval") {
            None | Some("") | Some("day") => Some(Interval::Day),
            Some("hour") => Some(Interval::Hour),
            Some("month") => Some(Interval::Month),
            Some(other) => {
                errors.push(
                    In::Query,
                    "interval",
                    Code::Enum,
                    format!("`interval` must be hour, day or month, not {other:?}"),
                );
                None
            }
        };
        let tz = parse_tz(params, &mut errors);
        let (Some(start), Some(end), Some(interval), Some(tz)) = (start, end, interval, tz) else {
            return Err(errors);
        };
        if start > end {
            errors.push(
                In::Query,
                "start_date",
                Code::Range,
                "`start_date` must not be after `end_date`",
            );
            return Err(errors);
        }
        let days = (end - start).num_days() + 1;
        let too_long = match interval {
            Interval::Hour => (days > MAX_HOUR_DAYS)
                .then(|| format!("at most {MAX_HOUR_DAYS} days with interval=hour")),
            Interval::Day => (days > MAX_DAY_DAYS)
                .then(|| format!("at most {MAX_DAY_DAYS} days with interval=day")),
            Interval::Month => start
                .checked_add_months(Months::new(12 * MAX_MONTH_YEARS))
                .is_none_or(|limit| end >= limit)
                .then(|| format!("at most {MAX_MONTH_YEARS} years with interval=month")),
        };
        if let Some(limit) = too_long {
            errors.push(
                In::Query,
                "end_date",
                Code::Maximum,
                format!("the range spans {days} days; {limit}"),
            );
        }
        errors.into_result(|| Self {
            range: DateRange { start, end },
            interval,
            tz,
        })
    }
}

fn parse_date(params: &QueryParams<'_>, name: &str, errors: &mut FieldErrors) -> Option<NaiveDate> {
    match params.get(name) {
        None | Some("") => {
            errors.push(
                In::Query,
                name,
                Code::Required,
                format!("`{name}` is required (YYYY-MM-DD)"),
            );
            None
        }
        Some(text) => {
            let shaped = text.len() == 10
                && text.bytes().enumerate().all(|(at, byte)| match at {
                    4 | 7 => byte == b'-',
                    _ => byte.is_ascii_digit(),
                });
            let parsed = shaped
                .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
                .flatten();
            if parsed.is_none() {
                errors.push(
                    In::Query,
                    name,
                    Code::Format,
                    format!("`{name}` must be a date as YYYY-MM-DD, not {text:?}"),
                );
            }
            parsed
        }
    }
}

fn parse_tz(params: &QueryParams<'_>, errors: &mut FieldErrors) -> Option<Tz> {
    match params.get("tz") {
        None | Some("") => Some(Tz::UTC),
        Some(text) => {
            let parsed = text.parse::<Tz>().ok();
            if parsed.is_none() {
                errors.push(
                    In::Query,
                    "tz",
                    Code::Format,
                    format!("`tz` must be an IANA time zone such as Europe/Berlin, not {text:?}"),
                );
            }
            parsed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(query: &str) -> Result<ExportQuery, Vec<(String, Code)>> {
        ExportQuery::parse(&QueryParams::parse(Some(query))).map_err(|errors| {
            errors
                .as_slice()
                .iter()
                .map(|error| (error.name.clone(), error.code))
                .collect()
        })
    }

    #[test]
    fn an_export_range_is_two_instants_with_offsets() {
        let query = export("start=2026-01-01T00:00:00%2B02:00&end=2026-01-02T00:00:00Z");
        assert_eq!(
            query.map(|query| (query.start.to_rfc3339(), query.end.to_rfc3339())),
            Ok((
                "2025-12-31T22:00:00+00:00".to_owned(),
                "2026-01-02T00:00:00+00:00".to_owned()
            ))
        );
    }

    #[test]
    fn an_unencoded_plus_offset_is_read_as_a_plus() {
        let unencoded = export("start=2026-01-01T00:00:00+02:00&end=2026-01-02T00:00:00Z");
        let encoded = export("start=2026-01-01T00:00:00%2B02:00&end=2026-01-02T00:00:00Z");
        assert!(unencoded.is_ok());
        assert_eq!(unencoded, encoded);
    }

    #[test]
    fn export_faults_name_their_parameter() {
        let name = |text: &str| text.to_owned();
        assert_eq!(
            export(""),
            Err(vec![
                (name("start"), Code::Required),
                (name("end"), Code::Required)
            ])
        );
        assert_eq!(
            export("start=2026-01-01&end=2026-01-01T00:00:00"),
            Err(vec![
                (name("start"), Code::Format),
                (name("end"), Code::Format)
            ])
        );
        assert_eq!(
            export("start=2026-01-02T00:00:00Z&end=2026-01-02T00:00:00Z"),
            Err(vec![(name("start"), Code::Range)])
        );
        assert_eq!(
            export("start=2025-01-01T00:00:00Z&end=2026-01-02T00:00:00.000001Z"),
            Err(vec![(name("end"), Code::Maximum)])
        );
        assert!(export("start=2025-01-01T00:00:00Z&end=2026-01-02T00:00:00Z").is_ok());
    }

    #[test]
    fn the_documented_zones_are_exactly_the_zones_parsed() {
        let document: serde_json::Value =
            serde_json::from_str(include_str!("../http/openapi.json")).unwrap_or_default();
        let documented: Vec<&str> = document["components"]["parameters"]["TimeZone"]["schema"]
            ["x-airq-zone-names"]
            .as_array()
            .map(|names| names.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        let mut parsed: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
        parsed.sort_unstable();
        assert_eq!(
            documented, parsed,
            "the TimeZone parameter's x-airq-zone-names in openapi.json"
        );
        for name in documented {
            let query = form_urlencoded::Serializer::new(String::new())
                .append_pair("timeline", "daily")
                .append_pair("tz", name)
                .finish();
            let parsed = HistoricalQuery::parse(&QueryParams::parse(Some(&query)));
            assert!(parsed.is_ok(), "{name}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        /// Query strings: arbitrary text, and pairs of the parsers' own names with arbitrary
        /// (often nearly valid) values.
        fn query() -> impl Strategy<Value = String> {
            let name = prop_oneof![
                Just("start_date"),
                Just("end_date"),
                Just("interval"),
                Just("tz"),
                Just("timeline"),
                Just("start"),
                Just("end"),
                Just("bbox"),
                Just("limit"),
                Just("cursor"),
            ];
            let value = prop_oneof![
                any::<String>(),
                Just("2026-11-21".to_owned()),
                Just("2026-11-21T00:00:00+02:00".to_owned()),
                Just("Europe/Berlin".to_owned()),
                Just("-180,-90,180,90".to_owned()),
                "[0-9:TZ+ .,-]{0,30}",
            ];
            prop_oneof![
                any::<String>(),
                proptest::collection::vec((name, value), 0..6).prop_map(|pairs| {
                    let mut query = form_urlencoded::Serializer::new(String::new());
                    for (name, value) in pairs {
                        query.append_pair(name, &value);
                    }
                    query.finish()
                }),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            #[test]
            fn every_query_parser_answers_any_query_without_panicking(query in query()) {
                let params = QueryParams::parse(Some(&query));
                let faults = [
                    HistoricalQuery::parse(&params).err(),
                    CustomQuery::parse(&params).err(),
                    MapQuery::parse(&params).err(),
                    ClusterQuery::parse(&params).err(),
                    ExportQuery::parse(&params).err(),
                    crate::domain::DevicePage::parse(&params).err(),
                ];
                for errors in faults.into_iter().flatten() {
                    prop_assert!(!errors.is_empty());
                }
            }

            #[test]
            fn a_parsed_custom_range_keeps_its_order_and_span(query in query()) {
                if let Ok(custom) = CustomQuery::parse(&QueryParams::parse(Some(&query))) {
                    prop_assert!(custom.range.start <= custom.range.end);
                    prop_assert!((custom.range.end - custom.range.start).num_days() < 3700);
                }
            }

            #[test]
            fn a_parsed_export_range_is_ordered_and_bounded(query in query()) {
                if let Ok(export) = ExportQuery::parse(&QueryParams::parse(Some(&query))) {
                    prop_assert!(export.start < export.end);
                    prop_assert!(export.end - export.start <= TimeDelta::days(MAX_EXPORT_DAYS));
                }
            }
        }
    }
}
