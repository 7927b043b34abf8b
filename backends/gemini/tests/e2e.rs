//! End to end with the real pinned Gemini CLI (0.61.0, `gemini --acp` and headless) against the
//! bench's scripted model server. Without the CLI these fail with install instructions, unless
//! AGENT_API_E2E=skip.

use std::time::Duration;

use agent_api::run::Channel;
use agent_api::universal::{DecidedBy, ItemKind, ItemStatus};
use agent_api::{AgentBackend, AgentError, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::{assert_conformant, assert_one_permission, drive};
use agent_api_gemini::GeminiBackend;
use agent_api_gemini::{GeminiInterface, GeminiOptions, HeadlessApproval};
use agent_bench::process::processes_in;
use agent_bench::sandbox::GEMINI_MODEL;
use agent_bench::{Cli, ModelServer, Sandbox};

/// The sandbox's Gemini with its environment; the backend adds `--acp --skip-trust` and `-m`.
fn backend(sandbox: &Sandbox) -> GeminiBackend {
    let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    GeminiBackend::new(config)
}

async fn setup(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::Gemini, scenario).await
}

fn request(prompt: &str) -> RunRequest {
    RunRequest::new(prompt)
        .with_model(GEMINI_MODEL)
        .with_timeout(Duration::from_secs(120))
}

#[tokio::test]
async fn acp_text_streams_deltas_with_usage_and_session() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        request("say hi"),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    let done = run.completion.as_ref().unwrap();
    assert_eq!(done.final_text.as_deref(), Some("Hello from mock"));
    assert!(run.of_type("item.delta").filter(|e| !e.synthetic).count() >= 2);
    assert!(done.native_session_id.is_some() && done.usage.is_some());
    let started = run.universal[0].clone();
    let agent = serde_json::to_value(&started.body).unwrap();
    assert!(
        agent.to_string().contains("gemini-cli"),
        "the agent's name is in session.started: {agent}"
    );
}

#[tokio::test]
async fn acp_thoughts_arrive_as_reasoning() {
    let Some((_server, sandbox)) = setup("reasoning").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        request("think then say hi"),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(
        !run.text_on(&Channel::Reasoning).is_empty(),
        "{:?}",
        run.types()
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello after thinking")
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
        let results = run.completed_items(ItemKind::ToolResult);
        let ran = results.iter().any(|i| {
            i.status == ItemStatus::Completed
                && i.tool
                    .as_ref()
                    .is_some_and(|t| t.kind == "command_execution")
        });
        assert_eq!(ran, runs, "a denied command's result fails");
        if runs {
            let shell = results
                .iter()
                .find_map(|i| i.tool.as_ref().filter(|t| t.kind == "command_execution"))
                .unwrap();
            assert_eq!(
                shell.command.as_deref(),
                Some(agent_bench::scenario::SHELL_COMMAND),
                "the typed command"
            );
        }
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
    }
}

#[tokio::test]
async fn acp_file_write_goes_through_the_confined_fs_into_the_cwd() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox),
        request("create the file"),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let written = std::fs::read_to_string(sandbox.cwd.join("created.txt"))
        .expect("the file landed in the cwd");
    assert!(
        written.contains("edited by mock") || written.contains("created by mock"),
        "{written}"
    );
    assert!(
        run.status_labels().iter().any(|l| l == "fs_write"),
        "{:?}",
        run.status_labels()
    );
}

#[tokio::test]
async fn acp_http_errors_are_one_typed_terminal_error() {
    for scenario in ["error401", "error500", "overloaded"] {
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
            )
            | (
                Err(AgentError::Overloaded {
                    status: Some(503), ..
                }),
                "overloaded",
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
        assert!(!format!("{:?}", run.completion).contains("test-key"));
    }
}

/// Gemini reports its retries only on stderr: allowed two attempts (the bench allows one), the
/// overloaded model API's first failure shows live as `api_retry` and `rate_limited` statuses, then
/// the run ends in its one typed error; on both interfaces.
#[tokio::test]
async fn retries_on_stderr_show_as_rate_limited_statuses_before_the_typed_error() {
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    for options in [GeminiOptions::default(), headless] {
        let Some((_server, sandbox)) = setup("overloaded").await else {
            return;
        };
        let path = sandbox.home.join(".gemini/settings.json");
        let mut settings: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        settings["general"]["maxAttempts"] = serde_json::json!(2);
        std::fs::write(&path, settings.to_string()).unwrap();
        let run = drive(
            &backend(&sandbox),
            request("hi").with_options(&options),
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        // ACP's error names the status; headless Gemini's names none (its retry lines did not either).
        assert!(
            matches!(run.completion, Err(AgentError::Overloaded { .. })),
            "{options:?}: {:?}",
            run.completion
        );
        let labels = run.status_labels();
        assert!(
            labels.iter().any(|l| l == "api_retry") && labels.iter().any(|l| l == "rate_limited"),
            "{options:?}: {labels:?}"
        );
        assert!(
            run.status_before_terminal_error("rate_limited"),
            "{options:?}: the retry shows before the run's error"
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

#[tokio::test]
async fn headless_text_and_yolo_shell() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    let run = drive(
        &backend(&sandbox),
        request("say hi").with_options(&headless),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock")
    );
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let yolo = headless.approval_mode(HeadlessApproval::Yolo);
    let run = drive(
        &backend(&sandbox),
        request("run the command").with_options(&yolo),
        Some(PermissionDecision::Allow),
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(sandbox.cwd.join("out.txt").exists());
    assert_eq!(
        run.of_type("permission.requested").count(),
        0,
        "headless Gemini cannot ask"
    );
}

/// The model request's system instruction (Gemini's `systemInstruction`) of the last main request.
fn system_instruction(server: &ModelServer) -> String {
    let main = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.get("tools").is_some())
        .expect("a request with tools")
        .body;
    main["systemInstruction"].to_string()
}

/// The replacement system prompt reaches the model on both interfaces, from the file the SDK wrote
/// (`GEMINI_SYSTEM_MD`), not from argv; the file is gone when the run ends.
#[tokio::test]
async fn a_system_prompt_replaces_geminis_own_on_both_interfaces() {
    use agent_api::PortableOptions;
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    for options in [GeminiOptions::default(), headless] {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let portable =
            PortableOptions::default().system_prompt("SYSTEM-MARKER-7 you are a terse assistant");
        let request = request("say hi")
            .with_options(&options)
            .with_portable(portable);
        let run = drive(
            &backend(&sandbox),
            request,
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        assert_eq!(
            run.completion.as_ref().unwrap().final_text.as_deref(),
            Some("Hello from mock")
        );
        let system = system_instruction(&server);
        assert!(system.contains("SYSTEM-MARKER-7"), "{system}");
        assert!(
            !system.contains("You are Gemini CLI") && !system.contains("interactive CLI agent"),
            "Gemini's own prompt stayed: {system}"
        );
        let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("agent-api-system-"))
            .collect();
        assert!(
            left.iter()
                .all(|n| !std::fs::read_to_string(std::env::temp_dir().join(n))
                    .unwrap_or_default()
                    .contains("SYSTEM-MARKER-7")),
            "{left:?}"
        );
    }
}

/// Tool rules reach Gemini through the policy file the SDK writes (`--policy`): a denied name and
/// every tool of a denied category are not offered to the model, on both interfaces; the rest is.
/// (Headless Gemini offers no write or shell tool without an approval mode: there the network
/// category and the denied name are what the check sees go.)
#[tokio::test]
async fn denied_tools_and_categories_are_not_offered_on_both_interfaces() {
    use agent_api::request::ToolCategory;
    use agent_api::PortableOptions;
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    for options in [GeminiOptions::default(), headless] {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let portable = PortableOptions::default()
            .deny_tool("glob")
            .deny_category(ToolCategory::FileWrite)
            .deny_category(ToolCategory::Network)
            .allow_tool("read_file");
        let request = request("say hi")
            .with_options(&options)
            .with_portable(portable);
        let run = drive(
            &backend(&sandbox),
            request,
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        assert_eq!(
            run.completion.as_ref().unwrap().final_text.as_deref(),
            Some("Hello from mock")
        );
        let main = server
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.body.get("tools").is_some())
            .expect("a request with tools")
            .body;
        let offered: Vec<String> = main["tools"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|f| f["name"].as_str().map(String::from))
            .collect();
        for gone in [
            "glob",
            "write_file",
            "replace",
            "web_fetch",
            "google_web_search",
        ] {
            assert!(
                !offered.iter().any(|n| n == gone),
                "{options:?}: {gone} offered: {offered:?}"
            );
        }
        let kept: &[&str] = if options.interface.is_none() {
            &["read_file", "grep_search", "run_shell_command"]
        } else {
            &["read_file", "grep_search"]
        };
        for kept in kept {
            assert!(
                offered.iter().any(|n| n == kept),
                "{options:?}: {kept} not offered: {offered:?}"
            );
        }
    }
}

/// The same scenarios with Gemini inside bubblewrap: the ACP stdio runs over the launcher unchanged.
mod through_bwrap {
    use super::*;

    use agent_api_conformance::launchers::bwrap_launcher as bwrap;
    use agent_api_conformance::through_bwrap::{self as shared, BenchAgent};

    const GEMINI: BenchAgent<GeminiBackend> = BenchAgent {
        cli: Cli::Gemini,
        backend,
        request,
    };

    #[tokio::test]
    async fn text_streams_and_the_completion_names_the_launcher() {
        shared::text_streams_and_the_completion_names_the_launcher(&GEMINI).await;
    }

    #[tokio::test]
    async fn shell_follows_the_callers_decision() {
        shared::shell_follows_the_callers_decision(&GEMINI).await;
    }

    /// The system prompt file lives in this machine's temporary directory, which the sandbox hides
    /// behind a fresh /tmp: the kit binds the run's own files in read-only.
    #[tokio::test]
    async fn the_system_prompt_file_reaches_the_sandboxed_agent() {
        use agent_api::PortableOptions;
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let portable = PortableOptions::default().system_prompt("SYSTEM-MARKER-8 sandboxed");
        let run = drive(
            &backend(&sandbox),
            request("say hi")
                .with_launcher(bwrap())
                .with_portable(portable),
            None,
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert!(system_instruction(&server).contains("SYSTEM-MARKER-8"));
    }

    #[tokio::test]
    async fn cancel_mid_turn_leaves_no_process() {
        shared::cancel_mid_turn_leaves_no_process(&GEMINI).await;
    }
}

/// Gemini has no schema flag: the SDK puts the schema in the prompt and holds the final answer to
/// it. A fitting answer is the completion's parsed value; one that does not fit is the run's one
/// typed error; on ACP and headless.
#[tokio::test]
async fn a_structured_answer_is_parsed_and_one_that_does_not_fit_is_a_typed_error() {
    let schema = serde_json::json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    for options in [GeminiOptions::default(), headless] {
        for (scenario, fits) in [("json_answer", true), ("json_wrong", false)] {
            let Some((_server, sandbox)) = setup(scenario).await else {
                return;
            };
            let portable = agent_api::PortableOptions::default().output_schema(schema.clone());
            let request = request("which city?")
                .with_options(&options)
                .with_portable(portable);
            let run = drive(
                &backend(&sandbox),
                request,
                Some(PermissionDecision::Allow),
                false,
            )
            .await;
            assert_conformant(&run);
            if fits {
                let structured = run.completion.as_ref().map(|c| c.structured_output.clone());
                assert_eq!(
                    structured.ok().flatten(),
                    Some(serde_json::json!({"city": "Lyon"})),
                    "{options:?}: {:?}",
                    run.completion
                );
            } else {
                assert!(
                    matches!(run.completion, Err(AgentError::StructuredOutput { .. })),
                    "{options:?}: {:?}",
                    run.completion
                );
                assert_eq!(
                    run.universal
                        .iter()
                        .filter(|e| e.is_terminal_error())
                        .count(),
                    1,
                    "{options:?}"
                );
            }
        }
    }
}

/// An extra directory (`--include-directories`) is one of the workspace directories Gemini tells
/// the model about, on both interfaces.
#[tokio::test]
async fn an_extra_directory_reaches_the_model_request_on_both_interfaces() {
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    for options in [GeminiOptions::default(), headless] {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let extra = tempfile::tempdir().unwrap();
        let portable = agent_api::PortableOptions::default().add_dir(extra.path());
        let request = request("say hi")
            .with_options(&options)
            .with_portable(portable);
        let run = drive(
            &backend(&sandbox),
            request,
            Some(PermissionDecision::Allow),
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{options:?}: {:?}", run.completion);
        let seen = server.requests().iter().any(|r| {
            r.body
                .to_string()
                .contains(&*extra.path().to_string_lossy())
        });
        assert!(
            seen,
            "{options:?}: the extra directory is not in any model request"
        );
    }
}

/// The tools Gemini offered in the run's last model request that has tools.
fn offered_tools(server: &ModelServer) -> Vec<String> {
    let main = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.get("tools").is_some())
        .expect("a request with tools")
        .body;
    main["tools"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f["name"].as_str().map(String::from))
        .collect()
}

/// Plan mode is Gemini's `--approval-mode plan` on both interfaces: the scripted write leaves no
/// file although every request is approved, and the model is offered Gemini's plan-mode tools
/// (`exit_plan_mode`, no shell), where the default mode offers its shell.
#[tokio::test]
async fn plan_mode_writes_nothing_on_both_interfaces() {
    let headless = GeminiOptions::default()
        .interface(GeminiInterface::Headless)
        .approval_mode(HeadlessApproval::Yolo);
    for options in [GeminiOptions::default(), headless] {
        let Some((server, sandbox)) = setup("write_edit").await else {
            return;
        };
        let mut request = request("create the file")
            .with_options(&options)
            .with_permissions(PermissionPolicy::ApproveAll);
        if options.interface.is_none() {
            request = request.with_mode(agent_api::request::AgentMode::Plan);
        } else {
            // The extension names the native value and wins; without it the mode applies.
            request.extensions.remove("backend.gemini.approval_mode");
            request = request.with_mode(agent_api::request::AgentMode::Plan);
        }
        let run = drive(&backend(&sandbox), request, None, false).await;
        assert!(run.completion.is_ok(), "{options:?}: {:?}", run.completion);
        assert!(
            !sandbox.cwd.join("created.txt").exists(),
            "{options:?}: plan mode wrote a file"
        );
        // Gemini's own sign of plan mode: it offers its exit tool, and no shell.
        let offered = offered_tools(&server);
        assert!(
            offered.iter().any(|n| n == "exit_plan_mode"),
            "{options:?}: not in plan mode: {offered:?}"
        );
        assert!(
            !offered.iter().any(|n| n == "run_shell_command"),
            "{options:?}: a shell offered in plan mode: {offered:?}"
        );
    }
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(&backend(&sandbox), request("say hi"), None, false).await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let offered = offered_tools(&server);
    assert!(
        !offered.iter().any(|n| n == "exit_plan_mode")
            && offered.iter().any(|n| n == "run_shell_command"),
        "{offered:?}"
    );
}

/// Plan mode's exit over ACP is the typed question Claude Code's is: the plan file's text in it,
/// the same options. Approving selects Gemini's option that leaves plan mode (the tool succeeds
/// and says so to the model); declining keeps planning (the tool is refused). Gemini keeps its
/// plans in a file it names: the settings put them in the working directory, where the
/// confined file system reads them.
#[tokio::test]
async fn acp_the_exit_plan_question_round_trips() {
    use agent_api::kit::hitl::EXIT_PLAN_OPTIONS;
    use agent_api_conformance::run_answering_exit_plan;
    for (answer, approved) in [(EXIT_PLAN_OPTIONS[0], true), (EXIT_PLAN_OPTIONS[1], false)] {
        let Some((server, sandbox)) = setup("exit_plan_file").await else {
            return;
        };
        let settings_path = sandbox.home.join(".gemini/settings.json");
        let mut settings: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&settings_path).unwrap()).unwrap();
        settings["general"]["plan"] = serde_json::json!({"directory": "plans"});
        std::fs::write(&settings_path, settings.to_string()).unwrap();
        std::fs::create_dir_all(sandbox.cwd.join("plans")).unwrap();
        std::fs::write(sandbox.cwd.join("plans/plan.md"), "1. Write plan.txt\n").unwrap();
        let (_, text) = run_answering_exit_plan(
            &backend(&sandbox),
            request("plan it"),
            answer,
            "1. Write plan.txt",
        )
        .await;
        let sent = server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<String>();
        let (left, refused) = (
            sent.contains("approved implementation plan"),
            sent.contains("canceled by the user"),
        );
        assert_eq!((left, refused), (approved, !approved), "{answer}: {text}");
        assert!(
            text.contains(if approved {
                "Plan finished"
            } else {
                "Plan failed"
            }),
            "{answer}: {text}"
        );
    }
}

#[test]
fn an_unknown_mode_is_refused_before_spawn_naming_geminis() {
    let backend =
        agent_api_gemini::GeminiBackend::new(AcpConfig::with_binary("/nonexistent/gemini"));
    let err = backend
        .validate(
            &RunRequest::new("x").with_mode(agent_api::request::AgentMode::parse("auto-edit")),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("default, plan, auto_edit, yolo"),
        "{err}"
    );
    let err = backend
        .validate(&RunRequest::new("x").with_variant("high"))
        .unwrap_err();
    assert!(
        matches!(err, AgentError::UnsupportedCapability { .. }),
        "{err}"
    );
}

/// On the headless interface (`--resume` per turn): Gemini CLI 0.61.0's own ACP `session/load`
/// resets the session's chat before it reads it (see the crate's docs), in any home.
#[tokio::test]
async fn headless_session_snapshot_goes_on_in_an_empty_home_with_another_working_dir() {
    let Some((server, sandbox)) = setup("echo").await else {
        return;
    };
    let elsewhere = Sandbox::new(Cli::Gemini, &server, "echo").unwrap();
    assert_ne!(sandbox.cwd, elsewhere.cwd);
    let headless = GeminiOptions::default().interface(GeminiInterface::Headless);
    let snapshot = agent_api_conformance::snapshot::goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&sandbox)),
        std::sync::Arc::new(backend(&elsewhere)),
        request("").with_options(&headless),
        0,
    )
    .await;
    // Re-keyed: the chat is under the project whose `.project_root` names the other directory.
    let projects = elsewhere.home.join(".gemini/tmp");
    let project = std::fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            std::fs::read_to_string(p.join(".project_root"))
                .is_ok_and(|owner| owner.trim() == elsewhere.cwd.to_string_lossy())
        })
        .expect("a project of the other working directory");
    let prefix: String = snapshot.native_session_id.chars().take(8).collect();
    let chats: Vec<_> = std::fs::read_dir(project.join("chats"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(&prefix))
        .collect();
    assert!(
        !chats.is_empty(),
        "the restored chat is in {}",
        project.display()
    );
}
