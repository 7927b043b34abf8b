//! End to end with the real OpenCode on the bench: the portable options through its config
//! (`OPENCODE_CONFIG_CONTENT`) reach the model request.

mod common;

use agent_api::PortableOptions;
use agent_api::{PermissionDecision, RunRequest};
use agent_api_opencode::Interface;
use common::*;

#[tokio::test]
async fn a_system_prompt_appended_instructions_and_a_denied_tool_reach_the_model_request() {
    for interface in [Interface::Run, Interface::Acp] {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let portable = PortableOptions::default()
            .system_prompt("SYSTEM-MARKER-7 you are terse")
            .append_system_prompt("APPEND-MARKER-9")
            .deny_tool("bash")
            .deny_category(agent_api::request::ToolCategory::FileWrite);
        let run = drive(
            &backend(&sandbox, interface),
            RunRequest::new("say hi").with_portable(portable),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert!(
            run.completion.is_ok(),
            "{interface:?}: {:?}",
            run.completion
        );
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
            "{interface:?}: the system prompt is not in the request"
        );
        assert!(
            text.contains("APPEND-MARKER-9"),
            "{interface:?}: the appended instructions are not in the request"
        );
        let offered: Vec<&str> = main["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(
            offered.contains(&"read") && !offered.contains(&"bash"),
            "{interface:?}: {offered:?}"
        );
        assert!(
            !offered
                .iter()
                .any(|n| ["edit", "write", "patch"].contains(n)),
            "{interface:?}: a file_write tool stayed: {offered:?}"
        );
    }
}

/// OpenCode has no schema flag: the SDK puts the schema in the prompt and holds the final answer
/// to it. A fitting answer is the completion's parsed value; one that does not fit is the run's
/// one typed error; on `run` and `acp`.
#[tokio::test]
async fn a_structured_answer_is_parsed_and_one_that_does_not_fit_is_a_typed_error() {
    let schema = serde_json::json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    for interface in [Interface::Run, Interface::Acp] {
        for (scenario, fits) in [("json_answer", true), ("json_wrong", false)] {
            let Some((_server, sandbox)) = setup(scenario).await else {
                return;
            };
            let request = RunRequest::new("which city?")
                .with_portable(PortableOptions::default().output_schema(schema.clone()));
            let run = drive(
                &backend(&sandbox, interface),
                request,
                PermissionDecision::Allow,
                false,
            )
            .await;
            agent_api_conformance::assert_conformant(&run);
            if fits {
                let structured = run.completion.as_ref().map(|c| c.structured_output.clone());
                assert_eq!(
                    structured.ok().flatten(),
                    Some(serde_json::json!({"city": "Lyon"})),
                    "{interface:?}: {:?}",
                    run.completion
                );
            } else {
                assert!(
                    matches!(
                        run.completion,
                        Err(agent_api::AgentError::StructuredOutput { .. })
                    ),
                    "{interface:?}: {:?}",
                    run.completion
                );
                assert_eq!(
                    run.universal
                        .iter()
                        .filter(|e| e.is_terminal_error())
                        .count(),
                    1,
                    "{interface:?}"
                );
            }
        }
    }
}

/// Every model request of the run that offers tools (not the title request), as JSON.
fn tool_requests(server: &agent_bench::ModelServer) -> Vec<serde_json::Value> {
    server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| b.get("tools").is_some())
        .collect()
}

/// The variant reaches the Chat Completions request as OpenCode sends its reasoning effort,
/// on the run and serve interfaces.
#[tokio::test]
async fn a_variant_reaches_the_model_request_on_run_and_serve() {
    for interface in [Interface::Run, Interface::Serve] {
        let Some((server, sandbox)) = setup("text").await else {
            return;
        };
        let run = drive(
            &backend(&sandbox, interface),
            RunRequest::new("say hi").with_variant("high"),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert!(
            run.completion.is_ok(),
            "{interface:?}: {:?}",
            run.completion
        );
        let main = tool_requests(&server).pop().expect("a model request");
        assert_eq!(main["reasoning_effort"], "high", "{interface:?}");
    }
}

/// Plan mode is OpenCode's plan agent: the scripted write leaves no file although every request
/// is approved, on the run and serve interfaces, and OpenCode tells the model plan mode is on.
#[tokio::test]
async fn plan_mode_writes_nothing_on_run_and_serve() {
    for interface in [Interface::Run, Interface::Serve] {
        let Some((server, sandbox)) = setup("write_edit").await else {
            return;
        };
        let request = RunRequest::new("create the file")
            .with_mode(agent_api::request::AgentMode::Plan)
            .with_permissions(agent_api::PermissionPolicy::ApproveAll);
        let run = drive(
            &backend(&sandbox, interface),
            request,
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert!(
            run.completion.is_ok(),
            "{interface:?}: {:?}",
            run.completion
        );
        assert!(
            !sandbox.cwd.join("created.txt").exists(),
            "{interface:?}: plan mode wrote a file"
        );
        let body = tool_requests(&server)
            .into_iter()
            .map(|b| b.to_string())
            .collect::<String>();
        // OpenCode's own report: its plan agent's reminder reaches the model.
        assert!(
            body.contains("Plan mode ACTIVE"),
            "{interface:?}: OpenCode is not in plan mode"
        );
    }
}

#[tokio::test]
async fn unknown_modes_and_variants_are_refused_before_spawn_and_acp_takes_neither() {
    use agent_api::AgentBackend;
    let backend =
        agent_api_opencode::OpenCodeBackend::new(agent_api_opencode::OpenCodeConfig::default());
    let err = backend
        .validate(&RunRequest::new("x").with_mode(agent_api::request::AgentMode::parse("build")))
        .unwrap_err();
    assert!(err.to_string().contains("default, plan"), "{err}");
    let err = backend
        .validate(&RunRequest::new("x").with_variant("max"))
        .unwrap_err();
    assert!(err.to_string().contains("low, medium, high"), "{err}");
    let acp = agent_api_opencode::OpenCodeOptions::default().interface(Interface::Acp);
    let request = RunRequest::new("x")
        .with_mode(agent_api::request::AgentMode::Plan)
        .with_options(&acp);
    let err = backend.run(request).await.map(|_| ()).unwrap_err();
    assert!(
        err.to_string().contains("acp interface takes no mode"),
        "{err}"
    );
}
