//! What a request's conversation holds, whatever its API: the tools it offers ([`OfferedTool`]),
//! its messages and the tool results of the current turn ([`Conversation`]). Each API module reads
//! its own request format into one; the scenario's turn ([`super::turn`]) is played against it.

use serde_json::{json, Value};

/// The elements of the array `v[key]` (none when it is missing or not an array).
pub fn array<'a>(v: &'a Value, key: &str) -> std::slice::Iter<'a, Value> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter())
        .unwrap_or_default()
}

/// The text of a tool result's content: a string, the `text` of each part of an array (joined with
/// newlines), or the JSON of anything else.
pub fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The output of one tool call, as the CLI sent it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The output text (several parts joined with newlines).
    pub text: String,
    /// The CLI marked the result as an error (only Anthropic says so explicitly).
    pub is_error: bool,
}

/// What the server needs to know of a request's conversation.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// The tools the request offers.
    pub tools: Vec<OfferedTool>,
    /// User and assistant entries of the history (messages, or Responses items) that carry content.
    pub messages: usize,
    /// User entries that carry the user's own text.
    pub user_turns: usize,
    /// The last user text (wrapper blocks such as `<system-reminder>` skipped).
    pub last_user_text: String,
    /// Tool results after the last user text: how far the current turn got.
    pub results_this_turn: Vec<ToolOutput>,
    /// Tool results in the whole conversation, whatever user texts came between them.
    pub results_total: usize,
    /// Deferred-tool searches after the last user text (they do not advance the scenario).
    pub searches_this_turn: usize,
    /// The agent's working directory, when the request mentions it.
    pub cwd: Option<String>,
}

impl Conversation {
    /// Records one user entry: its text blocks and the tool results it carries.
    pub fn push_user<'a>(
        &mut self,
        texts: impl IntoIterator<Item = &'a str>,
        results: Vec<ToolOutput>,
    ) {
        let own: Vec<&str> = texts.into_iter().filter(|t| !is_wrapper(t)).collect();
        if own.is_empty() && results.is_empty() {
            return;
        }
        self.messages += 1;
        if let Some(last) = own.last() {
            self.user_turns += 1;
            self.last_user_text = last.trim().to_string();
            self.results_this_turn.clear();
            self.searches_this_turn = 0;
        }
        self.results_total += results.len();
        self.results_this_turn.extend(results);
    }

    /// Records the answer to a deferred-tool search: the tools it loaded are offered from now on.
    pub fn push_search_result(&mut self, loaded: impl IntoIterator<Item = OfferedTool>) {
        self.messages += 1;
        self.searches_this_turn += 1;
        self.tools.extend(loaded);
    }

    /// Records one assistant entry (text or tool call).
    pub fn push_assistant(&mut self) {
        self.messages += 1;
    }

    /// Looks for the working directory in the raw request body (system prompts name it).
    pub fn find_cwd(&mut self, body: &str) {
        self.cwd = find_cwd(body);
    }
}

/// Text blocks the CLIs add around the user's words (`<system-reminder>`, `<environment_context>`, ...).
fn is_wrapper(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || (t.starts_with('<') && t.ends_with('>'))
}

/// Finds the working directory the CLI announces in its prompts.
fn find_cwd(body: &str) -> Option<String> {
    // Codex: <cwd>/path</cwd>; Claude: "Primary working directory: /path"; OpenCode: "Working directory: /path";
    // Gemini and Qwen: "I'm currently working in the directory: /path" / workspace directories.
    const MARKERS: &[&str] = &[
        "<cwd>",
        "Primary working directory: ",
        "Working directory: ",
        "working in the directory: ",
        "Workspace Directories:**\\n  - ",
        "workspace directories:\\n  - ",
        "Workspace Directories:\\n  - ",
    ];
    MARKERS.iter().find_map(|marker| {
        body.match_indices(marker).find_map(|(at, _)| {
            let rest = &body[at + marker.len()..];
            let end = rest.find(['<', '\\', '"', '\n']).unwrap_or(rest.len());
            let path = rest[..end].trim();
            path.starts_with('/').then(|| path.to_string())
        })
    })
}

/// A tool offered by the request.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    /// Its name.
    pub name: String,
    /// A free-form (custom) tool that takes plain text, such as Codex's `apply_patch`.
    pub freeform: bool,
    /// The JSON schema of its parameters (`{}` when none was given).
    pub schema: Value,
    /// The namespace a deferred tool was loaded in (Codex's `tool_search_output`), named again in
    /// the call.
    pub namespace: Option<String>,
}

impl OfferedTool {
    /// A function tool with a JSON-schema parameter object.
    pub fn function(name: &str, schema: Option<&Value>) -> OfferedTool {
        OfferedTool {
            name: name.to_string(),
            freeform: false,
            schema: schema.cloned().unwrap_or(json!({})),
            namespace: None,
        }
    }

    pub(super) fn properties(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
    }

    pub(super) fn required(&self) -> Vec<&str> {
        self.schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_is_found_in_each_cli_prompt_style() {
        assert_eq!(
            find_cwd(r#"x <cwd>/home/a/w</cwd> y"#).as_deref(),
            Some("/home/a/w")
        );
        assert_eq!(
            find_cwd(r#""Primary working directory: /w/x\n""#).as_deref(),
            Some("/w/x")
        );
        assert_eq!(find_cwd("nothing here"), None);
    }
}
