//! A run's words: its completion and usage, the caller's answers to its permission requests and
//! questions, and its control side. The handle that reads its events is the contract's
//! ([`crate::contract::handle`]), above the pipeline that carries them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::vocabulary::error::AgentError;

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
    pub session: Option<crate::vocabulary::session_ref::SessionRef>,
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
    /// the agent's own means (`agent_api.control.steer`: a steer request of its protocol, or a
    /// user message sent in mid-turn on a two-way stream), without cancelling anything. It returns
    /// once the agent has taken the message; the message is then a user message item of the same
    /// turn in the transcript (a `user` text event in the wrapper view), and the agent reads it at
    /// its next step. Never emulated: an agent that cannot be steered refuses with
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

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("cancel_requested", &self.is_cancel_requested())
            .finish_non_exhaustive()
    }
}
