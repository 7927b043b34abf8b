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
