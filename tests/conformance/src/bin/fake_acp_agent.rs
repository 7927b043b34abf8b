//! A small ACP agent for the `acp` backend's tests: JSON-RPC 2.0 on stdio. What a prompt does is
//! chosen by its first word:
//!
//! - `updates`: every `session/update` kind, a kind from a newer protocol, a malformed update, an
//!   unknown notification and a line that is not JSON, then `end_turn`;
//! - `permission`: asks for a shell permission and says which option came back;
//! - `fs OUTSIDE`: tries to read and write outside its working directory (the file `OUTSIDE`, a `..`
//!   path, a relative path, a symlink `link` in the cwd), then writes and reads `inside.txt`;
//! - `terminal`: asks for a terminal the client does not offer;
//! - `slow`: streams a chunk every 100 ms until `session/cancel`, then stops with `cancelled`;
//! - `refuse` / `max`: stops with `refusal` / `max_tokens`;
//! - `usage`: reports two model calls of 3,000 + 2,000 tokens each as Qwen Code does (`_meta` on an
//!   empty message chunk), says `counted`, and answers the prompt with a smaller usage (5 + 5);
//!   `usage-partial`: the same, the response's usage missing its `totalTokens`;
//! - anything else: answers like the bench's `echo` model, `echo: user_turns=N messages=M
//!   last=TEXT`, N counting the prompts of the session (a warm session's turns, and those of a
//!   loaded one).
//!
//! It keeps each such exchange in `.fake-acp-history.jsonl` in its working directory, and
//! `session/load` replays that file (user and agent message chunks) before it answers.
//! It writes one line per message and reports what the client answered as assistant text.

use std::io::{BufRead, Write};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{json, Value};

struct Agent {
    input: Receiver<Value>,
    next_id: u64,
    session: String,
    cancelled: bool,
    prompts: u32,
    /// The usage the prompt's response carries, when the prompt set one.
    final_usage: Option<Value>,
}

fn send(message: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

fn raw(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl Agent {
    fn update(&self, update: Value) {
        send(
            &json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.session, "update": update}}),
        );
    }

    fn say(&self, text: &str) {
        self.update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}));
    }

    /// Sends a request to the client and waits for its answer (`Ok(result)` or `Err(code)`).
    fn ask(&mut self, method: &str, params: Value) -> Result<Value, i64> {
        let id = self.next_id;
        self.next_id += 1;
        send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        while let Ok(message) = self.input.recv() {
            if message["id"] == json!(id) && message.get("method").is_none() {
                return match message.get("result") {
                    Some(result) => Ok(result.clone()),
                    None => Err(message["error"]["code"].as_i64().unwrap_or(0)),
                };
            }
            if message["method"] == "session/cancel" {
                self.cancelled = true;
            }
        }
        Err(0)
    }

    fn every_update(&self) {
        self.update(json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "thinking"}}));
        self.say("Hello ");
        self.say("there");
        let call = json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "echo hi", "kind": "execute", "status": "pending"});
        self.update(call);
        self.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}));
        let content = json!([{"type": "content", "content": {"type": "text", "text": "hi\n"}},
            {"type": "diff", "path": "/w/a.txt", "oldText": "a", "newText": "b"}]);
        self.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": content, "rawOutput": {"exitCode": 0}}));
        self.update(json!({"sessionUpdate": "plan", "entries": [{"content": "step one", "priority": "high", "status": "completed"}]}));
        self.update(json!({"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "x", "description": "y"}]}));
        self.update(json!({"sessionUpdate": "current_mode_update", "currentModeId": "default"}));
        self.update(json!({"sessionUpdate": "usage_update", "used": 10, "size": 100}));
        self.update(json!({"sessionUpdate": "future_kind_from_v2", "anything": 1}));
        self.update(json!({"sessionUpdate": "tool_call", "toolCallId": 42}));
        send(&json!({"jsonrpc": "2.0", "method": "_vendor/notice", "params": {}}));
        raw("this is not json");
        self.say("Done.");
    }

    fn permission(&mut self) {
        let options = json!([{"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"}]);
        let call = json!({"toolCallId": "p1", "title": "rm -rf build", "kind": "execute", "status": "pending"});
        let answer = self.ask(
            "session/request_permission",
            json!({"sessionId": self.session, "toolCall": call, "options": options}),
        );
        let outcome = match answer {
            Ok(result) if result["outcome"]["outcome"] == "selected" => result["outcome"]
                ["optionId"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
            Ok(result) => result["outcome"]["outcome"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
            Err(code) => format!("error {code}"),
        };
        self.say(&format!("outcome: {outcome}"));
    }

    fn fs(&mut self, outside: &str) {
        let cwd = std::env::current_dir().unwrap().display().to_string();
        let attempts = [
            ("read", outside.to_string()),
            (
                "read",
                format!(
                    "{cwd}/../{}",
                    std::path::Path::new(outside)
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                ),
            ),
            ("read", "secret.txt".to_string()),
            ("read", format!("{cwd}/link/secret.txt")),
            ("write", outside.to_string()),
            ("write", format!("{cwd}/link/planted.txt")),
            ("write", format!("{cwd}/inside.txt")),
            ("read", format!("{cwd}/inside.txt")),
        ];
        let mut report = Vec::new();
        for (op, path) in attempts {
            let (method, params) = match op {
                "read" => (
                    "fs/read_text_file",
                    json!({"sessionId": self.session, "path": path}),
                ),
                _ => (
                    "fs/write_text_file",
                    json!({"sessionId": self.session, "path": path, "content": "pwned"}),
                ),
            };
            report.push(match self.ask(method, params) {
                Ok(result) => format!("{op} ok {}", result["content"].as_str().unwrap_or("")),
                Err(code) => format!("{op} refused {code}"),
            });
        }
        self.say(&report.join("; "));
    }

    /// `fsops read:NAME write:NAME …`: each file request in turn (a NAME relative to the working
    /// directory, or absolute), the outcomes reported in order.
    fn fs_ops<'a>(&mut self, ops: impl Iterator<Item = &'a str>) {
        let cwd = std::env::current_dir().unwrap();
        let mut report = Vec::new();
        for op in ops {
            let (kind, name) = op.split_once(':').unwrap_or((op, ""));
            let path = cwd.join(name).display().to_string();
            let (method, params) = match kind {
                "read" => (
                    "fs/read_text_file",
                    json!({"sessionId": self.session, "path": path}),
                ),
                _ => (
                    "fs/write_text_file",
                    json!({"sessionId": self.session, "path": path, "content": "pwned"}),
                ),
            };
            report.push(match self.ask(method, params) {
                Ok(result) => format!("{kind} ok {}", result["content"].as_str().unwrap_or("")),
                Err(code) => format!("{kind} refused {code}"),
            });
        }
        self.say(&report.join("; "));
    }

    fn slow(&mut self) -> &'static str {
        for i in 0..600 {
            self.say(&format!("word{i} "));
            match self.input.recv_timeout(Duration::from_millis(100)) {
                Ok(message) if message["method"] == "session/cancel" => return "cancelled",
                Err(RecvTimeoutError::Disconnected) => return "cancelled",
                _ => {}
            }
        }
        "end_turn"
    }

    fn prompt(&mut self, params: &Value) -> &'static str {
        let text = params["prompt"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        self.prompts += 1;
        self.cancelled = false;
        let mut words = text.split_whitespace();
        match words.next().unwrap_or("") {
            "updates" => self.every_update(),
            "permission" => self.permission(),
            "fs" => self.fs(words.next().unwrap_or("/nonexistent")),
            "fsops" => self.fs_ops(words),
            "terminal" => {
                let answer = self.ask(
                    "terminal/create",
                    json!({"sessionId": self.session, "command": "ls"}),
                );
                self.say(&format!(
                    "terminal: {}",
                    if answer.is_ok() { "granted" } else { "refused" }
                ));
            }
            "slow" => return self.slow(),
            "blocks" => {
                let blocks = params["prompt"].as_array().into_iter().flatten();
                let kinds: Vec<String> = blocks
                    .map(|b| match b["type"].as_str() {
                        Some("image") => format!(
                            "image {} {}",
                            b["mimeType"].as_str().unwrap_or(""),
                            b["data"].as_str().unwrap_or("")
                        ),
                        Some("resource_link") => {
                            format!("link {}", b["uri"].as_str().unwrap_or(""))
                        }
                        other => other.unwrap_or("?").to_string(),
                    })
                    .collect();
                self.say(&format!("blocks: {}", kinds.join("; ")));
            }
            word @ ("usage" | "usage-partial") => {
                for _ in 0..2 {
                    self.update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""},
                        "_meta": {"usage": {"inputTokens": 3000, "outputTokens": 2000}}}));
                }
                self.say("counted");
                let mut usage = json!({"totalTokens": 10, "inputTokens": 5, "outputTokens": 5});
                if word == "usage-partial" {
                    usage.as_object_mut().unwrap().remove("totalTokens");
                }
                self.final_usage = Some(usage);
            }
            "refuse" => return "refusal",
            "max" => {
                self.say("cut");
                return "max_tokens";
            }
            _ => {
                let answer = format!(
                    "echo: user_turns={n} messages={m} last={text}",
                    n = self.prompts,
                    m = 2 * self.prompts - 1
                );
                self.say(&answer);
                remember(&text, &answer);
            }
        }
        if self.cancelled {
            "cancelled"
        } else {
            "end_turn"
        }
    }

    /// Replays the kept exchanges of the session `params` names; `None` when there are none.
    fn load(&mut self, params: &Value) -> Option<Value> {
        let history = std::fs::read_to_string(HISTORY)
            .ok()
            .filter(|_| params["sessionId"] == json!(self.session))?;
        for line in history
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            self.update(json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": line["user"]}}));
            self.say(line["agent"].as_str().unwrap_or(""));
            self.prompts += 1;
        }
        Some(json!({}))
    }

    fn serve(&mut self) {
        while let Ok(message) = self.input.recv() {
            let id = message["id"].clone();
            let result = match message["method"].as_str() {
                Some("initialize") => {
                    json!({"protocolVersion": 1, "agentInfo": {"name": "fake-acp", "version": "0.1"},
                    "agentCapabilities": {"loadSession": true, "promptCapabilities": {"image": std::env::var_os("FAKE_ACP_TEXT_ONLY").is_none()}},
                    "authMethods": []})
                }
                Some("session/new") => json!({"sessionId": self.session}),
                Some("session/load") => match self.load(&message["params"]) {
                    Some(result) => result,
                    None => {
                        send(
                            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "Internal error",
                            "data": {"details": "no such session"}}}),
                        );
                        continue;
                    }
                },
                Some("session/prompt") => {
                    let mut result = json!({"stopReason": self.prompt(&message["params"])});
                    if let Some(usage) = self.final_usage.take() {
                        result["usage"] = usage;
                    }
                    result
                }
                Some("session/cancel") | None => continue,
                Some(_) => {
                    send(
                        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown method"}}),
                    );
                    continue;
                }
            };
            send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
    }
}

/// Where the agent keeps its session's exchanges, in its working directory.
const HISTORY: &str = ".fake-acp-history.jsonl";

fn remember(user: &str, agent: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(HISTORY)
        .expect("the working directory is writable");
    let _ = writeln!(file, "{}", json!({"user": user, "agent": agent}));
}

fn main() {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                if tx.send(value).is_err() {
                    break;
                }
            }
        }
    });
    Agent {
        input: rx,
        next_id: 0,
        session: "fake-session-1".into(),
        cancelled: false,
        prompts: 0,
        final_usage: None,
    }
    .serve();
}
