//! The chat store of an agent that keeps one JSONL file per chat under
//! `~/<its dir>/<projects>/<project>/chats/`: one [`SessionStore`]
//! ([`ChatStore`]) over what the agent's crate says of its files ([`ChatLayout`]): which file is
//! which session, a chat's summary, and the converter of its records.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use agent_api::history::{self, SessionQuery, SessionStore, StoredSession};
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, RunHandle};
use async_trait::async_trait;

use crate::AcpConfig;

/// What an agent's crate says of its chat files to [`ChatStore`].
pub trait ChatLayout: Send + Sync + 'static {
    /// The agent kind whose chats these are.
    const KIND: AgentKind;
    /// Its folder under `HOME` (`.my-agent`).
    const HOME_DIR: &'static str;
    /// The folder of its projects under that one (`tmp`), each holding a `chats` folder.
    const PROJECTS: &'static str;
    /// The variable naming the directory a snapshot's files are under (`MY_AGENT_HOME`).
    const ROOT: &'static str;
    /// Where [`ChatLayout::ROOT`] is below `HOME` when it is unset (`""`: `HOME` itself, or
    /// `.my-agent`).
    const ROOT_UNDER_HOME: &'static str;
    /// The agent's folder below [`ChatLayout::ROOT`] holding [`ChatLayout::PROJECTS`]
    /// (`.my-agent`, or `""` where the root is that folder).
    const AGENT_DIR: &'static str;
    /// The file a project folder holds naming its working directory, where the agent finds a
    /// directory's project by it (a `.project_root`, say); `None` where the folder's name is
    /// [`ChatLayout::project_key`] alone.
    const PROJECT_MARKER: Option<&'static str> = None;

    /// The name of the project folder of the working directory `cwd` (by default the path with
    /// every character but ASCII letters and digits made `-`).
    fn project_key(cwd: &Path) -> String {
        dashed(cwd)
    }

    /// A chat's bytes re-keyed to the working directory `cwd` on import, where its records name
    /// the directory the session ran in and the agent checks it (loads a chat only when its
    /// first record's `cwd` is the project's, say). The default keeps them as they are.
    fn rekey_chat(bytes: Vec<u8>, cwd: &Path) -> Vec<u8> {
        let _ = cwd;
        bytes
    }

    /// Whether a chat file's name holds the whole session id ([`ChatLayout::is_session_name`]
    /// says which is whose); otherwise its first line is read too
    /// ([`ChatLayout::is_session_head`]).
    const NAMED_BY_ID: bool = true;

    /// Whether the chat file named `name` is (or, unless [`ChatLayout::NAMED_BY_ID`], may be) the
    /// session `id`'s (an id already checked to be safe), by its name alone.
    fn is_session_name(name: &str, id: &str) -> bool;

    /// Whether the chat whose first line is `first` holds the session `id`, for a layout whose
    /// names do not say it alone (not [`ChatLayout::NAMED_BY_ID`]). By default, yes.
    fn is_session_head(first: &[u8], id: &str) -> bool {
        let _ = (first, id);
        true
    }

    /// A chat's summary for listing (`None`: not a chat this store can read).
    fn describe(path: &Path) -> Option<StoredSession>;

    /// The converter of a stored chat's lines.
    fn reader() -> Box<dyn Protocol>;
}

/// `cwd` with every character but ASCII letters and digits made `-` (`/home/dev` is `-home-dev`).
pub(crate) fn dashed(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Whether the chat file at `path` here holds the session `id`: by its name, then (unless the
/// name says it alone) by its first line.
fn is_session<L: ChatLayout>(path: &Path, id: &str) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| L::is_session_name(n, id));
    named
        && (L::NAMED_BY_ID
            || history::head(path)
                .and_then(|(_, mut lines)| lines.next()?.ok())
                .is_some_and(|first| L::is_session_head(first.as_bytes(), id)))
}

/// The chat store of layout `L` under one agent folder (`~/.my-agent`).
pub struct ChatStore<L> {
    root: PathBuf,
    layout: PhantomData<fn() -> L>,
}

impl<L> std::fmt::Debug for ChatStore<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStore")
            .field("root", &self.root)
            .finish()
    }
}

impl<L> Clone for ChatStore<L> {
    fn clone(&self) -> Self {
        Self::new(self.root.clone())
    }
}

impl<L> ChatStore<L> {
    /// The store under `agent_dir` (`~/.my-agent`).
    pub fn new(agent_dir: impl Into<PathBuf>) -> Self {
        Self {
            root: agent_dir.into(),
            layout: PhantomData,
        }
    }
}

impl<L: ChatLayout> ChatStore<L> {
    /// The store the backend's CLI writes: the agent's folder under the config's `HOME` (this
    /// process's when the config sets none).
    pub fn for_config(config: &AcpConfig) -> Option<Self> {
        Some(Self::new(config.home_dir(L::HOME_DIR)?))
    }

    fn chats(&self) -> Vec<PathBuf> {
        history::child_dirs(&self.root.join(L::PROJECTS))
            .iter()
            .flat_map(|p| history::jsonl_files(&p.join("chats")))
            .collect()
    }

    pub(crate) fn find(&self, id: &str) -> Result<PathBuf, AgentError> {
        history::check_session_id(id)?;
        self.chats()
            .into_iter()
            .find(|p| is_session::<L>(p, id))
            .ok_or_else(|| AgentError::SessionNotFound { id: id.to_string() })
    }
}

#[async_trait]
impl<L: ChatLayout> SessionStore for ChatStore<L> {
    fn kind(&self) -> AgentKind {
        L::KIND
    }

    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<StoredSession>, AgentError> {
        let store = self.clone();
        history::list_files(query, move || store.chats(), L::describe).await
    }

    async fn read_session(&self, id: &str, include_raw: bool) -> Result<RunHandle, AgentError> {
        let path = self.find(id)?;
        history::read_store_file(L::KIND, &path, L::reader(), include_raw, true).await
    }
}
