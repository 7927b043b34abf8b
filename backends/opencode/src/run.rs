//! The `opencode run --format json` converter: one-way JSONL of whole parts (`step_start`,
//! `text`, `reasoning`, `tool_use`, `step_finish`) and `error`.
//!
//! A permission set to "ask" is rejected by OpenCode itself in this interface: the tool part
//! ends in state `error`, which shows as a failed `tool_result` with OpenCode's reason.

use agent_api::kit::{parse_typed, parse_value};
use agent_api::kit::{CommandSpec, Ctx, Protocol};
use agent_api::kit::{ExitInfo, Unparsed};
use agent_api::{AgentError, RunCompletion, RunRequest, SessionSelector};
use serde::Deserialize;
use serde_json::Value;

use crate::config::OpenCodeConfig;
use crate::errors::NativeError;
use crate::parts::{Part, Parts};

#[derive(Debug, Deserialize)]
struct RunLine {
    #[serde(rename = "type")]
    kind: String,
    #[serde(rename = "sessionID", default)]
    session_id: Option<String>,
    #[serde(default)]
    part: Option<Part>,
    #[serde(default)]
    error: Option<NativeError>,
}

/// The `run` converter, the same for live runs and replay; a live run first writes its prompt.
#[derive(Debug, Default)]
pub struct RunProtocol {
    prompt: Option<String>,
    parts: Parts,
    error: Option<NativeError>,
}

impl RunProtocol {
    /// A live run that writes `prompt` to OpenCode's stdin and closes it: `opencode run` reads
    /// a piped stdin as its message, so the prompt never meets the argv size limit and never
    /// shows in `ps`.
    pub fn live(prompt: impl Into<String>) -> Self {
        Self {
            prompt: Some(prompt.into()),
            ..Self::default()
        }
    }

    fn on_run_line(&mut self, line: RunLine, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let t = &mut *ctx.transcript;
        if let Some(id) = &line.session_id {
            if t.native_session_id().is_none() {
                t.set_native_session_id(id.clone());
                t.session_started(None);
            }
        }
        match (line.kind.as_str(), line.part, line.error) {
            ("error", _, Some(error)) => self.error = Some(error),
            ("step_start" | "text" | "reasoning" | "tool_use" | "step_finish", Some(part), _) => {
                self.parts.part(t, part, true)
            }
            (kind, ..) => {
                return Err(Unparsed(format!(
                    "unknown or incomplete run line type {:?}",
                    agent_api::kit::bounds::utf8_prefix(kind, 40)
                )))
            }
        }
        Ok(())
    }
}

impl Protocol for RunProtocol {
    fn name(&self) -> &'static str {
        "opencode.run"
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        ctx.send_prompt(self.prompt.take());
        Ok(())
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match parse_typed::<RunLine>(line) {
            Some(line) => self.on_run_line(line, ctx),
            None => self.on_message(parse_value(line)?, ctx),
        }
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let line: RunLine = serde_json::from_value(message)?;
        self.on_run_line(line, ctx)
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.parts.fail_open_tools(ctx.transcript);
        if let Some(error) = &self.error {
            return Err(error.to_agent_error());
        }
        if !exit.success() {
            return Err(exit.early_exit_error());
        }
        let mut completion = RunCompletion::new();
        completion.usage = self.parts.usage();
        Ok(completion)
    }
}

/// `opencode run --format json [-m MODEL] [--thinking] [--session ID|--continue] [--fork] [-f IMAGE]…`,
/// with the prompt on stdin (see [`RunProtocol::live`]).
pub fn command_spec(
    config: &OpenCodeConfig,
    request: &RunRequest,
    thinking: bool,
) -> Result<CommandSpec, AgentError> {
    let mut args: Vec<String> = ["run", "--format", "json"].map(String::from).to_vec();
    if let Some(model) = &request.model {
        args.extend(["-m".to_string(), model.clone()]);
    }
    if thinking {
        args.push("--thinking".into());
    }
    // Checked against the backend's lists before spawn.
    if let Some(mode) = request
        .mode
        .as_ref()
        .filter(|m| **m != agent_api::request::AgentMode::Default)
    {
        args.extend(["--agent".to_string(), mode.as_str().to_string()]);
    }
    if let Some(variant) = &request.variant {
        args.extend(["--variant".to_string(), variant.clone()]);
    }
    if request.skip_permission_prompts {
        // OpenCode's own "don't ask": it approves what the config does not deny.
        args.push("--auto".into());
    }
    match &request.session {
        SessionSelector::Resume(session) => {
            args.extend(["--session".to_string(), session.id.clone()])
        }
        SessionSelector::ResumeLast => args.push("--continue".into()),
        SessionSelector::Fork(session) => args.extend([
            "--session".to_string(),
            session.id.clone(),
            "--fork".to_string(),
        ]),
        _ => {}
    }
    // OpenCode reads each image itself (`-f`), so a sandbox must see the file.
    let images = agent_api::kit::images::ImageFile::check_all(&request.prompt)?;
    for image in &images {
        args.extend(["-f".to_string(), image.path.display().to_string()]);
    }
    let spec = crate::base_spec(config, request)?.args(args).with_stdin();
    Ok(images
        .into_iter()
        .fold(spec, |spec, image| spec.local_file(image.path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(request: RunRequest) -> Vec<String> {
        command_spec(&OpenCodeConfig::default(), &request, true)
            .unwrap()
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn argv_carries_model_and_session_but_never_the_prompt() {
        let request = RunRequest::new("-x looks like a flag")
            .with_model("mock/m")
            .with_session(SessionSelector::Fork("ses_1".into()));
        assert_eq!(
            args(request),
            [
                "run",
                "--format",
                "json",
                "-m",
                "mock/m",
                "--thinking",
                "--session",
                "ses_1",
                "--fork"
            ]
        );
        let skip = args(
            RunRequest::new("hi")
                .with_skip_permission_prompts(true)
                .with_session(SessionSelector::ResumeLast),
        );
        assert_eq!(
            skip,
            [
                "run",
                "--format",
                "json",
                "--thinking",
                "--auto",
                "--continue"
            ]
        );
        let spec = command_spec(&OpenCodeConfig::default(), &RunRequest::new("hi"), false).unwrap();
        assert!(spec.stdin, "the prompt goes to stdin");
    }

    #[test]
    fn the_mode_is_the_agent_and_the_variant_its_own_flag() {
        let request = RunRequest::new("hi")
            .with_mode(agent_api::request::AgentMode::Plan)
            .with_variant("high");
        assert_eq!(
            args(request),
            [
                "run",
                "--format",
                "json",
                "--thinking",
                "--agent",
                "plan",
                "--variant",
                "high"
            ]
        );
        let default = args(RunRequest::new("hi").with_mode(agent_api::request::AgentMode::Default));
        assert_eq!(default, ["run", "--format", "json", "--thinking"]);
    }

    #[test]
    fn a_live_run_writes_its_prompt_to_stdin_then_closes_it() {
        let mut harness = agent_api::kit::ProtocolHarness::new();
        let mut protocol = RunProtocol::live("line one\nline two");
        protocol.start(&mut harness.ctx()).unwrap();
        assert_eq!(harness.take_sent_text(), "line one\nline two");
        assert!(harness.input_closed());
    }
}
