//! The public routes: a public device, its current and historical readings, its raw export, its
//! AQI badge (drawn by [`crate::web::badge`]), the map and its clusters.
//!
//! An unknown device and a private one answer the very same 404, so the routes do not reveal
//! which ids exist. Visibility is read from the device store on every request: making a device
//! private hides it at once (only the map may lag, by its cache's time to live).

use bytes::Bytes;
use hyper::header::{HeaderValue, X_CONTENT_TYPE_OPTIONS};

use crate::domain::field_errors::both;
use crate::domain::{
    ClusterQuery, Device, DeviceUuid, ExportQuery, HistoricalQuery, MapQuery, QueryParams,
};
use crate::http::encodings::cacheable::{max_age, revalidate, MapVariant, Rendered};
use crate::http::encodings::export_formats::{self, Format};
use crate::http::encodings::negotiate;
use crate::http::encodings::respond::Data;
use crate::http::encodings::views::{
    ClusterCollectionView, HistoricalView, MapEntryView, MapFeatureCollectionView,
    PublicDeviceView, SnapshotView,
};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::http::{Request, Response};
use crate::read::map::{MapEntry, MapState};
use crate::read::{clusters, current, map, series};
use crate::store::Fleet;
use crate::web::badge;

const NOT_PUBLIC: &str = "no public device with this id";

/// The device `id` when it is public; the same 404 when it is private or not there (the pages
/// and the badge share it).
pub async fn public_device(state: &AppState, id: DeviceUuid) -> Result<Device, ApiError> {
    let device = state.devices.find(id).await?;
    device
        .filter(|device| device.flags.is_public)
        .ok_or(ApiError::NotFound(NOT_PUBLIC))
}

/// `GET /public/devices/{id}`.
pub async fn device(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let device = public_device(state, DeviceUuid::parse_path(id)?).await?;
    let rendered = Rendered::json(&Data {
        data: PublicDeviceView::new(&device),
    })?;
    Ok(rendered.respond(request.headers(), revalidate()))
}

/// `GET /public/devices/{id}/badge.svg`: an SVG badge with the device's current AQI; an `ETag`
/// from its bytes and `Cache-Control: no-cache`, like the device's JSON.
pub async fn badge(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let device = public_device(state, DeviceUuid::parse_path(id)?).await?;
    let snapshot = current::snapshot(
        state.readings.as_ref(),
        Fleet::of(&[device.id]),
        state.clock.now(),
        state.raw_retention,
    )
    .await?
    .known();
    let svg = badge::render(snapshot.as_ref()).into_string();
    let mut response =
        Rendered::tagged_as(Bytes::from(svg), badge::SVG).respond(request.headers(), revalidate());
    response
        .headers_mut()
        .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Ok(response)
}

/// `GET /public/devices/{id}/current`: the location only if it is public too.
pub async fn current(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let device = public_device(state, DeviceUuid::parse_path(id)?).await?;
    let snapshot = super::known(
        state,
        Fleet::of(&[device.id]),
        "this device has not reported any reading yet",
    )
    .await?;
    let rendered = Rendered::json(&Data {
        data: SnapshotView::new(&snapshot, device.flags.is_location_public),
    })?;
    Ok(rendered.respond(request.headers(), revalidate()))
}

/// `GET /public/devices/{id}/historical?timeline=…&tz=…`.
pub async fn historical(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let (id, query) = both(
        DeviceUuid::parse_path(id),
        HistoricalQuery::parse(&QueryParams::parse(request.uri().query())),
    )?;
    let device = public_device(state, id).await?;
    let series = series::timeline(
        state.readings.as_ref(),
        Fleet::of(&[device.id]),
        query,
        state.clock.now(),
    )
    .await?;
    let rendered = Rendered::json(&HistoricalView::new(&series, query.timeline))?;
    Ok(rendered.respond(request.headers(), revalidate()))
}

/// `GET /public/devices/{id}/readings?start=…&end=…`: the raw readings of a public device,
/// streamed as JSON, CSV or NDJSON (by `format` or `Accept`); positions only if its location is public.
pub async fn readings(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let params = QueryParams::parse(request.uri().query());
    let (id, (query, format)) = both(
        DeviceUuid::parse_path(id),
        both(
            ExportQuery::parse(&params),
            Format::choose(request.headers(), &params),
        ),
    )?;
    state
        .raw_retention
        .check_export(query.start, state.clock.now())?;
    let device = public_device(state, id).await?;
    let slot = super::export_slot(&request, state)?;
    let readings = crate::read::export::readings(
        state.readings.as_ref(),
        device.id,
        query,
        device.flags.is_location_public,
    )
    .await?;
    Ok(export_formats::respond(
        readings, format, device.id, query, true, slot,
    ))
}

/// `GET /public/map/devices?bbox=…`, as JSON or (`Accept: application/geo+json`) GeoJSON: served
/// from the cache; the store is asked at most once per TTL, each variant rendered once from that.
pub async fn map(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let query = MapQuery::parse(&QueryParams::parse(request.uri().query()))?;
    let media_type = MAP_FORMATS[negotiate::preferred(request.headers(), MAP_FORMATS)];
    let variant = MapVariant {
        media_type,
        bbox: query.bbox.map(|bbox| bbox.key()),
        zoom: None,
    };
    let rendered = state
        .map
        .get(
            variant,
            |previous| load_map(state, previous),
            |generation| {
                let entries = map::within(generation.entries(), query.bbox);
                let body = if media_type == GEO_JSON {
                    serde_json::to_vec(&MapFeatureCollectionView::new(entries))?
                } else {
                    let views: Vec<MapEntryView<'_>> = entries.map(MapEntryView::new).collect();
                    serde_json::to_vec(&Data { data: views })?
                };
                Ok(Rendered::with_gzip(Bytes::from(body), media_type)?.varying_on_accept())
            },
        )
        .await?;
    Ok(rendered.respond(request.headers(), max_age(state.map_ttl)))
}

/// `GET /public/map/clusters?zoom=…&bbox=…`: the map's devices clustered for a zoom level, as
/// GeoJSON. The clusters of a zoom are computed once per generation of the cached map and cut to
/// the box; each (zoom, box) variant is rendered once, with its gzip copy and entity tag.
pub async fn clusters(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let query = ClusterQuery::parse(&QueryParams::parse(request.uri().query()))?;
    let variant = MapVariant {
        media_type: GEO_JSON,
        bbox: query.bbox.map(|bbox| bbox.key()),
        zoom: Some(clusters::effective(query.zoom)),
    };
    let rendered = state
        .map
        .get(
            variant,
            |previous| load_map(state, previous),
            |generation| {
                let clusters = generation.clusters(query.zoom, query.bbox);
                let body = serde_json::to_vec(&ClusterCollectionView::new(&clusters))?;
                Rendered::with_gzip(Bytes::from(body), GEO_JSON)
            },
        )
        .await?;
    Ok(rendered.respond(request.headers(), max_age(state.map_ttl)))
}

/// GeoJSON's media type (RFC 7946).
const GEO_JSON: &str = "application/geo+json";
/// The map's representations, the default first.
const MAP_FORMATS: &[&str] = &["application/json", GEO_JSON];

/// Reads the map for the cache, from what the read before it left (`previous`).
async fn load_map(
    state: &AppState,
    previous: Option<MapState>,
) -> Result<(Vec<MapEntry>, MapState), ApiError> {
    Ok(map::entries(
        state.devices.as_ref(),
        state.readings.as_ref(),
        state.clock.now(),
        previous,
    )
    .await?)
}
