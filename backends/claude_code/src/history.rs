//! Claude Code's own session store (`agent_api.history.*`): every session is a JSONL file
//! `<config dir>/projects/<cwd with / as ->/<session id>.jsonl`, the config dir being
//! `$CLAUDE_CONFIG_DIR` or `~/.claude` (`spec/history.md`).
//!
//! Its `user` and `assistant` lines carry the same `message` objects as the stream-json output
//! (one `assistant` line per content block, under the message's id), so a stored session reads
//! through [`ClaudeProtocol`] once each line is put in the output's shape. The store's own
//! bookkeeping lines (queued prompts, attachments, summaries, snapshots) carry no transcript.

use std::path::{Path, PathBuf};

use agent_api::history::{self, SessionQuery, SessionStore, StoredSession};
use agent_api::kit::Unparsed;
use agent_api::kit::{Ctx, ExitInfo, Protocol};
use agent_api::{AgentError, AgentKind, RunCompletion, RunHandle};
use async_trait::async_trait;
use serde_json::{json, Value};

use crate::{ClaudeCodeConfig, ClaudeProtocol, KIND};

/// Lines of a session file read to find its working directory and first prompt.
const HEAD_LINES: usize = 200;
/// Longest first prompt shown in a listing.
const PROMPT_PREVIEW: usize = 200;
/// Store lines that hold no transcript (Claude Code 2.1.x).
const BOOKKEEPING: &[&str] =
    &["queue-operation", "attachment", "last-prompt", "summary", "file-history-snapshot", "custom-title", "progress", "permission-mode"];

/// Claude Code's session store under one config dir.
#[derive(Debug, Clone)]
pub struct ClaudeSessionStore {
    config_dir: PathBuf,
}

impl ClaudeSessionStore {
    /// The store under `config_dir` (what `CLAUDE_CONFIG_DIR` names; `~/.claude` by default).
    pub fn new(config_dir: impl Into<PathBuf>) -> Self {
        Self { config_dir: config_dir.into() }
    }

    /// The store the backend's CLI writes: `CLAUDE_CONFIG_DIR`, else `$HOME/.claude`, from the
    /// config's environment (and this process's, when the CLI inherits it).
    pub fn for_config(config: &ClaudeCodeConfig) -> Option<Self> {
        let var = |key: &str| {
            config.env.get(key).cloned().or_else(|| config.inherit_env.then(|| std::env::var(key).ok()).flatten()).filter(|v| !v.is_empty())
        };
        var("CLAUDE_CONFIG_DIR").map(PathBuf::from).or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".claude"))).map(Self::new)
    }

    fn projects(&self) -> PathBuf {
        self.config_dir.join("projects")
    }

    /// Every session file: `projects/<dir>/<id>.jsonl` (subagent files live deeper and are not sessions).
    fn session_files(&self) -> Vec<PathBuf> {
        history::child_dirs(&self.projects()).iter().flat_map(|dir| history::jsonl_files(dir)).collect()
    }

    fn find(&self, id: &str) -> Result<PathBuf, AgentError> {
        history::check_session_id(id)?;
        let name = format!("{id}.jsonl");
        self.session_files()
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == name.as_str()))
            .ok_or_else(|| AgentError::SessionNotFound { id: id.to_string() })
    }
}

/// A session's listing entry, from the file's metadata and its first lines.
fn describe(path: &Path) -> Option<StoredSession> {
    let id = path.file_stem()?.to_str()?;
    let (meta, lines) = history::head(path)?;
    let mut session = StoredSession::from_file(id, &meta);
    for line in lines.take(HEAD_LINES) {
        let Ok(value) = serde_json::from_str::<Value>(&line.ok()?) else { continue };
        if session.cwd.is_none() {
            session.cwd = value.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        }
        if session.first_prompt.is_none() && value.get("type").and_then(Value::as_str) == Some("user") {
            session.first_prompt = user_prompt(&value).map(|t| history::prompt_preview(t, PROMPT_PREVIEW));
        }
        if session.cwd.is_some() && session.first_prompt.is_some() {
            break;
        }
    }
    Some(session)
}

/// The text a person typed, for a `user` line that holds one (not tool results, not the CLI's
/// injected context).
fn user_prompt(line: &Value) -> Option<&str> {
    if line.get("isMeta").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    match line.pointer("/message/content")? {
        Value::String(text) => Some(text),
        Value::Array(blocks) => blocks.iter().find(|b| b.get("type").and_then(Value::as_str) == Some("text"))?.get("text")?.as_str(),
        _ => None,
    }
}

#[async_trait]
impl SessionStore for ClaudeSessionStore {
    fn kind(&self) -> AgentKind {
        KIND
    }

    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<StoredSession>, AgentError> {
        let store = self.clone();
        history::list_files(query, move || store.session_files(), describe).await
    }

    async fn read_session(&self, id: &str, include_raw: bool) -> Result<RunHandle, AgentError> {
        let path = self.find(id)?;
        history::read_store_file(KIND, &path, Box::new(StoredClaudeSession::default()), include_raw, true).await
    }
}

/// The converter of a stored session: store lines in the output's shape through [`ClaudeProtocol`].
#[derive(Debug)]
pub struct StoredClaudeSession {
    inner: ClaudeProtocol,
    /// The native id of the last assistant message and its text so far (the session's answer).
    last_answer: Option<(String, String)>,
}

impl Default for StoredClaudeSession {
    fn default() -> Self {
        Self::with_protocol(ClaudeProtocol::replaying())
    }
}

impl StoredClaudeSession {
    /// A stored-session converter over `inner` (a CLI speaking Claude Code's protocol, such as
    /// Qwen Code, whose store lines are put in this store's shape first).
    pub fn with_protocol(inner: ClaudeProtocol) -> Self {
        Self { inner, last_answer: None }
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
        let Some(message) = line.get("message") else { return };
        let id = message.get("id").and_then(Value::as_str).or_else(|| line.get("uuid").and_then(Value::as_str)).unwrap_or_default();
        if self.last_answer.as_ref().is_none_or(|(last, _)| last != id) {
            self.last_answer = Some((id.to_string(), String::new()));
        }
        let texts = message.get("content").and_then(Value::as_array).into_iter().flatten();
        let text: String =
            texts.filter(|b| b.get("type").and_then(Value::as_str) == Some("text")).filter_map(|b| b.get("text")?.as_str()).collect();
        if let Some((_, answer)) = &mut self.last_answer {
            answer.push_str(&text);
        }
    }
}

impl Protocol for StoredClaudeSession {
    fn name(&self) -> &'static str {
        "claude_code.session_store"
    }

    fn on_message(&mut self, mut line: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let kind = line.get("type").and_then(Value::as_str).ok_or_else(|| Unparsed("a stored line has no string `type`".into()))?;
        if BOOKKEEPING.contains(&kind) {
            return Ok(());
        }
        self.start(&line, ctx);
        match kind {
            "user" if user_prompt(&line).is_none() && line.pointer("/message/content").is_some_and(Value::is_string) => Ok(()),
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
        self.inner.flush_user_messages(ctx);
        self.inner.close_all_messages(ctx);
        let mut completion = RunCompletion::new();
        completion.final_text = self.last_answer.take().map(|(_, text)| text).filter(|t| !t.is_empty());
        Ok(completion)
    }
}
