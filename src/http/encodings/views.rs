//! The JSON shapes of responses, built from domain values.

use chrono::{DateTime, SecondsFormat, TimeZone};
use serde::Serialize;

use crate::domain::{Device, DeviceKey, Measurements, Snapshot, Timeline};
use crate::read::clusters::Cluster;
use crate::read::map::MapEntry;
use crate::read::series::Series;
use crate::store::batch_writer::Receipt;

/// RFC 3339 with milliseconds; `Z` for UTC, the offset otherwise.
pub fn timestamp<Tz: TimeZone>(at: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A device as its owner sees it; `device_key` only right after registration or rotation.
#[derive(Debug, Serialize)]
pub struct DeviceView<'a> {
    id: String,
    device_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_key: Option<&'a str>,
    name: &'a str,
    is_public: bool,
    is_location_public: bool,
    is_outdoor: bool,
    created_at: String,
    updated_at: String,
}

impl<'a> DeviceView<'a> {
    /// The view without credentials.
    pub fn new(device: &'a Device) -> Self {
        Self {
            id: device.id.to_string(),
            device_id: device.device_id.as_str(),
            device_key: None,
            name: device.name.as_str(),
            is_public: device.flags.is_public,
            is_location_public: device.flags.is_location_public,
            is_outdoor: device.flags.is_outdoor,
            created_at: timestamp(&device.created_at),
            updated_at: timestamp(&device.updated_at),
        }
    }

    /// The view with the freshly issued key.
    pub fn with_key(device: &'a Device, key: &'a DeviceKey) -> Self {
        Self {
            device_key: Some(key.expose()),
            ..Self::new(device)
        }
    }
}

/// A device as anyone sees it: no credentials, no location flag.
#[derive(Debug, Serialize)]
pub struct PublicDeviceView<'a> {
    id: String,
    name: &'a str,
    is_outdoor: bool,
    is_public: bool,
    created_at: String,
    updated_at: String,
}

impl<'a> PublicDeviceView<'a> {
    /// The public view.
    pub fn new(device: &'a Device) -> Self {
        Self {
            id: device.id.to_string(),
            name: device.name.as_str(),
            is_outdoor: device.flags.is_outdoor,
            is_public: device.flags.is_public,
            created_at: timestamp(&device.created_at),
            updated_at: timestamp(&device.updated_at),
        }
    }
}

/// A position with its time.
#[derive(Debug, Serialize)]
pub struct LocationView<'a> {
    lat: f64,
    lon: f64,
    provider: &'a str,
    timestamp: String,
}

/// A current snapshot.
#[derive(Debug, Serialize)]
pub struct SnapshotView<'a> {
    #[serde(flatten)]
    metrics: Measurements,
    sample_count: u64,
    status: &'static str,
    last_seen: String,
    location: Option<LocationView<'a>>,
}

impl<'a> SnapshotView<'a> {
    /// The view; the location only when `show_location`.
    pub fn new(snapshot: &'a Snapshot, show_location: bool) -> Self {
        Self {
            metrics: snapshot.means,
            sample_count: snapshot.sample_count,
            status: snapshot.status.as_str(),
            last_seen: timestamp(&snapshot.last_seen),
            location: snapshot
                .location
                .as_ref()
                .filter(|_| show_location)
                .map(|at| LocationView {
                    lat: at.lat,
                    lon: at.lon,
                    provider: &at.provider,
                    timestamp: timestamp(&at.at),
                }),
        }
    }
}

/// One bucket of a historical series.
#[derive(Debug, Serialize)]
pub struct MetricsPointView<'a> {
    label: &'a str,
    timestamp: String,
    metrics: Measurements,
}

/// The points of a series, timestamps in its zone.
pub fn points(series: &Series) -> Vec<MetricsPointView<'_>> {
    series
        .points
        .iter()
        .map(|(bucket, means)| MetricsPointView {
            label: &bucket.label,
            timestamp: timestamp(&bucket.start.with_timezone(&series.tz)),
            metrics: *means,
        })
        .collect()
}

/// The body of the historical routes.
#[derive(Debug, Serialize)]
pub struct HistoricalView<'a> {
    data: Vec<MetricsPointView<'a>>,
    timeline: &'static str,
}

impl<'a> HistoricalView<'a> {
    /// The view of a timeline's series.
    pub fn new(series: &'a Series, timeline: Timeline) -> Self {
        Self {
            data: points(series),
            timeline: timeline.as_str(),
        }
    }
}

/// An upload receipt.
#[derive(Debug, Serialize)]
pub struct ReceiptView {
    created_at: String,
    id: u64,
}

impl From<&Receipt> for ReceiptView {
    fn from(receipt: &Receipt) -> Self {
        Self {
            created_at: timestamp(&receipt.at),
            id: receipt.id.get(),
        }
    }
}

/// An entry of the community map.
#[derive(Debug, Serialize)]
pub struct MapEntryView<'a> {
    id: String,
    name: &'a str,
    is_outdoor: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    lat: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lon: Option<f64>,
    aqi: i64,
    pm2_5: f64,
    temperature: f64,
    measured_at: String,
    status: &'static str,
}

impl<'a> MapEntryView<'a> {
    /// The view of a map entry.
    pub fn new(entry: &'a MapEntry) -> Self {
        let MapEntry {
            device,
            latest,
            status,
        } = entry;
        Self {
            id: device.id.to_string(),
            name: device.name.as_str(),
            is_outdoor: device.is_outdoor,
            lat: Some(latest.position.lat),
            lon: Some(latest.position.lon),
            aqi: latest.aqi,
            pm2_5: latest.pm2_5,
            temperature: latest.temperature,
            measured_at: timestamp(&latest.position.at),
            status: status.as_str(),
        }
    }

    /// The entry's fields apart from its position: the properties of its GeoJSON feature.
    fn properties(entry: &'a MapEntry) -> Self {
        Self {
            lat: None,
            lon: None,
            ..Self::new(entry)
        }
    }
}

/// The map as an RFC 7946 GeoJSON `FeatureCollection`.
#[derive(Debug, Serialize)]
pub struct MapFeatureCollectionView<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    features: Vec<MapFeatureView<'a>>,
}

impl<'a> MapFeatureCollectionView<'a> {
    /// One `Point` feature per entry.
    pub fn new(entries: impl IntoIterator<Item = &'a MapEntry>) -> Self {
        Self {
            kind: "FeatureCollection",
            features: entries
                .into_iter()
                .map(|entry| MapFeatureView {
                    kind: "Feature",
                    geometry: PointView {
                        kind: "Point",
                        coordinates: [entry.latest.position.lon, entry.latest.position.lat],
                    },
                    properties: MapEntryView::properties(entry),
                })
                .collect(),
        }
    }
}

/// One map entry as a GeoJSON `Feature`.
#[derive(Debug, Serialize)]
struct MapFeatureView<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    geometry: PointView,
    properties: MapEntryView<'a>,
}

/// The map's clusters as an RFC 7946 GeoJSON `FeatureCollection`.
#[derive(Debug, Serialize)]
pub struct ClusterCollectionView<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    features: Vec<ClusterFeatureView<'a>>,
}

impl<'a> ClusterCollectionView<'a> {
    /// One `Point` feature per cluster.
    pub fn new(clusters: &[Cluster<'a>]) -> Self {
        Self {
            kind: "FeatureCollection",
            features: clusters
                .iter()
                .map(|cluster| {
                    let summary = cluster.summary;
                    // A device keeps its exact position; a cluster's mean is rounded to 1e-6°
                    // (about 10 cm), which saves a third of a world view's bytes.
                    let coordinates = match cluster.single {
                        Some(entry) => [entry.latest.position.lon, entry.latest.position.lat],
                        None => [summary.lon, summary.lat].map(|v| (v * 1e6).round() / 1e6),
                    };
                    ClusterFeatureView {
                        kind: "Feature",
                        geometry: PointView {
                            kind: "Point",
                            coordinates,
                        },
                        properties: ClusterPropertiesView {
                            count: summary.count,
                            aqi_max: summary.aqi_max,
                            aqi_median: summary.aqi_median,
                            offline: summary.offline,
                            device: cluster.single.map(MapEntryView::properties),
                        },
                    }
                })
                .collect(),
        }
    }
}

/// One cluster as a GeoJSON `Feature`.
#[derive(Debug, Serialize)]
struct ClusterFeatureView<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    geometry: PointView,
    properties: ClusterPropertiesView<'a>,
}

/// A cluster's figures, and for a single device its map-feed fields.
#[derive(Debug, Serialize)]
struct ClusterPropertiesView<'a> {
    count: usize,
    aqi_max: i64,
    aqi_median: i64,
    offline: usize,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    device: Option<MapEntryView<'a>>,
}

/// A GeoJSON `Point`: `[longitude, latitude]`.
#[derive(Debug, Serialize)]
struct PointView {
    #[serde(rename = "type")]
    kind: &'static str,
    coordinates: [f64; 2],
}
