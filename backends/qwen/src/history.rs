//! Qwen Code's chat store: `~/.qwen/projects/<dir>/chats/<session id>.jsonl`, one record a line
//! (`uuid`, `sessionId`, `timestamp`, `cwd`, `version`, `type`: `user`, `assistant`,
//! `tool_result` or `system`), the message in the Google GenAI SDK's `Content` shape
//! (`{"role", "parts": [...]}`).
//!
//! Qwen Code's live stream-json is the stream-json family's protocol, so each record is put in
//! the shape of that protocol's store line and read through the family's store reader
//! (`agent_api_stream_json::StoreReader`): a stored chat reads back with the live run's tool
//! calls and text. `system` records (telemetry, snapshots) carry no transcript.

use std::path::{Path, PathBuf};

use agent_api::history::{self, StoredSession};
use agent_api::kit::Unparsed;
use agent_api::kit::{Ctx, ExitInfo, Protocol};
use agent_api::{AgentError, AgentKind, RunCompletion};
use agent_api_acp::ChatLayout;
use agent_api_stream_json::StoreReader;
use serde_json::{json, Value};

/// Records of a chat read to find its working directory and first prompt.
const HEAD_LINES: usize = 50;

/// Qwen Code's chat store under one `~/.qwen`: `agent_api_acp`'s store over [`QwenChats`].
pub type QwenSessionStore = agent_api_acp::ChatStore<QwenChats>;

/// Qwen Code's chat files: `projects/<dir>/chats/<session id>.jsonl`, `<dir>` the working
/// directory with every character but ASCII letters and digits made `-` (the layout's default
/// [`ChatLayout::project_key`]).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct QwenChats;

impl ChatLayout for QwenChats {
    const KIND: AgentKind = crate::KIND;
    const HOME_DIR: &'static str = ".qwen";
    const PROJECTS: &'static str = "projects";
    const ROOT: &'static str = "QWEN_RUNTIME_DIR";
    const ROOT_UNDER_HOME: &'static str = ".qwen";
    const AGENT_DIR: &'static str = "";

    fn is_session_name(name: &str, id: &str) -> bool {
        name.strip_suffix(".jsonl") == Some(id)
    }

    /// Qwen Code loads a chat only when its first record's `cwd` hashes to the project's: every
    /// record's `cwd` is made the new directory (a line that is not a JSON object is kept).
    fn rekey_chat(bytes: Vec<u8>, cwd: &Path) -> Vec<u8> {
        let cwd = cwd.to_string_lossy();
        let mut out = Vec::with_capacity(bytes.len());
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(mut record))
                    if record.get("cwd").is_some_and(Value::is_string) =>
                {
                    record.insert("cwd".into(), Value::String(cwd.to_string()));
                    out.extend(serde_json::to_vec(&record).unwrap_or_else(|_| body.to_vec()));
                    if line.ends_with(b"\n") {
                        out.push(b'\n');
                    }
                }
                _ => out.extend_from_slice(line),
            }
        }
        out
    }

    fn describe(path: &Path) -> Option<StoredSession> {
        describe(path)
    }

    fn reader() -> Box<dyn Protocol> {
        Box::new(StoredQwenSession::default())
    }
}

/// The text parts of a record's message, joined.
fn text_of(record: &Value) -> String {
    let parts = record
        .pointer("/message/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    parts
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

fn describe(path: &Path) -> Option<StoredSession> {
    let (meta, lines) = history::head(path)?;
    let mut session = StoredSession::from_file(path.file_stem()?.to_str()?, &meta);
    for line in lines.take(HEAD_LINES) {
        let Ok(record) = serde_json::from_str::<Value>(&line.ok()?) else {
            continue;
        };
        if session.cwd.is_none() {
            session.cwd = record.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        }
        if session.first_prompt.is_none()
            && record.get("type").and_then(Value::as_str) == Some("user")
        {
            session.first_prompt = Some(text_of(&record))
                .filter(|t| !t.is_empty())
                .map(|t| history::prompt_preview(&t, 200));
        }
        if session.cwd.is_some() && session.first_prompt.is_some() {
            break;
        }
    }
    Some(session)
}

/// The converter of a stored Qwen chat: records as the stream-json protocol's store lines.
#[derive(Debug)]
pub struct StoredQwenSession {
    inner: StoreReader,
}

impl Default for StoredQwenSession {
    fn default() -> Self {
        Self {
            inner: StoreReader::new(
                agent_api_stream_json::StreamJson::replaying(crate::DIALECT),
                "qwen.session_store",
            ),
        }
    }
}

/// A part of a model message as a stream-json content block.
fn block(part: &Value) -> Option<Value> {
    if let Some(call) = part.get("functionCall") {
        return Some(
            json!({ "type": "tool_use", "id": call.get("id"), "name": call.get("name"), "input": call.get("args") }),
        );
    }
    let text = part.get("text")?.as_str()?;
    Some(match part.get("thought").and_then(Value::as_bool) {
        Some(true) => json!({ "type": "thinking", "thinking": text }),
        _ => json!({ "type": "text", "text": text }),
    })
}

/// A record as the stream-json family's store line it corresponds to (`None`: no transcript).
fn store_line(record: &Value) -> Result<Option<Value>, Unparsed> {
    let kind = record
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Unparsed("a stored record has no string `type`".into()))?;
    let parts = || {
        record
            .pointer("/message/parts")
            .and_then(Value::as_array)
            .ok_or_else(|| Unparsed("a stored record has no message parts".into()))
    };
    let content = match kind {
        "system" => return Ok(None),
        "user" => json!({ "role": "user", "content": text_of(record) }),
        "assistant" => {
            let blocks: Vec<Value> = parts()?.iter().filter_map(block).collect();
            json!({ "role": "assistant", "id": record.get("uuid"), "content": blocks })
        }
        "tool_result" => {
            let result = record.get("toolCallResult");
            let call_id = result
                .and_then(|r| r.get("callId"))
                .or_else(|| parts().ok()?.first()?.pointer("/functionResponse/id"));
            let failed = result
                .and_then(|r| r.get("status"))
                .and_then(Value::as_str)
                .is_some_and(|s| s != "success");
            // What the live stream-json reports as the result: the display text, else the response.
            let output = result
                .and_then(|r| r.get("resultDisplay"))
                .filter(|d| d.is_string())
                .cloned()
                .unwrap_or_else(|| {
                    parts()
                        .ok()
                        .and_then(|p| {
                            p.first()?
                                .pointer("/functionResponse/response/output")
                                .cloned()
                        })
                        .unwrap_or(Value::Null)
                });
            json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": call_id, "is_error": failed, "content": output }] })
        }
        _ => return Err(Unparsed("a stored record of an unknown type".into())),
    };
    let kind = if kind == "assistant" {
        "assistant"
    } else {
        "user"
    };
    Ok(Some(
        json!({ "type": kind, "message": content, "sessionId": record.get("sessionId"), "cwd": record.get("cwd"), "version": record.get("version"), "uuid": record.get("uuid") }),
    ))
}

impl Protocol for StoredQwenSession {
    fn name(&self) -> &'static str {
        "qwen.session_store"
    }

    fn on_message(&mut self, record: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match store_line(&record)? {
            Some(line) => self.inner.on_message(line, ctx),
            None => Ok(()),
        }
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.inner.finish(exit, ctx)
    }
}
