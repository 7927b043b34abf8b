//! Portable run options: what a caller of any agent can ask for with one meaning everywhere (a
//! system prompt, extra directories, MCP servers, tool allow/deny lists, the agent's own turn and
//! budget limits, a JSON answer that fits a schema).
//!
//! Each option has its capability id (`agent_api.options.*`). A backend lists, per option it can
//! honour, the native flag, config key or protocol field it becomes, as [`OptionMapping`]s; the
//! same list adds the ids to its capabilities ([`with_mappings`]) and renders `spec/options.md`
//! (`agent-api capabilities --format options`), so the two cannot disagree. An option a backend
//! does not map fails before spawn with [`AgentError::UnsupportedCapability`] naming its id.
//!
//! ```
//! use agent_api::request::McpServer;
//! use agent_api::PortableOptions;
//! use agent_api::RunRequest;
//! let request = RunRequest::new("hi").with_portable(
//!     PortableOptions::default()
//!         .append_system_prompt("answer in French")
//!         .add_dir("/srv/docs")
//!         .mcp_server("files", McpServer::stdio("mcp-files", ["--root", "/srv"])),
//! );
//! let needed = request.required_capabilities();
//! assert!(needed.contains(agent_api::capabilities::APPEND_SYSTEM_PROMPT));
//! assert!(needed.contains(agent_api::capabilities::MCP_SERVERS));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use agent_api_capabilities as caps;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocabulary::capability::CapabilitySet;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::tools_facet::ToolCategory;

/// The categories [`PortableOptions::deny_category`] takes: each backend that advertises
/// `agent_api.options.denied_tool_categories` names its native tools for every one of them.
pub const DENIABLE_CATEGORIES: [ToolCategory; 4] = [
    ToolCategory::Shell,
    ToolCategory::FileWrite,
    ToolCategory::FileRead,
    ToolCategory::Network,
];

/// One MCP server given to the agent for a run.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum McpServer {
    /// A server the agent starts as a child process and talks to over stdio.
    Stdio {
        /// The program to run (one path or name, never a shell string).
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Environment variables set for it (often secrets: never shown by `Debug`).
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// A server reached over streamable HTTP.
    Http {
        /// Its URL.
        url: String,
        /// Headers sent with every request (often secrets: never shown by `Debug`).
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl McpServer {
    /// A stdio server: `command` with `args`, no extra environment.
    pub fn stdio<I: IntoIterator<Item = S>, S: Into<String>>(
        command: impl Into<String>,
        args: I,
    ) -> Self {
        Self::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
        }
    }

    /// A streamable HTTP server at `url`, no headers.
    pub fn http(url: impl Into<String>) -> Self {
        Self::Http {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }

    /// The server in the `mcpServers` JSON shape that CLIs taking `--mcp-config` read
    /// (`{"command", "args", "env"}` or `{"type": "http", "url", "headers"}`).
    pub fn to_mcp_json(&self) -> Value {
        match self {
            Self::Stdio { command, args, env } => {
                serde_json::json!({ "command": command, "args": args, "env": env })
            }
            Self::Http { url, headers } => {
                serde_json::json!({ "type": "http", "url": url, "headers": headers })
            }
        }
    }
}

/// Shows the variable and header names, never their values (they are often tokens).
impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &crate::guards::secrets::EnvNames(env))
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &crate::guards::secrets::EnvNames(headers))
                .finish(),
        }
    }
}

/// The agent's OWN limits, passed as its native flags (`--max-turns`, `--max-budget-usd`). Limits
/// the SDK enforces itself for every agent live elsewhere; see `spec/options.md`.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct NativeLimits {
    /// The most agentic turns (`agent_api.options.max_turns`); above 0.
    pub max_turns: Option<u32>,
    /// The most US dollars the agent may spend (`agent_api.options.max_budget_usd`); above 0.
    pub max_budget_usd: Option<f64>,
}

/// The portable options of a run ([`crate::RunRequest::portable`]); every one unset by default.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PortableOptions {
    /// Replaces the agent's system prompt.
    pub system_prompt: Option<String>,
    /// Appended to the agent's system prompt.
    pub append_system_prompt: Option<String>,
    /// More directories the agent may use.
    pub add_dirs: Vec<PathBuf>,
    /// MCP servers by name.
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Native tool names the agent may use without asking.
    pub allowed_tools: Vec<String>,
    /// Native tool names removed from the agent.
    pub denied_tools: Vec<String>,
    /// Categories whose every native tool is removed from the agent (shell, file writes, file
    /// reads, network); each backend knows its own names for them. To allow a category without
    /// asking, approve it in the run's [`PermissionPolicy`](crate::PermissionPolicy).
    pub denied_categories: BTreeSet<ToolCategory>,
    /// The agent's own turn and budget limits.
    pub native_limits: NativeLimits,
    /// A JSON Schema the final answer must fit; the completion then carries the parsed value.
    pub output_schema: Option<Value>,
}

impl PortableOptions {
    /// Sets the system prompt that replaces the agent's.
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.system_prompt = Some(text.into());
        self
    }

    /// Sets text appended to the agent's system prompt.
    pub fn append_system_prompt(mut self, text: impl Into<String>) -> Self {
        self.append_system_prompt = Some(text.into());
        self
    }

    /// Adds a directory the agent may use.
    pub fn add_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.add_dirs.push(dir.into());
        self
    }

    /// Adds an MCP server under `name`.
    pub fn mcp_server(mut self, name: impl Into<String>, server: McpServer) -> Self {
        self.mcp_servers.insert(name.into(), server);
        self
    }

    /// Allows a native tool without asking.
    pub fn allow_tool(mut self, name: impl Into<String>) -> Self {
        self.allowed_tools.push(name.into());
        self
    }

    /// Removes a native tool from the agent.
    pub fn deny_tool(mut self, name: impl Into<String>) -> Self {
        self.denied_tools.push(name.into());
        self
    }

    /// Removes every native tool of `category` from the agent.
    ///
    /// ```
    /// use agent_api::kit::tool_table::{Tool, ToolTable};
    /// use agent_api::PortableOptions;
    /// use agent_api::run::FacetKind;
    /// use agent_api::request::ToolCategory;
    /// const TOOLS: ToolTable = ToolTable::new(&[
    ///     Tool::new("Bash", ToolCategory::Shell, FacetKind::CommandExecution),
    ///     Tool::new("Read", ToolCategory::FileRead, FacetKind::ToolUse),
    /// ]);
    /// let options = PortableOptions::default().deny_category(ToolCategory::Shell).deny_tool("WebFetch");
    /// let names = options.denied_tool_names(&TOOLS);
    /// assert_eq!(names, ["WebFetch", "Bash"]);
    /// ```
    pub fn deny_category(mut self, category: ToolCategory) -> Self {
        self.denied_categories.insert(category);
        self
    }

    /// The native tool names to remove: [`Self::denied_tools`], then the names of the listed
    /// tools of `tools` (the backend's [`ToolTable`](crate::kit::tool_table::ToolTable)) in each
    /// denied category.
    pub fn denied_tool_names(
        &self,
        tools: &crate::vocabulary::tool_table::ToolTable,
    ) -> Vec<String> {
        let by_category = tools
            .tools()
            .iter()
            .filter(|tool| tool.listed && self.denied_categories.contains(&tool.category))
            .map(|tool| tool.name);
        let mut names = self.denied_tools.clone();
        for name in by_category {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        names
    }

    /// Sets the agent's own turn limit.
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.native_limits.max_turns = Some(turns);
        self
    }

    /// Sets the agent's own spending limit in US dollars.
    pub fn max_budget_usd(mut self, usd: f64) -> Self {
        self.native_limits.max_budget_usd = Some(usd);
        self
    }

    /// Asks for a JSON answer that fits `schema`.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The capability id of every option that is set.
    pub fn required_capabilities(&self) -> BTreeSet<&'static str> {
        let set = [
            (self.system_prompt.is_some(), caps::SYSTEM_PROMPT),
            (
                self.append_system_prompt.is_some(),
                caps::APPEND_SYSTEM_PROMPT,
            ),
            (!self.add_dirs.is_empty(), caps::ADD_DIRS),
            (!self.mcp_servers.is_empty(), caps::MCP_SERVERS),
            (!self.allowed_tools.is_empty(), caps::ALLOWED_TOOLS),
            (!self.denied_tools.is_empty(), caps::DENIED_TOOLS),
            (
                !self.denied_categories.is_empty(),
                caps::DENIED_TOOL_CATEGORIES,
            ),
            (self.native_limits.max_turns.is_some(), caps::MAX_TURNS),
            (
                self.native_limits.max_budget_usd.is_some(),
                caps::MAX_BUDGET_USD,
            ),
            (self.output_schema.is_some(), caps::OUTPUT_SCHEMA),
        ];
        set.into_iter()
            .filter(|(is_set, _)| *is_set)
            .map(|(_, id)| id)
            .collect()
    }

    /// Checks the values themselves (before spawn): limits above zero,
    /// MCP server names the agents' config formats can carry (the schema is compiled by
    /// [`crate::kit::validate_request`]).
    pub fn validate(&self) -> Result<(), AgentError> {
        let invalid = |reason: String| Err(AgentError::InvalidRequest { reason });
        if self.native_limits.max_turns == Some(0) {
            return invalid("max_turns must be above 0".into());
        }
        if let Some(category) = self
            .denied_categories
            .iter()
            .find(|c| !DENIABLE_CATEGORIES.contains(c))
        {
            return invalid(format!(
                "the {} category cannot be denied as a whole: deny MCP servers by leaving them out, other tools by name",
                category.as_str()
            ));
        }
        if self
            .native_limits
            .max_budget_usd
            .is_some_and(|usd| !(usd.is_finite() && usd > 0.0))
        {
            return invalid("max_budget_usd must be a positive number".into());
        }
        if let Some(name) = self.mcp_servers.keys().find(|n| {
            n.is_empty()
                || !n
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }) {
            return invalid(format!(
                "MCP server name {name:?} must be made of [A-Za-z0-9_-]"
            ));
        }
        Ok(())
    }

    /// The `mcpServers` JSON document (`{"mcpServers": {name: server}}`) that CLIs take with
    /// `--mcp-config`.
    pub fn mcp_config_json(&self) -> Value {
        let servers: serde_json::Map<String, Value> = self
            .mcp_servers
            .iter()
            .map(|(name, s)| (name.clone(), s.to_mcp_json()))
            .collect();
        serde_json::json!({ "mcpServers": servers })
    }

    /// Writes [`Self::mcp_config_json`] to a new file only its owner may read (0600), for CLIs
    /// that take `--mcp-config FILE`: servers' env and headers often hold secrets, and argv shows
    /// in `ps`. The file is removed when the returned path is dropped: keep it for the run
    /// ([`crate::kit::RunSettings::hold`]).
    pub fn write_mcp_config(&self) -> Result<McpConfigFile, AgentError> {
        write_private_file(
            "agent-api-mcp-",
            ".json",
            self.mcp_config_json().to_string().as_bytes(),
        )
    }
}

/// A file the SDK wrote for one run, readable by its owner only (0600), removed when dropped.
pub type PrivateFile = tempfile::TempPath;

/// A written `--mcp-config` file ([`PortableOptions::write_mcp_config`]), removed when dropped.
pub type McpConfigFile = PrivateFile;

/// Text for a CLI that takes it either inline or from a file (a system prompt: `--system-prompt`
/// or `--system-prompt-file`). Closed: text goes one way or the other.
#[derive(Debug)]
pub enum TextOrFile {
    /// The text itself, for argv: the agent runs where this machine's files are not.
    Text(String),
    /// A private file holding the text ([`write_private_file`]): hold it for the run.
    File(PrivateFile),
}

impl TextOrFile {
    /// `text` in a private file when `launcher`'s agent reads this machine's files (local, or a
    /// sandbox, which binds the run's files in), else inline: off argv wherever a file can reach the
    /// agent, so a long prompt meets no OS limit and `ps` does not show it.
    pub fn for_launcher(
        launcher: Option<&crate::vocabulary::launcher::Launcher>,
        text: &str,
    ) -> Result<Self, AgentError> {
        if launcher.is_none_or(crate::vocabulary::launcher::Launcher::is_local_filesystem) {
            Ok(Self::File(write_private_file(
                "agent-api-text-",
                ".md",
                text.as_bytes(),
            )?))
        } else {
            Ok(Self::Text(text.to_string()))
        }
    }
}

/// Writes `contents` to a new file in the temporary directory that only its owner may read (0600):
/// for what a CLI takes only as a file, or should not get on argv (`ps` shows argv). The file is
/// removed when the returned path is dropped: keep it for the run ([`crate::kit::RunSettings::hold`])
/// and name it in the agent's [`crate::kit::CommandSpec::local_file`] so a sandbox lets the agent read it.
pub fn write_private_file(
    prefix: &str,
    suffix: &str,
    contents: &[u8],
) -> Result<PrivateFile, AgentError> {
    use std::io::Write;
    let mut file = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(suffix)
        .tempfile()?;
    file.write_all(contents)?;
    file.flush()?;
    Ok(file.into_temp_path())
}

/// How one backend honours one portable option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionMapping {
    /// The option's capability id (`agent_api.options.*`).
    pub capability: &'static str,
    /// The native flag, config key or protocol field it becomes, as `spec/options.md` shows it.
    pub native: &'static str,
}

impl OptionMapping {
    /// `capability` becomes `native`.
    pub const fn new(capability: &'static str, native: &'static str) -> Self {
        Self { capability, native }
    }
}

/// What a mapping says when the CLI has no schema flag: the SDK puts the schema in the prompt
/// and validates the answer itself.
pub const SDK_SCHEMA: &str = "SDK: schema in the prompt, answer validated";

/// The mappings of a backend whose CLI takes none of the options natively: only structured
/// output, which the SDK provides for every agent.
pub const SDK_ONLY: &[OptionMapping] = &[OptionMapping::new(caps::OUTPUT_SCHEMA, SDK_SCHEMA)];

/// `capabilities` plus the id of every mapped option, less what this build cannot serve
/// ([`CapabilitySet::in_this_build`]): how a backend advertises exactly the options it maps, and
/// the last step of every built-in backend's capabilities.
pub fn with_mappings(mut capabilities: CapabilitySet, mappings: &[OptionMapping]) -> CapabilitySet {
    for mapping in mappings {
        capabilities.insert(mapping.capability);
    }
    capabilities.in_this_build()
}
