//! What public responses share: `Access-Control-Allow-Origin: *`, `Cache-Control`, an `ETag`
//! derived from the body, `If-None-Match` → 304, and the server-side cache of the map, which also
//! keeps a gzip copy for the clients that accept one (every browser does).

use std::future::Future;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{
    HeaderValue, ACCEPT_ENCODING, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_MAX_AGE, CACHE_CONTROL, CONTENT_ENCODING, ETAG, IF_NONE_MATCH, VARY,
};
use hyper::{HeaderMap, StatusCode};
use serde::Serialize;

use crate::domain::{BoundingBox, Zoom};
use crate::http::encodings::respond;
use crate::http::error::ApiError;
use crate::http::Response;
use crate::metrics::CacheCounters;
use crate::read::clusters::{Cluster, ClusterIndex};
use crate::read::map::{MapEntry, MapState};

/// A rendered body, its media type and its entity tag.
#[derive(Debug)]
pub struct Rendered {
    body: Bytes,
    content_type: &'static str,
    etag: HeaderValue,
    /// The same body gzip-compressed, with its own entity tag (large bodies only).
    gzip: Option<(Bytes, HeaderValue)>,
    /// Whether the representation was chosen by the request's `Accept` (`Vary: Accept`).
    varies_on_accept: bool,
}

impl Rendered {
    /// Renders `body` and tags it with a hash of the bytes.
    pub fn json(body: &impl Serialize) -> Result<Self, ApiError> {
        Ok(Self::tagged(Bytes::from(serde_json::to_vec(body)?)))
    }

    /// An already rendered JSON body, tagged with a hash of its bytes.
    pub fn tagged(body: Bytes) -> Self {
        Self::tagged_as(body, "application/json")
    }

    /// An already rendered body of media type `content_type`, tagged with a hash of its bytes.
    pub fn tagged_as(body: Bytes, content_type: &'static str) -> Self {
        let etag = entity_tag(&body, "");
        Self {
            body,
            content_type,
            etag,
            gzip: None,
            varies_on_accept: false,
        }
    }

    /// [`Rendered::json`] plus a gzip copy, for a large body rendered once and served often
    /// (the map): compressing it once per cache lifetime costs little, every poller saves.
    pub fn json_with_gzip(body: &impl Serialize) -> Result<Self, ApiError> {
        Self::with_gzip(Bytes::from(serde_json::to_vec(body)?), "application/json")
    }

    /// [`Rendered::tagged_as`] plus a gzip copy (see [`Rendered::json_with_gzip`]).
    pub fn with_gzip(body: Bytes, content_type: &'static str) -> Result<Self, ApiError> {
        let mut rendered = Self::tagged_as(body, content_type);
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder
            .write_all(&rendered.body)
            .map_err(ApiError::Compress)?;
        let compressed = encoder.finish().map_err(ApiError::Compress)?;
        rendered.gzip = Some((Bytes::from(compressed), entity_tag(&rendered.body, "-gzip")));
        Ok(rendered)
    }

    /// Marks the representation as chosen by `Accept`: every answer, 304 included, then says
    /// `Vary: Accept` (with `Accept-Encoding` when there is a gzip copy).
    pub fn varying_on_accept(mut self) -> Self {
        self.varies_on_accept = true;
        self
    }

    /// The bytes held (both encodings), for weighing a cache.
    pub fn weight(&self) -> usize {
        self.body.len() + self.gzip.as_ref().map_or(0, |(gzip, _)| gzip.len())
    }

    fn plain(&self) -> Response {
        respond::with_body(StatusCode::OK, self.content_type, self.body.clone())
    }

    /// 200 with the body (gzip-encoded when there is a gzip copy and the client accepts it), or
    /// 304 when `If-None-Match` names the current entity tag of either encoding (or `*`).
    pub fn respond(&self, request_headers: &HeaderMap, cache_control: HeaderValue) -> Response {
        let current = |tag: &str| {
            tag == "*"
                || tag.as_bytes() == self.etag.as_bytes()
                || self
                    .gzip
                    .as_ref()
                    .is_some_and(|(_, gzip_tag)| tag.as_bytes() == gzip_tag.as_bytes())
        };
        let unchanged = request_headers
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|tag| tag.trim().trim_start_matches("W/"))
            .any(current);
        let gzip = self.gzip.as_ref().filter(|_| accepts_gzip(request_headers));
        let etag = gzip.map_or(&self.etag, |(_, tag)| tag);
        let mut response = match (unchanged, gzip) {
            (true, _) => respond::empty(StatusCode::NOT_MODIFIED),
            (false, Some((body, _))) => {
                let mut response =
                    respond::with_body(StatusCode::OK, self.content_type, body.clone());
                response
                    .headers_mut()
                    .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                response
            }
            (false, None) => self.plain(),
        };
        let headers = response.headers_mut();
        headers.insert(ETAG, etag.clone());
        headers.insert(CACHE_CONTROL, cache_control);
        let vary = match (self.varies_on_accept, self.gzip.is_some()) {
            (true, true) => Some("Accept, Accept-Encoding"),
            (true, false) => Some("Accept"),
            (false, true) => Some("Accept-Encoding"),
            (false, false) => None,
        };
        if let Some(vary) = vary {
            headers.insert(VARY, HeaderValue::from_static(vary));
        }
        response
    }
}

/// A strong entity tag from a hash of the (uncompressed) body.
fn entity_tag(body: &[u8], suffix: &str) -> HeaderValue {
    let hash = blake3::hash(body).to_hex();
    HeaderValue::try_from(format!("\"{}{suffix}\"", &hash[..32]))
        .unwrap_or(HeaderValue::from_static("\"unversioned\""))
}

/// Whether `Accept-Encoding` allows gzip (`gzip` or `*`, without `q=0`).
fn accepts_gzip(request_headers: &HeaderMap) -> bool {
    request_headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|parameter| {
                parameter
                    .strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// The answer to a CORS preflight: widgets may `GET` with `If-None-Match` from any origin (the
/// origin header itself is added by the server to every public answer).
pub fn preflight() -> Response {
    let mut response = respond::empty(StatusCode::NO_CONTENT);
    let headers = response.headers_mut();
    headers.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, OPTIONS"),
    );
    headers.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("If-None-Match"),
    );
    headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    response
}

/// Public device routes: caches must revalidate (a device made private disappears at once), which
/// the entity tag makes cheap.
pub fn revalidate() -> HeaderValue {
    HeaderValue::from_static("no-cache")
}

/// The map may be cached as long as the server caches it.
pub fn max_age(ttl: Duration) -> HeaderValue {
    HeaderValue::try_from(format!("public, max-age={}", ttl.as_secs()))
        .unwrap_or(HeaderValue::from_static("no-cache"))
}

/// Bytes of rendered map variants kept at most (bounding boxes are the clients' choice).
const MAP_VARIANT_BYTES: u64 = 64 * 1024 * 1024;

/// One representation of the map: its media type, the bounding box it was cut to, and for the
/// clusters feed the zoom they were cut for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MapVariant {
    /// The media type of the body.
    pub media_type: &'static str,
    /// The box's [`key`](crate::domain::BoundingBox::key), `None` for the whole map.
    pub bbox: Option<[u64; 4]>,
    /// The clusters' [effective zoom](crate::read::clusters::effective); `None` for the devices.
    pub zoom: Option<u8>,
}

/// The map's entries as read at one moment, numbered so that variants rendered from them are
/// never served with the entries of another moment, with their clusters (computed from them at
/// most once per zoom).
#[derive(Debug)]
pub struct MapGeneration {
    number: u64,
    entries: Vec<MapEntry>,
    clusters: ClusterIndex,
}

impl MapGeneration {
    /// The entries, in the device store's order.
    pub fn entries(&self) -> &[MapEntry] {
        &self.entries
    }

    /// The clusters of the entries at `zoom`, of those inside `bbox` only.
    pub fn clusters(&self, zoom: Zoom, bbox: Option<BoundingBox>) -> Vec<Cluster<'_>> {
        self.clusters.clusters(&self.entries, zoom, bbox)
    }
}

/// The public map, shared by every poller until its time to live runs out: the entries are read
/// from the stores at most once per time to live (concurrent misses wait for one read), and each
/// variant (format × bounding box, or zoom × bounding box for the clusters) is rendered from them
/// once, with its gzip copy, and kept for the same generation of entries.
#[derive(Debug)]
///
/// A change of what the map may show (a device made private, its location hidden, renamed or
/// deleted) [invalidates](MapCache::invalidate) it at once: the entries are keyed by an epoch
/// that the invalidation moves on, so even a read that was already under way when the change
/// happened is never served afterwards.
///
/// Each read is handed the [`MapState`] the one before it left in the same epoch, so only what
/// changed since is read again (a change of a device in this process moves the epoch, so its
/// next read starts afresh).
pub struct MapCache {
    entries: moka::future::Cache<u64, Arc<MapGeneration>>,
    state: Mutex<Option<(u64, MapState)>>,
    rendered: moka::future::Cache<(u64, MapVariant), Arc<Rendered>>,
    generations: AtomicU64,
    epoch: AtomicU64,
    entry_lookups: CacheCounters,
    variant_lookups: CacheCounters,
}

impl MapCache {
    /// A cache whose entries live `ttl`. Lookups count in `entry_lookups` (a miss read the
    /// stores) and `variant_lookups` (a miss rendered a variant); a request that waited for
    /// another's load counts as a hit.
    pub fn new(
        ttl: Duration,
        entry_lookups: CacheCounters,
        variant_lookups: CacheCounters,
    ) -> Self {
        Self {
            entries: moka::future::Cache::builder()
                .max_capacity(1)
                .time_to_live(ttl)
                .build(),
            rendered: moka::future::Cache::builder()
                .max_capacity(MAP_VARIANT_BYTES)
                .weigher(|_, rendered: &Arc<Rendered>| {
                    u32::try_from(rendered.weight()).unwrap_or(u32::MAX)
                })
                .time_to_live(ttl)
                .build(),
            state: Mutex::new(None),
            generations: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            entry_lookups,
            variant_lookups,
        }
    }

    /// Forgets the cached map: the next request reads the stores again.
    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.entries.invalidate_all();
        self.rendered.invalidate_all();
    }

    /// The variant rendered from the current entries: `load` reads the entries when they have
    /// expired, given what the read before it in this epoch left (if any); `render`
    /// renders a variant the current entries do not have yet.
    pub async fn get<L>(
        &self,
        variant: MapVariant,
        load: impl FnOnce(Option<MapState>) -> L,
        render: impl FnOnce(&MapGeneration) -> Result<Rendered, ApiError>,
    ) -> Result<Arc<Rendered>, ApiError>
    where
        L: Future<Output = Result<(Vec<MapEntry>, MapState), ApiError>>,
    {
        let epoch = self.epoch.load(Ordering::Acquire);
        let generation = self
            .entries
            .entry(epoch)
            .or_try_insert_with(async {
                let previous = self.take_state(epoch);
                let (entries, state) = load(previous).await?;
                *lock(&self.state) = Some((epoch, state));
                Ok::<_, ApiError>(Arc::new(MapGeneration {
                    entries,
                    number: self.generations.fetch_add(1, Ordering::Relaxed),
                    clusters: ClusterIndex::default(),
                }))
            })
            .await
            .map_err(ApiError::Shared)?;
        self.entry_lookups.record(!generation.is_fresh());
        let generation = generation.into_value();
        let rendered = self
            .rendered
            .entry((generation.number, variant))
            .or_try_insert_with(async { render(&generation).map(Arc::new) })
            .await
            .map_err(ApiError::Shared)?;
        self.variant_lookups.record(!rendered.is_fresh());
        Ok(rendered.into_value())
    }

    /// What the last read left, if it read in `epoch` (a read that fails leaves nothing: the
    /// next one reads everything).
    fn take_state(&self, epoch: u64) -> Option<MapState> {
        lock(&self.state)
            .take()
            .filter(|(read_in, _)| *read_in == epoch)
            .map(|(_, state)| state)
    }
}

/// Locks `mutex`, also after a panic elsewhere while it was held: the state is only ever
/// replaced whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
