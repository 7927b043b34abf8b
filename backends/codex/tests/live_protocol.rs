//! The live app-server converter against an in-process fake `codex app-server` speaking the
//! 0.169.0 protocol: shapes the fixtures lack (mcpToolCall, webSearch, plan updates, unknown
//! items and notifications), questions, approvals, and server requests the backend cannot serve.

use std::sync::{Arc, Mutex};

use agent_api::kit::AgentPipes;
use agent_api::kit::{start_run, RunSettings, Transport};
use agent_api::request::{PermissionRule, ToolCategory};
use agent_api::universal::{ContentPart, ItemKind, UniversalEventBody};
use agent_api::AgentBackend as _;
use agent_api::{
    AgentError, AgentKind, AgentWrapperEventKind, PermissionDecision, PermissionPolicy,
    QuestionAnswer, RunHandle, RunRequest,
};
use agent_api_codex::app_server::AppServer;
use agent_api_codex::argv::StartPlan;
use agent_api_codex::{CodexBackend, CodexConfig, RunOptions};
use agent_api_conformance::{assert_conformant, record, record_answering, Answers};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const THREAD: &str = "thr_1";
const TURN: &str = "turn_1";

/// One step of the fake server after the handshake.
enum Step {
    Send(Value),
    /// Read one client line and keep it.
    AwaitReply,
}

type Seen = Arc<Mutex<Vec<Value>>>;

async fn fake_codex(
    mut pipes: AgentPipes,
    steps: Vec<Step>,
    end_status: &'static str,
    seen: Seen,
) -> i32 {
    async fn write(pipes: &mut AgentPipes, v: Value) {
        let mut bytes = serde_json::to_vec(&v).unwrap();
        bytes.push(b'\n');
        pipes.stdout.write_all(&bytes).await.unwrap();
    }
    async fn next(pipes: &mut AgentPipes) -> Value {
        let mut buf = String::new();
        let _ = pipes.stdin.read_line(&mut buf).await;
        serde_json::from_str::<Value>(&buf).unwrap_or(Value::Null)
    }
    let init = next(&mut pipes).await;
    write(&mut pipes, json!({"id": init["id"], "result": {"userAgent": "fake/0.169.0", "codexHome": "/x", "platformFamily": "unix", "platformOs": "linux"}})).await;
    let _initialized = next(&mut pipes).await;
    let thread = next(&mut pipes).await;
    seen.lock().unwrap().push(thread.clone());
    write(
        &mut pipes,
        json!({"id": thread["id"], "result": {"thread": {"id": THREAD, "cwd": "/w", "cliVersion": "0.169.0"}, "model": "gpt-5.5"}}),
    )
    .await;
    let turn = next(&mut pipes).await;
    seen.lock().unwrap().push(turn.clone());
    write(&mut pipes, json!({"id": turn["id"], "result": {"turn": {"id": TURN, "items": [], "status": "inProgress"}}})).await;
    write(&mut pipes, json!({"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": TURN, "items": [], "status": "inProgress"}}, "emittedAtMs": 1})).await;
    for step in steps {
        match step {
            Step::Send(v) => write(&mut pipes, v).await,
            Step::AwaitReply => {
                let reply = next(&mut pipes).await;
                seen.lock().unwrap().push(reply);
            }
        }
    }
    write(&mut pipes, json!({"method": "turn/completed", "params": {"threadId": THREAD, "turn": {"id": TURN, "items": [], "status": end_status, "error": null}}})).await;
    // Codex exits when its stdin closes.
    loop {
        let v = next(&mut pipes).await;
        if v.is_null() {
            return 0;
        }
        seen.lock().unwrap().push(v);
    }
}

fn item(method: &str, item: Value) -> Step {
    Step::Send(
        json!({"method": method, "params": {"item": item, "threadId": THREAD, "turnId": TURN, "startedAtMs": 1, "completedAtMs": 2}, "emittedAtMs": 2}),
    )
}

fn run(request: RunRequest, steps: Vec<Step>, end_status: &'static str) -> (RunHandle, Seen) {
    let config = CodexConfig::default();
    let options = RunOptions::resolve(&request, &config).unwrap();
    let plan = StartPlan::new(&config, &options, &request);
    let seen: Seen = Arc::default();
    let seen2 = seen.clone();
    let transport = Transport::in_process(1 << 20, move |pipes| {
        fake_codex(pipes, steps, end_status, seen2)
    });
    let settings = RunSettings::for_request(
        AgentKind::new("codex").unwrap(),
        &request,
        &CodexBackend::new(CodexConfig::default())
            .info()
            .capabilities,
    );
    (
        start_run(
            settings,
            transport,
            Box::new(AppServer::live(plan, options.policy)),
        ),
        seen,
    )
}

#[tokio::test]
async fn mcp_web_search_plan_and_unknown_shapes_map_without_a_parse_failure() {
    let mcp = json!({"type": "mcpToolCall", "id": "mcp_1", "server": "docs", "tool": "lookup", "arguments": {"q": "x"}, "status": "inProgress"});
    let mcp_done = json!({"type": "mcpToolCall", "id": "mcp_1", "server": "docs", "tool": "lookup", "arguments": {"q": "x"}, "status": "completed", "result": {"content": [{"type": "text", "text": "found it"}]}});
    let web = json!({"type": "webSearch", "id": "ws_1", "query": "rust", "action": {"type": "search", "query": "rust"}});
    let steps = vec![
        item("item/started", mcp),
        Step::Send(
            json!({"method": "item/mcpToolCall/progress", "params": {"itemId": "mcp_1", "message": "halfway", "threadId": THREAD, "turnId": TURN}}),
        ),
        item("item/completed", mcp_done),
        item("item/started", web.clone()),
        item("item/completed", web),
        Step::Send(
            json!({"method": "turn/plan/updated", "params": {"threadId": THREAD, "turnId": TURN, "explanation": null, "plan": [{"step": "read", "status": "completed"}, {"step": "write", "status": "inProgress"}]}}),
        ),
        item(
            "item/started",
            json!({"type": "plan", "id": "plan_1", "text": ""}),
        ),
        Step::Send(
            json!({"method": "item/plan/delta", "params": {"itemId": "plan_1", "delta": "1. read", "threadId": THREAD, "turnId": TURN}}),
        ),
        item(
            "item/completed",
            json!({"type": "plan", "id": "plan_1", "text": "1. read"}),
        ),
        item("item/started", json!({"type": "hologram", "id": "h_1"})),
        item("item/completed", json!({"type": "hologram", "id": "h_1"})),
        Step::Send(json!({"method": "brand/new/notification", "params": {"x": 1}})),
        Step::Send(json!({"method": "account/rateLimits/updated", "params": {"rateLimits": {}}})),
    ];
    let (handle, _) = run(RunRequest::new("go"), steps, "completed");
    let run = record(handle).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let facets: Vec<Value> = run
        .wrapper_of(AgentWrapperEventKind::ToolCall)
        .map(|e| e.data.clone().unwrap()["tool"].clone())
        .collect();
    assert!(
        facets
            .iter()
            .any(|f| f["kind"] == "mcp_tool_call" && f["tool_name"] == "lookup"),
        "{facets:?}"
    );
    assert!(
        facets.iter().any(|f| f["kind"] == "web_search"),
        "{facets:?}"
    );
    let labels: Vec<String> = run.status_labels();
    for want in [
        "todo_list",
        "plan",
        "mcp_progress",
        "unknown_item",
        "unknown_notification",
        "turn_started",
        "turn_completed",
    ] {
        assert!(
            labels.iter().any(|l| l == want),
            "no {want} status in {labels:?}"
        );
    }
    assert!(run.universal.iter().any(|e| matches!(&e.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::Unknown)));
    let mcp_result = run.universal.iter().find_map(|e| match &e.body {
        UniversalEventBody::ItemCompleted(d)
            if d.item.kind == ItemKind::ToolResult
                && d.item.native_item_id.as_deref() == Some("mcp_1") =>
        {
            Some(d.item.clone())
        }
        _ => None,
    });
    assert!(
        matches!(&mcp_result.unwrap().content[0], ContentPart::ToolResult { output, .. } if output == "found it")
    );
}

#[tokio::test]
async fn request_user_input_questions_are_answered_together() {
    let request = json!({"id": 0, "method": "item/tool/requestUserInput", "params": {"threadId": THREAD, "turnId": TURN, "itemId": "call_q", "isBlocking": true, "questions": [
        {"id": "color", "header": "Color", "question": "Which color?", "options": [{"label": "Red", "description": "r"}, {"label": "Blue", "description": "b"}]},
        {"id": "size", "header": "Size", "question": "How large?", "options": [{"label": "Small", "description": "s"}]}
    ]}});
    let (handle, seen) = run(
        RunRequest::new("ask me"),
        vec![Step::Send(request), Step::AwaitReply],
        "completed",
    );
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut asked = Vec::new();
    while let Some(event) = events.next().await {
        if let UniversalEventBody::QuestionRequested(q) = &event.body {
            asked.push(q.clone());
            let answer = if q.question_id.ends_with("color") {
                "Red"
            } else {
                "Small"
            };
            control
                .answer_question(&q.question_id, QuestionAnswer::Text(answer.into()))
                .await
                .unwrap();
        }
    }
    completion.await.unwrap();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].options, ["Red", "Blue"]);
    let reply = seen.lock().unwrap()[2].clone();
    assert_eq!(reply["id"], 0);
    assert_eq!(
        reply["result"]["answers"]["color"]["answers"],
        json!(["Red"])
    );
    assert_eq!(
        reply["result"]["answers"]["size"]["answers"],
        json!(["Small"])
    );
    assert!(
        reply.get("jsonrpc").is_none(),
        "the app-server dialect has no jsonrpc member"
    );
}

#[tokio::test]
async fn unknown_and_unservable_server_requests_are_answered_with_errors_at_once() {
    let steps = vec![
        Step::Send(json!({"id": 7, "method": "item/future/askSomething", "params": {}})),
        Step::AwaitReply,
        Step::Send(
            json!({"id": 8, "method": "account/chatgptAuthTokens/refresh", "params": {"reason": "unauthorized"}}),
        ),
        Step::AwaitReply,
        Step::Send(
            json!({"id": 9, "method": "item/tool/call", "params": {"threadId": THREAD, "turnId": TURN, "callId": "c", "tool": "t", "arguments": {}}}),
        ),
        Step::AwaitReply,
    ];
    let (handle, seen) = run(RunRequest::new("go"), steps, "completed");
    let run = record(handle).await;
    assert_conformant(&run);
    let seen = seen.lock().unwrap();
    assert_eq!(
        (seen[2]["id"].as_i64(), seen[2]["error"]["code"].as_i64()),
        (Some(7), Some(-32601))
    );
    assert_eq!(seen[3]["id"], 8);
    assert!(seen[3]["error"]["code"].is_i64());
    assert_eq!(
        (
            seen[4]["id"].as_i64(),
            seen[4]["result"]["success"].as_bool()
        ),
        (Some(9), Some(false))
    );
}

fn approval(id: i64) -> Step {
    Step::Send(
        json!({"id": id, "method": "item/commandExecution/requestApproval", "params": {"threadId": THREAD, "turnId": TURN, "itemId": "call_1", "startedAtMs": 1, "command": "touch x", "cwd": "/w", "commandActions": []}}),
    )
}

#[tokio::test]
async fn approvals_take_the_callers_decision_and_unknown_ids_are_refused() {
    for (decision, wire, approved) in [
        (PermissionDecision::Allow, "accept", true),
        (
            PermissionDecision::AllowForSession,
            "acceptForSession",
            true,
        ),
        (PermissionDecision::Deny { message: None }, "decline", false),
        (PermissionDecision::Cancel, "cancel", false),
    ] {
        let (handle, seen) = run(
            RunRequest::new("go"),
            vec![approval(0), Step::AwaitReply],
            "completed",
        );
        let control = handle.control();
        let (mut events, completion) = handle.into_universal();
        let mut resolved = None;
        while let Some(event) = events.next().await {
            match &event.body {
                UniversalEventBody::PermissionRequested(p) => {
                    let err = control
                        .respond_permission("nope", PermissionDecision::Allow)
                        .await
                        .unwrap_err();
                    assert!(matches!(err, AgentError::UnknownPermission { .. }));
                    control
                        .respond_permission(&p.permission_id, decision.clone())
                        .await
                        .unwrap();
                }
                UniversalEventBody::PermissionResolved(p) => resolved = Some(p.status),
                _ => {}
            }
        }
        completion.await.unwrap();
        assert_eq!(
            seen.lock().unwrap()[2],
            json!({"id": 0, "result": {"decision": wire}})
        );
        assert_eq!(
            resolved == Some(agent_api::universal::PermissionStatus::Approved),
            approved
        );
    }
}

#[tokio::test]
async fn per_category_rules_answer_approvals_without_the_caller() {
    let policy = PermissionPolicy::ByCategory([(ToolCategory::Shell, PermissionRule::Deny)].into());
    let (handle, seen) = run(
        RunRequest::new("go").with_permissions(policy),
        vec![approval(3), Step::AwaitReply],
        "completed",
    );
    let run = record(handle).await;
    assert_conformant(&run);
    assert_eq!(seen.lock().unwrap()[2]["result"]["decision"], "decline");
    assert_eq!(run.of_type("permission.resolved").count(), 1);
    assert_eq!(
        seen.lock().unwrap()[0]["params"]["approvalPolicy"],
        "untrusted"
    );
}

#[tokio::test]
async fn an_mcp_tool_approval_elicitation_is_a_permission_the_policy_decides_and_a_plain_one_a_question(
) {
    let meta = json!({"codex_approval_kind": "mcp_tool_call", "tool_name": "probe", "tool_params": {"city": "Paris"}});
    let approval = Step::Send(
        json!({"id": 5, "method": "mcpServer/elicitation/request", "params": {"threadId": THREAD, "turnId": TURN,
        "serverName": "caller", "mode": "form", "message": "Allow the caller MCP server to run tool \"probe\"?",
        "requestedSchema": {"type": "object", "properties": {}}, "_meta": meta}}),
    );
    for (policy, action) in [
        (PermissionPolicy::ApproveAll, "accept"),
        (PermissionPolicy::DenyAll, "decline"),
    ] {
        let steps = vec![approval_clone(&approval), Step::AwaitReply];
        let (handle, seen) = run(
            RunRequest::new("go").with_permissions(policy),
            steps,
            "completed",
        );
        let run = record(handle).await;
        assert_conformant(&run);
        assert_eq!(
            seen.lock().unwrap()[2],
            json!({"id": 5, "result": {"action": action, "content": null}})
        );
        let requested = run
            .of_type("permission.requested")
            .next()
            .expect("a permission, not a question");
        let UniversalEventBody::PermissionRequested(p) = &requested.body else {
            unreachable!()
        };
        assert_eq!(p.category, Some(ToolCategory::Mcp));
        assert_eq!(run.of_type("permission.resolved").count(), 1);
        assert_eq!(run.of_type("question.requested").count(), 0);
    }
    // An elicitation that asks the user for data stays a question.
    let form = Step::Send(
        json!({"id": 6, "method": "mcpServer/elicitation/request", "params": {"threadId": THREAD, "turnId": TURN,
        "serverName": "notes", "mode": "form", "message": "Which notebook?", "requestedSchema": {"type": "object", "properties": {}}}}),
    );
    let (handle, _seen) = run(
        RunRequest::new("go").with_permissions(PermissionPolicy::ApproveAll),
        vec![form],
        "completed",
    );
    let run = record_answering(handle, Answers::permissions(PermissionDecision::Allow)).await;
    assert_eq!(run.of_type("question.requested").count(), 1);
    assert_eq!(run.of_type("permission.requested").count(), 0);
}

fn approval_clone(step: &Step) -> Step {
    match step {
        Step::Send(v) => Step::Send(v.clone()),
        Step::AwaitReply => Step::AwaitReply,
    }
}

#[tokio::test]
async fn cancel_with_an_unanswered_approval_cancels_it_and_interrupts_the_turn() {
    let steps = vec![
        item(
            "item/started",
            json!({"type": "commandExecution", "id": "call_1", "command": "sleep 30", "cwd": "/w", "status": "inProgress", "commandActions": []}),
        ),
        approval(0),
        Step::AwaitReply,
        Step::AwaitReply,
    ];
    let (handle, seen) = run(RunRequest::new("go"), steps, "interrupted");
    let run = record_answering(handle, Answers::cancel_at_permission()).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
    let seen = seen.lock().unwrap();
    assert_eq!(seen[2], json!({"id": 0, "result": {"decision": "cancel"}}));
    assert_eq!(seen[3]["method"], "turn/interrupt");
    assert_eq!(
        seen[3]["params"],
        json!({"threadId": THREAD, "turnId": TURN})
    );
    let failed_tool = run.universal.iter().any(|e| matches!(&e.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::ToolResult && d.item.status == agent_api::universal::ItemStatus::Failed));
    assert!(failed_tool, "the interrupted command's result is failed");
}
