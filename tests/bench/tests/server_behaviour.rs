//! Behaviour of the model server beyond the recorded requests: errors, broken streams, the non-streaming
//! fallback, side requests, scenario progression and the request log.

mod common;

use agent_bench::{LoggedRequest, ModelServer};
use common::{fixtures_dir, parse_sse, send};
use serde_json::{json, Value};

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(fixtures_dir().join("model_api").join(path)).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn server() -> (ModelServer, axum::Router) {
    let server = ModelServer::start(None).await.unwrap();
    let router = server.router();
    (server, router)
}

#[tokio::test]
async fn head_probe_is_answered_and_npm_registry_is_not_found() {
    let (_s, router) = server().await;
    assert_eq!(send(&router, "HEAD", "/s/text", None).await.status, 200);
    assert_eq!(send(&router, "HEAD", "/s/text/", None).await.status, 200);
    assert_eq!(send(&router, "HEAD", "/", None).await.status, 200);
    assert_eq!(
        send(&router, "GET", "/npm-registry/@opencode-ai%2fplugin", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn unknown_scenario_is_a_404_that_lists_the_known_ones() {
    let (_s, router) = server().await;
    let a = send(
        &router,
        "POST",
        "/s/nope/v1/messages",
        Some(&json!({"messages": []})),
    )
    .await;
    assert_eq!(a.status, 404);
    assert!(
        a.body.contains("broken_stream") && a.body.contains("nope"),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn overloaded_is_529_for_anthropic_429_for_chat_and_503_elsewhere() {
    let (_s, router) = server().await;
    let claude = fixture("anthropic_messages/text.request.json");
    let anthropic = send(&router, "POST", "/s/overloaded/v1/messages", Some(&claude)).await;
    assert_eq!(anthropic.status, 529);
    assert_eq!(anthropic.json()["error"]["type"], "overloaded_error");
    let gemini = "/s/overloaded/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    for (path, file, status) in [
        (
            "/s/overloaded/v1/responses",
            "openai_responses/text.request.json",
            503,
        ),
        (
            "/s/overloaded/v1/chat/completions",
            "openai_chat_completions/text.request.json",
            429,
        ),
        (gemini, "gemini_generate_content/text.request.json", 503),
    ] {
        assert_eq!(
            send(&router, "POST", path, Some(&fixture(file)))
                .await
                .status,
            status,
            "{path}"
        );
    }
}

#[tokio::test]
async fn chat_completions_errors_ask_for_a_quick_retry() {
    let (_s, router) = server().await;
    let body = fixture("openai_chat_completions/text.request.json");
    let a = send(
        &router,
        "POST",
        "/s/error500/v1/chat/completions",
        Some(&body),
    )
    .await;
    assert_eq!(a.status, 500);
    assert_eq!(a.headers["retry-after-ms"], "10");
    let o = send(
        &router,
        "POST",
        "/s/overloaded/v1/chat/completions",
        Some(&body),
    )
    .await;
    assert_eq!(o.headers["retry-after"], "1");
    let u = send(
        &router,
        "POST",
        "/s/error401/v1/chat/completions",
        Some(&body),
    )
    .await;
    assert!(
        u.headers.get("retry-after-ms").is_none(),
        "401 is not retryable"
    );
}

#[tokio::test]
async fn slow_text_paces_its_deltas_half_a_second_apart() {
    use futures::StreamExt;
    use tower::ServiceExt;
    let (_s, router) = server().await;
    let body = fixture("openai_chat_completions/text.request.json");
    let req = axum::http::Request::post("/s/slow_text/v1/chat/completions")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    let mut stream = resp.into_body().into_data_stream();
    let started = std::time::Instant::now();
    let mut arrivals = Vec::new();
    while arrivals.len() < 3 {
        let chunk = stream.next().await.expect("stream ended early").unwrap();
        if String::from_utf8_lossy(&chunk).contains("\"word") {
            arrivals.push(started.elapsed().as_millis());
        }
    }
    let gap = arrivals[2] - arrivals[1];
    assert!((400..1000).contains(&gap), "deltas {arrivals:?} ms");
}

#[tokio::test]
async fn anthropic_401_says_do_not_retry() {
    let (_s, router) = server().await;
    let a = send(
        &router,
        "POST",
        "/s/error401/v1/messages?beta=true",
        Some(&fixture("anthropic_messages/text.request.json")),
    )
    .await;
    assert_eq!(a.status, 401);
    assert_eq!(a.headers["x-should-retry"], "false");
}

#[tokio::test]
async fn anthropic_without_stream_gets_one_json_message() {
    let (_s, router) = server().await;
    let mut body = fixture("anthropic_messages/tool_use.request.json");
    body.as_object_mut().unwrap().remove("stream");
    let a = send(
        &router,
        "POST",
        "/s/shell/v1/messages?beta=true",
        Some(&body),
    )
    .await;
    let msg = a.json();
    assert_eq!(msg["type"], "message");
    assert_eq!(msg["stop_reason"], "tool_use");
    assert_eq!(
        msg["content"][0],
        json!({"type": "text", "text": "I'll run a command."})
    );
    assert_eq!(msg["content"][1]["name"], "Bash");
    assert_eq!(
        msg["content"][1]["input"]["command"],
        "echo hi > out.txt && cat out.txt"
    );
}

#[tokio::test]
async fn broken_stream_sends_an_error_event_on_anthropic_and_cuts_the_others() {
    let (_s, router) = server().await;
    let a = send(
        &router,
        "POST",
        "/s/broken_stream/v1/messages",
        Some(&fixture("anthropic_messages/text.request.json")),
    )
    .await;
    let names: Vec<String> = parse_sse(&a.body)
        .into_iter()
        .filter_map(|e| e.name)
        .collect();
    assert_eq!(names.last().map(String::as_str), Some("error"), "{names:?}");
    assert!(!names.iter().any(|n| n == "message_stop"));

    let r = send(
        &router,
        "POST",
        "/s/broken_stream/v1/responses",
        Some(&fixture("openai_responses/text.request.json")),
    )
    .await;
    assert!(r.cut, "responses stream not cut");
    assert!(r.body.contains("response.failed") && !r.body.contains("response.completed"));

    let c = send(
        &router,
        "POST",
        "/s/broken_stream/v1/chat/completions",
        Some(&fixture("openai_chat_completions/text.request.json")),
    )
    .await;
    assert!(c.cut && !c.body.contains("[DONE]"), "{}", c.body);

    let path = "/s/broken_stream/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    let g = send(
        &router,
        "POST",
        path,
        Some(&fixture("gemini_generate_content/text.request.json")),
    )
    .await;
    assert!(g.cut && !g.body.contains("finishReason"), "{}", g.body);
}

/// The fixture's Claude request without `stream`, so the reply is one JSON message.
fn claude_json_request(file: &str) -> Value {
    let mut body = fixture(file);
    body.as_object_mut().unwrap().remove("stream");
    body
}

fn push_tool_round(body: &mut Value, id: &str, name: &str, result: &str) {
    let messages = body["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": name, "input": {}}]}));
    messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": result}]}));
}

#[tokio::test]
async fn write_edit_steps_advance_with_each_tool_result() {
    let (_s, router) = server().await;
    let mut body = claude_json_request("anthropic_messages/tool_use.request.json");
    let first = send(&router, "POST", "/s/write_edit/v1/messages", Some(&body))
        .await
        .json();
    // The fixture's system prompt is cut before the working directory, so the path stays relative.
    assert_eq!(first["content"][0]["name"], "Write");
    assert_eq!(
        first["content"][0]["input"],
        json!({"file_path": "created.txt", "content": "created by mock\n"})
    );
    push_tool_round(&mut body, "t1", "Write", "File created");
    let second = send(&router, "POST", "/s/write_edit/v1/messages", Some(&body))
        .await
        .json();
    assert_eq!(second["content"][0]["text"], "Now I will edit it.");
    assert_eq!(
        second["content"][1]["input"],
        json!({"file_path": "created.txt", "old_string": "created by mock", "new_string": "edited by mock"})
    );
    push_tool_round(&mut body, "t2", "Edit", "edited ok");
    let third = send(&router, "POST", "/s/write_edit/v1/messages", Some(&body))
        .await
        .json();
    assert_eq!(
        third["content"],
        json!([{"type": "text", "text": "Edit finished. Output was: edited ok"}])
    );
    assert_eq!(third["stop_reason"], "end_turn");
}

#[tokio::test]
async fn the_working_directory_from_the_system_prompt_makes_file_paths_absolute() {
    let (_s, router) = server().await;
    let mut body = claude_json_request("anthropic_messages/tool_use.request.json");
    body["system"] = json!([{"type": "text", "text": "env:\n - Primary working directory: /home/dev/work/w\n - Platform: linux"}]);
    let reply = send(&router, "POST", "/s/write_edit/v1/messages", Some(&body))
        .await
        .json();
    assert_eq!(
        reply["content"][0]["input"]["file_path"],
        "/home/dev/work/w/created.txt"
    );
}

#[tokio::test]
async fn question_uses_ask_user_question_when_offered_and_says_so_when_not() {
    let (_s, router) = server().await;
    let mut body = claude_json_request("anthropic_messages/text.request.json");
    let without = send(&router, "POST", "/s/question/v1/messages", Some(&body))
        .await
        .json();
    let text = without["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("no question tool") && text.contains("Bash"),
        "{text}"
    );
    body["tools"].as_array_mut().unwrap().push(
        json!({"name": "AskUserQuestion", "input_schema": {"type": "object",
        "properties": {"questions": {"type": "array", "items": {"type": "object", "properties": {
            "question": {}, "header": {}, "options": {}, "multiSelect": {}}}}}}}),
    );
    let msg = send(&router, "POST", "/s/question/v1/messages", Some(&body))
        .await
        .json();
    let input = &msg["content"][0]["input"];
    assert_eq!(msg["content"][0]["name"], "AskUserQuestion");
    assert_eq!(input["questions"].as_array().unwrap().len(), 2);
    assert_eq!(input["questions"][0]["options"][1]["label"], "Blue");
    assert_eq!(input["questions"][0]["multiSelect"], false);
    push_tool_round(&mut body, "q1", "AskUserQuestion", "color=Blue, size=Small");
    let after = send(&router, "POST", "/s/question/v1/messages", Some(&body))
        .await
        .json();
    assert_eq!(
        after["content"][0]["text"],
        "You answered: color=Blue, size=Small"
    );
}

#[tokio::test]
async fn requests_are_logged_to_the_file_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let server = ModelServer::start(Some(log.clone())).await.unwrap();
    let router = server.router();
    send(
        &router,
        "POST",
        "/s/echo.run-7/v1/chat/completions",
        Some(&fixture("openai_chat_completions/text.request.json")),
    )
    .await;
    send(&router, "HEAD", "/s/text", None).await;
    let lines: Vec<LoggedRequest> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, server.requests());
    assert_eq!(lines.len(), 2);
    let first = &lines[0];
    assert_eq!(
        (first.scenario.as_deref(), first.tag.as_deref()),
        (Some("echo"), Some("run-7"))
    );
    assert_eq!(first.headers["x-api-key"], "<redacted>");
    assert!(!std::fs::read_to_string(&log).unwrap().contains("sk-secret"));
    assert_eq!(first.body["model"], "mock-model");
    assert_eq!((lines[1].method.as_str(), lines[1].status), ("HEAD", 200));
}

#[tokio::test]
async fn echo_describes_the_conversation_for_resume_tests() {
    let (_s, router) = server().await;
    let body = json!({"model": "m", "stream": false, "tools": [{"type": "function", "function": {"name": "bash"}}],
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "what was the word"}]});
    let a = send(&router, "POST", "/s/echo/v1/chat/completions", Some(&body)).await;
    assert_eq!(
        a.json()["choices"][0]["message"]["content"],
        "echo: user_turns=2 messages=3 last=what was the word"
    );
}

#[tokio::test]
async fn long_text_streams_two_hundred_deltas() {
    let (_s, router) = server().await;
    let a = send(
        &router,
        "POST",
        "/s/long_text/v1/chat/completions",
        Some(&fixture("openai_chat_completions/text.request.json")),
    )
    .await;
    let deltas = parse_sse(&a.body)
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter(|e| {
            e.json()["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("word"))
        })
        .count();
    assert_eq!(deltas, 200);
}
