//! A fleet of servers on one PostgreSQL (issue 48), on the real database `tests/postgres/setup.sh`
//! starts and real server processes (this test binary started again as `fleet_server`): the
//! store's fencing, any server answering for any session (a streamed message included), a killed
//! owner's session going on elsewhere, a paused owner that wakes writing nothing, placement and
//! admission, drain, the chaos test (three servers, thirty sessions, SIGKILL, SIGSTOP/SIGCONT and
//! restarts while clients talk to random servers), and the done-when on the real Claude
//! Code (each server on a machine of its own; about 25 s).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_api_server::store::{SessionState, SessionUpdate, StoredEvent};
use agent_api_server::{ServerConfig, StoreError, StoreUrl};
use agent_bench::{Cli, ModelServer, Sandbox};
use common::child_agent::{agents_on, reap_agents, remove_home, ChildAgent};
use common::*;
use hyper::Method;
use serde_json::{json, Value};

/// The variables that make `fleet_server` serve: the store's URL, its name, its bounds.
const STORE: &str = "AGENT_API_TEST_FLEET_STORE";
const NAME: &str = "AGENT_API_TEST_FLEET_NAME";
const MAX: &str = "AGENT_API_TEST_FLEET_MAX";
const AGENTS: &str = "AGENT_API_TEST_FLEET_AGENTS";
/// The real CLI a `fleet_server` runs beside the scripted agent ([`ChildAgent`] as JSON), if any.
const CLI: &str = "AGENT_API_TEST_FLEET_CLI";
/// What `fleet_server` prints once it listens.
const LISTENING: &str = "fleet-server listening on http://";

/// The lease of the servers the tests start: a killed one's sessions are taken after it.
const LEASE: Duration = Duration::from_secs(2);

/// Not a test: the server process the tests below start, kill, pause and start again (this
/// binary run with `--ignored --exact fleet_server`).
#[test]
#[ignore = "the server process of the fleet tests, started by them"]
fn fleet_server() {
    let url = std::env::var(STORE).expect("fleet_server is started by the fleet tests");
    let name = std::env::var(NAME).unwrap_or_else(|_| "fleet".into());
    let max = std::env::var(MAX).map_or(256, |m| m.parse().unwrap());
    let agents = std::env::var(AGENTS).map_or(true, |a| a == "1");
    let cli = ChildAgent::from_env(CLI);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = StoreUrl::parse(&url).unwrap().open().await.unwrap();
        let mut gateway = agent_api::Gateway::new();
        gateway
            .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
            .unwrap();
        let defaults = match &cli {
            Some(cli) => {
                gateway.register(cli.backend()).unwrap();
                cli.defaults()
            }
            None => agent_api::RunRequest::new(""),
        };
        let config = ServerConfig::default()
            .with_daemon_id(name)
            .with_idle_release(None)
            .with_server_lease(LEASE)
            .with_heartbeat(Some(Duration::from_millis(250)))
            .with_max_sessions(max)
            .with_agents(agents)
            .with_drain_timeout(Duration::from_secs(20));
        let server = agent_api_server::Server::new(gateway, defaults, store, config)
            .await
            .unwrap();
        serve_until_sigterm(server, LISTENING).await;
    });
}

/// A `fleet_server` process, killed when dropped (with the agents it left on its machine).
struct Node {
    process: std::process::Child,
    api: Api,
    name: String,
    /// Its machine, when it runs a real CLI: a bench sandbox of its own (HOME, working directory).
    machine: Option<Sandbox>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        if let Some(machine) = &self.machine {
            reap_agents(&machine.home, self.process.id());
        }
    }
}

impl Node {
    fn start(url: &str, name: &str, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env(STORE, url)
            .env(NAME, name)
            .stderr(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let (process, api) = spawn_child_server(command, "fleet_server", LISTENING);
        Self {
            process,
            api,
            name: name.to_string(),
            machine: None,
        }
    }

    /// A server on a machine of its own (a fresh bench sandbox: its own HOME, empty of the
    /// agent's files) running Claude Code on `model`'s `scenario` beside the scripted agent; its
    /// environment is the sandbox's alone.
    fn start_with_claude_code(url: &str, name: &str, model: &ModelServer, scenario: &str) -> Self {
        let machine = Sandbox::new(Cli::ClaudeCode, model, scenario).expect("a sandbox");
        let agent = ChildAgent::new("claude_code", name, &machine);
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env_clear()
            .envs(machine.env.iter().map(|(k, v)| (k, v)))
            .env(STORE, url)
            .env(NAME, name)
            .env(CLI, agent.to_json())
            .current_dir(&machine.home)
            .stderr(Stdio::null());
        let (process, api) = spawn_child_server(command, "fleet_server", LISTENING);
        Self {
            process,
            api,
            name: name.to_string(),
            machine: Some(machine),
        }
    }

    /// The agent processes running on its machine now.
    fn agents(&self) -> Vec<i32> {
        self.machine
            .as_ref()
            .map(|m| agents_on(&m.home, self.process.id()))
            .unwrap_or_default()
    }

    fn signal(&self, signal: i32) {
        unsafe { libc::kill(self.process.id() as i32, signal) };
    }

    /// Kills it with SIGKILL and waits for it to exit; its machine goes with it (the agents it
    /// left killed, its HOME deleted).
    fn kill(mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        self.take_machine_away();
        std::mem::forget(self);
    }

    fn take_machine_away(&mut self) {
        if let Some(machine) = self.machine.take() {
            reap_agents(&machine.home, self.process.id());
            remove_home(&machine.home);
        }
    }

    /// SIGTERM, then its exit status (within `wait`).
    async fn terminate(mut self, wait: Duration) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(status) = self.process.try_wait().unwrap() {
                // A clean stop stopped its agents.
                let left = self.agents();
                assert!(left.is_empty(), "{left:?} outlived a clean stop");
                self.take_machine_away();
                std::mem::forget(self);
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server did not stop in time"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A connection to the test database, for what no endpoint shows (the epochs).
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A database of the test's own on the same server (dropped when this is): servers of other
/// tests take no "any server" command of its own.
struct OwnDatabase {
    admin: String,
    name: String,
    url: String,
}

impl OwnDatabase {
    async fn new(url: &str) -> Self {
        let name = unique("agent_api_fleet").replace('-', "_");
        sql(url)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let (base, _) = url.rsplit_once('/').unwrap();
        Self {
            admin: url.to_string(),
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for OwnDatabase {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(async move {
                    let _ = sql(&admin)
                        .await
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                })
        })
        .join();
    }
}

/// Asserts that no event of `sessions` was written under a stale epoch: in each session, the
/// epochs never go down along the sequence (an owner's write needs the session's epoch now, and a
/// claim moves it on), and every event names one.
async fn assert_no_stale_write(url: &str, sessions: &[String]) {
    let client = sql(url).await;
    let rows = client
        .query(
            "SELECT session_id, sequence, epoch FROM events WHERE session_id = ANY($1) ORDER BY session_id, sequence",
            &[&sessions],
        )
        .await
        .unwrap();
    let mut last: HashMap<String, i64> = HashMap::new();
    for row in rows {
        let (session, sequence, epoch): (String, i64, Option<i64>) =
            (row.get(0), row.get(1), row.get(2));
        let epoch = epoch.unwrap_or_else(|| panic!("{session} event {sequence} names no epoch"));
        let before = last.insert(session.clone(), epoch).unwrap_or(0);
        assert!(
            epoch >= before,
            "{session}: event {sequence} written under epoch {epoch} after epoch {before}"
        );
    }
}

/// The completed status items labelled `label`.
fn statuses<'a>(events: &'a [Value], label: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .filter(|e| e["data"]["item"]["content"][0]["label"] == label)
        .collect()
}

fn interrupted(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "error" && e["data"]["code"] == "interrupted")
        .collect()
}

/// Asserts a session's log is whole: sequences 1..n with no gap or duplicate, each interrupted
/// turn closed by exactly one typed error after its `turn_failed`, and no end.
fn assert_whole(session: &str, events: &[Value]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event["sequence"].as_u64(),
            Some(i as u64 + 1),
            "{session}: gap or duplicate at {i}"
        );
    }
    let mut closed = std::collections::HashSet::new();
    for (i, error) in events.iter().enumerate() {
        if !(error["type"] == "error" && error["data"]["code"] == "interrupted") {
            continue;
        }
        let turn = error["data"]["details"]["turn"].as_u64().unwrap();
        assert!(
            closed.insert(turn),
            "{session}: turn {turn} interrupted twice"
        );
        assert!(
            i > 0 && turn_end(&events[i - 1]),
            "{session}: the interrupted error follows its turn_failed"
        );
    }
    assert!(
        !events.iter().any(|e| e["type"] == "session.ended"),
        "{session} ended, and no client terminated it"
    );
}

/// Waits until `api` says the session's state is `state`.
async fn wait_state(api: &Api, session: &str, state: &str) {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let info = api.get(&format!("/v1/sessions/{session}")).await.json();
        if info["state"] == state {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{session} never {state}: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the session's log holds an event after `after` that `found` accepts.
async fn wait_event(
    api: &Api,
    session: &str,
    after: usize,
    found: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let events = api.all_events(session, 1000).await;
        if events.iter().skip(after).any(&found) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{session}: not found after {after}: {:#?}",
            &events[after.min(events.len())..]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn permission_session() -> Value {
    json!({"agent": "scripted", "permissionMode": "ask", "options": {"backend.scripted.scenario": "permission", "backend.scripted.delay_ms": 0}})
}

fn slow_session(delay_ms: u64) -> Value {
    json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow", "backend.scripted.delay_ms": delay_ms}})
}

#[tokio::test]
async fn the_database_refuses_an_append_under_a_stale_epoch_or_a_lapsed_lease() {
    let Some(url) = database() else { return };
    let store = StoreUrl::parse(&url).unwrap().open().await.unwrap();
    let (a, b, c) = (unique("srv-a"), unique("srv-b"), unique("srv-c"));
    for server in [&a, &b, &c] {
        store.heartbeat(server).await.unwrap();
    }
    let id = unique("fenced");
    store.create_session(record(&id, Some(&a))).await.unwrap();
    let lease = Duration::from_secs(30);
    let append = |owner: &str, epoch: u64, lease: Duration, sequence: u64| {
        let (store, id, owner) = (store.clone(), id.clone(), owner.to_string());
        async move {
            let event: StoredEvent = event(sequence);
            store
                .append_fenced(&id, &owner, epoch, lease, vec![event])
                .await
        }
    };
    append(&a, 0, lease, 1).await.unwrap();
    // Another server cannot take a session whose running owner holds its agent.
    assert!(matches!(
        store.claim_lease(&id, &b, Some(&a), lease).await,
        Err(StoreError::NotOwner { .. })
    ));
    // Released, it can: the epoch moves on, and the last owner's writes are refused.
    store
        .update(&id, &a, SessionUpdate::default().state(SessionState::Idle))
        .await
        .unwrap();
    assert_eq!(
        store.claim_lease(&id, &b, Some(&a), lease).await.unwrap(),
        1
    );
    assert!(matches!(
        append(&a, 0, lease, 2).await,
        Err(StoreError::NotOwner { .. })
    ));
    append(&b, 1, lease, 2).await.unwrap();
    // A writer that names an old epoch is refused even under the right owner's name.
    assert!(matches!(
        append(&b, 0, lease, 3).await,
        Err(StoreError::NotOwner { .. })
    ));
    // A lapsed lease: the owner's writes are refused before anyone claims, and a claim from it
    // succeeds although it is live.
    let short = Duration::from_millis(200);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(matches!(
        append(&b, 1, short, 3).await,
        Err(StoreError::LeaseLost { .. })
    ));
    store.heartbeat(&c).await.unwrap();
    assert_eq!(
        store.claim_lease(&id, &c, Some(&b), short).await.unwrap(),
        2
    );
    append(&c, 2, short, 3).await.unwrap();
    assert_eq!(store.events(&id, 0, 10).await.unwrap().len(), 3);
    assert_no_stale_write(&url, &[id]).await;
}

#[tokio::test]
async fn any_server_answers_for_a_session_and_a_killed_owners_session_goes_on_elsewhere() {
    let Some(url) = database() else { return };
    let names = [unique("a"), unique("b"), unique("c")];
    let a = Node::start(&url, &names[0], &[]);
    let (b, c) = (
        Node::start(&url, &names[1], &[]),
        Node::start(&url, &names[2], &[]),
    );
    let id = unique("anywhere");
    assert_eq!(
        a.api
            .post(&format!("/v1/sessions/{id}"), permission_session())
            .await
            .status,
        200
    );
    // Followed through the third server from the start.
    let mut follower = c
        .api
        .try_sse(&format!("/v1/sessions/{id}/events/sse"), &[])
        .await
        .unwrap();
    // The message goes through the second server, the reply through the third: both run on the
    // first, which owns the session.
    for (turn, via) in [(1, &b), (2, &c)] {
        let before = a.api.all_events(&id, 1000).await.len();
        assert_eq!(
            via.api
                .post(
                    &format!("/v1/sessions/{id}/messages"),
                    json!({"message": format!("turn {turn}")})
                )
                .await
                .status,
            204
        );
        let events = wait_event(&c.api, &id, before, |e| e["type"] == "permission.requested").await;
        let permission = events
            .iter()
            .skip(before)
            .find(|e| e["type"] == "permission.requested")
            .unwrap()["data"]["permission_id"]
            .as_str()
            .unwrap()
            .to_string();
        if turn == 2 {
            // The owner dies while the permission waits; the reply sent now finds the session
            // owned by a server that is gone.
            a.kill();
            let reply = b
                .api
                .post(
                    &format!("/v1/sessions/{id}/permissions/{permission}/reply"),
                    json!({"reply": "once"}),
                )
                .await;
            assert_eq!(
                reply.problem(409)["type"],
                "urn:agent-api:error:turn_interrupted",
                "a reply to a turn whose server died is refused, typed"
            );
            break;
        }
        let reply = c
            .api
            .post(
                &format!("/v1/sessions/{id}/permissions/{permission}/reply"),
                json!({"reply": "once"}),
            )
            .await;
        assert_eq!(reply.status, 204, "{:?}", reply.body);
        wait_event(&b.api, &id, before, turn_end).await;
        let info = b.api.get(&format!("/v1/sessions/{id}")).await.json();
        assert!(info["owner"].as_str().unwrap().starts_with(&names[0]));
    }
    // The reply waited for the dead owner until its lease ran out, then the server it was sent
    // to brought the session back (closing turn 2) and answered it: the next message, to that
    // server, goes on there.
    let before = b.api.all_events(&id, 1000).await.len();
    assert_eq!(
        b.api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": "turn 3"})
            )
            .await
            .status,
        204
    );
    let events = wait_event(&c.api, &id, before, |e| e["type"] == "permission.requested").await;
    assert_eq!(statuses(&events, "session_resumed").len(), 1);
    assert_eq!(
        interrupted(&events).len(),
        1,
        "one typed error closes turn 2"
    );
    let info = c.api.get(&format!("/v1/sessions/{id}")).await.json();
    assert!(
        info["owner"].as_str().unwrap().starts_with(&names[1]),
        "{info}"
    );
    let permission = events
        .iter()
        .skip(before)
        .find(|e| e["type"] == "permission.requested")
        .unwrap()["data"]["permission_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Answered through the third server, handed to the new owner.
    assert_eq!(
        c.api
            .post(
                &format!("/v1/sessions/{id}/permissions/{permission}/reply"),
                json!({"reply": "once"}),
            )
            .await
            .status,
        204
    );
    let events = wait_event(&c.api, &id, before, turn_end).await;
    assert_whole(&id, &events);
    // The follower on the third server saw every event, in order, as stored.
    let mut seen = Vec::new();
    while seen.len() < events.len() {
        let frame = follower
            .next_or_cut(STEP)
            .await
            .expect("the follower gets every event");
        seen.push(frame);
    }
    for frame in &seen {
        let sequence = frame.id.unwrap() as usize;
        assert_eq!(frame.data, events[sequence - 1]);
    }
    assert_no_stale_write(&url, &[id]).await;
    drop((b, c));
}

/// Frames of a stream until the server closes it.
async fn stream_rest(stream: &mut Sse) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(frame) = stream.next_or_cut(STEP).await {
        frames.push(frame);
    }
    frames
}

/// Asserts `frames` are the stored events `first..` of the session, in order.
fn as_stored(frames: &[Frame], stored: &[Value], first: u64) {
    for (i, frame) in frames.iter().enumerate() {
        assert_eq!(frame.id, Some(first + i as u64), "{frames:#?}");
        assert_eq!(frame.data, stored[(first as usize) + i - 1]);
    }
}

#[tokio::test]
async fn a_message_streamed_through_a_server_that_does_not_run_the_session_streams_its_turn() {
    let Some(url) = database() else { return };
    let a = Node::start(&url, &unique("owner"), &[]);
    let b = Node::start(&url, &unique("door"), &[]);
    let stream = |api: &Api, id: &str, message: &str| {
        let (api, path, body) = (
            api.clone(),
            format!("/v1/sessions/{id}/messages/stream"),
            json!({ "message": message }),
        );
        async move { api.sse(Method::POST, &path, Some(body), &[]).await }
    };
    // A permission turn: the stream through the other server closes at the request, as the
    // owner's own does; the reply goes through it too, and the turn ends.
    let asks = unique("asks");
    assert_eq!(
        a.api
            .post(&format!("/v1/sessions/{asks}"), permission_session())
            .await
            .status,
        200
    );
    let frames = stream_rest(&mut stream(&b.api, &asks, "turn 1").await).await;
    let last = &frames.last().expect("the turn's events").data;
    assert_eq!(last["type"], "permission.requested", "{frames:#?}");
    let stored = b.api.all_events(&asks, 1000).await;
    let first = frames[0].id.unwrap();
    as_stored(&frames, &stored, first);
    let opening = &frames[0].data["data"]["item"]["content"][0];
    assert_eq!(
        (&opening["label"], &opening["detail"]),
        (&json!("turn_started"), &json!("turn 1")),
        "the stream starts at the turn's start: {frames:#?}"
    );
    let permission = last["data"]["permission_id"].as_str().unwrap();
    assert_eq!(
        b.api
            .post(
                &format!("/v1/sessions/{asks}/permissions/{permission}/reply"),
                json!({"reply": "once"})
            )
            .await
            .status,
        204
    );
    wait_event(&b.api, &asks, 0, turn_end).await;
    let info = b.api.get(&format!("/v1/sessions/{asks}")).await.json();
    assert!(
        info["owner"].as_str().unwrap().starts_with(&a.name),
        "{info}"
    );

    // A message queued behind a running turn: its stream through the other server carries its
    // own turn, from its start to its end, and nothing of the turn before it.
    let queued = unique("queued");
    assert_eq!(
        a.api
            .post(&format!("/v1/sessions/{queued}"), slow_session(40))
            .await
            .status,
        200
    );
    assert_eq!(
        a.api
            .post(
                &format!("/v1/sessions/{queued}/messages"),
                json!({"message": "first"})
            )
            .await
            .status,
        204
    );
    let frames = stream_rest(&mut stream(&b.api, &queued, "second").await).await;
    let stored = b.api.all_events(&queued, 1000).await;
    let first = frames.first().expect("the turn's events").id.unwrap();
    as_stored(&frames, &stored, first);
    let delimiters: Vec<(&Value, &Value)> = frames
        .iter()
        .filter(|f| f.data["type"] == "item.completed")
        .map(|f| &f.data["data"]["item"]["content"][0])
        .filter(|s| s["detail"].as_str().is_some_and(|d| d.starts_with("turn ")))
        .map(|s| (&s["label"], &s["detail"]))
        .collect();
    assert_eq!(
        delimiters,
        [
            (&json!("turn_started"), &json!("turn 2")),
            (&json!("turn_completed"), &json!("turn 2"))
        ],
        "{frames:#?}"
    );
    assert!(turn_end(&frames.last().unwrap().data));
    assert_eq!(statuses(&stored, "turn_completed").len(), 2);

    // The owner killed while the turn streams through the other server: that stream ends (as the
    // owner's own would be cut) once no server runs the session, instead of waiting for ever; the
    // next message brings the session back there and closes the interrupted turn, typed.
    let dies = unique("dies");
    assert_eq!(
        a.api
            .post(&format!("/v1/sessions/{dies}"), slow_session(200))
            .await
            .status,
        200
    );
    let mut streamed = stream(&b.api, &dies, "a slow turn").await;
    let mut frames = vec![streamed.next().await.expect("the turn starts")];
    a.kill();
    while let Some(frame) = streamed.next_within(Duration::from_secs(60)).await {
        frames.push(frame);
    }
    assert!(
        !frames.iter().any(|f| turn_end(&f.data)),
        "the turn did not end: {frames:#?}"
    );
    let before = b.api.all_events(&dies, 1000).await.len();
    assert_eq!(
        b.api
            .post(
                &format!("/v1/sessions/{dies}/messages"),
                json!({"message": "again"})
            )
            .await
            .status,
        204
    );
    let events = wait_event(&b.api, &dies, before, |e| {
        e["type"] == "error" && e["data"]["code"] == "interrupted"
    })
    .await;
    assert_eq!(statuses(&events, "session_resumed").len(), 1);
    assert_eq!(
        interrupted(&events).len(),
        1,
        "one typed error closes turn 1"
    );
    drop(b);
}

#[tokio::test]
async fn a_paused_owner_that_wakes_after_its_session_was_taken_writes_nothing() {
    let Some(url) = database() else { return };
    let a = Node::start(&url, &unique("paused"), &[]);
    let b = Node::start(&url, &unique("taker"), &[]);
    let id = unique("paused");
    assert_eq!(
        a.api
            .post(&format!("/v1/sessions/{id}"), slow_session(100))
            .await
            .status,
        200
    );
    assert_eq!(
        b.api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": "slowly"})
            )
            .await
            .status,
        204
    );
    wait_event(&b.api, &id, 0, |e| e["type"] == "item.delta").await;
    a.signal(libc::SIGSTOP);
    // Past its lease, the other server takes the session.
    wait_state(&b.api, &id, "resumable").await;
    let resumed = b.api.post_empty(&format!("/v1/sessions/{id}/resume")).await;
    assert_eq!(resumed.status, 200, "{:?}", resumed.body);
    let taken = b.api.all_events(&id, 1000).await;
    a.signal(libc::SIGCONT);
    // Woken, the first server tries to write its turn's next words: refused by the database, it
    // stops its agent. Nothing of it is in the log, and its own answers say it runs nothing.
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let info = a.api.get(&format!("/v1/sessions/{id}")).await.json();
        if info["live"] == false {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the woken server still runs it: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = b.api.all_events(&id, 1000).await;
    assert_eq!(after, taken, "nothing was written after the takeover");
    assert_whole(&id, &after);
    assert_eq!(interrupted(&after).len(), 1);
    assert_no_stale_write(&url, std::slice::from_ref(&id)).await;
    // The session goes on, through either server.
    assert_eq!(
        a.api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": "again"})
            )
            .await
            .status,
        204
    );
    wait_event(&b.api, &id, after.len(), turn_end).await;
    let info = a.api.get(&format!("/v1/sessions/{id}")).await.json();
    assert!(
        info["owner"].as_str().unwrap().starts_with(&b.name),
        "{info}"
    );
}

#[tokio::test]
async fn a_new_session_goes_to_a_server_with_room_or_gets_503_when_the_fleet_is_full() {
    let Some(url) = database() else { return };
    let own = OwnDatabase::new(&url).await;
    let url = own.url.clone();
    let door = Node::start(&url, &unique("door"), &[(AGENTS, "0")]);
    let worker = Node::start(&url, &unique("worker"), &[(MAX, "1")]);
    let first = unique("placed");
    let created = door
        .api
        .post(&format!("/v1/sessions/{first}"), scripted("text"))
        .await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    let info = door.api.get(&format!("/v1/sessions/{first}")).await.json();
    assert!(
        info["owner"].as_str().unwrap().starts_with(&worker.name),
        "the front door runs no agent: {info}"
    );
    // The worker is full: the whole fleet is.
    let second = unique("refused");
    for api in [&door.api, &worker.api] {
        let full = api
            .post(&format!("/v1/sessions/{second}"), scripted("text"))
            .await;
        assert_eq!(full.problem(503)["type"], "urn:agent-api:error:fleet_full");
        assert!(full.headers.contains_key("retry-after"));
    }
    // A message through the front door runs on the worker.
    assert_eq!(
        door.api
            .post(
                &format!("/v1/sessions/{first}/messages"),
                json!({"message": "hi"})
            )
            .await
            .status,
        204
    );
    wait_event(&door.api, &first, 0, turn_end).await;
    assert_eq!(
        door.api
            .post_empty(&format!("/v1/sessions/{first}/terminate"))
            .await
            .status,
        204
    );
    assert_eq!(
        door.api
            .post(&format!("/v1/sessions/{second}"), scripted("text"))
            .await
            .status,
        200,
        "room again"
    );
    drop((door, worker));
    drop(own);
}

#[tokio::test]
async fn sigterm_lets_running_turns_finish_releases_idle_sessions_and_exits_0() {
    let Some(url) = database() else { return };
    let a = Node::start(&url, &unique("drained"), &[]);
    let b = Node::start(&url, &unique("stays"), &[]);
    let (busy, idle) = (unique("busy"), unique("idle"));
    for (id, body) in [(&busy, slow_session(40)), (&idle, scripted("text"))] {
        assert_eq!(
            a.api.post(&format!("/v1/sessions/{id}"), body).await.status,
            200
        );
    }
    assert_eq!(
        a.api
            .post(
                &format!("/v1/sessions/{busy}/messages"),
                json!({"message": "finish me"})
            )
            .await
            .status,
        204
    );
    wait_event(&b.api, &busy, 0, |e| e["type"] == "item.delta").await;
    let api = a.api.clone();
    a.signal(libc::SIGTERM);
    // Not ready while it drains (once it has taken the signal, which a loaded machine may
    // deliver after the next request); a new session asked of it goes to the other server.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while api.get("/v1/health/ready").await.status != 503 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready 5 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let moved = unique("moved");
    assert_eq!(
        api.post(&format!("/v1/sessions/{moved}"), scripted("text"))
            .await
            .status,
        200
    );
    let info = b.api.get(&format!("/v1/sessions/{moved}")).await.json();
    assert!(
        info["owner"].as_str().unwrap().starts_with(&b.name),
        "{info}"
    );
    let status = a.terminate(Duration::from_secs(60)).await;
    assert_eq!(status.code(), Some(0));
    let events = b.api.all_events(&busy, 1000).await;
    assert_eq!(
        statuses(&events, "turn_completed").len(),
        1,
        "the turn finished"
    );
    assert!(interrupted(&events).is_empty());
    assert_whole(&busy, &events);
    // Both sessions go on on the server still up.
    for id in [&busy, &idle] {
        let before = b.api.all_events(id, 1000).await.len();
        assert_eq!(
            b.api
                .post(
                    &format!("/v1/sessions/{id}/messages"),
                    json!({"message": "on"})
                )
                .await
                .status,
            204
        );
        let events = wait_event(&b.api, id, before, turn_end).await;
        assert_whole(id, &events);
        assert!(
            statuses(&events, "session_resumed")[0]["data"]["item"]["content"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("after=server_stopped")
        );
    }
}

/// What the chaos test's clients were served, by session: each event's JSON by sequence.
type Received = Arc<Mutex<HashMap<String, BTreeMap<u64, Value>>>>;

/// The servers up now, for the clients to pick from.
type Up = Arc<Mutex<Vec<Api>>>;

fn pick(up: &Up) -> Api {
    let up = up.lock().unwrap();
    let mut byte = [0u8; 1];
    getrandom::fill(&mut byte).unwrap();
    up[byte[0] as usize % up.len()].clone()
}

/// Sends `body` to `path` on random servers until one answers something other than 503, a
/// server error or no answer (a server killed or paused), within `deadline`.
async fn send_anywhere(
    up: &Up,
    path: &str,
    body: Option<Value>,
    deadline: tokio::time::Instant,
) -> Answer {
    send_noting(up, path, body, deadline, &mut Vec::new()).await
}

/// [`send_anywhere`], noting in `trail` every answer each try got (which server, when, status,
/// the problem's type): what a client was told is what a failure must show.
async fn send_noting(
    up: &Up,
    path: &str,
    body: Option<Value>,
    deadline: tokio::time::Instant,
    trail: &mut Vec<String>,
) -> Answer {
    let what = path.rsplit('/').next().unwrap_or(path).to_string();
    loop {
        let api = pick(up);
        let answer = api
            .try_call(
                Method::POST,
                path,
                body.clone(),
                &[],
                Duration::from_secs(5),
            )
            .await;
        trail.push(format!(
            "{} {what} to {}: {}",
            clock(),
            api.base,
            match &answer {
                Ok(answer) => format!("{} {}", answer.status, problem_type(answer)),
                Err(error) => format!("no answer ({error})"),
            }
        ));
        match answer {
            Ok(answer) if !answer.status.is_server_error() => return answer,
            _ if tokio::time::Instant::now() > deadline => panic!("{path}: no server answered"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The time of day (UTC, to the millisecond), to set a client's trail beside the servers' logs.
fn clock() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let secs = now.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        now.subsec_millis()
    )
}

/// The problem type (and detail) of an error answer; nothing for a success.
fn problem_type(answer: &Answer) -> String {
    if answer.status.is_success() {
        return String::new();
    }
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    format!("{} ({})", body["type"], body["detail"])
}

/// Reads a session's events from random servers (none that cannot answer).
async fn events_anywhere(up: &Up, id: &str) -> Vec<Value> {
    loop {
        let api = pick(up);
        let answer = api
            .try_call(
                Method::GET,
                &format!("/v1/sessions/{id}/events?limit=1000"),
                None,
                &[],
                Duration::from_secs(3),
            )
            .await;
        if let Some(answer) = answer.ok().filter(|a| a.status == 200) {
            let page = answer.json();
            if page["hasMore"] == false {
                return page["events"].as_array().unwrap().clone();
            }
            return api.all_events(id, 1000).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One client of the chaos test: turns on session `id` until `over` (at least `turns`), each
/// message and reply sent to a random server, a stalled turn nudged with `resume` (its server may
/// be gone). Returns how many turns it sent.
async fn client(
    up: Up,
    id: String,
    turns: usize,
    over: agent_api::request::CancellationToken,
) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(100);
    let created = send_anywhere(
        &up,
        &format!("/v1/sessions/{id}"),
        Some(permission_session()),
        deadline,
    )
    .await;
    assert!(
        created.status == 200 || created.status == 409,
        "{id}: {:?}",
        created.body
    );
    let mut turn = 0;
    while turn < turns || !over.is_cancelled() {
        turn += 1;
        let before = events_anywhere(&up, &id).await.len();
        // Every answer the turn's requests got, shown when the turn never ends.
        let mut trail = Vec::new();
        let sent = send_noting(
            &up,
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"message": format!("turn {turn}")})),
            deadline,
            &mut trail,
        )
        .await;
        // 204 whatever the chaos: a message sent while a turn runs (a try whose answer was lost
        // sent it twice) waits in the queue; a 409 would read as final, and no session ends.
        assert_eq!(
            sent.status,
            204,
            "{id}: turn {turn}'s message:\n{}",
            trail.join("\n")
        );
        let mut replied = std::collections::HashSet::new();
        let mut still = tokio::time::Instant::now();
        let mut seen = before;
        loop {
            let events = events_anywhere(&up, &id).await;
            if tokio::time::Instant::now() > deadline {
                let info = pick(&up).get(&format!("/v1/sessions/{id}")).await.json();
                let tail: Vec<String> = events
                    .iter()
                    .skip(before.saturating_sub(3))
                    .map(|e| {
                        format!(
                            "{} {} {}",
                            e["sequence"], e["type"], e["data"]["item"]["content"][0]
                        )
                    })
                    .collect();
                panic!(
                    "{id}: turn {turn} never ended: {info}\n{}\nwhat its requests were answered:\n{}",
                    tail.join("\n"),
                    trail.join("\n")
                );
            }
            if events.iter().skip(before).any(turn_end) {
                break;
            }
            if events.len() > seen {
                seen = events.len();
                still = tokio::time::Instant::now();
            }
            for asked in events.iter().skip(before) {
                if asked["type"] != "permission.requested" {
                    continue;
                }
                let permission = asked["data"]["permission_id"].as_str().unwrap().to_string();
                if replied.contains(&permission) {
                    continue;
                }
                let reply = send_noting(
                    &up,
                    &format!("/v1/sessions/{id}/permissions/{permission}/reply"),
                    Some(json!({"reply": "once"})),
                    deadline,
                    &mut trail,
                )
                .await;
                // 204, or typed: its turn was interrupted.
                assert!(
                    reply.status.is_success() || reply.status.is_client_error(),
                    "{id}: {reply:?}"
                );
                replied.insert(permission);
            }
            if still.elapsed() > Duration::from_secs(3) {
                // Nothing moves: its server may be gone; bringing it back closes its turn.
                let resume = format!("/v1/sessions/{id}/resume");
                let _ = send_noting(&up, &resume, None, deadline, &mut trail).await;
                still = tokio::time::Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    turn
}

/// Follows session `id` over SSE through random servers, reconnecting with `Last-Event-ID` when
/// a stream breaks, until `done`.
async fn follow(
    up: Up,
    id: String,
    received: Received,
    done: agent_api::request::CancellationToken,
) {
    let mut last = 0u64;
    while !done.is_cancelled() {
        let api = pick(&up);
        let header = last.to_string();
        let Some(mut stream) = api
            .try_sse(
                &format!("/v1/sessions/{id}/events/sse"),
                &[("last-event-id", header.as_str())],
            )
            .await
        else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        loop {
            let frame = tokio::select! {
                frame = stream.next_or_cut(Duration::from_secs(3)) => frame,
                () = done.cancelled() => return,
            };
            let Some(frame) = frame else { break };
            let Some(sequence) = frame.id else { continue };
            assert_eq!(
                sequence,
                last + 1,
                "{id}: the stream skipped or repeated an event"
            );
            last = sequence;
            received
                .lock()
                .unwrap()
                .entry(id.clone())
                .or_default()
                .insert(sequence, frame.data);
        }
    }
}

#[tokio::test]
async fn chaos_three_servers_thirty_sessions_kills_pauses_and_restarts_lose_nothing() {
    let Some(url) = database() else { return };
    let own = OwnDatabase::new(&url).await;
    let url = own.url.clone();
    let names: Vec<String> = (0..3).map(|i| unique(&format!("chaos{i}"))).collect();
    let mut nodes: Vec<Option<Node>> = names
        .iter()
        .map(|name| Some(Node::start(&url, name, &[])))
        .collect();
    // Which server is where, and what was done to it when: a client's trail names addresses.
    for node in nodes.iter().flatten() {
        eprintln!(
            "{} chaos: {} listens at {}",
            clock(),
            node.name,
            node.api.base
        );
    }
    let up: Up = Arc::new(Mutex::new(
        nodes.iter().flatten().map(|n| n.api.clone()).collect(),
    ));
    let received: Received = Arc::default();
    let done = agent_api::request::CancellationToken::new();
    let chaos_over = agent_api::request::CancellationToken::new();
    let ids: Vec<String> = (0..30).map(|i| unique(&format!("chaos-{i}"))).collect();
    let mut clients = Vec::new();
    let mut followers = Vec::new();
    for id in &ids {
        clients.push(tokio::spawn(client(
            up.clone(),
            id.clone(),
            3,
            chaos_over.clone(),
        )));
        followers.push(tokio::spawn(follow(
            up.clone(),
            id.clone(),
            received.clone(),
            done.clone(),
        )));
    }
    // The chaos, while the clients run: each server in turn is killed and started again, paused
    // past its lease and woken, and stopped with SIGTERM and started again.
    let mut restarts = 0;
    for round in 0..6 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let index = round % 3;
        let node = nodes[index].take().unwrap();
        let others: Vec<Api> = nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != index)
            .filter_map(|(_, n)| n.as_ref().map(|n| n.api.clone()))
            .collect();
        *up.lock().unwrap() = others;
        let what = ["killed", "paused", "stopped"][if round < 3 { round % 2 } else { 2 }];
        eprintln!("{} chaos: {} {what}", clock(), node.name);
        match round / 3 {
            0 if round % 2 == 0 => node.kill(),
            0 => {
                node.signal(libc::SIGSTOP);
                tokio::time::sleep(LEASE * 2).await;
                node.signal(libc::SIGCONT);
                nodes[index] = Some(node);
                *up.lock().unwrap() = nodes.iter().flatten().map(|n| n.api.clone()).collect();
                continue;
            }
            _ => {
                let status = node.terminate(Duration::from_secs(40)).await;
                assert_eq!(status.code(), Some(0), "a drained server exits 0");
            }
        }
        restarts += 1;
        let again = Node::start(&url, &names[index], &[]);
        eprintln!(
            "{} chaos: {} listens again at {}",
            clock(),
            again.name,
            again.api.base
        );
        nodes[index] = Some(again);
        *up.lock().unwrap() = nodes.iter().flatten().map(|n| n.api.clone()).collect();
    }
    assert!(restarts >= 4);
    chaos_over.cancel();
    let mut turns = 0;
    for client in clients {
        turns += client.await.unwrap();
    }
    // The followers catch up, then stop.
    let settle = tokio::time::Instant::now() + STEP;
    loop {
        let mut behind = 0;
        for id in &ids {
            let stored = events_anywhere(&up, id).await.len();
            let got = received
                .lock()
                .unwrap()
                .get(id)
                .map_or(0, |events| events.len());
            behind += stored.saturating_sub(got);
        }
        if behind == 0 || tokio::time::Instant::now() > settle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    done.cancel();
    for follower in followers {
        follower.await.unwrap();
    }
    let received = received.lock().unwrap().clone();
    for id in &ids {
        let events = events_anywhere(&up, id).await;
        assert_whole(id, &events);
        assert!(
            events.iter().filter(|e| turn_end(e)).count() >= 3,
            "{id}: every turn ended"
        );
        let got = received.get(id).cloned().unwrap_or_default();
        assert_eq!(
            got.len(),
            events.len(),
            "{id}: the follower got every event"
        );
        for (sequence, data) in got {
            assert_eq!(data, events[sequence as usize - 1], "{id}: as stored");
        }
    }
    // The chaos did reach the sessions: some were taken over, some turns interrupted.
    let (mut resumed, mut cut) = (0, 0);
    for id in &ids {
        let events = events_anywhere(&up, id).await;
        resumed += statuses(&events, "session_resumed").len();
        cut += interrupted(&events).len();
    }
    eprintln!("chaos: {turns} turns, {resumed} sessions brought back, {cut} turns interrupted");
    assert!(resumed > 0, "no session was taken over");
    assert_no_stale_write(&url, &ids).await;
    drop(nodes);
    drop(own);
}

/// How long one step of a real agent may take (its process starting on a loaded machine included).
const AGENT_STEP: Duration = Duration::from_secs(180);

/// `call` to a random server up, again while the answer is 503 (the session's owner is gone and
/// its lease still runs) or no answer comes (a server going away), within [`AGENT_STEP`].
async fn real_call(up: &Up, path: &str, body: Option<Value>) -> Answer {
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    loop {
        let answer = pick(up)
            .try_call(Method::POST, path, body.clone(), &[], AGENT_STEP)
            .await;
        match answer {
            Ok(answer) if answer.status != 503 => return answer,
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "{path}: no server took it: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the session's log, read from random servers, satisfies `done`: its events.
async fn real_wait(up: &Up, id: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    loop {
        let events = events_anywhere(up, id).await;
        if done(&events) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id}: no {what}: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the snapshot of the session at `session` (its path) after turn `turn` is kept.
async fn snapshot_kept(up: &Up, session: &str, turn: u64) {
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    loop {
        let info = pick(up).get(session).await.json();
        if info["snapshotTurn"].as_u64() >= Some(turn) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no snapshot after turn {turn}: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Which of `names` owns session `id` now (asked of a random server).
async fn owner_of(up: &Up, names: &[String], id: &str) -> usize {
    let info = pick(up).get(&format!("/v1/sessions/{id}")).await.json();
    let owner = info["owner"].as_str().unwrap_or_default();
    names
        .iter()
        .position(|name| owner.starts_with(name.as_str()))
        .unwrap_or_else(|| panic!("{id} is owned by none of the servers: {info}"))
}

/// Issue 48's done-when on a real CLI: three servers on one PostgreSQL, each on a machine of its
/// own (a fresh HOME), Claude Code on the bench's `ask_echo` scenario (a shell call that writes a
/// file, which Claude Code asks permission for; then the model says how many user turns it saw;
/// every later turn only says it), every request sent to a random server. The
/// permission is answered through a server that does not own the session and the session is
/// followed over SSE through the third; the owner is killed with SIGKILL and the next message,
/// to any server, resumes the session natively (two user turns seen); the next owner, paused
/// past its lease while it runs a scripted turn, wakes after the takeover and writes nothing; a
/// rolling restart of all three (SIGTERM, start again, one at a time) under the load of scripted
/// clients ends no session, and the Claude Code session goes on after it. About a minute and a
/// half: four Claude Code turns, three of them on a server that brings the session back.
#[tokio::test(flavor = "multi_thread")]
async fn e2e_a_claude_code_session_in_a_fleet_outlives_a_killed_a_paused_and_restarted_owners() {
    let Some(url) = database() else { return };
    let Some((model, _unused)) =
        agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, "ask_echo").await
    else {
        return;
    };
    let own = OwnDatabase::new(&url).await;
    let url = own.url.clone();
    let names: Vec<String> = (0..3).map(|i| unique(&format!("machine{i}"))).collect();
    let start = |i: usize| Node::start_with_claude_code(&url, &names[i], &model, "ask_echo");
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(start(i))).collect();
    let all_up = |nodes: &[Option<Node>]| -> Vec<Api> {
        nodes.iter().flatten().map(|n| n.api.clone()).collect()
    };
    let up: Up = Arc::new(Mutex::new(all_up(&nodes)));
    let node = |nodes: &[Option<Node>], i: usize| nodes[i].as_ref().unwrap().api.clone();

    // Created through a random server; followed through one that does not own it, its
    // permission answered through the other.
    let ada = unique("ada");
    let session = format!("/v1/sessions/{ada}");
    let created = real_call(
        &up,
        &session,
        Some(json!({"agent": "claude_code", "permissionMode": "ask"})),
    )
    .await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    let owner = owner_of(&up, &names, &ada).await;
    let (follower_at, replier) = ((owner + 1) % 3, (owner + 2) % 3);
    let mut follower = node(&nodes, follower_at)
        .try_sse(&format!("{session}/events/sse"), &[])
        .await
        .expect("the third server follows the session");
    let sent = real_call(
        &up,
        &format!("{session}/messages"),
        Some(json!({"message": "My name is Ada."})),
    )
    .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let asked = real_wait(&up, &ada, "permission request", |events| {
        events.iter().any(|e| e["type"] == "permission.requested")
    })
    .await;
    let permission = asked
        .iter()
        .find(|e| e["type"] == "permission.requested")
        .unwrap()["data"]["permission_id"]
        .as_str()
        .unwrap()
        .to_string();
    let replied = node(&nodes, replier)
        .post(
            &format!("{session}/permissions/{permission}/reply"),
            json!({"reply": "once"}),
        )
        .await;
    assert_eq!(replied.status, 204, "{:?}", replied.body);
    let served = real_wait(&up, &ada, "first turn's end", |events| {
        events.iter().filter(|e| turn_end(e)).count() >= 1
    })
    .await;
    assert!(last_answer(&served).contains("user_turns=1"), "{served:#?}");
    assert_eq!(
        statuses(&served, "turn_completed").len(),
        1,
        "the approved command ran: {served:#?}"
    );
    snapshot_kept(&up, &session, 1).await;

    // The owner is killed (its machine goes with it): the next message, to any server, brings
    // the session back natively on another, which sees both user turns.
    nodes[owner].take().unwrap().kill();
    *up.lock().unwrap() = all_up(&nodes);
    let sent = real_call(
        &up,
        &format!("{session}/messages"),
        Some(json!({"message": "What is my name?"})),
    )
    .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let events = real_wait(&up, &ada, "second turn's end", |events| {
        events.iter().filter(|e| turn_end(e)).count() >= 2
    })
    .await;
    assert_eq!(events[..served.len()], served[..], "nothing served changed");
    let seams = statuses(&events, "session_resumed");
    let seam = seams[0]["data"]["item"]["content"][0]["detail"]
        .as_str()
        .unwrap();
    assert!(
        seams.len() == 1 && seam.contains("how=native") && seam.contains("after=server_died"),
        "{seam}"
    );
    assert!(
        last_answer(&events).contains("user_turns=2"),
        "the agent saw both turns: {}",
        last_answer(&events)
    );
    // The follower on the third server got every event, as stored.
    for (i, stored) in events.iter().enumerate() {
        let frame = follower
            .next_or_cut(AGENT_STEP)
            .await
            .expect("the follower gets every event");
        assert_eq!(frame.id, Some(i as u64 + 1));
        assert_eq!(&frame.data, stored);
    }
    nodes[owner] = Some(start(owner));
    *up.lock().unwrap() = all_up(&nodes);

    // The new owner runs a scripted turn too; paused past its lease, both its sessions are
    // taken, and woken it writes nothing and stops its agent.
    snapshot_kept(&up, &session, 2).await;
    let paused = owner_of(&up, &names, &ada).await;
    let slow = unique("slow");
    let on_paused = node(&nodes, paused);
    assert_eq!(
        on_paused
            .post(&format!("/v1/sessions/{slow}"), slow_session(100))
            .await
            .status,
        200
    );
    assert_eq!(
        on_paused
            .post(
                &format!("/v1/sessions/{slow}/messages"),
                json!({"message": "slowly"})
            )
            .await
            .status,
        204
    );
    wait_event(&on_paused, &slow, 0, |e| e["type"] == "item.delta").await;
    assert!(
        !nodes[paused].as_ref().unwrap().agents().is_empty(),
        "its Claude Code runs"
    );
    nodes[paused].as_ref().unwrap().signal(libc::SIGSTOP);
    let others: Vec<Api> = (0..3)
        .filter(|i| *i != paused)
        .map(|i| node(&nodes, i))
        .collect();
    *up.lock().unwrap() = others.clone();
    wait_state(&others[0], &ada, "resumable").await;
    let resumed = others[1]
        .post_empty(&format!("/v1/sessions/{slow}/resume"))
        .await;
    assert_eq!(resumed.status, 200, "{:?}", resumed.body);
    let sent = real_call(
        &up,
        &format!("{session}/messages"),
        Some(json!({"message": "And now?"})),
    )
    .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let events = real_wait(&up, &ada, "third turn's end", |events| {
        events.iter().filter(|e| turn_end(e)).count() >= 3
    })
    .await;
    assert!(
        last_answer(&events).contains("user_turns=3"),
        "{}",
        last_answer(&events)
    );
    let taken = events_anywhere(&up, &slow).await;
    nodes[paused].as_ref().unwrap().signal(libc::SIGCONT);
    let deadline = tokio::time::Instant::now() + AGENT_STEP;
    loop {
        let woken = node(&nodes, paused);
        let (a, s) = (
            woken.get(&session).await.json(),
            woken.get(&format!("/v1/sessions/{slow}")).await.json(),
        );
        let left = nodes[paused].as_ref().unwrap().agents();
        if a["live"] == false && s["live"] == false && left.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the woken server still runs them: {a} {s} {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        events_anywhere(&up, &slow).await,
        taken,
        "nothing was written after the takeover"
    );
    assert_no_stale_write(&url, &[ada.clone(), slow.clone()]).await;
    *up.lock().unwrap() = all_up(&nodes);

    // A rolling restart under load: scripted clients talk to random servers while each server in
    // turn is stopped (SIGTERM, exit 0, no agent left) and started again on a fresh machine.
    let load: Vec<String> = (0..4).map(|i| unique(&format!("load-{i}"))).collect();
    let over = agent_api::request::CancellationToken::new();
    let clients: Vec<_> = load
        .iter()
        .map(|id| tokio::spawn(client(up.clone(), id.clone(), 2, over.clone())))
        .collect();
    for i in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stopping = nodes[i].take().unwrap();
        *up.lock().unwrap() = all_up(&nodes);
        let status = stopping.terminate(Duration::from_secs(60)).await;
        assert_eq!(status.code(), Some(0), "a drained server exits 0");
        nodes[i] = Some(start(i));
        *up.lock().unwrap() = all_up(&nodes);
    }
    over.cancel();
    for client in clients {
        assert!(client.await.unwrap() >= 2);
    }
    for id in &load {
        assert_whole(id, &events_anywhere(&up, id).await);
    }
    // The Claude Code session goes on: brought back once more, it has seen every turn.
    let sent = real_call(
        &up,
        &format!("{session}/messages"),
        Some(json!({"message": "Still there?"})),
    )
    .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let events = real_wait(&up, &ada, "fourth turn's end", |events| {
        events.iter().filter(|e| turn_end(e)).count() >= 4
    })
    .await;
    assert!(
        last_answer(&events).contains("user_turns=4"),
        "{}",
        last_answer(&events)
    );
    assert_whole(&ada, &events);
    for seam in statuses(&events, "session_resumed") {
        let detail = seam["data"]["item"]["content"][0]["detail"]
            .as_str()
            .unwrap();
        assert!(detail.contains("how=native"), "{detail}");
    }
    let mut every = load.clone();
    every.extend([ada.clone(), slow]);
    assert_no_stale_write(&url, &every).await;
    assert_eq!(
        real_call(&up, &format!("{session}/terminate"), None)
            .await
            .status,
        204
    );
    for node in nodes.iter().flatten() {
        let deadline = tokio::time::Instant::now() + STEP;
        while !node.agents().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "an agent outlived its session"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drop(nodes);
    drop(own);
}
