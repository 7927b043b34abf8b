//! A backend for an imaginary CLI, `greeter`, written as a new user would on the kit's short
//! path (`agent_api::kit::cli`): its description and its protocol, and nothing else, in under 60
//! lines (between the two markers below, blank lines and comments included). The CLI itself is a
//! small script the test writes: `greeter --json PROMPT` prints its session and a greeting.

// The backend: from here...
use agent_api::kit::cli::{CliAgent, CliConfig, Launch, Turn};
use agent_api::kit::{async_trait, replay::RecordingFormat, transcript::NewItem};
use agent_api::kit::{Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::{capabilities as caps, AgentError, AgentKind, BackendInfo, CapabilitySet};
use agent_api::{universal::ItemRole, RunCompletion, RunRequest};
use serde_json::Value;

struct Greeter;

#[async_trait]
impl CliAgent for Greeter {
    type Config = CliConfig;
    const PROGRAM: &'static str = "greeter";

    fn info() -> BackendInfo {
        let caps = CapabilitySet::from_ids([caps::RUN, caps::EVENTS, caps::TEXT_MESSAGES]);
        BackendInfo::new(AgentKind::from_static("greeter"), caps)
    }

    async fn launch(config: &CliConfig, req: &RunRequest, _: Turn) -> Result<Launch, AgentError> {
        let args = ["--json", req.prompt.text.as_str()];
        Ok(Launch::command(
            config.command(Self::PROGRAM, req).args(args),
            Lines,
        ))
    }

    fn replay_protocol(_: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        Ok(Box::new(Lines))
    }
}

struct Lines; // Its protocol: one JSON object a line, `{"session": ID, "text": TEXT}`.

impl Protocol for Lines {
    fn name(&self) -> &'static str {
        "greeter"
    }

    fn on_message(&mut self, line: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let field = |key: &str| line.get(key).and_then(Value::as_str);
        let (Some(id), Some(text)) = (field("session"), field("text")) else {
            return Err(Unparsed("not a greeter line".into()));
        };
        ctx.transcript.set_native_session_id(id);
        ctx.transcript.session_started(None);
        ctx.transcript
            .message(NewItem::message(ItemRole::Assistant), text);
        Ok(())
    }

    fn finish(&mut self, exit: &ExitInfo, _: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        exit.success()
            .then(RunCompletion::new)
            .ok_or_else(|| exit.early_exit_error())
    }
}
// ...to here.

use agent_api::kit::cli::CliBackend;
use agent_api::{AgentBackend, SessionSelector};
use std::os::unix::fs::PermissionsExt;

/// The imaginary CLI: prints its session, then greets the prompt it was given (`$2`).
fn greeter_cli(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("greeter");
    let script = "#!/bin/sh\n[ \"$1\" = --json ] || exit 2\n\
                  printf '{\"session\":\"greet-1\",\"text\":\"Hello, %s\"}\\n' \"$2\"\n";
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn the_imaginary_backend_is_its_description_and_its_protocol_in_under_60_lines() {
    let source = include_str!("cli_agent.rs");
    let start = source.find("// The backend: from here").unwrap();
    let end = source.find("// ...to here.").unwrap();
    let lines = source[start..end].lines().count() + 1;
    assert!(lines < 60, "the imaginary backend takes {lines} lines");
}

#[tokio::test]
async fn the_imaginary_backend_runs_its_cli_through_the_shared_backend() {
    let dir = tempfile::tempdir().unwrap();
    let backend = CliBackend::<Greeter>::new(CliConfig::with_binary(greeter_cli(dir.path())));
    assert_eq!(backend.info().kind.as_str(), "greeter");
    let handle = backend.run(RunRequest::new("world")).await.unwrap();
    let (events, completion) = handle.collect_universal().await;
    let done = completion.unwrap();
    assert_eq!(done.final_text.as_deref(), Some("Hello, world"));
    assert_eq!(done.native_session_id.as_deref(), Some("greet-1"));
    assert!(events.iter().any(|e| e.type_name() == "item.completed"));
    assert_eq!(events.last().unwrap().type_name(), "session.ended");
}

#[tokio::test]
async fn the_shared_backend_refuses_what_the_description_does_not_advertise_before_spawn() {
    // A program that does not exist: anything spawned would fail as BinaryNotFound instead.
    let backend = CliBackend::<Greeter>::new(CliConfig::with_binary("/nonexistent/greeter"));
    let resumed = RunRequest::new("again").with_session(SessionSelector::Resume("greet-1".into()));
    let err = backend.run(resumed).await.unwrap_err();
    assert!(
        matches!(&err, AgentError::UnsupportedCapability { capability, .. } if capability == caps::SESSION_RESUME),
        "{err}"
    );
    let err = backend.open_session(RunRequest::new("")).await.unwrap_err();
    assert!(
        matches!(&err, AgentError::UnsupportedCapability { capability, .. } if capability == caps::SESSION_WARM),
        "{err}"
    );
    let err = backend
        .info()
        .option_value("backend.greeter.loud", "true")
        .unwrap_err();
    assert!(matches!(err, AgentError::UnknownExtension { .. }), "{err}");
    let err = backend.run(RunRequest::new("hi")).await.unwrap_err();
    assert!(matches!(err, AgentError::BinaryNotFound { .. }), "{err}");
}
