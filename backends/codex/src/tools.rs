//! The tool lifecycle both converters share: a Codex tool item (command, patch, MCP call, web
//! search, …) becomes a `tool_call` item, completed as soon as the call is known, and a
//! `tool_result` item that streams output deltas and completes (or fails) with the outcome.

use std::collections::HashMap;

use agent_api::kit::transcript::{NewItem, Transcript};
use agent_api::universal::{ContentPart, ToolMeta};

/// What was called.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    /// Tools-facet kind: `command_execution`, `file_change`, `mcp_tool_call`, `web_search`, ….
    pub kind: &'static str,
    /// Tool name shown in the `tool_call` part.
    pub name: String,
    /// JSON-encoded arguments.
    pub arguments: String,
    /// Tool name for the facet, when it differs from `name` (MCP: the server's tool).
    pub tool_name: Option<String>,
    /// Files the call touches (`file_ref` parts).
    pub files: Vec<ContentPart>,
}

impl ToolCall {
    /// A call of `kind`: `name` with its JSON-encoded `arguments`, no facet name of its own and
    /// no files.
    pub fn new(kind: &'static str, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
            arguments: arguments.into(),
            ..Self::default()
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Default)]
pub struct ToolOutcome {
    /// The output (command output, MCP result text, …).
    pub output: String,
    /// A command's exit code.
    pub exit_code: Option<i64>,
    /// Whether it failed, was declined or was interrupted.
    pub failed: bool,
    /// Files it changed (`file_ref` parts, with diffs where known).
    pub files: Vec<ContentPart>,
}

struct OpenTool {
    call_id: String,
    result_item: String,
    meta: ToolMeta,
    had_delta: bool,
}

/// Tool items still open, by the provider's item id.
#[derive(Default)]
pub struct Tools {
    open: HashMap<String, OpenTool>,
}

impl Tools {
    /// Whether a tool with this native id is open.
    pub fn is_open(&self, native_id: &str) -> bool {
        self.open.contains_key(native_id)
    }

    /// Opens a tool: emits the complete `tool_call` item and opens its `tool_result`.
    pub fn start(
        &mut self,
        t: &mut Transcript,
        native_id: &str,
        call: ToolCall,
        turn_id: Option<&str>,
    ) {
        if self.open.contains_key(native_id) {
            return;
        }
        let mut meta = ToolMeta {
            kind: call.kind.to_string(),
            tool_name: call.tool_name.clone().or_else(|| Some(call.name.clone())),
            turn_id: turn_id.map(str::to_string),
            ..ToolMeta::default()
        };
        if meta.is_command() {
            if let Ok(arguments) = serde_json::from_str(&call.arguments) {
                meta = meta.with_shell_fields(&arguments);
            }
        }
        let mut new_call = NewItem::tool_call(&call.name, call.arguments, native_id)
            .native(native_id)
            .tool(meta.clone());
        for part in call.files {
            new_call = new_call.with_part(part);
        }
        let call_item = t.start_item(new_call);
        t.complete_item(&call_item);
        let result_item = t.start_item(
            NewItem::tool_result(native_id)
                .native(native_id)
                .parent(Some(call_item))
                .tool(meta.clone()),
        );
        self.open.insert(
            native_id.to_string(),
            OpenTool {
                call_id: native_id.to_string(),
                result_item,
                meta,
                had_delta: false,
            },
        );
    }

    /// Streams output of an open tool; returns false when no such tool is open.
    pub fn delta(&mut self, t: &mut Transcript, native_id: &str, text: &str) -> bool {
        let Some(open) = self.open.get_mut(native_id) else {
            return false;
        };
        open.had_delta = true;
        open.meta.bytes.stdout += text.len() as u64;
        let meta = open.meta.clone();
        let item = open.result_item.clone();
        t.update_item(&item, |i| i.tool = Some(meta));
        t.delta(&item, text);
        true
    }

    /// Replaces the file parts of an open tool's result (a patch that is still being written).
    pub fn update_files(&mut self, t: &mut Transcript, native_id: &str, files: Vec<ContentPart>) {
        if let Some(open) = self.open.get(native_id) {
            t.update_item(&open.result_item, |i| {
                i.content
                    .retain(|p| !matches!(p, ContentPart::FileRef { .. }));
                i.content.extend(files);
            });
        }
    }

    /// Ends a tool; when it was never started (only its completion was seen), starts it first.
    pub fn finish(
        &mut self,
        t: &mut Transcript,
        native_id: &str,
        call: ToolCall,
        outcome: ToolOutcome,
        turn_id: Option<&str>,
    ) {
        if !self.open.contains_key(native_id) {
            self.start(t, native_id, call, turn_id);
        }
        let Some(mut open) = self.open.remove(native_id) else {
            return;
        };
        open.meta.exit_code = outcome.exit_code.or(open.meta.exit_code);
        if open.meta.is_command() {
            open.meta.bytes.stdout = open.meta.bytes.stdout.max(outcome.output.len() as u64);
        } else {
            open.meta.bytes.result = open.meta.bytes.result.max(outcome.output.len() as u64);
        }
        open.meta.bytes.diff = outcome
            .files
            .iter()
            .map(|p| match p {
                ContentPart::FileRef { diff: Some(d), .. } => d.len() as u64,
                _ => 0,
            })
            .sum::<u64>()
            .max(open.meta.bytes.diff);
        let meta = open.meta.clone();
        // With deltas the transcript fills the output from what streamed; otherwise it is set here.
        let output = if open.had_delta {
            String::new()
        } else {
            outcome.output
        };
        let mut content = vec![ContentPart::ToolResult {
            call_id: open.call_id.clone(),
            output,
        }];
        content.extend(outcome.files);
        t.update_item(&open.result_item, |i| {
            i.tool = Some(meta);
            i.content = content.clone();
        });
        if outcome.failed {
            t.fail_item(&open.result_item);
        } else if open.had_delta {
            t.complete_item(&open.result_item);
        } else {
            t.complete_item_with(&open.result_item, content);
        }
    }

    /// Fails every open tool (an interrupted turn never completes its running items).
    pub fn fail_all(&mut self, t: &mut Transcript) {
        let mut ids: Vec<String> = self.open.keys().cloned().collect();
        ids.sort();
        for id in ids {
            if let Some(open) = self.open.remove(&id) {
                t.fail_item(&open.result_item);
            }
        }
    }
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools").finish_non_exhaustive()
    }
}
