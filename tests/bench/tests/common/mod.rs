//! Helpers shared by the bench's integration tests: sending requests to the server in-process and
//! parsing what it streams.

#![allow(dead_code)]

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use futures::StreamExt;
use serde_json::Value;
use tower::ServiceExt;

/// The recordings folder ([`agent_bench::fixtures_dir`]), checked to hold the model-API examples.
pub(crate) fn fixtures_dir() -> PathBuf {
    let dir = agent_bench::fixtures_dir();
    assert!(
        dir.join("model_api/index.json").is_file(),
        "fixtures not found at {}",
        dir.display()
    );
    dir
}

/// What the server answered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    /// The body received before the end or the cut.
    pub body: String,
    /// The body ended with an error (the connection was cut).
    pub cut: bool,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Sends one request through the router without a socket.
pub(crate) async fn send(
    router: &Router,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Answer {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("x-api-key", "sk-secret");
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let mut stream = resp.into_body().into_data_stream();
    let mut bytes = Vec::new();
    let mut cut = false;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(b) => bytes.extend_from_slice(&b),
            Err(_) => {
                cut = true;
                break;
            }
        }
    }
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes).unwrap(),
        cut,
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub name: Option<String>,
    pub data: String,
}

impl Event {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", self.data))
    }
}

/// Parses an SSE body strictly: events separated by blank lines, only `event:` and `data:` fields.
pub(crate) fn parse_sse(body: &str) -> Vec<Event> {
    assert!(
        body.is_empty() || body.ends_with("\n\n"),
        "SSE body does not end with a blank line: {body:?}"
    );
    body.split("\n\n")
        .filter(|block| !block.is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    assert!(
                        name.replace(v.to_string()).is_none(),
                        "two event lines in {block:?}"
                    );
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v);
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            Event {
                name,
                data: data.join("\n"),
            }
        })
        .collect()
}
