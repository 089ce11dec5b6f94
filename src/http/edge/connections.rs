//! The server's open connections: how many may be open at once, and how they end at shutdown.
//!
//! Every connection is a task in one [`JoinSet`], holding a permit of a [`Semaphore`] of
//! [`ConnectionSettings::max_open`] permits for as long as it lives. The accept loop takes a
//! permit *before* it accepts, so past the cap new connections wait in the kernel's listen backlog
//! instead of being served, costing the server nothing but a socket there; serving resumes as
//! connections close. A connection's memory is bounded by the server's buffer limits, so the cap
//! bounds the memory of all connections together.
//!
//! Shutdown asks every connection to close gracefully: an idle keep-alive connection closes at
//! once, a busy one after its current response. Whatever is still open after
//! [`ConnectionSettings::shutdown_timeout`] — a client that never finishes its body, never reads
//! its answer — is aborted. That is what lets the process end within its bound whatever clients
//! do: a connection task holds the shared state, and with it the batch writer's queue, and the
//! writer drains and stops only once the last of them is gone.

use std::fmt::Display;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::{GracefulConnection, GracefulShutdown};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// The address a request's connection came from, in the request's extensions (the client's
/// own address may differ behind a proxy: [`client_address`]).
///
/// [`client_address`]: crate::http::guards::client_address::client_address
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub std::net::IpAddr);

/// How many connections may be open, and how long they get to finish at shutdown.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionSettings {
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_open: usize,
    /// How long open connections get to finish their requests at shutdown before they are
    /// closed regardless.
    pub shutdown_timeout: Duration,
    /// How long a connection's answer may wait for its client to read before the connection is
    /// closed ([`write_deadline`](crate::http::edge::write_deadline)).
    pub write_timeout: Duration,
}

/// The open connections.
#[derive(Debug)]
pub struct Connections {
    tasks: JoinSet<()>,
    permits: Arc<Semaphore>,
    graceful: GracefulShutdown,
    shutdown_timeout: Duration,
}

impl Connections {
    /// No connections yet, room for `settings.max_open`.
    pub fn new(settings: ConnectionSettings) -> Self {
        Self {
            tasks: JoinSet::new(),
            permits: Arc::new(Semaphore::new(
                settings.max_open.clamp(1, Semaphore::MAX_PERMITS),
            )),
            graceful: GracefulShutdown::new(),
            shutdown_timeout: settings.shutdown_timeout,
        }
    }

    /// Waits until one more connection may be served, and reserves its place.
    pub async fn room(&self) -> OwnedSemaphorePermit {
        match Arc::clone(&self.permits).acquire_owned().await {
            Ok(permit) => permit,
            // The semaphore is never closed; if it were, there would never be room again.
            Err(_) => std::future::pending().await,
        }
    }

    /// Serves `connection` from `peer` on a task of its own, which holds `permit` until it ends.
    pub fn serve<C>(&mut self, permit: OwnedSemaphorePermit, peer: SocketAddr, connection: C)
    where
        C: GracefulConnection + Send + 'static,
        C::Error: Display,
    {
        // Collect the tasks that ended, so the set holds little beyond the open connections.
        while let Some(ended) = self.tasks.try_join_next() {
            if let Err(error) = ended {
                tracing::error!(%error, "a connection task failed");
            }
        }
        let connection = self.graceful.watch(connection);
        self.tasks.spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop(permit);
        });
    }

    /// Closes every connection: gracefully within the shutdown timeout, then by force. Returns
    /// once every connection task has ended.
    pub async fn close(self) {
        let Self {
            mut tasks,
            graceful,
            shutdown_timeout,
            ..
        } = self;
        if tokio::time::timeout(shutdown_timeout, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                "connections still open {shutdown_timeout:?} after the shutdown began; closing them"
            );
        }
        tasks.shutdown().await;
    }
}
