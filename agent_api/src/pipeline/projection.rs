//! The one shared projection from the universal transcript to bounded wrapper events.
//!
//! It keeps a little state per open item (what kind it is, whose text it streams) so that a
//! delta becomes the right wrapper event. It never copies `raw`, tool inputs, outputs or diffs
//! into a wrapper event, and every event it returns has passed [`crate::run::enforce`].
//!
//! Assistant answer text is held per message and goes out as `text_output` when the message
//! completes: a message that fails (its stream was cut and the agent started over, or the run
//! ended under it) is not an answer, so its text never reaches the wrapper view. Reasoning, user
//! and system text stream as their deltas arrive. A projector made with
//! [`Projector::streaming_answers`] streams answer text too, delta by delta (each `text_output`
//! names its message in `data.item_id`), and takes back a message that gets cut with a `status`
//! event whose data is `{retracted:{item_id, bytes}}` ([`AgentWrapperEvent::retraction`]).

use std::sync::Arc;

use foldhash::HashMap;

use serde_json::json;

use crate::guards::bounds;
use crate::vocabulary::answer::{AnswerDelta, AnswerText};
use crate::vocabulary::event::{
    AgentWrapperEvent, AgentWrapperEventKind as Kind, Channel, PermissionFacet, QuestionFacet,
};
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::tools_facet::{FacetKind, ToolBytes, ToolPhase, ToolStatus, ToolsFacet};
use crate::vocabulary::universal::{
    ContentPart, ItemKind, ItemRole, ItemStatus, ToolMeta, UniversalEvent,
    UniversalEventBody as Body, UniversalItem,
};

/// Turns universal events into wrapper events for one run.
pub struct Projector {
    agent_kind: AgentKind,
    tools_structured: bool,
    items: HashMap<String, Tracked>,
    /// Set when answer text streams: it follows the answer messages instead of `items`.
    streamed: Option<AnswerText>,
}

/// What the projector keeps of an open item: an assistant answer the text it streamed so far,
/// another message its channel; a tool item is kept whole, for the tools facet of its deltas.
enum Tracked {
    Answer(String),
    Message(Channel),
    Tool(Arc<UniversalItem>),
    Other,
}

impl Tracked {
    fn of(item: &Arc<UniversalItem>) -> Self {
        match item.kind {
            // The transcript merges an answer's waiting deltas by the same test.
            ItemKind::Message if item.is_answer() => Tracked::Answer(String::new()),
            ItemKind::Message => match item.role {
                Some(ItemRole::User) => Tracked::Message(Channel::User),
                Some(ItemRole::System) => Tracked::Message(Channel::System),
                _ => Tracked::Message(Channel::Reasoning),
            },
            ItemKind::ToolCall | ItemKind::ToolResult => Tracked::Tool(item.clone()),
            _ => Tracked::Other,
        }
    }
}

/// Most answer bytes held per message (the transcript keeps no more of an item's text either).
const HELD_TEXT_LIMIT: usize = 8 * 1024 * 1024;

impl Projector {
    /// A projector for a backend; `tools_structured` attaches the tools facet to tool events.
    pub fn new(agent_kind: AgentKind, tools_structured: bool) -> Self {
        Self {
            agent_kind,
            tools_structured,
            items: HashMap::default(),
            streamed: None,
        }
    }

    /// Streams assistant answer text as its deltas arrive instead of holding it until its
    /// message completes; a message that gets cut is then taken back by a retraction event
    /// (see the module docs). What [`crate::RunHandle::into_wrapper_streaming`] uses.
    pub fn streaming_answers(mut self) -> Self {
        self.streamed = Some(AnswerText::new());
        self
    }

    /// The wrapper events for one universal event, bounded, in order (often none or one).
    pub fn project(&mut self, event: &UniversalEvent) -> Vec<AgentWrapperEvent> {
        let mut out = Vec::new();
        self.project_into(event, &mut out);
        out
    }

    /// [`Projector::project`], appending to `out` (no allocation per event).
    pub fn project_into(
        &mut self,
        event: &UniversalEvent,
        out: &mut impl Extend<AgentWrapperEvent>,
    ) {
        if let Some(projected) = self.projected(event) {
            crate::vocabulary::event::enforce_into(projected, out);
        }
    }

    fn projected(&mut self, event: &UniversalEvent) -> Option<AgentWrapperEvent> {
        if let Some(piece) = self
            .streamed
            .as_mut()
            .and_then(|answers| answers.push(event))
        {
            return Some(match piece {
                AnswerDelta::Text { item_id, text } => self
                    .event(Kind::TextOutput)
                    .with_channel(Channel::Assistant)
                    .with_text(text)
                    .with_data(json!({ "item_id": item_id })),
                AnswerDelta::Retracted { item_id, bytes } => {
                    let data = json!({ "retracted": { "item_id": item_id, "bytes": bytes } });
                    self.status(
                        Channel::Status,
                        "an assistant message was cut: its streamed text is taken back",
                    )
                    .with_data(data)
                }
            });
        }
        match &event.body {
            Body::SessionStarted(_) => {
                let data = json!({ "session_id": event.session_id, "native_session_id": event.native_session_id });
                Some(
                    self.status(Channel::Status, "session started")
                        .with_data(data),
                )
            }
            Body::SessionEnded(end) => {
                let reason = serde_json::to_value(end.reason).unwrap_or_default();
                let by = serde_json::to_value(end.terminated_by).unwrap_or_default();
                let message = format!("session ended: {}", reason.as_str().unwrap_or("unknown"));
                let data = json!({ "reason": reason, "terminated_by": by, "exit_code": end.exit_code, "native_session_id": event.native_session_id });
                Some(self.status(Channel::Status, message).with_data(data))
            }
            // A streamed answer is followed by `streamed` alone.
            Body::ItemStarted(data) if self.streamed.is_some() && data.item.is_answer() => None,
            Body::ItemStarted(data) => {
                self.items
                    .insert(data.item.item_id.clone(), Tracked::of(&data.item));
                self.tool_event(&data.item, ToolPhase::Start, event)
            }
            Body::ItemDelta(delta) => self.delta(&delta.item_id, &delta.delta, event),
            Body::ItemCompleted(data) => {
                let tracked = self.items.remove(&data.item.item_id);
                self.completed(&data.item, tracked, event)
            }
            Body::Error(err) if err.is_terminal() => {
                let ev = self
                    .event(Kind::Error)
                    .with_channel(Channel::Error)
                    .with_message(err.message.clone());
                Some(match &err.code {
                    Some(code) => ev.with_data(json!({ "code": code })),
                    None => ev,
                })
            }
            Body::Error(err) => {
                let ev = self.status(Channel::Error, err.message.clone());
                Some(match &err.code {
                    Some(code) => ev.with_data(json!({ "code": code })),
                    None => ev,
                })
            }
            Body::PermissionRequested(p) | Body::PermissionResolved(p) => {
                let facet = PermissionFacet {
                    id: p.permission_id.clone(),
                    action: p.action.clone(),
                    status: p.status,
                    category: p.category,
                    tool_name: p.tool_name.clone(),
                    details: p.details.clone(),
                    decided_by: p.decided_by,
                };
                let status = serde_json::to_value(p.status).unwrap_or_default();
                let message = format!(
                    "permission {}: {}",
                    status.as_str().unwrap_or("unknown"),
                    p.action
                );
                Some(
                    self.status(Channel::Permission, message)
                        .with_data(json!({ "permission": facet })),
                )
            }
            Body::QuestionRequested(q) | Body::QuestionResolved(q) => {
                let facet = QuestionFacet {
                    id: q.question_id.clone(),
                    prompt: q.prompt.clone(),
                    options: q.options.clone(),
                    status: q.status,
                    response: q.response.clone(),
                    call_id: q.call_id.clone(),
                    decided_by: q.decided_by,
                };
                let data = json!({ "question": facet });
                let message = match (&event.body, &q.response) {
                    (Body::QuestionRequested(_), _) => format!("question: {}", q.prompt),
                    (_, Some(response)) => format!("question answered: {response}"),
                    (_, None) => "question rejected".to_string(),
                };
                Some(self.status(Channel::Question, message).with_data(data))
            }
            Body::AgentUnparsed(u) => {
                let ev = self
                    .event(Kind::Unknown)
                    .with_channel(Channel::Status)
                    .with_message(format!("unparsed native payload: {}", u.error));
                Some(ev.with_data(json!({ "location": u.location })))
            }
        }
    }

    fn event(&self, kind: Kind) -> AgentWrapperEvent {
        AgentWrapperEvent::new(self.agent_kind.clone(), kind)
    }

    fn status(&self, channel: Channel, message: impl Into<String>) -> AgentWrapperEvent {
        self.event(Kind::Status)
            .with_channel(channel)
            .with_message(message)
    }

    fn delta(
        &mut self,
        item_id: &str,
        text: &str,
        event: &UniversalEvent,
    ) -> Option<AgentWrapperEvent> {
        // An answer's delta (most of them) costs one lookup.
        if let Some(Tracked::Answer(held)) = self.items.get_mut(item_id) {
            let room = HELD_TEXT_LIMIT.saturating_sub(held.len());
            let kept = bounds::utf8_prefix(text, room);
            if held.capacity() == 0 {
                held.reserve(kept.len().max(crate::pipeline::transcript::STREAM_START));
            }
            held.push_str(kept);
            return None;
        }
        match self.items.get(item_id)? {
            Tracked::Answer(_) => None,
            Tracked::Message(channel) => Some(
                self.event(Kind::TextOutput)
                    .with_channel(channel.clone())
                    .with_text(text),
            ),
            Tracked::Tool(item) => self.tool_event(item, ToolPhase::Delta, event),
            Tracked::Other => None,
        }
    }

    fn completed(
        &self,
        item: &UniversalItem,
        tracked: Option<Tracked>,
        event: &UniversalEvent,
    ) -> Option<AgentWrapperEvent> {
        if let Some(Tracked::Answer(text)) =
            tracked.filter(|t| matches!(t, Tracked::Answer(text) if !text.is_empty()))
        {
            return Some(match item.status {
                ItemStatus::Failed => {
                    let data =
                        json!({ "discarded": { "item_id": item.item_id, "bytes": text.len() } });
                    self.status(
                        Channel::Status,
                        "an unfinished assistant message was discarded",
                    )
                    .with_data(data)
                }
                _ => self
                    .event(Kind::TextOutput)
                    .with_channel(Channel::Assistant)
                    .with_text(text),
            });
        }
        match item.kind {
            ItemKind::ToolCall | ItemKind::ToolResult => {
                let phase = if item.status == ItemStatus::Failed {
                    ToolPhase::Fail
                } else {
                    ToolPhase::Complete
                };
                self.tool_event(item, phase, event)
            }
            ItemKind::Status | ItemKind::System => {
                Some(self.status(Channel::Status, status_text(item)))
            }
            ItemKind::Unknown => Some(
                self.event(Kind::Unknown)
                    .with_channel(Channel::Status)
                    .with_message("an item the backend could not classify"),
            ),
            // Message text already streamed as deltas (the delta policy guarantees one).
            _ => None,
        }
    }

    fn tool_event(
        &self,
        item: &UniversalItem,
        phase: ToolPhase,
        event: &UniversalEvent,
    ) -> Option<AgentWrapperEvent> {
        let kind = match item.kind {
            ItemKind::ToolCall => Kind::ToolCall,
            ItemKind::ToolResult => Kind::ToolResult,
            _ => return None,
        };
        let mut ev = self.event(kind).with_channel(Channel::Tool);
        if self.tools_structured {
            ev = ev.with_tools_facet(facet(item, phase, event));
        }
        Some(ev)
    }
}

/// Builds the tools facet from an item: metadata only, never contents.
fn facet(item: &UniversalItem, phase: ToolPhase, event: &UniversalEvent) -> ToolsFacet {
    let no_meta = ToolMeta::default();
    let meta = item.tool.as_ref().unwrap_or(&no_meta);
    let mut call_id = None;
    let mut name = None;
    let mut bytes = ToolBytes {
        diff: 0,
        result: 0,
        ..meta.bytes
    };
    for part in &item.content {
        match part {
            ContentPart::ToolCall {
                name: n,
                call_id: c,
                ..
            } => {
                name = Some(n.clone());
                call_id = Some(c.clone());
            }
            ContentPart::ToolResult { call_id: c, output } => {
                call_id = Some(c.clone());
                bytes.result += output.len() as u64;
            }
            ContentPart::FileRef { diff: Some(d), .. } => bytes.diff += d.len() as u64,
            _ => {}
        }
    }
    bytes.diff = bytes.diff.max(meta.bytes.diff);
    bytes.result = bytes.result.max(meta.bytes.result);
    let default_kind = if item.kind == ItemKind::ToolCall {
        FacetKind::ToolUse
    } else {
        FacetKind::ToolResult
    };
    let kind = if meta.kind.is_empty() {
        default_kind.into()
    } else {
        meta.kind.clone()
    };
    let status = match (phase, item.status) {
        (ToolPhase::Fail, _) | (_, ItemStatus::Failed) => ToolStatus::Failed,
        (ToolPhase::Complete, _) => ToolStatus::Completed,
        _ => ToolStatus::Running,
    };
    ToolsFacet::new(kind, phase, status)
        .backend_item_id(item.native_item_id.clone())
        .thread_id(event.native_session_id.as_deref().map(str::to_string))
        .turn_id(meta.turn_id.clone())
        .exit_code(meta.exit_code)
        .bytes(bytes)
        .tool_name(meta.tool_name.clone().or(name))
        .tool_use_id(call_id)
        // Commands carry keys often enough (`curl -H "Authorization: Bearer …"`): wrapper events never show one.
        .command(
            meta.command
                .as_deref()
                .map(|c| crate::guards::secrets::redact(c).into_owned()),
        )
        .cwd(
            meta.cwd
                .as_deref()
                .map(|c| crate::guards::secrets::redact(c).into_owned()),
        )
}

fn status_text(item: &UniversalItem) -> String {
    for part in &item.content {
        if let ContentPart::Status { label, detail } = part {
            return match detail {
                Some(d) => format!("{label}: {d}"),
                None => label.clone(),
            };
        }
    }
    let text = item.text();
    if text.is_empty() {
        "status".to_string()
    } else {
        text
    }
}

impl std::fmt::Debug for Projector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projector")
            .field("agent_kind", &self.agent_kind)
            .field("open_items", &self.items.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::transcript::{NewItem, Transcript};

    fn texts(events: &[AgentWrapperEvent]) -> Vec<(String, String)> {
        events
            .iter()
            .filter(|e| e.kind == Kind::TextOutput)
            .map(|e| {
                (
                    e.channel
                        .as_ref()
                        .map(|c| c.to_string())
                        .unwrap_or_default(),
                    e.text.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn answer_text_goes_out_when_its_message_completes_and_a_failed_message_gives_none() {
        let mut projector = Projector::new(AgentKind::from_static("my_agent"), false);
        let (mut t, answer) = crate::pipeline::transcript::cut_then_answering("sess_projtest");
        let events: Vec<_> = t.drain().flat_map(|e| projector.project(&e)).collect();
        assert_eq!(
            texts(&events),
            [("reasoning".to_string(), "hmm".to_string())],
            "reasoning streams; answers wait"
        );
        let discarded: Vec<_> = events
            .iter()
            .filter_map(|e| e.data.as_ref()?.get("discarded").cloned())
            .collect();
        assert_eq!(discarded.len(), 1);
        assert_eq!(discarded[0]["bytes"], 3);
        t.complete_item(&answer);
        let events: Vec<_> = t.drain().flat_map(|e| projector.project(&e)).collect();
        assert_eq!(
            texts(&events),
            [("assistant".to_string(), "Hello world".to_string())]
        );
    }

    #[test]
    fn a_streaming_projector_streams_answer_text_and_retracts_a_cut_message() {
        let mut projector =
            Projector::new(AgentKind::from_static("my_agent"), false).streaming_answers();
        let mut t = Transcript::new("sess_projtest".into(), false);
        let cut = t.start_item(NewItem::message(ItemRole::Assistant));
        t.delta(&cut, "Hel");
        let events: Vec<_> = t.drain().flat_map(|e| projector.project(&e)).collect();
        assert_eq!(
            texts(&events),
            [("assistant".to_string(), "Hel".to_string())],
            "the delta goes out at once"
        );
        assert_eq!(
            events.last().unwrap().data.as_ref().unwrap()["item_id"],
            cut.as_str()
        );
        t.fail_item(&cut);
        let answer = t.start_item(NewItem::message(ItemRole::Assistant));
        t.delta(&answer, "Hello ");
        t.delta(&answer, "world");
        t.complete_item(&answer);
        let events: Vec<_> = t.drain().flat_map(|e| projector.project(&e)).collect();
        let retraction = events[0]
            .retraction()
            .expect("the cut message is taken back first");
        assert_eq!(
            (retraction.item_id.as_str(), retraction.bytes),
            (cut.as_str(), 3)
        );
        let streamed = [
            ("assistant".to_string(), "Hello ".to_string()),
            ("assistant".to_string(), "world".to_string()),
        ];
        assert_eq!(
            texts(&events),
            streamed,
            "delta by delta, and not again when the message completes"
        );
    }
}
