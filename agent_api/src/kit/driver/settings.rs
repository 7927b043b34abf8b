//! The tunables of one run, from the backend's defaults and the caller's request.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::super::lines::DEFAULT_LINE_CAP;
use crate::pipeline::budget::DEFAULT_BUFFER_BUDGET;
use crate::vocabulary::capability::CapabilitySet;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::request::RunRequest;

/// Default limit of replies waiting for the agent to read its stdin: 1 MiB.
pub const DEFAULT_INPUT_LIMIT: usize = 1024 * 1024;

/// Tunables of one run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunSettings {
    /// The backend's kind.
    pub agent_kind: AgentKind,
    /// Fill `raw` in universal events.
    pub include_raw: bool,
    /// Overall timeout. `Duration::MAX` (or anything past the clock's range) means none.
    pub timeout: Option<Duration>,
    /// Until the agent's first message ([`RunRequest::startup_timeout`]).
    pub startup_timeout: Option<Duration>,
    /// Without output while a run or turn is in progress ([`RunRequest::idle_timeout`]).
    pub idle_timeout: Option<Duration>,
    /// Per turn ([`RunRequest::turn_timeout`]).
    pub turn_timeout: Option<Duration>,
    /// Turn, token and cost limits, checked against each completion's usage.
    pub limits: crate::vocabulary::request::Limits,
    /// Between the soft interrupt and SIGTERM to the group.
    pub cancel_grace: Duration,
    /// Between SIGTERM and SIGKILL.
    pub term_grace: Duration,
    /// Between [`Ctx::shutdown`](super::Ctx::shutdown) and SIGTERM, if the agent has not exited.
    pub shutdown_grace: Duration,
    /// After the process exits, how long its output may still drain.
    pub drain_grace: Duration,
    /// After the agent closes its output, how long it may live on before the run fails
    /// ([`AgentError::OutputClosed`](crate::AgentError::OutputClosed)) and its group is killed.
    pub output_closed_grace: Duration,
    /// Whether tool events carry the tools facet.
    pub tools_structured: bool,
    /// Whether a warm session's turns may carry images (the backend advertises
    /// `agent_api.input.images`); a turn with images is refused otherwise.
    pub prompt_images: bool,
    /// Largest native line kept; longer ones are skipped and reported.
    pub line_cap: usize,
    /// Bytes of events that may wait for the caller; when they do, the run stops reading the
    /// agent's output and the agent blocks on its pipe.
    pub buffer_budget: usize,
    /// Bytes of replies that may wait for the agent to read its stdin before the run fails
    /// ([`AgentError::InputBlocked`](crate::AgentError::InputBlocked)).
    pub input_limit: usize,
    /// The caller's token that cancels the run (see [`RunRequest::with_cancellation`]).
    pub cancellation: Option<CancellationToken>,
    /// How long permission requests and questions wait for the caller, and what then.
    pub caller_wait: crate::vocabulary::request::CallerWait,
    /// The request's output schema: a successful run's answer must fit it
    /// ([`crate::kit::structured::conform`]).
    pub output_schema: Option<serde_json::Value>,
    /// Where the agent runs (absolute), for the completion's [`crate::request::SessionRef`]; the
    /// process's current directory when `None`.
    pub working_dir: Option<std::path::PathBuf>,
    /// The mode the agent works in (the request's, then each switch a session makes); `None`
    /// is the agent's default.
    pub mode: Option<crate::vocabulary::modes::AgentMode>,
    /// What must live exactly as long as the run (the caller-tools MCP server, a config file
    /// holding a secret): dropped when the driver ends, however the run ends.
    pub held: Vec<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

impl RunSettings {
    /// Defaults for a backend: 16 MiB line cap, 1 MiB buffer budget, 3 s cancel grace, 2 s term grace.
    pub fn new(agent_kind: AgentKind) -> Self {
        Self {
            agent_kind,
            include_raw: false,
            timeout: None,
            startup_timeout: None,
            idle_timeout: None,
            turn_timeout: None,
            limits: crate::vocabulary::request::Limits::default(),
            cancel_grace: Duration::from_secs(3),
            term_grace: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            drain_grace: Duration::from_secs(2),
            output_closed_grace: Duration::from_secs(5),
            tools_structured: false,
            prompt_images: false,
            line_cap: DEFAULT_LINE_CAP,
            buffer_budget: DEFAULT_BUFFER_BUDGET,
            input_limit: DEFAULT_INPUT_LIMIT,
            cancellation: None,
            caller_wait: crate::vocabulary::request::CallerWait::default(),
            output_schema: None,
            working_dir: None,
            mode: None,
            held: Vec::new(),
        }
    }

    /// Defaults plus what the request sets (raw payloads, timeout, buffer budget, cancellation)
    /// and, from the backend's capabilities, whether tool events carry the tools facet.
    pub fn for_request(
        agent_kind: AgentKind,
        request: &RunRequest,
        capabilities: &CapabilitySet,
    ) -> Self {
        let mut settings = Self::new(agent_kind);
        settings.include_raw = request.include_raw;
        settings.timeout = request.timeout;
        settings.startup_timeout = request.startup_timeout;
        settings.idle_timeout = request.idle_timeout;
        settings.turn_timeout = request.turn_timeout;
        settings.limits = request.limits;
        settings.tools_structured =
            capabilities.contains(agent_api_capabilities::TOOLS_STRUCTURED_V1);
        settings.prompt_images = capabilities.contains(agent_api_capabilities::IMAGES);
        settings.cancellation = request.cancellation.clone();
        settings.caller_wait = request.caller_wait;
        settings.mode = request.mode.clone();
        settings.output_schema = request.portable.output_schema.clone();
        settings.working_dir = request
            .session_working_dir()
            .map(crate::vocabulary::session_ref::absolute);
        if let Some(budget) = request.buffer_budget {
            settings.buffer_budget = budget;
        }
        settings
    }

    /// Keeps `thing`, if any, alive until the run ends ([`RunSettings::held`]).
    pub fn hold<T: std::any::Any + Send + Sync>(&mut self, thing: Option<T>) {
        if let Some(thing) = thing {
            self.held.push(std::sync::Arc::new(thing));
        }
    }
}

// Here rather than beside `TimeoutLimits`, in the vocabulary, which knows nothing of the driver's settings.
impl crate::vocabulary::error::TimeoutLimits {
    /// The limits the driver's settings carry.
    pub(crate) fn of_settings(settings: &RunSettings) -> Self {
        Self {
            total: settings.timeout,
            startup: settings.startup_timeout,
            idle: settings.idle_timeout,
            turn: settings.turn_timeout,
        }
    }
}
