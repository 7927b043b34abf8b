//! [`Fleet`]: what servers sharing one store tell each other through it (issue 48): commands for
//! the server that runs a session (or any server with room), their answers, and notifications
//! that a session has new events. PostgreSQL carries them (a `commands` table and
//! `LISTEN/NOTIFY`): no second broker.

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::StoreError;

/// A request handed to another server: as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its id in the store.
    pub id: i64,
    /// The HTTP method.
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The body.
    pub body: Vec<u8>,
}

/// What the server that took a [`Command`] answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
    /// Its `Content-Type`.
    pub content_type: Option<String>,
    /// Its `Retry-After`.
    pub retry_after: Option<String>,
}

/// Where a command is ([`Fleet::command_state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandState {
    /// Answered.
    Answered(Answer),
    /// No server took it yet.
    Open,
    /// A running server took it.
    Taken,
    /// The server that took it is gone (or the command is): no answer will come.
    Lost,
}

/// A notification from the store (ids and counts only: what changed is read from the rows).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// The session `session` holds `events` events now (and has ended, when `ended`).
    Events {
        /// The session.
        session: String,
        /// How many events it holds.
        events: u64,
        /// Whether it ended.
        ended: bool,
    },
    /// A command was written.
    Command(i64),
    /// A command was answered.
    Answer(i64),
    /// Notifications may have been missed (the listening connection broke, or a receiver fell
    /// behind): whoever waits reads the rows again.
    Missed,
}

/// Commands between the servers sharing a store, and its notifications.
#[async_trait]
pub trait Fleet: Send + Sync {
    /// The store's notifications from now on.
    fn notices(&self) -> broadcast::Receiver<Notice>;
    /// Writes a command for the server `target` (`None`: any server with room) about the
    /// session `session`; returns its id.
    async fn send_command(
        &self,
        target: Option<&str>,
        session: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<i64, StoreError>;
    /// Takes the command `id` for `server` when it is for it (or, when `any`, for any server)
    /// and nobody took it: at most one server ever takes a command (`FOR UPDATE SKIP LOCKED`).
    async fn take_command(
        &self,
        id: i64,
        server: &str,
        any: bool,
    ) -> Result<Option<Command>, StoreError>;
    /// The commands for `server` (and, when `any`, for any server) nobody took yet: those whose
    /// notification was missed.
    async fn open_commands(&self, server: &str, any: bool) -> Result<Vec<i64>, StoreError>;
    /// Stores the answer to a command taken.
    async fn answer_command(&self, id: i64, answer: Answer) -> Result<(), StoreError>;
    /// Takes a command back when nobody took it yet: `true` when withdrawn (no server will run
    /// it), `false` when a server took it meanwhile (its answer will come).
    async fn withdraw_command(&self, id: i64) -> Result<bool, StoreError>;
    /// Where a command is: answered (it is removed then), not taken yet, taken by a server that
    /// runs it (its heartbeat within `lease`), or taken by one that is gone.
    async fn command_state(
        &self,
        id: i64,
        lease: std::time::Duration,
    ) -> Result<CommandState, StoreError>;
}
