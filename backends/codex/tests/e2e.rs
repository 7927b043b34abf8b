//! End to end with the real pinned Codex CLI (codex-cli 0.169.0) against the bench's scripted
//! model server. Without the CLI these fail with install instructions, unless AGENT_API_E2E=skip.

use agent_api::run::Channel;
use std::time::Duration;

use agent_api::universal::{DecidedBy, PermissionStatus, UniversalEventBody};
use agent_api::{
    AgentBackend, AgentError, PermissionDecision, PermissionPolicy, QuestionAnswer, RunRequest,
    SessionSelector,
};
use agent_api_bench_support::*;
use agent_api_codex::{CodexBackend, CodexConfig, CodexOptions, Mode};
use agent_api_conformance::{assert_conformant, RunRecord};
use agent_bench::{Cli, ModelServer, Sandbox};

mod agent_api_bench_support {
    use super::*;
    use agent_api::kit::projection::Projector;
    use futures::StreamExt;

    /// A backend running the sandbox's CLI with its environment and `-c` flags.
    pub(crate) fn backend(sandbox: &Sandbox) -> CodexBackend {
        let mut overrides = Vec::new();
        let mut args = sandbox.base_args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "-c" => overrides.extend(args.next().cloned()),
                "--disable" => {
                    args.next(); // the backend's quiet flags already disable plugins
                }
                _ => {}
            }
        }
        let mut config = CodexConfig::with_binary(&sandbox.program)
            .config_overrides(overrides)
            .working_dir(&sandbox.cwd);
        for (k, v) in &sandbox.env {
            config = config.env(k, v);
        }
        CodexBackend::new(config)
    }

    /// Runs `request`, answering permissions with `decision` and questions with their first option.
    pub(crate) async fn drive(
        backend: &CodexBackend,
        request: RunRequest,
        decision: PermissionDecision,
        cancel_on_first_delta: bool,
    ) -> RunRecord {
        let handle = backend
            .run(request.with_timeout(Duration::from_secs(120)))
            .await
            .expect("run starts");
        let control = handle.control();
        let mut projector = Projector::new(handle.agent_kind().clone(), handle.tools_structured());
        let (mut events, completion) = handle.into_universal();
        let mut universal = Vec::new();
        while let Some(event) = events.next().await {
            match &event.body {
                UniversalEventBody::PermissionRequested(p) => control
                    .respond_permission(&p.permission_id, decision.clone())
                    .await
                    .unwrap(),
                UniversalEventBody::QuestionRequested(q) => {
                    let answer = q.options.first().cloned().unwrap_or_else(|| "yes".into());
                    control
                        .answer_question(&q.question_id, QuestionAnswer::Text(answer))
                        .await
                        .unwrap();
                }
                UniversalEventBody::ItemDelta(_) if cancel_on_first_delta && !event.synthetic => {
                    control.cancel()
                }
                _ => {}
            }
            universal.push(event);
        }
        let wrapper = universal
            .iter()
            .flat_map(|e| projector.project(e))
            .collect();
        RunRecord {
            universal,
            wrapper,
            completion: completion.await,
            tools_structured: true,
        }
    }
}

async fn setup(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::Codex, scenario).await
}

fn exec(request: RunRequest) -> RunRequest {
    request.with_options(&CodexOptions::default().mode(Mode::Exec))
}

#[tokio::test]
async fn app_server_text_streams_native_deltas() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        RunRequest::new("say hi").with_model("gpt-5.5"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Hello from mock");
    assert!(run.of_type("item.delta").filter(|e| !e.synthetic).count() >= 2);
    let done = run.completion.as_ref().unwrap();
    assert!(done.native_session_id.is_some() && done.usage.is_some());
}

#[tokio::test]
async fn app_server_reasoning_arrives_as_reasoning() {
    let Some((_server, sandbox)) = setup("reasoning").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        RunRequest::new("think then say hi"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        run.wrapper.iter().any(|e| e.is_on(&Channel::Reasoning)),
        "{:?}",
        run.types()
    );
    assert_eq!(run.assistant_text(), "Hello after thinking");
}

#[tokio::test]
async fn app_server_shell_approved_runs_and_declined_does_not() {
    for (decision, runs) in [
        (PermissionDecision::Allow, true),
        (PermissionDecision::Deny { message: None }, false),
    ] {
        let Some((_server, sandbox)) = setup("shell").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            RunRequest::new("run the command"),
            decision,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_eq!(
            run.of_type("permission.requested").count(),
            1,
            "{:?}",
            run.types()
        );
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs);
        // The command and its directory are typed in the tools facet (Codex wraps it in a login shell).
        let mut calls = agent_api::run::ToolCalls::new();
        for event in &run.wrapper {
            calls.push_wrapper(event);
        }
        let shell = calls
            .calls()
            .iter()
            .find(|c| c.kind.as_deref() == Some("command_execution"))
            .expect("a shell call");
        assert!(
            shell
                .command
                .as_deref()
                .is_some_and(|c| c.contains(agent_bench::scenario::SHELL_COMMAND)),
            "{shell:?}"
        );
        assert!(shell.cwd.is_some(), "{shell:?}");
        if runs {
            assert_eq!(
                (shell.exit_code, shell.status),
                (Some(0), agent_api::run::ToolStatus::Completed),
                "{shell:?}"
            );
        }
    }
}

#[tokio::test]
async fn app_server_file_change_approved_carries_its_diff() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let request = RunRequest::new("create the file")
        .with_options(&CodexOptions::default().sandbox(agent_api_codex::Sandbox::ReadOnly));
    let run = drive(
        &backend(&sandbox),
        request,
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(sandbox.cwd.join("created.txt").exists());
    let diff_bytes = run
        .wrapper
        .iter()
        .filter_map(|e| e.data.as_ref())
        .filter(|d| d["tool"]["kind"] == "file_change")
        .map(|d| d["tool"]["bytes"]["diff"].as_u64().unwrap_or(0))
        .max();
    assert!(
        diff_bytes.unwrap_or(0) > 0,
        "file change facets carry the diff size"
    );
}

#[tokio::test]
async fn app_server_interrupt_mid_stream_is_cancelled_with_nothing_open() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        RunRequest::new("talk slowly"),
        PermissionDecision::Allow,
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
}

#[tokio::test]
async fn app_server_interrupt_during_a_long_command_is_cancelled() {
    let Some((_server, sandbox)) = setup("slow_shell").await else {
        return;
    };
    let backend = backend(&sandbox);
    let request = RunRequest::new("sleep")
        .with_permissions(PermissionPolicy::ApproveAll)
        .with_timeout(Duration::from_secs(60));
    let handle = backend.run(request).await.unwrap();
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut universal = Vec::new();
    use futures::StreamExt;
    while let Some(event) = events.next().await {
        if matches!(&event.body, UniversalEventBody::ItemStarted(d) if d.item.kind == agent_api::universal::ItemKind::ToolResult)
        {
            let c = control.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                c.cancel();
            });
        }
        universal.push(event);
    }
    assert!(matches!(completion.await, Err(AgentError::Cancelled)));
    assert!(universal
        .iter()
        .any(|e| matches!(&e.body, UniversalEventBody::ItemStarted(d) if d.item.kind == agent_api::universal::ItemKind::ToolResult)));
    // Nothing may still run in the sandbox's working directory (the `sleep 30` included).
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == sandbox.cwd))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "processes left in the sandbox: {left:?}");
}

#[tokio::test]
async fn app_server_resume_and_fork_continue_the_thread_in_new_processes() {
    let Some((server, first)) = setup("echo").await else {
        return;
    };
    let run = drive(
        &backend(&first),
        RunRequest::new("first"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    let thread = run
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .unwrap();
    let again = first.for_resume("echo");
    let resumed = drive(
        &backend(&again),
        RunRequest::new("second").with_session(SessionSelector::Resume(thread.clone().into())),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&resumed);
    assert_eq!(
        resumed
            .completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(thread.as_str())
    );
    assert!(
        resumed.assistant_text().contains("user_turns=2"),
        "{}",
        resumed.assistant_text()
    );
    let forked = drive(
        &backend(&again),
        RunRequest::new("third").with_session(SessionSelector::Fork(thread.clone().into())),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&forked);
    assert_ne!(
        forked
            .completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(thread.as_str())
    );
    assert!(
        forked.assistant_text().contains("user_turns=3")
            || forked.assistant_text().contains("user_turns=2"),
        "{}",
        forked.assistant_text()
    );
    drop(server);
}

#[tokio::test]
async fn app_server_http_errors_are_typed() {
    let Some((_server, sandbox)) = setup("error401").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        RunRequest::new("hi"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Auth { .. })),
        "{:?}",
        run.completion
    );
    let Some((_server, sandbox)) = setup("error500").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        RunRequest::new("hi"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::ServerError { .. })),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn an_overloaded_model_api_is_overloaded_with_a_rate_limited_status_in_both_modes() {
    for exec_mode in [false, true] {
        let Some((_server, sandbox)) = setup("overloaded").await else {
            return;
        };
        let request = if exec_mode {
            exec(RunRequest::new("hi"))
        } else {
            RunRequest::new("hi")
        };
        let run = drive(
            &backend(&sandbox),
            request,
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(
                run.completion,
                Err(AgentError::Overloaded {
                    status: Some(503),
                    ..
                })
            ),
            "exec {exec_mode}: {:?}",
            run.completion
        );
        let limited = run
            .wrapper
            .iter()
            .filter_map(|e| e.message.as_deref())
            .find(|m| m.starts_with("rate_limited: "));
        assert_eq!(
            limited,
            Some("rate_limited: overloaded (HTTP 503)"),
            "exec {exec_mode}: {:?}",
            run.types()
        );
    }
}

#[tokio::test]
async fn app_server_request_user_input_is_answered() {
    let Some((_server, sandbox)) = setup("question").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        RunRequest::new("ask me which color and size"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        run.of_type("question.requested").count() >= 1,
        "{:?}",
        run.types()
    );
    assert!(
        run.assistant_text().contains("You answered"),
        "{}",
        run.assistant_text()
    );
}

#[tokio::test]
async fn exec_text_shell_patch_and_resume() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        exec(RunRequest::new("say hi").with_model("gpt-5.5")),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Hello from mock");
    let thread = run
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .unwrap();

    let resumed = drive(
        &backend(&sandbox.for_resume("echo")),
        exec(RunRequest::new("again").with_session(SessionSelector::Resume(thread.clone().into()))),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&resumed);
    assert_eq!(
        resumed
            .completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(thread.as_str())
    );
    assert!(
        resumed.assistant_text().contains("user_turns=2"),
        "{}",
        resumed.assistant_text()
    );

    let Some((_server, shell)) = setup("shell").await else {
        return;
    };
    let run = drive(
        &backend(&shell),
        exec(RunRequest::new("run the command").with_permissions(PermissionPolicy::ApproveAll)),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(shell.cwd.join("out.txt").exists(), "{:?}", run.types());

    let Some((_server, patch)) = setup("write_edit").await else {
        return;
    };
    let run = drive(
        &backend(&patch),
        exec(RunRequest::new("write it").with_permissions(PermissionPolicy::ApproveAll)),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(patch.cwd.join("created.txt").exists(), "{:?}", run.types());
}

#[tokio::test]
async fn resuming_through_the_session_handle_runs_in_the_threads_directory_and_an_unknown_thread_is_not_found(
) {
    for exec_mode in [false, true] {
        let mode = |r: RunRequest| if exec_mode { exec(r) } else { r };
        let Some((server, sandbox)) = setup("echo").await else {
            return;
        };
        let first = drive(
            &backend(&sandbox),
            mode(RunRequest::new("first")),
            PermissionDecision::Allow,
            false,
        )
        .await;
        let handle = first.completion.as_ref().unwrap().session.clone().unwrap();
        assert_eq!(handle.working_dir(), Some(sandbox.cwd.as_path()));
        let elsewhere = sandbox.home.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let request = RunRequest::new("second")
            .with_working_dir(&elsewhere)
            .with_session(SessionSelector::Resume(handle.clone()));
        let resumed = drive(
            &backend(&sandbox.for_resume("echo")),
            mode(request),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert!(
            resumed.assistant_text().contains("user_turns=2"),
            "exec {exec_mode}: {}",
            resumed.assistant_text()
        );
        assert_eq!(
            resumed.completion.as_ref().unwrap().session.as_ref(),
            Some(&handle)
        );
        let last = server
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.scenario.as_deref() == Some("echo"))
            .unwrap();
        let body = last.body.to_string();
        assert!(
            body.contains(&*sandbox.cwd.to_string_lossy()),
            "Codex tells the model its cwd"
        );
        assert!(
            !body.contains(&*elsewhere.to_string_lossy()),
            "exec {exec_mode}: the resume ran in the request's directory"
        );

        let unknown = SessionSelector::Resume("3f0c2a7e-1111-4222-8333-444455556666".into());
        let lost = drive(
            &backend(&sandbox),
            mode(RunRequest::new("hi").with_session(unknown)),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert!(
            matches!(&lost.completion, Err(AgentError::SessionNotFound { id }) if id == "3f0c2a7e-1111-4222-8333-444455556666"),
            "exec {exec_mode}: {:?}",
            lost.completion
        );
    }
}

/// Runs the shell scenario under `policy` with nobody answering.
async fn shell_under_policy(request: RunRequest) -> Option<(RunRecord, Sandbox)> {
    let (_server, sandbox) = setup("shell").await?;
    let handle = backend(&sandbox)
        .run(request.with_timeout(Duration::from_secs(120)))
        .await
        .expect("run starts");
    let run = agent_api_conformance::record(handle).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    Some((run, sandbox))
}

/// The run's `permission.resolved` events as (status, who decided).
fn resolutions(run: &RunRecord) -> Vec<(PermissionStatus, Option<DecidedBy>)> {
    run.of_type("permission.resolved")
        .filter_map(|e| match &e.body {
            UniversalEventBody::PermissionResolved(p) => Some((p.status, e.decided_by())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn app_server_approve_all_approves_each_request_in_the_sdk() {
    let request = RunRequest::new("run the command").with_permissions(PermissionPolicy::ApproveAll);
    let Some((run, sandbox)) = shell_under_policy(request).await else {
        return;
    };
    assert_eq!(
        run.of_type("permission.requested").count(),
        1,
        "{:?}",
        run.types()
    );
    assert_eq!(
        resolutions(&run),
        [(PermissionStatus::Approved, Some(DecidedBy::Policy))]
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.cwd.join("out.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test]
async fn app_server_deny_all_denies_each_request_and_completes_with_the_denial_visible() {
    let request = RunRequest::new("run the command").with_permissions(PermissionPolicy::DenyAll);
    let Some((run, sandbox)) = shell_under_policy(request).await else {
        return;
    };
    assert_eq!(
        run.of_type("permission.requested").count(),
        1,
        "{:?}",
        run.types()
    );
    assert_eq!(
        resolutions(&run),
        [(PermissionStatus::Denied, Some(DecidedBy::Policy))]
    );
    assert!(!sandbox.cwd.join("out.txt").exists());
    assert!(run.completion.as_ref().unwrap().final_text.is_some());
}

#[tokio::test]
async fn skipping_permission_prompts_runs_without_any_request_and_one_way_exec_asks_nothing() {
    let app_server = RunRequest::new("run the command").with_skip_permission_prompts(true);
    let Some((run, sandbox)) = shell_under_policy(app_server).await else {
        return;
    };
    assert_eq!(
        run.of_type("permission.requested").count(),
        0,
        "{:?}",
        run.types()
    );
    assert!(
        sandbox.cwd.join("out.txt").exists(),
        "Codex ran the command without asking"
    );
    // Exec has no request channel: deny-all is a read-only sandbox, and nothing is asked.
    let Some((run, sandbox)) = shell_under_policy(exec(
        RunRequest::new("run the command").with_permissions(PermissionPolicy::DenyAll),
    ))
    .await
    else {
        return;
    };
    assert_eq!(
        run.of_type("permission.requested").count(),
        0,
        "{:?}",
        run.types()
    );
    assert!(
        !sandbox.cwd.join("out.txt").exists(),
        "the read-only sandbox blocked the write"
    );
}

mod portable_options {
    use super::agent_api_bench_support::{backend, drive};
    use super::*;
    use agent_api::PortableOptions;
    use serde_json::{json, Value};

    fn schema() -> Value {
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}, "additionalProperties": false})
    }

    /// The last Responses request of the run (the main turn's).
    fn model_request(server: &ModelServer) -> Value {
        server
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.body.get("input").is_some())
            .expect("a model request")
            .body
    }

    #[tokio::test]
    async fn a_system_prompt_and_an_extra_directory_reach_the_model_request() {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let extra = tempfile::tempdir().unwrap();
        let portable = PortableOptions::default()
            .system_prompt("SYSTEM-MARKER-7 you are terse")
            .append_system_prompt("APPEND-MARKER-9")
            .add_dir(extra.path());
        let run = drive(
            &backend(&sandbox),
            RunRequest::new("say hi").with_portable(portable),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_eq!(run.assistant_text(), "Hello from mock");
        let body = model_request(&server);
        let text = body.to_string();
        assert!(
            text.contains("SYSTEM-MARKER-7"),
            "the system prompt is not in the request"
        );
        assert!(
            text.contains("APPEND-MARKER-9"),
            "the appended instructions are not in the request"
        );
        assert!(
            text.contains(&*extra.path().to_string_lossy()),
            "the extra directory is not in the request"
        );
        // Resumed (the instructions go in thread/resume too), the thread keeps the instructions it
        // started with: Codex stores them with the thread, as it did when they came by `-c`.
        let thread = run
            .completion
            .as_ref()
            .unwrap()
            .native_session_id
            .clone()
            .expect("a thread id");
        let resumed = RunRequest::new("say hi again")
            .with_session(agent_api::SessionSelector::Resume(thread.into()))
            .with_portable(PortableOptions::default().append_system_prompt("APPEND-MARKER-10"));
        let run = drive(
            &backend(&sandbox),
            resumed,
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_eq!(
            run.assistant_text(),
            "Hello from mock",
            "{:?}",
            run.completion
        );
        let text = model_request(&server).to_string();
        assert!(
            text.contains("APPEND-MARKER-9") && !text.contains("APPEND-MARKER-10"),
            "the thread's own instructions stay"
        );
    }

    /// The tools Codex has a switch for are not offered when denied, in both modes; one without
    /// a switch (`apply_patch`) is refused before spawn.
    #[tokio::test]
    async fn denied_tools_are_not_offered_and_one_codex_cannot_remove_is_refused() {
        for options in [std::convert::identity as fn(RunRequest) -> RunRequest, exec] {
            let Some((server, sandbox)) = setup("text").await else {
                return;
            };
            let portable = PortableOptions::default()
                .deny_tool("exec_command")
                .deny_tool("web_search");
            let run = drive(
                &backend(&sandbox),
                options(RunRequest::new("say hi").with_portable(portable)),
                PermissionDecision::Allow,
                false,
            )
            .await;
            assert_eq!(run.assistant_text(), "Hello from mock");
            let body = model_request(&server);
            let offered: Vec<&str> = body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t.get("name").or(t.get("type")).and_then(Value::as_str))
                .collect();
            assert!(offered.contains(&"apply_patch"), "{offered:?}");
            for gone in ["exec_command", "write_stdin", "web_search"] {
                assert!(!offered.contains(&gone), "{gone} offered: {offered:?}");
            }
        }
        let Some((_server, sandbox)) = setup("text").await else {
            return;
        };
        let request = RunRequest::new("hi")
            .with_portable(PortableOptions::default().deny_tool("apply_patch"));
        let err = backend(&sandbox).run(request).await.unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidRequest { reason } if reason.contains("apply_patch")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn structured_output_is_native_on_the_app_server_and_checked_by_the_sdk() {
        let Some((server, sandbox)) = setup("json_answer").await else {
            return;
        };
        let request = RunRequest::new("where?")
            .with_portable(PortableOptions::default().output_schema(schema()));
        let run = drive(
            &backend(&sandbox),
            request,
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_eq!(
            run.completion.as_ref().unwrap().structured_output,
            Some(json!({"city": "Lyon"}))
        );
        let format = model_request(&server)["text"]["format"].clone();
        assert_eq!(
            format["type"], "json_schema",
            "outputSchema becomes the Responses text format: {format}"
        );
    }

    #[tokio::test]
    async fn a_non_conforming_answer_ends_the_run_with_the_typed_error() {
        let Some((_server, sandbox)) = setup("json_wrong").await else {
            return;
        };
        for request in [RunRequest::new("where?"), exec(RunRequest::new("where?"))] {
            let request = request.with_portable(PortableOptions::default().output_schema(schema()));
            let run = drive(
                &backend(&sandbox),
                request,
                PermissionDecision::Allow,
                false,
            )
            .await;
            match &run.completion {
                Err(AgentError::StructuredOutput { reason }) => {
                    assert!(reason.contains("string"), "{reason}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

/// Through bubblewrap (`spec/launchers.md`): `bwrap` is installed by `tests/run.sh`; its absence fails.
mod through_bwrap {
    use super::*;

    use agent_api_conformance::launchers::bwrap_launcher as bwrap;

    /// Processes whose working directory is inside `dir`.
    fn processes_in(dir: &std::path::Path) -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(dir)))
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    }

    #[tokio::test]
    async fn text_streams_and_the_completion_names_the_launcher() {
        let Some((_server, sandbox)) = setup("text").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            RunRequest::new("say hello").with_launcher(bwrap()),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(!run.assistant_text().is_empty());
        assert_eq!(
            run.completion.as_ref().unwrap().launcher.as_deref(),
            Some("bwrap")
        );
        assert!(processes_in(&sandbox.cwd).is_empty());
    }

    #[tokio::test]
    async fn shell_approved_runs_and_declined_does_not() {
        for (decision, runs) in [
            (PermissionDecision::Allow, true),
            (PermissionDecision::Deny { message: None }, false),
        ] {
            let Some((_server, sandbox)) = setup("shell").await else {
                return;
            };
            let request = RunRequest::new("run the command").with_launcher(bwrap());
            let run = drive(&backend(&sandbox), request, decision, false).await;
            assert_conformant(&run);
            assert!(run.completion.is_ok(), "{:?}", run.completion);
            assert_eq!(sandbox.cwd.join("out.txt").exists(), runs);
        }
    }

    #[tokio::test]
    async fn a_401_is_one_typed_auth_error() {
        let Some((_server, sandbox)) = setup("error401").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            RunRequest::new("hi").with_launcher(bwrap()),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(run.completion, Err(AgentError::Auth { .. })),
            "{:?}",
            run.completion
        );
    }

    #[tokio::test]
    async fn cancel_mid_stream_is_typed_and_leaves_no_process() {
        let Some((_server, sandbox)) = setup("slow_text").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox),
            RunRequest::new("talk slowly").with_launcher(bwrap()),
            PermissionDecision::Allow,
            true,
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(run.completion, Err(AgentError::Cancelled)),
            "{:?}",
            run.completion
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            processes_in(&sandbox.cwd),
            Vec::<i32>::new(),
            "processes left after cancel"
        );
    }
}

#[tokio::test]
async fn a_long_exec_prompt_never_shows_in_the_agents_command_line() {
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    // Past Linux's 128 KiB limit for one argument: in argv the spawn itself would fail.
    let prompt = format!("SENTINEL-{}", "x".repeat(140_000));
    let watching = tokio::task::spawn_blocking({
        let dir = sandbox.cwd.clone();
        move || {
            let mut seen = Vec::new();
            for _ in 0..300 {
                for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                    if std::fs::read_link(entry.path().join("cwd"))
                        .is_ok_and(|c| c.starts_with(&dir))
                    {
                        seen.push(
                            String::from_utf8_lossy(
                                &std::fs::read(entry.path().join("cmdline")).unwrap_or_default(),
                            )
                            .into_owned(),
                        );
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        }
    });
    let run = drive(
        &backend(&sandbox),
        exec(RunRequest::new(prompt.as_str())),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Hello from mock");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains(&prompt)),
        "the whole prompt reached the model"
    );
    let seen = watching.await.unwrap();
    assert!(
        seen.iter().any(|c| c.contains("exec")),
        "codex exec was never seen running"
    );
    assert!(
        !seen.iter().any(|c| c.contains("SENTINEL")),
        "the prompt is in the command line"
    );
}

mod modes_and_variants {
    use super::agent_api_bench_support::{backend, drive};
    use super::*;

    /// The reasoning effort of the run's last Responses request.
    fn effort(server: &ModelServer) -> Option<serde_json::Value> {
        let body = server
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.body.get("input").is_some())
            .expect("a model request")
            .body;
        body.pointer("/reasoning/effort").cloned()
    }

    /// `--variant high` reaches Codex's model request as its reasoning effort, on both interfaces.
    #[tokio::test]
    async fn a_variant_reaches_the_model_request_as_the_reasoning_effort() {
        for mode in [Mode::AppServer, Mode::Exec] {
            let Some((server, sandbox)) = setup("text").await else {
                return;
            };
            let request = RunRequest::new("say hi")
                .with_variant("high")
                .with_options(&CodexOptions::default().mode(mode));
            let run = drive(
                &backend(&sandbox),
                request,
                PermissionDecision::Allow,
                false,
            )
            .await;
            assert_eq!(
                run.assistant_text(),
                "Hello from mock",
                "{mode:?}: {:?}",
                run.completion
            );
            assert_eq!(effort(&server), Some(serde_json::json!("high")), "{mode:?}");
        }
    }

    /// Plan mode writes nothing: the scripted write is refused even though every request is approved.
    #[tokio::test]
    async fn plan_mode_writes_nothing_on_disk() {
        for mode in [Mode::AppServer, Mode::Exec] {
            let Some((_server, sandbox)) = setup("write_edit").await else {
                return;
            };
            let request = RunRequest::new("create a file")
                .with_mode(agent_api::request::AgentMode::Plan)
                .with_permissions(PermissionPolicy::ApproveAll)
                .with_options(&CodexOptions::default().mode(mode));
            let run = drive(
                &backend(&sandbox),
                request,
                PermissionDecision::Allow,
                false,
            )
            .await;
            assert!(run.completion.is_ok(), "{mode:?}: {:?}", run.completion);
            assert!(
                !sandbox.cwd.join("created.txt").exists(),
                "{mode:?}: plan mode wrote a file"
            );
        }
    }
}

/// Codex pointed at a closed port, with its own retry settings left at their defaults, retries
/// for ever ("Reconnecting... waiting for network"; `agent-api run` was still running after
/// 420 s). A retry notice is no progress: the start-up timeout counts from the first one and ends
/// the run with one typed `Timeout { which: Startup }` and no process left, in both of Codex's
/// interfaces. (`agent-api run` arms 120 s by default; this test arms 5 s.)
#[tokio::test]
async fn codex_pointed_at_a_closed_port_ends_with_a_typed_startup_timeout() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let provider = format!(
        "model_providers.closed={{name=\"closed\",base_url=\"http://127.0.0.1:{port}/v1\",env_key=\"OPENAI_API_KEY\",wire_api=\"responses\"}}"
    );
    let mut config = CodexConfig::with_binary(&sandbox.program)
        .config_overrides([
            "model_provider=\"closed\"".to_string(),
            provider,
            "model=\"gpt-5.5\"".to_string(),
        ])
        .working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    let backend = CodexBackend::new(config);
    for mode in [Mode::AppServer, Mode::Exec] {
        let started = std::time::Instant::now();
        let run = drive(
            &backend,
            RunRequest::new("say hi")
                .with_startup_timeout(Duration::from_secs(5))
                .with_options(&CodexOptions::default().mode(mode)),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_conformant(&run);
        match run.completion.as_ref() {
            Err(AgentError::Timeout { which, .. }) => {
                assert_eq!(*which, agent_api::run::TimeoutKind::Startup, "{mode:?}")
            }
            other => panic!(
                "{mode:?}: not a start-up timeout: {other:?} after {:?}",
                started.elapsed()
            ),
        }
        assert!(
            agent_bench::process::processes_in(&sandbox.cwd).is_empty(),
            "{mode:?}: processes left"
        );
    }
}
