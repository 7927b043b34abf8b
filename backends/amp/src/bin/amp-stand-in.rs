//! `amp-stand-in`: a stand-in, playing a script, for
//! `amp --execute --stream-json [--stream-json-input]`, for tests of the whole backend without
//! the Amp service. It replays a transcript (`AMP_STAND_IN_SCRIPT`: native stdout lines, or a
//! two-way session whose `send` lines split it into turns) and does what amp does around it:
//!
//! - before each `tool_use` it evaluates the run's `--settings-file` rules and runs a `delegate`
//!   program exactly as amp does (env `AGENT=amp`, `AGENT_TOOL_NAME`, the arguments as JSON on
//!   stdin; exit 0 allows, anything else rejects); a rejected call's `tool_result` becomes an
//!   error result and the `result` lists it in `permission_denials`;
//! - a call of a tool the settings' `amp.tools.disable` lists is not run (amp would not have offered it):
//!   its `tool_result` becomes an error, and no rule or delegate is consulted;
//! - thinking blocks only with `--stream-json-thinking`;
//! - two-way (`--stream-json-input`): one turn per user message on stdin (content must be text
//!   blocks), exit when stdin ends; `threads continue ID` must name the script's thread;
//! - a call of an MCP tool, `mcp__SERVER__TOOL`, allowed and of a streamable HTTP server the
//!   settings' `amp.mcpServers` list (`url`, `headers`), is made for real (MCP `initialize`, then
//!   `tools/call`): its `tool_result` becomes the server's answer, and `{tool_output}` in the texts
//!   that follow (the messages and the `result`) becomes its text. A stdio server's tools are not
//!   called;
//! - `AMP_STAND_IN_HANG=1`: before the first `result`, start a child (`sleep`) and hang, writing
//!   the child's pid to `AMP_STAND_IN_PIDFILE`, so tests can prove cancel leaves no process.
//!
//! Not a test of amp itself: it only exercises this crate against amp's documented shapes.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

struct Args {
    prompt: Option<String>,
    thinking: bool,
    two_way: bool,
    settings: Option<String>,
    thread: Option<String>,
}

fn parse_args() -> Args {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut args = Args {
        prompt: None,
        thinking: false,
        two_way: false,
        settings: None,
        thread: None,
    };
    let mut i = 0;
    while i < argv.len() {
        match argv[i].as_str() {
            "threads" if argv.get(i + 1).map(String::as_str) == Some("continue") => {
                args.thread = argv.get(i + 2).cloned();
                i += 2;
            }
            "--execute" => {
                if let Some(next) = argv.get(i + 1).filter(|a| !a.starts_with("--")) {
                    args.prompt = Some(next.clone());
                    i += 1;
                }
            }
            "--stream-json" => {}
            "--stream-json-thinking" => args.thinking = true,
            "--stream-json-input" => args.two_way = true,
            "--settings-file" => {
                args.settings = argv.get(i + 1).cloned();
                i += 1;
            }
            "--mode" | "--label" | "--visibility" | "--log-file" | "--mcp-config" => i += 1,
            _ => {}
        }
        i += 1;
    }
    args
}

/// The script's turns: native lines, split at each `send` of a session transcript.
fn turns(path: &str) -> Vec<Vec<Value>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| fail(&format!("cannot read the script: {e}")));
    let mut turns = vec![Vec::new()];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| fail("the script has a line that is not JSON"));
        match value.get("dir").and_then(Value::as_str) {
            Some("send") if value["msg"]["type"] == "user" => {
                if !turns.last().is_some_and(Vec::is_empty) {
                    turns.push(Vec::new());
                }
            }
            Some("recv") if value["msg"]["type"] != "agent_api.amp_delegate" => {
                turns.last_mut().unwrap().push(value["msg"].clone())
            }
            Some(_) => {}
            None => turns.last_mut().unwrap().push(value),
        }
    }
    turns
}

fn fail(message: &str) -> ! {
    eprintln!("Error: {message}");
    std::process::exit(1);
}

/// amp's verdict on one tool call under the settings' rules: true to run it.
fn allowed(settings: &Value, tool: &str, input: &Value) -> bool {
    if settings["amp.dangerouslyAllowAll"] == true {
        return true;
    }
    let rules = settings["amp.permissions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(rule) = rules.iter().find(|r| r["tool"] == "*" || r["tool"] == tool) else {
        return true;
    };
    match rule["action"].as_str() {
        Some("allow") => true,
        Some("delegate") => {
            let program = rule["to"].as_str().unwrap_or_default();
            let child = Command::new(program)
                .env("AGENT", "amp")
                .env("AGENT_TOOL_NAME", tool)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn();
            let Ok(mut child) = child else { return false };
            let _ = child
                .stdin
                .take()
                .map(|mut stdin| stdin.write_all(input.to_string().as_bytes()));
            child.wait().is_ok_and(|status| status.code() == Some(0))
        }
        _ => false,
    }
}

/// Calls `tool` of the streamable HTTP MCP server `server` as the settings give it: the text of
/// its answer, and whether it is an error result.
fn call_mcp(server: &Value, tool: &str, input: &Value) -> (String, bool) {
    let Some(url) = server["url"].as_str() else {
        return ("the stand-in calls HTTP MCP servers only".into(), true);
    };
    let authorization = server["headers"]["Authorization"].as_str();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|_| fail("no runtime"));
    runtime.block_on(async {
        let answer = async {
            let client = agent_api::kit::caller_tools::client::McpClient::new(url, authorization)?;
            client.initialize().await?;
            client.call_tool(tool, input.clone()).await
        };
        match answer.await {
            Ok(result) => (
                agent_api::kit::caller_tools::client::result_text(&result),
                result["isError"] == true,
            ),
            Err(error) => (format!("MCP call failed: {error}"), true),
        }
    })
}

struct Player {
    args: Args,
    settings: Value,
    denied: HashSet<String>,
    disabled: HashSet<String>,
    denials: Vec<Value>,
    hang: bool,
    /// MCP calls made, by call id: the answer's text and whether it is an error.
    mcp_results: std::collections::HashMap<String, (String, bool)>,
    /// The text of the last MCP answer, for `{tool_output}` in what follows.
    tool_output: String,
}

impl Player {
    fn emit(&self, line: &Value) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    fn play(&mut self, lines: &[Value]) {
        for line in lines {
            let mut line = line.clone();
            if !self.tool_output.is_empty() {
                let filled = line
                    .to_string()
                    .replace("{tool_output}", &json_text(&self.tool_output));
                line = serde_json::from_str(&filled).unwrap_or(line);
            }
            match line["type"].as_str() {
                Some("assistant") => {
                    self.assistant(&mut line);
                    continue;
                }
                Some("user") => self.tool_results(&mut line),
                Some("result") => {
                    if std::mem::take(&mut self.hang) {
                        hang();
                    }
                    line["permission_denials"] = json!(std::mem::take(&mut self.denials));
                }
                _ => {}
            }
            self.emit(&line);
        }
    }

    fn assistant(&mut self, line: &mut Value) {
        if let Some(content) = line
            .pointer_mut("/message/content")
            .and_then(Value::as_array_mut)
        {
            if !self.args.thinking {
                content.retain(|b| b["type"] != "thinking");
            }
        }
        let calls: Vec<Value> = line
            .pointer("/message/content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .cloned()
            .collect();
        // amp prints the message, then checks each call before running it.
        self.emit(line);
        self.check(calls);
    }

    fn check(&mut self, calls: Vec<Value>) {
        for call in calls {
            let tool = call["name"].as_str().unwrap_or_default();
            let disabled = self.settings["amp.tools.disable"]
                .as_array()
                .is_some_and(|names| names.iter().any(|n| n == tool));
            if disabled {
                self.disabled
                    .insert(call["id"].as_str().unwrap_or_default().to_string());
            } else if !allowed(&self.settings, tool, &call["input"]) {
                let id = call["id"].as_str().unwrap_or_default().to_string();
                self.denials.push(
                    json!({ "tool_name": tool, "tool_use_id": id, "tool_input": call["input"] }),
                );
                self.denied.insert(id);
            } else if let Some((server, name)) = tool
                .strip_prefix("mcp__")
                .and_then(|rest| rest.split_once("__"))
            {
                let config = &self.settings["amp.mcpServers"][server];
                let (text, is_error) = if config.is_null() {
                    (format!("no MCP server named {server}"), true)
                } else {
                    call_mcp(config, name, &call["input"])
                };
                self.tool_output.clone_from(&text);
                self.mcp_results.insert(
                    call["id"].as_str().unwrap_or_default().to_string(),
                    (text, is_error),
                );
            }
        }
    }

    fn tool_results(&mut self, line: &mut Value) {
        for block in line
            .pointer_mut("/message/content")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if block["type"] != "tool_result" {
                continue;
            }
            let id = block["tool_use_id"].as_str().unwrap_or_default();
            if let Some((text, is_error)) = self.mcp_results.get(id) {
                block["is_error"] = json!(is_error);
                block["content"] = json!([{ "type": "text", "text": text }]);
                continue;
            }
            let text = match (self.denied.contains(id), self.disabled.contains(id)) {
                (true, _) => "Permission denied: the delegate rejected this tool call",
                (_, true) => "Tool not available: it is disabled in the settings",
                _ => continue,
            };
            block["is_error"] = json!(true);
            block["content"] = json!([{ "type": "text", "text": text }]);
        }
    }
}

/// `text` escaped as the inside of a JSON string (it replaces a placeholder in a JSON line).
fn json_text(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// Starts a child that would outlive a careless parent, records it, and never returns.
fn hang() -> ! {
    let mut child = Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap_or_else(|_| fail("cannot start sleep"));
    if let Ok(path) = std::env::var("AMP_STAND_IN_PIDFILE") {
        let _ = std::fs::write(path, child.id().to_string());
    }
    // Waits as long as the child lives (the run's cancel ends both), then keeps hanging.
    let _ = child.wait();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// One user message from stdin: `None` at the end of input.
fn read_turn(stdin: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(&line).unwrap_or_else(|_| fail("stdin: not a JSON line"));
        let text = value
            .pointer("/message/content/0/text")
            .and_then(Value::as_str);
        match (
            value["type"].as_str(),
            value.pointer("/message/role").and_then(Value::as_str),
            text,
        ) {
            (Some("user"), Some("user"), Some(text)) => return Some(text.to_string()),
            _ => fail("stdin: expected a user message with text content blocks"),
        }
    }
}

fn main() {
    let args = parse_args();
    let script = std::env::var("AMP_STAND_IN_SCRIPT")
        .unwrap_or_else(|_| fail("AMP_STAND_IN_SCRIPT is not set"));
    let turns = turns(&script);
    if let Some(thread) = &args.thread {
        let known = turns
            .iter()
            .flatten()
            .any(|l| l["session_id"].as_str() == Some(thread.as_str()));
        if !known {
            fail("thread not found");
        }
    }
    let settings = match &args.settings {
        Some(path) => {
            serde_json::from_slice(&std::fs::read(path).unwrap_or_default()).unwrap_or(Value::Null)
        }
        None => Value::Null,
    };
    let hang = std::env::var("AMP_STAND_IN_HANG").is_ok_and(|v| v == "1");
    let two_way = args.two_way;
    let mut player = Player {
        args,
        settings,
        denied: HashSet::new(),
        disabled: HashSet::new(),
        denials: Vec::new(),
        hang,
        mcp_results: Default::default(),
        tool_output: String::new(),
    };
    if !two_way {
        if player.args.prompt.is_none() {
            fail("no prompt");
        }
        turns.iter().for_each(|turn| player.play(turn));
        return;
    }
    let mut stdin = std::io::stdin().lock();
    for turn in &turns {
        if read_turn(&mut stdin).is_none() {
            return;
        }
        player.play(turn);
    }
}
