//! Flags and `AIRQ_*` environment variables, turned into one typed [`Config`].
//!
//! Every flag has an environment variable of the same meaning, so a container is configured by its
//! environment alone. The deployment (embedded or production) is chosen here, by configuration
//! only, never by a rebuild.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub use crate::alerts::AlertsConfig;
pub use crate::auth::OwnerAuth;
use crate::domain::alert::TargetPolicy;
use crate::domain::{OwnerId, RawRetention};

/// How often the raw retention's pruner sweeps (tests set [`Config::retention_sweep`]).
const RETENTION_SWEEP: Duration = Duration::from_secs(60);
pub use crate::http::edge::connections::ConnectionSettings;
pub use crate::http::guards::client_address::TrustedProxies;
pub use crate::http::guards::cors_origins::CorsOrigins;
pub use crate::http::guards::export_slots::ExportLimits;
pub use crate::http::guards::rate_limit::{Rate, RateLimitConfig};
pub use crate::store::batch_writer::BatchConfig;
pub use crate::store::questdb::{QuestDbConfig, TableName};
pub use crate::store::sqlite::FoldConfig;
pub use crate::telemetry::LogFormat;
pub use crate::web::settings::MapSettings;
use crate::web::settings::{self as map_settings, Integrity, WebUrl};

/// `airq`: the air-quality backend.
#[derive(Debug, Parser)]
#[command(name = "airq", version, about)]
pub struct Cli {
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Serve flags, accepted without the `serve` word.
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl Cli {
    /// Parses the command line and the `AIRQ_*` variables, or exits with clap's message.
    ///
    /// clap names a bad value by its flag even when it came from the environment, where a
    /// container's operator set a variable and passed no flag; the message then also names
    /// the variable, so the fix is found where the value was set.
    pub fn parse_or_exit() -> Self {
        use clap::CommandFactory as _;
        Self::try_parse().unwrap_or_else(|mut error| {
            if let Some(variable) = variable_behind(&error, &Self::command()) {
                error.insert(
                    clap::error::ContextKind::Suggested,
                    clap::error::ContextValue::StyledStrs(vec![format!(
                        "the value came from the environment variable {variable}"
                    )
                    .into()]),
                );
            }
            error.exit()
        })
    }
}

/// The environment variable a bad value of `error` came from: the one its argument reads, when
/// that variable is set and the argument's flag is not on the command line.
fn variable_behind(error: &clap::Error, command: &clap::Command) -> Option<String> {
    let clap::error::ContextValue::String(invalid) =
        error.get(clap::error::ContextKind::InvalidArg)?
    else {
        return None;
    };
    let flag = invalid.split_whitespace().next()?;
    let long = flag.strip_prefix("--")?;
    let variable = std::iter::once(command)
        .chain(command.get_subcommands())
        .flat_map(clap::Command::get_arguments)
        .find(|argument| argument.get_long() == Some(long))?
        .get_env()?
        .to_str()?
        .to_owned();
    let on_command_line = std::env::args_os().skip(1).any(|word| {
        word.to_str()
            .is_some_and(|word| word == flag || word.starts_with(&format!("{flag}=")))
    });
    (std::env::var_os(&variable).is_some() && !on_command_line).then_some(variable)
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API (the default).
    Serve(Box<ServeArgs>),
    /// Print a bearer token for OWNER, signed by the data dir's local issuer.
    Token(TokenArgs),
    /// Exit 0 when the server on --listen answers `GET /readyz` with 200 in time (for container
    /// health checks); otherwise exit 1 with the reason on stderr.
    Healthcheck(crate::healthcheck::HealthcheckArgs),
    /// Copy the data directory to DEST while its server runs (a consistent copy: the ingestion
    /// log, then the database through SQLite's online backup); start a server on DEST to restore.
    Backup(BackupArgs),
    /// Copy an embedded data directory (its server stopped) to the production pair: devices and
    /// key hashes into PostgreSQL, readings into QuestDB (or left in the data directory without
    /// --questdb-ilp); resumable, idempotent, checked by counting at the end.
    Migrate(MigrateArgs),
}

/// Flags of `airq migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// The embedded data directory to copy; its server must be stopped.
    #[arg(long, env = "AIRQ_DATA_DIR", default_value = "./airq-data")]
    pub data_dir: PathBuf,
    /// The PostgreSQL database devices and key hashes go to (the one `serve --postgres-url`
    /// will use).
    #[arg(long, env = "AIRQ_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: String,
    /// The QuestDB readings go to, as for `serve --questdb-ilp`; without it (and
    /// --questdb-pg) readings stay in the data directory, and a server started on it with
    /// --postgres-url serves them from there.
    #[arg(
        long,
        env = "AIRQ_QUESTDB_ILP",
        hide_env_values = true,
        requires = "questdb_pg"
    )]
    pub questdb_ilp: Option<String>,
    /// QuestDB's PG-wire URL, as for `serve --questdb-pg`: creates the table and counts the
    /// copied readings.
    #[arg(
        long,
        env = "AIRQ_QUESTDB_PG",
        hide_env_values = true,
        requires = "questdb_ilp"
    )]
    pub questdb_pg: Option<String>,
    /// The QuestDB table readings go to.
    #[arg(long, env = "AIRQ_QUESTDB_TABLE", default_value = "readings", value_parser = TableName::parse)]
    pub questdb_table: TableName,
    /// Copy every reading again, not only those past the progress an earlier run recorded
    /// (nothing doubles: QuestDB deduplicates them).
    #[arg(long)]
    pub from_start: bool,
}

impl From<MigrateArgs> for crate::migrate::Plan {
    fn from(args: MigrateArgs) -> Self {
        Self {
            data_dir: args.data_dir,
            postgres_url: args.postgres_url,
            questdb: match (args.questdb_ilp, args.questdb_pg) {
                (Some(ilp), Some(pg)) => Some(QuestDbConfig {
                    ilp,
                    pg,
                    table: args.questdb_table,
                    // One sender writes the copy, batch after batch; nothing uploads meanwhile.
                    senders: 1,
                    spool: false,
                }),
                _ => None,
            },
            from_start: args.from_start,
        }
    }
}

/// Flags of `airq backup`.
#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// Where the copy goes: a path that does not exist yet, or an empty directory.
    pub dest: PathBuf,
    /// The data directory to copy (its server may be running).
    #[arg(long, env = "AIRQ_DATA_DIR", default_value = "./airq-data")]
    pub data_dir: PathBuf,
}

/// Flags of `airq serve`.
#[derive(Debug, Clone, Args)]
#[command(group(
    clap::ArgGroup::new("external_auth")
        .args(["auth_jwks_url", "auth_hs256_secret", "auth_issuer"])
        .multiple(true)
))]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the bound address is logged).
    #[arg(long, env = "AIRQ_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory for the embedded database and the local token issuer's secret.
    #[arg(long, env = "AIRQ_DATA_DIR", default_value = "./airq-data")]
    pub data_dir: PathBuf,
    /// Keep device metadata in this PostgreSQL database instead of the data dir's SQLite file.
    #[arg(long, env = "AIRQ_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// Keep readings in QuestDB: a questdb-rs ILP configuration such as `http::addr=host:9000;`
    /// (needs --questdb-pg and --postgres-url).
    #[arg(
        long,
        env = "AIRQ_QUESTDB_ILP",
        hide_env_values = true,
        requires = "questdb_pg",
        requires = "postgres_url"
    )]
    pub questdb_ilp: Option<String>,
    /// QuestDB's PG-wire URL for reads, e.g. `postgres://admin:quest@host:8812/qdb`.
    #[arg(
        long,
        env = "AIRQ_QUESTDB_PG",
        requires = "questdb_ilp",
        hide_env_values = true
    )]
    pub questdb_pg: Option<String>,
    /// The QuestDB table holding readings.
    #[arg(long, env = "AIRQ_QUESTDB_TABLE", default_value = "readings", value_parser = TableName::parse)]
    pub questdb_table: TableName,
    /// ILP/HTTP senders to QuestDB: batches flushed at once, each waiting for its acknowledgement
    /// [default: 4, with --questdb-spool 1].
    #[arg(long, env = "AIRQ_QUESTDB_SENDERS", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub questdb_senders: Option<u16>,
    /// Answer uploads once they are durable in a local spool (the data dir's ingestion log,
    /// `ingest/`) and forward them to QuestDB behind, instead of waiting for QuestDB's commit: a
    /// 201 then survives what this host's disk survives, and the data dir must be kept.
    #[arg(long, env = "AIRQ_QUESTDB_SPOOL", requires = "questdb_ilp")]
    pub questdb_spool: bool,
    /// Verify owner tokens against this JWKS document (RS256, ES256, EdDSA) instead of the local issuer.
    #[arg(long, env = "AIRQ_AUTH_JWKS_URL", conflicts_with = "auth_hs256_secret")]
    pub auth_jwks_url: Option<String>,
    /// Verify owner tokens with this shared HS256 secret instead of the local issuer.
    /// At least 32 bytes (RFC 7518 §3.2: a key as long as the hash), so it cannot be guessed.
    #[arg(long, env = "AIRQ_AUTH_HS256_SECRET", hide_env_values = true, value_parser = parse_hs256_secret)]
    pub auth_hs256_secret: Option<String>,
    /// Required `iss` of owner tokens from an external identity provider. Set alone (without
    /// --auth-jwks-url or --auth-hs256-secret), the JWKS URL is discovered from the issuer's
    /// `/.well-known/openid-configuration`, whose `issuer` must be identical to this one.
    #[arg(long, env = "AIRQ_AUTH_ISSUER")]
    pub auth_issuer: Option<String>,
    /// CA certificates (PEM) trusted, instead of the system store and the bundled roots, for the
    /// identity provider's HTTPS (discovery and JWKS).
    #[arg(long, env = "AIRQ_AUTH_CA_FILE", requires = "external_auth")]
    pub auth_ca_file: Option<PathBuf>,
    /// Required `aud` of owner tokens from an external identity provider.
    #[arg(long, env = "AIRQ_AUTH_AUDIENCE", requires = "external_auth")]
    pub auth_audience: Option<String>,
    /// Clock skew tolerated when checking the `exp` and `nbf` of owner tokens, in seconds.
    #[arg(long, env = "AIRQ_AUTH_LEEWAY_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub auth_leeway_secs: u64,
    /// The batch writer flushes once this many readings are buffered.
    #[arg(long, env = "AIRQ_BATCH_MAX_ROWS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch_max_rows: u32,
    /// How long the batch writer waits for more readings after a batch's first one. 0 (the
    /// default) flushes as soon as nothing more is queued: readings that arrive during a flush
    /// form the next batch, so batches grow with the load without delaying a quiet one. While a
    /// written batch still waits for its sync, a batch below `batch_max_rows` waits for it too.
    #[arg(long, env = "AIRQ_BATCH_MAX_DELAY_MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub batch_max_delay_ms: u64,
    /// Uploads waiting for the batch writer before further uploads wait for room (backpressure).
    /// An upload takes one place whatever it holds: a batch of 1,000 readings takes one.
    #[arg(long, env = "AIRQ_BATCH_QUEUE", default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_queue: u32,
    /// How often a failed flush is retried before its uploads are answered with 500.
    #[arg(long, env = "AIRQ_FLUSH_RETRIES", default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub flush_retries: u32,
    /// Pause before the first retry of a failed flush; doubled for each further retry.
    #[arg(long, env = "AIRQ_FLUSH_RETRY_BACKOFF_MS", default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub flush_retry_backoff_ms: u64,
    /// How long the embedded store waits for a lock held by another connection.
    #[arg(long, env = "AIRQ_SQLITE_BUSY_TIMEOUT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub sqlite_busy_timeout_ms: u64,
    /// The embedded store folds appended readings into its indexes and rollups at the latest
    /// this long after the previous fold…
    #[arg(long, env = "AIRQ_FOLD_INTERVAL_MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub fold_interval_ms: u64,
    /// …or as soon as this many readings wait to be folded.
    #[arg(long, env = "AIRQ_FOLD_BATCH_ROWS", default_value_t = 65_536, value_parser = clap::value_parser!(i64).range(1..))]
    pub fold_batch_rows: i64,
    /// Bytes after which the ingestion log (embedded store and QuestDB spool) appends to its
    /// next segment file.
    #[arg(long, env = "AIRQ_LOG_SEGMENT_BYTES", default_value_t = crate::store::ingest_log::SEGMENT_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub log_segment_bytes: u64,
    /// How long the public map is served from the cache.
    #[arg(long, env = "AIRQ_MAP_CACHE_TTL_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    pub map_cache_ttl_ms: u64,
    /// Uploads a device may make a minute (`POST /data` or `/data/batch`; a batch counts once);
    /// 0 turns the limit off.
    #[arg(long, env = "AIRQ_RATE_DEVICE_PER_MIN", default_value_t = 120, value_parser = clap::value_parser!(u32).range(0..=MAX_RATE))]
    pub rate_device_per_min: u32,
    /// Uploads a device that has been quiet may make at once.
    #[arg(long, env = "AIRQ_RATE_DEVICE_BURST", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_device_burst: u32,
    /// Requests to public routes a client address may make a minute; 0 turns the limit off.
    #[arg(long, env = "AIRQ_RATE_PUBLIC_PER_MIN", default_value_t = 600, value_parser = clap::value_parser!(u32).range(0..=MAX_RATE))]
    pub rate_public_per_min: u32,
    /// Requests to public routes a client address that has been quiet may make at once.
    #[arg(long, env = "AIRQ_RATE_PUBLIC_BURST", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_public_burst: u32,
    /// Proxies (comma-separated CIDR networks, IPv4 or IPv6) whose `X-Forwarded-For` names the
    /// client a public request counts for; from any other peer the header is ignored.
    #[arg(long, env = "AIRQ_TRUSTED_PROXIES", default_value = "", value_parser = TrustedProxies::parse)]
    pub trusted_proxies: TrustedProxies,
    /// A request body must arrive in full within this time after the server starts reading it,
    /// else 408.
    #[arg(long, env = "AIRQ_BODY_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_ms: u64,
    /// At shutdown, in-flight requests get this long to finish; connections still open then are
    /// closed; the batch writer then gets as long again (at least 5 s) for its final commit, so
    /// the process ends within this bound plus the writer's (the larger of this bound and 5 s)
    /// whatever clients and the disk do.
    #[arg(long, env = "AIRQ_SHUTDOWN_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub shutdown_timeout_ms: u64,
    /// Raw readings are kept this many days, then dropped in the background; rollups stay, so
    /// timelines and custom ranges answer for any period, but raw exports and the current
    /// snapshot of a device silent for longer do not. 0 keeps every raw reading (the embedded
    /// store grows by about 165 bytes a reading for good). Embedded reading store only.
    #[arg(long, env = "AIRQ_RAW_RETENTION_DAYS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=36_600))]
    pub raw_retention_days: u32,
    /// Alert webhooks may target loopback, private, link-local and metadata addresses, and plain
    /// `http://` URLs (tests, receivers on a trusted network); off, such targets are refused
    /// when a rule is written and at every delivery (no SSRF).
    #[arg(long, env = "AIRQ_ALERTS_ALLOW_PRIVATE_TARGETS")]
    pub alerts_allow_private_targets: bool,
    /// The wait after an alert webhook's first failed attempt; doubled at each further one (at
    /// most an hour), for a day after the event.
    #[arg(long, env = "AIRQ_ALERTS_RETRY_BASE_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub alerts_retry_base_ms: u64,
    /// How long one alert webhook attempt may take, connection included; then it counts as
    /// failed and is retried.
    #[arg(long, env = "AIRQ_ALERTS_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub alerts_timeout_ms: u64,
    /// Alert events are recorded in the outbox but not sent until a start without this flag (a
    /// maintenance window of the receivers, a copy of production data, a fuzzing run).
    #[arg(long, env = "AIRQ_ALERTS_PAUSED")]
    pub alerts_paused: bool,
    /// A connection whose client reads nothing of its answer for this long is closed (a
    /// streamed export or a large feed nobody reads would hold it, and its memory, forever).
    #[arg(long, env = "AIRQ_WRITE_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub write_timeout_ms: u64,
    /// Raw exports (`…/readings`) one client address may stream at once; past it, 429.
    #[arg(long, env = "AIRQ_EXPORTS_PER_CLIENT", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub exports_per_client: u32,
    /// Raw exports the server streams at once, all clients together; past it, 503.
    #[arg(long, env = "AIRQ_EXPORTS_MAX", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub exports_max: u32,
    /// Web origins (comma-separated, exact `scheme://host[:port]`) whose browser pages may call
    /// owner routes (CORS); empty: none, owner routes answer no cross-origin request.
    #[arg(long, env = "AIRQ_CORS_ORIGINS", default_value = "", value_parser = CorsOrigins::parse)]
    pub cors_origins: CorsOrigins,
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    #[arg(long, env = "AIRQ_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// The folder of the map library (Leaflet 1.9) the map and device pages load `leaflet.js`
    /// and `leaflet.css` from: an http(s) URL or a path on this server, ending with `/`.
    #[arg(long, env = "AIRQ_MAP_LIBRARY_URL", default_value = map_settings::DEFAULT_LIBRARY_URL, value_parser = map_settings::parse_library_url)]
    pub map_library_url: WebUrl,
    /// Subresource integrity of `leaflet.js` (empty: loaded unchecked).
    #[arg(long, env = "AIRQ_MAP_SCRIPT_INTEGRITY", default_value = map_settings::DEFAULT_SCRIPT_INTEGRITY, value_parser = Integrity::parse)]
    pub map_script_integrity: Integrity,
    /// Subresource integrity of `leaflet.css` (empty: loaded unchecked).
    #[arg(long, env = "AIRQ_MAP_STYLE_INTEGRITY", default_value = map_settings::DEFAULT_STYLE_INTEGRITY, value_parser = Integrity::parse)]
    pub map_style_integrity: Integrity,
    /// The map tiles' URL template, with `{z}`, `{x}` and `{y}` (and optionally `{s}`, `{r}`).
    #[arg(long, env = "AIRQ_MAP_TILE_URL", default_value = map_settings::DEFAULT_TILE_URL, value_parser = map_settings::parse_tile_url)]
    pub map_tile_url: WebUrl,
    /// The tiles' credit shown on the map, as HTML (the tile provider's terms say what it must be).
    #[arg(long, env = "AIRQ_MAP_TILE_ATTRIBUTION", default_value = map_settings::DEFAULT_TILE_ATTRIBUTION)]
    pub map_tile_attribution: String,
    /// Log lines as `text` or as `json` (one object per line); both go to stderr, filtered by
    /// `RUST_LOG`.
    #[arg(long, env = "AIRQ_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The highest rate a limit accepts: one request a microsecond.
const MAX_RATE: i64 = 60_000_000;

/// Flags of `airq token`.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// The owner (`sub` of the token): 1 to 255 bytes, no control characters (the server
    /// refuses any other `sub`, so no such token is minted).
    #[arg(value_parser = parse_owner)]
    pub owner: OwnerId,
    /// Lifetime: a number with a unit, s, m, h or d (`90m`, `30d`).
    #[arg(long, default_value = "30d", value_parser = parse_ttl)]
    pub ttl: Duration,
    /// The data directory whose local issuer signs the token (unless a shared secret is given).
    #[arg(long, env = "AIRQ_DATA_DIR", default_value = "./airq-data")]
    pub data_dir: PathBuf,
    /// Sign with this HS256 secret, the one the servers verify with (`serve
    /// --auth-hs256-secret`), instead of the data directory's: replicas without an identity
    /// provider then share one issuer.
    #[arg(long, env = "AIRQ_AUTH_HS256_SECRET", hide_env_values = true, value_parser = parse_hs256_secret)]
    pub auth_hs256_secret: Option<String>,
    /// The `iss` the servers require (`serve --auth-issuer`); only with --auth-hs256-secret.
    #[arg(long, env = "AIRQ_AUTH_ISSUER", requires = "auth_hs256_secret")]
    pub auth_issuer: Option<String>,
    /// The `aud` the servers require (`serve --auth-audience`); only with --auth-hs256-secret.
    #[arg(long, env = "AIRQ_AUTH_AUDIENCE", requires = "auth_hs256_secret")]
    pub auth_audience: Option<String>,
}

fn parse_hs256_secret(text: &str) -> Result<String, String> {
    if text.len() < 32 {
        return Err(format!(
            "an HS256 secret needs at least 32 bytes (RFC 7518 §3.2); this one has {}",
            text.len()
        ));
    }
    Ok(text.to_owned())
}

fn parse_owner(text: &str) -> Result<OwnerId, String> {
    OwnerId::parse(text).ok_or_else(|| {
        format!(
            "an owner has 1 to {} bytes and no control characters",
            OwnerId::MAX_LEN
        )
    })
}

/// Parses `30d`, `12h`, `90m`, `45s` or a bare number of seconds.
fn parse_ttl(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 30d, 12h, 90m or 45s"))?;
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        other => return Err(format!("unknown unit `{other}`: use s, m, h or d")),
    };
    match amount.checked_mul(unit_secs) {
        Some(secs) if secs > 0 => Ok(Duration::from_secs(secs)),
        _ => Err(format!("`{text}` is not a positive duration that fits")),
    }
}

/// Everything `airq serve` needs, typed.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listening address.
    pub listen: SocketAddr,
    /// Data directory (embedded database, local issuer secret).
    pub data_dir: PathBuf,
    /// Device metadata in PostgreSQL instead of SQLite.
    pub postgres_url: Option<String>,
    /// Readings in QuestDB instead of SQLite (needs `postgres_url`).
    pub questdb: Option<QuestDbConfig>,
    /// Owner token verification.
    pub owner_auth: OwnerAuth,
    /// Required `iss` for external tokens.
    pub auth_issuer: Option<String>,
    /// Required `aud` for external tokens.
    pub auth_audience: Option<String>,
    /// CAs trusted for the identity provider's HTTPS instead of the public ones.
    pub auth_ca_file: Option<PathBuf>,
    /// Clock skew tolerated on the `exp` and `nbf` of owner tokens.
    pub auth_leeway: Duration,
    /// Batch writer tuning.
    pub batch: BatchConfig,
    /// SQLite lock wait.
    pub sqlite_busy_timeout: Duration,
    /// When the embedded store folds.
    pub fold: FoldConfig,
    /// Bytes of an ingestion log segment.
    pub log_segment_bytes: u64,
    /// Public map cache lifetime.
    pub map_cache_ttl: Duration,
    /// Upload and public rate limits.
    pub rate_limits: RateLimitConfig,
    /// Deadline for a whole request body.
    pub body_timeout: Duration,
    /// Open connections and their end at shutdown.
    pub connections: ConnectionSettings,
    /// How many raw exports may stream at once.
    pub exports: ExportLimits,
    /// How long raw readings are kept.
    pub raw_retention: RawRetention,
    /// How often raw readings past the retention are looked for.
    pub retention_sweep: Duration,
    /// Origins allowed to call owner routes from a browser.
    pub cors_origins: CorsOrigins,
    /// Where the pages' map library and tiles come from.
    pub map: MapSettings,
    /// Alert rules' evaluation and delivery.
    pub alerts: AlertsConfig,
}

impl From<ServeArgs> for Config {
    fn from(args: ServeArgs) -> Self {
        let owner_auth = match (
            args.auth_jwks_url,
            args.auth_hs256_secret,
            &args.auth_issuer,
        ) {
            (Some(url), _, _) => OwnerAuth::Jwks(url),
            (None, Some(secret), _) => OwnerAuth::SharedSecret(secret),
            (None, None, Some(issuer)) => OwnerAuth::Discovery(issuer.clone()),
            (None, None, None) => OwnerAuth::Local,
        };
        Self {
            listen: args.listen,
            data_dir: args.data_dir,
            postgres_url: args.postgres_url,
            questdb: match (args.questdb_ilp, args.questdb_pg) {
                (Some(ilp), Some(pg)) => Some(QuestDbConfig {
                    ilp,
                    pg,
                    table: args.questdb_table,
                    senders: args.questdb_senders.map_or(
                        if args.questdb_spool {
                            crate::store::questdb::DEFAULT_SPOOL_SENDERS
                        } else {
                            crate::store::questdb::DEFAULT_SENDERS
                        },
                        usize::from,
                    ),
                    spool: args.questdb_spool,
                }),
                _ => None,
            },
            owner_auth,
            auth_issuer: args.auth_issuer,
            auth_audience: args.auth_audience,
            auth_ca_file: args.auth_ca_file,
            auth_leeway: Duration::from_secs(args.auth_leeway_secs),
            batch: BatchConfig {
                max_rows: args.batch_max_rows as usize,
                max_delay: Duration::from_millis(args.batch_max_delay_ms),
                queue: args.batch_queue as usize,
                retries: args.flush_retries,
                retry_backoff: Duration::from_millis(args.flush_retry_backoff_ms),
            },
            sqlite_busy_timeout: Duration::from_millis(args.sqlite_busy_timeout_ms),
            fold: FoldConfig {
                interval: Duration::from_millis(args.fold_interval_ms),
                rows: args.fold_batch_rows,
            },
            log_segment_bytes: args.log_segment_bytes,
            map_cache_ttl: Duration::from_millis(args.map_cache_ttl_ms),
            rate_limits: RateLimitConfig {
                device: Rate {
                    per_minute: args.rate_device_per_min,
                    burst: args.rate_device_burst,
                },
                public: Rate {
                    per_minute: args.rate_public_per_min,
                    burst: args.rate_public_burst,
                },
                trusted_proxies: args.trusted_proxies,
            },
            body_timeout: Duration::from_millis(args.body_timeout_ms),
            connections: ConnectionSettings {
                max_open: args.max_connections as usize,
                shutdown_timeout: Duration::from_millis(args.shutdown_timeout_ms),
                write_timeout: Duration::from_millis(args.write_timeout_ms),
            },
            exports: ExportLimits {
                per_client: args.exports_per_client,
                overall: args.exports_max,
            },
            raw_retention: RawRetention::days(args.raw_retention_days),
            retention_sweep: RETENTION_SWEEP,
            alerts: AlertsConfig {
                policy: TargetPolicy {
                    allow_private: args.alerts_allow_private_targets,
                },
                retry_base: Duration::from_millis(args.alerts_retry_base_ms),
                timeout: Duration::from_millis(args.alerts_timeout_ms),
                paused: args.alerts_paused,
                ..AlertsConfig::default()
            },
            cors_origins: args.cors_origins,
            map: MapSettings {
                library_url: args.map_library_url,
                script_integrity: args.map_script_integrity,
                style_integrity: args.map_style_integrity,
                tile_url: args.map_tile_url,
                tile_attribution: args.map_tile_attribution,
            },
        }
    }
}

/// Serve flags alone, so [`Config::new`] shares clap's defaults instead of repeating them.
#[derive(Debug, Parser)]
struct ServeOnly {
    #[command(flatten)]
    serve: ServeArgs,
}

impl Config {
    /// The defaults of `airq serve` (environment included) with the given address and data
    /// directory.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        let mut args = ServeOnly::parse_from(["airq"]).serve;
        args.listen = listen;
        args.data_dir = data_dir;
        args.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_auth(flags: &[&str]) -> OwnerAuth {
        let args = ServeOnly::parse_from(std::iter::once("airq").chain(flags.iter().copied()));
        Config::from(args.serve).owner_auth
    }

    #[test]
    fn an_issuer_alone_discovers_its_keys_and_beside_a_key_source_only_checks_iss() {
        let issuer = "https://idp.example/realms/airq";
        assert!(matches!(
            owner_auth(&["--auth-issuer", issuer]),
            OwnerAuth::Discovery(ref discovered) if discovered == issuer
        ));
        assert!(matches!(
            owner_auth(&[
                "--auth-issuer",
                issuer,
                "--auth-jwks-url",
                "https://idp.example/keys"
            ]),
            OwnerAuth::Jwks(_)
        ));
        assert!(matches!(
            owner_auth(&[
                "--auth-issuer",
                issuer,
                "--auth-hs256-secret",
                "a shared secret of 32 bytes or more"
            ]),
            OwnerAuth::SharedSecret(_)
        ));
    }

    fn questdb(flags: &[&str]) -> Option<QuestDbConfig> {
        let pair = [
            "--postgres-url",
            "postgres://127.0.0.1/airq",
            "--questdb-ilp",
            "http::addr=127.0.0.1:9000;",
            "--questdb-pg",
            "postgres://admin:quest@127.0.0.1:8812/qdb",
        ];
        let flags = std::iter::once("airq")
            .chain(pair)
            .chain(flags.iter().copied());
        Config::from(ServeOnly::try_parse_from(flags).ok()?.serve).questdb
    }

    #[test]
    fn the_spool_forwards_through_one_sender_unless_told() {
        let direct = questdb(&[]).map(|config| (config.senders, config.spool));
        assert_eq!(
            direct,
            Some((crate::store::questdb::DEFAULT_SENDERS, false))
        );
        let spooled = questdb(&["--questdb-spool"]).map(|config| (config.senders, config.spool));
        assert_eq!(spooled, Some((1, true)));
        let told = questdb(&["--questdb-spool", "--questdb-senders", "3"]);
        assert_eq!(told.map(|config| config.senders), Some(3));
    }

    #[test]
    fn log_segments_of_no_bytes_are_refused() {
        let segment_bytes = |flags: &[&str]| {
            ServeOnly::try_parse_from(std::iter::once("airq").chain(flags.iter().copied()))
                .map(|parsed| Config::from(parsed.serve).log_segment_bytes)
                .ok()
        };
        assert_eq!(
            segment_bytes(&[]),
            Some(crate::store::ingest_log::SEGMENT_BYTES)
        );
        assert_eq!(segment_bytes(&["--log-segment-bytes", "4096"]), Some(4096));
        assert_eq!(segment_bytes(&["--log-segment-bytes", "0"]), None);
    }

    #[test]
    fn the_spool_needs_questdb() {
        let flags = ["airq", "--questdb-spool"];
        assert!(ServeOnly::try_parse_from(flags).is_err());
    }

    #[test]
    fn ttl_accepts_units_and_bare_seconds() {
        assert_eq!(parse_ttl("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_ttl("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_ttl("45"), Ok(Duration::from_secs(45)));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("3w").is_err());
        assert!(parse_ttl("d").is_err());
    }
}
