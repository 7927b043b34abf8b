//! Serde types of the Codex app-server protocol, written from the schema the 0.169.0 CLI prints
//! (`schema/`, see its README). Only the fields the backend reads are typed; every field is
//! optional or defaulted where the schema allows it to be missing, and unknown fields are ignored,
//! so newer servers that add fields still parse. Item and method names missing here are handled as
//! unknown by the converter, never as a parse failure.

use serde::Deserialize;
use serde_json::Value;

mod names;

pub use names::{ITEM_TYPES, NOTIFICATION_METHODS, SERVER_REQUEST_METHODS};

/// A thread (`Thread`): only what identifies it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    /// Thread id: the native session id.
    pub id: String,
    /// Model, when reported.
    #[serde(default)]
    pub model: Option<String>,
    /// Working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// CLI version that created it.
    #[serde(default)]
    pub cli_version: Option<String>,
    /// The thread it was forked from.
    #[serde(default)]
    pub forked_from_id: Option<String>,
}

/// The result of `thread/start`, `thread/resume` and `thread/fork`, and `thread/started` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadEnvelope {
    /// The thread.
    pub thread: Thread,
    /// Model the thread runs with (responses only).
    #[serde(default)]
    pub model: Option<String>,
}

/// The result of `thread/list`.
#[derive(Debug, Clone, Deserialize)]
pub struct ThreadList {
    /// Threads, in the requested order.
    #[serde(default)]
    pub data: Vec<Thread>,
}

/// `TurnError`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    /// Human-readable message (bounded and redacted before use).
    #[serde(default)]
    pub message: String,
    /// Structured error kind: a string or a single-key object such as `{"httpConnectionFailed": {...}}`.
    #[serde(default)]
    pub codex_error_info: Option<Value>,
}

/// `Turn`: only its id, status and error.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// Turn id.
    pub id: String,
    /// `completed`, `interrupted`, `failed` or `inProgress`.
    #[serde(default)]
    pub status: Option<String>,
    /// Error of a failed or interrupted turn.
    #[serde(default)]
    pub error: Option<TurnError>,
}

/// Params of `turn/started` and `turn/completed`, and the result of `turn/start`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEnvelope {
    /// Thread id (notifications only).
    #[serde(default)]
    pub thread_id: Option<String>,
    /// The turn.
    pub turn: Turn,
}

/// `error` notification params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    /// The error.
    pub error: TurnError,
    /// Whether Codex retries on its own.
    #[serde(default)]
    pub will_retry: bool,
    /// Thread id.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Turn id.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// `TokenUsageBreakdown`. The app server names its fields in camelCase, `exec --json` in
/// snake_case (`turn.completed`'s `usage`): both spellings are read, so neither reports 0 tokens.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageBreakdown {
    /// Input tokens.
    #[serde(default, alias = "input_tokens")]
    pub input_tokens: u64,
    /// Cached input tokens.
    #[serde(default, alias = "cached_input_tokens")]
    pub cached_input_tokens: u64,
    /// Input tokens written to the provider's cache.
    #[serde(default, alias = "cache_write_input_tokens")]
    pub cache_write_input_tokens: u64,
    /// Output tokens.
    #[serde(default, alias = "output_tokens")]
    pub output_tokens: u64,
    /// Reasoning output tokens.
    #[serde(default, alias = "reasoning_output_tokens")]
    pub reasoning_output_tokens: u64,
}

impl TokenUsageBreakdown {
    /// Adds `other`'s counts to these (saturating): a turn's usage summed over its updates.
    pub fn add(&mut self, other: &Self) {
        for (sum, more) in [
            (&mut self.input_tokens, other.input_tokens),
            (&mut self.cached_input_tokens, other.cached_input_tokens),
            (
                &mut self.cache_write_input_tokens,
                other.cache_write_input_tokens,
            ),
            (&mut self.output_tokens, other.output_tokens),
            (
                &mut self.reasoning_output_tokens,
                other.reasoning_output_tokens,
            ),
        ] {
            *sum = sum.saturating_add(more);
        }
    }

    /// The counts as the completion's usage.
    pub fn to_usage(&self) -> agent_api::run::Usage {
        let mut usage = agent_api::run::Usage::tokens(self.input_tokens, self.output_tokens);
        usage.cached_input_tokens = Some(self.cached_input_tokens);
        usage.cache_write_tokens = Some(self.cache_write_input_tokens);
        usage.reasoning_tokens = Some(self.reasoning_output_tokens);
        usage
    }
}

/// `thread/tokenUsage/updated` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageUpdated {
    /// Thread id.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// The turn the update belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// Totals and the last request's usage.
    pub token_usage: ThreadTokenUsage,
}

/// `ThreadTokenUsage`.
#[derive(Debug, Clone, Deserialize)]
pub struct ThreadTokenUsage {
    /// The whole thread.
    pub total: TokenUsageBreakdown,
    /// The last model request.
    pub last: TokenUsageBreakdown,
}

/// Params of the item delta notifications (`item/agentMessage/delta`, reasoning, plan, output).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemDelta {
    /// The item the fragment belongs to.
    pub item_id: String,
    /// The fragment.
    #[serde(default)]
    pub delta: String,
    /// Turn id.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// Params of `item/started` and `item/completed`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemEnvelope {
    /// The item, kept as JSON: its `type` picks the [`ThreadItem`] variant, and an unknown type
    /// must not fail the whole notification.
    pub item: Value,
    /// Thread id.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Turn id.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// `FileUpdateChange`.
#[derive(Debug, Clone, Deserialize)]
pub struct FileUpdateChange {
    /// File path.
    pub path: String,
    /// `{"type": "add" | "delete" | "update"}`.
    #[serde(default)]
    pub kind: Option<Value>,
    /// Unified diff (or the new content of an added file).
    #[serde(default)]
    pub diff: Option<String>,
}

impl FileUpdateChange {
    /// The change kind's name.
    pub fn kind_name(&self) -> &str {
        match &self.kind {
            Some(Value::Object(o)) => o.get("type").and_then(Value::as_str).unwrap_or("update"),
            Some(Value::String(s)) => s,
            _ => "update",
        }
    }
}

/// `item/fileChange/patchUpdated` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchUpdated {
    /// The fileChange item.
    pub item_id: String,
    /// Its changes so far.
    #[serde(default)]
    pub changes: Vec<FileUpdateChange>,
}

/// `item/mcpToolCall/progress` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpProgress {
    /// The mcpToolCall item.
    pub item_id: String,
    /// Progress message.
    #[serde(default)]
    pub message: String,
}

/// `turn/diff/updated` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnDiff {
    /// The turn's aggregated unified diff.
    #[serde(default)]
    pub diff: String,
    /// Turn id.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// `TurnPlanStep`.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanStep {
    /// The step.
    #[serde(default)]
    pub step: String,
    /// `pending`, `inProgress` or `completed`.
    #[serde(default)]
    pub status: String,
}

/// `turn/plan/updated` params: the agent's todo list.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanUpdated {
    /// Why the plan changed.
    #[serde(default)]
    pub explanation: Option<String>,
    /// The steps.
    #[serde(default)]
    pub plan: Vec<PlanStep>,
}

/// The `summary`/`message` notifications: `configWarning`, `deprecationNotice`, `warning`, ….
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Notice {
    /// `configWarning`, `deprecationNotice`.
    #[serde(default)]
    pub summary: Option<String>,
    /// `warning`, `guardianWarning`.
    #[serde(default)]
    pub message: Option<String>,
}

/// `serverRequest/resolved` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerRequestResolved {
    /// The id of the server's request.
    pub request_id: Value,
}

/// `model/rerouted` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRerouted {
    /// Model asked for.
    #[serde(default)]
    pub from_model: String,
    /// Model used.
    #[serde(default)]
    pub to_model: String,
}

/// `ThreadItem`: the schema's tagged union, the fields the mapping reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadItem {
    /// The user's input, echoed.
    #[serde(rename_all = "camelCase")]
    UserMessage {
        /// Item id.
        id: String,
        /// `UserInput` parts (`text`, `image`, `localImage`, `skill`, `mention`).
        #[serde(default)]
        content: Vec<Value>,
    },
    /// A prompt a hook injected.
    HookPrompt {
        /// Item id.
        id: String,
        /// `{hookRunId, text}` fragments.
        #[serde(default)]
        fragments: Vec<Value>,
    },
    /// The assistant's answer text.
    AgentMessage {
        /// Item id.
        id: String,
        /// Final text.
        #[serde(default)]
        text: String,
    },
    /// Output of a function call the client ran.
    FunctionCallOutput {
        /// Item id.
        id: String,
        /// Function name.
        #[serde(default)]
        name: String,
        /// Output payload.
        #[serde(default)]
        output: Value,
    },
    /// A proposed plan (plan mode).
    Plan {
        /// Item id.
        id: String,
        /// Plan text.
        #[serde(default)]
        text: String,
    },
    /// Reasoning summary and raw reasoning text.
    Reasoning {
        /// Item id.
        id: String,
        /// Summary parts.
        #[serde(default)]
        summary: Vec<String>,
        /// Raw reasoning parts.
        #[serde(default)]
        content: Vec<String>,
    },
    /// A shell command.
    #[serde(rename_all = "camelCase")]
    CommandExecution {
        /// Item id.
        id: String,
        /// The command line.
        #[serde(default)]
        command: String,
        /// Its working directory.
        #[serde(default)]
        cwd: Option<String>,
        /// `inProgress`, `completed`, `failed`, `declined`.
        #[serde(default)]
        status: Option<String>,
        /// Combined output.
        #[serde(default)]
        aggregated_output: Option<String>,
        /// Exit code.
        #[serde(default)]
        exit_code: Option<i64>,
    },
    /// A patch.
    FileChange {
        /// Item id.
        id: String,
        /// Changed files.
        #[serde(default)]
        changes: Vec<FileUpdateChange>,
        /// `inProgress`, `completed`, `failed`, `declined`.
        #[serde(default)]
        status: Option<String>,
    },
    /// An MCP tool call.
    McpToolCall {
        /// Item id.
        id: String,
        /// MCP server name.
        #[serde(default)]
        server: String,
        /// Tool name.
        #[serde(default)]
        tool: String,
        /// Arguments.
        #[serde(default)]
        arguments: Value,
        /// `inProgress`, `completed`, `failed`.
        #[serde(default)]
        status: Option<String>,
        /// `McpToolCallResult`.
        #[serde(default)]
        result: Option<Value>,
        /// `McpToolCallError`.
        #[serde(default)]
        error: Option<Value>,
    },
    /// A client-defined (dynamic) tool call.
    #[serde(rename_all = "camelCase")]
    DynamicToolCall {
        /// Item id.
        id: String,
        /// Tool name.
        #[serde(default)]
        tool: String,
        /// Arguments.
        #[serde(default)]
        arguments: Value,
        /// `inProgress`, `completed`, `failed`.
        #[serde(default)]
        status: Option<String>,
        /// Output items.
        #[serde(default)]
        content_items: Option<Value>,
        /// Whether it succeeded.
        #[serde(default)]
        success: Option<bool>,
    },
    /// A call to a collaborating sub-agent.
    CollabAgentToolCall {
        /// Item id.
        id: String,
        /// Collab tool (`spawnAgent`, `sendInput`, `wait`, …).
        #[serde(default)]
        tool: String,
        /// Prompt sent, if any.
        #[serde(default)]
        prompt: Option<String>,
        /// `inProgress`, `completed`, `failed`.
        #[serde(default)]
        status: Option<String>,
    },
    /// What a sub-agent is doing.
    #[serde(rename_all = "camelCase")]
    SubAgentActivity {
        /// Item id.
        id: String,
        /// Activity kind.
        #[serde(default)]
        kind: Value,
        /// Agent path.
        #[serde(default)]
        agent_path: Value,
    },
    /// A web search.
    WebSearch {
        /// Item id.
        id: String,
        /// Query.
        #[serde(default)]
        query: String,
        /// `WebSearchAction`.
        #[serde(default)]
        action: Option<Value>,
        /// Results, when reported.
        #[serde(default)]
        results: Option<Value>,
    },
    /// The agent looked at an image file.
    ImageView {
        /// Item id.
        id: String,
        /// Image path.
        #[serde(default)]
        path: String,
    },
    /// The agent waited.
    #[serde(rename_all = "camelCase")]
    Sleep {
        /// Item id.
        id: String,
        /// How long.
        #[serde(default)]
        duration_ms: Option<i64>,
    },
    /// An image generation.
    #[serde(rename_all = "camelCase")]
    ImageGeneration {
        /// Item id.
        id: String,
        /// `inProgress`, `completed`, `failed`, ….
        #[serde(default)]
        status: Value,
        /// Where the image was saved.
        #[serde(default)]
        saved_path: Option<String>,
        /// The prompt the model used.
        #[serde(default)]
        revised_prompt: Option<String>,
    },
    /// Review mode began.
    EnteredReviewMode {
        /// Item id.
        id: String,
        /// What is reviewed.
        #[serde(default)]
        review: Value,
    },
    /// Review mode ended.
    ExitedReviewMode {
        /// Item id.
        id: String,
        /// The review's outcome.
        #[serde(default)]
        review: Value,
    },
    /// The context was compacted.
    ContextCompaction {
        /// Item id.
        id: String,
    },
}

/// The `id` and `type` of any item JSON, known or not.
pub fn item_id_and_type(item: &Value) -> (Option<&str>, &str) {
    (
        item.get("id").and_then(Value::as_str),
        item.get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown"),
    )
}

/// A serde failure described without quoting the payload (serde messages can quote values).
pub fn shape_error(what: &str, e: &serde_json::Error) -> String {
    format!(
        "{what} does not match the codex 0.169.0 schema ({:?} error at line {} column {})",
        e.classify(),
        e.line(),
        e.column()
    )
}

/// Parses `params` of a known method.
pub fn parse<T: serde::de::DeserializeOwned>(method: &str, params: Value) -> Result<T, String> {
    serde_json::from_value(params).map_err(|e| shape_error(method, &e))
}
