//! The typed command and working directory of a shell tool call, read once from the agent's
//! arguments so callers never parse a backend's argument JSON themselves.

use serde_json::Value;

use super::item::ToolMeta;

/// The most bytes of a command or directory kept on an item (as for permission details).
pub const SHELL_FIELD_BOUND: usize = 2048;

/// Argument keys agents name the command with: `command` (Claude Code, Codex, OpenCode, Gemini,
/// Qwen), `cmd` (Amp).
const COMMAND_KEYS: [&str; 2] = ["command", "cmd"];
/// Argument keys agents name the directory with.
const CWD_KEYS: [&str; 4] = ["cwd", "workdir", "directory", "dir"];

/// The command and directory a tool's arguments name: the command as text (a string, or an argv
/// array joined by spaces), and the directory only beside a command (a file tool's `path` or a
/// search tool's `directory` is not where a command runs). Each is cut to [`SHELL_FIELD_BOUND`].
///
/// ```
/// use agent_api::kit::transcript::shell_fields;
/// use serde_json::json;
/// let (command, cwd) = shell_fields(&json!({"command": ["ls", "-la"], "cwd": "/w"}));
/// assert_eq!((command.as_deref(), cwd.as_deref()), (Some("ls -la"), Some("/w")));
/// assert_eq!(shell_fields(&json!({"directory": "/w"})), (None, None));
/// ```
pub fn shell_fields(arguments: &Value) -> (Option<String>, Option<String>) {
    let Some(command) = COMMAND_KEYS
        .iter()
        .find_map(|k| text_of(arguments.get(*k)?))
    else {
        return (None, None);
    };
    let cwd = CWD_KEYS
        .iter()
        .find_map(|k| arguments.get(*k)?.as_str().map(bounded));
    (Some(command), cwd)
}

impl ToolMeta {
    /// Sets [`ToolMeta::command`] and [`ToolMeta::cwd`] from a tool's arguments (see
    /// [`shell_fields`]); fields the arguments do not name are left as they were.
    ///
    /// ```
    /// use agent_api::universal::ToolMeta;
    /// use serde_json::json;
    /// let meta = ToolMeta::default().with_shell_fields(&json!({"command": "cargo test", "description": "run"}));
    /// assert_eq!(meta.command.as_deref(), Some("cargo test"));
    /// assert_eq!(meta.cwd, None);
    /// ```
    pub fn with_shell_fields(mut self, arguments: &Value) -> Self {
        let (command, cwd) = shell_fields(arguments);
        self.command = command.or(self.command);
        self.cwd = cwd.or(self.cwd);
        self
    }
}

fn bounded(text: &str) -> String {
    crate::contract::bounds::utf8_prefix(text, SHELL_FIELD_BOUND).to_string()
}

/// `text` cut to [`SHELL_FIELD_BOUND`] (kept as it is when it fits): the one cut of every
/// command, directory and file a tool item or a permission request names.
pub(crate) fn bounded_field(mut text: String) -> String {
    let keep = crate::contract::bounds::utf8_prefix(&text, SHELL_FIELD_BOUND).len();
    text.truncate(keep);
    text
}

/// A command as text: a string, or an argv array of strings joined by spaces.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(bounded(s)),
        Value::Array(parts) => {
            let parts: Option<Vec<&str>> = parts.iter().map(Value::as_str).collect();
            parts.map(|p| bounded(&p.join(" ")))
        }
        _ => None,
    }
}
