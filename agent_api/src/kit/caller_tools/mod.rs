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

use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::RunRequest;

#[cfg(feature = "caller-tools")]
pub mod client;
#[cfg(feature = "caller-tools")]
mod server;

pub use crate::vocabulary::caller_tool::{
    validate, CallerTool, ToolFuture, ToolHandler, ToolOutput, DEFAULT_TOOL_TIMEOUT,
};
#[cfg(feature = "caller-tools")]
pub use server::ToolServer;

/// This build has no caller-tools server (the `caller-tools` feature is off): no value of this
/// type exists, and [`attach`] refuses a request that defines tools.
#[cfg(not(feature = "caller-tools"))]
#[derive(Debug)]
pub enum ToolServer {}

/// The name the caller-tools server has among the run's MCP servers: agents show its tools to the
/// model under it (some as `mcp__caller__NAME`, others as plain `NAME`).
pub const SERVER_NAME: &str = "caller";

/// Starts the MCP server of `request`'s caller tools, if it has any, and adds it to the
/// request's MCP servers under [`SERVER_NAME`] with the run's secret as its bearer header. The
/// backend keeps the returned server alive for the run ([`crate::kit::RunSettings::hold`]).
pub async fn attach(request: &mut RunRequest) -> Result<Option<ToolServer>, AgentError> {
    if request.caller_tools.is_empty() {
        return Ok(None);
    }
    validate(&request.caller_tools)?;
    if request.portable.mcp_servers.contains_key(SERVER_NAME) {
        return Err(AgentError::InvalidRequest {
            reason: format!("the MCP server name {SERVER_NAME:?} is taken by the caller tools"),
        });
    }
    serve(request).await
}

#[cfg(feature = "caller-tools")]
async fn serve(request: &mut RunRequest) -> Result<Option<ToolServer>, AgentError> {
    let server = ToolServer::start(request.caller_tools.clone()).await?;
    request
        .portable
        .mcp_servers
        .insert(SERVER_NAME.into(), server.mcp_server());
    Ok(Some(server))
}

#[cfg(not(feature = "caller-tools"))]
async fn serve(_: &mut RunRequest) -> Result<Option<ToolServer>, AgentError> {
    crate::vocabulary::capability::check_built(agent_api_capabilities::CALLER_TOOLS).map(|()| None)
}
