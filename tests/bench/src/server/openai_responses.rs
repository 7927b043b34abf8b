//! OpenAI Responses API (`POST /v1/responses`), as Codex uses it: always SSE. Text goes out as a message
//! item, thinking as a reasoning item with summary and raw-text deltas, shell calls as `function_call`
//! items and Codex's free-form `apply_patch` as a `custom_tool_call` item.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::conversation::{array, text_of, Conversation, OfferedTool, ToolOutput};
use super::sse::{json_response, unix_now, Sse};
use super::tools::{ToolInput, TOOL_SEARCH};
use super::turn::{Reply, TurnPlan};
use crate::scenario::{self, Failure};

/// Reads the request's conversation.
pub fn conversation(body: &Value, raw: &str) -> Conversation {
    let mut conv = Conversation::default();
    for tool in array(body, "tools") {
        if tool.get("type").and_then(Value::as_str) == Some("tool_search") {
            conv.tools
                .push(OfferedTool::function(TOOL_SEARCH, tool.get("parameters")));
            continue;
        }
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        match tool.get("type").and_then(Value::as_str) {
            Some("custom") => conv.tools.push(OfferedTool {
                name: name.into(),
                freeform: true,
                schema: json!({}),
                namespace: None,
            }),
            _ => conv
                .tools
                .push(OfferedTool::function(name, tool.get("parameters"))),
        }
    }
    for item in array(body, "input") {
        match (
            item.get("type").and_then(Value::as_str),
            item.get("role").and_then(Value::as_str),
        ) {
            (Some("message") | None, Some("user")) => {
                let parts = item
                    .get("content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                conv.push_user(texts, Vec::new());
            }
            (Some("message") | None, Some("assistant")) => conv.push_assistant(),
            (Some("function_call" | "custom_tool_call" | "tool_search_call"), _) => {
                conv.push_assistant()
            }
            (Some("tool_search_output"), _) => {
                conv.push_search_result(loaded_tools(item.get("tools")))
            }
            (Some("function_call_output" | "custom_tool_call_output"), _) => {
                let text = text_of(item.get("output"));
                conv.push_user(
                    [],
                    vec![ToolOutput {
                        text,
                        is_error: false,
                    }],
                );
            }
            _ => {}
        }
    }
    conv.find_cwd(raw);
    conv
}

/// The tools a `tool_search_output` loaded: functions, or functions inside a namespace.
fn loaded_tools(tools: Option<&Value>) -> Vec<OfferedTool> {
    let mut loaded = Vec::new();
    for tool in tools.and_then(Value::as_array).into_iter().flatten() {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        match tool.get("type").and_then(Value::as_str) {
            Some("namespace") => {
                for inner in tool
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(inner_name) = inner.get("name").and_then(Value::as_str) {
                        let mut offered =
                            OfferedTool::function(inner_name, inner.get("parameters"));
                        offered.namespace = Some(name.to_string());
                        loaded.push(offered);
                    }
                }
            }
            _ if !name.is_empty() => {
                loaded.push(OfferedTool::function(name, tool.get("parameters")))
            }
            _ => {}
        }
    }
    loaded
}

/// The error body OpenAI-style APIs answer with.
pub fn openai_error(failure: Failure) -> Response {
    let (status, message, kind, code) = match failure {
        Failure::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided: sk-test. (mock)",
            "invalid_request_error",
            "invalid_api_key",
        ),
        Failure::ServerError => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "mock internal server error",
            "server_error",
            "internal_error",
        ),
        Failure::Overloaded => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The server is overloaded (mock)",
            "server_error",
            "server_overloaded",
        ),
    };
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind, "code": code}}),
    )
}

/// Renders the reply as a Responses SSE stream.
pub fn respond(reply: Reply, body: &Value, seq: u64) -> Response {
    match reply {
        Reply::Fail(f) => openai_error(f),
        Reply::Turn(turn) => {
            let model = body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("gpt-mock");
            Stream::new(model, seq).turn(&turn)
        }
    }
}

/// Builds one response stream, numbering events.
struct Stream {
    sse: Sse,
    seq: u64,
    next: u64,
    model: String,
    created: u64,
    output: Vec<Value>,
}

impl Stream {
    fn new(model: &str, seq: u64) -> Stream {
        Stream {
            sse: Sse::new(),
            seq,
            next: 0,
            model: model.into(),
            created: unix_now(),
            output: Vec::new(),
        }
    }

    fn emit(&mut self, mut data: Value, pause: std::time::Duration) {
        let name = data["type"].as_str().unwrap_or("message").to_string();
        data["sequence_number"] = json!(self.next);
        self.next += 1;
        self.sse.event_after(pause, &name, &data);
    }

    fn ev(&mut self, data: Value) {
        self.emit(data, std::time::Duration::ZERO);
    }

    fn response(&self, status: &str) -> Value {
        json!({"id": format!("resp_mock_{}", self.seq), "object": "response", "created_at": self.created,
            "status": status, "model": self.model, "output": self.output, "parallel_tool_calls": false,
            "tool_choice": "auto", "tools": [], "error": null, "incomplete_details": null})
    }

    fn turn(mut self, turn: &TurnPlan) -> Response {
        let r = self.response("in_progress");
        self.ev(json!({"type": "response.created", "response": r}));
        self.ev(json!({"type": "response.in_progress", "response": r}));
        if let Some(thinking) = &turn.thinking {
            self.reasoning(thinking);
        }
        if !turn.text.is_empty() && !self.message(turn) {
            return self.sse.into_response();
        }
        if let Some(call) = turn.tool.as_ref().filter(|c| c.name == TOOL_SEARCH) {
            // Codex runs the search itself (`execution: client`) and sends the loaded tools back.
            let index = self.output.len();
            let args = match &call.input {
                ToolInput::Json(args) => args.clone(),
                ToolInput::Freeform(text) => json!({ "query": text }),
            };
            let item = json!({"id": format!("tsc_{}", call.id), "type": "tool_search_call", "status": "completed",
                "call_id": format!("call_{}", call.id), "execution": "client", "arguments": args});
            self.ev(
                json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            );
            self.ev(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
            self.output.push(item);
        } else if let Some(call) = &turn.tool {
            let index = self.output.len();
            let call_id = format!("call_{}", call.id);
            let (item, added, delta_type, done_type, field, text) = match &call.input {
                ToolInput::Freeform(input) => (
                    json!({"id": format!("ctc_{}", call.id), "type": "custom_tool_call", "status": "completed",
                        "call_id": call_id, "name": call.name, "input": input}),
                    json!({"id": format!("ctc_{}", call.id), "type": "custom_tool_call", "status": "in_progress",
                        "call_id": call_id, "name": call.name, "input": ""}),
                    "response.custom_tool_call_input.delta",
                    "response.custom_tool_call_input.done",
                    "input",
                    input.clone(),
                ),
                ToolInput::Json(args) => (
                    json!({"id": format!("fc_{}", call.id), "type": "function_call", "status": "completed",
                        "call_id": call_id, "name": call.name, "arguments": args.to_string()}),
                    json!({"id": format!("fc_{}", call.id), "type": "function_call", "status": "in_progress",
                        "call_id": call_id, "name": call.name, "arguments": ""}),
                    "response.function_call_arguments.delta",
                    "response.function_call_arguments.done",
                    "arguments",
                    args.to_string(),
                ),
            };
            let (mut item, mut added) = (item, added);
            if let Some(namespace) = &call.namespace {
                item["namespace"] = json!(namespace);
                added["namespace"] = json!(namespace);
            }
            let item_id = item["id"].clone();
            self.ev(
                json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            );
            let mid = text
                .char_indices()
                .nth(text.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            for part in [&text[..mid], &text[mid..]] {
                self.ev(json!({"type": delta_type, "item_id": item_id, "output_index": index, "delta": part}));
            }
            self.ev(
                json!({"type": done_type, "item_id": item_id, "output_index": index, field: text}),
            );
            self.ev(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
            self.output.push(item);
        }
        let mut done = self.response("completed");
        done["usage"] = json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": if turn.thinking.is_some() { 7 } else { 0 }},
            "total_tokens": 132});
        self.ev(json!({"type": "response.completed", "response": done}));
        self.sse.into_response()
    }

    fn reasoning(&mut self, thinking: &str) {
        let index = self.output.len();
        let id = format!("rs_mock_{}_{index}", self.seq);
        let summary = format!("**Thinking** {thinking}");
        self.ev(
            json!({"type": "response.output_item.added", "output_index": index,
            "item": {"id": id, "type": "reasoning", "summary": []}}),
        );
        let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
        let with = |extra: Value| {
            let mut v = at.clone();
            v.as_object_mut()
                .into_iter()
                .for_each(|o| o.extend(extra.as_object().cloned().unwrap_or_default()));
            v
        };
        self.ev(with(json!({"type": "response.reasoning_summary_part.added", "part": {"type": "summary_text", "text": ""}})));
        for word in scenario::word_chunks(&summary) {
            self.ev(with(
                json!({"type": "response.reasoning_summary_text.delta", "delta": word}),
            ));
        }
        self.ev(with(
            json!({"type": "response.reasoning_summary_text.done", "text": summary}),
        ));
        self.ev(with(json!({"type": "response.reasoning_summary_part.done",
            "part": {"type": "summary_text", "text": summary}})));
        for word in scenario::word_chunks(thinking) {
            self.ev(json!({"type": "response.reasoning_text.delta", "item_id": id, "output_index": index,
                "content_index": 0, "delta": word}));
        }
        self.ev(
            json!({"type": "response.reasoning_text.done", "item_id": id, "output_index": index,
            "content_index": 0, "text": thinking}),
        );
        let item = json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}],
            "content": [{"type": "reasoning_text", "text": thinking}], "encrypted_content": null});
        self.ev(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        self.output.push(item);
    }

    /// Streams the message item; false when the stream broke.
    fn message(&mut self, turn: &TurnPlan) -> bool {
        let index = self.output.len();
        let id = format!("msg_mock_{}_{index}", self.seq);
        self.ev(json!({"type": "response.output_item.added", "output_index": index,
            "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}));
        self.ev(
            json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        for chunk in &turn.text[..turn.deltas_before_break()] {
            let delta = json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                "content_index": 0, "delta": chunk, "logprobs": []});
            self.emit(delta, turn.pace);
        }
        if turn.breaks {
            let mut failed = self.response("failed");
            failed["error"] = json!({"code": "server_error", "message": "mock broken stream"});
            self.ev(json!({"type": "response.failed", "response": failed}));
            self.sse.cut_connection();
            return false;
        }
        let text = turn.full_text();
        self.ev(
            json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
            "content_index": 0, "text": text, "logprobs": []}),
        );
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        self.ev(
            json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
            "content_index": 0, "part": part}),
        );
        let item = json!({"id": id, "type": "message", "status": "completed", "role": "assistant", "content": [part]});
        self.ev(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        self.output.push(item);
        true
    }
}
