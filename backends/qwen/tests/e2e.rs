//! End to end with the real pinned Qwen Code (0.15.10) against the bench's scripted model server:
//! `qwen --acp` (the default interface) for text, permissions, the confined file system, HTTP
//! errors and cancel. Without the CLI these fail with install instructions, unless
//! AGENT_API_E2E=skip. Error runs are slow: Qwen retries a 500 for about 80 s whatever its settings
//! (see `agent_api_qwen`: no setting or variable of 0.15.10 bounds those retries).

use std::time::Duration;

use agent_api::universal::{DecidedBy, ItemKind, ItemStatus};
use agent_api::{AgentBackend, AgentError, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::{assert_conformant, assert_one_permission, drive, RunRecord};
use agent_api_qwen::QwenBackend;
use agent_api_qwen::{QwenInterface, QwenOptions};
use agent_bench::process::processes_in;
use agent_bench::{Cli, ModelServer, Sandbox};

/// The sandbox's Qwen with its environment; the backend adds `--acp`.
pub fn backend(sandbox: &Sandbox) -> QwenBackend {
    let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    QwenBackend::new(config)
}

async fn setup(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::Qwen, scenario).await
}

fn request(prompt: &str) -> RunRequest {
    RunRequest::new(prompt).with_timeout(Duration::from_secs(150))
}

/// The shell call is in the transcript either way: a completed result when it ran, a failed one
/// when it was denied (Qwen then sends no update for it).
fn shell_call_shown(run: &RunRecord, ran: bool) {
    let calls = run.completed_items(ItemKind::ToolCall);
    assert!(
        calls.iter().any(|c| c
            .tool
            .as_ref()
            .is_some_and(|t| t.kind == "command_execution")),
        "{:?}",
        run.types()
    );
    let results = run.completed_items(ItemKind::ToolResult);
    let shell = results
        .iter()
        .find(|i| {
            i.tool
                .as_ref()
                .is_some_and(|t| t.kind == "command_execution")
        })
        .expect("a shell result");
    let expected = if ran {
        ItemStatus::Completed
    } else {
        ItemStatus::Failed
    };
    assert_eq!(shell.status, expected);
    // The result ends when the tool does (or is denied), before the answer that follows it.
    let position =
        |f: &dyn Fn(&agent_api::UniversalEvent) -> bool| run.universal.iter().rposition(f);
    let result_done = position(&|e| {
        e.type_name() == "item.completed"
            && e.item().is_some_and(|i| i.kind == ItemKind::ToolResult)
    });
    let answer = position(&|e| {
        e.type_name() == "item.started" && e.item().is_some_and(|i| i.kind == ItemKind::Message)
    });
    assert!(result_done < answer, "{:?}", run.types());
}

#[tokio::test]
async fn acp_text_streams_with_usage_and_session() {
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        request("say hi").with_model("picked-model"),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    let done = run.completion.as_ref().unwrap();
    assert_eq!(done.final_text.as_deref(), Some("Hello from mock"));
    let models: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert!(
        !models.is_empty() && models.iter().all(|m| m == "picked-model"),
        "the run's model reached the API: {models:?}"
    );
    assert!(done.native_session_id.is_some(), "{done:?}");
    assert!(
        done.usage
            .as_ref()
            .is_some_and(|u| u.input_tokens.is_some()),
        "usage from the chunk's _meta: {done:?}"
    );
    let started = serde_json::to_value(&run.universal[0].body).unwrap();
    assert!(
        started.to_string().contains("qwen"),
        "the agent's name is in session.started: {started}"
    );
}

#[tokio::test]
async fn acp_shell_follows_the_callers_decision() {
    for (decision, runs) in [
        (PermissionDecision::Allow, true),
        (PermissionDecision::Deny { message: None }, false),
    ] {
        let Some((_server, sandbox)) = setup("shell").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            request("run the command"),
            Some(decision),
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_one_permission(&run, runs, DecidedBy::Caller);
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs);
        shell_call_shown(&run, runs);
    }
}

#[tokio::test]
async fn acp_shell_follows_the_policy_with_one_request_and_one_resolution() {
    for (policy, runs) in [
        (PermissionPolicy::ApproveAll, true),
        (PermissionPolicy::DenyAll, false),
    ] {
        let Some((_server, sandbox)) = setup("shell").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            request("run the command").with_permissions(policy),
            None,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_one_permission(&run, runs, DecidedBy::Policy);
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs);
        shell_call_shown(&run, runs);
    }
}

#[tokio::test]
async fn acp_write_and_edit_go_through_the_confined_fs_into_the_cwd() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        request("create the file").with_permissions(PermissionPolicy::ApproveAll),
        None,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let written = std::fs::read_to_string(sandbox.cwd.join("created.txt"))
        .expect("the file landed in the cwd");
    assert!(
        written.contains("edited by mock"),
        "the edit landed: {written}"
    );
    let writes = run
        .status_labels()
        .iter()
        .filter(|l| *l == "fs_write")
        .count();
    assert!(
        writes >= 2,
        "the write and the edit both went through fs/write_text_file: {:?}",
        run.status_labels()
    );
}

/// (The overloaded API's `RateLimited` is in the retries test below.)
#[tokio::test]
async fn acp_http_errors_are_one_typed_terminal_error() {
    for scenario in ["error401", "error500"] {
        let Some((_server, sandbox)) = setup(scenario).await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            request("hi"),
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        match (&run.completion, scenario) {
            (Err(AgentError::Auth { .. }), "error401")
            | (
                Err(AgentError::ServerError {
                    status: Some(500), ..
                }),
                "error500",
            ) => {}
            other => panic!("{scenario}: {other:?}"),
        }
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1
        );
        assert!(!format!("{:?}", run.completion).contains("sk-test"));
    }
}

/// Qwen reports its retries only in its debug log: the run follows it, and the overloaded model
/// API's retries show as `api_retry` and `rate_limited` statuses before the run's one typed
/// error; on ACP, two-way stream-json and print.
#[tokio::test]
async fn retries_in_the_debug_log_show_as_rate_limited_statuses_before_the_typed_error() {
    for make in [request as fn(&str) -> RunRequest, stream_json, print] {
        let Some((_server, sandbox)) = setup("overloaded").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            make("hi"),
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(run.completion, Err(AgentError::RateLimited { .. })),
            "{:?}",
            run.completion
        );
        let labels = run.status_labels();
        assert!(
            labels.iter().any(|l| l == "api_retry") && labels.iter().any(|l| l == "rate_limited"),
            "{labels:?}"
        );
        assert!(
            run.status_before_terminal_error("rate_limited"),
            "the retry shows before the run's error: {:?}",
            run.types()
        );
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1
        );
    }
}

/// A runtime directory moved by Qwen's own settings (`advanced.runtimeOutputDir`, here the
/// workspace's) moves the debug log too: the run follows it there (ACP; the interfaces share the
/// path's reading).
#[tokio::test]
async fn retries_are_followed_where_the_settings_move_the_runtime_dir() {
    let Some((_server, sandbox)) = setup("overloaded").await else {
        return;
    };
    let runtime = sandbox.cwd.join("runtime-out");
    let settings = serde_json::json!({ "advanced": { "runtimeOutputDir": runtime } });
    std::fs::create_dir_all(sandbox.cwd.join(".qwen")).unwrap();
    std::fs::write(
        sandbox.cwd.join(".qwen/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let run = drive(
        &backend(&sandbox),
        request("hi"),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::RateLimited { .. })),
        "{:?}",
        run.completion
    );
    let logs: Vec<_> = std::fs::read_dir(runtime.join("debug"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        logs.iter()
            .any(|p| p.extension().is_some_and(|e| e == "txt")),
        "Qwen wrote its debug logs in the moved runtime directory: {logs:?}"
    );
    assert!(
        run.status_before_terminal_error("rate_limited"),
        "the retries show before the run's error: {:?}",
        run.types()
    );
}

#[tokio::test]
async fn acp_cancel_mid_turn_leaves_no_process() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        request("talk slowly"),
        Some(PermissionDecision::Allow),
        true,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    let after = run.time_after_first_delta();
    assert!(
        after < Duration::from_secs(20),
        "the run went on {after:?} after its cancel (slow_text streams 30 s)"
    );
    assert_eq!(
        processes_in(&sandbox.cwd),
        Vec::<i32>::new(),
        "processes left in the sandbox"
    );
}

// Two-way stream-json (Claude Code's control protocol) and one-way print.

fn stream_json(prompt: &str) -> RunRequest {
    request(prompt).with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))
}

fn print(prompt: &str) -> RunRequest {
    request(prompt).with_options(&QwenOptions::default().interface(QwenInterface::Print))
}

#[tokio::test]
async fn stream_json_text() {
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        stream_json("say hi").with_model("picked-model"),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        run.of_type("item.delta").filter(|e| !e.synthetic).count() >= 2,
        "partial messages stream: {:?}",
        run.types()
    );
    let done = run.completion.as_ref().unwrap();
    assert_eq!(done.final_text.as_deref(), Some("Hello from mock"));
    assert!(done.native_session_id.is_some(), "{done:?}");
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.body["model"] == "picked-model"),
        "the run's model reached the API"
    );
}

#[tokio::test]
async fn stream_json_shell_follows_the_caller_and_the_policy() {
    let cases = [
        (
            Some(PermissionDecision::Allow),
            PermissionPolicy::Ask,
            true,
            DecidedBy::Caller,
        ),
        (
            Some(PermissionDecision::Deny { message: None }),
            PermissionPolicy::Ask,
            false,
            DecidedBy::Caller,
        ),
        (None, PermissionPolicy::ApproveAll, true, DecidedBy::Policy),
        (None, PermissionPolicy::DenyAll, false, DecidedBy::Policy),
    ];
    for (decision, policy, runs, by) in cases {
        let Some((_server, sandbox)) = setup("shell").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            stream_json("run the command").with_permissions(policy),
            decision,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_one_permission(&run, runs, by);
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs);
    }
}

#[tokio::test]
async fn stream_json_cancel_mid_turn_leaves_no_process() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        stream_json("talk slowly"),
        Some(PermissionDecision::Allow),
        true,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    let after = run.time_after_first_delta();
    assert!(
        after < Duration::from_secs(20),
        "the run went on {after:?} after its cancel (slow_text streams 30 s)"
    );
    assert_eq!(
        processes_in(&sandbox.cwd),
        Vec::<i32>::new(),
        "processes left in the sandbox"
    );
}

#[tokio::test]
async fn stream_json_and_print_api_errors_are_one_typed_terminal_error() {
    for make in [stream_json as fn(&str) -> RunRequest, print] {
        let Some((_server, sandbox)) = setup("error401").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            make("hi"),
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(run.completion, Err(AgentError::Auth { .. })),
            "{:?}",
            run.completion
        );
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1,
            "{:?}",
            run.types()
        );
        assert!(
            run.assistant_text().is_empty(),
            "the API error is not an answer: {}",
            run.assistant_text()
        );
        assert!(
            !format!("{:?}", run.universal).contains("sk-test"),
            "no key in any event"
        );
    }
}

#[tokio::test]
async fn print_text_and_shell_pre_approved_by_the_policy_or_with_the_explicit_dont_ask_option() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(&backend(&sandbox), print("say hi"), None, false).await;
    assert_conformant(&run);
    assert!(
        run.of_type("item.delta").filter(|e| !e.synthetic).count() >= 2,
        "partial messages stream: {:?}",
        run.types()
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock")
    );
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let run = drive(&backend(&sandbox), print("run the command"), None, false).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(
        !sandbox.cwd.join("out.txt").exists(),
        "without the option Qwen does not run the command"
    );
    // A policy that approves shell commands is Qwen's own pre-approval (`--allowed-tools`).
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let approving = print("run the command").with_permissions(PermissionPolicy::ApproveAll);
    let run = drive(&backend(&sandbox), approving, None, false).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(
        sandbox.cwd.join("out.txt").exists(),
        "the approve-all policy pre-approved the shell tool"
    );
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        print("run the command").with_skip_permission_prompts(true),
        None,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(
        sandbox.cwd.join("out.txt").exists(),
        "the command ran without asking"
    );
    assert_eq!(
        run.of_type("permission.requested").count(),
        0,
        "print mode cannot ask"
    );
}

#[tokio::test]
async fn structured_output_on_print_and_two_way_stream_json() {
    use agent_api::PortableOptions;
    let Some((_server, sandbox)) = setup("json_answer").await else {
        return;
    };
    let schema = serde_json::json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    // Print takes `--json-schema` (the CLI's `structured_output` tool); the two-way interface gets the
    // SDK's schema in the prompt, and the mock answers the JSON as text.
    for request in [print("where?"), stream_json("where?")] {
        let request =
            request.with_portable(PortableOptions::default().output_schema(schema.clone()));
        let run = drive(
            &backend(&sandbox),
            request,
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_eq!(
            run.completion.as_ref().unwrap().structured_output,
            Some(serde_json::json!({"city": "Lyon"}))
        );
    }
}

/// On ACP and on two-way stream-json: the replacement system prompt (from the 0600 file
/// `QWEN_SYSTEM_MD` names, not argv), the appended one, the extra directory and the denied tool all
/// shape the model request.
#[tokio::test]
async fn acp_system_prompt_extra_directory_and_denied_tool_reach_the_model_request() {
    use agent_api::PortableOptions;
    for over_stream_json in [false, true] {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let extra = tempfile::tempdir().unwrap();
        let portable = PortableOptions::default()
            .system_prompt("SYSTEM-MARKER-7 you are terse")
            .append_system_prompt("APPEND-MARKER-9")
            .add_dir(extra.path())
            .deny_tool("run_shell_command")
            .deny_category(agent_api::request::ToolCategory::FileWrite);
        let request = if over_stream_json {
            stream_json("say hi")
        } else {
            request("say hi")
        }
        .with_portable(portable);
        let run = drive(
            &backend(&sandbox),
            request,
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_reaches_the_model(&server, &extra);
    }
}

fn assert_reaches_the_model(server: &ModelServer, extra: &tempfile::TempDir) {
    let main = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.get("tools").is_some())
        .expect("a request with tools")
        .body;
    let text = main.to_string();
    assert!(
        text.contains("SYSTEM-MARKER-7"),
        "the system prompt is not in the request"
    );
    assert!(
        !text.contains("You are Qwen Code"),
        "Qwen's own system prompt stayed"
    );
    assert!(
        text.contains("APPEND-MARKER-9"),
        "the appended prompt is not in the request"
    );
    assert!(
        text.contains(&*extra.path().to_string_lossy()),
        "the extra directory is not in the request"
    );
    let offered: Vec<&str> = main["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        offered.contains(&"read_file") && !offered.contains(&"run_shell_command"),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"edit") && !offered.contains(&"write_file"),
        "a file_write tool stayed: {offered:?}"
    );
}

/// Qwen's ACP inside bubblewrap: the stdio protocol runs over the launcher unchanged.
mod through_bwrap {
    use super::*;

    use agent_api_conformance::through_bwrap::{self as shared, BenchAgent};

    const QWEN: BenchAgent<QwenBackend> = BenchAgent {
        cli: Cli::Qwen,
        backend,
        request,
    };

    #[tokio::test]
    async fn text_streams_and_the_completion_names_the_launcher() {
        shared::text_streams_and_the_completion_names_the_launcher(&QWEN).await;
    }

    #[tokio::test]
    async fn shell_follows_the_callers_decision() {
        shared::shell_follows_the_callers_decision(&QWEN).await;
    }

    #[tokio::test]
    async fn cancel_mid_turn_leaves_no_process() {
        shared::cancel_mid_turn_leaves_no_process(&QWEN).await;
    }
}

/// Every model request of the run, as JSON text.
fn model_requests(server: &ModelServer) -> String {
    server
        .requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What Qwen tells the model in plan mode (0.15.10), its own report of the mode.
const PLAN_REMINDER: &str = "Plan mode is active.";

/// Plan mode is Qwen's `--approval-mode plan` on ACP, two-way stream-json and print: the scripted
/// write leaves no file although every request is approved, and Qwen reports its plan mode to
/// the model ("Plan mode is active."), which the default mode does not.
#[tokio::test]
async fn plan_mode_writes_nothing_on_every_interface() {
    for interface in [
        QwenInterface::Acp,
        QwenInterface::StreamJson,
        QwenInterface::Print,
    ] {
        let Some((server, sandbox)) = setup("write_edit").await else {
            return;
        };
        let request = request("create the file")
            .with_options(&QwenOptions::default().interface(interface))
            .with_permissions(PermissionPolicy::ApproveAll)
            .with_mode(agent_api::request::AgentMode::Plan);
        let run = drive(&backend(&sandbox), request, None, false).await;
        assert!(
            run.completion.is_ok(),
            "{interface:?}: {:?}",
            run.completion
        );
        assert!(
            !sandbox.cwd.join("created.txt").exists(),
            "{interface:?}: plan mode wrote a file"
        );
        assert!(
            model_requests(&server).contains(PLAN_REMINDER),
            "{interface:?}: Qwen did not say plan mode is active"
        );
    }
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(&backend(&sandbox), request("say hi"), None, false).await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(
        !model_requests(&server).contains(PLAN_REMINDER),
        "the default mode is not plan mode"
    );
}

/// Plan mode's exit over ACP (a `switch_mode` permission with the plan in its input) is the
/// typed question Claude Code's is: the plan in its text, the same options. Approving selects
/// Qwen's option that leaves plan mode for its default (the tool tells the model the plan was
/// approved, and Qwen reports its new mode); declining keeps planning (the tool is refused).
#[tokio::test]
async fn acp_the_exit_plan_question_round_trips() {
    use agent_api::kit::hitl::EXIT_PLAN_OPTIONS;
    use agent_api_conformance::run_answering_exit_plan;
    for (answer, approved) in [(EXIT_PLAN_OPTIONS[0], true), (EXIT_PLAN_OPTIONS[1], false)] {
        let Some((server, sandbox)) = setup("exit_plan_text").await else {
            return;
        };
        let (run, text) = run_answering_exit_plan(
            &backend(&sandbox),
            request("plan it"),
            answer,
            "1. Write plan.txt",
        )
        .await;
        let left = model_requests(&server).contains("User has approved your plan");
        assert_eq!(
            (left, text.contains("canceled by the user")),
            (approved, !approved),
            "{answer}: {text}"
        );
        assert_eq!(
            run.status_labels().contains(&"current_mode".to_string()),
            approved,
            "{:?}",
            run.status_labels()
        );
    }
}

/// Qwen 0.15.10 has no exit-plan tool on its two-way stream-json interface: an SDK's
/// `initialize` turns on its SDK mode, which leaves `exit_plan_mode` out and tells the model to
/// present its plan directly; there is no question to ask there.
#[tokio::test]
async fn stream_json_plan_mode_offers_no_exit_plan_tool() {
    let Some((_server, sandbox)) = setup("exit_plan_text").await else {
        return;
    };
    let request = request("plan it")
        .with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))
        .with_mode(agent_api::request::AgentMode::Plan);
    let run = drive(&backend(&sandbox), request, None, false).await;
    assert_conformant(&run);
    let text = run
        .completion
        .as_ref()
        .expect("the run ends well")
        .final_text
        .clone()
        .unwrap_or_default();
    assert!(text.contains("offers no exit_plan_mode tool"), "{text}");
    assert_eq!(run.of_type("question.requested").count(), 0);
}

/// A variant is Qwen's reasoning effort on every interface: the settings file the SDK writes
/// puts it in every model request as `reasoning.effort`; without one the request has none.
#[tokio::test]
async fn a_variant_reaches_the_model_request_as_its_reasoning_effort_on_every_interface() {
    for interface in [
        QwenInterface::Acp,
        QwenInterface::StreamJson,
        QwenInterface::Print,
    ] {
        for variant in [Some("high"), Some("low"), None] {
            let Some((server, sandbox)) = setup("text").await else {
                return;
            };
            let mut request =
                request("say hi").with_options(&QwenOptions::default().interface(interface));
            if let Some(variant) = variant {
                request = request.with_variant(variant);
            }
            let run = drive(&backend(&sandbox), request, None, false).await;
            assert!(
                run.completion.is_ok(),
                "{interface:?} {variant:?}: {:?}",
                run.completion
            );
            let efforts: Vec<_> = server
                .requests()
                .iter()
                .map(|r| r.body.pointer("/reasoning/effort").cloned())
                .collect();
            assert!(!efforts.is_empty(), "{interface:?}: no model request");
            assert!(
                efforts.iter().all(|e| *e == variant.map(Into::into)),
                "{interface:?} {variant:?}: {efforts:?}"
            );
        }
    }
}

#[test]
fn an_unknown_mode_is_refused_before_spawn_naming_qwens() {
    let backend = agent_api_qwen::QwenBackend::new(AcpConfig::with_binary("/nonexistent/qwen"));
    let err = backend
        .validate(
            &RunRequest::new("x").with_mode(agent_api::request::AgentMode::parse("auto_edit")),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("default, plan, auto-edit, yolo"),
        "{err}"
    );
    let err = backend
        .validate(&RunRequest::new("x").with_variant("max"))
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::UnknownVariant { valid, .. } if valid == &["low", "medium", "high"]),
        "{err}"
    );
}

#[tokio::test]
async fn acp_session_snapshot_goes_on_in_an_empty_home_with_another_working_dir() {
    let Some((server, sandbox)) = setup("echo").await else {
        return;
    };
    let elsewhere = Sandbox::new(Cli::Qwen, &server, "echo").unwrap();
    assert_ne!(sandbox.cwd, elsewhere.cwd);
    let snapshot = agent_api_conformance::snapshot::goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&sandbox)),
        std::sync::Arc::new(backend(&elsewhere)),
        request(""),
        // Qwen Code's environment message is a user turn of every conversation.
        1,
    )
    .await;
    // Re-keyed: the chat is under the other working directory's project.
    let key: String = elsewhere
        .cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let restored = elsewhere
        .home
        .join(".qwen/projects")
        .join(key)
        .join("chats")
        .join(format!("{}.jsonl", snapshot.native_session_id));
    assert!(restored.is_file(), "{}", restored.display());
}
