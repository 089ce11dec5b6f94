//! The `map` scenario: the clusters feed at fleet scale (issue 37), measured in process.
//!
//! Builds `--devices` synthetic map entries (public, located; most in a few hundred towns, the
//! rest spread over the inhabited latitudes; a tenth offline) and measures, with the server's
//! own code (`airq::read::clusters`, `airq::http::encodings::cacheable::MapCache`, the feed's view):
//! - the rebuild after a cache period: the Z-order sort and every zoom's grid, 0 to 16, on one
//!   core (what the first requests of a period pay, at most once per zoom);
//! - bytes per response, plain and gzip, for a world view (zoom 2, no box) and a city view
//!   (zoom 12, Berlin at 1280 × 800), beside the map feed's GeoJSON of the same devices;
//! - the server's time per request from the cache (`MapCache::get` on a cached variant plus the
//!   response with its gzip body, or a 304), p50 and p99, without the network and HTTP parsing
//!   (the `reads` scenario measures those over HTTP).
//!
//! Why in process: registering and locating 100,000 devices through the API takes longer than
//! the figures asked for need, and every figure here is the server's own work on its own types.

use std::sync::Arc;
use std::time::{Duration, Instant};

use airq::domain::{BoundingBox, DeviceName, DeviceUuid, LatestLocated, LocatedAt, Status, Zoom};
use airq::http::encodings::cacheable::{MapCache, MapVariant, Rendered};
use airq::http::encodings::views::{ClusterCollectionView, MapFeatureCollectionView};
use airq::metrics::{CacheName, ServerMetrics};
use airq::read::clusters::ClusterIndex;
use airq::read::map::{MapEntry, MapMember, MapState};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::BodyExt as _;
use hyper::header::{HeaderValue, ACCEPT_ENCODING, IF_NONE_MATCH};
use hyper::HeaderMap;
use serde_json::json;

use crate::cli::MapArgs;
use crate::BoxError;

const GEO_JSON: &str = "application/geo+json";

/// Runs the scenario and prints its summary.
pub async fn run(args: &MapArgs) -> Result<serde_json::Value, BoxError> {
    let entries = fleet(args.devices, Utc::now())?;
    println!(
        "map: {} public located devices ({} towns), in process",
        entries.len(),
        TOWNS
    );

    // Rebuild: sort + every zoom's grid, on a fresh index each time.
    let mut rebuilds = Vec::new();
    for _ in 0..args.rebuilds.max(1) {
        let index = ClusterIndex::default();
        let started = Instant::now();
        for level in 0..=16u8 {
            std::hint::black_box(index.clusters(&entries, zoom(level)?, None).len());
        }
        rebuilds.push(started.elapsed());
    }
    rebuilds.sort();
    let rebuild_median = rebuilds[rebuilds.len() / 2];
    let index = ClusterIndex::default();
    let features: Vec<usize> = (0..=16u8)
        .map(|level| Ok(index.clusters(&entries, zoom(level)?, None).len()))
        .collect::<Result<_, BoxError>>()?;
    println!(
        "rebuild (sort + grids of zooms 0–16, one core): median {:.1} ms, min {:.1} ms of {}",
        ms(rebuild_median),
        ms(rebuilds[0]),
        rebuilds.len()
    );
    println!("features of the world at zooms 0–16: {features:?}");

    // Bytes and render time of the two views.
    let city = BoundingBox::parse("13.2,52.44,13.64,52.6").map_err(|e| format!("{e:?}"))?;
    let views = [
        ("world (zoom 2)", 2u8, None),
        ("city (zoom 12)", 12, Some(city)),
    ];
    let mut sizes = serde_json::Map::new();
    for (name, level, bbox) in views {
        let started = Instant::now();
        let clusters = index.clusters(&entries, zoom(level)?, bbox);
        let rendered = Rendered::with_gzip(
            Bytes::from(serde_json::to_vec(&ClusterCollectionView::new(&clusters))?),
            GEO_JSON,
        )
        .map_err(|e| e.to_string())?;
        let render = started.elapsed();
        let (plain, gzip) = lengths(&rendered).await?;
        let devices: usize = clusters.iter().map(|c| c.summary.count).sum();
        println!(
            "{name}: {} features for {devices} devices, {plain} B, gzip {gzip} B ({:.1} KiB); rendered in {:.1} ms",
            clusters.len(),
            gzip as f64 / 1024.0,
            ms(render)
        );
        sizes.insert(
            name.to_owned(),
            json!({ "features": clusters.len(), "devices": devices, "bytes": plain,
                    "gzip_bytes": gzip, "render_ms": ms(render) }),
        );
    }
    let feed = Rendered::with_gzip(
        Bytes::from(serde_json::to_vec(&MapFeatureCollectionView::new(
            &entries,
        ))?),
        GEO_JSON,
    )
    .map_err(|e| e.to_string())?;
    let (feed_plain, feed_gzip) = lengths(&feed).await?;
    println!(
        "for comparison, the map feed (GeoJSON, every device): {feed_plain} B, gzip {feed_gzip} B"
    );

    // From the cache: a cached variant, answered with its gzip body, or with a 304.
    let metrics = ServerMetrics::default();
    let cache = MapCache::new(
        Duration::from_secs(3600),
        metrics.cache(CacheName::Map),
        metrics.cache(CacheName::MapVariants),
    );
    let mut latencies = serde_json::Map::new();
    for (name, level, bbox) in views {
        let zoom = zoom(level)?;
        let variant = MapVariant {
            media_type: GEO_JSON,
            bbox: bbox.map(|bbox| bbox.key()),
            zoom: Some(airq::read::clusters::effective(zoom)),
        };
        let get = || {
            cache.get(
                variant,
                |_| async { Ok((entries.clone(), MapState::default())) },
                |generation| {
                    let clusters = generation.clusters(zoom, bbox);
                    Rendered::with_gzip(
                        Bytes::from(serde_json::to_vec(&ClusterCollectionView::new(&clusters))?),
                        GEO_JSON,
                    )
                },
            )
        };
        let first = get().await.map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT_ENCODING,
            HeaderValue::from_static("gzip, deflate, br"),
        );
        let etag = first
            .respond(&headers, HeaderValue::from_static("public, max-age=5"))
            .headers()
            .get("etag")
            .cloned()
            .ok_or("an ETag")?;
        let mut revalidating = headers.clone();
        revalidating.insert(IF_NONE_MATCH, etag);
        for (answer, request) in [("200 gzip", &headers), ("304", &revalidating)] {
            let mut times = Vec::with_capacity(args.requests);
            for _ in 0..args.requests {
                let started = Instant::now();
                let rendered = get().await.map_err(|e| e.to_string())?;
                let response =
                    rendered.respond(request, HeaderValue::from_static("public, max-age=5"));
                std::hint::black_box(response);
                times.push(started.elapsed());
            }
            times.sort();
            let pick = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "{name} from cache, {answer}: p50 {:.1} µs, p99 {:.1} µs",
                us(pick(0.5)),
                us(pick(0.99))
            );
            latencies.insert(
                format!("{name}, {answer}"),
                json!({ "p50_us": us(pick(0.5)), "p99_us": us(pick(0.99)) }),
            );
        }
    }

    Ok(json!({
        "scenario": "map",
        "devices": entries.len(),
        "rebuild_ms": { "median": ms(rebuild_median), "min": ms(rebuilds[0]), "runs": rebuilds.len() },
        "world_features_by_zoom": features,
        "views": sizes,
        "map_feed": { "bytes": feed_plain, "gzip_bytes": feed_gzip },
        "from_cache": latencies,
    }))
}

/// Towns the fleet clusters in.
const TOWNS: usize = 300;

/// The fleet's random draws, per device: latitude, longitude, then three units in [0, 1) for
/// its AQI, PM2.5 and temperature. 70 % within about 15 km of one of [`TOWNS`] towns (Berlin
/// the first, with weight 1/rank), the rest between 55° S and 70° N. A fixed sequence, so runs
/// compare.
fn draws(count: usize) -> Vec<[f64; 5]> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let towns: Vec<(f64, f64)> = std::iter::once((52.52, 13.405))
        .chain((1..TOWNS).map(|_| (next() * 115.0 - 45.0, next() * 360.0 - 180.0)))
        .collect();
    (0..count)
        .map(|_| {
            let (lat, lon) = if next() < 0.7 {
                // Berlin gets a share worthy of a capital: a town picked with weight 1/rank.
                let rank = ((TOWNS as f64).powf(next()) as usize).clamp(1, TOWNS) - 1;
                let (lat, lon) = towns[rank];
                (
                    (lat + (next() - 0.5) * 0.27).clamp(-89.0, 89.0),
                    (lon + (next() - 0.5) * 0.45).clamp(-180.0, 180.0),
                )
            } else {
                (next() * 125.0 - 55.0, next() * 360.0 - 180.0)
            };
            [lat, lon, next(), next(), next()]
        })
        .collect()
}

/// Where the `count` devices of [`fleet`] are (`uploads --homes towns` places a fleet so).
pub fn positions(count: usize) -> Vec<(f64, f64)> {
    draws(count).into_iter().map(|d| (d[0], d[1])).collect()
}

/// `count` map entries at [`draws`]' positions; every tenth offline; AQI 0–300.
fn fleet(count: usize, now: DateTime<Utc>) -> Result<Vec<MapEntry>, BoxError> {
    Ok(draws(count)
        .into_iter()
        .enumerate()
        .map(|(i, [lat, lon, aqi, pm2_5, temperature])| {
            let status = if i % 10 == 0 {
                Status::Offline
            } else {
                Status::Online
            };
            MapEntry {
                device: Arc::new(MapMember {
                    id: DeviceUuid::generate(),
                    name: DeviceName::from_stored(format!("Sensor {i}")),
                    is_outdoor: true,
                }),
                latest: Arc::new(LatestLocated {
                    position: LocatedAt {
                        lat,
                        lon,
                        provider: "gps".to_owned(),
                        at: now,
                    },
                    aqi: (aqi * 300.0) as i64,
                    pm2_5: (pm2_5 * 1000.0).round() / 10.0,
                    temperature: (temperature * 400.0).round() / 10.0 - 5.0,
                }),
                status,
            }
        })
        .collect())
}

fn zoom(level: u8) -> Result<Zoom, BoxError> {
    Zoom::parse(Some(&level.to_string())).map_err(|e| format!("{e:?}").into())
}

/// The plain and gzip body lengths of a rendered variant.
async fn lengths(rendered: &Rendered) -> Result<(usize, usize), BoxError> {
    let cache = HeaderValue::from_static("no-cache");
    let plain = rendered.respond(&HeaderMap::new(), cache.clone());
    let mut gzip_headers = HeaderMap::new();
    gzip_headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    let gzip = rendered.respond(&gzip_headers, cache);
    let plain = plain.into_body().collect().await?.to_bytes().len();
    let gzip = gzip.into_body().collect().await?.to_bytes().len();
    Ok((plain, gzip))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
