//! The scripted model server: one axum server on 127.0.0.1 that speaks the four model APIs the CLIs use.
//!
//! | request | answer |
//! |---|---|
//! | `HEAD` anything | 200, empty (Claude Code probes `HEAD {base}/` at start-up) |
//! | `GET .../npm-registry/...` | 404 (OpenCode's background plugin install, pointed here) |
//! | `POST /s/<scenario>/v1/messages` | Anthropic Messages ([`anthropic`]) |
//! | `POST /s/<scenario>/v1/responses` | OpenAI Responses ([`openai_responses`]) |
//! | `POST /s/<scenario>/v1/chat/completions` | OpenAI Chat Completions ([`chat_completions`]) |
//! | `POST /s/<scenario>/v1beta/models/<m>:streamGenerateContent` / `:generateContent` | Gemini ([`gemini`]) |
//!
//! The scenario (see [`crate::scenario`]) comes from the path prefix `/s/<scenario>[.<tag>]`. Every request
//! is logged as one [`LoggedRequest`] (kept in memory and, when a log file was given, written to it as one
//! JSON line).

pub mod anthropic;
pub mod chat_completions;
pub mod conversation;
pub mod gemini;
pub mod openai_responses;
pub mod sse;
pub mod tools;
pub mod turn;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::scenario;
use crate::BenchError;
use turn::{plan, Reply};

/// Header names whose values are never logged.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "cookie",
    "proxy-authorization",
];

/// One request the server received, as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// Milliseconds since the server started.
    pub at_ms: u64,
    /// HTTP method.
    pub method: String,
    /// Path and query, as received.
    pub path: String,
    /// The scenario name from the `/s/<scenario>` prefix (without the tag), if any.
    pub scenario: Option<String>,
    /// The tag after the scenario name (`/s/<scenario>.<tag>`), if any.
    pub tag: Option<String>,
    /// Request headers; secrets (API keys, authorization) read `<redacted>`.
    pub headers: BTreeMap<String, String>,
    /// The body: parsed JSON, a string when it is not JSON, null when empty.
    pub body: Value,
    /// The HTTP status answered.
    pub status: u16,
}

struct State {
    started: Instant,
    seq: AtomicU64,
    requests: Mutex<Vec<LoggedRequest>>,
    log: Option<Mutex<std::fs::File>>,
}

/// A running scripted model server on `127.0.0.1:<ephemeral port>`. Dropping it stops the server.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl ModelServer {
    /// Starts the server on an ephemeral loopback port; with `log`, every request is appended to that file
    /// as one JSON line.
    pub async fn start(log: Option<PathBuf>) -> Result<ModelServer, BenchError> {
        Self::start_on(0, log).await
    }

    /// Starts the server on a given loopback port (0 picks one).
    pub async fn start_on(port: u16, log: Option<PathBuf>) -> Result<ModelServer, BenchError> {
        let log = match log {
            Some(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
                }
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| {
                        BenchError::io(format!("opening request log {}", path.display()), e)
                    })?;
                Some(Mutex::new(file))
            }
            None => None,
        };
        let state = Arc::new(State {
            started: Instant::now(),
            seq: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
            log,
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| BenchError::io("binding the model server", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::io("reading the bound address", e))?;
        let app = app(state.clone());
        let task = tokio::spawn(async move {
            // The server only ends when the task is aborted; an accept error ends it early and requests fail.
            let _ = axum::serve(listener, app).await;
        });
        Ok(ModelServer { addr, state, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL that selects `scenario` (which may carry a `.tag`): `http://127.0.0.1:PORT/s/<scenario>`.
    /// APIs add their own suffix (`/v1`, `/v1beta/...`) as their CLIs do.
    pub fn base_url(&self, scenario: &str) -> String {
        format!("http://{}/s/{scenario}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// The server's router sharing this server's log (for in-process requests without a socket).
    pub fn router(&self) -> Router {
        app(self.state.clone())
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn app(state: Arc<State>) -> Router {
    Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let state = state.clone();
            async move { handle(&state, method, uri, headers, body) }
        },
    )
}

/// `/s/<scenario>[.<tag>]/<rest>` -> (Some(scenario), Some(tag), rest).
fn split_path(path: &str) -> (Option<&str>, Option<&str>, &str) {
    let Some(after) = path.strip_prefix("/s/") else {
        return (None, None, path);
    };
    let (segment, rest) = after
        .find('/')
        .map_or((after, ""), |i| (&after[..i], &after[i..]));
    match segment.split_once('.') {
        Some((name, tag)) => (Some(name), Some(tag), rest),
        None => (Some(segment), None, rest),
    }
}

fn handle(state: &State, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let seq = state.seq.fetch_add(1, Ordering::Relaxed);
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    let (scenario_name, tag, rest) = split_path(uri.path());
    let raw = String::from_utf8_lossy(&body);
    let parsed: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(raw.to_string()))
    };
    let response = route(
        &method,
        scenario_name,
        rest,
        uri.query(),
        &parsed,
        &raw,
        seq,
    );
    let entry = LoggedRequest {
        at_ms: state.started.elapsed().as_millis() as u64,
        method: method.to_string(),
        path,
        scenario: scenario_name.map(str::to_string),
        tag: tag.map(str::to_string),
        headers: headers
            .iter()
            .map(|(k, v)| {
                let value = if SECRET_HEADERS.contains(&k.as_str()) {
                    "<redacted>".to_string()
                } else {
                    String::from_utf8_lossy(v.as_bytes()).into_owned()
                };
                (k.to_string(), value)
            })
            .collect(),
        body: parsed,
        status: response.status().as_u16(),
    };
    if let Some(log) = &state.log {
        if let (Ok(mut file), Ok(line)) = (log.lock(), serde_json::to_string(&entry)) {
            // A failed log write must not fail the CLI's request; the in-memory log still has it.
            let _ = writeln!(file, "{line}");
        }
    }
    if let Ok(mut requests) = state.requests.lock() {
        requests.push(entry);
    }
    response
}

fn not_found(message: String) -> Response {
    sse::json_response(
        StatusCode::NOT_FOUND,
        &json!({"error": {"message": message, "type": "not_found"}}),
    )
}

fn route(
    method: &Method,
    scenario_name: Option<&str>,
    rest: &str,
    query: Option<&str>,
    body: &Value,
    raw: &str,
    seq: u64,
) -> Response {
    if method == Method::HEAD {
        return Response::new(Body::empty());
    }
    if rest.contains("/npm-registry/") || rest.starts_with("/npm-registry") {
        return not_found("no npm registry here (mock model server)".into());
    }
    if method != Method::POST {
        return not_found(format!("mock model server: no {method} {rest}"));
    }
    let Some(name) = scenario_name else {
        return not_found("mock model server: use a base URL ending in /s/<scenario>".into());
    };
    let Some(scenario) = scenario::find(name) else {
        return not_found(format!(
            "mock model server: unknown scenario `{name}`; known: {}",
            scenario::names()
        ));
    };
    if rest.ends_with("/messages") {
        let conv = anthropic::conversation(body, raw);
        anthropic::respond(plan(scenario, &conv), body, seq)
    } else if rest.ends_with("/responses") {
        let conv = openai_responses::conversation(body, raw);
        openai_responses::respond(plan(scenario, &conv), body, seq)
    } else if rest.ends_with("/chat/completions") {
        let reply = if chat_completions::is_side_request(body) {
            Reply::Turn(turn::TurnPlan::say(chat_completions::TITLE))
        } else {
            plan(scenario, &chat_completions::conversation(body, raw))
        };
        chat_completions::respond(reply, body, seq)
    } else if let Some((model, method)) = rest
        .split_once("/models/")
        .and_then(|(_, m)| m.split_once(':'))
    {
        let stream =
            method == "streamGenerateContent" || query.is_some_and(|q| q.contains("alt=sse"));
        let reply = match (stream, gemini::side_reply(body)) {
            (false, Some(side)) => Reply::Turn(side),
            _ => plan(scenario, &gemini::conversation(body, raw)),
        };
        gemini::respond(reply, model, stream)
    } else {
        not_found(format!("mock model server: no API at {rest}"))
    }
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_prefix_selects_scenario_and_tag() {
        assert_eq!(
            split_path("/s/shell.run-1/v1/messages"),
            (Some("shell"), Some("run-1"), "/v1/messages")
        );
        assert_eq!(split_path("/s/text"), (Some("text"), None, ""));
        assert_eq!(split_path("/v1/messages"), (None, None, "/v1/messages"));
    }
}
