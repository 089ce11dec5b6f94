//! The server's open connections, and how they end at shutdown.
//!
//! Every connection is a task in one [`JoinSet`]. Shutdown asks every connection to close
//! gracefully: an idle keep-alive connection closes at once, a busy one after its current
//! response. Whatever is still open after [`ConnectionSettings::shutdown_timeout`] — a client
//! that never finishes its body, never reads its answer — is aborted. That is what lets the process end within its bound whatever clients
//! do: a connection task holds the shared state, and with it the batch writer's queue, and the
//! writer drains and stops only once the last of them is gone.

use std::fmt::Display;
use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::server::graceful::{GracefulConnection, GracefulShutdown};
use tokio::task::JoinSet;

/// How long connections get to finish at shutdown.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionSettings {
    /// How long open connections get to finish their requests at shutdown before they are
    /// closed regardless.
    pub shutdown_timeout: Duration,
}

/// The open connections.
#[derive(Debug)]
pub struct Connections {
    tasks: JoinSet<()>,
    graceful: GracefulShutdown,
    shutdown_timeout: Duration,
}

impl Connections {
    /// No connections yet.
    pub fn new(settings: ConnectionSettings) -> Self {
        Self {
            tasks: JoinSet::new(),
            graceful: GracefulShutdown::new(),
            shutdown_timeout: settings.shutdown_timeout,
        }
    }

    /// Serves `connection` from `peer` on a task of its own.
    pub fn serve<C>(&mut self, peer: SocketAddr, connection: C)
    where
        C: GracefulConnection + Send + 'static,
        C::Error: Display,
    {
        // Collect the tasks that ended, so the set holds only about the open connections.
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
        });
    }

    /// Closes every connection: gracefully within the shutdown timeout, then by force. Returns
    /// once every connection task has ended.
    pub async fn close(self) {
        let Self {
            mut tasks,
            graceful,
            shutdown_timeout,
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
