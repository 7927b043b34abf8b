//! How an agent's tools map onto universal tool items: the tools-facet kind of each tool (from
//! the dialect's tool table), the metadata of a finished command, and the `file_ref` parts of
//! file edits.
//!
//! Everything here is a pure function of the native `tool_use` input and the `tool_result`
//! (plus the CLI's structured `tool_use_result`), so it is unit-tested without a process.

use agent_api::kit::tool_table::ToolTable;
use agent_api::run::{FacetKind, ToolBytes};
use agent_api::universal::{ContentPart, FileAction, ToolMeta};
use serde_json::{json, Value};

/// A tool call seen in an assistant message, kept until its result arrives.
#[derive(Debug, Clone)]
pub(crate) struct ToolCallInfo {
    /// The daemon id of the tool_call item (the parent of the result).
    pub item_id: String,
    /// The tool's name (`Bash`, `Write`, `mcp__server__tool`, …).
    pub name: String,
    /// The tool input, as the model sent it.
    pub input: Value,
}

/// Tool metadata for a tool_call item; a shell tool's command and directory come from `input`
/// (`Value::Null` while the input is still streaming).
pub(crate) fn call_meta(tools: &ToolTable, name: &str, input: &Value) -> ToolMeta {
    let meta = ToolMeta {
        tool_name: Some(name.to_string()),
        ..ToolMeta::of(tools.facet(name))
    };
    if meta.is_command() {
        meta.with_shell_fields(input)
    } else {
        meta
    }
}

/// A short, safe description of what a tool call wants to do, for a permission's `action`.
/// Only the identifying field is shown (a command, a path, a URL), cut to 200 bytes.
pub(crate) fn summary(name: &str, input: &Value) -> String {
    let field = [
        "command",
        "cmd",
        "file_path",
        "notebook_path",
        "path",
        "url",
        "query",
        "pattern",
        "description",
    ]
    .iter()
    .find_map(|key| input.get(*key).and_then(Value::as_str));
    match field {
        Some(text) => {
            let one_line = text.lines().next().unwrap_or_default();
            let cut = agent_api::kit::bounds::utf8_prefix(one_line, 200);
            let more = if cut.len() < text.len() { "…" } else { "" };
            format!("{name}: {cut}{more}")
        }
        None => name.to_string(),
    }
}

/// The parts and metadata of a tool_result item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultMapping {
    /// Content: the output, then file refs and image descriptions.
    pub parts: Vec<ContentPart>,
    /// Tools-facet metadata.
    pub meta: ToolMeta,
    /// Whether the tool failed (`is_error`).
    pub failed: bool,
}

/// Maps one `tool_result` block. `call` is the matching tool call, when it was seen;
/// `structured` is the message's `tool_use_result`, when it belongs to this block alone.
pub(crate) fn map_result(
    tools: &ToolTable,
    block: &Value,
    call: Option<&ToolCallInfo>,
    structured: Option<&Value>,
) -> ResultMapping {
    let call_id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let failed = block
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (output, mut extra) = output_text(block.get("content"));
    let name = call.map(|c| c.name.clone());
    let kind = name
        .as_deref()
        .map_or(FacetKind::ToolResult, |name| tools.facet(name));
    let mut meta = ToolMeta {
        tool_name: name.clone(),
        ..ToolMeta::of(kind)
    };
    if let Some(call) = call.filter(|_| kind == FacetKind::CommandExecution) {
        meta = meta.with_shell_fields(&call.input);
    }
    let object = structured.filter(|v| v.is_object());
    if kind == FacetKind::CommandExecution {
        let stdout = object.and_then(|s| s.get("stdout")).and_then(Value::as_str);
        let stderr = object.and_then(|s| s.get("stderr")).and_then(Value::as_str);
        // Without a structured result (a dialect may send none) the output text is all there is
        // to count.
        let stdout = if object.is_some() {
            len(stdout)
        } else {
            output.len() as u64
        };
        meta.bytes = ToolBytes {
            stdout,
            stderr: len(stderr),
            ..ToolBytes::default()
        };
        meta.exit_code = exit_code(&output, failed, object);
    }
    if !failed {
        let action = name.as_deref().and_then(|name| tools.file_action(name));
        if let Some(file) =
            action.and_then(|action| file_ref(action, call.map(|c| &c.input), object))
        {
            if let ContentPart::FileRef {
                diff: Some(diff), ..
            } = &file
            {
                meta.bytes.diff = diff.len() as u64;
            }
            extra.insert(0, file);
        }
    }
    let mut parts = vec![ContentPart::ToolResult { call_id, output }];
    parts.extend(extra);
    ResultMapping {
        parts,
        meta,
        failed,
    }
}

fn len(text: Option<&str>) -> u64 {
    text.map_or(0, |t| t.len() as u64)
}

/// The text of a tool_result's `content` (a string or an array of blocks), and parts for
/// non-text blocks. Images are described by type and size only: their data stays out.
pub(crate) fn output_text(content: Option<&Value>) -> (String, Vec<ContentPart>) {
    match content {
        None | Some(Value::Null) => (String::new(), Vec::new()),
        Some(Value::String(text)) => (text.clone(), Vec::new()),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            let mut parts = Vec::new();
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    ),
                    Some("image") => parts.push(ContentPart::Json {
                        json: describe_image(block),
                    }),
                    other => parts.push(ContentPart::Json {
                        json: json!({ "block": other.unwrap_or("unknown") }),
                    }),
                }
            }
            (texts.join("\n"), parts)
        }
        Some(other) => (other.to_string(), Vec::new()),
    }
}

/// An image block as `{"image": {"media_type", "bytes"}}`, without its data.
pub(crate) fn describe_image(block: &Value) -> Value {
    let source = block.get("source");
    let media_type = source
        .and_then(|s| s.get("media_type"))
        .and_then(Value::as_str);
    let bytes = source
        .and_then(|s| s.get("data"))
        .and_then(Value::as_str)
        .map_or(0, |d| d.len() * 3 / 4);
    json!({ "image": { "media_type": media_type, "bytes": bytes } })
}

/// A Bash exit code: 0 for a command that completed without error (the protocol reports a
/// non-zero exit as an error result), N from the `Exit code N` line of an error result.
fn exit_code(output: &str, failed: bool, structured: Option<&Value>) -> Option<i64> {
    if let Some(code) = structured
        .and_then(|s| s.get("exitCode").or_else(|| s.get("exit_code")))
        .and_then(Value::as_i64)
    {
        return Some(code);
    }
    if failed {
        return output.lines().find_map(|line| {
            let rest = line
                .trim()
                .trim_start_matches("Error: ")
                .strip_prefix("Exit code ")?;
            rest.split_whitespace().next()?.parse().ok()
        });
    }
    let ran = structured.is_some_and(|s| s.get("stdout").is_some());
    let interrupted = structured
        .and_then(|s| s.get("interrupted"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let background =
        structured.is_some_and(|s| s.get("backgroundTaskId").is_some_and(|v| !v.is_null()));
    (ran && !interrupted && !background).then_some(0)
}

/// The `file_ref` of a successful file tool doing `action`: its path from the structured result
/// (or the input), and a unified diff built from the CLI's `structuredPatch` when it gives one.
pub(crate) fn file_ref(
    action: FileAction,
    input: Option<&Value>,
    structured: Option<&Value>,
) -> Option<ContentPart> {
    let path = structured
        .and_then(|s| s.get("filePath").or_else(|| s.get("notebook_path")))
        .or_else(|| {
            input.and_then(|i| {
                i.get("file_path")
                    .or_else(|| i.get("notebook_path"))
                    .or_else(|| i.get("path"))
            })
        })
        .and_then(Value::as_str)?
        .to_string();
    let diff = match action {
        FileAction::Read => None,
        _ => structured.and_then(|s| diff_of(&path, s)),
    };
    Some(ContentPart::FileRef { path, action, diff })
}

/// A unified diff from `structuredPatch` hunks; for a newly created file without hunks, every
/// line of `content` as an addition.
fn diff_of(path: &str, structured: &Value) -> Option<String> {
    let hunks = structured
        .get("structuredPatch")
        .and_then(Value::as_array)
        .filter(|h| !h.is_empty());
    let created = structured.get("type").and_then(Value::as_str) == Some("create");
    let old_name = if created {
        "/dev/null".to_string()
    } else {
        format!("a/{}", path.trim_start_matches('/'))
    };
    let mut diff = format!("--- {old_name}\n+++ b/{}\n", path.trim_start_matches('/'));
    match hunks {
        Some(hunks) => {
            for hunk in hunks {
                let n = |k: &str| hunk.get(k).and_then(Value::as_u64).unwrap_or(0);
                diff.push_str(&format!(
                    "@@ -{},{} +{},{} @@\n",
                    n("oldStart"),
                    n("oldLines"),
                    n("newStart"),
                    n("newLines")
                ));
                for line in hunk
                    .get("lines")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    diff.push_str(line.as_str().unwrap_or_default());
                    diff.push('\n');
                }
            }
        }
        None if created => {
            let content = structured.get("content").and_then(Value::as_str)?;
            let lines: Vec<&str> = content.lines().collect();
            diff.push_str(&format!("@@ -0,0 +1,{} @@\n", lines.len()));
            for line in lines {
                diff.push('+');
                diff.push_str(line);
                diff.push('\n');
            }
        }
        None => return None,
    }
    Some(diff)
}

#[cfg(test)]
mod tests;
