//! The request and response bodies, with the reference's field names: camelCase wrappers
//! (`hasMore`, `sessionId`, `eventCount`), snake_case events. Fields beyond the reference are
//! optional, so a client written against it never sees a difference.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

/// The wire's name for an agent's own default mode (the reference's `build`).
pub(crate) const DEFAULT_MODE: &str = "build";

/// `GET /v1/health`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HealthResponse {
    /// `ok`.
    pub status: String,
}

/// `GET /v1/whoami`: what the request's token may do and whose sessions it sees.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WhoAmIResponse {
    /// The tenant whose sessions the token sees; absent: every session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `read`, `operate` or `admin`.
    pub scope: String,
    /// The id of the stored token (`agent-api token list`); absent for the server's own token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
}

/// A unix time in milliseconds as RFC 3339 (UTC); empty when out of range.
pub(crate) fn rfc3339_ms(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// What an agent shows in the session transcript, as the reference's booleans.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct AgentCapabilities {
    pub plan_mode: bool,
    pub permissions: bool,
    pub questions: bool,
    pub tool_calls: bool,
    pub tool_results: bool,
    pub text_messages: bool,
    pub images: bool,
    pub file_attachments: bool,
    pub session_lifecycle: bool,
    pub error_events: bool,
    pub reasoning: bool,
    pub status: bool,
    pub command_execution: bool,
    pub file_changes: bool,
    pub mcp_tools: bool,
    pub streaming_deltas: bool,
    pub item_started: bool,
    /// Whether one agent process serves every turn of a session (a warm session).
    pub shared_process: bool,
}

/// One agent the server can run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    /// The agent id (this server's kind name; the reference's ids are accepted as aliases).
    pub id: String,
    /// Whether it can run here as this server is configured: its CLI was found, and its
    /// sessions' template names everything it needs (see `needsOption`).
    pub installed: bool,
    /// The backend option a session must set before this agent can run anything (the generic
    /// ACP kind's `backend.acp.command`), when this server's defaults do not set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_option: Option<String>,
    /// Why it cannot run here (`installed: false`), for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its CLI's version, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its CLI's path, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What it shows.
    pub capabilities: AgentCapabilities,
    /// The reference's shared server process state: never set here (each session owns its
    /// agent process; see `capabilities.sharedProcess`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_status: Option<ServerStatusInfo>,
    /// Every capability id it advertises (beyond the reference).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capability_ids: Vec<String>,
}

/// The state of an agent's shared server process (the reference's; not reported here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ServerStatus {
    Running,
    Stopped,
    Error,
}

/// An agent's shared server process (the reference's; not reported here).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatusInfo {
    /// Its state.
    pub status: ServerStatus,
    /// How many times it was restarted.
    pub restart_count: u64,
    /// Where it listens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Its last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How long it has run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_ms: Option<u64>,
}

/// `GET /v1/agents`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentListResponse {
    /// The agents.
    pub agents: Vec<AgentInfo>,
}

/// One agent mode.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentModeInfo {
    /// Its id (`build`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
}

/// `GET /v1/agents/{agent}/modes`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentModesResponse {
    /// The modes.
    pub modes: Vec<AgentModeInfo>,
}

/// One session in an agent's own store (`agent-api history`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredSessionInfo {
    /// The agent's own session id: what `resume` takes, and the history's events endpoint.
    pub id: String,
    /// When it was last written (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The working directory it ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The first prompt, cut short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
    /// The title the agent gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Bytes it takes in the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// `GET /v1/agents/{agent}/history`: the agent's own stored sessions, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoredSessionListResponse {
    /// The sessions.
    pub sessions: Vec<StoredSessionInfo>,
}

/// The query of `GET /v1/agents/{agent}/history`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct HistoryQuery {
    /// Only the sessions that ran in this working directory.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// `POST /v1/agents/{agent}/install`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct AgentInstallRequest {
    /// Install again when installed.
    #[serde(default)]
    pub reinstall: Option<bool>,
}

/// `POST /v1/sessions/{session_id}`: the reference's fields, and optional ones of this server.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionRequest {
    /// The agent id (this server's kind name, as `GET /v1/agents` lists it; the reference's ids
    /// are accepted as aliases).
    pub agent: String,
    /// Where the agent works: a directory beneath the session's working-directory root (its
    /// tenant's, else the server's `--cwd`), relative to it or absolute; default: the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session's options (the reference's `agentMode`, `model`, … and this server's).
    #[serde(flatten)]
    pub settings: SessionSettings,
}

/// What a session's turns run with: on its creation, and (repeated, or `agentMode` switched) in a
/// message (`spec/http-api.md`, "Per-message options").
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSettings {
    /// `build` (the only mode every agent has).
    #[serde(default)]
    pub agent_mode: Option<String>,
    /// Not supported: an agent runs the version installed (a request naming one is refused).
    #[serde(default)]
    pub agent_version: Option<String>,
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// `default` (the server's `--approve`), `bypass` (approve everything) or `ask` (every
    /// request waits for a reply over HTTP).
    #[serde(default)]
    pub permission_mode: Option<String>,
    /// The model variant (reasoning effort, …).
    #[serde(default)]
    pub variant: Option<String>,
    /// Beyond the reference: the backend's own options by key
    /// (`{"backend.<agent>.<field>": value}`).
    #[serde(default)]
    pub options: Option<BTreeMap<String, serde_json::Value>>,
    /// Beyond the reference: replaces the agent's system prompt.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Beyond the reference: appended to the agent's system prompt.
    #[serde(default)]
    pub append_system_prompt: Option<String>,
    /// Beyond the reference: stop each turn after this many seconds.
    #[serde(default)]
    pub turn_timeout_secs: Option<u64>,
    /// Beyond the reference: end a turn after this many model turns.
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// Beyond the reference: stop a turn past this many input plus output tokens.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Beyond the reference: stop a turn past this cost in US dollars (where the agent reports it).
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// Beyond the reference: stop a turn whose agent has not answered after this many seconds.
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    /// Beyond the reference: stop a turn whose agent is silent this many seconds while it works.
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// Beyond the reference: the JSON Schema each turn's answer must follow (structured output).
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
    /// Beyond the reference: tools the agent may use without asking.
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    /// Beyond the reference: tools the agent must not use.
    #[serde(default)]
    pub denied_tools: Option<Vec<String>>,
    /// Beyond the reference: continue the agent's session with this native id (the
    /// `nativeSessionId` of an earlier session here, one that ended when its server stopped
    /// included, or an id from the agent's own history) instead of starting a new one.
    #[serde(default)]
    pub resume: Option<String>,
    /// Beyond the reference: start as a copy of the agent's session with this native id.
    #[serde(default)]
    pub fork: Option<String>,
}

/// The reference's error kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ErrorType {
    InvalidRequest,
    UnsupportedAgent,
    AgentNotInstalled,
    InstallFailed,
    AgentProcessExited,
    TokenInvalid,
    PermissionDenied,
    SessionNotFound,
    SessionAlreadyExists,
    ModeNotSupported,
    StreamError,
    Timeout,
}

impl ErrorType {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::UnsupportedAgent => "unsupported_agent",
            Self::AgentNotInstalled => "agent_not_installed",
            Self::InstallFailed => "install_failed",
            Self::AgentProcessExited => "agent_process_exited",
            Self::TokenInvalid => "token_invalid",
            Self::PermissionDenied => "permission_denied",
            Self::SessionNotFound => "session_not_found",
            Self::SessionAlreadyExists => "session_already_exists",
            Self::ModeNotSupported => "mode_not_supported",
            Self::StreamError => "stream_error",
            Self::Timeout => "timeout",
        }
    }
}

/// An agent's error, as the reference reports one in a session's creation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = AgentError)]
pub struct AgentErrorBody {
    /// The kind.
    #[serde(rename = "type")]
    pub kind: ErrorType,
    /// What happened.
    pub message: String,
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// More about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// `POST /v1/sessions/{session_id}` answered.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionResponse {
    /// Whether the agent started.
    pub healthy: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AgentErrorBody>,
    /// The agent's own session id, when known already.
    #[serde(default)]
    pub native_session_id: Option<String>,
}

/// One session.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// The id the client chose.
    pub session_id: String,
    /// The agent id as given.
    pub agent: String,
    /// The agent mode.
    pub agent_mode: String,
    /// The permission mode.
    pub permission_mode: String,
    /// Whether it ended.
    pub ended: bool,
    /// How many events it has.
    pub event_count: u64,
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// The variant.
    #[serde(default)]
    pub variant: Option<String>,
    /// The agent's own session id.
    #[serde(default)]
    pub native_session_id: Option<String>,
    /// Beyond the reference: why it ended, when it ended with an error (e.g. the server stopped
    /// under a live session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_error: Option<String>,
    /// Beyond the reference: whether this server runs it now (a turn can be sent).
    #[serde(default)]
    pub live: bool,
    /// Beyond the reference: the tokens and cost of its turns, summed, where the agent reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<SessionUsage>,
    /// Beyond the reference: `live` (a server holds its agent: on this one when `live` is true),
    /// `idle` (its server released its agent; the next message resumes it), `resumable` (its
    /// server stopped or died, or its agent exited; the next message, reply or `POST …/resume`
    /// brings it back here) or
    /// `ended` (a client terminated it, or `--session-idle-ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Beyond the reference: the server (its identity) that owns it, while it is not ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Beyond the reference: how it was last brought back: `native` (the agent continued its own
    /// session) or `replay` (a new agent session primed with the transcript).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_how: Option<String>,
    /// Beyond the reference: the turn after which the agent's own state (its snapshot) was last
    /// kept in the store: a server without the agent's files continues it natively from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_turn: Option<u64>,
    /// Beyond the reference: the messages waiting, in order, for the turn in progress to end
    /// (each then starts its own turn); set while this server runs the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<u64>,
}

/// The tokens and cost of a session's turns, summed (each field where the agent reports it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionUsage {
    /// The turns that reported usage.
    pub turns: u64,
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Input tokens served from a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Reasoning tokens (part of the output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl SessionUsage {
    /// Adds one turn's usage.
    pub fn add(&mut self, turn: &agent_api::run::Usage) {
        fn sum<T: std::ops::Add<Output = T> + Copy>(total: &mut Option<T>, more: Option<T>) {
            if let Some(more) = more {
                *total = Some(total.map_or(more, |t| t + more));
            }
        }
        self.turns += 1;
        sum(&mut self.input_tokens, turn.input_tokens);
        sum(&mut self.cached_input_tokens, turn.cached_input_tokens);
        sum(&mut self.output_tokens, turn.output_tokens);
        sum(&mut self.reasoning_tokens, turn.reasoning_tokens);
        sum(&mut self.cost_usd, turn.cost_usd);
    }
}

/// `GET /v1/sessions`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionListResponse {
    /// The sessions, oldest first.
    pub sessions: Vec<SessionInfo>,
}

/// `POST /v1/sessions/{session_id}/messages` (and `/stream`): the reference's `message`, and
/// optional fields of this server (`spec/http-api.md`, "Per-message options"). Of the creation's
/// options, `agentMode` applies from this turn on and `images` to this turn; every other one is
/// accepted when it is the session's own value and refused (400, naming the field) otherwise: the
/// library fixes them when the session opens.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageRequest {
    /// The prompt.
    pub message: String,
    /// Beyond the reference: images for this turn (the agent needs `agent_api.input.images`).
    #[serde(default)]
    pub images: Option<Vec<ImageInput>>,
    /// Beyond the reference: the session's options; `agentMode` switches the mode from this turn
    /// on, any other must be the session's own.
    #[serde(flatten)]
    pub settings: SessionSettings,
}

/// `POST /v1/sessions/{session_id}/steer` (beyond the reference): a message for the turn in
/// progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteerRequest {
    /// The message: what to add to what the agent is doing.
    pub message: String,
    /// Images with it (the agent needs `agent_api.input.images`), as a message's.
    #[serde(default)]
    pub images: Option<Vec<ImageInput>>,
}

/// One image of a message: a file in the session's working directory (`path`, relative to it
/// or absolute beneath it) or the image itself (`data`, base64, with its `mediaType`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageInput {
    /// A PNG, JPEG, GIF or WebP file beneath the session's working directory, through no symbolic link.
    #[serde(default)]
    pub path: Option<String>,
    /// The image's bytes, base64 (standard alphabet).
    #[serde(default)]
    pub data: Option<String>,
    /// With `data`: `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    #[serde(default)]
    pub media_type: Option<String>,
}

/// The query of `GET /v1/sessions/{session_id}/events` and `/events/sse`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct EventsQuery {
    /// Only events with a sequence above this one (exclusive).
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most this many events (HTTP only).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Fill each event's `raw` with the native payload (`include_raw` in the query string, as
    /// the reference's paths name it; `includeRaw` as its schema does: both are read).
    #[serde(default, rename = "includeRaw", alias = "include_raw")]
    pub include_raw: Option<bool>,
}

/// The query of `POST /v1/sessions/{session_id}/messages/stream`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct TurnStreamQuery {
    /// Fill each event's `raw` with the native payload (`include_raw` in the query string, as
    /// the reference's paths name it; `includeRaw` as its schema does: both are read).
    #[serde(default, rename = "includeRaw", alias = "include_raw")]
    pub include_raw: Option<bool>,
}

/// `POST /v1/sessions/{session_id}/messages` and `GET …/turns/{turn}` (beyond the reference):
/// wait for the turn's outcome.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct TurnWaitQuery {
    /// Answer with the turn's outcome ([`TurnOutcome`]) once it ends, it asks a permission or a
    /// question, or `timeout` passes (`POST …/messages`: 204 at once without it).
    #[serde(default)]
    pub wait: Option<bool>,
    /// The longest wait in seconds: default 300, at most 3600.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// Beyond the reference: where a turn is, and how it ended (`POST …/messages?wait=true`,
/// `GET /v1/sessions/{session_id}/turns/{turn}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnOutcome {
    /// The session.
    pub session_id: String,
    /// The turn's number in the session (from 1); `None` while the message is still queued.
    #[serde(default)]
    pub turn: Option<u64>,
    /// `completed`, `failed`, `cancelled` (ended); `waiting` (it asks a permission or a question:
    /// `pending`), `running` (the wait's bound passed first), `queued` (its turn has not started).
    pub status: String,
    /// The answer: the last assistant message's text, reasoning excluded (completed turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// The turn's tokens and cost, where the agent reports them (`turns` is 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<SessionUsage>,
    /// Why it failed or was cancelled: its terminal error's code and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TurnError>,
    /// The sequence of the turn's first event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sequence: Option<u64>,
    /// The sequence of the turn's last event (ended turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sequence: Option<u64>,
    /// What the turn waits for (`waiting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingRequest>,
}

/// A turn's terminal error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TurnError {
    /// The error's code (`AgentError::code`: `cancelled`, `timeout`, `interrupted`, …).
    pub code: String,
    /// What happened (inert text).
    pub message: String,
}

/// A permission or question a turn waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingRequest {
    /// `permission` or `question`.
    pub kind: String,
    /// Its id, to reply to (`…/permissions/{id}/reply`, `…/questions/{id}/reply`).
    pub id: String,
    /// The sequence of its `permission.requested` / `question.requested` event.
    pub sequence: u64,
}

/// `GET /v1/sessions/{session_id}/events`: a page of events.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsResponse {
    /// The events, in sequence order.
    pub events: Vec<UniversalEventSchema>,
    /// Whether more events follow the page.
    pub has_more: bool,
}

/// A reply to a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionReply {
    /// Allow this once.
    Once,
    /// Allow this and the like for the rest of the session.
    Always,
    /// Deny.
    Reject,
}

/// `POST …/permissions/{permission_id}/reply`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PermissionReplyRequest {
    /// The reply.
    pub reply: PermissionReply,
}

/// `POST …/questions/{question_id}/reply`: one list of chosen answers per question.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QuestionReplyRequest {
    /// The answers.
    pub answers: Vec<Vec<String>>,
}

/// An error (RFC 9457).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProblemDetails {
    /// `urn:agent-api:error:<kind>`, the kind one of the reference's `ErrorType`s or this server's.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What happened, for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The request path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// The universal event, described by the project's own JSON Schema (`spec/universal-schema.json`)
/// in the OpenAPI document; on the wire it is [`agent_api::UniversalEvent`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UniversalEventSchema(pub serde_json::Value);

/// `spec/universal-schema.json`, with its `definitions` references pointed at OpenAPI components.
/// Read through `server/universal-schema.json`, a link to it inside this crate, so that the crate's
/// package (which holds only what is under `server/`) carries the schema too.
fn universal_schema() -> serde_json::Value {
    let text =
        include_str!("../universal-schema.json").replace("#/definitions/", "#/components/schemas/");
    serde_json::from_str(&text).expect("spec/universal-schema.json is JSON")
}

fn as_schema(mut value: serde_json::Value) -> RefOr<Schema> {
    any_for_true(&mut value);
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("spec/universal-schema.json: utoipa cannot read {value}: {e}"))
}

/// JSON Schema's `true` (anything) as the schema of any type (`{}` once written out), which
/// utoipa reads.
fn any_for_true(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            for (key, member) in object.iter_mut() {
                if member == &serde_json::Value::Bool(true) && key != "additionalProperties" {
                    *member = serde_json::json!({ "type": null });
                } else {
                    any_for_true(member);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(any_for_true),
        _ => {}
    }
}

impl PartialSchema for UniversalEventSchema {
    fn schema() -> RefOr<Schema> {
        let mut root = universal_schema();
        if let Some(object) = root.as_object_mut() {
            for key in ["$schema", "definitions", "title"] {
                object.remove(key);
            }
        }
        as_schema(root)
    }
}

impl ToSchema for UniversalEventSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("UniversalEvent")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        if let Some(definitions) = universal_schema()
            .get("definitions")
            .and_then(|d| d.as_object())
        {
            schemas.extend(
                definitions
                    .iter()
                    .map(|(name, schema)| (name.clone(), as_schema(schema.clone()))),
            );
        }
    }
}
