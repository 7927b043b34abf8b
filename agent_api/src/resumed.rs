//! A session on a backend that cannot keep its agent alive between turns
//! (`agent_api.session.resume_per_turn`): each turn is a run of its own that resumes the previous
//! turn's native session, and its events are rewritten into the session's one transcript.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::contract::backend::AgentBackend;
use crate::contract::handle::{RunGuard, RunHandle};
use crate::contract::session::{Engine, ResumingTurns, Session};
use crate::pipeline::budget::{self, BatchSender};
use crate::pipeline::transcript::{SessionEnd, Transcript};
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::{Prompt, RunRequest, SessionSelector};
use crate::vocabulary::run::{ControlMessage, RunCompletion, RunControl};
use crate::vocabulary::universal::{UniversalEvent, UniversalEventBody};

/// Where the session's transcript stands between turns.
struct Rewriter {
    /// Makes the session's own events (delimiters, the end) and numbers every event.
    transcript: Transcript,
    next_sequence: u64,
    turns: u32,
    native_session_id: Option<String>,
    closed: bool,
}

impl Rewriter {
    /// Takes `event` into the session: its sequence, ids and session id become the session's.
    fn adopt(&mut self, mut event: UniversalEvent) -> UniversalEvent {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        event.event_id = self.transcript.event_id(sequence);
        event.sequence = sequence;
        event.session_id = self.transcript.session_id().into();
        // Each run numbers its items from 1: the turn number keeps them unique in the session.
        let turn = self.turns;
        let rename =
            |id: &mut String| *id = format!("itm_t{turn}_{}", id.trim_start_matches("itm_"));
        match &mut event.body {
            UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) => {
                let item = std::sync::Arc::make_mut(&mut d.item);
                rename(&mut item.item_id);
                item.parent_id.as_mut().map(rename);
            }
            UniversalEventBody::ItemDelta(d) => {
                let mut id = d.item_id.to_string();
                rename(&mut id);
                d.item_id = id.into();
            }
            _ => {}
        }
        event
    }

    /// The session's own status item (turn delimiters), numbered in the session.
    fn status(&mut self, label: &str) -> Vec<UniversalEvent> {
        self.transcript
            .daemon_status(label, Some(format!("turn {}", self.turns)));
        self.own()
    }

    /// The events the session's own transcript made, numbered in the session.
    fn own(&mut self) -> Vec<UniversalEvent> {
        let events: Vec<UniversalEvent> = self.transcript.drain().collect();
        events
            .into_iter()
            .map(|mut event| {
                event.sequence = self.next_sequence;
                self.next_sequence += 1;
                event.event_id = event.event_id.with_suffix("_s");
                event
            })
            .collect()
    }
}

impl Session {
    /// A session that runs each turn on `backend` as a new process resuming the previous turn's
    /// native session (for backends advertising `agent_api.session.resume_per_turn`), with
    /// `template` as every turn's request.
    pub fn resuming(backend: Arc<dyn AgentBackend>, template: RunRequest) -> Self {
        Self::new(
            backend.info().kind.clone(),
            Engine::Resumed(Box::new(ResumedSession::new(backend, template))),
        )
    }
}

/// A session whose turns are runs resuming each other.
pub(crate) struct ResumedSession {
    backend: Arc<dyn AgentBackend>,
    template: RunRequest,
    state: Arc<Mutex<Rewriter>>,
    /// Set while a turn's completion has not resolved.
    busy: Arc<AtomicBool>,
}

impl ResumedSession {
    pub(crate) fn new(backend: Arc<dyn AgentBackend>, template: RunRequest) -> Self {
        let session_id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        let mut transcript = Transcript::new(session_id, false);
        // Its session.started never goes out: the first turn's run brings the agent's own.
        transcript.session_started(None);
        transcript.drain();
        let state = Rewriter {
            transcript,
            next_sequence: 1,
            turns: 0,
            native_session_id: None,
            closed: false,
        };
        Self {
            backend,
            template,
            state: Arc::new(Mutex::new(state)),
            busy: Arc::new(AtomicBool::new(false)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rewriter> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait::async_trait]
impl ResumingTurns for ResumedSession {
    fn native_session_id(&self) -> Option<String> {
        self.lock().native_session_id.clone()
    }

    async fn send(&mut self, prompt: Prompt) -> Result<RunHandle, AgentError> {
        if self.lock().closed {
            return Err(AgentError::SessionClosed);
        }
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err(AgentError::TurnInProgress);
        }
        let mut request = self.template.clone();
        request.prompt = prompt;
        if let Some(id) = self.native_session_id() {
            request.session = SessionSelector::Resume(id.into());
        }
        let inner = match self.backend.run(request).await {
            Ok(inner) => inner,
            Err(error) => {
                self.busy.store(false, Ordering::SeqCst);
                return Err(error);
            }
        };
        let (events_tx, events_rx) = budget::channel(
            self.template
                .buffer_budget
                .unwrap_or(budget::DEFAULT_BUFFER_BUDGET),
        );
        let (completion_tx, completion_rx) = oneshot::channel();
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let abandoned = CancellationToken::new();
        let guard = Arc::new(RunGuard {
            abandoned: abandoned.clone(),
        });
        let control = RunControl::new(control_tx, Arc::new(AtomicBool::new(false)));
        let handle = RunHandle::new(
            inner.agent_kind().clone(),
            inner.tools_structured(),
            events_rx,
            completion_rx,
            control,
            guard,
        );
        let turn = Turn {
            state: self.state.clone(),
            busy: self.busy.clone(),
            events_tx,
            completion_tx,
        };
        tokio::spawn(turn.relay(inner, control_rx, abandoned));
        Ok(handle)
    }

    fn set_mode(&mut self, mode: crate::vocabulary::modes::AgentMode) -> Result<(), AgentError> {
        if self.busy.load(Ordering::SeqCst) {
            return Err(AgentError::TurnInProgress);
        }
        let mut template = self.template.clone();
        template.mode = Some(mode);
        let kind = self.backend.info().kind.clone();
        let capabilities = self.backend.info().capabilities.clone();
        if let Some(needed) = template
            .required_capabilities()
            .into_iter()
            .find(|needed| !capabilities.contains(needed))
        {
            return Err(AgentError::UnsupportedCapability {
                kind: kind.to_string(),
                capability: needed.to_string(),
            });
        }
        crate::contract::backend::check_choices(
            &kind,
            self.backend.info().modes,
            self.backend.info().variants,
            &template,
        )?;
        self.template = template;
        Ok(())
    }

    async fn close(self: Box<Self>) -> Result<Vec<UniversalEvent>, AgentError> {
        let mut state = self.lock();
        state.closed = true;
        state.transcript.end(SessionEnd::completed());
        Ok(state.own())
    }
}

/// One turn: relays the run's events into the session and its control commands to the run.
struct Turn {
    state: Arc<Mutex<Rewriter>>,
    busy: Arc<AtomicBool>,
    events_tx: BatchSender,
    completion_tx: oneshot::Sender<Result<RunCompletion, AgentError>>,
}

impl Turn {
    async fn relay(
        self,
        inner: RunHandle,
        mut control_rx: mpsc::UnboundedReceiver<ControlMessage>,
        abandoned: CancellationToken,
    ) {
        let control = inner.control();
        let (mut events, completion) = inner.into_universal();
        self.send(|state| {
            state.turns += 1;
            Vec::new()
        })
        .await;
        let mut opened = false;
        let mut control_open = true;
        loop {
            tokio::select! {
                _ = abandoned.cancelled() => return self.busy.store(false, Ordering::SeqCst),
                message = control_rx.recv(), if control_open => match message {
                    Some(ControlMessage::Cancel) => control.cancel(),
                    Some(ControlMessage::Command(command, reply)) => {
                        let _ = reply.send(control.command(command).await);
                    }
                    None => control_open = false,
                },
                event = events.next() => {
                    let Some(event) = event else { break };
                    self.forward(event, &mut opened).await;
                }
            }
        }
        let result = completion.await;
        if result.is_ok() {
            self.send(|state| state.status("turn_completed")).await;
        }
        drop(events);
        let Turn {
            busy,
            completion_tx,
            ..
        } = self;
        busy.store(false, Ordering::SeqCst);
        let _ = completion_tx.send(result);
    }

    /// One event of the run, as the session shows it: the first turn's `session.started` only,
    /// the opening delimiter after it, `turn_failed` before a terminal error, no `session.ended`.
    async fn forward(&self, event: UniversalEvent, opened: &mut bool) {
        self.send(|state| {
            let mut out = Vec::new();
            let first_turn = state.turns == 1;
            let is_start = matches!(event.body, UniversalEventBody::SessionStarted(_));
            if is_start && first_turn {
                out.push(state.adopt(event.clone()));
            }
            if !*opened {
                *opened = true;
                out.extend(state.status("turn_started"));
            }
            if let Some(id) = &event.native_session_id {
                state.native_session_id = Some(id.to_string());
            }
            match &event.body {
                UniversalEventBody::SessionStarted(_) | UniversalEventBody::SessionEnded(_) => {}
                UniversalEventBody::Error(e)
                    if e.details.as_ref().is_some_and(|d| d["terminal"] == true) =>
                {
                    out.extend(state.status("turn_failed"));
                    out.push(state.adopt(event));
                }
                _ => out.push(state.adopt(event)),
            }
            out
        })
        .await;
    }

    async fn send(&self, make: impl FnOnce(&mut Rewriter) -> Vec<UniversalEvent>) {
        let events = make(
            &mut self
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        if !events.is_empty() {
            let weight = events.iter().map(budget::weight).sum();
            // A caller that stopped listening still gets its completion.
            let _ = self.events_tx.send(events, weight).await;
        }
    }
}
