//! Mapping a scenario's [`Action`] onto the tools a request offers: the tool's name and argument shape come
//! from the request, so one scenario drives every CLI.
//!
//! | action | tools tried, in order |
//! |---|---|
//! | shell | `Bash` (Claude), `exec_command` (Codex), `bash` (OpenCode), `run_shell_command` (Gemini, Qwen), `shell` |
//! | write | `Write`, `write`, `write_file`, Codex's free-form `apply_patch` |
//! | edit | `Edit`, `edit`, `replace`, Codex's free-form `apply_patch` |
//! | ask | `AskUserQuestion`, `request_user_input`, `ask_user_question`, `question` |
//! | structured | `StructuredOutput`, `structured_output`; none offered: the JSON is the answer text |
//! | call tool | the first offered tool whose name ends with the action's suffix; when none is but `tool_search` is (Codex, Qwen Code defer MCP tools), a search for the suffix first |

use serde_json::{json, Map, Value};

use super::conversation::{Conversation, OfferedTool};
use crate::scenario::{Action, Question};

/// A tool call the mock model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Call id, unique within the conversation (`mock_<n>`; APIs add their own prefix).
    pub id: String,
    /// The offered tool's name.
    pub name: String,
    /// The namespace the tool was loaded in, if any.
    pub namespace: Option<String>,
    /// The arguments.
    pub input: ToolInput,
}

/// Arguments of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolInput {
    /// A JSON object for a function tool.
    Json(Value),
    /// Free-form text for a custom tool (Codex `apply_patch`).
    Freeform(String),
}

impl ToolInput {
    /// The arguments as one JSON text (free-form input is wrapped as `{"input": ...}`).
    pub fn to_json_string(&self) -> String {
        match self {
            ToolInput::Json(v) => v.to_string(),
            ToolInput::Freeform(s) => serde_json::json!({ "input": s }).to_string(),
        }
    }
}

const SHELL: &[&str] = &["Bash", "exec_command", "bash", "run_shell_command", "shell"];
const WRITE: &[&str] = &["Write", "write", "write_file", "apply_patch"];
const EDIT: &[&str] = &["Edit", "edit", "replace", "apply_patch"];
const ASK: &[&str] = &[
    "AskUserQuestion",
    "request_user_input",
    "ask_user_question",
    "question",
];
const STRUCTURED: &[&str] = &["StructuredOutput", "structured_output"];

/// The tool that loads deferred tools: Codex's client-executed `tool_search`, Qwen Code's function.
pub const TOOL_SEARCH: &str = "tool_search";

/// Builds the call for `action` from the offered tools, or says which tool was missing.
pub fn call_for(action: &Action, conv: &Conversation) -> Result<ToolCall, String> {
    let (kind, names) = match action {
        Action::CallTool { suffix, input } => {
            let id = format!("mock_{}", conv.messages);
            let Some(tool) = conv.tools.iter().find(|t| t.name.ends_with(suffix)) else {
                // A deferred tool: search for it once, then it is offered.
                if conv.searches_this_turn == 0 && conv.tools.iter().any(|t| t.name == TOOL_SEARCH)
                {
                    return Ok(ToolCall {
                        id,
                        name: TOOL_SEARCH.into(),
                        namespace: None,
                        input: ToolInput::Json(json!({"query": suffix})),
                    });
                }
                return Err(missing(conv, suffix));
            };
            let input = ToolInput::Json(serde_json::from_str(input).unwrap_or(Value::Null));
            return Ok(ToolCall {
                id,
                name: tool.name.clone(),
                namespace: tool.namespace.clone(),
                input,
            });
        }
        Action::Shell(_) => ("shell", SHELL),
        Action::WriteFile { .. } => ("file write", WRITE),
        Action::EditFile { .. } => ("file edit", EDIT),
        Action::Ask(_) => ("question", ASK),
        Action::Structured(_) => ("structured output", STRUCTURED),
    };
    let tool = names
        .iter()
        .find_map(|n| conv.tools.iter().find(|t| t.name == *n))
        .ok_or_else(|| missing(conv, kind))?;
    let id = format!("mock_{}", conv.messages);
    let input = match action {
        Action::Structured(json) => {
            ToolInput::Json(serde_json::from_str(json).unwrap_or(Value::Null))
        }
        _ if tool.freeform => ToolInput::Freeform(patch_for(action)),
        _ => json_args(tool, action, conv),
    };
    Ok(ToolCall {
        id,
        name: tool.name.clone(),
        namespace: None,
        input,
    })
}

/// Says which tool the request lacks, and what it offers.
fn missing(conv: &Conversation, kind: &str) -> String {
    let offered: Vec<&str> = conv.tools.iter().map(|t| t.name.as_str()).collect();
    format!(
        "mock: the request offers no {kind} tool (offered: {})",
        offered.join(", ")
    )
}

/// The `apply_patch` text for a write or edit.
fn patch_for(action: &Action) -> String {
    match action {
        Action::WriteFile { path, content } => {
            let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
            format!("*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n")
        }
        Action::EditFile { path, old, new } => {
            format!("*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n")
        }
        Action::Shell(cmd) => cmd.to_string(),
        Action::Ask(_) | Action::Structured(_) | Action::CallTool { .. } => String::new(),
    }
}

fn json_args(tool: &OfferedTool, action: &Action, conv: &Conversation) -> ToolInput {
    let abs = |path: &str| match &conv.cwd {
        Some(cwd) => format!("{}/{path}", cwd.trim_end_matches('/')),
        None => path.to_string(),
    };
    let mut args = Map::new();
    for (name, schema) in tool.properties() {
        let value = match (action, name.as_str()) {
            (Action::Shell(cmd), "command" | "cmd") => {
                match schema.get("type").and_then(Value::as_str) {
                    Some("array") => json!(["bash", "-lc", cmd]),
                    _ => json!(cmd),
                }
            }
            (Action::Shell(_), "description") => json!("mock command"),
            (Action::Shell(_), "is_background") => json!(false),
            (
                Action::WriteFile { path, .. } | Action::EditFile { path, .. },
                "file_path" | "filePath" | "path" | "absolute_path",
            ) => {
                json!(abs(path))
            }
            (Action::WriteFile { content, .. }, "content") => json!(content),
            (Action::EditFile { old, .. }, "old_string" | "oldString") => json!(old),
            (Action::EditFile { new, .. }, "new_string" | "newString") => json!(new),
            (Action::EditFile { .. }, "instruction") => {
                json!("Replace the word created with edited.")
            }
            (Action::Ask(questions), "questions") => json!(questions_for(schema, questions)),
            _ if tool.required().contains(&name.as_str()) => default_for(schema),
            _ => continue,
        };
        args.insert(name.clone(), value);
    }
    ToolInput::Json(Value::Object(args))
}

/// The questions in the shape the tool's schema asks for.
fn questions_for(schema: &Value, questions: &[Question]) -> Vec<Value> {
    let item = schema
        .pointer("/items/properties")
        .and_then(Value::as_object);
    let has = |key: &str| item.is_none_or(|p| p.contains_key(key));
    questions
        .iter()
        .map(|q| {
            let mut obj = Map::new();
            if item.is_some_and(|p| p.contains_key("id")) {
                obj.insert("id".into(), json!(q.id));
            }
            if has("header") {
                obj.insert("header".into(), json!(q.header));
            }
            obj.insert("question".into(), json!(q.question));
            let options: Vec<Value> = q
                .options
                .iter()
                .map(|label| json!({ "label": label, "description": format!("Choose {label}.") }))
                .collect();
            obj.insert("options".into(), Value::Array(options));
            for flag in ["multiSelect", "multiple"] {
                if item.is_some_and(|p| p.contains_key(flag)) {
                    obj.insert(flag.into(), json!(false));
                }
            }
            Value::Object(obj)
        })
        .collect()
}

/// A harmless value of the schema's type, for required parameters the action does not set.
fn default_for(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => json!(false),
        Some("integer" | "number") => json!(0),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!(""),
    }
}

/// Fills a JSON schema with plausible values (for side requests that ask for structured JSON, such as
/// Gemini's model router and next-speaker check).
pub fn fill_schema(schema: &Value) -> Value {
    let ty = schema
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let user = options.iter().find(|o| o.as_str() == Some("user"));
        return user.or(options.first()).cloned().unwrap_or(Value::Null);
    }
    match ty.as_deref() {
        Some("object") => {
            let props = schema.get("properties").and_then(Value::as_object);
            Value::Object(
                props
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), fill_schema(v)))
                    .collect(),
            )
        }
        Some("integer" | "number") => {
            let min = schema.get("minimum").and_then(Value::as_i64).unwrap_or(1);
            json!(min.max(1))
        }
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        _ => json!("mock"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::SHELL_COMMAND;

    fn conv(tools: Vec<OfferedTool>) -> Conversation {
        Conversation {
            tools,
            cwd: Some("/w".into()),
            messages: 3,
            ..Conversation::default()
        }
    }

    #[test]
    fn shell_uses_the_offered_tool_name_and_argument_name() {
        let codex = OfferedTool::function(
            "exec_command",
            Some(
                &json!({"properties": {"cmd": {"type": "string"}, "tty": {"type": "boolean"}}, "required": ["cmd"]}),
            ),
        );
        let call = call_for(&Action::Shell(SHELL_COMMAND), &conv(vec![codex])).unwrap();
        assert_eq!(call.name, "exec_command");
        assert_eq!(call.input, ToolInput::Json(json!({"cmd": SHELL_COMMAND})));
        assert_eq!(call.id, "mock_3");
    }

    #[test]
    fn write_gets_an_absolute_path_under_the_cwd() {
        let tool = OfferedTool::function(
            "write",
            Some(
                &json!({"properties": {"content": {}, "filePath": {}}, "required": ["content", "filePath"]}),
            ),
        );
        let action = Action::WriteFile {
            path: "a.txt",
            content: "x",
        };
        let call = call_for(&action, &conv(vec![tool])).unwrap();
        assert_eq!(
            call.input,
            ToolInput::Json(json!({"content": "x", "filePath": "/w/a.txt"}))
        );
    }

    #[test]
    fn codex_apply_patch_gets_patch_text() {
        let tool = OfferedTool {
            name: "apply_patch".into(),
            freeform: true,
            schema: json!({}),
            namespace: None,
        };
        let action = Action::EditFile {
            path: "a.txt",
            old: "x",
            new: "y",
        };
        let ToolInput::Freeform(patch) = call_for(&action, &conv(vec![tool])).unwrap().input else {
            panic!("not free-form")
        };
        assert!(
            patch.contains("*** Update File: a.txt\n@@\n-x\n+y\n"),
            "{patch}"
        );
    }

    #[test]
    fn a_missing_tool_is_reported_with_the_offered_names() {
        let err = call_for(
            &Action::Ask(&[]),
            &conv(vec![OfferedTool::function("Read", None)]),
        )
        .unwrap_err();
        assert!(
            err.contains("no question tool") && err.contains("Read"),
            "{err}"
        );
    }

    #[test]
    fn router_schema_is_filled_with_a_valid_score() {
        let schema = json!({"type": "OBJECT", "properties": {
            "complexity_reasoning": {"type": "STRING"}, "complexity_score": {"type": "INTEGER"}}});
        assert_eq!(
            fill_schema(&schema),
            json!({"complexity_reasoning": "mock", "complexity_score": 1})
        );
        let speaker = json!({"type": "object", "properties": {"next_speaker": {"type": "string", "enum": ["model", "user"]}}});
        assert_eq!(fill_schema(&speaker), json!({"next_speaker": "user"}));
    }
}
