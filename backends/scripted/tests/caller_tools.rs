//! The scripted agent calls a caller-defined tool over the run's MCP server, as a CLI would:
//! the call shows as a tool item with the tools facet, its output is the answer (parsed when the
//! request has a schema), a handler's error is the tool's failed result, and the server is gone
//! once the run has ended.

use agent_api::universal::ItemKind;
use agent_api::{AgentBackend, AgentWrapperEventKind, PortableOptions, RunRequest};
use agent_api_conformance::caller_tools::own_listening_ports;
use agent_api_conformance::{assert_conformant, record};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use serde_json::{json, Value};

fn request(prompt: &str) -> RunRequest {
    RunRequest::new(prompt).with_options(&ScriptedOptions::scenario("caller_tool").delay_ms(0)).with_tool(
        "forecast",
        "Today's forecast for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        |input: Value| async move {
            match input["city"].as_str() {
                Some("Atlantis") => Err("no such city".to_string()),
                Some(city) => Ok(json!({"city": city, "sky": "sunny"})),
                None => Err("city missing".to_string()),
            }
        },
    )
}

/// The tests take turns: the first watches this process's listening sockets.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn the_tool_is_called_over_mcp_and_its_output_is_the_parsed_answer() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let before = own_listening_ports();
    let schema = json!({"type": "object", "required": ["city", "sky"], "properties": {"city": {"type": "string"}, "sky": {"type": "string"}}});
    let request = request(r#"{"city": "Paris"}"#)
        .with_portable(PortableOptions::default().output_schema(schema));
    let run = record(ScriptedBackend::new().run(request).await.unwrap()).await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(
        completion.structured_output,
        Some(json!({"city": "Paris", "sky": "sunny"}))
    );
    let calls = run.completed_items(ItemKind::ToolCall);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let facet = run
        .wrapper
        .iter()
        .filter(|e| e.kind == AgentWrapperEventKind::ToolCall)
        .find_map(|e| e.tools_facet());
    assert_eq!(facet.and_then(|f| f.tool_name), Some("forecast".into()));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        own_listening_ports(),
        before,
        "the caller-tools server is gone after the run"
    );
}

#[tokio::test]
async fn a_handler_error_is_the_tools_failed_result_and_the_run_goes_on() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let run = record(
        ScriptedBackend::new()
            .run(request(r#"{"city": "Atlantis"}"#))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("no such city")
    );
    let results = run.completed_items(ItemKind::ToolResult);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].tool.as_ref().and_then(|t| t.exit_code),
        Some(1),
        "{:?}",
        results[0]
    );
}
