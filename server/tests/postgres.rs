//! The PostgreSQL store, on the real server `tests/postgres/setup.sh` starts (never a mock):
//! the store's rules, and several servers sharing one history.
//!
//! The database URL comes from `AGENT_API_TEST_POSTGRES_URL`, else from the file the setup script
//! writes. Without one these tests fail, saying why; `AGENT_API_POSTGRES=skip` makes them print a
//! loud SKIPPED line instead.

mod common;

use std::sync::Arc;

use agent_api_server::{ServerConfig, Store, StoreError, StoreUrl, INTERRUPTED};
use common::*;
use hyper::Method;
use serde_json::json;

/// The test database's URL; `None` when skipped on purpose.
fn database() -> Option<String> {
    if std::env::var("AGENT_API_POSTGRES").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: AGENT_API_POSTGRES=skip: the PostgreSQL store tests did not run");
        return None;
    }
    if let Ok(url) = std::env::var("AGENT_API_TEST_POSTGRES_URL") {
        return Some(url);
    }
    let dir = std::env::var_os("AGENT_API_POSTGRES_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".cache/agent_api/postgres")))
        .expect("HOME is set");
    let file = std::fs::read_to_string(dir.join("postgres.env"))
        .unwrap_or_else(|_| panic!("no PostgreSQL for the store tests: run `bash tests/postgres/setup.sh` (tests/run.sh does)"));
    for line in file.lines() {
        if let Some(url) = line.strip_prefix("AGENT_API_TEST_POSTGRES_URL=") {
            return Some(url.to_string());
        }
        if let Some(reason) = line.strip_prefix("NOT_SET_UP=") {
            panic!("no PostgreSQL for the store tests: tests/postgres/setup.sh could not set it up: {reason}");
        }
    }
    panic!("{} names no database: run `bash tests/postgres/setup.sh`", dir.join("postgres.env").display());
}

/// A prefix no other run's sessions have: the database outlives test runs.
fn unique(name: &str) -> String {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).unwrap();
    format!("{name}-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

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
    assert!(matches!(store.create_session(record(&a)).await, Err(StoreError::Duplicate(_))));
    store.append(&a, (1..=3).map(event).collect()).await.unwrap();
    store.append(&a, (4..=5).map(event).collect()).await.unwrap();
    assert!(matches!(store.append(&a, vec![event(7)]).await, Err(StoreError::OutOfOrder { last: 5, got: 7, .. })));
    assert!(matches!(store.append(&a, vec![event(5)]).await, Err(StoreError::OutOfOrder { .. })));
    assert!(matches!(store.append(&a, vec![event(6), event(8)]).await, Err(StoreError::OutOfOrder { .. })));
    assert!(matches!(store.append(&unique("none"), vec![event(1)]).await, Err(StoreError::NotFound(_))));
    assert!(matches!(store.events(&unique("none"), 0, 10).await, Err(StoreError::NotFound(_))));
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
    assert!(matches!(store.set_agent_mode(&unique("none"), "plan").await, Err(StoreError::NotFound(_))));
    store.mark_ended(&b, Some("why")).await.unwrap();

    let again = open(&url).await;
    assert_eq!(again.events(&a, 2, 2).await.unwrap(), vec![event(3), event(4)]);
    let session = again.session(&a).await.unwrap().unwrap();
    assert_eq!((session.event_count, session.native_session_id.as_deref(), session.agent_mode.as_str()), (5, Some("native-1"), "plan"));
    assert_eq!(again.session(&b).await.unwrap().unwrap().end_error.as_deref(), Some("why"));
    let ids: Vec<String> = again.sessions().await.unwrap().into_iter().map(|r| r.id).filter(|id| id == &a || id == &b).collect();
    assert_eq!(ids, [a.clone(), b.clone()], "in the order they were created");
    for n in 0..20 {
        assert_eq!(again.session(&format!("{b}-{n}")).await.unwrap().unwrap().event_count, 6);
    }
}

#[tokio::test]
async fn servers_sharing_one_database_list_and_follow_each_others_sessions() {
    let Some(url) = database() else { return };
    let (first_id, second_id) = (unique("daemon-a"), unique("daemon-b"));
    let first = start_on(ServerConfig::default().with_daemon_id(&first_id), open(&url).await).await;
    let second = start_on(ServerConfig::default().with_daemon_id(&second_id), open(&url).await).await;
    let session = unique("shared");
    first.post(&format!("/v1/sessions/{session}"), scripted("text")).await;
    first.post(&format!("/v1/sessions/{session}/messages"), json!({"message": "one"})).await;
    let events = first.wait_for(&session, "item.completed").await;

    // The other server lists it and serves its stored events, but does not run it.
    let listed = second.get("/v1/sessions").await.json();
    let info = listed["sessions"].as_array().unwrap().iter().find(|s| s["sessionId"] == session.as_str()).unwrap().clone();
    assert_eq!((&info["ended"], &info["live"]), (&json!(false), &json!(false)));
    assert_eq!(second.all_events(&session, 3).await[..events.len()], events[..]);
    let elsewhere = second.post(&format!("/v1/sessions/{session}/messages"), json!({"message": "two"})).await;
    assert_eq!(elsewhere.problem(409)["type"], "urn:agent-api:error:session_elsewhere");
    second.post(&format!("/v1/sessions/{session}"), scripted("text")).await.problem(409);
    second.post(&format!("/v1/sessions/{session}/permissions/p/reply"), json!({"reply": "once"})).await.problem(409);
    second.post_empty(&format!("/v1/sessions/{session}/cancel")).await.problem(409);

    // Its SSE follows the turns the first server runs, from the store.
    let all = first.all_events(&session, 1000).await;
    let mut stream = second.sse(Method::GET, &format!("/v1/sessions/{session}/events/sse?offset={}", all.len()), None, &[]).await;
    first.post(&format!("/v1/sessions/{session}/messages"), json!({"message": "two"})).await;
    let frames = stream.until("item.completed").await;
    assert_eq!(frames[0].id, Some(all.len() as u64 + 1));
    let ids: Vec<u64> = frames.iter().map(|f| f.id.unwrap()).collect();
    assert_eq!(ids, (all.len() as u64 + 1..=all.len() as u64 + ids.len() as u64).collect::<Vec<_>>());

    // The first server "restarts" (a new server with its daemon id): only its own session is ended.
    let other = unique("other");
    second.post(&format!("/v1/sessions/{other}"), scripted("text")).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let restarted = start_on(ServerConfig::default().with_daemon_id(&first_id), open(&url).await).await;
    let info = restarted.get(&format!("/v1/sessions/{session}")).await.json();
    assert_eq!((&info["ended"], &info["endError"]), (&json!(true), &json!(INTERRUPTED)));
    let tail = restarted.all_events(&session, 1000).await;
    assert_eq!(tail.last().unwrap()["data"]["reason"], "error");
    assert_eq!(restarted.get(&format!("/v1/sessions/{other}")).await.json()["ended"], false, "another server's session is left to it");
    assert_eq!(second.post(&format!("/v1/sessions/{other}/messages"), json!({"message": "still mine"})).await.status, 204);
    // The follower on the second server sees the end and its stream closes.
    let rest = stream.rest().await;
    assert_eq!(rest.last().map(|f| f.data["type"].clone()), Some(json!("session.ended")));
}
