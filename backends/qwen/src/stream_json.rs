//! Qwen Code's two stream-json interfaces (the crate doc says what each does): their argv, Qwen's
//! [`DIALECT`] of the family's converter (its [`TOOLS`], its failed model requests reported as
//! successful results, its debug log), and the converter of a recording, which picks ACP or
//! stream-json from the first message ([`replaying`]).

use std::path::{Path, PathBuf};

use agent_api::kit::{parse_value, ExitInfo, Unparsed};
use agent_api::kit::{CommandSpec, Ctx, Protocol};
use agent_api::run::ControlCommand;
use agent_api::{AgentError, RunCompletion, RunRequest, SessionSelector};
use agent_api_acp::{session_log, AcpConfig};
use agent_api_stream_json::{Dialect, StreamJson};
use serde_json::Value;

use crate::tools::TOOLS;
use crate::{QwenInterface, QwenOptions};

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
        Some(if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        })
    };
    let set = |name: &str| spec.env_value(name).filter(|d| !d.is_empty());
    let qwen_home = match set("QWEN_HOME") {
        Some(dir) => resolve(dir)?,
        None => home.clone()?.join(".qwen"),
    };
    let runtime = match set("QWEN_RUNTIME_DIR")
        .or_else(|| settings_runtime_dir(spec, &cwd, home.as_deref(), &qwen_home))
    {
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
pub fn settings_runtime_dir(
    spec: &CommandSpec,
    cwd: &Path,
    home: Option<&Path>,
    qwen_home: &Path,
) -> Option<String> {
    let system = spec
        .env_value("QWEN_CODE_SYSTEM_SETTINGS_PATH")
        .map_or_else(
            || PathBuf::from("/etc/qwen-code/settings.json"),
            PathBuf::from,
        );
    let defaults = spec
        .env_value("QWEN_CODE_SYSTEM_DEFAULTS_PATH")
        .map_or_else(
            || system.with_file_name("system-defaults.json"),
            PathBuf::from,
        );
    let same_dir = |a: &Path, b: &Path| {
        std::fs::canonicalize(a)
            .ok()
            .zip(std::fs::canonicalize(b).ok())
            .is_some_and(|(a, b)| a == b)
    };
    let workspace =
        (!home.is_some_and(|home| same_dir(cwd, home))).then(|| cwd.join(".qwen/settings.json"));
    let files = [
        Some(system),
        workspace,
        Some(qwen_home.join("settings.json")),
        Some(defaults),
    ];
    files.into_iter().flatten().find_map(|file| {
        // The workspace's file is the agent's to plant (a FIFO, a link to /dev/zero): read bounded.
        let text = agent_api::kit::files::read_regular(&file, 1 << 20).ok()?;
        let settings: serde_json::Value =
            serde_json::from_reader(json_comments::StripComments::new(text.as_slice())).ok()?;
        settings
            .pointer("/advanced/runtimeOutputDir")?
            .as_str()
            .filter(|d| !d.is_empty())
            .map(str::to_string)
    })
}

/// The text Qwen puts at the start of a `result` that is a failed model request.
pub const API_ERROR_PREFIX: &str = "[API Error:";

/// Qwen Code's stream-json dialect: the control protocol, no images, failed model requests
/// reported as successful results ([`api_error_result`]), retries only in its debug log
/// (`crate::retries`).
pub const DIALECT: Dialect = Dialect::new("qwen.stream_json", TOOLS)
    .with_result_error(api_error_result)
    .with_log_reader(crate::retries::read_log_line);

/// The stream-json interface a run asked for; `None` for ACP.
pub fn stream_json_interface(request: &RunRequest) -> Result<Option<QwenInterface>, AgentError> {
    Ok(request
        .options::<QwenOptions>()?
        .interface
        .filter(|i| *i != QwenInterface::Acp))
}

/// A `result` text that is really a failed model request: the typed error for the status it
/// names (a bounded explanation without credentials, never the raw text).
pub fn api_error_result(text: &str) -> Option<AgentError> {
    let rest = text.trim_start().strip_prefix(API_ERROR_PREFIX)?;
    let explained = agent_api_acp::explanation(rest.trim_end_matches(']').trim());
    Some(match agent_api_acp::status_in(text) {
        Some(status) => AgentError::of_http_status(status, explained),
        None => AgentError::AgentFailed {
            message: format!("the model API failed: {explained}"),
        },
    })
}

/// The argv and converter of a stream-json run (two-way or print), or of a warm session on the
/// two-way interface (`warm`: each turn is a user message on the same live process).
pub(crate) fn stream_json(
    config: &AcpConfig,
    request: &RunRequest,
    cwd: &std::path::Path,
    interface: QwenInterface,
    warm: bool,
) -> Result<(CommandSpec, Box<dyn Protocol>), AgentError> {
    let two_way = interface == QwenInterface::StreamJson;
    let mut args: Vec<String> = match two_way {
        true => ["-p", "--input-format", "stream-json"]
            .map(String::from)
            .to_vec(),
        false => vec!["-p".to_string(), request.prompt.text.clone()],
    };
    // Partial messages give text deltas as `stream_event` lines (without them a message arrives
    // whole, and a cancel can only land after it).
    args.extend(
        [
            "--output-format",
            "stream-json",
            "--include-partial-messages",
        ]
        .map(String::from),
    );
    if let Some(model) = &request.model {
        args.extend(["-m".to_string(), model.clone()]);
    }
    // A chosen mode wins over the skip flag (plan mode stays read-only).
    let mode_args = agent_api_acp::approval_mode_args(request);
    if request.skip_permission_prompts && mode_args.is_empty() {
        args.push("--yolo".to_string());
    }
    args.extend(mode_args);
    if !two_way {
        let policy =
            agent_api::kit::hitl::policy_in_mode(request.mode.as_ref(), &request.permissions);
        for tool in
            agent_api::kit::hitl::pre_approved::allowed_tools(&policy, &TOOLS, &request.portable)
        {
            args.extend(["--allowed-tools".to_string(), tool]);
        }
    }
    args.extend(crate::portable::cli_args(&request.portable, !two_way));
    // The session is named up front (a new one too) so that its debug log can be followed.
    let session_id = match &request.session {
        SessionSelector::New => {
            let id = request
                .new_session_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            args.extend(["--session-id".to_string(), id.clone()]);
            Some(id)
        }
        SessionSelector::Resume(session) => {
            args.extend(["--resume".to_string(), session.id.clone()]);
            Some(session.id.clone())
        }
        SessionSelector::ResumeLast => {
            args.push("--continue".to_string());
            None
        }
        _ => {
            return Err(AgentError::InvalidRequest {
                reason: "qwen cannot fork a session".into(),
            })
        }
    };
    let mut spec = crate::CLI.command(config, args, request, cwd)?;
    spec.stdin = two_way;
    let prompt = request.prompt.text.clone();
    let mut protocol = match (two_way, warm) {
        (true, true) => StreamJson::session(DIALECT, request.permissions.clone(), false)
            .with_mode_switch(crate::portable::MODES),
        (true, false) => StreamJson::control(DIALECT, prompt, request.permissions.clone(), false),
        (false, _) => StreamJson::print(DIALECT, prompt, false),
    };
    protocol = protocol.in_mode(request.mode.as_ref());
    if let Some(log) = debug_log_dir(&spec)
        .zip(session_id)
        .and_then(|(dir, id)| session_log(&dir, &id))
    {
        protocol = protocol.following(log);
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
                Box::new(crate::CLI.replay())
            } else {
                Box::new(StreamJson::replaying(DIALECT))
            }
        })
    }
}

impl Protocol for Sniffed {
    fn name(&self) -> &'static str {
        self.inner.as_ref().map_or("qwen", |p| p.name())
    }

    /// A recording's stderr (its debug log's lines, or a `meta.json`'s stderr) shows the retries
    /// a live run shows, whichever interface was recorded: read here, before the first message
    /// picks the converter and after.
    fn reads_stderr(&self) -> bool {
        true
    }

    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        crate::retries::read_log_line(line, ctx.transcript);
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
            None => Err(AgentError::InvalidRequest {
                reason: "a replay takes no control command".into(),
            }),
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
    use agent_api::request::ToolCategory;

    #[test]
    fn a_debug_log_is_followed_only_for_a_plain_session_id() {
        let dir = std::path::Path::new("/home/u/.qwen/debug");
        assert_eq!(
            session_log(dir, "0b6f-41_a"),
            Some(dir.join("0b6f-41_a.txt"))
        );
        for id in ["", "../../etc/passwd", "a/b", "a b", ".."] {
            assert_eq!(session_log(dir, id), None, "{id:?}");
        }
    }

    /// A spec for an agent in `cwd` whose home is `home` and whose system settings are `system`.
    fn spec_in(home: &Path, cwd: &Path, system: &Path) -> CommandSpec {
        CommandSpec::new("qwen")
            .cwd(cwd)
            .env("HOME", home.to_string_lossy())
            .env(
                "QWEN_CODE_SYSTEM_SETTINGS_PATH",
                system.join("settings.json").to_string_lossy(),
            )
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_debug_logs_follow_the_runtime_dir_of_qwens_settings_files_in_their_order() {
        let root = tempfile::tempdir().unwrap();
        let (home, cwd, system) = (
            root.path().join("home"),
            root.path().join("project"),
            root.path().join("etc"),
        );
        std::fs::create_dir_all(&cwd).unwrap();
        let spec = spec_in(&home, &cwd, &system);
        assert_eq!(
            debug_log_dir(&spec),
            Some(home.join(".qwen/debug")),
            "no setting: the home's .qwen"
        );

        // The user's settings, with comments as Qwen allows; a relative path is the workspace's.
        write(
            &home.join(".qwen/settings.json"),
            "{\n  // where runtime files go\n  \"advanced\": { \"runtimeOutputDir\": \"out/qwen\" } /* per project */\n}",
        );
        assert_eq!(debug_log_dir(&spec), Some(cwd.join("out/qwen/debug")));
        write(
            &cwd.join(".qwen/settings.json"),
            r#"{"advanced": {"runtimeOutputDir": "~/rt"}}"#,
        );
        assert_eq!(
            debug_log_dir(&spec),
            Some(home.join("rt/debug")),
            "the workspace's settings win over the user's"
        );
        write(
            &system.join("settings.json"),
            r#"{"advanced": {"runtimeOutputDir": "/srv/qwen"}}"#,
        );
        assert_eq!(
            debug_log_dir(&spec),
            Some(PathBuf::from("/srv/qwen/debug")),
            "the system's settings win over all"
        );
        let env = spec.clone().env(
            "QWEN_RUNTIME_DIR",
            root.path().join("env").to_string_lossy(),
        );
        assert_eq!(
            debug_log_dir(&env),
            Some(root.path().join("env/debug")),
            "the variable wins over every file"
        );

        // QWEN_HOME moves the user's settings too.
        std::fs::remove_file(system.join("settings.json")).unwrap();
        std::fs::remove_file(cwd.join(".qwen/settings.json")).unwrap();
        let moved = spec.env("QWEN_HOME", root.path().join("qh").to_string_lossy());
        assert_eq!(debug_log_dir(&moved), Some(root.path().join("qh/debug")));
        write(
            &root.path().join("qh/settings.json"),
            r#"{"advanced": {"runtimeOutputDir": "/var/qwen"}}"#,
        );
        assert_eq!(
            debug_log_dir(&moved),
            Some(PathBuf::from("/var/qwen/debug"))
        );
    }

    #[test]
    fn an_unreadable_settings_file_counts_as_absent() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let spec = spec_in(&home, &home, &root.path().join("etc"));
        write(&home.join(".qwen/settings.json"), "not json {");
        assert_eq!(
            debug_log_dir(&spec),
            Some(home.join(".qwen/debug")),
            "an unreadable file counts as absent"
        );
    }

    #[test]
    fn api_error_results_are_typed_by_their_status() {
        let auth = api_error_result("[API Error: 401 Incorrect API key provided: sk-test]");
        assert!(
            matches!(&auth, Some(AgentError::Auth { message }) if !message.contains("sk-test")),
            "{auth:?}"
        );
        let server = api_error_result("[API Error: 500 Internal Server Error]");
        assert!(
            matches!(
                server,
                Some(AgentError::ServerError {
                    status: Some(500),
                    ..
                })
            ),
            "{server:?}"
        );
        assert!(api_error_result("Hello from mock").is_none());
        assert!(matches!(
            api_error_result("[API Error: connection refused]"),
            Some(AgentError::AgentFailed { .. })
        ));
    }

    /// Qwen's fetch, search and listing tools are in its table: a policy by category decides
    /// them on the stream-json permission path (they were `other` there, so always asked).
    #[test]
    fn a_policy_by_category_decides_qwens_network_and_read_tools() {
        use agent_api::kit::ProtocolHarness;
        use agent_api::request::PermissionRule;
        use agent_api::PermissionPolicy;
        let policy = PermissionPolicy::ByCategory(
            [
                (ToolCategory::Network, PermissionRule::Approve),
                (ToolCategory::FileRead, PermissionRule::Deny),
            ]
            .into_iter()
            .collect(),
        );
        let mut protocol = StreamJson::control(DIALECT, "go", policy, false);
        let mut harness = ProtocolHarness::new();
        protocol.start(&mut harness.ctx()).unwrap();
        harness.take_sent();
        let ask = |id: &str, tool: &str| {
            serde_json::json!({"type": "control_request", "request_id": id, "request": {"subtype": "can_use_tool", "tool_name": tool,
                "input": {"path": "/w"}, "tool_use_id": format!("t_{id}")}})
        };
        let mut behaviors = Vec::new();
        for (id, tool) in [
            ("r1", "web_fetch"),
            ("r2", "grep_search"),
            ("r3", "list_directory"),
            ("r4", "run_shell_command"),
        ] {
            protocol
                .on_line(ask(id, tool).to_string().as_bytes(), &mut harness.ctx())
                .unwrap();
            let sent = harness.take_sent();
            behaviors.push((
                tool,
                sent.first().and_then(|m| {
                    m.pointer("/response/response/behavior")?
                        .as_str()
                        .map(str::to_string)
                }),
            ));
        }
        let expected = [
            ("web_fetch", Some("allow".to_string())),
            ("grep_search", Some("deny".to_string())),
            ("list_directory", Some("deny".to_string())),
            ("run_shell_command", None),
        ];
        assert_eq!(
            behaviors, expected,
            "the policy decides by the table's categories; the shell is asked"
        );
    }

    #[test]
    fn every_turn_of_a_warm_stream_json_session_reads_api_errors() {
        use agent_api::kit::ProtocolHarness;
        let mut protocol = StreamJson::session(DIALECT, agent_api::PermissionPolicy::Ask, false);
        let mut harness = ProtocolHarness::new();
        let result = |text: &str| {
            serde_json::json!({"type": "result", "subtype": "success", "is_error": false, "result": text, "session_id": "s1",
                "num_turns": 1, "usage": {"input_tokens": 1, "output_tokens": 1}})
        };
        for (turn, text) in ["hello", "[API Error: 500 Internal Server Error]"]
            .into_iter()
            .enumerate()
        {
            protocol
                .send_turn(
                    &agent_api::Prompt::from(format!("turn {turn}")),
                    &mut harness.ctx(),
                )
                .unwrap();
            protocol
                .on_line(result(text).to_string().as_bytes(), &mut harness.ctx())
                .unwrap();
            let ended = harness.take_turn_end().expect("the result ends the turn");
            match turn {
                0 => assert!(ended.is_ok(), "{ended:?}"),
                _ => assert!(
                    matches!(
                        ended,
                        Err(AgentError::ServerError {
                            status: Some(500),
                            ..
                        })
                    ),
                    "{ended:?}"
                ),
            }
        }
    }
}
