//! Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` and `:generateContent`), as the
//! Gemini CLI uses it. Side calls through `generateContent` are answered without the scenario: a request
//! with a response schema (the model router, the next-speaker check) gets JSON filled from the schema, one
//! without tools (session summaries) gets a short text.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::conversation::{array, Conversation, OfferedTool, ToolOutput};
use super::sse::{json_response, Sse};
use super::tools::{fill_schema, ToolInput};
use super::turn::{Reply, TurnPlan};
use crate::scenario::Failure;

/// The answer to side calls without tools or schema.
pub const SIDE_REPLY: &str = "Mock side reply";

/// Reads the request's conversation.
pub fn conversation(body: &Value, raw: &str) -> Conversation {
    let mut conv = Conversation::default();
    for group in array(body, "tools") {
        for decl in array(group, "functionDeclarations") {
            if let Some(name) = decl.get("name").and_then(Value::as_str) {
                let schema = decl
                    .get("parametersJsonSchema")
                    .or_else(|| decl.get("parameters"));
                conv.tools.push(OfferedTool::function(name, schema));
            }
        }
    }
    for content in array(body, "contents") {
        let parts = content
            .get("parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match content.get("role").and_then(Value::as_str) {
            Some("model") => conv.push_assistant(),
            _ => {
                let texts = parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str));
                let results = parts
                    .iter()
                    .filter_map(|p| p.get("functionResponse"))
                    .map(|r| {
                        let response = r.get("response").cloned().unwrap_or(Value::Null);
                        let text = match response.get("output") {
                            Some(Value::String(s)) => s.clone(),
                            _ => response.to_string(),
                        };
                        ToolOutput {
                            is_error: response.get("error").is_some(),
                            text,
                        }
                    })
                    .collect();
                conv.push_user(texts, results);
            }
        }
    }
    conv.find_cwd(raw);
    conv
}

/// The structured answer to a side call, if the request is one.
pub fn side_reply(body: &Value) -> Option<TurnPlan> {
    let config = body.get("generationConfig");
    let schema = config.and_then(|c| {
        c.get("responseJsonSchema")
            .or_else(|| c.get("responseSchema"))
    });
    if let Some(schema) = schema {
        return Some(TurnPlan {
            text: vec![fill_schema(schema).to_string()],
            ..TurnPlan::default()
        });
    }
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    (!has_tools).then(|| TurnPlan::say(SIDE_REPLY))
}

/// Renders the reply: SSE for `streamGenerateContent`, one JSON response for `generateContent`.
pub fn respond(reply: Reply, model: &str, stream: bool) -> Response {
    match reply {
        Reply::Fail(f) => error(f),
        Reply::Turn(turn) if stream => stream_turn(&turn, model),
        Reply::Turn(turn) => {
            let mut parts = Vec::new();
            if let Some(t) = &turn.thinking {
                parts.push(json!({"text": t, "thought": true}));
            }
            if !turn.text.is_empty() {
                parts.push(json!({"text": turn.full_text()}));
            }
            parts.extend(function_call(&turn));
            json_response(StatusCode::OK, &chunk(model, parts, true))
        }
    }
}

fn error(failure: Failure) -> Response {
    let (status, message, name) = match failure {
        Failure::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            "API key not valid (mock)",
            "UNAUTHENTICATED",
        ),
        Failure::ServerError => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error (mock)",
            "INTERNAL",
        ),
        Failure::Overloaded => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The model is overloaded (mock)",
            "UNAVAILABLE",
        ),
    };
    json_response(
        status,
        &json!({"error": {"code": status.as_u16(), "message": message, "status": name}}),
    )
}

fn function_call(turn: &TurnPlan) -> Option<Value> {
    turn.tool.as_ref().map(|call| {
        let args = match &call.input {
            ToolInput::Json(v) => v.clone(),
            other => serde_json::from_str(&other.to_json_string()).unwrap_or(Value::Null),
        };
        json!({"functionCall": {"name": call.name, "args": args}})
    })
}

fn chunk(model: &str, parts: Vec<Value>, last: bool) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if last {
        candidate["finishReason"] = json!("STOP");
    }
    let (out, total) = if last { (5, 17) } else { (1, 13) };
    json!({"candidates": [candidate], "modelVersion": model, "responseId": "mockresp",
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": out, "totalTokenCount": total}})
}

fn stream_turn(turn: &TurnPlan, model: &str) -> Response {
    let mut sse = Sse::new();
    if let Some(t) = &turn.thinking {
        sse.data(&chunk(
            model,
            vec![json!({"text": t, "thought": true})],
            false,
        ));
    }
    let sent = turn.deltas_before_break();
    let call = function_call(turn);
    for (i, text) in turn.text[..sent].iter().enumerate() {
        let last = !turn.breaks && i + 1 == sent && call.is_none();
        sse.data_after(turn.pace, &chunk(model, vec![json!({"text": text})], last));
    }
    if turn.breaks {
        sse.cut_connection();
    } else if let Some(call) = call {
        sse.data(&chunk(model, vec![call], true));
    } else if sent == 0 {
        sse.data(&chunk(model, vec![json!({"text": ""})], true));
    }
    sse.into_response()
}
