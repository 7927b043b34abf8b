//! What staying resumable costs (issue 47 item 8).
//!
//! `snapshots`: a 50-turn scripted session (about 1 KiB a turn, the agent keeping its session as a
//! file in its home, as a CLI does) on a server in a process of its own: the time the server
//! spends keeping the session resumable after each turn (`agent_api_snapshot_seconds`: the agent's
//! export, the delta on what the store holds, the store write) against the server's CPU time per
//! turn (its process's, the scripted agent included), and the snapshot bytes written to the store
//! (`agent_api_snapshot_written_bytes_total`) against the bytes of the agent's own file. The chain
//! the store kept is read back and checked to be that file. Goals: ≤ 5 % of a turn's server CPU,
//! ≤ 2× the native bytes.
//!
//! `resume`: the time from sending the next message to the first event it brings (followed over
//! SSE), and to its turn's end: on a warm session (its agent running), on a session resumed by a
//! new server with an empty home after its first server was killed (SIGKILL) or stopped (SIGTERM)
//! on the same SQLite store (its snapshot restored, the agent resumed natively), and for a fresh
//! `agent-api run` process (its first JSONL event; measured when `target/release/agent-api` is
//! built: `cargo build --release -p agent_api_cli`).
//!
//! `real`: the same next message on each real CLI (Claude Code, Codex, OpenCode, Gemini CLI, Qwen
//! Code; pinned by `bash tests/bench/install-clis.sh`), whose sessions the server resumes from a
//! snapshot, on the bench's model server (`echo`): each server a process on a machine of its own
//! (a bench sandbox: its own HOME and working directory), SQLite; a warm session, one resumed by
//! a server on an empty home after the first one's SIGKILL (its home deleted), and a fresh
//! `agent-api run` process for a one-turn run (`AGENT_API_BENCH_AGENT_API` names the binary, else
//! the one beside the bench). Gemini CLI runs on its headless interface, a process a turn (the
//! one its restored chats go on in: [`common::child_agent::ChildAgent::settings`]). A CLI not
//! installed is said, loudly, and not measured; `-- real qwen gemini` measures those alone.
//!
//! `cargo bench -p agent_api_server --bench continuity [-- snapshots|resume|real [CLI…]]`;
//! `snapshots` on SQLite, and PostgreSQL too when `AGENT_API_TEST_POSTGRES_URL` names a database
//! (`tests/postgres/setup.sh`). The server is this binary started again
//! (`AGENT_API_BENCH_CONTINUITY_STORE`), on the scripted agent.

#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use agent_api::snapshot::SnapshotDelta;
use agent_api::SessionSnapshot;
use agent_api_server::{ServerConfig, StoreUrl};
use common::*;
use serde_json::json;

const STORE: &str = "AGENT_API_BENCH_CONTINUITY_STORE";
/// Set: the server serves this real CLI ([`common::child_agent::ChildAgent`] as JSON).
const REAL_AGENT: &str = "AGENT_API_BENCH_CONTINUITY_AGENT";
/// The `agent-api` binary the `real` part runs (else the one beside the bench).
const AGENT_API: &str = "AGENT_API_BENCH_AGENT_API";
/// Rounds of each figure of the `real` part (a real CLI's process starts in a second or more).
const REAL_ROUNDS: usize = 5;
/// Set: the server's scripted agent takes no snapshot (the baseline of the CPU it costs).
const NO_SNAPSHOTS: &str = "AGENT_API_BENCH_CONTINUITY_NO_SNAPSHOTS";
const LISTENING: &str = "bench-server listening on http://";
const TURNS: u64 = 50;
/// Pairs of sessions (with snapshots, without) a store: the CPU difference is a few per cent of
/// a 10 ms clock tick's resolution over 50 turns, so several pairs are pooled.
const ROUNDS: usize = 7;

/// The scripted agent exporting nothing (the trait's default refuses, and the server then keeps
/// no snapshot): everything else is the scripted agent's.
struct Unsnapshotted(agent_api_scripted::ScriptedBackend);

#[async_trait::async_trait]
impl agent_api::AgentBackend for Unsnapshotted {
    fn info(&self) -> &agent_api::BackendInfo {
        self.0.info()
    }
    fn missing_option(&self, request: &agent_api::RunRequest) -> Option<&'static str> {
        self.0.missing_option(request)
    }
    async fn run(
        &self,
        request: agent_api::RunRequest,
    ) -> Result<agent_api::RunHandle, agent_api::AgentError> {
        self.0.run(request).await
    }
    async fn open_session(
        &self,
        request: agent_api::RunRequest,
    ) -> Result<agent_api::Session, agent_api::AgentError> {
        self.0.open_session(request).await
    }
    fn check_session(&self, request: &agent_api::RunRequest) -> Result<(), agent_api::AgentError> {
        self.0.check_session(request)
    }
    fn validate(&self, request: &agent_api::RunRequest) -> Result<(), agent_api::AgentError> {
        self.0.validate(request)
    }
    fn validate_session_template(
        &self,
        request: &agent_api::RunRequest,
    ) -> Result<(), agent_api::AgentError> {
        self.0.validate_session_template(request)
    }
}

/// A server process with a home of its own, stopped (SIGTERM) when dropped.
struct Server {
    process: std::process::Child,
    api: Api,
}

impl Server {
    /// Starts a server on `store` whose agent keeps its sessions below `home`.
    fn start(store: &str, home: &Path) -> Self {
        Self::start_with(store, home, true)
    }

    /// [`Server::start`]; without `snapshots`, the agent exports nothing.
    fn start_with(store: &str, home: &Path, snapshots: bool) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        if !snapshots {
            command.env(NO_SNAPSHOTS, "1");
        }
        command
            .env(STORE, store)
            .env("HOME", home)
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env(agent_api_scripted::HOME_VAR, scripted_home(home))
            .stderr(Stdio::null());
        let (process, api) = spawn_child_server(command, "bench-server", LISTENING);
        Self { process, api }
    }

    /// Its CPU time so far (user and system), in seconds.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.process.id())).unwrap();
        // The fields after the command's name (which may hold spaces) in parentheses: utime and
        // stime are the 14th and 15th of the line.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    }

    /// Stops it with SIGTERM and waits for it to exit.
    fn stop(self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends it `signal` and waits for it to exit.
    fn signal(mut self, signal: i32) {
        unsafe { libc::kill(self.process.id() as i32, signal) };
        self.process.wait().unwrap();
        std::mem::forget(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn scripted_home(home: &Path) -> PathBuf {
    home.join("scripted")
}

/// The sum of the samples of metric `name` whose labels hold `labels` (`""`: every label set) in
/// a `/metrics` text.
fn metric(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
                && line.contains(labels)
        })
        .map(|line| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// One 50-turn session's figures.
struct Round {
    turns: u64,
    cpu_per_turn: f64,
    bare_cpu_per_turn: f64,
    snapshot_per_turn: f64,
    store_write_per_turn: f64,
    whole_bytes: f64,
    delta_bytes: f64,
    native_bytes: u64,
    kept_bytes: u64,
    whole_each_turn: u64,
}

/// Opens session `id` on `server` and runs its 50 turns, each answered once its turn ended (and
/// its snapshot was kept: it is taken before the turn's end is told); the server's CPU seconds a
/// turn.
async fn turns(server: &Server, id: &str) -> f64 {
    let api = &server.api;
    assert_eq!(
        api.post(&format!("/v1/sessions/{id}"), scripted("text"))
            .await
            .status,
        200
    );
    let cpu_before = server.cpu_seconds();
    for turn in 1..=TURNS {
        let message = format!("turn {turn}: {}", "a word ".repeat(146));
        let outcome = api
            .post(
                &format!("/v1/sessions/{id}/messages?wait=true"),
                json!({ "message": message }),
            )
            .await;
        assert_eq!(outcome.status, 200, "{:?}", outcome.body);
        assert_eq!(outcome.json()["status"], "completed");
    }
    (server.cpu_seconds() - cpu_before) / TURNS as f64
}

/// The server's CPU seconds a turn of 50 on a server on `url` that keeps no snapshot.
async fn bare_turns(url: &str, id: &str) -> f64 {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start_with(url, home.path(), false);
    let cpu = turns(&server, id).await;
    let info = server.api.get(&format!("/v1/sessions/{id}")).await.json();
    assert!(info["snapshotTurn"].is_null(), "no snapshot: {info}");
    server.stop();
    cpu
}

/// Runs a 50-turn session `id` on a server on `url` and reads what it kept back from the store.
async fn fifty_turns(url: &str, id: &str) -> Round {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(url, home.path());
    let api = &server.api;
    let cpu_per_turn = turns(&server, id).await;
    let metrics = String::from_utf8(api.get("/metrics").await.body.to_vec()).unwrap();
    let info = api.get(&format!("/v1/sessions/{id}")).await.json();
    assert_eq!(info["snapshotTurn"], TURNS, "{info}");
    let native_id = info["nativeSessionId"].as_str().unwrap().to_string();
    let kept = metric(&metrics, "agent_api_snapshot_seconds_count", "");
    assert_eq!(kept, TURNS as f64, "a snapshot after each turn");
    let turns = TURNS as f64;
    let snapshot_per_turn = metric(&metrics, "agent_api_snapshot_seconds_sum", "") / turns;
    let store_write_per_turn = metric(
        &metrics,
        "agent_api_store_write_seconds_sum",
        "operation=\"snapshot\"",
    ) / turns;
    let written = "agent_api_snapshot_written_bytes_total";
    let whole_bytes = metric(&metrics, written, "kind=\"whole\"");
    let delta_bytes = metric(&metrics, written, "kind=\"delta\"");
    server.stop();

    let file = scripted_home(home.path())
        .join("sessions")
        .join(format!("{native_id}.jsonl"));
    let native = std::fs::read(&file).unwrap();
    // What the store kept, put back together, is the agent's file, byte for byte.
    let store = StoreUrl::parse(url).unwrap().open().await.unwrap();
    let chain = store.snapshot(id).await.unwrap().unwrap();
    let restored = chain.restore().unwrap();
    assert_eq!(restored.files.len(), 1);
    assert_eq!(
        restored.files[0].bytes, native,
        "the store's chain is the file"
    );
    // What writing the snapshot whole after each turn of the kept chain would have written.
    let mut snapshot = SessionSnapshot::from_bytes(&chain.base).unwrap();
    let mut whole_each_turn = chain.base.len() as u64;
    for delta in &chain.deltas {
        snapshot = snapshot
            .applied(&SnapshotDelta::from_bytes(&delta.bytes).unwrap())
            .unwrap();
        whole_each_turn += snapshot.to_bytes().unwrap().len() as u64;
    }
    Round {
        bare_cpu_per_turn: 0.0,
        turns: 1 + chain.deltas.len() as u64,
        cpu_per_turn,
        snapshot_per_turn,
        store_write_per_turn,
        whole_bytes,
        delta_bytes,
        native_bytes: native.len() as u64,
        kept_bytes: chain.bytes(),
        whole_each_turn,
    }
}

async fn snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut stores = vec![(
        "SQLite",
        format!("sqlite:{}", dir.path().join("bench.sqlite3").display()),
    )];
    match database() {
        Some(url) => stores.push(("PostgreSQL", url)),
        None => println!("PostgreSQL: not measured (AGENT_API_TEST_POSTGRES_URL is not set: bash tests/postgres/setup.sh)"),
    }
    println!(
        "# staying resumable: {TURNS}-turn scripted sessions (~1 KiB a turn), the server in its own process"
    );
    for (name, url) in stores {
        let (mut with, mut without, mut overheads) = (0.0, 0.0, Vec::new());
        for round in 0..ROUNDS {
            // The baseline and the measured run in alternation, so that a change of load between
            // them weighs on both.
            let (bare, mut r) = if round % 2 == 0 {
                let bare = bare_turns(&url, &unique(&format!("bare-{round}"))).await;
                (
                    bare,
                    fifty_turns(&url, &unique(&format!("resumable-{round}"))).await,
                )
            } else {
                let r = fifty_turns(&url, &unique(&format!("resumable-{round}"))).await;
                (bare_turns(&url, &unique(&format!("bare-{round}"))).await, r)
            };
            r.bare_cpu_per_turn = bare;
            with += r.cpu_per_turn;
            without += bare;
            overheads.push(100.0 * (r.cpu_per_turn - bare) / bare);
            report(name, round, &r);
        }
        println!(
            "{name}: CPU a turn with snapshots over without, {ROUNDS} pairs pooled: {:+.1} % (median of the pairs {:+.1} %; goal ≤ 5 %)",
            100.0 * (with - without) / without,
            median(&mut overheads)
        );
    }
}

fn report(store: &str, round: usize, r: &Round) {
    println!(
        "{store} round {}: server CPU a turn {:.2} ms, without snapshots {:.2} ms ({:+.1} %); \
         snapshot time (wall: export, delta, store write) {:.3} ms a turn (store write {:.3} ms)",
        round + 1,
        r.cpu_per_turn * 1e3,
        r.bare_cpu_per_turn * 1e3,
        100.0 * (r.cpu_per_turn - r.bare_cpu_per_turn) / r.bare_cpu_per_turn,
        r.snapshot_per_turn * 1e3,
        r.store_write_per_turn * 1e3,
    );
    if round > 0 {
        return;
    }
    let written = r.whole_bytes + r.delta_bytes;
    println!(
        "{store}: written {:.0} bytes (whole {:.0}, deltas {:.0}) for a {} byte file = {:.2}× (goal ≤ 2×); \
         kept {} bytes; whole after each of the chain's {} turns: {} bytes ({:.1}×)",
        written,
        r.whole_bytes,
        r.delta_bytes,
        r.native_bytes,
        written / r.native_bytes as f64,
        r.kept_bytes,
        r.turns,
        r.whole_each_turn,
        r.whole_each_turn as f64 / r.native_bytes as f64,
    );
}

/// Milliseconds from sending `message` to session `id` on `api` to the first event it stored
/// (that event's own `time`), and to the answer of `?wait=true` (its turn's end); the first
/// event's type (and label, for a status item). Read from the log after the turn, not over SSE: a
/// stream opened on a server before it brings the session back follows it by polling the store
/// (every 250 ms), which would be measured instead.
async fn next_message(api: &Api, id: &str, message: &str) -> (f64, f64, String) {
    let info = api.get(&format!("/v1/sessions/{id}")).await.json();
    let offset = info["eventCount"].as_u64().unwrap();
    let sent_at = time::OffsetDateTime::now_utc();
    let started = Instant::now();
    let outcome = api
        .post(
            &format!("/v1/sessions/{id}/messages?wait=true"),
            json!({ "message": message }),
        )
        .await;
    let end_ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(outcome.json()["status"], "completed", "{:?}", outcome.body);
    let page = api
        .get(&format!("/v1/sessions/{id}/events?offset={offset}&limit=1"))
        .await
        .json();
    let first = &page["events"][0];
    let stamped = time::OffsetDateTime::parse(
        first["time"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let first_ms = (stamped - sent_at).as_seconds_f64() * 1e3;
    let what = match first["data"]["item"]["content"][0]["label"].as_str() {
        Some(label) => format!("{} {label}", first["type"].as_str().unwrap()),
        None => first["type"].as_str().unwrap().to_string(),
    };
    (first_ms, end_ms, what)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A session's first turn on a server of its own, then the server killed (`signal`) and another
/// started with an empty home on the same store: the next message's figures there.
async fn resumed(dir: &Path, round: usize, signal: i32) -> (f64, f64, String) {
    let url = format!(
        "sqlite:{}",
        dir.join(format!("resume-{signal}-{round}.sqlite3"))
            .display()
    );
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Server::start(&url, home_a.path());
    a.api.post("/v1/sessions/ada", scripted("text")).await;
    let outcome = a
        .api
        .post(
            "/v1/sessions/ada/messages?wait=true",
            json!({"message": "My name is Ada"}),
        )
        .await;
    assert_eq!(outcome.json()["status"], "completed");
    a.signal(signal);
    let b = Server::start(&url, home_b.path());
    let figures = next_message(&b.api, "ada", "What is my name?").await;
    let info = b.api.get("/v1/sessions/ada").await.json();
    assert_eq!(
        info["resumedHow"], "native",
        "resumed from its snapshot: {info}"
    );
    b.stop();
    figures
}

/// Milliseconds from starting `agent-api run` on the scripted agent to its first event on
/// stdout, and to its exit; `None` when the binary is not built beside this bench.
fn fresh_run() -> Option<(f64, f64)> {
    let exe = std::env::current_exe().unwrap();
    let binary = exe.parent()?.parent()?.join("agent-api");
    if !binary.exists() {
        return None;
    }
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(&binary);
    command
        .args(["run", "--agent", "scripted", "--format", "jsonl"])
        .args([
            "--option",
            "backend.scripted.scenario=text",
            "What is my name?",
        ])
        .env("HOME", home.path())
        .env(agent_api_scripted::HOME_VAR, scripted_home(home.path()));
    let (first, exit, _) = first_line_and_exit(command, "agent-api run");
    Some((first, exit))
}

/// Runs `command` (stdin and stderr null): milliseconds to its first line on stdout and to its
/// exit, and its other lines; it must exit with success (`what` names it otherwise).
fn first_line_and_exit(mut command: Command, what: &str) -> (f64, f64, Vec<String>) {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let said = lines.next().is_some_and(|line| line.is_ok());
    let first = started.elapsed().as_secs_f64() * 1e3;
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(child.wait().unwrap().success() && said, "{what} failed");
    (first, started.elapsed().as_secs_f64() * 1e3, rest)
}

async fn resume() {
    const RESUME_ROUNDS: usize = 7;
    let dir = tempfile::tempdir().unwrap();
    println!("# the next message's first event: warm, resumed on a new server (empty home), fresh `agent-api run`; scripted agent, SQLite, medians of {RESUME_ROUNDS}");
    let report = |what: &str, figures: &mut Vec<(f64, f64, String)>| {
        let mut first: Vec<f64> = figures.iter().map(|f| f.0).collect();
        let mut end: Vec<f64> = figures.iter().map(|f| f.1).collect();
        println!(
            "{what:<40} first event {:>7.2} ms ({}), turn end {:>7.2} ms; first events: {}",
            median(&mut first),
            figures[0].2,
            median(&mut end),
            first
                .iter()
                .map(|f| format!("{f:.1}"))
                .collect::<Vec<_>>()
                .join(" / ")
        );
    };
    let home = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("warm.sqlite3").display());
    let warm = Server::start(&url, home.path());
    warm.api.post("/v1/sessions/warm", scripted("text")).await;
    next_message(&warm.api, "warm", "My name is Ada").await;
    let mut figures = Vec::new();
    for _ in 0..RESUME_ROUNDS {
        figures.push(next_message(&warm.api, "warm", "What is my name?").await);
    }
    warm.stop();
    report("warm (its agent running)", &mut figures);
    for (what, signal) in [
        ("resumed after SIGKILL", libc::SIGKILL),
        ("resumed after SIGTERM", libc::SIGTERM),
    ] {
        let mut figures = Vec::new();
        for round in 0..RESUME_ROUNDS {
            figures.push(resumed(dir.path(), round, signal).await);
        }
        report(what, &mut figures);
    }
    let runs: Option<Vec<(f64, f64)>> = (0..RESUME_ROUNDS).map(|_| fresh_run()).collect();
    match runs {
        Some(runs) => {
            let mut first: Vec<f64> = runs.iter().map(|r| r.0).collect();
            let mut end: Vec<f64> = runs.iter().map(|r| r.1).collect();
            println!(
                "{:<40} first event {:>7.2} ms, exit {:>7.2} ms; first events: {}",
                "fresh `agent-api run` (a new process)",
                median(&mut first),
                median(&mut end),
                first.iter().map(|f| format!("{f:.1}")).collect::<Vec<_>>().join(" / ")
            );
        }
        None => println!("fresh `agent-api run`: not measured (build it beside the bench: cargo build --release -p agent_api_cli)"),
    }
}

/// A server process serving one real CLI on a machine of its own (a bench sandbox), killed when
/// dropped; its HOME deleted by [`RealServer::kill`].
struct RealServer {
    process: std::process::Child,
    api: Api,
    sandbox: agent_bench::Sandbox,
}

impl Drop for RealServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        common::child_agent::reap_agents(&self.sandbox.home, self.process.id());
    }
}

impl RealServer {
    fn start(store: &str, model: &agent_bench::ModelServer, cli: agent_bench::Cli) -> Self {
        let sandbox = agent_bench::Sandbox::new(cli, model, "echo").expect("a sandbox");
        let agent = common::child_agent::ChildAgent::new(cli.name(), "bench", &sandbox);
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env_clear()
            .envs(sandbox.env.iter().map(|(k, v)| (k, v)))
            .env(STORE, store)
            .env(REAL_AGENT, agent.to_json())
            .current_dir(&sandbox.cwd)
            .stderr(Stdio::null());
        let (process, api) = spawn_child_server(command, "bench-server", LISTENING);
        Self {
            process,
            api,
            sandbox,
        }
    }

    /// Kills it (SIGKILL), the agents it left, and deletes its HOME (a replaced machine's disk).
    fn kill(mut self) {
        unsafe { libc::kill(self.process.id() as i32, libc::SIGKILL) };
        self.process.wait().unwrap();
        common::child_agent::reap_agents(&self.sandbox.home, self.process.id());
        common::child_agent::remove_home(&self.sandbox.home);
    }

    /// Opens session `id` and runs its first turn.
    async fn first_turn(&self, cli: agent_bench::Cli, id: &str) {
        let created = self
            .api
            .post(
                &format!("/v1/sessions/{id}"),
                json!({"agent": cli.name(), "permissionMode": "bypass"}),
            )
            .await;
        assert_eq!(created.status, 200, "{:?}", created.body);
        next_message(&self.api, id, "My name is Ada.").await;
    }
}

/// The user turns the echo model saw, from the session's last answer (`user_turns=N`).
async fn user_turns(api: &Api, id: &str) -> u64 {
    let answer = last_answer(&api.all_events(id, 1000).await);
    let at = answer.find("user_turns=").expect("an echo answer") + "user_turns=".len();
    answer[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// `agent-api run` for one turn on `cli` in a fresh sandbox: its first JSONL line and its exit,
/// in milliseconds.
fn fresh_real_run(
    binary: &Path,
    model: &agent_bench::ModelServer,
    cli: agent_bench::Cli,
) -> (f64, f64) {
    let sandbox = agent_bench::Sandbox::new(cli, model, "echo").expect("a sandbox");
    if cli == agent_bench::Cli::Codex {
        // `agent-api` passes no `-c` of its own: the bench's go into `$CODEX_HOME/config.toml`.
        let home = sandbox.env_var("CODEX_HOME").expect("CODEX_HOME");
        let mut toml = String::new();
        let mut args = sandbox.base_args.iter();
        while let Some(arg) = args.next() {
            if arg == "-c" {
                toml.push_str(args.next().unwrap());
                toml.push('\n');
            }
        }
        std::fs::write(Path::new(home).join("config.toml"), toml).unwrap();
    }
    // What the server's sessions run with (`ChildAgent::settings`), as flags.
    let agent = common::child_agent::ChildAgent::new(cli.name(), "run", &sandbox);
    let (model, options) = agent.settings();
    let variable = format!("AGENT_API_{}_BIN", cli.name().to_ascii_uppercase());
    let mut command = Command::new(binary);
    command
        .args(["run", "--agent", cli.name(), "--format", "jsonl"])
        .args(model.iter().flat_map(|model| ["--model", model]))
        .args(
            options
                .iter()
                .flat_map(|(key, value)| ["--option".to_string(), format!("{key}={value}")]),
        )
        .args(["--approve", "all", "--timeout", "120", "My name is Ada."])
        .env_clear()
        .envs(sandbox.env.iter().map(|(k, v)| (k, v)))
        .env(variable, &sandbox.program)
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
        .current_dir(&sandbox.cwd);
    let (first, exit, rest) = first_line_and_exit(command, &format!("agent-api run on {cli}"));
    let seen = format!("user_turns={}", 1 + agent.context_turns());
    assert!(
        rest.iter().any(|line| line.contains(&seen)),
        "{cli}: {rest:?}"
    );
    (first, exit)
}

/// [`next_message`] on a real CLI: milliseconds to the first event stored (the server's own, a
/// status item), to the agent's first (`source` `agent`), and to the turn's end; the first event.
async fn real_next_message(api: &Api, id: &str, message: &str) -> ((f64, f64, f64), String) {
    let offset = api.get(&format!("/v1/sessions/{id}")).await.json()["eventCount"]
        .as_u64()
        .unwrap();
    let sent_at = time::OffsetDateTime::now_utc();
    let (first, end, what) = next_message(api, id, message).await;
    let page = api
        .get(&format!(
            "/v1/sessions/{id}/events?offset={offset}&limit=1000"
        ))
        .await
        .json();
    // The agent's first event of this turn: after the turn's start. An event a warm agent sent
    // between turns (Qwen Code's `available_commands` after its first) is stored ahead of it.
    let agent = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .skip_while(|e| e["data"]["item"]["content"][0]["label"] != "turn_started")
        .find(|e| e["source"] == "agent")
        .expect("an event of the agent");
    let stamped = time::OffsetDateTime::parse(
        agent["time"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let agent_ms = (stamped - sent_at).as_seconds_f64() * 1e3;
    ((first, agent_ms, end), what)
}

/// Medians (first event, turn end or exit) and the first events, as a line.
fn medians(figures: &[(f64, f64)]) -> String {
    let mut first: Vec<f64> = figures.iter().map(|f| f.0).collect();
    let mut end: Vec<f64> = figures.iter().map(|f| f.1).collect();
    let each = first
        .iter()
        .map(|f| format!("{f:.0}"))
        .collect::<Vec<_>>()
        .join(" / ");
    format!(
        "first event {:>7.1} ms, end {:>7.1} ms (first events: {each})",
        median(&mut first),
        median(&mut end)
    )
}

/// [`medians`] of a server's figures: first event, the agent's first, turn end.
fn server_medians(figures: &[(f64, f64, f64)]) -> String {
    let mut agent: Vec<f64> = figures.iter().map(|f| f.1).collect();
    let pairs: Vec<(f64, f64)> = figures.iter().map(|f| (f.0, f.2)).collect();
    format!(
        "{}; the agent's first event {:.1} ms",
        medians(&pairs),
        median(&mut agent)
    )
}

/// The `real` part for one CLI.
async fn real_cli(cli: agent_bench::Cli, binary: Option<&Path>) {
    let version = agent_bench::clis::cli_version(cli).unwrap_or_default();
    if let Err(error) = agent_bench::clis::find_cli(cli) {
        println!("!!! {cli}: NOT MEASURED: {error}");
        return;
    }
    let model = agent_bench::ModelServer::start(None)
        .await
        .expect("the model server starts");
    let dir = tempfile::tempdir().unwrap();
    let store = |name: &str| format!("sqlite:{}", dir.path().join(name).display());

    let warm = RealServer::start(&store("warm.sqlite3"), &model, cli);
    warm.first_turn(cli, "warm").await;
    let mut figures = Vec::new();
    for _ in 0..REAL_ROUNDS {
        let (times, _) = real_next_message(&warm.api, "warm", "What is my name?").await;
        figures.push(times);
    }
    drop(warm);
    println!(
        "{cli} {version}: {:<34} {}",
        "warm (live on its server)",
        server_medians(&figures)
    );

    let mut figures = Vec::new();
    let mut seam = String::new();
    for round in 0..REAL_ROUNDS {
        let url = store(&format!("resumed-{round}.sqlite3"));
        let a = RealServer::start(&url, &model, cli);
        a.first_turn(cli, "ada").await;
        snapshot_kept(&a.api, "ada", 1).await;
        let before = user_turns(&a.api, "ada").await;
        a.kill();
        let b = RealServer::start(&url, &model, cli);
        let (times, what) = real_next_message(&b.api, "ada", "What is my name?").await;
        let info = b.api.get("/v1/sessions/ada").await.json();
        assert_eq!(info["resumedHow"], "native", "{cli}: {info}");
        assert_eq!(
            user_turns(&b.api, "ada").await,
            before + 1,
            "{cli}: the resumed agent saw the first turn"
        );
        figures.push(times);
        seam = what;
    }
    println!(
        "{cli} {version}: {:<34} {} [first: {seam}]",
        "resumed after SIGKILL (empty home)",
        server_medians(&figures)
    );

    match binary {
        Some(binary) => {
            let figures: Vec<(f64, f64)> = (0..REAL_ROUNDS)
                .map(|_| fresh_real_run(binary, &model, cli))
                .collect();
            println!(
                "{cli} {version}: {:<34} {}",
                "fresh `agent-api run` (one turn)",
                medians(&figures).replace("end", "exit")
            );
        }
        None => {
            println!("!!! {cli}: fresh `agent-api run` NOT MEASURED: set {AGENT_API} to the binary")
        }
    }
}

/// The `real` part on the CLIs `filters` name (each a CLI's bench name), else on all of them.
async fn real(filters: &[&String]) {
    let binary = std::env::var_os(AGENT_API).map(PathBuf::from).or_else(|| {
        let exe = std::env::current_exe().ok()?;
        Some(exe.parent()?.parent()?.join("agent-api")).filter(|b| b.exists())
    });
    println!("# the next message on real CLIs, bench model `echo`, SQLite, medians of {REAL_ROUNDS}; load average {}", load_average());
    let named = |cli: &agent_bench::Cli| filters.iter().any(|f| *f == cli.name());
    let some = agent_bench::Cli::ALL.iter().any(named);
    for cli in agent_bench::Cli::ALL
        .into_iter()
        .filter(|cli| !some || named(cli))
    {
        real_cli(cli, binary.as_deref()).await;
    }
    println!("load average after: {}", load_average());
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    if let Ok(url) = std::env::var(STORE) {
        if let Some(agent) = common::child_agent::ChildAgent::from_env(REAL_AGENT) {
            return tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(agent.serve(&url, LISTENING));
        }
        let config = ServerConfig::default()
            .with_daemon_id("bench")
            .with_idle_release(None);
        if std::env::var_os(NO_SNAPSHOTS).is_none() {
            return serve_scripted_until_sigterm(&url, config, LISTENING);
        }
        let mut gateway = agent_api::Gateway::new();
        let scripted = agent_api_scripted::ScriptedBackend::new();
        gateway.register(Arc::new(Unsnapshotted(scripted))).unwrap();
        return serve_gateway_until_sigterm(&url, gateway, config, LISTENING);
    }
    // `cargo test --all-targets` runs benches too, without `--bench`: not the place for figures.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "continuity benchmark: run it with `cargo bench -p agent_api_server --bench continuity`"
        );
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if wanted("snapshots") {
        runtime.block_on(snapshots());
    }
    if wanted("resume") {
        runtime.block_on(resume());
    }
    if wanted("real") {
        runtime.block_on(real(&filters));
    }
}
