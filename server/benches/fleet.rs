//! A fleet of `agent-api serve` processes on one PostgreSQL (issue 48): takeover time (the dead
//! owner's lease running out to the first event of the resumed session, p50/p99), the overhead of
//! a command handed to the owner (p99 of a permission reply sent to a server that does not run the
//! session against one sent to the owner), cross-server SSE latency (an event's arrival on a follower
//! of another server against one of the owner, p50/p99), and events/s of one server in a fleet of
//! three (the two others hearing every notification and following each of its sessions over SSE)
//! against the same server alone on a database of its own.
//!
//! `cargo bench -p agent_api_server --bench fleet`, with `AGENT_API_TEST_POSTGRES_URL` naming a
//! database (`tests/postgres/setup.sh`); the bench makes databases of its own beside it and drops
//! them. The servers are this binary started again (`AGENT_API_BENCH_FLEET_SERVER`), on the
//! scripted agent. Goals: added SSE p99 ≤ 20 ms; events/s in the fleet ≥ 80 % of alone. Names
//! after `--` (`forwarding`, `sse`, `throughput`, `takeover`) measure only those figures.

#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_api_server::ServerConfig;
use common::*;
use hyper::Method;
use serde_json::json;

const SERVER: &str = "AGENT_API_BENCH_FLEET_SERVER";
const NAME: &str = "AGENT_API_BENCH_FLEET_NAME";
const LISTENING: &str = "bench-server listening on http://";
const LEASE: Duration = Duration::from_secs(1);

fn serve_here(url: String) {
    let name = std::env::var(NAME).unwrap_or_else(|_| "bench".into());
    let config = ServerConfig::default()
        .with_daemon_id(name)
        .with_idle_release(None)
        .with_server_lease(LEASE)
        .with_heartbeat(Some(Duration::from_millis(200)));
    serve_scripted_until_sigterm(&url, config, LISTENING);
}

struct Node {
    process: std::process::Child,
    api: Api,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn start(url: &str, name: &str) -> Node {
    let mut process = Command::new(std::env::current_exe().unwrap())
        .env(SERVER, url)
        .env(NAME, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
    let address = loop {
        let line = lines
            .next()
            .expect("the server said where it listens")
            .unwrap();
        if let Some(address) = line.strip_prefix(LISTENING) {
            break address.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Node {
        process,
        api: Api::new(format!("http://{address}"), None),
    }
}

async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A fresh database beside `url`'s; its URL.
async fn fresh_database(url: &str) -> (String, String) {
    let name = unique("agent_api_bench_fleet").replace('-', "_");
    sql(url)
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    (format!("{base}/{name}"), name)
}

async fn drop_database(url: &str, name: &str) {
    let _ = sql(url)
        .await
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * p).round() as usize]
}

fn echo_session() -> serde_json::Value {
    json!({"agent": "scripted", "options": {"backend.scripted.scenario": "echo", "backend.scripted.delay_ms": 0}})
}

async fn create(api: &Api, id: &str) {
    let created = api
        .post(&format!("/v1/sessions/{id}"), echo_session())
        .await;
    assert_eq!(created.status, 200, "{:?}", created.body);
}

/// Sends a message and waits for its turn's end (read from `api`).
async fn turn(api: &Api, id: &str, message: &str) {
    let before = api.all_events(id, 1000).await.len();
    assert_eq!(
        api.post(
            &format!("/v1/sessions/{id}/messages"),
            json!({ "message": message })
        )
        .await
        .status,
        204
    );
    loop {
        let events = api.all_events(id, 1000).await;
        if events.iter().skip(before).any(turn_end) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The session's events after the first `seen`, once one of them is `found` (read from `api`).
async fn wait_after(
    api: &Api,
    id: &str,
    seen: usize,
    found: impl Fn(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + STEP;
    loop {
        let page = api
            .get(&format!(
                "/v1/sessions/{id}/events?offset={seen}&limit=1000"
            ))
            .await
            .json();
        let events = page["events"].as_array().unwrap().clone();
        if events.iter().any(&found) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{id}: nothing found after {seen}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// How many permission replies [`forwarding`] times, half through each server.
const REPLIES: usize = 200;

/// p50/p99 of a permission reply sent to the owner and of one sent to another server (which
/// hands it to the owner through the `commands` table and `NOTIFY`): each round, a scripted turn
/// on the owner asks one permission and its reply (only the reply is timed) goes to the owner
/// and to the other server in turn, so that both see the same machine over time.
async fn forwarding(owner: &Api, other: &Api) -> ((f64, f64), (f64, f64)) {
    let id = unique("forward");
    let permission = json!({"agent": "scripted", "permissionMode": "ask", "options": {"backend.scripted.scenario": "permission", "backend.scripted.delay_ms": 0}});
    let created = owner.post(&format!("/v1/sessions/{id}"), permission).await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    let mut seen = owner.all_events(&id, 1000).await.len();
    let (mut direct, mut handed) = (Vec::new(), Vec::new());
    for round in 0..REPLIES {
        let sent = owner
            .post(
                &format!("/v1/sessions/{id}/messages"),
                json!({"message": format!("round {round}")}),
            )
            .await;
        assert_eq!(sent.status, 204, "{:?}", sent.body);
        let asked = wait_after(owner, &id, seen, |e| e["type"] == "permission.requested").await;
        let asked = asked
            .iter()
            .find(|e| e["type"] == "permission.requested")
            .unwrap();
        let reply = format!(
            "/v1/sessions/{id}/permissions/{}/reply",
            asked["data"]["permission_id"].as_str().unwrap()
        );
        let (api, took) = match round % 2 {
            0 => (owner, &mut direct),
            _ => (other, &mut handed),
        };
        let started = Instant::now();
        let replied = api.post(&reply, json!({"reply": "once"})).await;
        took.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(replied.status, 204, "{:?}", replied.body);
        // The next round reads on from the turn's end (a late event of this one is no
        // permission request).
        seen += wait_after(owner, &id, seen, turn_end).await.len();
    }
    (
        (percentile(&mut direct, 0.5), percentile(&mut direct, 0.99)),
        (percentile(&mut handed, 0.5), percentile(&mut handed, 0.99)),
    )
}

/// Arrival of each event on a follower of the owner and on a follower of another server: the
/// second's lag behind the first, in ms (p50, p99).
async fn sse_latency(owner: &Api, other: &Api) -> (f64, f64) {
    let id = unique("sse");
    create(owner, &id).await;
    let path = format!("/v1/sessions/{id}/events/sse");
    let follow = |api: Api| {
        let path = path.clone();
        tokio::spawn(async move {
            let mut stream = api.sse(Method::GET, &path, None, &[]).await;
            let mut arrivals = Vec::new();
            while let Some(frame) = stream.next_or_cut(Duration::from_secs(5)).await {
                arrivals.push((frame.id.unwrap(), Instant::now()));
            }
            arrivals
        })
    };
    let (near, far) = (follow(owner.clone()), follow(other.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    for _ in 0..25 {
        turn(owner, &id, &words.join(" ")).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        owner
            .post_empty(&format!("/v1/sessions/{id}/terminate"))
            .await
            .status,
        204
    );
    let (near, far) = (near.await.unwrap(), far.await.unwrap());
    let near: std::collections::HashMap<u64, Instant> = near.into_iter().collect();
    let mut lag: Vec<f64> = far
        .into_iter()
        .filter_map(|(id, at)| {
            near.get(&id)
                .map(|n| at.saturating_duration_since(*n).as_secs_f64() * 1e3)
        })
        .collect();
    assert!(lag.len() > 100, "the followers saw the events");
    (percentile(&mut lag, 0.5), percentile(&mut lag, 0.99))
}

/// Events/s stored by `api`'s server: 8 sessions, each running turns of 200 words for `span`,
/// each followed over SSE through every server of `followers`.
async fn throughput(api: &Api, span: Duration, followers: &[Api]) -> f64 {
    let ids: Vec<String> = (0..8).map(|i| unique(&format!("load{i}"))).collect();
    let mut follows = Vec::new();
    for id in &ids {
        create(api, id).await;
        for follower in followers {
            let (follower, path) = (follower.clone(), format!("/v1/sessions/{id}/events/sse"));
            follows.push(tokio::spawn(async move {
                let mut stream = follower.sse(Method::GET, &path, None, &[]).await;
                let mut frames = 0usize;
                while stream.next_or_cut(Duration::from_secs(2)).await.is_some() {
                    frames += 1;
                }
                frames
            }));
        }
    }
    let words: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
    let message = words.join(" ");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for id in ids.clone() {
        let (api, message) = (api.clone(), message.clone());
        tasks.push(tokio::spawn(async move {
            while started.elapsed() < span {
                turn(&api, &id, &message).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    for follow in follows {
        let _ = follow.await;
    }
    let mut events = 0;
    for id in &ids {
        events += api.all_events(id, 1000).await.len();
    }
    events as f64 / seconds
}

/// Takeover times in ms: the killed owner's lease running out (its last heartbeat + the lease)
/// to the first event of the session brought back on another server.
async fn takeovers(url: &str, survivor: &Api, rounds: usize) -> Vec<f64> {
    let client = sql(url).await;
    let mut took = Vec::new();
    for round in 0..rounds {
        let name = unique(&format!("victim{round}"));
        let victim = start(url, &name);
        let id = unique("takeover");
        create(&victim.api, &id).await;
        turn(&victim.api, &id, "before").await;
        drop(victim); // SIGKILL
        loop {
            let sent = survivor
                .post(
                    &format!("/v1/sessions/{id}/messages"),
                    json!({"message": "after"}),
                )
                .await;
            if sent.status == 204 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let events = survivor.wait_for(&id, "item.completed").await;
        let seam = events
            .iter()
            .find(|e| e["data"]["item"]["content"][0]["label"] == "session_resumed")
            .expect("the seam");
        let row = client
            .query_one(
                "SELECT EXTRACT(EPOCH FROM heartbeat)::FLOAT8 FROM servers WHERE id LIKE $1 || '%'",
                &[&name],
            )
            .await
            .unwrap();
        let expired = row.get::<_, f64>(0) + LEASE.as_secs_f64();
        let at = time::OffsetDateTime::parse(
            seam["time"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let first = at.unix_timestamp_nanos() as f64 / 1e9;
        took.push((first - expired) * 1e3);
    }
    took
}

fn main() {
    if let Ok(url) = std::env::var(SERVER) {
        serve_here(url);
        return;
    }
    let Some(url) = database() else { return };
    // `cargo bench … --bench fleet -- takeover` measures only the figures named (forwarding, sse,
    // throughput, takeover): one figure is re-measured without the minutes of the others.
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted = |figure: &str| named.is_empty() || named.iter().any(|n| n == figure);
    tokio::runtime::Runtime::new().unwrap().block_on(async move {
        let span = Duration::from_secs(8);
        // Alone: one server on a database of its own.
        let alone_rate = if wanted("throughput") {
            let (alone_url, alone_db) = fresh_database(&url).await;
            let alone = start(&alone_url, "alone");
            let rate = throughput(&alone.api, span, &[]).await;
            drop(alone);
            drop_database(&url, &alone_db).await;
            Some(rate)
        } else {
            None
        };

        let (fleet_url, fleet_db) = fresh_database(&url).await;
        let nodes: Vec<Node> = (0..3).map(|i| start(&fleet_url, &format!("fleet{i}"))).collect();
        if wanted("forwarding") {
            let ((d50, d99), (h50, h99)) = forwarding(&nodes[0].api, &nodes[1].api).await;
            println!(
                "forwarding ({} permission replies, half each way): to the owner p50 {d50:.2} ms p99 {d99:.2} ms; to another server p50 {h50:.2} ms p99 {h99:.2} ms (added p99 {:.2} ms)",
                REPLIES,
                h99 - d99
            );
        }
        if wanted("sse") {
            let (s50, s99) = sse_latency(&nodes[0].api, &nodes[2].api).await;
            println!("cross-server SSE: added p50 {s50:.2} ms p99 {s99:.2} ms");
        }
        if let Some(alone_rate) = alone_rate {
            // In the fleet: the other two hear every notification and follow each session over SSE.
            let followers = [nodes[1].api.clone(), nodes[2].api.clone()];
            let fleet_rate = throughput(&nodes[0].api, span, &followers).await;
            println!(
                "events/s: alone {alone_rate:.0}, in a fleet of three (each session followed over SSE on both others) {fleet_rate:.0} ({:.0} %)",
                fleet_rate / alone_rate * 100.0
            );
        }
        if wanted("takeover") {
            let mut took = takeovers(&fleet_url, &nodes[1].api, 10).await;
            println!(
                "takeover (lease expiry to first resumed event, 1 s lease, a client retrying every 20 ms): p50 {:.0} ms p99 {:.0} ms",
                percentile(&mut took, 0.5),
                percentile(&mut took, 0.99)
            );
        }
        drop(nodes);
        drop_database(&url, &fleet_db).await;
    });
}
