//! The PostgreSQL store, on the real server `tests/postgres/setup.sh` starts (never a mock):
//! the store's rules, and several servers sharing one history.
//!
//! The database URL comes from `AGENT_API_TEST_POSTGRES_URL`, else from the file the setup script
//! writes. Without one these tests fail, saying why; `AGENT_API_POSTGRES=skip` makes them print a
//! loud SKIPPED line instead.

mod common;

use std::sync::Arc;

use agent_api_server::{ServerConfig, Store, StoreError, StoreUrl};
use common::*;
use hyper::Method;
use serde_json::json;

async fn open(url: &str) -> Arc<dyn Store> {
    StoreUrl::parse(url).unwrap().open().await.unwrap()
}

/// A session of no server: a server starting on the shared database leaves it alone.
fn record(id: &str) -> agent_api_server::store::SessionRecord {
    common::record(id, Some("the-store-test"))
}

#[tokio::test]
async fn the_postgres_store_keeps_order_and_refuses_gaps_duplicates_and_unknown_sessions() {
    let Some(url) = database() else { return };
    let store = open(&url).await;
    let (a, b) = (unique("a"), unique("b"));
    store.create_session(record(&a)).await.unwrap();
    store.create_session(record(&b)).await.unwrap();
    assert!(matches!(
        store.create_session(record(&a)).await,
        Err(StoreError::Duplicate(_))
    ));
    store
        .append(&a, (1..=3).map(event).collect())
        .await
        .unwrap();
    store
        .append(&a, (4..=5).map(event).collect())
        .await
        .unwrap();
    assert!(matches!(
        store.append(&a, vec![event(7)]).await,
        Err(StoreError::OutOfOrder {
            last: 5,
            got: 7,
            ..
        })
    ));
    assert!(matches!(
        store.append(&a, vec![event(5)]).await,
        Err(StoreError::OutOfOrder { .. })
    ));
    assert!(matches!(
        store.append(&a, vec![event(6), event(8)]).await,
        Err(StoreError::OutOfOrder { .. })
    ));
    assert!(matches!(
        store.append(&unique("none"), vec![event(1)]).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.events(&unique("none"), 0, 10).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.events(&b, 0, 10).await.unwrap(), vec![]);
    // Appends from many tasks at once, pipelined on the one connection.
    let writes: Vec<_> = (0..20)
        .map(|n| {
            let (store, id) = (store.clone(), format!("{b}-{n}"));
            tokio::spawn(async move {
                store.create_session(record(&id)).await?;
                store.append(&id, (1..=3).map(event).collect()).await?;
                store.append(&id, (4..=6).map(event).collect()).await
            })
        })
        .collect();
    for write in writes {
        write.await.unwrap().unwrap();
    }
    store.set_native_session_id(&a, "native-1").await.unwrap();
    store.set_agent_mode(&a, "plan").await.unwrap();
    assert!(matches!(
        store.set_agent_mode(&unique("none"), "plan").await,
        Err(StoreError::NotFound(_))
    ));
    store.mark_ended(&b, Some("why")).await.unwrap();

    let again = open(&url).await;
    assert_eq!(
        again.events(&a, 2, 2).await.unwrap(),
        vec![event(3), event(4)]
    );
    let session = again.session(&a).await.unwrap().unwrap();
    assert_eq!(
        (
            session.event_count,
            session.native_session_id.as_deref(),
            session.agent_mode.as_str()
        ),
        (5, Some("native-1"), "plan")
    );
    assert_eq!(
        again
            .session(&b)
            .await
            .unwrap()
            .unwrap()
            .end_error
            .as_deref(),
        Some("why")
    );
    let ids: Vec<String> = again
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .filter(|id| id == &a || id == &b)
        .collect();
    assert_eq!(
        ids,
        [a.clone(), b.clone()],
        "in the order they were created"
    );
    for n in 0..20 {
        assert_eq!(
            again
                .session(&format!("{b}-{n}"))
                .await
                .unwrap()
                .unwrap()
                .event_count,
            6
        );
    }
}

#[tokio::test]
async fn the_postgres_store_refuses_every_write_of_a_server_that_lost_the_session() {
    let Some(url) = database() else { return };
    let store = open(&url).await;
    owner_checks(store.clone(), &unique("owned")).await;
    // A server is running while its heartbeat is within the lease.
    let (alive, never) = (unique("alive"), unique("never"));
    store.heartbeat(&alive).await.unwrap();
    let lease = std::time::Duration::from_secs(30);
    assert!(store.server_alive(&alive, lease).await.unwrap());
    assert!(!store.server_alive(&never, lease).await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!store
        .server_alive(&alive, std::time::Duration::from_millis(100))
        .await
        .unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_turns_on_postgres_write_a_base_and_deltas_that_restore_the_export() {
    let Some(url) = database() else { return };
    fifty_turns_of_snapshots("postgres", open(&url).await, &unique("long")).await;
}

#[tokio::test]
async fn servers_sharing_one_database_list_and_follow_each_others_sessions() {
    let Some(url) = database() else { return };
    let (first_id, second_id) = (unique("daemon-a"), unique("daemon-b"));
    let first = start_on(
        ServerConfig::default().with_daemon_id(&first_id),
        open(&url).await,
    )
    .await;
    let second = start_on(
        ServerConfig::default().with_daemon_id(&second_id),
        open(&url).await,
    )
    .await;
    let session = unique("shared");
    first
        .post(&format!("/v1/sessions/{session}"), scripted("text"))
        .await;
    first
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"message": "one"}),
        )
        .await;
    let events = first.wait_for(&session, "item.completed").await;

    // The other server lists it and serves its stored events, but does not run it.
    let listed = second.get("/v1/sessions").await.json();
    let info = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == session.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        (&info["ended"], &info["live"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(
        second.all_events(&session, 3).await[..events.len()],
        events[..]
    );
    // Any server answers for it (issue 48): a command sent to the second is handed to the
    // first, which runs it, and the client gets the first's answer.
    let before = first.all_events(&session, 1000).await.len();
    assert_eq!(
        second
            .post(
                &format!("/v1/sessions/{session}/messages"),
                json!({"message": "two"}),
            )
            .await
            .status,
        204
    );
    let deadline = tokio::time::Instant::now() + STEP;
    while !first.all_events(&session, 1000).await[before..]
        .iter()
        .any(turn_end)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the forwarded message ran no turn"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let info = second.get(&format!("/v1/sessions/{session}")).await.json();
    assert!(
        info["owner"].as_str().unwrap().starts_with(&first_id),
        "still the first's: {info}"
    );
    second
        .post(&format!("/v1/sessions/{session}"), scripted("text"))
        .await
        .problem(409);
    // A reply to no permission: the owner's own answer, status and body, whichever server asked.
    let reply = |api: Api| {
        let path = format!("/v1/sessions/{session}/permissions/p/reply");
        async move { api.post(&path, json!({"reply": "once"})).await }
    };
    let (direct, handed) = (reply(first.clone()).await, reply(second.clone()).await);
    assert_eq!(direct.status, handed.status);
    assert_eq!(direct.json()["type"], handed.json()["type"]);
    assert_eq!(
        second
            .post_empty(&format!("/v1/sessions/{session}/cancel"))
            .await
            .status,
        204
    );

    // Its SSE follows the turns the first server runs, from the store.
    let all = first.all_events(&session, 1000).await;
    let mut stream = second
        .sse(
            Method::GET,
            &format!("/v1/sessions/{session}/events/sse?offset={}", all.len()),
            None,
            &[],
        )
        .await;
    first
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"message": "three"}),
        )
        .await;
    let frames = stream.until("item.completed").await;
    assert_eq!(frames[0].id, Some(all.len() as u64 + 1));
    let ids: Vec<u64> = frames.iter().map(|f| f.id.unwrap()).collect();
    assert_eq!(
        ids,
        (all.len() as u64 + 1..=all.len() as u64 + ids.len() as u64).collect::<Vec<_>>()
    );

    // A server started with the first one's name while the first runs (issue 46 item 3: it used
    // to end the first one's live sessions, whose turns then went unrecorded): it touches nothing
    // the first runs, and its identity is its own.
    let restarted = start_on(
        ServerConfig::default().with_daemon_id(&first_id),
        open(&url).await,
    )
    .await;
    let info = restarted
        .get(&format!("/v1/sessions/{session}"))
        .await
        .json();
    assert_eq!(
        (&info["ended"], &info["live"], &info["state"]),
        (&json!(false), &json!(false), &json!("live")),
        "{info}"
    );
    assert!(info["owner"].as_str().unwrap().starts_with(&first_id));
    // A server started with the first one's name is another server: it hands the command to
    // the first, which still runs the session.
    let last = first.all_events(&session, 1000).await.len();
    assert_eq!(
        restarted
            .post(
                &format!("/v1/sessions/{session}/messages"),
                json!({"message": "through another"})
            )
            .await
            .status,
        204,
    );
    let deadline = tokio::time::Instant::now() + STEP;
    while !first.all_events(&session, 1000).await[last..]
        .iter()
        .any(turn_end)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn was not recorded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let info = first.get(&format!("/v1/sessions/{session}")).await.json();
    assert_eq!(
        info["live"],
        json!(true),
        "the first server still runs it: {info}"
    );
    // Terminate sent to a server that does not run the session: the owner terminates it.
    assert_eq!(
        restarted
            .post_empty(&format!("/v1/sessions/{session}/terminate"))
            .await
            .status,
        204
    );
    // The follower on the second server sees the end and its stream closes.
    let rest = stream.rest().await;
    assert_eq!(
        rest.last().map(|f| f.data["type"].clone()),
        Some(json!("session.ended"))
    );
}

/// A PostgreSQL server of one test's own, started by `tests/postgres/setup.sh` in a directory and
/// on a port of its own: stopping it touches no other test's server. Stopped and removed when
/// dropped.
struct OwnServer {
    parent: std::path::PathBuf,
    env: Vec<(&'static str, String)>,
    url: String,
}

impl OwnServer {
    /// Sets one up and starts it; fails saying why when the setup script cannot.
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Under /var/tmp: as root the cluster belongs to the `postgres` user, who must reach it.
        let parent =
            std::path::PathBuf::from(format!("/var/tmp/agent_api-postgres-{}", unique("outage")));
        let env = vec![
            (
                "AGENT_API_POSTGRES_DIR",
                parent.join("state").display().to_string(),
            ),
            (
                "AGENT_API_POSTGRES_DATA",
                parent.join("cluster/data").display().to_string(),
            ),
            ("AGENT_API_POSTGRES_PORT", port.to_string()),
        ];
        let mut own = Self {
            parent,
            env,
            url: String::new(),
        };
        own.setup(None);
        let file = std::fs::read_to_string(own.parent.join("state/postgres.env")).unwrap();
        own.url = match file
            .lines()
            .find_map(|line| line.strip_prefix("AGENT_API_TEST_POSTGRES_URL="))
        {
            Some(url) => url.to_string(),
            None => panic!(
                "tests/postgres/setup.sh could not set up a server of this test's own: {file}"
            ),
        };
        own
    }

    /// Runs the setup script (`stop` stops the server; no argument starts it again).
    fn script(&self, arg: Option<&str>) -> std::io::Result<std::process::ExitStatus> {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/postgres/setup.sh");
        std::process::Command::new("bash")
            .arg(script)
            .args(arg)
            .envs(self.env.iter().cloned())
            .status()
    }

    /// [`OwnServer::setup`] from async code, on the blocking pool.
    async fn set(self, arg: Option<&'static str>) -> Self {
        tokio::task::spawn_blocking(move || {
            self.setup(arg);
            self
        })
        .await
        .unwrap()
    }

    /// [`OwnServer::script`], which must succeed.
    fn setup(&self, arg: Option<&str>) {
        assert!(
            self.script(arg).unwrap().success(),
            "tests/postgres/setup.sh {arg:?} failed"
        );
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        // Never a panic here: a test failing with the server stopped must still say why.
        let _ = self.script(Some("stop"));
        let _ = std::fs::remove_dir_all(&self.parent);
    }
}

/// Frames of `stream` until one for which `stop` holds (included).
async fn frames_until(stream: &mut Sse, stop: impl Fn(&serde_json::Value) -> bool) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(frame) = stream.next().await {
        let done = stop(&frame.data);
        frames.push(frame);
        if done {
            return frames;
        }
    }
    panic!("the stream closed first: {frames:#?}");
}

/// A slow scripted turn (sixty words, 100 ms apart) on `session`, followed from its start; returns
/// the stream once five words were served.
async fn slow_turn(api: &Api, session: &str) -> (Sse, Vec<Frame>) {
    let create = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow", "backend.scripted.delay_ms": 100}});
    assert_eq!(
        api.post(&format!("/v1/sessions/{session}"), create)
            .await
            .status,
        200
    );
    let mut stream = api
        .sse(
            Method::GET,
            &format!("/v1/sessions/{session}/events/sse"),
            None,
            &[],
        )
        .await;
    assert_eq!(
        api.post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"message": "go slowly"})
        )
        .await
        .status,
        204
    );
    let mut frames = Vec::new();
    while frames
        .iter()
        .filter(|f: &&Frame| f.data["type"] == "item.delta")
        .count()
        < 5
    {
        frames.push(stream.next().await.expect("the turn streams"));
    }
    (stream, frames)
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().map(|f| f.id.unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_stopped_and_started_under_a_live_session_holds_the_turn_and_loses_no_served_event(
) {
    if database().is_none() {
        return;
    }
    let own = tokio::task::spawn_blocking(OwnServer::start).await.unwrap();
    let config = ServerConfig::default()
        .with_daemon_id(unique("outage"))
        .with_store_outage(std::time::Duration::from_secs(60));
    let api = start_on(config, open(&own.url).await).await;
    let (mut stream, mut served) = slow_turn(&api, "held").await;

    // Down: nothing unstored is served, the pages say the store failed.
    let own = own.set(Some("stop")).await;
    let page = api.get("/v1/sessions/held/events").await;
    assert_eq!(
        page.problem(500)["type"],
        "urn:agent-api:error:stream_error"
    );
    // Events stored just before the stop may still be on their way to this client: they arrive
    // at once. Then the stream stays silent; one that leaked unstored events would keep flowing
    // (the turn streams a delta every few milliseconds) and fail the drain's bound.
    let drain_until = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
    while let Ok(Some(frame)) =
        tokio::time::timeout(std::time::Duration::from_millis(500), stream.next()).await
    {
        served.push(frame);
        assert!(
            tokio::time::Instant::now() < drain_until,
            "events kept being served while the store was down"
        );
    }
    let served_before = served.len();
    let waited = tokio::time::timeout(std::time::Duration::from_millis(1500), stream.next()).await;
    assert!(
        waited.is_err(),
        "an event was served while the store was down: {waited:?}"
    );

    // Up again: the turn goes on where it waited, every event once, in order.
    let own = own.set(None).await;
    served.extend(frames_until(&mut stream, turn_end).await);
    assert!(served.len() > served_before);
    assert_eq!(
        ids(&served),
        (1..=served.len() as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    assert_eq!(
        served.last().unwrap().data["data"]["item"]["content"][0]["label"],
        "turn_completed"
    );
    let answer = &served
        .iter()
        .rev()
        .find(|f| {
            f.data["type"] == "item.completed" && f.data["data"]["item"]["role"] == "assistant"
        })
        .expect("the answer")
        .data["data"]["item"];
    let deltas: String = served
        .iter()
        .filter(|f| {
            f.data["type"] == "item.delta" && f.data["data"]["item_id"] == answer["item_id"]
        })
        .map(|f| f.data["data"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        deltas,
        answer["content"][0]["text"].as_str().unwrap(),
        "every delta of the answer was served"
    );
    let stored = api.all_events("held", 1000).await;
    assert_eq!(
        stored[..served.len()],
        served.iter().map(|f| f.data.clone()).collect::<Vec<_>>()[..]
    );
    // The session works: another turn.
    assert_eq!(
        api.post(
            "/v1/sessions/held/messages",
            json!({"message": "and again"})
        )
        .await
        .status,
        204
    );
    frames_until(&mut stream, turn_end).await;

    // Down for longer than the bound: the turn fails, the session ends with a typed error, stored
    // once the store is back; what was served before is still there.
    let config = ServerConfig::default()
        .with_daemon_id(unique("outage"))
        .with_store_outage(std::time::Duration::from_secs(1));
    let api = start_on(config, open(&own.url).await).await;
    let (mut stream, mut served) = slow_turn(&api, "lost").await;
    let own = own.set(Some("stop")).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let refused = api
        .post("/v1/sessions/lost/messages", json!({"message": "more"}))
        .await;
    assert_eq!(
        refused.problem(409)["type"],
        "urn:agent-api:error:session_ended"
    );
    let _own = own.set(None).await;
    served.extend(stream.rest().await);
    assert_eq!(
        ids(&served),
        (1..=served.len() as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    let tail: Vec<&serde_json::Value> = served.iter().rev().take(2).map(|f| &f.data).collect();
    assert_eq!(
        (&tail[1]["type"], &tail[1]["data"]["code"]),
        (&json!("error"), &json!("store_unavailable")),
        "{tail:#?}"
    );
    assert_eq!(
        (&tail[0]["type"], &tail[0]["data"]["reason"]),
        (&json!("session.ended"), &json!("error"))
    );
    let stored = api.all_events("lost", 1000).await;
    assert_eq!(
        stored,
        served.iter().map(|f| f.data.clone()).collect::<Vec<_>>()
    );
    let info = api.get("/v1/sessions/lost").await.json();
    assert_eq!(info["ended"], true);
    assert!(
        info["endError"]
            .as_str()
            .unwrap()
            .contains("store was unavailable"),
        "{info}"
    );
}

/// `GET /v1/health/ready`'s store check (its status and the store check's reason).
async fn store_readiness(api: &Api) -> (u16, Option<String>) {
    let answer = api.with_token(None).get("/v1/health/ready").await;
    let body = answer.json();
    let store = body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "store")
        .cloned()
        .unwrap();
    assert_eq!(store["ok"], answer.status == 200, "{body}");
    (
        answer.status.as_u16(),
        store["reason"].as_str().map(String::from),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_turns_false_while_postgresql_is_stopped_or_read_only_and_true_again_after() {
    if database().is_none() {
        return;
    }
    let own = tokio::task::spawn_blocking(OwnServer::start).await.unwrap();
    let store = open(&own.url).await;
    let api = start_on(ServerConfig::default().with_token("t"), store).await;
    assert_eq!(store_readiness(&api).await, (200, None));

    let own = own.set(Some("stop")).await;
    assert_eq!(
        store_readiness(&api).await,
        (503, Some("unreachable".into()))
    );
    let health = api.with_token(None).get("/v1/health").await;
    assert_eq!(health.status, 200, "the process is up all the same");

    let own = own.set(None).await;
    assert_eq!(store_readiness(&api).await, (200, None));

    // A database that answers but takes no writes (as a standby would) is not ready either.
    let (admin, connection) = tokio_postgres::connect(&own.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let read_only = |on: bool| {
        let admin = &admin;
        async move {
            // One statement each: ALTER SYSTEM runs outside any transaction.
            let set = format!(
                "ALTER SYSTEM SET default_transaction_read_only = {}",
                if on { "on" } else { "off" }
            );
            admin.batch_execute(&set).await.unwrap();
            admin
                .batch_execute("SELECT pg_reload_conf()")
                .await
                .unwrap();
        }
    };
    read_only(true).await;
    let deadline = tokio::time::Instant::now() + STEP;
    // The reload reaches the server's connection within moments.
    while store_readiness(&api).await != (503, Some("read_only".into())) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready while read-only"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    read_only(false).await;
    let deadline = tokio::time::Instant::now() + STEP;
    while store_readiness(&api).await != (200, None) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready once writable"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(own);
}

#[tokio::test]
async fn the_postgres_outbox_queues_with_its_events_and_gives_each_row_to_one_server_at_a_time() {
    use agent_api_server::store::{OutboxRules, OutboxTarget, StoredEvent, WebhookEvent};
    let Some(url) = database() else { return };
    outbox_checks(open(&url).await, &unique("outbox")).await;

    // Two servers (two connections) taking rows at once: each row goes to one of them.
    let (one, two) = (open(&url).await, open(&url).await);
    let endpoint = unique("fleet-endpoint");
    let rules = Arc::new(OutboxRules::new(vec![OutboxTarget {
        endpoint: endpoint.clone(),
        events: vec![WebhookEvent::TurnEnded],
    }]));
    one.set_outbox(rules.clone()).unwrap();
    two.set_outbox(rules).unwrap();
    let prefix = unique("fleet-session");
    let sessions: Vec<String> = (0..20).map(|n| format!("{prefix}-{n}")).collect();
    for id in &sessions {
        one.create_session(common::record(id, Some("a")))
            .await
            .unwrap();
        let mut transcript = agent_api::kit::transcript::Transcript::new(id.as_str().into(), false);
        transcript.daemon_status("turn_completed", Some("turn 1".into()));
        let events: Vec<StoredEvent> = transcript
            .drain()
            .map(|e| StoredEvent::from_event(e).unwrap())
            .collect();
        one.append_owned(id, "a", events).await.unwrap();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 1;
    let lease = std::time::Duration::from_secs(60);
    let take = |store: Arc<dyn Store>, server: &'static str, endpoint: String| async move {
        let mut taken = Vec::new();
        loop {
            let due = store
                .claim_deliveries(server, std::slice::from_ref(&endpoint), now, lease, 3)
                .await
                .unwrap();
            if due.is_empty() {
                return taken;
            }
            taken.extend(due.into_iter().map(|d| d.session));
        }
    };
    let (a, b) = tokio::join!(
        take(one.clone(), "s1", endpoint.clone()),
        take(two.clone(), "s2", endpoint.clone())
    );
    let mut all: Vec<String> = a.iter().chain(&b).cloned().collect();
    all.sort();
    let mut want = sessions.clone();
    want.sort();
    assert_eq!(all, want, "every row taken once: {a:?} {b:?}");
    // A server that died holding rows: once its lease ran out, another takes them (at least once).
    let retaken = two
        .claim_deliveries("s3", &[endpoint], now + 61_000, lease, 100)
        .await
        .unwrap();
    assert_eq!(retaken.len(), sessions.len());
}

#[tokio::test]
async fn the_postgres_store_keeps_tokens_hashed_and_a_revoke_is_seen_by_every_server_at_once() {
    let Some(url) = database() else { return };
    let store = open(&url).await;
    let beside = StoreUrl::parse(&url).unwrap().open_tokens().await.unwrap();
    token_checks(store, beside, &unique("tenanted")).await;
}
