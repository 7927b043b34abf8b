//! Signed webhooks against a real HTTP receiver on 127.0.0.1 that fails on purpose: it answers
//! 500, hangs past the server's timeout, is down (its port closed), then comes back. Every
//! `turn.ended` event arrives (deduplicated by `webhook-id`, as the Standard Webhooks
//! specification tells receivers to), signed (checked here with HMAC-SHA256 computed by the test
//! itself), in order per session; a server killed with undelivered rows leaves them to the next.
//!
//! The issue's outage is a minute; these tests use the same shape with short times (a 50 ms first
//! delay doubling to 400 ms, a 500 ms timeout, an outage of a few seconds), so that they run in
//! seconds.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_api_server::webhooks::{RetryPolicy, WebhookConfig, WebhookEndpoint, WebhookSecret};
use agent_api_server::{ServerConfig, StoreUrl};
use base64::Engine as _;
use common::*;
use hmac::{KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the receiver does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// 200, and the delivery is kept.
    Accept,
    /// 500.
    Fail,
    /// Answers only after a minute (the server's timeout is far shorter).
    Hang,
}

/// One delivery the receiver accepted.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    timestamp: String,
    signature: String,
    body: Vec<u8>,
}

#[derive(Debug)]
struct Shared {
    mode: Mode,
    accepted: Vec<Got>,
    requests: usize,
    /// Connections to a TLS receiver whose first byte was not a TLS handshake's (sent in clear).
    clear: usize,
    /// TLS handshakes that did not complete (the client refused the certificate).
    failed_handshakes: usize,
}

/// A real HTTP/1 receiver (over TLS when it has an acceptor); `down` closes its port and every
/// connection, `up` opens it again.
struct Receiver {
    address: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Receiver {
    async fn start(mode: Mode) -> Self {
        Self::start_with(mode, None).await
    }

    /// An `https://` receiver presenting `certificate`.
    async fn start_tls(mode: Mode, certificate: &TestCertificate) -> Self {
        Self::start_with(mode, Some(certificate.acceptor())).await
    }

    async fn start_with(mode: Mode, tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut receiver = Self {
            address,
            shared: Arc::new(Mutex::new(Shared {
                mode,
                accepted: Vec::new(),
                requests: 0,
                clear: 0,
                failed_handshakes: 0,
            })),
            tls,
            task: None,
        };
        receiver.task = Some(tokio::spawn(serve(
            listener,
            receiver.shared.clone(),
            receiver.tls.clone(),
        )));
        receiver
    }

    /// A receiver whose port is reserved but closed (down from the start).
    async fn down_from_start() -> Self {
        let mut receiver = Self::start(Mode::Accept).await;
        receiver.down();
        receiver
    }

    fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}/hooks?token=receiver-side", self.address)
    }

    fn set(&self, mode: Mode) {
        self.shared.lock().unwrap().mode = mode;
    }

    fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    async fn up(&mut self, mode: Mode) {
        self.set(mode);
        let deadline = tokio::time::Instant::now() + STEP;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.address).await {
                Ok(listener) => break listener,
                Err(error) => {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "cannot listen on {} again: {error}",
                        self.address
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        self.task = Some(tokio::spawn(serve(
            listener,
            self.shared.clone(),
            self.tls.clone(),
        )));
    }

    fn accepted(&self) -> Vec<Got> {
        self.shared.lock().unwrap().accepted.clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.down();
    }
}

/// Serves until aborted; the connections are the task's own, so they close with it. With `tls`,
/// a connection is served only after a TLS handshake; one that opens with anything else is
/// counted as sent in clear and closed unanswered.
async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Mutex<Shared>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            let Some(tls) = tls else {
                return http1(stream, shared).await;
            };
            let mut first = [0u8; 1];
            match stream.peek(&mut first).await {
                // 22: a TLS record of the handshake.
                Ok(1) if first[0] == 22 => {}
                Ok(1) => {
                    shared.lock().unwrap().clear += 1;
                    return;
                }
                _ => return,
            }
            match tls.accept(stream).await {
                Ok(stream) => http1(stream, shared).await,
                Err(_) => shared.lock().unwrap().failed_handshakes += 1,
            }
        });
    }
}

/// HTTP/1 on one connection, each request answered by [`answer`].
async fn http1(
    io: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    shared: Arc<Mutex<Shared>>,
) {
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = shared.clone();
        async move { Ok::<_, std::convert::Infallible>(answer(request, &shared).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
}

/// A CA made for one test, and a certificate it signed for `127.0.0.1` and `localhost`.
struct TestCertificate {
    ca_pem: String,
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: Vec<u8>,
}

impl TestCertificate {
    fn new(ca_name: &str) -> Self {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, ca_name);
        ca.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        Self {
            ca_pem: ca.pem(),
            chain: vec![leaf.der().clone()],
            key: key.serialize_der(),
        }
    }

    /// The CA's certificate in a PEM file of `dir`.
    fn ca_file(&self, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }

    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(self.key.clone());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), key.into())
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

async fn answer(
    request: Request<Incoming>,
    shared: &Mutex<Shared>,
) -> Response<Full<bytes::Bytes>> {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (id, timestamp, signature) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let body = request
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    let mode = {
        let mut shared = shared.lock().unwrap();
        shared.requests += 1;
        shared.mode
    };
    let status = match mode {
        Mode::Accept => {
            shared.lock().unwrap().accepted.push(Got {
                id,
                timestamp,
                signature,
                body,
            });
            StatusCode::OK
        }
        Mode::Fail => StatusCode::INTERNAL_SERVER_ERROR,
        Mode::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::OK
        }
    };
    Response::builder()
        .status(status)
        .body(Full::new(bytes::Bytes::new()))
        .unwrap()
}

/// Webhooks of `turn.ended` to `url`, with short delays, timeout and poll for tests.
fn webhooks(url: &str) -> WebhookConfig {
    let endpoint = WebhookEndpoint::parse(&format!("{url};events=turn.ended")).unwrap();
    WebhookConfig::new(vec![endpoint], WebhookSecret::parse(SECRET).unwrap())
        .with_retry(RetryPolicy::new(
            Duration::from_millis(50),
            Duration::from_millis(400),
            1000,
        ))
        .with_timeout(Duration::from_millis(500))
        .with_poll(Duration::from_millis(50))
}

/// The Standard Webhooks check, written here from the specification: the HMAC-SHA256 of
/// `{id}.{timestamp}.{body}` keyed with the secret's base64-decoded bytes, `v1,`-prefixed.
fn verify(got: &Got) {
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.", got.id, got.timestamp).as_bytes());
    mac.update(&got.body);
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    assert!(
        got.signature.split(' ').any(|s| s == expected),
        "bad signature {} for {}",
        got.signature,
        got.id
    );
    let sent: i64 = got.timestamp.parse().expect("a unix timestamp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now - sent).abs() < 300,
        "timestamp {sent} is not now ({now})"
    );
}

/// The turn ends of `session` (event id, sequence), in order.
async fn turn_ends(api: &Api, session: &str) -> Vec<(String, u64)> {
    api.all_events(session, 1000)
        .await
        .iter()
        .filter(|e| turn_end(e))
        .map(|e| {
            (
                e["event_id"].as_str().unwrap().to_string(),
                e["sequence"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Runs one turn of `session` and waits for its end.
async fn turn(api: &Api, session: &str, message: &str) {
    let before = turn_ends(api, session).await.len();
    let posted = api
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({ "message": message }),
        )
        .await;
    assert_eq!(posted.status, 204, "{:?}", posted.body);
    let deadline = tokio::time::Instant::now() + STEP;
    while turn_ends(api, session).await.len() <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the delivery log shows a try of `session` that `check` accepts.
async fn wait_log(api: &Api, session: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let log = api
            .get(&format!("/v1/webhooks/deliveries?session={session}"))
            .await;
        assert_eq!(log.status, 200, "{:?}", log.body);
        let log = log.json();
        if let Some(found) = log["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| check(d))
        {
            return found.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} try of {session} in the delivery log: {log:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the receiver accepted every id of `expected`, then checks each delivery: signed,
/// the envelope around the session's event, nothing but those ids, and per session in sequence
/// order (first arrivals; a repeat is the same `webhook-id`, which the receiver drops).
async fn check_received(
    receiver: &Receiver,
    expected: &BTreeMap<String, Vec<(String, u64)>>,
) -> Vec<Got> {
    let want: HashSet<&str> = expected
        .values()
        .flatten()
        .map(|(id, _)| id.as_str())
        .collect();
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let ids: HashSet<String> = receiver.accepted().into_iter().map(|g| g.id).collect();
        if want.iter().all(|id| ids.contains(*id)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "missing deliveries: {:?}",
            want.iter()
                .filter(|id| !ids.contains(**id))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let accepted = receiver.accepted();
    let mut first: Vec<&Got> = Vec::new();
    for got in &accepted {
        verify(got);
        if !first.iter().any(|g| g.id == got.id) {
            first.push(got);
        }
    }
    assert_eq!(
        first.iter().map(|g| g.id.as_str()).collect::<HashSet<_>>(),
        want,
        "exactly the turn ends, deduplicated by webhook-id"
    );
    for (session, ends) in expected {
        let arrived: Vec<u64> = first
            .iter()
            .map(|g| serde_json::from_slice::<Value>(&g.body).unwrap())
            .filter(|body| body["data"]["session_id"] == session.as_str())
            .map(|body| {
                assert_eq!(body["type"], "turn.ended", "{body}");
                assert_eq!(body["data"]["agent"], "scripted", "{body}");
                assert_eq!(body["data"]["event"]["session_id"], session.as_str());
                assert!(body["data"]["event"]["raw"].is_null(), "{body}");
                assert_eq!(body["timestamp"], body["data"]["event"]["time"]);
                body["data"]["event"]["sequence"].as_u64().unwrap()
            })
            .collect();
        let sequences: Vec<u64> = ends.iter().map(|(_, s)| *s).collect();
        assert_eq!(arrived, sequences, "session {session}: in order");
    }
    for got in &accepted {
        let body: Value = serde_json::from_slice(&got.body).unwrap();
        assert_eq!(body["data"]["event"]["event_id"], got.id.as_str());
    }
    accepted
}

#[tokio::test]
async fn a_receiver_that_fails_hangs_and_is_down_gets_every_turn_end_once_signed_in_order() {
    let mut receiver = Receiver::start(Mode::Fail).await;
    let dir = tempfile::tempdir().unwrap();
    let store = StoreUrl::Sqlite(dir.path().join("hooks.sqlite3"))
        .open()
        .await
        .unwrap();
    let api = start_on(
        ServerConfig::default()
            .with_token("t0ken")
            .with_webhooks(webhooks(&receiver.url())),
        store,
    )
    .await;
    let sessions = ["alpha", "beta"];
    for session in sessions {
        let created = api
            .post(&format!("/v1/sessions/{session}"), scripted("text"))
            .await;
        assert_eq!(created.status, 200);
    }

    // 500: tried again.
    for session in sessions {
        turn(&api, session, "one").await;
    }
    for session in sessions {
        let failed = wait_log(&api, session, "500", |d| d["status"] == 500).await;
        assert_eq!(failed["outcome"], "retrying", "{failed}");
        assert_eq!(failed["error"], "status");
        assert_eq!(failed["type"], "turn.ended");
        assert!(failed["next_attempt_at"].is_string(), "{failed}");
        assert!(
            !failed.to_string().contains("receiver-side"),
            "the log shows no query: {failed}"
        );
    }

    // No answer within the timeout: tried again.
    receiver.set(Mode::Hang);
    for session in sessions {
        turn(&api, session, "two").await;
    }
    for session in sessions {
        wait_log(&api, session, "timeout", |d| d["error"] == "timeout").await;
    }

    // Down: the port is closed.
    receiver.down();
    for session in sessions {
        turn(&api, session, "three").await;
    }
    for session in sessions {
        wait_log(&api, session, "refused", |d| d["error"] == "connect").await;
    }
    // An outage of the same shape as the issue's minute, shorter: several tries fail meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;

    receiver.up(Mode::Accept).await;
    for session in sessions {
        turn(&api, session, "four").await;
    }
    let mut expected = BTreeMap::new();
    for session in sessions {
        let ends = turn_ends(&api, session).await;
        assert_eq!(ends.len(), 4);
        expected.insert(session.to_string(), ends);
    }
    check_received(&receiver, &expected).await;
    for session in sessions {
        let delivered = wait_log(&api, session, "delivered", |d| d["outcome"] == "delivered").await;
        assert_eq!(delivered["status"], 200);
    }

    // The log is behind the token; the metrics count the tries by outcome.
    let anonymous = api.with_token(None);
    assert_eq!(anonymous.get("/v1/webhooks/deliveries").await.status, 401);
    let metrics = api.get("/metrics").await;
    let text = String::from_utf8_lossy(&metrics.body);
    let count = |outcome: &str| -> u64 {
        text.lines()
            .find(|l| {
                l.starts_with("agent_api_webhook_deliveries_total")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(count("delivered") >= 8, "{text}");
    assert!(count("retrying") >= 6, "{text}");
}

/// Runs `work` on a runtime of its own, then drops that runtime with everything on it (the
/// server's tasks, its delivery worker, its store): no graceful stop runs, as when the process
/// is killed.
fn on_a_runtime_killed_after<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let out = runtime.block_on(work);
        runtime.shutdown_background();
        out
    })
    .join()
    .unwrap()
}

/// The SQLite store at `path` once a killed server's lock on it is gone.
async fn reopen(path: &std::path::Path) -> Arc<dyn agent_api_server::Store> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        match StoreUrl::Sqlite(path.to_path_buf()).open().await {
            Ok(store) => return store,
            Err(error) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the killed server's store stayed locked: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test]
async fn a_server_killed_with_undelivered_rows_leaves_them_to_the_next_which_delivers_them() {
    let mut receiver = Receiver::down_from_start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hooks.sqlite3");
    let url = receiver.url();

    // The first server stores two turns' ends while the receiver is down, then is killed.
    let (first_path, first_url) = (path.clone(), url.clone());
    let ends = tokio::task::spawn_blocking(move || {
        on_a_runtime_killed_after(async move {
            let store = StoreUrl::Sqlite(first_path).open().await.unwrap();
            let api = start_on(
                ServerConfig::default().with_webhooks(webhooks(&first_url)),
                store,
            )
            .await;
            let created = api.post("/v1/sessions/kept", scripted("text")).await;
            assert_eq!(created.status, 200);
            turn(&api, "kept", "one").await;
            turn(&api, "kept", "two").await;
            wait_log(&api, "kept", "refused", |d| d["error"] == "connect").await;
            turn_ends(&api, "kept").await
        })
    })
    .await
    .unwrap();
    assert_eq!(ends.len(), 2);

    // The next server on the same file, with the receiver back, delivers what the first left.
    receiver.up(Mode::Accept).await;
    let store = reopen(&path).await;
    let api = start_on(ServerConfig::default().with_webhooks(webhooks(&url)), store).await;
    let expected = BTreeMap::from([("kept".to_string(), ends)]);
    check_received(&receiver, &expected).await;
    let delivered = wait_log(&api, "kept", "delivered", |d| d["outcome"] == "delivered").await;
    assert_eq!(delivered["status"], 200);
}

#[tokio::test]
async fn the_memory_and_sqlite_outboxes_queue_with_their_events_and_keep_each_sessions_order() {
    outbox_checks(StoreUrl::Memory.open().await.unwrap(), "memory").await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = StoreUrl::Sqlite(dir.path().join("outbox.sqlite3"));
    outbox_checks(sqlite.open().await.unwrap(), "sqlite").await;
}

#[tokio::test]
async fn an_https_receiver_with_a_private_ca_gets_every_turn_end_signed_over_tls_never_in_clear() {
    let certificate = TestCertificate::new("agent-api webhook test CA");
    let receiver = Receiver::start_tls(Mode::Accept, &certificate).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = certificate.ca_file(dir.path(), "ca.pem");
    let api = start_on(
        ServerConfig::default()
            .with_token("t0ken")
            .with_webhooks(webhooks(&receiver.url()).with_ca_file(&ca).unwrap()),
        StoreUrl::Memory.open().await.unwrap(),
    )
    .await;
    let created = api.post("/v1/sessions/secure", scripted("text")).await;
    assert_eq!(created.status, 200);
    turn(&api, "secure", "one").await;
    turn(&api, "secure", "two").await;
    let expected = BTreeMap::from([("secure".to_string(), turn_ends(&api, "secure").await)]);
    check_received(&receiver, &expected).await;
    let delivered = wait_log(&api, "secure", "delivered", |d| d["outcome"] == "delivered").await;
    assert_eq!(delivered["status"], 200);
    assert!(
        delivered["endpoint"]
            .as_str()
            .is_some_and(|e| e.starts_with("https://")),
        "{delivered}"
    );
    let shared = receiver.shared.lock().unwrap();
    assert_eq!(
        (shared.clear, shared.failed_handshakes),
        (0, 0),
        "{shared:?}"
    );
}

#[tokio::test]
async fn an_https_receiver_whose_ca_is_not_trusted_gets_nothing_the_tries_fail_as_tls_and_are_kept_for_a_server_that_trusts_it(
) {
    let certificate = TestCertificate::new("agent-api webhook receiver CA");
    let other = TestCertificate::new("agent-api some other CA");
    let receiver = Receiver::start_tls(Mode::Accept, &certificate).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hooks.sqlite3");
    let wrong_ca = other.ca_file(dir.path(), "other-ca.pem");

    // Trusting another CA, then the system's (which know nothing of the test's): refused, tried
    // again, each server killed with its rows undelivered.
    let mut expected = BTreeMap::new();
    for trusted in [Some(wrong_ca), None] {
        let (path, url) = (path.clone(), receiver.url());
        let (session, ends) = tokio::task::spawn_blocking(move || {
            on_a_runtime_killed_after(async move {
                let mut config = webhooks(&url);
                if let Some(ca) = trusted {
                    config = config.with_ca_file(ca).unwrap();
                }
                let store = reopen(&path).await;
                let api = start_on(ServerConfig::default().with_webhooks(config), store).await;
                let session = unique("untrusted");
                let created = api
                    .post(&format!("/v1/sessions/{session}"), scripted("text"))
                    .await;
                assert_eq!(created.status, 200);
                turn(&api, &session, "one").await;
                let retried = wait_log(&api, &session, "second tls", |d| {
                    d["error"] == "tls" && d["attempt"].as_u64() >= Some(2)
                })
                .await;
                assert_eq!(retried["outcome"], "retrying", "{retried}");
                assert!(retried["status"].is_null(), "{retried}");
                let ends = turn_ends(&api, &session).await;
                (session, ends)
            })
        })
        .await
        .unwrap();
        expected.insert(session, ends);
    }
    {
        let shared = receiver.shared.lock().unwrap();
        assert!(
            shared.accepted.is_empty() && shared.requests == 0,
            "{shared:?}"
        );
        assert_eq!(shared.clear, 0, "nothing is ever sent in clear: {shared:?}");
        assert!(shared.failed_handshakes >= 4, "{shared:?}");
    }

    // A server that trusts the receiver's CA delivers what the refused tries left.
    let ca = certificate.ca_file(dir.path(), "ca.pem");
    let store = reopen(&path).await;
    let _api = start_on(
        ServerConfig::default().with_webhooks(webhooks(&receiver.url()).with_ca_file(&ca).unwrap()),
        store,
    )
    .await;
    check_received(&receiver, &expected).await;
    assert_eq!(receiver.shared.lock().unwrap().clear, 0);
}

#[tokio::test]
async fn a_tenants_token_reads_only_its_tenants_tries_in_the_delivery_log() {
    use agent_api_server::tokens::{issue, Scope};
    let receiver = Receiver::start(Mode::Accept).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::default()
        .with_token("t0ken")
        .with_webhooks(webhooks(&receiver.url()));
    for tenant in ["a", "b"] {
        std::fs::create_dir_all(dir.path().join(tenant)).unwrap();
        let root = agent_api_server::Tenant::new(dir.path().join(tenant));
        config = config.with_tenant(
            tenant,
            root.with_home(dir.path().join("homes").join(tenant)),
        );
    }
    let store = StoreUrl::Memory.open().await.unwrap();
    let api = start_on(config, store.clone()).await;
    let mut tokens = BTreeMap::new();
    for (tenant, scope) in [
        ("a", Scope::Operate),
        ("a", Scope::Read),
        ("b", Scope::Operate),
    ] {
        let issued = issue(Some(tenant), scope).unwrap();
        let made = store
            .token_store()
            .unwrap()
            .create_token(issued.record.clone());
        made.await.unwrap();
        tokens.insert((tenant, scope), issued.token);
    }
    for (tenant, session) in [("a", "ours"), ("b", "theirs")] {
        let as_tenant = api.with_token(Some(&tokens[&(tenant, Scope::Operate)]));
        let created = as_tenant
            .post(&format!("/v1/sessions/{session}"), scripted("text"))
            .await;
        assert_eq!(created.status, 200, "{:?}", created.body);
        turn(&as_tenant, session, "one").await;
        // The server's own token sees every tenant's tries.
        wait_log(&api, session, "delivered", |d| d["outcome"] == "delivered").await;
    }
    let sessions_seen = |log: Value| -> Vec<String> {
        let mut seen: Vec<String> = log["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["session_id"].as_str().unwrap().to_string())
            .collect();
        seen.dedup();
        seen
    };
    let a_read = api.with_token(Some(&tokens[&("a", Scope::Read)]));
    let all = a_read.get("/v1/webhooks/deliveries").await;
    assert_eq!(all.status, 200, "{:?}", all.body);
    assert!(!String::from_utf8_lossy(&all.body).contains("theirs"));
    assert_eq!(sessions_seen(all.json()), vec!["ours".to_string()]);
    // Another tenant's session is answered as one without a try; its own are there.
    let theirs = a_read.get("/v1/webhooks/deliveries?session=theirs").await;
    assert_eq!(theirs.json(), json!({ "deliveries": [] }));
    let ours = a_read.get("/v1/webhooks/deliveries?session=ours").await;
    assert_eq!(sessions_seen(ours.json()), vec!["ours".to_string()]);
    let both = api.get("/v1/webhooks/deliveries").await.json();
    let mut every = sessions_seen(both);
    every.sort();
    every.dedup();
    assert_eq!(every, vec!["ours".to_string(), "theirs".to_string()]);
}
