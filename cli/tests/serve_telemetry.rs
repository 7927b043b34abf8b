//! `agent-api serve`'s traces and logs, as an operator gets them: the server run with the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver of this test's own, whose
//! requests are decoded with the OpenTelemetry project's protobuf messages; and with
//! `--log-format json`, its stderr read line by line.
//!
//! A caller's `traceparent` continues through the request, the turn, the agent's run, its tool
//! call and the permission wait, with GenAI attributes; no span attribute and no log line holds the
//! prompt or the answer.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

/// The caller's trace and span (W3C trace context).
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// What the prompt holds: never in a span or a log line.
const PROMPT: &str = "PROMPT-TEXT-7f3a please run the tool";

/// An OTLP/HTTP receiver: every request's body, decoded.
struct Receiver {
    port: u16,
    exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Receiver {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let exports = Arc::new(Mutex::new(Vec::new()));
        let kept = exports.clone();
        std::thread::spawn(move || {
            for connection in listener.incoming() {
                let Ok(connection) = connection else { return };
                let kept = kept.clone();
                std::thread::spawn(move || serve_otlp(connection, &kept));
            }
        });
        Self { port, exports }
    }

    fn spans(&self) -> Vec<Span> {
        let exports = self.exports.lock().unwrap();
        exports
            .iter()
            .flat_map(|e| &e.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }
}

/// Answers one connection's OTLP requests (HTTP/1.1, keep-alive) with 200.
fn serve_otlp(connection: TcpStream, exports: &Mutex<Vec<ExportTraceServiceRequest>>) {
    let mut reader = BufReader::new(connection.try_clone().unwrap());
    let mut writer = connection;
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push(line);
        }
        assert!(
            head[0].starts_with("POST /v1/traces "),
            "an OTLP traces request: {head:?}"
        );
        let length: usize = head
            .iter()
            .find_map(|h| {
                let (name, value) = h.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .expect("a Content-Length");
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        exports
            .lock()
            .unwrap()
            .push(ExportTraceServiceRequest::decode(&body[..]).expect("OTLP protobuf"));
        let _ = writer.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
        );
    }
}

/// `agent-api serve` with its stderr kept line by line; killed when dropped.
struct Served {
    child: Child,
    address: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(otlp_port: u16) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
            .args([
                "serve",
                "--port",
                "0",
                "--store",
                "memory",
                "--no-token",
                "--log-format",
                "json",
            ])
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{otlp_port}"),
            )
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env_remove("AGENT_API_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { return };
                kept.lock().unwrap().push(line);
            }
        });
        let mut served = Self {
            child,
            address: String::new(),
            lines,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while served.address.is_empty() {
            assert!(Instant::now() < deadline, "{:?}", served.lines());
            served.address = served
                .lines()
                .iter()
                .find_map(|l| l.strip_prefix("agent-api: listening on http://"))
                .unwrap_or_default()
                .to_string();
            std::thread::sleep(Duration::from_millis(20));
        }
        served
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// One request carrying the caller's `traceparent`.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\ntraceparent: 00-{TRACE}-{CALLER_SPAN}-01\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// Polls the session's events until one of type `kind`.
    fn wait_for(&self, session: &str, kind: &str) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, page) = self.call("GET", &format!("/v1/sessions/{session}/events"), None);
            assert_eq!(status, 200, "{page}");
            let events = page["events"].as_array().unwrap().clone();
            if events.iter().any(|e| e["type"] == kind) {
                return events;
            }
            assert!(Instant::now() < deadline, "no {kind}: {events:#?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A span's attributes as strings.
fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

#[test]
fn a_callers_traceparent_continues_through_request_turn_run_tool_and_permission_wait_over_otlp_and_json_logs(
) {
    let receiver = Receiver::start();
    let served = Served::start(receiver.port);
    let create = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "permission", "backend.scripted.delay_ms": 0}});
    assert_eq!(
        served.call("POST", "/v1/sessions/traced", Some(create)).0,
        200
    );
    let (status, _) = served.call(
        "POST",
        "/v1/sessions/traced/messages",
        Some(json!({ "message": PROMPT })),
    );
    assert_eq!(status, 204);
    let events = served.wait_for("traced", "permission.requested");
    let asked = events
        .iter()
        .find(|e| e["type"] == "permission.requested")
        .unwrap();
    let permission = asked["data"]["permission_id"].as_str().unwrap();
    let (status, _) = served.call(
        "POST",
        &format!("/v1/sessions/traced/permissions/{permission}/reply"),
        Some(json!({"reply": "once"})),
    );
    assert_eq!(status, 204);
    served.wait_for("traced", "permission.resolved");
    // The turn's end: the answer after the tool.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !served.lines().iter().any(|l| l.contains("\"turn ended\"")) {
        assert!(Instant::now() < deadline, "{:#?}", served.lines());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        served.call("POST", "/v1/sessions/traced/terminate", None).0,
        204
    );

    // Stopped by SIGTERM, the server sends the spans it still holds.
    let pid = served.child.id() as i32;
    // SAFETY: signalling the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut served = served;
    while served.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }

    let spans: Vec<Span> = receiver
        .spans()
        .into_iter()
        .filter(|s| hex(&s.trace_id) == TRACE)
        .collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let find = |name: &str| -> &Span {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name} in the caller's trace: {names:?}"))
    };
    let request = find("POST /v1/sessions/{session_id}/messages");
    assert_eq!(
        hex(&request.parent_span_id),
        CALLER_SPAN,
        "the caller's span is the request's parent"
    );
    let turn = find("turn scripted");
    assert_eq!(
        turn.parent_span_id, request.span_id,
        "the turn is the request's child"
    );
    let run = find("invoke_agent scripted");
    assert_eq!(
        run.parent_span_id, turn.span_id,
        "the run is the turn's child"
    );
    let tool = find("execute_tool shell");
    assert_eq!(
        tool.parent_span_id, run.span_id,
        "the tool call is the run's child"
    );
    let wait = find("permission wait");
    assert_eq!(
        wait.parent_span_id, tool.span_id,
        "the permission wait is its tool call's child"
    );
    assert!(wait.end_time_unix_nano > wait.start_time_unix_nano);
    let store = spans
        .iter()
        .filter(|s| s.name == "store append")
        .collect::<Vec<_>>();
    assert!(!store.is_empty(), "store writes are spans: {names:?}");
    // The turn's writes are its children; terminate's (the trailing events) its request's.
    assert!(store.iter().any(|s| s.parent_span_id == turn.span_id));
    assert!(store
        .iter()
        .all(|s| spans.iter().any(|p| p.span_id == s.parent_span_id)));

    let run_attributes = attributes(run);
    assert_eq!(run_attributes["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run_attributes["gen_ai.system"], "scripted");
    assert!(
        run_attributes.contains_key("gen_ai.conversation.id"),
        "{run_attributes:?}"
    );
    for attributes in [&run_attributes, &attributes(turn)] {
        for tokens in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
            assert!(
                attributes
                    .get(tokens)
                    .is_some_and(|n| n.parse::<u64>().unwrap() > 0),
                "{tokens}: {attributes:?}"
            );
        }
    }
    let tool_attributes = attributes(tool);
    assert_eq!(tool_attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool_attributes["gen_ai.tool.name"], "shell");
    assert!(tool_attributes.contains_key("gen_ai.tool.call.id"));
    assert_eq!(attributes(wait)["agent_api.permission.status"], "approved");
    let turn_attributes = attributes(turn);
    assert_eq!(turn_attributes["agent_api.session.id"], "traced");
    assert_eq!(attributes(request)["http.response.status_code"], "204");

    for span in receiver.spans() {
        for (key, value) in attributes(&span) {
            assert!(
                !value.contains("PROMPT-TEXT") && !value.contains("You said"),
                "span {} attribute {key} holds the prompt or the answer: {value}",
                span.name
            );
        }
    }

    // The JSON log: one line per request and per turn, with the session and the trace.
    let lines = served.lines();
    let logs: Vec<Value> = lines
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let message_line = logs
        .iter()
        .find(|l| l["message"] == "request" && l["path"] == "/v1/sessions/traced/messages")
        .unwrap_or_else(|| panic!("no request line: {lines:#?}"));
    assert_eq!(
        (
            &message_line["method"],
            &message_line["status"],
            &message_line["session_id"],
            &message_line["trace_id"]
        ),
        (&json!("POST"), &json!(204), &json!("traced"), &json!(TRACE))
    );
    let turn_line = logs
        .iter()
        .find(|l| l["message"] == "turn ended")
        .unwrap_or_else(|| panic!("no turn line: {lines:#?}"));
    assert_eq!(
        (
            &turn_line["session_id"],
            &turn_line["outcome"],
            &turn_line["agent"],
            &turn_line["trace_id"]
        ),
        (
            &json!("traced"),
            &json!("completed"),
            &json!("scripted"),
            &json!(TRACE)
        )
    );
    assert!(
        lines.iter().all(|l| !l.contains("PROMPT-TEXT")),
        "no log line holds the prompt: {lines:#?}"
    );
}

#[test]
fn serve_with_its_otlp_collector_down_serves_turns_and_stops_in_time() {
    // A port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut served = Served::start(closed);
    let create = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "text", "backend.scripted.delay_ms": 0}});
    for turn in 0..3 {
        let session = format!("down-{turn}");
        assert_eq!(
            served
                .call(
                    "POST",
                    &format!("/v1/sessions/{session}"),
                    Some(create.clone())
                )
                .0,
            200
        );
        let message = json!({ "message": "hello" });
        assert_eq!(
            served
                .call(
                    "POST",
                    &format!("/v1/sessions/{session}/messages"),
                    Some(message)
                )
                .0,
            204
        );
        served.wait_for(&session, "item.completed");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while served
        .lines()
        .iter()
        .filter(|l| l.contains("\"turn ended\""))
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "{:#?}", served.lines());
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling the child this test started.
    assert_eq!(
        unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) },
        0
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not stop with its collector down"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}: {:#?}", served.lines());
    assert!(
        served.lines().iter().all(|l| !l.contains("panicked")),
        "{:#?}",
        served.lines()
    );
}
