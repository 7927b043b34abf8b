//! The whole backend (argv, settings, delegate channel and helper, converter, driver) against
//! `amp-stand-in`, which replays the hand-written transcripts the way `amp --execute
//! --stream-json` would, running the delegate program from the settings before each tool call.

use std::time::Duration;

use agent_api::universal::{ContentPart, FileAction, ItemKind, PermissionStatus, UniversalItem};
use agent_api::{
    AgentBackend, AgentError, PermissionDecision, PermissionPolicy, RunRequest, SessionSelector,
};
use agent_api_amp::{AmpBackend, AmpConfig, AmpOptions, Interface};
use agent_api_conformance::{assert_conformant, record, record_answering, Answers, RunRecord};

fn script(name: &str) -> String {
    agent_bench::fixtures_dir()
        .join("amp")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn backend(name: &str) -> AmpBackend {
    backend_playing(script(name))
}

/// The stand-in playing `script` (a path).
fn backend_playing(script: String) -> AmpBackend {
    AmpBackend::new(
        AmpConfig::default()
            .with_binary(env!("CARGO_BIN_EXE_amp-stand-in"))
            .with_delegate_helper(env!("CARGO_BIN_EXE_amp-permission-delegate"))
            .with_env("AMP_API_KEY", "sk-test-key")
            .with_env("AMP_STAND_IN_SCRIPT", script),
    )
}

async fn run(backend: &AmpBackend, request: RunRequest, answers: Answers) -> RunRecord {
    let run = record_answering(backend.run(request).await.unwrap(), answers).await;
    assert_conformant(&run);
    run
}

fn items(run: &RunRecord) -> Vec<UniversalItem> {
    run.universal
        .iter()
        .filter_map(|e| e.completed_item())
        .cloned()
        .collect()
}

fn resolutions(run: &RunRecord) -> Vec<(String, PermissionStatus)> {
    run.of_type("permission.resolved")
        .filter_map(|e| e.permission())
        .map(|p| (p.action.clone(), p.status))
        .collect()
}

#[tokio::test]
async fn text_in_both_interfaces() {
    for interface in [Interface::TwoWay, Interface::OneWay] {
        let request =
            RunRequest::new("Say hello").with_options(&AmpOptions::default().interface(interface));
        let run = run(&backend("text.stdout.jsonl"), request, Answers::none()).await;
        let completion = run.completion.as_ref().unwrap();
        assert_eq!(
            completion.final_text.as_deref(),
            Some("Hello! How can I help you today?"),
            "{interface:?}"
        );
        assert_eq!(run.assistant_text(), "Hello! How can I help you today?");
        assert_eq!(
            completion.native_session_id.as_deref(),
            Some("T-5f1c0a2e-7d1b-4c55-9a39-2b8e5e0c1a01")
        );
    }
}

#[tokio::test]
async fn thinking_becomes_reasoning_unless_turned_off() {
    let reasoning = |run: &RunRecord| {
        items(run)
            .iter()
            .map(UniversalItem::reasoning_text)
            .filter(|t| !t.is_empty())
            .count()
    };
    let on = run(
        &backend("thinking.stdout.jsonl"),
        RunRequest::new("2+2?"),
        Answers::none(),
    )
    .await;
    assert_eq!(reasoning(&on), 1);
    let off = RunRequest::new("2+2?").with_options(&AmpOptions::default().thinking(false));
    assert_eq!(
        reasoning(&run(&backend("thinking.stdout.jsonl"), off, Answers::none()).await),
        0
    );
}

#[tokio::test]
async fn the_callers_decision_allows_or_denies_the_tool() {
    let ask = || RunRequest::new("Run echo hello").with_permissions(PermissionPolicy::Ask);
    let allowed = run(
        &backend("shell.stdout.jsonl"),
        ask(),
        Answers::permissions(PermissionDecision::Allow),
    )
    .await;
    assert_eq!(
        resolutions(&allowed),
        [("Bash: echo hello".to_string(), PermissionStatus::Approved)]
    );
    let result = items(&allowed)
        .into_iter()
        .find(|i| i.kind == ItemKind::ToolResult)
        .unwrap();
    assert_eq!(result.status, agent_api::universal::ItemStatus::Completed);

    let denied = run(
        &backend("shell.stdout.jsonl"),
        ask(),
        Answers::permissions(PermissionDecision::Deny { message: None }),
    )
    .await;
    assert_eq!(
        resolutions(&denied),
        [("Bash: echo hello".to_string(), PermissionStatus::Denied)]
    );
    let result = items(&denied)
        .into_iter()
        .find(|i| i.kind == ItemKind::ToolResult)
        .unwrap();
    assert_eq!(
        result.status,
        agent_api::universal::ItemStatus::Failed,
        "amp got the rejection"
    );
    assert_eq!(
        denied.completion.as_ref().unwrap().data.as_ref().unwrap()["permission_denials"],
        1
    );
}

#[tokio::test]
async fn the_policy_decides_and_still_shows_each_request() {
    for (policy, want) in [
        (PermissionPolicy::ApproveAll, PermissionStatus::Approved),
        (PermissionPolicy::DenyAll, PermissionStatus::Denied),
    ] {
        let request = RunRequest::new("Run echo hello").with_permissions(policy.clone());
        let run = run(&backend("shell.stdout.jsonl"), request, Answers::none()).await;
        assert_eq!(run.of_type("permission.requested").count(), 1, "{policy:?}");
        assert_eq!(
            resolutions(&run)
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [want],
            "{policy:?}"
        );
    }
    // The explicit don't-ask option: amp asks nothing, so no permission event.
    let request = RunRequest::new("Run echo hello")
        .with_options(&AmpOptions::default().dangerously_allow_all(true));
    let run = run(&backend("shell.stdout.jsonl"), request, Answers::none()).await;
    assert_eq!(run.of_type("permission.requested").count(), 0);
}

/// Inside bubblewrap, whose fresh `/tmp` would hide the run's directory: the kit binds it in, so
/// the delegate amp runs in the sandbox reaches the run's channel, and the caller decides.
#[tokio::test]
async fn through_bwrap_the_delegate_still_asks_the_caller() {
    // The stand-in's script is a fixture of the checkout, which may live under /tmp (hidden by the
    // sandbox's own /tmp): the run binds it in as a caller would bind a file its agent reads.
    let agent_api::request::Launcher::Sandbox(settings) =
        agent_api_conformance::launchers::bwrap_launcher()
    else {
        unreachable!()
    };
    let bwrap =
        agent_api::request::Launcher::Sandbox(settings.with_read_only(agent_bench::fixtures_dir()));
    for (decision, status) in [
        (PermissionDecision::Allow, PermissionStatus::Approved),
        (
            PermissionDecision::Deny { message: None },
            PermissionStatus::Denied,
        ),
    ] {
        let request = RunRequest::new("Run echo hello")
            .with_permissions(PermissionPolicy::Ask)
            .with_launcher(bwrap.clone());
        let run = run(
            &backend("shell.stdout.jsonl"),
            request,
            Answers::permissions(decision),
        )
        .await;
        assert_eq!(
            resolutions(&run),
            [("Bash: echo hello".to_string(), status)]
        );
        assert_eq!(
            run.completion.as_ref().unwrap().launcher.as_deref(),
            Some("bwrap")
        );
    }
}

/// A denied tool goes to amp's own `amp.tools.disable` in the run's settings: the call is not run
/// and nobody is asked about it.
#[tokio::test]
async fn a_denied_tool_is_disabled_in_amps_settings_and_never_asked_about() {
    let portable = agent_api::PortableOptions::default().deny_tool("Bash");
    let request = RunRequest::new("Run echo hello")
        .with_permissions(PermissionPolicy::ApproveAll)
        .with_portable(portable);
    let disabled = run(&backend("shell.stdout.jsonl"), request, Answers::none()).await;
    assert_eq!(
        disabled.of_type("permission.requested").count(),
        0,
        "a disabled tool is not asked about"
    );
    let result = items(&disabled)
        .into_iter()
        .find(|i| i.kind == ItemKind::ToolResult)
        .unwrap();
    assert_eq!(result.status, agent_api::universal::ItemStatus::Failed);
    // Without the option the same call is asked about (and approved by the policy).
    let asked = run(
        &backend("shell.stdout.jsonl"),
        RunRequest::new("Run echo hello").with_permissions(PermissionPolicy::ApproveAll),
        Answers::none(),
    )
    .await;
    assert_eq!(asked.of_type("permission.requested").count(), 1);
}

#[tokio::test]
async fn file_edits_are_file_changes() {
    let request = RunRequest::new("Edit").with_permissions(PermissionPolicy::ApproveAll);
    let run = run(&backend("edit.stdout.jsonl"), request, Answers::none()).await;
    let actions: Vec<FileAction> = items(&run)
        .into_iter()
        .flat_map(|i| i.content)
        .filter_map(|p| match p {
            ContentPart::FileRef { action, .. } => Some(action),
            _ => None,
        })
        .collect();
    assert_eq!(actions, [FileAction::Patch, FileAction::Write]);
    assert_eq!(run.of_type("permission.resolved").count(), 2);
}

#[tokio::test]
async fn an_error_result_is_one_typed_terminal_error() {
    let run = run(
        &backend("error.stdout.jsonl"),
        RunRequest::new("x"),
        Answers::none(),
    )
    .await;
    assert!(
        matches!(&run.completion, Err(AgentError::AgentFailed { message }) if message.contains("connection reset")),
        "{:?}",
        run.completion
    );
    assert_eq!(
        run.universal
            .iter()
            .filter(|e| e.is_terminal_error())
            .count(),
        1
    );
}

#[tokio::test]
async fn cancel_mid_turn_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let request = RunRequest::new("Say hello")
        .with_env("AMP_STAND_IN_HANG", "1")
        .with_env("AMP_STAND_IN_PIDFILE", pidfile.to_string_lossy());
    let handle = backend("text.stdout.jsonl").run(request).await.unwrap();
    let control = handle.control();
    let recorder = tokio::spawn(record(handle));
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    control.cancel();
    let run = recorder.await.unwrap();
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    assert!(
        !agent_bench::process::process_alive(pid),
        "the stand-in's child survived the cancel"
    );
}

#[tokio::test]
async fn a_caller_who_never_answers_then_cancels_ends_the_run_and_its_helper() {
    let dir = tempfile::tempdir().unwrap();
    let request = RunRequest::new("Run echo hello")
        .with_permissions(PermissionPolicy::Ask)
        .with_working_dir(dir.path());
    let run = tokio::time::timeout(
        Duration::from_secs(30),
        run(
            &backend("shell.stdout.jsonl"),
            request,
            Answers::cancel_at_permission(),
        ),
    )
    .await
    .expect("the cancel ends the run");
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    let resolved: Vec<_> = run
        .of_type("permission.resolved")
        .filter_map(|e| e.permission())
        .map(|p| (p.status, p.decided_by))
        .collect();
    assert_eq!(
        resolved,
        [(
            PermissionStatus::Denied,
            Some(agent_api::universal::DecidedBy::Cancel)
        )]
    );
    let left = agent_bench::process::processes_in(dir.path());
    assert!(
        left.is_empty(),
        "the stand-in or its delegate helper survived: {left:?}"
    );
}

#[tokio::test]
async fn resume_continues_the_thread_by_id() {
    let thread = "T-5f1c0a2e-7d1b-4c55-9a39-2b8e5e0c1a01";
    let request = RunRequest::new("Again").with_session(SessionSelector::Resume(thread.into()));
    let run = run(&backend("text.stdout.jsonl"), request, Answers::none()).await;
    assert_eq!(
        run.completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(thread)
    );
    let unknown =
        RunRequest::new("Again").with_session(SessionSelector::Resume("T-unknown".into()));
    let run = record(backend("text.stdout.jsonl").run(unknown).await.unwrap()).await;
    assert!(
        run.completion.is_err(),
        "the stand-in refuses a thread it does not have"
    );
}

#[tokio::test]
async fn three_turns_on_one_live_process() {
    let backend = backend("multiturn.session.jsonl");
    let mut session = backend.open_session(RunRequest::new("")).await.unwrap();
    let pid = session.process_id();
    assert!(pid.is_some());
    for (prompt, answer) in [
        ("What is 1+1?", "2."),
        ("And 2+2?", "4."),
        ("And 3+3?", "6."),
    ] {
        let turn = record(session.send(prompt).await.unwrap()).await;
        assert_eq!(
            turn.completion.as_ref().unwrap().final_text.as_deref(),
            Some(answer),
            "{prompt}"
        );
        assert_eq!(session.process_id(), pid, "one process for every turn");
    }
    session.close().await.unwrap();
}

/// `AgentMode::Default` is taken by every backend: a warm Amp session, which cannot switch
/// modes, takes `set_mode(Default)` while it is in its default mode, and refuses any other.
#[tokio::test]
async fn a_session_without_mode_switching_takes_the_default_mode_it_is_in() {
    use agent_api::request::AgentMode;
    let backend = backend("multiturn.session.jsonl");
    assert!(!backend
        .info()
        .capabilities
        .contains(agent_api::capabilities::SESSION_MODE_SWITCH));
    let mut session = backend.open_session(RunRequest::new("")).await.unwrap();
    session.set_mode(AgentMode::Default).await.unwrap();
    let refused = session.set_mode(AgentMode::Plan).await;
    assert!(
        matches!(refused, Err(AgentError::UnsupportedCapability { .. })),
        "{refused:?}"
    );
    let turn = record(session.send("What is 1+1?").await.unwrap()).await;
    assert_eq!(
        turn.completion.as_ref().unwrap().final_text.as_deref(),
        Some("2.")
    );
    session.close().await.unwrap();
}

#[tokio::test]
async fn no_key_fails_before_spawning() {
    let backend = AmpBackend::new(
        AmpConfig::default()
            .with_binary("/nonexistent/amp")
            .with_inherit_env(false),
    );
    let err = backend.run(RunRequest::new("hi")).await.unwrap_err();
    assert!(matches!(err, AgentError::Auth { .. }), "{err:?}");
}

/// A caller-defined tool reaches amp as an MCP server in the run's settings (`amp.mcpServers`,
/// with the run's secret): the stand-in calls it there, and the handler's answer is the tool's
/// result and reaches the final text.
#[tokio::test]
async fn a_caller_tool_is_served_to_amp_and_its_answer_reaches_the_final_text() {
    let script = format!(
        "{}/tests/scripts/caller_tool.stdout.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let request = RunRequest::new("Ask the probe about Paris")
        .with_permissions(PermissionPolicy::Ask)
        .with_tool(
            "agent_api_probe",
            "Says the weather of a city",
            schema,
            |input| async move {
                Ok::<_, String>(format!(
                    "sunny in {}",
                    input["city"].as_str().unwrap_or("?")
                ))
            },
        );
    let run = run(
        &backend_playing(script),
        request,
        Answers::permissions(PermissionDecision::Allow),
    )
    .await;
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("The tool said: sunny in Paris")
    );
    let result = items(&run)
        .into_iter()
        .find(|i| i.kind == ItemKind::ToolResult)
        .expect("the tool's result");
    assert_eq!(result.status, agent_api::universal::ItemStatus::Completed);
    assert!(
        result.content.iter().any(|p| matches!(p, ContentPart::ToolResult { output, .. } if output.contains("sunny in Paris"))),
        "{result:?}"
    );
    assert_eq!(
        resolutions(&run).len(),
        1,
        "the call was asked about once: {:?}",
        run.types()
    );
}

/// Amp has no schema flag: the SDK puts the schema in the prompt and holds the final answer to
/// it. A fitting answer is the completion's parsed value; one that does not fit is the run's one
/// typed error.
#[tokio::test]
async fn a_structured_answer_is_parsed_and_one_that_does_not_fit_is_a_typed_error() {
    let own = |name: &str| format!("{}/tests/scripts/{name}", env!("CARGO_MANIFEST_DIR"));
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let request = || {
        RunRequest::new("Which city?")
            .with_portable(agent_api::PortableOptions::default().output_schema(schema.clone()))
    };
    let fits = run(
        &backend_playing(own("json_answer.stdout.jsonl")),
        request(),
        Answers::none(),
    )
    .await;
    assert_eq!(
        fits.completion.as_ref().unwrap().structured_output,
        Some(serde_json::json!({"city": "Lyon"}))
    );

    let wrong = run(
        &backend_playing(own("json_wrong.stdout.jsonl")),
        request(),
        Answers::none(),
    )
    .await;
    assert!(
        matches!(wrong.completion, Err(AgentError::StructuredOutput { .. })),
        "{:?}",
        wrong.completion
    );
    assert_eq!(
        wrong
            .universal
            .iter()
            .filter(|e| e.is_terminal_error())
            .count(),
        1
    );
}

#[tokio::test]
async fn a_snapshot_is_the_thread_id_alone_and_a_run_from_it_resumes_the_thread() {
    let thread = "T-5f1c0a2e-7d1b-4c55-9a39-2b8e5e0c1a01";
    let backend = backend("text.stdout.jsonl");
    let session = agent_api::request::SessionRef::native(thread);
    let snapshot = backend
        .export_snapshot(&RunRequest::new(""), &session)
        .await
        .unwrap();
    assert_eq!(
        snapshot.continuity,
        agent_api::snapshot::Continuity::Service
    );
    assert!(snapshot.files.is_empty());
    let bytes = snapshot.to_bytes().unwrap();
    let snapshot = agent_api::SessionSnapshot::from_bytes(&bytes).unwrap();
    let mut gateway = agent_api::Gateway::new();
    gateway.register(std::sync::Arc::new(backend)).unwrap();
    let handle = gateway
        .run(
            &agent_api_amp::KIND,
            RunRequest::new("Again").with_snapshot(snapshot),
        )
        .await
        .unwrap();
    let run = record(handle).await;
    assert_eq!(
        run.completion
            .as_ref()
            .unwrap()
            .native_session_id
            .as_deref(),
        Some(thread)
    );
}
