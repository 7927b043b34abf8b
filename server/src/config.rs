//! [`ServerConfig`]: the server's security and resource bounds.

/// The bounds and security settings of a server. Defaults: no token (set one, or use
/// [`ServerConfig::random_token`]), no CORS, 1 MiB request bodies, a ring of 1024 events per
/// session for its subscribers, 64 subscribers per session, an SSE client taking nothing for 30 s
/// dropped, pages of at most 1000 events, a turn waiting 60 s for a failing store, the host's name
/// as the daemon's name (its identity adds what makes it unique to the process); requests only
/// for the host's IP addresses and `localhost` (plus [`ServerConfig::allowed_hosts`]); no client
/// option that names a program, a path, an environment variable or a looser policy (plus
/// [`ServerConfig::client_options`]); 256 live sessions; 512 connections, a request head whole
/// within 10 s, a connection moving no byte for 60 s closed; an idle session's agent released
/// after 600 s, no idle limit on sessions, a 30 s lease on a shared store renewed every 10 s; no
/// drain time, running turns given 30 s to finish when the server stops; agents run here; 8
/// messages queued per session behind its turn in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The bearer token every request but `GET /v1/health` must carry; `None`: no check.
    pub token: Option<String>,
    /// Origins allowed by CORS; empty: no CORS headers at all.
    pub cors_origins: Vec<String>,
    /// The largest request body, in bytes (413 past it).
    pub max_body_bytes: usize,
    /// Events a session's feed keeps for its subscribers; one falling further behind is dropped.
    pub sse_buffer: usize,
    /// Subscribers (SSE streams) per session (429 past it).
    pub max_subscribers: usize,
    /// How long an SSE client may take no frame while its queue is full before it is dropped
    /// (it resumes by `Last-Event-ID`).
    pub sse_stall: std::time::Duration,
    /// The largest page of `GET …/events` (a larger `limit` is cut to it).
    pub max_page: usize,
    /// How long a turn waits for a failing store before it fails: its events are held (the agent's
    /// output is no longer read, so memory stays bounded) and written once the store is back;
    /// past this bound the turn is cancelled and the session ends with a `store_unavailable` error.
    pub store_outage: std::time::Duration,
    /// This server's name in a store shared with others. Its identity, the owner of the sessions
    /// it runs, is this name followed by what no other process shares (its pid and a random part):
    /// [`crate::Server::daemon_id`].
    pub daemon_id: String,
    /// How long a session's agent is kept with no turn and no subscriber before it is released
    /// (stopped, its snapshot kept; the next message resumes it); `None`: never.
    pub idle_release: Option<std::time::Duration>,
    /// How long a session may see no turn before it is ended (`--session-idle-ttl`); `None`: a
    /// session ends only when a client terminates it.
    pub session_idle_ttl: Option<std::time::Duration>,
    /// How long a server sharing the store counts as running after its last heartbeat (renewed
    /// every third of it): past it, its sessions may be resumed by another.
    pub server_lease: std::time::Duration,
    /// Host names (beyond IP addresses and `localhost`) a request's `Host` may name: the names
    /// this server is reached by (a reverse proxy's). Any other is 403 `host_not_allowed`, so a
    /// web page whose name resolves to this machine (DNS rebinding) reaches nothing.
    pub allowed_hosts: Vec<String>,
    /// What clients may set beyond what is theirs by default (`spec/http-api.md`, Security):
    /// backend option keys (`backend.acp.command`), `permissionMode` (any mode, even one looser
    /// than the operator's) and `allowedTools`; `*` allows them all.
    pub client_options: Vec<String>,
    /// Live sessions this server runs at once (503 `too_many_sessions` past it).
    pub max_sessions: usize,
    /// Open connections (past it a new one is answered 503 and closed).
    pub max_connections: usize,
    /// How long a connection may take to send a whole request head, from its opening or from
    /// its previous response (slow and idle clients alike are closed past it).
    pub header_timeout: std::time::Duration,
    /// How long a connection may move no byte either way while no handler works for it (a
    /// response its client stopped reading, a request body that stopped coming) before it is
    /// closed.
    pub idle_timeout: std::time::Duration,
    /// How long the server keeps serving, not ready (`GET /v1/health/ready` 503 `draining`), once
    /// asked to stop, so that a load balancer sends it no more work before it closes: default 0.
    pub drain: std::time::Duration,
    /// The tenants sessions may be opened for, by name (`spec/http-api.md`, Auth): where each
    /// one's sessions work and keep their agent's home. A tenant's token reads its sessions
    /// whether or not it is here; it opens one only when it is.
    pub tenants: std::collections::BTreeMap<String, crate::tenant::Tenant>,
    /// Signed webhooks (`--webhook`): where events go, signed with what, retried how; `None`:
    /// none.
    pub webhooks: Option<crate::webhooks::WebhookConfig>,
    /// Messages a session holds, in order, while its turn runs (each starts its own turn after the
    /// one before ends); one more is 429 `queue_full`. 0: a message during a turn is refused.
    pub max_queue: usize,
    /// Once asked to stop (and past [`ServerConfig::drain`]), how long running turns may go on
    /// before they are cancelled; meanwhile no session is opened or brought back here, and each
    /// idle session is released (its snapshot kept) for another server to take: default 30 s.
    pub drain_timeout: std::time::Duration,
    /// How often the server renews its heartbeat (its lease) in the store; `None`: a third of
    /// [`ServerConfig::server_lease`].
    pub heartbeat: Option<std::time::Duration>,
    /// Whether this server runs agents; `false`: an API-only front door, which hands every
    /// session to the servers sharing its store (PostgreSQL) and answers everything else itself.
    pub runs_agents: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            token: None,
            cors_origins: Vec::new(),
            max_body_bytes: 1 << 20,
            sse_buffer: 1024,
            max_subscribers: 64,
            sse_stall: std::time::Duration::from_secs(30),
            max_page: 1000,
            store_outage: std::time::Duration::from_secs(60),
            daemon_id: default_daemon_id(),
            idle_release: Some(std::time::Duration::from_secs(600)),
            session_idle_ttl: None,
            server_lease: std::time::Duration::from_secs(30),
            allowed_hosts: Vec::new(),
            client_options: Vec::new(),
            max_sessions: 256,
            max_connections: 512,
            header_timeout: std::time::Duration::from_secs(10),
            idle_timeout: std::time::Duration::from_secs(60),
            drain: std::time::Duration::ZERO,
            tenants: std::collections::BTreeMap::new(),
            webhooks: None,
            max_queue: 8,
            drain_timeout: std::time::Duration::from_secs(30),
            heartbeat: None,
            runs_agents: true,
        }
    }
}

/// The host's name (`/proc/sys/kernel/hostname`), else `localhost`.
fn default_daemon_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl ServerConfig {
    /// Names this server in a shared store.
    pub fn with_daemon_id(mut self, id: impl Into<String>) -> Self {
        self.daemon_id = id.into();
        self
    }

    /// Sets how long an idle session keeps its agent (`None`: always).
    pub fn with_idle_release(mut self, after: Option<std::time::Duration>) -> Self {
        self.idle_release = after;
        self
    }

    /// Sets how long a session may see no turn before it is ended (`None`: never).
    pub fn with_session_idle_ttl(mut self, ttl: Option<std::time::Duration>) -> Self {
        self.session_idle_ttl = ttl;
        self
    }

    /// Sets the lease of a server's heartbeat in a shared store.
    pub fn with_server_lease(mut self, lease: std::time::Duration) -> Self {
        self.server_lease = lease;
        self
    }

    /// Requires `token` on every request but health.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets how many messages a session queues behind its turn in progress (0: none).
    pub fn with_max_queue(mut self, max: usize) -> Self {
        self.max_queue = max;
        self
    }

    /// Sets how long the server drains (serves, not ready) once asked to stop.
    pub fn with_drain(mut self, drain: std::time::Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Configures the tenant `name`: where its sessions work and keep their agent's home.
    pub fn with_tenant(mut self, name: impl Into<String>, tenant: crate::tenant::Tenant) -> Self {
        self.tenants.insert(name.into(), tenant);
        self
    }

    /// Delivers events to webhooks ([`crate::webhooks`]).
    pub fn with_webhooks(mut self, webhooks: crate::webhooks::WebhookConfig) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// Sets how long running turns may go on once the server is asked to stop.
    pub fn with_drain_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Sets how often the heartbeat is renewed (`None`: a third of the lease).
    pub fn with_heartbeat(mut self, every: Option<std::time::Duration>) -> Self {
        self.heartbeat = every;
        self
    }

    /// Makes this server an API-only front door that runs no agents (`false`).
    pub fn with_agents(mut self, runs: bool) -> Self {
        self.runs_agents = runs;
        self
    }

    /// Allows a CORS origin.
    pub fn with_cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.cors_origins.push(origin.into());
        self
    }

    /// Sets the largest request body.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the feed's ring size and the subscribers per session.
    pub fn with_subscribers(mut self, ring: usize, max: usize) -> Self {
        self.sse_buffer = ring;
        self.max_subscribers = max;
        self
    }

    /// Sets how long a turn waits for a failing store.
    pub fn with_store_outage(mut self, outage: std::time::Duration) -> Self {
        self.store_outage = outage;
        self
    }

    /// Sets how long a stalled SSE client is kept.
    pub fn with_sse_stall(mut self, stall: std::time::Duration) -> Self {
        self.sse_stall = stall;
        self
    }

    /// Lets requests name `host` in their `Host` header (beside IP addresses and `localhost`).
    pub fn with_allowed_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Lets clients set `option` (a backend option key, `permissionMode`, `allowedTools`, or `*`).
    pub fn with_client_option(mut self, option: impl Into<String>) -> Self {
        self.client_options.push(option.into());
        self
    }

    /// Sets how many sessions may be live at once.
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max;
        self
    }

    /// Sets the connection bounds: how many at once, how long a request head may take, how
    /// long a connection may move nothing.
    pub fn with_connections(
        mut self,
        max: usize,
        header_timeout: std::time::Duration,
        idle_timeout: std::time::Duration,
    ) -> Self {
        self.max_connections = max;
        self.header_timeout = header_timeout;
        self.idle_timeout = idle_timeout;
        self
    }

    /// Checks what a person configured: every CORS origin is `http(s)://host[:port]` (not `*`,
    /// not `null`), every allowed host a bare host name.
    ///
    /// ```
    /// use agent_api_server::ServerConfig;
    /// assert!(ServerConfig::default().with_cors_origin("https://app.example:8443").check().is_ok());
    /// assert!(ServerConfig::default().with_cors_origin("*").check().is_err());
    /// assert!(ServerConfig::default().with_cors_origin("null").check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), ConfigError> {
        for origin in &self.cors_origins {
            if !crate::hosts::is_origin(origin) {
                return Err(ConfigError::CorsOrigin(agent_api::display::line(
                    origin, 128,
                )));
            }
        }
        for host in &self.allowed_hosts {
            if !crate::hosts::is_host_name(host) {
                return Err(ConfigError::Host(agent_api::display::line(host, 128)));
            }
        }
        for name in self.tenants.keys() {
            crate::store::tokens::check_tenant(name).map_err(ConfigError::Tenant)?;
        }
        Ok(())
    }

    /// A random token: 32 bytes from the operating system, as 64 hex digits.
    pub fn random_token() -> Result<String, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// A setting [`ServerConfig::check`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A CORS origin that is not one web origin.
    #[error("CORS origin `{0}`: give one origin, scheme://host[:port] with http or https (not `*`, not `null`, no path)")]
    CorsOrigin(String),
    /// An allowed host that is not a host name.
    #[error(
        "allowed host `{0}`: give a host name such as agents.example.com (no scheme, port or path)"
    )]
    Host(String),
    /// A tenant's name that is not one.
    #[error("{0}")]
    Tenant(crate::store::tokens::TokenError),
}
