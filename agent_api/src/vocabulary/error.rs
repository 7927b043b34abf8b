//! [`AgentError`]: every way a request or a run can fail, as one enum to match on.

use std::path::PathBuf;
use std::time::Duration;

/// Every failure `agent_api` reports. Match on the variant; never compare messages.
///
/// Messages never quote a raw backend line: fields hold parsed, bounded values. The one place
/// stderr text shows is [`AgentError::ProcessExited`]: the last few lines, cut and with secrets
/// masked, so that a crash says why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// An agent kind did not match `^[a-z][a-z0-9_]*$`.
    #[error("invalid agent kind {value:?}: must match ^[a-z][a-z0-9_]*$")]
    InvalidAgentKind {
        /// The rejected value.
        value: String,
    },
    /// No backend is registered for the kind.
    #[error("no backend registered for agent kind `{kind}`")]
    UnknownBackend {
        /// The kind asked for.
        kind: String,
    },
    /// A backend with this kind is already registered.
    #[error("a backend for agent kind `{kind}` is already registered")]
    DuplicateBackend {
        /// The kind registered twice.
        kind: String,
    },
    /// The request needs a capability the backend does not advertise.
    #[error("backend `{kind}` does not support capability `{capability}`")]
    UnsupportedCapability {
        /// The backend's kind.
        kind: String,
        /// The missing capability id.
        capability: String,
    },
    /// The request needs a part of the library this build was compiled without (a cargo feature
    /// of `agent_api` that is off).
    #[error("this build of agent_api has no `{feature}` feature, which `{capability}` needs")]
    FeatureNotBuilt {
        /// The capability the request needs.
        capability: String,
        /// The cargo feature of `agent_api` that brings it.
        feature: String,
    },
    /// An extension option key that the backend does not know (extensions fail closed).
    #[error("backend `{kind}` does not know extension option `{key}`; {}", known_keys(.known))]
    UnknownExtension {
        /// The backend's kind.
        kind: String,
        /// The unknown key.
        key: String,
        /// Every key the backend knows, in its options struct's field order.
        known: Vec<String>,
    },
    /// An extension option had a value of the wrong shape.
    #[error("extension option `{key}` is invalid: {reason}")]
    InvalidExtension {
        /// The option's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The request is invalid before anything is spawned.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// The agent's executable was not found.
    #[error("agent binary `{program}` not found (install it or set its path)")]
    BinaryNotFound {
        /// The program looked for.
        program: PathBuf,
    },
    /// The request's launcher cannot run on this machine: its program is not installed.
    #[error("launcher `{launcher}` is unavailable: `{program}` not found")]
    LauncherUnavailable {
        /// The launcher, as [`crate::request::Launcher`]'s Display shows it.
        launcher: String,
        /// Its program, looked for on `PATH`.
        program: PathBuf,
    },
    /// An argument of the agent's argv cannot be written as a shell word (it holds a NUL byte),
    /// and the launcher needs one command string.
    #[error("argument {index} of the agent's command cannot be quoted for a shell")]
    UnquotableArgument {
        /// Its index in the argv (0 is the program).
        index: usize,
    },
    /// An argument of the agent's argv is longer than the system lets one argument be (a JSON
    /// Schema passed on a command line, say): refused before anything starts, where the spawn
    /// would fail with "Argument list too long".
    #[error("argument {index} of the agent's command is {bytes} bytes; one argument may hold at most {max}")]
    ArgumentTooLong {
        /// Its index in the argv (0 is the program).
        index: usize,
        /// Its size in bytes.
        bytes: usize,
        /// The most one argument may hold.
        max: usize,
    },
    /// Spawning the agent failed.
    #[error("failed to spawn `{program}`: {source}")]
    Spawn {
        /// The program spawned.
        program: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The agent's working directory does not exist, is not a directory, or cannot be entered.
    #[error("cannot use `{path}` as the agent's working directory: {source}")]
    WorkingDir {
        /// The directory asked for.
        path: PathBuf,
        /// Why it cannot be used.
        source: std::io::Error,
    },
    /// Reading from or writing to the agent failed.
    #[error("I/O error talking to the agent: {0}")]
    Io(#[from] std::io::Error),
    /// The caller cancelled the run.
    #[error("run cancelled")]
    Cancelled,
    /// The run exceeded one of its timeouts.
    #[error("run timed out: no {which} within {:.1} s", after.as_secs_f64())]
    Timeout {
        /// Which timeout expired.
        which: TimeoutKind,
        /// The timeout that expired.
        after: Duration,
    },
    /// The agent refused the credentials.
    #[error("authentication failed: {message}")]
    Auth {
        /// The agent's parsed, bounded explanation.
        message: String,
    },
    /// The model service refused for the caller's rate or quota (HTTP 429): retrying later, or
    /// after the reset time a `rate_limited` status event gave, can succeed.
    #[error("rate limited: {message}")]
    RateLimited {
        /// The agent's parsed, bounded explanation.
        message: String,
    },
    /// The model service is overloaded for everyone (HTTP 529, 503, `overloaded_error`): not the
    /// caller's quota; retrying later can succeed.
    #[error("model service overloaded{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Overloaded {
        /// HTTP status, when the agent reported one.
        status: Option<u16>,
        /// The agent's parsed, bounded explanation.
        message: String,
    },
    /// The model service failed.
    #[error("model server error{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    ServerError {
        /// HTTP status, when the agent reported one.
        status: Option<u16>,
        /// The agent's parsed, bounded explanation.
        message: String,
    },
    /// The agent reported a failure of another kind.
    #[error("agent reported an error: {message}")]
    AgentFailed {
        /// The agent's parsed, bounded explanation.
        message: String,
    },
    /// The agent process exited before finishing the run (crash, early exit, killed by a signal).
    /// The message names the last line of its stderr, when it printed one.
    #[error("agent process exited before the run finished ({}){}", describe_exit(*exit_code, *signal), last_stderr_line(stderr))]
    ProcessExited {
        /// Exit code, if it exited normally.
        exit_code: Option<i32>,
        /// Signal number, if a signal ended it.
        signal: Option<i32>,
        /// The last lines of its stderr (at most [`crate::kit::stderr::ERROR_LINES`], each cut to
        /// [`crate::kit::stderr::ERROR_LINE_BYTES`]), secrets masked; empty when it printed none.
        stderr: Vec<String>,
    },
    /// The agent's output had a line over the line cap ([`crate::kit::lines::DEFAULT_LINE_CAP`]
    /// unless the backend sets its own), skipped unread, and the run could not finish without
    /// it: the agent exited cleanly, its answer (or result, or structured answer) in that line.
    #[error("the agent's output had a line of {bytes} bytes, over the {cap}-byte line cap: it was skipped, and the run's answer with it")]
    LineOverCap {
        /// The longest skipped line, in bytes.
        bytes: u64,
        /// The line cap, in bytes.
        cap: u64,
    },
    /// The agent broke its protocol (for example a required message never came).
    #[error("agent protocol error: {reason}")]
    Protocol {
        /// What went wrong, without quoting native lines.
        reason: String,
    },
    /// The agent refused a permission mode it was asked to run in.
    #[error("the agent refused permission mode `{mode}`: {reason}")]
    PermissionModeRefused {
        /// The refused mode.
        mode: String,
        /// Why, and how to allow it.
        reason: String,
    },
    /// No pending permission request has this id.
    #[error("no pending permission request with id `{id}`")]
    UnknownPermission {
        /// The id given.
        id: String,
    },
    /// No pending question has this id.
    #[error("no pending question with id `{id}`")]
    UnknownQuestion {
        /// The id given.
        id: String,
    },
    /// The permission request or question with this id was already resolved (answered, decided
    /// by the policy, withdrawn by the agent or closed by a cancel).
    #[error("the request with id `{id}` was already resolved")]
    AlreadyResolved {
        /// The id given.
        id: String,
    },
    /// The run has already finished, so the control command had no effect.
    #[error("the run has already finished")]
    RunFinished,
    /// `RunControl::steer` found no turn running to take the message (it had not started, or
    /// it had ended); nothing was sent.
    #[error("no turn is running to steer")]
    NoTurnRunning,
    /// The turn ended before the agent took the steering message: it is in no turn.
    #[error("the turn ended before the agent took the steering message")]
    TurnEndedBeforeSteer,
    /// The agent can be steered, but refused this message now (while it compacts its context or
    /// reviews, say), in its own words.
    #[error("the agent refused the steering message: {reason}")]
    SteerRefused {
        /// The agent's reason, cut and masked.
        reason: String,
    },
    /// The agent stopped reading its stdin: the replies waiting for it reached the run's limit.
    #[error("the agent stopped reading its input ({queued_bytes} bytes of replies waiting)")]
    InputBlocked {
        /// Bytes waiting to be written to the agent's stdin.
        queued_bytes: u64,
    },
    /// The agent closed its output but did not exit within the grace period.
    #[error("the agent closed its output but kept running for {:.1} s", grace.as_secs_f64())]
    OutputClosed {
        /// How long the run waited for the agent to exit after its output closed.
        grace: Duration,
    },
    /// An HTTP exchange with an agent's local server failed.
    #[error("HTTP exchange with the agent failed{}: {reason}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Http {
        /// The response status, when there was a response.
        status: Option<u16>,
        /// What went wrong, without quoting the response body.
        reason: String,
    },
    /// The session to resume or fork does not exist (as far as the agent can tell).
    #[error("no session `{id}` to continue")]
    SessionNotFound {
        /// The native session id asked for.
        id: String,
    },
    /// A turn was sent while the session's previous turn is still in progress.
    #[error("the session's previous turn is still in progress")]
    TurnInProgress,
    /// The session has ended (closed, or its agent process is gone); it takes no more turns.
    #[error("the session is closed")]
    SessionClosed,
    /// The agent's local server did not start listening in time.
    #[error("the agent's server did not become ready within {waited:?}")]
    ServerNotReady {
        /// How long the backend waited after starting it.
        waited: Duration,
    },
    /// The agent could not reach the service it needs (for example its vendor's server): nothing
    /// was asked of the model.
    #[error("the agent could not connect to {service}")]
    ServiceUnreachable {
        /// Which service, in words (`the My Agent server`); never a URL with credentials.
        service: String,
    },
    /// A recorded session could not be read.
    #[error("cannot replay: {reason}")]
    Replay {
        /// What is wrong with the recording.
        reason: String,
    },
    /// A file given as a recording of an agent's output is one of an agent's own stored
    /// sessions: read it through [`crate::history`] instead.
    #[error("this file looks like {looks_like}, not a recording of an agent's output; read it as a stored session (`agent-api history`)")]
    StoredSessionFile {
        /// What the file looks like.
        looks_like: StoreShape,
    },
    /// The run reached one of the limits its request set (see [`crate::request::Limits`]).
    #[error("the run reached its {limit} limit")]
    LimitReached {
        /// Which limit.
        limit: LimitKind,
    },
    /// The run's own home directory (see [`crate::kit::home::Home`]) could not be made or seeded.
    #[error("cannot set up the run's home at `{path}`: {source}")]
    HomeSetup {
        /// The directory or file concerned.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The request's mode is not one the agent offers ([`crate::request::AgentMode`]); refused before spawn.
    #[error("agent `{kind}` has no mode `{mode}`; {}", choices("modes", .valid))]
    UnknownMode {
        /// The backend's agent kind.
        kind: String,
        /// The mode asked for (one line, bounded).
        mode: String,
        /// The modes the agent offers.
        valid: Vec<String>,
    },
    /// The request's variant is not one the agent offers for its model ([`crate::request::AgentMode`]);
    /// refused before spawn.
    #[error("agent `{kind}` has no variant `{variant}`{}; {}", model.as_ref().map(|m| format!(" for model `{m}`")).unwrap_or_default(), choices("variants", .valid))]
    UnknownVariant {
        /// The backend's agent kind.
        kind: String,
        /// The variant asked for (one line, bounded).
        variant: String,
        /// The model the request chose, if any (variants may differ per model).
        model: Option<String>,
        /// The variants the agent offers for that model.
        valid: Vec<String>,
    },
    /// The final answer is not JSON that fits the request's output schema.
    #[error("the answer does not fit the output schema: {reason}")]
    StructuredOutput {
        /// What is wrong (the JSON parse error or the schema validation message), bounded.
        reason: String,
    },
    /// A session snapshot could not be read, taken or restored
    /// ([`crate::snapshot::SnapshotError`]); the session continues by replay, flagged.
    #[error("session snapshot: {0}")]
    Snapshot(crate::vocabulary::snapshot_error::SnapshotError),
}

impl From<crate::vocabulary::snapshot_error::SnapshotError> for AgentError {
    fn from(e: crate::vocabulary::snapshot_error::SnapshotError) -> Self {
        AgentError::Snapshot(e)
    }
}

/// `; stderr ends: <line>` for a process that printed something on stderr.
fn last_stderr_line(stderr: &[String]) -> String {
    stderr
        .last()
        .map(|line| format!("; its stderr ends: {line}"))
        .unwrap_or_default()
}

fn describe_exit(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => "unknown status".to_string(),
    }
}

impl AgentError {
    /// A further turn sent to a run of `run` (a backend's interface) built for one turn only.
    pub fn no_more_turns(run: &str) -> Self {
        AgentError::InvalidRequest {
            reason: format!("this {run} run takes no more turns"),
        }
    }

    /// This error with every text that came from the agent passed through the secret redactor
    /// ([`crate::kit::secrets::redact`]): the kit applies it to every run's and turn's error, whichever
    /// backend built it.
    ///
    /// ```
    /// use agent_api::AgentError;
    /// let error = AgentError::AgentFailed { message: "quota for xsk-proj-Q2x9vLmN4pR7tY1wZ8 spent".into() };
    /// assert!(!error.redacted().to_string().contains("Q2x9vLmN4pR7tY1wZ8"));
    /// ```
    pub fn redacted(mut self) -> Self {
        let text = match &mut self {
            Self::Auth { message }
            | Self::RateLimited { message }
            | Self::Overloaded { message, .. }
            | Self::ServerError { message, .. }
            | Self::AgentFailed { message } => message,
            Self::Protocol { reason }
            | Self::PermissionModeRefused { reason, .. }
            | Self::Http { reason, .. }
            | Self::Replay { reason }
            | Self::SteerRefused { reason }
            | Self::StructuredOutput { reason } => reason,
            _ => return self,
        };
        if let std::borrow::Cow::Owned(masked) = crate::guards::secrets::redact(text) {
            *text = masked;
        }
        self
    }

    /// The typed error for a model API's HTTP `status`, one table for every backend: 401 and 403
    /// [`Auth`](AgentError::Auth), 429 [`RateLimited`](AgentError::RateLimited), 503 and 529
    /// [`Overloaded`](AgentError::Overloaded), other 5xx [`ServerError`](AgentError::ServerError),
    /// anything else [`AgentFailed`](AgentError::AgentFailed). `message` must already be bounded and
    /// redacted.
    pub fn of_http_status(status: u16, message: String) -> AgentError {
        match status {
            401 | 403 => AgentError::Auth { message },
            429 => AgentError::RateLimited { message },
            503 | 529 => AgentError::Overloaded {
                status: Some(status),
                message,
            },
            500..=599 => AgentError::ServerError {
                status: Some(status),
                message,
            },
            _ => AgentError::AgentFailed { message },
        }
    }

    /// A stable snake_case code for the variant, used as `code` in universal `error` events.
    pub fn code(&self) -> &'static str {
        match self {
            AgentError::InvalidAgentKind { .. } => "invalid_agent_kind",
            AgentError::UnknownBackend { .. } => "unknown_backend",
            AgentError::DuplicateBackend { .. } => "duplicate_backend",
            AgentError::UnsupportedCapability { .. } => "unsupported_capability",
            AgentError::FeatureNotBuilt { .. } => "feature_not_built",
            AgentError::UnknownExtension { .. } => "unknown_extension",
            AgentError::InvalidExtension { .. } => "invalid_extension",
            AgentError::InvalidRequest { .. } => "invalid_request",
            AgentError::BinaryNotFound { .. } => "binary_not_found",
            AgentError::Spawn { .. } => "spawn",
            AgentError::LauncherUnavailable { .. } => "launcher_unavailable",
            AgentError::UnquotableArgument { .. } => "unquotable_argument",
            AgentError::ArgumentTooLong { .. } => "argument_too_long",
            AgentError::WorkingDir { .. } => "working_dir",
            AgentError::Io(_) => "io",
            AgentError::Cancelled => "cancelled",
            AgentError::Timeout { .. } => "timeout",
            AgentError::Auth { .. } => "auth",
            AgentError::RateLimited { .. } => "rate_limited",
            AgentError::Overloaded { .. } => "overloaded",
            AgentError::ServerError { .. } => "server_error",
            AgentError::AgentFailed { .. } => "agent_failed",
            AgentError::ProcessExited { .. } => "process_exited",
            AgentError::LineOverCap { .. } => "line_over_cap",
            AgentError::Protocol { .. } => "protocol",
            AgentError::PermissionModeRefused { .. } => "permission_mode_refused",
            AgentError::UnknownPermission { .. } => "unknown_permission",
            AgentError::UnknownQuestion { .. } => "unknown_question",
            AgentError::AlreadyResolved { .. } => "already_resolved",
            AgentError::RunFinished => "run_finished",
            AgentError::NoTurnRunning => "no_turn_running",
            AgentError::TurnEndedBeforeSteer => "turn_ended_before_steer",
            AgentError::SteerRefused { .. } => "steer_refused",
            AgentError::InputBlocked { .. } => "input_blocked",
            AgentError::OutputClosed { .. } => "output_closed",
            AgentError::Http { .. } => "http",
            AgentError::SessionNotFound { .. } => "session_not_found",
            AgentError::TurnInProgress => "turn_in_progress",
            AgentError::ServerNotReady { .. } => "server_not_ready",
            AgentError::SessionClosed => "session_closed",
            AgentError::Replay { .. } => "replay",
            AgentError::ServiceUnreachable { .. } => "service_unreachable",
            AgentError::StoredSessionFile { .. } => "stored_session_file",
            AgentError::HomeSetup { .. } => "home_setup",
            AgentError::LimitReached { .. } => "limit_reached",
            AgentError::StructuredOutput { .. } => "structured_output",
            AgentError::UnknownMode { .. } => "unknown_mode",
            AgentError::UnknownVariant { .. } => "unknown_variant",
            AgentError::Snapshot(_) => "snapshot",
        }
    }
}

/// Which of a run's timeouts expired (see [`crate::RunRequest::timeout`] and its siblings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeoutKind {
    /// The whole run (in a session: the whole turn), [`crate::RunRequest::timeout`].
    Total,
    /// Until the agent's first message, [`crate::RunRequest::startup_timeout`].
    Startup,
    /// Without any output from the agent, [`crate::RunRequest::idle_timeout`].
    Idle,
    /// One turn, [`crate::RunRequest::turn_timeout`].
    Turn,
}

impl TimeoutKind {
    /// A stable snake_case name (`total`, `startup`, `idle`, `turn`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Total => "total",
            Self::Startup => "startup",
            Self::Idle => "idle",
            Self::Turn => "turn",
        }
    }
}

/// The limits one run or session was given; `None` means none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimeoutLimits {
    /// The whole run; in a session, each turn (as before the other timeouts existed).
    pub(crate) total: Option<Duration>,
    /// Until the agent's first message.
    pub(crate) startup: Option<Duration>,
    /// Without any output while the run (or turn) is in progress.
    pub(crate) idle: Option<Duration>,
    /// One turn; a one-shot run is its one turn.
    pub(crate) turn: Option<Duration>,
}

impl TimeoutLimits {
    /// Each kind with its limit: the one list of them (the check before spawn and the clock read it).
    pub(crate) fn each(&self) -> [(TimeoutKind, Option<Duration>); 4] {
        [
            (TimeoutKind::Total, self.total),
            (TimeoutKind::Turn, self.turn),
            (TimeoutKind::Startup, self.startup),
            (TimeoutKind::Idle, self.idle),
        ]
    }
}

/// In words, as the timeout error says what did not happen in time.
impl std::fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Total => "end of the run",
            Self::Startup => "first message from the agent",
            Self::Idle => "output from the agent (idle)",
            Self::Turn => "end of the turn",
        })
    }
}

/// Which of a run's limits was reached (see [`crate::request::Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitKind {
    /// [`crate::request::Limits::max_turns`].
    Turns,
    /// [`crate::request::Limits::max_total_tokens`].
    TotalTokens,
    /// [`crate::request::Limits::max_cost_usd`].
    CostUsd,
}

/// In words (`turns`, `total tokens`, `cost`).
impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Turns => "turns",
            Self::TotalTokens => "total tokens",
            Self::CostUsd => "cost",
        })
    }
}

/// The list of valid keys an [`AgentError::UnknownExtension`] names.
fn known_keys(known: &[String]) -> String {
    if known.is_empty() {
        "it takes no extension options".into()
    } else {
        format!("its options: {}", known.join(", "))
    }
}

/// What a file of an agent's own store looks like, as the backend that recognized it describes
/// it ([`crate::kit::replay::Replay::store_shape`]): the file in words, with where the agent
/// keeps such files.
///
/// ```
/// use agent_api::history::StoreShape;
///
/// let shape = StoreShape::new("a my-agent session file (~/.my-agent/<id>.jsonl)");
/// assert_eq!(shape.to_string(), "a my-agent session file (~/.my-agent/<id>.jsonl)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreShape {
    /// The file in words.
    pub description: &'static str,
}

impl StoreShape {
    /// A file of an agent's store, `description` in words.
    pub const fn new(description: &'static str) -> Self {
        Self { description }
    }
}

/// The backend's description of the file.
impl std::fmt::Display for StoreShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.description)
    }
}

/// The list of valid values an [`AgentError::UnknownMode`] or [`AgentError::UnknownVariant`] names.
fn choices(what: &str, valid: &[String]) -> String {
    if valid.is_empty() {
        format!("it has no {what}")
    } else {
        format!("its {what}: {}", valid.join(", "))
    }
}
