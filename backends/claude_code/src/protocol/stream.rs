//! `stream_event` lines (`--include-partial-messages`): the Anthropic Messages SSE events
//! `message_start`, `content_block_start/delta/stop`, `message_delta`, `message_stop`, `ping`
//! and `error`, turned into item deltas as they arrive.
//!
//! Text deltas go to the message item, thinking deltas to a reasoning item, `input_json` deltas
//! to the tool_call item. Block events carry only an index: they belong to the message that the
//! last `message_start` of the same thread opened.

use agent_api::kit::driver::Unparsed;
use agent_api::kit::Ctx;
use agent_api::universal::{NewItem, ReasoningVisibility};
use serde_json::Value;

use super::messages::{thread_of, BlockKind, StreamedBlock};
use super::{short, ClaudeProtocol};
use crate::tools::{self, ToolCallInfo};

impl ClaudeProtocol {
    pub(crate) fn on_stream_event(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let event =
            message.get("event").filter(|e| e.is_object()).ok_or_else(|| Unparsed("a stream_event has no `event` object".into()))?;
        let kind = event.get("type").and_then(Value::as_str).ok_or_else(|| Unparsed("a stream_event's event has no `type`".into()))?;
        let thread = thread_of(message);
        match kind {
            "message_start" => {
                let id = event
                    .pointer("/message/id")
                    .and_then(Value::as_str)
                    .or_else(|| message.get("uuid").and_then(Value::as_str))
                    .unwrap_or("assistant")
                    .to_string();
                self.ensure_message(&id, thread.clone(), ctx);
                self.streaming.insert(thread, id);
            }
            "content_block_start" => {
                let index = index_of(event)?;
                let block = event
                    .get("content_block")
                    .filter(|b| b.is_object())
                    .ok_or_else(|| Unparsed("content_block_start has no `content_block`".into()))?;
                let msg_id = self.streaming_message(&thread, message, ctx);
                self.block_start(&msg_id, thread, index, block, ctx);
            }
            "content_block_delta" => {
                let index = index_of(event)?;
                let delta =
                    event.get("delta").filter(|d| d.is_object()).ok_or_else(|| Unparsed("content_block_delta has no `delta`".into()))?;
                let msg_id = self.streaming_message(&thread, message, ctx);
                self.block_delta(&msg_id, index, delta, ctx);
            }
            "content_block_stop" => {
                let index = index_of(event)?;
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
                let text = short(event.pointer("/error/message"), 300).unwrap_or_else(|| "the model stream reported an error".into());
                let code = short(event.pointer("/error/type"), 64);
                ctx.transcript.error(text, code, None);
            }
            other => {
                ctx.transcript.status("unknown_stream_event", short(Some(&Value::from(other)), 64));
            }
        }
        Ok(())
    }

    /// The message block events of `thread` belong to; opens one when no `message_start` came.
    fn streaming_message(&mut self, thread: &Option<String>, message: &Value, ctx: &mut Ctx<'_>) -> String {
        if let Some(id) = self.streaming.get(thread) {
            return id.clone();
        }
        let id = message.get("uuid").and_then(Value::as_str).unwrap_or("assistant").to_string();
        self.ensure_message(&id, thread.clone(), ctx);
        self.streaming.insert(thread.clone(), id.clone());
        id
    }

    fn push_block(&mut self, msg_id: &str, index: u64, kind: BlockKind, item_id: Option<String>, text: &str) {
        if let Some(message) = self.messages.get_mut(msg_id) {
            message.by_index.insert(index, message.streamed.len());
            message.streamed.push(StreamedBlock { kind, item_id, text: text.to_string(), matched: false });
        }
    }

    fn block_start(&mut self, msg_id: &str, thread: Option<String>, index: u64, block: &Value, ctx: &mut Ctx<'_>) {
        let parent = self.ensure_message(msg_id, thread, ctx);
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("unknown");
        match kind {
            "text" => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or_default();
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
                let item = ctx.transcript.start_item(NewItem::reasoning(visibility).parent(Some(parent)));
                let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default();
                if !text.is_empty() {
                    ctx.transcript.delta(&item, text);
                }
                self.push_block(msg_id, index, block_kind, Some(item), text);
            }
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                let id = block.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
                let name = block.get("name").and_then(Value::as_str).unwrap_or("unknown").to_string();
                let new =
                    NewItem::tool_call(name.clone(), "", id.clone()).native(id.clone()).parent(Some(parent)).tool(tools::call_meta(&name));
                let item = ctx.transcript.start_item(new);
                self.tools.insert(id.clone(), ToolCallInfo { item_id: item.clone(), name, input: Value::Null });
                self.push_block(msg_id, index, BlockKind::Tool(id), Some(item), "");
            }
            _ if kind.ends_with("_tool_result") => {
                // Server tool results arrive whole in their start event.
                self.tool_result(block, None, ctx);
                self.push_block(msg_id, index, BlockKind::Other, None, "");
            }
            other => {
                ctx.transcript.status("unknown_content_block", short(Some(&Value::from(other)), 64));
                self.push_block(msg_id, index, BlockKind::Other, None, "");
            }
        }
    }

    fn block_delta(&mut self, msg_id: &str, index: u64, delta: &Value, ctx: &mut Ctx<'_>) {
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("unknown");
        let (message_item, block) = match self.messages.get_mut(msg_id) {
            Some(m) => {
                let at = m.by_index.get(&index).copied();
                (m.item_id.clone(), at.and_then(|i| m.streamed.get_mut(i)))
            }
            None => (None, None),
        };
        let text_of = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match kind {
            "text_delta" => {
                let text = text_of("text");
                if let Some(block) = block {
                    block.text.push_str(text);
                }
                if let Some(item) = message_item.filter(|_| !text.is_empty()) {
                    ctx.transcript.delta(&item, text);
                }
            }
            "thinking_delta" | "input_json_delta" => {
                let text = text_of(if kind == "thinking_delta" { "thinking" } else { "partial_json" });
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
                ctx.transcript.status("unknown_stream_delta", short(Some(&Value::from(other)), 64));
            }
        }
    }

    fn block_stop(&mut self, msg_id: &str, index: u64, ctx: &mut Ctx<'_>) {
        let Some(message) = self.messages.get(msg_id) else { return };
        let Some(block) = message.by_index.get(&index).and_then(|i| message.streamed.get(*i)) else { return };
        // Text stays on the message item, which completes with its message; reasoning and
        // tool calls are whole at their block's end (unless a snapshot completed them first).
        if let Some(item) = block.item_id.clone() {
            if ctx.transcript.open_item(&item).is_some() {
                ctx.transcript.complete_item(&item);
            }
        }
    }
}

fn index_of(event: &Value) -> Result<u64, Unparsed> {
    event.get("index").and_then(Value::as_u64).ok_or_else(|| Unparsed("a content block event has no numeric `index`".into()))
}
