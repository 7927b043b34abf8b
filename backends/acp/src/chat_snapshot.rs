//! Session snapshots (`agent_api.session.snapshot`) of an agent whose chats are one JSONL file
//! each under `<its dir>/<projects>/<project>/chats/`, over what its crate says of its files
//! ([`ChatLayout`]).
//!
//! Export takes the session's chat file, found under any project (the session may have run in
//! another working directory), once it has settled. Import writes it under the project of the
//! run's working directory here, re-keyed the agent's way ([`ChatLayout::project_key`]); an
//! agent that finds a directory's project by a marker file in it (a `.project_root`, say)
//! gets the project that names the directory already, or a new one with its marker. Which file
//! is the session's is the layout's to say ([`ChatLayout::is_session_name`], then its first line
//! where the name does not say it alone), here and far away alike. The projects folder is
//! listed, and every file read and written, where the agent's home is (`agent_api::kit::snapshot`):
//! on this machine confined to the home (`openat2`), or through a Prefix, Container or Ssh
//! launcher on its far side, bounded and refusing links the same way; a chat over the bound is
//! exported as a flagged replay.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_api::history::SessionStore;
use agent_api::kit::async_trait;
use agent_api::kit::cli::SessionFiles;
use agent_api::kit::snapshot::{
    export_files, find_files, home_dir, import_files, list_files, read_file, settle_file,
    NativeFile,
};
use agent_api::request::SessionRef;
use agent_api::snapshot::{
    check_session_id, SnapshotError, SnapshotFile, SnapshotImport, SNAPSHOT_FILES_BOUND,
};
use agent_api::{AgentError, RunRequest, SessionSnapshot};

use crate::{AcpConfig, ChatLayout, ChatStore};

/// The sessions of an agent whose chats are laid out as `L` says, as one piece
/// ([`SessionFiles`]): its [`ChatStore`], and its snapshots (the chat file, re-keyed on import). Its
/// crate names it as its [`CliAgent::session_files`](agent_api::kit::cli::CliAgent::session_files):
/// `Some(&ChatFiles::<MyChats>::NEW)`.
pub struct ChatFiles<L>(PhantomData<fn() -> L>);

impl<L> ChatFiles<L> {
    /// The sessions of layout `L`.
    pub const NEW: Self = Self(PhantomData);
}

impl<L> std::fmt::Debug for ChatFiles<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChatFiles")
    }
}

#[async_trait]
impl<L: ChatLayout> SessionFiles<AcpConfig> for ChatFiles<L> {
    fn store(&self, config: &AcpConfig) -> Option<Arc<dyn SessionStore>> {
        Some(Arc::new(ChatStore::<L>::for_config(config)?))
    }

    async fn export(
        &self,
        config: &AcpConfig,
        request: &RunRequest,
        session: &SessionRef,
    ) -> Result<SessionSnapshot, AgentError> {
        export::<L>(config, request, session).await
    }

    async fn import(
        &self,
        config: &AcpConfig,
        request: &RunRequest,
        snapshot: &SessionSnapshot,
    ) -> Result<SnapshotImport, AgentError> {
        import::<L>(config, request, snapshot).await
    }
}

/// How long the chat file may take to appear after the turn's end, and to stay unchanged.
const APPEAR_LIMIT: Duration = Duration::from_secs(5);
const SETTLE_QUIET: Duration = Duration::from_millis(250);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);
/// Chat files whose name may be the session's read to find the one whose first line is.
const CANDIDATES_READ: usize = 16;
/// Project markers read to find the project of the working directory.
const MARKERS_READ: usize = 1_000;
/// The largest marker file read.
const MARKER_BOUND: u64 = 64 * 1024;

/// The directory [`ChatLayout::ROOT`] names for a run of `request` on `config`.
fn root_dir<L: ChatLayout>(
    config: &AcpConfig,
    request: &RunRequest,
) -> Result<PathBuf, AgentError> {
    home_dir(request, &config.env, true, L::ROOT, L::ROOT_UNDER_HOME)
}

/// The folder of the agent's projects below the root.
fn projects<L: ChatLayout>() -> PathBuf {
    Path::new(L::AGENT_DIR).join(L::PROJECTS)
}

/// `path` as `/`-separated components, for a snapshot's file name.
fn slashed(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A file of the projects folder, `path` below the root (`prefix` being the folder's): a chat
/// (its project and name) or a project's `marker` (its project, no name); `None` for anything
/// else.
fn project_file<'a>(
    prefix: &str,
    path: &'a str,
    marker: Option<&str>,
) -> Option<(&'a str, Option<&'a str>)> {
    let rest = path.strip_prefix(prefix)?.strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts[..] {
        [key, "chats", name] if name.ends_with(".jsonl") => Some((key, Some(name))),
        [key, name] if Some(name) == marker => Some((key, None)),
        _ => None,
    }
}

/// Exports the chat of `session` from the home of a run of `request` on `config`: here, or on
/// its launcher's far side through the launcher (the projects folder listed there, bounded).
async fn export<L: ChatLayout>(
    config: &AcpConfig,
    request: &RunRequest,
    session: &SessionRef,
) -> Result<SessionSnapshot, AgentError> {
    check_session_id(&session.id)?;
    let root = root_dir::<L>(config, request)?;
    let prefix = slashed(&projects::<L>());
    let id = session.id.clone();
    // The agent writes its chat a moment after it reports the turn's end.
    let named = find_files(request, &root, &projects::<L>(), 3, APPEAR_LIMIT, |path| {
        path.to_str()
            .and_then(|path| project_file(&prefix, path, None))
            .and_then(|(_, name)| name)
            .is_some_and(|name| L::is_session_name(name, &id))
    })
    .await?;
    let mut found = None;
    for candidate in named.into_iter().take(CANDIDATES_READ) {
        if L::NAMED_BY_ID {
            found = Some(candidate);
            break;
        }
        // A chat over the bound cannot be read: its name says it, and it is exported as a replay.
        let read = read_file(request, &root, &candidate, SNAPSHOT_FILES_BOUND).await?;
        if read.as_ref().is_none_or(|bytes| {
            L::is_session_head(bytes.split(|b| *b == b'\n').next().unwrap_or_default(), &id)
        }) {
            found = Some(candidate);
            break;
        }
    }
    let relative = found.ok_or_else(|| SnapshotError::Missing { id: id.clone() })?;
    settle_file(request, &root, &relative, SETTLE_QUIET, SETTLE_LIMIT).await;
    let mut session = session.clone();
    session.agent = Some(L::KIND);
    session.working_dir = Some(crate::run_dir(config, request));
    export_files(
        request,
        &session,
        vec![NativeFile {
            root: L::ROOT,
            dir: root,
            stored: slashed(&relative),
            relative,
        }],
    )
    .await
}

/// Imports `snapshot` into the home of a run of `request` on `config`, under the project of the
/// run's working directory: here, or on its launcher's far side through the launcher.
async fn import<L: ChatLayout>(
    config: &AcpConfig,
    request: &RunRequest,
    snapshot: &SessionSnapshot,
) -> Result<SnapshotImport, AgentError> {
    snapshot.check_agent(&L::KIND)?;
    check_session_id(&snapshot.native_session_id)?;
    let root = root_dir::<L>(config, request)?;
    let cwd = crate::run_dir(config, request);
    let key = match L::PROJECT_MARKER {
        Some(marker) => marked_project::<L>(request, &root, marker, &cwd).await?,
        None => L::project_key(&cwd),
    };
    let prefix = slashed(&projects::<L>());
    let mut snapshot = snapshot.clone();
    for file in &mut snapshot.files {
        if file.root == L::ROOT && placed::<L>(&prefix, &file.path, &key).is_some() {
            file.bytes = L::rekey_chat(std::mem::take(&mut file.bytes), &cwd);
        }
    }
    if let Some(marker) = L::PROJECT_MARKER {
        let name = slashed(&projects::<L>().join(&key).join(marker));
        let owner = cwd.to_string_lossy().into_owned().into_bytes();
        snapshot.files.push(SnapshotFile::new(L::ROOT, name, owner));
    }
    import_files(request, &snapshot, |file| {
        let placed = placed::<L>(&prefix, &file.path, &key)?;
        (file.root == L::ROOT).then(|| (root.clone(), placed))
    })
    .await
}

/// Where the snapshot's file `path` goes below the root, in the project `key`: a chat, or the
/// project's marker; `None` for anything else.
fn placed<L: ChatLayout>(prefix: &str, path: &str, key: &str) -> Option<PathBuf> {
    let (_, name) = project_file(prefix, path, L::PROJECT_MARKER)?;
    let project = projects::<L>().join(key);
    Some(match (name, L::PROJECT_MARKER) {
        (Some(chat), _) => project.join("chats").join(chat),
        (None, Some(marker)) => project.join(marker),
        (None, None) => return None,
    })
}

/// The project folder whose `marker` names `cwd`, else the first of the agent's key of `cwd`,
/// then that key numbered, that no marker claims for another directory: the markers listed and
/// read where a run of `request` finds its agent's home below `root` (here or far away).
async fn marked_project<L: ChatLayout>(
    request: &RunRequest,
    root: &Path,
    marker: &str,
    cwd: &Path,
) -> Result<String, AgentError> {
    let prefix = slashed(&projects::<L>());
    let mut owners: BTreeMap<String, Option<String>> = BTreeMap::new();
    for path in list_files(request, root, &projects::<L>(), 2).await? {
        let Some((key, None)) = path
            .to_str()
            .and_then(|p| project_file(&prefix, p, Some(marker)))
        else {
            continue;
        };
        if owners.len() == MARKERS_READ {
            break;
        }
        let owner = read_file(request, root, &path, MARKER_BOUND)
            .await?
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(|text| text.trim().to_string());
        owners.insert(key.to_string(), owner);
    }
    let wanted = cwd.to_string_lossy();
    let owner_of = |key: &str| owners.get(key).cloned().flatten();
    if let Some((key, _)) = owners
        .iter()
        .find(|(_, owner)| owner.as_deref() == Some(&*wanted))
    {
        return Ok(key.clone());
    }
    let base = crate::chats::dashed(cwd);
    (0..100)
        .map(|n| {
            if n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            }
        })
        .find(|key| owner_of(key).is_none_or(|owner| owner == *wanted))
        .ok_or_else(|| AgentError::InvalidRequest {
            reason: "every project folder for the working directory is another directory's".into(),
        })
}
