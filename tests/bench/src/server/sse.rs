//! Server-sent-event bodies with per-event pauses and an optional cut connection.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

/// An SSE body being built: events, each with the pause before it.
#[derive(Debug, Default)]
pub struct Sse {
    frames: Vec<(Duration, Bytes)>,
    cut: bool,
}

impl Sse {
    /// An empty stream.
    pub fn new() -> Sse {
        Sse::default()
    }

    /// Adds `event: <name>` + `data: <json>`.
    pub fn event(&mut self, name: &str, data: &Value) {
        self.event_after(Duration::ZERO, name, data);
    }

    /// Adds a named event after a pause.
    pub fn event_after(&mut self, pause: Duration, name: &str, data: &Value) {
        self.frames.push((
            pause,
            Bytes::from(format!("event: {name}\ndata: {data}\n\n")),
        ));
    }

    /// Adds a `data:`-only event.
    pub fn data(&mut self, data: &Value) {
        self.data_after(Duration::ZERO, data);
    }

    /// Adds a `data:`-only event after a pause.
    pub fn data_after(&mut self, pause: Duration, data: &Value) {
        self.frames
            .push((pause, Bytes::from(format!("data: {data}\n\n"))));
    }

    /// Adds a raw `data: <text>` line (for `[DONE]`).
    pub fn raw_data(&mut self, text: &str) {
        self.frames
            .push((Duration::ZERO, Bytes::from(format!("data: {text}\n\n"))));
    }

    /// Ends the body with an I/O error, so the HTTP connection is cut mid-stream.
    pub fn cut_connection(&mut self) {
        self.cut = true;
    }

    /// The streaming `200 text/event-stream` response.
    pub fn into_response(self) -> Response {
        let Sse { frames, cut } = self;
        let items = frames.into_iter().map(Some).chain(cut.then_some(None));
        let stream = futures::stream::unfold(items, |mut items| async move {
            match items.next()? {
                Some((pause, bytes)) => {
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Some((Ok::<Bytes, std::io::Error>(bytes), items))
                }
                None => Some((Err(std::io::Error::other("scripted broken stream")), items)),
            }
        });
        let mut resp = Response::new(Body::from_stream(stream));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        resp
    }
}

/// A JSON response with a status.
pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Seconds since the Unix epoch (for `created` fields).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
