//! The SQLite store under the server: order, no gap, no duplicate, and what was written is there
//! when it is opened again (a session outliving its server: `continuity.rs`).

mod common;

use agent_api_server::{StoreError, StoreUrl};
use common::*;

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
async fn tokens_are_made_and_revoked_beside_a_running_server_and_kept_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sqlite3");
    let url = StoreUrl::Sqlite(path.clone());
    // The server holds the file; `agent-api token` opens it beside, without the server's lock.
    let store = url.open().await.unwrap();
    let beside = url.open_tokens().await.unwrap();
    token_checks(store.clone(), beside, "tenanted").await;
    // Nothing in the file holds a token: made one more, its bytes are not there.
    let issued =
        agent_api_server::tokens::issue(None, agent_api_server::tokens::Scope::Admin).unwrap();
    store
        .token_store()
        .unwrap()
        .create_token(issued.record.clone())
        .await
        .unwrap();
    drop(store);
    let mut bytes = Vec::new();
    for suffix in ["", "-wal"] {
        let mut name = path.clone().into_os_string();
        name.push(suffix);
        bytes.extend(std::fs::read(&name).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains(&issued.record.hash), "the hash is stored");
    assert!(!text.contains(&issued.token), "the token is not");
    // A memory store keeps nothing past the command: refused for `agent-api token`.
    assert!(StoreUrl::Memory.open_tokens().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_writes_never_fail_locked_while_tokens_are_written_on_their_own_connection() {
    // The server's writer reads then writes in one transaction (does this session exist? then
    // insert it); a token's use recorded on the tokens' own connection (every request with a
    // stored token, at most once a minute each) or `agent-api token` beside the server commits
    // between the two. A transaction begun as a reader then cannot write ("database is
    // locked", at once: SQLite's busy wait does not apply), so the writer takes the write lock
    // when it begins.
    let dir = tempfile::tempdir().unwrap();
    let url = StoreUrl::Sqlite(dir.path().join("server.sqlite3"));
    let store = url.open().await.unwrap();
    let beside = url.open_tokens().await.unwrap();
    let issued =
        agent_api_server::tokens::issue(Some("a"), agent_api_server::tokens::Scope::Read).unwrap();
    beside.create_token(issued.record.clone()).await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut token_writers = Vec::new();
    for tokens in [store.clone(), store.clone()] {
        let (id, stop) = (issued.record.id.clone(), stop.clone());
        token_writers.push(tokio::spawn(async move {
            let mut at = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                at += 1;
                tokens
                    .token_store()
                    .unwrap()
                    .token_used(&id, at)
                    .await
                    .unwrap();
            }
        }));
    }
    let (id, stop_beside) = (issued.record.id.clone(), stop.clone());
    token_writers.push(tokio::spawn(async move {
        let mut at = 0;
        while !stop_beside.load(std::sync::atomic::Ordering::Relaxed) {
            at += 1;
            beside.token_used(&id, at).await.unwrap();
        }
    }));
    let mut failed = Vec::new();
    for n in 0..1000 {
        if let Err(error) = store.create_session(record(&format!("s-{n}"))).await {
            failed.push(format!("s-{n}: {error}"));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in token_writers {
        writer.await.unwrap();
    }
    assert!(failed.is_empty(), "{} failed: {failed:?}", failed.len());
    assert_eq!(store.sessions().await.unwrap().len(), 1000);
}

#[tokio::test]
async fn the_memory_store_keeps_tokens_and_tenants() {
    // The memory store lives in the server's process: its own handle makes and revokes.
    let memory = std::sync::Arc::new(agent_api_server::store::MemoryStore::default());
    token_checks(memory.clone(), memory, "tenanted").await;
}
