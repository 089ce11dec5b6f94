//! The raw export's representations, written page by page into a streamed body: JSON
//! (`{"data": [row, …]}`), NDJSON (one row per line) and RFC 4180 CSV (a header line, then one
//! line per row, CRLF). Rows are flat: `measured_at`, the values in [`Measure::EXPORT_ORDER`],
//! `lat`, `lon`; an absent value is `null` in JSON and empty in CSV.
//!
//! Memory stays flat whatever the range: one page is rendered at a time, and the next is read
//! only once the client has taken this one (hyper polls the body as the socket drains). A store
//! fault after the first page aborts the response, so the client sees a broken transfer, never a
//! complete-looking truncated file.

use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use chrono::{DateTime, Timelike as _, Utc};
use http_body_util::BodyExt as _;
use hyper::body::Frame;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, VARY};
use hyper::HeaderMap;

use crate::domain::{
    Code, DeviceUuid, ExportQuery, FieldErrors, In, Measure, QueryParams, RawReading,
};
use crate::http::encodings::negotiate;
use crate::http::encodings::views::timestamp;
use crate::http::guards::export_slots::ExportSlot;
use crate::http::{BodyError, Response};
use crate::read::export::Export;

/// How an export is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"data": [row, …]}`.
    Json,
    /// RFC 4180 CSV with a header line.
    Csv,
    /// One JSON row per line.
    Ndjson,
}

/// The representations, the default first, as [`negotiate::preferred`] takes them.
const MEDIA_TYPES: &[&str] = &["application/json", "text/csv", "application/x-ndjson"];
const FORMATS: [Format; 3] = [Format::Json, Format::Csv, Format::Ndjson];
/// The query parameter that names a format outright.
pub const FORMAT_PARAMETER: &str = "format";
/// The values of [`FORMAT_PARAMETER`].
const FORMAT_NAMES: [(&str, Format); 3] = [
    ("json", Format::Json),
    ("csv", Format::Csv),
    ("ndjson", Format::Ndjson),
];

impl Format {
    /// The format asked for: the `format` query parameter (`json`, `csv`, `ndjson`) when it is
    /// there, since a link or a spreadsheet's import cannot set `Accept`; else the one `Accept`
    /// prefers. Any other `format` is a 422 (`enum`).
    pub fn choose(headers: &HeaderMap, params: &QueryParams<'_>) -> Result<Self, FieldErrors> {
        match params.get(FORMAT_PARAMETER) {
            None | Some("") => Ok(Self::negotiate(headers)),
            Some(name) => FORMAT_NAMES
                .iter()
                .find(|(known, _)| *known == name)
                .map(|(_, format)| *format)
                .ok_or_else(|| {
                    let mut errors = FieldErrors::new();
                    errors.push(
                        In::Query,
                        FORMAT_PARAMETER,
                        Code::Enum,
                        "`format` is one of json, csv, ndjson (or absent: by Accept)",
                    );
                    errors
                }),
        }
    }

    /// The format the request's `Accept` prefers (JSON when it names none of them).
    pub fn negotiate(headers: &HeaderMap) -> Self {
        FORMATS
            .get(negotiate::preferred(headers, MEDIA_TYPES))
            .copied()
            .unwrap_or(Self::Json)
    }

    /// The file name extension of a download in this format.
    fn extension(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Csv => "csv",
            Self::Ndjson => "ndjson",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Json => "application/json",
            Self::Csv => "text/csv; charset=utf-8; header=present",
            Self::Ndjson => "application/x-ndjson",
        }
    }
}

/// The CSV header line: the column names (the JSON rows' member names).
fn csv_header() -> String {
    let mut names = vec!["measured_at"];
    names.extend(Measure::EXPORT_ORDER.map(Measure::name));
    names.extend(["lat", "lon"]);
    names.join(",") + "\r\n"
}

/// An instant as a file name may hold it on any file system (no `:`): basic ISO 8601 in UTC,
/// `20261127T000000Z`, with the fraction of a second only when there is one.
fn file_instant(at: DateTime<Utc>) -> String {
    let nanos = at.nanosecond() % 1_000_000_000;
    let fraction = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_owned()
    };
    format!("{}{fraction}Z", at.format("%Y%m%dT%H%M%S"))
}

/// `Content-Disposition` of an export: saved as a file named after the device, the range and
/// the format (without it, a browser saves every export as "readings").
fn disposition(device: DeviceUuid, range: ExportQuery, format: Format) -> HeaderValue {
    let name = format!(
        "attachment; filename=\"airq-{}-{}-{}.{}\"",
        device.as_uuid(),
        file_instant(range.start),
        file_instant(range.end),
        format.extension()
    );
    // Only ASCII letters, digits, `-`, `.` and `"` go into it, so it is always a valid value.
    HeaderValue::try_from(name).unwrap_or(HeaderValue::from_static("attachment"))
}

/// A 200 that streams `export` of `range` in `format`, holding `slot` while it lives; `device`
/// names it in the log should it fail, and with `range` the downloaded file.
pub fn respond(
    export: Export,
    format: Format,
    device: DeviceUuid,
    range: ExportQuery,
    public: bool,
    slot: ExportSlot,
) -> Response {
    let body = ExportBody {
        export,
        format,
        device,
        started: false,
        rows: 0,
        done: false,
        _slot: slot,
    };
    let mut response = hyper::Response::new(body.boxed());
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    headers.insert(VARY, HeaderValue::from_static("Accept"));
    headers.insert(CONTENT_DISPOSITION, disposition(device, range, format));
    if public {
        // A public device may become private at any time: caches must ask again.
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    response
}

/// The streamed body: the format's opening, then each page as one chunk, then its closing.
#[derive(Debug)]
struct ExportBody {
    export: Export,
    format: Format,
    device: DeviceUuid,
    started: bool,
    rows: u64,
    done: bool,
    /// Held for as long as the body lives: to its end, or until the connection closes.
    _slot: ExportSlot,
}

impl hyper::body::Body for ExportBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let mut chunk = Vec::new();
        if !this.started {
            this.started = true;
            match this.format {
                Format::Json => chunk.extend_from_slice(b"{\"data\":["),
                Format::Csv => chunk.extend_from_slice(csv_header().as_bytes()),
                Format::Ndjson => {}
            }
        }
        loop {
            match this.export.poll_page(cx) {
                Poll::Ready(Some(Ok(page))) => {
                    for reading in &page {
                        this.write_row(&mut chunk, reading);
                    }
                    if !chunk.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))));
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    this.done = true;
                    tracing::error!(
                        device = %this.device,
                        rows_sent = this.rows,
                        error = %crate::telemetry::chain(&error),
                        "export failed after its first page; the response is aborted"
                    );
                    return Poll::Ready(Some(Err(Box::new(error))));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    if this.format == Format::Json {
                        chunk.extend_from_slice(b"]}");
                    }
                    return Poll::Ready(
                        (!chunk.is_empty()).then(|| Ok(Frame::data(Bytes::from(chunk)))),
                    );
                }
                Poll::Pending if chunk.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk))))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

impl ExportBody {
    fn write_row(&mut self, out: &mut Vec<u8>, reading: &RawReading) {
        let at = timestamp(&reading.at);
        let (lat, lon) = reading.position.unzip();
        match self.format {
            Format::Csv => {
                out.extend_from_slice(at.as_bytes());
                for measure in Measure::EXPORT_ORDER {
                    out.push(b',');
                    write_number(out, reading.value(measure), measure.is_integer(), b"");
                }
                for coordinate in [lat, lon] {
                    out.push(b',');
                    write_number(out, coordinate, false, b"");
                }
                out.extend_from_slice(b"\r\n");
            }
            Format::Json | Format::Ndjson => {
                if self.format == Format::Json && self.rows > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"measured_at\":\"");
                out.extend_from_slice(at.as_bytes());
                out.push(b'"');
                for measure in Measure::EXPORT_ORDER {
                    let _ = write!(out, ",\"{}\":", measure.name());
                    write_number(out, reading.value(measure), measure.is_integer(), b"null");
                }
                for (name, coordinate) in [("lat", lat), ("lon", lon)] {
                    let _ = write!(out, ",\"{name}\":");
                    write_number(out, coordinate, false, b"null");
                }
                out.push(b'}');
                if self.format == Format::Ndjson {
                    out.push(b'\n');
                }
            }
        }
        self.rows += 1;
    }
}

/// A value as JSON writes it (integers as integers), or `absent`.
fn write_number(out: &mut Vec<u8>, value: Option<f64>, integer: bool, absent: &[u8]) {
    match value {
        None => out.extend_from_slice(absent),
        Some(value) if !value.is_finite() => out.extend_from_slice(absent),
        Some(value) if integer => {
            let _ = write!(out, "{}", value as i64);
        }
        Some(value) => {
            let _ = serde_json::to_writer(&mut *out, &value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instant(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("instant")
            .with_timezone(&Utc)
    }

    #[test]
    fn the_download_is_named_after_device_range_and_format() {
        let device = DeviceUuid::generate();
        let range = ExportQuery {
            start: instant("2026-11-27T00:00:00Z"),
            end: instant("2026-11-28T01:30:00+01:00"),
        };
        for (format, extension) in [
            (Format::Csv, "csv"),
            (Format::Ndjson, "ndjson"),
            (Format::Json, "json"),
        ] {
            assert_eq!(
                disposition(device, range, format),
                format!(
                    "attachment; filename=\"airq-{}-20261127T000000Z-20261128T003000Z.{extension}\"",
                    device.as_uuid()
                )
                .as_str()
            );
        }
    }

    #[test]
    fn a_fraction_of_a_second_stays_in_the_file_name() {
        assert_eq!(
            file_instant(instant("2026-03-10T10:00:00.250Z")),
            "20260310T100000.25Z"
        );
        assert_eq!(
            file_instant(instant("2026-03-10T10:00:00.000001Z")),
            "20260310T100000.000001Z"
        );
    }

    #[test]
    fn the_csv_header_is_the_documented_one() {
        assert_eq!(
            csv_header(),
            "measured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index,lat,lon\r\n"
        );
    }
}
