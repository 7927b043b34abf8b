//! A tool the caller defines for one run ([`CallerTool`]): its name, description, input schema and
//! handler, as a request carries it. Serving the tools to the agent over MCP is the caller-tools
//! feature's (`crate::kit::caller_tools`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::vocabulary::error::AgentError;

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
    // Only the caller-tools server (the `caller-tools` feature) calls it.
    #[cfg_attr(not(feature = "caller-tools"), allow(dead_code))]
    pub(crate) handler: ToolHandler,
    timeout: Duration,
}

impl CallerTool {
    /// A tool named `name` whose `handler` answers each call; its error (any `Display`) becomes
    /// the tool's error result.
    pub fn new<F, Fut, O, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
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
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            handler: boxed,
            timeout: DEFAULT_TOOL_TIMEOUT,
        }
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
        f.debug_struct("CallerTool")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Checks the tools before anything starts: names MCP and every agent accept, no duplicates,
/// object schemas.
pub fn validate(tools: &[CallerTool]) -> Result<(), AgentError> {
    let invalid = |reason: String| Err(AgentError::InvalidRequest { reason });
    let mut seen = std::collections::BTreeSet::new();
    for tool in tools {
        let name = tool.name();
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return invalid(format!(
                "caller tool name {name:?} must be 1 to 64 of [A-Za-z0-9_-]"
            ));
        }
        if !seen.insert(name) {
            return invalid(format!("caller tool {name:?} is defined twice"));
        }
        if !tool.input_schema().is_object() {
            return invalid(format!(
                "caller tool {name:?} needs a JSON Schema object as its input schema"
            ));
        }
    }
    Ok(())
}
