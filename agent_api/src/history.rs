//! The agents' own session stores: what an agent did yesterday, read back as the universal
//! transcript (`spec/history.md`).
//!
//! Many agent CLIs write every session to disk. A backend that can read its
//! agent's store returns a [`SessionStore`] from [`crate::AgentBackend::session_store`]; the
//! [`crate::Gateway`] reaches it by kind. [`SessionStore::list_sessions`] lists the stored
//! sessions ([`StoredSession`]: id, time, working directory, first prompt, size) and
//! [`SessionStore::read_session`] reads one as a run whose events are the session's, in either
//! view, as a replay is. A line of a store that cannot be read becomes `agent.unparsed` with a
//! reason; the read goes on.
//!
//! A stored session is not a recording of an agent's output: the backend recognizes one of its
//! store's files by its first line ([`crate::kit::replay::Replay::store_shape`]), and a replay
//! refuses it with [`AgentError::StoredSessionFile`].

use std::path::{Path, PathBuf};

use crate::contract::handle::RunHandle;
pub use crate::contract::store::{
    check_session_id, SessionQuery, SessionStore, StoreShape, StoredSession,
};
use crate::kit::lines::DEFAULT_LINE_CAP;
use crate::kit::{line_source, LineSource, Transport};
use crate::kit::{start_run, Protocol, RunSettings};
use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;

/// The largest part of a store file read to describe it in a listing: a file whose first lines
/// are longer is listed from what fits (its lines cut there fail to parse and are passed over).
pub const HEAD_BYTES: u64 = 1 << 20;

/// A store file's metadata and its lines, at most [`HEAD_BYTES`] of them, for a listing; `None`
/// when it is not a regular file that can be opened (a FIFO or device is never waited on).
pub fn head(
    path: &Path,
) -> Option<(
    std::fs::Metadata,
    std::io::Lines<std::io::BufReader<std::io::Take<std::fs::File>>>,
)> {
    use std::io::{BufRead, Read};
    let file = crate::guards::files::open_regular(path).ok()?;
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
    let file = tokio::task::spawn_blocking(move || crate::guards::files::open_regular(&path))
        .await
        .map_err(|e| AgentError::Io(std::io::Error::other(e.to_string())))?
        .map_err(|refusal| AgentError::Io(std::io::Error::other(refusal.to_string())))?;
    let file = tokio::fs::File::from_std(file);
    Ok(read_store_lines(
        kind,
        line_source(file, DEFAULT_LINE_CAP),
        protocol,
        include_raw,
        tools_structured,
    ))
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
    let cut = crate::guards::bounds::utf8_prefix(&one_line, max);
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
        let mut sessions: Vec<StoredSession> = files()
            .iter()
            .filter_map(|p| describe(p))
            .filter(|s| query.matches(s.cwd.as_deref()))
            .collect();
        newest_first(&mut sessions);
        sessions
    });
    listed
        .await
        .map_err(|e| AgentError::Io(std::io::Error::other(e.to_string())))
}

/// The folders directly in `dir` (none when it cannot be read).
pub fn child_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// The `*.jsonl` files directly in `dir` (none when it cannot be read).
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl") && p.is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_with_path_parts_are_refused() {
        assert!(check_session_id("cd13f027-f751-4948-87e6-a722e591af62").is_ok());
        for bad in ["", "../x", "a/b", "a b", "."] {
            assert!(
                matches!(
                    check_session_id(bad),
                    Err(AgentError::SessionNotFound { .. })
                ),
                "{bad}"
            );
        }
    }
}
