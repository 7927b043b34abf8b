//! `agent-api serve` under load (issue 36): events/s over SSE to one subscriber against the
//! library's own in-process stream; the latency each event gains on its way (its `time` stamp to
//! its arrival, p50 and p99); 100 subscribers on one session; 100 live sessions (RSS each), 1,000
//! live idle sessions (RSS each, time to create one), 1,000 open idle sessions whose agents were
//! released (RSS each) and 1,000 stored ones (time to list); the store's sustained write rate on
//! SQLite and PostgreSQL.
//!
//! `cargo bench -p agent_api_server --bench serve` (`-- live_idle`: the live idle sessions only).
//! The agent is the scripted one (`echo`: the prompt's words streamed one event each), so the
//! figures are the pipeline's, not a model's. PostgreSQL is measured when
//! `AGENT_API_TEST_POSTGRES_URL` names a database (`tests/postgres/setup.sh`). Targets: ≥ 50,000
//! events/s over SSE; p99 added ≤ 1 ms with the memory store, ≤ 5 ms with SQLite; a live idle
//! session < 65 KB and its creation ≤ 1.6 ms (the seeds' daemon's, issue 53).

#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_api::RunRequest;
use agent_api_server::{ServerConfig, Store, StoreUrl};
use futures::StreamExt;
use hyper::Method;
use serde_json::json;

const WORDS: usize = 50_000;
const PACED_WORDS: usize = 2_000;

fn scripted_request(delay_ms: u64) -> RunRequest {
    RunRequest::new("")
        .with_options(&agent_api_scripted::ScriptedOptions::scenario("echo").delay_ms(delay_ms))
}

fn gateway() -> agent_api::Gateway {
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
        .unwrap();
    gateway
}

/// Microseconds from an event's RFC 3339 `time` to now.
fn age_us(time: &str) -> f64 {
    let stamped =
        time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339).unwrap();
    (time::OffsetDateTime::now_utc() - stamped).as_seconds_f64() * 1e6
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * p).round() as usize]
}

/// One turn of `words` words through the library itself: (events, seconds, ages in µs).
async fn in_process(words: usize, delay_ms: u64) -> (usize, f64, Vec<f64>) {
    let mut session = gateway()
        .open_session(&agent_api_scripted::KIND, scripted_request(delay_ms))
        .await
        .unwrap();
    let prompt = "word ".repeat(words);
    let started = Instant::now();
    let (mut events, completion) = session.send(prompt).await.unwrap().into_universal();
    let mut ages = Vec::new();
    let mut count = 0;
    while let Some(event) = events.next().await {
        ages.push(age_us(&event.time));
        count += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    completion.await.unwrap();
    (count, elapsed, ages)
}

/// One turn of `words` words through a server on `store`, streamed to one SSE subscriber.
async fn over_sse(store: Arc<dyn Store>, words: usize, delay_ms: u64) -> (usize, f64, Vec<f64>) {
    let api = common::start_on(ServerConfig::default(), store).await;
    let body = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "echo", "backend.scripted.delay_ms": delay_ms}});
    assert_eq!(api.post("/v1/sessions/bench", body).await.status, 200);
    let prompt = "word ".repeat(words);
    let started = Instant::now();
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/bench/messages/stream",
            Some(json!({ "message": prompt })),
            &[],
        )
        .await;
    let mut ages = Vec::new();
    while let Some(frame) = stream.next().await {
        ages.push(age_us(frame.data["time"].as_str().unwrap()));
    }
    (ages.len(), started.elapsed().as_secs_f64(), ages)
}

fn report_rate(what: &str, (count, seconds, _): &(usize, f64, Vec<f64>)) {
    println!(
        "{what:<44} {count:>7} events in {seconds:>6.3} s: {:>9.0} events/s",
        *count as f64 / seconds
    );
}

fn report_latency(what: &str, (_, _, ages): &mut (usize, f64, Vec<f64>)) -> f64 {
    let (p50, p99) = (percentile(ages, 0.5), percentile(ages, 0.99));
    println!("{what:<44} event time to arrival: p50 {p50:>8.0} µs, p99 {p99:>8.0} µs");
    p99
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

async fn sqlite(dir: &tempfile::TempDir, name: &str) -> Arc<dyn Store> {
    StoreUrl::Sqlite(dir.path().join(name))
        .open()
        .await
        .unwrap()
}

/// Appends `total` events in batches of `batch` to fresh sessions; events/s.
async fn write_rate(store: Arc<dyn Store>, prefix: &str, total: u64, batch: u64) -> f64 {
    let payload = "x".repeat(250);
    let sessions = 8;
    let started = Instant::now();
    let writers: Vec<_> = (0..sessions)
        .map(|n| {
            let (store, id, payload) = (store.clone(), format!("{prefix}-{n}"), payload.clone());
            tokio::spawn(async move {
                store
                    .create_session(common::record(&id, Some("the-bench")))
                    .await
                    .unwrap();
                let mut next = 1;
                while next <= total / sessions {
                    let events = (next..next + batch)
                        .map(|sequence| agent_api_server::store::StoredEvent {
                            sequence,
                            json: format!(
                                r#"{{"sequence":{sequence},"pad":"{payload}","raw":null}}"#
                            )
                            .into(),
                            raw: None,
                        })
                        .collect();
                    store.append(&id, events).await.unwrap();
                    next += batch;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// Sessions created and left idle (no message: the agent started, `session.started` stored),
/// memory store, as the seeds' daemon was measured beside ours (issue 53): what one costs in RSS,
/// and how long `POST /v1/sessions/{id}` takes.
async fn live_idle_sessions() {
    const SESSIONS: usize = 1_000;
    println!("# {SESSIONS} live idle sessions (created, no message), memory store");
    let config = ServerConfig::default().with_max_sessions(SESSIONS);
    let api = common::start_on(config, StoreUrl::Memory.open().await.unwrap()).await;
    // A first session outside the figures: the server's lazily made parts are made.
    assert_eq!(
        api.post("/v1/sessions/warm", common::scripted("text"))
            .await
            .status,
        200
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();
    let mut times = Vec::with_capacity(SESSIONS);
    for n in 1..SESSIONS {
        let started = Instant::now();
        let created = api
            .post(
                &format!("/v1/sessions/idle-live-{n}"),
                common::scripted("text"),
            )
            .await;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(created.status, 200);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let per_session = (rss_kib().saturating_sub(before)) as f64 * 1024.0 / (SESSIONS - 1) as f64;
    println!(
        "RSS per live idle session: {:.1} KB ({:.1} KiB)",
        per_session / 1000.0,
        per_session / 1024.0
    );
    let (p50, p99) = (percentile(&mut times, 0.5), percentile(&mut times, 0.99));
    println!("POST /v1/sessions/{{id}} (create a live session): p50 {p50:.2} ms, p99 {p99:.2} ms");
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // `cargo test --all-targets` runs benches too, without `--bench`: not the place for figures.
    if !std::env::args().any(|a| a == "--bench") {
        println!("serve benchmark: run it with `cargo bench -p agent_api_server --bench serve`");
        return;
    }
    // `-- live_idle`: that part alone (a figure of its own, quicker to take again).
    if std::env::args().skip(1).any(|a| a == "live_idle") {
        live_idle_sessions().await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    println!("# throughput: one turn of {WORDS} words, no pause, one subscriber");
    report_rate("library, in process", &in_process(WORDS, 0).await);
    report_rate(
        "server, memory store, SSE",
        &over_sse(StoreUrl::Memory.open().await.unwrap(), WORDS, 0).await,
    );
    report_rate(
        "server, SQLite store, SSE",
        &over_sse(sqlite(&dir, "throughput.sqlite3").await, WORDS, 0).await,
    );

    println!("# latency: {PACED_WORDS} words 1 ms apart");
    let base = report_latency("library, in process", &mut in_process(PACED_WORDS, 1).await);
    let memory = report_latency(
        "server, memory store, SSE",
        &mut over_sse(StoreUrl::Memory.open().await.unwrap(), PACED_WORDS, 1).await,
    );
    let sqlite_p99 = report_latency(
        "server, SQLite store, SSE",
        &mut over_sse(sqlite(&dir, "latency.sqlite3").await, PACED_WORDS, 1).await,
    );
    println!(
        "p99 added: memory {:.0} µs, SQLite {:.0} µs",
        memory - base,
        sqlite_p99 - base
    );

    println!("# 100 subscribers on one session, {} words", WORDS / 10);
    let api = common::start_on(
        ServerConfig::default().with_subscribers(1024, 128),
        StoreUrl::Memory.open().await.unwrap(),
    )
    .await;
    api.post(
        "/v1/sessions/fan",
        json!({"agent": "scripted", "options": {"backend.scripted.scenario": "echo", "backend.scripted.delay_ms": 0}}),
    )
    .await;
    // Every subscriber reads from the start, before the turn begins.
    let mut readers = Vec::new();
    for _ in 0..100 {
        let mut stream = api
            .sse(Method::GET, "/v1/sessions/fan/events/sse", None, &[])
            .await;
        readers.push(tokio::spawn(async move {
            let mut count = 0usize;
            while let Some(frame) = stream.next().await {
                count += 1;
                if frame.data["type"] == "item.completed"
                    && frame.data["data"]["item"]["content"][0]["label"] == "turn_completed"
                {
                    break;
                }
            }
            count
        }));
    }
    let started = Instant::now();
    api.post(
        "/v1/sessions/fan/messages",
        json!({ "message": "word ".repeat(WORDS / 10) }),
    )
    .await;
    let mut delivered = 0;
    for reader in readers {
        delivered += reader.await.unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{delivered} events delivered in {seconds:.3} s: {:.0} events/s in all, {:.0} events/s per subscriber",
        delivered as f64 / seconds,
        delivered as f64 / seconds / 100.0
    );

    println!("# 100 live sessions, 1,000 stored");
    let store = sqlite(&dir, "scale.sqlite3").await;
    let api = common::start_on(ServerConfig::default(), store.clone()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();
    for n in 0..100 {
        assert_eq!(
            api.post(&format!("/v1/sessions/live-{n}"), common::scripted("text"))
                .await
                .status,
            200
        );
        api.post(
            &format!("/v1/sessions/live-{n}/messages"),
            json!({"message": "hi"}),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "RSS per live session: {:.1} KiB",
        (rss_kib() - before) as f64 / 100.0
    );
    live_idle_sessions().await;
    println!("# 1,000 open idle sessions, their agents released (--idle-release)");
    let idle_store = sqlite(&dir, "idle.sqlite3").await;
    let config = ServerConfig::default().with_idle_release(Some(Duration::from_millis(100)));
    let idle = common::start_on(config, idle_store.clone()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before_idle = rss_kib();
    for n in 0..1000 {
        idle.post(&format!("/v1/sessions/idle-{n}"), common::scripted("text"))
            .await;
        idle.post(
            &format!("/v1/sessions/idle-{n}/messages"),
            json!({"message": "hi"}),
        )
        .await;
    }
    let released = loop {
        let listed = idle.get("/v1/sessions").await.json();
        let states = listed["sessions"].as_array().unwrap();
        let count = states.iter().filter(|s| s["state"] == "idle").count();
        if count == 1000 {
            break count;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "RSS per open idle session ({released} released, their snapshots kept): {:.1} KiB",
        (rss_kib().saturating_sub(before_idle)) as f64 / 1000.0
    );
    for n in 0..900 {
        let id = format!("stored-{n}");
        store
            .create_session(common::record(&id, Some("the-bench")))
            .await
            .unwrap();
        store
            .append(&id, (1..=20).map(common::event).collect())
            .await
            .unwrap();
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let listed = api.get("/v1/sessions").await.json();
        times.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(listed["sessions"].as_array().unwrap().len(), 1000);
    }
    println!(
        "GET /v1/sessions with 1,000 sessions: median {:.1} ms",
        percentile(&mut times, 0.5)
    );

    println!("# store write rate: 8 sessions, batches of 100 events of ~300 bytes");
    println!(
        "SQLite: {:.0} events/s",
        write_rate(sqlite(&dir, "writes.sqlite3").await, "w", 200_000, 100).await
    );
    match std::env::var("AGENT_API_TEST_POSTGRES_URL") {
        Ok(url) => {
            let prefix = format!("bench-{}", std::process::id());
            println!(
                "PostgreSQL: {:.0} events/s",
                write_rate(StoreUrl::parse(&url).unwrap().open().await.unwrap(), &prefix, 200_000, 100).await
            );
        }
        Err(_) => println!("PostgreSQL: not measured (AGENT_API_TEST_POSTGRES_URL is not set: bash tests/postgres/setup.sh)"),
    }
}
