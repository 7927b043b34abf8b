//! `resume` and `fork` over HTTP (issue 46 item 14, fault row 104): an id that could read as a
//! flag or a path is refused (400) and never reaches the agent's argv; an id the agent's own store
//! does not hold is 404 `session_not_found`, as `spec/http-api.md` says, not a session that fails
//! later. Claude Code's backend with a home of the test's own (its binary is never run).

mod common;

use std::sync::Arc;

use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_server::ServerConfig;
use common::*;
use serde_json::json;

const STORED: &str = "cd13f027-f751-4948-87e6-a722e591af62";

#[tokio::test]
async fn resume_ids_are_checked_per_agent_and_an_unknown_one_is_404() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-work");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join(format!("{STORED}.jsonl")), "{}\n").unwrap();
    let config = ClaudeCodeConfig::default()
        .with_binary(home.path().join("no-such-claude"))
        .with_inherit_env(false)
        .with_env("HOME", home.path().to_str().unwrap());
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(Arc::new(ClaudeCodeBackend::new(config)))
        .unwrap();
    gateway
        .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
        .unwrap();
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let api = serve_gateway(
        gateway,
        ServerConfig::default(),
        store,
        agent_api::RunRequest::new(""),
    )
    .await;

    for (field, id) in [
        ("resume", "--dangerously-skip-permissions"),
        ("fork", "../../../../etc/passwd"),
        ("resume", "not-a-uuid"),
    ] {
        let problem = api
            .post(
                "/v1/sessions/s1",
                json!({"agent": "claude_code", field: id}),
            )
            .await
            .problem(400);
        assert_eq!(
            problem["type"], "urn:agent-api:error:invalid_request",
            "{field} {id}: {problem}"
        );
    }
    // The scripted agent's ids are not UUIDs, yet a flag is refused there too.
    api.post(
        "/v1/sessions/s1",
        json!({"agent": "scripted", "resume": "-x"}),
    )
    .await
    .problem(400);
    for field in ["resume", "fork"] {
        let problem = api
            .post(
                "/v1/sessions/s1",
                json!({"agent": "claude_code", field: "3f0c2a7e-1111-4222-8333-444455556666"}),
            )
            .await
            .problem(404);
        assert_eq!(
            problem["type"], "urn:agent-api:error:session_not_found",
            "{problem}"
        );
    }
    // Refusals keep the id free.
    assert_eq!(api.get("/v1/sessions/s1").await.status, 404);
}
