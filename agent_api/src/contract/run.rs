//! [`RunHandle`]: one run's event stream, completion future and control side.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::contract::budget::BatchReceiver;
use crate::contract::error::AgentError;
use crate::contract::event::AgentWrapperEvent;
use crate::contract::kind::AgentKind;
use crate::contract::projection::Projector;
use crate::contract::spans::{self, RunSpans};
use crate::contract::universal::UniversalEvent;

/// Token counts and cost of a run, where the agent reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: Option<u64>,
    /// Input tokens served from a cache.
    pub cached_input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Reasoning tokens (part of the output).
    pub reasoning_tokens: Option<u64>,
    /// Input tokens written to a cache (part of the input).
    pub cache_write_tokens: Option<u64>,
    /// Model turns (requests to the model), where the agent counts them.
    pub turns: Option<u32>,
    /// The model that answered, where the agent says.
    pub model: Option<String>,
    /// Cost in US dollars.
    pub cost_usd: Option<f64>,
}

/// How a successful run ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunCompletion {
    /// The agent process's exit code, when there was a process.
    pub exit_code: Option<i32>,
    /// The final answer text.
    pub final_text: Option<String>,
    /// The provider's session id, to resume with.
    pub native_session_id: Option<String>,
    /// The session's handle (agent, native id, working directory), to resume or fork with
    /// wherever the caller runs; set whenever `native_session_id` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<crate::contract::session_ref::SessionRef>,
    /// Token usage, where known.
    pub usage: Option<Usage>,
    /// Backend-specific data, at most 65,536 serialized bytes.
    pub data: Option<Value>,
    /// The answer as JSON that fits the request's output schema (`agent_api.options.output_schema`);
    /// `None` when the request set no schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<Value>,
    /// Which launcher started the agent, as [`crate::request::Launcher`]'s Display shows it
    /// (`local`, `bwrap`, `prefix:kubectl`, …), so a caller can map the paths events report (they
    /// are the agent's); `None` when no process was spawned (an in-process agent, a replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
}

impl RunCompletion {
    /// A completion with every field empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the final answer text.
    pub fn with_final_text(mut self, text: impl Into<String>) -> Self {
        self.final_text = Some(text.into());
        self
    }

    /// Sets the provider's session id.
    pub fn with_native_session_id(mut self, id: impl Into<String>) -> Self {
        self.native_session_id = Some(id.into());
        self
    }

    /// Sets the usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets backend-specific data (bounded by the driver).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

impl Usage {
    /// Usage with input and output token counts.
    pub fn tokens(input: u64, output: u64) -> Self {
        Self {
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..Self::default()
        }
    }

    /// `usd` when it can be a cost (finite, not negative); `None` otherwise: the one rule for a
    /// cost an agent reports, which is then unknown, never zero.
    ///
    /// ```
    /// use agent_api::run::Usage;
    /// assert_eq!(Usage::usable_cost(0.25), Some(0.25));
    /// assert_eq!(Usage::usable_cost(-1.0), None);
    /// assert_eq!(Usage::usable_cost(f64::NAN), None);
    /// ```
    pub fn usable_cost(usd: f64) -> Option<f64> {
        (usd.is_finite() && usd >= 0.0).then_some(usd)
    }

    /// Adds `other` (one more model call, step or turn) to this usage: the one rule for a sum of
    /// usages. Token counts and turns saturate, a count known on one side only is that count; the
    /// cost is the sum while both are known and usable ([`Usage::usable_cost`]), unknown as soon
    /// as either is not (never counted as zero); the model is the latest named.
    ///
    /// ```
    /// use agent_api::run::Usage;
    /// let mut total = Usage::tokens(u64::MAX, 1);
    /// total.cost_usd = Some(0.25);
    /// let mut step = Usage::tokens(5, 2);
    /// step.cost_usd = Some(0.5);
    /// total.add(&step);
    /// assert_eq!((total.input_tokens, total.output_tokens, total.cost_usd), (Some(u64::MAX), Some(3), Some(0.75)));
    /// total.add(&Usage::tokens(1, 1));
    /// assert_eq!(total.cost_usd, None, "a step of unknown cost makes the sum's cost unknown");
    /// ```
    pub fn add(&mut self, other: &Usage) {
        fn sum<T: Copy>(a: Option<T>, b: Option<T>, add: fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(add(a, b)),
                (a, b) => a.or(b),
            }
        }
        self.input_tokens = sum(self.input_tokens, other.input_tokens, u64::saturating_add);
        self.cached_input_tokens = sum(
            self.cached_input_tokens,
            other.cached_input_tokens,
            u64::saturating_add,
        );
        self.output_tokens = sum(self.output_tokens, other.output_tokens, u64::saturating_add);
        self.reasoning_tokens = sum(
            self.reasoning_tokens,
            other.reasoning_tokens,
            u64::saturating_add,
        );
        self.cache_write_tokens = sum(
            self.cache_write_tokens,
            other.cache_write_tokens,
            u64::saturating_add,
        );
        self.turns = sum(self.turns, other.turns, u32::saturating_add);
        if other.model.is_some() {
            self.model.clone_from(&other.model);
        }
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Self::usable_cost(a + b),
            _ => None,
        };
    }

    /// Adds `next` to the running total `total`: the first usage is taken as it is (its cost
    /// included), each later one is [`Usage::add`]ed.
    pub fn accumulate(total: &mut Option<Usage>, next: Usage) {
        match total {
            Some(total) => total.add(&next),
            None => {
                *total = Some(Usage {
                    cost_usd: next.cost_usd.and_then(Self::usable_cost),
                    ..next
                })
            }
        }
    }

    /// Of two reports of one run's usage (a final figure, and what the agent reported while it
    /// ran), the one with more tokens: a limit is checked against the larger, never the smaller
    /// (`final_figure` on a tie or when neither counts tokens).
    ///
    /// ```
    /// use agent_api::run::Usage;
    /// let during = Some(Usage::tokens(6_000, 4_000));
    /// let at_end = Some(Usage::tokens(5, 5));
    /// assert_eq!(Usage::larger(at_end, during).unwrap().total_tokens(), Some(10_000));
    /// assert_eq!(Usage::larger(None, Some(Usage::tokens(1, 1))).unwrap().total_tokens(), Some(2));
    /// ```
    pub fn larger(final_figure: Option<Usage>, during: Option<Usage>) -> Option<Usage> {
        let tokens = |u: &Option<Usage>| u.as_ref().and_then(Usage::total_tokens);
        if tokens(&during) > tokens(&final_figure) {
            during
        } else {
            final_figure.or(during)
        }
    }

    /// Input plus output tokens, when either is known.
    pub fn total_tokens(&self) -> Option<u64> {
        match (self.input_tokens, self.output_tokens) {
            (None, None) => None,
            (input, output) => Some(input.unwrap_or(0).saturating_add(output.unwrap_or(0))),
        }
    }
}

/// A decision on a permission request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PermissionDecision {
    /// Allow this once.
    Allow,
    /// Allow this once, with a changed tool input.
    AllowWithInput(Value),
    /// Allow this and similar requests for the rest of the session.
    AllowForSession,
    /// Deny, with an optional message for the agent.
    Deny {
        /// Why, for the agent.
        message: Option<String>,
    },
    /// Deny and stop the current turn.
    Cancel,
}

impl PermissionDecision {
    /// Whether the decision lets the tool run.
    pub fn is_approval(&self) -> bool {
        matches!(
            self,
            Self::Allow | Self::AllowWithInput(_) | Self::AllowForSession
        )
    }
}

/// An answer to a question.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuestionAnswer {
    /// The chosen option or free text.
    Text(String),
    /// Decline to answer.
    Reject,
}

/// A caller's command to a running run, as the run's protocol sees it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ControlCommand {
    /// Decide a permission request.
    Permission {
        /// The `permission_id` of the request.
        id: String,
        /// The decision.
        decision: PermissionDecision,
    },
    /// Answer a question.
    Question {
        /// The `question_id` of the question.
        id: String,
        /// The answer.
        answer: QuestionAnswer,
    },
    /// Add a user message to the running turn ([`RunControl::steer`]).
    Steer {
        /// The message's text.
        text: String,
        /// Its image files.
        images: Vec<std::path::PathBuf>,
    },
}

/// What kind of command it is, for people (`a permission decision`); the ids stay out, as the
/// agent chose them.
impl std::fmt::Display for ControlCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Permission { .. } => "a permission decision",
            Self::Question { .. } => "a question's answer",
            Self::Steer { .. } => "a steering message",
        })
    }
}

pub(crate) enum ControlMessage {
    Cancel,
    Command(ControlCommand, oneshot::Sender<Result<(), AgentError>>),
}

/// The control side of a run: cancel it, answer its permission requests and questions.
/// Cloneable; every clone controls the same run.
#[derive(Clone)]
pub struct RunControl {
    tx: mpsc::UnboundedSender<ControlMessage>,
    cancel_requested: Arc<AtomicBool>,
}

impl RunControl {
    pub(crate) fn new(
        tx: mpsc::UnboundedSender<ControlMessage>,
        cancel_requested: Arc<AtomicBool>,
    ) -> Self {
        Self {
            tx,
            cancel_requested,
        }
    }

    /// Cancels the run: the agent's soft interrupt where it has one, then the whole process
    /// group is terminated after a grace period. The completion is `Err(Cancelled)`.
    /// Idempotent; does nothing once the run has finished.
    pub fn cancel(&self) {
        if !self.cancel_requested.swap(true, Ordering::SeqCst) {
            let _ = self.tx.send(ControlMessage::Cancel);
        }
    }

    /// Resolves once the run has finished and no longer takes commands.
    pub(crate) async fn finished(&self) {
        self.tx.closed().await;
    }

    /// Whether `cancel` was called.
    pub fn is_cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }

    /// Decides the permission request `id` (from a `permission.requested` event).
    pub async fn respond_permission(
        &self,
        id: &str,
        decision: PermissionDecision,
    ) -> Result<(), AgentError> {
        self.command(ControlCommand::Permission {
            id: id.to_string(),
            decision,
        })
        .await
    }

    /// Answers the question `id` (from a `question.requested` event).
    pub async fn answer_question(
        &self,
        id: &str,
        answer: QuestionAnswer,
    ) -> Result<(), AgentError> {
        self.command(ControlCommand::Question {
            id: id.to_string(),
            answer,
        })
        .await
    }

    /// Steers the running turn: adds `text` as a user message to what the agent is doing, by
    /// the agent's own means (`agent_api.control.steer`: Codex app-server's `turn/steer`, a user
    /// message on Claude Code's two-way stream-json), without cancelling anything. It returns once
    /// the agent has taken the message; the message is then a user message item of the same turn
    /// in the transcript (a `user` text event in the wrapper view), and the agent reads it at its
    /// next step. Never emulated: an agent that cannot be steered refuses with
    /// [`AgentError::UnsupportedCapability`] naming `agent_api.control.steer`, and nothing is sent.
    ///
    /// Errors: [`AgentError::NoTurnRunning`] when the turn has ended (or not begun),
    /// [`AgentError::TurnEndedBeforeSteer`] when it ended before the agent took the message,
    /// [`AgentError::SteerRefused`] when the agent refused it now.
    ///
    /// ```no_run
    /// # async fn demo(handle: agent_api::RunHandle) -> Result<(), agent_api::AgentError> {
    /// let control = handle.control();
    /// control.steer("not that file: edit src/lib.rs instead").await?;
    /// # Ok(()) }
    /// ```
    pub async fn steer(&self, text: impl Into<String>) -> Result<(), AgentError> {
        self.steer_with_images(text, Vec::new()).await
    }

    /// [`RunControl::steer`] with images (PNG, JPEG, GIF or WebP files; they need
    /// `agent_api.input.images`, as a prompt's do).
    pub async fn steer_with_images(
        &self,
        text: impl Into<String>,
        images: Vec<std::path::PathBuf>,
    ) -> Result<(), AgentError> {
        let text = text.into();
        if text.trim().is_empty() && images.is_empty() {
            return Err(AgentError::InvalidRequest {
                reason: "a steering message needs text or an image".into(),
            });
        }
        if self.is_cancel_requested() {
            return Err(AgentError::NoTurnRunning);
        }
        self.command(ControlCommand::Steer { text, images })
            .await
            .map_err(|e| match e {
                AgentError::RunFinished => AgentError::NoTurnRunning,
                other => other,
            })
    }

    pub(crate) async fn command(&self, command: ControlCommand) -> Result<(), AgentError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(ControlMessage::Command(command, reply))
            .map_err(|_| AgentError::RunFinished)?;
        answer.await.unwrap_or(Err(AgentError::RunFinished))
    }
}

/// Kills the run's processes when the last part of its handle is dropped.
///
/// It is all the driver learns of the caller's side: not which view reads the run, so that the
/// universal events are the same whichever view is read (`spec/run-protocol.md` §1).
pub(crate) struct RunGuard {
    pub(crate) abandoned: CancellationToken,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.abandoned.cancel();
    }
}

/// One run: consume it as wrapper events ([`RunHandle::into_wrapper`]) or as the universal
/// transcript ([`RunHandle::into_universal`]); either way the completion resolves exactly once,
/// after the last event. Dropping every part of the handle stops the run and reaps its processes.
///
/// Poll the event stream (or drop it): the run pushes back on the agent while events wait.
pub struct RunHandle {
    agent_kind: AgentKind,
    tools_structured: bool,
    events: BatchReceiver,
    completion: oneshot::Receiver<Result<RunCompletion, AgentError>>,
    control: RunControl,
    guard: Arc<RunGuard>,
}

impl RunHandle {
    pub(crate) fn new(
        agent_kind: AgentKind,
        tools_structured: bool,
        events: BatchReceiver,
        completion: oneshot::Receiver<Result<RunCompletion, AgentError>>,
        control: RunControl,
        guard: Arc<RunGuard>,
    ) -> Self {
        Self {
            agent_kind,
            tools_structured,
            events,
            completion,
            control,
            guard,
        }
    }

    /// The backend running it.
    pub fn agent_kind(&self) -> &AgentKind {
        &self.agent_kind
    }

    /// Whether tool events of this run carry the tools facet.
    pub fn tools_structured(&self) -> bool {
        self.tools_structured
    }

    /// A control for the run.
    pub fn control(&self) -> RunControl {
        self.control.clone()
    }

    /// The wrapper view: bounded [`AgentWrapperEvent`]s, and the completion.
    ///
    /// It is the shared projection ([`Projector`]) of the universal events, which are the same
    /// whichever view reads the run; the projection holds an answer's text until its message
    /// completes and shows it once.
    pub fn into_wrapper(self) -> (WrapperEvents, Completion) {
        self.wrapper(false)
    }

    fn wrapper(self, streaming_answers: bool) -> (WrapperEvents, Completion) {
        let spans = RunSpans::new(&self.agent_kind);
        let projector = Projector::new(self.agent_kind, self.tools_structured);
        let projector = if streaming_answers {
            projector.streaming_answers()
        } else {
            projector
        };
        let span = spans.run().clone();
        let events = WrapperEvents {
            inner: UniversalEvents::new(self.events, self.guard.clone(), spans),
            projector,
            pending: Default::default(),
        };
        (
            events,
            Completion {
                rx: self.completion,
                span,
                _guard: self.guard,
            },
        )
    }

    /// The wrapper view with the answer text streaming: as [`RunHandle::into_wrapper`], but an
    /// answer's text goes out delta by delta as `text_output` events (each naming its message in
    /// `data.item_id`) instead of once its message completes, and a message that gets cut after
    /// some of its text went out is taken back by a `status` event
    /// ([`AgentWrapperEvent::retraction`]). For showing an answer as it is written; the default
    /// view is for acting on answers that are sure.
    pub fn into_wrapper_streaming(self) -> (WrapperEvents, Completion) {
        self.wrapper(true)
    }

    /// The universal view: [`UniversalEvent`]s, and the completion.
    pub fn into_universal(self) -> (UniversalEvents, Completion) {
        let spans = RunSpans::new(&self.agent_kind);
        let span = spans.run().clone();
        let events = UniversalEvents::new(self.events, self.guard.clone(), spans);
        (
            events,
            Completion {
                rx: self.completion,
                span,
                _guard: self.guard,
            },
        )
    }

    /// Reads the whole run as wrapper events.
    pub async fn collect_wrapper(
        self,
    ) -> (Vec<AgentWrapperEvent>, Result<RunCompletion, AgentError>) {
        let (events, completion) = self.into_wrapper();
        let events = events.collect().await;
        (events, completion.await)
    }

    /// Reads the whole run as universal events.
    pub async fn collect_universal(
        self,
    ) -> (Vec<UniversalEvent>, Result<RunCompletion, AgentError>) {
        let (events, completion) = self.into_universal();
        let events = events.collect().await;
        (events, completion.await)
    }
}

/// The universal event stream of a run.
pub struct UniversalEvents {
    rx: BatchReceiver,
    /// The run's spans, opened and closed by its events.
    spans: RunSpans,
    _guard: Arc<RunGuard>,
}

impl UniversalEvents {
    fn new(rx: BatchReceiver, guard: Arc<RunGuard>, spans: RunSpans) -> Self {
        Self {
            rx,
            spans,
            _guard: guard,
        }
    }

    /// Bytes of events the run holds for this stream now; never more than the run's buffer
    /// budget (`RunRequest::with_buffer_budget`, 1 MiB by default).
    pub fn buffered_bytes(&self) -> usize {
        self.rx.buffered_bytes()
    }

    /// Hands back an event you are done with, to be freed by the run's own task with the rest of
    /// its batch instead of on your thread. Optional: dropping the event is always fine. It pays
    /// when the consumer runs on another thread than the run (a multi-thread runtime): memory
    /// allocated on one thread and freed on another makes the system allocator take the first
    /// thread's lock for every free, and the two threads then wait on each other. (The wrapper view
    /// reads each event in place and gives back whole batches.)
    ///
    /// ```no_run
    /// # async fn consume(handle: agent_api::RunHandle) {
    /// use futures::StreamExt;
    /// let (mut events, completion) = handle.into_universal();
    /// while let Some(event) = events.next().await {
    ///     println!("{}", event.type_name());
    ///     events.give_back(event);
    /// }
    /// let _ = completion.await;
    /// # }
    /// ```
    pub fn give_back(&mut self, event: UniversalEvent) {
        self.rx.recycle(event);
    }
}

impl Stream for UniversalEvents {
    type Item = UniversalEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<UniversalEvent>> {
        let polled = self.rx.poll_next(cx);
        if let Poll::Ready(Some(event)) = &polled {
            self.spans.observe(event);
        }
        polled
    }
}

/// The wrapper event stream of a run: the universal events through the shared projection.
pub struct WrapperEvents {
    inner: UniversalEvents,
    projector: Projector,
    pending: std::collections::VecDeque<AgentWrapperEvent>,
}

impl WrapperEvents {
    /// Bytes of events the run holds for this stream now (see [`UniversalEvents::buffered_bytes`]).
    pub fn buffered_bytes(&self) -> usize {
        self.inner.buffered_bytes()
    }
}

impl Stream for WrapperEvents {
    type Item = AgentWrapperEvent;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<AgentWrapperEvent>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Poll::Ready(Some(ev));
            }
            let Self {
                projector,
                pending,
                inner,
            } = &mut *self;
            match inner.rx.poll_lend(cx) {
                Poll::Ready(Some(universal)) => {
                    inner.spans.observe(universal);
                    projector.project_into(universal, pending)
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The completion of a run; resolves once, after the event stream's last event.
pub struct Completion {
    rx: oneshot::Receiver<Result<RunCompletion, AgentError>>,
    /// The run's span: the completion records its usage or error there.
    span: tracing::Span,
    _guard: Arc<RunGuard>,
}

impl std::future::Future for Completion {
    type Output = Result<RunCompletion, AgentError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let done = Pin::new(&mut self.rx).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(AgentError::Protocol {
                    reason: "the run ended without reporting a completion".into(),
                })
            })
        });
        if let Poll::Ready(done) = &done {
            match done {
                Ok(done) => {
                    let usage = done.usage.as_ref();
                    spans::record_usage(
                        &self.span,
                        usage.and_then(|u| u.input_tokens),
                        usage.and_then(|u| u.output_tokens),
                        usage.and_then(|u| u.model.as_deref()),
                    );
                }
                Err(error) => spans::record_error(&self.span, error),
            }
        }
        done
    }
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("cancel_requested", &self.is_cancel_requested())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("agent_kind", &self.agent_kind)
            .field("tools_structured", &self.tools_structured)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for UniversalEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UniversalEvents").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for WrapperEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrapperEvents").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion").finish_non_exhaustive()
    }
}
