//! Wiring: configuration in, a bound server out, and the lifetimes of everything in between.
//!
//! [`Application::build`] opens the stores, the authenticator and the listener, so a process that
//! cannot serve fails before it claims to. [`Application::run_until`] serves until the given
//! future completes, then drains in-flight requests before returning.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::auth::local::LocalIssuerError;
use crate::auth::{Authenticator, JwksError, LocalIssuer};
use crate::clock::Clock;
use crate::config::Config;
use crate::http::{server, AppState};
use crate::store::sqlite::{Sqlite, SqliteDevices};
use crate::store::StoreError;

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
    /// The local token issuer could not be opened.
    #[error("opening the local token issuer")]
    Issuer(#[from] LocalIssuerError),
    /// The identity provider configuration is unusable.
    #[error("configuring the identity provider")]
    Jwks(#[from] JwksError),
}

/// A server that is bound and ready to run.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    address: SocketAddr,
    state: Arc<AppState>,
}

impl Application {
    /// Opens everything `config` names and binds the listener.
    pub async fn build(config: Config, clock: Arc<dyn Clock>) -> Result<Self, StartError> {
        let issuer = LocalIssuer::open(&config.data_dir)?;
        let auth = Authenticator::new(
            &config.owner_auth,
            &issuer,
            config.auth_issuer.clone(),
            config.auth_audience.clone(),
        )?;
        if let Err(error) = auth.warm_up().await {
            tracing::warn!(error = %error, "identity provider keys not fetched yet; retrying on demand");
        }
        let db = Sqlite::open(&config.data_dir, config.sqlite_busy_timeout)?;
        let state = Arc::new(AppState {
            auth,
            devices: Arc::new(SqliteDevices::new(db)),
            clock,
        });
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| StartError::Bind {
                    address: config.listen,
                    source,
                })?;
        let address = listener.local_addr().map_err(|source| StartError::Bind {
            address: config.listen,
            source,
        })?;
        Ok(Self {
            listener,
            address,
            state,
        })
    }

    /// The bound address (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Serves until `shutdown` completes, then drains in-flight requests.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) {
        tracing::info!(address = %self.address, "airq listening");
        server::serve(self.listener, self.state, shutdown).await;
        tracing::info!("airq stopped");
    }
}
