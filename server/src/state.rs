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
use crate::live::{Continuity, LiveSession, SessionOrigin};
use crate::store::{SessionRecord, SessionState, Store, StoreError};
use crate::wire::{CreateSessionRequest, SessionInfo, SessionSettings};

/// The reference's agent ids and the kinds they name here.
pub const AGENT_ALIASES: &[(&str, &str)] = &[("claude", "claude_code")];

/// What the server runs sessions with.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let gateway = agent_api_builtin::gateway();
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
    /// This server's identity: its name and what no other process shares.
    daemon_id: String,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
    opening: Mutex<HashSet<String>>,
    /// The store's polls for sessions another server runs, followed here.
    pub(crate) polls: crate::polls::Polls,
    /// Cancelled when the server stops: every SSE stream ends, so that connections close.
    pub(crate) stopping: agent_api::request::CancellationToken,
    /// Set when the server was asked to stop: it serves on, not ready, for `ServerConfig::drain`.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// What `GET /metrics` serves.
    pub(crate) metrics: crate::metrics::Shared,
    /// When this server last wrote each scoped token's last use.
    pub(crate) last_used: crate::store::tokens::LastUsed,
    /// The commands this server handed to another and waits for (fleet).
    pub(crate) waiters: crate::waiters::Waiters,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("gateway", &self.inner.gateway)
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

/// The message of the `error` closing a turn its server died in (code `interrupted`), written
/// when the session comes back.
pub const INTERRUPTED: &str = "the server stopped while this turn ran";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Server {
    /// The server's state, nothing started yet ([`Server::new`] starts what runs beside it).
    pub(crate) fn assemble(
        gateway: Gateway,
        defaults: RunRequest,
        store: Arc<dyn Store>,
        config: ServerConfig,
        daemon_id: String,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                gateway,
                defaults,
                store,
                config,
                probes: Vec::new(),
                daemon_id,
                live: Mutex::new(HashMap::new()),
                opening: Mutex::new(HashSet::new()),
                polls: crate::polls::Polls::default(),
                stopping: agent_api::request::CancellationToken::new(),
                draining: std::sync::atomic::AtomicBool::new(false),
                metrics: Arc::new(crate::metrics::Metrics::new()),
                last_used: crate::store::tokens::LastUsed::default(),
                waiters: crate::waiters::Waiters::default(),
            }),
        }
    }

    /// This server's identity in the store: the owner of the sessions it runs. Two processes
    /// never share one.
    pub fn daemon_id(&self) -> &str {
        &self.inner.daemon_id
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

    /// Whether this server runs as many live sessions as it may (readiness: `full`). A front
    /// door that runs no agents is never full: it takes every request and hands it on.
    pub(crate) fn full(&self) -> bool {
        self.inner.config.runs_agents
            && lock(&self.inner.live).len() >= self.inner.config.max_sessions
    }

    /// Whether this server takes one more session now: it runs agents, is not draining, and
    /// runs (or opens) fewer than `max_sessions`.
    pub(crate) fn has_room(&self) -> bool {
        let live = lock(&self.inner.live).len();
        let opening = lock(&self.inner.opening).len();
        self.inner.config.runs_agents
            && !self.draining()
            && live + opening < self.inner.config.max_sessions
    }

    /// Whether the server was asked to stop.
    pub(crate) fn draining(&self) -> bool {
        self.inner
            .draining
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// 503 `too_many_sessions`: this server takes no more sessions now (in a fleet, the request
    /// is handed to a server with room).
    fn no_room(&self) -> ApiError {
        let max = self.inner.config.max_sessions;
        let why = if !self.inner.config.runs_agents {
            "this server runs no agents (--no-agents)".to_string()
        } else if self.draining() {
            "this server is stopping".to_string()
        } else {
            format!("this server runs {max} live sessions, as many as it may")
        };
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_sessions",
            format!("{why}: terminate one, or try again later"),
        )
    }

    /// The ids of the sessions this server runs now.
    pub(crate) fn live_ids(&self) -> HashSet<String> {
        lock(&self.inner.live).keys().cloned().collect()
    }

    /// The sessions this server runs now.
    pub(crate) fn running(&self) -> Vec<Arc<LiveSession>> {
        lock(&self.inner.live).values().cloned().collect()
    }

    /// The store's record of the session `id`; 404 when it has none.
    pub(crate) async fn stored_session(&self, id: &str) -> Result<SessionRecord, ApiError> {
        self.inner
            .store
            .session(id)
            .await?
            .ok_or_else(|| ApiError::no_session(id))
    }

    /// The session `id`, running here: brought back when it is resumable (its owner gone, or
    /// this server released it). 404 unknown, 409 `session_ended`, 409 `session_elsewhere`
    /// when a running server sharing the store owns it.
    pub(crate) async fn session(&self, id: &str) -> Result<Arc<LiveSession>, ApiError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(live) = self.live(id) {
                return Ok(live);
            }
            let record = self.stored_session(id).await?;
            if record.ended {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "session_ended",
                    "the session has ended",
                ));
            }
            if let Some(owner) = self.owner_elsewhere(&record).await? {
                return Err(ApiError::elsewhere(&owner));
            }
            // One request brings it back; the others wait for it.
            if !lock(&self.inner.opening).contains(id) && !self.has_room() {
                return Err(self.no_room());
            }
            if lock(&self.inner.opening).insert(id.to_string()) {
                let resumed = self.resume(record).await;
                lock(&self.inner.opening).remove(id);
                return resumed;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "stream_error",
                    "the session is being opened or brought back; try again",
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The owner of a stored session when it is another server that runs now and holds its
    /// agent. One that holds none (released, stopped) runs nothing: any server claims it.
    pub(crate) async fn owner_elsewhere(
        &self,
        record: &SessionRecord,
    ) -> Result<Option<String>, StoreError> {
        let Some(owner) = record.owner.as_deref() else {
            return Ok(None);
        };
        if record.state != SessionState::Live || !self.alive_elsewhere(owner).await? {
            return Ok(None);
        }
        Ok(Some(owner.to_string()))
    }

    /// Whether a server runs session `id` now: this one, or another whose lease holds (a store
    /// that fails: it may).
    pub(crate) async fn runs_anywhere(&self, id: &str) -> bool {
        if self.live(id).is_some_and(|live| !live.ended()) {
            return true;
        }
        match self.inner.store.session(id).await {
            Ok(Some(record)) => self
                .owner_elsewhere(&record)
                .await
                .map_or(true, |o| o.is_some()),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Whether `owner` is another server that runs now (its lease holds).
    async fn alive_elsewhere(&self, owner: &str) -> Result<bool, StoreError> {
        if owner == self.daemon_id() {
            return Ok(false);
        }
        let lease = self.inner.config.server_lease;
        self.inner.store.server_alive(owner, lease).await
    }

    /// Whether another running server owns `record` and has not stopped it, each owner asked
    /// once per `known`.
    async fn runs_elsewhere(
        &self,
        record: &SessionRecord,
        known: &mut HashMap<String, bool>,
    ) -> Result<bool, StoreError> {
        let Some(owner) = record.owner.as_deref() else {
            return Ok(false);
        };
        if record.state == SessionState::Stopped {
            return Ok(false);
        }
        if let Some(alive) = known.get(owner) {
            return Ok(*alive);
        }
        let alive = self.alive_elsewhere(owner).await?;
        known.insert(owner.to_string(), alive);
        Ok(alive)
    }

    /// Puts a session this server runs now in its map, its `on_end` forgetting it.
    pub(crate) fn adopt(
        &self,
        id: &str,
        origin: SessionOrigin,
        session: agent_api::Session,
        continuity: Continuity,
    ) -> Arc<LiveSession> {
        // Weak: the server's map holds the session, the session must not hold the server.
        let server = Arc::downgrade(&self.inner);
        let forget = Box::new(move |id: &str| {
            if let Some(inner) = server.upgrade() {
                lock(&inner.live).remove(id);
            }
        });
        let around = crate::live::Surroundings {
            store: self.inner.store.clone(),
            config: &self.inner.config,
            stopping: self.inner.stopping.clone(),
            on_end: forget,
            metrics: self.inner.metrics.clone(),
        };
        let live = LiveSession::new(id.to_string(), origin, session, around, continuity);
        lock(&self.inner.live).insert(id.to_string(), live.clone());
        live
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

    /// Opens a session of `tenant` (`None`: no tenant's): 409 when the id is taken, 400 when the
    /// request cannot run, 403 when its `cwd` leads out of its root.
    pub(crate) async fn create(
        &self,
        id: &str,
        body: CreateSessionRequest,
        tenant: Option<&str>,
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
        let request = crate::tenant::place(
            &*self.inner.store,
            &self.inner.config.tenants,
            request,
            tenant,
            &body,
        )
        .await?;
        // Where the agent works: a message's images are read only from beneath it.
        let working_dir = crate::tenant::run_dir(&request)?;
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
            let runs = self.inner.config.runs_agents && !self.draining();
            if !runs || live.len() + opening.len() >= max {
                drop((live, opening));
                return Err(self.no_room());
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
            let settings = &body.settings;
            let record = SessionRecord {
                agent_mode: settings
                    .agent_mode
                    .clone()
                    .unwrap_or_else(|| "build".into()),
                permission_mode: settings
                    .permission_mode
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                model: settings.model.clone(),
                variant: settings.variant.clone(),
                native_session_id: session.native_session_id(),
                owner: Some(self.daemon_id().to_string()),
                settings: serde_json::to_string(&body).ok(),
                working_dir: Some(working_dir.to_string_lossy().into_owned()),
                tenant: tenant.map(str::to_string),
                ..SessionRecord::new(id, body.agent.clone())
            };
            // Another server sharing the store may have taken the id meanwhile.
            self.inner.store.create_session(record).await?;
            let mut metadata = serde_json::json!({ "agent": body.agent });
            for (key, value) in [
                ("agent_mode", &body.settings.agent_mode),
                ("permission_mode", &body.settings.permission_mode),
                ("model", &body.settings.model),
                ("variant", &body.settings.variant),
            ] {
                if let Some(value) = value {
                    metadata[key] = value.clone().into();
                }
            }
            let opened = SessionOrigin {
                kind,
                request: body,
                working_dir,
            };
            let live = self.adopt(id, opened, session, Continuity::fresh(self.daemon_id()));
            live.announce(metadata).await?;
            Ok(live)
        }
        .await;
        lock(&self.inner.opening).remove(id);
        opened
    }

    /// The turn template of a new session: the server's defaults with what the client asked.
    pub(crate) fn request(
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
            .filter(|m| *m != crate::wire::DEFAULT_MODE)
        {
            let mode = agent_api::request::AgentMode::parse(mode);
            let backend = self.backend(kind)?;
            agent_api::kit::check_mode(kind.as_str(), backend.info().modes, &mode)
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

    /// A session's info: `state` `live` (this server holds its agent), `idle` (its server
    /// released its agent), `resumable` (its server is gone: the next message brings it back) or
    /// `ended`; `live` true only for the first, never beside `ended`.
    pub(crate) async fn info(&self, record: SessionRecord) -> Result<SessionInfo, ApiError> {
        self.info_with(record, &mut HashMap::new()).await
    }

    /// [`Server::info`], asking the store whether each owner runs once per `known` (a list).
    pub(crate) async fn info_with(
        &self,
        record: SessionRecord,
        known: &mut HashMap<String, bool>,
    ) -> Result<SessionInfo, ApiError> {
        // A session this server lost is not its own any more (nor ended): the store says where
        // it stands.
        let here = self.live(&record.id).filter(|l| !l.was_lost());
        let ended = record.ended || here.as_ref().is_some_and(|l| l.ended());
        let state = if ended {
            "ended"
        } else if here.is_some() {
            "live"
        } else if matches!(
            record.state,
            SessionState::AgentExited | SessionState::NativeRefused
        ) {
            // Its agent exited by itself, or could not continue its own session: no server holds
            // one, the next message brings it back.
            "resumable"
        } else if record.owner.as_deref() == Some(self.daemon_id()) {
            // Ours, its agent released (or being brought back).
            "idle"
        } else if self.runs_elsewhere(&record, known).await? {
            match record.state {
                SessionState::Idle => "idle",
                _ => "live",
            }
        } else {
            "resumable"
        };
        Ok(SessionInfo {
            session_id: record.id,
            agent: record.agent,
            agent_mode: record.agent_mode,
            permission_mode: record.permission_mode,
            ended,
            event_count: record.event_count,
            model: record.model,
            variant: record.variant,
            native_session_id: record.native_session_id,
            end_error: record.end_error,
            live: state == "live" && here.is_some(),
            usage: record
                .usage
                .and_then(|json| serde_json::from_str(&json).ok()),
            state: Some(state.into()),
            owner: record.owner.filter(|_| !ended),
            resumed_how: record.resumed_how,
            snapshot_turn: record.snapshot_turn,
            queued: here
                .as_ref()
                .filter(|_| !ended)
                .map(|live| live.queued() as u64),
        })
    }

    /// Drains (on shutdown, the server taking no new session): releases each session with no
    /// turn running (stored `stopped`, its snapshot kept, so that any server may take it), and
    /// waits for running turns to end, for at most [`ServerConfig::drain_timeout`].
    pub(crate) async fn drain_turns(&self) {
        let deadline = tokio::time::Instant::now() + self.inner.config.drain_timeout;
        loop {
            let mut running = 0;
            for live in self.running() {
                if live.ended() {
                    continue;
                }
                // A session with a turn running, or about to start for a queued message, is
                // waited for: released, it would drop the message its client was told was taken.
                match live.release_if_idle(SessionState::Stopped).await {
                    None => running += 1,
                    Some(true) => self.forget(&live.id),
                    Some(false) => {}
                }
            }
            if running == 0 || tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops every session's agent and leaves the sessions open (on shutdown): a turn in
    /// progress is cancelled (its end stored), each session is stored as `stopped`, and the next
    /// message to it, on any server sharing the store, brings it back.
    pub async fn release_all(&self) {
        let sessions: Vec<_> = lock(&self.inner.live)
            .drain()
            .map(|(_, live)| live)
            .collect();
        for live in sessions {
            live.release(SessionState::Stopped).await;
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
