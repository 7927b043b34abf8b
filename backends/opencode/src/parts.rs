//! OpenCode message parts, the same in both interfaces: `run` prints each part once, whole;
//! `serve` sends it again on every change (`message.part.updated`) plus text deltas
//! (`message.part.delta`). Text and reasoning parts become message and reasoning items; tool
//! parts become a `tool_call` and a `tool_result` with the tools facet (exit code, output and
//! diff bytes); `step-finish` adds to the usage and becomes a status item.

use std::collections::HashMap;

use agent_api::kit::transcript::{NewItem, Transcript};
use agent_api::run::Usage;
use agent_api::run::{FacetKind, ToolBytes};
use agent_api::universal::{ContentPart, FileAction, ItemRole, ReasoningVisibility, ToolMeta};
use serde::Deserialize;
use serde_json::Value;

/// One part, as both interfaces carry it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Part {
    /// The part's id (`prt_…`).
    pub id: String,
    /// `text`, `reasoning`, `tool`, `step-start`, `step-finish`, `patch`, ….
    #[serde(rename = "type")]
    pub kind: String,
    /// The message it belongs to.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// Text and reasoning: the text so far.
    pub text: String,
    /// Text and reasoning: `end` is set once the part is complete.
    pub time: Option<PartTime>,
    /// Tool parts: the tool's name.
    pub tool: String,
    /// Tool parts: the provider's call id.
    #[serde(rename = "callID")]
    pub call_id: String,
    /// Tool parts: where the call is.
    pub state: Option<ToolState>,
    /// `step-finish`: why the step ended.
    pub reason: Option<String>,
    /// `step-finish`: token counts.
    pub tokens: Option<Tokens>,
    /// `step-finish`: cost in US dollars.
    pub cost: Option<f64>,
}

/// When a text or reasoning part started and ended.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PartTime {
    /// Set once the part is complete.
    pub end: Option<u64>,
}

/// A tool part's state: `pending`, `running`, `completed` or `error`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ToolState {
    /// The state's name.
    pub status: String,
    /// The tool's input.
    pub input: Value,
    /// `completed`: what the tool returned.
    pub output: String,
    /// `error`: why it failed (also a rejected permission).
    pub error: String,
    /// Tool-specific details (`exit`, `diff`, `filepath`, `exists`, …).
    pub metadata: Value,
}

/// `step-finish` token counts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Tokens {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
    /// Cache reads and writes.
    pub cache: CacheTokens,
}

/// Cached input tokens.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CacheTokens {
    /// Tokens read from the cache.
    pub read: u64,
}

#[derive(Debug)]
struct OpenTool {
    result_item: String,
}

/// The parts of one run: which items are open, and the usage so far.
#[derive(Debug, Default)]
pub struct Parts {
    /// Open text and reasoning items, by part id.
    open: HashMap<String, String>,
    tools: HashMap<String, OpenTool>,
    /// The steps' usage summed ([`Usage::add`]): a step without a usable cost makes the run's
    /// cost unknown from then on, never a sum that counted the step as free.
    usage: Option<Usage>,
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

impl Parts {
    /// A part was printed (`run`) or changed (`serve`). `whole` says the interface only shows
    /// finished parts, so a text part without an end time is complete all the same.
    pub fn part(&mut self, t: &mut Transcript, part: Part, whole: bool) {
        match part.kind.as_str() {
            "text" | "reasoning" => self.text(t, part, whole),
            "tool" => self.tool(t, part),
            "step-finish" => self.step_finish(t, &part),
            _ => {}
        }
    }

    fn new_text_item(kind: &str) -> NewItem {
        if kind == "reasoning" {
            NewItem::reasoning(ReasoningVisibility::Public)
        } else {
            NewItem::message(ItemRole::Assistant)
        }
    }

    fn text(&mut self, t: &mut Transcript, part: Part, whole: bool) {
        let done = whole || part.time.as_ref().is_some_and(|time| time.end.is_some());
        let item = match self.open.remove(&part.id) {
            Some(item) => item,
            None => t.start_item(Self::new_text_item(&part.kind).native(&part.id)),
        };
        if !done {
            // Its text arrives as deltas; the update that sets its end time completes it.
            self.open.insert(part.id, item);
            return;
        }
        let content = if part.kind == "reasoning" {
            ContentPart::Reasoning {
                text: part.text,
                visibility: ReasoningVisibility::Public,
            }
        } else {
            ContentPart::Text { text: part.text }
        };
        t.complete_item_with(&item, vec![content]);
    }

    /// A streamed fragment of a text or reasoning part (`serve` only).
    pub fn delta(&mut self, t: &mut Transcript, part_id: &str, delta: &str) {
        let item = t.delta_native(part_id, delta, || NewItem::message(ItemRole::Assistant));
        self.open.entry(part_id.to_string()).or_insert(item);
    }

    fn tool(&mut self, t: &mut Transcript, part: Part) {
        let Some(state) = part.state.clone() else {
            return;
        };
        if state.status == "pending" {
            // The input is still being written; `running` brings it whole.
            return;
        }
        let meta = tool_meta(&part.tool, &state);
        if !self.tools.contains_key(&part.id) {
            let arguments = state.input.to_string();
            let mut call = NewItem::tool_call(&part.tool, arguments, &part.call_id)
                .native(&part.id)
                .tool(meta.clone());
            for file in files_of(&part.tool, &state) {
                call = call.with_part(file);
            }
            let call_item = t.start_item(call);
            t.complete_item(&call_item);
            let result_item = t.start_item(
                NewItem::tool_result(&part.call_id)
                    .native(format!("{}/result", part.id))
                    .parent(Some(call_item))
                    .tool(meta.clone()),
            );
            self.tools.insert(part.id.clone(), OpenTool { result_item });
        }
        let failed = match state.status.as_str() {
            "completed" => false,
            "error" => true,
            _ => return,
        };
        let Some(open) = self.tools.remove(&part.id) else {
            return;
        };
        let output = if failed {
            state.error.clone()
        } else {
            state.output.clone()
        };
        let mut content = vec![ContentPart::ToolResult {
            call_id: part.call_id.clone(),
            output,
        }];
        content.extend(files_of(&part.tool, &state));
        t.update_item(&open.result_item, |item| item.tool = Some(meta));
        if failed {
            t.update_item(&open.result_item, |item| item.content = content);
            t.fail_item(&open.result_item);
        } else {
            t.complete_item_with(&open.result_item, content);
        }
    }

    fn step_finish(&mut self, t: &mut Transcript, part: &Part) {
        let Some(tokens) = &part.tokens else { return };
        let cost = part.cost.and_then(Usage::usable_cost);
        let mut step = Usage::tokens(tokens.input, tokens.output);
        step.reasoning_tokens = Some(tokens.reasoning);
        step.cached_input_tokens = Some(tokens.cache.read);
        step.cost_usd = cost;
        Usage::accumulate(&mut self.usage, step);
        let reason = part.reason.as_deref().unwrap_or("unknown");
        let cost = cost.map_or_else(|| "unknown".to_string(), agent_api::display::usd);
        let detail = format!(
            "{reason}; {} tokens in, {} out; cost {cost}",
            tokens.input, tokens.output
        );
        t.status("step_finished", Some(detail));
    }

    /// The usage summed over every finished step.
    pub fn usage(&self) -> Option<Usage> {
        self.usage.clone()
    }

    /// Fails every tool still running (an aborted turn never completes them).
    pub fn fail_open_tools(&mut self, t: &mut Transcript) {
        let mut open: Vec<_> = self
            .tools
            .drain()
            .map(|(_, tool)| tool.result_item)
            .collect();
        open.sort();
        for item in open {
            t.fail_item(&item);
        }
    }
}

fn tool_meta(tool: &str, state: &ToolState) -> ToolMeta {
    let kind = crate::tools::TOOLS.facet(tool);
    let mut bytes = ToolBytes::default();
    match kind {
        FacetKind::CommandExecution => bytes.stdout = state.output.len() as u64,
        _ => bytes.result = state.output.len() as u64,
    }
    bytes.diff = files_of(tool, state)
        .iter()
        .map(|f| match f {
            ContentPart::FileRef { diff: Some(d), .. } => d.len() as u64,
            _ => 0,
        })
        .sum();
    let meta = ToolMeta {
        tool_name: Some(tool.to_string()),
        exit_code: state.metadata.get("exit").and_then(Value::as_i64),
        bytes,
        ..ToolMeta::of(kind)
    };
    if meta.is_command() {
        meta.with_shell_fields(&state.input)
    } else {
        meta
    }
}

/// The file a file tool touched, with its diff: the one OpenCode reports for an edit, or for a
/// file the write tool created, the whole content as added lines.
fn files_of(tool: &str, state: &ToolState) -> Vec<ContentPart> {
    if crate::tools::TOOLS.facet(tool) != FacetKind::FileChange {
        return Vec::new();
    }
    let Some(path) =
        str_of(&state.input, "filePath").or_else(|| str_of(&state.metadata, "filepath"))
    else {
        return Vec::new();
    };
    let reported = str_of(&state.metadata, "diff").map(str::to_string);
    let created =
        tool == "write" && state.metadata.get("exists").and_then(Value::as_bool) == Some(false);
    let diff = reported.or_else(|| {
        let content =
            str_of(&state.input, "content").filter(|_| created && state.status == "completed")?;
        Some(new_file_diff(path, content))
    });
    let action = if created {
        FileAction::Write
    } else {
        FileAction::Patch
    };
    vec![ContentPart::FileRef {
        path: path.to_string(),
        action,
        diff,
    }]
}

/// A unified diff creating `path` with `content`.
fn new_file_diff(path: &str, content: &str) -> String {
    let lines: Vec<&str> = content.lines().collect();
    let mut diff = format!("--- /dev/null\n+++ {path}\n@@ -0,0 +1,{} @@\n", lines.len());
    for line in lines {
        diff.push('+');
        diff.push_str(line);
        diff.push('\n');
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(cost: Option<f64>) -> Part {
        Part {
            kind: "step-finish".into(),
            tokens: Some(Tokens {
                input: 10,
                output: 5,
                ..Tokens::default()
            }),
            cost,
            ..Part::default()
        }
    }

    #[test]
    fn costs_add_up_and_a_step_without_a_usable_cost_makes_the_runs_cost_unknown() {
        let mut t = Transcript::new("sess_1".into(), false);
        let mut parts = Parts::default();
        parts.part(&mut t, step(Some(0.1)), true);
        parts.part(&mut t, step(Some(0.2)), true);
        assert!((parts.usage().unwrap().cost_usd.unwrap() - 0.3).abs() < 1e-9);
        for unusable in [None, Some(-1.0), Some(f64::NAN), Some(f64::INFINITY)] {
            let mut parts = Parts::default();
            parts.part(&mut t, step(Some(0.1)), true);
            parts.part(&mut t, step(unusable), true);
            parts.part(&mut t, step(Some(0.1)), true);
            let usage = parts.usage().unwrap();
            assert_eq!(
                usage.cost_usd, None,
                "{unusable:?}: unknown, never counted as zero"
            );
            assert_eq!(usage.input_tokens, Some(30));
        }
        let details: Vec<String> = t
            .drain()
            .filter_map(|e| e.completed_item().map(|i| i.content.clone()))
            .flatten()
            .filter_map(|p| match p {
                ContentPart::Status { detail, .. } => detail,
                _ => None,
            })
            .collect();
        assert!(
            details.iter().any(|d| d.ends_with("cost $0.1000")),
            "{details:?}"
        );
        assert!(
            details.iter().any(|d| d.ends_with("cost unknown")),
            "{details:?}"
        );
    }
}
