//! Caller-defined tools: the caller's own async functions, offered to any agent that speaks MCP.
//!
//! [`crate::RunRequest::with_tool`] adds a tool (name, description, JSON Schema of its input,
//! handler). When the run starts, the backend calls [`attach`]: the SDK serves the run's tools
//! as an MCP server (the official Rust MCP SDK, `rmcp`) over streamable HTTP on 127.0.0.1, on an
//! ephemeral port, and every request must carry the run's random secret as a bearer token. The
//! server is added to the request's MCP servers under [`SERVER_NAME`], so each agent registers it
//! through its own MCP configuration path, and it shuts down when the run ends (normal end,
//! error, cancel, timeout or drop of the handle: the driver holds it).
//!
//! A handler's error becomes the tool's error result; a handler that panics or runs past its
//! timeout fails that call, not the run.
//!
//! ```
//! use agent_api::RunRequest;
//! let request = RunRequest::new("what is the weather in Paris?").with_tool(
//!     "weather",
//!     "Today's weather in a city",
//!     serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//!     |input| async move { Ok::<_, String>(format!("sunny in {}", input["city"].as_str().unwrap_or("?"))) },
//! );
//! assert!(request.required_capabilities().contains(agent_api::capabilities::CALLER_TOOLS));
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::AgentError;
use crate::request::RunRequest;

pub mod client;
mod server;

pub use server::ToolServer;

/// The name the caller-tools server has among the run's MCP servers: agents show its tools to the
/// model under it (Claude Code and Codex as `mcp__caller__NAME`, Gemini and Qwen as `NAME`).
pub const SERVER_NAME: &str = "caller";

/// How long a handler may take by default before its call fails.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// What a handler returns: text, or a JSON value the agent gets as its JSON text.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolOutput {
    /// Plain text.
    Text(String),
    /// A JSON value.
    Json(Value),
}

impl ToolOutput {
    /// The text the agent receives.
    pub fn into_text(self) -> String {
        match self {
            Self::Text(text) => text,
            Self::Json(value) => value.to_string(),
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

/// The future a boxed handler returns: the output, or the message of the tool's error result.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, String>> + Send>>;

/// A boxed handler: the tool's input (a JSON object) in, its output or error message out.
pub type ToolHandler = Arc<dyn Fn(Value) -> ToolFuture + Send + Sync>;

/// One caller-defined tool.
#[derive(Clone)]
pub struct CallerTool {
    name: String,
    description: String,
    input_schema: Value,
    handler: ToolHandler,
    timeout: Duration,
}

impl CallerTool {
    /// A tool named `name` whose `handler` answers each call; its error (any `Display`) becomes
    /// the tool's error result.
    pub fn new<F, Fut, O, E>(name: impl Into<String>, description: impl Into<String>, input_schema: Value, handler: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: std::fmt::Display,
    {
        let handler = Arc::new(handler);
        let boxed: ToolHandler = Arc::new(move |input| {
            let future = handler(input);
            Box::pin(async move { future.await.map(Into::into).map_err(|e| e.to_string()) })
        });
        Self { name: name.into(), description: description.into(), input_schema, handler: boxed, timeout: DEFAULT_TOOL_TIMEOUT }
    }

    /// Sets how long one call may take before it fails (default [`DEFAULT_TOOL_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the model is told the tool does.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of its input.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// How long one call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl std::fmt::Debug for CallerTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerTool").field("name", &self.name).field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

/// Checks the tools before anything starts: names MCP and every agent accept, no duplicates,
/// object schemas.
pub fn validate(tools: &[CallerTool]) -> Result<(), AgentError> {
    let invalid = |reason: String| Err(AgentError::InvalidRequest { reason });
    let mut seen = std::collections::BTreeSet::new();
    for tool in tools {
        let name = tool.name();
        if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return invalid(format!("caller tool name {name:?} must be 1 to 64 of [A-Za-z0-9_-]"));
        }
        if !seen.insert(name) {
            return invalid(format!("caller tool {name:?} is defined twice"));
        }
        if !tool.input_schema().is_object() {
            return invalid(format!("caller tool {name:?} needs a JSON Schema object as its input schema"));
        }
    }
    Ok(())
}

/// Starts the MCP server of `request`'s caller tools, if it has any, and adds it to the
/// request's MCP servers under [`SERVER_NAME`] with the run's secret as its bearer header. The
/// backend keeps the returned server alive for the run ([`crate::kit::RunSettings::hold`]).
pub async fn attach(request: &mut RunRequest) -> Result<Option<ToolServer>, AgentError> {
    if request.caller_tools.is_empty() {
        return Ok(None);
    }
    validate(&request.caller_tools)?;
    if request.portable.mcp_servers.contains_key(SERVER_NAME) {
        return Err(AgentError::InvalidRequest { reason: format!("the MCP server name {SERVER_NAME:?} is taken by the caller tools") });
    }
    let server = ToolServer::start(request.caller_tools.clone()).await?;
    request.portable.mcp_servers.insert(SERVER_NAME.into(), server.mcp_server());
    Ok(Some(server))
}
