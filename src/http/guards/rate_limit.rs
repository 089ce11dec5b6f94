//! Rate limits (`docs/api.md`, "Rate limits"): uploads per device, public reads per client address.
//!
//! - **Uploads** (`POST /data`, `POST /data/batch`; a batch counts once) are limited per
//!   authenticated device, checked right after its credentials, so a wrong key is a 401 that
//!   costs the device nothing, and before the body is read.
//! - **Public routes** are limited per client address: the TCP peer, or, when the peer is one of
//!   the trusted proxies, the right-most address of `X-Forwarded-For` that is not (found by
//!   [`super::client_address`], which the caller asks first). An IPv6 client counts per /64, the
//!   smallest network a host is handed, so one host cannot multiply its allowance by cycling
//!   through its own addresses.
//! - A rate of 0 turns a limit off. Owner and service routes are never limited.
//!
//! With a rate of R a minute and a burst of B, a key that has been quiet may send B requests at
//! once, then one every 60/R seconds; a refusal says in `Retry-After` how many whole seconds
//! (rounded up, at least 1) until the next request would pass.
//!
//! **Why `governor`.** It is the maintained keyed rate limiter of the Rust ecosystem: GCRA (the
//! generic cell rate algorithm) keeps one 64-bit "theoretical arrival time" per key and decides
//! with a compare-and-swap, without timers or a lock across keys (the keys live in a sharded
//! `DashMap`), and a refusal tells when the next request would conform, which is exactly the
//! `Retry-After` we owe. Its monotonic clock is used, not the app's [`crate::clock::Clock`]:
//! rates are about real elapsed time, and tests use small bursts instead of moving time.
//!
//! **Memory.** A key whose allowance is full again (quiet for B × 60/R seconds: 10 s at both
//! defaults) is indistinguishable from a key never seen; a sweep every [`SWEEP_EVERY`]
//! (`retain_recent`, then `shrink_to_fit`) forgets such keys and gives their memory back. So a
//! limit holds roughly the keys active in the last few seconds, and never more than
//! [`MAX_KEYS`] (plus the requests in flight): once that many are tracked, a flood from more
//! devices or addresses than per-key limits can stop anyway, requests from keys are let through
//! without being tracked until a sweep makes room (a warning is logged). An entry takes well
//! under 100 bytes, so each limit stays below about 10 MB however many keys appear. The sweeper
//! task lives as long as its [`SweeperGuard`].

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota};
use tokio::task::JoinHandle;

use crate::domain::{DeviceUuid, Limit};
use crate::http::guards::client_address::TrustedProxies;
use crate::metrics::ServerMetrics;

/// How often keys whose allowance is full again are forgotten.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The most keys one limit tracks at once.
pub const MAX_KEYS: usize = 100_000;

/// One limit's setting: so many requests a minute, in bursts of so many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests a minute; 0 turns the limit off.
    pub per_minute: u32,
    /// Requests a quiet key may send at once (at least 1).
    pub burst: u32,
}

impl Rate {
    /// No limit.
    pub const OFF: Self = Self {
        per_minute: 0,
        burst: 1,
    };

    /// The governor quota, `None` when the limit is off.
    fn quota(self) -> Option<Quota> {
        let per_minute = NonZeroU32::new(self.per_minute)?;
        let burst = NonZeroU32::new(self.burst).unwrap_or(NonZeroU32::MIN);
        Some(Quota::with_period(Duration::from_secs(60) / per_minute.get())?.allow_burst(burst))
    }
}

/// Every rate-limit setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// Uploads per device.
    pub device: Rate,
    /// Public requests per client address.
    pub public: Rate,
    /// Proxies whose `X-Forwarded-For` names the client ([`super::client_address`]): set beside
    /// the limits because the public limit is the first thing keyed by it.
    pub trusted_proxies: TrustedProxies,
}

/// A refusal: which limit, its setting, and when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The limit.
    pub limit: Limit,
    /// Its setting.
    pub rate: Rate,
    /// Whole seconds until the next request would pass (at least 1).
    pub retry_after_secs: u64,
}

/// The key an address counts under: itself for IPv4, its /64 for IPv6.
fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
    }
}

/// One limit: its keyed limiter and a bound on the keys it holds.
struct Keyed<K: std::hash::Hash + Eq + Clone> {
    limit: Limit,
    rate: Rate,
    limiter: DefaultKeyedRateLimiter<K>,
    /// The keys held after the last sweep plus the checks since (each adds at most one key): an
    /// upper bound of the keys held now that costs no lock to keep.
    at_most: AtomicUsize,
}

impl<K: std::hash::Hash + Eq + Clone> fmt::Debug for Keyed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("limit", &self.limit)
            .field("rate", &self.rate)
            .field("keys", &self.limiter.len())
            .finish()
    }
}

impl<K: std::hash::Hash + Eq + Clone> Keyed<K> {
    fn new(limit: Limit, rate: Rate) -> Option<Self> {
        Some(Self {
            limit,
            rate,
            limiter: DefaultKeyedRateLimiter::dashmap(rate.quota()?),
            at_most: AtomicUsize::new(0),
        })
    }

    /// Counts a request of `key`, or says when to come back.
    fn check(&self, key: &K) -> Result<(), Refusal> {
        let at_most = self
            .at_most
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if at_most > MAX_KEYS && self.limiter.len() >= MAX_KEYS {
            // Full: let it through untracked until a sweep makes room (see the module doc).
            return Ok(());
        }
        self.limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.limiter.clock().now());
            Refusal {
                limit: self.limit,
                rate: self.rate,
                retry_after_secs: whole_seconds(wait),
            }
        })
    }

    /// Forgets the keys whose allowance is full again and releases their memory.
    fn sweep(&self) {
        let before = self.limiter.len();
        if before >= MAX_KEYS {
            tracing::warn!(
                limit = self.limit.as_str(),
                keys = before,
                "a rate limit tracked its maximum of keys; requests past it went unlimited"
            );
        }
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
        self.at_most.store(self.limiter.len(), Ordering::Relaxed);
    }
}

/// `wait` in whole seconds, rounded up, at least 1.
fn whole_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

/// The limits of one process.
#[derive(Debug)]
pub struct RateLimits {
    device: Option<Keyed<DeviceUuid>>,
    public: Option<Keyed<IpAddr>>,
    metrics: Arc<ServerMetrics>,
}

impl RateLimits {
    /// The limits `config` sets; refusals are counted in `metrics`.
    pub fn new(config: &RateLimitConfig, metrics: Arc<ServerMetrics>) -> Self {
        Self {
            device: Keyed::new(Limit::Device, config.device),
            public: Keyed::new(Limit::Public, config.public),
            metrics,
        }
    }

    /// Counts an upload of the (authenticated) `device`.
    pub fn upload(&self, device: DeviceUuid) -> Result<(), Refusal> {
        match &self.device {
            Some(limit) => limit.check(&device).map_err(|refusal| self.refuse(refusal)),
            None => Ok(()),
        }
    }

    /// Counts a public request of `client` (its [`super::client_address`]).
    pub fn public(&self, client: IpAddr) -> Result<(), Refusal> {
        match &self.public {
            Some(limit) => limit
                .check(&address_key(client))
                .map_err(|refusal| self.refuse(refusal)),
            None => Ok(()),
        }
    }

    /// Counts the refusal in the metrics and hands it on (to become a 429).
    fn refuse(&self, refusal: Refusal) -> Refusal {
        self.metrics.rate_limited(refusal.limit);
        refusal
    }

    /// Forgets, in every limit, the keys whose allowance is full again.
    pub fn sweep(&self) {
        if let Some(limit) = &self.device {
            limit.sweep();
        }
        if let Some(limit) = &self.public {
            limit.sweep();
        }
    }

    /// Sweeps every [`SWEEP_EVERY`] until the guard is dropped (nothing to do when every limit
    /// is off). Needs a Tokio runtime.
    pub fn start_sweeper(self: &Arc<Self>) -> SweeperGuard {
        let task = (self.device.is_some() || self.public.is_some()).then(|| {
            let limits = Arc::clone(self);
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(SWEEP_EVERY);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    limits.sweep();
                }
            })
        });
        SweeperGuard { task }
    }
}

/// Stops the sweeper task when dropped.
#[derive(Debug)]
pub struct SweeperGuard {
    task: Option<JoinHandle<()>>,
}

impl Drop for SweeperGuard {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn ipv6_clients_count_per_64() {
        assert_eq!(
            address_key(ip("2001:db8:1:2:3:4:5:6")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(address_key(ip("203.0.113.9")), ip("203.0.113.9"));
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_at_least_one() {
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1001)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(30)), 30);
    }

    #[test]
    fn a_key_whose_allowance_is_full_again_is_forgotten() {
        // One request every 100 µs: a key is quiet again almost at once.
        let limit = Keyed::new(
            Limit::Public,
            Rate {
                per_minute: 600_000,
                burst: 2,
            },
        )
        .expect("a limit");
        assert_eq!(limit.check(&1u32), Ok(()));
        assert_eq!(limit.check(&2u32), Ok(()));
        assert_eq!(limit.limiter.len(), 2);
        std::thread::sleep(Duration::from_millis(5));
        limit.sweep();
        assert_eq!(limit.limiter.len(), 0);
        assert_eq!(limit.at_most.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_burst_then_refusals_per_key() {
        let limit = Keyed::new(
            Limit::Device,
            Rate {
                per_minute: 60,
                burst: 3,
            },
        )
        .expect("a limit");
        for _ in 0..3 {
            assert_eq!(limit.check(&1u32), Ok(()));
        }
        let refusal = limit.check(&1u32).expect_err("the burst is spent");
        assert_eq!(refusal.limit, Limit::Device);
        assert_eq!(refusal.retry_after_secs, 1);
        assert_eq!(limit.check(&2u32), Ok(()), "another key is unaffected");
        assert_eq!(limit.limiter.len(), 2);
        limit.sweep();
        assert!(limit.at_most.load(Ordering::Relaxed) <= 2);
    }

    #[test]
    fn a_full_limit_tracks_no_more_keys() {
        let limit = Keyed::new(
            Limit::Public,
            Rate {
                per_minute: 1,
                burst: 1,
            },
        )
        .expect("a limit");
        for key in 0..MAX_KEYS {
            assert_eq!(limit.check(&key), Ok(()));
        }
        assert_eq!(limit.limiter.len(), MAX_KEYS);
        // Key 0 has spent its burst, but the limit is full: let through, untracked.
        assert_eq!(limit.check(&0), Ok(()));
        assert_eq!(limit.check(&MAX_KEYS), Ok(()));
        assert_eq!(limit.limiter.len(), MAX_KEYS, "no key was added");
    }

    #[test]
    fn a_rate_of_zero_is_no_limit() {
        assert!(Keyed::<u32>::new(Limit::Public, Rate::OFF).is_none());
        assert!(Rate {
            per_minute: 0,
            burst: 5
        }
        .quota()
        .is_none());
    }

    #[test]
    fn the_quota_is_the_rate_and_the_burst() {
        let quota = Rate {
            per_minute: 120,
            burst: 20,
        }
        .quota()
        .expect("a quota");
        assert_eq!(quota.replenish_interval(), Duration::from_millis(500));
        assert_eq!(quota.burst_size().get(), 20);
    }
}
