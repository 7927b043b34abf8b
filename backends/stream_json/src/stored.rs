//! Stored sessions in the protocol's store shape (`<config dir>/projects/<dir>/<id>.jsonl`): its
//! `user` and `assistant` lines carry the same `message` objects as the stream-json output (one
//! `assistant` line per content block, under the message's id), so a stored session reads
//! through the converter once each line is put in the output's shape. The store's own
//! bookkeeping lines (queued prompts, attachments, summaries, snapshots) carry no transcript.
//! Another agent's store is read the same way once its records are put in this shape.

use agent_api::kit::{Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::{AgentError, RunCompletion};
use serde_json::{json, Value};

use crate::StreamJson;

/// Store lines that hold no transcript (as of the protocol's CLI 2.1.x).
const BOOKKEEPING: &[&str] = &[
    "queue-operation",
    "attachment",
    "last-prompt",
    "summary",
    "file-history-snapshot",
    "custom-title",
    "progress",
    "permission-mode",
];

/// The text a person typed, for a `user` line that holds one (not tool results, not the CLI's
/// injected context).
pub fn user_prompt(line: &Value) -> Option<&str> {
    if line.get("isMeta").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    match line.pointer("/message/content")? {
        Value::String(text) => Some(text),
        Value::Array(blocks) => blocks
            .iter()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("text"))?
            .get("text")?
            .as_str(),
        _ => None,
    }
}

/// The converter of a stored session: store lines in the output's shape through a [`StreamJson`].
#[derive(Debug)]
pub struct StoreReader {
    inner: StreamJson,
    /// The converter's name (`<agent>.session_store`).
    name: &'static str,
    /// The native id of the last assistant message and its text so far (the session's answer).
    last_answer: Option<(String, String)>,
}

impl StoreReader {
    /// A stored-session converter over `inner` (a replaying converter of the agent's dialect;
    /// another agent's store lines are put in this store's shape first), named `name`.
    pub fn new(inner: StreamJson, name: &'static str) -> Self {
        Self {
            inner,
            name,
            last_answer: None,
        }
    }

    fn start(&mut self, line: &Value, ctx: &mut Ctx<'_>) {
        if ctx.transcript.native_session_id().is_some() {
            return;
        }
        if let Some(id) = line.get("sessionId").and_then(Value::as_str) {
            ctx.transcript.set_native_session_id(id);
            let metadata = json!({ "cwd": line.get("cwd"), "version": line.get("version"), "source": "session_store" });
            ctx.transcript.session_started(Some(metadata));
        }
    }

    fn note_answer(&mut self, line: &Value) {
        let Some(message) = line.get("message") else {
            return;
        };
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .or_else(|| line.get("uuid").and_then(Value::as_str))
            .unwrap_or_default();
        if self.last_answer.as_ref().is_none_or(|(last, _)| last != id) {
            self.last_answer = Some((id.to_string(), String::new()));
        }
        let texts = message
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let text: String = texts
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text")?.as_str())
            .collect();
        if let Some((_, answer)) = &mut self.last_answer {
            answer.push_str(&text);
        }
    }
}

impl Protocol for StoreReader {
    fn name(&self) -> &'static str {
        self.name
    }

    fn on_message(&mut self, mut line: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let kind = line
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a stored line has no string `type`".into()))?;
        if BOOKKEEPING.contains(&kind) {
            return Ok(());
        }
        self.start(&line, ctx);
        match kind {
            "user"
                if user_prompt(&line).is_none()
                    && line
                        .pointer("/message/content")
                        .is_some_and(Value::is_string) =>
            {
                Ok(())
            }
            "user" => {
                // The store spells the structured tool result as the output's `tool_use_result`.
                if let Some(object) = line.as_object_mut() {
                    if let Some(result) = object.remove("toolUseResult") {
                        object.insert("tool_use_result".into(), result);
                    }
                }
                self.inner.on_message(line, ctx)
            }
            "assistant" => {
                self.note_answer(&line);
                self.inner.on_message(line, ctx)
            }
            "system" => self.inner.on_message(line, ctx),
            _ => Err(Unparsed("a stored line of an unknown type".into())),
        }
    }

    fn finish(&mut self, _exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.inner.close_transcript(ctx);
        let mut completion = RunCompletion::new();
        completion.final_text = self
            .last_answer
            .take()
            .map(|(_, text)| text)
            .filter(|t| !t.is_empty());
        Ok(completion)
    }
}
