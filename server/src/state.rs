//! [`Server`]: what every handler shares: the gateway, the session defaults, the store and the
//! sessions running now.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agent_api::kit::detect::BackendProbe;
use agent_api::request::SessionRef;
use agent_api::{AgentKind, Gateway, PermissionPolicy, RunRequest, SessionSelector};
use axum::http::StatusCode;

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::live::{daemon_event, LiveSession, SessionOrigin};
use crate::store::{SessionRecord, Store, StoreError};
use crate::wire::{CreateSessionRequest, SessionInfo, SessionSettings};

/// The reference's agent ids and the kinds they name here.
pub const AGENT_ALIASES: &[(&str, &str)] = &[("claude", "claude_code")];

/// What the server runs sessions with.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// let mut gateway = agent_api::Gateway::new();
/// gateway.register(Arc::new(agent_api_scripted::ScriptedBackend::new()))?;
/// let store = agent_api_server::StoreUrl::Memory.open().await?;
/// let config = agent_api_server::ServerConfig::default();
/// let server = agent_api_server::Server::new(gateway, agent_api::RunRequest::new(""), store, config).await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// agent_api_server::serve(listener, server, std::future::pending()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) gateway: Gateway,
    pub(crate) defaults: RunRequest,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: ServerConfig,
    pub(crate) probes: Vec<BackendProbe>,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
    opening: Mutex<HashSet<String>>,
    /// The store's polls for sessions another server runs, followed here.
    pub(crate) polls: crate::remote::Polls,
    /// Cancelled when the server stops: every SSE stream ends, so that connections close.
    pub(crate) stopping: agent_api::request::CancellationToken,
    /// Set when the server was asked to stop: it serves on, not ready, for `ServerConfig::drain`.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// What `GET /metrics` serves.
    pub(crate) metrics: crate::metrics::Shared,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("gateway", &self.inner.gateway)
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

/// Why a session ended under a server that stopped (recorded at the next start).
pub const INTERRUPTED: &str = "the server stopped while this session was live";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Server {
    /// A server running sessions on `gateway`'s backends, each from the template `defaults`
    /// (its prompt is ignored), keeping them in `store`. Sessions the store holds as live and
    /// owned by this server's daemon id (it stopped under them) are marked ended, with an `error`
    /// and a `session.ended` (`reason=error`, `terminated_by=daemon`) appended; another server's
    /// live sessions are left to it.
    pub async fn new(
        gateway: Gateway,
        defaults: RunRequest,
        store: Arc<dyn Store>,
        config: ServerConfig,
    ) -> Result<Self, StoreError> {
        for record in store.sessions().await? {
            let ours = record
                .owner
                .as_deref()
                .is_none_or(|owner| owner == config.daemon_id);
            if !record.ended && ours {
                // One session that cannot be ended does not keep the server from starting.
                if let Err(error) = recover(&*store, &record).await {
                    tracing::warn!(session = %record.id, "cannot end the interrupted session: {error}");
                }
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                gateway,
                defaults,
                store,
                config,
                probes: Vec::new(),
                live: Mutex::new(HashMap::new()),
                opening: Mutex::new(HashSet::new()),
                polls: crate::remote::Polls::default(),
                stopping: agent_api::request::CancellationToken::new(),
                draining: std::sync::atomic::AtomicBool::new(false),
                metrics: Arc::new(crate::metrics::Metrics::new()),
            }),
        })
    }

    /// Sets the probes that say where each agent's CLI is and its version (`GET /v1/agents`).
    pub fn with_probes(mut self, probes: Vec<BackendProbe>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.probes = probes;
        }
        self
    }

    pub(crate) fn live(&self, id: &str) -> Option<Arc<LiveSession>> {
        lock(&self.inner.live).get(id).cloned()
    }

    /// Whether this server runs as many live sessions as it may (readiness: `full`).
    pub(crate) fn full(&self) -> bool {
        lock(&self.inner.live).len() >= self.inner.config.max_sessions
    }

    /// The ids of the sessions this server runs now.
    pub(crate) fn live_ids(&self) -> HashSet<String> {
        lock(&self.inner.live).keys().cloned().collect()
    }

    pub(crate) fn forget(&self, id: &str) {
        lock(&self.inner.live).remove(id);
    }

    /// The kind an agent id names (the reference's ids too); 400 when no backend has it.
    pub(crate) fn kind(&self, agent: &str) -> Result<AgentKind, ApiError> {
        let name = AGENT_ALIASES
            .iter()
            .find(|(alias, _)| *alias == agent)
            .map_or(agent, |(_, kind)| kind);
        let unsupported = || {
            let known: Vec<String> = self
                .inner
                .gateway
                .kinds()
                .iter()
                .map(ToString::to_string)
                .collect();
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "unsupported_agent",
                format!(
                    "unknown agent `{}`; known: {}",
                    agent_api::display::line(agent, 64),
                    known.join(", ")
                ),
            )
        };
        let kind = AgentKind::new(name).map_err(|_| unsupported())?;
        self.inner
            .gateway
            .backend(&kind)
            .map_err(|_| unsupported())?;
        Ok(kind)
    }

    /// The backend of a known agent kind (400 when none is registered).
    pub(crate) fn backend(
        &self,
        kind: &AgentKind,
    ) -> Result<std::sync::Arc<dyn agent_api::AgentBackend>, ApiError> {
        self.inner
            .gateway
            .backend(kind)
            .cloned()
            .map_err(|e| ApiError::agent(&e))
    }

    /// Opens a session: 409 when the id is taken, 400 when the request cannot run.
    pub(crate) async fn create(
        &self,
        id: &str,
        body: CreateSessionRequest,
    ) -> Result<Arc<LiveSession>, ApiError> {
        check_id(id)?;
        let kind = self.kind(&body.agent)?;
        crate::policy::check(
            &self.inner.config,
            &self.inner.defaults.permissions,
            &*self.backend(&kind)?,
            &body.settings,
        )?;
        let request = self.request(&kind, &body.settings)?;
        // Where the agent works: a message's images are read only from beneath it.
        let working_dir = match request.session_working_dir() {
            Some(dir) => dir.to_path_buf(),
            None => std::env::current_dir().map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "stream_error",
                    format!("no working directory: {e}"),
                )
            })?,
        };
        let duplicate = || {
            ApiError::new(
                StatusCode::CONFLICT,
                "session_already_exists",
                format!("a session with id `{id}` already exists"),
            )
        };
        {
            let live = lock(&self.inner.live);
            let mut opening = lock(&self.inner.opening);
            if live.contains_key(id) || opening.contains(id) {
                return Err(duplicate());
            }
            // Each live session holds an agent and its buffers: past the bound, none is opened.
            let max = self.inner.config.max_sessions;
            if live.len() + opening.len() >= max {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_sessions",
                    format!("this server runs {max} live sessions, as many as it may: terminate one, or try again later"),
                ));
            }
            opening.insert(id.to_string());
        }
        let opened = async {
            if self.inner.store.session(id).await?.is_some() {
                return Err(duplicate());
            }
            let session = self
                .inner
                .gateway
                .open_session(&kind, request)
                .await
                .map_err(|e| ApiError::agent(&e))?;
            let record = SessionRecord {
                id: id.to_string(),
                agent: body.agent.clone(),
                agent_mode: body
                    .settings
                    .agent_mode
                    .clone()
                    .unwrap_or_else(|| "build".into()),
                permission_mode: body
                    .settings
                    .permission_mode
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                model: body.settings.model.clone(),
                variant: body.settings.variant.clone(),
                native_session_id: session.native_session_id(),
                ended: false,
                end_error: None,
                event_count: 0,
                owner: Some(self.inner.config.daemon_id.clone()),
                usage: None,
            };
            // Another server sharing the store may have taken the id meanwhile.
            self.inner.store.create_session(record).await?;
            let config = &self.inner.config;
            // Weak: the server's map holds the session, the session must not hold the server.
            let server = Arc::downgrade(&self.inner);
            let forget = Box::new(move |id: &str| {
                if let Some(inner) = server.upgrade() {
                    lock(&inner.live).remove(id);
                }
            });
            let opened = SessionOrigin {
                kind,
                request: body,
                working_dir,
            };
            let stopping = self.inner.stopping.clone();
            Ok(LiveSession::new(
                id.to_string(),
                opened,
                session,
                self.inner.store.clone(),
                config,
                stopping,
                forget,
                self.inner.metrics.clone(),
            ))
        }
        .await;
        if let Ok(live) = &opened {
            lock(&self.inner.live).insert(id.to_string(), live.clone());
        }
        lock(&self.inner.opening).remove(id);
        opened
    }

    /// The turn template of a new session: the server's defaults with what the client asked.
    fn request(
        &self,
        kind: &AgentKind,
        settings: &SessionSettings,
    ) -> Result<RunRequest, ApiError> {
        let mut request = self.inner.defaults.clone().with_include_raw(true);
        // An agent that emits OpenTelemetry of its own continues this trace (`TRACEPARENT`).
        if let Some(traceparent) = crate::telemetry::traceparent() {
            request = request.with_env("TRACEPARENT", traceparent);
        }
        // `build` is the wire's name for the agent's own default mode; any other is one the
        // agent lists (`GET /v1/agents/{agent}/modes`), refused here with the valid ones.
        if let Some(mode) = settings
            .agent_mode
            .as_deref()
            .filter(|m| *m != crate::agents::DEFAULT_MODE)
        {
            let mode = agent_api::request::AgentMode::parse(mode);
            let backend = self.backend(kind)?;
            agent_api::kit::check_mode(kind.as_str(), backend.modes(), &mode)
                .map_err(|e| ApiError::agent(&e))?;
            request = request.with_mode(mode);
        }
        match settings.permission_mode.as_deref() {
            None | Some("default") => {}
            Some("bypass") => request = request.with_permissions(PermissionPolicy::ApproveAll),
            Some("ask") => request = request.with_permissions(PermissionPolicy::Ask),
            Some(other) => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "mode_not_supported",
                    format!(
                        "permission mode `{}` is not supported: default, bypass or ask",
                        agent_api::display::line(other, 64)
                    ),
                ))
            }
        }
        if let Some(version) = &settings.agent_version {
            return Err(ApiError::invalid(format!(
                "agentVersion `{}`: this server runs the agent version installed and cannot pick another",
                agent_api::display::line(version, 64)
            )));
        }
        if let Some(model) = &settings.model {
            request = request.with_model(model);
        }
        if let Some(variant) = &settings.variant {
            request = request.with_variant(variant);
        }
        for (key, value) in settings.options.iter().flatten() {
            request = request.with_extension(key, value.clone());
        }
        if let Some(prompt) = &settings.system_prompt {
            request.portable.system_prompt = Some(prompt.clone());
        }
        if let Some(prompt) = &settings.append_system_prompt {
            request.portable.append_system_prompt = Some(prompt.clone());
        }
        if let Some(secs) = settings.turn_timeout_secs {
            request = request.with_turn_timeout(Duration::from_secs(secs));
        }
        if let Some(turns) = settings.max_turns {
            request = request.with_max_turns(turns);
        }
        if let Some(tokens) = settings.max_tokens {
            request = request.with_max_total_tokens(tokens);
        }
        if let Some(usd) = settings.max_cost_usd {
            request = request.with_max_cost_usd(usd);
        }
        if let Some(secs) = settings.startup_timeout_secs {
            request = request.with_startup_timeout(Duration::from_secs(secs));
        }
        if let Some(secs) = settings.idle_timeout_secs {
            request = request.with_idle_timeout(Duration::from_secs(secs));
        }
        // The portable options: the backend refuses, before anything runs, one it cannot honour.
        let mut portable = std::mem::take(&mut request.portable);
        if let Some(schema) = &settings.output_schema {
            portable = portable.output_schema(schema.clone());
        }
        for tool in settings.allowed_tools.iter().flatten() {
            portable = portable.allow_tool(tool);
        }
        for tool in settings.denied_tools.iter().flatten() {
            portable = portable.deny_tool(tool);
        }
        request.portable = portable;
        match (&settings.resume, &settings.fork) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid("`resume` and `fork` exclude each other"))
            }
            (Some(id), None) => {
                request = request.with_session(SessionSelector::Resume(SessionRef::native(id)))
            }
            (None, Some(id)) => {
                request = request.with_session(SessionSelector::Fork(SessionRef::native(id)))
            }
            (None, None) => {}
        }
        Ok(request)
    }

    /// A session's info, live or stored; 404 when unknown.
    pub(crate) fn info(&self, record: SessionRecord) -> SessionInfo {
        let live = self.live(&record.id).is_some_and(|l| !l.ended());
        SessionInfo {
            session_id: record.id,
            agent: record.agent,
            agent_mode: record.agent_mode,
            permission_mode: record.permission_mode,
            ended: record.ended,
            event_count: record.event_count,
            model: record.model,
            variant: record.variant,
            native_session_id: record.native_session_id,
            end_error: record.end_error,
            live,
            usage: record
                .usage
                .and_then(|json| serde_json::from_str(&json).ok()),
        }
    }

    /// Terminates every live session (on shutdown).
    pub async fn terminate_all(&self) {
        let sessions: Vec<_> = lock(&self.inner.live)
            .drain()
            .map(|(_, live)| live)
            .collect();
        for live in sessions {
            if let Err(error) = live.terminate().await {
                tracing::error!(session = %live.id, "cannot terminate: {error}");
            }
        }
    }
}

/// A session id (`spec/http-api.md`, Bodies): 1 to 128 characters, not `.` or `..`, none of them
/// a control character, white space, `/`, `\\`, or a character shown as nothing or that reorders
/// what is shown (zero-width, bidi controls, other format characters): two ids a person cannot
/// tell apart are never both valid.
pub(crate) fn check_id(id: &str) -> Result<(), ApiError> {
    let bad = |c: char| {
        c.is_control()
            || c.is_whitespace()
            || matches!(c, '/' | '\\')
            || agent_api::display::is_unsafe(c)
            || invisible(c)
    };
    if id.is_empty() || id.chars().count() > 128 || id == "." || id == ".." || id.chars().any(bad) {
        return Err(ApiError::invalid(
            "a session id has 1 to 128 characters, is not `.` or `..`, and has no control character, white space, `/`, `\\`, zero-width or bidi character",
        ));
    }
    Ok(())
}

/// Whether `c` is shown as nothing: Unicode's format characters and default-ignorables
/// (zero-width spaces and joiners, word joiner, soft hyphen, byte-order mark, variation
/// selectors, tags, Hangul fillers, invisible operators).
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{fff0}'..='\u{fffb}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// Ends a session its server left live: an `error` and a `session.ended` appended, then marked.
async fn recover(store: &dyn Store, record: &SessionRecord) -> Result<(), StoreError> {
    let next = record.event_count + 1;
    let error = serde_json::json!({ "message": INTERRUPTED, "code": "daemon_stopped" });
    let ended =
        serde_json::json!({ "reason": "error", "terminated_by": "daemon", "message": INTERRUPTED });
    let events: Vec<_> = [
        daemon_event(&record.id, next, "error", error),
        daemon_event(&record.id, next + 1, "session.ended", ended),
    ]
    .into_iter()
    .flatten()
    .collect();
    store.append(&record.id, events).await?;
    store.mark_ended(&record.id, Some(INTERRUPTED)).await
}
