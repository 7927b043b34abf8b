//! Claude Code's session snapshots (`agent_api.session.snapshot`): a session is one JSONL file,
//! `<config dir>/projects/<project key>/<session id>.jsonl`, the key being the working directory
//! with every character but ASCII letters and digits made `-`. Export takes that file (found under
//! any project, since the session may have run elsewhere); import writes it under the key of the
//! run's working directory here, so `--resume <id>` finds it there. The file only grows, turn
//! after turn: a store keeps it incrementally (`SessionSnapshot::delta_from`).

use std::path::{Path, PathBuf};

use std::time::Duration;

use agent_api::kit::snapshot::{
    export_files, home_dir, home_is_here, import_files, settle, NativeFile,
};
use agent_api::request::SessionRef;
use agent_api::snapshot::{check_session_id, SnapshotImport};
use agent_api::{AgentError, RunRequest, SessionSnapshot};

use crate::ClaudeCodeConfig;

const ROOT: &str = "CLAUDE_CONFIG_DIR";
/// How long the session file must stay unchanged before it is taken, and the longest wait.
const SETTLE_QUIET: Duration = Duration::from_millis(250);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);
/// Project folders looked through for a session that ran in another working directory.
const PROJECTS_SCANNED: usize = 10_000;

/// Claude Code's key of a working directory: `/home/dev/work` is `-home-dev-work`.
pub fn project_key(dir: &Path) -> String {
    dir.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn config_dir(config: &ClaudeCodeConfig, request: &RunRequest) -> Result<PathBuf, AgentError> {
    home_dir(request, &config.env, config.inherit_env, ROOT, ".claude")
}

fn run_dir(config: &ClaudeCodeConfig, request: &RunRequest) -> PathBuf {
    request
        .clone()
        .in_session_dir(config.working_dir.as_deref())
        .working_dir
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default()
}

pub(crate) async fn export(
    config: &ClaudeCodeConfig,
    request: &RunRequest,
    session: &SessionRef,
) -> Result<SessionSnapshot, AgentError> {
    check_session_id(&session.id)?;
    let dir = config_dir(config, request)?;
    let name = format!("{}.jsonl", session.id);
    let here = project_key(&run_dir(config, request));
    // Claude Code writes its transcript a moment after it reports the turn's end: wait for the
    // file to be there and quiet, in the run's own project or, for a session that ran
    // elsewhere, any other (names only: the file is opened confined).
    // Where the agent runs elsewhere (a container, ssh), its home is there: the file is taken
    // from the run's own project through the launcher, after the quiet time.
    let own = dir.join("projects").join(&here).join(&name);
    let key = if !home_is_here(request) {
        tokio::time::sleep(SETTLE_QUIET).await;
        here
    } else if settle(&own, SETTLE_QUIET, SETTLE_LIMIT).await {
        here
    } else {
        other_project(&dir.join("projects"), &name).unwrap_or(here)
    };
    let relative = Path::new("projects").join(&key).join(&name);
    let stored = format!("projects/{key}/{name}");
    let mut session = session.clone();
    session.working_dir = Some(run_dir(config, request));
    export_files(
        request,
        &session,
        vec![NativeFile {
            root: ROOT,
            dir,
            relative,
            stored,
        }],
    )
    .await
}

/// The project folder below `projects` holding the file `name`, if any.
fn other_project(projects: &Path, name: &str) -> Option<String> {
    std::fs::read_dir(projects)
        .ok()?
        .take(PROJECTS_SCANNED)
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|key| projects.join(key).join(name).is_file())
}

pub(crate) async fn import(
    config: &ClaudeCodeConfig,
    request: &RunRequest,
    snapshot: &SessionSnapshot,
) -> Result<SnapshotImport, AgentError> {
    snapshot.check_agent(&crate::KIND)?;
    let dir = config_dir(config, request)?;
    let name = format!("{}.jsonl", snapshot.native_session_id);
    let key = project_key(&run_dir(config, request));
    import_files(request, snapshot, |file| {
        let parts: Vec<&str> = file.path.split('/').collect();
        let session_file =
            file.root == ROOT && parts.len() == 3 && parts[0] == "projects" && parts[2] == name;
        session_file.then(|| (dir.clone(), Path::new("projects").join(&key).join(&name)))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_key_is_the_directory_with_every_other_character_a_dash() {
        assert_eq!(
            project_key(Path::new("/home/dev/work/shell")),
            "-home-dev-work-shell"
        );
        assert_eq!(project_key(Path::new("/tmp/a_b.c")), "-tmp-a-b-c");
    }
}
