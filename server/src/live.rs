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
use crate::store::{Store, StoredEvent};

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
    /// Called once the session has ended by itself (its agent stopped): the server forgets it.
    on_end: Box<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession").field("id", &self.id).finish_non_exhaustive()
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

/// The current time as RFC 3339 UTC.
pub(crate) fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// A synthetic event (`source=daemon`) of `kind` with `data`, numbered `sequence`.
pub(crate) fn daemon_event(session: &str, sequence: u64, kind: &str, data: serde_json::Value) -> Option<StoredEvent> {
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

impl LiveSession {
    pub(crate) fn new(
        id: String,
        opened: SessionOrigin,
        session: Session,
        store: Arc<dyn Store>,
        (ring, max_subscribers): (usize, usize),
        on_end: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Arc<Self> {
        let (feed, _) = broadcast::channel(ring.max(1));
        let agent_mode = opened.request.agent_mode.clone().unwrap_or_else(|| crate::agents::DEFAULT_MODE.into());
        Arc::new(Self {
            id,
            opened,
            session: tokio::sync::Mutex::new(Some(session)),
            state: Mutex::new(TurnState { next_sequence: 1, agent_mode, ..TurnState::default() }),
            feed,
            subscribers: AtomicUsize::new(0),
            max_subscribers,
            store,
            on_end,
        })
    }

    fn state(&self) -> MutexGuard<'_, TurnState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the session ended.
    pub(crate) fn ended(&self) -> bool {
        self.state().ended
    }

    /// Subscribes to the feed; 429 past the bound of subscribers.
    pub(crate) fn subscribe(self: &Arc<Self>) -> Result<Subscription, ApiError> {
        let before = self.subscribers.fetch_add(1, Ordering::SeqCst);
        let subscription = Subscription { feed: self.feed.subscribe(), live: self.clone() };
        if before >= self.max_subscribers {
            return Err(ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "too_many_subscribers",
                format!("this session has {} subscribers already; try again later", self.max_subscribers),
            ));
        }
        Ok(subscription)
    }

    /// Sends `prompt` as the next turn, in the mode `options` asks (switched first, and kept for
    /// the next turns), and starts storing its events; returns the turn's number and the sequence
    /// its first event gets.
    pub(crate) async fn send(self: &Arc<Self>, prompt: agent_api::Prompt, options: TurnOptions) -> Result<(u64, u64), ApiError> {
        let mut session = self.session.lock().await;
        {
            let state = self.state();
            if state.ended {
                return Err(ApiError::new(axum::http::StatusCode::CONFLICT, "session_ended", "the session has ended"));
            }
            if state.current.is_some() {
                return Err(ApiError::new(
                    axum::http::StatusCode::CONFLICT,
                    "turn_in_progress",
                    "a turn is in progress: wait for it to end, or cancel it",
                ));
            }
        }
        let session =
            session.as_mut().ok_or_else(|| ApiError::new(axum::http::StatusCode::CONFLICT, "session_ended", "the session has ended"))?;
        if let Some(mode) = options.agent_mode.filter(|mode| *mode != self.state().agent_mode) {
            let asked = match mode.as_str() {
                crate::agents::DEFAULT_MODE => agent_api::request::AgentMode::Default,
                other => agent_api::request::AgentMode::parse(other),
            };
            session.set_mode(asked).await.map_err(|e| ApiError::agent(&e).about("agentMode"))?;
            self.store.set_agent_mode(&self.id, &mode).await?;
            self.state().agent_mode = mode;
        }
        let handle = session.send(prompt).await.map_err(|e| ApiError::agent(&e))?;
        let mut state = self.state();
        state.turns += 1;
        let turn = state.turns;
        state.current = Some((turn, handle.control()));
        state.pump = Some(tokio::spawn(self.clone().pump(handle, turn, options.images)));
        Ok((turn, state.next_sequence))
    }

    /// The number of the turn in progress.
    pub(crate) fn current_turn(&self) -> Option<u64> {
        self.state().current.as_ref().map(|(turn, _)| *turn)
    }

    /// The control of the turn in progress.
    pub(crate) fn control(&self) -> Option<RunControl> {
        self.state().current.as_ref().map(|(_, control)| control.clone())
    }

    /// Numbers, stores and publishes `events`; returns whether one ended the session.
    async fn record(&self, events: Vec<UniversalEvent>) -> Result<bool, crate::store::StoreError> {
        let first = self.state().next_sequence;
        let session_id: Arc<str> = self.id.as_str().into();
        let mut stored = Vec::with_capacity(events.len());
        let mut ended = false;
        let mut native = None;
        for (sequence, mut event) in (first..).zip(events) {
            event.sequence = sequence;
            event.session_id = session_id.clone();
            if let Some(id) = &event.native_session_id {
                native = Some(id.to_string());
            }
            ended |= matches!(event.body, UniversalEventBody::SessionEnded(_));
            stored.push(StoredEvent::from_event(event).map_err(|e| crate::store::StoreError::Backend(e.to_string()))?);
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
                self.store.set_native_session_id(&self.id, &native).await?;
            }
        }
        Ok(ended)
    }

    /// Stores then publishes events already numbered from `next_sequence`.
    async fn publish(&self, stored: Vec<StoredEvent>) -> Result<(), crate::store::StoreError> {
        let Some(last) = stored.last().map(|e| e.sequence) else { return Ok(()) };
        self.store.append(&self.id, stored.clone()).await?;
        self.state().next_sequence = last + 1;
        for event in stored {
            let _ = self.feed.send(Feed::Event(Arc::new(event)));
        }
        Ok(())
    }

    /// Stores and publishes one turn's events as they come, then ends the turn.
    async fn pump(self: Arc<Self>, handle: RunHandle, turn: u64, images: crate::turn::TurnImages) {
        let control = handle.control();
        let (events, completion) = handle.into_universal();
        // What waits when the store is free goes in one write.
        let mut chunks = events.ready_chunks(256);
        let mut ended = false;
        let mut failed = None;
        while let Some(chunk) = chunks.next().await {
            if failed.is_some() {
                continue;
            }
            match self.record(chunk).await {
                Ok(end) => ended |= end,
                Err(error) => {
                    // An event the store cannot hold must not be served: stop the turn.
                    tracing::error!(session = %self.id, "cannot store the turn's events: {error}");
                    failed = Some(error.to_string());
                    control.cancel();
                }
            }
        }
        if let Ok(Some(usage)) = completion.await.map(|done| done.usage) {
            let total = {
                let mut state = self.state();
                state.usage.add(&usage);
                serde_json::to_string(&state.usage).unwrap_or_default()
            };
            if let Err(error) = self.store.set_usage(&self.id, &total).await {
                tracing::error!(session = %self.id, "cannot record the session's usage: {error}");
            }
        }
        if ended || failed.is_some() {
            self.state().ended = true;
            if let Err(error) = self.store.mark_ended(&self.id, failed.as_deref()).await {
                tracing::error!(session = %self.id, "cannot mark the session ended: {error}");
            }
        }
        {
            let mut state = self.state();
            state.current = None;
            state.pump = None;
        }
        // The turn's image copies are read by now: removed.
        drop(images);
        let _ = self.feed.send(Feed::TurnEnded(turn));
        if ended || failed.is_some() {
            let _ = self.feed.send(Feed::Ended);
            (self.on_end)(&self.id);
        }
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
                }
            }
        }
        let mut ended = self.record(trailing).await? || already_ended;
        if !ended {
            let sequence = self.state().next_sequence;
            let data = serde_json::json!({ "reason": "terminated", "terminated_by": "daemon" });
            if let Some(event) = daemon_event(&self.id, sequence, "session.ended", data) {
                self.publish(vec![event]).await?;
            }
            ended = true;
        }
        self.state().ended = ended;
        self.store.mark_ended(&self.id, None).await?;
        let _ = self.feed.send(Feed::Ended);
        Ok(())
    }
}
