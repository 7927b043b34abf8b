//! `GET /metrics`: behind the token, in the OpenMetrics text format, its figures moving with the
//! sessions; and scraped by a real Prometheus server (Debian's package, set up by
//! `tests/prometheus/setup.sh`), whose query API then answers turns by agent.

mod common;

use std::time::Duration;

use agent_api_server::ServerConfig;
use common::*;
use hyper::Method;
use serde_json::{json, Value};

/// The value of the sample `name` (with its labels, as the text format writes them), if present.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

async fn scrape(api: &Api) -> String {
    let answer = api.get("/metrics").await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    String::from_utf8(answer.body.to_vec()).unwrap()
}

#[tokio::test]
async fn metrics_are_behind_the_token_and_follow_turns_waits_and_streams() {
    let api = start(ServerConfig::default().with_token("s3cret")).await;
    api.with_token(None).get("/metrics").await.problem(401);
    let text = scrape(&api).await;
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(sample(&text, "agent_api_sessions_live"), Some(0.0));

    // A turn that waits on a permission request: one waiting, then none once replied.
    assert_eq!(
        api.post("/v1/sessions/m1", scripted("permission"))
            .await
            .status,
        200
    );
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/m1/messages/stream",
            Some(json!({"message": "a prompt that is never a label"})),
            &[],
        )
        .await;
    let asked = stream.rest().await.pop().unwrap().data;
    assert_eq!(asked["type"], "permission.requested");
    let text = scrape(&api).await;
    assert_eq!(sample(&text, "agent_api_sessions_live"), Some(1.0));
    assert_eq!(
        sample(&text, r#"agent_api_turns_started_total{agent="scripted"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"agent_api_human_requests_waiting{kind="permission"}"#
        ),
        Some(1.0)
    );
    let mut following = api
        .sse(Method::GET, "/v1/sessions/m1/events/sse", None, &[])
        .await;
    assert_eq!(following.next().await.unwrap().id, Some(1));
    assert_eq!(
        sample(&scrape(&api).await, "agent_api_sse_subscribers"),
        Some(1.0)
    );
    let id = asked["data"]["permission_id"].as_str().unwrap();
    let replied = api
        .post(
            &format!("/v1/sessions/m1/permissions/{id}/reply"),
            json!({"reply": "once"}),
        )
        .await;
    assert_eq!(replied.status, 204);
    wait_turns(&api, "m1", 1).await;
    assert_eq!(
        api.post_empty("/v1/sessions/m1/terminate").await.status,
        204
    );
    following.rest().await;
    drop(following);

    let deadline = tokio::time::Instant::now() + STEP;
    let text = loop {
        let text = scrape(&api).await;
        if sample(&text, "agent_api_sse_subscribers") == Some(0.0) {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        sample(
            &text,
            r#"agent_api_turns_ended_total{agent="scripted",outcome="completed"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"agent_api_human_requests_waiting{kind="permission"}"#
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"agent_api_human_wait_seconds_count{kind="permission"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"agent_api_turn_duration_seconds_count{agent="scripted"}"#
        ),
        Some(1.0)
    );
    assert!(
        sample(
            &text,
            r#"agent_api_store_write_seconds_count{operation="append"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    for kind in ["input", "output"] {
        let name =
            format!(r#"agent_api_tokens_total{{agent="scripted",model="unknown",kind="{kind}"}}"#);
        assert!(
            sample(&text, &name).is_some_and(|n| n > 0.0),
            "{name}: {text}"
        );
    }
    assert_eq!(sample(&text, "agent_api_sessions_live"), Some(0.0));
    assert!(!text.contains("m1") && !text.contains("prompt"), "{text}");
}

/// Waits until `session` has `turns` turns ended (its `turn.ended`-like end: the run's last
/// event is stored), by the session's info.
async fn wait_turns(api: &Api, session: &str, turns: usize) {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let events = api.all_events(session, 1000).await;
        let ended = events
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["role"] == "assistant")
            .count();
        let info: Value = api.get(&format!("/v1/sessions/{session}")).await.json();
        if ended >= turns && info["live"] == true {
            let text = scrape(api).await;
            let done = text
                .lines()
                .filter(|l| l.starts_with("agent_api_turns_ended_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>();
            if done >= turns as f64 {
                return;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "{events:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Prometheus server of the test's own, on a loopback port; killed when dropped.
struct Prometheus {
    child: std::process::Child,
    api: Api,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts one scraping `target` (host:port) every second with the bearer `token`.
    async fn start(target: &str, token: &str) -> Option<Self> {
        if std::env::var("AGENT_API_PROMETHEUS").as_deref() == Ok("skip") {
            eprintln!("SKIPPED: AGENT_API_PROMETHEUS=skip: the Prometheus scrape test did not run");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: agent_api\n    metrics_path: /metrics\n    authorization:\n      type: Bearer\n      credentials: {token}\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run prometheus ({e}): run `bash tests/prometheus/setup.sh` (tests/run.sh does), which installs Debian's prometheus package"));
        let prometheus = Self {
            child,
            api: Api::new(format!("http://127.0.0.1:{port}"), None),
            _dir: dir,
        };
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            // Listening first: the client fails a test on a refused connection.
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
                && prometheus.api.get("/-/ready").await.status == 200
            {
                return Some(prometheus);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "prometheus is not ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The instant query `query`'s result.
    async fn query(&self, query: &str) -> Vec<Value> {
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => char::from(b).to_string(),
                other => format!("%{other:02X}"),
            })
            .collect();
        let answer = self
            .api
            .get(&format!("/api/v1/query?query={encoded}"))
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        let body = answer.json();
        assert_eq!(body["status"], "success", "{body}");
        body["data"]["result"].as_array().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_scrapes_the_metrics_and_its_query_api_answers_turns_by_agent() {
    let api = start(ServerConfig::default().with_token("scrape-token")).await;
    let target = api.base.trim_start_matches("http://").to_string();
    let Some(prometheus) = Prometheus::start(&target, "scrape-token").await else {
        return;
    };
    assert_eq!(
        api.post("/v1/sessions/p1", scripted("text")).await.status,
        200
    );
    for message in ["one", "two"] {
        let mut stream = api
            .sse(
                Method::POST,
                "/v1/sessions/p1/messages/stream",
                Some(json!({ "message": message })),
                &[],
            )
            .await;
        stream.rest().await;
    }
    wait_turns(&api, "p1", 2).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let up = prometheus.query(r#"up{job="agent_api"}"#).await;
        let turns = prometheus
            .query("sum by (agent) (agent_api_turns_ended_total)")
            .await;
        let by_agent: Vec<(String, String)> = turns
            .iter()
            .map(|r| {
                (
                    r["metric"]["agent"].as_str().unwrap_or("").to_string(),
                    r["value"][1].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        if by_agent == [("scripted".to_string(), "2".to_string())] {
            assert_eq!(up[0]["value"][1], "1", "the scrape with the token is up");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus never saw the two turns: up {up:?}, turns {by_agent:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
