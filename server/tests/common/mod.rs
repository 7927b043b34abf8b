//! A small HTTP client for the server's tests (real TCP on 127.0.0.1), and a server to drive.
#![allow(dead_code, unreachable_pub)]

pub mod child_agent;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

/// How long any one step may take before a test fails instead of hanging.
pub const STEP: Duration = Duration::from_secs(20);

/// A client of one server.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub token: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A response read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts a ProblemDetails body with `status`.
    pub fn problem(&self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "{:?}",
            String::from_utf8_lossy(&self.body)
        );
        let body = self.json();
        assert_eq!(body["status"], status);
        assert!(
            body["type"].is_string() && body["title"].is_string() && body["detail"].is_string(),
            "{body}"
        );
        body
    }
}

impl Api {
    pub fn new(base: String, token: Option<String>) -> Self {
        // As curl and browsers do: small requests are not held back for a delayed ACK.
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            base,
            token,
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    pub fn with_token(&self, token: Option<&str>) -> Self {
        Self {
            token: token.map(Into::into),
            ..self.clone()
        }
    }

    fn build(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> Request<Full<Bytes>> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Full::new(body.unwrap_or_default())).unwrap()
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> hyper::Response<Incoming> {
        let request = self.build(method, path, body, headers);
        tokio::time::timeout(STEP, self.client.request(request))
            .await
            .expect("the server answers in time")
            .expect("the request is sent")
    }

    /// [`Api::call`] to a server that may be gone or paused: an error instead of a panic.
    pub async fn try_call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
        wait: Duration,
    ) -> Result<Answer, String> {
        let request = self.build(
            method,
            path,
            body.map(|b| Bytes::from(b.to_string())),
            headers,
        );
        let response = tokio::time::timeout(wait, self.client.request(request))
            .await
            .map_err(|_| "no answer in time".to_string())?
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let headers = response.headers().clone();
        if headers
            .get("content-type")
            .is_some_and(|t| t == "text/event-stream")
        {
            return Ok(Answer {
                status,
                headers,
                body: Bytes::new(),
            });
        }
        let body = tokio::time::timeout(wait, response.into_body().collect())
            .await
            .map_err(|_| "no body in time".to_string())?
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Opens an SSE stream on a server that may be gone: `None` when it does not answer 200.
    pub async fn try_sse(&self, path: &str, headers: &[(&str, &str)]) -> Option<Sse> {
        let request = self.build(Method::GET, path, None, headers);
        let response = tokio::time::timeout(STEP, self.client.request(request))
            .await
            .ok()?
            .ok()?;
        (response.status() == StatusCode::OK).then(|| Sse {
            body: response.into_body(),
            buffer: String::new(),
        })
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let response = self
            .send(method, path, body.map(|b| Bytes::from(b.to_string())), &[])
            .await;
        let status = response.status();
        let headers = response.headers().clone();
        let body = tokio::time::timeout(STEP, response.into_body().collect())
            .await
            .expect("the body ends in time")
            .unwrap()
            .to_bytes();
        Answer {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Posts with no body.
    pub async fn post_empty(&self, path: &str) -> Answer {
        self.call(Method::POST, path, None).await
    }

    /// Opens an SSE stream.
    pub async fn sse(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Sse {
        let response = self
            .send(
                method,
                path,
                body.map(|b| Bytes::from(b.to_string())),
                headers,
            )
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Sse {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// Opens an SSE stream on a connection of its own whose receive window is a few KiB: a
    /// client that stops reading holds up the server after a few events, not megabytes.
    pub async fn sse_small_window(&self, path: &str, headers: &[(&str, &str)]) -> Sse {
        let address: std::net::SocketAddr =
            self.base.trim_start_matches("http://").parse().unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let stream = socket.connect(address).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(connection);
        let request = self.build(Method::GET, path, None, headers);
        let request = Request::from_parts(request.into_parts().0, Full::new(Bytes::new()));
        let response = tokio::time::timeout(STEP, sender.send_request(request))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        // The sender must live as long as the body is read.
        std::mem::forget(sender);
        Sse {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// Every event of a session, read by pages of `limit`.
    pub async fn all_events(&self, session: &str, limit: u64) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let offset = events
                .last()
                .map_or(0, |e: &Value| e["sequence"].as_u64().unwrap());
            let page = self
                .get(&format!(
                    "/v1/sessions/{session}/events?offset={offset}&limit={limit}"
                ))
                .await;
            assert_eq!(page.status, StatusCode::OK);
            let page = page.json();
            events.extend(page["events"].as_array().unwrap().iter().cloned());
            if page["hasMore"] == false {
                return events;
            }
        }
    }

    /// Waits until the session's last event is of type `kind`.
    pub async fn wait_for(&self, session: &str, kind: &str) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let events = self.all_events(session, 1000).await;
            if events.iter().any(|e| e["type"] == kind) {
                return events;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {kind} in {events:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: Option<u64>,
    pub data: Value,
}

/// An SSE stream being read.
pub struct Sse {
    body: Incoming,
    buffer: String,
}

impl Sse {
    /// The next frame with data, or `None` when the server closed the stream.
    pub async fn next(&mut self) -> Option<Frame> {
        // Keep-alive comments do not count: the event itself must come in time.
        tokio::time::timeout(STEP, self.next_frame())
            .await
            .expect("an SSE event in time")
    }

    /// The next frame with data within `wait` (a real agent's step may take longer than [`STEP`]).
    pub async fn next_within(&mut self, wait: Duration) -> Option<Frame> {
        tokio::time::timeout(wait, self.next_frame())
            .await
            .expect("an SSE event in time")
    }

    /// The next frame within `wait`; `None` when the stream ended, broke or said nothing in
    /// time (its server may be gone or paused).
    pub async fn next_or_cut(&mut self, wait: Duration) -> Option<Frame> {
        tokio::time::timeout(wait, async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let id = block
                        .lines()
                        .find_map(|l| l.strip_prefix("id:"))
                        .and_then(|v| v.trim().parse().ok());
                    let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) else {
                        continue;
                    };
                    let data = serde_json::from_str(data.trim_start()).ok()?;
                    return Some(Frame { id, data });
                }
                let frame = self.body.frame().await?.ok()?;
                if let Ok(bytes) = frame.into_data() {
                    self.buffer.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        })
        .await
        .ok()
        .flatten()
    }

    async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("id:") {
                        id = Some(value.trim().parse().expect("a numeric id"));
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                assert_eq!(data.len(), 1, "one data line per event: {block:?}");
                return Some(Frame {
                    id,
                    data: serde_json::from_str(&data[0]).expect("JSON data"),
                });
            }
            let frame = self.body.frame().await?;
            let frame = frame.expect("the stream reads");
            if let Ok(bytes) = frame.into_data() {
                self.buffer.push_str(std::str::from_utf8(&bytes).unwrap());
            }
        }
    }

    /// Every frame until the server ends the stream or closes its connection (as it does to a
    /// client that stopped reading): the frames that came whole.
    pub async fn rest_or_cut(&mut self) -> Vec<Frame> {
        tokio::time::timeout(STEP, async {
            while let Some(Ok(frame)) = self.body.frame().await {
                if let Ok(bytes) = frame.into_data() {
                    self.buffer.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        })
        .await
        .expect("the stream ends in time");
        let mut frames = Vec::new();
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let id = block
                .lines()
                .find_map(|l| l.strip_prefix("id:"))
                .map(|v| v.trim().parse().expect("a numeric id"));
            if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) {
                frames.push(Frame {
                    id,
                    data: serde_json::from_str(data.trim_start()).expect("JSON data"),
                });
            }
        }
        frames
    }

    /// Every frame until the server closes the stream.
    pub async fn rest(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            frames.push(frame);
        }
        frames
    }

    /// Every frame until the server closes the stream, each within `wait`.
    pub async fn rest_within(&mut self, wait: Duration) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next_within(wait).await {
            frames.push(frame);
        }
        frames
    }

    /// Frames until one of type `kind` (included).
    pub async fn until(&mut self, kind: &str) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            let done = frame.data["type"] == kind;
            frames.push(frame);
            if done {
                return frames;
            }
        }
        panic!("the stream closed before a {kind} event: {frames:#?}");
    }
}

/// A server on 127.0.0.1 (port 0) with the scripted agent, the memory store and `config`.
pub async fn start(config: agent_api_server::ServerConfig) -> Api {
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    start_on(config, store).await
}

pub async fn start_on(
    config: agent_api_server::ServerConfig,
    store: Arc<dyn agent_api_server::Store>,
) -> Api {
    serve_with(config, store, agent_api::RunRequest::new("")).await
}

/// A server with the scripted agent on `store`, its sessions made from `defaults`.
pub async fn serve_with(
    config: agent_api_server::ServerConfig,
    store: Arc<dyn agent_api_server::Store>,
    defaults: agent_api::RunRequest,
) -> Api {
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
        .unwrap();
    serve_gateway(gateway, config, store, defaults).await
}

/// A server running `gateway`'s agents on `store`, its sessions made from `defaults`.
pub async fn serve_gateway(
    gateway: agent_api::Gateway,
    config: agent_api_server::ServerConfig,
    store: Arc<dyn agent_api_server::Store>,
    defaults: agent_api::RunRequest,
) -> Api {
    let token = config.token.clone();
    let server = agent_api_server::Server::new(gateway, defaults, store, config)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(agent_api_server::serve(
        listener,
        server,
        std::future::pending(),
    ));
    Api::new(format!("http://{address}"), token)
}

/// A scripted session's creation body playing `scenario` with no pause between words.
pub fn scripted(scenario: &str) -> Value {
    json!({ "agent": "scripted", "options": { "backend.scripted.scenario": scenario, "backend.scripted.delay_ms": 0 } })
}

/// Checks what every served event must hold: the envelope's fields, a sequence, the session id.
pub fn check_envelope(event: &Value, session: &str) {
    for field in [
        "event_id",
        "sequence",
        "time",
        "session_id",
        "synthetic",
        "source",
        "type",
        "data",
    ] {
        assert!(event.get(field).is_some(), "no {field} in {event}");
    }
    assert!(
        event.as_object().unwrap().contains_key("raw"),
        "raw is always present: {event}"
    );
    assert_eq!(event["session_id"], session);
}

/// A session record for the store tests, owned by `owner`.
pub fn record(id: &str, owner: Option<&str>) -> agent_api_server::store::SessionRecord {
    let mut record = agent_api_server::store::SessionRecord::new(id, "scripted");
    record.owner = owner.map(Into::into);
    record
}

/// A stored event numbered `sequence`, with a raw payload.
pub fn event(sequence: u64) -> agent_api_server::store::StoredEvent {
    agent_api_server::store::StoredEvent {
        sequence,
        json: format!(r#"{{"sequence":{sequence},"raw":null}}"#).into(),
        raw: Some(r#"{"n":1}"#.into()),
    }
}

/// A server as [`start`] makes, whose sessions work in `dir` (the server's `--cwd`).
pub async fn start_in(config: agent_api_server::ServerConfig, dir: &std::path::Path) -> Api {
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    serve_with(
        config,
        store,
        agent_api::RunRequest::new("").with_working_dir(dir),
    )
    .await
}

/// Whether `event` ends a turn: the session's `turn_completed` or `turn_failed` status, whose
/// detail is `turn N` (an agent may report its own turn's end with the same label before it).
pub fn turn_end(event: &Value) -> bool {
    let status = &event["data"]["item"]["content"][0];
    event["type"] == "item.completed"
        && matches!(
            status["label"].as_str(),
            Some("turn_completed" | "turn_failed")
        )
        && status["detail"]
            .as_str()
            .is_some_and(|detail| detail.starts_with("turn "))
}

/// Appends, updates and claims by a server that lost the session are refused, in `store`.
pub async fn owner_checks(store: Arc<dyn agent_api_server::Store>, id: &str) {
    let mut record = agent_api_server::store::SessionRecord::new(id, "scripted");
    record.owner = Some("a".into());
    store.create_session(record).await.unwrap();
    let event = agent_api_server::store::StoredEvent {
        sequence: 1,
        json: r#"{"sequence":1,"raw":null}"#.into(),
        raw: None,
    };
    store
        .append_owned(id, "a", vec![event.clone()])
        .await
        .unwrap();
    store.claim(id, "b", Some("a")).await.unwrap();
    assert!(matches!(
        store.claim(id, "c", Some("a")).await,
        Err(agent_api_server::StoreError::NotOwner { .. })
    ));
    let mut second = event.clone();
    second.sequence = 2;
    assert!(matches!(
        store.append_owned(id, "a", vec![second.clone()]).await,
        Err(agent_api_server::StoreError::NotOwner { .. })
    ));
    assert!(matches!(
        store
            .update(
                id,
                "a",
                agent_api_server::store::SessionUpdate::default().turns(1, true)
            )
            .await,
        Err(agent_api_server::StoreError::NotOwner { .. })
    ));
    store.append_owned(id, "b", vec![second]).await.unwrap();
    // A snapshot too; and its owner reads it back.
    let snapshot = agent_api_server::store::StoredSnapshot {
        turn: 1,
        bytes: vec![0, 1, 2, 255],
    };
    assert!(matches!(
        store.put_snapshot(id, "a", snapshot.clone()).await,
        Err(agent_api_server::StoreError::NotOwner { .. })
    ));
    store.put_snapshot(id, "b", snapshot.clone()).await.unwrap();
    let whole = agent_api_server::store::StoredChain::whole(snapshot.clone());
    assert_eq!(store.snapshot(id).await.unwrap(), Some(whole.clone()));
    snapshot_delta_checks(&store, id, whole).await;
}

/// The deltas on a kept snapshot of `id` (owned by `b`, holding `whole`): only its owner adds
/// one, only the one after the last kept, read back in order with the base; a whole snapshot
/// written again drops them.
async fn snapshot_delta_checks(
    store: &Arc<dyn agent_api_server::Store>,
    id: &str,
    whole: agent_api_server::store::StoredChain,
) {
    use agent_api_server::store::{StoredDelta, StoredSnapshot};
    use agent_api_server::StoreError;
    let delta = |seq: u64| StoredDelta {
        seq,
        turn: seq + 1,
        bytes: vec![seq as u8; 3],
    };
    let refused = store.put_snapshot_delta(id, "a", delta(1)).await;
    assert!(
        matches!(refused, Err(StoreError::NotOwner { .. })),
        "{refused:?}"
    );
    for wrong in [0, 2] {
        assert!(
            matches!(
                store.put_snapshot_delta(id, "b", delta(wrong)).await,
                Err(StoreError::SnapshotOutOfOrder { kept: 0, got, .. }) if got == wrong
            ),
            "delta {wrong} taken on a base with none"
        );
    }
    store.put_snapshot_delta(id, "b", delta(1)).await.unwrap();
    store.put_snapshot_delta(id, "b", delta(2)).await.unwrap();
    assert!(matches!(
        store.put_snapshot_delta(id, "b", delta(2)).await,
        Err(StoreError::SnapshotOutOfOrder {
            kept: 2,
            got: 2,
            ..
        })
    ));
    let mut chain = whole;
    chain.push(delta(1));
    chain.push(delta(2));
    assert_eq!(store.snapshot(id).await.unwrap(), Some(chain));
    let record = store.session(id).await.unwrap().unwrap();
    assert_eq!(record.snapshot_turn, Some(3), "the newest delta's turn");
    // A whole snapshot again: the deltas are gone with the base they followed.
    let again = StoredSnapshot {
        turn: 4,
        bytes: vec![9; 5],
    };
    store.put_snapshot(id, "b", again.clone()).await.unwrap();
    assert_eq!(
        store.snapshot(id).await.unwrap(),
        Some(agent_api_server::store::StoredChain::whole(again))
    );
    store.put_snapshot_delta(id, "b", delta(1)).await.unwrap();
    // No snapshot kept for a session: a delta is refused.
    assert!(matches!(
        store
            .put_snapshot_delta("no-such-session", "b", delta(1))
            .await,
        Err(StoreError::NotFound(_) | StoreError::SnapshotOutOfOrder { .. })
    ));
}

/// The webhook outbox of `store` (its session `id`, endpoints named after it): an append queues
/// a row per event and endpoint whose filter takes it, a refused one none; only the oldest
/// undelivered row of an endpoint and session is due; a failed try is due again when it said,
/// and holds the session's next row back; a delivered or abandoned one lets it go; every try is
/// in the delivery log, newest first.
pub async fn outbox_checks(store: Arc<dyn agent_api_server::Store>, id: &str) {
    use agent_api_server::store::{
        AttemptOutcome, DeliveryAttempt, OutboxRules, OutboxTarget, SessionRecord, StoredEvent,
        WebhookEvent,
    };
    let (turns, all) = (format!("{id}-turns"), format!("{id}-all"));
    let endpoints = [turns.clone(), all.clone()];
    store
        .set_outbox(Arc::new(OutboxRules::new(vec![
            OutboxTarget {
                endpoint: turns.clone(),
                events: vec![WebhookEvent::TurnEnded],
            },
            OutboxTarget {
                endpoint: all.clone(),
                events: WebhookEvent::ALL.to_vec(),
            },
        ])))
        .unwrap();
    let mut record = SessionRecord::new(id, "scripted");
    record.owner = Some("a".into());
    store.create_session(record).await.unwrap();
    let mut transcript = agent_api::kit::transcript::Transcript::new(id.into(), false);
    transcript.permission_requested("perm_1", "run ls", None);
    transcript.daemon_status("turn_completed", Some("turn 1".into()));
    transcript.daemon_status("turn_completed", Some("turn 2".into()));
    let events: Vec<StoredEvent> = transcript
        .drain()
        .map(|e| StoredEvent::from_event(e).unwrap())
        .collect();
    let of = |kind: WebhookEvent| -> Vec<u64> {
        events
            .iter()
            .filter(|e| WebhookEvent::of(e) == Some(kind))
            .map(|e| e.sequence)
            .collect()
    };
    let (ends, asks) = (
        of(WebhookEvent::TurnEnded),
        of(WebhookEvent::PermissionRequested),
    );
    assert_eq!((ends.len(), asks.len()), (2, 1), "{events:#?}");
    let clock = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            + 1
    };
    let lease = Duration::from_secs(60);
    let heads = |due: Vec<agent_api_server::store::Delivery>| {
        let mut heads: Vec<(String, u64, u32)> = due
            .into_iter()
            .map(|d| {
                assert_eq!((d.session.as_str(), d.agent.as_str()), (id, "scripted"));
                let stored = &events[d.sequence as usize - 1];
                assert_eq!(d.json, stored.json, "the event as stored");
                assert_eq!(Some(d.event), WebhookEvent::of(stored));
                (d.endpoint, d.sequence, d.attempts)
            })
            .collect();
        heads.sort();
        heads
    };

    // Refused: nothing queued.
    assert!(matches!(
        store.append_owned(id, "b", events.clone()).await,
        Err(agent_api_server::StoreError::NotOwner { .. })
    ));
    assert!(store
        .claim_deliveries("s1", &endpoints, clock(), lease, 10)
        .await
        .unwrap()
        .is_empty());
    store.append_owned(id, "a", events.clone()).await.unwrap();
    let now = clock();
    let due = store
        .claim_deliveries("s1", &endpoints, now, lease, 10)
        .await
        .unwrap();
    assert_eq!(
        heads(due),
        [(all.clone(), asks[0], 0), (turns.clone(), ends[0], 0)]
    );
    let attempt =
        |endpoint: &str, sequence: u64, n: u32, at: i64, outcome: AttemptOutcome| DeliveryAttempt {
            endpoint: endpoint.into(),
            session: id.into(),
            sequence,
            event_id: format!("evt_{sequence}"),
            event: WebhookEvent::of(&events[sequence as usize - 1]).unwrap(),
            attempt: n,
            at_ms: at,
            status: Some(if outcome == AttemptOutcome::Delivered {
                200
            } else {
                500
            }),
            error: (outcome != AttemptOutcome::Delivered).then(|| "status".to_string()),
            outcome,
            next_attempt_ms: (outcome == AttemptOutcome::Retrying).then_some(now + 60_000),
        };
    store
        .record_attempt(attempt(&turns, ends[0], 1, now, AttemptOutcome::Retrying))
        .await
        .unwrap();
    store
        .record_attempt(attempt(
            &all,
            asks[0],
            1,
            now + 1,
            AttemptOutcome::Delivered,
        ))
        .await
        .unwrap();
    // The retried head holds its session back on its endpoint; the delivered one lets it go.
    let due = store
        .claim_deliveries("s1", &endpoints, now + 2, lease, 10)
        .await
        .unwrap();
    assert_eq!(heads(due), [(all.clone(), ends[0], 0)]);
    store
        .record_attempt(attempt(
            &all,
            ends[0],
            1,
            now + 3,
            AttemptOutcome::Delivered,
        ))
        .await
        .unwrap();
    // Due again once its time came.
    let due = store
        .claim_deliveries("s1", &endpoints, now + 61_000, lease, 10)
        .await
        .unwrap();
    assert_eq!(
        heads(due),
        [(all.clone(), ends[1], 0), (turns.clone(), ends[0], 1)]
    );
    // Given up: the next goes.
    store
        .record_attempt(attempt(
            &turns,
            ends[0],
            2,
            now + 4,
            AttemptOutcome::Abandoned,
        ))
        .await
        .unwrap();
    store
        .record_attempt(attempt(
            &all,
            ends[1],
            1,
            now + 5,
            AttemptOutcome::Delivered,
        ))
        .await
        .unwrap();
    let due = store
        .claim_deliveries("s1", std::slice::from_ref(&turns), now + 61_000, lease, 10)
        .await
        .unwrap();
    assert_eq!(heads(due), [(turns.clone(), ends[1], 0)]);

    let log = store.delivery_log(Some(id), 10).await.unwrap();
    let shown: Vec<(&str, u64, u32, AttemptOutcome)> = log
        .iter()
        .map(|a| (a.endpoint.as_str(), a.sequence, a.attempt, a.outcome))
        .collect();
    assert_eq!(
        shown,
        [
            (all.as_str(), ends[1], 1, AttemptOutcome::Delivered),
            (turns.as_str(), ends[0], 2, AttemptOutcome::Abandoned),
            (all.as_str(), ends[0], 1, AttemptOutcome::Delivered),
            (all.as_str(), asks[0], 1, AttemptOutcome::Delivered),
            (turns.as_str(), ends[0], 1, AttemptOutcome::Retrying),
        ],
        "newest first"
    );
    assert_eq!(log[4].status, Some(500));
    assert_eq!(log[4].error.as_deref(), Some("status"));
    assert_eq!(log[4].next_attempt_ms, Some(now + 60_000));
    assert_eq!(log[4].event_id, format!("evt_{}", ends[0]));
    assert_eq!(store.delivery_log(Some(id), 2).await.unwrap().len(), 2);
    assert!(store
        .delivery_log(Some(&format!("{id}-none")), 10)
        .await
        .unwrap()
        .is_empty());
}

/// The file `tests/postgres/setup.sh` writes its settings to (`postgres.env` in
/// `$AGENT_API_POSTGRES_DIR`, default `~/.cache/agent_api/postgres`).
pub fn postgres_env_file() -> std::path::PathBuf {
    std::env::var_os("AGENT_API_POSTGRES_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| std::path::Path::new(&home).join(".cache/agent_api/postgres"))
        })
        .expect("HOME is set")
        .join("postgres.env")
}

/// The test database's URL; `None` when skipped on purpose.
pub fn database() -> Option<String> {
    if std::env::var("AGENT_API_POSTGRES").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: AGENT_API_POSTGRES=skip: the PostgreSQL store tests did not run");
        return None;
    }
    if let Ok(url) = std::env::var("AGENT_API_TEST_POSTGRES_URL") {
        return Some(url);
    }
    let env_file = postgres_env_file();
    let file = std::fs::read_to_string(&env_file)
        .unwrap_or_else(|_| panic!("no PostgreSQL for the store tests: run `bash tests/postgres/setup.sh` (tests/run.sh does)"));
    for line in file.lines() {
        if let Some(url) = line.strip_prefix("AGENT_API_TEST_POSTGRES_URL=") {
            return Some(url.to_string());
        }
        if let Some(reason) = line.strip_prefix("NOT_SET_UP=") {
            panic!("no PostgreSQL for the store tests: tests/postgres/setup.sh could not set it up: {reason}");
        }
    }
    panic!(
        "{} names no database: run `bash tests/postgres/setup.sh`",
        env_file.display()
    );
}

/// `name` with a random part no other run's has: the test databases outlive test runs.
pub fn unique(name: &str) -> String {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).unwrap();
    format!(
        "{name}-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// What every store does with tokens, checked on `server`'s store while `beside` (the same
/// database opened as `agent-api token` opens it) makes and revokes them: the hash kept, never
/// the token; a revoke seen at once; a session's tenant kept.
pub async fn token_checks(
    server: Arc<dyn agent_api_server::Store>,
    beside: Arc<dyn agent_api_server::tokens::TokenStore>,
    session: &str,
) {
    use agent_api_server::tokens::{issue, Scope};
    let tokens = server.token_store().expect("the store keeps tokens");
    let issued = issue(Some("team-a"), Scope::Operate).unwrap();
    beside.create_token(issued.record.clone()).await.unwrap();
    assert!(matches!(
        beside.create_token(issued.record.clone()).await,
        Err(agent_api_server::StoreError::Duplicate(_))
    ));
    let read = tokens.token(&issued.record.id).await.unwrap().unwrap();
    assert_eq!(read, issued.record);
    assert!(read.matches(&issued.token) && !read.hash.contains(&issued.token));
    assert!(tokens
        .tokens()
        .await
        .unwrap()
        .iter()
        .any(|t| t.id == issued.record.id));
    tokens.token_used(&issued.record.id, 42).await.unwrap();
    assert!(beside.revoke_token(&issued.record.id, 7).await.unwrap());
    let read = tokens.token(&issued.record.id).await.unwrap().unwrap();
    assert_eq!((read.last_used_at, read.revoked_at), (Some(42), Some(7)));
    assert!(tokens.revoke_token(&issued.record.id, 9).await.unwrap());
    assert_eq!(
        beside
            .token(&issued.record.id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(7),
        "the first revoke's time is kept"
    );
    assert!(!beside.revoke_token("ffffffffffffffff", 1).await.unwrap());
    assert!(tokens.token("ffffffffffffffff").await.unwrap().is_none());
    let mut record = record(session, None);
    record.tenant = Some("team-a".into());
    server.create_session(record).await.unwrap();
    let read = server.session(session).await.unwrap().unwrap();
    assert_eq!(read.tenant.as_deref(), Some("team-a"));
    assert!(server
        .sessions()
        .await
        .unwrap()
        .iter()
        .any(|s| s.id == session && s.tenant.as_deref() == Some("team-a")));
}

/// The child server's side of [`spawn_child_server`]: serves `server` on a loopback port, prints
/// `<listening>ADDRESS`, and stops on SIGTERM.
pub async fn serve_until_sigterm(server: agent_api_server::Server, listening: &str) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("{listening}{}", listener.local_addr().unwrap());
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    agent_api_server::serve(listener, server, async move {
        term.recv().await;
    })
    .await
    .unwrap();
}

/// A child server's whole life: the scripted agent on the store `url` with `config`, served as
/// [`serve_until_sigterm`] serves (on a runtime of its own: the child's `main` or test calls it).
pub fn serve_scripted_until_sigterm(
    url: &str,
    config: agent_api_server::ServerConfig,
    listening: &str,
) {
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
        .unwrap();
    serve_gateway_until_sigterm(url, gateway, config, listening);
}

/// [`serve_scripted_until_sigterm`] with the agents of `gateway`.
pub fn serve_gateway_until_sigterm(
    url: &str,
    gateway: agent_api::Gateway,
    config: agent_api_server::ServerConfig,
    listening: &str,
) {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async move {
            let store = agent_api_server::StoreUrl::parse(url)
                .unwrap()
                .open()
                .await
                .unwrap();
            let server = agent_api_server::Server::new(
                gateway,
                agent_api::RunRequest::new(""),
                store,
                config,
            )
            .await
            .unwrap();
            serve_until_sigterm(server, listening).await;
        });
}

/// Starts `command` (this test binary run again as a child server: `name`, one ignored test,
/// `--nocapture`) with its stdout piped (its stderr as `command` sets it: inherited unless said),
/// and waits for the line `<listening>ADDRESS` it prints once it listens: the process and a client
/// of it. Its later output is read and dropped.
pub fn spawn_child_server(
    mut command: std::process::Command,
    name: &str,
    listening: &str,
) -> (std::process::Child, Api) {
    use std::io::BufRead;
    let mut process = command
        .args(["--ignored", "--exact", name, "--nocapture"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(process.stdout.take().unwrap()).lines();
    let address = loop {
        let line = lines
            .next()
            .expect("the child server said where it listens")
            .unwrap();
        if let Some(address) = line.strip_prefix(listening) {
            break address.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (process, Api::new(format!("http://{address}"), None))
}

/// Waits until the session's snapshot after turn `turn` is kept.
pub async fn snapshot_kept(api: &Api, session: &str, turn: u64) {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let info = api.get(&format!("/v1/sessions/{session}")).await.json();
        if info["snapshotTurn"].as_u64() >= Some(turn) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no snapshot: {info}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The bytes of snapshots a server wrote to its store (`agent_api_snapshot_written_bytes_total`).
pub async fn snapshot_bytes_written(api: &Api) -> u64 {
    let metrics = String::from_utf8(api.get("/metrics").await.body.to_vec()).unwrap();
    let written: Vec<u64> = metrics
        .lines()
        .filter(|line| line.starts_with("agent_api_snapshot_written_bytes_total{"))
        .map(|line| line.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(!written.is_empty(), "no snapshot bytes counted: {metrics}");
    written.iter().sum()
}

/// Runs a 50-turn scripted session `id` on a server over `store` (about 1 KiB a turn) and checks
/// what it kept resumable (`kind` names the store in a failure): the snapshot bytes written stay under twice the native files' bytes
/// (written whole after each turn they would be ~34 times), the store keeps a base and deltas,
/// and they put back together are the agent's export, exactly.
pub async fn fifty_turns_of_snapshots(
    kind: &str,
    store: Arc<dyn agent_api_server::Store>,
    id: &str,
) {
    let backend = agent_api_scripted::ScriptedBackend::new();
    let mut gateway = agent_api::Gateway::new();
    gateway.register(Arc::new(backend.clone())).unwrap();
    let config = agent_api_server::ServerConfig::default().with_idle_release(None);
    let api = serve_gateway(
        gateway,
        config,
        store.clone(),
        agent_api::RunRequest::new(""),
    )
    .await;
    api.post(&format!("/v1/sessions/{id}"), scripted("text"))
        .await;
    for turn in 1..=50u64 {
        let prompt = format!("turn {turn}: {}", "a word ".repeat(146));
        let sent = api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({ "message": prompt }),
            )
            .await;
        assert_eq!(sent.status, 204, "{:?}", sent.body);
        snapshot_kept(&api, id, turn).await;
    }
    let record = store.session(id).await.unwrap().unwrap();
    let native = agent_api::request::SessionRef::native(record.native_session_id.unwrap());
    let export = agent_api::AgentBackend::export_snapshot(
        &backend,
        &agent_api::RunRequest::new(""),
        &native,
    )
    .await
    .unwrap();
    let native_bytes = export.file_bytes();
    assert!(native_bytes > 50 * 1000, "{native_bytes}");
    let written = snapshot_bytes_written(&api).await;
    assert!(
        written <= 2 * native_bytes,
        "{kind}: {written} bytes of snapshots written for {native_bytes} bytes of files"
    );
    let chain = store.snapshot(id).await.unwrap().unwrap();
    assert!(
        !chain.deltas.is_empty(),
        "{kind}: kept as a base and deltas"
    );
    let mut restored = chain.restore().unwrap();
    restored.taken_at_ms = export.taken_at_ms;
    assert_eq!(restored, export, "{kind}: base and deltas are the export");
}

/// The assistant's last answer.
pub fn last_answer(events: &[Value]) -> String {
    events
        .iter()
        .rev()
        .find(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["role"] == "assistant"
                && e["data"]["item"]["kind"] == "message"
        })
        .map(|e| e["data"]["item"]["content"].to_string())
        .unwrap_or_default()
}
