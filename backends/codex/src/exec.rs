//! The `codex exec --json` converter: one-way JSONL of thread events (`thread.started`,
//! `turn.started`, `item.started|updated|completed`, `turn.completed`, `turn.failed`, `error`).
//!
//! Exec prints whole items only, so messages and reasoning get the single synthetic delta of the
//! delta policy; tool items become a `tool_call` and a `tool_result` ([`Tools`]); `todo_list`
//! items become status items; `error` items and events become non-terminal error events.
//! `turn.completed` usage is the thread's total (see NOTES.md), reported as is.

use agent_api::kit::transcript::NewItem;
use agent_api::kit::{parse_typed, parse_value, ExitInfo, Unparsed};
use agent_api::kit::{Ctx, Protocol};
use agent_api::run::FacetKind;
use agent_api::universal::{ContentPart, FileAction, ItemKind, ItemRole, ReasoningVisibility};
use agent_api::{AgentError, RunCompletion};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::errors::{self, ErrorClass};
use crate::exec_item::{text, ExecItem};
use crate::schema::shape_error;
use crate::tools::{ToolCall, ToolOutcome, Tools};

/// Exec item types of codex-cli 0.169.0.
pub const EXEC_ITEM_TYPES: &[&str] = &[
    "agent_message",
    "reasoning",
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "collab_tool_call",
    "web_search",
    "todo_list",
    "error",
];

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum ExecEvent {
    #[serde(rename = "thread.started")]
    ThreadStarted { thread_id: String },
    #[serde(rename = "turn.started")]
    TurnStarted {},
    #[serde(rename = "turn.completed")]
    TurnCompleted {
        #[serde(default)]
        usage: Option<crate::schema::TokenUsageBreakdown>,
    },
    #[serde(rename = "turn.failed")]
    TurnFailed {
        #[serde(default)]
        error: Option<Value>,
    },
    #[serde(rename = "item.started")]
    ItemStarted { item: ExecItem },
    #[serde(rename = "item.updated")]
    ItemUpdated { item: ExecItem },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: ExecItem },
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        message: String,
    },
}

/// An exec line as one flat struct: the typed entry reads it without serde's buffering of an
/// internally tagged enum, then picks the event by `type`. A line it cannot place goes through
/// the `Value` path, which reports it exactly.
#[derive(Debug, Deserialize)]
struct ExecLine {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    usage: Option<crate::schema::TokenUsageBreakdown>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    item: Option<ExecItem>,
    #[serde(default)]
    message: Option<String>,
}

impl ExecLine {
    fn into_event(self) -> Option<ExecEvent> {
        Some(match self.kind.as_str() {
            "thread.started" => ExecEvent::ThreadStarted {
                thread_id: self.thread_id?,
            },
            "turn.started" => ExecEvent::TurnStarted {},
            "turn.completed" => ExecEvent::TurnCompleted { usage: self.usage },
            "turn.failed" => ExecEvent::TurnFailed { error: self.error },
            "item.started" => ExecEvent::ItemStarted { item: self.item? },
            "item.updated" => ExecEvent::ItemUpdated { item: self.item? },
            "item.completed" => ExecEvent::ItemCompleted { item: self.item? },
            "error" => ExecEvent::Error {
                message: self.message.unwrap_or_default(),
            },
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Started,
    Updated,
    Completed,
}

/// The exec converter (the same for live runs and replay). A live run's only input is its
/// prompt, written to stdin at the start (`codex exec -`), never on the command line.
#[derive(Default)]
pub struct Exec {
    prompt: Option<String>,
    thread_id: Option<String>,
    tools: Tools,
    open: std::collections::HashMap<String, String>,
    completed: Option<Option<crate::schema::TokenUsageBreakdown>>,
    failed: Option<(ErrorClass, String)>,
    last_error: Option<String>,
    final_text: Option<String>,
}

fn s<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

fn tool_of(kind: &str, item: &ExecItem) -> Option<(ToolCall, ToolOutcome)> {
    let status = text(&item.status);
    let failed = matches!(status, "failed" | "declined");
    Some(match kind {
        "command_execution" => command_tool(item, failed),
        "file_change" => file_change_tool(item, failed),
        "mcp_tool_call" => mcp_tool(item, failed),
        "collab_tool_call" => (
            ToolCall::new(
                "collab_agent_tool_call",
                text(&item.tool).to_string(),
                json!({"prompt": item.prompt}).to_string(),
            ),
            ToolOutcome {
                failed,
                ..ToolOutcome::default()
            },
        ),
        "web_search" => (
            ToolCall::new(
                FacetKind::WebSearch.as_str(),
                "web_search",
                json!({"query": text(&item.query), "action": item.action}).to_string(),
            ),
            ToolOutcome::default(),
        ),
        _ => return None,
    })
}

/// A shell command: its command line, and its output and exit code.
fn command_tool(item: &ExecItem, failed: bool) -> (ToolCall, ToolOutcome) {
    (
        ToolCall::new(
            FacetKind::CommandExecution.as_str(),
            "exec_command",
            json!({"command": text(&item.command)}).to_string(),
        ),
        ToolOutcome {
            output: text(&item.aggregated_output).to_string(),
            exit_code: item.exit_code.as_ref().and_then(Value::as_i64),
            failed,
            files: Vec::new(),
        },
    )
}

/// A patch: the files it changes (exec mode reports no diff).
fn file_change_tool(item: &ExecItem, failed: bool) -> (ToolCall, ToolOutcome) {
    let changes = item
        .changes
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let files: Vec<ContentPart> = changes
        .iter()
        .map(|c| ContentPart::FileRef {
            path: s(c, "path").to_string(),
            action: if s(c, "kind") == "update" {
                FileAction::Patch
            } else {
                FileAction::Write
            },
            diff: None,
        })
        .collect();
    (
        ToolCall {
            kind: FacetKind::FileChange.as_str(),
            name: "apply_patch".into(),
            arguments: json!({"changes": changes}).to_string(),
            files: files.clone(),
            ..ToolCall::default()
        },
        ToolOutcome {
            failed,
            files,
            ..ToolOutcome::default()
        },
    )
}

/// An MCP tool call: its server and tool, and its result's text (or its error).
fn mcp_tool(item: &ExecItem, failed: bool) -> (ToolCall, ToolOutcome) {
    let error = item
        .error
        .as_ref()
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str);
    let output = match (error, item.result.as_ref()) {
        (Some(e), _) => e.to_string(),
        (None, Some(r)) if !r.is_null() => r
            .get("content")
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_else(|| r.to_string()),
        _ => String::new(),
    };
    (
        ToolCall {
            kind: FacetKind::McpToolCall.as_str(),
            name: format!("{}.{}", text(&item.server), text(&item.tool)),
            arguments: item
                .arguments
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default(),
            tool_name: Some(text(&item.tool).to_string()),
            files: Vec::new(),
        },
        ToolOutcome {
            output,
            failed: failed || error.is_some(),
            ..ToolOutcome::default()
        },
    )
}

impl Exec {
    fn item(&mut self, phase: Phase, item: ExecItem, ctx: &mut Ctx<'_>) {
        let t = &mut *ctx.transcript;
        let id = text(&item.id).to_string();
        let kind = text(&item.kind).to_string();
        if let Some((call, outcome)) = tool_of(&kind, &item) {
            match phase {
                Phase::Completed => self.tools.finish(t, &id, call, outcome, None),
                _ => self.tools.start(t, &id, call, None),
            }
            return;
        }
        match kind.as_str() {
            "agent_message" | "reasoning" if phase == Phase::Completed => {
                let text = text(&item.text).to_string();
                let (new, content) = if kind == "reasoning" {
                    (
                        NewItem::reasoning(ReasoningVisibility::Public),
                        vec![ContentPart::Reasoning {
                            text,
                            visibility: ReasoningVisibility::Public,
                        }],
                    )
                } else {
                    self.final_text = Some(text.clone());
                    (
                        NewItem::message(ItemRole::Assistant),
                        vec![ContentPart::Text { text }],
                    )
                };
                let daemon = self
                    .open
                    .remove(&id)
                    .unwrap_or_else(|| t.start_item(new.native(&id)));
                // No native deltas: the transcript adds the single synthetic delta.
                t.complete_item_with(&daemon, content);
            }
            "agent_message" | "reasoning" => {
                if let std::collections::hash_map::Entry::Vacant(slot) = self.open.entry(id.clone())
                {
                    let new = if kind == "reasoning" {
                        NewItem::reasoning(ReasoningVisibility::Public)
                    } else {
                        NewItem::message(ItemRole::Assistant)
                    };
                    slot.insert(t.start_item(new.native(&id)));
                }
            }
            "todo_list" => {
                let items = item
                    .items
                    .as_ref()
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let steps: Vec<String> = items
                    .iter()
                    .map(|i| {
                        format!(
                            "[{}] {}",
                            if i.get("completed").and_then(Value::as_bool) == Some(true) {
                                "completed"
                            } else {
                                "pending"
                            },
                            s(i, "text")
                        )
                    })
                    .collect();
                t.status("todo_list", Some(steps.join("\n")));
            }
            "error" => {
                let message = text(&item.message);
                t.error(
                    errors::explanation(message),
                    Some(errors::classify_message(message).code().to_string()),
                    Some(json!({"item_id": id})),
                );
            }
            _ if phase == Phase::Completed || !self.open.contains_key(&id) => {
                let content = vec![ContentPart::Status {
                    label: "unknown_item".into(),
                    detail: Some(agent_api::kit::bounds::utf8_prefix(&kind, 64).to_string()),
                }];
                if phase == Phase::Completed {
                    let daemon = self.open.remove(&id).unwrap_or_else(|| {
                        t.start_item(
                            NewItem::other(ItemKind::Unknown, None, content.clone()).native(&id),
                        )
                    });
                    t.complete_item_with(&daemon, content);
                } else {
                    let daemon =
                        t.start_item(NewItem::other(ItemKind::Unknown, None, content).native(&id));
                    self.open.insert(id, daemon);
                }
            }
            _ => {}
        }
    }

    fn fail_open(&mut self, ctx: &mut Ctx<'_>) {
        self.tools.fail_all(ctx.transcript);
        let mut open: Vec<String> = self.open.drain().map(|(_, v)| v).collect();
        open.sort();
        for id in open {
            ctx.transcript.fail_item(&id);
        }
    }

    /// One typed exec event (parsed straight from its line, or through the `Value` path).
    fn on_event(&mut self, event: ExecEvent, ctx: &mut Ctx<'_>) {
        let t = &mut *ctx.transcript;
        match event {
            ExecEvent::ThreadStarted { thread_id } => {
                t.set_native_session_id(thread_id.clone());
                t.session_started(Some(json!({"thread_id": thread_id})));
                self.thread_id = Some(thread_id);
            }
            ExecEvent::TurnStarted {} => {
                t.status("turn_started", None);
            }
            ExecEvent::TurnCompleted { usage } => {
                self.fail_open(ctx);
                ctx.transcript
                    .status("turn_completed", Some("completed".into()));
                self.completed = Some(usage);
            }
            ExecEvent::TurnFailed { error } => {
                self.fail_open(ctx);
                let message = error
                    .as_ref()
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "the turn failed".into());
                ctx.transcript
                    .status("turn_completed", Some("failed".into()));
                self.failed = Some((errors::classify_message(&message), message));
            }
            ExecEvent::ItemStarted { item } => self.item(Phase::Started, item, ctx),
            ExecEvent::ItemUpdated { item } => self.item(Phase::Updated, item, ctx),
            ExecEvent::ItemCompleted { item } => self.item(Phase::Completed, item, ctx),
            // Codex retries by itself and says so: a status while it does, not an error.
            ExecEvent::Error { message } if errors::reconnect_detail(&message).is_some() => {
                t.status("api_retry", errors::reconnect_detail(&message));
            }
            ExecEvent::Error { message } => {
                let class = errors::classify_message(&message);
                t.error(
                    errors::explanation(&message),
                    Some(class.code().to_string()),
                    None,
                );
                if let Some(notice) = errors::rate_limit_notice(class, &message) {
                    notice.emit(t);
                }
                self.last_error = Some(message);
            }
        }
    }
}

impl Exec {
    /// A live run that writes `prompt` to Codex's stdin and closes it.
    pub fn live(prompt: impl Into<String>) -> Self {
        Self {
            prompt: Some(prompt.into()),
            ..Self::default()
        }
    }
}

impl Protocol for Exec {
    fn name(&self) -> &'static str {
        "codex.exec"
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        ctx.send_prompt(self.prompt.take());
        Ok(())
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match parse_typed::<ExecLine>(line).and_then(ExecLine::into_event) {
            Some(event) => {
                self.on_event(event, ctx);
                Ok(())
            }
            None => self.on_message(parse_value(line)?, ctx),
        }
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let kind = message
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let event = match serde_json::from_value::<ExecEvent>(message) {
            Ok(event) => event,
            Err(e)
                if matches!(
                    kind.as_str(),
                    "thread.started"
                        | "turn.started"
                        | "turn.completed"
                        | "turn.failed"
                        | "item.started"
                        | "item.updated"
                        | "item.completed"
                        | "error"
                ) =>
            {
                return Err(Unparsed(shape_error(&format!("a {kind} event"), &e)));
            }
            Err(_) if kind.is_empty() => {
                return Err(Unparsed("an exec event without a `type`".into()))
            }
            Err(_) => {
                ctx.transcript.status(
                    "unknown_event",
                    Some(agent_api::kit::bounds::utf8_prefix(&kind, 64).to_string()),
                );
                return Ok(());
            }
        };
        self.on_event(event, ctx);
        Ok(())
    }
    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        // Close what is still open before the driver writes the terminal error: the transcript's
        // own end() would fail them after it, and a tool event must not follow the terminal error.
        self.fail_open(ctx);
        if let Some((class, message)) = self.failed.take() {
            return Err(class.into_error(&message));
        }
        let Some(usage) = self.completed.take() else {
            // A resume of an unknown thread ends before any event, saying so on stderr only.
            let stderr = exit.stderr.output();
            let missing = [stderr.head, stderr.tail]
                .into_iter()
                .flatten()
                .find_map(|text| errors::missing_thread(&text));
            return Err(missing.unwrap_or_else(|| exit.early_exit_error()));
        };
        let mut completion = RunCompletion::new();
        completion.final_text = self.final_text.take();
        completion.native_session_id = self.thread_id.clone();
        completion.usage = usage.map(|u| u.to_usage());
        // Exec reports the thread's cumulative usage, not this turn's.
        completion.data =
            Some(json!({"mode": "exec", "thread_id": self.thread_id, "usage_scope": "thread"}));
        Ok(completion)
    }
}

impl std::fmt::Debug for Exec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exec").finish_non_exhaustive()
    }
}
