//! An agent's own session store, as the contract names it: the [`SessionStore`] trait a backend
//! returns from [`crate::AgentBackend::session_store`], its records and queries,
//! and what a file of such a store looks like ([`StoreShape`], which the backend's
//! [`crate::kit::replay::Replay::store_shape`] tells from a recording). Reading stores is the
//! history feature's (`crate::history`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::contract::handle::RunHandle;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;
use async_trait::async_trait;

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
    /// The title the agent gave the session, when its store keeps one.
    pub title: Option<String>,
    /// Bytes the session takes in the store, when it is a file of its own.
    pub size: Option<u64>,
}

impl StoredSession {
    /// A session with only its id known.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            time: None,
            cwd: None,
            first_prompt: None,
            title: None,
            size: None,
        }
    }

    /// A session stored as the file whose metadata is `meta`: its size and last write.
    pub fn from_file(id: impl Into<String>, meta: &std::fs::Metadata) -> Self {
        Self {
            size: Some(meta.len()),
            time: meta.modified().ok(),
            ..Self::new(id)
        }
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
        Self {
            cwd: Some(cwd.into()),
        }
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

pub use crate::vocabulary::error::StoreShape;

/// Refuses a session id that is not a plain name (store lookups build paths from it).
pub fn check_session_id(id: &str) -> Result<(), AgentError> {
    let plain = !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(())
    } else {
        Err(AgentError::SessionNotFound {
            id: crate::guards::bounds::utf8_prefix(id, 64).to_string(),
        })
    }
}
