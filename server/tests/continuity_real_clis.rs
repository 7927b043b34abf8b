//! Issue 47's done-when on the real Claude Code, Codex and OpenCode, through the server: real server
//! processes (this test binary started again as `child_real_server`, serving one CLI from a bench
//! sandbox of its own) on one SQLite store, each on a machine of its own (a fresh sandbox: its own
//! HOME, empty of the agent's files, and its own working directory; the previous one's HOME is
//! deleted once its server is gone, as a replaced container's disk is).
//!
//! One chain per CLI, on the bench's `echo` scenario (the model answers with the number of user
//! turns it saw): a first turn on server A; A SIGKILLed; the next message on B answers with two
//! user turns seen; B stopped with SIGTERM; a turn on C killed mid-turn (during the `steer`
//! scenario's `sleep 4`); the next message on D ends that turn with one `interrupted` error and
//! works, having seen the turns the store kept. One `session_resumed` seam per server, no gap.
//! About a minute per CLI.
//!
//! Gemini CLI on its default ACP interface, whose own `session/load` fails on the first turn
//! after a native bring-back: that turn fails typed, and the next message replays, flagged.
//!
//! Each starts with `agent_bench::e2e_bench_or_explain`: a missing CLI fails the test with the
//! install instructions (`bash tests/bench/install-clis.sh`), unless `AGENT_API_E2E=skip` asks to
//! skip, which it then says loudly.

mod common;

use std::process::Command;
use std::time::Duration;

use agent_bench::{Cli, ModelServer, Sandbox};
use common::child_agent::{reap_agents, remove_home, ChildAgent};
use common::*;
use serde_json::{json, Value};

/// The environment variable that makes `child_real_server` serve: the store's URL.
const CHILD_STORE: &str = "AGENT_API_TEST_CHILD_STORE";
/// The environment variable holding the child's agent and sandbox ([`ChildAgent`] as JSON).
const CHILD_AGENT: &str = "AGENT_API_TEST_CHILD_AGENT";
/// What `child_real_server` prints once it listens.
const LISTENING: &str = "child-real-server listening on http://";
/// How long one step of a real agent may take (its process starting on a loaded machine included).
const AGENT_STEP: Duration = Duration::from_secs(180);

/// Not a test: the server process the tests below start, kill and start again (this binary run
/// with `--ignored --exact child_real_server`, the store's URL in `AGENT_API_TEST_CHILD_STORE`
/// and its agent in `AGENT_API_TEST_CHILD_AGENT`). It serves that agent until SIGTERM.
#[test]
#[ignore = "the server process of the real CLIs' continuity tests, started by them"]
fn child_real_server() {
    let url = std::env::var(CHILD_STORE).expect("started by the continuity tests, with a store");
    let agent =
        ChildAgent::from_env(CHILD_AGENT).expect("started by the continuity tests, with an agent");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(agent.serve(&url, LISTENING));
}

/// A `child_real_server` process on its own machine (its sandbox), killed when dropped.
struct Machine {
    process: std::process::Child,
    api: Api,
    sandbox: Sandbox,
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        self.reap();
    }
}

impl Machine {
    /// Starts a server named `name` on `store` in a fresh sandbox where `cli` (the server's
    /// `agent`) plays `scenario`; the process's environment is the sandbox's alone.
    fn start(
        store: &str,
        model: &ModelServer,
        cli: Cli,
        agent: &str,
        name: &str,
        scenario: &str,
    ) -> Self {
        let sandbox = Sandbox::new(cli, model, scenario).expect("a sandbox");
        let child = ChildAgent::new(agent, name, &sandbox);
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env_clear()
            .envs(sandbox.env.iter().map(|(k, v)| (k, v)))
            .env(CHILD_STORE, store)
            .env(CHILD_AGENT, child.to_json())
            .current_dir(&sandbox.cwd);
        let (process, api) = spawn_child_server(command, "child_real_server", LISTENING);
        Self {
            process,
            api,
            sandbox,
        }
    }

    /// Stops the server with `signal`, waits for it, and takes its machine away: the agent
    /// processes a killed server left (it cannot stop them) are killed, its HOME deleted.
    fn stop(mut self, signal: i32) -> std::process::ExitStatus {
        unsafe { libc::kill(self.process.id() as i32, signal) };
        let status = self.process.wait().unwrap();
        self.reap();
        remove_home(&self.sandbox.home);
        status
    }

    /// Kills what still runs on its machine, and waits until it is gone.
    fn reap(&self) {
        reap_agents(&self.sandbox.home, self.process.id());
    }

    async fn send(&self, text: &str) {
        // A message that brings the session back answers once its CLI has started and resumed
        // (an import that costs some CLIs seconds a command, more on a loaded machine): a bound
        // of its own, not the one of a request the server answers at once.
        let sent = self
            .api
            .try_call(
                hyper::Method::POST,
                "/v1/sessions/ada/messages",
                Some(json!({ "message": text })),
                &[],
                Duration::from_secs(120),
            )
            .await
            .unwrap_or_else(|e| panic!("the message {text:?}: {e}"));
        assert_eq!(
            sent.status,
            204,
            "{:?}",
            String::from_utf8_lossy(&sent.body)
        );
    }
}

/// Waits until `turns` turns have ended in the session; its events.
async fn turns_ended(api: &Api, turns: usize) -> Vec<Value> {
    wait_events(api, &format!("{turns} turns' end"), |events| {
        events.iter().filter(|e| turn_end(e)).count() >= turns
    })
    .await
}

async fn wait_events(api: &Api, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    loop {
        let events = api.all_events("ada", 1000).await;
        if done(&events) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what}: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the session's snapshot after turn `turn` is kept.
async fn snapshot_kept(api: &Api, turn: u64) {
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    loop {
        let info = api.get("/v1/sessions/ada").await.json();
        if info["snapshotTurn"].as_u64() >= Some(turn) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no snapshot: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The completed status items labelled `label`, as their details.
fn statuses(events: &[Value], label: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .filter(|e| e["data"]["item"]["content"][0]["label"] == label)
        .map(|e| {
            e["data"]["item"]["content"][0]["detail"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Sequences 1..=n with no gap, one `session.started`, unique event ids, and what an earlier
/// server served unchanged.
fn check_continuous(events: &[Value], served: &[Value]) {
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    let started = events
        .iter()
        .filter(|e| e["type"] == "session.started")
        .count();
    assert_eq!(started, 1, "one session.started");
    let ids: std::collections::HashSet<&str> = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), events.len(), "unique event ids");
    assert_eq!(events[..served.len()], served[..], "nothing served changed");
}

/// How much of the chain a CLI runs.
#[derive(PartialEq)]
enum Chain {
    /// A, B, C and D.
    Whole,
    /// A and B only (SIGKILL between turns, then an empty home): for a CLI whose start costs
    /// seconds per command, where the rest proves nothing of its own.
    Short,
}

/// Server A on `store`, serving `child` ([`ChildAgent`]): the session `ada` of `agent`, its first
/// turn (one user turn seen) and its snapshot kept, then A SIGKILLed; what A served.
async fn first_turn_then_killed(
    store: &str,
    model: &ModelServer,
    cli: Cli,
    child: &str,
    agent: &str,
) -> Vec<Value> {
    let a = Machine::start(store, model, cli, child, "a", "echo");
    let created = a
        .api
        .post(
            "/v1/sessions/ada",
            json!({"agent": agent, "permissionMode": "bypass"}),
        )
        .await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    a.send("My name is Ada.").await;
    let served = turns_ended(&a.api, 1).await;
    assert!(last_answer(&served).contains("user_turns=1"), "{served:#?}");
    snapshot_kept(&a.api, 1).await;
    assert!(!a.stop(libc::SIGKILL).success());
    served
}

/// The chain of the module's docs for `cli`, the server's agent `agent`.
async fn outlives_its_servers(cli: Cli, agent: &str, chain: Chain) {
    let Some((model, _unused)) = agent_bench::e2e_bench_or_explain(cli, "echo").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("server.sqlite3").display());

    // A: the first turn, then SIGKILL.
    let served = first_turn_then_killed(&store, &model, cli, agent, agent).await;

    // B, an empty home: two user turns seen, one seam; then SIGTERM.
    let b = Machine::start(&store, &model, cli, agent, "b", "echo");
    let info = b.api.get("/v1/sessions/ada").await.json();
    assert_eq!(
        (&info["state"], &info["ended"]),
        (&json!("resumable"), &json!(false)),
        "{info}"
    );
    b.send("What is my name?").await;
    let events = turns_ended(&b.api, 2).await;
    check_continuous(&events, &served);
    let seams = statuses(&events, "session_resumed");
    assert_eq!(seams.len(), 1, "{seams:?}");
    assert!(
        seams[0].contains("how=native from=snapshot") && seams[0].contains("after=server_died"),
        "{}",
        seams[0]
    );
    assert!(
        last_answer(&events).contains("user_turns=2"),
        "the agent saw both turns: {}",
        last_answer(&events)
    );
    if chain == Chain::Short {
        assert_eq!(
            b.api.post_empty("/v1/sessions/ada/terminate").await.status,
            204
        );
        return;
    }
    snapshot_kept(&b.api, 2).await;
    let served = events;
    assert!(b.stop(libc::SIGTERM).success(), "a clean stop");

    // C, an empty home: brought back after the clean stop; killed mid-turn.
    let c = Machine::start(&store, &model, cli, agent, "c", "steer");
    c.send("Run the slow command.").await;
    let events = wait_events(&c.api, "command's start", |events| {
        events[served.len()..]
            .iter()
            .any(|e| e["type"] == "item.started" && e["data"]["item"]["kind"] == "tool_call")
    })
    .await;
    check_continuous(&events, &served);
    let seams = statuses(&events, "session_resumed");
    assert!(
        seams.len() == 2
            && seams[1].contains("how=native from=snapshot")
            && seams[1].contains("after=server_stopped"),
        "{seams:?}"
    );
    let served = c.api.all_events("ada", 1000).await;
    c.stop(libc::SIGKILL);

    // D, an empty home: the killed turn ends interrupted, once; the next one works, having
    // seen what the store kept (turns 1 and 2; turn 3's files died with C's disk).
    let d = Machine::start(&store, &model, cli, agent, "d", "echo");
    d.send("And now?").await;
    let events = turns_ended(&d.api, 4).await;
    check_continuous(&events, &served);
    let interrupted = events
        .iter()
        .filter(|e| e["type"] == "error" && e["data"]["code"] == "interrupted")
        .count();
    assert_eq!(interrupted, 1, "{events:#?}");
    assert_eq!(statuses(&events, "turn_failed"), ["turn 3"]);
    let seams = statuses(&events, "session_resumed");
    assert!(
        seams.len() == 3
            && seams[2].contains("how=native from=snapshot")
            && seams[2].contains("after=server_died"),
        "{seams:?}"
    );
    let answer = last_answer(&events);
    assert!(answer.contains("user_turns=3"), "{answer}");
    let info = d.api.get("/v1/sessions/ada").await.json();
    assert_eq!(
        (&info["state"], &info["resumedHow"]),
        (&json!("live"), &json!("native")),
        "{info}"
    );
    assert_eq!(
        d.api.post_empty("/v1/sessions/ada/terminate").await.status,
        204
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_a_claude_code_session_outlives_killed_stopped_and_replaced_servers() {
    outlives_its_servers(Cli::ClaudeCode, "claude_code", Chain::Whole).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_a_codex_session_outlives_killed_stopped_and_replaced_servers() {
    outlives_its_servers(Cli::Codex, "codex", Chain::Whole).await;
}

/// OpenCode (`serve`, its default interface): its snapshot is its own export, restored with
/// `opencode import` on B's empty home. The short chain: each `opencode` command starts in
/// seconds, and the clean stop and the mid-turn kill are the server's, proven above.
#[tokio::test(flavor = "multi_thread")]
async fn e2e_an_opencode_session_outlives_a_killed_server_on_an_empty_home() {
    outlives_its_servers(Cli::OpenCode, "opencode", Chain::Short).await;
}

/// Gemini CLI on its default ACP interface, whose own `session/load` fails ("No previous sessions
/// found", `agent_api_gemini`'s docs) although the server opened the session natively from its
/// snapshot: the first turn on B fails once, typed (`session_not_found`), and the next message
/// brings the session back by a flagged replay (a second seam, `how=replay after=native_refused`,
/// `resumedHow: replay`) that answers; no gap. Should the CLI load its session one day, B's turn
/// answers natively having seen both turns, and the test says so.
#[tokio::test(flavor = "multi_thread")]
async fn e2e_a_gemini_acp_session_whose_load_fails_after_a_killed_server_is_replayed_flagged() {
    let cli = Cli::Gemini;
    let Some((model, _unused)) = agent_bench::e2e_bench_or_explain(cli, "echo").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("server.sqlite3").display());
    let served = first_turn_then_killed(&store, &model, cli, "gemini_acp", "gemini").await;

    let b = Machine::start(&store, &model, cli, "gemini_acp", "b", "echo");
    b.send("What is my name?").await;
    let events = turns_ended(&b.api, 2).await;
    check_continuous(&events, &served);
    let seams = statuses(&events, "session_resumed");
    assert!(
        seams.len() == 1 && seams[0].contains("how=native from=snapshot"),
        "{seams:?}"
    );
    if statuses(&events, "turn_failed").is_empty() {
        eprintln!("Gemini CLI loaded its own session on ACP: nothing to replay");
        let answer = last_answer(&events[served.len()..]);
        assert!(answer.contains("user_turns=2"), "{events:#?}");
        return;
    }
    let errors: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert_eq!(
        errors[0]["data"]["code"], "session_not_found",
        "{events:#?}"
    );
    let served = events;
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    while b.api.get("/v1/sessions/ada").await.json()["state"] != "resumable" {
        assert!(tokio::time::Instant::now() < deadline, "not let go");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    b.send("What is my name, again?").await;
    let events = turns_ended(&b.api, 3).await;
    check_continuous(&events, &served);
    let seams = statuses(&events, "session_resumed");
    assert!(
        seams.len() == 2
            && seams[1].contains("how=replay from=transcript")
            && seams[1].contains("after=native_refused"),
        "{seams:?}"
    );
    assert_eq!(statuses(&events, "turn_failed"), ["turn 2"], "{events:#?}");
    assert!(
        last_answer(&events[served.len()..]).contains("user_turns="),
        "the replay answered: {events:#?}"
    );
    let info = b.api.get("/v1/sessions/ada").await.json();
    assert_eq!(
        (&info["state"], &info["resumedHow"]),
        (&json!("live"), &json!("replay")),
        "{info}"
    );
    assert_eq!(
        b.api.post_empty("/v1/sessions/ada/terminate").await.status,
        204
    );
}
