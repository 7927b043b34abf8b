//! Gemini CLI's chat store: `~/.gemini/tmp/<project>/chats/session-<time>-<id prefix>.jsonl`.
//!
//! The first line is the chat's metadata (`sessionId`, `projectHash`, `startTime`, `kind`). Each
//! later line is a message record (`id`, `timestamp`, `type`: `user`, `gemini`, `info`, `error`,
//! …; `content`; a model message's `toolCalls` with their results), written again under the same
//! id when it changes (a model message gains its tool calls), or a `{"$set": {...}}` patch of the
//! chat's fields (its `messages` are records too). Records are read in the shape of the headless
//! interface's stream-json (`gemini -p … --output-format stream-json`) and through its converter
//! (`headless.rs`), so a stored chat reads back with the live headless run's tool calls and text.

use std::path::{Path, PathBuf};

use agent_api::history::{self, StoredSession};
use agent_api::kit::transcript::NewItem;
use agent_api::kit::Unparsed;
use agent_api::kit::{Ctx, ExitInfo, Protocol};
use agent_api::universal::ItemRole;
use agent_api::{AgentError, AgentKind, RunCompletion};
use agent_api_acp::ChatLayout;
use serde_json::{json, Value};

use crate::headless::Headless;

/// Lines of a chat read to find its id and first prompt.
const HEAD_LINES: usize = 50;
/// The context Gemini CLI puts before the first prompt as a user message.
const CONTEXT_MARK: &str = "<session_context>";

/// Gemini CLI's chat store under one `~/.gemini`: `agent_api_acp`'s store over [`GeminiChats`].
pub type GeminiSessionStore = agent_api_acp::ChatStore<GeminiChats>;

/// Gemini CLI's chat files: `tmp/<project>/chats/session-<time>-<id prefix>.jsonl`, the first
/// line naming the session.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct GeminiChats;

impl ChatLayout for GeminiChats {
    const KIND: AgentKind = crate::KIND;
    const HOME_DIR: &'static str = ".gemini";
    const PROJECTS: &'static str = "tmp";
    const ROOT: &'static str = "GEMINI_CLI_HOME";
    const ROOT_UNDER_HOME: &'static str = "";
    const AGENT_DIR: &'static str = ".gemini";
    /// Gemini CLI finds a directory's project folder (`tmp/<slug>`) by its `.project_root`.
    const PROJECT_MARKER: Option<&'static str> = Some(".project_root");

    /// The file name ends with the id's first 8 characters; the first line names the whole id.
    const NAMED_BY_ID: bool = false;

    fn is_session_name(name: &str, id: &str) -> bool {
        let prefix: String = id.chars().take(8).collect();
        name.strip_suffix(".jsonl")
            .is_some_and(|stem| stem.ends_with(&prefix))
    }

    fn is_session_head(first: &[u8], id: &str) -> bool {
        serde_json::from_slice::<Value>(first).is_ok_and(|meta| session_id(&meta) == Some(id))
    }

    fn describe(path: &Path) -> Option<StoredSession> {
        describe(path)
    }

    fn reader() -> Box<dyn Protocol> {
        Box::new(StoredGeminiSession::default())
    }
}

fn session_id(meta: &Value) -> Option<&str> {
    meta.get("sessionId").and_then(Value::as_str)
}

/// The text a person typed in a user record (not the CLI's context, not function responses).
fn typed_text(record: &Value) -> Option<String> {
    let text = match record.get("content")? {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => return None,
    };
    Some(text).filter(|t| !t.is_empty() && !t.starts_with(CONTEXT_MARK))
}

fn describe(path: &Path) -> Option<StoredSession> {
    let (meta, lines) = history::head(path)?;
    let mut lines = lines
        .take(HEAD_LINES)
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok());
    let mut session = StoredSession::from_file(session_id(&lines.next()?)?, &meta);
    // `<project>/.project_root` holds the working directory the project was made for.
    let project = path.parent()?.parent()?;
    let root = agent_api::kit::files::read_regular(&project.join(".project_root"), 64 * 1024).ok();
    session.cwd = root
        .and_then(|root| String::from_utf8(root).ok())
        .map(|root| PathBuf::from(root.trim()));
    session.first_prompt = lines
        .filter(|r| r.get("type").and_then(Value::as_str) == Some("user"))
        .find_map(|r| typed_text(&r))
        .map(|t| history::prompt_preview(&t, 200));
    Some(session)
}

/// The converter of a stored chat: each record, once its last version is known, as headless lines.
#[derive(Debug, Default)]
pub struct StoredGeminiSession {
    headless: Headless,
    /// The record read last; a record with the same id replaces it.
    pending: Option<Value>,
    started: bool,
}

impl StoredGeminiSession {
    fn record(&mut self, record: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let id = record
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a stored message has no string `id`".into()))?;
        if self
            .pending
            .as_ref()
            .and_then(|p| p.get("id"))
            .and_then(Value::as_str)
            != Some(id)
        {
            self.flush(ctx)?;
        }
        self.pending = Some(record);
        Ok(())
    }

    fn flush(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let Some(record) = self.pending.take() else {
            return Ok(());
        };
        match record.get("type").and_then(Value::as_str) {
            Some("user") => {
                if let Some(text) = typed_text(&record) {
                    let item = ctx.transcript.start_item(NewItem::message(ItemRole::User));
                    ctx.transcript.delta(&item, &text);
                    ctx.transcript.complete_item(&item);
                }
                Ok(())
            }
            Some("gemini") => self.model_message(&record, ctx),
            Some("error") => {
                let message = record
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("the chat recorded an error");
                self.headless
                    .on_message(json!({ "type": "error", "message": message }), ctx)
            }
            Some("info" | "warning") => Ok(()),
            _ => Err(Unparsed("a stored message of an unknown type".into())),
        }
    }

    fn model_message(&mut self, record: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        if let Some(text) = record
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.headless.on_message(
                json!({ "type": "message", "role": "assistant", "content": text, "delta": true }),
                ctx,
            )?;
        }
        for call in record
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
            let use_line = json!({ "type": "tool_use", "tool_name": call.get("name"), "tool_id": id, "parameters": call.get("args") });
            self.headless.on_message(use_line, ctx)?;
            // The live stream reports the display text as the output, else the function's response.
            let output = call
                .get("resultDisplay")
                .filter(|d| d.is_string())
                .cloned()
                .or_else(|| {
                    call.pointer("/result/0/functionResponse/response/output")
                        .cloned()
                });
            let status = call
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("error");
            self.headless.on_message(
                json!({ "type": "tool_result", "tool_id": id, "status": status, "output": output }),
                ctx,
            )?;
        }
        Ok(())
    }
}

impl Protocol for StoredGeminiSession {
    fn name(&self) -> &'static str {
        "gemini.session_store"
    }

    fn on_message(&mut self, line: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        if !line.is_object() {
            return Err(Unparsed("a stored line is not a JSON object".into()));
        }
        if !self.started {
            let id = session_id(&line)
                .ok_or_else(|| Unparsed("the chat's first line has no `sessionId`".into()))?;
            self.started = true;
            return self.headless.on_message(
                json!({ "type": "init", "session_id": id, "model": null }),
                ctx,
            );
        }
        if let Some(patch) = line.get("$set") {
            for record in patch
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.record(record.clone(), ctx)?;
            }
            return Ok(());
        }
        self.record(line, ctx)
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        if let Err(Unparsed(reason)) = self.flush(ctx) {
            ctx.transcript.unparsed(reason, self.name(), None);
        }
        let _ = self
            .headless
            .on_message(json!({ "type": "result", "status": "success" }), ctx);
        self.headless.finish(exit, ctx)
    }
}
