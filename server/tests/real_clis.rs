//! The real, pinned Codex, OpenCode, Gemini CLI and Qwen Code on the bench's scripted model server,
//! each driven over HTTP only through the server's router (real TCP on 127.0.0.1), one test per
//! agent covering the whole flow: a session created, a first message with an image streamed
//! (`messages/stream` closes at the permission request), the permission approved and the turn
//! followed on `events/sse` from the last id, a second message whose permission request waits
//! until the turn is cancelled (the session goes on), a third whose request is rejected, then
//! terminate; the events read by pages equal the ones served over SSE, with no gap and no
//! duplicate. Claude Code's flow is in `cli/tests/serve.rs` and `tests/inspector`; here, its
//! mode switched per message.
//!
//! Each starts with `agent_bench::e2e_bench_or_explain`: a missing CLI fails the test with the
//! install instructions (`bash tests/bench/install-clis.sh`), unless `AGENT_API_E2E=skip` asks to
//! skip, which it then says loudly.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_api::{AgentBackend, Gateway, RunRequest};
use agent_api_server::{ServerConfig, StoreUrl};
use agent_bench::{Cli, ModelServer, Sandbox};
use common::*;
use hyper::Method;
use serde_json::{json, Value};

/// How long one step of a real agent may take (its process starting on a loaded machine included).
const AGENT_STEP: Duration = Duration::from_secs(120);

/// The bench's model server and a sandbox playing `shell` (a shell command asked for, then
/// "Tool finished"), or `None` when the CLI is missing and skipping was asked for.
async fn bench(cli: Cli) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(cli, "shell").await
}

/// A server running only `backend`, its sessions working in the sandbox's directory.
async fn serve(backend: Arc<dyn AgentBackend>, sandbox: &Sandbox) -> Api {
    let mut gateway = Gateway::new();
    gateway.register(backend).unwrap();
    let defaults = RunRequest::new("")
        .with_working_dir(&sandbox.cwd)
        .with_timeout(Duration::from_secs(300));
    // The tests choose each session's permission mode, `bypass` included.
    serve_gateway(
        gateway,
        ServerConfig::default().with_client_option("permissionMode"),
        StoreUrl::Memory.open().await.unwrap(),
        defaults,
    )
    .await
}

/// Frames until one for which `stop` holds (included).
async fn until(stream: &mut Sse, what: &str, stop: impl Fn(&Value) -> bool) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let frame = stream
            .next_within(AGENT_STEP)
            .await
            .unwrap_or_else(|| panic!("the stream closed before {what}: {frames:#?}"));
        let done = stop(&frame.data);
        let early = !done && turn_end(&frame.data);
        frames.push(frame);
        if done {
            return frames;
        }
        assert!(!early, "the turn ended before {what}: {frames:#?}");
    }
}

fn permission_id(frames: &[Frame]) -> String {
    let asked = frames
        .iter()
        .rev()
        .find(|f| f.data["type"] == "permission.requested")
        .expect("a permission request");
    asked.data["data"]["permission_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The flow every agent goes through; `create` is the session's creation body.
async fn drive(api: &Api, model: &ModelServer, sandbox: &Sandbox, create: Value) {
    let created = api.post("/v1/sessions/real", create).await;
    assert_eq!(
        (created.status.as_u16(), &created.json()["healthy"]),
        (200, &json!(true)),
        "{:?}",
        created.body
    );
    agent_bench::images::write_png(&sandbox.cwd);

    // One: streamed with an image; the stream closes at the permission request.
    let body =
        json!({"message": "go", "images": [{"path": "swatch.png"}], "permissionMode": "ask"});
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/real/messages/stream",
            Some(body),
            &[],
        )
        .await;
    let mut served = Vec::new();
    while let Some(frame) = stream.next_within(AGENT_STEP).await {
        served.push(frame);
    }
    let last = served.last().expect("the turn's events");
    assert_eq!(
        last.data["type"], "permission.requested",
        "the stream closes at the request: {served:#?}"
    );
    assert!(
        last.data["data"].to_string().contains("echo hi > out.txt"),
        "the command asked for: {}",
        last.data
    );
    assert!(
        agent_bench::images::requests_with_image(model) >= 1,
        "the image reached the model's request"
    );
    let id = permission_id(&served);
    assert_eq!(
        api.post(
            &format!("/v1/sessions/real/permissions/{id}/reply"),
            json!({"reply": "once"})
        )
        .await
        .status,
        204
    );

    // Followed from the last id it got, until the session ends.
    let last_id = last.id.unwrap().to_string();
    let mut follow = api
        .sse(
            Method::GET,
            "/v1/sessions/real/events/sse",
            None,
            &[("last-event-id", &last_id)],
        )
        .await;
    let first_turn = until(&mut follow, "the first turn's end", turn_end).await;
    assert!(
        first_turn
            .iter()
            .any(|f| f.data["type"] == "permission.resolved"
                && f.data["data"]["status"] == "approved")
    );
    assert!(
        sandbox.cwd.join("out.txt").exists(),
        "the approved command ran"
    );
    served.extend(first_turn);

    // Two: its permission request waits; the turn is cancelled, the session stays.
    assert_eq!(
        api.post("/v1/sessions/real/messages", json!({"message": "again"}))
            .await
            .status,
        204
    );
    served.extend(
        until(&mut follow, "the second permission request", |e| {
            e["type"] == "permission.requested"
        })
        .await,
    );
    // Queued behind the running turn, then dropped by the cancel: it never runs.
    assert_eq!(
        api.post("/v1/sessions/real/messages", json!({"message": "too soon"}))
            .await
            .status,
        204
    );
    assert_eq!(api.get("/v1/sessions/real").await.json()["queued"], 1);
    assert_eq!(api.post_empty("/v1/sessions/real/cancel").await.status, 204);
    assert_eq!(api.get("/v1/sessions/real").await.json()["queued"], 0);
    served.extend(until(&mut follow, "the cancelled turn's end", turn_end).await);
    let info = api.get("/v1/sessions/real").await.json();
    assert_eq!(
        (&info["live"], &info["ended"]),
        (&json!(true), &json!(false)),
        "{info}"
    );

    // Three: the session goes on after the cancel; this request is rejected.
    std::fs::remove_file(sandbox.cwd.join("out.txt")).unwrap();
    assert_eq!(
        api.post(
            "/v1/sessions/real/messages",
            json!({"message": "once more"})
        )
        .await
        .status,
        204
    );
    let asked = until(&mut follow, "the third permission request", |e| {
        e["type"] == "permission.requested"
    })
    .await;
    let id = permission_id(&asked);
    served.extend(asked);
    assert_eq!(
        api.post(
            &format!("/v1/sessions/real/permissions/{id}/reply"),
            json!({"reply": "reject"})
        )
        .await
        .status,
        204
    );
    let third = until(&mut follow, "the third turn's end", turn_end).await;
    assert!(
        third.iter().any(
            |f| f.data["type"] == "permission.resolved" && f.data["data"]["status"] == "denied"
        ),
        "{third:#?}"
    );
    assert!(
        !sandbox.cwd.join("out.txt").exists(),
        "the rejected command did not run"
    );
    served.extend(third);

    assert_eq!(
        api.post_empty("/v1/sessions/real/terminate").await.status,
        204
    );
    served.extend(follow.rest_within(AGENT_STEP).await);
    assert_eq!(
        served.last().unwrap().data["type"],
        "session.ended",
        "the follower's stream ends with the session"
    );

    // Pages hold exactly what SSE served: every event once, in order, from 2 (the session's
    // `session.started`, 1, was written when it was created, before the first turn's stream).
    let ids: Vec<u64> = served.iter().map(|f| f.id.unwrap()).collect();
    assert_eq!(
        ids,
        (2..=ids.len() as u64 + 1).collect::<Vec<_>>(),
        "no gap, no duplicate over SSE"
    );
    let mut pages = api.all_events("real", 7).await;
    assert_eq!(pages.remove(0)["type"], "session.started");
    let sse: Vec<Value> = served.into_iter().map(|f| f.data).collect();
    assert_eq!(pages, sse);
    for event in &pages {
        check_envelope(event, "real");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_codex_is_driven_over_http() {
    let Some((model, sandbox)) = bench(Cli::Codex).await else {
        return;
    };
    let api = serve_codex(&sandbox).await;
    drive(
        &api,
        &model,
        &sandbox,
        json!({"agent": "codex", "permissionMode": "ask"}),
    )
    .await;
}

/// A server running the sandbox's Codex.
async fn serve_codex(sandbox: &Sandbox) -> Api {
    // The sandbox's `-c` overrides point Codex at the model server.
    let overrides: Vec<String> = sandbox
        .base_args
        .windows(2)
        .filter(|w| w[0] == "-c")
        .map(|w| w[1].clone())
        .collect();
    let mut config = agent_api_codex::CodexConfig::with_binary(&sandbox.program)
        .config_overrides(overrides)
        .working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.env(key, value);
    }
    serve(
        Arc::new(agent_api_codex::CodexBackend::new(config)),
        sandbox,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_opencode_is_driven_over_http() {
    let Some((model, sandbox)) = bench(Cli::OpenCode).await else {
        return;
    };
    let mut config = agent_api_opencode::OpenCodeConfig::with_binary(&sandbox.program)
        .default_interface(agent_api_opencode::Interface::Serve);
    for (key, value) in &sandbox.env {
        config = config.env(key, value);
    }
    config.working_dir = Some(sandbox.cwd.clone());
    let api = serve(
        Arc::new(agent_api_opencode::OpenCodeBackend::new(config)),
        &sandbox,
    )
    .await;
    drive(
        &api,
        &model,
        &sandbox,
        json!({"agent": "opencode", "permissionMode": "ask"}),
    )
    .await;
}

/// The sandbox's ACP agent config: its program and environment, in its directory.
fn acp_config(sandbox: &Sandbox) -> agent_api_acp::AcpConfig {
    let mut config =
        agent_api_acp::AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.env(key, value);
    }
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_gemini_cli_is_driven_over_http() {
    let Some((model, sandbox)) = bench(Cli::Gemini).await else {
        return;
    };
    let api = serve(
        Arc::new(agent_api_gemini::GeminiBackend::new(acp_config(&sandbox))),
        &sandbox,
    )
    .await;
    let create = json!({"agent": "gemini", "permissionMode": "ask", "model": agent_bench::sandbox::GEMINI_MODEL});
    drive(&api, &model, &sandbox, create).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_qwen_code_is_driven_over_http() {
    let Some((model, sandbox)) = bench(Cli::Qwen).await else {
        return;
    };
    let api = serve(
        Arc::new(agent_api_qwen::QwenBackend::new(acp_config(&sandbox))),
        &sandbox,
    )
    .await;
    drive(
        &api,
        &model,
        &sandbox,
        json!({"agent": "qwen", "permissionMode": "ask"}),
    )
    .await;
}

/// A server running the sandbox's Claude Code.
async fn serve_claude_code(sandbox: &Sandbox) -> Api {
    let mut config = agent_api_claude_code::ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    serve(
        Arc::new(agent_api_claude_code::ClaudeCodeBackend::new(config)),
        sandbox,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_claude_codes_mode_is_switched_per_message() {
    let Some((_model, sandbox)) =
        agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, "write_edit").await
    else {
        return;
    };
    let api = serve_claude_code(&sandbox).await;
    assert_eq!(
        api.post(
            "/v1/sessions/modes",
            json!({"agent": "claude_code", "permissionMode": "bypass"})
        )
        .await
        .status,
        200
    );
    let mut follow = api
        .sse(Method::GET, "/v1/sessions/modes/events/sse", None, &[])
        .await;
    let created = sandbox.cwd.join("created.txt");

    // In plan mode the write is refused, though every request is approved.
    let plan = json!({"message": "create a file", "agentMode": "plan"});
    assert_eq!(
        api.post("/v1/sessions/modes/messages", plan).await.status,
        204
    );
    until(&mut follow, "the plan turn's end", turn_end).await;
    assert!(!created.exists(), "the session wrote a file in plan mode");
    assert_eq!(
        api.get("/v1/sessions/modes").await.json()["agentMode"],
        "plan"
    );

    // Plan mode holds for the next turn until a message switches back.
    let unknown = api
        .post(
            "/v1/sessions/modes/messages",
            json!({"message": "x", "agentMode": "nonsense"}),
        )
        .await;
    assert!(unknown.problem(400)["detail"]
        .as_str()
        .unwrap()
        .starts_with("agentMode: "));
    let build = json!({"message": "create a file", "agentMode": "build"});
    assert_eq!(
        api.post("/v1/sessions/modes/messages", build).await.status,
        204
    );
    until(&mut follow, "the build turn's end", turn_end).await;
    assert!(
        created.exists(),
        "back in the default mode the approved write ran"
    );
    assert_eq!(
        api.get("/v1/sessions/modes").await.json()["agentMode"],
        "build"
    );
}

/// `POST /v1/sessions/{id}/steer` on a session of `agent` (the bench's `steer` model: a shell call
/// `sleep 4`, then an echo of the conversation): 409 before the turn; mid-command 204, the text a
/// user message item of the same turn, read by the model within it and changing its answer; 409
/// once the turn is over.
async fn steered_over_http_within_its_turn(agent: Cli, kind: &str) {
    let Some((model, sandbox)) = agent_bench::e2e_bench_or_explain(agent, "steer").await else {
        return;
    };
    let api = match agent {
        Cli::ClaudeCode => serve_claude_code(&sandbox).await,
        Cli::Codex => serve_codex(&sandbox).await,
        other => panic!("no server here for {other:?}"),
    };
    let create = json!({"agent": kind, "permissionMode": "bypass"});
    assert_eq!(api.post("/v1/sessions/steer", create).await.status, 200);
    let steer = json!({"message": "Also say banana."});
    let idle = api
        .post("/v1/sessions/steer/steer", steer.clone())
        .await
        .problem(409);
    assert_eq!(idle["type"], "urn:agent-api:error:no_turn_running");
    let mut follow = api
        .sse(Method::GET, "/v1/sessions/steer/events/sse", None, &[])
        .await;
    let turn = json!({"message": "Run the slow command."});
    assert_eq!(
        api.post("/v1/sessions/steer/messages", turn).await.status,
        204
    );
    let mut frames = until(&mut follow, "the command's start", |e| {
        e["type"] == "item.started" && e["data"]["item"]["kind"] == "tool_call"
    })
    .await;
    let steered = api.post("/v1/sessions/steer/steer", steer.clone()).await;
    assert_eq!(
        steered.status,
        204,
        "{:?}",
        String::from_utf8_lossy(&steered.body)
    );
    frames.extend(until(&mut follow, "the turn's end", turn_end).await);
    let texts = |role: &str| -> Vec<String> {
        frames
            .iter()
            .filter(|f| {
                f.data["type"] == "item.completed" && f.data["data"]["item"]["role"] == role
            })
            .map(|f| f.data["data"]["item"]["content"].to_string())
            .collect()
    };
    assert!(
        texts("user").iter().any(|t| t.contains("Also say banana.")),
        "the steering message is a user message item of the turn: {:?}",
        texts("user")
    );
    assert!(
        texts("assistant")
            .iter()
            .any(|t| t.contains("last=Also say banana.")),
        "the model read it within the turn: {:?}",
        texts("assistant")
    );
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains("Also say banana.")),
        "the model's request holds the message"
    );
    let late = api
        .post("/v1/sessions/steer/steer", steer)
        .await
        .problem(409);
    assert_eq!(late["type"], "urn:agent-api:error:no_turn_running");
    api.post_empty("/v1/sessions/steer/terminate").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_claude_code_is_steered_over_http_within_its_turn() {
    steered_over_http_within_its_turn(Cli::ClaudeCode, "claude_code").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_codex_is_steered_over_http_within_its_turn() {
    steered_over_http_within_its_turn(Cli::Codex, "codex").await;
}
