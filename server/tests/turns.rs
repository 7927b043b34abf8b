//! Turns easy to follow over HTTP, and what the reference's clients expect (issue 53, items 1 and
//! 2): `session.started` at creation, messages queued while a turn runs (FIFO, bounded, dropped by
//! a cancel), and `POST …/messages?wait=true` / `GET …/turns/{n}` answering with a turn's outcome.

mod common;

use std::time::Duration;

use agent_api_server::ServerConfig;
use common::{scripted, start, STEP};
use serde_json::{json, Value};

/// A scripted session's creation body playing `scenario`, `delay_ms` between words.
fn slow(scenario: &str, delay_ms: u64) -> Value {
    json!({ "agent": "scripted", "options": { "backend.scripted.scenario": scenario, "backend.scripted.delay_ms": delay_ms } })
}

/// The `turn N` details of the session's turn delimiters labelled `label`, in order.
fn delimiters(events: &[Value], label: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["source"] == "daemon")
        .filter_map(|e| {
            let status = &e["data"]["item"]["content"][0];
            (status["label"] == label).then(|| status["detail"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The text of every user message of the session, in order.
fn user_messages(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["role"] == "user")
        .map(|e| {
            e["data"]["item"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>()
        })
        .collect()
}

/// Waits until the session has `n` turns ended.
async fn turns_ended(api: &common::Api, session: &str, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + STEP * 3;
    loop {
        let events = api.all_events(session, 1000).await;
        if events.iter().filter(|e| common::turn_end(e)).count() >= n {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {n} turns ended: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Posts `message` to session `session` as `POST …/messages?{query}` (a `wait=true` with its
/// bound, say) and returns the answer.
async fn send(api: &common::Api, session: &str, query: &str, message: &str) -> common::Answer {
    api.post(
        &format!("/v1/sessions/{session}/messages?{query}"),
        json!({ "message": message }),
    )
    .await
}

#[tokio::test]
async fn session_started_is_stored_when_the_session_is_created_and_stays_the_only_one() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/s", scripted("text")).await;
    // Before any message: a client that creates a session and reads its events sees it.
    let events = api.all_events("s", 100).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["type"], "session.started");
    assert_eq!(events[0]["sequence"], 1);
    assert_eq!(events[0]["source"], "daemon");
    assert_eq!(events[0]["data"]["metadata"]["agent"], "scripted");
    assert_eq!(
        api.post("/v1/sessions/s/messages", json!({"message": "hi"}))
            .await
            .status,
        204
    );
    let events = turns_ended(&api, "s", 1).await;
    let started: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "session.started")
        .collect();
    assert_eq!(started.len(), 1, "one session.started: {events:#?}");
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"], index as u64 + 1, "no gap: {events:#?}");
    }
}

#[tokio::test]
async fn installing_an_unknown_agent_is_400_unsupported_agent_as_the_reference_answers() {
    let api = start(ServerConfig::default()).await;
    let problem = api
        .post_empty("/v1/agents/no-such-agent/install")
        .await
        .problem(400);
    assert_eq!(problem["type"], "urn:agent-api:error:unsupported_agent");
    assert_eq!(
        api.post_empty("/v1/agents/scripted/install").await.status,
        204
    );
}

#[tokio::test]
async fn messages_posted_during_a_turn_are_queued_and_run_in_order_each_its_own_turn() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/q", slow("text", 30)).await;
    // Back to back, as the reference's clients post: none refused.
    for message in ["first", "second", "third"] {
        assert_eq!(
            api.post("/v1/sessions/q/messages", json!({ "message": message }))
                .await
                .status,
            204,
            "{message}"
        );
    }
    let info = api.get("/v1/sessions/q").await.json();
    assert!(
        info["queued"].as_u64().unwrap() >= 1,
        "the queue is visible while the first turn runs: {info}"
    );
    let events = turns_ended(&api, "q", 3).await;
    assert_eq!(user_messages(&events), ["first", "second", "third"]);
    assert_eq!(
        delimiters(&events, "turn_started"),
        ["turn 1", "turn 2", "turn 3"]
    );
    assert_eq!(
        delimiters(&events, "turn_completed"),
        ["turn 1", "turn 2", "turn 3"]
    );
    // Turns never interleave: each one's start follows the previous one's end.
    let positions: Vec<(usize, &str)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let label = e["data"]["item"]["content"][0]["label"].as_str()?;
            (e["source"] == "daemon" && e["type"] == "item.completed")
                .then_some((i, label))
                .filter(|(_, l)| *l == "turn_started" || *l == "turn_completed")
        })
        .collect();
    let labels: Vec<&str> = positions.iter().map(|(_, l)| *l).collect();
    assert_eq!(
        labels,
        [
            "turn_started",
            "turn_completed",
            "turn_started",
            "turn_completed",
            "turn_started",
            "turn_completed"
        ]
    );
    let info = api.get("/v1/sessions/q").await.json();
    assert_eq!(info["queued"], 0, "{info}");
}

#[tokio::test]
async fn past_the_queue_bound_a_message_is_429_queue_full_and_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let api = common::start_in(ServerConfig::default().with_max_queue(1), dir.path()).await;
    api.post("/v1/sessions/b", slow("slow", 100)).await;
    let post = |message: Value| {
        let api = api.clone();
        async move { api.post("/v1/sessions/b/messages", message).await }
    };
    assert_eq!(post(json!({"message": "runs"})).await.status, 204);
    assert_eq!(post(json!({"message": "queued"})).await.status, 204);
    // Checked before its images: a missing file would be 400 `images[0]` once read.
    let problem = post(json!({"message": "one too many", "images": [{"path": "missing.png"}]}))
        .await
        .problem(429);
    assert_eq!(problem["type"], "urn:agent-api:error:queue_full");
    assert_eq!(api.get("/v1/sessions/b").await.json()["queued"], 1);
    // With no queue at all, a message during a turn is refused as before.
    let api = start(ServerConfig::default().with_max_queue(0)).await;
    api.post("/v1/sessions/n", slow("slow", 100)).await;
    assert_eq!(
        api.post("/v1/sessions/n/messages", json!({"message": "runs"}))
            .await
            .status,
        204
    );
    let problem = api
        .post("/v1/sessions/n/messages", json!({"message": "refused"}))
        .await
        .problem(409);
    assert_eq!(problem["type"], "urn:agent-api:error:turn_in_progress");
    api.post_empty("/v1/sessions/n/cancel").await;
}

#[tokio::test]
async fn cancel_cancels_the_running_turn_and_drops_the_queue() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/c", slow("slow", 100)).await;
    for message in ["slow one", "dropped 1", "dropped 2"] {
        assert_eq!(
            api.post("/v1/sessions/c/messages", json!({ "message": message }))
                .await
                .status,
            204
        );
    }
    // A client waiting on a queued message is told it was dropped.
    let waiting = {
        let api = api.clone();
        tokio::spawn(async move { send(&api, "c", "wait=true", "dropped 3").await })
    };
    let deadline = tokio::time::Instant::now() + STEP;
    while api.get("/v1/sessions/c").await.json()["queued"] != 3 {
        assert!(tokio::time::Instant::now() < deadline, "three queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(api.post_empty("/v1/sessions/c/cancel").await.status, 204);
    let dropped = waiting.await.unwrap().problem(409);
    assert_eq!(dropped["type"], "urn:agent-api:error:message_dropped");
    assert_eq!(api.get("/v1/sessions/c").await.json()["queued"], 0);
    // The next message is turn 2: none of the dropped ones ever started.
    let outcome = send(&api, "c", "wait=true&timeout=60", "after").await;
    assert_eq!(outcome.status, 200);
    let outcome = outcome.json();
    assert_eq!(outcome["turn"], 2, "{outcome}");
    assert_eq!(outcome["status"], "completed", "{outcome}");
    let events = api.all_events("c", 1000).await;
    assert_eq!(user_messages(&events), ["slow one", "after"]);
    assert_eq!(delimiters(&events, "turn_failed"), ["turn 1"]);
    let first = api.get("/v1/sessions/c/turns/1").await.json();
    assert_eq!(first["status"], "cancelled", "{first}");
    assert_eq!(first["error"]["code"], "cancelled", "{first}");
}

#[tokio::test]
async fn wait_true_answers_with_the_turns_outcome_its_answer_apart_from_its_reasoning() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/w", scripted("reasoning")).await;
    let answer = send(&api, "w", "wait=true", "hello").await;
    assert_eq!(answer.status, 200);
    let outcome = answer.json();
    assert_eq!(outcome["sessionId"], "w");
    assert_eq!(outcome["turn"], 1);
    assert_eq!(outcome["status"], "completed");
    let text = outcome["finalText"].as_str().unwrap();
    assert!(text.contains("hello"), "{outcome}");
    assert!(
        !text.contains("Thinking"),
        "reasoning is not the answer: {outcome}"
    );
    assert!(outcome.get("error").is_none(), "{outcome}");
    // The range names the turn's events, its closing status last.
    let (first, last) = (
        outcome["firstSequence"].as_u64().unwrap(),
        outcome["lastSequence"].as_u64().unwrap(),
    );
    let events = api.all_events("w", 1000).await;
    assert_eq!(first, 2, "after the session's session.started");
    assert_eq!(last, events.last().unwrap()["sequence"].as_u64().unwrap());
    assert!(common::turn_end(&events[last as usize - 1]));
    // The same outcome, asked again.
    assert_eq!(api.get("/v1/sessions/w/turns/1").await.json(), outcome);
    let unknown = api.get("/v1/sessions/w/turns/9").await.problem(404);
    assert_eq!(unknown["type"], "urn:agent-api:error:turn_not_found");
    api.get("/v1/sessions/nope/turns/1").await.problem(404);

    // A failing turn: its terminal error.
    api.post("/v1/sessions/e", scripted("error")).await;
    let failed = send(&api, "e", "wait=true", "go").await.json();
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(failed["error"]["code"].is_string(), "{failed}");
    assert!(failed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("scripted model failed"));
}

#[tokio::test]
async fn a_wait_stops_at_a_permission_and_the_turns_outcome_follows_the_reply() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/p", scripted("permission")).await;
    let waiting = send(&api, "p", "wait=true", "run").await.json();
    assert_eq!(waiting["status"], "waiting", "{waiting}");
    assert_eq!(waiting["pending"]["kind"], "permission");
    let id = waiting["pending"]["id"].as_str().unwrap().to_string();
    // Not waited for: where it is now.
    assert_eq!(
        api.get("/v1/sessions/p/turns/1").await.json()["status"],
        "running"
    );
    let ended = {
        let api = api.clone();
        tokio::spawn(async move { api.get("/v1/sessions/p/turns/1?wait=true").await })
    };
    assert_eq!(
        api.post(
            &format!("/v1/sessions/p/permissions/{id}/reply"),
            json!({"reply": "once"})
        )
        .await
        .status,
        204
    );
    let outcome = ended.await.unwrap().json();
    assert_eq!(outcome["status"], "completed", "{outcome}");
    assert!(outcome["finalText"]
        .as_str()
        .unwrap()
        .contains("Tool finished."));

    // A wait whose bound passes first says the turn runs.
    api.post("/v1/sessions/r", slow("slow", 200)).await;
    let running = send(&api, "r", "wait=true&timeout=0", "go").await.json();
    assert_eq!(running["status"], "running", "{running}");
    assert_eq!(running["turn"], 1);
    // Queued behind it with no time to wait: `queued`, no turn yet.
    let queued = send(&api, "r", "wait=true&timeout=0", "next").await.json();
    assert_eq!(queued["status"], "queued", "{queued}");
    assert!(queued["turn"].is_null());
    api.post_empty("/v1/sessions/r/cancel").await;
}

#[tokio::test]
async fn any_turn_is_answered_from_the_log_by_a_server_that_did_not_keep_it() {
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let api = common::start_on(ServerConfig::default(), store.clone()).await;
    api.post("/v1/sessions/log", scripted("reasoning")).await;
    let mut outcomes = Vec::new();
    for n in 1..=18 {
        let answer = send(&api, "log", "wait=true", &format!("message {n}")).await;
        assert_eq!(answer.status, 200);
        outcomes.push(answer.json());
    }
    api.post("/v1/sessions/e", scripted("error")).await;
    let failed = send(&api, "e", "wait=true", "go").await.json();
    assert_eq!(failed["status"], "failed", "{failed}");
    // What a server did not keep: its log says the same, but the usage (not an event).
    let from_log = |kept: &Value| {
        let mut kept = kept.clone();
        kept.as_object_mut().unwrap().remove("usage");
        kept
    };
    // Turn 1 is older than the last 16 this server keeps.
    let first = api.get("/v1/sessions/log/turns/1").await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.json(), from_log(&outcomes[0]));
    assert!(outcomes[0]["finalText"]
        .as_str()
        .unwrap()
        .contains("message 1"));
    // Another server on the same store runs none of them.
    let other = common::start_on(ServerConfig::default(), store).await;
    for (n, kept) in outcomes.iter().enumerate() {
        let read = other
            .get(&format!("/v1/sessions/log/turns/{}", n + 1))
            .await;
        assert_eq!(read.json(), from_log(kept), "turn {}", n + 1);
    }
    assert_eq!(
        other.get("/v1/sessions/e/turns/1").await.json(),
        from_log(&failed)
    );
    let unknown = other.get("/v1/sessions/log/turns/19").await.problem(404);
    assert_eq!(unknown["type"], "urn:agent-api:error:turn_not_found");
    other.get("/v1/sessions/nope/turns/1").await.problem(404);
}
