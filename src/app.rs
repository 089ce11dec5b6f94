//! Wiring: configuration in, a bound server out, and the lifetimes of everything in between.
//!
//! [`Application::build`] opens the stores, the authenticator, the batch writer and the listener,
//! so a process that cannot serve fails before it claims to. [`Application::run_until`] serves
//! until the given future completes, then shuts down in order: stop accepting, let in-flight
//! requests finish (closing the connections still open after the shutdown timeout), then let the
//! batch writer commit everything it accepted, then return.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::alerts::{self, AlertsGuard};
use crate::auth::local::LocalIssuerError;
use crate::auth::{Authenticator, JwksError, KeyCache, LocalIssuer, TokenRules};
use crate::clock::Clock;
use crate::config::Config;
use crate::data_dir::{DataDirError, DataDirLock};
use crate::http::edge::connections::ConnectionSettings;
use crate::http::edge::server;
use crate::http::encodings::cacheable::MapCache;
use crate::http::guards::export_slots::ExportSlots;
use crate::http::guards::rate_limit::{RateLimits, SweeperGuard};
use crate::http::AppState;
use crate::metrics::{CacheName, ServerMetrics};
use crate::store::batch_writer::{BatchWriter, WriterGuard};
use crate::store::ingest_log::IngestLog;
use crate::store::postgres::listener::{self, CredentialEvents, ListenerGuard};
use crate::store::postgres::{self, BoundedPool, PostgresAlerts, PostgresDevices};
use crate::store::questdb;
use crate::store::retention::{self, PrunerGuard};
use crate::store::sqlite::{
    Sqlite, SqliteAlerts, SqliteDevices, SqliteRawPruner, SqliteReadingSink, SqliteReadings,
};
use crate::store::{AlertStore, DeviceStore, RawPruner, ReadingSink, ReadingStore, StoreError};
use crate::telemetry::chain;
use crate::tls::Roots;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listening address could not be bound.
    #[error("binding {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A store could not be opened.
    #[error("opening the store")]
    Store(#[from] StoreError),
    /// The PostgreSQL device store could not be reached or set up.
    #[error("connecting to PostgreSQL (--postgres-url, AIRQ_POSTGRES_URL)")]
    Postgres(#[source] StoreError),
    /// The QuestDB reading store could not be reached or set up.
    #[error("opening QuestDB (--questdb-pg, AIRQ_QUESTDB_PG; --questdb-ilp, AIRQ_QUESTDB_ILP)")]
    QuestDb(#[source] StoreError),
    /// The local token issuer could not be opened.
    #[error("opening the local token issuer")]
    Issuer(#[from] LocalIssuerError),
    /// The identity provider configuration is unusable.
    #[error("configuring the identity provider")]
    Jwks(#[from] JwksError),
    /// Another server holds the data directory, or it cannot be locked.
    #[error("locking the data directory")]
    DataDir(#[from] DataDirError),
    /// The batch writer thread could not be started.
    #[error("starting the batch writer")]
    Writer(#[source] std::io::Error),
    /// The alert webhooks' HTTPS client could not be set up.
    #[error("setting up the alert webhooks' HTTPS client")]
    Alerts(#[source] crate::tls::TlsError),
}

/// A server that is bound and ready to run.
#[derive(Debug)]
pub struct Application {
    socket: TcpListener,
    address: SocketAddr,
    state: Arc<AppState>,
    writer: WriterGuard,
    connections: ConnectionSettings,
    /// Cross-process credential invalidation (PostgreSQL only); stops when dropped.
    _listener: Option<ListenerGuard>,
    /// Drops raw readings past the retention (when one is set); stops when dropped.
    _pruner: Option<PrunerGuard>,
    /// Forgets idle rate-limit keys; stops when dropped.
    _sweeper: SweeperGuard,
    /// Evaluates alert rules and delivers their events; stops when dropped.
    _alerts: AlertsGuard,
    /// This server's claim on its data directory; dropped last, after the stores it guards.
    _data_dir: DataDirLock,
    /// What the start log tells a person: where the data lives, and whether `airq token` mints
    /// tokens this server accepts.
    greeting: Greeting,
}

impl Application {
    /// Opens everything `config` names and binds the listener.
    pub async fn build(config: Config, clock: Arc<dyn Clock>) -> Result<Self, StartError> {
        let data_dir = DataDirLock::acquire(&config.data_dir)?;
        data_dir.check_format(
            config.data_dir.join(Sqlite::FILE).exists()
                || config.data_dir.join(IngestLog::DIR).exists(),
        )?;
        let issuer = LocalIssuer::open(&config.data_dir)?;
        let rules = TokenRules {
            issuer: config.auth_issuer.clone(),
            audience: config.auth_audience.clone(),
            leeway: config.auth_leeway,
        };
        let roots = Roots::from_file(config.auth_ca_file.as_deref());
        let auth = Authenticator::new(&config.owner_auth, &issuer, rules, &roots)?;
        match auth.warm_up().await {
            Err(error) if error.is_misconfiguration() => return Err(error.into()),
            Err(error) => {
                tracing::warn!(error = %chain(&error), "identity provider keys not fetched yet; retrying on demand");
            }
            Ok(()) => {}
        }
        let metrics = Arc::new(ServerMetrics::default());
        let map = Arc::new(MapCache::new(
            config.map_cache_ttl,
            metrics.cache(CacheName::Map),
            metrics.cache(CacheName::MapVariants),
        ));
        // SQLite is opened only when a store lives there, and then once for both.
        let mut embedded: Option<Arc<Sqlite>> = None;
        let mut sqlite = || -> Result<Arc<Sqlite>, StoreError> {
            match &embedded {
                Some(db) => Ok(Arc::clone(db)),
                None => {
                    let db = Sqlite::open(
                        &config.data_dir,
                        config.sqlite_busy_timeout,
                        config.log_segment_bytes,
                    )?;
                    Ok(Arc::clone(embedded.insert(db)))
                }
            }
        };
        // Alert rules live beside the devices: their rows reference the devices' and leave with
        // them.
        let (devices, device_keys, alert_store, postgres) = match &config.postgres_url {
            Some(url) => {
                let (devices, keys, pool, listener) =
                    postgres_devices(url, Arc::clone(&map), &metrics).await?;
                let alert_store: Arc<dyn AlertStore> = Arc::new(PostgresAlerts::new(pool.clone()));
                (devices, keys, alert_store, Some((pool, listener)))
            }
            None => {
                let db = sqlite()?;
                let devices: Arc<dyn DeviceStore> = Arc::new(SqliteDevices::new(Arc::clone(&db)));
                let keys = Arc::new(KeyCache::new(
                    Arc::clone(&devices),
                    true,
                    metrics.cache(CacheName::DeviceKeys),
                ));
                let alert_store: Arc<dyn AlertStore> = Arc::new(SqliteAlerts::new(db));
                (devices, keys, alert_store, None)
            }
        };
        let mut pruner: Option<Arc<dyn RawPruner>> = None;
        let (sinks, readings): (Vec<Box<dyn ReadingSink>>, Arc<dyn ReadingStore>) =
            match (&config.questdb, &postgres) {
                (Some(questdb), Some((pool, _))) => {
                    let opened = questdb::open(
                        questdb,
                        pool.clone(),
                        (&config.data_dir, config.log_segment_bytes),
                        config.raw_retention,
                    )
                    .await
                    .map_err(StartError::QuestDb)?;
                    if let Some(spool) = opened.spool {
                        metrics.sample_spool_backlog(move || spool.backlog());
                    }
                    (opened.sinks, Arc::new(opened.readings))
                }
                (Some(_), None) => {
                    return Err(StartError::Store(StoreError::Config(
                        "readings in QuestDB need devices in PostgreSQL: set AIRQ_POSTGRES_URL"
                            .into(),
                    )))
                }
                (None, _) => {
                    let db = sqlite()?;
                    let sink = SqliteReadingSink::open(Arc::clone(&db), config.fold)?;
                    metrics.sample_fold_backlog(sink.backlog_rows());
                    pruner = Some(Arc::new(SqliteRawPruner::new(Arc::clone(&db))));
                    (
                        vec![Box::new(sink) as Box<dyn ReadingSink>],
                        Arc::new(SqliteReadings::new(db)),
                    )
                }
            };
        let pruner = match (pruner, config.raw_retention.days_kept()) {
            (_, None) => None,
            (Some(pruner), Some(_)) => retention::start(
                pruner,
                config.raw_retention,
                Arc::clone(&clock),
                config.retention_sweep,
            ),
            // QuestDB drops raw partitions itself, by the table's TTL (`questdb::open`).
            (None, Some(_)) => None,
        };
        let (batch_writer, writer) = BatchWriter::start(sinks, config.batch, Arc::clone(&metrics))
            .map_err(StartError::Writer)?;
        let (alerts, alerts_guard) = alerts::start(
            alert_store,
            Arc::clone(&devices),
            Arc::clone(&readings),
            Arc::clone(&clock),
            config.alerts,
            Arc::clone(&metrics),
        )
        .map_err(StartError::Alerts)?;
        let limits = Arc::new(RateLimits::new(&config.rate_limits, Arc::clone(&metrics)));
        let sweeper = limits.start_sweeper();
        let state = Arc::new(AppState {
            auth,
            device_keys,
            devices,
            readings,
            alerts,
            writer: batch_writer,
            map,
            map_ttl: config.map_cache_ttl,
            limits,
            exports: ExportSlots::new(config.exports),
            raw_retention: config.raw_retention,
            metrics,
            clock,
            body_timeout: config.body_timeout,
            trusted_proxies: config.rate_limits.trusted_proxies.clone(),
            cors_origins: config.cors_origins.clone(),
            map_settings: config.map.clone(),
        });
        let bind_error = |source| StartError::Bind {
            address: config.listen,
            source,
        };
        let socket = TcpListener::bind(config.listen).await.map_err(bind_error)?;
        let address = socket.local_addr().map_err(bind_error)?;
        Ok(Self {
            socket,
            address,
            state,
            writer,
            connections: config.connections,
            _listener: postgres.map(|(_, listener)| listener),
            _pruner: pruner,
            _sweeper: sweeper,
            _alerts: alerts_guard,
            _data_dir: data_dir,
            greeting: Greeting {
                data_dir: config.data_dir.clone(),
                local_tokens: matches!(config.owner_auth, crate::auth::OwnerAuth::Local),
            },
        })
    }

    /// The bound address (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Serves until `shutdown` completes, then drains in-flight requests and the batch writer.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) {
        self.greeting.log(self.address);
        // `serve` drops the last handle to the state, and with it the batch writer's queue, once
        // every connection is done (or closed after the shutdown timeout); the writer then
        // commits what it holds and stops.
        server::serve(self.socket, self.state, self.connections, shutdown).await;
        let bound = self.connections.shutdown_timeout.max(WRITER_DRAIN_MIN);
        if self.writer.join(bound).await {
            tracing::info!("airq stopped");
        } else {
            // The writer may still append to the log until the process ends: the data directory
            // stays locked until then, so no second server opens it meanwhile.
            std::mem::forget(self._data_dir);
        }
    }
}

/// The start log's facts for a person reading it.
#[derive(Debug)]
struct Greeting {
    data_dir: std::path::PathBuf,
    local_tokens: bool,
}

impl Greeting {
    /// Names the URL, the version and the data directory, and how to mint an owner token when
    /// the data directory's issuer signs them.
    fn log(&self, address: SocketAddr) {
        let url = format!("http://{address}/");
        tracing::info!(
            %address,
            %url,
            version = env!("CARGO_PKG_VERSION"),
            data_dir = %self.data_dir.display(),
            "airq listening on {url} (the front page links the map, the API and the health checks)"
        );
        if self.local_tokens {
            tracing::info!(
                "owner tokens: `airq token OWNER --data-dir {}` prints one this server accepts",
                self.data_dir.display()
            );
        }
    }
}

/// The least time the batch writer gets to commit what it holds at shutdown, once the
/// connections are closed (it gets the shutdown timeout when that is longer).
const WRITER_DRAIN_MIN: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a start waits for the credential listener before serving without it.
const LISTENER_START: std::time::Duration = std::time::Duration::from_secs(5);

/// The PostgreSQL device store, a credential cache that distrusts itself until the cross-process
/// listener is up, the pool (QuestDB's sink takes receipt ids from it) and that listener.
async fn postgres_devices(
    url: &str,
    map: Arc<MapCache>,
    metrics: &ServerMetrics,
) -> Result<
    (
        Arc<dyn DeviceStore>,
        Arc<KeyCache>,
        BoundedPool,
        ListenerGuard,
    ),
    StartError,
> {
    let (pool, target) = postgres::connect(url).await.map_err(StartError::Postgres)?;
    let devices: Arc<dyn DeviceStore> = Arc::new(PostgresDevices::new(pool.clone()));
    let keys = Arc::new(KeyCache::new(
        Arc::clone(&devices),
        false,
        metrics.cache(CacheName::DeviceKeys),
    ));
    let evictions = Arc::clone(&keys);
    let (listening, mut listened) = tokio::sync::watch::channel(false);
    let listener = listener::spawn(
        target,
        Arc::new(move |event| {
            // Every announced change (rotation, deletion, a new name or flags) may change what
            // the public map shows, and a missed announcement may have too.
            map.invalidate();
            match event {
                CredentialEvents::Trust => {
                    evictions.reset(true);
                    listening.send_replace(true);
                }
                CredentialEvents::Distrust => evictions.reset(false),
                CredentialEvents::Evict(device_id) => evictions.evict(&device_id),
            }
        }),
    );
    // Serving before the listener is up would work (uncached), but its arrival would then empty
    // the map's cache under the first clients; waiting a moment for it makes the start clean.
    if tokio::time::timeout(LISTENER_START, listened.wait_for(|up| *up))
        .await
        .is_err()
    {
        tracing::warn!(
            "the credential listener is not up yet; serving with the key cache off until it is"
        );
    }
    Ok((devices, keys, pool, listener))
}
