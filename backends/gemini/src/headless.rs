//! Gemini CLI's one-way interface: `gemini -p PROMPT --output-format stream-json`.
//!
//! Lines: `init` (session id, model) → `session.started`; `message` (user echo → nothing,
//! assistant `delta: true` chunks → one streamed assistant message); `tool_use` / `tool_result` →
//! tool items; `result` → the outcome, usage from `stats`; a failed `result` is one typed error
//! by the HTTP status its message names. With no `result`, the exit code (the HTTP status mod 256
//! on API errors) says what happened. No permissions: Gemini cannot ask here, so the run's policy
//! does not apply; [`crate::HeadlessApproval`] passes an explicit don't-ask mode through.

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::transcript::NewItem;
use agent_api::kit::{CommandSpec, Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::run::{FacetKind, ToolBytes, Usage};
use agent_api::universal::{ContentPart, ItemRole, ToolMeta};
use agent_api::{AgentError, RunCompletion, RunRequest, SessionSelector};
use agent_api_acp::{explanation, AcpConfig};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::GeminiOptions;

/// One stream-json line.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Init {
        session_id: String,
        model: Option<String>,
    },
    Message {
        role: String,
        content: String,
    },
    ToolUse {
        tool_name: String,
        tool_id: String,
        #[serde(default)]
        parameters: Value,
    },
    ToolResult {
        tool_id: String,
        status: String,
        #[serde(default)]
        output: Option<String>,
    },
    Result {
        status: String,
        #[serde(default)]
        error: Option<HeadlessError>,
        #[serde(default)]
        stats: Option<Stats>,
    },
    Error {
        #[serde(default)]
        message: String,
    },
}

#[derive(Debug, Deserialize)]
struct HeadlessError {
    #[serde(default)]
    message: String,
}

#[derive(Debug, Deserialize)]
struct Stats {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached: Option<u64>,
}

/// The headless converter.
#[derive(Debug, Default)]
pub(crate) struct Headless {
    /// A live run's prompt, written to stdin at the start (never on argv).
    prompt: Option<String>,
    session_id: Option<String>,
    message: Option<String>,
    tools: Vec<(String, String, FacetKind)>,
    outcome: Option<Result<Option<Usage>, AgentError>>,
    /// The HTTP status of the last retry Gemini reported on stderr, for its final error, which
    /// names none.
    retry_status: Option<u16>,
}

impl Headless {
    fn close_message(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(id) = self.message.take() {
            ctx.transcript.complete_item(&id);
        }
    }

    fn tool_use(&mut self, ctx: &mut Ctx<'_>, name: String, id: String, parameters: Value) {
        self.close_message(ctx);
        let kind = crate::TOOLS.facet(&name);
        let meta = ToolMeta {
            tool_name: Some(name.clone()),
            ..ToolMeta::of(kind)
        };
        let meta = if meta.is_command() {
            meta.with_shell_fields(&parameters)
        } else {
            meta
        };
        let path = parameters
            .get("file_path")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut call = NewItem::tool_call(&name, parameters.to_string(), &id)
            .native(&id)
            .tool(meta.clone());
        if let Some(path) = path {
            call = call.with_part(ContentPart::FileRef {
                path,
                action: agent_api::universal::FileAction::Write,
                diff: None,
            });
        }
        let t = &mut *ctx.transcript;
        let call_item = t.start_item(call);
        t.complete_item(&call_item);
        let result = t.start_item(
            NewItem::tool_result(&id)
                .native(format!("{id}/result"))
                .parent(Some(call_item))
                .tool(meta),
        );
        self.tools.push((id, result, kind));
    }

    fn tool_result(&mut self, ctx: &mut Ctx<'_>, id: &str, status: &str, output: String) {
        let Some(at) = self.tools.iter().position(|(tool, ..)| tool == id) else {
            ctx.transcript
                .status("orphan_tool_result", Some(utf8_prefix(id, 128).to_string()));
            return;
        };
        let (_, item, kind) = self.tools.remove(at);
        let mut bytes = ToolBytes::default();
        if kind == FacetKind::CommandExecution {
            bytes.stdout = output.len() as u64;
        } else {
            bytes.result = output.len() as u64;
        }
        let content = vec![ContentPart::ToolResult {
            call_id: id.to_string(),
            output,
        }];
        let t = &mut *ctx.transcript;
        t.update_item(&item, |i| {
            if let Some(meta) = i.tool.as_mut() {
                meta.bytes = bytes;
            }
        });
        if status == "success" {
            t.complete_item_with(&item, content);
        } else {
            t.update_item(&item, |i| i.content = content);
            t.fail_item(&item);
        }
    }

    fn result(
        &mut self,
        ctx: &mut Ctx<'_>,
        status: &str,
        error: Option<HeadlessError>,
        stats: Option<Stats>,
    ) {
        self.close_message(ctx);
        let usage = stats.map(|s| {
            let mut usage = Usage::default();
            usage.input_tokens = s.input_tokens;
            usage.output_tokens = s.output_tokens;
            usage.cached_input_tokens = s.cached;
            usage
        });
        self.outcome = Some(if status == "success" {
            Ok(usage)
        } else {
            let message = error.map(|e| e.message).unwrap_or_default();
            let explained = explanation(&message);
            let words = agent_api::kit::rate_limit::LimitWords::in_text(&message);
            Err(match agent_api_acp::status_in(&message) {
                Some(status) => AgentError::of_http_status(status, explained),
                // Gemini's result names no status for an overload; its retries on stderr may have.
                None if words.overloaded => AgentError::Overloaded {
                    status: self.retry_status,
                    message: explained,
                },
                None if words.limited => AgentError::RateLimited { message: explained },
                None => AgentError::AgentFailed { message: explained },
            })
        });
    }
}

impl Headless {
    /// A live run: `start` writes `prompt` to Gemini's stdin and closes it. Gemini reads a piped
    /// stdin as the prompt when `-p` is absent, so the prompt never shows in the process list and
    /// meets no argv limit.
    pub(crate) fn live(prompt: impl Into<String>) -> Self {
        Self {
            prompt: Some(prompt.into()),
            ..Self::default()
        }
    }
}

impl Protocol for Headless {
    fn name(&self) -> &'static str {
        "gemini.headless"
    }

    /// Gemini CLI reports its retries only on stderr (see [`crate::retries`]).
    fn reads_stderr(&self) -> bool {
        true
    }

    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        if let Some(retry) = agent_api_acp::Retry::report(line, ctx.transcript) {
            self.retry_status = retry.status;
        }
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        ctx.send_prompt(self.prompt.take());
        Ok(())
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match serde_json::from_value::<Line>(message)? {
            Line::Init { session_id, model } => {
                ctx.transcript.set_native_session_id(&session_id);
                ctx.transcript
                    .session_started(Some(json!({"session_id": session_id, "model": model})));
                self.session_id = Some(session_id);
            }
            Line::Message { role, content } if role == "assistant" => {
                let id = match &self.message {
                    Some(id) => id.clone(),
                    None => {
                        let id = ctx
                            .transcript
                            .start_item(NewItem::message(ItemRole::Assistant));
                        self.message = Some(id.clone());
                        id
                    }
                };
                ctx.transcript.delta(&id, &content);
            }
            Line::Message { .. } => {}
            Line::ToolUse {
                tool_name,
                tool_id,
                parameters,
            } => self.tool_use(ctx, tool_name, tool_id, parameters),
            Line::ToolResult {
                tool_id,
                status,
                output,
            } => self.tool_result(ctx, &tool_id, &status, output.unwrap_or_default()),
            Line::Result {
                status,
                error,
                stats,
            } => self.result(ctx, &status, error, stats),
            Line::Error { message } => {
                ctx.transcript
                    .error(explanation(&message), Some("agent_error".into()), None)
            }
        }
        Ok(())
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.close_message(ctx);
        for (_, item, _) in self.tools.drain(..) {
            ctx.transcript.fail_item(&item);
        }
        match self.outcome.take() {
            Some(Ok(usage)) => {
                let mut completion = RunCompletion::new();
                completion.native_session_id = self.session_id.clone();
                completion.usage = usage;
                completion.data = Some(json!({"interface": "headless"}));
                Ok(completion)
            }
            Some(Err(error)) => Err(error),
            None => Err(exit.early_exit_error()),
        }
    }
}

/// The argv of a headless run.
pub(crate) fn command(
    config: &AcpConfig,
    request: &RunRequest,
    cwd: &std::path::Path,
) -> Result<CommandSpec, AgentError> {
    let options = request.options::<GeminiOptions>()?;
    let mut args: Vec<String> = ["--skip-trust", "--output-format", "stream-json"]
        .map(String::from)
        .to_vec();
    if let Some(model) = &request.model {
        args.extend(["-m".to_string(), model.clone()]);
    }
    // The extension names the native value and wins over the request's mode.
    match options.approval_mode {
        Some(mode) => args.extend(["--approval-mode".to_string(), mode.as_str().to_string()]),
        None => args.extend(agent_api_acp::approval_mode_args(request)),
    }
    match &request.session {
        SessionSelector::New => {
            if let Some(id) = request.uuid_session_id()? {
                args.extend(["--session-id".to_string(), id.to_string()]);
            }
        }
        SessionSelector::Resume(session) => {
            args.extend(["--resume".to_string(), session.id.clone()])
        }
        SessionSelector::ResumeLast => args.extend(["--resume".to_string(), "latest".to_string()]),
        _ => {
            return Err(AgentError::InvalidRequest {
                reason: "gemini cannot fork a session".into(),
            })
        }
    }
    args.extend(crate::portable::cli_args(&request.portable));
    // The prompt goes to stdin ([`Headless::live`]), which `AgentCli::command` leaves open.
    crate::CLI.command(config, args, request, cwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_goes_to_stdin_not_argv() {
        let request = RunRequest::new("PROMPT-SENTINEL say hi");
        let spec = command(
            &AcpConfig::with_binary("gemini"),
            &request,
            std::path::Path::new("/"),
        )
        .unwrap();
        assert!(spec.stdin, "Gemini reads the prompt from stdin");
        let argv: Vec<String> = spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            !argv
                .iter()
                .any(|a| a.contains("PROMPT-SENTINEL") || a == "-p"),
            "{argv:?}"
        );
    }
}
