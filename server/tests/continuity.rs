//! Sessions that outlive their server (issue 47) and a session only ever run by its one owner
//! (issue 46 item 3): real server processes (this test binary started again as `child_server`)
//! killed with SIGKILL between turns, mid-turn and while a permission waits, or stopped with
//! SIGTERM, and another started on the same SQLite store with an empty HOME; in-process servers
//! for ownership lost to another server, idle release and the idle TTL.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agent_api_server::store::SessionState;
use agent_api_server::{ServerConfig, Store, StoreError, StoreUrl};
use common::*;
use serde_json::{json, Value};

/// The environment variable that makes `child_server` serve: the store's URL.
const CHILD_STORE: &str = "AGENT_API_TEST_CHILD_STORE";
/// Set: `child_server` logs to its stderr.
const CHILD_LOGS: &str = "AGENT_API_TEST_CHILD_LOGS";
/// What `child_server` prints once it listens.
const LISTENING: &str = "child-server listening on http://";

/// Not a test: the server process the tests below start, kill and start again (this binary run
/// with `--ignored --exact child_server`, the store's URL in `AGENT_API_TEST_CHILD_STORE`). It
/// serves the scripted agent on that store until SIGTERM.
#[test]
#[ignore = "the server process of the continuity tests, started by them"]
fn child_server() {
    let url = std::env::var(CHILD_STORE)
        .expect("child_server is started by the continuity tests, with AGENT_API_TEST_CHILD_STORE");
    if std::env::var_os(CHILD_LOGS).is_some() {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    let config = ServerConfig::default()
        .with_daemon_id("child")
        .with_idle_release(None);
    serve_scripted_until_sigterm(&url, config, LISTENING);
}

/// A `child_server` process, killed when dropped.
struct Child {
    process: std::process::Child,
    api: Api,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Child {
    /// Starts a server on `store` with `home` as its HOME (and nothing else of this one's).
    fn start(store: &str, home: &Path) -> Self {
        Self::spawn(Self::command(store, home))
    }

    /// [`Child::start`], its log written to `log`.
    fn start_logging(store: &str, home: &Path, log: &Path) -> Self {
        let mut command = Self::command(store, home);
        command
            .env(CHILD_LOGS, "1")
            .stderr(std::fs::File::create(log).unwrap());
        Self::spawn(command)
    }

    fn command(store: &str, home: &Path) -> Command {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env(CHILD_STORE, store)
            .env("HOME", home)
            .env("XDG_DATA_HOME", home.join(".local/share"));
        command
    }

    fn spawn(command: Command) -> Self {
        let (process, api) = spawn_child_server(command, "child_server", LISTENING);
        Self { process, api }
    }

    /// Kills it with `signal` and waits for it to exit.
    fn signal(mut self, signal: i32) -> std::process::ExitStatus {
        unsafe { libc::kill(self.process.id() as i32, signal) };
        let status = self.process.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("server.sqlite3").display())
}

/// The completed status items labelled `label`.
fn statuses<'a>(events: &'a [Value], label: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .filter(|e| e["data"]["item"]["content"][0]["label"] == label)
        .collect()
}

/// The detail of the one `session_resumed` seam of a continuous log.
fn the_seam(events: &[Value]) -> &str {
    check_continuous(events);
    let seams = statuses(events, "session_resumed");
    assert_eq!(seams.len(), 1, "one seam: {events:#?}");
    seams[0]["data"]["item"]["content"][0]["detail"]
        .as_str()
        .unwrap()
}

/// The assistant's answers.
fn answers(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["role"] == "assistant"
                && e["data"]["item"]["kind"] == "message"
        })
        .filter_map(|e| e["data"]["item"]["content"][0]["text"].as_str())
        .map(String::from)
        .collect()
}

/// Waits until `turns` turns have ended in the session; its events.
async fn turns_ended(api: &Api, session: &str, turns: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let events = api.all_events(session, 1000).await;
        if events.iter().filter(|e| turn_end(e)).count() >= turns {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{turns} turns did not end: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Checks what a transcript continued across servers holds: sequences 1..=n with no gap, one
/// `session.started`, unique event ids.
fn check_continuous(events: &[Value]) {
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    let started = events
        .iter()
        .filter(|e| e["type"] == "session.started")
        .count();
    assert_eq!(started, 1, "one session.started: {events:#?}");
    let ids: std::collections::HashSet<&str> = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), events.len(), "unique event ids");
}

/// Whether the last turn's answer shows the agent saw the first: it continued its own session
/// (`turn 2`), or was primed with the transcript (it quotes the first message).
fn saw_both_turns(info: &Value, answer: &str, first: &str) -> bool {
    match info["resumedHow"].as_str() {
        Some("native") => answer.contains("turn 2"),
        Some("replay") => answer.contains(first),
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_goes_on_under_its_id_after_its_server_is_killed_on_a_server_with_an_empty_home()
{
    let dir = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(dir.path());
    let a = Child::start(&store, home_a.path());
    a.api.post("/v1/sessions/ada", scripted("text")).await;
    a.api
        .post(
            "/v1/sessions/ada/messages",
            json!({"message": "My name is Ada"}),
        )
        .await;
    let served = turns_ended(&a.api, "ada", 1).await;
    snapshot_kept(&a.api, "ada", 1).await;
    let killed = a.signal(libc::SIGKILL);
    assert!(!killed.success());

    let b = Child::start(&store, home_b.path());
    let info = b.api.get("/v1/sessions/ada").await.json();
    assert_eq!(
        (&info["state"], &info["ended"], &info["live"]),
        (&json!("resumable"), &json!(false), &json!(false)),
        "{info}"
    );
    let sent = b
        .api
        .post(
            "/v1/sessions/ada/messages",
            json!({"message": "What is my name?"}),
        )
        .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let events = turns_ended(&b.api, "ada", 2).await;
    assert_eq!(events[..served.len()], served[..], "nothing served changed");
    let detail = the_seam(&events);
    assert!(
        detail.contains("how=native from=snapshot")
            && detail.contains("after=server_died")
            && detail.contains("server=child-"),
        "{detail}"
    );
    assert!(
        !events.iter().any(|e| e["data"]["code"] == "interrupted"),
        "no turn ran when it was killed"
    );
    let info = b.api.get("/v1/sessions/ada").await.json();
    assert_eq!(
        (&info["state"], &info["live"]),
        (&json!("live"), &json!(true))
    );
    assert!(detail.contains(&format!("how={}", info["resumedHow"].as_str().unwrap())));
    let answer = answers(&events).pop().unwrap();
    assert_eq!(info["resumedHow"], "native", "{info}");
    assert!(
        saw_both_turns(&info, &answer, "My name is Ada"),
        "the agent saw both turns: {answer} ({info})"
    );
}

/// Waits until the session's `state` is `state`; its info.
async fn state_reached(api: &Api, session: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let info = api.get(&format!("/v1/sessions/{session}")).await.json();
        if info["state"] == state {
            return info;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {state}: {info}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_running_when_its_server_is_killed_ends_interrupted_once_and_the_next_turn_works() {
    let dir = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(dir.path());
    let a = Child::start(&store, home_a.path());
    let slow = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow", "backend.scripted.delay_ms": 20}});
    a.api.post("/v1/sessions/cut", slow).await;
    a.api
        .post("/v1/sessions/cut/messages", json!({"message": "go slowly"}))
        .await;
    let deadline = tokio::time::Instant::now() + STEP;
    let served = loop {
        let events = a.api.all_events("cut", 1000).await;
        if events.iter().filter(|e| e["type"] == "item.delta").count() >= 3 {
            break events;
        }
        assert!(tokio::time::Instant::now() < deadline, "no streaming");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    a.signal(libc::SIGKILL);

    let b = Child::start(&store, home_b.path());
    let stored = b.api.all_events("cut", 1000).await;
    assert_eq!(stored[..served.len()], served[..]);
    assert!(
        !stored.iter().any(|e| e["data"]["code"] == "interrupted"),
        "written when the session comes back, not before"
    );
    b.api
        .post("/v1/sessions/cut/messages", json!({"message": "again"}))
        .await;
    let events = turns_ended(&b.api, "cut", 2).await;
    check_continuous(&events);
    let interrupted: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "error" && e["data"]["code"] == "interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1, "{events:#?}");
    let failed = statuses(&events, "turn_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["item"]["content"][0]["detail"], "turn 1");
    let seam = statuses(&events, "session_resumed")[0]["sequence"]
        .as_u64()
        .unwrap();
    assert!(
        failed[0]["sequence"].as_u64().unwrap() < interrupted[0]["sequence"].as_u64().unwrap()
            && interrupted[0]["sequence"].as_u64().unwrap() < seam,
        "the interrupted turn's end, its error, then the seam"
    );
    assert!(events
        .iter()
        .any(|e| turn_end(e) && e["data"]["item"]["content"][0]["label"] == "turn_completed"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_stopped_with_sigterm_leaves_its_sessions_resumable_and_they_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(dir.path());
    let a = Child::start(&store, home_a.path());
    a.api.post("/v1/sessions/kept", scripted("text")).await;
    a.api
        .post(
            "/v1/sessions/kept/messages",
            json!({"message": "My name is Ada"}),
        )
        .await;
    turns_ended(&a.api, "kept", 1).await;
    assert!(a.signal(libc::SIGTERM).success());

    let b = Child::start(&store, home_b.path());
    let info = b.api.get("/v1/sessions/kept").await.json();
    assert_eq!(
        (&info["state"], &info["ended"]),
        (&json!("resumable"), &json!(false)),
        "{info}"
    );
    let events = b.api.all_events("kept", 1000).await;
    assert!(
        !events.iter().any(|e| e["type"] == "session.ended"),
        "a stopped server ends no session: {events:#?}"
    );
    b.api
        .post(
            "/v1/sessions/kept/messages",
            json!({"message": "What is my name?"}),
        )
        .await;
    let events = turns_ended(&b.api, "kept", 2).await;
    let detail = the_seam(&events);
    assert!(
        detail.contains("how=native from=snapshot") && detail.contains("after=server_stopped"),
        "the snapshot taken as it stopped: {detail}"
    );
    let info = b.api.get("/v1/sessions/kept").await.json();
    let answer = answers(&events).pop().unwrap();
    assert!(
        saw_both_turns(&info, &answer, "My name is Ada"),
        "{answer} ({info})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_permission_waiting_when_its_server_is_killed_is_refused_typed_and_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(dir.path());
    let a = Child::start(&store, home_a.path());
    let ask = json!({"agent": "scripted", "permissionMode": "ask", "options": {"backend.scripted.scenario": "permission", "backend.scripted.delay_ms": 0}});
    a.api.post("/v1/sessions/asked", ask).await;
    a.api
        .post("/v1/sessions/asked/messages", json!({"message": "run it"}))
        .await;
    let events = a.api.wait_for("asked", "permission.requested").await;
    let asked = events
        .iter()
        .find(|e| e["type"] == "permission.requested")
        .unwrap();
    let permission = asked["data"]["permission_id"].as_str().unwrap().to_string();
    a.signal(libc::SIGKILL);

    let b = Child::start(&store, home_b.path());
    let reply = b
        .api
        .post(
            &format!("/v1/sessions/asked/permissions/{permission}/reply"),
            json!({"reply": "once"}),
        )
        .await;
    assert_eq!(
        reply.problem(409)["type"],
        "urn:agent-api:error:turn_interrupted",
        "never answered by nobody"
    );
    let events = b.api.all_events("asked", 1000).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e["data"]["code"] == "interrupted")
            .count(),
        1
    );
    // Sent again, the turn asks again.
    b.api
        .post("/v1/sessions/asked/messages", json!({"message": "run it"}))
        .await;
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let events = b.api.all_events("asked", 1000).await;
        let asks = events
            .iter()
            .filter(|e| e["type"] == "permission.requested")
            .count();
        if asks == 2 {
            check_continuous(&events);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{events:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_brings_a_session_back_without_a_message_and_terminate_ends_one_without_its_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(dir.path());
    let a = Child::start(&store, home_a.path());
    for id in ["back", "done"] {
        a.api
            .post(&format!("/v1/sessions/{id}"), scripted("text"))
            .await;
        a.api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": "hello"}),
            )
            .await;
        turns_ended(&a.api, id, 1).await;
    }
    a.signal(libc::SIGKILL);

    let b = Child::start(&store, home_b.path());
    let info = b.api.post_empty("/v1/sessions/back/resume").await.json();
    assert_eq!(
        (&info["state"], &info["live"]),
        (&json!("live"), &json!(true)),
        "{info}"
    );
    let events = b.api.all_events("back", 1000).await;
    assert_eq!(statuses(&events, "session_resumed").len(), 1);
    check_continuous(&events);

    assert_eq!(
        b.api.post_empty("/v1/sessions/done/terminate").await.status,
        204
    );
    let info = b.api.get("/v1/sessions/done").await.json();
    assert_eq!(
        (&info["state"], &info["ended"], &info["live"]),
        (&json!("ended"), &json!(true), &json!(false))
    );
    let events = b.api.all_events("done", 1000).await;
    let last = events.last().unwrap();
    assert_eq!(
        (&last["type"], &last["data"]["reason"]),
        (&json!("session.ended"), &json!("terminated"))
    );
    assert!(statuses(&events, "session_resumed").is_empty());
    b.api
        .post("/v1/sessions/done/messages", json!({"message": "again"}))
        .await
        .problem(409);
}

#[tokio::test]
async fn one_sqlite_file_takes_one_server_the_second_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let url = StoreUrl::Sqlite(dir.path().join("server.sqlite3"));
    let first = url.open().await.unwrap();
    let second = url.open().await.unwrap_err();
    assert!(matches!(second, StoreError::Locked(_)), "{second:?}");
    let message = second.to_string();
    assert!(
        message.contains("in use by another agent-api server")
            && message.contains(&format!("process {}", std::process::id())),
        "{message}"
    );
    drop(first);
    // Released with the store.
    url.open().await.unwrap();
}

#[tokio::test]
async fn two_servers_never_share_an_identity_and_it_is_not_the_host_name() {
    let store = StoreUrl::Memory.open().await.unwrap();
    let make = || async {
        let mut gateway = agent_api::Gateway::new();
        gateway
            .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
            .unwrap();
        agent_api_server::Server::new(
            gateway,
            agent_api::RunRequest::new(""),
            store.clone(),
            ServerConfig::default(),
        )
        .await
        .unwrap()
    };
    let (one, two) = (make().await, make().await);
    assert_ne!(one.daemon_id(), two.daemon_id());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_ne!(one.daemon_id(), host.trim());
}

/// A server on `store` (kept by the caller too) with the scripted agent.
async fn on(store: &Arc<dyn Store>, config: ServerConfig) -> Api {
    start_on(config, store.clone()).await
}

/// The owner the store records for `id`.
async fn owner(store: &Arc<dyn Store>, id: &str) -> String {
    store.session(id).await.unwrap().unwrap().owner.unwrap()
}

#[tokio::test]
async fn a_server_whose_session_another_took_runs_no_turn_it_cannot_record() {
    let store = StoreUrl::Memory.open().await.unwrap();
    let api = on(&store, ServerConfig::default()).await;
    api.post("/v1/sessions/taken", scripted("text")).await;
    api.post("/v1/sessions/taken/messages", json!({"message": "one"}))
        .await;
    let before = turns_ended(&api, "taken", 1).await;
    // Another server takes the session over (as one that thought this one gone would).
    let mine = owner(&store, "taken").await;
    store.claim("taken", "intruder", Some(&mine)).await.unwrap();
    let refused = api
        .post("/v1/sessions/taken/messages", json!({"message": "two"}))
        .await;
    // A store of one server hands nothing on: 503, typed (never the internal `session_elsewhere`).
    assert_eq!(
        refused.problem(503)["type"],
        "urn:agent-api:error:owner_unavailable"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = store.events("taken", 0, 1000).await.unwrap();
    assert_eq!(after.len(), before.len(), "no turn ran");
    let info = api.get("/v1/sessions/taken").await.json();
    assert_eq!(
        (&info["ended"], &info["live"]),
        (&json!(false), &json!(false)),
        "never ended and live at once: {info}"
    );
}

#[tokio::test]
async fn a_turn_whose_session_another_server_took_stops_and_writes_nothing_more() {
    let store = StoreUrl::Memory.open().await.unwrap();
    let api = on(&store, ServerConfig::default()).await;
    let slow = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow", "backend.scripted.delay_ms": 20}});
    api.post("/v1/sessions/mid", slow).await;
    api.post("/v1/sessions/mid/messages", json!({"message": "go"}))
        .await;
    api.wait_for("mid", "item.delta").await;
    let mine = owner(&store, "mid").await;
    store.claim("mid", "intruder", Some(&mine)).await.unwrap();
    let at_claim = store.events("mid", 0, 1000).await.unwrap().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = store.events("mid", 0, 1000).await.unwrap();
    // At most the write that was in flight when it was taken.
    assert!(
        events.len() <= at_claim + 1,
        "{} > {at_claim}",
        events.len()
    );
    assert!(!events.iter().any(|e| e.kind() == "session.ended"));
    // The turn stopped: the slow scenario's sixty words never all arrived.
    assert!(events.iter().filter(|e| e.kind() == "item.delta").count() < 60);
    let info = api.get("/v1/sessions/mid").await.json();
    assert_eq!(info["live"], false, "{info}");
}

#[tokio::test]
async fn an_idle_session_releases_its_agent_and_the_next_message_resumes_it_natively() {
    let store = StoreUrl::Memory.open().await.unwrap();
    let config = ServerConfig::default().with_idle_release(Some(Duration::from_millis(200)));
    let api = on(&store, config).await;
    api.post("/v1/sessions/nap", scripted("text")).await;
    api.post("/v1/sessions/nap/messages", json!({"message": "one"}))
        .await;
    turns_ended(&api, "nap", 1).await;
    let info = state_reached(&api, "nap", "idle").await;
    assert_eq!(
        (&info["live"], &info["ended"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(
        store.session("nap").await.unwrap().unwrap().state,
        SessionState::Idle
    );
    api.post("/v1/sessions/nap/messages", json!({"message": "two"}))
        .await;
    let events = turns_ended(&api, "nap", 2).await;
    let detail = the_seam(&events);
    assert!(
        detail.contains("how=native") && detail.contains("after=idle_release"),
        "{detail}"
    );
    let answer = answers(&events).pop().unwrap();
    assert!(answer.contains("turn 2"), "{answer}");
}

#[tokio::test]
async fn a_session_idle_past_its_ttl_is_ended_saying_why() {
    let store = StoreUrl::Memory.open().await.unwrap();
    let config = ServerConfig::default().with_session_idle_ttl(Some(Duration::from_secs(1)));
    let api = on(&store, config).await;
    api.post("/v1/sessions/old", scripted("text")).await;
    let deadline = tokio::time::Instant::now() + STEP;
    let info = loop {
        let info = api.get("/v1/sessions/old").await.json();
        if info["ended"] == true {
            break info;
        }
        assert!(tokio::time::Instant::now() < deadline, "{info}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (&info["state"], &info["live"]),
        (&json!("ended"), &json!(false))
    );
    let events = api.all_events("old", 1000).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "session.ended");
    assert!(last["data"]["message"]
        .as_str()
        .unwrap()
        .contains("--session-idle-ttl"));
}

#[tokio::test]
async fn the_store_refuses_every_write_of_a_server_that_no_longer_owns_the_session() {
    let dir = tempfile::tempdir().unwrap();
    for url in [
        StoreUrl::Memory,
        StoreUrl::Sqlite(dir.path().join("server.sqlite3")),
    ] {
        owner_checks(url.open().await.unwrap(), "s").await;
    }
}

/// A memory store whose snapshot writes fail while `failing` says so (the store down at that
/// moment): everything else works.
#[derive(Debug, Default)]
struct SnapshotsFail {
    inner: agent_api_server::store::MemoryStore,
    failing: std::sync::atomic::AtomicBool,
}

impl SnapshotsFail {
    /// The store down for a snapshot write while `failing` says so.
    fn down(&self) -> Result<(), StoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Backend("the store is down".into()));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Store for SnapshotsFail {
    async fn create_session(
        &self,
        record: agent_api_server::store::SessionRecord,
    ) -> Result<(), StoreError> {
        self.inner.create_session(record).await
    }
    async fn append(
        &self,
        session: &str,
        events: Vec<agent_api_server::store::StoredEvent>,
    ) -> Result<(), StoreError> {
        self.inner.append(session, events).await
    }
    async fn events(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<agent_api_server::store::StoredEvent>, StoreError> {
        self.inner.events(session, after, limit).await
    }
    async fn session(
        &self,
        id: &str,
    ) -> Result<Option<agent_api_server::store::SessionRecord>, StoreError> {
        self.inner.session(id).await
    }
    async fn sessions(&self) -> Result<Vec<agent_api_server::store::SessionRecord>, StoreError> {
        self.inner.sessions().await
    }
    async fn set_native_session_id(&self, id: &str, native: &str) -> Result<(), StoreError> {
        self.inner.set_native_session_id(id, native).await
    }
    async fn mark_ended(&self, id: &str, error: Option<&str>) -> Result<(), StoreError> {
        self.inner.mark_ended(id, error).await
    }
    async fn set_usage(&self, id: &str, usage: &str) -> Result<(), StoreError> {
        self.inner.set_usage(id, usage).await
    }
    async fn set_agent_mode(&self, id: &str, mode: &str) -> Result<(), StoreError> {
        self.inner.set_agent_mode(id, mode).await
    }
    async fn append_owned(
        &self,
        session: &str,
        owner: &str,
        events: Vec<agent_api_server::store::StoredEvent>,
    ) -> Result<(), StoreError> {
        self.inner.append_owned(session, owner, events).await
    }
    async fn claim(&self, id: &str, owner: &str, from: Option<&str>) -> Result<(), StoreError> {
        self.inner.claim(id, owner, from).await
    }
    async fn update(
        &self,
        id: &str,
        owner: &str,
        update: agent_api_server::store::SessionUpdate,
    ) -> Result<(), StoreError> {
        self.inner.update(id, owner, update).await
    }
    async fn put_snapshot(
        &self,
        id: &str,
        owner: &str,
        snapshot: agent_api_server::store::StoredSnapshot,
    ) -> Result<(), StoreError> {
        self.down()?;
        self.inner.put_snapshot(id, owner, snapshot).await
    }
    async fn snapshot(
        &self,
        id: &str,
    ) -> Result<Option<agent_api_server::store::StoredChain>, StoreError> {
        self.inner.snapshot(id).await
    }
    async fn put_snapshot_delta(
        &self,
        id: &str,
        owner: &str,
        delta: agent_api_server::store::StoredDelta,
    ) -> Result<(), StoreError> {
        self.down()?;
        self.inner.put_snapshot_delta(id, owner, delta).await
    }
    async fn heartbeat(&self, server: &str) -> Result<(), StoreError> {
        self.inner.heartbeat(server).await
    }
    async fn server_alive(&self, server: &str, lease: Duration) -> Result<bool, StoreError> {
        self.inner.server_alive(server, lease).await
    }
}

#[tokio::test]
async fn a_snapshot_the_store_cannot_take_loses_no_event_and_is_taken_again() {
    let failing = Arc::new(SnapshotsFail::default());
    failing
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let store: Arc<dyn Store> = failing.clone();
    let config = ServerConfig::default().with_idle_release(Some(Duration::from_millis(300)));
    let api = on(&store, config).await;
    api.post("/v1/sessions/down", scripted("text")).await;
    api.post("/v1/sessions/down/messages", json!({"message": "one"}))
        .await;
    let events = turns_ended(&api, "down", 1).await;
    check_continuous(&events);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let info = api.get("/v1/sessions/down").await.json();
    assert!(info["snapshotTurn"].is_null(), "{info}");
    // Back: the snapshot is taken again when the agent is released.
    failing
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    snapshot_kept(&api, "down", 1).await;
    api.post("/v1/sessions/down/messages", json!({"message": "two"}))
        .await;
    let events = turns_ended(&api, "down", 2).await;
    check_continuous(&events);
    assert!(answers(&events).pop().unwrap().contains("turn 2"));
}

#[tokio::test]
async fn a_home_newer_than_the_stored_snapshot_is_kept_and_the_seam_says_so() {
    let failing = Arc::new(SnapshotsFail::default());
    let store: Arc<dyn Store> = failing.clone();
    let config = ServerConfig::default().with_idle_release(Some(Duration::from_millis(300)));
    let api = on(&store, config).await;
    api.post("/v1/sessions/newer", scripted("text")).await;
    api.post("/v1/sessions/newer/messages", json!({"message": "one"}))
        .await;
    turns_ended(&api, "newer", 1).await;
    snapshot_kept(&api, "newer", 1).await;
    // The store down from now on: turn 2 lives in the agent's home only.
    failing
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    api.post("/v1/sessions/newer/messages", json!({"message": "two"}))
        .await;
    turns_ended(&api, "newer", 2).await;
    let info = state_reached(&api, "newer", "idle").await;
    assert_eq!(info["snapshotTurn"], 1, "{info}");
    api.post("/v1/sessions/newer/messages", json!({"message": "three"}))
        .await;
    let events = turns_ended(&api, "newer", 3).await;
    let detail = the_seam(&events);
    assert!(
        detail.contains("how=native from=snapshot kept_newer=1"),
        "newest wins, said: {detail}"
    );
    let answer = answers(&events).pop().unwrap();
    assert!(
        answer.contains("turn 3"),
        "the home's turn 2 kept: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_turns_write_snapshots_of_about_their_files_bytes_and_base_and_deltas_restore_the_export(
) {
    let dir = tempfile::tempdir().unwrap();
    for (kind, url) in [
        ("memory", StoreUrl::Memory),
        (
            "sqlite",
            StoreUrl::Sqlite(dir.path().join("server.sqlite3")),
        ),
    ] {
        fifty_turns_of_snapshots(kind, url.open().await.unwrap(), "long").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_missing_a_delta_or_with_one_cut_short_is_refused_typed_and_the_session_replays_flagged(
) {
    for damage in [
        "DELETE FROM snapshot_deltas WHERE seq = 1",
        "UPDATE snapshot_deltas SET bytes = substr(bytes, 1, 40) WHERE seq = 2",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = sqlite(dir.path());
        let a = Child::start(&store, home_a.path());
        a.api.post("/v1/sessions/ada", scripted("text")).await;
        for (turn, message) in ["My name is Ada", "two", "three"].iter().enumerate() {
            a.api
                .post("/v1/sessions/ada/messages", json!({ "message": message }))
                .await;
            snapshot_kept(&a.api, "ada", turn as u64 + 1).await;
        }
        let served = turns_ended(&a.api, "ada", 3).await;
        a.signal(libc::SIGKILL);
        let db = rusqlite::Connection::open(dir.path().join("server.sqlite3")).unwrap();
        let deltas: u64 = db
            .query_row("SELECT deltas FROM snapshots", [], |row| row.get(0))
            .unwrap();
        assert_eq!(deltas, 2, "a base and the deltas of turns 2 and 3");
        assert_eq!(db.execute(damage, []).unwrap(), 1, "{damage}");
        drop(db);

        let log = dir.path().join("b.log");
        let b = Child::start_logging(&store, home_b.path(), &log);
        b.api
            .post(
                "/v1/sessions/ada/messages",
                json!({"message": "What is my name?"}),
            )
            .await;
        let events = turns_ended(&b.api, "ada", 4).await;
        assert_eq!(events[..served.len()], served[..], "nothing served changed");
        let detail = the_seam(&events);
        assert!(detail.contains("how=replay from=transcript"), "{detail}");
        let info = b.api.get("/v1/sessions/ada").await.json();
        assert_eq!(info["resumedHow"], "replay", "flagged: {info}");
        let answer = answers(&events).pop().unwrap();
        assert!(answer.contains("My name is Ada"), "primed: {answer}");
        drop(b);
        let log = std::fs::read_to_string(&log).unwrap();
        assert!(
            log.contains("the snapshot is corrupt: its delta"),
            "the typed error is logged ({damage}): {log}"
        );
        // The damaged chain is not built on: turn 4's snapshot is a new base.
        let db = rusqlite::Connection::open(dir.path().join("server.sqlite3")).unwrap();
        let (turn, deltas, rows): (u64, u64, u64) = db
            .query_row(
                "SELECT turn, deltas, (SELECT count(*) FROM snapshot_deltas) FROM snapshots",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .unwrap();
        assert_eq!((turn, deltas, rows), (4, 0, 0), "written whole ({damage})");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delta_the_store_refuses_out_of_its_place_is_written_whole() {
    let store: Arc<dyn Store> = Arc::new(agent_api_server::store::MemoryStore::default());
    let api = on(&store, ServerConfig::default().with_idle_release(None)).await;
    api.post("/v1/sessions/moved", scripted("text")).await;
    for (turn, message) in ["one", "two"].iter().enumerate() {
        api.post("/v1/sessions/moved/messages", json!({ "message": message }))
            .await;
        snapshot_kept(&api, "moved", turn as u64 + 1).await;
    }
    let chain = store.snapshot("moved").await.unwrap().unwrap();
    assert_eq!(chain.delta_count, 1, "a base and turn 2's delta");
    // The store's chain replaced behind the server's back (as by another server that ran the
    // session meanwhile): a base of turn 1 alone, so the delta 2 the server holds is out of place.
    let base = agent_api_server::store::StoredSnapshot {
        turn: 1,
        bytes: chain.base.clone(),
    };
    let owner = owner(&store, "moved").await;
    store.put_snapshot("moved", &owner, base).await.unwrap();
    api.post("/v1/sessions/moved/messages", json!({"message": "three"}))
        .await;
    snapshot_kept(&api, "moved", 3).await;
    let chain = store.snapshot("moved").await.unwrap().unwrap();
    assert_eq!(
        (chain.turn, chain.delta_count),
        (3, 0),
        "refused, then written whole"
    );
    let restored = chain.restore().unwrap();
    let lines = String::from_utf8(restored.files[0].bytes.clone()).unwrap();
    assert_eq!(lines.lines().count(), 3, "the three turns: {lines}");
}

/// The agent dies mid-turn (the scripted `crash` scenario: some text, then it exits at once, as
/// a CLI killed with SIGKILL does; its session has recorded the turn): the turn fails with one
/// terminal error, the session stays resumable (only a client ends one), and the next message
/// brings it back natively, with no gap.
#[tokio::test]
async fn an_agent_that_dies_mid_turn_fails_the_turn_once_and_the_next_message_brings_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreUrl::Sqlite(dir.path().join("server.sqlite3"))
        .open()
        .await
        .unwrap();
    let api = on(&store, ServerConfig::default()).await;
    api.post("/v1/sessions/died", scripted("crash")).await;
    // A client waiting for the turn is told how it ended.
    let outcome = api
        .post(
            "/v1/sessions/died/messages?wait=true",
            json!({"message": "My name is Ada"}),
        )
        .await
        .json();
    assert_eq!(
        (&outcome["status"], &outcome["error"]["code"]),
        (&json!("failed"), &json!("process_exited")),
        "{outcome}"
    );
    let served = turns_ended(&api, "died", 1).await;
    check_continuous(&served);
    let errors: Vec<&Value> = served.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "one terminal error: {served:#?}");
    assert_eq!(
        (
            &errors[0]["data"]["code"],
            &errors[0]["data"]["details"]["terminal"]
        ),
        (&json!("process_exited"), &json!(true)),
        "{served:#?}"
    );
    let failed = statuses(&served, "turn_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["item"]["content"][0]["detail"], "turn 1");
    assert!(
        !served.iter().any(|e| e["type"] == "session.ended"),
        "the agent's end is not the session's: {served:#?}"
    );
    let info = state_reached(&api, "died", "resumable").await;
    assert_eq!(
        (&info["ended"], &info["live"]),
        (&json!(false), &json!(false)),
        "{info}"
    );
    assert_eq!(
        store.session("died").await.unwrap().unwrap().state,
        SessionState::AgentExited
    );
    // The agent had reported (and recorded) its session before it died: its snapshot is kept.
    snapshot_kept(&api, "died", 1).await;

    let sent = api
        .post(
            "/v1/sessions/died/messages",
            json!({"message": "What is my name?"}),
        )
        .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let events = turns_ended(&api, "died", 2).await;
    assert_eq!(events[..served.len()], served[..], "nothing served changed");
    check_continuous(&events);
    let detail = the_seam(&events);
    assert!(
        detail.contains("how=native") && detail.contains("after=agent_exited"),
        "{detail}"
    );
    assert_eq!(
        events.iter().filter(|e| e["type"] == "error").count(),
        1,
        "the crashed turn's error only"
    );
    let answer = answers(&events).pop().unwrap();
    assert!(
        answer.contains("turn 2"),
        "its own session went on: {answer}"
    );
    let info = api.get("/v1/sessions/died").await.json();
    assert_eq!(
        (&info["state"], &info["live"], &info["resumedHow"]),
        (&json!("live"), &json!(true), &json!("native")),
        "{info}"
    );
}

/// An agent whose export outlasts the turn's snapshot wait (5 s: a CLI started per export on a
/// loaded machine): the turn ends and the session goes on without waiting longer, and the
/// snapshot is kept once taken, with no further turn (before: dropped at the wait, so a server
/// killed after that turn left no snapshot).
#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_slower_than_the_turns_wait_is_kept_once_taken() {
    let store = StoreUrl::Memory.open().await.unwrap();
    let api = on(&store, ServerConfig::default()).await;
    let slow = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "text", "backend.scripted.delay_ms": 0, "backend.scripted.export_delay_ms": 6000}});
    api.post("/v1/sessions/slow", slow).await;
    api.post("/v1/sessions/slow/messages", json!({"message": "one"}))
        .await;
    let events = turns_ended(&api, "slow", 1).await;
    check_continuous(&events);
    snapshot_kept(&api, "slow", 1).await;
    let stored = store.snapshot("slow").await.unwrap().unwrap();
    let snapshot = stored.restore().unwrap();
    assert!(snapshot.is_native());
    api.post("/v1/sessions/slow/messages", json!({"message": "two"}))
        .await;
    let events = turns_ended(&api, "slow", 2).await;
    check_continuous(&events);
    assert!(answers(&events).pop().unwrap().contains("turn 2"));
}

/// A snapshot the store holds that cannot be used (cut short, damaged, or gone), the server
/// that took it killed, and a server with an empty home: the snapshot is said in the log and
/// skipped, the agent has no copy of its session here, so the session comes back by a flagged
/// replay (a new native session primed with the transcript), never a silent fresh start.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_snapshot_cut_short_damaged_or_missing_brings_the_session_back_by_a_flagged_replay(
) {
    let dir = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(dir.path());
    let spoiled = ["cut", "damaged", "missing"];
    let a = Child::start(&store, home_a.path());
    for id in spoiled {
        a.api
            .post(&format!("/v1/sessions/{id}"), scripted("text"))
            .await;
        a.api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": format!("My name is Ada ({id})")}),
            )
            .await;
        turns_ended(&a.api, id, 1).await;
        snapshot_kept(&a.api, id, 1).await;
    }
    assert!(!a.signal(libc::SIGKILL).success());
    {
        let db = rusqlite::Connection::open(dir.path().join("server.sqlite3")).unwrap();
        let bytes = |id: &str| -> Vec<u8> {
            db.query_row(
                "SELECT bytes FROM snapshots WHERE session_id = ?1",
                [id],
                |row| row.get(0),
            )
            .unwrap()
        };
        let cut = bytes("cut");
        let mut damaged = bytes("damaged");
        damaged[0] = b'!';
        let put = "UPDATE snapshots SET bytes = ?2 WHERE session_id = ?1";
        db.execute(put, rusqlite::params!["cut", &cut[..cut.len() / 2]])
            .unwrap();
        db.execute(put, rusqlite::params!["damaged", damaged])
            .unwrap();
        db.execute("DELETE FROM snapshots WHERE session_id = 'missing'", [])
            .unwrap();
    }

    let b = Child::start(&store, home_b.path());
    for id in spoiled {
        let sent = b
            .api
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": "What is my name?"}),
            )
            .await;
        assert_eq!(sent.status, 204, "{id}: {:?}", sent.body);
        let events = turns_ended(&b.api, id, 2).await;
        check_continuous(&events);
        let detail = the_seam(&events);
        assert!(
            detail.contains("how=replay from=transcript") && detail.contains("after=server_died"),
            "{id}: flagged: {detail}"
        );
        let info = b.api.get(&format!("/v1/sessions/{id}")).await.json();
        assert_eq!(info["resumedHow"], "replay", "{id}: {info}");
        let answer = answers(&events).pop().unwrap();
        assert!(
            saw_both_turns(&info, &answer, &format!("My name is Ada ({id})")),
            "{id}: primed with the transcript: {answer}"
        );
    }
}

/// An agent that takes the open of its own session and only fails to load it on the first turn
/// (as Gemini CLI 0.61.0's ACP `session/load` does: "No previous sessions found"; the scripted
/// agent's `refuse_load`): brought back natively, that turn fails once, typed
/// (`session_not_found`), and the session is not left broken: its next message brings it back
/// by a flagged replay (a second seam, `how=replay after=native_refused`, `resumedHow`), primed
/// with the transcript, with no gap.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_cannot_load_its_own_session_on_the_first_turn_is_brought_back_by_a_flagged_replay(
) {
    let store = StoreUrl::Memory.open().await.unwrap();
    let config = ServerConfig::default().with_idle_release(Some(Duration::from_millis(200)));
    let api = on(&store, config).await;
    let refusing = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "text", "backend.scripted.delay_ms": 0, "backend.scripted.refuse_load": true}});
    api.post("/v1/sessions/lazy", refusing).await;
    api.post(
        "/v1/sessions/lazy/messages",
        json!({"message": "My name is Ada"}),
    )
    .await;
    turns_ended(&api, "lazy", 1).await;
    state_reached(&api, "lazy", "idle").await;

    // Brought back natively: the open is taken, the first turn fails.
    let outcome = api
        .post(
            "/v1/sessions/lazy/messages?wait=true",
            json!({"message": "What is my name?"}),
        )
        .await
        .json();
    assert_eq!(
        (&outcome["status"], &outcome["error"]["code"]),
        (&json!("failed"), &json!("session_not_found")),
        "{outcome}"
    );
    let served = turns_ended(&api, "lazy", 2).await;
    check_continuous(&served);
    let seams = statuses(&served, "session_resumed");
    assert_eq!(seams.len(), 1, "{served:#?}");
    let errors: Vec<&Value> = served.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "one terminal error: {served:#?}");
    assert_eq!(errors[0]["data"]["code"], "session_not_found");
    // Let go, not left broken: resumable, and not natively again.
    let info = state_reached(&api, "lazy", "resumable").await;
    assert_eq!(info["live"], json!(false), "{info}");
    assert_eq!(
        store.session("lazy").await.unwrap().unwrap().state,
        SessionState::NativeRefused
    );

    // The next message brings it back by a flagged replay, primed with the transcript.
    let sent = api
        .post(
            "/v1/sessions/lazy/messages",
            json!({"message": "What is my name, again?"}),
        )
        .await;
    assert_eq!(sent.status, 204, "{:?}", sent.body);
    let events = turns_ended(&api, "lazy", 3).await;
    assert_eq!(events[..served.len()], served[..], "nothing served changed");
    check_continuous(&events);
    let seams = statuses(&events, "session_resumed");
    assert_eq!(seams.len(), 2, "one seam per bring-back: {events:#?}");
    let detail = seams[1]["data"]["item"]["content"][0]["detail"]
        .as_str()
        .unwrap();
    assert!(
        detail.contains("how=replay from=transcript") && detail.contains("after=native_refused"),
        "{detail}"
    );
    assert_eq!(
        events.iter().filter(|e| e["type"] == "error").count(),
        1,
        "the refused turn's error only: {events:#?}"
    );
    let answer = answers(&events).pop().unwrap();
    assert!(answer.contains("My name is Ada"), "primed: {answer}");
    let info = api.get("/v1/sessions/lazy").await.json();
    assert_eq!(
        (&info["state"], &info["resumedHow"]),
        (&json!("live"), &json!("replay")),
        "{info}"
    );
}
