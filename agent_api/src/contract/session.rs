//! [`Session`]: several turns on one agent (`spec/run-protocol.md` §8).
//!
//! ```
//! # async fn demo(gateway: agent_api::Gateway, kind: agent_api::AgentKind) -> Result<(), agent_api::AgentError> {
//! use agent_api::RunRequest;
//! let mut session = gateway.open_session(&kind, RunRequest::new("")).await?;
//! for prompt in ["hello", "and again"] {
//!     let (events, completion) = session.send(prompt).await?.collect_wrapper().await;
//!     println!("{} events, answer: {:?}", events.len(), completion?.final_text);
//! }
//! let trailing = session.close().await?;
//! assert!(trailing.iter().any(|e| e.type_name() == "session.ended"));
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::contract::handle::RunHandle;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::request::Prompt;
use crate::vocabulary::universal::UniversalEvent;

/// What a session's driver is asked to do.
pub(crate) enum SessionCommand {
    /// Start a turn and hand back its handle.
    Turn(Prompt, oneshot::Sender<Result<RunHandle, AgentError>>),
    /// Switch the agent's mode between turns.
    SetMode(
        crate::vocabulary::modes::AgentMode,
        oneshot::Sender<Result<(), AgentError>>,
    ),
    /// End the agent and hand back the trailing events.
    Close(oneshot::Sender<Vec<UniversalEvent>>),
}

/// What a session's driver tells its [`Session`] outside of turns.
#[derive(Debug, Default)]
pub(crate) struct SessionShared {
    /// The provider's session id, once known.
    pub(crate) native_session_id: Option<String>,
    /// The session takes no more turns.
    pub(crate) closed: bool,
    /// Events written after the last turn (`session.ended`), until `close` takes them.
    pub(crate) trailing: Vec<UniversalEvent>,
}

/// The shared state, even if a panicking holder poisoned it (it holds plain data).
pub(crate) fn lock(shared: &Mutex<SessionShared>) -> MutexGuard<'_, SessionShared> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A session on one live agent process, driven by the kit.
pub(crate) struct WarmSession {
    pub(crate) commands: mpsc::UnboundedSender<SessionCommand>,
    pub(crate) shared: Arc<Mutex<SessionShared>>,
    /// Cancelled when the session is dropped: the driver then kills the process group.
    pub(crate) abandoned: CancellationToken,
    pub(crate) process_id: Option<u32>,
    /// Which launcher started the agent process.
    pub(crate) launcher: Option<String>,
}

impl Drop for WarmSession {
    fn drop(&mut self) {
        self.abandoned.cancel();
    }
}

pub(crate) enum Engine {
    Warm(WarmSession),
    Resumed(Box<dyn ResumingTurns>),
}

/// The turns of a session that runs each one as a new run resuming the last (a feature above the
/// contract: `crate::resumed`).
#[async_trait::async_trait]
pub(crate) trait ResumingTurns: Send + Sync {
    /// The provider's session id, once known.
    fn native_session_id(&self) -> Option<String>;
    /// Starts the next turn.
    async fn send(&mut self, prompt: Prompt) -> Result<RunHandle, AgentError>;
    /// The next turns' mode, checked against the backend's modes now.
    fn set_mode(&mut self, mode: crate::vocabulary::modes::AgentMode) -> Result<(), AgentError>;
    /// Ends the session, returning the trailing events.
    async fn close(self: Box<Self>) -> Result<Vec<UniversalEvent>, AgentError>;
}

/// Several turns on one agent: each [`Session::send`] is a turn and returns what a run returns
/// (a [`RunHandle`]: events, a completion resolving once after the turn's last event, and a
/// control whose cancel is the turn's soft interrupt). All turns' universal events form one
/// gap-free sequence under one session id.
///
/// Open one with [`crate::Gateway::open_session`] or [`crate::AgentBackend::open_session`].
/// [`Session::close`] ends it and returns the trailing events; dropping it kills the agent's
/// process group without waiting.
pub struct Session {
    agent_kind: AgentKind,
    engine: Engine,
    /// Exports the session's snapshot (set by the gateway, which knows the backend).
    snapshots: Option<Arc<dyn SnapshotSource>>,
    /// What restoring the snapshot the session was opened from did.
    restored: Option<crate::vocabulary::snapshot::SnapshotImport>,
}

/// Takes a session's snapshot from its backend (a feature above the contract: `crate::snapshot`).
#[async_trait::async_trait]
pub(crate) trait SnapshotSource: Send + Sync {
    /// The snapshot of the native session `native_session_id`.
    async fn export(
        &self,
        native_session_id: &str,
    ) -> Result<crate::vocabulary::snapshot::SessionSnapshot, AgentError>;
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("agent_kind", &self.agent_kind)
            .field("warm", &self.is_warm())
            .field("native_session_id", &self.native_session_id())
            .field("process_id", &self.process_id())
            .field("launcher", &self.launcher())
            .field("restored", &self.restored)
            .finish()
    }
}

impl Session {
    pub(crate) fn new(agent_kind: AgentKind, engine: Engine) -> Self {
        Self {
            agent_kind,
            engine,
            snapshots: None,
            restored: None,
        }
    }

    /// The session, able to give its snapshot through `source`.
    pub(crate) fn with_snapshots(
        mut self,
        source: Arc<dyn SnapshotSource>,
        restored: Option<crate::vocabulary::snapshot::SnapshotImport>,
    ) -> Self {
        self.snapshots = Some(source);
        self.restored = restored;
        self
    }

    /// The agent's own state for the session, to open it again in another home or on another
    /// machine ([`crate::RunRequest::with_snapshot`]): take it after a turn's completion has
    /// resolved (a turn in progress is still being written). Needs `agent_api.session.snapshot`
    /// and a session opened through [`crate::Gateway::open_session`]; `InvalidRequest` before
    /// the agent has reported its session id.
    ///
    /// ```
    /// # async fn demo(here: agent_api::Gateway, elsewhere: agent_api::Gateway, kind: agent_api::AgentKind) -> Result<(), agent_api::AgentError> {
    /// use agent_api::{RunRequest, SessionSnapshot};
    /// let mut first = here.open_session(&kind, RunRequest::new("")).await?;
    /// first.send("My name is Ada").await?.collect_wrapper().await.1?;
    /// let bytes = first.snapshot().await?.to_bytes()?; // keep them anywhere
    /// first.close().await?;
    ///
    /// // Another home, another machine: the session goes on, natively.
    /// let snapshot = SessionSnapshot::from_bytes(&bytes)?;
    /// let mut again = elsewhere.open_session(&kind, RunRequest::new("").with_snapshot(snapshot)).await?;
    /// again.send("What is my name?").await?.collect_wrapper().await.1?;
    /// # Ok(()) }
    /// ```
    pub async fn snapshot(
        &self,
    ) -> Result<crate::vocabulary::snapshot::SessionSnapshot, AgentError> {
        self.snapshot_detached().await
    }

    /// [`Session::snapshot`] as a future that holds nothing of the session: it may go on while
    /// the session takes its next turn, or after it is closed. For a caller that bounds its
    /// wait for an agent whose export is slow (a CLI command started per export) and lets the
    /// rest finish aside. What it exports is the agent's files when it reads them.
    pub fn snapshot_detached(
        &self,
    ) -> impl std::future::Future<
        Output = Result<crate::vocabulary::snapshot::SessionSnapshot, AgentError>,
    > + Send
           + 'static {
        let source = self.snapshots.clone();
        let id = self.native_session_id();
        async move {
            let Some(source) = source else {
                return Err(AgentError::InvalidRequest {
                    reason:
                        "this session was not opened through a Gateway, which takes its snapshots"
                            .into(),
                });
            };
            let Some(id) = id else {
                return Err(AgentError::InvalidRequest {
                    reason:
                        "the agent has not reported its session id yet: take a snapshot after a turn"
                            .into(),
                });
            };
            source.export(&id).await
        }
    }

    /// What restoring the snapshot this session was opened from did (files written, and files
    /// kept because the home held a newer copy: newest wins); `None` for a session not opened
    /// from a snapshot.
    pub fn restored(&self) -> Option<&crate::vocabulary::snapshot::SnapshotImport> {
        self.restored.as_ref()
    }

    /// The backend of the session.
    pub fn agent_kind(&self) -> &AgentKind {
        &self.agent_kind
    }

    /// Whether one live agent process takes every turn (`agent_api.session.warm`); otherwise
    /// each turn is a new process resuming the previous turn's session.
    pub fn is_warm(&self) -> bool {
        matches!(self.engine, Engine::Warm(_))
    }

    /// The provider's session id, once the agent has reported it.
    pub fn native_session_id(&self) -> Option<String> {
        match &self.engine {
            Engine::Warm(warm) => lock(&warm.shared).native_session_id.clone(),
            Engine::Resumed(resumed) => resumed.native_session_id(),
        }
    }

    /// The id of the agent process (the leader of its process group), for a warm session on a
    /// spawned CLI.
    pub fn process_id(&self) -> Option<u32> {
        match &self.engine {
            Engine::Warm(warm) => warm.process_id,
            Engine::Resumed(_) => None,
        }
    }

    /// Which launcher started a warm session's agent process, as
    /// [`Launcher`](crate::request::Launcher)'s Display shows it (each turn's completion says it too).
    pub fn launcher(&self) -> Option<&str> {
        match &self.engine {
            Engine::Warm(warm) => warm.launcher.as_deref(),
            Engine::Resumed(_) => None,
        }
    }

    /// Sends the next turn. `TurnInProgress` while the previous turn's completion has not
    /// resolved; `SessionClosed` once the session has ended; `InvalidRequest` for an empty prompt.
    pub async fn send(&mut self, prompt: impl Into<Prompt>) -> Result<RunHandle, AgentError> {
        let prompt = prompt.into();
        if prompt.text.trim().is_empty() {
            return Err(AgentError::InvalidRequest {
                reason: "the prompt is empty".into(),
            });
        }
        match &mut self.engine {
            Engine::Warm(warm) => {
                if lock(&warm.shared).closed {
                    return Err(AgentError::SessionClosed);
                }
                let (reply, handle) = oneshot::channel();
                warm.commands
                    .send(SessionCommand::Turn(prompt, reply))
                    .map_err(|_| AgentError::SessionClosed)?;
                handle.await.unwrap_or(Err(AgentError::SessionClosed))
            }
            Engine::Resumed(resumed) => resumed.send(prompt).await,
        }
    }

    /// Changes the mode of the next turns (`agent_api.session.mode_switch`), between turns:
    /// `TurnInProgress` while a turn runs, `UnknownMode` for a mode the agent does not offer,
    /// `UnsupportedCapability` where the agent cannot switch. A warm session sends the agent's own
    /// switch (a `set_permission_mode` control request, ACP `session/set_mode`); a session
    /// resuming per turn starts its next turns in the new mode.
    pub async fn set_mode(
        &mut self,
        mode: impl Into<crate::vocabulary::modes::AgentMode>,
    ) -> Result<(), AgentError> {
        let mode = mode.into();
        match &mut self.engine {
            Engine::Warm(warm) => {
                if lock(&warm.shared).closed {
                    return Err(AgentError::SessionClosed);
                }
                let (reply, done) = oneshot::channel();
                warm.commands
                    .send(SessionCommand::SetMode(mode, reply))
                    .map_err(|_| AgentError::SessionClosed)?;
                done.await.unwrap_or(Err(AgentError::SessionClosed))
            }
            Engine::Resumed(resumed) => resumed.set_mode(mode),
        }
    }

    /// Ends the session: the agent's stdin is closed, and its process group killed if it has
    /// not exited after the shutdown grace period. Returns the events written after the last
    /// turn, `session.ended` among them. A turn still in progress ends as cancelled.
    pub async fn close(self) -> Result<Vec<UniversalEvent>, AgentError> {
        match self.engine {
            Engine::Warm(warm) => {
                let (reply, trailing) = oneshot::channel();
                if warm.commands.send(SessionCommand::Close(reply)).is_ok() {
                    if let Ok(events) = trailing.await {
                        return Ok(events);
                    }
                }
                Ok(std::mem::take(&mut lock(&warm.shared).trailing))
            }
            Engine::Resumed(resumed) => resumed.close().await,
        }
    }
}
