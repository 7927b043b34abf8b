//! Per-turn latency of a conversation: turns 2..=10 on a warm session (one live agent process)
//! against a fresh process that resumes the previous turn's session, for Claude Code and Codex
//! (app-server) on the bench's scripted model (`echo` scenario), each turn timed from the send to
//! its completion.
//!
//! Then steering (issue 50): a warm session's turn on the `steer` model (`sleep 4`) steered once its
//! shell call starts, timed from `RunControl::steer` to its return (the agent's acknowledgement:
//! Codex's `turn/steer` response; Claude Code's echo of the message when it reads it, at its next
//! step, so the rest of the command's time is in it; OpenCode `serve`'s first answer naming the
//! message as its parent, also at its next step).
//!
//! `cargo bench -p agent_api_conformance --bench sessions [-- NAME...]` (issue 11 target: warm ≥ 3×
//! faster); names (`claude_code`, `codex`, `opencode`) pick the agents, all by default.
//! Needs the pinned CLIs (`bash tests/bench/install-clis.sh`); a missing one is reported and skipped.

use std::time::{Duration, Instant};

use agent_api::{AgentBackend, RunRequest, SessionSelector};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_opencode::{Interface, OpenCodeBackend, OpenCodeConfig};
use agent_bench::{Cli, ModelServer, Sandbox};

const TURNS: usize = 10;

fn claude(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

fn codex(sandbox: &Sandbox) -> CodexBackend {
    // The sandbox's `-c` overrides point Codex at the model server.
    let mut overrides = Vec::new();
    let mut args = sandbox.base_args.iter();
    while let Some(arg) = args.next() {
        if arg == "-c" {
            overrides.extend(args.next().cloned());
        }
    }
    let mut config = CodexConfig::with_binary(&sandbox.program)
        .config_overrides(overrides)
        .working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.env(key, value);
    }
    CodexBackend::new(config)
}

fn opencode(sandbox: &Sandbox) -> OpenCodeBackend {
    let mut config =
        OpenCodeConfig::with_binary(&sandbox.program).default_interface(Interface::Serve);
    for (key, value) in &sandbox.env {
        config = config.env(key, value);
    }
    config.working_dir = Some(sandbox.cwd.clone());
    OpenCodeBackend::new(config)
}

fn template() -> RunRequest {
    RunRequest::new("").with_timeout(Duration::from_secs(120))
}

/// Turns 2..=TURNS on one warm session.
async fn warm(backend: &dyn AgentBackend) -> Vec<Duration> {
    let mut session = backend
        .open_session(template())
        .await
        .expect("the session opens");
    let mut times = Vec::new();
    for turn in 1..=TURNS {
        let started = Instant::now();
        let (_, completion) = session
            .send(format!("turn {turn}"))
            .await
            .expect("the turn starts")
            .collect_universal()
            .await;
        completion.expect("the turn succeeds");
        if turn > 1 {
            times.push(started.elapsed());
        }
    }
    session.close().await.expect("the session closes");
    times
}

/// Turns 2..=TURNS each as a fresh process resuming the previous turn's session.
async fn resumed(backend: &dyn AgentBackend) -> Vec<Duration> {
    let mut times = Vec::new();
    let mut previous: Option<String> = None;
    for turn in 1..=TURNS {
        let mut request =
            RunRequest::new(format!("turn {turn}")).with_timeout(Duration::from_secs(120));
        if let Some(id) = previous.take() {
            request = request.with_session(SessionSelector::Resume(id.into()));
        }
        let started = Instant::now();
        let (_, completion) = backend
            .run(request)
            .await
            .expect("the run starts")
            .collect_universal()
            .await;
        let completion = completion.expect("the run succeeds");
        if turn > 1 {
            times.push(started.elapsed());
        }
        previous = completion.native_session_id;
    }
    times
}

fn summary(times: &[Duration]) -> (f64, f64) {
    let mut ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms.iter().sum::<f64>() / ms.len() as f64)
}

/// Steered turns, each the first of a warm session of its own (the `steer` model runs its command
/// in a conversation's first turn only): how long each steer took to be acknowledged.
async fn steered(backend: &dyn AgentBackend) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..STEERED_TURNS {
        let mut session = backend
            .open_session(template().with_permissions(agent_api::PermissionPolicy::ApproveAll))
            .await
            .expect("the session opens");
        let handle = session
            .send(agent_api_conformance::steer::PROMPT)
            .await
            .expect("the turn starts");
        let steered = agent_api_conformance::steer::drive_steered(
            handle,
            agent_api_conformance::steer::SteerAt::ToolCall,
            false,
        )
        .await;
        steered.steer.expect("the agent takes the steer");
        steered.run.completion.expect("the turn succeeds");
        times.push(steered.took);
        session.close().await.expect("the session closes");
    }
    times
}

const STEERED_TURNS: usize = 3;

async fn measure(cli: Cli, name: &str) {
    if agent_bench::e2e_enabled_or_explain(cli).is_none() {
        return;
    }
    let server = ModelServer::start(None)
        .await
        .expect("the model server starts");
    let sandbox = Sandbox::new(cli, &server, "echo").expect("the sandbox");
    let backend: Box<dyn AgentBackend> = match cli {
        Cli::Codex => Box::new(codex(&sandbox)),
        _ => Box::new(claude(&sandbox)),
    };
    let (warm_median, warm_mean) = summary(&warm(backend.as_ref()).await);
    let (fresh_median, fresh_mean) = summary(&resumed(backend.as_ref()).await);
    println!(
        "{name}: turns 2..={TURNS}: warm median {warm_median:.0} ms (mean {warm_mean:.0}); fresh + resume median {fresh_median:.0} ms \
         (mean {fresh_mean:.0}); ratio {:.1}x (means {:.1}x)",
        fresh_median / warm_median,
        fresh_mean / warm_mean
    );
    measure_steer(cli, name, &server).await;
}

/// Steer to acknowledgement on `cli`'s warm sessions.
async fn measure_steer(cli: Cli, name: &str, server: &ModelServer) {
    let sandbox = Sandbox::new(cli, server, "steer").expect("the sandbox");
    let backend: Box<dyn AgentBackend> = match cli {
        Cli::Codex => Box::new(codex(&sandbox)),
        Cli::OpenCode => Box::new(opencode(&sandbox)),
        _ => Box::new(claude(&sandbox)),
    };
    let times = steered(backend.as_ref()).await;
    let ms: Vec<String> = times
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1000.0))
        .collect();
    println!(
        "{name}: steer to acknowledgement over {STEERED_TURNS} steered turns: {} ms",
        ms.join(" / ")
    );
}

#[tokio::main]
async fn main() {
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let picked = |name: &str| names.is_empty() || names.iter().any(|n| n == name);
    if picked("claude_code") {
        measure(Cli::ClaudeCode, "claude_code").await;
    }
    if picked("codex") {
        measure(Cli::Codex, "codex app-server").await;
    }
    // OpenCode's warm sessions are measured by its own bench (`agent_api_opencode`): steering only.
    if picked("opencode") && agent_bench::e2e_enabled_or_explain(Cli::OpenCode).is_some() {
        let server = ModelServer::start(None)
            .await
            .expect("the model server starts");
        measure_steer(Cli::OpenCode, "opencode serve", &server).await;
    }
}
