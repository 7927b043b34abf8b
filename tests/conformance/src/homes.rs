//! Per-run homes end to end (`spec/run-protocol.md` §9), the same two scenarios for every agent
//! with a config folder in the user's home: a hermetic run does not see the memory the user
//! planted there, and isolated runs side by side each get a home of their own and leave the
//! user's untouched. The bench sandbox's HOME plays the user's home; each backend's test names
//! what differs in a [`UserHome`] and builds the backend and the request.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agent_api::request::{Home, HomeSeed};
use agent_api::{AgentBackend, RunRequest};
use agent_bench::process::{process_env, processes_in, tree_snapshot};
use agent_bench::{ModelServer, Sandbox};

use crate::record;

/// What the user planted: a line no model reply would hold by chance.
const PLANTED: &str = "PLANTED-USER-MEMORY-7731";

/// What the home scenarios need to know of one agent.
#[derive(Debug, Clone, Copy)]
pub struct UserHome {
    /// The agent's config folder under the user's home (`.claude`).
    pub config_dir: &'static str,
    /// The memory (instructions) file the agent reads from that folder (`CLAUDE.md`).
    pub memory: &'static str,
    /// The variable the backend points at the run's own home (`CLAUDE_CONFIG_DIR`).
    pub home_var: &'static str,
    /// Other paths under the user's home the agent writes when it is not isolated (`.claude.json`).
    pub also_written: &'static [&'static str],
}

/// An inherited home lets the planted memory reach the model (the control); a hermetic one does
/// not. `request` builds the run's request for a home; it runs outside the user's home, so no
/// project-level file of a parent folder could be the one read.
pub async fn hermetic_run_ignores_planted_memory(
    user: &UserHome,
    backend: &dyn AgentBackend,
    server: &ModelServer,
    sandbox: &Sandbox,
    request: impl Fn(Home) -> RunRequest,
) {
    let user_config = sandbox.home.join(user.config_dir);
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(
        user_config.join(user.memory),
        format!("Always mention {PLANTED}.\n"),
    )
    .unwrap();
    let outside = sandbox.tmp.join("project");
    std::fs::create_dir_all(&outside).unwrap();
    let request = |home| request(home).with_working_dir(&outside);
    let saw_planted = |from: usize| {
        server
            .requests()
            .iter()
            .skip(from)
            .any(|r| r.body.to_string().contains(PLANTED))
    };

    let inherited = record(backend.run(request(Home::Inherit)).await.unwrap()).await;
    assert!(inherited.completion.is_ok(), "{:?}", inherited.completion);
    assert!(
        saw_planted(0),
        "control: the user's memory reaches the model when the home is inherited"
    );

    let before = server.requests().len();
    let hermetic = record(backend.run(request(Home::Hermetic)).await.unwrap()).await;
    assert_eq!(
        hermetic.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock"),
        "{:?}",
        hermetic.completion
    );
    assert!(
        server.requests().len() > before,
        "the hermetic run asked the model"
    );
    assert!(
        !saw_planted(before),
        "the hermetic run read the user's memory"
    );
}

/// `runs` isolated runs at once: each sees a home of its own (watched in the agents' environment),
/// none of those homes is in the user's or outlives its run, and nothing the agent keeps in the
/// user's home was written.
pub async fn isolated_runs_have_their_own_homes(
    user: &UserHome,
    backend: Arc<dyn AgentBackend>,
    sandbox: &Sandbox,
    runs: usize,
    request: impl Fn(Home) -> RunRequest,
) {
    let before = snapshot(user, sandbox);
    let all = (0..runs).map(|_| {
        let backend = backend.clone();
        let request = request(Home::Isolated {
            seed: HomeSeed::Credentials,
        });
        async move { record(backend.run(request).await.unwrap()).await }
    });
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let watching = tokio::spawn(watch_homes(
        sandbox.cwd.clone(),
        user.home_var,
        seen.clone(),
    ));
    let records = futures::future::join_all(all).await;
    watching.abort();
    for run in &records {
        assert_eq!(
            run.completion.as_ref().unwrap().final_text.as_deref(),
            Some("Hello from mock"),
            "{:?}",
            run.completion
        );
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), runs, "each run has a home of its own: {seen:?}");
    for dir in &seen {
        assert!(
            !PathBuf::from(dir).starts_with(&sandbox.home),
            "{dir} is in the user's home"
        );
        assert!(!PathBuf::from(dir).exists(), "{dir} outlived its run");
    }
    assert_eq!(
        before,
        snapshot(user, sandbox),
        "the user's {} was written",
        user.config_dir
    );
}

/// Size and modification time of every file the agent keeps in the user's home.
fn snapshot(user: &UserHome, sandbox: &Sandbox) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut files = tree_snapshot(&sandbox.home.join(user.config_dir));
    for path in user.also_written.iter().map(|p| sandbox.home.join(p)) {
        if let Ok(meta) = std::fs::metadata(&path) {
            files.insert(
                path,
                (
                    meta.len(),
                    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                ),
            );
        }
    }
    files
}

/// Adds the values of `var` of the agents running in `cwd` to `seen`, until aborted.
async fn watch_homes(cwd: PathBuf, var: &'static str, seen: Arc<Mutex<BTreeSet<String>>>) {
    loop {
        let now: Vec<String> = processes_in(&cwd)
            .into_iter()
            .filter_map(|pid| process_env(pid, var))
            // A process read while it starts can show a cut `environ` ("/tmp/agent-a"): a home
            // is counted once it exists, as every run's does while it runs.
            .filter(|home| Path::new(home).is_dir())
            .collect();
        seen.lock().unwrap().extend(now);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
