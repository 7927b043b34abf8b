//! Mapping app-server `ThreadItem`s and their delta notifications to transcript items.
//!
//! | ThreadItem | transcript |
//! |---|---|
//! | userMessage, agentMessage | message (user / assistant); agent deltas stream |
//! | reasoning | assistant message with a public summary and private raw reasoning part |
//! | commandExecution, fileChange, mcpToolCall, dynamicToolCall, collabAgentToolCall, webSearch, imageView, imageGeneration, functionCallOutput | tool_call + tool_result ([`Tools`]) |
//! | plan, hookPrompt, subAgentActivity, sleep, entered/exitedReviewMode, contextCompaction | status item |
//! | any other type | unknown item |

use std::collections::HashMap;

use agent_api::kit::transcript::{NewItem, Transcript};
use agent_api::run::FacetKind;
use agent_api::universal::{ContentPart, FileAction, ItemKind, ItemRole, ReasoningVisibility};
use serde_json::{json, Value};

use crate::schema::{item_id_and_type, shape_error, FileUpdateChange, ThreadItem, ITEM_TYPES};
use crate::tools::{ToolCall, ToolOutcome, Tools};

/// Open non-tool items, by native id, and the open tools.
#[derive(Default)]
pub struct Items {
    open: HashMap<String, String>,
    /// Open tool items.
    pub tools: Tools,
    /// Text of the last completed agent message.
    pub final_text: Option<String>,
}

/// `file_ref` parts for Codex file changes (`add`/`delete` rewrite the whole file, `update` patches it).
pub fn file_refs(changes: &[FileUpdateChange]) -> Vec<ContentPart> {
    changes
        .iter()
        .map(|c| ContentPart::FileRef {
            path: c.path.clone(),
            action: if c.kind_name() == "update" {
                FileAction::Patch
            } else {
                FileAction::Write
            },
            diff: c.diff.clone(),
        })
        .collect()
}

fn failed(status: Option<&str>) -> bool {
    matches!(
        status,
        Some("failed" | "declined" | "interrupted" | "cancelled")
    )
}

/// The tool call and, at completion, the outcome of a tool-like item; `None` for other items.
fn tool_of(item: &ThreadItem) -> Option<(String, ToolCall, ToolOutcome)> {
    let (id, (call, outcome)) = match item {
        ThreadItem::CommandExecution {
            id,
            command,
            cwd,
            status,
            aggregated_output,
            exit_code,
        } => (
            id,
            command_execution(
                command,
                cwd.as_deref(),
                status.as_deref(),
                aggregated_output.as_deref(),
                *exit_code,
            ),
        ),
        ThreadItem::FileChange {
            id,
            changes,
            status,
        } => (id, file_change(changes, status.as_deref())),
        ThreadItem::McpToolCall {
            id,
            server,
            tool,
            arguments,
            status,
            result,
            error,
        } => (
            id,
            mcp_tool_call(
                server,
                tool,
                arguments,
                status.as_deref(),
                result.as_ref(),
                error.as_ref(),
            ),
        ),
        ThreadItem::DynamicToolCall {
            id,
            tool,
            arguments,
            status,
            content_items,
            success,
        } => (
            id,
            dynamic_tool_call(
                tool,
                arguments,
                status.as_deref(),
                content_items.as_ref(),
                *success,
            ),
        ),
        ThreadItem::CollabAgentToolCall {
            id,
            tool,
            prompt,
            status,
        } => (
            id,
            (
                ToolCall::new(
                    "collab_agent_tool_call",
                    tool.clone(),
                    json!({"prompt": prompt}).to_string(),
                ),
                ToolOutcome {
                    failed: failed(status.as_deref()),
                    ..ToolOutcome::default()
                },
            ),
        ),
        ThreadItem::WebSearch {
            id,
            query,
            action,
            results,
        } => (
            id,
            (
                ToolCall::new(
                    FacetKind::WebSearch.as_str(),
                    "web_search",
                    json!({"query": query, "action": action}).to_string(),
                ),
                ToolOutcome {
                    output: results.as_ref().map(Value::to_string).unwrap_or_default(),
                    ..ToolOutcome::default()
                },
            ),
        ),
        ThreadItem::ImageView { id, path } => (id, image_view(path)),
        ThreadItem::ImageGeneration {
            id,
            status,
            saved_path,
            revised_prompt,
        } => (
            id,
            image_generation(status.as_str(), saved_path.as_ref(), revised_prompt),
        ),
        ThreadItem::FunctionCallOutput { id, name, output } => (
            id,
            (
                ToolCall::new("function_call", name.clone(), "{}"),
                ToolOutcome {
                    output: output
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| output.to_string()),
                    ..ToolOutcome::default()
                },
            ),
        ),
        _ => return None,
    };
    Some((id.clone(), call, outcome))
}

fn command_execution(
    command: &str,
    cwd: Option<&str>,
    status: Option<&str>,
    output: Option<&str>,
    exit_code: Option<i64>,
) -> (ToolCall, ToolOutcome) {
    let call = ToolCall::new(
        FacetKind::CommandExecution.as_str(),
        "exec_command",
        json!({"command": command, "cwd": cwd}).to_string(),
    );
    let outcome = ToolOutcome {
        output: output.unwrap_or_default().to_string(),
        exit_code,
        failed: failed(status),
        files: Vec::new(),
    };
    (call, outcome)
}

fn file_change(changes: &[FileUpdateChange], status: Option<&str>) -> (ToolCall, ToolOutcome) {
    let paths: Vec<Value> = changes
        .iter()
        .map(|c| json!({"path": c.path, "kind": c.kind_name()}))
        .collect();
    let call = ToolCall {
        kind: FacetKind::FileChange.as_str(),
        name: "apply_patch".into(),
        arguments: json!({"changes": paths}).to_string(),
        files: file_refs(changes),
        ..ToolCall::default()
    };
    (
        call,
        ToolOutcome {
            failed: failed(status),
            files: file_refs(changes),
            ..ToolOutcome::default()
        },
    )
}

fn mcp_tool_call(
    server: &str,
    tool: &str,
    arguments: &Value,
    status: Option<&str>,
    result: Option<&Value>,
    error: Option<&Value>,
) -> (ToolCall, ToolOutcome) {
    let output = match (result, error) {
        (_, Some(e)) => e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        (Some(r), None) => mcp_text(r),
        _ => String::new(),
    };
    let call = ToolCall {
        kind: FacetKind::McpToolCall.as_str(),
        name: format!("{server}.{tool}"),
        arguments: arguments.to_string(),
        tool_name: Some(tool.to_string()),
        ..ToolCall::default()
    };
    (
        call,
        ToolOutcome {
            output,
            failed: failed(status) || error.is_some(),
            ..ToolOutcome::default()
        },
    )
}

fn dynamic_tool_call(
    tool: &str,
    arguments: &Value,
    status: Option<&str>,
    content_items: Option<&Value>,
    success: Option<bool>,
) -> (ToolCall, ToolOutcome) {
    let call = ToolCall::new("dynamic_tool_call", tool.to_string(), arguments.to_string());
    let outcome = ToolOutcome {
        output: content_items.map(mcp_text).unwrap_or_default(),
        failed: failed(status) || success == Some(false),
        ..ToolOutcome::default()
    };
    (call, outcome)
}

fn image_view(path: &str) -> (ToolCall, ToolOutcome) {
    let call = ToolCall::new(
        "image_view",
        "view_image",
        json!({"path": path}).to_string(),
    );
    let outcome = ToolOutcome {
        files: vec![ContentPart::FileRef {
            path: path.to_string(),
            action: FileAction::Read,
            diff: None,
        }],
        ..ToolOutcome::default()
    };
    (call, outcome)
}

fn image_generation(
    status: Option<&str>,
    saved_path: Option<&String>,
    revised_prompt: &impl serde::Serialize,
) -> (ToolCall, ToolOutcome) {
    let call = ToolCall::new(
        "image_generation",
        "image_generation",
        json!({"prompt": revised_prompt}).to_string(),
    );
    let outcome = ToolOutcome {
        output: saved_path.cloned().unwrap_or_default(),
        failed: failed(status),
        files: saved_path
            .iter()
            .map(|p| ContentPart::Image {
                path: p.to_string(),
                mime: None,
            })
            .collect(),
        ..ToolOutcome::default()
    };
    (call, outcome)
}

/// The text parts of an MCP result or dynamic tool output (`[{type: text, text}]`).
fn mcp_text(value: &Value) -> String {
    let items = value.get("content").unwrap_or(value);
    match items.as_array() {
        Some(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        None => value.to_string(),
    }
}

/// The status label and detail of a status-like item.
fn status_of(item: &ThreadItem) -> Option<(String, String, Option<String>)> {
    let short = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .or_else(|| v.get("type").and_then(Value::as_str).map(str::to_string))
    };
    Some(match item {
        ThreadItem::Plan { id, text } => (id.clone(), "plan".into(), Some(text.clone())),
        ThreadItem::HookPrompt { id, fragments } => {
            let text: Vec<&str> = fragments
                .iter()
                .filter_map(|f| f.get("text").and_then(Value::as_str))
                .collect();
            (id.clone(), "hook_prompt".into(), Some(text.join("\n")))
        }
        ThreadItem::SubAgentActivity {
            id,
            kind,
            agent_path,
        } => (
            id.clone(),
            "sub_agent_activity".into(),
            short(kind).or_else(|| short(agent_path)),
        ),
        ThreadItem::Sleep { id, duration_ms } => (
            id.clone(),
            "sleep".into(),
            duration_ms.map(|d| format!("{d} ms")),
        ),
        ThreadItem::EnteredReviewMode { id, review } => {
            (id.clone(), "review_started".into(), short(review))
        }
        ThreadItem::ExitedReviewMode { id, review } => {
            (id.clone(), "review_finished".into(), short(review))
        }
        ThreadItem::ContextCompaction { id } => (id.clone(), "context_compacted".into(), None),
        _ => return None,
    })
}

fn reasoning_parts(summary: &[String], content: &[String]) -> Vec<ContentPart> {
    let mut parts = vec![ContentPart::Reasoning {
        text: summary.join("\n\n"),
        visibility: ReasoningVisibility::Public,
    }];
    if !content.is_empty() {
        parts.push(ContentPart::Reasoning {
            text: content.join("\n\n"),
            visibility: ReasoningVisibility::Private,
        });
    }
    parts
}

fn user_parts(content: &[Value]) -> Vec<ContentPart> {
    let mut text = String::new();
    let mut parts = Vec::new();
    for input in content {
        match input.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(input.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("localImage") => parts.push(ContentPart::Image {
                path: input
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                mime: None,
            }),
            Some("image") => parts.push(ContentPart::Image {
                path: input
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                mime: None,
            }),
            _ => {}
        }
    }
    let mut all = vec![ContentPart::Text { text }];
    all.extend(parts);
    all
}

impl Items {
    fn parse(item: &Value) -> Result<Option<ThreadItem>, String> {
        let (_, kind) = item_id_and_type(item);
        match serde_json::from_value::<ThreadItem>(item.clone()) {
            Ok(parsed) => Ok(Some(parsed)),
            // A type the schema defines must parse; a type it does not is an unknown item.
            Err(e) if ITEM_TYPES.contains(&kind) => Err(shape_error(&format!("a {kind} item"), &e)),
            Err(_) => Ok(None),
        }
    }

    /// An item of a type this backend does not know, opened (once) as an unknown item whose
    /// status names its type; its native id and that content.
    fn open_unknown<'i>(
        &mut self,
        t: &mut Transcript,
        item: &'i Value,
    ) -> (&'i str, Vec<ContentPart>) {
        let (id, kind) = item_id_and_type(item);
        let id = id.unwrap_or("unknown");
        let content = vec![ContentPart::Status {
            label: "unknown_item".into(),
            detail: Some(kind.to_string()),
        }];
        self.open_item(
            t,
            id,
            NewItem::other(ItemKind::Unknown, None, content.clone()),
        );
        (id, content)
    }

    fn open_item(&mut self, t: &mut Transcript, native: &str, new: NewItem) {
        if !self.open.contains_key(native) {
            let id = t.start_item(new.native(native));
            self.open.insert(native.to_string(), id);
        }
    }

    /// `item/started`.
    pub fn started(
        &mut self,
        t: &mut Transcript,
        item: &Value,
        turn_id: Option<&str>,
    ) -> Result<(), String> {
        let Some(parsed) = Self::parse(item)? else {
            self.open_unknown(t, item);
            return Ok(());
        };
        if let Some((id, call, _)) = tool_of(&parsed) {
            self.tools.start(t, &id, call, turn_id);
            return Ok(());
        }
        if let Some((id, label, _)) = status_of(&parsed) {
            self.open_item(t, &id, NewItem::status(label, None));
            return Ok(());
        }
        match &parsed {
            ThreadItem::UserMessage { id, .. } => {
                self.open_item(t, id, NewItem::message(ItemRole::User))
            }
            ThreadItem::AgentMessage { id, .. } => {
                self.open_item(t, id, NewItem::message(ItemRole::Assistant))
            }
            ThreadItem::Reasoning { id, .. } => {
                self.open_item(t, id, NewItem::reasoning(ReasoningVisibility::Public))
            }
            _ => {}
        }
        Ok(())
    }

    /// `item/completed`.
    pub fn completed(
        &mut self,
        t: &mut Transcript,
        item: &Value,
        turn_id: Option<&str>,
    ) -> Result<(), String> {
        let Some(parsed) = Self::parse(item)? else {
            let (id, content) = self.open_unknown(t, item);
            if let Some(daemon) = self.open.remove(id) {
                t.complete_item_with(&daemon, content);
            }
            return Ok(());
        };
        if let Some((id, call, outcome)) = tool_of(&parsed) {
            self.tools.finish(t, &id, call, outcome, turn_id);
            return Ok(());
        }
        let (native, new, content) = if let Some((id, label, detail)) = status_of(&parsed) {
            (
                id,
                NewItem::status(label.clone(), None),
                vec![ContentPart::Status { label, detail }],
            )
        } else {
            match parsed {
                ThreadItem::UserMessage { id, content } => {
                    (id, NewItem::message(ItemRole::User), user_parts(&content))
                }
                ThreadItem::AgentMessage { id, text } => {
                    self.final_text = Some(text.clone());
                    (
                        id,
                        NewItem::message(ItemRole::Assistant),
                        vec![ContentPart::Text { text }],
                    )
                }
                ThreadItem::Reasoning {
                    id,
                    summary,
                    content,
                } => (
                    id,
                    NewItem::reasoning(ReasoningVisibility::Public),
                    reasoning_parts(&summary, &content),
                ),
                _ => return Ok(()),
            }
        };
        self.open_item(t, &native, new);
        if let Some(daemon) = self.open.remove(&native) {
            t.complete_item_with(&daemon, content);
        }
        Ok(())
    }

    /// A text delta for the item `native`; opens `stub` first when the item is not open (the
    /// ordering rule).
    pub fn delta(
        &mut self,
        t: &mut Transcript,
        native: &str,
        text: &str,
        stub: impl FnOnce() -> NewItem,
    ) {
        if text.is_empty() {
            return;
        }
        match self.open.get(native) {
            Some(id) => t.delta(id, text),
            None => {
                let id = t.delta_native(native, text, stub);
                self.open.insert(native.to_string(), id);
            }
        }
    }

    /// Fails every open item: the turn ended without completing them (interrupt, failure).
    pub fn fail_all(&mut self, t: &mut Transcript) {
        self.tools.fail_all(t);
        let mut open: Vec<(String, String)> = self.open.drain().collect();
        open.sort();
        for (_, id) in open {
            t.fail_item(&id);
        }
    }
}

impl std::fmt::Debug for Items {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Items").finish_non_exhaustive()
    }
}
