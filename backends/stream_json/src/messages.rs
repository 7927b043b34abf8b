//! `assistant` and `user` messages: message, reasoning, tool_call and tool_result items.
//!
//! The protocol prints one `assistant` line per content block (all with the same message id).
//! With `--include-partial-messages` the same content also streams first as `stream_event`
//! deltas; each snapshot block is then matched to the streamed block it repeats, so the final
//! content of every item is its text exactly once.

use std::collections::HashMap;

use agent_api::kit::transcript::NewItem;
use agent_api::kit::Ctx;
use agent_api::kit::Unparsed;
use agent_api::universal::{ContentPart, ItemKind, ItemRole, ReasoningVisibility};
use serde_json::Value;

use super::StreamJson;
use crate::tools::{self, ToolCallInfo};

/// What a streamed content block was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Text,
    Thinking,
    RedactedThinking,
    Tool(String),
    Other,
}

/// A content block that arrived as `stream_event`s.
#[derive(Debug, Clone)]
pub(crate) struct StreamedBlock {
    pub kind: BlockKind,
    /// The reasoning or tool_call item of the block.
    pub item_id: Option<String>,
    /// Text or thinking streamed so far.
    pub text: String,
    /// Whether an `assistant` snapshot already repeated it.
    pub matched: bool,
}

/// One assistant message (native message id) and what streamed of it.
#[derive(Debug, Clone)]
pub(crate) struct OpenMessage {
    /// The message item; `None` once it completed.
    pub item_id: Option<String>,
    /// `parent_tool_use_id`: `None` for the main conversation, the Task call for a subagent.
    pub thread: Option<String>,
    pub streamed: Vec<StreamedBlock>,
    /// Stream block index → position in `streamed`.
    pub by_index: HashMap<u64, usize>,
    /// Its place in the order messages were opened.
    pub opened: u64,
}

/// The `parent_tool_use_id` of a line.
pub(crate) fn thread_of(message: &Value) -> Option<String> {
    message
        .get("parent_tool_use_id")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether an assistant line is the CLI's synthetic API-error message (not model text).
fn is_error_message(message: &Value) -> bool {
    message.get("error").is_some_and(|e| !e.is_null())
        || message.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
}

impl StreamJson {
    /// The message item of `msg_id`, opening it (and closing the thread's other messages) when
    /// it is not open.
    pub(crate) fn ensure_message(
        &mut self,
        msg_id: &str,
        thread: Option<String>,
        ctx: &mut Ctx<'_>,
    ) -> String {
        if let Some(item) = self.messages.get(msg_id).and_then(|m| m.item_id.clone()) {
            return item;
        }
        let others = self.open_order(|id, m| m.thread == thread && id != msg_id);
        for id in others {
            self.close_or_fail(&thread, &id, ctx);
            self.messages.remove(&id);
        }
        let parent = thread
            .as_ref()
            .and_then(|t| self.tools.get(t))
            .map(|t| t.item_id.clone());
        let item = ctx.transcript.start_item(
            NewItem::message(ItemRole::Assistant)
                .native(msg_id)
                .parent(parent),
        );
        let opened = self.messages_opened;
        self.messages_opened += 1;
        let entry = self
            .messages
            .entry(msg_id.to_string())
            .or_insert_with(|| OpenMessage {
                item_id: None,
                thread,
                streamed: Vec::new(),
                by_index: HashMap::new(),
                opened,
            });
        entry.item_id = Some(item.clone());
        item
    }

    /// Completes a message item and the reasoning and tool items of its streamed blocks.
    pub(crate) fn close_message(&mut self, msg_id: &str, ctx: &mut Ctx<'_>) {
        self.end_message(msg_id, true, ctx);
    }

    /// Ends a message of `thread` because its turn moved on: a message whose stream never
    /// reached `message_stop` was cut (a stream error the CLI retried, an interrupt), so it and
    /// its open items fail, and its text is no answer. Any other message completes.
    fn close_or_fail(&mut self, thread: &Option<String>, msg_id: &str, ctx: &mut Ctx<'_>) {
        let cut = self
            .streaming
            .get(thread)
            .is_some_and(|streaming| streaming == msg_id);
        if cut {
            self.streaming.remove(thread);
        }
        self.end_message(msg_id, !cut, ctx);
    }

    fn end_message(&mut self, msg_id: &str, completed: bool, ctx: &mut Ctx<'_>) {
        let Some(message) = self.messages.get_mut(msg_id) else {
            return;
        };
        let items = message
            .streamed
            .iter()
            .filter_map(|b| b.item_id.as_ref())
            .chain(message.item_id.as_ref());
        for item in items {
            if ctx.transcript.open_item(item).is_none() {
                continue;
            }
            if completed {
                ctx.transcript.complete_item(item);
            } else {
                ctx.transcript.fail_item(item);
            }
        }
        message.item_id = None;
    }

    /// The ids of the messages that `keep` keeps, in the order they were opened: messages end
    /// in a stable order, whatever the map's.
    fn open_order(&self, keep: impl Fn(&str, &OpenMessage) -> bool) -> Vec<String> {
        let mut kept: Vec<(u64, String)> = self
            .messages
            .iter()
            .filter(|(id, m)| keep(id.as_str(), m))
            .map(|(id, m)| (m.opened, id.clone()))
            .collect();
        kept.sort_unstable();
        kept.into_iter().map(|(_, id)| id).collect()
    }

    /// Completes every open message of one thread (its turn moved on).
    pub(crate) fn close_thread(&mut self, thread: &Option<String>, ctx: &mut Ctx<'_>) {
        for id in self.open_order(|_, m| &m.thread == thread) {
            self.close_message(&id, ctx);
        }
        self.streaming.remove(thread);
    }

    /// Ends every open message (a turn ended); one still streaming was cut and fails.
    pub(crate) fn close_all_messages(&mut self, ctx: &mut Ctx<'_>) {
        for id in self.open_order(|_, _| true) {
            let thread = self.messages[&id].thread.clone();
            self.close_or_fail(&thread, &id, ctx);
        }
        self.messages.clear();
        self.streaming.clear();
    }

    pub(crate) fn on_assistant(
        &mut self,
        message: &Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        let msg = message
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| Unparsed("an assistant line has no `message` object".into()))?;
        if is_error_message(message) {
            self.outcome.synthetic_error(message);
            return Ok(());
        }
        if msg
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .is_some_and(|t| self.outcome.is_error_text(t))
        {
            return Ok(());
        }
        let thread = thread_of(message);
        // A line without a message id (a dialect may write them) is a message of its own: a shared
        // fallback id would join unrelated answers into one.
        let msg_id = match msg.get("id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => match message.get("uuid").and_then(Value::as_str) {
                Some(line_id) => line_id.to_string(),
                None => format!("line_{}", uuid::Uuid::new_v4().simple()),
            },
        };
        let blocks: Vec<Value> = match msg.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(text)) => vec![serde_json::json!({ "type": "text", "text": text })],
            _ => return Err(Unparsed("an assistant message has no content array".into())),
        };
        for block in &blocks {
            self.assistant_block(&msg_id, thread.clone(), block, ctx);
        }
        Ok(())
    }

    /// The first streamed block of `msg_id` that `matches` and no snapshot repeated yet.
    fn take_streamed(
        &mut self,
        msg_id: &str,
        matches: impl Fn(&BlockKind) -> bool,
    ) -> Option<StreamedBlock> {
        let message = self.messages.get_mut(msg_id)?;
        let block = message
            .streamed
            .iter_mut()
            .find(|b| !b.matched && matches(&b.kind))?;
        block.matched = true;
        Some(block.clone())
    }

    fn assistant_block(
        &mut self,
        msg_id: &str,
        thread: Option<String>,
        block: &Value,
        ctx: &mut Ctx<'_>,
    ) {
        let kind = crate::str_field(block, "type").unwrap_or("unknown");
        match kind {
            "text" => {
                let text = crate::str_field(block, "text").unwrap_or_default();
                let streamed = self.take_streamed(msg_id, |k| *k == BlockKind::Text);
                let rest = match &streamed {
                    Some(s) => text.strip_prefix(s.text.as_str()).unwrap_or_default(),
                    None => text,
                };
                if !rest.is_empty() {
                    let item = self.ensure_message(msg_id, thread, ctx);
                    ctx.transcript.delta(&item, rest);
                }
            }
            "thinking" | "redacted_thinking" => {
                let text = crate::str_field(block, "thinking").unwrap_or_default();
                let want = if kind == "thinking" {
                    BlockKind::Thinking
                } else {
                    BlockKind::RedactedThinking
                };
                match self
                    .take_streamed(msg_id, |k| *k == want)
                    .and_then(|s| s.item_id.clone().map(|id| (id, s.text)))
                {
                    Some((item, streamed)) => {
                        let rest = text.strip_prefix(streamed.as_str()).unwrap_or_default();
                        if !rest.is_empty() {
                            ctx.transcript.delta(&item, rest);
                        }
                        ctx.transcript.complete_item(&item);
                    }
                    None => {
                        let parent = self.ensure_message(msg_id, thread, ctx);
                        let visibility = if kind == "thinking" {
                            ReasoningVisibility::Public
                        } else {
                            ReasoningVisibility::Private
                        };
                        let item = ctx
                            .transcript
                            .start_item(NewItem::reasoning(visibility).parent(Some(parent)));
                        if !text.is_empty() {
                            ctx.transcript.delta(&item, text);
                        }
                        ctx.transcript.complete_item(&item);
                    }
                }
            }
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                self.tool_call_snapshot(msg_id, thread, block, ctx)
            }
            _ if kind.ends_with("_tool_result") => {
                let id = crate::str_field(block, "tool_use_id")
                    .unwrap_or_default()
                    .to_string();
                // A streamed server tool result was already mapped at its content_block_start.
                if !self.tool_result_seen(&id) {
                    self.tool_result(block, None, ctx);
                }
            }
            "image" => {
                let item = self.ensure_message(msg_id, thread, ctx);
                let part = ContentPart::Json {
                    json: tools::describe_image(block),
                };
                ctx.transcript.update_item(&item, |i| i.content.push(part));
            }
            other => {
                ctx.transcript.status(
                    "unknown_content_block",
                    Some(super::short(Some(&Value::from(other)), 64).unwrap_or_default()),
                );
            }
        }
    }

    /// A whole tool_use block: completes the streamed tool_call item, or opens and completes one.
    fn tool_call_snapshot(
        &mut self,
        msg_id: &str,
        thread: Option<String>,
        block: &Value,
        ctx: &mut Ctx<'_>,
    ) {
        let (id, name) = crate::tool_use(block);
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let _ = self.take_streamed(msg_id, |k| *k == BlockKind::Tool(id.clone()));
        let part = ContentPart::ToolCall {
            name: name.clone(),
            arguments: input.to_string(),
            call_id: id.clone(),
        };
        match self.tools.get_mut(&id) {
            Some(info) => {
                let item = info.item_id.clone();
                if ctx.transcript.open_item(&item).is_some() {
                    let meta = tools::call_meta(&self.dialect.tools, &name, &input);
                    ctx.transcript.update_item(&item, |i| i.tool = Some(meta));
                    ctx.transcript.complete_item_with(&item, vec![part]);
                }
                info.input = input;
            }
            None => {
                let parent = self.ensure_message(msg_id, thread, ctx);
                let new = NewItem::tool_call(name.clone(), "", id.clone())
                    .native(id.clone())
                    .parent(Some(parent))
                    .tool(tools::call_meta(&self.dialect.tools, &name, &input));
                let item = ctx.transcript.start_item(new);
                ctx.transcript.complete_item_with(&item, vec![part]);
                self.tools.insert(
                    id,
                    ToolCallInfo {
                        item_id: item,
                        name,
                        input,
                    },
                );
            }
        }
    }

    fn tool_result_seen(&self, call_id: &str) -> bool {
        self.results_seen.contains(call_id)
    }

    /// One tool_result item for a `tool_result` (or server `*_tool_result`) block.
    pub(crate) fn tool_result(
        &mut self,
        block: &Value,
        structured: Option<&Value>,
        ctx: &mut Ctx<'_>,
    ) {
        let call_id = crate::str_field(block, "tool_use_id")
            .unwrap_or_default()
            .to_string();
        let call = self.tools.get(&call_id);
        let mapping = tools::map_result(&self.dialect.tools, block, call, structured);
        let parent = call.map(|c| c.item_id.clone());
        let mut new = NewItem::other(ItemKind::ToolResult, Some(ItemRole::Tool), mapping.parts)
            .parent(parent)
            .tool(mapping.meta);
        if !call_id.is_empty() {
            new = new.native(call_id.clone());
        }
        let item = ctx.transcript.start_item(new);
        if mapping.failed {
            ctx.transcript.fail_item(&item);
        } else {
            ctx.transcript.complete_item(&item);
        }
        // The call is answered: its input is not needed again, and a long session must not keep
        // every input it ever sent (the entry itself stays, so a late snapshot still matches it).
        if let Some(call) = self.tools.get_mut(&call_id) {
            call.input = Value::Null;
        }
        self.results_seen.insert(call_id);
    }

    pub(crate) fn on_user(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let content = message
            .pointer("/message/content")
            .ok_or_else(|| Unparsed("a user line has no `message.content`".into()))?;
        let thread = thread_of(message);
        self.close_thread(&thread, ctx);
        let structured = message.get("tool_use_result");
        match content {
            Value::String(text) => self.user_text(text, ctx),
            Value::Array(blocks) => {
                let results = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .count();
                let structured = structured.filter(|_| results == 1);
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("tool_result") => self.tool_result(block, structured, ctx),
                        Some("text") => {
                            self.user_text(crate::str_field(block, "text").unwrap_or_default(), ctx)
                        }
                        Some("image") => {
                            let part = ContentPart::Json {
                                json: tools::describe_image(block),
                            };
                            let item = ctx.transcript.start_item(NewItem::other(
                                ItemKind::Message,
                                Some(ItemRole::User),
                                vec![part],
                            ));
                            ctx.transcript.complete_item(&item);
                        }
                        other => {
                            let label = other.unwrap_or("unknown").to_string();
                            ctx.transcript.status(
                                "unknown_content_block",
                                Some(agent_api::kit::bounds::utf8_prefix(&label, 64).to_string()),
                            );
                        }
                    }
                }
            }
            _ => {
                return Err(Unparsed(
                    "a user message's content is neither text nor blocks".into(),
                ))
            }
        }
        Ok(())
    }

    /// User text the CLI printed: its interrupt marker becomes a status, anything else a user
    /// message (for example a subagent's prompt).
    fn user_text(&mut self, text: &str, ctx: &mut Ctx<'_>) {
        if text.starts_with("[Request interrupted by user") {
            self.outcome.interrupted = true;
            ctx.transcript
                .status("interrupted", Some("the turn was interrupted".into()));
            return;
        }
        let item = ctx.transcript.start_item(NewItem::message(ItemRole::User));
        ctx.transcript.delta(&item, text);
        ctx.transcript.complete_item(&item);
    }
}
