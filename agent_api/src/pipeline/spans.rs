//! A run's `tracing` spans, made from its universal events as the caller reads them (either view):
//! the run (`invoke_agent {agent}`), each tool call (`execute_tool {tool}`, from the tool call's
//! item to its result) and each permission or question wait (from the request to its resolution).
//! Their attributes follow OpenTelemetry's GenAI semantic conventions (`gen_ai.operation.name`,
//! `gen_ai.system`, `gen_ai.conversation.id`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
//! `gen_ai.usage.input_tokens`, …) and hold names, ids and counts only: never a prompt, an
//! answer, a tool's arguments or output, a command line or a question's text.
//!
//! A span is a child of the span current where the caller chose its view
//! ([`crate::RunHandle::into_universal`], [`crate::RunHandle::into_wrapper`]): instrument that
//! call and a server's request or turn becomes the run's parent. Without a `tracing` subscriber
//! interested in them, they cost a check per event.

use std::collections::HashMap;

use tracing::field::Empty;

use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::universal::{
    ContentPart, ItemKind, ItemStatus, PermissionStatus, UniversalEvent, UniversalEventBody,
};

/// Open spans a run keeps at most (tool calls, then waits): an agent opening more without closing
/// them gets no span for the rest, not unbounded memory.
const MAX_OPEN: usize = 256;

/// The spans of one run.
pub(crate) struct RunSpans {
    run: tracing::Span,
    /// Open tool calls, by call id (the item's id when it has none).
    tools: HashMap<String, tracing::Span>,
    /// Open permission and question waits, by their id.
    waits: HashMap<String, tracing::Span>,
    /// Whether the run's span has its conversation id.
    conversation: bool,
}

/// An agent's string as an attribute: at most `max` bytes.
fn cut(text: &str, max: usize) -> String {
    crate::guards::bounds::utf8_prefix(text, max).to_string()
}

/// The call id of a tool call or result item: its content's, else the item's own id.
fn call_id(item: &crate::vocabulary::universal::UniversalItem) -> &str {
    item.content
        .iter()
        .find_map(|part| match part {
            ContentPart::ToolCall { call_id, .. } | ContentPart::ToolResult { call_id, .. } => {
                Some(call_id.as_str())
            }
            _ => None,
        })
        .filter(|id| !id.is_empty())
        .unwrap_or(&item.item_id)
}

impl RunSpans {
    /// The spans of a run of `kind`, its run span opened now.
    pub(crate) fn new(kind: &AgentKind) -> Self {
        let run = tracing::info_span!(
            target: "agent_api::run",
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {kind}"),
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.system = kind.as_str(),
            gen_ai.agent.name = kind.as_str(),
            gen_ai.conversation.id = Empty,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
        );
        Self {
            run,
            tools: HashMap::new(),
            waits: HashMap::new(),
            conversation: false,
        }
    }

    /// The run's span: its completion records the usage on it.
    pub(crate) fn run(&self) -> &tracing::Span {
        &self.run
    }

    /// Opens or closes the spans `event` starts or ends.
    pub(crate) fn observe(&mut self, event: &UniversalEvent) {
        if self.run.is_disabled() {
            return;
        }
        if let (false, Some(native)) = (self.conversation, &event.native_session_id) {
            self.run.record("gen_ai.conversation.id", &**native);
            self.conversation = true;
        }
        match &event.body {
            UniversalEventBody::ItemStarted(data) if data.item.kind == ItemKind::ToolCall => {
                let item = &data.item;
                let id = call_id(item);
                if self.tools.len() >= MAX_OPEN || self.tools.contains_key(id) {
                    return;
                }
                let tool = item.tool.as_ref();
                let name = tool
                    .and_then(|t| t.tool_name.as_deref())
                    .or_else(|| {
                        item.content.iter().find_map(|part| match part {
                            ContentPart::ToolCall { name, .. } => Some(name.as_str()),
                            _ => None,
                        })
                    })
                    .unwrap_or("tool");
                let name = cut(name, 64);
                let span = tracing::info_span!(
                    target: "agent_api::run",
                    parent: &self.run,
                    "execute_tool",
                    otel.name = %format_args!("execute_tool {name}"),
                    otel.status_code = Empty,
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = %name,
                    gen_ai.tool.call.id = %cut(id, 128),
                    gen_ai.tool.type = tool.map_or("function", |t| t.kind.as_str()),
                    error.type = Empty,
                );
                self.tools.insert(id.to_string(), span);
            }
            UniversalEventBody::ItemCompleted(data) if data.item.kind == ItemKind::ToolResult => {
                let item = &data.item;
                let span = self
                    .tools
                    .remove(call_id(item))
                    .or_else(|| item.parent_id.as_ref().and_then(|p| self.tools.remove(p)));
                if let (Some(span), ItemStatus::Failed) = (&span, item.status) {
                    span.record("otel.status_code", "ERROR");
                    span.record("error.type", "tool_failed");
                }
            }
            UniversalEventBody::PermissionRequested(data) => {
                let parent = self.parent(data.details.call_id.as_deref());
                let span = tracing::info_span!(
                    target: "agent_api::run",
                    parent: &parent,
                    "permission_wait",
                    otel.name = "permission wait",
                    agent_api.permission.id = %cut(&data.permission_id, 128),
                    agent_api.permission.status = Empty,
                    gen_ai.tool.name = data.tool_name.as_deref().map(|n| cut(n, 64)).as_deref(),
                );
                self.wait(&data.permission_id, span);
            }
            UniversalEventBody::PermissionResolved(data) => {
                if let Some(span) = self.waits.remove(&data.permission_id) {
                    let status = match data.status {
                        PermissionStatus::Requested => "requested",
                        PermissionStatus::Approved => "approved",
                        PermissionStatus::Denied => "denied",
                    };
                    span.record("agent_api.permission.status", status);
                }
            }
            UniversalEventBody::QuestionRequested(data) => {
                let parent = self.parent(data.call_id.as_deref());
                let span = tracing::info_span!(
                    target: "agent_api::run",
                    parent: &parent,
                    "question_wait",
                    otel.name = "question wait",
                    agent_api.question.id = %cut(&data.question_id, 128),
                    agent_api.question.options = data.options.len(),
                );
                self.wait(&data.question_id, span);
            }
            UniversalEventBody::QuestionResolved(data) => {
                self.waits.remove(&data.question_id);
            }
            _ => {}
        }
    }

    /// A wait's parent: the tool call that asks, when its span is open, else the run.
    fn parent(&self, call_id: Option<&str>) -> tracing::Span {
        call_id
            .and_then(|id| self.tools.get(id))
            .unwrap_or(&self.run)
            .clone()
    }

    fn wait(&mut self, id: &str, span: tracing::Span) {
        if self.waits.len() < MAX_OPEN {
            self.waits.insert(id.to_string(), span);
        }
    }
}

/// Records a run's usage on its span: its tokens and the model that answered, where known.
pub(crate) fn record_usage(
    span: &tracing::Span,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    model: Option<&str>,
) {
    if let Some(tokens) = input_tokens {
        span.record("gen_ai.usage.input_tokens", tokens);
    }
    if let Some(tokens) = output_tokens {
        span.record("gen_ai.usage.output_tokens", tokens);
    }
    if let Some(model) = model {
        span.record("gen_ai.response.model", cut(model, 128).as_str());
    }
}

/// Records a run's failure on its span: the error's code.
pub(crate) fn record_error(span: &tracing::Span, error: &AgentError) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error.code());
}
