//! Steering the running turn (`agent_api.control.steer`): one more `prompt_async` on the busy
//! OpenCode session. OpenCode does not queue it behind the turn: it stores the user message and
//! its running loop reads it at its next step (it goes on while the last user message is newer
//! than the last finished answer), so the model's next request holds it, in the same turn, which
//! still ends at one `session.idle`. The message is taken when an answer names it as its parent
//! (`message.updated` of an assistant message whose `parentID` is the steering message's id):
//! then it goes in the transcript, where the model read it, and `RunControl::steer` returns.
//! A message OpenCode stored after its loop's last check is answered by no step of this turn:
//! the turn's end refuses it (`TurnEndedBeforeSteer`).

use std::collections::VecDeque;

use agent_api::kit::{Ctx, Steering};
use agent_api::AgentError;

use super::{Pending, ServeProtocol};

/// A steering message sent on the session and not taken yet.
#[derive(Debug)]
pub(super) struct SentSteer {
    /// The number `RunControl::steer` waits on (0 in a replay: nobody waits).
    number: u64,
    text: String,
    /// OpenCode's id of the user message it made of it, once seen.
    message_id: Option<String>,
}

/// The steering messages of the running turn, in the order they were sent.
#[derive(Debug, Default)]
pub(super) struct Steers {
    sent: VecDeque<SentSteer>,
    numbered: u64,
    /// The id of the turn's own prompt message, once seen: the user messages after it are the
    /// steering messages, in order.
    prompt_message: Option<String>,
}

impl Steers {
    /// A new turn: its prompt's message comes first.
    pub(super) fn new_turn(&mut self) {
        self.sent.clear();
        self.prompt_message = None;
    }

    /// A steering message read from a recording: it goes in the transcript where it was taken.
    pub(super) fn recorded(&mut self, text: String) {
        self.sent.push_back(SentSteer {
            number: 0,
            text,
            message_id: None,
        });
    }

    /// A replayed turn is over with recorded prompts that no answer of it named: they did not
    /// steer it, they are the recording's next turns (OpenCode took them once this turn was over;
    /// their client sent them before this turn's `session.idle` reached the recording, as one that
    /// prompts with the synchronous `/message` call does once its answer comes). The first is the
    /// next turn's prompt (`true`); the others wait to be taken in that turn, or to open the ones
    /// after it.
    pub(super) fn next_recorded_turn(&mut self) -> bool {
        match self.sent.pop_front() {
            Some(prompt) => {
                self.prompt_message = prompt.message_id;
                true
            }
            None => false,
        }
    }

    /// OpenCode made the user message `id`: the turn's prompt, or the oldest steering message
    /// that has none yet.
    pub(super) fn user_message(&mut self, id: &str) {
        if self.prompt_message.is_none() {
            self.prompt_message = Some(id.to_string());
        } else if let Some(steer) = self.sent.iter_mut().find(|s| s.message_id.is_none()) {
            steer.message_id = Some(id.to_string());
        }
    }

    /// An answer to the user message `parent` began: a steering message it answers is taken.
    pub(super) fn answered(&mut self, parent: &str, ctx: &mut Ctx<'_>) {
        let Some(at) = self
            .sent
            .iter()
            .position(|s| s.message_id.as_deref() == Some(parent))
        else {
            return;
        };
        // Those sent before it were read in the same step.
        for steer in self.sent.drain(..=at) {
            ctx.transcript.user_message(&steer.text);
            ctx.steer_answered(steer.number, Ok(()));
        }
    }

    /// OpenCode refused to take steering message `number`.
    pub(super) fn refused(&mut self, number: u64, status: u16, ctx: &mut Ctx<'_>) {
        self.sent.retain(|s| s.number != number);
        ctx.steer_answered(
            number,
            Err(AgentError::SteerRefused {
                reason: format!("the opencode server answered HTTP {status}"),
            }),
        );
    }
}

impl ServeProtocol {
    /// Sends the steering message as a prompt on the busy session.
    pub(super) fn steer_turn(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<Steering, AgentError> {
        if self.plan.is_none() {
            return Err(AgentError::UnsupportedCapability {
                kind: crate::KIND.to_string(),
                capability: agent_api::capabilities::CONTROL_STEER.into(),
            });
        }
        let (Some(id), true, false) = (self.session_id.clone(), self.prompted, self.idle) else {
            return Err(AgentError::NoTurnRunning);
        };
        let body = self.prompt_body(super::prompt_parts(prompt)?);
        let path = format!("/session/{id}/prompt_async{}", self.query());
        self.steers.numbered += 1;
        let number = self.steers.numbered;
        self.send(ctx, Pending::Steer(number), "POST", path, body);
        self.steers.sent.push_back(SentSteer {
            number,
            text: prompt.text.clone(),
            message_id: None,
        });
        Ok(Steering::Awaiting(number))
    }
}
