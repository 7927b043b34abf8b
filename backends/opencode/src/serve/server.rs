//! One running `opencode serve`, shared by the runs of one backend value that have the same
//! environment: spawned in its own process group on a free loopback port with a random
//! password, with one subscription to its global event stream that hands each run the events
//! of the sessions it watches. The backend's pool and each run on it hold the server; when the
//! last of them lets go (the backend dropped, its last run ended or cancelled), its process
//! group is killed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_api::kit::http::HttpClient;
use agent_api::kit::process::{spawn, ProcessGroupChild};
use agent_api::kit::CommandSpec;
use agent_api::AgentError;
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

/// The user name OpenCode expects with `OPENCODE_SERVER_PASSWORD` (its default).
const USERNAME: &str = "opencode";

/// What a run receives from the server's event stream.
pub type EventRx = mpsc::UnboundedReceiver<String>;

struct Subscriber {
    sessions: HashSet<String>,
    // Unbounded so one slow run never stalls the stream of the others; each run's own
    // backpressure applies where its bridge writes to the driver.
    tx: mpsc::UnboundedSender<String>,
}

#[derive(Default)]
struct Subscribers {
    next: AtomicU64,
    map: Mutex<HashMap<u64, Subscriber>>,
}

impl Subscribers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Subscriber>> {
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands one event to the runs watching its session.
    fn dispatch(&self, data: String) {
        let Some(session) = event_session(&data) else {
            return;
        };
        for subscriber in self
            .lock()
            .values()
            .filter(|s| s.sessions.contains(&session))
        {
            let _ = subscriber.tx.send(data.clone());
        }
    }
}

/// The session an event belongs to; `None` for server-wide events and the `sync` duplicates.
pub fn event_session(data: &str) -> Option<String> {
    let event: Value = serde_json::from_str(data).ok()?;
    let payload = event.get("payload")?;
    if payload.get("type").and_then(Value::as_str) == Some("sync") {
        return None;
    }
    let properties = payload.get("properties")?;
    let session = [
        properties.get("sessionID"),
        properties.pointer("/part/sessionID"),
        properties.pointer("/info/sessionID"),
    ]
    .into_iter()
    .flatten()
    .find_map(Value::as_str)
    .map(str::to_string);
    session
}

/// A running `opencode serve`.
pub struct Server {
    client: HttpClient,
    process: Mutex<Option<ProcessGroupChild>>,
    pgid: i32,
    subscribers: Arc<Subscribers>,
    alive: Arc<AtomicBool>,
    dispatcher: tokio::task::AbortHandle,
    /// How long it took to start listening.
    pub startup: Duration,
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("url", &self.url)
            .field("pgid", &self.pgid)
            .field("startup", &self.startup)
            .finish()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.dispatcher.abort();
        if let Some(process) = self
            .process
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            process.kill_all();
        }
    }
}

fn free_port() -> Result<u16, AgentError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Discards a stream's output so the server never blocks on a full pipe.
fn drain(stream: impl AsyncRead + Send + Unpin + 'static) {
    tokio::spawn(async move {
        let _ = tokio::io::copy(
            &mut tokio::io::BufReader::new(stream),
            &mut tokio::io::sink(),
        )
        .await;
    });
}

impl Server {
    /// Starts `opencode serve` from `base` (binary, environment, directory) and waits until it
    /// listens and its event stream is open.
    pub async fn start(
        base: CommandSpec,
        startup_timeout: Duration,
    ) -> Result<Arc<Self>, AgentError> {
        let started = Instant::now();
        let port = free_port()?;
        let password = uuid::Uuid::new_v4().simple().to_string();
        let spec = base
            .args([
                "serve",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .env("OPENCODE_SERVER_PASSWORD", password.clone())
            .env("OPENCODE_SERVER_USERNAME", USERNAME);
        let mut process = spawn(&spec)?;
        let pgid = process.pgid;
        let stdout = process.child.stdout.take().expect("stdout is piped");
        drain(process.child.stderr.take().expect("stderr is piped"));
        let url = format!("http://127.0.0.1:{port}");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(startup_timeout, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("listening on") {
                    return true;
                }
            }
            false
        })
        .await;
        if ready != Ok(true) {
            process.kill_all();
            return Err(AgentError::ServerNotReady {
                waited: started.elapsed(),
            });
        }
        drain(lines.into_inner());
        let credentials = basic_auth(USERNAME, &password);
        let client = HttpClient::new(&url)?.with_header("authorization", &credentials)?;
        let events = match client.event_stream("/global/event").await {
            Ok(events) => events,
            Err(e) => {
                process.kill_all();
                return Err(e);
            }
        };
        let subscribers = Arc::new(Subscribers::default());
        let alive = Arc::new(AtomicBool::new(true));
        let dispatcher =
            tokio::spawn(dispatch(events, subscribers.clone(), alive.clone())).abort_handle();
        let startup = started.elapsed();
        tracing::debug!(%url, ?startup, "opencode server ready");
        Ok(Arc::new(Self {
            client,
            process: Mutex::new(Some(process)),
            pgid,
            subscribers,
            alive,
            dispatcher,
            startup,
            url,
        }))
    }

    /// The authenticated client.
    pub fn client(&self) -> &HttpClient {
        &self.client
    }

    /// The server's process group id.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Whether its event stream is still open.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// A new subscriber: its id (to watch sessions with) and its events.
    pub fn subscribe(&self) -> (u64, EventRx) {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.subscribers.next.fetch_add(1, Ordering::SeqCst);
        if self.is_alive() {
            self.subscribers.lock().insert(
                id,
                Subscriber {
                    sessions: HashSet::new(),
                    tx,
                },
            );
        }
        (id, rx)
    }

    /// Sends subscriber `id` the events of `session` from now on.
    pub fn watch(&self, id: u64, session: &str) {
        if let Some(subscriber) = self.subscribers.lock().get_mut(&id) {
            subscriber.sessions.insert(session.to_string());
        }
    }

    /// Ends subscriber `id`.
    pub fn unsubscribe(&self, id: u64) {
        self.subscribers.lock().remove(&id);
    }
}

async fn dispatch(
    mut events: futures::stream::BoxStream<
        'static,
        Result<agent_api::kit::sse::SseEvent, AgentError>,
    >,
    subscribers: Arc<Subscribers>,
    alive: Arc<AtomicBool>,
) {
    while let Some(Ok(event)) = events.next().await {
        subscribers.dispatch(event.data);
    }
    // The stream ended: the server is gone. Every run on it sees its events end.
    alive.store(false, Ordering::SeqCst);
    subscribers.lock().clear();
}

/// `Basic base64(user:password)`.
fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// The servers of one backend value (and its clones), by environment. A server lives while the
/// pool or a run on it holds it, so later runs of a backend find it warm.
#[derive(Clone, Default)]
pub struct ServerPool {
    servers: Arc<tokio::sync::Mutex<HashMap<String, Arc<Server>>>>,
}

impl std::fmt::Debug for ServerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerPool").finish_non_exhaustive()
    }
}

/// What a caller may know of a running server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// Its base URL (`http://127.0.0.1:PORT`); every request needs the backend's credentials.
    pub url: String,
    /// Its process group id.
    pub pgid: i32,
    /// How long it took to start listening.
    pub startup: Duration,
}

impl ServerPool {
    /// The servers running now (in use by at least one run).
    pub fn running(&self) -> Vec<ServerInfo> {
        let Ok(servers) = self.servers.try_lock() else {
            return Vec::new();
        };
        let mut out: Vec<ServerInfo> = servers
            .values()
            .filter(|s| s.is_alive())
            .map(|s| ServerInfo {
                url: s.url.clone(),
                pgid: s.pgid,
                startup: s.startup,
            })
            .collect();
        out.sort_by_key(|s| s.pgid);
        out
    }

    /// The running server for `base`'s program and environment, or a new one. Starts are
    /// serialized, so concurrent first runs share one server.
    pub async fn get(
        &self,
        base: CommandSpec,
        startup_timeout: Duration,
    ) -> Result<Arc<Server>, AgentError> {
        let key = pool_key(&base);
        let mut servers = self.servers.lock().await;
        // A dead server leaves the pool; its runs have ended or are ending with it.
        servers.retain(|_, server| server.is_alive());
        if let Some(server) = servers.get(&key) {
            return Ok(server.clone());
        }
        let server = Server::start(base, startup_timeout).await?;
        servers.insert(key, server.clone());
        Ok(server)
    }

    /// Stops every server once the runs on it end (they hold it until then).
    pub async fn shut_down(&self) {
        self.servers.lock().await.clear();
    }
}

/// Servers are shared by runs whose program and environment are the same (the directory is
/// per request, so it is not part of the key).
fn pool_key(base: &CommandSpec) -> String {
    let env: Vec<_> = base
        .env
        .iter()
        .filter(|(k, _)| k.as_str() != "PWD")
        .collect();
    serde_json::json!({"program": base.program, "env": env}).to_string()
}
