//! Qwen Code (kind `qwen`, tested with 0.15.10): where it lives and its two stream-json interfaces.
//!
//! Qwen Code speaks three machine protocols. ACP (`qwen --acp`, the default) is this crate's
//! client with Qwen's quirks (see [`crate::protocol`] and [`crate::updates`]). The other two are
//! Claude Code's stream-json protocol, spoken by a second CLI, so they run on
//! `agent_api_claude_code`'s converter ([`ClaudeProtocol`]) rather than a copy of it:
//!
//! - [`QwenInterface::StreamJson`]: `qwen -p --input-format stream-json --output-format
//!   stream-json`, two-way. Qwen asks `can_use_tool` without any extra flag (Claude's
//!   `--permission-prompt-tool` is refused); the prompt, the answers and the `interrupt` go in on
//!   stdin as for Claude Code. Qwen's `initialize` answer differs from Claude's and is not used.
//! - [`QwenInterface::Print`]: `qwen -p PROMPT --output-format stream-json`, one-way. Qwen cannot
//!   ask here, so the run's policy becomes `--allowed-tools` ([`TOOLS`] for each approved
//!   category, `mcp__SERVER` for the run's MCP servers when MCP is approved) and Qwen denies the
//!   rest; `RunRequest::skip_permission_prompts` passes `--yolo` (nothing is asked, every tool
//!   runs).
//!
//! In both, Qwen reports a failed model request as a *successful* `result` whose text starts with
//! `[API Error: …]`; [`api_error_result`] makes that one typed terminal error with its status.
//! That error comes after about 80 s on a 5xx, and nothing a caller can set shortens it: the
//! streaming call retries through `retryWithBackoff` with its fixed defaults (7 attempts, 1.5 s
//! doubling up to 30 s between them, no option passed); the `generationConfig.maxRetries`
//! setting only reaches the HTTP client's own retries inside each attempt, and
//! `QWEN_CODE_UNATTENDED_RETRY` only makes the retries persistent. A caller in a hurry sets the
//! run's timeout (or cancels).
//!
//! Qwen reports those retries nowhere but its debug log, `<runtime dir>/debug/<session id>.txt`
//! ([`debug_log_dir`]). On every interface, when the agent runs on this machine (the local and
//! sandbox launchers), the run follows that file and each retry line becomes the same `api_retry`
//! and `rate_limited` statuses as Gemini CLI's stderr lines ([`crate::retries`]). Stream-json runs
//! therefore always name their session (`--session-id`, a new id when the caller chose none);
//! ACP learns it from `session/new`. `--continue` names none, and is not followed.
//!
//! A warm session on the two-way interface ([`AcpBackend`]'s `open_session`) sends each turn as a
//! user message on the same process. Its `interrupt` ends the session, not only the turn: Qwen
//! 0.15.10 aborts the one `AbortController` of its stream-json session, and its input loop stops
//! on it (the process exits with 130); the next send is then `SessionClosed`.
//!
//! The kind lives in this crate, not in a crate of its own, because its default interface is ACP
//! and one backend value ([`AcpBackend::qwen`]) must serve all three interfaces: the stream-json
//! parts are only an argv and a switch, and the converter they use is Claude Code's.
//!
//! A recorded two-way session does not say which protocol it holds until its first message:
//! [`replaying`] picks ACP for JSON-RPC messages and stream-json otherwise.

use std::path::{Path, PathBuf};

use agent_api::kit::{parse_value, ExitInfo, Unparsed};
use agent_api::kit::{CommandSpec, Ctx, Protocol};
use agent_api::request::ToolCategory;
use agent_api::run::ControlCommand;
use agent_api::{AgentError, RunCompletion, RunRequest, SessionSelector};
use agent_api_claude_code::ClaudeProtocol;
use serde_json::Value;

use crate::{errors, AcpBackend, QwenInterface, QwenOptions};

/// The folder Qwen Code writes its per-session debug logs in, for an agent started by `spec`:
/// `debug` under its runtime directory, which is `QWEN_RUNTIME_DIR`, else the
/// `advanced.runtimeOutputDir` of its settings ([`settings_runtime_dir`]), else its home
/// (`QWEN_HOME`, else `.qwen` in the home directory), with `~` and relative paths resolved as
/// Qwen does. `None` when the agent's files are not on this machine.
pub fn debug_log_dir(spec: &CommandSpec) -> Option<PathBuf> {
    if !spec.launcher.is_local_filesystem() {
        return None;
    }
    let home = spec.env_value("HOME").map(PathBuf::from);
    let cwd = spec.cwd.clone().or_else(|| std::env::current_dir().ok())?;
    let resolve = |dir: String| -> Option<PathBuf> {
        let dir = match dir.strip_prefix('~') {
            Some(rest) => home.clone()?.join(rest.trim_start_matches('/')),
            None => PathBuf::from(dir),
        };
        Some(if dir.is_absolute() { dir } else { cwd.join(dir) })
    };
    let set = |name: &str| spec.env_value(name).filter(|d| !d.is_empty());
    let qwen_home = match set("QWEN_HOME") {
        Some(dir) => resolve(dir)?,
        None => home.clone()?.join(".qwen"),
    };
    let runtime = match set("QWEN_RUNTIME_DIR").or_else(|| settings_runtime_dir(spec, &cwd, home.as_deref(), &qwen_home)) {
        Some(dir) => resolve(dir)?,
        None => qwen_home,
    };
    Some(runtime.join("debug"))
}

/// `advanced.runtimeOutputDir` from Qwen Code's settings files (JSON with comments), in its order of
/// precedence: system (`QWEN_CODE_SYSTEM_SETTINGS_PATH`, else `/etc/qwen-code/settings.json`),
/// the workspace's `.qwen/settings.json` (unless the workspace is the home directory), the user's
/// (`settings.json` in `qwen_home`), then the system defaults (`system-defaults.json` beside the
/// system file, or `QWEN_CODE_SYSTEM_DEFAULTS_PATH`). A file that cannot be read counts as absent.
pub fn settings_runtime_dir(spec: &CommandSpec, cwd: &Path, home: Option<&Path>, qwen_home: &Path) -> Option<String> {
    let system =
        spec.env_value("QWEN_CODE_SYSTEM_SETTINGS_PATH").map_or_else(|| PathBuf::from("/etc/qwen-code/settings.json"), PathBuf::from);
    let defaults =
        spec.env_value("QWEN_CODE_SYSTEM_DEFAULTS_PATH").map_or_else(|| system.with_file_name("system-defaults.json"), PathBuf::from);
    let same_dir = |a: &Path, b: &Path| std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b);
    let workspace = (!home.is_some_and(|home| same_dir(cwd, home))).then(|| cwd.join(".qwen/settings.json"));
    let files = [Some(system), workspace, Some(qwen_home.join("settings.json")), Some(defaults)];
    files.into_iter().flatten().find_map(|file| {
        // The workspace's file is the agent's to plant (a FIFO, a link to /dev/zero): read bounded.
        let text = agent_api::kit::files::read_regular(&file, 1 << 20).ok()?;
        let settings: serde_json::Value = serde_json::from_reader(json_comments::StripComments::new(text.as_slice())).ok()?;
        settings.pointer("/advanced/runtimeOutputDir")?.as_str().filter(|d| !d.is_empty()).map(str::to_string)
    })
}

/// The debug log of session `id` in `dir` (see [`debug_log_dir`]), when the id is a plain file
/// name: an id the agent sent is never a path to follow elsewhere.
pub fn debug_log(dir: &Path, id: &str) -> Option<PathBuf> {
    let plain = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then(|| dir.join(format!("{id}.txt")))
}

/// The text Qwen puts at the start of a `result` that is a failed model request.
pub const API_ERROR_PREFIX: &str = "[API Error:";

/// Qwen's own tools by category: what a print run's policy pre-approves and what a denied
/// category removes.
pub const TOOLS: &[(ToolCategory, &[&str])] = &[
    (ToolCategory::Shell, &["run_shell_command"]),
    (ToolCategory::FileWrite, &["edit", "write_file"]),
    (ToolCategory::Network, &["web_fetch"]),
    (ToolCategory::FileRead, &["read_file", "grep_search", "glob", "list_directory"]),
];

/// The stream-json interface a run asked for; `None` for ACP.
pub fn stream_json_interface(request: &RunRequest) -> Result<Option<QwenInterface>, AgentError> {
    Ok(request.options::<QwenOptions>()?.interface.filter(|i| *i != QwenInterface::Acp))
}

/// A `result` text that is really a failed model request: the typed error for the status it
/// names (a bounded explanation without credentials, never the raw text).
pub fn api_error_result(text: &str) -> Option<AgentError> {
    let rest = text.trim_start().strip_prefix(API_ERROR_PREFIX)?;
    let explained = errors::explanation(rest.trim_end_matches(']').trim());
    Some(match errors::status_in(text) {
        Some(status) => errors::of_status(status, explained),
        None => AgentError::AgentFailed { message: format!("the model API failed: {explained}") },
    })
}

/// The argv and converter of a stream-json run (two-way or print), or of a warm session on the
/// two-way interface (`warm`: each turn is a user message on the same live process).
pub fn stream_json(
    backend: &AcpBackend,
    request: &RunRequest,
    cwd: &std::path::Path,
    interface: QwenInterface,
    warm: bool,
) -> Result<(CommandSpec, Box<dyn Protocol>), AgentError> {
    let config = backend.config();
    let two_way = interface == QwenInterface::StreamJson;
    let mut spec = CommandSpec::new(config.binary.clone().unwrap_or_else(|| "qwen".into())).args(config.args.iter().cloned());
    spec = if two_way { spec.args(["-p", "--input-format", "stream-json"]) } else { spec.args(["-p", request.prompt.text.as_str()]) };
    // Partial messages give text deltas as `stream_event` lines (without them a message arrives
    // whole, and a cancel can only land after it).
    spec = spec.args(["--output-format", "stream-json", "--include-partial-messages"]);
    if let Some(model) = &request.model {
        spec = spec.args(["-m", model.as_str()]);
    }
    if request.skip_permission_prompts {
        spec = spec.arg("--yolo");
    }
    if !two_way {
        for tool in agent_api::kit::hitl::pre_approved::allowed_tools(&request.permissions, TOOLS, &request.portable) {
            spec = spec.args(["--allowed-tools".to_string(), tool]);
        }
    }
    spec = spec.args(crate::portable::cli_args(crate::Flavor::Qwen, &request.portable, !two_way));
    // The session is named up front (a new one too) so that its debug log can be followed.
    let session_id = match &request.session {
        SessionSelector::New => {
            let id = request.new_session_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            spec = spec.args(["--session-id", id.as_str()]);
            Some(id)
        }
        SessionSelector::Resume(session) => {
            spec = spec.args(["--resume", session.id.as_str()]);
            Some(session.id.clone())
        }
        SessionSelector::ResumeLast => {
            spec = spec.arg("--continue");
            None
        }
        _ => return Err(AgentError::InvalidRequest { reason: "qwen cannot fork a session".into() }),
    };
    for (k, v) in &config.env {
        spec = spec.env(k, v);
    }
    let mut spec = backend.homed(crate::launch_env(spec.for_request(request), crate::Flavor::Qwen).cwd(cwd), request)?;
    spec.stdin = two_way;
    let prompt = request.prompt.text.clone();
    let protocol = match (two_way, warm) {
        (true, true) => ClaudeProtocol::session(request.permissions.clone(), false),
        (true, false) => ClaudeProtocol::control(prompt, request.permissions.clone(), false),
        (false, _) => ClaudeProtocol::print(prompt, false),
    };
    let mut protocol = protocol.with_result_error(api_error_result);
    if let Some(log) = debug_log_dir(&spec).zip(session_id).and_then(|(dir, id)| debug_log(&dir, &id)) {
        // A retry line of the log becomes its statuses.
        protocol = protocol.with_log(log, |line, transcript| {
            crate::retries::Retry::report(line, transcript);
        });
    }
    Ok((spec, Box::new(protocol)))
}

/// The converter of a Qwen recording: stream-json (stdout or session) or an ACP session.
pub fn replaying() -> Box<dyn Protocol> {
    Box::new(Sniffed { inner: None })
}

/// A replay converter that picks its protocol from the first message it sees.
struct Sniffed {
    inner: Option<Box<dyn Protocol>>,
}

impl Sniffed {
    fn inner(&mut self, message: &Value) -> &mut Box<dyn Protocol> {
        self.inner.get_or_insert_with(|| {
            if message.get("jsonrpc").is_some() {
                Box::new(crate::protocol::Acp::replay("qwen.acp"))
            } else {
                Box::new(ClaudeProtocol::replaying().with_result_error(api_error_result))
            }
        })
    }
}

impl Protocol for Sniffed {
    fn name(&self) -> &'static str {
        self.inner.as_ref().map_or("qwen", |p| p.name())
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match &mut self.inner {
            Some(inner) => inner.on_line(line, ctx),
            None => self.on_message(parse_value(line)?, ctx),
        }
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        self.inner(&message).on_message(message, ctx)
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        self.inner(&message).on_recorded_send(message, ctx)
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match &mut self.inner {
            Some(inner) => inner.on_control(command, ctx),
            None => Err(AgentError::InvalidRequest { reason: "a replay takes no control command".into() }),
        }
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        match &mut self.inner {
            Some(inner) => inner.finish(exit, ctx),
            None => Err(exit.early_exit_error()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_debug_log_is_followed_only_for_a_plain_session_id() {
        let dir = std::path::Path::new("/home/u/.qwen/debug");
        assert_eq!(debug_log(dir, "0b6f-41_a"), Some(dir.join("0b6f-41_a.txt")));
        for id in ["", "../../etc/passwd", "a/b", "a b", ".."] {
            assert_eq!(debug_log(dir, id), None, "{id:?}");
        }
    }

    /// A spec for an agent in `cwd` whose home is `home` and whose system settings are `system`.
    fn spec_in(home: &Path, cwd: &Path, system: &Path) -> CommandSpec {
        CommandSpec::new("qwen")
            .cwd(cwd)
            .env("HOME", home.to_string_lossy())
            .env("QWEN_CODE_SYSTEM_SETTINGS_PATH", system.join("settings.json").to_string_lossy())
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_debug_logs_follow_the_runtime_dir_of_qwens_settings_files_in_their_order() {
        let root = tempfile::tempdir().unwrap();
        let (home, cwd, system) = (root.path().join("home"), root.path().join("project"), root.path().join("etc"));
        std::fs::create_dir_all(&cwd).unwrap();
        let spec = spec_in(&home, &cwd, &system);
        assert_eq!(debug_log_dir(&spec), Some(home.join(".qwen/debug")), "no setting: the home's .qwen");

        // The user's settings, with comments as Qwen allows; a relative path is the workspace's.
        write(
            &home.join(".qwen/settings.json"),
            "{\n  // where runtime files go\n  \"advanced\": { \"runtimeOutputDir\": \"out/qwen\" } /* per project */\n}",
        );
        assert_eq!(debug_log_dir(&spec), Some(cwd.join("out/qwen/debug")));
        write(&cwd.join(".qwen/settings.json"), r#"{"advanced": {"runtimeOutputDir": "~/rt"}}"#);
        assert_eq!(debug_log_dir(&spec), Some(home.join("rt/debug")), "the workspace's settings win over the user's");
        write(&system.join("settings.json"), r#"{"advanced": {"runtimeOutputDir": "/srv/qwen"}}"#);
        assert_eq!(debug_log_dir(&spec), Some(PathBuf::from("/srv/qwen/debug")), "the system's settings win over all");
        let env = spec.clone().env("QWEN_RUNTIME_DIR", root.path().join("env").to_string_lossy());
        assert_eq!(debug_log_dir(&env), Some(root.path().join("env/debug")), "the variable wins over every file");

        // QWEN_HOME moves the user's settings too.
        std::fs::remove_file(system.join("settings.json")).unwrap();
        std::fs::remove_file(cwd.join(".qwen/settings.json")).unwrap();
        let moved = spec.env("QWEN_HOME", root.path().join("qh").to_string_lossy());
        assert_eq!(debug_log_dir(&moved), Some(root.path().join("qh/debug")));
        write(&root.path().join("qh/settings.json"), r#"{"advanced": {"runtimeOutputDir": "/var/qwen"}}"#);
        assert_eq!(debug_log_dir(&moved), Some(PathBuf::from("/var/qwen/debug")));
    }

    #[test]
    fn an_unreadable_settings_file_counts_as_absent() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let spec = spec_in(&home, &home, &root.path().join("etc"));
        write(&home.join(".qwen/settings.json"), "not json {");
        assert_eq!(debug_log_dir(&spec), Some(home.join(".qwen/debug")), "an unreadable file counts as absent");
    }

    #[test]
    fn api_error_results_are_typed_by_their_status() {
        let auth = api_error_result("[API Error: 401 Incorrect API key provided: sk-test]");
        assert!(matches!(&auth, Some(AgentError::Auth { message }) if !message.contains("sk-test")), "{auth:?}");
        let server = api_error_result("[API Error: 500 Internal Server Error]");
        assert!(matches!(server, Some(AgentError::ServerError { status: Some(500), .. })), "{server:?}");
        assert!(api_error_result("Hello from mock").is_none());
        assert!(matches!(api_error_result("[API Error: connection refused]"), Some(AgentError::AgentFailed { .. })));
    }

    #[test]
    fn every_turn_of_a_warm_stream_json_session_reads_api_errors() {
        use agent_api::kit::ProtocolHarness;
        let mut protocol = ClaudeProtocol::session(agent_api::PermissionPolicy::Ask, false).with_result_error(api_error_result);
        let mut harness = ProtocolHarness::new();
        let result = |text: &str| {
            serde_json::json!({"type": "result", "subtype": "success", "is_error": false, "result": text, "session_id": "s1",
                "num_turns": 1, "usage": {"input_tokens": 1, "output_tokens": 1}})
        };
        for (turn, text) in ["hello", "[API Error: 500 Internal Server Error]"].into_iter().enumerate() {
            protocol.send_turn(&agent_api::Prompt::from(format!("turn {turn}")), &mut harness.ctx()).unwrap();
            protocol.on_line(result(text).to_string().as_bytes(), &mut harness.ctx()).unwrap();
            let ended = harness.take_turn_end().expect("the result ends the turn");
            match turn {
                0 => assert!(ended.is_ok(), "{ended:?}"),
                _ => assert!(matches!(ended, Err(AgentError::ServerError { status: Some(500), .. })), "{ended:?}"),
            }
        }
    }
}
