//! Claude Code's own session store (`agent_api.history.*`): every session is a JSONL file
//! `<config dir>/projects/<cwd with / as ->/<session id>.jsonl`, the config dir being
//! `$CLAUDE_CONFIG_DIR` or `~/.claude` (`spec/history.md`).
//!
//! Its `user` and `assistant` lines carry the same `message` objects as the stream-json output
//! (one `assistant` line per content block, under the message's id), so a stored session reads
//! through the family's [`StoreReader`](agent_api_stream_json::StoreReader).

use std::path::{Path, PathBuf};

use agent_api::history::{self, SessionQuery, SessionStore, StoreShape, StoredSession};
use agent_api::{AgentError, AgentKind, RunHandle};
use async_trait::async_trait;
use serde_json::Value;

use crate::{ClaudeCodeConfig, KIND};
use agent_api_stream_json::{user_prompt, StreamJson};

/// Lines of a session file read to find its working directory and first prompt.
const HEAD_LINES: usize = 200;
/// Longest first prompt shown in a listing.
const PROMPT_PREVIEW: usize = 200;

/// What a file of the store looks like, in a replay's refusal.
pub const STORE_FILE: StoreShape =
    StoreShape::new("a Claude Code session file (~/.claude/projects/<dir>/<id>.jsonl)");

/// Whether `line` is one Claude Code writes to its store rather than to its output: its output
/// says `session_id`; its store says `sessionId` on every line but the older `summary` lines,
/// which carry `leafUuid`.
pub fn store_shape(line: &[u8]) -> Option<StoreShape> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let object = value.as_object()?;
    let kind = object.get("type")?.as_str()?;
    let stored =
        object.contains_key("sessionId") || (kind == "summary" && object.contains_key("leafUuid"));
    stored.then_some(STORE_FILE)
}

/// Claude Code's session store under one config dir.
#[derive(Debug, Clone)]
pub struct ClaudeSessionStore {
    config_dir: PathBuf,
}

impl ClaudeSessionStore {
    /// The store under `config_dir` (what `CLAUDE_CONFIG_DIR` names; `~/.claude` by default).
    pub fn new(config_dir: impl Into<PathBuf>) -> Self {
        Self {
            config_dir: config_dir.into(),
        }
    }

    /// The store the backend's CLI writes: `CLAUDE_CONFIG_DIR`, else `$HOME/.claude`, from the
    /// config's environment (and this process's, when the CLI inherits it).
    pub fn for_config(config: &ClaudeCodeConfig) -> Option<Self> {
        let var = |key: &str| {
            config
                .env
                .get(key)
                .cloned()
                .or_else(|| {
                    config
                        .inherit_env
                        .then(|| std::env::var(key).ok())
                        .flatten()
                })
                .filter(|v| !v.is_empty())
        };
        var("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".claude")))
            .map(Self::new)
    }

    fn projects(&self) -> PathBuf {
        self.config_dir.join("projects")
    }

    /// Every session file: `projects/<dir>/<id>.jsonl` (subagent files live deeper and are not sessions).
    fn session_files(&self) -> Vec<PathBuf> {
        history::child_dirs(&self.projects())
            .iter()
            .flat_map(|dir| history::jsonl_files(dir))
            .collect()
    }

    pub(crate) fn find(&self, id: &str) -> Result<PathBuf, AgentError> {
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
        let Ok(value) = serde_json::from_str::<Value>(&line.ok()?) else {
            continue;
        };
        if session.cwd.is_none() {
            session.cwd = value.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        }
        if session.first_prompt.is_none()
            && value.get("type").and_then(Value::as_str) == Some("user")
        {
            session.first_prompt =
                user_prompt(&value).map(|t| history::prompt_preview(t, PROMPT_PREVIEW));
        }
        if session.cwd.is_some() && session.first_prompt.is_some() {
            break;
        }
    }
    Some(session)
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
        history::read_store_file(KIND, &path, Box::new(stored_session()), include_raw, true).await
    }
}

/// The converter of a stored Claude Code session: its store lines through Claude Code's dialect.
pub fn stored_session() -> agent_api_stream_json::StoreReader {
    agent_api_stream_json::StoreReader::new(
        StreamJson::replaying(crate::DIALECT),
        "claude_code.session_store",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_lines_are_recognized_and_output_lines_are_not() {
        let stored = br#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-23T17:03:48.379Z","sessionId":"cd13"}"#;
        assert_eq!(store_shape(stored), Some(STORE_FILE));
        let summary = br#"{"type":"summary","summary":"s","leafUuid":"u1"}"#;
        assert_eq!(store_shape(summary), Some(STORE_FILE));
        let output = br#"{"type":"system","subtype":"init","session_id":"cd13"}"#;
        assert_eq!(store_shape(output), None);
        assert_eq!(store_shape(b"not json"), None);
    }
}
