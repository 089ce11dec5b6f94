//! The write deadline: a connection whose client stops reading its answer is closed once
//! nothing could be written to it for [`ConnectionSettings::write_timeout`].
//!
//! Why: a response is written as fast as the client reads it. A streamed export, or a large map
//! feed, whose client never reads holds its connection, its permit and the pages buffered for it
//! (about 2.7 MB for an export) for as long as the client likes; a few hundred such requests,
//! which anyone may send to a public device, took the server from 94 MB to 1.4 GB. Reads have
//! their own bounds (the head's and the body's timeouts); this is the one for writes.
//!
//! It wraps the socket, below hyper: while a write or flush cannot proceed, a timer runs; any
//! progress stops it; when it fires, the write fails, hyper drops the connection (and with it the
//! response body, so an export's slot and pages are freed), and the stall is counted on
//! `/metrics`. An idle keep-alive connection writes nothing and is never timed out by it.
//!
//! [`ConnectionSettings::write_timeout`]: crate::http::edge::connections::ConnectionSettings::write_timeout

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::metrics::ServerMetrics;

/// A socket whose writes fail after [`WriteDeadline::new`]'s timeout without progress.
#[derive(Debug)]
pub struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Runs while a write waits for the client; `None` while writes proceed.
    stalled: Option<Pin<Box<Sleep>>>,
    metrics: Arc<ServerMetrics>,
}

impl<S> WriteDeadline<S> {
    /// `inner`, whose writes may wait for the client at most `timeout` in a row; a stall is
    /// counted in `metrics`.
    pub fn new(inner: S, timeout: Duration, metrics: Arc<ServerMetrics>) -> Self {
        Self {
            inner,
            timeout,
            stalled: None,
            metrics,
        }
    }

    /// Passes a write's outcome on: progress stops the timer; waiting starts it (once) and fails
    /// the write when it has run out.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if outcome.is_ready() {
            self.stalled = None;
            return outcome;
        }
        let timeout = self.timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.stalled = None;
        self.metrics.write_stalled();
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing for {timeout:?}"),
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, outcome)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, outcome)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
