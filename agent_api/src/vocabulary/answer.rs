//! [`AnswerText`]: the agent's answer text, delta by delta, out of the universal view.
//!
//! Which view for what: the wrapper view ([`crate::RunHandle::into_wrapper`]) shows an answer once
//! it is sure (whole, when its message completes), or as it streams with
//! [`crate::RunHandle::into_wrapper_streaming`]; the universal view
//! ([`crate::RunHandle::into_universal`]) is the whole transcript, and [`AnswerText`] picks the
//! answer's text out of it as it streams. Either way a streamed message can still be cut (a stream
//! error the agent retries, an interrupt): its text is then taken back ([`AnswerDelta::Retracted`]),
//! since a cut message is not an answer.
//!
//! ```
//! # async fn show(handle: agent_api::RunHandle) -> Result<(), agent_api::AgentError> {
//! use agent_api::run::{AnswerDelta, AnswerText};
//! use futures::StreamExt;
//! use std::io::Write;
//!
//! let (mut events, completion) = handle.into_universal();
//! let mut answer = AnswerText::new();
//! while let Some(event) = events.next().await {
//!     match answer.push(&event) {
//!         Some(AnswerDelta::Text { text, .. }) => {
//!             print!("{text}");
//!             std::io::stdout().flush().ok();
//!         }
//!         Some(AnswerDelta::Retracted { .. }) => println!("\n[that message was cut; the agent starts over]"),
//!         _ => {} // every other event is still here to read
//!     }
//! }
//! println!();
//! completion.await?;
//! # Ok(()) }
//! ```

use foldhash::HashMap;

use crate::vocabulary::universal::{ItemStatus, UniversalEvent, UniversalEventBody as Body};

/// A piece of the answer that [`AnswerText::push`] found in one universal event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerDelta<'a> {
    /// More answer text, of the message `item_id`.
    Text {
        /// The answer message the text belongs to.
        item_id: &'a str,
        /// The text, in the order it streamed.
        text: &'a str,
    },
    /// The message `item_id` was cut: the `bytes` of text it streamed are not an answer.
    Retracted {
        /// The message that was cut.
        item_id: &'a str,
        /// How many bytes of text it had streamed (UTF-8), all of which are taken back.
        bytes: usize,
    },
}

/// Follows a run's universal events and gives its answer text as it streams (see the module
/// docs). It keeps one number per answer message that is open, nothing else.
#[derive(Debug, Default, Clone)]
pub struct AnswerText {
    /// The answer messages open now, with the bytes each has streamed.
    open: HashMap<String, usize>,
}

impl AnswerText {
    /// A follower with nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The answer text `event` carries, or the retraction of a message it cuts; `None` for every
    /// other event (reasoning, user text, tools, statuses).
    pub fn push<'a>(&mut self, event: &'a UniversalEvent) -> Option<AnswerDelta<'a>> {
        match &event.body {
            Body::ItemStarted(d) if d.item.is_answer() => {
                self.open.insert(d.item.item_id.clone(), 0);
                None
            }
            Body::ItemDelta(d) => {
                let streamed = self.open.get_mut(&*d.item_id)?;
                *streamed += d.delta.len();
                Some(AnswerDelta::Text {
                    item_id: &d.item_id,
                    text: &d.delta,
                })
            }
            Body::ItemCompleted(d) => {
                let streamed = self.open.remove(&d.item.item_id)?;
                (d.item.status == ItemStatus::Failed && streamed > 0).then_some(
                    AnswerDelta::Retracted {
                        item_id: &d.item.item_id,
                        bytes: streamed,
                    },
                )
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_deltas_stream_and_a_cut_message_is_retracted_whole() {
        let (mut t, answer) = crate::pipeline::transcript::cut_then_answering("sess_answertest");
        t.complete_item(&answer);
        let events: Vec<_> = t.drain().collect();
        let mut follower = AnswerText::new();
        let pieces: Vec<String> = events
            .iter()
            .filter_map(|e| follower.push(e))
            .map(|piece| match piece {
                AnswerDelta::Text { text, .. } => text.to_string(),
                AnswerDelta::Retracted { bytes, .. } => format!("<-{bytes}"),
            })
            .collect();
        assert_eq!(
            pieces,
            ["Hel", "<-3", "Hello ", "world"],
            "reasoning is not answer text"
        );
        assert!(
            follower.open.is_empty(),
            "nothing is kept once the messages end"
        );
    }
}
