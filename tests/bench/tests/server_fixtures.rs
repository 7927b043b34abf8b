//! The model server answers every recorded CLI request in the shared `model_api` fixtures with a
//! well-formed reply of the right API: SSE parsed strictly, event order checked, JSON checked.

mod common;

use agent_bench::scenario::SHELL_COMMAND;
use agent_bench::ModelServer;
use common::{fixtures_dir, parse_sse, send, Answer, Event};
use serde_json::Value;

/// Which scenario each recorded request is replayed with (the fixtures' own scenario names differ).
fn scenario_for(api: &str, example: &str) -> &'static str {
    match (api, example) {
        (_, "thinking" | "reasoning") => "reasoning",
        (
            _,
            "tool_use"
            | "tool_result"
            | "function_call"
            | "function_response"
            | "function_call_output",
        ) => "shell",
        (_, "tool_call" | "title") => "shell",
        ("openai_responses", "custom_tool_call" | "custom_tool_call_output") => "write_edit",
        (_, "error401") => "error401",
        (_, "error500" | "error500_retry_after_ms") => "error500",
        (_, "session_summary") => "echo",
        _ => "text",
    }
}

/// The fixture's path with its scenario segment replaced by ours.
fn path_with_scenario(path: &str, scenario: &str) -> String {
    let rest = path
        .strip_prefix("/s/")
        .and_then(|p| p.split_once('/'))
        .map_or("", |(_, r)| r);
    format!("/s/{scenario}/{rest}")
}

struct Case {
    api: String,
    example: String,
    status: u16,
    answer: Answer,
}

async fn replay_all() -> Vec<Case> {
    let dir = fixtures_dir().join("model_api");
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    let server = ModelServer::start(None).await.unwrap();
    let router = server.router();
    let mut cases = Vec::new();
    for entry in index {
        let api = entry["api"].as_str().unwrap().to_string();
        let example = entry["example"].as_str().unwrap().to_string();
        let body: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(entry["request_file"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        let path = path_with_scenario(
            entry["path"].as_str().unwrap(),
            scenario_for(&api, &example),
        );
        let answer = send(
            &router,
            entry["method"].as_str().unwrap(),
            &path,
            Some(&body),
        )
        .await;
        cases.push(Case {
            api,
            example,
            status: entry["response_status"].as_u64().unwrap() as u16,
            answer,
        });
    }
    assert_eq!(
        server.requests().len(),
        cases.len(),
        "every request is logged"
    );
    cases
}

/// Checks an Anthropic stream's grammar and returns (text, thinking, tool_use name, tool input).
fn check_anthropic(events: &[Event]) -> (String, String, Option<(String, Value)>) {
    let names: Vec<&str> = events
        .iter()
        .map(|e| e.name.as_deref().expect("named event"))
        .collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(
        &names[names.len() - 2..],
        ["message_delta", "message_stop"],
        "{names:?}"
    );
    let (mut text, mut thinking, mut tool, mut open, mut next_index) =
        (String::new(), String::new(), None, None, 0);
    let mut partial = String::new();
    for event in events {
        let data = event.json();
        assert_eq!(
            data["type"].as_str(),
            event.name.as_deref(),
            "data.type matches the event name"
        );
        match event.name.as_deref().unwrap() {
            "content_block_start" => {
                assert!(open.is_none(), "block started inside another");
                assert_eq!(data["index"], next_index);
                open = Some(data["content_block"].clone());
            }
            "content_block_delta" => {
                let block = open.as_ref().expect("delta outside a block");
                assert_eq!(data["index"], next_index);
                let delta = &data["delta"];
                match (
                    block["type"].as_str().unwrap(),
                    delta["type"].as_str().unwrap(),
                ) {
                    ("text", "text_delta") => text += delta["text"].as_str().unwrap(),
                    ("thinking", "thinking_delta") => {
                        thinking += delta["thinking"].as_str().unwrap()
                    }
                    ("thinking", "signature_delta") => {
                        assert!(delta["signature"].as_str().is_some())
                    }
                    ("tool_use", "input_json_delta") => {
                        partial += delta["partial_json"].as_str().unwrap()
                    }
                    other => panic!("delta {other:?} does not fit its block"),
                }
            }
            "content_block_stop" => {
                let block = open.take().expect("stop outside a block");
                if block["type"] == "tool_use" {
                    let input: Value =
                        serde_json::from_str(&partial).expect("tool input deltas form JSON");
                    tool = Some((block["name"].as_str().unwrap().to_string(), input));
                }
                next_index += 1;
            }
            "message_delta" => {
                let stop = data["delta"]["stop_reason"].as_str().unwrap();
                assert_eq!(
                    stop,
                    if tool.is_some() {
                        "tool_use"
                    } else {
                        "end_turn"
                    }
                );
                assert!(data["usage"]["output_tokens"].is_u64());
            }
            "message_start" | "ping" | "message_stop" => {}
            other => panic!("unexpected event {other}"),
        }
    }
    assert!(open.is_none());
    (text, thinking, tool)
}

/// Checks a Responses stream's grammar and returns the completed output items.
fn check_responses(events: &[Event]) -> Vec<Value> {
    let datas: Vec<Value> = events.iter().map(Event::json).collect();
    for (i, (event, data)) in events.iter().zip(&datas).enumerate() {
        assert_eq!(data["type"].as_str(), event.name.as_deref());
        assert_eq!(
            data["sequence_number"], i,
            "sequence numbers count up from 0"
        );
    }
    assert_eq!(datas.first().unwrap()["type"], "response.created");
    let last = datas.last().unwrap();
    assert_eq!(last["type"], "response.completed");
    assert!(last["response"]["usage"]["total_tokens"].is_u64());
    let mut open = Vec::new();
    let mut done = Vec::new();
    for data in &datas {
        match data["type"].as_str().unwrap() {
            "response.output_item.added" => open.push(data["item"]["id"].clone()),
            "response.output_item.done" => {
                assert_eq!(
                    open.pop().as_ref(),
                    Some(&data["item"]["id"]),
                    "items close in order"
                );
                done.push(data["item"].clone());
            }
            t if t.contains(".delta") => {
                assert_eq!(open.last(), Some(&data["item_id"]), "delta inside its item")
            }
            _ => {}
        }
    }
    assert!(open.is_empty());
    assert_eq!(
        last["response"]["output"],
        Value::Array(done.clone()),
        "completed output lists every item"
    );
    done
}

/// Checks a Chat Completions stream and returns (content, reasoning, tool name, tool arguments).
fn check_chat(events: &[Event]) -> (String, String, Option<(String, Value)>) {
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(Event::json).collect();
    let (mut content, mut reasoning, mut name, mut args, mut finish) =
        (String::new(), String::new(), None, String::new(), None);
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        let Some(choice) = chunk["choices"].get(0) else {
            assert!(
                chunk["usage"]["total_tokens"].is_u64(),
                "a chunk without choices carries usage"
            );
            continue;
        };
        assert!(finish.is_none(), "no delta after finish_reason");
        let delta = &choice["delta"];
        content += delta["content"].as_str().unwrap_or("");
        reasoning += delta["reasoning_content"].as_str().unwrap_or("");
        if let Some(call) = delta["tool_calls"].get(0) {
            if let Some(n) = call["function"]["name"].as_str() {
                name = Some(n.to_string());
            }
            args += call["function"]["arguments"].as_str().unwrap_or("");
        }
        finish = choice["finish_reason"].as_str().map(str::to_string);
    }
    assert_eq!(
        finish.as_deref(),
        Some(if name.is_some() { "tool_calls" } else { "stop" })
    );
    let tool = name.map(|n| {
        (
            n,
            serde_json::from_str(&args).expect("tool arguments form JSON"),
        )
    });
    (content, reasoning, tool)
}

/// Checks a Gemini stream and returns (text, thought, function call).
fn check_gemini(events: &[Event]) -> (String, String, Option<Value>) {
    let (mut text, mut thought, mut call) = (String::new(), String::new(), None);
    for (i, event) in events.iter().enumerate() {
        assert!(event.name.is_none(), "Gemini events are unnamed");
        let data = event.json();
        let candidate = &data["candidates"][0];
        assert_eq!(
            candidate["finishReason"].as_str().is_some(),
            i + 1 == events.len(),
            "only the last chunk finishes"
        );
        for part in candidate["content"]["parts"].as_array().unwrap() {
            if let Some(c) = part.get("functionCall") {
                call = Some(c.clone());
            } else if part["thought"] == true {
                thought += part["text"].as_str().unwrap();
            } else {
                text += part["text"].as_str().unwrap();
            }
        }
    }
    (text, thought, call)
}

/// The Anthropic Messages stream of one example says what the scenario says.
fn expect_anthropic(ex: &str, a: &Answer) {
    let (text, thinking, tool) = check_anthropic(&parse_sse(&a.body));
    match ex {
        "text" => assert_eq!(text, "Hello from mock"),
        "thinking" => assert_eq!(
            (text.as_str(), thinking.is_empty()),
            ("Hello after thinking", false)
        ),
        "tool_use" => {
            let (name, input) = tool.expect("tool_use block");
            assert_eq!(
                (name.as_str(), &input["command"]),
                ("Bash", &Value::from(SHELL_COMMAND))
            );
        }
        "tool_result" => assert_eq!(text, "Tool finished. Output was: hi"),
        other => panic!("unchecked example {other}"),
    }
}

/// The OpenAI Responses stream of one example says what the scenario says.
fn expect_responses(ex: &str, a: &Answer) {
    let items = check_responses(&parse_sse(&a.body));
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    match ex {
        "text" => assert_eq!(items[0]["content"][0]["text"], "Hello from mock"),
        "reasoning" => {
            assert_eq!(kinds, ["reasoning", "message"]);
            assert_eq!(items[1]["content"][0]["text"], "Hello after thinking");
        }
        "function_call" => {
            let call = items
                .iter()
                .find(|i| i["type"] == "function_call")
                .expect("function_call");
            assert_eq!(call["name"], "exec_command");
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, serde_json::json!({"cmd": SHELL_COMMAND}));
        }
        "function_call_output" => {
            let text = items[0]["content"][0]["text"].as_str().unwrap();
            assert!(
                text.starts_with("Tool finished. Output was: ") && text.contains("hi"),
                "{text}"
            );
        }
        "custom_tool_call" => {
            let patch = items[0]["input"].as_str().unwrap();
            assert_eq!(items[0]["name"], "apply_patch");
            assert!(
                patch.contains("*** Add File: created.txt\n+created by mock\n"),
                "{patch}"
            );
        }
        "custom_tool_call_output" => {
            let call = items
                .iter()
                .find(|i| i["type"] == "custom_tool_call")
                .expect("second patch");
            assert!(call["input"]
                .as_str()
                .unwrap()
                .contains("*** Update File: created.txt"));
        }
        other => panic!("unchecked example {other}"),
    }
}

/// The OpenAI Chat Completions stream of one example says what the scenario says.
fn expect_chat(ex: &str, a: &Answer) {
    let (content, reasoning, tool) = check_chat(&parse_sse(&a.body));
    match ex {
        "title" => assert_eq!(content, "Mock session title"),
        "text" => assert_eq!(content, "Hello from mock"),
        "reasoning" => assert_eq!(
            (content.as_str(), reasoning.is_empty()),
            ("Hello after thinking", false)
        ),
        "tool_call" => {
            let (name, args) = tool.expect("tool call");
            assert_eq!(
                (name.as_str(), &args["command"]),
                ("bash", &Value::from(SHELL_COMMAND))
            );
        }
        "tool_result" => assert_eq!(content, "Tool finished. Output was: hi"),
        other => panic!("unchecked example {other}"),
    }
}

/// The Gemini reply of one example (a plain JSON answer for the side calls, SSE for turns) says what the scenario says.
fn expect_gemini(example: &str, a: &Answer) {
    match example {
        "router" => {
            assert_ne!(a.headers["content-type"], "text/event-stream");
            let text = a.json()["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_string();
            let routed: Value = serde_json::from_str(&text).unwrap();
            assert!(
                routed["complexity_score"].as_i64().unwrap() >= 1,
                "{routed}"
            );
        }
        "session_summary" => {
            assert_eq!(
                a.json()["candidates"][0]["content"]["parts"][0]["text"],
                "Mock side reply"
            );
        }
        ex => {
            let (text, thought, call) = check_gemini(&parse_sse(&a.body));
            match ex {
                "text" => assert_eq!(text, "Hello from mock"),
                "thinking" => assert_eq!(
                    (text.as_str(), thought.is_empty()),
                    ("Hello after thinking", false)
                ),
                "function_call" => {
                    let call = call.expect("functionCall");
                    assert_eq!(
                        (&call["name"], &call["args"]["command"]),
                        (
                            &Value::from("run_shell_command"),
                            &Value::from(SHELL_COMMAND)
                        )
                    );
                }
                "function_response" => assert!(
                    text.starts_with("Tool finished. Output was: ") && text.contains("hi"),
                    "{text}"
                ),
                other => panic!("unchecked example {other}"),
            }
        }
    }
}

#[tokio::test]
async fn every_recorded_request_gets_a_well_formed_reply() {
    let cases = replay_all().await;
    assert!(cases.len() >= 29, "index lists {} examples", cases.len());
    for case in &cases {
        let what = format!("{}/{}", case.api, case.example);
        let a = &case.answer;
        assert_eq!(a.status.as_u16(), case.status, "{what}: {}", a.body);
        assert!(!a.cut, "{what}: stream cut");
        if case.status != 200 {
            assert!(
                a.json()["error"].is_object(),
                "{what}: error body {}",
                a.body
            );
            continue;
        }
        let ex = case.example.as_str();
        match case.api.as_str() {
            "anthropic_messages" => expect_anthropic(ex, a),
            "openai_responses" => expect_responses(ex, a),
            "openai_chat_completions" => expect_chat(ex, a),
            "gemini_generate_content" => expect_gemini(ex, a),
            api => panic!("unchecked api {api}/{ex}"),
        }
    }
}
