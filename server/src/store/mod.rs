//! Where sessions and their events are kept: every event is written here before any client sees
//! it, and the events endpoints read it back from here.
//!
//! Two stores: [`MemoryStore`] (for tests: nothing survives the process) and [`SqliteStore`] (the
//! default: one file, WAL, batched writes). [`StoreUrl`] parses `--store`.

mod fleet;
mod fleet_pg;
mod memory;
mod outbox;
mod pg_notices;
mod pg_statements;
mod postgres;
mod postgres_tls;
mod probe;
mod snapshots;
mod sqlite;
pub mod tokens;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

pub use fleet::{Answer, Command, CommandState, Fleet, Notice};
pub use memory::MemoryStore;
pub(crate) use outbox::now_ms;
pub use outbox::{
    AttemptOutcome, Delivery, DeliveryAttempt, OutboxEntry, OutboxRules, OutboxTarget, WebhookEvent,
};
pub use postgres::PostgresStore;
pub use probe::ProbeError;
pub(crate) use snapshots::{Chain, SnapshotWrite};
pub use snapshots::{StoredChain, StoredDelta, StoredSnapshot, MAX_DELTAS};
pub use sqlite::SqliteStore;
pub(crate) use sqlite::SqliteTokens;

/// One stored event: its sequence in the session and its JSON, kept apart from its raw payload
/// so that the common case (no `include_raw`) is served without parsing.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Position in the session, from 1, with no gaps.
    pub sequence: u64,
    /// The event's JSON with `"raw":null` as its last member.
    pub json: Arc<str>,
    /// The event's native payload as JSON, when it has one.
    pub raw: Option<Arc<str>>,
}

/// The tail every stored event's JSON ends with: `raw` is the envelope's last member.
const RAW_NULL_TAIL: &str = "\"raw\":null}";

impl StoredEvent {
    /// Builds a stored event from a universal event (whose `raw` is moved to its own field).
    pub fn from_event(mut event: agent_api::UniversalEvent) -> Result<Self, serde_json::Error> {
        let raw = event
            .raw
            .take()
            .map(|raw| serde_json::to_string(&*raw))
            .transpose()?;
        let json = serde_json::to_string(&event)?;
        debug_assert!(
            json.ends_with(RAW_NULL_TAIL),
            "`raw` must stay the event's last member"
        );
        Ok(Self {
            sequence: event.sequence,
            json: json.into(),
            raw: raw.map(Into::into),
        })
    }

    /// The event's type (`item.delta`, …), read from its JSON without parsing it: the envelope's
    /// `type` member is the first `,"type":"` (every string before it escapes its quotes).
    pub fn kind(&self) -> &str {
        let Some((_, rest)) = self.json.split_once(r#","type":""#) else {
            return "";
        };
        rest.split_once('"').map_or("", |(kind, _)| kind)
    }

    /// The turn this event closes, when it is a turn's closing delimiter: an `item.completed`
    /// whose status is `turn_completed` or `turn_failed` with the detail `turn N` (the agent's
    /// own statuses carry no such detail). Parsed only for an `item.completed`.
    pub(crate) fn closed_turn(&self) -> Option<ClosedTurn> {
        if self.kind() != "item.completed" {
            return None;
        }
        let value: serde_json::Value = serde_json::from_str(&self.json).ok()?;
        let status = &value["data"]["item"]["content"][0];
        let failed = match status["label"].as_str()? {
            "turn_completed" => false,
            "turn_failed" => true,
            _ => return None,
        };
        let turn = status["detail"]
            .as_str()?
            .strip_prefix("turn ")?
            .parse()
            .ok()?;
        Some(ClosedTurn { turn, failed })
    }

    /// The event's JSON as served: `raw` filled only when `include_raw` asks for it.
    pub fn render(&self, include_raw: bool) -> String {
        match (&self.raw, include_raw) {
            (Some(raw), true) => match self.json.strip_suffix("null}") {
                Some(head) if self.json.ends_with(RAW_NULL_TAIL) => [head, raw, "}"].concat(),
                // Not the shape this server writes (an older row): parse and set the member.
                _ => {
                    let mut value: serde_json::Value =
                        serde_json::from_str(&self.json).unwrap_or_default();
                    if let Some(object) = value.as_object_mut() {
                        object.insert("raw".into(), serde_json::from_str(raw).unwrap_or_default());
                    }
                    value.to_string()
                }
            },
            _ => self.json.to_string(),
        }
    }
}

/// A turn's closing delimiter, read from the log ([`StoredEvent::closed_turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClosedTurn {
    /// The turn's number in the session.
    pub(crate) turn: u64,
    /// `turn_failed` (its terminal `error` follows), not `turn_completed`.
    pub(crate) failed: bool,
}

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The id the client chose (the path's `session_id`).
    pub id: String,
    /// The agent id as the client gave it: a kind, or a reference id ([`crate::AGENT_ALIASES`]).
    pub agent: String,
    /// The agent mode (`build` unless asked).
    pub agent_mode: String,
    /// The permission mode (`default` unless asked).
    pub permission_mode: String,
    /// The model asked for.
    pub model: Option<String>,
    /// The model variant asked for.
    pub variant: Option<String>,
    /// The agent's own session id, once known.
    pub native_session_id: Option<String>,
    /// Whether the session ended (terminated, or its agent stopped).
    pub ended: bool,
    /// Why it ended, when it ended with an error (e.g. the daemon stopped under it).
    pub end_error: Option<String>,
    /// How many events it has.
    pub event_count: u64,
    /// The server (its daemon id) that runs it while it is live.
    pub owner: Option<String>,
    /// The tokens and cost of its turns, summed, as JSON (`SessionInfo.usage`).
    pub usage: Option<String>,
    /// The creation's options (the `CreateSessionRequest` as JSON): what another server opens
    /// its agent with when it brings the session back.
    pub settings: Option<String>,
    /// Where its agent worked.
    pub working_dir: Option<String>,
    /// What its owner does with it: [`SessionState::Live`] (holds its agent),
    /// [`SessionState::Idle`] (released its agent), [`SessionState::Stopped`] (stopped cleanly),
    /// [`SessionState::AgentExited`] (its agent exited by itself) or
    /// [`SessionState::NativeRefused`] (its agent could not continue its own session).
    pub state: SessionState,
    /// The turns started.
    pub turns: u64,
    /// Whether a turn was running (closed as interrupted when a server that died left it so).
    pub turn_open: bool,
    /// When it last took an event or a turn (unix seconds).
    pub active_at: Option<i64>,
    /// How it was last brought back (`native` or `replay`).
    pub resumed_how: Option<String>,
    /// The turn after which its snapshot was kept, if one is.
    pub snapshot_turn: Option<u64>,
    /// The tenant it belongs to (`spec/http-api.md`, Auth); `None`: no tenant's, seen only by
    /// untenanted tokens.
    pub tenant: Option<String>,
}

/// What a session's owner does with it, as stored (`SessionInfo.state` adds `resumable` and
/// `ended`, which depend on who reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionState {
    /// Its owner holds its agent.
    #[default]
    Live,
    /// Its owner released its agent (`--idle-release`); the next message resumes it.
    Idle,
    /// Its owner stopped cleanly (SIGTERM) with it open.
    Stopped,
    /// Its agent exited by itself (it crashed, or was killed) during a turn; its owner holds
    /// none, and the next message brings the session back.
    AgentExited,
    /// Brought back natively, its agent took the open but refused its own session on the first
    /// turn (`AgentError::SessionNotFound`, before any output: an agent that loads its session
    /// lazily and cannot); its owner holds none, and the next message brings the session back by
    /// a flagged replay, not natively again.
    NativeRefused,
}

impl SessionState {
    /// Its name in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Idle => "idle",
            Self::Stopped => "stopped",
            Self::AgentExited => "agent_exited",
            Self::NativeRefused => "native_refused",
        }
    }

    /// The state a stored name says (an unknown one: `live`, whose owner may be gone).
    pub fn parse(text: &str) -> Self {
        match text {
            "idle" => Self::Idle,
            "stopped" => Self::Stopped,
            "agent_exited" => Self::AgentExited,
            "native_refused" => Self::NativeRefused,
            _ => Self::Live,
        }
    }
}

/// A change to a session by its owner ([`Store::update`]); `None` fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionUpdate {
    /// Its new state.
    pub state: Option<SessionState>,
    /// The turns started, and whether one runs now.
    pub turns: Option<(u64, bool)>,
    /// How it was brought back.
    pub resumed_how: Option<String>,
}

impl SessionUpdate {
    /// Sets the state.
    pub fn state(mut self, state: SessionState) -> Self {
        self.state = Some(state);
        self
    }

    /// Sets the turns started and whether one runs.
    pub fn turns(mut self, turns: u64, open: bool) -> Self {
        self.turns = Some((turns, open));
        self
    }

    /// Sets how it was brought back.
    pub fn resumed_how(mut self, how: impl Into<String>) -> Self {
        self.resumed_how = Some(how.into());
        self
    }
}

/// The current time in unix seconds.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl SessionRecord {
    /// A new session `id` of `agent`: mode `build`, permission mode `default`, no event yet, live,
    /// owned by no server (a record a test or an import writes itself).
    pub fn new(id: impl Into<String>, agent: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            agent: agent.into(),
            agent_mode: "build".into(),
            permission_mode: "default".into(),
            model: None,
            variant: None,
            native_session_id: None,
            ended: false,
            end_error: None,
            event_count: 0,
            owner: None,
            usage: None,
            settings: None,
            working_dir: None,
            state: SessionState::Live,
            turns: 0,
            turn_open: false,
            active_at: None,
            resumed_how: None,
            snapshot_turn: None,
            tenant: None,
        }
    }
}

/// What a store can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A session with this id exists.
    #[error("a session with id `{0}` already exists")]
    Duplicate(String),
    /// No session has this id.
    #[error("no session has id `{0}`")]
    NotFound(String),
    /// An event's sequence does not follow the session's last one.
    #[error("event {got} does not follow event {last} of session `{session}`")]
    OutOfOrder {
        /// The session.
        session: String,
        /// Its last stored sequence.
        last: u64,
        /// The sequence offered.
        got: u64,
    },
    /// The database failed.
    #[error("the store failed: {0}")]
    Backend(String),
    /// A snapshot delta that does not follow what the store keeps of the session's snapshot
    /// (no whole snapshot kept, or another delta in its place): its writer writes a whole one.
    #[error("delta {got} of the snapshot of session `{session}` does not follow the {kept} delta(s) kept")]
    SnapshotOutOfOrder {
        /// The session.
        session: String,
        /// The deltas kept (none when no whole snapshot is).
        kept: u64,
        /// The delta offered.
        got: u64,
    },
    /// Another server owns the session now: this one must not write it.
    #[error("the session `{session}` is owned by another server (`{owner}`) now")]
    NotOwner {
        /// The session.
        session: String,
        /// Its owner now (empty: none).
        owner: String,
    },
    /// This server's lease on the session ran out (it did not renew its heartbeat in time: it
    /// was paused, or cut from the database): it must not write the session until it holds it
    /// again, and another server may have claimed it meanwhile.
    #[error("this server's lease on the session `{session}` ran out: it may be run elsewhere now")]
    LeaseLost {
        /// The session.
        session: String,
    },
    /// Another server uses this store, which takes one (a SQLite file).
    #[error("{0}")]
    Locked(String),
    /// TLS to the database failed: a server without TLS under `sslmode=require`, a certificate
    /// not signed by a trusted CA, or one for another host name.
    #[error("TLS to PostgreSQL failed: {0}")]
    Tls(String),
    /// The store URL's TLS settings cannot be honoured: an unknown `sslmode`, a CA file that
    /// cannot be read, no CA to verify with.
    #[error("the store's TLS settings: {0}")]
    TlsSettings(String),
    /// The `--store` URL is not one this server knows.
    #[error("unsupported store {0:?}: use memory, sqlite:PATH, a path ending in .sqlite3/.db, or postgres://…")]
    UnsupportedUrl(String),
}

/// A store of sessions and their events.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Adds a session; [`StoreError::Duplicate`] when its id is taken.
    async fn create_session(&self, record: SessionRecord) -> Result<(), StoreError>;
    /// Appends events to a session (sequences following its last one), durable when this returns.
    async fn append(&self, session: &str, events: Vec<StoredEvent>) -> Result<(), StoreError>;
    /// Up to `limit` events with a sequence above `after`, in order.
    async fn events(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;
    /// One session.
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Every session, in the order they were created.
    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError>;
    /// Records the agent's own session id.
    async fn set_native_session_id(&self, id: &str, native: &str) -> Result<(), StoreError>;
    /// Marks a session ended, with an error reason when it ended badly.
    async fn mark_ended(&self, id: &str, error: Option<&str>) -> Result<(), StoreError>;
    /// Records the tokens and cost of a session's turns so far (JSON).
    async fn set_usage(&self, id: &str, usage: &str) -> Result<(), StoreError>;
    /// Records the agent mode a session switched to (a message's `agentMode`).
    async fn set_agent_mode(&self, id: &str, mode: &str) -> Result<(), StoreError>;
    /// Whether the store takes writes now (`GET /v1/health/ready`): reachable, writable, its
    /// migrations the ones this server knows. Writes nothing. The default reads one session.
    async fn probe(&self) -> Result<(), ProbeError> {
        self.session("")
            .await
            .map(|_| ())
            .map_err(|e| ProbeError::Unreachable(e.to_string()))
    }
    /// [`Store::append`] by the session's owner: [`StoreError::NotOwner`] (nothing written) when
    /// another server owns it now. Sets when it was last active.
    async fn append_owned(
        &self,
        session: &str,
        owner: &str,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError>;
    /// Makes `owner` the session's owner if `from` owns it now (compare and swap; `None`: no
    /// owner), and its state live; [`StoreError::NotOwner`] when another got there first.
    async fn claim(&self, id: &str, owner: &str, from: Option<&str>) -> Result<(), StoreError>;
    /// Changes a session `owner` owns; [`StoreError::NotOwner`] when it does not.
    async fn update(&self, id: &str, owner: &str, update: SessionUpdate) -> Result<(), StoreError>;
    /// Keeps a whole snapshot of a session `owner` owns, replacing the one kept and its deltas.
    async fn put_snapshot(
        &self,
        id: &str,
        owner: &str,
        snapshot: StoredSnapshot,
    ) -> Result<(), StoreError>;
    /// Adds a delta to the snapshot kept for a session `owner` owns:
    /// [`StoreError::SnapshotOutOfOrder`] (nothing written) unless a whole snapshot is kept and
    /// the delta is the one after the last kept (`delta.seq` = the deltas kept + 1).
    async fn put_snapshot_delta(
        &self,
        id: &str,
        owner: &str,
        delta: StoredDelta,
    ) -> Result<(), StoreError>;
    /// A session's snapshot (its base and the deltas on it, read at one moment), if one was kept.
    async fn snapshot(&self, id: &str) -> Result<Option<StoredChain>, StoreError>;
    /// Says that the server `server` runs (renewed while it does: [`Store::server_alive`]).
    async fn heartbeat(&self, server: &str) -> Result<(), StoreError>;
    /// Whether the server `server` runs: it renewed its heartbeat within `lease` (a store one
    /// server holds alone: it is that server).
    async fn server_alive(
        &self,
        server: &str,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError>;
    /// The scoped tokens this store keeps ([`tokens`]); `None` (the default): none, so only
    /// the server's own `--token` is taken.
    fn token_store(&self) -> Option<&dyn tokens::TokenStore> {
        None
    }

    /// Keeps a webhook outbox from now on: every append puts a row for each event and endpoint
    /// `rules` match in the same write as the event. The default: a store without one, refused.
    fn set_outbox(&self, rules: Arc<OutboxRules>) -> Result<(), StoreError> {
        let _ = rules;
        Err(outbox::unsupported())
    }
    /// Up to `limit` outbox rows of `endpoints` due at `now_ms`, each the oldest undelivered
    /// row of its endpoint and session (so a session's rows go in order), taken by `server` for
    /// `lease` (a store shared by several servers gives each row to one of them at a time).
    async fn claim_deliveries(
        &self,
        server: &str,
        endpoints: &[String],
        now_ms: i64,
        lease: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let _ = (server, endpoints, now_ms, lease, limit);
        Err(outbox::unsupported())
    }
    /// Records a try to deliver a row taken with [`Store::claim_deliveries`]: the row is done,
    /// due again at `attempt.next_attempt_ms`, or given up, and the try joins the delivery log.
    async fn record_attempt(&self, attempt: DeliveryAttempt) -> Result<(), StoreError> {
        let _ = attempt;
        Err(outbox::unsupported())
    }
    /// The delivery log, newest try first: up to `limit` tries, of `session` when given.
    async fn delivery_log(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryAttempt>, StoreError> {
        let _ = (session, limit);
        Err(outbox::unsupported())
    }

    // A fleet of servers on one store (issue 48). The defaults are a store one server holds
    // alone (memory, SQLite): no epochs (always 0), no commands between servers.

    /// [`Store::claim`] holding a lease: `owner` takes the session if `from` owns it now and that
    /// owner holds no agent for it (idle, stopped), or is `owner` itself, or its lease (`lease`
    /// since its last heartbeat) ran out; returns the session's new epoch, which every write
    /// of the new owner names ([`Store::append_fenced`]).
    async fn claim_lease(
        &self,
        id: &str,
        owner: &str,
        from: Option<&str>,
        lease: std::time::Duration,
    ) -> Result<u64, StoreError> {
        let _ = lease;
        self.claim(id, owner, from).await.map(|()| 0)
    }

    /// [`Store::append_owned`] fenced by the epoch: refused ([`StoreError::NotOwner`]) unless
    /// `owner` still owns the session at `epoch`, and ([`StoreError::LeaseLost`]) unless its
    /// lease (`lease` since its last heartbeat) still runs. The database decides, in the write
    /// itself: a server that was paused past its lease can never write.
    async fn append_fenced(
        &self,
        session: &str,
        owner: &str,
        epoch: u64,
        lease: std::time::Duration,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError> {
        let _ = (epoch, lease);
        self.append_owned(session, owner, events).await
    }

    /// The sessions `server` owns, not ended, with their epochs (a server that woke checks it
    /// still holds what it runs).
    async fn owned(&self, server: &str) -> Result<Vec<(String, u64)>, StoreError> {
        Ok(self
            .sessions()
            .await?
            .into_iter()
            .filter(|r| !r.ended && r.owner.as_deref() == Some(server))
            .map(|r| (r.id, 0))
            .collect())
    }

    /// The commands and notifications between the servers sharing this store; `None`: the store
    /// is one server's alone.
    fn fleet(&self) -> Option<&dyn Fleet> {
        None
    }
}

/// Where the store lives, as `--store` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// In memory: for tests, nothing survives the process.
    Memory,
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://` or `postgresql://`), shared by several servers.
    Postgres(String),
}

impl StoreUrl {
    /// Parses `memory`, `sqlite:PATH` (or `sqlite://PATH`), a bare path ending in `.sqlite3`,
    /// `.sqlite` or `.db`, or a `postgres://` (`postgresql://`) URL.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        if text == "memory" {
            return Ok(Self::Memory);
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Self::Postgres(text.into()));
        }
        let path = text
            .strip_prefix("sqlite://")
            .or_else(|| text.strip_prefix("sqlite:"));
        match path {
            Some(path) if !path.is_empty() => Ok(Self::Sqlite(PathBuf::from(path))),
            Some(_) => Err(StoreError::UnsupportedUrl(text.into())),
            None if [".sqlite3", ".sqlite", ".db"]
                .iter()
                .any(|ext| text.ends_with(ext)) =>
            {
                Ok(Self::Sqlite(PathBuf::from(text)))
            }
            None => Err(StoreError::UnsupportedUrl(text.into())),
        }
    }

    /// The default: `agent-api/server.sqlite3` in the user's data directory
    /// (`$XDG_DATA_HOME`, `~/.local/share` on Linux).
    pub fn default_sqlite() -> Option<Self> {
        dirs::data_dir().map(|dir| Self::Sqlite(dir.join("agent-api").join("server.sqlite3")))
    }

    /// Opens the store.
    pub async fn open(&self) -> Result<Arc<dyn Store>, StoreError> {
        Ok(match self {
            Self::Memory => Arc::new(MemoryStore::default()),
            Self::Sqlite(path) => {
                // The default store's directory is this tool's own: private, even if an older
                // version made it readable.
                let default = Self::default_sqlite();
                if let (Some(Self::Sqlite(default)), Some(dir)) = (&default, path.parent()) {
                    if default == path && dir.is_dir() {
                        crate::private::own_dir(dir).map_err(|e| {
                            StoreError::Backend(format!(
                                "cannot make {} private: {e}",
                                dir.display()
                            ))
                        })?;
                    }
                }
                Arc::new(SqliteStore::open(path.clone()).await?)
            }
            Self::Postgres(url) => Arc::new(PostgresStore::open(url).await?),
        })
    }
}

impl StoreUrl {
    /// The tokens of this store, for `agent-api token`: a SQLite file is opened beside the
    /// server that may hold it (tokens are written in their own short transactions); PostgreSQL
    /// as any server does; `memory` is refused (a token there would vanish with this process).
    pub async fn open_tokens(&self) -> Result<Arc<dyn tokens::TokenStore>, StoreError> {
        match self {
            Self::Memory => Err(StoreError::Backend(
                "a memory store keeps nothing past this command: give the server's --store (sqlite:PATH or postgres://…)".into(),
            )),
            Self::Sqlite(path) => Ok(Arc::new(SqliteTokens::open(path.clone()).await?)),
            Self::Postgres(url) => Ok(Arc::new(PostgresStore::open(url).await?)),
        }
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory => f.write_str("memory"),
            Self::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            // Without the user and password the URL may hold.
            Self::Postgres(url) => {
                let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
                write!(
                    f,
                    "{scheme}://{}",
                    rest.rsplit_once('@').map_or(rest, |(_, host)| host)
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_parse_and_refuse_what_they_do_not_know() {
        assert_eq!(StoreUrl::parse("memory").unwrap(), StoreUrl::Memory);
        assert_eq!(
            StoreUrl::parse("sqlite:/tmp/x.db").unwrap(),
            StoreUrl::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///tmp/x").unwrap(),
            StoreUrl::Sqlite("/tmp/x".into())
        );
        assert_eq!(
            StoreUrl::parse("data/a.sqlite3").unwrap(),
            StoreUrl::Sqlite("data/a.sqlite3".into())
        );
        assert_eq!(
            StoreUrl::parse("postgres://u:p@h:5/db").unwrap(),
            StoreUrl::Postgres("postgres://u:p@h:5/db".into())
        );
        assert_eq!(
            StoreUrl::parse("postgresql://u:secret@h/db")
                .unwrap()
                .to_string(),
            "postgresql://h/db",
            "no password shown"
        );
        for bad in ["sqlite:", "mysql://x", "file.txt"] {
            assert!(
                matches!(StoreUrl::parse(bad), Err(StoreError::UnsupportedUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_stored_event_serves_raw_only_when_asked() {
        let event = StoredEvent {
            sequence: 1,
            json: r#"{"sequence":1,"raw":null}"#.into(),
            raw: Some(r#"{"a":[1]}"#.into()),
        };
        assert_eq!(event.render(false), r#"{"sequence":1,"raw":null}"#);
        let with_raw: serde_json::Value = serde_json::from_str(&event.render(true)).unwrap();
        assert_eq!(with_raw["raw"]["a"][0], 1);
    }

    #[test]
    fn a_stored_events_kind_is_its_envelopes_type_whatever_its_ids_hold() {
        let mut transcript =
            agent_api::kit::transcript::Transcript::new(r#"sess_,"type":"x"#.into(), false);
        transcript.permission_requested("perm_1", r#"run ,"type":"item.delta" now"#, None);
        let kinds: Vec<String> = transcript
            .drain()
            .map(|e| StoredEvent::from_event(e).unwrap().kind().to_string())
            .collect();
        assert!(
            kinds.contains(&"permission.requested".to_string()),
            "{kinds:?}"
        );
        assert!(kinds.iter().all(|k| k.contains('.')), "{kinds:?}");
    }
}
