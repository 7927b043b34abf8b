//! End to end with the real, pinned Claude Code CLI against the bench's scripted model server.
//! Each test starts with `agent_bench::e2e_enabled_or_explain`: it fails with install
//! instructions when the CLI is missing, unless `AGENT_API_E2E=skip` (then it says SKIPPED).

use agent_api::request::Launcher;
use agent_api::run::Channel;
use std::path::Path;
use std::time::Duration;

use agent_api::universal::{
    ContentPart, DecidedBy, ItemKind, ItemRole, PermissionStatus, UniversalEventBody,
};
use agent_api::UniversalEvent;
use agent_api::{
    AgentBackend, AgentError, PermissionDecision, PermissionPolicy, QuestionAnswer, RunHandle,
    RunRequest, SessionSelector,
};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig, ClaudeCodeOptions, Mode};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_bench::{Cli, ModelServer, Sandbox};
use futures::StreamExt;
use serde_json::json;

/// The server and a sandbox for `scenario`, or `None` when the CLI is missing and skipping was asked for.
async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, scenario).await
}

/// A backend that runs the sandbox's CLI with only the sandbox's environment.
fn backend(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

fn request(prompt: &str) -> RunRequest {
    RunRequest::new(prompt).with_timeout(Duration::from_secs(120))
}

/// Processes whose working directory is inside `dir` (what a run may have left behind).
fn processes_in(dir: &Path) -> Vec<String> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cwd = std::fs::read_link(entry.path().join("cwd"));
        if cwd.is_ok_and(|c| c.starts_with(dir)) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            left.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
        }
    }
    left
}

/// Reads a run's universal events, answering each permission with `decide`.
async fn drive(handle: RunHandle, mut decide: impl FnMut(&str) -> PermissionDecision) -> RunRecord {
    let control = handle.control();
    let mut projector = agent_api::kit::projection::Projector::new(
        handle.agent_kind().clone(),
        handle.tools_structured(),
    );
    let (mut events, completion) = handle.into_universal();
    let mut universal: Vec<UniversalEvent> = Vec::new();
    while let Some(event) = events.next().await {
        if let UniversalEventBody::PermissionRequested(p) = &event.body {
            control
                .respond_permission(&p.permission_id, decide(&p.action))
                .await
                .unwrap();
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

#[tokio::test]
async fn e2e_text_streams_the_answer_once() {
    let Some((_server, sandbox)) = bench("text").await else {
        return;
    };
    let run = record(backend(&sandbox).run(request("say hello")).await.unwrap()).await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Hello from mock");
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(completion.final_text.as_deref(), Some("Hello from mock"));
    assert!(completion.native_session_id.is_some());
    assert!(completion.usage.as_ref().unwrap().output_tokens.unwrap() > 0);
    assert!(processes_in(&sandbox.cwd).is_empty());
}

#[tokio::test]
async fn e2e_thinking_arrives_as_reasoning() {
    let Some((_server, sandbox)) = bench("reasoning").await else {
        return;
    };
    let run = record(backend(&sandbox).run(request("say hello")).await.unwrap()).await;
    assert_conformant(&run);
    let reasoning: String = run.text_on(&Channel::Reasoning);
    assert_eq!(reasoning, "The user said hello. I should greet them back.");
    assert_eq!(run.assistant_text(), "Hello after thinking");
}

#[tokio::test]
async fn e2e_shell_allowed_through_respond_permission_runs_the_command() {
    let Some((_server, sandbox)) = bench("shell").await else {
        return;
    };
    let run = drive(
        backend(&sandbox)
            .run(request("run the command"))
            .await
            .unwrap(),
        |_| PermissionDecision::Allow,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(run.of_type("permission.resolved").count(), 1);
    assert_eq!(
        std::fs::read_to_string(sandbox.cwd.join("out.txt")).unwrap(),
        "hi\n"
    );
    let result = &run.completed_items(ItemKind::ToolResult)[0];
    assert_eq!(result.tool.as_ref().unwrap().kind, "command_execution");
    assert_eq!(result.tool.as_ref().unwrap().exit_code, Some(0));
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
    // The command is typed on both tool items and in the tools facet, live as in the recordings.
    let command = Some(agent_bench::scenario::SHELL_COMMAND);
    let call = &run.completed_items(ItemKind::ToolCall)[0];
    assert_eq!(call.tool.as_ref().unwrap().command.as_deref(), command);
    assert_eq!(result.tool.as_ref().unwrap().command.as_deref(), command);
    let facets: Vec<_> = run.wrapper.iter().filter_map(|e| e.tools_facet()).collect();
    assert!(
        facets.iter().any(|f| f.command.as_deref() == command),
        "{facets:?}"
    );
}

#[tokio::test]
async fn e2e_shell_denied_leaves_no_file() {
    let Some((_server, sandbox)) = bench("shell").await else {
        return;
    };
    let run = drive(
        backend(&sandbox)
            .run(request("run the command"))
            .await
            .unwrap(),
        |_| PermissionDecision::Deny {
            message: Some("not today".into()),
        },
    )
    .await;
    assert_conformant(&run);
    assert!(!sandbox.cwd.join("out.txt").exists());
    assert!(run
        .completion
        .as_ref()
        .unwrap()
        .final_text
        .as_deref()
        .unwrap()
        .contains("not today"));
}

#[tokio::test]
async fn e2e_shell_allowed_with_modified_input_runs_the_modified_command() {
    let Some((_server, sandbox)) = bench("shell").await else {
        return;
    };
    let modified =
        json!({ "command": "echo CHANGED > out.txt && cat out.txt", "description": "modified" });
    let run = drive(
        backend(&sandbox)
            .run(request("run the command"))
            .await
            .unwrap(),
        |_| PermissionDecision::AllowWithInput(modified.clone()),
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        std::fs::read_to_string(sandbox.cwd.join("out.txt")).unwrap(),
        "CHANGED\n"
    );
}

#[tokio::test]
async fn e2e_write_then_edit_reports_file_changes() {
    let Some((_server, sandbox)) = bench("write_edit").await else {
        return;
    };
    let run = drive(
        backend(&sandbox)
            .run(request("create a file"))
            .await
            .unwrap(),
        |_| PermissionDecision::Allow,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        std::fs::read_to_string(sandbox.cwd.join("created.txt")).unwrap(),
        "edited by mock\n"
    );
    let actions: Vec<_> = run
        .completed_items(ItemKind::ToolResult)
        .iter()
        .flat_map(|i| i.content.clone())
        .filter_map(|p| match p {
            ContentPart::FileRef { action, diff, .. } => Some((action, diff.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(
        actions,
        [
            (agent_api::universal::FileAction::Write, true),
            (agent_api::universal::FileAction::Patch, true)
        ]
    );
}

#[tokio::test]
async fn e2e_ask_user_question_answers_every_question() {
    let Some((server, sandbox)) = bench("question").await else {
        return;
    };
    let handle = backend(&sandbox).run(request("ask me")).await.unwrap();
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut asked = Vec::new();
    while let Some(event) = events.next().await {
        if let UniversalEventBody::QuestionRequested(q) = &event.body {
            asked.push((q.question_id.clone(), q.options.clone()));
            control
                .answer_question(&q.question_id, QuestionAnswer::Text(q.options[1].clone()))
                .await
                .unwrap();
        }
    }
    let completion = completion.await.unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0].1, ["Red", "Blue"]);
    assert_eq!(asked[1].1, ["Small", "Large"]);
    let text = completion.final_text.unwrap();
    assert!(text.contains("Blue") && text.contains("Large"), "{text}");
    assert!(server
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains("Large")));
}

async fn cancel_after(
    scenario: &str,
    launcher: Launcher,
    trigger: impl Fn(&UniversalEvent, &Path) -> bool,
) {
    let Some((_server, sandbox)) = bench(scenario).await else {
        return;
    };
    let go = request("go")
        .with_permissions(agent_api::PermissionPolicy::ApproveAll)
        .with_launcher(launcher);
    let handle = backend(&sandbox).run(go).await;
    let handle = match handle {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    };
    let control = handle.control();
    let mut projector =
        agent_api::kit::projection::Projector::new(handle.agent_kind().clone(), true);
    let (mut events, completion) = handle.into_universal();
    let mut universal = Vec::new();
    // Timed from the cancel, not from the start: a loaded machine stretches the CLI's start-up.
    let mut cancelled_at = None;
    while let Some(event) = events.next().await {
        if trigger(&event, &sandbox.cwd) {
            control.cancel();
            cancelled_at.get_or_insert_with(std::time::Instant::now);
        }
        universal.push(event);
    }
    let completion = completion.await;
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );
    let after = cancelled_at.expect("the trigger fired").elapsed();
    assert!(
        after < Duration::from_secs(20),
        "the run ended {after:?} after its cancel"
    );
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    assert_conformant(&RunRecord {
        universal,
        wrapper,
        completion,
        tools_structured: true,
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        processes_in(&sandbox.cwd),
        Vec::<String>::new(),
        "processes left after cancel"
    );
}

#[tokio::test]
async fn e2e_cancel_mid_stream_is_typed_and_leaves_no_process() {
    cancel_after(
        "slow_text",
        Launcher::Local,
        |e, _| matches!(&e.body, UniversalEventBody::ItemDelta(d) if d.delta.starts_with("word2")),
    )
    .await;
}

#[tokio::test]
async fn e2e_cancel_during_sleep_is_typed_and_leaves_no_process() {
    cancel_after("slow_shell", Launcher::Local, |e, cwd| {
        if !matches!(&e.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::ToolCall) {
            return false;
        }
        // Cancel only once `sleep 30` really runs.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !processes_in(cwd).iter().any(|p| p.contains("sleep 30")) {
            assert!(std::time::Instant::now() < deadline, "sleep 30 never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    })
    .await;
}

#[tokio::test]
async fn e2e_resume_and_fork_in_new_processes_see_the_earlier_turn() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    let first = record(backend(&sandbox).run(request("first turn")).await.unwrap()).await;
    assert_conformant(&first);
    let session = first
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .unwrap();
    assert!(
        first.assistant_text().contains("user_turns=1"),
        "{}",
        first.assistant_text()
    );
    let second = record(
        backend(&sandbox)
            .run(
                request("second turn")
                    .with_session(SessionSelector::Resume(session.clone().into())),
            )
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&second);
    assert!(
        second.assistant_text().contains("user_turns=2"),
        "{}",
        second.assistant_text()
    );
    assert_eq!(
        second
            .completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(session.as_str())
    );
    let fork = record(
        backend(&sandbox)
            .run(request("forked turn").with_session(SessionSelector::Fork(session.clone().into())))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&fork);
    assert!(
        fork.assistant_text().contains("user_turns=3"),
        "{}",
        fork.assistant_text()
    );
    assert_ne!(
        fork.completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(session.as_str())
    );
}

#[tokio::test]
async fn e2e_http_errors_are_typed() {
    for (scenario, check) in [
        (
            "error401",
            (|e: &AgentError| matches!(e, AgentError::Auth { .. })) as fn(&AgentError) -> bool,
        ),
        ("error500", |e| {
            matches!(
                e,
                AgentError::ServerError {
                    status: Some(500),
                    ..
                }
            )
        }),
        ("overloaded", |e| {
            matches!(
                e,
                AgentError::Overloaded {
                    status: Some(529),
                    ..
                }
            )
        }),
    ] {
        let Some((_server, sandbox)) = bench(scenario).await else {
            return;
        };
        // One retry (the bench turns them off), so the 529's retry shows as a status.
        let run = record(
            backend(&sandbox)
                .run(request("hi").with_env("CLAUDE_CODE_MAX_RETRIES", "1"))
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        let error = run.completion.as_ref().unwrap_err();
        assert!(check(error), "{scenario}: {error:?}");
        assert!(
            run.assistant_text().is_empty(),
            "{scenario}: error text streamed as assistant text"
        );
        let limited = run
            .wrapper
            .iter()
            .filter_map(|e| e.message.as_deref())
            .find(|m| m.starts_with("rate_limited: "));
        match scenario {
            "overloaded" => {
                let limited =
                    limited.unwrap_or_else(|| panic!("no rate_limited status: {:?}", run.types()));
                assert!(
                    limited.starts_with(
                        "rate_limited: overloaded (HTTP 529); retry 1 of 1; retry after "
                    ),
                    "{limited}"
                );
            }
            _ => assert_eq!(limited, None, "{scenario}"),
        }
    }
}

#[tokio::test]
async fn e2e_print_mode_runs_one_way() {
    let Some((_server, sandbox)) = bench("text").await else {
        return;
    };
    let req = request("-say hello").with_options(&ClaudeCodeOptions::default().mode(Mode::Print));
    let run = record(backend(&sandbox).run(req).await.unwrap()).await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Hello from mock");
    let user = run
        .completed_items(ItemKind::Message)
        .into_iter()
        .find(|i| i.role == Some(ItemRole::User))
        .unwrap();
    assert_eq!(user.text(), "-say hello");
}

/// The backend without the bench's `IS_SANDBOX=1`: as root, Claude Code then refuses
/// `bypassPermissions`, so these runs prove the policy never depends on it.
fn backend_without_sandbox_flag(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in sandbox
        .env
        .iter()
        .filter(|(key, _)| key.as_str() != "IS_SANDBOX")
    {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

/// Runs the shell scenario under `policy` with nobody answering, and checks that the one tool
/// request was asked and resolved once, by the policy, with `status`.
async fn shell_under_policy(
    policy: PermissionPolicy,
    status: PermissionStatus,
) -> Option<(RunRecord, Sandbox)> {
    let (_server, sandbox) = bench("shell").await?;
    let req = request("run the command").with_permissions(policy);
    let run = record(
        backend_without_sandbox_flag(&sandbox)
            .run(req)
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(run.of_type("permission.requested").count(), 1);
    let resolved: Vec<_> = run.of_type("permission.resolved").collect();
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].decided_by(), Some(DecidedBy::Policy));
    assert!(
        matches!(&resolved[0].body, UniversalEventBody::PermissionResolved(p) if p.status == status),
        "{:?}",
        resolved[0]
    );
    Some((run, sandbox))
}

#[tokio::test]
async fn e2e_approve_all_without_is_sandbox_approves_each_request_in_the_sdk() {
    let Some((run, sandbox)) =
        shell_under_policy(PermissionPolicy::ApproveAll, PermissionStatus::Approved).await
    else {
        return;
    };
    assert_eq!(
        std::fs::read_to_string(sandbox.cwd.join("out.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
}

#[tokio::test]
async fn e2e_deny_all_denies_each_request_and_the_run_completes_with_the_denial_visible() {
    let Some((run, sandbox)) =
        shell_under_policy(PermissionPolicy::DenyAll, PermissionStatus::Denied).await
    else {
        return;
    };
    assert!(!sandbox.cwd.join("out.txt").exists());
    let text = run.completion.as_ref().unwrap().final_text.clone().unwrap();
    assert!(
        text.contains("Denied by the run's permission policy"),
        "{text}"
    );
}

#[tokio::test]
async fn e2e_print_mode_has_no_request_channel_so_the_policy_becomes_pre_approved_tools() {
    for (policy, runs) in [
        (PermissionPolicy::ApproveAll, true),
        (PermissionPolicy::DenyAll, false),
    ] {
        let Some((_server, sandbox)) = bench("shell").await else {
            return;
        };
        let req = request("run the command")
            .with_permissions(policy.clone())
            .with_options(&ClaudeCodeOptions::default().mode(Mode::Print));
        let run = record(
            backend_without_sandbox_flag(&sandbox)
                .run(req)
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{policy:?}: {:?}", run.completion);
        assert_eq!(
            run.of_type("permission.requested").count(),
            0,
            "{policy:?}: nothing can be asked one-way"
        );
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs, "{policy:?}");
    }
}

#[tokio::test]
async fn e2e_a_stream_cut_then_retried_without_streaming_leaves_only_the_retried_answer() {
    let Some((_server, sandbox)) = bench("broken_stream").await else {
        return;
    };
    let run = record(backend(&sandbox).run(request("say hello")).await.unwrap()).await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(completion.final_text.as_deref(), Some("Hello from mock"));
    assert_eq!(
        run.assistant_text(),
        "Hello from mock",
        "the cut message's text is not output"
    );
    let messages: Vec<_> = run
        .of_type("item.completed")
        .filter_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) if d.item.role == Some(ItemRole::Assistant) => {
                Some((d.item.status, d.item.text()))
            }
            _ => None,
        })
        .collect();
    let (cut_status, cut_text) = messages.first().cloned().unwrap();
    assert_eq!(
        cut_status,
        agent_api::universal::ItemStatus::Failed,
        "{messages:?}"
    );
    assert!(
        !cut_text.is_empty() && "Hello from mock".starts_with(&cut_text),
        "{messages:?}"
    );
    assert_eq!(
        messages.last().unwrap(),
        &(
            agent_api::universal::ItemStatus::Completed,
            "Hello from mock".to_string()
        )
    );
}

/// The session id of `pid` (`/proc/<pid>/stat` field 6).
fn session_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(3)
        .map(str::to_string)
}

/// Waits until the real CLI's tool shell runs `sleep 30`; returns whether it left this process's
/// session, which the CLI shares (Claude Code starts its tool shells with `setsid`, so the
/// process-group kill alone misses them).
fn wait_for_sleep(cwd: &Path) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let in_cwd =
                std::fs::read_link(entry.path().join("cwd")).is_ok_and(|c| c.starts_with(cwd));
            if in_cwd && String::from_utf8_lossy(&cmdline).contains("sleep 30") {
                let pid = entry.file_name().to_string_lossy().to_string();
                return session_of(&pid) != session_of(&std::process::id().to_string());
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sleep 30 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn e2e_a_dropped_run_kills_the_setsid_tool_shell() {
    let Some((_server, sandbox)) = bench("slow_shell").await else {
        return;
    };
    let handle = backend(&sandbox)
        .run(request("go").with_permissions(agent_api::PermissionPolicy::ApproveAll))
        .await
        .unwrap();
    let (mut events, completion) = handle.into_universal();
    while let Some(event) = events.next().await {
        if matches!(&event.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::ToolCall)
        {
            break;
        }
    }
    let cwd = sandbox.cwd.clone();
    assert!(
        tokio::task::spawn_blocking(move || wait_for_sleep(&cwd))
            .await
            .unwrap(),
        "the tool shell is in a session of its own"
    );
    drop(events);
    drop(completion);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_in(&sandbox.cwd).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        processes_in(&sandbox.cwd),
        Vec::<String>::new(),
        "processes left after the run was dropped"
    );
}

#[tokio::test]
async fn e2e_a_timed_out_run_kills_the_setsid_tool_shell() {
    let Some((_server, sandbox)) = bench("slow_shell").await else {
        return;
    };
    let request = RunRequest::new("go")
        .with_timeout(Duration::from_secs(12))
        .with_permissions(agent_api::PermissionPolicy::ApproveAll);
    let handle = backend(&sandbox).run(request).await.unwrap();
    let cwd = sandbox.cwd.clone();
    let watcher = tokio::task::spawn_blocking(move || wait_for_sleep(&cwd));
    let run = record(handle).await;
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
    assert!(
        watcher.await.unwrap(),
        "the tool shell is in a session of its own"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        processes_in(&sandbox.cwd),
        Vec::<String>::new(),
        "processes left after the timeout"
    );
}

/// The model requests of a run, as JSON text (the bench server logs each one).
fn model_requests(server: &ModelServer) -> Vec<serde_json::Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.body.get("messages").is_some())
        .map(|r| r.body)
        .collect()
}

/// The one model request of a run that offers tools (the main turn, not a side request).
fn main_request(server: &ModelServer) -> serde_json::Value {
    let with_tools = |b: &serde_json::Value| {
        b.get("tools")
            .and_then(|t| t.as_array())
            .is_some_and(|t| !t.is_empty())
    };
    let requests = model_requests(server);
    requests
        .into_iter()
        .rfind(with_tools)
        .expect("a model request with tools")
}

#[tokio::test]
async fn e2e_a_system_prompt_and_a_denied_tool_reach_the_model_request() {
    use agent_api::PortableOptions;
    let Some((server, sandbox)) = bench("text").await else {
        return;
    };
    let portable = PortableOptions::default()
        .system_prompt("SYSTEM-MARKER-7 you are a terse assistant")
        .append_system_prompt("APPEND-MARKER-9")
        .deny_tool("WebFetch")
        .deny_category(agent_api::request::ToolCategory::FileWrite);
    let run = record(
        backend(&sandbox)
            .run(request("say hello").with_portable(portable))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock")
    );
    let main = main_request(&server);
    let system = main["system"].to_string();
    assert!(
        system.contains("SYSTEM-MARKER-7") && system.contains("APPEND-MARKER-9"),
        "{system}"
    );
    let offered: Vec<&str> = main["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        offered.contains(&"Bash") && offered.contains(&"Read") && !offered.contains(&"WebFetch"),
        "{offered:?}"
    );
    assert!(
        !offered
            .iter()
            .any(|n| ["Write", "Edit", "MultiEdit", "NotebookEdit"].contains(n)),
        "a file_write tool stayed: {offered:?}"
    );
}

#[tokio::test]
async fn e2e_an_extra_directory_reaches_the_model_request() {
    use agent_api::PortableOptions;
    let Some((server, sandbox)) = bench("text").await else {
        return;
    };
    let extra = tempfile::tempdir().unwrap();
    let portable = PortableOptions::default().add_dir(extra.path());
    let run = record(
        backend(&sandbox)
            .run(request("say hello").with_portable(portable))
            .await
            .unwrap(),
    )
    .await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let body = main_request(&server).to_string();
    assert!(
        body.contains(&*extra.path().to_string_lossy()),
        "the extra directory is not in the model request"
    );
}

#[tokio::test]
async fn e2e_structured_output_is_the_clis_validated_value() {
    use agent_api::PortableOptions;
    let Some((server, sandbox)) = bench("json_answer").await else {
        return;
    };
    let schema =
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let portable = PortableOptions::default().output_schema(schema.clone());
    let run = record(
        backend(&sandbox)
            .run(request("where?").with_portable(portable))
            .await
            .unwrap(),
    )
    .await;
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(completion.structured_output, Some(json!({"city": "Lyon"})));
    let offered = main_request(&server)["tools"].to_string();
    assert!(
        offered.contains("StructuredOutput"),
        "--json-schema makes the CLI offer its structured-output tool"
    );
}

/// Through bubblewrap (`spec/launchers.md`): `bwrap` is installed by `tests/run.sh`; its absence fails.
mod through_bwrap {
    use super::*;

    use agent_api_conformance::launchers::bwrap_launcher as bwrap;

    #[tokio::test]
    async fn text_streams_the_answer_and_the_completion_names_the_launcher() {
        let Some((_server, sandbox)) = bench("text").await else {
            return;
        };
        let run = record(
            backend(&sandbox)
                .run(request("say hello").with_launcher(bwrap()))
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        assert_eq!(run.assistant_text(), "Hello from mock");
        assert_eq!(
            run.completion.as_ref().unwrap().launcher.as_deref(),
            Some("bwrap")
        );
        assert!(processes_in(&sandbox.cwd).is_empty());
    }

    #[tokio::test]
    async fn a_shell_command_writes_in_the_working_dir_but_not_outside_it() {
        let Some((_server, sandbox)) = bench("shell").await else {
            return;
        };
        let outside = sandbox.home.parent().unwrap().join("escaped.txt");
        let command = format!(
            "echo escaped > {} ; echo inside > out.txt",
            outside.display()
        );
        let modified = json!({ "command": command, "description": "write inside and outside" });
        let handle = backend(&sandbox)
            .run(request("run the command").with_launcher(bwrap()))
            .await
            .unwrap();
        let run = drive(handle, |_| {
            PermissionDecision::AllowWithInput(modified.clone())
        })
        .await;
        assert_conformant(&run);
        assert_eq!(
            std::fs::read_to_string(sandbox.cwd.join("out.txt")).unwrap(),
            "inside\n"
        );
        assert!(
            !outside.exists(),
            "the sandboxed shell wrote outside its directories"
        );
    }

    #[tokio::test]
    async fn a_shell_command_denied_by_the_caller_does_not_run() {
        let Some((_server, sandbox)) = bench("shell").await else {
            return;
        };
        let handle = backend(&sandbox)
            .run(request("run the command").with_launcher(bwrap()))
            .await
            .unwrap();
        let run = drive(handle, |_| PermissionDecision::Deny {
            message: Some("not today".into()),
        })
        .await;
        assert_conformant(&run);
        assert!(!sandbox.cwd.join("out.txt").exists());
    }

    #[tokio::test]
    async fn a_401_is_one_typed_auth_error() {
        let Some((_server, sandbox)) = bench("error401").await else {
            return;
        };
        let run = record(
            backend(&sandbox)
                .run(request("hi").with_launcher(bwrap()))
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(run.completion, Err(AgentError::Auth { .. })),
            "{:?}",
            run.completion
        );
        assert!(run.assistant_text().is_empty());
    }

    #[tokio::test]
    async fn a_warm_session_runs_in_the_sandbox_and_says_so() {
        let Some((_server, sandbox)) = bench("text").await else {
            return;
        };
        let mut session = backend(&sandbox)
            .open_session(request("").with_launcher(bwrap()))
            .await
            .unwrap();
        assert_eq!(session.launcher(), Some("bwrap"));
        let turn = record(session.send("say hello").await.unwrap()).await;
        assert_eq!(turn.assistant_text(), "Hello from mock");
        assert_eq!(
            turn.completion.as_ref().unwrap().launcher.as_deref(),
            Some("bwrap")
        );
        session.close().await.unwrap();
        assert!(processes_in(&sandbox.cwd).is_empty());
    }

    #[tokio::test]
    async fn cancel_mid_stream_is_typed_and_leaves_no_process() {
        cancel_after("slow_text", bwrap(), |e, _| matches!(&e.body, UniversalEventBody::ItemDelta(d) if d.delta.starts_with("word2")))
            .await;
    }
}

#[tokio::test]
async fn e2e_a_caller_chosen_session_id_names_the_session_and_a_non_uuid_is_refused_before_spawn() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    let chosen = "0b6c4f1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b";
    for mode in [Mode::Print, Mode::Control] {
        let id = if mode == Mode::Print {
            chosen.to_string()
        } else {
            chosen.replace("0b6c", "1b6c")
        };
        let options = ClaudeCodeOptions::default().mode(mode);
        let run = record(
            backend(&sandbox)
                .run(
                    request("hi")
                        .with_options(&options)
                        .with_new_session_id(&id),
                )
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        assert_eq!(
            run.completion
                .as_ref()
                .unwrap()
                .native_session_id
                .as_deref(),
            Some(id.as_str()),
            "{mode:?}"
        );
    }
    let again = record(
        backend(&sandbox)
            .run(request("again").with_session(SessionSelector::Resume(chosen.into())))
            .await
            .unwrap(),
    )
    .await;
    assert!(
        again.assistant_text().contains("user_turns=2"),
        "{}",
        again.assistant_text()
    );
    let refused = backend(&sandbox)
        .run(request("x").with_new_session_id("ses_1"))
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(refused, AgentError::InvalidRequest { .. }),
        "{refused:?}"
    );
}

#[tokio::test]
async fn e2e_a_long_prompt_never_shows_in_the_agents_command_line() {
    // `text`, not `echo`: Claude Code (Node) may cut a 140 KB answer line when it exits.
    let Some((server, sandbox)) = bench("text").await else {
        return;
    };
    // Past Linux's 128 KiB limit for one argument: in argv the spawn itself would fail.
    let prompt = format!("SENTINEL-{}", "x".repeat(140_000));
    for mode in [Mode::Print, Mode::Control] {
        let req = request(&prompt).with_options(&ClaudeCodeOptions::default().mode(mode));
        let handle = backend(&sandbox).run(req).await.unwrap();
        let watching = tokio::task::spawn_blocking({
            let dir = sandbox.cwd.clone();
            move || {
                let mut seen = Vec::new();
                for _ in 0..400 {
                    seen.extend(processes_in(&dir));
                    std::thread::sleep(Duration::from_millis(10));
                }
                seen
            }
        });
        let run = record(handle).await;
        assert_conformant(&run);
        assert_eq!(run.assistant_text(), "Hello from mock", "{mode:?}");
        let asked = server
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains(&prompt));
        assert!(asked, "{mode:?}: the whole prompt reached the model");
        let seen = watching.await.unwrap();
        assert!(
            seen.iter().any(|c| c.contains("stream-json")),
            "{mode:?}: the agent was never seen running"
        );
        assert!(
            !seen.iter().any(|c| c.contains("SENTINEL")),
            "{mode:?}: the prompt is in the command line"
        );
    }
}

/// The variant is Claude Code's `--effort`: it reaches the model request as the effort field.
#[tokio::test]
async fn e2e_a_variant_reaches_the_model_request_as_the_effort() {
    let Some((server, sandbox)) = bench("text").await else {
        return;
    };
    let run = record(
        backend(&sandbox)
            .run(request("say hello").with_variant("max"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock")
    );
    let main = main_request(&server);
    let effort = main.pointer("/output_config/effort").cloned();
    assert_eq!(
        effort,
        Some(json!("max")),
        "no effort in the model request: {}",
        agent_api::kit::bounds::utf8_prefix(&main.to_string(), 4000)
    );
}

/// Plan mode writes nothing: the scripted write and edit leave no file, whatever the policy approves.
#[tokio::test]
async fn e2e_plan_mode_writes_nothing_on_disk() {
    let Some((_server, sandbox)) = bench("write_edit").await else {
        return;
    };
    let req = request("create a file")
        .with_mode(agent_api::request::AgentMode::Plan)
        .with_permissions(PermissionPolicy::ApproveAll);
    let run = record(backend(&sandbox).run(req).await.unwrap()).await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    // Claude Code asks for the write in plan mode; plan mode's policy denies it.
    let denied = run
        .universal
        .iter()
        .filter(|e| matches!(&e.body, UniversalEventBody::PermissionResolved(r) if r.status == PermissionStatus::Denied))
        .count();
    assert!(denied >= 1, "no write was denied");
    assert!(
        !sandbox.cwd.join("created.txt").exists(),
        "plan mode wrote a file"
    );
}

/// Plan mode's exit (ExitPlanMode) is a question: approving it lets the tool call succeed,
/// declining it sends the caller's feedback back to the model.
#[tokio::test]
async fn e2e_the_exit_plan_question_round_trips() {
    for (answer, expect) in [
        (
            agent_api_claude_code::EXIT_PLAN_OPTIONS[0],
            "User has approved your plan",
        ),
        ("not yet, add tests", "add tests"),
    ] {
        let Some((server, sandbox)) = bench("exit_plan").await else {
            return;
        };
        let handle = backend(&sandbox)
            .run(request("plan it").with_mode(agent_api::request::AgentMode::Plan))
            .await
            .unwrap();
        let control = handle.control();
        let (mut events, completion) = handle.into_universal();
        let mut asked = Vec::new();
        while let Some(event) = events.next().await {
            if let UniversalEventBody::QuestionRequested(q) = &event.body {
                asked.push((q.prompt.clone(), q.options.clone()));
                control
                    .answer_question(&q.question_id, QuestionAnswer::Text(answer.into()))
                    .await
                    .unwrap();
            }
        }
        let completion = completion.await.unwrap();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(asked[0].0.contains("1. Write plan.txt"), "{asked:?}");
        assert_eq!(asked[0].1, agent_api_claude_code::EXIT_PLAN_OPTIONS);
        let text = completion.final_text.unwrap();
        assert!(text.contains(expect), "{answer}: {text}");
        let sent = server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<String>();
        assert!(sent.contains(expect), "the answer did not reach the model");
    }
}

/// A warm session switches to plan mode between turns (`set_permission_mode`): the next turn's
/// write is refused.
#[tokio::test]
async fn e2e_a_warm_session_switches_to_plan_mode_between_turns() {
    let Some((_server, sandbox)) = bench("write_edit").await else {
        return;
    };
    let mut session = backend(&sandbox)
        .open_session(request("").with_permissions(PermissionPolicy::ApproveAll))
        .await
        .unwrap();
    session
        .set_mode(agent_api::request::AgentMode::Plan)
        .await
        .unwrap();
    let err = session
        .set_mode(agent_api::request::AgentMode::parse("build"))
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::UnknownMode { .. }), "{err}");
    let (_, completion) = session
        .send("create a file")
        .await
        .unwrap()
        .collect_wrapper()
        .await;
    assert!(completion.is_ok(), "{completion:?}");
    assert!(
        !sandbox.cwd.join("created.txt").exists(),
        "the session wrote a file in plan mode"
    );
    session.close().await.unwrap();
}
