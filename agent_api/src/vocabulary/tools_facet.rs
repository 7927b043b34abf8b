//! The `agent_api.tools.structured.v1` tools facet: metadata about a tool event, never its
//! inputs, outputs, diffs or raw lines.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema id carried in every tools facet.
pub const TOOLS_FACET_SCHEMA: &str = "agent_api.tools.structured.v1";

/// Where in its life a tool event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolPhase {
    /// The tool was invoked.
    Start,
    /// Progress: input or output arrived.
    Delta,
    /// The tool finished.
    Complete,
    /// The tool failed.
    Fail,
}

/// The tool's status as the backend knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Waiting to run (for example for a permission).
    Pending,
    /// Running.
    Running,
    /// Finished successfully.
    Completed,
    /// Finished with a failure.
    Failed,
    /// Not known.
    Unknown,
}

impl ToolPhase {
    /// The phase's name, as serialized (`start`, `delta`, `complete`, `fail`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Delta => "delta",
            Self::Complete => "complete",
            Self::Fail => "fail",
        }
    }
}

impl ToolStatus {
    /// The status's name, as serialized (`pending`, `running`, `completed`, `failed`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ToolPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of tool a tools facet describes: the `kind` of [`ToolsFacet`] and of
/// [`ToolMeta`](crate::universal::ToolMeta), as one typed value where code decides by it (the
/// wire keeps the string, an open set: [`FacetKind::parse`] is `None` for a kind it does not name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FacetKind {
    /// A shell command (`command_execution`): the facet carries its command and exit code.
    CommandExecution,
    /// A file written or edited (`file_change`).
    FileChange,
    /// A tool of an MCP server (`mcp_tool_call`).
    McpToolCall,
    /// A web search (`web_search`).
    WebSearch,
    /// A page fetched from the web (`web_fetch`).
    WebFetch,
    /// A file read (`file_read`).
    FileRead,
    /// A search of the workspace (`search`).
    Search,
    /// The agent thinking with a tool (`think`).
    Think,
    /// Any other tool call (`tool_use`).
    ToolUse,
    /// A result whose call is unknown (`tool_result`).
    ToolResult,
}

impl FacetKind {
    /// Every kind, in declaration order.
    pub const ALL: [FacetKind; 10] = [
        Self::CommandExecution,
        Self::FileChange,
        Self::McpToolCall,
        Self::WebSearch,
        Self::WebFetch,
        Self::FileRead,
        Self::Search,
        Self::Think,
        Self::ToolUse,
        Self::ToolResult,
    ];

    /// The kind's name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CommandExecution => "command_execution",
            Self::FileChange => "file_change",
            Self::McpToolCall => "mcp_tool_call",
            Self::WebSearch => "web_search",
            Self::WebFetch => "web_fetch",
            Self::FileRead => "file_read",
            Self::Search => "search",
            Self::Think => "think",
            Self::ToolUse => "tool_use",
            Self::ToolResult => "tool_result",
        }
    }

    /// The kind a wire name names, if it names one of these.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The permission category a call of this kind is decided by, for kinds that name one.
    pub const fn category(self) -> Option<ToolCategory> {
        match self {
            Self::CommandExecution => Some(ToolCategory::Shell),
            Self::FileChange => Some(ToolCategory::FileWrite),
            Self::McpToolCall => Some(ToolCategory::Mcp),
            Self::WebSearch | Self::WebFetch => Some(ToolCategory::Network),
            // A read or a search is not told from another tool of its category by its kind alone.
            Self::FileRead | Self::Search | Self::Think | Self::ToolUse | Self::ToolResult => None,
        }
    }
}

impl std::fmt::Display for FacetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<FacetKind> for String {
    fn from(kind: FacetKind) -> Self {
        kind.as_str().to_string()
    }
}

/// Byte counts of a tool's payloads; 0 when absent or unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolBytes {
    /// Bytes of standard output.
    pub stdout: u64,
    /// Bytes of standard error.
    pub stderr: u64,
    /// Bytes of diff or patch text.
    pub diff: u64,
    /// Bytes of the tool's result payload.
    pub result: u64,
}

/// The `tool` object of a tools facet. Build it with [`ToolsFacet::new`] and the setters.
///
/// ```
/// use agent_api::run::{ToolPhase, ToolStatus, ToolsFacet};
/// let facet = ToolsFacet::new("command_execution", ToolPhase::Complete, ToolStatus::Completed)
///     .exit_code(Some(0))
///     .tool_use_id(Some("call_1".into()));
/// let data = facet.to_data();
/// assert_eq!(data["schema"], "agent_api.tools.structured.v1");
/// assert_eq!(data["tool"]["exit_code"], 0);
/// assert_eq!(data["tool"]["bytes"]["stdout"], 0);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolsFacet {
    /// The backend's own id of the item.
    pub backend_item_id: Option<String>,
    /// The native thread or session id.
    pub thread_id: Option<String>,
    /// The native turn id.
    pub turn_id: Option<String>,
    /// Open set: `command_execution`, `file_change`, `mcp_tool_call`, `web_search`, `tool_use`, …
    pub kind: String,
    /// Where in its life the tool is.
    pub phase: ToolPhase,
    /// The tool's status.
    pub status: ToolStatus,
    /// Exit code of a command, when known.
    pub exit_code: Option<i64>,
    /// Payload sizes.
    pub bytes: ToolBytes,
    /// The tool's name.
    pub tool_name: Option<String>,
    /// The id linking a call to its result.
    pub tool_use_id: Option<String>,
    /// The shell command of a command tool, cut to 2 KiB, secrets masked (absent for other tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The directory the command runs in, when the agent names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl ToolsFacet {
    /// A facet with the required fields; everything else empty.
    pub fn new(kind: impl Into<String>, phase: ToolPhase, status: ToolStatus) -> Self {
        Self {
            backend_item_id: None,
            thread_id: None,
            turn_id: None,
            kind: kind.into(),
            phase,
            status,
            exit_code: None,
            bytes: ToolBytes::default(),
            tool_name: None,
            tool_use_id: None,
            command: None,
            cwd: None,
        }
    }

    /// Sets `backend_item_id`.
    pub fn backend_item_id(mut self, id: Option<String>) -> Self {
        self.backend_item_id = id;
        self
    }

    /// Sets `thread_id`.
    pub fn thread_id(mut self, id: Option<String>) -> Self {
        self.thread_id = id;
        self
    }

    /// Sets `turn_id`.
    pub fn turn_id(mut self, id: Option<String>) -> Self {
        self.turn_id = id;
        self
    }

    /// Sets `exit_code`.
    pub fn exit_code(mut self, code: Option<i64>) -> Self {
        self.exit_code = code;
        self
    }

    /// Sets the byte counts.
    pub fn bytes(mut self, bytes: ToolBytes) -> Self {
        self.bytes = bytes;
        self
    }

    /// Sets `tool_name`.
    pub fn tool_name(mut self, name: Option<String>) -> Self {
        self.tool_name = name;
        self
    }

    /// Sets `tool_use_id`.
    pub fn tool_use_id(mut self, id: Option<String>) -> Self {
        self.tool_use_id = id;
        self
    }

    /// Sets `command`.
    pub fn command(mut self, command: Option<String>) -> Self {
        self.command = command;
        self
    }

    /// Sets `cwd`.
    pub fn cwd(mut self, cwd: Option<String>) -> Self {
        self.cwd = cwd;
        self
    }

    /// An upper bound of the bytes of [`ToolsFacet::to_data`] serialized, without building it:
    /// a string byte takes at most 6 bytes (`\u00XX`); the keys, numbers and enums fit in 512.
    pub(crate) fn serialized_bytes_at_most(&self) -> usize {
        let strings = [
            &self.backend_item_id,
            &self.thread_id,
            &self.turn_id,
            &self.tool_name,
            &self.tool_use_id,
            &self.command,
            &self.cwd,
        ];
        let text: usize = strings
            .iter()
            .filter_map(|s| s.as_deref())
            .map(str::len)
            .sum::<usize>()
            + self.kind.len();
        text.saturating_mul(6).saturating_add(512)
    }

    /// The facet as wrapper-event data: `{"schema": …, "tool": {…}}`.
    pub fn to_data(&self) -> Value {
        serde_json::json!({ "schema": TOOLS_FACET_SCHEMA, "tool": self })
    }
}

/// A category of tool use that a permission policy can decide on its own.
///
/// Permission events carry it in its snake_case form (`shell`, `file_write`, …).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCategory {
    /// Running shell commands.
    Shell,
    /// Creating or changing files.
    FileWrite,
    /// Reading files.
    FileRead,
    /// Network access (web fetch, web search).
    Network,
    /// MCP tools.
    Mcp,
    /// Anything else.
    Other,
}

impl ToolCategory {
    /// A stable snake_case name (`shell`, `file_write`, …), as permission events carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shell => "shell",
            Self::FileWrite => "file_write",
            Self::FileRead => "file_read",
            Self::Network => "network",
            Self::Mcp => "mcp",
            Self::Other => "other",
        }
    }
}
