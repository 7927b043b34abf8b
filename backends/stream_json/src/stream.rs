//! `stream_event` lines (`--include-partial-messages`): the Anthropic Messages SSE events
//! `message_start`, `content_block_start/delta/stop`, `message_delta`, `message_stop`, `ping`
//! and `error`, turned into item deltas as they arrive.
//!
//! Text deltas go to the message item, thinking deltas to a reasoning item, `input_json` deltas
//! to the tool_call item. Block events carry only an index: they belong to the message that the
//! last `message_start` of the same thread opened.

use agent_api::kit::transcript::NewItem;
use agent_api::kit::Ctx;
use agent_api::kit::Unparsed;
use agent_api::universal::ReasoningVisibility;
use serde::Deserialize;
use serde_json::Value;

use super::messages::{BlockKind, StreamedBlock};
use super::{short, StreamJson};
use crate::tools::{self, ToolCallInfo};

/// A `stream_event` line, deserialized straight from its bytes (the hot path of a streamed run:
/// one line per delta). Fields a handler does not read are skipped without being built.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamLine {
    #[serde(default)]
    event: Option<SseEvent>,
    /// The thread: the tool call whose sub-agent streams, or none for the main agent.
    #[serde(default)]
    parent_tool_use_id: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SseEvent {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<SseDelta>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    message: Option<MessageHead>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct SseDelta {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
}

#[derive(Debug, Deserialize)]
struct MessageHead {
    #[serde(default)]
    id: Option<String>,
}

/// Whether a line is a `stream_event` by its first bytes (the CLI writes `type` first); only a
/// shortcut: any other line still goes through the `Value` path, which knows every type.
pub(crate) fn looks_like_stream_event(line: &[u8]) -> bool {
    line.starts_with(br#"{"type":"stream_event""#)
}

impl StreamJson {
    /// A `stream_event` that came through the `Value` path.
    pub(crate) fn on_stream_value(
        &mut self,
        message: Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        if !message.get("event").is_some_and(Value::is_object) {
            return Err(Unparsed("a stream_event has no `event` object".into()));
        }
        let line: StreamLine = serde_json::from_value(message).map_err(|e| {
            Unparsed(format!(
                "a stream_event: {}",
                agent_api::kit::describe_json_error(&e)
            ))
        })?;
        self.on_stream_event(line, ctx)
    }

    pub(crate) fn on_stream_event(
        &mut self,
        line: StreamLine,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        let StreamLine {
            event,
            parent_tool_use_id: thread,
            uuid,
        } = line;
        let event = event.ok_or_else(|| Unparsed("a stream_event has no `event` object".into()))?;
        let kind = event
            .kind
            .as_deref()
            .ok_or_else(|| Unparsed("a stream_event's event has no `type`".into()))?;
        let index = || {
            event
                .index
                .ok_or_else(|| Unparsed("a content block event has no numeric `index`".into()))
        };
        match kind {
            "message_start" => {
                let id = event
                    .message
                    .as_ref()
                    .and_then(|m| m.id.clone())
                    .or(uuid)
                    .unwrap_or_else(|| "assistant".into());
                self.ensure_message(&id, thread.clone(), ctx);
                self.streaming.insert(thread, id);
            }
            "content_block_start" => {
                let index = index()?;
                let block = event
                    .content_block
                    .as_ref()
                    .filter(|b| b.is_object())
                    .ok_or_else(|| Unparsed("content_block_start has no `content_block`".into()))?;
                let msg_id = self.streaming_message(&thread, uuid.as_deref(), ctx);
                self.block_start(&msg_id, thread, index, block, ctx);
            }
            "content_block_delta" => {
                let index = index()?;
                let delta = event
                    .delta
                    .as_ref()
                    .ok_or_else(|| Unparsed("content_block_delta has no `delta`".into()))?;
                let msg_id = self.streaming_message(&thread, uuid.as_deref(), ctx);
                self.block_delta(&msg_id, index, delta, ctx);
            }
            "content_block_stop" => {
                let index = index()?;
                if let Some(msg_id) = self.streaming.get(&thread).cloned() {
                    self.block_stop(&msg_id, index, ctx);
                }
            }
            "message_stop" => {
                if let Some(msg_id) = self.streaming.remove(&thread) {
                    self.close_message(&msg_id, ctx);
                }
            }
            // The stop reason and token counts come again, complete, in the turn's result.
            "message_delta" | "ping" => {}
            "error" => {
                let error = event.error.as_ref();
                let text = short(error.and_then(|e| e.get("message")), 300)
                    .unwrap_or_else(|| "the model stream reported an error".into());
                let code = short(error.and_then(|e| e.get("type")), 64);
                ctx.transcript.error(text, code, None);
            }
            other => {
                ctx.transcript.status(
                    "unknown_stream_event",
                    Some(agent_api::kit::bounds::utf8_prefix(other, 64).to_string()),
                );
            }
        }
        Ok(())
    }

    /// The message block events of `thread` belong to; opens one when no `message_start` came.
    fn streaming_message(
        &mut self,
        thread: &Option<String>,
        uuid: Option<&str>,
        ctx: &mut Ctx<'_>,
    ) -> String {
        if let Some(id) = self.streaming.get(thread) {
            return id.clone();
        }
        let id = uuid.unwrap_or("assistant").to_string();
        self.ensure_message(&id, thread.clone(), ctx);
        self.streaming.insert(thread.clone(), id.clone());
        id
    }

    fn push_block(
        &mut self,
        msg_id: &str,
        index: u64,
        kind: BlockKind,
        item_id: Option<String>,
        text: &str,
    ) {
        if let Some(message) = self.messages.get_mut(msg_id) {
            message.by_index.insert(index, message.streamed.len());
            message.streamed.push(StreamedBlock {
                kind,
                item_id,
                text: text.to_string(),
                matched: false,
            });
        }
    }

    fn block_start(
        &mut self,
        msg_id: &str,
        thread: Option<String>,
        index: u64,
        block: &Value,
        ctx: &mut Ctx<'_>,
    ) {
        let parent = self.ensure_message(msg_id, thread, ctx);
        let kind = crate::str_field(block, "type").unwrap_or("unknown");
        match kind {
            "text" => {
                let text = crate::str_field(block, "text").unwrap_or_default();
                if !text.is_empty() {
                    ctx.transcript.delta(&parent, text);
                }
                self.push_block(msg_id, index, BlockKind::Text, None, text);
            }
            "thinking" | "redacted_thinking" => {
                let (visibility, block_kind) = match kind {
                    "thinking" => (ReasoningVisibility::Public, BlockKind::Thinking),
                    _ => (ReasoningVisibility::Private, BlockKind::RedactedThinking),
                };
                let item = ctx
                    .transcript
                    .start_item(NewItem::reasoning(visibility).parent(Some(parent)));
                let text = crate::str_field(block, "thinking").unwrap_or_default();
                if !text.is_empty() {
                    ctx.transcript.delta(&item, text);
                }
                self.push_block(msg_id, index, block_kind, Some(item), text);
            }
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                let (id, name) = crate::tool_use(block);
                let new = NewItem::tool_call(name.clone(), "", id.clone())
                    .native(id.clone())
                    .parent(Some(parent))
                    .tool(tools::call_meta(&self.dialect.tools, &name, &Value::Null));
                let item = ctx.transcript.start_item(new);
                self.tools.insert(
                    id.clone(),
                    ToolCallInfo {
                        item_id: item.clone(),
                        name,
                        input: Value::Null,
                    },
                );
                self.push_block(msg_id, index, BlockKind::Tool(id), Some(item), "");
            }
            _ if kind.ends_with("_tool_result") => {
                // Server tool results arrive whole in their start event.
                self.tool_result(block, None, ctx);
                self.push_block(msg_id, index, BlockKind::Other, None, "");
            }
            other => {
                ctx.transcript.status(
                    "unknown_content_block",
                    short(Some(&Value::from(other)), 64),
                );
                self.push_block(msg_id, index, BlockKind::Other, None, "");
            }
        }
    }

    fn block_delta(&mut self, msg_id: &str, index: u64, delta: &SseDelta, ctx: &mut Ctx<'_>) {
        let kind = delta.kind.as_deref().unwrap_or("unknown");
        let (message_item, block) = match self.messages.get_mut(msg_id) {
            Some(m) => {
                let at = m.by_index.get(&index).copied();
                (m.item_id.clone(), at.and_then(|i| m.streamed.get_mut(i)))
            }
            None => (None, None),
        };
        match kind {
            "text_delta" => {
                let text = delta.text.as_deref().unwrap_or_default();
                if self.outcome.is_error_text(text) {
                    return;
                }
                if let Some(block) = block {
                    block.text.push_str(text);
                }
                if let Some(item) = message_item.filter(|_| !text.is_empty()) {
                    ctx.transcript.delta(&item, text);
                }
            }
            "thinking_delta" | "input_json_delta" => {
                let text = if kind == "thinking_delta" {
                    &delta.thinking
                } else {
                    &delta.partial_json
                };
                let text = text.as_deref().unwrap_or_default();
                if let Some(block) = block {
                    if kind == "thinking_delta" {
                        block.text.push_str(text);
                    }
                    if let Some(item) = block.item_id.clone().filter(|_| !text.is_empty()) {
                        ctx.transcript.delta(&item, text);
                    }
                }
            }
            // A signature only proves the thinking text; citations annotate text already streamed.
            "signature_delta" | "citations_delta" => {}
            other => {
                ctx.transcript.status(
                    "unknown_stream_delta",
                    Some(agent_api::kit::bounds::utf8_prefix(other, 64).to_string()),
                );
            }
        }
    }

    fn block_stop(&mut self, msg_id: &str, index: u64, ctx: &mut Ctx<'_>) {
        let Some(message) = self.messages.get(msg_id) else {
            return;
        };
        let Some(block) = message
            .by_index
            .get(&index)
            .and_then(|i| message.streamed.get(*i))
        else {
            return;
        };
        // Text stays on the message item, which completes with its message; reasoning and
        // tool calls are whole at their block's end (unless a snapshot completed them first).
        if let Some(item) = block.item_id.clone() {
            if ctx.transcript.open_item(&item).is_some() {
                ctx.transcript.complete_item(&item);
            }
        }
    }
}
