//! Anthropic Messages API (`POST /v1/messages`), as Claude Code uses it: SSE when the request says
//! `"stream": true`, the plain JSON message otherwise (Claude Code's fallback after a broken stream).

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::conversation::{array, text_of, Conversation, OfferedTool, ToolOutput};
use super::sse::{json_response, Sse};
use super::tools::{ToolCall, ToolInput};
use super::turn::{Reply, TurnPlan};
use crate::scenario::{self, Failure};

/// The signature sent with every thinking block.
pub const SIGNATURE: &str = "mock-signature-abc123";

/// Reads the request's conversation.
pub fn conversation(body: &Value, raw: &str) -> Conversation {
    let mut conv = Conversation::default();
    for tool in array(body, "tools") {
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            conv.tools
                .push(OfferedTool::function(name, tool.get("input_schema")));
        }
    }
    for msg in array(body, "messages") {
        let blocks = content_blocks(msg.get("content"));
        match msg.get("role").and_then(Value::as_str) {
            Some("user") => {
                let texts = blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str());
                let results = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_result")
                    .map(|b| ToolOutput {
                        text: text_of(b.get("content")),
                        is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    })
                    .collect();
                conv.push_user(texts, results);
            }
            Some("assistant") => conv.push_assistant(),
            // Claude Code hands the model a message the user sent while it worked (a steered turn)
            // as a system message between the tool result and the next step.
            Some("system") => {
                let steered = blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .filter_map(sent_while_working);
                conv.push_user(steered, Vec::new());
            }
            _ => {}
        }
    }
    conv.find_cwd(raw);
    conv
}

/// The user's words in Claude Code's note of a message sent while it worked (`The user sent a new
/// message while you were working:\n<words>\n\nIMPORTANT: ...`).
fn sent_while_working(text: &str) -> Option<&str> {
    let words = text
        .trim_start()
        .strip_prefix("The user sent a new message while you were working:")?;
    Some(words.split("\n\nIMPORTANT:").next().unwrap_or(words).trim())
}

fn content_blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

/// Renders the reply: SSE when `stream` is set, else one JSON message.
pub fn respond(reply: Reply, body: &Value, seq: u64) -> Response {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-mock");
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    match reply {
        Reply::Fail(f) => error(f),
        Reply::Turn(turn) if stream => stream_turn(&turn, model, seq),
        Reply::Turn(turn) => json_response(StatusCode::OK, &message(&turn, model, seq)),
    }
}

fn error(failure: Failure) -> Response {
    let (status, kind, msg) = match failure {
        Failure::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key (mock)",
        ),
        Failure::ServerError => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "Internal server error (mock)",
        ),
        Failure::Overloaded => (overloaded_status(), "overloaded_error", "Overloaded (mock)"),
    };
    let mut resp = json_response(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": msg}}),
    );
    if failure == Failure::Unauthorized {
        resp.headers_mut()
            .insert("x-should-retry", HeaderValue::from_static("false"));
    }
    resp
}

fn overloaded_status() -> StatusCode {
    StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
}

fn tool_id(call: &ToolCall) -> String {
    format!("toolu_{}", call.id)
}

fn tool_input(call: &ToolCall) -> Value {
    match &call.input {
        ToolInput::Json(v) => v.clone(),
        other => serde_json::from_str(&other.to_json_string()).unwrap_or(Value::Null),
    }
}

fn usage() -> Value {
    json!({"input_tokens": 12, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

/// The whole reply as one JSON message.
fn message(turn: &TurnPlan, model: &str, seq: u64) -> Value {
    let mut content = Vec::new();
    if let Some(thinking) = &turn.thinking {
        content.push(json!({"type": "thinking", "thinking": thinking, "signature": SIGNATURE}));
    }
    if !turn.text.is_empty() {
        content.push(json!({"type": "text", "text": turn.full_text()}));
    }
    if let Some(call) = &turn.tool {
        content.push(json!({"type": "tool_use", "id": tool_id(call), "name": call.name, "input": tool_input(call)}));
    }
    let stop = if turn.tool.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    json!({
        "id": format!("msg_mock_{seq}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage(),
    })
}

fn stream_turn(turn: &TurnPlan, model: &str, seq: u64) -> Response {
    let mut sse = Sse::new();
    let mut start_usage = usage();
    start_usage["output_tokens"] = json!(1);
    sse.event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_mock_{seq}"), "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
    );
    sse.event("ping", &json!({"type": "ping"}));
    let mut index = 0;
    if let Some(thinking) = &turn.thinking {
        block_start(
            &mut sse,
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        );
        for word in scenario::word_chunks(thinking) {
            block_delta(
                &mut sse,
                index,
                json!({"type": "thinking_delta", "thinking": word}),
            );
        }
        block_delta(
            &mut sse,
            index,
            json!({"type": "signature_delta", "signature": SIGNATURE}),
        );
        block_stop(&mut sse, index);
        index += 1;
    }
    if !turn.text.is_empty() {
        block_start(&mut sse, index, json!({"type": "text", "text": ""}));
        for chunk in &turn.text[..turn.deltas_before_break()] {
            let delta = json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": chunk}});
            sse.event_after(turn.pace, "content_block_delta", &delta);
        }
        if turn.breaks {
            let err = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded (mock broken stream)"}});
            sse.event("error", &err);
            return sse.into_response();
        }
        block_stop(&mut sse, index);
        index += 1;
    }
    if let Some(call) = &turn.tool {
        block_start(
            &mut sse,
            index,
            json!({"type": "tool_use", "id": tool_id(call), "name": call.name, "input": {}}),
        );
        let args = tool_input(call).to_string();
        let mid = args
            .char_indices()
            .nth(args.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        for part in [&args[..mid], &args[mid..]] {
            block_delta(
                &mut sse,
                index,
                json!({"type": "input_json_delta", "partial_json": part}),
            );
        }
        block_stop(&mut sse, index);
    }
    let stop = if turn.tool.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    sse.event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 20}}),
    );
    sse.event("message_stop", &json!({"type": "message_stop"}));
    sse.into_response()
}

fn block_start(sse: &mut Sse, index: usize, block: Value) {
    sse.event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    );
}

fn block_delta(sse: &mut Sse, index: usize, delta: Value) {
    sse.event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    );
}

fn block_stop(sse: &mut Sse, index: usize) {
    sse.event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_sent_while_claude_worked_is_the_last_user_text() {
        let body = json!({"messages": [
            {"role": "user", "content": "Run the slow command."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}]},
            {"role": "system", "content": "The user sent a new message while you were working:\nAlso say banana.\n\nIMPORTANT: After completing your current task, you MUST address the user's message."},
        ]});
        let conv = conversation(&body, "");
        assert_eq!(conv.last_user_text, "Also say banana.");
        assert_eq!((conv.user_turns, conv.results_total), (2, 1));
    }
}
