//! Three end-to-end runs through bubblewrap (`spec/launchers.md`) that any agent whose protocol
//! runs over the launcher's stdio unchanged must pass alike: text names the launcher, a shell
//! command follows the caller's decision, and a cancel leaves no process. Each agent's test names
//! its CLI, backend and request in a [`BenchAgent`]; `bwrap` is installed by `tests/run.sh`.

use agent_api::universal::DecidedBy;
use agent_api::{AgentBackend, AgentError, PermissionDecision, RunRequest};
use agent_bench::process::processes_in;
use agent_bench::{Cli, ModelServer, Sandbox};

use crate::launchers::bwrap_launcher as bwrap;
use crate::{assert_conformant, assert_one_permission, drive};

/// One agent on the bench: its CLI, its backend for a sandbox, and its request for a prompt.
#[derive(Debug, Clone, Copy)]
pub struct BenchAgent<B> {
    /// The CLI the bench sandboxes.
    pub cli: Cli,
    /// The backend running the sandbox's CLI with the sandbox's environment.
    pub backend: fn(&Sandbox) -> B,
    /// The request of a prompt (model, timeout).
    pub request: fn(&str) -> RunRequest,
}

impl<B: AgentBackend> BenchAgent<B> {
    async fn bench(&self, scenario: &str) -> Option<(ModelServer, Sandbox)> {
        agent_bench::e2e_bench_or_explain(self.cli, scenario).await
    }
}

/// The answer streams and the completion names `bwrap` as its launcher; nothing is left running.
pub async fn text_streams_and_the_completion_names_the_launcher<B: AgentBackend>(
    agent: &BenchAgent<B>,
) {
    let Some((_server, sandbox)) = agent.bench("text").await else {
        return;
    };
    let run = drive(
        &(agent.backend)(&sandbox),
        (agent.request)("say hi").with_launcher(bwrap()),
        None,
        false,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        run.completion.as_ref().unwrap().launcher.as_deref(),
        Some("bwrap")
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock")
    );
    assert!(processes_in(&sandbox.cwd).is_empty());
}

/// The shell command runs when the caller allows it and not when they deny it, with one
/// permission request decided by the caller.
pub async fn shell_follows_the_callers_decision<B: AgentBackend>(agent: &BenchAgent<B>) {
    for (decision, runs) in [
        (PermissionDecision::Allow, true),
        (PermissionDecision::Deny { message: None }, false),
    ] {
        let Some((_server, sandbox)) = agent.bench("shell").await else {
            return;
        };
        let request = (agent.request)("run the command").with_launcher(bwrap());
        let run = drive(&(agent.backend)(&sandbox), request, Some(decision), false).await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_one_permission(&run, runs, DecidedBy::Caller);
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs);
    }
}

/// A cancel at the first delta ends the run `Cancelled` with no process left in the sandbox.
pub async fn cancel_mid_turn_leaves_no_process<B: AgentBackend>(agent: &BenchAgent<B>) {
    let Some((_server, sandbox)) = agent.bench("slow_text").await else {
        return;
    };
    let run = drive(
        &(agent.backend)(&sandbox),
        (agent.request)("talk slowly").with_launcher(bwrap()),
        None,
        true,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    assert_eq!(
        processes_in(&sandbox.cwd),
        Vec::<i32>::new(),
        "processes left after the cancel"
    );
}
