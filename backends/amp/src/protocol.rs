//! [`AmpProtocol`]: Amp's stream-json is the family's protocol, so its messages go through the
//! family's [`StreamJson`] converter with Amp's [`crate::DIALECT`] (amp reads user messages only).
//! What is Amp's own lives here: the permission requests the delegate helper forwards (the
//! [`crate::delegate::REQUEST_TYPE`] lines of the run's side channel), decided by the kit's
//! [`Hitl`] engine and answered through [`Replies`]; and the stderr of a run that never started
//! (see the `errors` module).

use agent_api::kit::hitl::{Decided, Hitl};
use agent_api::kit::{parse_value, Unparsed};
use agent_api::kit::{Ctx, ExitInfo, Protocol};
use agent_api::run::ControlCommand;
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, Prompt, RunCompletion};
use agent_api_stream_json::StreamJson;
use serde_json::Value;

use crate::args::RunFiles;
use crate::delegate::wire::{EXIT_ALLOW, EXIT_REJECT};
use crate::delegate::{Replies, REPLY_TYPE, REQUEST_TYPE};

/// The converter of one Amp run or session.
pub struct AmpProtocol {
    inner: StreamJson,
    /// The delegated permission requests; the native context is the request id.
    hitl: Hitl<String, ()>,
    /// The helpers waiting for an answer; `None` in a replay (answers come from the recording).
    replies: Option<Replies>,
    /// The run's settings and channel, removed when the run is over.
    files: Option<RunFiles>,
}

impl AmpProtocol {
    /// A live run or session: `inner` converts amp's output; `replies` answers the helpers
    /// (`None` when the run delegates nothing, as with `dangerously_allow_all`).
    pub fn live(inner: StreamJson, policy: PermissionPolicy, replies: Option<Replies>) -> Self {
        Self {
            inner,
            hitl: Hitl::live(policy),
            replies,
            files: None,
        }
    }

    /// A replay of a recording (stdout, or a two-way session with the recorded answers).
    pub fn replaying() -> Self {
        Self {
            inner: StreamJson::replaying(crate::DIALECT),
            hitl: Hitl::replay(),
            replies: None,
            files: None,
        }
    }

    /// Keeps the run's files (settings, channel) until the protocol is dropped.
    pub fn keeping(mut self, files: RunFiles) -> Self {
        self.files = Some(files);
        self
    }

    fn on_delegate(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a delegate request has no `id`".into()))?;
        // Live, only the side channel's own requests count: amp's stdout cannot make one up.
        if let Some(replies) = &self.replies {
            if !replies.is_waiting(id) {
                ctx.transcript.status("delegate_request_unknown", None);
                return Ok(());
            }
        }
        let tool = message
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let input = message.get("input").cloned().unwrap_or(Value::Null);
        let request = crate::DIALECT.tool_permission(id, tool, &input);
        if let Some(decided) = self
            .hitl
            .request_permission(ctx.transcript, request, id.to_string())
        {
            self.reply(decided, ctx);
        }
        Ok(())
    }

    /// Sends a decision to the waiting helper as its exit status.
    fn reply(&mut self, decided: Decided<String>, ctx: &mut Ctx<'_>) {
        let exit = match decided.decision {
            PermissionDecision::Allow | PermissionDecision::AllowForSession => EXIT_ALLOW,
            PermissionDecision::AllowWithInput(_) => {
                // Amp's delegate answers yes or no: it cannot run the tool with other input.
                ctx.transcript.status("delegate_input_change_refused", None);
                EXIT_REJECT
            }
            _ => EXIT_REJECT,
        };
        if let Some(replies) = &self.replies {
            replies.answer(&decided.native, exit);
        }
    }

    /// Rejects every request still waiting (the run stops or ended).
    fn cancel_waiting(&mut self, ctx: &mut Ctx<'_>) {
        for decided in self.hitl.cancel_permissions(ctx.transcript) {
            self.reply(decided, ctx);
        }
    }
}

impl Protocol for AmpProtocol {
    fn name(&self) -> &'static str {
        "amp.stream_json"
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        self.inner.start(ctx)
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        // The side channel writes its lines with `type` first (see `DelegateRequest::to_bytes`):
        // a look at the first key keeps the shared hot path as it is.
        if crate::delegate::is_request_line(line) {
            return self.on_message(parse_value(line)?, ctx);
        }
        self.inner.on_line(line, ctx)
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        if message.get("type").and_then(Value::as_str) == Some(REQUEST_TYPE) {
            return self.on_delegate(&message, ctx);
        }
        self.inner.on_message(message, ctx)
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        if message.get("type").and_then(Value::as_str) == Some(REPLY_TYPE) {
            let id = message
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let approved =
                message.get("exit").and_then(Value::as_i64) == Some(i64::from(EXIT_ALLOW));
            self.hitl.recorded_permission(ctx.transcript, id, approved);
            return;
        }
        self.inner.on_recorded_send(message, ctx)
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match command {
            // Amp asks no permission on its own stream: every request is a delegated one.
            ControlCommand::Permission { id, decision } => {
                let decided = self.hitl.decide_permission(ctx.transcript, &id, decision)?;
                self.reply(decided, ctx);
                Ok(())
            }
            other => self.inner.on_control(other, ctx),
        }
    }

    fn send_turn(&mut self, prompt: &Prompt, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        self.inner.send_turn(prompt, ctx)
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        self.cancel_waiting(ctx);
        self.inner.interrupt(ctx)
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.cancel_waiting(ctx);
        let completion = self.inner.finish(exit, ctx);
        match completion {
            Err(AgentError::ProcessExited { .. }) => {
                Err(crate::errors::from_exit(exit).unwrap_or_else(|| exit.early_exit_error()))
            }
            other => other,
        }
    }
}

impl std::fmt::Debug for AmpProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmpProtocol").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn amp_tool_inputs_make_permission_details_by_amps_own_tools() {
        let bash =
            crate::DIALECT.tool_permission("p1", "Bash", &json!({"cmd": "ls -la", "cwd": "/w"}));
        assert_eq!(
            (bash.details.command.as_deref(), bash.details.cwd.as_deref()),
            (Some("ls -la"), Some("/w"))
        );
        assert_eq!(
            (bash.category, bash.action.as_str()),
            (agent_api::request::ToolCategory::Shell, "Bash: ls -la")
        );
        let edit = crate::DIALECT.tool_permission("p2", "edit_file", &json!({"path": "/w/a.rs"}));
        assert_eq!(
            (edit.category, edit.details.file.as_deref()),
            (agent_api::request::ToolCategory::FileWrite, Some("/w/a.rs"))
        );
        let page = crate::DIALECT.tool_permission(
            "p3",
            "read_web_page",
            &json!({"url": "https://example.com"}),
        );
        assert_eq!(page.category, agent_api::request::ToolCategory::Network);
    }
}
