//! [`RunRequest`]: everything a caller asks of one run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use agent_api_capabilities as caps;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::vocabulary::error::AgentError;
use crate::vocabulary::tools_facet::ToolCategory;

/// The prompt of a run: text, plus images and attachments where the backend can take them.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Prompt {
    /// The user's text.
    pub text: String,
    /// Image files (needs `agent_api.input.images`).
    pub images: Vec<PathBuf>,
    /// Other files (needs `agent_api.input.file_attachments`).
    pub attachments: Vec<PathBuf>,
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Self {
            text: text.to_string(),
            ..Self::default()
        }
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }
}

/// Which session a run continues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionSelector {
    /// A fresh session.
    #[default]
    New,
    /// Resume this session (a completion's [`SessionRef`](crate::request::SessionRef), or a bare native id
    /// through `"id".into()`); the run happens in the session's working directory.
    Resume(crate::vocabulary::session_ref::SessionRef),
    /// Resume the most recent session (in the working dir).
    ResumeLast,
    /// Start a new session that begins as a copy of this one, in its working directory.
    Fork(crate::vocabulary::session_ref::SessionRef),
}

impl SessionSelector {
    /// The session resumed or forked, if any.
    pub fn session_ref(&self) -> Option<&crate::vocabulary::session_ref::SessionRef> {
        match self {
            SessionSelector::Resume(session) | SessionSelector::Fork(session) => Some(session),
            SessionSelector::New | SessionSelector::ResumeLast => None,
        }
    }
}

/// What to do with one category of permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionRule {
    /// Ask the caller (a `permission.requested` event they answer).
    Ask,
    /// Approve without asking.
    Approve,
    /// Deny without asking.
    Deny,
}

/// How permission requests are decided. The SDK applies it (`agent_api::kit::hitl`) to every
/// request the agent makes, for every backend with a request channel, and records each request and
/// its resolution (with who decided) in the transcript. It never tells the agent to stop asking:
/// that is [`RunRequest::skip_permission_prompts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PermissionPolicy {
    /// Every request goes to the caller. Backends without HITL permissions deny what needs one.
    #[default]
    Ask,
    /// Approve every request the agent makes.
    ApproveAll,
    /// Deny everything that needs a permission.
    DenyAll,
    /// Decide per category; categories not listed are asked.
    ByCategory(BTreeMap<ToolCategory, PermissionRule>),
}

impl PermissionPolicy {
    /// The rule for one category.
    pub fn rule(&self, category: ToolCategory) -> PermissionRule {
        match self {
            PermissionPolicy::Ask => PermissionRule::Ask,
            PermissionPolicy::ApproveAll => PermissionRule::Approve,
            PermissionPolicy::DenyAll => PermissionRule::Deny,
            PermissionPolicy::ByCategory(rules) => {
                rules.get(&category).copied().unwrap_or(PermissionRule::Ask)
            }
        }
    }
}

/// Limits the SDK enforces on a run (and passes to the CLI where it has a flag for them):
/// reaching one ends the run with [`AgentError::LimitReached`](crate::AgentError::LimitReached).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// Model turns (requests to the model) in the run.
    pub max_turns: Option<u32>,
    /// Input plus output tokens of the run.
    pub max_total_tokens: Option<u64>,
    /// Cost in US dollars, where the agent reports it.
    pub max_cost_usd: Option<f64>,
}

/// One run's request. Build it with [`RunRequest::new`] and the `with_*` setters.
///
/// ```
/// use agent_api::{RunRequest, SessionSelector};
/// let req = RunRequest::new("list the files")
///     .with_model("gpt-5.5")
///     .with_session(SessionSelector::Resume("thread_1".into()));
/// assert!(req.required_capabilities().contains(agent_api_capabilities::SESSION_RESUME));
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct RunRequest {
    /// The prompt.
    pub prompt: Prompt,
    /// Working directory of the agent; the caller's when `None`.
    pub working_dir: Option<PathBuf>,
    /// Environment variables added to the agent's environment.
    pub env: BTreeMap<String, String>,
    /// Stop the run with a typed Timeout after this long (in a session: each turn).
    pub timeout: Option<Duration>,
    /// Stop the run if the agent's first message has not come after this long
    /// ([`TimeoutKind::Startup`](crate::run::TimeoutKind::Startup)).
    pub startup_timeout: Option<Duration>,
    /// Stop the run after this long without any output from the agent while it works
    /// ([`TimeoutKind::Idle`](crate::run::TimeoutKind::Idle)).
    pub idle_timeout: Option<Duration>,
    /// Stop a session's turn after this long; a one-shot run is its one turn
    /// ([`TimeoutKind::Turn`](crate::run::TimeoutKind::Turn)).
    pub turn_timeout: Option<Duration>,
    /// Model name.
    pub model: Option<String>,
    /// Model variant, such as a reasoning effort: one the backend lists for the model
    /// ([`BackendInfo::variants`](crate::BackendInfo::variants)); needs `agent_api.request.variants`.
    pub variant: Option<String>,
    /// The agent's mode ([`crate::vocabulary::modes::AgentMode`]: plan, the default, or one of the agent's own
    /// the backend lists in [`BackendInfo::modes`](crate::BackendInfo::modes)); any but the default
    /// needs `agent_api.request.modes`.
    pub mode: Option<crate::vocabulary::modes::AgentMode>,
    /// Which session to continue.
    pub session: SessionSelector,
    /// The native id the new session takes, chosen by the caller (a CLI that takes its session
    /// id on the command line): only with [`SessionSelector::New`]; needs
    /// `agent_api.session.caller_id`. An agent that takes only a UUID refuses anything else
    /// before spawning ([`RunRequest::uuid_session_id`]).
    pub new_session_id: Option<String>,
    /// How permission requests are decided.
    pub permissions: PermissionPolicy,
    /// Tell the agent not to ask for permissions at all (its own bypass mode or an approval
    /// policy of `never`): no permission request is made, so none is seen or recorded.
    /// Needs `agent_api.permissions.skip_prompts`; some agents refuse it (one run as root, say).
    pub skip_permission_prompts: bool,
    /// Backend-specific options, keyed `backend.<kind>.<name>`; unknown keys fail closed.
    pub extensions: BTreeMap<String, Value>,
    /// Fill `raw` in universal events with the native payloads.
    pub include_raw: bool,
    /// Bytes of events that may wait for the caller before the run stops reading the agent's
    /// output (`None`: the backend's default, 1 MiB).
    pub buffer_budget: Option<usize>,
    /// Cancels the run when cancelled, as [`RunControl::cancel`](crate::RunControl::cancel) does;
    /// one token can stop many runs.
    pub cancellation: Option<CancellationToken>,
    /// Where the agent keeps its config and state ([`Home::Inherit`](crate::request::Home::Inherit):
    /// the user's own).
    pub home: crate::vocabulary::home::Home,
    /// Turn, token and cost limits.
    pub limits: Limits,
    /// How long a permission request or question may wait for the caller, and what then.
    pub caller_wait: CallerWait,
    /// Portable options (system prompt, extra directories, MCP servers, tool lists, the agent's
    /// own limits, an output schema): each needs its `agent_api.options.*` capability.
    pub portable: crate::vocabulary::portable::PortableOptions,
    /// How the agent's process is started (`None`: the gateway's default, else
    /// [`Launcher::Local`](crate::request::Launcher::Local)); needs the launcher's
    /// `agent_api.launcher.*` capability.
    pub launcher: Option<crate::vocabulary::launcher::Launcher>,
    /// The caller's own tools, served to the agent over MCP ([`crate::kit::caller_tools`]); they need
    /// `agent_api.tools.caller.v1`.
    pub caller_tools: Vec<crate::vocabulary::caller_tool::CallerTool>,
    /// A session to go on from ([`RunRequest::with_snapshot`]); needs `agent_api.session.snapshot`.
    pub snapshot: Option<std::sync::Arc<crate::vocabulary::snapshot::SessionSnapshot>>,
}

/// How long permission requests and questions wait for the caller ([`RunRequest::caller_wait`]).
///
/// By default they wait as long as the run lasts. While one waits, the transcript says so with a
/// `waiting_for_caller` status; past its deadline, [`CallerWait::then`] decides, and the resolved
/// event says `decided_by: timeout`.
///
/// ```
/// use std::time::Duration;
/// use agent_api::request::OnCallerTimeout;
/// use agent_api::RunRequest;
/// let req = RunRequest::new("tidy up").with_permission_timeout(Duration::from_secs(60));
/// assert_eq!(req.caller_wait.permission, Some(Duration::from_secs(60)));
/// assert_eq!(req.caller_wait.then, OnCallerTimeout::Deny);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallerWait {
    /// Longest wait for a permission decision (`None`: no limit).
    pub permission: Option<Duration>,
    /// Longest wait for an answer to a question (`None`: no limit).
    pub question: Option<Duration>,
    /// What a wait past its limit does.
    pub then: OnCallerTimeout,
}

/// What happens to a request the caller left unanswered past its [`CallerWait`] limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnCallerTimeout {
    /// The permission is denied (the question rejected) and the run goes on.
    #[default]
    Deny,
    /// The run is cancelled, as [`RunControl::cancel`](crate::RunControl::cancel) does.
    CancelRun,
}

/// Shows the variable names of `env`, never their values (they are often API keys).
impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("prompt", &self.prompt)
            .field("working_dir", &self.working_dir)
            .field("env", &crate::guards::secrets::EnvNames(&self.env))
            .field("timeout", &self.timeout)
            .field("startup_timeout", &self.startup_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("turn_timeout", &self.turn_timeout)
            .field("model", &self.model)
            .field("variant", &self.variant)
            .field("mode", &self.mode)
            .field("session", &self.session)
            .field("new_session_id", &self.new_session_id)
            .field("permissions", &self.permissions)
            .field(
                "extensions",
                &crate::guards::secrets::Redacted(&self.extensions),
            )
            .field("include_raw", &self.include_raw)
            .field("skip_permission_prompts", &self.skip_permission_prompts)
            .field("cancellation", &self.cancellation)
            .field("buffer_budget", &self.buffer_budget)
            .field("caller_wait", &self.caller_wait)
            .field("home", &self.home)
            .field("limits", &self.limits)
            .field("portable", &self.portable)
            .field("launcher", &self.launcher)
            .field("caller_tools", &self.caller_tools)
            .field(
                "snapshot",
                &self
                    .snapshot
                    .as_ref()
                    .map(|s| (&s.agent, &s.native_session_id)),
            )
            .finish()
    }
}

impl RunRequest {
    /// A request with this prompt and every other field at its default.
    pub fn new(prompt: impl Into<Prompt>) -> Self {
        Self {
            prompt: prompt.into(),
            ..Self::default()
        }
    }

    /// Sets the working directory.
    pub fn with_working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the total timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Limits how long a permission request waits for the caller (see [`CallerWait`]).
    pub fn with_permission_timeout(mut self, limit: Duration) -> Self {
        self.caller_wait.permission = Some(limit);
        self
    }

    /// Limits how long a question waits for the caller (see [`CallerWait`]).
    pub fn with_question_timeout(mut self, limit: Duration) -> Self {
        self.caller_wait.question = Some(limit);
        self
    }

    /// Sets what a request left unanswered past its limit does (default: denied or rejected).
    pub fn with_on_caller_timeout(mut self, then: OnCallerTimeout) -> Self {
        self.caller_wait.then = then;
        self
    }

    /// Sets the start-up timeout (until the agent's first message).
    pub fn with_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = Some(timeout);
        self
    }

    /// Sets the idle timeout (no output from the agent).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Sets the per-turn timeout.
    pub fn with_turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = Some(timeout);
        self
    }

    /// Sets the model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the model variant.
    pub fn with_variant(mut self, variant: impl Into<String>) -> Self {
        self.variant = Some(variant.into());
        self
    }

    /// Sets the agent mode (see [`crate::request::AgentMode`]).
    ///
    /// ```
    /// use agent_api::request::AgentMode;
    /// use agent_api::RunRequest;
    /// let req = RunRequest::new("how would you split this module?").with_mode(AgentMode::Plan);
    /// assert!(req.required_capabilities().contains(agent_api_capabilities::MODES));
    /// assert!(!RunRequest::new("x").with_mode(AgentMode::Default).required_capabilities().contains(agent_api_capabilities::MODES));
    /// ```
    pub fn with_mode(mut self, mode: impl Into<crate::vocabulary::modes::AgentMode>) -> Self {
        self.mode = Some(mode.into());
        self
    }

    /// Goes on with the session `snapshot` holds: the gateway imports it into the run's home
    /// first ([`AgentBackend::import_snapshot`](crate::AgentBackend::import_snapshot), re-keyed to
    /// this request's working directory), then the run resumes the agent's own session natively.
    /// Needs `agent_api.session.snapshot`; replaces the session selector.
    ///
    /// ```
    /// use agent_api::{AgentKind, RunRequest, SessionSnapshot};
    /// let snapshot = SessionSnapshot::new(AgentKind::new("my_agent").unwrap(), "s-1");
    /// let req = RunRequest::new("and then?").with_snapshot(snapshot);
    /// assert!(req.required_capabilities().contains(agent_api_capabilities::SESSION_SNAPSHOT));
    /// ```
    pub fn with_snapshot(mut self, snapshot: crate::vocabulary::snapshot::SessionSnapshot) -> Self {
        self.snapshot = Some(std::sync::Arc::new(snapshot));
        self.session = SessionSelector::New;
        self
    }

    /// Sets the session selector.
    pub fn with_session(mut self, session: SessionSelector) -> Self {
        self.session = session;
        self
    }

    /// Sets the permission policy.
    pub fn with_permissions(mut self, policy: PermissionPolicy) -> Self {
        self.permissions = policy;
        self
    }

    /// Tells the agent to skip its own permission prompts (see [`RunRequest::skip_permission_prompts`]).
    pub fn with_skip_permission_prompts(mut self, skip: bool) -> Self {
        self.skip_permission_prompts = skip;
        self
    }

    /// Sets a backend-specific option.
    pub fn with_extension(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extensions.insert(key.into(), value);
        self
    }

    /// Cancels the run when `token` is cancelled (also when it already is). Share one token, or
    /// child tokens of one, to stop a whole group of runs at once.
    ///
    /// ```
    /// use agent_api::request::CancellationToken;
    /// use agent_api::RunRequest;
    /// let everything = CancellationToken::new();
    /// let a = RunRequest::new("first").with_cancellation(everything.child_token());
    /// let b = RunRequest::new("second").with_cancellation(everything.child_token());
    /// everything.cancel(); // both runs end with AgentError::Cancelled
    /// # assert!(a.cancellation.unwrap().is_cancelled() && b.cancellation.unwrap().is_cancelled());
    /// ```
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }

    /// Starts the new session under this native id (see [`RunRequest::new_session_id`]).
    pub fn with_new_session_id(mut self, id: impl Into<String>) -> Self {
        self.new_session_id = Some(id.into());
        self
    }

    /// Sets where the agent keeps its config and state (see [`crate::request::Home`]).
    pub fn with_home(mut self, home: crate::vocabulary::home::Home) -> Self {
        self.home = home;
        self
    }

    /// Limits the run to `turns` model turns.
    pub fn with_max_turns(mut self, turns: u32) -> Self {
        self.limits.max_turns = Some(turns);
        self
    }

    /// Limits the run to `tokens` input plus output tokens.
    pub fn with_max_total_tokens(mut self, tokens: u64) -> Self {
        self.limits.max_total_tokens = Some(tokens);
        self
    }

    /// Limits the run's cost to `usd` US dollars (where the agent reports cost).
    pub fn with_max_cost_usd(mut self, usd: f64) -> Self {
        self.limits.max_cost_usd = Some(usd);
        self
    }

    /// Asks for native payloads in universal events.
    pub fn with_include_raw(mut self, include_raw: bool) -> Self {
        self.include_raw = include_raw;
        self
    }

    /// Sets the byte budget of events waiting for the caller (at least 1 byte; see
    /// `spec/run-protocol.md`).
    pub fn with_buffer_budget(mut self, bytes: usize) -> Self {
        self.buffer_budget = Some(bytes);
        self
    }

    /// Sets the portable options (see [`PortableOptions`](crate::PortableOptions)).
    pub fn with_portable(mut self, options: crate::vocabulary::portable::PortableOptions) -> Self {
        self.portable = options;
        self
    }

    /// Runs the agent through `launcher` (see [`crate::kit::launch`]).
    ///
    /// ```
    /// use agent_api::request::{Bwrap, Launcher};
    /// let req = agent_api::RunRequest::new("fix the tests").with_launcher(Launcher::Sandbox(Bwrap::new()));
    /// assert!(req.required_capabilities().contains(agent_api_capabilities::LAUNCHER_BWRAP));
    /// ```
    pub fn with_launcher(mut self, launcher: crate::vocabulary::launcher::Launcher) -> Self {
        self.launcher = Some(launcher);
        self
    }

    /// Where the run happens: the resumed or forked session's working directory when its handle
    /// has one (a session lives there: some agents find it only from there), else
    /// [`RunRequest::working_dir`].
    pub fn session_working_dir(&self) -> Option<&std::path::Path> {
        self.session
            .session_ref()
            .and_then(|s| s.working_dir())
            .or(self.working_dir.as_deref())
    }

    /// The request a backend runs: `working_dir` set to [`RunRequest::session_working_dir`], or
    /// to `backend_default` (the backend's configured directory) when neither is set. Backends
    /// call it first in `run` and `open_session`, so every later reading of `working_dir` is right.
    pub fn in_session_dir(mut self, backend_default: Option<&std::path::Path>) -> Self {
        self.working_dir = self
            .session_working_dir()
            .or(backend_default)
            .map(std::path::Path::to_path_buf);
        self
    }

    /// Adds a caller-defined tool: `handler` answers each call the agent makes to `name` with
    /// the tool's input (a JSON object fitting `input_schema`); its error becomes the tool's error
    /// result (see [`crate::kit::caller_tools`]).
    pub fn with_tool<F, Fut, O, E>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<O, E>> + Send + 'static,
        O: Into<crate::vocabulary::caller_tool::ToolOutput>,
        E: std::fmt::Display,
    {
        self.with_caller_tool(crate::vocabulary::caller_tool::CallerTool::new(
            name,
            description,
            input_schema,
            handler,
        ))
    }

    /// Adds a caller-defined tool built with [`crate::request::CallerTool::new`] (to set its timeout).
    pub fn with_caller_tool(mut self, tool: crate::vocabulary::caller_tool::CallerTool) -> Self {
        self.caller_tools.push(tool);
        self
    }

    /// The capability ids a backend must advertise to serve this request.
    pub fn required_capabilities(&self) -> BTreeSet<&'static str> {
        let mut needed = BTreeSet::from([caps::RUN]);
        if !self.prompt.images.is_empty() {
            needed.insert(caps::IMAGES);
        }
        if !self.prompt.attachments.is_empty() {
            needed.insert(caps::FILE_ATTACHMENTS);
        }
        match self.session {
            SessionSelector::New => {}
            SessionSelector::Resume(_) | SessionSelector::ResumeLast => {
                needed.insert(caps::SESSION_RESUME);
            }
            SessionSelector::Fork(_) => {
                needed.insert(caps::SESSION_FORK);
            }
        }
        if self.new_session_id.is_some() {
            needed.insert(caps::SESSION_CALLER_ID);
        }
        if self.snapshot.is_some() {
            needed.insert(caps::SESSION_SNAPSHOT);
            needed.insert(caps::SESSION_RESUME);
        }
        if self.model.is_some() {
            needed.insert(caps::MODEL_SELECTION);
        }
        if self.variant.is_some() {
            needed.insert(caps::VARIANTS);
        }
        // The default mode is every agent's: choosing it asks nothing of the backend.
        if self
            .mode
            .as_ref()
            .is_some_and(|m| *m != crate::vocabulary::modes::AgentMode::Default)
        {
            needed.insert(caps::MODES);
        }
        if self.skip_permission_prompts {
            needed.insert(caps::SKIP_PERMISSION_PROMPTS);
        }
        needed.extend(self.home.required_capability());
        needed.extend(self.portable.required_capabilities());
        // Every backend can run locally; only another launcher needs the backend to spawn through the kit.
        if let Some(launcher) = self
            .launcher
            .as_ref()
            .filter(|l| **l != crate::vocabulary::launcher::Launcher::Local)
        {
            needed.insert(launcher.capability());
        }
        if !self.caller_tools.is_empty() {
            needed.insert(caps::CALLER_TOOLS);
        }
        needed
    }
}

// Here rather than in `run`, which stands below requests and knows nothing of their limits.
impl crate::vocabulary::run::Usage {
    /// The first of `limits` this usage goes past, if any.
    pub fn exceeded(&self, limits: &Limits) -> Option<crate::vocabulary::error::LimitKind> {
        use crate::vocabulary::error::LimitKind;
        let over = |value: Option<f64>, limit: Option<f64>| matches!((value, limit), (Some(v), Some(l)) if v > l);
        if over(self.turns.map(f64::from), limits.max_turns.map(f64::from)) {
            Some(LimitKind::Turns)
        } else if matches!((self.total_tokens(), limits.max_total_tokens), (Some(v), Some(l)) if v > l)
        {
            Some(LimitKind::TotalTokens)
        } else if over(self.cost_usd, limits.max_cost_usd) {
            Some(LimitKind::CostUsd)
        } else {
            None
        }
    }
}

impl RunRequest {
    /// Each timeout the request sets (`None`: none), by kind.
    pub(crate) fn timeouts(&self) -> crate::vocabulary::error::TimeoutLimits {
        crate::vocabulary::error::TimeoutLimits {
            total: self.timeout,
            startup: self.startup_timeout,
            idle: self.idle_timeout,
            turn: self.turn_timeout,
        }
    }

    /// A caller-chosen session id fits only a new session, and must be a plain token (it becomes an
    /// argument and a file name): refused before spawning otherwise.
    pub(crate) fn check_new_session_id(&self) -> Result<(), AgentError> {
        let request = self;
        let Some(id) = &request.new_session_id else {
            return Ok(());
        };
        if request.session != SessionSelector::New {
            return Err(AgentError::InvalidRequest {
                reason: "a caller-chosen session id needs a new session".into(),
            });
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        // A leading `-` would read as a flag.
        if id.len() > 128
            || !id.starts_with(|c: char| c.is_ascii_alphanumeric())
            || !id.chars().all(plain)
        {
            return Err(AgentError::InvalidRequest {
                reason: "a session id is 1 to 128 letters, digits, `-` or `_`, starting with a letter or digit".into(),
            });
        }
        Ok(())
    }

    /// The request's caller-chosen session id for an agent that takes only UUIDs: `InvalidRequest`
    /// before spawning when it is something else.
    pub fn uuid_session_id(&self) -> Result<Option<&str>, AgentError> {
        let request = self;
        match request.new_session_id.as_deref() {
            Some(id) if !crate::vocabulary::session_ref::is_uuid(id) => {
                Err(AgentError::InvalidRequest {
                    reason: "this agent takes only a UUID as session id".into(),
                })
            }
            id => Ok(id),
        }
    }
}
