//! Plan mode offline over HTTP (issue 53 item 4): the scripted agent lists `build` and `plan`;
//! a session created in plan mode asks the exit-plan question and runs no tool, a message's
//! `agentMode` switches it back (and `SessionInfo.agentMode` follows), with no agent CLI.

mod common;

use std::time::Duration;

use agent_api_server::ServerConfig;
use common::*;
use serde_json::{json, Value};

/// Waits until `session` has `turns` turn ends; returns its events.
async fn turns(api: &Api, session: &str, turns: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let events = api.all_events(session, 1000).await;
        if events.iter().filter(|e| turn_end(e)).count() >= turns {
            return events;
        }
        assert!(tokio::time::Instant::now() < deadline, "{events:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_scripted_session_plans_then_switches_back_to_build_over_http() {
    let api = start(ServerConfig::default()).await;
    let modes = api.get("/v1/agents/scripted/modes").await.json();
    let ids: Vec<&str> = modes["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["build", "plan"]);

    let mut body = scripted("permission");
    body["agentMode"] = json!("plan");
    assert_eq!(api.post("/v1/sessions/plan", body).await.status, 200);
    assert_eq!(
        api.get("/v1/sessions/plan").await.json()["agentMode"],
        "plan"
    );
    api.post("/v1/sessions/plan/messages", json!({"message": "tidy up"}))
        .await;
    let events = api.wait_for("plan", "question.requested").await;
    let asked = events
        .iter()
        .find(|e| e["type"] == "question.requested")
        .unwrap();
    let prompt = asked["data"]["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("Leave plan mode"), "{prompt}");
    assert!(prompt.contains("tidy up"), "{prompt}");
    let options = asked["data"]["options"].clone();
    assert_eq!(
        options,
        json!(agent_api::kit::hitl::EXIT_PLAN_OPTIONS.to_vec())
    );
    let id = asked["data"]["question_id"].as_str().unwrap();
    let keep = options[1].as_str().unwrap();
    api.post(
        &format!("/v1/sessions/plan/questions/{id}/reply"),
        json!({"answers": [[keep]]}),
    )
    .await;
    let events = turns(&api, "plan", 1).await;
    assert!(
        !events.iter().any(|e| e["type"] == "permission.requested"),
        "plan mode runs no tool"
    );

    // The next message switches back to the agent's default: the tool is asked for again.
    api.post(
        "/v1/sessions/plan/messages",
        json!({"message": "now do it", "agentMode": "build"}),
    )
    .await;
    let events = api.wait_for("plan", "permission.requested").await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "question.requested")
            .count(),
        1,
        "no exit-plan question in build mode"
    );
    assert_eq!(
        api.get("/v1/sessions/plan").await.json()["agentMode"],
        "build"
    );
    let problem = api
        .post(
            "/v1/sessions/other",
            json!({"agent": "scripted", "agentMode": "yolo"}),
        )
        .await
        .problem(400);
    assert_eq!(problem["type"], "urn:agent-api:error:mode_not_supported");
}
