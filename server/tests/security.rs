//! The server's own surfaces attacked as a web page, a hostile client and a greedy one would
//! (issue 46): `Host` and `Origin` checks, options only the operator may set, bounds on live
//! sessions, connections, request heads, idle and stalled connections, the session id grammar,
//! followers of another server's session, and a refused message that costs nothing.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_api_server::ServerConfig;
use common::*;
use hyper::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `request` raw on a new connection and reads the answer until the server closes it.
async fn raw(api: &Api, request: &str) -> String {
    let mut tcp = TcpStream::connect(api.base.trim_start_matches("http://"))
        .await
        .unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(STEP, tcp.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

fn address(api: &Api) -> String {
    api.base.trim_start_matches("http://").to_string()
}

#[tokio::test]
async fn a_foreign_host_or_a_cross_site_origin_reaches_nothing_with_or_without_a_token() {
    let config = ServerConfig::default()
        .with_cors_origin("https://app.example")
        .with_allowed_host("agents.example.com");
    let api = start(config).await;
    let here = address(&api);
    let port = here.rsplit_once(':').unwrap().1;

    // DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
    let rebound = format!("evil.example:{port}");
    let answer = api
        .send(Method::GET, "/v1/sessions", None, &[("host", &rebound)])
        .await;
    assert_eq!(answer.status(), 403);
    for path in ["/ui/", "/v1/health", "/v1/agents"] {
        let answer = api
            .send(Method::GET, path, None, &[("host", &rebound)])
            .await;
        assert_eq!(answer.status(), 403, "{path}");
    }

    // A cross-site form: a simple POST needs no preflight, and it would terminate or create.
    assert_eq!(
        api.post("/v1/sessions/s", scripted("text")).await.status,
        200
    );
    let form = raw(
        &api,
        &format!(
            "POST /v1/sessions/s/terminate HTTP/1.1\r\nHost: {here}\r\nOrigin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert!(form.starts_with("HTTP/1.1 403"), "{form}");
    assert!(form.contains("origin_not_allowed"), "{form}");
    let info = api.get("/v1/sessions/s").await.json();
    assert_eq!(info["ended"], false, "the form changed nothing: {info}");
    for origin in [
        "http://evil.example",
        "null",
        &format!("http://evil.example:{port}"),
    ] {
        let answer = api
            .send(
                Method::POST,
                "/v1/sessions/t",
                Some(scripted("text").to_string().into()),
                &[("origin", origin)],
            )
            .await;
        assert_eq!(answer.status(), 403, "{origin}");
    }
    assert_eq!(api.get("/v1/sessions/t").await.status, 404, "nothing kept");

    // The server's own page, a CORS origin its operator named, a name it allowed, localhost,
    // and a client that sends no Origin at all (curl, an SDK) are served.
    let own = format!("http://{here}");
    let localhost = format!("localhost:{port}");
    let named = format!("Agents.Example.com:{port}");
    let served: [&[(&str, &str)]; 5] = [
        &[("origin", &own)],
        &[("origin", "https://app.example")],
        &[("host", &named)],
        &[("host", &localhost)],
        &[],
    ];
    for (index, headers) in served.into_iter().enumerate() {
        let id = format!("ok{index}");
        let answer = api
            .send(
                Method::POST,
                &format!("/v1/sessions/{id}"),
                Some(scripted("text").to_string().into()),
                headers,
            )
            .await;
        assert_eq!(answer.status(), 200, "{headers:?}");
    }

    // The same with a token: a right token does not make a foreign Host or Origin right.
    let api = start(ServerConfig::default().with_token("t0k")).await;
    let answer = api
        .send(
            Method::POST,
            "/v1/sessions/u",
            Some(scripted("text").to_string().into()),
            &[("origin", "http://evil.example")],
        )
        .await;
    assert_eq!(answer.status(), 403);
}

#[tokio::test]
async fn client_options_naming_a_program_or_a_looser_policy_are_403_unless_the_operator_allows_them(
) {
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("planted");
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(agent_api_builtin::backend(&agent_api_builtin::ACP).unwrap())
        .unwrap();
    gateway
        .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
        .unwrap();
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let defaults = agent_api::RunRequest::new("").with_working_dir(dir.path());
    let api = serve_gateway(gateway, ServerConfig::default(), store, defaults).await;

    // A program of the client's choosing, run as the server's user at session creation.
    let command = json!(["sh", "-c", format!("echo pwned > {}", planted.display())]);
    let answer = api
        .post(
            "/v1/sessions/a",
            json!({"agent": "acp", "options": {"backend.acp.command": command}}),
        )
        .await;
    let problem = answer.problem(403);
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .starts_with("options.backend.acp.command: "),
        "{problem}"
    );
    assert_eq!(problem["type"], "urn:agent-api:error:option_not_allowed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!planted.exists(), "the client's program never ran");
    assert_eq!(api.get("/v1/sessions/a").await.status, 404, "nothing kept");

    // A policy looser than the operator's (`--approve ask` here).
    for (field, body) in [
        (
            "permissionMode",
            json!({"agent": "scripted", "permissionMode": "bypass"}),
        ),
        (
            "allowedTools",
            json!({"agent": "scripted", "allowedTools": ["Bash"]}),
        ),
    ] {
        let problem = api.post("/v1/sessions/b", body).await.problem(403);
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{field}: ")),
            "{problem}"
        );
    }
    // What is the client's own: a scripted scenario, asking (as the operator does).
    let body = json!({"agent": "scripted", "permissionMode": "ask", "options": {"backend.scripted.scenario": "text"}});
    assert_eq!(api.post("/v1/sessions/c", body).await.status, 200);

    // Under `--approve none`, even asking is looser.
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let strict =
        agent_api::RunRequest::new("").with_permissions(agent_api::PermissionPolicy::DenyAll);
    let api = serve_with(ServerConfig::default(), store, strict).await;
    let body = json!({"agent": "scripted", "permissionMode": "ask"});
    api.post("/v1/sessions/d", body.clone()).await.problem(403);

    // The operator lets clients choose their permission mode.
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let strict =
        agent_api::RunRequest::new("").with_permissions(agent_api::PermissionPolicy::DenyAll);
    let config = ServerConfig::default().with_client_option("permissionMode");
    let api = serve_with(config, store, strict).await;
    assert_eq!(api.post("/v1/sessions/d", body).await.status, 200);
}

#[tokio::test]
async fn live_sessions_are_bounded_and_one_more_is_503_until_one_ends() {
    let api = start(ServerConfig::default().with_max_sessions(2)).await;
    for id in ["a", "b"] {
        assert_eq!(
            api.post(&format!("/v1/sessions/{id}"), scripted("text"))
                .await
                .status,
            200
        );
    }
    let problem = api
        .post("/v1/sessions/c", scripted("text"))
        .await
        .problem(503);
    assert_eq!(problem["type"], "urn:agent-api:error:too_many_sessions");
    assert_eq!(api.get("/v1/sessions/c").await.status, 404, "nothing kept");
    assert_eq!(api.post_empty("/v1/sessions/a/terminate").await.status, 204);
    assert_eq!(
        api.post("/v1/sessions/c", scripted("text")).await.status,
        200
    );
}

#[tokio::test]
async fn a_request_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout() {
    let config = ServerConfig::default().with_connections(
        16,
        Duration::from_millis(800),
        Duration::from_secs(60),
    );
    let api = start(config).await;
    let mut tcp = TcpStream::connect(address(&api)).await.unwrap();
    tcp.write_all(b"GET /v1/health HTTP/1.1\r\n").await.unwrap();
    let started = tokio::time::Instant::now();
    // Slowloris: a header byte every 100 ms, the head never whole.
    let cut = loop {
        if tcp.write_all(b"X").await.is_err() {
            break started.elapsed();
        }
        let mut byte = [0u8; 1];
        // An answer or the end of the connection: the server gave up on the head.
        if tokio::time::timeout(Duration::from_millis(100), tcp.read(&mut byte))
            .await
            .is_ok()
        {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the server still waits for the head after 10 s"
        );
    };
    assert!(cut >= Duration::from_millis(700), "cut early: {cut:?}");
}

#[tokio::test]
async fn connections_past_the_cap_are_answered_503_and_the_slot_comes_back() {
    let config = ServerConfig::default().with_connections(
        2,
        Duration::from_secs(30),
        Duration::from_secs(60),
    );
    let api = start(config).await;
    let first = TcpStream::connect(address(&api)).await.unwrap();
    let _second = TcpStream::connect(address(&api)).await.unwrap();
    // The two are accepted before the third comes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let here = address(&api);
    let third = raw(
        &api,
        &format!("GET /v1/health HTTP/1.1\r\nHost: {here}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(third.starts_with("HTTP/1.1 503"), "{third}");
    assert!(third.contains("too_many_connections"), "{third}");
    drop(first);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let answer = raw(
            &api,
            &format!("GET /v1/health HTTP/1.1\r\nHost: {here}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot never came back: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_the_idle_timeout() {
    let config = ServerConfig::default().with_connections(
        16,
        Duration::from_secs(60),
        Duration::from_millis(800),
    );
    let api = start(config).await;
    let here = address(&api);
    // One that never sends a byte, and one kept alive after its answer.
    let mut silent = TcpStream::connect(&here).await.unwrap();
    let mut kept = TcpStream::connect(&here).await.unwrap();
    kept.write_all(format!("GET /v1/health HTTP/1.1\r\nHost: {here}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    for tcp in [&mut silent, &mut kept] {
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut rest))
            .await
            .expect("the idle connection is closed")
            .unwrap();
    }
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_its_stream_loses_its_connection_at_the_stall_bound() {
    let config = ServerConfig::default().with_sse_stall(Duration::from_millis(500));
    let api = start(config).await;
    let here = address(&api);
    api.post("/v1/sessions/s", scripted("echo")).await;
    // A small receive window, and never a read: the server's writes block once it is full.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(here.parse().unwrap()).await.unwrap();
    tcp.write_all(
        format!("GET /v1/sessions/s/events/sse HTTP/1.1\r\nHost: {here}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let words = "word ".repeat(20_000);
    let sent = api
        .post("/v1/sessions/s/messages", json!({ "message": words }))
        .await;
    assert_eq!(sent.status, 204);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let info = api.get("/v1/sessions/s").await.json();
        if info["eventCount"].as_u64().unwrap() > 20_000 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not end: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Dropped: what it still holds drains, then the connection is closed (not just the stream).
    let mut drained = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match tcp.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => drained.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the stalled client's connection is still open after {} bytes",
        drained.len()
    );
}

#[tokio::test]
async fn session_ids_people_cannot_tell_apart_are_refused() {
    let api = start(ServerConfig::default()).await;
    for id in [
        ".",
        "..",
        "%20",
        "a%20b",
        "a%E2%80%8Bb",
        "a%E2%80%AEb",
        "%EF%BB%BFx",
        "a%5Cb",
        "a%C2%A0b",
    ] {
        let answer = api
            .post(&format!("/v1/sessions/{id}"), scripted("text"))
            .await;
        let problem = answer.problem(400);
        assert!(
            problem["detail"].as_str().unwrap().contains("session id"),
            "{id}: {problem}"
        );
    }
    for id in ["ok", "run-1.2_x", "séance", "ab..c"] {
        let answer = api
            .post(&format!("/v1/sessions/{id}"), scripted("text"))
            .await;
        assert_eq!(answer.status, 200, "{id}");
    }
}

#[tokio::test]
async fn a_message_past_the_queue_bound_is_refused_before_its_images_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let api = start_in(ServerConfig::default().with_max_queue(0), dir.path()).await;
    let body = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow", "backend.scripted.delay_ms": 200}});
    api.post("/v1/sessions/s", body).await;
    assert_eq!(
        api.post("/v1/sessions/s/messages", json!({"message": "go"}))
            .await
            .status,
        204
    );
    // A missing file: read first, it would be 400 `images[0]`; checked first, the turn refuses it.
    let message = json!({"message": "again", "images": [{"path": "missing.png"}]});
    let problem = api
        .post("/v1/sessions/s/messages", message)
        .await
        .problem(409);
    assert_eq!(
        problem["type"], "urn:agent-api:error:turn_in_progress",
        "{problem}"
    );
}

#[tokio::test]
async fn followers_of_another_servers_session_are_capped_and_share_one_poll() {
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let counted = Arc::new(Counted::new(store));
    let owner = start_on(ServerConfig::default().with_daemon_id("a"), counted.clone()).await;
    assert_eq!(
        owner.post("/v1/sessions/s", scripted("text")).await.status,
        200
    );
    let config = ServerConfig::default()
        .with_daemon_id("b")
        .with_subscribers(64, 20);
    let other = start_on(config, counted.clone()).await;
    let mut streams = Vec::new();
    for _ in 0..20 {
        streams.push(
            other
                .sse(Method::GET, "/v1/sessions/s/events/sse", None, &[])
                .await,
        );
    }
    let past = other
        .send(Method::GET, "/v1/sessions/s/events/sse", None, &[])
        .await;
    assert_eq!(
        past.status(),
        429,
        "the same bound as a session this server runs"
    );
    let before = counted.reads();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reads = counted.reads() - before;
    // One poll every 250 ms reads the record once: about 8 in 2 s, not 20 followers' 160.
    assert!(reads <= 30, "{reads} store reads in 2 s for 20 followers");
    // They still see what the owner stores.
    assert_eq!(
        owner
            .post("/v1/sessions/s/messages", json!({"message": "hi"}))
            .await
            .status,
        204
    );
    for stream in &mut streams {
        stream.until("item.completed").await;
    }
}

/// A store that counts the session reads of its followers' polls.
struct Counted {
    inner: Arc<dyn agent_api_server::Store>,
    reads: std::sync::atomic::AtomicUsize,
}

impl Counted {
    fn new(inner: Arc<dyn agent_api_server::Store>) -> Self {
        Self {
            inner,
            reads: Default::default(),
        }
    }

    fn reads(&self) -> usize {
        self.reads.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counted")
    }
}

#[async_trait::async_trait]
impl agent_api_server::Store for Counted {
    async fn create_session(
        &self,
        record: agent_api_server::store::SessionRecord,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.create_session(record).await
    }
    async fn append(
        &self,
        session: &str,
        events: Vec<agent_api_server::store::StoredEvent>,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.append(session, events).await
    }
    async fn events(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<agent_api_server::store::StoredEvent>, agent_api_server::StoreError> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.events(session, after, limit).await
    }
    async fn session(
        &self,
        id: &str,
    ) -> Result<Option<agent_api_server::store::SessionRecord>, agent_api_server::StoreError> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.session(id).await
    }
    async fn sessions(
        &self,
    ) -> Result<Vec<agent_api_server::store::SessionRecord>, agent_api_server::StoreError> {
        self.inner.sessions().await
    }
    async fn set_native_session_id(
        &self,
        id: &str,
        native: &str,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.set_native_session_id(id, native).await
    }
    async fn mark_ended(
        &self,
        id: &str,
        error: Option<&str>,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.mark_ended(id, error).await
    }
    async fn set_usage(&self, id: &str, usage: &str) -> Result<(), agent_api_server::StoreError> {
        self.inner.set_usage(id, usage).await
    }
    async fn set_agent_mode(
        &self,
        id: &str,
        mode: &str,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.set_agent_mode(id, mode).await
    }
    async fn append_owned(
        &self,
        session: &str,
        owner: &str,
        events: Vec<agent_api_server::store::StoredEvent>,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.append_owned(session, owner, events).await
    }
    async fn claim(
        &self,
        id: &str,
        owner: &str,
        from: Option<&str>,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.claim(id, owner, from).await
    }
    async fn update(
        &self,
        id: &str,
        owner: &str,
        update: agent_api_server::store::SessionUpdate,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.update(id, owner, update).await
    }
    async fn put_snapshot(
        &self,
        id: &str,
        owner: &str,
        snapshot: agent_api_server::store::StoredSnapshot,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.put_snapshot(id, owner, snapshot).await
    }
    async fn snapshot(
        &self,
        id: &str,
    ) -> Result<Option<agent_api_server::store::StoredChain>, agent_api_server::StoreError> {
        self.inner.snapshot(id).await
    }
    async fn put_snapshot_delta(
        &self,
        id: &str,
        owner: &str,
        delta: agent_api_server::store::StoredDelta,
    ) -> Result<(), agent_api_server::StoreError> {
        self.inner.put_snapshot_delta(id, owner, delta).await
    }
    async fn heartbeat(&self, server: &str) -> Result<(), agent_api_server::StoreError> {
        self.inner.heartbeat(server).await
    }
    async fn server_alive(
        &self,
        server: &str,
        lease: std::time::Duration,
    ) -> Result<bool, agent_api_server::StoreError> {
        self.inner.server_alive(server, lease).await
    }
}
