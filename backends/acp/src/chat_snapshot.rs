//! Session snapshots (`agent_api.session.snapshot`) of an agent whose chats are one JSONL file
//! each under `<its dir>/<projects>/<project>/chats/` (Gemini CLI, Qwen Code), over what its
//! crate says of its files ([`ChatLayout`]).
//!
//! Export takes the session's chat file, found under any project (the session may have run in
//! another working directory), once it has settled. Import writes it under the project of the
//! run's working directory here, re-keyed the agent's way ([`ChatLayout::project_key`]); an
//! agent that finds a directory's project by a marker file in it (Gemini's `.project_root`)
//! gets the project that names the directory already, or a new one with its marker. Every file
//! is read and written confined to the home (`openat2`, `agent_api::kit::snapshot`), bounded;
//! a chat over the bound is exported as a flagged replay.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use agent_api::kit::snapshot::{
    export_files, found_within, home_dir, import_files, settle, NativeFile,
};
use agent_api::request::SessionRef;
use agent_api::snapshot::{check_session_id, SnapshotError, SnapshotFile, SnapshotImport};
use agent_api::{AgentError, RunRequest, SessionSnapshot};

use crate::{AcpConfig, ChatLayout, ChatStore};

/// How long the chat file may take to appear after the turn's end, and to stay unchanged.
const APPEAR_LIMIT: Duration = Duration::from_secs(5);
const SETTLE_QUIET: Duration = Duration::from_millis(250);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);
/// Project folders looked through for the one whose marker names the working directory.
const PROJECTS_SCANNED: usize = 10_000;
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

/// Exports the chat of `session` from the home of a run of `request` on `config`.
pub async fn export<L: ChatLayout>(
    config: &AcpConfig,
    request: &RunRequest,
    session: &SessionRef,
) -> Result<SessionSnapshot, AgentError> {
    check_session_id(&session.id)?;
    let root = root_dir::<L>(config, request)?;
    let store = ChatStore::<L>::new(root.join(L::AGENT_DIR));
    let id = session.id.clone();
    // The agent writes its chat a moment after it reports the turn's end.
    let path = found_within(APPEAR_LIMIT, || store.find(&id).ok())
        .await
        .ok_or_else(|| SnapshotError::Missing { id: id.clone() })?;
    settle(&path, SETTLE_QUIET, SETTLE_LIMIT).await;
    let relative = path
        .strip_prefix(&root)
        .map_err(|_| SnapshotError::Missing { id: id.clone() })?
        .to_path_buf();
    let mut session = session.clone();
    session.agent = Some(L::KIND);
    session.working_dir = Some(crate::run_dir(config, request));
    export_files(
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
/// run's working directory.
pub async fn import<L: ChatLayout>(
    config: &AcpConfig,
    request: &RunRequest,
    snapshot: &SessionSnapshot,
) -> Result<SnapshotImport, AgentError> {
    snapshot.check_agent(&L::KIND)?;
    check_session_id(&snapshot.native_session_id)?;
    let root = root_dir::<L>(config, request)?;
    let cwd = crate::run_dir(config, request);
    let projects_dir = root.join(projects::<L>());
    let key = match L::PROJECT_MARKER {
        Some(marker) => marked_project(&projects_dir, marker, &cwd)?,
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
    import_files(&snapshot, |file| {
        let placed = placed::<L>(&prefix, &file.path, &key)?;
        (file.root == L::ROOT).then(|| (root.clone(), placed))
    })
    .await
}

/// Where the snapshot's file `path` goes below the root, in the project `key`: a chat, or the
/// project's marker; `None` for anything else.
fn placed<L: ChatLayout>(prefix: &str, path: &str, key: &str) -> Option<PathBuf> {
    let rest = path.strip_prefix(prefix)?.strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts[..] {
        [_, "chats", name] if name.ends_with(".jsonl") => {
            Some(projects::<L>().join(key).join("chats").join(name))
        }
        [_, name] if Some(name) == L::PROJECT_MARKER => Some(projects::<L>().join(key).join(name)),
        _ => None,
    }
}

/// The project folder whose `marker` names `cwd`, else the first of the agent's key of `cwd`,
/// then that key numbered, that no marker claims for another directory.
fn marked_project(projects: &Path, marker: &str, cwd: &Path) -> Result<String, AgentError> {
    let owner_of = |key: &str| -> Option<String> {
        agent_api::kit::files::read_regular(&projects.join(key).join(marker), MARKER_BOUND)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(|text| text.trim().to_string())
    };
    let wanted = cwd.to_string_lossy();
    let existing = std::fs::read_dir(projects)
        .into_iter()
        .flatten()
        .take(PROJECTS_SCANNED)
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|key| owner_of(key).as_deref() == Some(&*wanted));
    if let Some(key) = existing {
        return Ok(key);
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
