//! Codex's own session store (`agent_api.history.*`): every thread is a rollout file
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl` (`CODEX_HOME` defaults to
//! `~/.codex`; `spec/history.md`).
//!
//! Every rollout line is `{"timestamp", "type", "payload"}`. Codex 0.169.0 writes the thread's
//! items twice: as model API items (`response_item`) and as finished thread items
//! (`event_msg` / `item_completed`: `UserMessage`, `AgentMessage`, `Reasoning`,
//! `CommandExecution`, `FileChange`, …). The thread items are what `codex exec --json` prints, so
//! each is put in the exec item's shape and read through [`Exec`]: a stored session reads back
//! as the live exec run did. The rest is bookkeeping (instructions, settings, usage records).

use std::path::{Path, PathBuf};

use agent_api::history::{self, SessionQuery, SessionStore, StoreShape, StoredSession};
use agent_api::kit::transcript::NewItem;
use agent_api::kit::Unparsed;
use agent_api::kit::{Ctx, ExitInfo, Protocol};
use agent_api::universal::ItemRole;
use agent_api::{AgentError, AgentKind, RunCompletion, RunHandle};
use async_trait::async_trait;
use serde_json::{json, Map, Value};

use crate::exec::Exec;
use crate::{CodexConfig, KIND};

/// Lines of a rollout read to find its thread id, working directory and first prompt.
const HEAD_LINES: usize = 100;
/// Longest first prompt shown in a listing.
const PROMPT_PREVIEW: usize = 200;
/// Rollout line types that hold no transcript of their own.
const BOOKKEEPING: &[&str] = &[
    "response_item",
    "turn_context",
    "world_state",
    "token_usage_record",
    "compacted",
];

/// What a file of the store looks like, in a replay's refusal.
pub const STORE_FILE: StoreShape =
    StoreShape::new("a Codex rollout file (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)");

/// Rollout line types (0.1xx): every line is `{"timestamp", "type", "payload"}`.
const ROLLOUT_TYPES: &[&str] = &[
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "world_state",
    "token_usage_record",
];

/// Whether `line` is one of a rollout rather than of `codex exec`'s output.
pub fn store_shape(line: &[u8]) -> Option<StoreShape> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let object = value.as_object()?;
    let kind = object.get("type")?.as_str()?;
    let rollout = ROLLOUT_TYPES.contains(&kind)
        && object.contains_key("timestamp")
        && object.get("payload").is_some_and(Value::is_object);
    rollout.then_some(STORE_FILE)
}

/// Codex's session store under one `CODEX_HOME`.
#[derive(Debug, Clone)]
pub struct CodexSessionStore {
    home: PathBuf,
}

impl CodexSessionStore {
    /// The store under `codex_home` (what `CODEX_HOME` names; `~/.codex` by default).
    pub fn new(codex_home: impl Into<PathBuf>) -> Self {
        Self {
            home: codex_home.into(),
        }
    }

    /// The store the backend's CLI writes: `CODEX_HOME`, else `$HOME/.codex`, from the config's
    /// environment, then this process's (which the CLI inherits).
    pub fn for_config(config: &CodexConfig) -> Option<Self> {
        let var = |key: &str| {
            config
                .env
                .get(key)
                .cloned()
                .or_else(|| std::env::var(key).ok())
                .filter(|v| !v.is_empty())
        };
        var("CODEX_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".codex")))
            .map(Self::new)
    }

    /// Every rollout file under `sessions/` (three levels of dated folders).
    fn rollouts(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.home.join("sessions")];
        for _ in 0..3 {
            dirs = dirs.iter().flat_map(|d| history::child_dirs(d)).collect();
        }
        let files = dirs.iter().flat_map(|d| history::jsonl_files(d));
        files
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rollout-"))
            })
            .collect()
    }

    pub(crate) fn find(&self, id: &str) -> Result<PathBuf, AgentError> {
        history::check_session_id(id)?;
        let suffix = format!("-{id}.jsonl");
        self.rollouts()
            .into_iter()
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(&suffix))
            })
            .ok_or_else(|| AgentError::SessionNotFound { id: id.to_string() })
    }
}

/// A rollout's listing entry, from its metadata and its first lines.
fn describe(path: &Path) -> Option<StoredSession> {
    let (meta, lines) = history::head(path)?;
    let mut session: Option<StoredSession> = None;
    let mut prompt = None;
    for line in lines.take(HEAD_LINES) {
        let Ok(line) = serde_json::from_str::<Value>(&line.ok()?) else {
            continue;
        };
        let payload = line.get("payload");
        match line.get("type").and_then(Value::as_str) {
            Some("session_meta") if session.is_none() => {
                let id = payload?.get("id")?.as_str()?;
                let mut found = StoredSession::from_file(id, &meta);
                found.cwd = payload?
                    .get("cwd")
                    .and_then(Value::as_str)
                    .map(PathBuf::from);
                session = Some(found);
            }
            Some("event_msg") if prompt.is_none() => prompt = payload.and_then(user_prompt),
            _ => {}
        }
        if session.is_some() && prompt.is_some() {
            break;
        }
    }
    let mut session = session?;
    session.first_prompt = prompt.map(|p| history::prompt_preview(&p, PROMPT_PREVIEW));
    Some(session)
}

/// The text of a `UserMessage` thread item (or of the older `user_message` event).
fn user_prompt(payload: &Value) -> Option<String> {
    match payload.get("type").and_then(Value::as_str)? {
        "user_message" => payload
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string),
        "item_completed"
            if payload.pointer("/item/type").and_then(Value::as_str) == Some("UserMessage") =>
        {
            Some(texts(payload.pointer("/item/content")))
        }
        _ => None,
    }
}

/// The `text` of every part of a content array, joined.
fn texts(content: Option<&Value>) -> String {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

#[async_trait]
impl SessionStore for CodexSessionStore {
    fn kind(&self) -> AgentKind {
        KIND
    }

    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<StoredSession>, AgentError> {
        let store = self.clone();
        history::list_files(query, move || store.rollouts(), describe).await
    }

    async fn read_session(&self, id: &str, include_raw: bool) -> Result<RunHandle, AgentError> {
        let path = self.find(id)?;
        history::read_store_file(
            KIND,
            &path,
            Box::new(StoredCodexSession::default()),
            include_raw,
            true,
        )
        .await
    }
}

/// The converter of a rollout: thread items in the exec item's shape through [`Exec`].
#[derive(Debug, Default)]
pub struct StoredCodexSession {
    exec: Exec,
    /// The thread's usage so far (the last `token_count`), reported when a turn completes.
    usage: Option<Value>,
}

/// A stored thread item as the exec item `codex exec --json` prints for it; `None` for a user
/// message (exec prints none).
fn exec_item(item: &Value) -> Option<Value> {
    let id = item.get("id").cloned().unwrap_or(Value::Null);
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    let mut exec = match kind {
        "UserMessage" => return None,
        "AgentMessage" => json!({ "type": "agent_message", "text": texts(item.get("content")) }),
        "Reasoning" => {
            let summary = item
                .get("summary_text")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str);
            json!({ "type": "reasoning", "text": summary.collect::<Vec<_>>().join("\n") })
        }
        "CommandExecution" => {
            let argv: Vec<&str> = item
                .get("command")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            // Exec prints the argv as one shell line, quoted as shlex quotes it.
            let command = shlex::try_join(argv.iter().copied()).unwrap_or_else(|_| argv.join(" "));
            let mut fields = item.as_object().cloned().unwrap_or_default();
            fields.insert("type".into(), "command_execution".into());
            fields.insert("command".into(), command.into());
            Value::Object(fields)
        }
        "FileChange" => {
            let changes = item
                .get("changes")
                .and_then(Value::as_object)
                .into_iter()
                .flatten();
            let changes: Vec<Value> = changes
                .map(|(path, c)| json!({ "path": path, "kind": c.get("type") }))
                .collect();
            json!({ "type": "file_change", "changes": changes, "status": item.get("status") })
        }
        // The other items keep their fields under exec's snake_case type name.
        other => {
            let mut fields = item.as_object().cloned().unwrap_or_else(Map::new);
            fields.insert("type".into(), snake_case(other).into());
            Value::Object(fields)
        }
    };
    exec["id"] = id;
    Some(exec)
}

fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

impl StoredCodexSession {
    fn event(&mut self, payload: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let kind = payload
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("an event_msg payload has no string `type`".into()))?;
        match kind {
            "task_started" => self.exec.on_message(json!({ "type": "turn.started" }), ctx),
            "task_complete" => self.exec.on_message(
                json!({ "type": "turn.completed", "usage": self.usage }),
                ctx,
            ),
            "turn_aborted" => self.exec.on_message(
                json!({ "type": "turn.failed", "error": { "message": "the turn was aborted" } }),
                ctx,
            ),
            "error" => self.exec.on_message(
                json!({ "type": "error", "message": payload.get("message") }),
                ctx,
            ),
            "token_count" => {
                self.usage = payload
                    .pointer("/info/total_token_usage")
                    .cloned()
                    .or(self.usage.take());
                Ok(())
            }
            "item_completed" => {
                let item = payload
                    .get("item")
                    .filter(|i| i.is_object())
                    .ok_or_else(|| Unparsed("an item_completed event has no item".into()))?;
                match exec_item(item) {
                    Some(exec) => self
                        .exec
                        .on_message(json!({ "type": "item.completed", "item": exec }), ctx),
                    None => {
                        let user = ctx.transcript.start_item(NewItem::message(ItemRole::User));
                        ctx.transcript.delta(&user, texts(item.get("content")));
                        ctx.transcript.complete_item(&user);
                        Ok(())
                    }
                }
            }
            // Streaming and bookkeeping events: the finished items above carry the transcript.
            _ => Ok(()),
        }
    }
}

impl Protocol for StoredCodexSession {
    fn name(&self) -> &'static str {
        "codex.rollout"
    }

    fn on_message(&mut self, line: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let kind = line
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a rollout line has no string `type`".into()))?;
        let payload = line
            .get("payload")
            .filter(|p| p.is_object())
            .ok_or_else(|| Unparsed("a rollout line has no `payload` object".into()))?;
        match kind {
            "session_meta" => {
                let id = payload
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Unparsed("session_meta has no `id`".into()))?;
                self.exec
                    .on_message(json!({ "type": "thread.started", "thread_id": id }), ctx)
            }
            "event_msg" => self.event(payload, ctx),
            _ if BOOKKEEPING.contains(&kind) => Ok(()),
            _ => Err(Unparsed("a rollout line of an unknown type".into())),
        }
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.exec.finish(exit, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_lines_are_recognized_and_exec_lines_are_not() {
        let rollout = br#"{"timestamp":"2026-11-23T17:03:54.219Z","type":"session_meta","payload":{"id":"01a2"}}"#;
        assert_eq!(store_shape(rollout), Some(STORE_FILE));
        let exec = br#"{"type":"thread.started","thread_id":"01a2"}"#;
        assert_eq!(store_shape(exec), None);
        assert_eq!(store_shape(b"not json"), None);
    }
}
