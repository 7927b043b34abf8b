//! [`LiveSession`]: a session this server runs now: its agent session, the turn in progress and
//! the feed its subscribers follow.
//!
//! A turn's events are numbered in the server's own sequence (from 1 per session, across turns),
//! written to the store, and only then published on the feed: a client never sees an event the
//! store does not hold. The feed is a bounded ring ([`tokio::sync::broadcast`]), there only while
//! someone follows ([`crate::ring`]); a subscriber that falls a whole ring behind is dropped, and
//! resumes from the store by its offset.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_api::universal::{SessionEndReason, TerminatedBy, UniversalEventBody};
use agent_api::UniversalEvent;
use agent_api::{RunControl, RunHandle, Session};
use futures::StreamExt;
use tokio::sync::{broadcast, oneshot};

use crate::error::ApiError;
use crate::observe::STORE_UNAVAILABLE;
use crate::store::{
    Chain, SessionState, SessionUpdate, SnapshotWrite, Store, StoreError, StoredEvent,
};

pub(crate) use crate::ring::Feed;
use crate::ring::FeedRing;

#[derive(Debug, Default)]
struct TurnState {
    /// The sequence the next event gets.
    next_sequence: u64,
    /// How many turns were sent.
    turns: u64,
    /// The turn in progress: its number and control.
    current: Option<(u64, RunControl)>,
    /// The task storing and publishing the turn in progress.
    pump: Option<tokio::task::JoinHandle<()>>,
    /// Whether the session ended (its agent stopped, or it was terminated), or this server lost
    /// it ([`TurnState::lost`]): either way it takes no more messages here.
    ended: bool,
    /// Whether it stopped taking messages because another server owns it now (or may): a
    /// message is then handed on (`session_elsewhere`), never told the session ended.
    lost: bool,
    /// The agent's session id, once an event carried it.
    native_session_id: Option<String>,
    /// The tokens and cost of the turns so far.
    usage: crate::wire::SessionUsage,
    /// The agent mode of the next turn (`build`: the agent's own default).
    agent_mode: String,
    /// The images of the messages that steered the turn in progress, kept until it ends.
    steer_images: Vec<crate::turn::TurnImages>,
    /// The messages waiting for the turn in progress to end, oldest first.
    queue: VecDeque<Queued>,
    /// A queued message's turn is being started (the turn before it has ended).
    dispatching: bool,
    /// The sequence of the first event of the turn in progress.
    first_sequence: u64,
    /// The outcomes of the last turns that ended, oldest first (at most [`OUTCOMES_KEPT`]).
    outcomes: VecDeque<crate::wire::TurnOutcome>,
}

/// How many ended turns' outcomes a live session keeps for `GET …/turns/{turn}`.
const OUTCOMES_KEPT: usize = 16;

/// A message waiting for the turn in progress to end (`ServerConfig::max_queue`).
#[derive(Debug)]
pub(crate) struct Queued {
    prompt: agent_api::Prompt,
    options: TurnOptions,
    /// Told its turn's number and first sequence once it starts, or why it did not.
    started: oneshot::Sender<Result<(u64, u64), ApiError>>,
}

/// What became of a message: its turn started now, or it waits in the queue.
pub(crate) enum Sent {
    /// The turn's number and the sequence its first event gets.
    Started(u64, u64),
    /// Queued: resolves as [`Sent::Started`] once its turn starts (or with why it did not).
    Queued(oneshot::Receiver<Result<(u64, u64), ApiError>>),
}

/// A session run by this server.
pub(crate) struct LiveSession {
    pub(crate) id: String,
    /// What the session was opened with: a message may repeat these options, not change them.
    pub(crate) opened: SessionOrigin,
    session: tokio::sync::Mutex<Option<Session>>,
    state: Mutex<TurnState>,
    feed: FeedRing,
    subscribers: AtomicUsize,
    max_subscribers: usize,
    store: Arc<dyn Store>,
    /// How long a turn waits for a failing store (`ServerConfig::store_outage`).
    store_outage: std::time::Duration,
    /// How many messages may wait for the turn in progress (`ServerConfig::max_queue`).
    max_queue: usize,
    /// Cancelled when the server stops: nothing waits for the store any more.
    stopping: agent_api::request::CancellationToken,
    /// Called once the session has ended by itself (its agent stopped), or another server owns
    /// it now: the server forgets it.
    on_end: Box<dyn Fn(&str) + Send + Sync>,
    /// The server's metrics, which its turns and store writes feed.
    metrics: crate::metrics::Shared,
    /// This server's identity: the owner every write of the session names.
    pub(crate) owner: String,
    /// The epoch of this server's claim: every event it appends names it, and the store refuses
    /// it once another server claimed the session (fencing, `spec/http-api.md` "Fleet").
    pub(crate) epoch: u64,
    /// The lease this server's heartbeat holds (`ServerConfig::server_lease`): past it without a
    /// renewal, the store refuses its appends.
    lease: std::time::Duration,
    /// The transcript to prime the next prompt with (a `replay` resume).
    prime: Mutex<Option<String>>,
    /// The turn its last server died in, closed as interrupted when it came back: a reply to
    /// what that turn asked is told so.
    pub(crate) interrupted: Mutex<Option<u64>>,
    /// When a turn last started or ended, or the session was opened.
    last_active: Mutex<std::time::Instant>,
    /// What the store keeps of the session's snapshot, and one it did not take.
    snapshots: Mutex<Snapshots>,
    /// The snapshot still being taken aside after a turn (its export outlasted
    /// [`SNAPSHOT_WAIT`]): a newer one supersedes it.
    aside: Mutex<Option<tokio::task::AbortHandle>>,
    /// Brought back natively and no turn ended since: an agent may take the open of its own
    /// session and only fail to load it on the first turn (an agent that loads it lazily), and
    /// that turn's `SessionNotFound` then means it cannot continue it ([`refused_its_session`]).
    unproven: std::sync::atomic::AtomicBool,
}

/// A session's snapshot in the store, as its server knows it (`store::snapshots`).
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    /// What the store holds (`None`: unknown, so the next snapshot is written whole).
    held: Option<Chain>,
    /// A snapshot the store did not take (it failed), and its turn: written with the next one,
    /// or at release.
    unsaved: Option<(agent_api::SessionSnapshot, u64)>,
}

impl Snapshots {
    /// What a server that read `held` from the store knows.
    pub(crate) fn held(held: Chain) -> Self {
        Self {
            held: Some(held),
            unsaved: None,
        }
    }
}

/// Where a session's numbering starts, and what this server knows of its past: a new session's
/// [`Continuity::fresh`], or one brought back.
#[derive(Debug, Default)]
pub(crate) struct Continuity {
    /// The server's identity.
    pub(crate) owner: String,
    /// The epoch of its claim (0: created here).
    pub(crate) epoch: u64,
    /// The sequence the next event gets.
    pub(crate) next_sequence: u64,
    /// The turns started so far.
    pub(crate) turns: u64,
    /// The agent mode in force (the creation's when `None`).
    pub(crate) agent_mode: Option<String>,
    /// The transcript priming the next prompt (`replay`).
    pub(crate) prime: Option<String>,
    /// The turn its last server died in.
    pub(crate) interrupted: Option<u64>,
    /// What the store keeps of its snapshot (read when it was brought back).
    pub(crate) snapshots: Snapshots,
    /// Brought back continuing its agent's own session (`native`): its first turn shows whether
    /// the agent can.
    pub(crate) native: bool,
}

impl Continuity {
    /// A new session owned by `owner`.
    pub(crate) fn fresh(owner: &str) -> Self {
        Self {
            owner: owner.to_string(),
            next_sequence: 1,
            ..Self::default()
        }
    }
}

/// Whether a turn runs or is being started: a message now waits in the queue.
fn busy(state: &TurnState) -> bool {
    state.current.is_some() || state.dispatching || !state.queue.is_empty()
}

/// Gives the session's turn delimiters (daemon status items `turn_started`, `turn_completed`,
/// `turn_failed`, detail `turn N`) the session's turn number: the library counts the turns of
/// its own session, which starts again from 1 when the server brings a session back.
fn number_turn(event: &mut UniversalEvent, turn: u64) {
    if event.source != agent_api::universal::EventSource::Daemon {
        return;
    }
    let (UniversalEventBody::ItemStarted(data) | UniversalEventBody::ItemCompleted(data)) =
        &mut event.body
    else {
        return;
    };
    use agent_api::universal::ContentPart;
    let numbered = format!("turn {turn}");
    let renumbered = |part: &ContentPart| {
        matches!(part, ContentPart::Status { label, detail: Some(detail) }
            if matches!(label.as_str(), "turn_started" | "turn_completed" | "turn_failed")
                && detail.starts_with("turn ")
                && *detail != numbered)
    };
    // Items are shared: copied only when a delimiter changes.
    if !data.item.content.iter().any(renumbered) {
        return;
    }
    for part in &mut Arc::make_mut(&mut data.item).content {
        if renumbered(part) {
            if let ContentPart::Status { detail, .. } = part {
                *detail = Some(numbered.clone());
            }
        }
    }
}

/// Keeps `outcome` among the last turns' ([`OUTCOMES_KEPT`]).
fn keep_outcome(state: &mut TurnState, outcome: crate::wire::TurnOutcome) {
    if state.outcomes.len() >= OUTCOMES_KEPT {
        state.outcomes.pop_front();
    }
    state.outcomes.push_back(outcome);
}

/// Whether `event` is the agent's output in its turn: an item of its own (an answer, a tool call,
/// reasoning) or a request to the caller; not the user's message, a status or an error.
fn agent_output(event: &UniversalEvent) -> bool {
    use agent_api::universal::{EventSource, ItemKind, ItemRole};
    match &event.body {
        UniversalEventBody::ItemStarted(data) | UniversalEventBody::ItemCompleted(data) => {
            event.source != EventSource::Daemon
                && data.item.kind != ItemKind::Status
                && data.item.role != Some(ItemRole::User)
        }
        UniversalEventBody::PermissionRequested(_) | UniversalEventBody::QuestionRequested(_) => {
            true
        }
        _ => false,
    }
}

/// Whether a turn that ended `done` shows that the agent cannot continue its own session: the
/// first turn of a session brought back natively (`unproven`) failed with
/// [`agent_api::AgentError::SessionNotFound`] before any output (`output`). The agent took the
/// open (it loads its session lazily) and would take it again, so the session is let go as
/// [`SessionState::NativeRefused`] and the next bring-back replays.
fn refused_its_session(
    unproven: bool,
    output: bool,
    done: &Result<agent_api::RunCompletion, agent_api::AgentError>,
) -> bool {
    unproven && !output && matches!(done, Err(agent_api::AgentError::SessionNotFound { .. }))
}

/// Why a session that takes no more messages here refuses one: 409 `session_ended` when it
/// ended; the internal `session_elsewhere` when this server lost it (the session goes on, on
/// the server that claimed it or the next to bring it back, and the message is handed there: a
/// client told `session_ended`, or any 409, would take it as final).
fn ended_error(state: &TurnState) -> ApiError {
    if state.lost {
        return ApiError::elsewhere("");
    }
    ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "session_ended",
        "the session has ended",
    )
}

/// The `kind` of the error a message gets from a session whose agent was released meanwhile:
/// the handler brings it back and sends again.
pub(crate) const RELEASED: &str = "session_released";

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What a session was opened with.
#[derive(Debug, Clone)]
pub(crate) struct SessionOrigin {
    /// The agent.
    pub(crate) kind: agent_api::AgentKind,
    /// The creation's body.
    pub(crate) request: crate::wire::CreateSessionRequest,
    /// The agent's working directory: the only place a message's images are read from.
    pub(crate) working_dir: std::path::PathBuf,
}

/// What a message asks of its turn besides the prompt.
#[derive(Debug, Default)]
pub(crate) struct TurnOptions {
    /// The agent mode from this turn on.
    pub(crate) agent_mode: Option<String>,
    /// The turn's images, kept until the turn ends.
    pub(crate) images: crate::turn::TurnImages,
}

/// A subscription to a session's feed, counted against its bound until dropped.
pub(crate) struct Subscription {
    pub(crate) feed: broadcast::Receiver<Feed>,
    live: Arc<LiveSession>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // The last subscriber out lets the ring go, and the events it kept with it.
        self.live.feed.leave();
        self.live.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The longest a turn's snapshot may take before the next message goes on without it.
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest one write to the store may take before it counts as failed.
const STORE_TRY: std::time::Duration = std::time::Duration::from_secs(10);

/// The current time as RFC 3339 UTC.
pub(crate) fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A synthetic event (`source=daemon`) of `kind` with `data`, numbered `sequence`.
pub(crate) fn daemon_event(
    session: &str,
    sequence: u64,
    kind: &str,
    data: serde_json::Value,
) -> Option<StoredEvent> {
    let event: UniversalEvent = serde_json::from_value(serde_json::json!({
        "event_id": format!("evt_daemon_{sequence}"),
        "sequence": sequence,
        "time": now(),
        "session_id": session,
        "native_session_id": null,
        "synthetic": true,
        "source": "daemon",
        "type": kind,
        "data": data,
    }))
    .ok()?;
    StoredEvent::from_event(event).ok()
}

/// What a session gets from the server that runs it (it holds no reference to the server).
pub(crate) struct Surroundings<'a> {
    /// The store.
    pub(crate) store: Arc<dyn Store>,
    /// The server's bounds.
    pub(crate) config: &'a crate::config::ServerConfig,
    /// Cancelled when the server stops.
    pub(crate) stopping: agent_api::request::CancellationToken,
    /// Called once the session has ended by itself or is lost: the server forgets it.
    pub(crate) on_end: Box<dyn Fn(&str) + Send + Sync>,
    /// The server's metrics, which its turns and store writes feed.
    pub(crate) metrics: crate::metrics::Shared,
}

impl LiveSession {
    // What the server shares with its sessions, one argument each.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: String,
        opened: SessionOrigin,
        session: Session,
        around: Surroundings<'_>,
        continuity: Continuity,
    ) -> Arc<Self> {
        let Surroundings {
            store,
            config,
            stopping,
            on_end,
            metrics,
        } = around;
        let feed = FeedRing::new(config.sse_buffer);
        let agent_mode = continuity.agent_mode.clone().unwrap_or_else(|| {
            opened
                .request
                .settings
                .agent_mode
                .clone()
                .unwrap_or_else(|| crate::wire::DEFAULT_MODE.into())
        });
        Arc::new(Self {
            id,
            opened,
            session: tokio::sync::Mutex::new(Some(session)),
            state: Mutex::new(TurnState {
                next_sequence: continuity.next_sequence.max(1),
                turns: continuity.turns,
                agent_mode,
                ..TurnState::default()
            }),
            feed,
            subscribers: AtomicUsize::new(0),
            max_subscribers: config.max_subscribers,
            store,
            store_outage: config.store_outage,
            max_queue: config.max_queue,
            stopping,
            on_end,
            metrics,
            owner: continuity.owner,
            epoch: continuity.epoch,
            lease: config.server_lease,
            prime: Mutex::new(continuity.prime),
            interrupted: Mutex::new(continuity.interrupted),
            last_active: Mutex::new(std::time::Instant::now()),
            snapshots: Mutex::new(continuity.snapshots),
            aside: Mutex::new(None),
            unproven: std::sync::atomic::AtomicBool::new(continuity.native),
        })
    }

    /// Takes the agent's snapshot after turn `turn` and keeps it in the store (`snapshot` in
    /// `spec/http-api.md`): an agent that cannot export one is skipped; a store that fails keeps
    /// the turn's events (already written) and the snapshot is tried again after the next turn
    /// and when the agent is released.
    async fn keep_snapshot(&self, session: &Session, turn: u64) {
        // Taken now: one still being taken aside is older.
        self.stop_aside_snapshot();
        let started = std::time::Instant::now();
        self.store_snapshot(
            session.agent_kind(),
            session.snapshot().await,
            turn,
            started,
        )
        .await;
    }

    /// [`LiveSession::keep_snapshot`] after a turn (`taking`: `Session::snapshot_detached`),
    /// without holding the agent session: waits for it at most [`SNAPSHOT_WAIT`] (the next
    /// message waits no longer), then lets it finish aside and keeps it once taken (an export
    /// that starts a CLI per call takes seconds on a loaded machine). A snapshot still being
    /// taken for an earlier turn is dropped.
    async fn keep_snapshot_aside(
        self: &Arc<Self>,
        taking: impl std::future::Future<Output = Result<agent_api::SessionSnapshot, agent_api::AgentError>>
            + Send
            + 'static,
        kind: agent_api::AgentKind,
        turn: u64,
    ) {
        let this = self.clone();
        let started = std::time::Instant::now();
        let task = tokio::spawn(async move {
            let taken = taking.await;
            this.store_snapshot(&kind, taken, turn, started).await;
        });
        let earlier = self
            .aside
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(task.abort_handle());
        if let Some(earlier) = earlier {
            earlier.abort();
        }
        if tokio::time::timeout(SNAPSHOT_WAIT, task).await.is_err() {
            tracing::info!(session = %self.id, turn, "the agent's snapshot takes long: kept once taken, the session goes on");
        }
    }

    /// Drops the snapshot being taken aside, if one is.
    fn stop_aside_snapshot(&self) {
        if let Some(aside) = self.aside.lock().unwrap_or_else(|p| p.into_inner()).take() {
            aside.abort();
        }
    }

    /// Keeps the snapshot `taken` after turn `turn` in the store (its time since `started`, the
    /// export included, in the metrics): an agent that cannot export one is skipped; one that
    /// failed is said.
    async fn store_snapshot(
        &self,
        kind: &agent_api::AgentKind,
        taken: Result<agent_api::SessionSnapshot, agent_api::AgentError>,
        turn: u64,
        started: std::time::Instant,
    ) {
        match taken {
            Ok(snapshot) => {
                self.save_snapshot(Some((snapshot, turn))).await;
                self.metrics.snapshot_kept(started.elapsed());
            }
            Err(agent_api::AgentError::UnsupportedCapability { .. }) => {}
            Err(error) => {
                tracing::warn!(session = %self.id, agent = %kind, "cannot take the session's snapshot: {error}");
            }
        }
    }

    /// Writes `snapshot` (or the one left unsaved) to the store: a delta on what the store holds
    /// where it can (`store::snapshots`), else whole; kept for a later try when the store fails.
    async fn save_snapshot(&self, snapshot: Option<(agent_api::SessionSnapshot, u64)>) {
        // Taken out while the write is in flight: a write cut short (its turn's time ran out)
        // leaves what the store holds unknown, and the next snapshot is written whole.
        let (held, pending) = {
            let mut snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
            (snapshots.held.take(), snapshots.unsaved.take())
        };
        let Some((snapshot, turn)) = snapshot.or(pending) else {
            self.snapshots
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .held = held;
            return;
        };
        let next = |held, snapshot| {
            Chain::next(held, snapshot, turn)
                .map_err(|error| tracing::warn!(session = %self.id, "cannot keep the session's snapshot: {error}"))
        };
        let Ok((write, mut chain)) = next(held, snapshot) else {
            return;
        };
        let delta = matches!(write, SnapshotWrite::Delta(_));
        let mut result = self.write_snapshot(write).await;
        if delta && matches!(result, Err(StoreError::SnapshotOutOfOrder { .. })) {
            // The store holds another chain than this server thought (another server took the
            // session and gave it back meanwhile): written whole.
            let Ok((write, whole)) = next(None, chain.snapshot) else {
                return;
            };
            chain = whole;
            result = self.write_snapshot(write).await;
        }
        match result {
            Ok(()) => {
                self.snapshots
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .held = Some(chain);
            }
            Err(StoreError::NotOwner { .. }) => {}
            Err(error) => {
                tracing::warn!(session = %self.id, "cannot store the session's snapshot (tried again later): {error}");
                let turn = chain.turn();
                self.snapshots
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .unsaved = Some((chain.snapshot, turn));
            }
        }
    }

    /// Writes one snapshot write to the store, counted (`agent_api_snapshot_written_bytes_total`).
    async fn write_snapshot(&self, write: SnapshotWrite) -> Result<(), StoreError> {
        let Some((kind, bytes)) = write.weight() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        let result = match write {
            SnapshotWrite::Nothing => Ok(()),
            SnapshotWrite::Whole(whole) => {
                self.store.put_snapshot(&self.id, &self.owner, whole).await
            }
            SnapshotWrite::Delta(delta) => {
                self.store
                    .put_snapshot_delta(&self.id, &self.owner, delta)
                    .await
            }
        };
        self.metrics.store_write("snapshot", started.elapsed());
        if result.is_ok() {
            self.metrics.snapshot_written(kind, bytes);
        }
        result
    }

    /// How long the session has had no turn, none running now (`None` while one runs, or a
    /// queued message's is about to start: a session with a message waiting is not idle).
    pub(crate) fn idle_for(&self) -> Option<std::time::Duration> {
        if busy(&self.state()) {
            return None;
        }
        Some(
            self.last_active
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed(),
        )
    }

    /// How many subscribers follow it now.
    pub(crate) fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::SeqCst)
    }

    fn touch(&self) {
        *self.last_active.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
    }

    fn state(&self) -> MutexGuard<'_, TurnState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the session ended.
    pub(crate) fn ended(&self) -> bool {
        self.state().ended
    }

    /// Whether this server lost the session (another claimed it, or its lease ran out): it
    /// takes nothing more here, but it did not end.
    pub(crate) fn was_lost(&self) -> bool {
        self.state().lost
    }

    /// Subscribes to the feed; 429 past the bound of subscribers.
    pub(crate) fn subscribe(self: &Arc<Self>) -> Result<Subscription, ApiError> {
        let before = self.subscribers.fetch_add(1, Ordering::SeqCst);
        let subscription = Subscription {
            feed: self.feed.subscribe(),
            live: self.clone(),
        };
        if before >= self.max_subscribers {
            return Err(ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "too_many_subscribers",
                format!(
                    "this session has {} subscribers already; try again later",
                    self.max_subscribers
                ),
            ));
        }
        Ok(subscription)
    }

    /// 409 `session_ended` when the session ended; 429 `queue_full` when a turn runs and the
    /// queue is full. Checked first, so that a message that would be refused costs nothing (its
    /// images are not read nor copied); checked again when it is sent.
    pub(crate) fn check_accepts(&self) -> Result<(), ApiError> {
        let state = self.state();
        if state.ended {
            return Err(ended_error(&state));
        }
        if busy(&state) && state.queue.len() >= self.max_queue {
            return Err(self.queue_full());
        }
        Ok(())
    }

    fn queue_full(&self) -> ApiError {
        match self.max_queue {
            0 => ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "turn_in_progress",
                "a turn is in progress: wait for it to end, or cancel it",
            ),
            max => ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                format!("a turn is in progress and {max} messages wait for it already: wait for the turn to end, or cancel it"),
            ),
        }
    }

    /// How many messages wait for the turn in progress.
    pub(crate) fn queued(&self) -> usize {
        self.state().queue.len()
    }

    /// Sends `prompt` as the next turn now when none runs, else queues it (FIFO, bounded: 429
    /// `queue_full`) to start once the turns before it have ended.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        prompt: agent_api::Prompt,
        options: TurnOptions,
    ) -> Result<Sent, ApiError> {
        let queue = |prompt, options| -> Result<Sent, ApiError> {
            let mut state = self.state();
            if state.ended {
                return Err(ended_error(&state));
            }
            if state.queue.len() >= self.max_queue {
                return Err(self.queue_full());
            }
            let (started, told) = oneshot::channel();
            state.queue.push_back(Queued {
                prompt,
                options,
                started,
            });
            Ok(Sent::Queued(told))
        };
        if busy(&self.state()) {
            return queue(prompt, options);
        }
        let guard = self.session.lock().await;
        // Another message may have started a turn while this one waited for the lock.
        if busy(&self.state()) {
            drop(guard);
            return queue(prompt, options);
        }
        let (turn, first) = self.start(guard, prompt, options).await?;
        Ok(Sent::Started(turn, first))
    }

    /// Starts the queued messages one by one, each once the turn before it has ended: returns
    /// once one has started (its pump dispatches the next) or the queue is empty. Boxed: a turn's
    /// pump starts it, and it starts pumps.
    fn dispatch(self: Arc<Self>) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            loop {
                let guard = self.session.lock().await;
                let next = {
                    let mut state = self.state();
                    let next = state.queue.pop_front();
                    state.dispatching = next.is_some();
                    next
                };
                let Some(next) = next else {
                    return;
                };
                let started = self.start(guard, next.prompt, next.options).await;
                let ok = started.is_ok();
                if !ok {
                    self.state().dispatching = false;
                }
                // Its sender may have gone (a client that did not wait): the turn runs all the same.
                let _ = next.started.send(started);
                if ok {
                    return;
                }
            }
        })
    }

    /// Drops the queued messages, each told why (`kind`, `detail`); returns how many.
    fn drop_queue(
        &self,
        status: axum::http::StatusCode,
        kind: &'static str,
        detail: &str,
    ) -> usize {
        let dropped: Vec<Queued> = self.state().queue.drain(..).collect();
        let count = dropped.len();
        for queued in dropped {
            let _ = queued
                .started
                .send(Err(ApiError::new(status, kind, detail)));
        }
        count
    }

    /// The outcome of turn `turn` when it ended and is still kept.
    pub(crate) fn outcome(&self, turn: u64) -> Option<crate::wire::TurnOutcome> {
        self.state()
            .outcomes
            .iter()
            .find(|outcome| outcome.turn == Some(turn))
            .cloned()
    }

    /// The sequence of the first event of the turn in progress.
    pub(crate) fn first_sequence(&self) -> u64 {
        self.state().first_sequence
    }

    /// Sends `prompt` as the next turn (the session's lock held: `guard`), in the mode `options`
    /// asks (switched first, and kept for the next turns), and starts storing its events; returns
    /// the turn's number and the sequence its first event gets.
    async fn start(
        self: &Arc<Self>,
        mut guard: tokio::sync::MutexGuard<'_, Option<Session>>,
        prompt: agent_api::Prompt,
        options: TurnOptions,
    ) -> Result<(u64, u64), ApiError> {
        {
            let state = self.state();
            if state.ended {
                return Err(ended_error(&state));
            }
        }
        // Released meanwhile (idle, or the server stopping): the handler brings it back.
        let session = guard.as_mut().ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::CONFLICT,
                RELEASED,
                "the session's agent was released; send again",
            )
        })?;
        if let Some(mode) = options
            .agent_mode
            .filter(|mode| *mode != self.state().agent_mode)
        {
            let asked = match mode.as_str() {
                crate::wire::DEFAULT_MODE => agent_api::request::AgentMode::Default,
                other => agent_api::request::AgentMode::parse(other),
            };
            session
                .set_mode(asked)
                .await
                .map_err(|e| ApiError::agent(&e).about("agentMode"))?;
            self.store.set_agent_mode(&self.id, &mode).await?;
            self.state().agent_mode = mode;
        }
        // The turn is recorded as running before the agent sees it: a server that can no longer
        // write this session (another owns it now) never runs a turn it cannot record. A store
        // that fails otherwise does not refuse the message: its events wait for the store.
        let (turn, mode) = {
            let state = self.state();
            (state.turns + 1, state.agent_mode.clone())
        };
        let running = SessionUpdate::default().turns(turn, true);
        match self.store.update(&self.id, &self.owner, running).await {
            Ok(()) => {}
            Err(error @ StoreError::NotOwner { .. }) => {
                drop(guard.take());
                drop(guard);
                self.lost(&error).await;
                return Err(ApiError::store(error));
            }
            Err(error) => {
                tracing::warn!(session = %self.id, "cannot record the turn's start: {error}");
            }
        }
        let mut prompt = prompt;
        let primed = self.prime.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(prime) = &primed {
            prompt.text = format!("{prime}{}", prompt.text);
        }
        let watch = crate::observe::TurnWatch::start(
            &self.metrics,
            &self.id,
            turn,
            self.opened.kind.as_str(),
            self.opened.request.settings.model.as_deref(),
            &mode,
        );
        // The agent's process, when the turn starts one, is the turn's child span.
        let sent =
            tracing::Instrument::instrument(session.send(prompt), watch.span().clone()).await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(error) => {
                *self.prime.lock().unwrap_or_else(|p| p.into_inner()) = primed;
                let idle = SessionUpdate::default().turns(turn - 1, false);
                if let Err(error) = self.store.update(&self.id, &self.owner, idle).await {
                    tracing::warn!(session = %self.id, "cannot record the turn's refusal: {error}");
                }
                let api_error = ApiError::agent(&error);
                watch.ended(&Err(error), false);
                return Err(api_error);
            }
        };
        *self.interrupted.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.touch();
        let mut state = self.state();
        state.turns = turn;
        state.current = Some((turn, handle.control()));
        let span = watch.span().clone();
        state.pump = Some(tokio::spawn(tracing::Instrument::instrument(
            self.clone().pump(handle, turn, options.images, watch),
            span,
        )));
        let first = state.next_sequence;
        state.first_sequence = first;
        state.dispatching = false;
        Ok((turn, first))
    }

    /// Stores and serves the session's `session.started` (a daemon event carrying `metadata`),
    /// when the session is created: a client that creates a session and reads its events sees
    /// it before any message (the agent may start later, with the first turn).
    pub(crate) async fn announce(&self, metadata: serde_json::Value) -> Result<(), ApiError> {
        let sequence = self.state().next_sequence;
        let data = serde_json::json!({ "metadata": metadata });
        if let Some(event) = daemon_event(&self.id, sequence, "session.started", data) {
            self.publish(vec![event]).await?;
        }
        Ok(())
    }

    /// Steers the turn in progress with `prompt` (its images' copies kept until the turn ends);
    /// returns once the agent has taken it. 409 when no turn runs, or it ended first.
    pub(crate) async fn steer(
        &self,
        prompt: agent_api::Prompt,
        images: crate::turn::TurnImages,
    ) -> Result<(), ApiError> {
        let no_turn = || {
            ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "no_turn_running",
                "no turn is running to steer: send the message as a turn of its own",
            )
        };
        let control = self.control().ok_or_else(no_turn)?;
        match control.steer_with_images(prompt.text, prompt.images).await {
            Ok(()) => {
                if !images.paths.is_empty() {
                    self.state().steer_images.push(images);
                }
                Ok(())
            }
            Err(
                agent_api::AgentError::NoTurnRunning | agent_api::AgentError::TurnEndedBeforeSteer,
            ) => Err(no_turn()),
            Err(error @ agent_api::AgentError::SteerRefused { .. }) => Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "steer_refused",
                error.to_string(),
            )),
            Err(error) => Err(ApiError::agent(&error)),
        }
    }

    /// The number of the turn in progress.
    pub(crate) fn current_turn(&self) -> Option<u64> {
        self.state().current.as_ref().map(|(turn, _)| *turn)
    }

    /// The control of the turn in progress.
    pub(crate) fn control(&self) -> Option<RunControl> {
        self.state()
            .current
            .as_ref()
            .map(|(_, control)| control.clone())
    }

    /// Numbers, stores and publishes `events`; returns whether one ended the session.
    async fn record(&self, events: Vec<UniversalEvent>) -> Result<bool, crate::store::StoreError> {
        let first = self.state().next_sequence;
        let session_id: Arc<str> = self.id.as_str().into();
        let mut stored = Vec::with_capacity(events.len());
        let mut ended = false;
        let mut native = None;
        // The session's `session.started` is the server's, written when it was created: the
        // agent's own is not the session's (nor, brought back, its new one: the seam is the
        // `session_resumed` status).
        let events = events
            .into_iter()
            .filter(|event| !matches!(event.body, UniversalEventBody::SessionStarted(_)));
        for (sequence, mut event) in (first..).zip(events) {
            event.sequence = sequence;
            event.session_id = session_id.clone();
            if let Some(id) = &event.native_session_id {
                native = Some(id.to_string());
            }
            ended |= matches!(event.body, UniversalEventBody::SessionEnded(_));
            stored.push(
                StoredEvent::from_event(event)
                    .map_err(|e| crate::store::StoreError::Backend(e.to_string()))?,
            );
        }
        self.publish(stored).await?;
        if let Some(native) = native {
            let changed = {
                let mut state = self.state();
                let changed = state.native_session_id.as_deref() != Some(native.as_str());
                state.native_session_id = Some(native.clone());
                changed
            };
            if changed {
                if let Err(error) = self.store.set_native_session_id(&self.id, &native).await {
                    // Not a reason to stop the turn: written again with the next event carrying it.
                    tracing::warn!(session = %self.id, "cannot record the native session id: {error}");
                    self.state().native_session_id = None;
                }
            }
        }
        Ok(ended)
    }

    /// Stores then publishes events already numbered from `next_sequence`, waiting at most
    /// `store_outage` for a failing store.
    async fn publish(&self, stored: Vec<StoredEvent>) -> Result<(), crate::store::StoreError> {
        self.publish_waiting(stored, Some(self.store_outage)).await
    }

    /// [`LiveSession::publish`], waiting at most `outage` for a failing store (`None`: as long
    /// as the server runs).
    async fn publish_waiting(
        &self,
        stored: Vec<StoredEvent>,
        outage: Option<std::time::Duration>,
    ) -> Result<(), crate::store::StoreError> {
        let Some(last) = stored.last().map(|e| e.sequence) else {
            return Ok(());
        };
        self.append_retrying(&stored, last, outage).await?;
        self.state().next_sequence = last + 1;
        self.feed
            .send_all(stored.into_iter().map(|event| Feed::Event(Arc::new(event))));
        Ok(())
    }

    /// Appends `stored` (its last sequence `last`), trying again while the store fails, for at most
    /// `outage` (`None`: until the server stops). Meanwhile the turn's next events are not read
    /// from the agent (the library's bounded buffer holds them, then the agent waits on its
    /// output): nothing is served that is not stored, and memory does not grow.
    async fn append_retrying(
        &self,
        stored: &[StoredEvent],
        last: u64,
        outage: Option<std::time::Duration>,
    ) -> Result<(), crate::store::StoreError> {
        use crate::store::StoreError;
        // Far enough to be never: a day is more than any server waits for its store.
        let deadline =
            tokio::time::Instant::now() + outage.unwrap_or(std::time::Duration::from_secs(86_400));
        let mut pause = std::time::Duration::from_millis(50);
        let mut tried = false;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            // A store that hangs rather than fails is a failure too: each try is bounded.
            let span = tracing::info_span!(
                target: "agent_api_server::store",
                "store_write",
                otel.name = "store append",
                db.operation.name = "append",
                agent_api.events = stored.len(),
            );
            let started = std::time::Instant::now();
            let attempt = tokio::time::timeout(
                left.clamp(std::time::Duration::from_millis(100), STORE_TRY),
                tracing::Instrument::instrument(
                    self.store.append_fenced(
                        &self.id,
                        &self.owner,
                        self.epoch,
                        self.lease,
                        stored.to_vec(),
                    ),
                    span,
                ),
            );
            let attempt = attempt.await;
            self.metrics.store_write("append", started.elapsed());
            let error = match attempt {
                Ok(Ok(())) => return Ok(()),
                // A try whose answer was lost (the connection broke after its commit) holds: this
                // server is the session's only writer, so a store ending at `last` holds these.
                Ok(Err(StoreError::OutOfOrder { last: at, .. })) if tried && at == last => {
                    return Ok(())
                }
                Ok(Err(error @ StoreError::Backend(_))) => error,
                Ok(Err(error)) => return Err(error),
                Err(_) => StoreError::Backend("the store did not answer in time".into()),
            };
            if tokio::time::Instant::now() >= deadline || self.stopping.is_cancelled() {
                return Err(error);
            }
            if !tried {
                tracing::warn!(session = %self.id, "the store failed; the turn waits for it: {error}");
            }
            tried = true;
            tokio::select! {
                () = tokio::time::sleep(pause.min(deadline.saturating_duration_since(tokio::time::Instant::now()))) => {}
                () = self.stopping.cancelled() => return Err(error),
            }
            pause = (pause * 2).min(std::time::Duration::from_secs(1));
        }
    }

    /// Ends the session because the store failed for longer than `store_outage`: the agent is
    /// stopped, and an `error` (`code: store_unavailable`) and a `session.ended` (`reason=error`)
    /// are stored, waiting for the store as long as the server runs, and served. Returns whether
    /// they were stored.
    async fn end_for_store(&self, why: &str) -> bool {
        // Dropped, not closed: its trailing events could not be stored either. Held, it is being
        // terminated, which closes it (and waits for this turn: waiting here would deadlock).
        if let Ok(mut session) = self.session.try_lock() {
            drop(session.take());
        }
        let message = format!(
            "the store was unavailable for longer than {} s: {why}",
            self.store_outage.as_secs()
        );
        let next = self.state().next_sequence;
        let error = serde_json::json!({ "message": message, "code": STORE_UNAVAILABLE });
        let ended =
            serde_json::json!({ "reason": "error", "terminated_by": "daemon", "message": message });
        let events: Vec<_> = [
            daemon_event(&self.id, next, "error", error),
            daemon_event(&self.id, next + 1, "session.ended", ended),
        ]
        .into_iter()
        .flatten()
        .collect();
        if let Err(error) = self.publish_waiting(events, None).await {
            tracing::error!(session = %self.id, "cannot store the session's end: {error}");
            return false;
        }
        match self.store.mark_ended(&self.id, Some(&message)).await {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(session = %self.id, "cannot mark the session ended: {error}");
                false
            }
        }
    }

    /// Stores and publishes one turn's events as they come, then ends the turn.
    async fn pump(
        self: Arc<Self>,
        handle: RunHandle,
        turn: u64,
        images: crate::turn::TurnImages,
        mut watch: crate::observe::TurnWatch,
    ) {
        let control = handle.control();
        let (events, completion) = handle.into_universal();
        // What waits when the store is free goes in one write.
        let mut chunks = events.ready_chunks(256);
        let mut exited = false;
        // Whether the agent said anything in this turn: asked only in the first turn after a
        // native bring-back (`refused_its_session`), and only until it has.
        let watching = self.unproven.load(Ordering::SeqCst);
        let mut output = false;
        let mut failed = None;
        let mut lost = None;
        while let Some(chunk) = chunks.next().await {
            if failed.is_some() || lost.is_some() {
                continue;
            }
            watch.events(&chunk);
            if watching && !output {
                output = chunk.iter().any(agent_output);
            }
            let mut chunk = chunk;
            // The agent's own end (it crashed, or was killed, mid-turn) is not the session's:
            // only a client's terminate (or the idle TTL) ends one. The turn's `turn_failed` and
            // its one terminal error say what happened; the session stays resumable.
            let before = chunk.len();
            chunk.retain(|event| !matches!(event.body, UniversalEventBody::SessionEnded(_)));
            if chunk.len() < before {
                exited = true;
                tracing::warn!(session = %self.id, turn, "the agent exited during the turn; the session stays resumable");
            }
            if chunk.is_empty() {
                continue;
            }
            chunk.iter_mut().for_each(|event| number_turn(event, turn));
            match self.record(chunk).await {
                Ok(_) => {}
                Err(error @ (StoreError::NotOwner { .. } | StoreError::LeaseLost { .. })) => {
                    // Another server owns the session now (or may: this one's lease ran out): nothing more of this turn may be
                    // written or served, so the agent stops here.
                    control.cancel();
                    lost = Some(error);
                }
                Err(error) => {
                    // An event the store cannot hold must not be served: stop the turn.
                    tracing::error!(session = %self.id, "cannot store the turn's events: {error}");
                    failed = Some(error.to_string());
                    control.cancel();
                }
            }
        }
        let done = completion.await;
        let unproven = self.unproven.swap(false, Ordering::SeqCst);
        let refused = refused_its_session(unproven, output, &done);
        watch.ended(&done, failed.is_some());
        let mut outcome = self.outcome_of(turn, &done, failed.as_deref(), lost.as_ref());
        if let Ok(Some(usage)) = done.map(|done| done.usage) {
            let mut turn_usage = crate::wire::SessionUsage::default();
            turn_usage.add(&usage);
            outcome.usage = Some(turn_usage);
            let total = {
                let mut state = self.state();
                state.usage.add(&usage);
                serde_json::to_string(&state.usage).unwrap_or_default()
            };
            if let Err(error) = self.store.set_usage(&self.id, &total).await {
                tracing::error!(session = %self.id, "cannot record the session's usage: {error}");
            }
        }
        if let Some(error) = lost {
            {
                let mut state = self.state();
                state.current = None;
                state.pump = None;
                keep_outcome(&mut state, outcome);
            }
            drop(images);
            self.drop_queue(
                axum::http::StatusCode::CONFLICT,
                "session_elsewhere",
                "another server runs the session now: send the message to it",
            );
            self.feed.send(Feed::TurnEnded(turn));
            self.lost(&error).await;
            return;
        }
        let done = SessionUpdate::default().turns(turn, false);
        if let Err(error) = self.store.update(&self.id, &self.owner, done).await {
            tracing::warn!(session = %self.id, "cannot record the turn's end: {error}");
        }
        // Held by a terminate or a release (which takes its own): not taken here.
        // Bounded: the next message waits for it at most SNAPSHOT_WAIT (an agent that writes its
        // files late, or exports slowly, finishes aside).
        let taking = match self.session.try_lock() {
            Ok(session) => session
                .as_ref()
                .map(|session| (session.snapshot_detached(), session.agent_kind().clone())),
            Err(_) => None,
        };
        if let Some((taking, kind)) = taking {
            self.keep_snapshot_aside(taking, kind, turn).await;
        }
        self.touch();
        // Stored, or the server keeps it (ended) so that a message is told it ended; a server
        // started again on the store closes its turn as interrupted.
        let mut forget = true;
        // The agent exited, or cannot continue its own session: its session is let go here
        // (unless a terminate or a release that holds it does so) and brought back by the next
        // message (by a replay when it refused its own session).
        let mut let_go = false;
        if let Some(why) = &failed {
            self.state().ended = true;
            forget = self.end_for_store(why).await;
        } else if refused {
            tracing::warn!(session = %self.id, turn, "the agent took the open of its own session but cannot load it; the next message brings the session back by a replay");
            let_go = self.let_go_of_agent(SessionState::NativeRefused).await;
        } else if exited {
            let_go = self.let_go_of_agent(SessionState::AgentExited).await;
        }
        let (steer_images, next) = {
            let mut state = self.state();
            outcome.last_sequence = Some(state.next_sequence - 1);
            keep_outcome(&mut state, outcome);
            state.current = None;
            state.pump = None;
            // The next queued message's turn starts now: no message overtakes it meanwhile.
            // (None once the agent is let go: the queue is dropped, a later message is told
            // to send again, and its handler brings the session back.)
            state.dispatching = !state.queue.is_empty() && !state.ended && !let_go;
            (std::mem::take(&mut state.steer_images), state.dispatching)
        };
        // The turn's image copies are read by now: removed.
        drop(images);
        drop(steer_images);
        self.feed.send(Feed::TurnEnded(turn));
        if let_go {
            let why = match refused {
                true => "the agent could not continue its own session in the turn before this queued message, and the queue was dropped with it: send it again (the session is brought back by a replay)",
                false => "the agent exited during the turn before this queued message, and the queue was dropped with it: send it again (the session is brought back)",
            };
            self.drop_queue(axum::http::StatusCode::CONFLICT, "message_dropped", why);
            self.feed.send(Feed::Ended);
        } else if failed.is_some() {
            self.drop_queue(
                axum::http::StatusCode::CONFLICT,
                "session_ended",
                "the session ended before this queued message's turn could start",
            );
            self.feed.send(Feed::Ended);
            if forget {
                (self.on_end)(&self.id);
            }
        } else if next {
            tokio::spawn(self.clone().dispatch());
        }
    }

    /// What turn `turn` came to, from its completion (its usage and last sequence are set by the
    /// caller).
    fn outcome_of(
        &self,
        turn: u64,
        done: &Result<agent_api::RunCompletion, agent_api::AgentError>,
        store_failed: Option<&str>,
        lost: Option<&StoreError>,
    ) -> crate::wire::TurnOutcome {
        let error = |code: &str, message: String| {
            Some(crate::wire::TurnError {
                code: code.to_string(),
                message: agent_api::display::line(&message, 2048),
            })
        };
        let (status, final_text, error) = match (store_failed, lost, done) {
            (Some(why), _, _) => ("failed", None, error(STORE_UNAVAILABLE, why.to_string())),
            (_, Some(lost), _) => ("failed", None, error("session_elsewhere", lost.to_string())),
            (_, _, Ok(completion)) => ("completed", completion.final_text.clone(), None),
            (_, _, Err(e @ agent_api::AgentError::Cancelled)) => {
                ("cancelled", None, error(e.code(), e.to_string()))
            }
            (_, _, Err(e)) => ("failed", None, error(e.code(), e.to_string())),
        };
        crate::wire::TurnOutcome {
            session_id: self.id.clone(),
            turn: Some(turn),
            status: status.into(),
            final_text,
            usage: None,
            error,
            first_sequence: Some(self.state().first_sequence),
            last_sequence: None,
            pending: None,
        }
    }

    /// Its agent exited by itself during a turn, or refused its own session (the turn's end is
    /// stored): the agent session is closed (its trailing events are its own end, not stored),
    /// the session stored as `state` ([`SessionState::AgentExited`],
    /// [`SessionState::NativeRefused`]) and forgotten, so that the next message brings it back
    /// (`session_resumed`, `after=agent_exited` or `after=native_refused`). Returns whether it
    /// was let go here: not when a terminate or a release holds the agent session (it ends or
    /// releases it itself), nor when another server owns the session now.
    async fn let_go_of_agent(&self, state: SessionState) -> bool {
        let Ok(session) = self.session.try_lock() else {
            return false;
        };
        self.let_go(session, state).await
    }

    /// Closes the agent session `session` holds (its trailing events are the agent's own end,
    /// not the session's: not stored), stores the session as `state` and forgets it, before the
    /// lock goes: a message sent meanwhile brings it back. False when another server owns it
    /// now (then it is lost).
    async fn let_go(
        &self,
        mut session: tokio::sync::MutexGuard<'_, Option<Session>>,
        state: SessionState,
    ) -> bool {
        if let Some(agent) = session.take() {
            let _ = agent.close().await;
        }
        let update = SessionUpdate::default().state(state);
        match self.store.update(&self.id, &self.owner, update).await {
            Ok(()) => {}
            Err(error @ StoreError::NotOwner { .. }) => {
                drop(session);
                self.lost(&error).await;
                return false;
            }
            // Still stored as live: the next message after a restart brings it back all the same.
            Err(error) => {
                tracing::warn!(session = %self.id, state = state.as_str(), "cannot record that the session's agent was let go: {error}");
            }
        }
        (self.on_end)(&self.id);
        drop(session);
        true
    }

    /// Another server owns the session now (this one was thought gone), or may (this one's
    /// lease ran out): it stops its agent, writes nothing more, says so in the log, ends its
    /// subscribers' streams, lets the session go (still its owner, it stores it released, so
    /// that any server may claim it) and forgets it.
    pub(crate) async fn lost(&self, error: &StoreError) {
        tracing::error!(
            session = %self.id,
            "this server can no longer record the session's events, so it stopped its agent: {error}"
        );
        if let Some((_, control)) = &self.state().current {
            control.cancel();
        }
        if let Ok(mut session) = self.session.try_lock() {
            drop(session.take());
        }
        {
            let mut state = self.state();
            state.ended = true;
            state.lost = true;
        }
        if matches!(error, StoreError::LeaseLost { .. }) {
            // Refused when another server owns it now: then there is nothing to let go.
            let release = SessionUpdate::default().state(SessionState::Idle);
            let _ = self.store.update(&self.id, &self.owner, release).await;
        }
        self.feed.send(Feed::Ended);
        (self.on_end)(&self.id);
    }

    /// Stops the session's agent and keeps the session open: its turn in progress is cancelled
    /// (and its end stored), the agent closed, and its state stored as `state` (`idle`: released;
    /// `stopped`: the server stops). The next message brings it back. Returns whether it was
    /// released (not ended, not lost meanwhile).
    pub(crate) async fn release(&self, state: SessionState) -> bool {
        let session = self.session.lock().await;
        self.release_locked(session, state).await
    }

    /// [`LiveSession::release`] when the session is idle (a drain's, an idle release's): `None`,
    /// and nothing done, when a turn runs or a queued message's turn is about to start, seen
    /// with the session's lock held (nothing starts a turn meanwhile). Releasing then would
    /// cancel that turn or drop the queue, and a client whose message was answered 204 would
    /// wait for a turn that never comes.
    pub(crate) async fn release_if_idle(&self, state: SessionState) -> Option<bool> {
        let session = self.session.lock().await;
        if busy(&self.state()) {
            return None;
        }
        Some(self.release_locked(session, state).await)
    }

    /// [`LiveSession::release`], its lock held (`session`).
    async fn release_locked(
        &self,
        session: tokio::sync::MutexGuard<'_, Option<Session>>,
        state: SessionState,
    ) -> bool {
        self.cancel_turn().await;
        if self.ended() {
            return false;
        }
        if let Some(agent) = session.as_ref() {
            let turns = self.state().turns;
            if turns > 0 {
                self.keep_snapshot(agent, turns).await;
            }
            self.save_snapshot(None).await;
        }
        let released = self.let_go(session, state).await;
        if released {
            self.feed.send(Feed::Ended);
        }
        released
    }

    /// Cancels the turn in progress and waits for its last event to be stored; the messages
    /// queued behind it are dropped (their turns never start). Returns how many were dropped.
    pub(crate) async fn cancel_turn(&self) -> usize {
        let dropped = self.drop_queue(
            axum::http::StatusCode::CONFLICT,
            "message_dropped",
            "the turn before this queued message was cancelled, and the queue with it: send it again",
        );
        let pump = {
            let mut state = self.state();
            if let Some((_, control)) = &state.current {
                control.cancel();
            }
            state.pump.take()
        };
        if let Some(pump) = pump {
            let _ = pump.await;
        }
        dropped
    }

    /// Ends the session: cancels its turn, closes the agent, stores the trailing events (and a
    /// `session.ended` with `terminated_by=daemon` when the agent sent none), and closes the feed.
    pub(crate) async fn terminate(&self) -> Result<(), ApiError> {
        self.terminate_with(None).await
    }

    /// [`LiveSession::terminate`], its `session.ended` carrying `message` when given.
    pub(crate) async fn terminate_with(&self, message: Option<&str>) -> Result<(), ApiError> {
        let mut session = self.session.lock().await;
        self.cancel_turn().await;
        let already_ended = self.ended();
        let mut trailing = match session.take() {
            Some(session) => session.close().await.unwrap_or_default(),
            None => Vec::new(),
        };
        // The client's terminate ended it, whatever the agent says of its own exit.
        for event in &mut trailing {
            if let UniversalEventBody::SessionEnded(data) = &mut event.body {
                if data.reason != SessionEndReason::Error {
                    data.reason = SessionEndReason::Terminated;
                    data.terminated_by = TerminatedBy::Daemon;
                    if let Some(message) = message {
                        data.message = Some(message.to_string());
                    }
                }
            }
        }
        let mut ended = self.record(trailing).await? || already_ended;
        if !ended {
            let sequence = self.state().next_sequence;
            let mut data = serde_json::json!({ "reason": "terminated", "terminated_by": "daemon" });
            if let Some(message) = message {
                data["message"] = message.into();
            }
            if let Some(event) = daemon_event(&self.id, sequence, "session.ended", data) {
                self.publish(vec![event]).await?;
            }
            ended = true;
        }
        self.state().ended = ended;
        // Ended before (its agent stopped, or the store failed): marked then, with its reason.
        if !already_ended {
            self.store.mark_ended(&self.id, None).await?;
        }
        self.feed.send(Feed::Ended);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Server;

    /// A server on the memory store running the built-in agents, whose drain gives up after
    /// `drain`.
    async fn server(drain: std::time::Duration) -> Server {
        let store = crate::store::StoreUrl::parse("memory")
            .unwrap()
            .open()
            .await
            .unwrap();
        let config = crate::ServerConfig::default()
            .with_idle_release(None)
            .with_drain_timeout(drain);
        let defaults = agent_api::RunRequest::new("");
        Server::new(agent_api_builtin::gateway(), defaults, store, config)
            .await
            .unwrap()
    }

    /// A session of the built-in agent that runs without any CLI.
    async fn offline_session(server: &Server, id: &str) -> Arc<LiveSession> {
        let agent = agent_api_builtin::FALLBACK;
        let body: crate::wire::CreateSessionRequest =
            serde_json::from_value(serde_json::json!({ "agent": agent.as_str() })).unwrap();
        server.create(id, body, None).await.unwrap()
    }

    /// The window in which the fleet's chaos test lost a message during a rolling restart: a
    /// turn has ended (none runs) and the message queued behind it (answered 204) is about to
    /// start (its dispatch spawned, not yet run). A drain must not take the session for idle
    /// then: releasing it drops the queue, and the client, told its message was taken, waits
    /// for a turn that never comes.
    #[tokio::test]
    async fn a_drain_leaves_a_session_whose_queued_message_is_about_to_start() {
        let server = server(std::time::Duration::from_millis(300)).await;
        let live = offline_session(&server, "queued").await;
        let (started, told) = oneshot::channel();
        {
            let mut state = live.state();
            state.queue.push_back(Queued {
                prompt: agent_api::Prompt::from("queued behind the turn that ended"),
                options: TurnOptions::default(),
                started,
            });
            state.dispatching = true;
        }
        // As a SIGTERM does (`serve`): no new session here, then the drain.
        server
            .inner
            .draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        server.drain_turns().await;
        // The dispatch runs now, late (a loaded machine): the message's turn starts.
        live.clone().dispatch().await;
        let turn = told.await.expect("the message was answered");
        assert!(
            matches!(turn, Ok((1, _))),
            "the queued message's turn did not start: {:?}",
            turn.err()
        );
        assert!(server.live("queued").is_some(), "the drain let it go");
    }

    /// A session this server has just lost (another claimed it, or its lease ran out) did not
    /// end: while this server still holds it, its info must not say `ended`, which a client
    /// reads as final.
    #[tokio::test]
    async fn a_session_lost_meanwhile_is_not_shown_ended_while_its_server_lets_it_go() {
        let server = server(std::time::Duration::from_secs(1)).await;
        let live = offline_session(&server, "lost").await;
        {
            // Where `lost` stands while it stores the release: marked, not yet forgotten.
            let mut state = live.state();
            state.ended = true;
            state.lost = true;
        }
        let record = server.inner.store.session("lost").await.unwrap().unwrap();
        let info = server.info(record).await.unwrap();
        assert!(!info.ended, "{info:?}");
        assert_ne!(info.state.as_deref(), Some("ended"), "{info:?}");
        assert!(!info.live, "{info:?}");
    }

    /// Only the first turn of a session brought back natively, failed as `SessionNotFound`
    /// before any output, says that the agent cannot continue its own session: a later turn, one
    /// whose agent answered first, or one that failed otherwise is a turn's failure only.
    #[test]
    fn only_a_first_native_turn_refused_before_any_output_means_the_agent_lost_its_session() {
        use agent_api::AgentError;
        let not_found = || -> Result<agent_api::RunCompletion, AgentError> {
            Err(AgentError::SessionNotFound { id: "n".into() })
        };
        assert!(refused_its_session(true, false, &not_found()));
        assert!(!refused_its_session(false, false, &not_found()));
        assert!(!refused_its_session(true, true, &not_found()));
        assert!(!refused_its_session(
            true,
            false,
            &Err(AgentError::SessionClosed)
        ));
        assert!(!refused_its_session(
            true,
            false,
            &Ok(agent_api::RunCompletion::new())
        ));
    }

    /// A message that met a session this server has just lost (another server claimed it while
    /// this one was paused) is handed on to the session's owner: it is not told the session
    /// ended, which a client reads as final (and the session did not end).
    #[tokio::test]
    async fn a_message_to_a_session_lost_meanwhile_is_handed_on_not_told_it_ended() {
        let server = server(std::time::Duration::from_secs(1)).await;
        let live = offline_session(&server, "lost").await;
        live.lost(&StoreError::NotOwner {
            session: "lost".into(),
            owner: "another".into(),
        })
        .await;
        let checked = live.check_accepts().unwrap_err();
        assert_eq!(checked.kind, "session_elsewhere", "{checked:?}");
        let sent = live
            .submit(agent_api::Prompt::from("hello"), TurnOptions::default())
            .await;
        let refused = sent.err().expect("a lost session takes no message");
        assert_eq!(refused.kind, "session_elsewhere", "{refused:?}");

        // A session that did end still says so.
        let ended = offline_session(&server, "ended").await;
        ended.terminate().await.unwrap();
        assert_eq!(ended.check_accepts().unwrap_err().kind, "session_ended");
    }
}
