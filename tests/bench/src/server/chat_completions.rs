//! OpenAI Chat Completions (`POST /v1/chat/completions`), as OpenCode (`@ai-sdk/openai-compatible`) and
//! Qwen Code use it: SSE chunks with `reasoning_content` and `tool_calls` deltas, or one JSON completion
//! when the request does not stream. A request without tools is a side request (OpenCode's title
//! generation) and gets a short title.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::conversation::{array, Conversation, OfferedTool, ToolOutput};
use super::openai_responses::openai_error;
use super::sse::{json_response, unix_now, Sse};
use super::tools::TOOL_SEARCH;
use super::turn::{Reply, TurnPlan};
use crate::scenario::{self, Failure};

/// The answer to side requests that offer no tools.
pub const TITLE: &str = "Mock session title";

/// Reads the request's conversation.
pub fn conversation(body: &Value, raw: &str) -> Conversation {
    let mut conv = Conversation::default();
    for tool in array(body, "tools") {
        let function = tool.get("function").unwrap_or(tool);
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            conv.tools
                .push(OfferedTool::function(name, function.get("parameters")));
        }
    }
    // Ids of the deferred-tool searches (Qwen Code's `tool_search`): their answers are no tool results.
    let mut searches = std::collections::HashSet::new();
    for msg in array(body, "messages") {
        let text = content_text(msg.get("content"));
        match msg.get("role").and_then(Value::as_str) {
            Some("user") => conv.push_user(text.iter().map(String::as_str), Vec::new()),
            Some("assistant") => {
                for call in array(msg, "tool_calls") {
                    if call.pointer("/function/name").and_then(Value::as_str) == Some(TOOL_SEARCH) {
                        searches.extend(call.get("id").and_then(Value::as_str));
                    }
                }
                conv.push_assistant();
            }
            Some("tool")
                if msg
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| searches.contains(id)) =>
            {
                conv.push_search_result([]);
            }
            Some("tool") => conv.push_user(
                [],
                vec![ToolOutput {
                    text: text.join("\n"),
                    is_error: false,
                }],
            ),
            _ => {}
        }
    }
    conv.find_cwd(raw);
    conv
}

fn content_text(content: Option<&Value>) -> Vec<String> {
    match content {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// True for side requests (no tools offered), such as OpenCode's title generation.
pub fn is_side_request(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_none_or(|t| t.is_empty())
}

/// Renders the reply: SSE chunks when `stream` is set, else one completion.
pub fn respond(reply: Reply, body: &Value, seq: u64) -> Response {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model");
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match reply {
        Reply::Fail(f) => error(f),
        Reply::Turn(turn) if stream => stream_turn(&turn, model, seq, usage),
        Reply::Turn(turn) => json_response(StatusCode::OK, &completion(&turn, model, seq)),
    }
}

/// OpenAI-style errors; overloaded is HTTP 429 here. Every retryable error says when to retry
/// (`retry-after-ms: 10`, honoured by OpenCode; `retry-after: 1` on 429, honoured by Qwen Code), so error
/// tests do not wait through minutes of back-off.
fn error(failure: Failure) -> Response {
    let mut resp = match failure {
        Failure::Overloaded => json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &json!({"error": {"message": "The server is overloaded (mock)", "type": "rate_limit_error",
                "code": "rate_limit_exceeded"}}),
        ),
        other => openai_error(other),
    };
    if failure != Failure::Unauthorized {
        let h = resp.headers_mut();
        h.insert("retry-after-ms", HeaderValue::from_static("10"));
        if failure == Failure::Overloaded {
            h.insert("retry-after", HeaderValue::from_static("1"));
        }
    }
    resp
}

fn usage_value() -> Value {
    json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110})
}

fn tool_calls(turn: &TurnPlan) -> Option<Value> {
    turn.tool.as_ref().map(|call| {
        json!([{"id": format!("call_{}", call.id), "type": "function",
            "function": {"name": call.name, "arguments": call.input.to_json_string()}}])
    })
}

fn completion(turn: &TurnPlan, model: &str, seq: u64) -> Value {
    let mut message = json!({"role": "assistant", "content": turn.full_text()});
    if let Some(thinking) = &turn.thinking {
        message["reasoning_content"] = json!(thinking);
    }
    if let Some(calls) = tool_calls(turn) {
        message["tool_calls"] = calls;
    }
    let finish = if turn.tool.is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({"id": format!("chatcmpl-mock-{seq}"), "object": "chat.completion", "created": unix_now(), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage_value()})
}

fn stream_turn(turn: &TurnPlan, model: &str, seq: u64, usage: bool) -> Response {
    let created = unix_now();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": format!("chatcmpl-mock-{seq}"), "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut sse = Sse::new();
    sse.data(&chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    if let Some(thinking) = &turn.thinking {
        for word in scenario::word_chunks(thinking) {
            sse.data(&chunk(json!({"reasoning_content": word}), Value::Null));
        }
    }
    for text in &turn.text[..turn.deltas_before_break()] {
        sse.data_after(turn.pace, &chunk(json!({"content": text}), Value::Null));
    }
    if turn.breaks {
        sse.cut_connection();
        return sse.into_response();
    }
    if let Some(call) = &turn.tool {
        let first = json!({"tool_calls": [{"index": 0, "id": format!("call_{}", call.id), "type": "function",
            "function": {"name": call.name, "arguments": ""}}]});
        sse.data(&chunk(first, Value::Null));
        let args = call.input.to_json_string();
        let mid = args
            .char_indices()
            .nth(args.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        for part in [&args[..mid], &args[mid..]] {
            sse.data(&chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                Value::Null,
            ));
        }
    }
    let finish = if turn.tool.is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    sse.data(&chunk(json!({}), json!(finish)));
    if usage {
        sse.data(
            &json!({"id": format!("chatcmpl-mock-{seq}"), "object": "chat.completion.chunk",
            "created": created, "model": model, "choices": [], "usage": usage_value()}),
        );
    }
    sse.raw_data("[DONE]");
    sse.into_response()
}
