//! Every standard `agent_api` capability id, with its one-line meaning, and the renderer of the
//! coverage matrix (backends × capabilities) that `spec/coverage-matrix.md` is generated from.
//!
//! Capability ids are an open set of namespaced strings: `agent_api.*` ids are defined here and
//! mean the same for every backend; `backend.<kind>.*` ids belong to one backend. A caller asks
//! [`is_standard`] or reads [`STANDARD`] to learn what an id means before it asks for a feature.
//!
//! ```
//! use agent_api_capabilities as caps;
//! assert!(caps::is_standard(caps::CONTROL_CANCEL));
//! assert_eq!(caps::describe(caps::RUN), Some("Runs a prompt and reports one completion."));
//! ```

mod matrix;

pub use matrix::{render_matrix, render_options, MatrixRow, OptionsColumn};

/// A standard capability id and its meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilityInfo {
    /// The namespaced id, such as `agent_api.run`.
    pub id: &'static str,
    /// Short row label used in the coverage matrix.
    pub label: &'static str,
    /// One line saying what a backend that advertises the id promises.
    pub meaning: &'static str,
}

macro_rules! standard_capabilities {
    ($($(#[$doc:meta])* $name:ident = $id:literal, $label:literal, $meaning:literal;)*) => {
        $($(#[$doc])* pub const $name: &str = $id;)*
        /// Every standard capability id, in the order the coverage matrix lists them.
        pub const STANDARD: &[CapabilityInfo] = &[
            $(CapabilityInfo { id: $id, label: $label, meaning: $meaning },)*
        ];
    };
}

standard_capabilities! {
    /// Runs a prompt and reports one completion.
    RUN = "agent_api.run", "Run", "Runs a prompt and reports one completion.";
    /// Streams wrapper events and the universal transcript for a run.
    EVENTS = "agent_api.events", "Events", "Streams wrapper events and the universal transcript for a run.";
    /// Events arrive while the agent works, not only when it exits.
    EVENTS_LIVE = "agent_api.events.live", "Live events", "Events arrive while the agent works, not only when it exits.";
    /// `RunControl::cancel` stops the run and reports a typed Cancelled.
    CONTROL_CANCEL = "agent_api.control.cancel", "Cancel", "RunControl::cancel stops the run and reports a typed Cancelled.";
    /// `RunControl::steer` adds a user message to the running turn by the agent's own means, without cancelling it.
    CONTROL_STEER = "agent_api.control.steer", "Steer", "RunControl::steer adds a user message to the running turn by the agent's own means, without cancelling it.";
    /// A run can resume an earlier session, by id or the last one.
    SESSION_RESUME = "agent_api.session.resume", "Session resume", "A run can resume an earlier session, by id or the last one.";
    /// A run can fork an earlier session into a new one.
    SESSION_FORK = "agent_api.session.fork", "Session fork", "A run can fork an earlier session into a new one.";
    /// A new session takes the native id the caller chose (`RunRequest::new_session_id`).
    SESSION_CALLER_ID = "agent_api.session.caller_id", "Caller-chosen session id", "A new session takes the native id the caller chose (RunRequest::new_session_id).";
    /// A session keeps one live agent process and sends every turn on it.
    SESSION_WARM = "agent_api.session.warm", "Warm sessions", "A session keeps one live agent process and sends every turn on it.";
    /// A session runs each turn as a new process that resumes the previous turn's session.
    SESSION_RESUME_PER_TURN = "agent_api.session.resume_per_turn", "Sessions by resume", "A session runs each turn as a new process that resumes the previous turn's session.";
    /// The agent's own state for a session is exported as a `SessionSnapshot` and imported into another home, where the session resumes natively.
    SESSION_SNAPSHOT = "agent_api.session.snapshot", "Session snapshots", "The agent's own state for a session is exported as a SessionSnapshot and imported into another home (another machine), where the session resumes natively.";
    /// ToolCall and ToolResult events carry the structured.v1 tools facet.
    TOOLS_STRUCTURED_V1 = "agent_api.tools.structured.v1", "Tools facet v1", "ToolCall and ToolResult events carry the structured.v1 tools facet.";
    /// `RunRequest::with_tool`: the caller's own tools, served over MCP, are offered to the agent and answered by the caller's handlers.
    CALLER_TOOLS = "agent_api.tools.caller.v1", "Caller-defined tools", "The caller's own tools (RunRequest::with_tool), served by the SDK over MCP, are called by the agent and answered by the caller's handlers.";
    /// Assistant and user text arrive as message items.
    TEXT_MESSAGES = "agent_api.transcript.text_messages", "Text Messages", "Assistant and user text arrive as message items.";
    /// Tool invocations arrive as tool_call items.
    TOOL_CALLS = "agent_api.transcript.tool_calls", "Tool Calls", "Tool invocations arrive as tool_call items.";
    /// Tool outcomes arrive as tool_result items.
    TOOL_RESULTS = "agent_api.transcript.tool_results", "Tool Results", "Tool outcomes arrive as tool_result items.";
    /// The agent's questions arrive as question events and take answers.
    QUESTIONS = "agent_api.hitl.questions", "Questions (HITL)", "The agent's questions arrive as question events and take answers.";
    /// Permission requests arrive as permission events and take decisions.
    PERMISSIONS = "agent_api.hitl.permissions", "Permissions (HITL)", "Permission requests arrive as permission events and take decisions.";
    /// `RunRequest::skip_permission_prompts` tells the agent not to ask for permissions at all.
    SKIP_PERMISSION_PROMPTS = "agent_api.permissions.skip_prompts", "Skip permission prompts", "RunRequest::skip_permission_prompts tells the agent not to ask for permissions at all.";
    /// The prompt may carry images.
    IMAGES = "agent_api.input.images", "Images", "The prompt may carry images.";
    /// The prompt may carry file attachments.
    FILE_ATTACHMENTS = "agent_api.input.file_attachments", "File Attachments", "The prompt may carry file attachments.";
    /// session.started and session.ended come from the agent itself.
    SESSION_LIFECYCLE = "agent_api.transcript.session_lifecycle", "Session Lifecycle", "session.started and session.ended come from the agent itself.";
    /// Runtime failures arrive as structured error events.
    ERROR_EVENTS = "agent_api.transcript.error_events", "Error Events", "Runtime failures arrive as structured error events.";
    /// Reasoning or thinking arrives as reasoning content.
    REASONING = "agent_api.transcript.reasoning", "Reasoning/Thinking", "Reasoning or thinking arrives as reasoning content.";
    /// Shell commands arrive with command, exit code and output sizes.
    COMMAND_EXECUTION = "agent_api.transcript.command_execution", "Command Execution", "Shell commands arrive with command, exit code and output sizes.";
    /// File edits arrive as file_ref parts with path and action.
    FILE_CHANGES = "agent_api.transcript.file_changes", "File Changes", "File edits arrive as file_ref parts with path and action.";
    /// MCP tool calls arrive as tool items naming the tool.
    MCP_TOOLS = "agent_api.transcript.mcp_tools", "MCP Tools", "MCP tool calls arrive as tool items naming the tool.";
    /// Content arrives as native deltas while it is produced.
    STREAMING_DELTAS = "agent_api.transcript.streaming_deltas", "Streaming Deltas", "Content arrives as native deltas while it is produced.";
    /// A run may pick a model variant such as reasoning effort (`RunRequest::with_variant`), one of those the backend lists.
    VARIANTS = "agent_api.request.variants", "Variants", "A run may pick a model variant such as reasoning effort, one of those the backend lists (BackendInfo::variants).";
    /// A run may pick an agent mode (`RunRequest::with_mode`: plan, or the agent's own named modes), one of those the backend lists.
    MODES = "agent_api.request.modes", "Modes", "A run may pick an agent mode (plan: read-only planning, or one of the agent's own), one of those the backend lists (BackendInfo::modes).";
    /// `Session::set_mode` changes a session's mode between turns.
    SESSION_MODE_SWITCH = "agent_api.session.mode_switch", "Mode switch", "Session::set_mode changes the mode of a session's next turns.";
    /// The completion reports token usage.
    USAGE = "agent_api.completion.usage", "Usage", "The completion reports token usage.";
    /// A run may choose its model.
    MODEL_SELECTION = "agent_api.request.model", "Model Selection", "A run may choose its model.";
    /// The agent's own stored sessions can be listed (id, time, working directory, first prompt, size).
    HISTORY_LIST = "agent_api.history.list", "History: list", "The agent's own stored sessions can be listed (id, time, working directory, first prompt, size).";
    /// A stored session can be read back as universal events.
    HISTORY_READ = "agent_api.history.read", "History: read", "A stored session can be read back as universal events.";
    /// `Home::Isolated`: each run gets its own config and state directories.
    HOME_ISOLATED = "agent_api.home.isolated", "Isolated homes", "Home::Isolated: each run gets its own config and state directories.";
    /// `Home::Hermetic`: each run gets a fresh home with the user's credentials only.
    HOME_HERMETIC = "agent_api.home.hermetic", "Hermetic homes", "Home::Hermetic: each run gets a fresh home with the user's credentials only.";
    /// `RunRequest::portable.system_prompt` replaces the agent's system prompt.
    SYSTEM_PROMPT = "agent_api.options.system_prompt", "Option: system prompt", "The request's system prompt replaces the agent's own.";
    /// `RunRequest::portable.append_system_prompt` is appended to the agent's system prompt.
    APPEND_SYSTEM_PROMPT = "agent_api.options.append_system_prompt", "Option: append system prompt", "The request's text is appended to the agent's system prompt.";
    /// `RunRequest::portable.add_dirs` gives the agent more directories than its working directory.
    ADD_DIRS = "agent_api.options.add_dirs", "Option: extra directories", "The agent may use the request's extra directories besides its working directory.";
    /// `RunRequest::portable.mcp_servers` are given to the agent (stdio and streamable HTTP).
    MCP_SERVERS = "agent_api.options.mcp_servers", "Option: MCP servers", "The request's MCP servers (stdio and streamable HTTP) are given to the agent.";
    /// `RunRequest::portable.allowed_tools` names native tools the agent may use without asking.
    ALLOWED_TOOLS = "agent_api.options.allowed_tools", "Option: allowed tools", "The request's native tool names are allowed without asking.";
    /// `RunRequest::portable.denied_tools` names native tools removed from the agent.
    DENIED_TOOLS = "agent_api.options.denied_tools", "Option: denied tools", "The request's native tool names are not offered to the model (or are refused).";
    /// `RunRequest::portable.denied_categories`: every native tool of each category is removed from the agent.
    DENIED_TOOL_CATEGORIES = "agent_api.options.denied_tool_categories", "Option: denied tool categories", "Every native tool of the request's denied categories (shell, file_write, file_read, network) is not offered to the model.";
    /// `RunRequest::portable.native_limits.max_turns` caps the agent's turns with its own flag.
    MAX_TURNS = "agent_api.options.max_turns", "Option: max turns", "The agent's own turn limit is set from the request.";
    /// `RunRequest::portable.native_limits.max_budget_usd` caps the agent's spend with its own flag.
    MAX_BUDGET_USD = "agent_api.options.max_budget_usd", "Option: max budget (USD)", "The agent's own spending limit is set from the request.";
    /// `RunRequest::portable.output_schema`: the completion carries a JSON value that fits it.
    OUTPUT_SCHEMA = "agent_api.options.output_schema", "Option: structured output", "The completion carries the answer as a JSON value that fits the request's schema, or the run fails typed.";
    /// `Launcher::Local`: the agent runs as a child process on this machine.
    LAUNCHER_LOCAL = "agent_api.launcher.local", "Launcher: local", "The agent can run as a local child process (Launcher::Local).";
    /// `Launcher::Sandbox`: the agent runs in a bubblewrap sandbox.
    LAUNCHER_BWRAP = "agent_api.launcher.bwrap", "Launcher: bwrap", "The agent can run in a bubblewrap sandbox, read-only outside its own directories (Launcher::Sandbox).";
    /// `Launcher::Container`: the agent runs in a docker or podman container.
    LAUNCHER_CONTAINER = "agent_api.launcher.container", "Launcher: container", "The agent can run in a docker or podman container (Launcher::Container).";
    /// `Launcher::Ssh`: the agent runs on another host through ssh.
    LAUNCHER_SSH = "agent_api.launcher.ssh", "Launcher: ssh", "The agent can run on another host through ssh (Launcher::Ssh).";
    /// `Launcher::Prefix`: the agent runs behind an argv prefix (kubectl exec, nomad alloc exec, …).
    LAUNCHER_PREFIX = "agent_api.launcher.prefix", "Launcher: prefix", "The agent can run behind any argv prefix, its far-side group stopped through it (Launcher::Prefix).";
}

/// Whether `id` is one of the standard `agent_api.*` ids.
pub fn is_standard(id: &str) -> bool {
    STANDARD.iter().any(|c| c.id == id)
}

/// The one-line meaning of a standard id, or `None` for any other id.
pub fn describe(id: &str) -> Option<&'static str> {
    STANDARD.iter().find(|c| c.id == id).map(|c| c.meaning)
}

/// Whether `id` is well formed: `agent_api.<name>` or `backend.<kind>.<name>`, where every
/// dot-separated segment is non-empty and made of `[a-z0-9_]`.
///
/// ```
/// assert!(agent_api_capabilities::is_well_formed("backend.codex.exec_mode"));
/// assert!(!agent_api_capabilities::is_well_formed("codex.exec"));
/// ```
pub fn is_well_formed(id: &str) -> bool {
    let mut segments = id.split('.');
    let min_segments = match segments.next() {
        Some("agent_api") => 2,
        Some("backend") => 3,
        _ => return false,
    };
    let rest: Vec<&str> = segments.collect();
    rest.len() + 1 >= min_segments
        && rest.iter().all(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standard_id_is_well_formed_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in STANDARD {
            assert!(is_well_formed(c.id), "{}", c.id);
            assert!(seen.insert(c.id), "duplicate {}", c.id);
            assert!(!c.meaning.is_empty());
        }
    }

    #[test]
    fn ids_outside_the_two_namespaces_are_rejected() {
        assert!(!is_well_formed("agent_api"));
        assert!(!is_well_formed("backend.codex"));
        assert!(!is_well_formed("agent_api.Run"));
        assert!(!is_well_formed("other.run"));
        assert!(is_well_formed("agent_api.tools.structured.v1"));
    }
}
