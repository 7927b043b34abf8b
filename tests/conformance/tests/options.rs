//! Portable run options (issue 18): every backend advertises exactly the options it maps, refuses
//! the others before spawn naming the capability, and structured output ends in a parsed value or
//! one typed error.

use std::sync::Arc;

use agent_api::capabilities as caps;
use agent_api::request::McpServer;
use agent_api::request::{variants_for, AgentMode};
use agent_api::PortableOptions;
use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use serde_json::{json, Value};

fn backends() -> Vec<Arc<dyn AgentBackend>> {
    vec![
        Arc::new(ScriptedBackend::new()),
        Arc::new(agent_api_claude_code::ClaudeCodeBackend::new(
            Default::default(),
        )),
        Arc::new(agent_api_codex::CodexBackend::new(Default::default())),
        Arc::new(agent_api_opencode::OpenCodeBackend::new(Default::default())),
        Arc::new(agent_api_gemini::GeminiBackend::new(Default::default())),
        Arc::new(agent_api_qwen::QwenBackend::new(Default::default())),
        Arc::new(agent_api_acp::AcpBackend::new(Default::default())),
    ]
}

/// A request that sets exactly the option `id`.
fn asking_for(id: &str) -> RunRequest {
    let options = PortableOptions::default();
    let options = match id {
        caps::SYSTEM_PROMPT => options.system_prompt("sys"),
        caps::APPEND_SYSTEM_PROMPT => options.append_system_prompt("more"),
        caps::ADD_DIRS => options.add_dir("/tmp"),
        caps::MCP_SERVERS => options.mcp_server("m", McpServer::stdio("mcp-server", ["--stdio"])),
        caps::ALLOWED_TOOLS => options.allow_tool("Read"),
        caps::DENIED_TOOLS => options.deny_tool("Bash"),
        caps::DENIED_TOOL_CATEGORIES => {
            options.deny_category(agent_api::request::ToolCategory::Network)
        }
        caps::MAX_TURNS => options.max_turns(2),
        caps::MAX_BUDGET_USD => options.max_budget_usd(1.0),
        caps::OUTPUT_SCHEMA => options.output_schema(json!({"type": "object"})),
        other => panic!("no request for {other}"),
    };
    RunRequest::new("hi").with_portable(options)
}

fn option_ids() -> impl Iterator<Item = &'static str> {
    caps::STANDARD
        .iter()
        .map(|c| c.id)
        .filter(|id| id.starts_with("agent_api.options."))
}

#[test]
fn each_backend_advertises_exactly_the_options_it_maps() {
    for backend in backends() {
        // Input rows (`agent_api.input.*`: images, attachments) share the table but are not run options.
        let mapped: Vec<&str> = backend
            .info()
            .option_mappings
            .iter()
            .map(|m| m.capability)
            .filter(|id| id.starts_with("agent_api.options."))
            .collect();
        let capabilities = backend.info().capabilities.clone();
        let advertised: Vec<&str> = capabilities
            .iter()
            .filter(|id| id.starts_with("agent_api.options."))
            .collect();
        let mut sorted = mapped.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, advertised, "{}", backend.info().kind);
        assert!(
            mapped.contains(&caps::OUTPUT_SCHEMA),
            "{}: structured output is for every agent",
            backend.info().kind
        );
        for input in backend
            .info()
            .option_mappings
            .iter()
            .filter(|m| m.capability.starts_with("agent_api.input."))
        {
            assert!(
                capabilities.contains(input.capability),
                "{}: {} mapped, not advertised",
                backend.info().kind,
                input.capability
            );
        }
    }
}

#[test]
fn an_option_a_backend_does_not_map_is_refused_before_spawn_naming_its_capability() {
    let mut refused = 0;
    for backend in backends() {
        let caps = backend.info().capabilities.clone();
        for id in option_ids() {
            let request = asking_for(id);
            assert!(request.required_capabilities().contains(id), "{id}");
            match backend.validate(&request) {
                Ok(()) => assert!(
                    caps.contains(id),
                    "{}: {id} accepted but not advertised",
                    backend.info().kind
                ),
                Err(AgentError::UnsupportedCapability { capability, .. }) => {
                    assert!(
                        !caps.contains(id),
                        "{}: {id} advertised but refused",
                        backend.info().kind
                    );
                    assert_eq!(capability, id);
                    refused += 1;
                }
                Err(other) => panic!("{}: {id}: {other:?}", backend.info().kind),
            }
        }
    }
    assert!(refused > 0, "some backend lacks some option");
}

#[test]
fn bad_option_values_are_refused_before_spawn() {
    let claude = agent_api_claude_code::ClaudeCodeBackend::new(Default::default());
    for options in [
        PortableOptions::default().max_turns(0),
        PortableOptions::default().max_budget_usd(-1.0),
        PortableOptions::default().output_schema(json!({"type": 7})),
        PortableOptions::default().mcp_server("bad name", McpServer::http("http://127.0.0.1:1")),
    ] {
        let err = claude
            .validate(&RunRequest::new("hi").with_portable(options.clone()))
            .unwrap_err();
        assert!(
            matches!(err, AgentError::InvalidRequest { .. }),
            "{options:?}: {err:?}"
        );
    }
}

#[test]
fn mcp_secrets_never_show_in_debug() {
    let mut server = McpServer::http("http://127.0.0.1:1/mcp");
    if let McpServer::Http { headers, .. } = &mut server {
        headers.insert("Authorization".into(), "Bearer sk-secret-123".into());
    }
    let request =
        RunRequest::new("hi").with_portable(PortableOptions::default().mcp_server("m", server));
    let shown = format!("{request:?}");
    assert!(
        shown.contains("Authorization") && !shown.contains("sk-secret-123"),
        "{shown}"
    );
}

fn schema() -> Value {
    json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}, "additionalProperties": false})
}

async fn echo(
    answer: &str,
) -> (
    Vec<agent_api::UniversalEvent>,
    Result<agent_api::RunCompletion, AgentError>,
) {
    let request = RunRequest::new(answer)
        .with_options(&ScriptedOptions::scenario("echo"))
        .with_portable(PortableOptions::default().output_schema(schema()));
    ScriptedBackend::new()
        .run(request)
        .await
        .unwrap()
        .collect_universal()
        .await
}

#[tokio::test]
async fn a_conforming_answer_is_the_completions_parsed_value() {
    let (_, completion) = echo(r#"{"city":"Lyon"}"#).await;
    assert_eq!(
        completion.unwrap().structured_output,
        Some(json!({"city": "Lyon"}))
    );
}

#[tokio::test]
async fn a_non_conforming_answer_ends_the_run_with_one_typed_error() {
    for (answer, needle) in [
        (r#"{"city":3}"#, "string"),
        ("Lyon", "not JSON"),
        (r#"{"town":"Lyon"}"#, "town"),
    ] {
        let (events, completion) = echo(answer).await;
        match completion {
            Err(AgentError::StructuredOutput { reason }) => {
                assert!(reason.contains(needle), "{answer}: {reason}")
            }
            other => panic!("{answer}: {other:?}"),
        }
        let errors: Vec<_> = events.iter().filter_map(|e| e.error()).collect();
        assert_eq!(errors.len(), 1, "{answer}: {errors:?}");
        assert_eq!(errors[0].code.as_deref(), Some("structured_output"));
    }
}

#[tokio::test]
async fn without_a_schema_the_completion_has_no_structured_value() {
    let request =
        RunRequest::new(r#"{"city":"Lyon"}"#).with_options(&ScriptedOptions::scenario("echo"));
    let (_, completion) = ScriptedBackend::new()
        .run(request)
        .await
        .unwrap()
        .collect_universal()
        .await;
    let completion = completion.unwrap();
    assert_eq!(completion.structured_output, None);
    assert_eq!(completion.final_text.as_deref(), Some(r#"{"city":"Lyon"}"#));
}

/// Every backend of [`backends`] and Amp, whose modes are its own.
fn backends_with_amp() -> Vec<Arc<dyn AgentBackend>> {
    let mut all = backends();
    all.push(Arc::new(agent_api_amp::AmpBackend::new(Default::default())));
    all
}

// Modes and variants (issue 41): every backend advertises `agent_api.request.modes` exactly when
// it lists modes, and `agent_api.request.variants` exactly when it lists variants (each with its
// row in spec/options.md); a listed value passes validation, an unlisted one is refused before
// spawn naming the valid ones, and a mode or variant on a backend that lists none is refused
// naming the capability.

#[test]
fn capabilities_follow_the_lists_and_every_listed_value_validates() {
    for backend in backends_with_amp() {
        let kind = backend.info().kind.clone();
        let caps_set = backend.info().capabilities.clone();
        assert_eq!(
            caps_set.contains(caps::MODES),
            !backend.info().modes.is_empty(),
            "{kind}: modes advertised but not listed, or listed but not advertised"
        );
        assert_eq!(
            caps_set.contains(caps::VARIANTS),
            !backend.info().variants.is_empty(),
            "{kind}: variants advertised but not listed, or listed but not advertised"
        );
        let mappings = backend.info().option_mappings;
        for (id, listed) in [
            (caps::MODES, !backend.info().modes.is_empty()),
            (caps::VARIANTS, !backend.info().variants.is_empty()),
        ] {
            assert_eq!(
                mappings.iter().any(|m| m.capability == id),
                listed,
                "{kind}: {id} has no row in spec/options.md"
            );
        }
        for mode in backend.info().modes {
            // Amp's modes need its API key to run; validation is what is checked here.
            let request = RunRequest::new("x").with_mode(mode.mode());
            assert!(
                backend.validate(&request).is_ok(),
                "{kind}: listed mode {} refused",
                mode.id
            );
        }
        for set in backend.info().variants {
            let model = set.models.first().copied();
            for value in variants_for(backend.info().variants, model) {
                let mut request = RunRequest::new("x").with_variant(*value);
                if let Some(model) = model {
                    request = request.with_model(model);
                }
                assert!(
                    backend.validate(&request).is_ok(),
                    "{kind}: listed variant {value} for {model:?} refused"
                );
            }
        }
        backend
            .validate(&RunRequest::new("x").with_mode(AgentMode::Default))
            .unwrap_or_else(|e| panic!("{kind}: the default mode refused: {e}"));
    }
}

#[test]
fn unknown_values_are_refused_naming_the_valid_ones_or_the_capability() {
    for backend in backends_with_amp() {
        let kind = backend.info().kind.clone();
        let err = backend
            .validate(&RunRequest::new("x").with_mode(AgentMode::parse("no-such-mode")))
            .unwrap_err();
        match (&err, backend.info().modes.is_empty()) {
            (AgentError::UnknownMode { valid, .. }, false) => {
                assert_eq!(valid.len(), backend.info().modes.len() + 1, "{kind}: {err}");
                assert!(err.to_string().contains("default"), "{kind}: {err}");
            }
            (AgentError::UnsupportedCapability { capability, .. }, true) => {
                assert_eq!(capability, caps::MODES, "{kind}")
            }
            _ => panic!("{kind}: {err}"),
        }
        let err = backend
            .validate(&RunRequest::new("x").with_variant("no-such-variant"))
            .unwrap_err();
        match (&err, backend.info().variants.is_empty()) {
            (AgentError::UnknownVariant { valid, .. }, false) => {
                assert!(!valid.is_empty(), "{kind}: {err}")
            }
            (AgentError::UnsupportedCapability { capability, .. }, true) => {
                assert_eq!(capability, caps::VARIANTS, "{kind}")
            }
            _ => panic!("{kind}: {err}"),
        }
    }
}
