//! `GET /v1/health` and `GET /v1/health/ready`: without a token, holding no data; readiness false
//! while the store refuses a write or has another schema, while the server drains, and at the
//! bound of live sessions. (Readiness against a PostgreSQL server that stops and starts again:
//! `postgres.rs`.)

mod common;

use std::time::Duration;

use agent_api_server::{ServerConfig, StoreUrl};
use common::*;
use serde_json::{json, Value};

/// The readiness answer: its HTTP status and each check's `(name, ok, reason)`.
async fn readiness(api: &Api) -> (u16, Vec<(String, bool, Option<String>)>) {
    let answer = api.with_token(None).get("/v1/health/ready").await;
    assert_eq!(answer.headers["cache-control"], "no-store");
    let body = answer.json();
    let status = answer.status.as_u16();
    assert_eq!(
        body["status"],
        if status == 200 { "ready" } else { "not_ready" },
        "{body}"
    );
    let checks = body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["ok"].as_bool().unwrap(),
                c["reason"].as_str().map(String::from),
            )
        })
        .collect();
    (status, checks)
}

fn failing(checks: &[(String, bool, Option<String>)]) -> Vec<(&str, &str)> {
    checks
        .iter()
        .filter(|(_, ok, _)| !ok)
        .map(|(name, _, reason)| (name.as_str(), reason.as_deref().unwrap_or("")))
        .collect()
}

#[tokio::test]
async fn health_and_readiness_answer_without_a_token_and_hold_no_data() {
    let api = start(ServerConfig::default().with_token("s3cret")).await;
    assert_eq!(
        api.post("/v1/sessions/private-session-name", scripted("text"))
            .await
            .status,
        200
    );
    let anonymous = api.with_token(None);
    let health = anonymous.get("/v1/health").await;
    assert_eq!(health.json(), json!({"status": "ok"}));
    let ready = anonymous.get("/v1/health/ready").await;
    assert_eq!(ready.status, 200);
    assert_eq!(
        ready.json(),
        json!({"status": "ready", "checks": [
            {"name": "store", "ok": true},
            {"name": "draining", "ok": true},
            {"name": "sessions", "ok": true},
        ]})
    );
    let text = String::from_utf8_lossy(&ready.body);
    assert!(!text.contains("private-session-name"), "{text}");
}

#[tokio::test]
async fn readiness_is_false_while_the_sqlite_store_has_a_schema_of_another_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sqlite3");
    let store = StoreUrl::Sqlite(path.clone()).open().await.unwrap();
    let api = start_on(ServerConfig::default(), store).await;
    assert_eq!(readiness(&api).await.0, 200);
    let other = rusqlite::Connection::open(&path).unwrap();
    let known: u64 = other
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    // A newer agent-api migrated the file under this server.
    other
        .pragma_update(None, "user_version", known + 1)
        .unwrap();
    let (status, checks) = readiness(&api).await;
    assert_eq!(
        (status, failing(&checks)),
        (503, vec![("store", "migrations")])
    );
    other.pragma_update(None, "user_version", known).unwrap();
    assert_eq!(readiness(&api).await.0, 200);
}

#[tokio::test]
async fn readiness_is_false_at_the_bound_of_live_sessions_and_true_once_one_ends() {
    let api = start(ServerConfig::default().with_max_sessions(1)).await;
    assert_eq!(readiness(&api).await.0, 200);
    assert_eq!(
        api.post("/v1/sessions/one", scripted("text")).await.status,
        200
    );
    let (status, checks) = readiness(&api).await;
    assert_eq!(
        (status, failing(&checks)),
        (503, vec![("sessions", "full")])
    );
    assert_eq!(
        api.post_empty("/v1/sessions/one/terminate").await.status,
        204
    );
    assert_eq!(readiness(&api).await.0, 200);
}

#[tokio::test]
async fn a_server_asked_to_stop_serves_on_not_ready_for_its_drain_time() {
    let config = ServerConfig::default().with_drain(Duration::from_secs(3));
    let gateway = {
        let mut gateway = agent_api::Gateway::new();
        gateway
            .register(std::sync::Arc::new(
                agent_api_scripted::ScriptedBackend::new(),
            ))
            .unwrap();
        gateway
    };
    let store = StoreUrl::Memory.open().await.unwrap();
    let server =
        agent_api_server::Server::new(gateway, agent_api::RunRequest::new(""), store, config)
            .await
            .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api::new(format!("http://{}", listener.local_addr().unwrap()), None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(agent_api_server::serve(listener, server, async move {
        let _ = stopped.await;
    }));
    assert_eq!(readiness(&api).await.0, 200);
    let started = tokio::time::Instant::now();
    stop.send(()).unwrap();
    let (status, checks) = readiness(&api).await;
    assert_eq!(
        (status, failing(&checks)),
        (503, vec![("draining", "stopping")])
    );
    assert_eq!(api.get("/v1/health").await.status, 200, "still serving");
    let sessions: Value = api.get("/v1/sessions").await.json();
    assert!(sessions["sessions"].is_array());
    tokio::time::timeout(STEP, served)
        .await
        .expect("the server stops after its drain time")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3));
}
