//! A caller-defined tool and a JSON answer, the same way for every agent: the SDK serves the
//! tool to the agent over MCP (loopback, with a per-run secret), the agent calls it, and the
//! answer comes back parsed against the schema. Here the agent is the scripted one, so the
//! example runs offline; any backend advertising `agent_api.tools.caller.v1` takes the same request.
//!
//! `cargo run -p agent_api_examples --example caller_tool`

use agent_api::{capabilities, AgentBackend, AgentError, PortableOptions, RunRequest};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use serde_json::{json, Value};

/// Asks `backend` for the forecast, giving it a `forecast` tool and a schema for the answer.
async fn forecast(backend: &dyn AgentBackend, request: RunRequest) -> Result<Value, AgentError> {
    if !backend
        .info()
        .capabilities
        .contains(capabilities::CALLER_TOOLS)
    {
        return Err(AgentError::UnsupportedCapability {
            kind: backend.info().kind.to_string(),
            capability: capabilities::CALLER_TOOLS.into(),
        });
    }
    let input_schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let answer_schema = json!({
        "type": "object",
        "required": ["city", "sky"],
        "properties": {"city": {"type": "string"}, "sky": {"type": "string"}},
    });
    let request = request
        .with_portable(PortableOptions::default().output_schema(answer_schema))
        .with_tool(
            "forecast",
            "Today's forecast for a city",
            input_schema,
            |input: Value| async move {
                let city = input["city"]
                    .as_str()
                    .ok_or("the input has no city")?
                    .to_string();
                println!("tool called for {city}");
                Ok::<_, &str>(json!({"city": city, "sky": "sunny"}))
            },
        );
    let (_events, completion) = backend.run(request).await?.collect_wrapper().await;
    Ok(completion?.structured_output.unwrap_or(Value::Null))
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    // The scripted agent calls the first caller tool with the prompt (a JSON object) as input.
    let request = RunRequest::new(r#"{"city": "Paris"}"#)
        .with_options(&ScriptedOptions::scenario("caller_tool"));
    let answer = forecast(&ScriptedBackend::new(), request).await?;
    println!("structured answer: {answer}");
    Ok(())
}
