//! The connections: accepted up to a bound, each served by hyper's HTTP/1 with its request-head
//! timeout, and closed when it moves nothing.
//!
//! Three bounds keep a few clients from taking the server from everyone (`spec/http-api.md`,
//! Security): [`ServerConfig::max_connections`] connections at once (one more is answered 503
//! and closed at once: its file descriptor comes back); a request head whole within
//! [`ServerConfig::header_timeout`] of the moment the server waits for it, on a new connection or
//! a kept-alive one (hyper's own timer: slow and idle clients alike); and a connection that moves
//! no byte either way for [`ServerConfig::idle_timeout`] while no handler works for it, or whose
//! client has accepted none of a response's bytes for [`ServerConfig::sse_stall`] (a stream it
//! stopped reading), closed.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::config::ServerConfig;

/// What one connection did last: read or written a byte, started waiting to write.
struct Activity {
    /// When the server began, for the times below (milliseconds since).
    epoch: tokio::time::Instant,
    /// The last byte read or written.
    last: AtomicU64,
    /// Since when a write has been waiting for the client to take bytes (0: none waits).
    blocked: AtomicU64,
    /// Handlers working for this connection now.
    busy: AtomicUsize,
}

impl Activity {
    fn now(&self) -> u64 {
        // +1: 0 means "none" for `blocked`.
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX) + 1
    }

    fn touch(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    /// Why the connection is to be closed now, if it is.
    fn expired(&self, config: &ServerConfig) -> Option<&'static str> {
        let now = self.now();
        let since = |at: u64| Duration::from_millis(now.saturating_sub(at));
        let blocked = self.blocked.load(Ordering::Relaxed);
        if blocked != 0 && since(blocked) >= config.sse_stall {
            return Some("its client took none of the response's bytes");
        }
        let idle = since(self.last.load(Ordering::Relaxed)) >= config.idle_timeout;
        (idle && self.busy.load(Ordering::Relaxed) == 0).then_some("it moved no byte")
    }
}

/// A TCP stream that records its [`Activity`].
struct Watched {
    tcp: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write(cx, data);
        self.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

impl Watched {
    fn wrote(&self, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Ready(Ok(n)) if *n > 0 => {
                self.activity.blocked.store(0, Ordering::Relaxed);
                self.activity.touch();
            }
            Poll::Pending => {
                let now = self.activity.now();
                let _ = self.activity.blocked.compare_exchange(
                    0,
                    now,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            _ => {}
        }
    }
}

/// Counts a handler at work on a connection while it lives.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.busy.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// What a connection past the bound is told before it is closed.
fn too_many() -> String {
    let body = r#"{"type":"urn:agent-api:error:too_many_connections","title":"Service Unavailable","status":503,"detail":"the server holds as many connections as it may: try again shortly"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Accepts connections on `listener` and serves `app` on each until `stop` is cancelled; then
/// asks every connection to close once its request in flight is answered, and waits for them.
pub(crate) async fn accept(
    listener: TcpListener,
    app: axum::Router,
    config: &ServerConfig,
    stop: agent_api::request::CancellationToken,
) -> std::io::Result<()> {
    let max = config.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max));
    let epoch = tokio::time::Instant::now();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            // Out of file descriptors, or a connection reset before it was taken: the listener
            // is still good; a pause lets descriptors come back.
            Err(error) => {
                tracing::warn!("cannot accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // SSE frames are small writes: without TCP_NODELAY one waits for the client's delayed
        // ACK (up to 40 ms) whenever another is in flight.
        let _ = tcp.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tokio::spawn(refuse(tcp));
            continue;
        };
        let activity = Arc::new(Activity {
            epoch,
            last: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
        });
        activity.touch();
        let app = app.clone();
        let config = config.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            connection(tcp, activity, app, &config, stop).await;
        });
    }
    // Every connection holds a slot until it is closed: all of them back, all are closed.
    let _ = slots.acquire_many(max as u32).await;
    Ok(())
}

/// Answers a connection past the bound 503 and closes it.
async fn refuse(mut tcp: TcpStream) {
    let answer = async {
        tcp.write_all(too_many().as_bytes()).await?;
        tcp.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}

/// Serves one connection until it ends, expires, or the server stops.
async fn connection(
    tcp: TcpStream,
    activity: Arc<Activity>,
    app: axum::Router,
    config: &ServerConfig,
    stop: agent_api::request::CancellationToken,
) {
    let io = TokioIo::new(Watched {
        tcp,
        activity: activity.clone(),
    });
    let handlers = activity.clone();
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let busy = Busy::new(&handlers);
            let app = app.clone();
            async move {
                let response = app.oneshot(request.map(axum::body::Body::new)).await;
                drop(busy);
                response
            }
        });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .serve_connection(io, service);
    let mut served = std::pin::pin!(served);
    let tick = (config.idle_timeout.min(config.sse_stall) / 4).max(Duration::from_millis(20));
    let mut closing = false;
    loop {
        tokio::select! {
            _ = served.as_mut() => return,
            () = tokio::time::sleep(tick) => {
                if let Some(why) = activity.expired(config) {
                    tracing::debug!("a connection is closed: {why}");
                    return;
                }
            }
            () = stop.cancelled(), if !closing => {
                closing = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}
