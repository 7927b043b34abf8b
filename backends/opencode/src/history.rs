//! OpenCode's session store (`agent_api.history.*`; `spec/history.md`). OpenCode 1.18 keeps its
//! sessions in a SQLite database (`~/.local/share/opencode/opencode.db`), so the store is read
//! through the CLI itself: `opencode session list --format json` lists the sessions (id, title,
//! directory, times) and `opencode export <id>` prints one as JSON (`{"info", "messages": [{"info",
//! "parts"}]}`).
//!
//! OpenCode lists the sessions of the project (git repository, else "global") of the directory
//! it runs in: a listing runs it in the query's directory, else the config's working directory.
//!
//! An export's parts are the parts `opencode run --format json` prints (`text`, `reasoning`,
//! `tool`, `step-start`, `step-finish`), so each is put in the shape of a `run` line and read
//! through [`RunProtocol`]: a stored session reads back as the live `run` did. A user message's
//! text parts become user messages; other parts (files, patches, snapshots) carry no transcript.

use std::path::Path;
use std::time::{Duration, SystemTime};

use agent_api::history::{self, SessionQuery, SessionStore, StoredSession};
use agent_api::kit::line_source;
use agent_api::kit::lines::DEFAULT_LINE_CAP;
use agent_api::kit::transcript::NewItem;
use agent_api::kit::Unparsed;
use agent_api::kit::{CommandSpec, Ctx, ExitInfo, Protocol};
use agent_api::universal::ItemRole;
use agent_api::{AgentError, AgentKind, RunCompletion, RunHandle};
use async_trait::async_trait;
use serde_json::{json, Value};

use crate::config::OpenCodeConfig;
use crate::run::RunProtocol;
use crate::KIND;

/// Longest listing or export read from the CLI.
const OUTPUT_CAP: u64 = 64 * 1024 * 1024;

/// OpenCode's session store, read through the `opencode` of a backend's config.
#[derive(Debug, Clone)]
pub struct OpenCodeSessionStore {
    config: OpenCodeConfig,
}

impl OpenCodeSessionStore {
    /// The store the CLI of `config` reads (its binary, environment and working directory).
    pub fn new(config: OpenCodeConfig) -> Self {
        Self { config }
    }

    /// Runs `opencode ARGS` in `dir` (else the config's working directory) and returns its
    /// stdout; a failed exit, or more than [`OUTPUT_CAP`] printed, is `None`.
    async fn cli(&self, args: &[&str], dir: Option<&Path>) -> Result<Option<Vec<u8>>, AgentError> {
        let mut spec = CommandSpec::new(&self.config.binary).args(args.iter().copied());
        for (key, value) in &self.config.env {
            spec = spec.env(key.clone(), value.clone());
        }
        if let Some(dir) = dir.or(self.config.working_dir.as_deref()) {
            spec = spec.env("PWD", dir.display().to_string()).cwd(dir);
        }
        Ok(crate::cli::run(&spec, None, OUTPUT_CAP).await?.ok())
    }
}

/// A listed session (`opencode session list --format json`).
fn listed(entry: &Value) -> Option<StoredSession> {
    let mut session = StoredSession::new(entry.get("id")?.as_str()?);
    session.time = entry
        .get("updated")
        .and_then(Value::as_u64)
        .map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
    session.cwd = entry
        .get("directory")
        .and_then(Value::as_str)
        .map(Into::into);
    session.title = entry
        .get("title")
        .and_then(Value::as_str)
        .map(|t| history::prompt_preview(t, 200));
    Some(session)
}

#[async_trait]
impl SessionStore for OpenCodeSessionStore {
    fn kind(&self) -> AgentKind {
        KIND
    }

    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<StoredSession>, AgentError> {
        // OpenCode lists the sessions of the project it runs in: run it in the directory asked for.
        let dir = query.cwd.as_deref().filter(|d| d.is_dir());
        let out = self
            .cli(&["session", "list", "--format", "json"], dir)
            .await?;
        let out = out.ok_or_else(|| AgentError::AgentFailed {
            message: "`opencode session list` failed".into(),
        })?;
        // No session yet: the CLI prints nothing at all.
        let entries: Value = if out.iter().all(u8::is_ascii_whitespace) {
            json!([])
        } else {
            serde_json::from_slice(&out).map_err(|e| AgentError::Protocol {
                reason: format!("`opencode session list` printed no JSON list: {e}"),
            })?
        };
        let mut sessions: Vec<StoredSession> = entries
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(listed)
            .filter(|s| query.matches(s.cwd.as_deref()))
            .collect();
        history::newest_first(&mut sessions);
        Ok(sessions)
    }

    async fn read_session(&self, id: &str, include_raw: bool) -> Result<RunHandle, AgentError> {
        history::check_session_id(id)?;
        let export = self
            .cli(&["export", id], None)
            .await?
            .ok_or_else(|| AgentError::SessionNotFound { id: id.to_string() })?;
        let export: Value = serde_json::from_slice(&export)
            .map_err(|_| AgentError::SessionNotFound { id: id.to_string() })?;
        let mut lines = Vec::new();
        for line in export_lines(&export) {
            lines.extend_from_slice(line.to_string().as_bytes());
            lines.push(b'\n');
        }
        let source = line_source(std::io::Cursor::new(lines), DEFAULT_LINE_CAP);
        Ok(history::read_store_lines(
            KIND,
            source,
            Box::new(StoredOpenCodeSession::default()),
            include_raw,
            true,
        ))
    }
}

/// An export as lines: `run` lines for the parts of assistant messages, `user` lines for the
/// text of user messages.
pub fn export_lines(export: &Value) -> Vec<Value> {
    let session = export.pointer("/info/id").cloned().unwrap_or(Value::Null);
    let mut lines = Vec::new();
    for message in export
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let user = message.pointer("/info/role").and_then(Value::as_str) == Some("user");
        for part in message
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = match (user, part.get("type").and_then(Value::as_str)) {
                (true, Some("text")) => "user",
                (false, Some("text")) => "text",
                (false, Some("reasoning")) => "reasoning",
                (false, Some("tool")) => "tool_use",
                (false, Some("step-start")) => "step_start",
                (false, Some("step-finish")) => "step_finish",
                _ => continue,
            };
            lines.push(json!({ "type": kind, "sessionID": session, "part": part }));
        }
    }
    lines
}

/// The converter of an exported session: `run` lines through [`RunProtocol`], user text as user messages.
#[derive(Debug, Default)]
pub struct StoredOpenCodeSession {
    run: RunProtocol,
}

impl Protocol for StoredOpenCodeSession {
    fn name(&self) -> &'static str {
        "opencode.export"
    }

    fn on_message(&mut self, line: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        if line.get("type").and_then(Value::as_str) != Some("user") {
            return self.run.on_message(line, ctx);
        }
        let text = line
            .pointer("/part/text")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a user part has no text".into()))?;
        if ctx.transcript.native_session_id().is_none() {
            if let Some(id) = line.get("sessionID").and_then(Value::as_str) {
                ctx.transcript.set_native_session_id(id);
                ctx.transcript.session_started(None);
            }
        }
        let item = ctx.transcript.start_item(NewItem::message(ItemRole::User));
        ctx.transcript.delta(&item, text);
        ctx.transcript.complete_item(&item);
        Ok(())
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.run.finish(exit, ctx)
    }
}
