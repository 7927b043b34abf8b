//! [`ServerConfig`]: the server's security and resource bounds.

/// The bounds and security settings of a server. Defaults: no token (set one, or use
/// [`ServerConfig::random_token`]), no CORS, 1 MiB request bodies, a ring of 1024 events per
/// session for its subscribers, 64 subscribers per session, an SSE client taking nothing for 30 s
/// dropped, pages of at most 1000 events, a turn waiting 60 s for a failing store, the host's name
/// as the daemon's name (its identity adds what makes it unique to the process), an idle session's
/// agent released after 600 s, no idle limit on sessions, a 30 s lease on a shared store.
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

    /// A random token: 32 bytes from the operating system, as 64 hex digits.
    pub fn random_token() -> Result<String, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }
}
