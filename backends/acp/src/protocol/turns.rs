//! The warm-session side of the ACP converter (`spec/run-protocol.md` §8): one ACP session on
//! one live agent, a `session/prompt` per turn, each turn's own outcome and usage, and a cancel
//! that keeps the session.

use agent_api::kit::images::ImageData;
use agent_api::kit::Ctx;
use agent_api::{AgentError, Prompt, RunCompletion};
use std::os::unix::ffi::OsStrExt;

use agent_client_protocol_schema::{
    ContentBlock, ImageContent, ResourceLink, StopReason, TextContent,
};
use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::json;

use super::{stop_name, Acp};

/// What a `file://` URI keeps unescaped of a path: letters, digits, `/` and `-_.~`.
const URI_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A prompt as the content blocks of one `session/prompt`: its text, each image inline
/// (base64), each attachment as a link to the file (every ACP agent takes resource links).
///
/// ```
/// use agent_api::Prompt;
/// use agent_api_acp::prompt_blocks;
/// let mut prompt = Prompt::from("Summarise this");
/// prompt.attachments.push("/work/notes and ideas.md".into());
/// let blocks = serde_json::to_value(prompt_blocks(&prompt).unwrap()).unwrap();
/// assert_eq!(blocks[1]["uri"], "file:///work/notes%20and%20ideas.md");
/// ```
pub fn prompt_blocks(prompt: &Prompt) -> Result<Vec<ContentBlock>, AgentError> {
    let mut blocks = vec![ContentBlock::Text(TextContent::new(prompt.text.clone()))];
    for image in ImageData::read_all(prompt)? {
        blocks.push(ContentBlock::Image(ImageContent::new(
            image.base64,
            image.file.media_type,
        )));
    }
    for path in &prompt.attachments {
        let path = crate::options::absolute(path);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let uri = format!(
            "file://{}",
            percent_encode(path.as_os_str().as_bytes(), URI_PATH)
        );
        blocks.push(ContentBlock::ResourceLink(ResourceLink::new(name, uri)));
    }
    Ok(blocks)
}

/// Whether a prompt carries an image (the agent must advertise `promptCapabilities.image`).
pub(super) fn has_image(blocks: &[ContentBlock]) -> bool {
    blocks.iter().any(|b| matches!(b, ContentBlock::Image(_)))
}

impl Acp {
    /// How the last turn went, once its stop reason is known (taken: each turn reports once).
    pub(super) fn outcome(&mut self) -> Option<Result<RunCompletion, AgentError>> {
        Some(match self.stop.take()? {
            StopReason::Cancelled => Err(AgentError::Cancelled),
            StopReason::Refusal => Err(AgentError::AgentFailed {
                message: "the agent refused to continue (stop reason refusal)".into(),
            }),
            stop => {
                let mut completion = RunCompletion::new();
                completion.native_session_id = self.session_id.clone();
                completion.usage = self.usage.take();
                completion.data =
                    Some(json!({"stop_reason": stop_name(stop), "agent": self.agent}));
                Ok(completion)
            }
        })
    }

    /// A warm session's next turn: one `session/prompt`, sent at once when the ACP session is
    /// open, else when `session/new` (or `session/load`) answers.
    pub(super) fn next_turn(
        &mut self,
        prompt: &Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if !self.warm {
            return Err(AgentError::no_more_turns("ACP"));
        }
        if let Some(error) = self.fatal.take() {
            return Err(error);
        }
        let Some(plan) = self.plan.as_mut() else {
            return Err(AgentError::InvalidRequest {
                reason: "a replay takes no turns".into(),
            });
        };
        // Each turn reports its own stop reason and usage.
        self.stop = None;
        self.usage = None;
        plan.prompts.push_back(prompt_blocks(prompt)?);
        self.send_prompt(ctx);
        Ok(())
    }

    /// Cancels a warm session's turn whose prompt has not gone out yet (the ACP session is still
    /// opening): it ends at once. Returns whether there was one.
    pub(super) fn cancel_unsent(&mut self, ctx: &mut Ctx<'_>) -> bool {
        match self.plan.as_mut() {
            Some(plan) if self.warm && !self.prompt_in_flight && !plan.prompts.is_empty() => {
                plan.prompts.clear();
                ctx.end_turn(Err(AgentError::Cancelled));
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use agent_api::kit::Protocol;
    use agent_api::kit::ProtocolHarness;
    use agent_api::{PermissionPolicy, SessionSelector};
    use serde_json::{json, Value};

    use super::*;
    use crate::protocol::Plan;
    use crate::requests::{FsMode, Requests};

    fn update(update: Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}}).to_string().into_bytes()
    }

    fn chunk(kind: &str, text: &str) -> Vec<u8> {
        update(json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}}))
    }

    /// The methods of the requests sent since the last call, and the last one's id.
    fn sent(harness: &mut ProtocolHarness) -> (Vec<String>, Value) {
        let sent = harness.take_sent();
        let id = sent.last().map(|m| m["id"].clone()).unwrap_or_default();
        (
            sent.iter()
                .filter_map(|m| m["method"].as_str().map(str::to_string))
                .collect(),
            id,
        )
    }

    fn answer(id: Value, result: Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": id, "result": result})
            .to_string()
            .into_bytes()
    }

    /// An agent that answers `session/load` before it replays the history: the prompt waits for the end
    /// of the load, and the replay stays history.
    #[test]
    fn a_load_whose_history_trails_its_answer_is_history_and_the_prompt_waits() {
        let plan = Plan {
            cwd: "/w".into(),
            session: SessionSelector::Resume("s1".into()),
            prompts: VecDeque::from([prompt_blocks(&Prompt::from("second")).unwrap()]),
        };
        let mut acp = Acp::live(
            "test",
            plan,
            Requests::live(PermissionPolicy::Ask, FsMode::Off),
        )
        .history_trails_load();
        let mut harness = ProtocolHarness::new();
        acp.start(&mut harness.ctx()).unwrap();
        let (methods, id) = sent(&mut harness);
        assert_eq!(methods, ["initialize"]);
        let init = json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true}, "authMethods": []});
        acp.on_line(&answer(id, init), &mut harness.ctx()).unwrap();
        let (methods, id) = sent(&mut harness);
        assert_eq!(methods, ["session/load"]);
        acp.on_line(&answer(id, json!({})), &mut harness.ctx())
            .unwrap();
        for line in [
            chunk("user_message_chunk", "first"),
            chunk("agent_message_chunk", "old answer"),
        ] {
            acp.on_line(&line, &mut harness.ctx()).unwrap();
        }
        assert!(
            sent(&mut harness).0.is_empty(),
            "the prompt waits for the replay"
        );
        let commands =
            update(json!({"sessionUpdate": "available_commands_update", "availableCommands": []}));
        acp.on_line(&commands, &mut harness.ctx()).unwrap();
        let (methods, id) = sent(&mut harness);
        assert_eq!(methods, ["session/prompt"]);
        acp.on_line(
            &chunk("agent_message_chunk", "new answer"),
            &mut harness.ctx(),
        )
        .unwrap();
        acp.on_line(
            &answer(id, json!({"stopReason": "end_turn"})),
            &mut harness.ctx(),
        )
        .unwrap();
        assert_eq!(harness.transcript.last_assistant_text(), Some("new answer"));
        let text = serde_json::to_string(&harness.transcript.take_events()).unwrap();
        assert!(
            text.contains("assistant: old answer") && text.contains("user: first"),
            "{text}"
        );
    }
}
