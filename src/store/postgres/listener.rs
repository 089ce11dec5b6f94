//! Cross-process invalidation of cached device credentials: `LISTEN` on
//! [`super::CREDENTIALS_CHANNEL`].
//!
//! A cache is only as good as its invalidations. While the listening connection is up, each
//! notification evicts one device; whenever it is down (not yet connected, or lost), the cache is
//! distrusted ([`CredentialEvents::Distrust`]) so uploads go to the database instead of trusting
//! entries whose invalidation may have been missed, and it is cleared again once listening
//! resumes. The task lives as long as its [`ListenerGuard`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use super::CREDENTIALS_CHANNEL;
use crate::domain::DeviceId;
use crate::store::pg_tls::PgTarget;

/// What the listener reports to the credential cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialEvents {
    /// Listening (again): clear everything and trust the cache from now on.
    Trust,
    /// Not listening: clear everything and bypass the cache.
    Distrust,
    /// This device's credentials changed.
    Evict(DeviceId),
}

/// Stops the listener task when dropped.
#[derive(Debug)]
pub struct ListenerGuard {
    task: JoinHandle<()>,
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts listening on `target` (the device store's own settings, TLS included); `on_event` is
/// told about every change.
pub fn spawn(
    target: PgTarget,
    on_event: Arc<dyn Fn(CredentialEvents) + Send + Sync>,
) -> ListenerGuard {
    let task = tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            on_event(CredentialEvents::Distrust);
            match listen(&target, on_event.as_ref()).await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(error) => {
                    tracing::warn!(%error, "credential listener lost its connection; caching off until it is back");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
    ListenerGuard { task }
}

/// One connection's life: `LISTEN`, then forward notifications until it ends.
async fn listen(
    target: &PgTarget,
    on_event: &(dyn Fn(CredentialEvents) + Send + Sync),
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = target.config.connect(target.tls.clone()).await?;
    let (payloads, mut received) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if payloads.send(notification.payload().to_owned()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "credential listener connection failed");
                    break;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CREDENTIALS_CHANNEL}"))
        .await?;
    on_event(CredentialEvents::Trust);
    while let Some(payload) = received.recv().await {
        match DeviceId::parse(&payload) {
            Some(device_id) => on_event(CredentialEvents::Evict(device_id)),
            None => on_event(CredentialEvents::Trust),
        }
    }
    driver.abort();
    Ok(())
}
