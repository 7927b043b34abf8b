//! A minimal MCP client over streamable HTTP, for the agents the SDK plays itself (built in, with
//! no CLI), the bench and tests: initialize, list tools, call a tool. JSON replies only, which the
//! caller-tools server sends.

use serde_json::{json, Value};

use crate::kit::http::HttpClient;
use crate::vocabulary::error::AgentError;

/// The MCP protocol version the client asks for.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// A client of one MCP endpoint.
#[derive(Clone)]
pub struct McpClient {
    http: HttpClient,
    path: String,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// A client of `url` (`http://host:port/path`) sending `authorization` (`Bearer SECRET`),
    /// when given, on every request.
    pub fn new(url: &str, authorization: Option<&str>) -> Result<Self, AgentError> {
        let invalid = || AgentError::InvalidRequest {
            reason: "an MCP URL must be http://host:port/path".into(),
        };
        let rest = url.strip_prefix("http://").ok_or_else(invalid)?;
        let slash = rest.find('/').ok_or_else(invalid)?;
        let mut http = HttpClient::new(&url[..7 + slash])?
            .with_header("accept", "application/json, text/event-stream")?;
        if let Some(value) = authorization {
            http = http.with_header("authorization", value)?;
        }
        Ok(Self {
            http,
            path: rest[slash..].to_string(),
        })
    }

    /// Sends one JSON-RPC request and returns its `result`; a refused request or a JSON-RPC
    /// error is [`AgentError::Http`].
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, AgentError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut reply = self.http.post_json(&self.path, &body).await?;
        if !(200..300).contains(&reply.status) {
            return Err(AgentError::Http {
                status: Some(reply.status),
                reason: format!("MCP {method} was refused"),
            });
        }
        if let Some(error) = reply.body.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(AgentError::Http {
                status: Some(reply.status),
                reason: format!("MCP {method} failed: {message}"),
            });
        }
        Ok(reply
            .body
            .get_mut("result")
            .map(Value::take)
            .unwrap_or(Value::Null))
    }

    /// The `initialize` handshake; returns the server's result.
    pub async fn initialize(&self) -> Result<Value, AgentError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "agent_api", "version": env!("CARGO_PKG_VERSION")},
        });
        self.request("initialize", params).await
    }

    /// The server's tools (`tools/list`).
    pub async fn list_tools(&self) -> Result<Vec<Value>, AgentError> {
        let mut result = self.request("tools/list", json!({})).await?;
        Ok(match result.get_mut("tools").map(Value::take) {
            Some(Value::Array(tools)) => tools,
            _ => Vec::new(),
        })
    }

    /// Calls `name` with `arguments` (`tools/call`); returns the tool's result (`content`,
    /// `isError`).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, AgentError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}

/// The text of a `tools/call` result: its text blocks joined.
pub fn result_text(result: &Value) -> String {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}
