//! The SQLite store under the server: what was served is there after the server is gone, and a
//! session its server left live is ended with an error reason by the next one.

mod common;

use agent_api_server::{ServerConfig, StoreError, StoreUrl, INTERRUPTED};
use common::*;
use serde_json::json;

fn record(id: &str) -> agent_api_server::store::SessionRecord {
    common::record(id, None)
}

#[tokio::test]
async fn the_sqlite_store_keeps_order_refuses_gaps_and_duplicates_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let url = StoreUrl::parse(&format!(
        "sqlite:{}",
        dir.path().join("nested/server.sqlite3").display()
    ))
    .unwrap();
    let store = url.open().await.unwrap();
    store.create_session(record("a")).await.unwrap();
    store.create_session(record("b")).await.unwrap();
    assert!(matches!(
        store.create_session(record("a")).await,
        Err(StoreError::Duplicate(_))
    ));
    // Writes from many tasks at once are committed together, each answered.
    let writes: Vec<_> = (0..50)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let id = format!("many-{n}");
                store.create_session(record(&id)).await?;
                store.append(&id, (1..=3).map(event).collect()).await
            })
        })
        .collect();
    for write in writes {
        write.await.unwrap().unwrap();
    }
    for n in 0..50 {
        assert_eq!(
            store
                .events(&format!("many-{n}"), 0, 10)
                .await
                .unwrap()
                .len(),
            3
        );
    }
    store
        .append("a", (1..=5).map(event).collect())
        .await
        .unwrap();
    assert!(matches!(
        store.append("a", vec![event(7)]).await,
        Err(StoreError::OutOfOrder {
            last: 5,
            got: 7,
            ..
        })
    ));
    assert!(matches!(
        store.append("a", vec![event(5)]).await,
        Err(StoreError::OutOfOrder { .. })
    ));
    assert!(matches!(
        store.append("zzz", vec![event(1)]).await,
        Err(StoreError::NotFound(_))
    ));
    store.set_native_session_id("a", "native-1").await.unwrap();
    store.set_agent_mode("a", "plan").await.unwrap();
    assert!(matches!(
        store.set_agent_mode("zzz", "plan").await,
        Err(StoreError::NotFound(_))
    ));
    drop(store);

    let store = url.open().await.unwrap();
    let sessions = store.sessions().await.unwrap();
    let first: Vec<_> = sessions
        .iter()
        .take(2)
        .map(|r| (r.id.as_str(), r.event_count))
        .collect();
    assert_eq!(
        (first, sessions.len()),
        (vec![("a", 5), ("b", 0)], 52),
        "in the order they were created"
    );
    assert_eq!(
        store.events("a", 2, 2).await.unwrap(),
        vec![event(3), event(4)]
    );
    assert_eq!(
        store
            .session("a")
            .await
            .unwrap()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some("native-1")
    );
    assert_eq!(
        store.session("a").await.unwrap().unwrap().agent_mode,
        "plan"
    );
    store.mark_ended("a", Some("why")).await.unwrap();
    assert_eq!(
        store
            .session("a")
            .await
            .unwrap()
            .unwrap()
            .end_error
            .as_deref(),
        Some("why")
    );
    assert!(matches!(
        store.events("zzz", 0, 10).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_session_left_live_is_served_whole_and_ended_with_an_error_by_the_next_server() {
    let dir = tempfile::tempdir().unwrap();
    let url = StoreUrl::Sqlite(dir.path().join("server.sqlite3"));
    let first = start_on(ServerConfig::default(), url.open().await.unwrap()).await;
    first.post("/v1/sessions/kept", scripted("text")).await;
    first
        .post(
            "/v1/sessions/kept/messages",
            json!({"message": "remember me"}),
        )
        .await;
    let served = first.wait_for("kept", "item.completed").await;
    let mut stream = first
        .sse(
            hyper::Method::GET,
            "/v1/sessions/kept/events/sse?include_raw=true",
            None,
            &[],
        )
        .await;
    let mut with_raw = Vec::new();
    while with_raw.len() < served.len() {
        with_raw.push(stream.next().await.unwrap().data);
    }
    let served = first.all_events("kept", 1000).await;

    // A second server on the same file, the first never having ended the session (as after a
    // SIGKILL; the real one is in agent_api/cli/tests/serve.rs).
    let second = start_on(ServerConfig::default(), url.open().await.unwrap()).await;
    let events = second.all_events("kept", 1000).await;
    assert_eq!(
        events[..served.len()],
        served[..],
        "every served event is there, unchanged"
    );
    let raw_page = second
        .get("/v1/sessions/kept/events?include_raw=true")
        .await
        .json();
    assert_eq!(
        raw_page["events"].as_array().unwrap()[..with_raw.len()],
        with_raw[..],
        "raw payloads too"
    );
    let tail = &events[served.len()..];
    assert_eq!(tail.len(), 2, "{tail:#?}");
    assert_eq!(
        (&tail[0]["type"], &tail[0]["data"]["message"]),
        (&json!("error"), &json!(INTERRUPTED))
    );
    assert_eq!(
        (
            &tail[1]["type"],
            &tail[1]["data"]["reason"],
            &tail[1]["data"]["terminated_by"]
        ),
        (&json!("session.ended"), &json!("error"), &json!("daemon"))
    );
    assert_eq!(tail[0]["sequence"], served.len() as u64 + 1);
    let info = second.get("/v1/sessions/kept").await.json();
    assert_eq!(
        (&info["ended"], &info["endError"], &info["live"]),
        (&json!(true), &json!(INTERRUPTED), &json!(false))
    );
    second
        .post("/v1/sessions/kept/messages", json!({"message": "again"}))
        .await
        .problem(409);
    second
        .post("/v1/sessions/kept", scripted("text"))
        .await
        .problem(409);
}
