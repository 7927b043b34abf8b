//! The agents' own session stores: what an agent did yesterday, read back as the universal
//! transcript (`spec/history.md`).
//!
//! Claude Code, Codex and others write every session to disk. A backend that can read its
//! agent's store returns a [`SessionStore`] from [`crate::AgentBackend::session_store`]; the
//! [`crate::Gateway`] reaches it by kind. [`SessionStore::list_sessions`] lists the stored
//! sessions ([`StoredSession`]: id, time, working directory, first prompt, size) and
//! [`SessionStore::read_session`] reads one as a run whose events are the session's, in either
//! view, as a replay is. A line of a store that cannot be read becomes `agent.unparsed` with a
//! reason; the read goes on.
//!
//! A stored session is not a recording of an agent's output: [`store_shape`] recognizes one by
//! its first line, and a replay refuses it with [`AgentError::StoredSessionFile`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::AgentError;
use crate::kind::AgentKind;
use crate::kit::driver::{start_run, Protocol, RunSettings};
use crate::kit::lines::DEFAULT_LINE_CAP;
use crate::kit::transport::{line_source, LineSource, Transport};
use crate::run::RunHandle;

/// One session in an agent's store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredSession {
    /// The agent's own session id (what a resume takes).
    pub id: String,
    /// When the session was last written.
    pub time: Option<SystemTime>,
    /// The working directory the session ran in, when the store says.
    pub cwd: Option<PathBuf>,
    /// The first prompt the user typed, cut short.
    pub first_prompt: Option<String>,
    /// The title the agent gave the session, when its store keeps one (OpenCode).
    pub title: Option<String>,
    /// Bytes the session takes in the store, when it is a file of its own.
    pub size: Option<u64>,
}

impl StoredSession {
    /// A session with only its id known.
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into(), time: None, cwd: None, first_prompt: None, title: None, size: None }
    }

    /// A session stored as the file whose metadata is `meta`: its size and last write.
    pub fn from_file(id: impl Into<String>, meta: &std::fs::Metadata) -> Self {
        Self { size: Some(meta.len()), time: meta.modified().ok(), ..Self::new(id) }
    }
}

/// Which stored sessions to list.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SessionQuery {
    /// Only sessions that ran in this working directory.
    pub cwd: Option<PathBuf>,
}

impl SessionQuery {
    /// Every session.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only sessions that ran in `cwd`.
    pub fn in_dir(cwd: impl Into<PathBuf>) -> Self {
        Self { cwd: Some(cwd.into()) }
    }

    /// Whether a session that ran in `cwd` is wanted.
    pub fn matches(&self, cwd: Option<&Path>) -> bool {
        match (&self.cwd, cwd) {
            (None, _) => true,
            (Some(want), Some(have)) => same_dir(want, have),
            (Some(_), None) => false,
        }
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canonical(a) == canonical(b)
}

/// An agent's own session store.
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// The agent kind whose sessions these are.
    fn kind(&self) -> AgentKind;

    /// The stored sessions `query` selects, newest first.
    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<StoredSession>, AgentError>;

    /// Reads the session `id` back as a run: its events are the stored session's, its completion
    /// has the last answer as final text. An unknown id is [`AgentError::SessionNotFound`].
    async fn read_session(&self, id: &str, include_raw: bool) -> Result<RunHandle, AgentError>;
}

/// What a file of an agent's own store looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreShape {
    /// A Claude Code session file (`~/.claude/projects/<dir>/<id>.jsonl`).
    ClaudeCodeProject,
    /// A Codex rollout file (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
    CodexRollout,
}

impl fmt::Display for StoreShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreShape::ClaudeCodeProject => "a Claude Code session file (~/.claude/projects/<dir>/<id>.jsonl)",
            StoreShape::CodexRollout => "a Codex rollout file (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)",
        })
    }
}

/// Codex rollout line types (0.1xx): every line is `{"timestamp", "type", "payload"}`.
const ROLLOUT_TYPES: &[&str] =
    &["session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state", "token_usage_record"];

/// Which store a line of a file belongs to, if it is one an agent writes to its own store
/// rather than to its output.
pub fn store_shape(line: &[u8]) -> Option<StoreShape> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let object = value.as_object()?;
    let kind = object.get("type")?.as_str()?;
    // Claude Code's output says `session_id`; its store says `sessionId` on every line but the
    // older `summary` lines, which carry `leafUuid`.
    if object.contains_key("sessionId") || (kind == "summary" && object.contains_key("leafUuid")) {
        return Some(StoreShape::ClaudeCodeProject);
    }
    if ROLLOUT_TYPES.contains(&kind) && object.contains_key("timestamp") && object.get("payload").is_some_and(Value::is_object) {
        return Some(StoreShape::CodexRollout);
    }
    None
}

/// Refuses a session id that is not a plain name (store lookups build paths from it).
pub fn check_session_id(id: &str) -> Result<(), AgentError> {
    let plain = !id.is_empty() && id.len() <= 200 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(())
    } else {
        Err(AgentError::SessionNotFound { id: crate::bounds::utf8_prefix(id, 64).to_string() })
    }
}

/// The largest part of a store file read to describe it in a listing: a file whose first lines
/// are longer is listed from what fits (its lines cut there fail to parse and are passed over).
pub const HEAD_BYTES: u64 = 1 << 20;

/// A store file's metadata and its lines, at most [`HEAD_BYTES`] of them, for a listing; `None`
/// when it is not a regular file that can be opened (a FIFO or device is never waited on).
pub fn head(path: &Path) -> Option<(std::fs::Metadata, std::io::Lines<std::io::BufReader<std::io::Take<std::fs::File>>>)> {
    use std::io::{BufRead, Read};
    let file = crate::kit::files::open_regular(path).ok()?;
    let meta = file.metadata().ok()?;
    Some((meta, std::io::BufReader::new(file.take(HEAD_BYTES)).lines()))
}

/// Reads a store file through `protocol` as a run of `kind` (no process: the file is the output).
pub async fn read_store_file(
    kind: AgentKind,
    path: &Path,
    protocol: Box<dyn Protocol>,
    include_raw: bool,
    tools_structured: bool,
) -> Result<RunHandle, AgentError> {
    let path = path.to_path_buf();
    let file = tokio::task::spawn_blocking(move || crate::kit::files::open_regular(&path))
        .await
        .map_err(|e| AgentError::Io(std::io::Error::other(e.to_string())))?
        .map_err(|refusal| AgentError::Io(std::io::Error::other(refusal.to_string())))?;
    let file = tokio::fs::File::from_std(file);
    Ok(read_store_lines(kind, line_source(file, DEFAULT_LINE_CAP), protocol, include_raw, tools_structured))
}

/// Reads a stored session's lines (from a file, or an export the agent printed) through
/// `protocol` as a run of `kind`.
pub fn read_store_lines(
    kind: AgentKind,
    lines: LineSource,
    protocol: Box<dyn Protocol>,
    include_raw: bool,
    tools_structured: bool,
) -> RunHandle {
    let mut settings = RunSettings::new(kind);
    settings.include_raw = include_raw;
    settings.tools_structured = tools_structured;
    start_run(settings, Transport::replay(lines, Some(0)), protocol)
}

/// The first `max` bytes of `text` on one line, for a listing.
pub fn prompt_preview(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = crate::bounds::utf8_prefix(&one_line, max);
    if cut.len() < one_line.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

/// Sorts sessions newest first (unknown times last).
pub fn newest_first(sessions: &mut [StoredSession]) {
    sessions.sort_by_key(|s| std::cmp::Reverse(s.time));
}

/// Lists a store off the async runtime: `describe` each of `files()`, keep what `query` selects,
/// newest first.
pub async fn list_files(
    query: &SessionQuery,
    files: impl FnOnce() -> Vec<PathBuf> + Send + 'static,
    describe: impl Fn(&Path) -> Option<StoredSession> + Send + 'static,
) -> Result<Vec<StoredSession>, AgentError> {
    let query = query.clone();
    let listed = tokio::task::spawn_blocking(move || {
        let mut sessions: Vec<StoredSession> =
            files().iter().filter_map(|p| describe(p)).filter(|s| query.matches(s.cwd.as_deref())).collect();
        newest_first(&mut sessions);
        sessions
    });
    listed.await.map_err(|e| AgentError::Io(std::io::Error::other(e.to_string())))
}

/// The folders directly in `dir` (none when it cannot be read).
pub fn child_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect()
}

/// The `*.jsonl` files directly in `dir` (none when it cannot be read).
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl") && p.is_file()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_lines_are_recognized_and_output_lines_are_not() {
        let claude = br#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-23T17:03:48.379Z","sessionId":"cd13"}"#;
        assert_eq!(store_shape(claude), Some(StoreShape::ClaudeCodeProject));
        let codex = br#"{"timestamp":"2026-11-23T17:03:54.219Z","type":"session_meta","payload":{"id":"01a2"}}"#;
        assert_eq!(store_shape(codex), Some(StoreShape::CodexRollout));
        assert_eq!(store_shape(br#"{"type":"system","subtype":"init","session_id":"cd13"}"#), None);
        assert_eq!(store_shape(br#"{"type":"thread.started","thread_id":"01a2"}"#), None);
        assert_eq!(store_shape(b"not json"), None);
    }

    #[test]
    fn session_ids_with_path_parts_are_refused() {
        assert!(check_session_id("cd13f027-f751-4948-87e6-a722e591af62").is_ok());
        for bad in ["", "../x", "a/b", "a b", "."] {
            assert!(matches!(check_session_id(bad), Err(AgentError::SessionNotFound { .. })), "{bad}");
        }
    }
}
