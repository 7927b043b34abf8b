//! Codex's session snapshots (`agent_api.session.snapshot`), for both interfaces (`exec` and the
//! app-server write the same thread): a thread is one rollout file,
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, which only grows. Export
//! takes it once Codex has written the turn, found by listing the date folders where the agent's
//! home is (this machine, or a Prefix, Container or Ssh launcher's far side); import writes it at the same path below the other
//! home's `CODEX_HOME` (Codex finds a thread by the file's name, not by working directory), and
//! `exec resume` / `thread/resume` go on from it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_api::kit::snapshot::{
    export_files, find_files, home_dir, import_files, settle_file, NativeFile,
};
use agent_api::request::SessionRef;
use agent_api::snapshot::{check_session_id, SnapshotImport};
use agent_api::{AgentError, RunRequest, SessionSnapshot};

use crate::CodexConfig;

const ROOT: &str = "CODEX_HOME";
const SETTLE_QUIET: Duration = Duration::from_millis(250);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

fn codex_home(config: &CodexConfig, request: &RunRequest) -> Result<PathBuf, AgentError> {
    home_dir(request, &config.env, true, ROOT, ".codex")
}

/// Whether `path` is a rollout of thread `id`: `sessions/YYYY/MM/DD/rollout-…-<id>.jsonl`, plain
/// digits for the date folders.
fn is_rollout_of(path: &str, id: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    parts.len() == 5
        && parts[0] == "sessions"
        && digits(parts[1], 4)
        && digits(parts[2], 2)
        && digits(parts[3], 2)
        && parts[4].starts_with("rollout-")
        && parts[4].ends_with(&format!("-{id}.jsonl"))
}

pub(crate) async fn export(
    config: &CodexConfig,
    request: &RunRequest,
    session: &SessionRef,
) -> Result<SessionSnapshot, AgentError> {
    check_session_id(&session.id)?;
    let home = codex_home(config, request)?;
    // The date folders are listed where the agent's home is (here, or through a far launcher);
    // the app-server may write a new thread's rollout a moment after the turn ends.
    let found = find_files(
        request,
        &home,
        Path::new("sessions"),
        4,
        SETTLE_LIMIT,
        |path| {
            path.to_str()
                .is_some_and(|path| is_rollout_of(path, &session.id))
        },
    )
    .await?;
    let Some(relative) = found.into_iter().next() else {
        return Err(agent_api::snapshot::SnapshotError::Missing {
            id: session.id.clone(),
        }
        .into());
    };
    settle_file(request, &home, &relative, SETTLE_QUIET, SETTLE_LIMIT).await;
    let stored = relative.to_string_lossy().into_owned();
    export_files(
        request,
        session,
        vec![NativeFile {
            root: ROOT,
            dir: home,
            relative,
            stored,
        }],
    )
    .await
}

pub(crate) async fn import(
    config: &CodexConfig,
    request: &RunRequest,
    snapshot: &SessionSnapshot,
) -> Result<SnapshotImport, AgentError> {
    snapshot.check_agent(&crate::KIND)?;
    let home = codex_home(config, request)?;
    let id = snapshot.native_session_id.clone();
    import_files(request, snapshot, |file| {
        (file.root == ROOT && is_rollout_of(&file.path, &id))
            .then(|| (home.clone(), PathBuf::from(&file.path)))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_rollout_of_the_thread_in_its_date_folders_is_taken() {
        let id = "019a-thread";
        assert!(is_rollout_of(
            "sessions/2026/11/28/rollout-2026-11-28T20-00-00-019a-thread.jsonl",
            id
        ));
        for bad in [
            "sessions/2026/11/rollout-x-019a-thread.jsonl",
            "config.toml",
            "sessions/2026/11/28/rollout-x-other.jsonl",
            "sessions/20x6/11/28/rollout-x-019a-thread.jsonl",
            "auth.json",
        ] {
            assert!(!is_rollout_of(bad, id), "{bad}");
        }
    }
}
