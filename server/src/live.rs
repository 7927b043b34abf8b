//! [`LiveSession`]: a session this server runs now: its agent session, the turn in progress and
//! the feed its subscribers follow.
//!
//! A turn's events are numbered in the server's own sequence (from 1 per session, across turns),
//! written to the store, and only then published on the feed: a client never sees an event the
//! store does not hold. The feed is a bounded ring ([`tokio::sync::broadcast`]); a subscriber that
//! falls a whole ring behind is dropped, and resumes from the store by its offset.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_api::universal::{SessionEndReason, TerminatedBy, UniversalEventBody};
use agent_api::UniversalEvent;
use agent_api::{RunControl, RunHandle, Session};
use futures::StreamExt;
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::store::{SessionState, SessionUpdate, Store, StoreError, StoredEvent};

/// What a session's subscribers receive.
#[derive(Debug, Clone)]
pub(crate) enum Feed {
    /// A stored event.
    Event(Arc<StoredEvent>),
    /// The turn numbered so has sent its last event.
    TurnEnded(u64),
    /// The session ended: no more events.
    Ended,
}

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
    /// Whether the session ended (its agent stopped, or it was terminated).
    ended: bool,
    /// The agent's session id, once an event carried it.
    native_session_id: Option<String>,
    /// The tokens and cost of the turns so far.
    usage: crate::wire::SessionUsage,
    /// The agent mode of the next turn (`build`: the agent's own default).
    agent_mode: String,
    /// The images of the messages that steered the turn in progress, kept until it ends.
    steer_images: Vec<crate::turn::TurnImages>,
    /// The turn in progress has stored its closing status: a client may already send the next
    /// message, which waits for the turn's last writes rather than being refused.
    closing: bool,
}

/// A session run by this server.
pub(crate) struct LiveSession {
    pub(crate) id: String,
    /// What the session was opened with: a message may repeat these options, not change them.
    pub(crate) opened: SessionOrigin,
    session: tokio::sync::Mutex<Option<Session>>,
    state: Mutex<TurnState>,
    feed: broadcast::Sender<Feed>,
    subscribers: AtomicUsize,
    max_subscribers: usize,
    store: Arc<dyn Store>,
    /// How long a turn waits for a failing store (`ServerConfig::store_outage`).
    store_outage: std::time::Duration,
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
    /// The session was brought back: the agent's new `session.started` is not the session's.
    resumed: bool,
    /// The transcript to prime the next prompt with (a `replay` resume).
    prime: Mutex<Option<String>>,
    /// The turn its last server died in, closed as interrupted when it came back: a reply to
    /// what that turn asked is told so.
    pub(crate) interrupted: Mutex<Option<u64>>,
    /// When a turn last started or ended, or the session was opened.
    last_active: Mutex<std::time::Instant>,
    /// A snapshot the store did not take (it failed): written with the next one, or at release.
    unsaved: Mutex<Option<crate::store::StoredSnapshot>>,
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
    /// Whether it was brought back (see [`LiveSession::resumed`]).
    pub(crate) resumed: bool,
    /// The transcript priming the next prompt (`replay`).
    pub(crate) prime: Option<String>,
    /// The turn its last server died in.
    pub(crate) interrupted: Option<u64>,
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
        self.live.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The `code` of the `error` event of a session ended because the store failed for too long.
pub(crate) const STORE_UNAVAILABLE: &str = "store_unavailable";

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

/// Whether `event` is a turn's closing status (`turn_completed` or `turn_failed`).
fn closes_turn(event: &UniversalEvent) -> bool {
    let UniversalEventBody::ItemCompleted(completed) = &event.body else {
        return false;
    };
    completed.item.content.iter().any(|part| {
        matches!(part, agent_api::universal::ContentPart::Status { label, .. }
            if label == "turn_completed" || label == "turn_failed")
    })
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
        let (feed, _) = broadcast::channel(config.sse_buffer.max(1));
        let agent_mode = continuity.agent_mode.clone().unwrap_or_else(|| {
            opened
                .request
                .settings
                .agent_mode
                .clone()
                .unwrap_or_else(|| crate::agents::DEFAULT_MODE.into())
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
            stopping,
            on_end,
            metrics,
            owner: continuity.owner,
            epoch: continuity.epoch,
            lease: config.server_lease,
            resumed: continuity.resumed,
            prime: Mutex::new(continuity.prime),
            interrupted: Mutex::new(continuity.interrupted),
            last_active: Mutex::new(std::time::Instant::now()),
            unsaved: Mutex::new(None),
        })
    }

    /// Takes the agent's snapshot after turn `turn` and keeps it in the store (`snapshot` in
    /// `spec/http-api.md`): an agent that cannot export one is skipped; a store that fails keeps
    /// the turn's events (already written) and the snapshot is tried again after the next turn
    /// and when the agent is released.
    async fn keep_snapshot(&self, session: &Session, turn: u64) {
        let capabilities = session.agent_kind().clone();
        let taken = match session.snapshot().await {
            Ok(snapshot) => snapshot.to_bytes().map_err(|e| e.to_string()),
            Err(agent_api::AgentError::UnsupportedCapability { .. }) => return,
            Err(error) => Err(error.to_string()),
        };
        let bytes = match taken {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(session = %self.id, agent = %capabilities, "cannot take the session's snapshot: {error}");
                return;
            }
        };
        let snapshot = crate::store::StoredSnapshot { turn, bytes };
        self.save_snapshot(Some(snapshot)).await;
    }

    /// Writes `snapshot` (or the one left unsaved) to the store; kept for a later try when the
    /// store fails.
    async fn save_snapshot(&self, snapshot: Option<crate::store::StoredSnapshot>) {
        let pending = self
            .unsaved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(snapshot) = snapshot.or(pending) else {
            return;
        };
        match self
            .store
            .put_snapshot(&self.id, &self.owner, snapshot.clone())
            .await
        {
            Ok(()) => {}
            Err(StoreError::NotOwner { .. }) => {}
            Err(error) => {
                tracing::warn!(session = %self.id, "cannot store the session's snapshot (tried again later): {error}");
                *self.unsaved.lock().unwrap_or_else(|p| p.into_inner()) = Some(snapshot);
            }
        }
    }

    /// How long the session has had no turn, none running now (`None` while one runs).
    pub(crate) fn idle_for(&self) -> Option<std::time::Duration> {
        if self.state().current.is_some() {
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

    /// [`LiveSession::check_free`], after a turn whose end was served has finished its own
    /// writes (a few store round trips, its snapshot among them, which needs the session: not
    /// held meanwhile): a client that sends at once is not refused.
    pub(crate) async fn wait_free(&self) -> Result<(), ApiError> {
        let deadline = tokio::time::Instant::now() + SNAPSHOT_WAIT * 3;
        while {
            let state = self.state();
            state.closing && state.current.is_some()
        } && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        self.check_free()
    }

    /// 409 when the session cannot take a turn now: it ended, or a turn is in progress. Checked
    /// again when the turn is sent; checked first so that a message that would be refused costs
    /// nothing (its images are not read nor copied).
    pub(crate) fn check_free(&self) -> Result<(), ApiError> {
        let state = self.state();
        if state.ended {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "session_ended",
                "the session has ended",
            ));
        }
        if state.current.is_some() {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "turn_in_progress",
                "a turn is in progress: wait for it to end, or cancel it",
            ));
        }
        Ok(())
    }

    /// Sends `prompt` as the next turn, in the mode `options` asks (switched first, and kept for
    /// the next turns), and starts storing its events; returns the turn's number and the sequence
    /// its first event gets.
    pub(crate) async fn send(
        self: &Arc<Self>,
        prompt: agent_api::Prompt,
        options: TurnOptions,
    ) -> Result<(u64, u64), ApiError> {
        self.wait_free().await?;
        let mut guard = self.session.lock().await;
        self.check_free()?;
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
                crate::agents::DEFAULT_MODE => agent_api::request::AgentMode::Default,
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
        state.closing = false;
        state.current = Some((turn, handle.control()));
        let span = watch.span().clone();
        state.pump = Some(tokio::spawn(tracing::Instrument::instrument(
            self.clone().pump(handle, turn, options.images, watch),
            span,
        )));
        Ok((turn, state.next_sequence))
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
        let mut closing = false;
        let mut native = None;
        // A session brought back keeps its first `session.started`: the agent's new one is not
        // the session's (its seam is the `session_resumed` status before it).
        let events = events.into_iter().filter(|event| {
            !(self.resumed && matches!(event.body, UniversalEventBody::SessionStarted(_)))
        });
        for (sequence, mut event) in (first..).zip(events) {
            event.sequence = sequence;
            event.session_id = session_id.clone();
            if let Some(id) = &event.native_session_id {
                native = Some(id.to_string());
            }
            ended |= matches!(event.body, UniversalEventBody::SessionEnded(_));
            closing |= closes_turn(&event);
            stored.push(
                StoredEvent::from_event(event)
                    .map_err(|e| crate::store::StoreError::Backend(e.to_string()))?,
            );
        }
        self.publish(stored).await?;
        if closing {
            self.state().closing = true;
        }
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
        for event in stored {
            let _ = self.feed.send(Feed::Event(Arc::new(event)));
        }
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
        let mut ended = false;
        let mut failed = None;
        let mut lost = None;
        while let Some(chunk) = chunks.next().await {
            if failed.is_some() || lost.is_some() {
                continue;
            }
            watch.events(&chunk);
            match self.record(chunk).await {
                Ok(end) => ended |= end,
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
        watch.ended(&done, failed.is_some());
        if let Ok(Some(usage)) = done.map(|done| done.usage) {
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
            }
            drop(images);
            let _ = self.feed.send(Feed::TurnEnded(turn));
            self.lost(&error).await;
            return;
        }
        let done = SessionUpdate::default().turns(turn, false);
        if let Err(error) = self.store.update(&self.id, &self.owner, done).await {
            tracing::warn!(session = %self.id, "cannot record the turn's end: {error}");
        }
        // Held by a terminate or a release (which takes its own): not taken here.
        // Bounded: the next message waits for it (an agent that writes its files late is given
        // a few seconds; past them the snapshot is taken after the next turn).
        if let Ok(session) = self.session.try_lock() {
            if let Some(session) = session.as_ref() {
                let kept = tokio::time::timeout(SNAPSHOT_WAIT, self.keep_snapshot(session, turn));
                if kept.await.is_err() {
                    tracing::warn!(session = %self.id, "the agent's snapshot took too long; taken after the next turn");
                }
            }
        }
        self.touch();
        // Stored, or the server keeps it (ended) so that a message is told it ended; a server
        // started again on the store closes its turn as interrupted.
        let mut forget = true;
        if let Some(why) = &failed {
            self.state().ended = true;
            forget = self.end_for_store(why).await;
        } else if ended {
            self.state().ended = true;
            if let Err(error) = self.store.mark_ended(&self.id, None).await {
                tracing::error!(session = %self.id, "cannot mark the session ended: {error}");
            }
        }
        let steer_images = {
            let mut state = self.state();
            state.current = None;
            state.pump = None;
            std::mem::take(&mut state.steer_images)
        };
        // The turn's image copies are read by now: removed.
        drop(images);
        drop(steer_images);
        let _ = self.feed.send(Feed::TurnEnded(turn));
        if ended || failed.is_some() {
            let _ = self.feed.send(Feed::Ended);
            if forget {
                (self.on_end)(&self.id);
            }
        }
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
        self.state().ended = true;
        if matches!(error, StoreError::LeaseLost { .. }) {
            // Refused when another server owns it now: then there is nothing to let go.
            let release = SessionUpdate::default().state(SessionState::Idle);
            let _ = self.store.update(&self.id, &self.owner, release).await;
        }
        let _ = self.feed.send(Feed::Ended);
        (self.on_end)(&self.id);
    }

    /// Stops the session's agent and keeps the session open: its turn in progress is cancelled
    /// (and its end stored), the agent closed, and its state stored as `state` (`idle`: released;
    /// `stopped`: the server stops). The next message brings it back. Returns whether it was
    /// released (not ended, not lost meanwhile).
    pub(crate) async fn release(&self, state: SessionState) -> bool {
        let mut session = self.session.lock().await;
        self.cancel_turn().await;
        if self.ended() {
            return false;
        }
        if let Some(session) = session.take() {
            let turns = self.state().turns;
            if turns > 0 {
                self.keep_snapshot(&session, turns).await;
            }
            self.save_snapshot(None).await;
            // The agent's own end is not the session's: its trailing events are not stored.
            let _ = session.close().await;
        }
        let update = SessionUpdate::default().state(state);
        match self.store.update(&self.id, &self.owner, update).await {
            Ok(()) => {}
            Err(error @ StoreError::NotOwner { .. }) => {
                drop(session);
                self.lost(&error).await;
                return false;
            }
            Err(error) => {
                tracing::warn!(session = %self.id, "cannot record the release: {error}");
            }
        }
        // Forgotten before a message waiting for it goes on: that one brings it back.
        (self.on_end)(&self.id);
        drop(session);
        let _ = self.feed.send(Feed::Ended);
        true
    }

    /// Cancels the turn in progress and waits for its last event to be stored.
    pub(crate) async fn cancel_turn(&self) {
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
        let _ = self.feed.send(Feed::Ended);
        Ok(())
    }
}
