//! Mapping tests of Claude Code's dialect for native shapes the recorded fixtures lack: replayed
//! from hand-written lines in the documented formats, and two-way exchanges against an
//! in-process fake CLI; and the dialect's quirks other agents set, on dialects made here.

/// A dialect with no tools of its own, for the quirks other agents set.
const BARE: Dialect = Dialect::new("test.stream_json", ToolTable::new(&[]));

use std::time::Duration;

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api::kit::{start_run, RunSettings, Transport};
use agent_api::universal::{
    ContentPart, DecidedBy, ItemKind, ReasoningVisibility, UniversalEventBody, UniversalItem,
};
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, QuestionAnswer};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use agent_api::kit::tool_table::ToolTable;
use agent_api_claude_code::{ClaudeCodeBackend, StreamJson, DIALECT, KIND};
use agent_api_stream_json::Dialect;

const SID: &str = "sess-unit";

fn init() -> Value {
    json!({"type":"system","subtype":"init","session_id":SID,"model":"m","tools":["Bash"],"mcp_servers":[{"name":"srv","status":"connected"}],"permissionMode":"default"})
}

fn se(event: Value) -> Value {
    json!({"type":"stream_event","event":event,"session_id":SID,"parent_tool_use_id":null})
}

fn assistant(id: &str, content: Value) -> Value {
    json!({"type":"assistant","message":{"id":id,"type":"message","role":"assistant","model":"m","content":content},"parent_tool_use_id":null,"session_id":SID})
}

fn result_ok(text: &str) -> Value {
    json!({"type":"result","subtype":"success","is_error":false,"result":text,"session_id":SID,"num_turns":1,"total_cost_usd":0.5,"usage":{"input_tokens":3,"cache_read_input_tokens":2,"output_tokens":4},"permission_denials":[]})
}

async fn replay_lines(lines: &[Value], exit_code: Option<i32>) -> RunRecord {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let reader = std::io::Cursor::new(text.into_bytes());
    let handle = replay(
        &ClaudeCodeBackend::default(),
        reader,
        ReplayOptions::default().exit_code(exit_code),
    )
    .await
    .unwrap();
    record(handle).await
}

fn completed(run: &RunRecord) -> Vec<UniversalItem> {
    run.universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) => Some(UniversalItem::clone(&d.item)),
            _ => None,
        })
        .collect()
}

fn status_labels(run: &RunRecord) -> Vec<String> {
    completed(run)
        .iter()
        .flat_map(|i| i.content.clone())
        .filter_map(|p| {
            if let ContentPart::Status { label, .. } = p {
                Some(label)
            } else {
                None
            }
        })
        .collect()
}

#[tokio::test]
async fn streamed_thinking_redacted_thinking_and_server_tools_map_once() {
    let lines = [
        init(),
        se(json!({"type":"message_start","message":{"id":"msg_1","content":[]}})),
        se(
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
        ),
        se(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}),
        ),
        se(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think."}}),
        ),
        se(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}),
        ),
        assistant(
            "msg_1",
            json!([{"type":"thinking","thinking":"Let me think.","signature":"sig"}]),
        ),
        se(json!({"type":"content_block_stop","index":0})),
        se(
            json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}),
        ),
        se(json!({"type":"content_block_stop","index":1})),
        assistant(
            "msg_1",
            json!([{"type":"redacted_thinking","data":"opaque"}]),
        ),
        se(
            json!({"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}),
        ),
        se(
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"rust\"}"}}),
        ),
        se(json!({"type":"content_block_stop","index":2})),
        se(
            json!({"type":"content_block_start","index":3,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.invalid","title":"Rust"}]}}),
        ),
        se(json!({"type":"content_block_stop","index":3})),
        se(
            json!({"type":"content_block_start","index":4,"content_block":{"type":"text","text":""}}),
        ),
        se(
            json!({"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"Rust is "}}),
        ),
        se(
            json!({"type":"content_block_delta","index":4,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location"}}}),
        ),
        se(
            json!({"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"a language."}}),
        ),
        assistant(
            "msg_1",
            json!([{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"rust"}}]),
        ),
        assistant(
            "msg_1",
            json!([{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}]),
        ),
        assistant(
            "msg_1",
            json!([{"type":"text","text":"Rust is a language."}]),
        ),
        se(json!({"type":"content_block_stop","index":4})),
        se(
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}),
        ),
        se(json!({"type":"ping"})),
        se(json!({"type":"message_stop"})),
        result_ok("Rust is a language."),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Rust is a language.");
    let items = completed(&run);
    let reasoning: Vec<(String, ReasoningVisibility)> = items
        .iter()
        .flat_map(|i| i.content.clone())
        .filter_map(|p| {
            if let ContentPart::Reasoning { text, visibility } = p {
                Some((text, visibility))
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        reasoning,
        [
            ("Let me think.".to_string(), ReasoningVisibility::Public),
            (String::new(), ReasoningVisibility::Private)
        ]
    );
    let calls: Vec<&UniversalItem> = items
        .iter()
        .filter(|i| i.kind == ItemKind::ToolCall)
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool.as_ref().unwrap().kind, "web_search");
    assert_eq!(
        items
            .iter()
            .filter(|i| i.kind == ItemKind::ToolResult)
            .count(),
        1,
        "the server tool result maps once"
    );
    let usage = run.completion.as_ref().unwrap().usage.clone().unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens,
            usage.cost_usd
        ),
        (Some(5), Some(2), Some(4), Some(0.5))
    );
}

#[tokio::test]
async fn tool_results_with_block_content_images_errors_and_subagents_map() {
    let lines = [
        init(),
        assistant(
            "msg_1",
            json!([{"type":"tool_use","id":"toolu_task","name":"Task","input":{"description":"look","prompt":"look around"}}]),
        ),
        json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":"look around"}]},"parent_tool_use_id":"toolu_task","session_id":SID}),
        json!({"type":"assistant","message":{"id":"msg_sub","role":"assistant","content":[{"type":"tool_use","id":"toolu_bash","name":"Bash","input":{"command":"false"}}]},"parent_tool_use_id":"toolu_task","session_id":SID}),
        json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_bash","is_error":true,"content":"Exit code 1\nboom"}]},"parent_tool_use_id":"toolu_task","session_id":SID,"tool_use_result":"Error: Exit code 1\nboom"}),
        json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_task","content":[{"type":"text","text":"found it"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]},"parent_tool_use_id":null,"session_id":SID}),
        assistant("msg_2", json!([{"type":"text","text":"ok"}])),
        result_ok("ok"),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    let items = completed(&run);
    let task_call = items
        .iter()
        .find(|i| i.native_item_id.as_deref() == Some("toolu_task") && i.kind == ItemKind::ToolCall)
        .unwrap();
    let sub_message = items
        .iter()
        .find(|i| i.native_item_id.as_deref() == Some("msg_sub"))
        .unwrap();
    assert_eq!(
        sub_message.parent_id.as_deref(),
        Some(task_call.item_id.as_str()),
        "a subagent's message hangs under its Task call"
    );
    let bash = items
        .iter()
        .find(|i| {
            i.kind == ItemKind::ToolResult && i.native_item_id.as_deref() == Some("toolu_bash")
        })
        .unwrap();
    assert_eq!(bash.status, agent_api::universal::ItemStatus::Failed);
    assert_eq!(bash.tool.as_ref().unwrap().exit_code, Some(1));
    let task = items
        .iter()
        .find(|i| {
            i.kind == ItemKind::ToolResult && i.native_item_id.as_deref() == Some("toolu_task")
        })
        .unwrap();
    assert!(
        matches!(&task.content[0], ContentPart::ToolResult { output, .. } if output == "found it")
    );
    assert!(
        matches!(&task.content[1], ContentPart::Json { json } if json["image"]["media_type"] == "image/png")
    );
    assert!(
        !serde_json::to_string(&run.universal)
            .unwrap()
            .contains("AAAA"),
        "image data stays out"
    );
}

#[tokio::test]
async fn system_and_informational_lines_become_bounded_statuses() {
    let secret_hook_output = "HOOK-STDOUT-SECRET";
    let lines = [
        init(),
        json!({"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"retry_delay_ms":500.5,"error_status":529,"error":"overloaded","session_id":SID}),
        json!({"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":1000},"session_id":SID}),
        json!({"type":"system","subtype":"hook_response","hook_name":"SessionStart:startup","hook_event":"SessionStart","stdout":secret_hook_output,"stderr":"","exit_code":0,"outcome":"success","session_id":SID}),
        json!({"type":"system","subtype":"thinking_tokens","estimated_tokens":3}),
        json!({"type":"system","subtype":"task_started","description":"background work","session_id":SID}),
        json!({"type":"tool_progress","tool_use_id":"t","tool_name":"Bash","elapsed_time_seconds":5}),
        json!({"type":"keep_alive"}),
        json!({"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}),
        json!({"type":"something_new","payload":{"a":1}}),
        se(json!({"type":"brand_new_event"})),
        assistant(
            "msg_1",
            json!([{"type":"text","text":"hi"}, {"type":"new_block_kind"}]),
        ),
        result_ok("hi"),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    let labels = status_labels(&run);
    for want in [
        "api_retry",
        "compact_boundary",
        "hook_response",
        "system/task_started",
        "tool_progress",
        "rate_limit",
        "unknown_message",
        "unknown_stream_event",
        "unknown_content_block",
    ] {
        assert!(
            labels.iter().any(|l| l == want),
            "{want} missing from {labels:?}"
        );
    }
    assert!(!labels
        .iter()
        .any(|l| l.contains("thinking_tokens") || l.contains("keep_alive")));
    assert!(
        !serde_json::to_string(&run.wrapper)
            .unwrap()
            .contains(secret_hook_output),
        "hook output stays out of wrapper events"
    );
    let started = run.of_type("session.started").next().unwrap();
    assert_eq!(started.native_session_id.as_deref(), Some(SID));
}

fn error_result(subtype: &str, status: Option<u16>) -> Value {
    json!({"type":"result","subtype":subtype,"is_error":true,"api_error_status":status,"result":"API Error: sk-ant-api03-abcdefghijkl rejected","errors":["max turns reached"],"session_id":SID,"usage":{}})
}

#[tokio::test]
async fn an_error_result_without_words_still_explains_itself_the_same_in_event_and_completion() {
    let mut result = error_result("success", Some(500));
    result["result"] = json!("   ");
    result["errors"] = json!([]);
    let run = replay_lines(&[init(), result], Some(1)).await;
    assert_conformant(&run);
    let error = run.completion.as_ref().unwrap_err();
    assert!(
        matches!(
            error,
            AgentError::ServerError {
                status: Some(500),
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .ends_with(agent_api::kit::secrets::NO_EXPLANATION),
        "{error}"
    );
}

#[tokio::test]
async fn error_results_are_typed_by_status_and_subtype() {
    type Check = fn(&AgentError) -> bool;
    let cases: [(Value, Check); 7] = [
        (error_result("success", Some(429)), |e| {
            matches!(e, AgentError::RateLimited { .. })
        }),
        (error_result("success", Some(529)), |e| {
            matches!(
                e,
                AgentError::Overloaded {
                    status: Some(529),
                    ..
                }
            )
        }),
        (error_result("success", Some(503)), |e| {
            matches!(
                e,
                AgentError::Overloaded {
                    status: Some(503),
                    ..
                }
            )
        }),
        (error_result("success", Some(502)), |e| {
            matches!(
                e,
                AgentError::ServerError {
                    status: Some(502),
                    ..
                }
            )
        }),
        (error_result("success", Some(401)), |e| {
            matches!(e, AgentError::Auth { .. })
        }),
        (error_result("error_max_turns", None), |e| {
            matches!(
                e,
                AgentError::LimitReached {
                    limit: agent_api::run::LimitKind::Turns
                }
            )
        }),
        (error_result("error_during_execution", None), |e| {
            matches!(e, AgentError::AgentFailed { .. })
        }),
    ];
    for (result, check) in cases {
        let run = replay_lines(&[init(), result.clone()], Some(1)).await;
        assert_conformant(&run);
        let error = run.completion.as_ref().unwrap_err();
        assert!(check(error), "{result}: {error:?}");
        assert!(
            !error.to_string().contains("abcdefghijkl"),
            "an API key leaked: {error}"
        );
    }
    // The synthetic error message's kind types the error when the status is missing.
    let synthetic = json!({"type":"assistant","message":{"id":"x","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"Overloaded"}]},"error":"rate_limit","session_id":SID,"parent_tool_use_id":null});
    let run = replay_lines(&[init(), synthetic, error_result("success", None)], Some(1)).await;
    assert!(
        matches!(run.completion, Err(AgentError::RateLimited { .. })),
        "{:?}",
        run.completion
    );
    assert_eq!(run.assistant_text(), "");
}

#[tokio::test]
async fn retries_on_limits_and_rejected_rate_limit_events_are_rate_limited_statuses_with_when_to_retry(
) {
    let lines = [
        init(),
        json!({"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"retry_delay_ms":500.0,"error_status":529,"error":"overloaded","session_id":SID}),
        json!({"type":"system","subtype":"api_retry","attempt":2,"max_retries":3,"retry_delay_ms":1000.0,"error_status":429,"error":"rate_limit","session_id":SID}),
        json!({"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"retry_delay_ms":10.0,"error_status":500,"error":"server_error","session_id":SID}),
        json!({"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1700000000u64}}),
        json!({"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}),
        result_ok("hi"),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    let limited: Vec<String> = completed(&run)
        .iter()
        .flat_map(|i| i.content.clone())
        .filter_map(|p| match p {
            ContentPart::Status { label, detail } if label == "rate_limited" => detail,
            _ => None,
        })
        .collect();
    assert_eq!(
        limited,
        [
            "overloaded (HTTP 529); retry 1 of 3; retry after 0.5 s",
            "rate limited (HTTP 429); retry 2 of 3; retry after 1 s",
            "rate limited; resets at 1700000000 (Unix time)",
        ]
    );
    assert_eq!(
        status_labels(&run)
            .iter()
            .filter(|l| *l == "api_retry")
            .count(),
        3,
        "every retry stays a status"
    );
    let wrapper: Vec<_> = run
        .wrapper
        .iter()
        .filter_map(|e| e.message.as_deref())
        .filter(|m| m.starts_with("rate_limited"))
        .collect();
    assert_eq!(wrapper.len(), 3, "{wrapper:?}");
}

#[tokio::test]
async fn a_resume_the_cli_cannot_find_is_session_not_found() {
    // Claude Code 2.1.197's whole output for `--resume` of an id it has not stored in this
    // project directory: one result line, no init.
    let id = "3f0c2a7e-1111-4222-8333-444455556666";
    let missing = json!({"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":id,"usage":{},"errors":[format!("No conversation found with session ID: {id}")]});
    let run = replay_lines(&[missing], Some(1)).await;
    assert!(
        matches!(&run.completion, Err(AgentError::SessionNotFound { id: got }) if got == id),
        "{:?}",
        run.completion
    );
}

/// An in-process fake CLI: prints `script`'s lines, and for each line that is a `control_request`
/// waits for one stdin line that is its `control_response`; returns what the client wrote.
fn fake_cli(script: Vec<Value>, written: tokio::sync::mpsc::UnboundedSender<Value>) -> Transport {
    Transport::in_process(1 << 20, move |mut pipes| async move {
        let read_one = async |pipes: &mut agent_api::kit::AgentPipes| -> Option<Value> {
            let mut line = String::new();
            (pipes.stdin.read_line(&mut line).await.ok()? > 0)
                .then(|| serde_json::from_str(&line).unwrap())
        };
        // The initialize request and the prompt.
        for _ in 0..2 {
            let _ = written.send(read_one(&mut pipes).await.unwrap());
        }
        for line in script {
            pipes
                .stdout
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
            if line["type"] == "control_request" {
                match read_one(&mut pipes).await {
                    Some(reply) => {
                        let _ = written.send(reply);
                    }
                    None => return 1,
                }
            }
        }
        0
    })
}

fn can_use_tool(id: &str, tool: &str, input: Value) -> Value {
    can_use_tool_for("toolu_1", id, tool, input)
}

/// A permission request for the tool call `call_id`.
fn can_use_tool_for(call_id: &str, id: &str, tool: &str, input: Value) -> Value {
    json!({"type":"control_request","request_id":id,"request":{"subtype":"can_use_tool","tool_name":tool,"input":input,"tool_use_id":call_id,"permission_suggestions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}]}})
}

#[tokio::test]
async fn ask_user_question_with_two_questions_answers_both_in_one_response() {
    let questions = json!([
        {"question":"Color?","header":"Color","options":[{"label":"Red","description":""},{"label":"Blue","description":""}],"multiSelect":false},
        {"question":"Size?","header":"Size","options":[{"label":"S","description":""},{"label":"L","description":""}],"multiSelect":false}
    ]);
    let script = vec![
        init(),
        can_use_tool("r1", "AskUserQuestion", json!({ "questions": questions })),
        result_ok("thanks"),
    ];
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let protocol = StreamJson::control(DIALECT, "ask", PermissionPolicy::Ask, false);
    let handle = start_run(
        RunSettings::new(KIND),
        fake_cli(script, tx),
        Box::new(protocol),
    );
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut asked = Vec::new();
    while let Some(event) = events.next().await {
        if let UniversalEventBody::QuestionRequested(q) = &event.body {
            asked.push(q.question_id.clone());
            let answer = if q.question_id.ends_with("/0") {
                "Blue"
            } else {
                "L"
            };
            control
                .answer_question(&q.question_id, QuestionAnswer::Text(answer.into()))
                .await
                .unwrap();
            assert!(
                matches!(
                    control
                        .answer_question(&q.question_id, QuestionAnswer::Reject)
                        .await,
                    Err(AgentError::AlreadyResolved { .. } | AgentError::RunFinished)
                ),
                "a question is answered once"
            );
        }
    }
    assert_eq!(asked, ["r1/0", "r1/1"]);
    assert!(completion.await.is_ok());
    let sent: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(sent[0]["request"]["subtype"], "initialize");
    assert_eq!(sent[1]["message"]["content"], "ask");
    let reply = &sent[2]["response"];
    assert_eq!(reply["request_id"], "r1");
    assert_eq!(reply["response"]["behavior"], "allow");
    assert_eq!(
        reply["response"]["updatedInput"]["answers"],
        json!({"Color?":"Blue","Size?":"L"})
    );
    assert_eq!(sent.len(), 3, "one response for both questions");
}

#[tokio::test]
async fn permission_decisions_write_the_native_responses() {
    let decisions = [
        (
            PermissionDecision::AllowForSession,
            json!({"behavior":"allow","updatedInput":{"command":"ls"},"toolUseID":"toolu_1","updatedPermissions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}]}),
        ),
        (
            PermissionDecision::Deny { message: None },
            json!({"behavior":"deny","message":"The user denied this action.","toolUseID":"toolu_1"}),
        ),
        (
            PermissionDecision::Cancel,
            json!({"behavior":"deny","message":"The user denied this action and stopped the turn.","toolUseID":"toolu_1","interrupt":true}),
        ),
    ];
    for (decision, want) in decisions {
        let script = vec![
            init(),
            can_use_tool("p1", "Bash", json!({"command":"ls"})),
            result_ok("done"),
        ];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = start_run(
            RunSettings::new(KIND),
            fake_cli(script, tx),
            Box::new(StreamJson::control(
                DIALECT,
                "go",
                PermissionPolicy::Ask,
                false,
            )),
        );
        let control = handle.control();
        let (mut events, completion) = handle.into_universal();
        while let Some(event) = events.next().await {
            if let UniversalEventBody::PermissionRequested(p) = &event.body {
                assert!(matches!(
                    control
                        .respond_permission("nope", PermissionDecision::Allow)
                        .await,
                    Err(AgentError::UnknownPermission { .. })
                ));
                control
                    .respond_permission(&p.permission_id, decision.clone())
                    .await
                    .unwrap();
            }
        }
        assert!(completion.await.is_ok());
        let sent: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(sent[2]["response"]["response"], want);
    }
}

#[tokio::test]
async fn policies_decide_without_asking_and_hook_and_mcp_requests_get_answers() {
    let rules = [
        (
            agent_api::request::ToolCategory::Shell,
            agent_api::request::PermissionRule::Approve,
        ),
        (
            agent_api::request::ToolCategory::Network,
            agent_api::request::PermissionRule::Deny,
        ),
    ]
    .into_iter()
    .collect();
    let script = vec![
        init(),
        // As the CLI does, the tool call streams before its permission request.
        assistant(
            "msg_1",
            json!([{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]),
        ),
        can_use_tool("a", "Bash", json!({"command":"ls"})),
        can_use_tool_for(
            "toolu_2",
            "b",
            "WebFetch",
            json!({"url":"https://example.invalid"}),
        ),
        json!({"type":"control_request","request_id":"h","request":{"subtype":"hook_callback","callback_id":"cb","input":{}}}),
        json!({"type":"control_request","request_id":"m","request":{"subtype":"mcp_message","server_name":"x","message":{}}}),
        json!({"type":"control_request","request_id":"u","request":{"subtype":"brand_new"}}),
        json!({"type":"control_cancel_request","request_id":"zzz"}),
        result_ok("done"),
    ];
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let protocol = StreamJson::control(DIALECT, "go", PermissionPolicy::ByCategory(rules), false);
    let handle = start_run(
        RunSettings::new(KIND),
        fake_cli(script, tx),
        Box::new(protocol),
    );
    let run = tokio::time::timeout(Duration::from_secs(10), record(handle))
        .await
        .unwrap();
    assert_conformant(&run);
    // The policy decides, and both requests are still in the transcript, decided by the policy.
    assert_eq!(run.of_type("permission.requested").count(), 2);
    let resolved: Vec<_> = run
        .of_type("permission.resolved")
        .map(|e| e.decided_by())
        .collect();
    assert_eq!(resolved, [Some(DecidedBy::Policy), Some(DecidedBy::Policy)]);
    let sent: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    let replies: Vec<(String, String)> = sent[2..]
        .iter()
        .map(|r| {
            (
                r["response"]["request_id"].as_str().unwrap().to_string(),
                r["response"]["response"]["behavior"]
                    .as_str()
                    .or(r["response"]["subtype"].as_str())
                    .unwrap_or("success")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        replies,
        [
            ("a".into(), "allow".into()),
            ("b".into(), "deny".into()),
            ("h".into(), "success".into()),
            ("m".into(), "error".into()),
            ("u".into(), "error".into())
        ]
    );
}

#[tokio::test]
async fn a_cancelled_request_resolves_the_pending_permission_as_denied() {
    let lines = [
        init(),
        can_use_tool("p1", "Bash", json!({"command":"ls"})),
        json!({"type":"control_cancel_request","request_id":"p1"}),
        result_ok("done"),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    let resolved = run.of_type("permission.resolved").next().unwrap();
    assert!(
        matches!(&resolved.body, UniversalEventBody::PermissionResolved(p) if p.status == agent_api::universal::PermissionStatus::Denied)
    );
    assert_eq!(
        resolved.decided_by(),
        Some(DecidedBy::Cancel),
        "the agent withdrew it"
    );
}

#[tokio::test]
async fn a_streamed_message_cut_and_followed_by_a_new_one_fails_and_is_no_answer() {
    let lines = [
        init(),
        se(
            json!({"type":"message_start","message":{"id":"msg_cut","role":"assistant","content":[]}}),
        ),
        se(
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        se(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello "}}),
        ),
        // The stream broke; the CLI repeated the request without streaming.
        assistant(
            "msg_whole",
            json!([{"type":"text","text":"Hello from mock"}]),
        ),
        result_ok("Hello from mock"),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    let messages: Vec<_> = completed(&run)
        .into_iter()
        .filter(|i| i.role == Some(agent_api::universal::ItemRole::Assistant))
        .map(|i| (i.status, i.text()))
        .collect();
    use agent_api::universal::ItemStatus::{Completed, Failed};
    assert_eq!(
        messages,
        [
            (Failed, "Hello ".to_string()),
            (Completed, "Hello from mock".to_string())
        ]
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock")
    );
    assert_eq!(run.assistant_text(), "Hello from mock");
}

#[tokio::test]
async fn a_message_that_reached_message_stop_completes_when_the_next_one_starts() {
    let lines = [
        init(),
        se(
            json!({"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[]}}),
        ),
        se(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"first"}}),
        ),
        se(json!({"type":"message_stop"})),
        se(
            json!({"type":"message_start","message":{"id":"msg_2","role":"assistant","content":[]}}),
        ),
        se(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"second"}}),
        ),
        se(json!({"type":"message_stop"})),
        result_ok("second"),
    ];
    let run = replay_lines(&lines, Some(0)).await;
    assert_conformant(&run);
    assert!(completed(&run)
        .iter()
        .all(|i| i.status == agent_api::universal::ItemStatus::Completed));
    assert_eq!(run.assistant_text(), "firstsecond");
}

#[tokio::test]
async fn token_counts_at_u64_max_saturate_instead_of_wrapping() {
    let huge = json!({"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":SID,"usage":{"input_tokens":u64::MAX,"cache_read_input_tokens":u64::MAX,"output_tokens":u64::MAX}});
    let run = replay_lines(&[init(), huge.clone(), huge], Some(0)).await;
    assert_conformant(&run);
    let usage = run.completion.as_ref().unwrap().usage.clone().unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens
        ),
        (Some(u64::MAX), Some(u64::MAX), Some(u64::MAX))
    );
}

#[test]
fn a_result_error_reader_turns_a_successful_error_text_into_one_typed_error_and_no_answer() {
    use agent_api::kit::ProtocolHarness;
    use agent_api::kit::{ExitInfo, Protocol};
    fn read(text: &str) -> Option<AgentError> {
        text.starts_with("[failed").then(|| AgentError::Auth {
            message: "denied".into(),
        })
    }
    let failure = "[failed: 401]";
    let delta = se(
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":failure}}),
    );
    let lines = [
        init(),
        se(
            json!({"type":"message_start","message":{"id":"m1","role":"assistant","model":"m","content":[]}}),
        ),
        se(
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        delta,
        assistant("m1", json!([{"type":"text","text":failure}])),
        result_ok(failure),
    ];
    let mut exit = ExitInfo::default();
    exit.exit_code = Some(0);
    let mut harness = ProtocolHarness::new();
    let mut protocol = StreamJson::replaying(BARE.with_result_error(read));
    for line in lines {
        protocol
            .on_line(line.to_string().as_bytes(), &mut harness.ctx())
            .unwrap();
    }
    let finished = protocol.finish(&exit, &mut harness.ctx());
    assert!(
        matches!(finished, Err(AgentError::Auth { .. })),
        "{finished:?}"
    );
    let events = harness.transcript.take_events();
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains(failure), "the text is not an answer: {text}");
    // The failure is the run's: the driver's terminal error tells it, once (none of the protocol's own).
    assert_eq!(
        events.iter().filter(|e| e.type_name() == "error").count(),
        0,
        "no error event of its own: {text}"
    );
    // Without the reader the same lines are an ordinary answer.
    let mut plain = StreamJson::replaying(DIALECT);
    let mut harness = ProtocolHarness::new();
    plain
        .on_line(result_ok("ok").to_string().as_bytes(), &mut harness.ctx())
        .unwrap();
    assert!(plain.finish(&exit, &mut harness.ctx()).is_ok());
}

#[test]
fn plain_input_sends_user_messages_only_as_text_blocks() {
    use agent_api::kit::Protocol;
    let mut harness = agent_api::kit::ProtocolHarness::new();
    let mut protocol = StreamJson::control(
        BARE.user_messages_only(),
        "hello",
        PermissionPolicy::Ask,
        false,
    );
    protocol.start(&mut harness.ctx()).unwrap();
    let sent = harness.take_sent();
    assert_eq!(
        sent,
        [
            json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":"hello"}]}})
        ]
    );
    assert!(
        !protocol.interrupt(&mut harness.ctx()),
        "no control interrupt: the group is terminated"
    );
    assert!(harness.take_sent().is_empty());
}

#[test]
fn an_error_string_explains_a_failed_result_and_cmd_and_path_inputs_make_permission_details() {
    use agent_api::kit::Protocol;
    let mut harness = agent_api::kit::ProtocolHarness::new();
    let mut protocol = StreamJson::replaying(DIALECT);
    let line = json!({"type":"result","subtype":"error_during_execution","is_error":true,"error":"the tool crashed","session_id":SID});
    protocol
        .on_line(line.to_string().as_bytes(), &mut harness.ctx())
        .unwrap();
    let finished = protocol.finish(&agent_api::kit::ExitInfo::default(), &mut harness.ctx());
    assert!(
        matches!(&finished, Err(AgentError::AgentFailed { message }) if message.contains("the tool crashed")),
        "{finished:?}"
    );
    let request = DIALECT.tool_permission("p1", "Bash", &json!({"cmd":"ls -la","cwd":"/w"}));
    assert_eq!(
        (
            request.details.command.as_deref(),
            request.details.cwd.as_deref()
        ),
        (Some("ls -la"), Some("/w"))
    );
    assert_eq!(request.action, "Bash: ls -la");
    let read = DIALECT.tool_permission("p2", "Read", &json!({"path":"/w/a.rs"}));
    assert_eq!(
        (read.category, read.details.file.as_deref()),
        (agent_api::request::ToolCategory::FileRead, Some("/w/a.rs"))
    );
}

#[test]
fn images_go_with_the_user_message_as_base64_blocks_and_a_cli_without_them_refuses_a_turn_with_one()
{
    use agent_api::kit::Protocol;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dot.png");
    std::fs::write(&path, [0x89, b'P', b'N', b'G']).unwrap();
    let mut prompt = agent_api::Prompt::from("look");
    prompt.images.push(path.clone());
    let images = agent_api::kit::images::ImageData::read_all(&prompt).unwrap();
    let mut harness = agent_api::kit::ProtocolHarness::new();
    let mut protocol =
        StreamJson::control(DIALECT, "look", PermissionPolicy::Ask, false).with_images(images);
    protocol.start(&mut harness.ctx()).unwrap();
    let user = harness
        .take_sent()
        .into_iter()
        .find(|m| m["type"] == "user")
        .expect("the user message");
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}});
    assert_eq!(
        user["message"]["content"],
        json!([{"type": "text", "text": "look"}, image])
    );

    prompt.text = "again".into();
    let mut qwen_like = StreamJson::session(BARE, PermissionPolicy::Ask, false);
    let refused = qwen_like.send_turn(&prompt, &mut harness.ctx());
    assert!(
        matches!(refused, Err(AgentError::InvalidRequest { .. })),
        "{refused:?}"
    );
    assert!(
        harness.take_sent().is_empty(),
        "nothing sent for a refused turn"
    );
}

/// An Edit, a Write and a MultiEdit ask with the file and what would change in it.
#[test]
fn file_edit_permissions_carry_the_file_and_a_diff() {
    let edit = DIALECT.tool_permission(
        "p1",
        "Edit",
        &json!({"file_path": "/r/a.txt", "old_string": "one", "new_string": "two"}),
    );
    assert_eq!(edit.details.file.as_deref(), Some("/r/a.txt"));
    assert_eq!(edit.details.diff.as_deref(), Some("-one\n+two\n"));
    let write = DIALECT.tool_permission(
        "p2",
        "Write",
        &json!({"file_path": "/r/b.txt", "content": "new\nfile"}),
    );
    assert_eq!(write.details.diff.as_deref(), Some("+new\n+file\n"));
    let multi = DIALECT.tool_permission(
        "p3",
        "MultiEdit",
        &json!({"file_path": "/r/c.txt", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d"}]}),
    );
    assert_eq!(multi.details.diff.as_deref(), Some("-a\n+b\n-c\n+d\n"));
    let huge = DIALECT.tool_permission(
        "p4",
        "Write",
        &json!({"file_path": "/r/d.txt", "content": "x".repeat(1 << 20)}),
    );
    assert!(
        huge.details.diff.as_ref().unwrap().len() <= agent_api::universal::PERMISSION_DIFF_BOUND,
        "bounded"
    );
    let bash = DIALECT.tool_permission("p5", "Bash", &json!({"command": "ls"}));
    assert_eq!(bash.details.diff, None);
}

/// A permission's command is the tool call's: cut only over the command bound, by the kit (not by
/// the backend), and masked by the one redactor the tools facet uses.
#[test]
fn a_key_in_a_permission_command_is_masked_and_a_command_over_the_bound_cut_with_its_length() {
    use agent_api::kit::Protocol;
    let key = "sk-ant-api03-SENTINELSENTINELSENTINEL";
    let long = format!(
        "curl -H 'Authorization: Bearer {key}' https://example.invalid/{}",
        "x".repeat(20 << 10)
    );
    let mut protocol = StreamJson::control(DIALECT, "go", PermissionPolicy::Ask, false);
    let mut harness = agent_api::kit::ProtocolHarness::new();
    protocol.start(&mut harness.ctx()).unwrap();
    protocol
        .on_line(
            can_use_tool("r1", "Bash", json!({"command": long}))
                .to_string()
                .as_bytes(),
            &mut harness.ctx(),
        )
        .unwrap();
    let events = harness.transcript.take_events();
    let requested = events
        .iter()
        .find_map(|e| match &e.body {
            UniversalEventBody::PermissionRequested(p) => Some(p.clone()),
            _ => None,
        })
        .expect("a permission request");
    let command = requested.details.command.clone().expect("the command");
    assert!(
        !command.contains(key) && command.contains("[redacted]"),
        "{command}"
    );
    // Over the bound the command is cut, and says so with its real length: a person is never
    // shown a prefix as if it were the whole command.
    assert!(
        command.len() <= agent_api::universal::COMMAND_BOUND + "[redacted]".len(),
        "cut: {} bytes",
        command.len()
    );
    assert!(
        requested
            .details
            .command_bytes
            .is_some_and(|n| n as usize > command.len()),
        "the real length is given: {:?}",
        requested.details.command_bytes
    );
    let shown = serde_json::to_string(&events).unwrap();
    assert!(!shown.contains(key), "the key shows nowhere: {shown}");
}
