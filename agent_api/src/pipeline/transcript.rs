//! [`Transcript`]: turns what a backend observed into gap-free universal events, applying the
//! synthetic-event rules of `spec/universal-schema.md`.

use std::sync::Arc;

use foldhash::HashMap;

use serde_json::Value;

use crate::vocabulary::error::AgentError;
use crate::vocabulary::universal::*;

mod content;
mod inputs;
mod masking;
mod native_index;
mod requests;

use content::{fill_assembled, streamable_text};
pub use inputs::{NewItem, SessionEnd, TranscriptLimits};
use native_index::NativeIndex;

/// Bytes reserved for an item's text at its first delta (instead of doubling from a few).
pub(crate) const STREAM_START: usize = 256;

struct OpenItem {
    /// Shared with the item's `item.started` event; copied on a change only while that event
    /// is still held somewhere.
    item: Arc<UniversalItem>,
    /// The item's ids, shared with every delta of the item instead of copied into each.
    id: Arc<str>,
    native_id: Option<Arc<str>>,
    assembled: String,
    had_delta: bool,
    synthetic: bool,
}

/// The status label of a retry notice: the agent retries by itself (a model request, the
/// network) and has made no progress by it.
pub const RETRY_STATUS: &str = "api_retry";

/// The state of one session's universal transcript.
///
/// Backends call its methods as they parse native lines; the run driver drains the resulting
/// events after each line. Synthetic events are added here, never by backends:
/// a `session.started` before anything else, a stub `item.started` for a delta whose item is
/// unknown, one synthetic delta before a message completes without native deltas, failed
/// completions for items still open at the end, and denials for unanswered HITL requests.
///
/// ```
/// use agent_api::universal::ItemRole;
/// use agent_api::kit::transcript::{NewItem, SessionEnd, Transcript};
/// let mut t = Transcript::new("sess_1".into(), false);
/// let id = t.start_item(NewItem::message(ItemRole::Assistant));
/// t.delta(&id, "Hel");
/// t.delta(&id, "lo");
/// t.complete_item(&id);
/// t.end(SessionEnd::completed());
/// let types: Vec<_> = t.drain().map(|e| e.type_name()).collect();
/// assert_eq!(types, ["session.started", "item.started", "item.delta", "item.delta", "item.completed", "session.ended"]);
/// ```
pub struct Transcript {
    // Shared with every event (ids and short deltas are inline): an event's envelope costs no allocation.
    session_id: Arc<str>,
    /// What every event id of the session starts with.
    id_prefix: EventId,
    native_session_id: Option<Arc<str>>,
    include_raw: bool,
    limits: TranscriptLimits,
    next_sequence: u64,
    next_item: u64,
    started: bool,
    ended: bool,
    raw: Option<Arc<Value>>,
    /// Ids of the open items, oldest first; the same allocations as `items`' keys.
    open: Vec<Arc<str>>,
    items: HashMap<Arc<str>, OpenItem>,
    by_native: NativeIndex,
    /// The provider and daemon ids of the item last opened with a provider id, while it is
    /// open: most lines of a stream name the item opened just before (two hash lookups saved).
    last_opened: Option<(Arc<str>, Arc<str>)>,
    permissions: HashMap<String, PermissionEventData>,
    questions: HashMap<String, QuestionEventData>,
    last_assistant_text: Option<String>,
    closing: bool,
    timed_out: bool,
    /// Who decides the answers given through the controls, when not the caller.
    decider: Option<DecidedBy>,
    /// Bumped whenever a permission request or question is asked or resolved.
    requests_changed: u64,
    /// The time of the events emitted at this moment ([`Transcript::next_moment`]): read and
    /// formatted once for all of them.
    now: Option<Arc<str>>,
    events: Vec<UniversalEvent>,
    /// Events emitted by retry notices (`api_retry` statuses) since the driver last asked
    /// ([`Transcript::take_retry_events`]): a batch of nothing else is no progress.
    retry_events: usize,
    /// Events the caller is done with, back from the driver's earlier batches: each new event
    /// frees one (see [`Transcript::take_events_reusing`]).
    spent: Vec<UniversalEvent>,
}

impl Transcript {
    /// A new transcript for `session_id`; `include_raw` fills each event's `raw`.
    pub fn new(session_id: String, include_raw: bool) -> Self {
        Self {
            id_prefix: EventId::prefix_for(&session_id),
            session_id: session_id.into(),
            native_session_id: None,
            include_raw,
            limits: TranscriptLimits::default(),
            next_sequence: 1,
            next_item: 1,
            started: false,
            ended: false,
            raw: None,
            open: Vec::new(),
            items: HashMap::default(),
            by_native: NativeIndex::default(),
            last_opened: None,
            permissions: HashMap::default(),
            questions: HashMap::default(),
            last_assistant_text: None,
            closing: false,
            timed_out: false,
            decider: None,
            requests_changed: 0,
            now: None,
            events: Vec::new(),
            retry_events: 0,
            spent: Vec::new(),
        }
    }

    /// Replaces the memory limits.
    pub fn with_limits(mut self, limits: TranscriptLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The daemon session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The provider's session id, once known.
    pub fn native_session_id(&self) -> Option<&str> {
        self.native_session_id.as_deref()
    }

    /// Records the provider's session id; later events carry it.
    pub fn set_native_session_id(&mut self, id: impl Into<String>) {
        self.native_session_id = Some(Arc::from(id.into()));
    }

    /// Sets the native payload that events emitted from now on derive from (the driver sets it
    /// for each native line and clears it after).
    pub fn set_raw(&mut self, raw: Option<Arc<Value>>) {
        self.raw = raw;
    }

    /// The native payload events emitted now derive from, when the run shows raw payloads.
    pub fn raw(&self) -> Option<&Arc<Value>> {
        self.raw.as_ref()
    }

    /// How many events were emitted and not yet drained.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// Whether `session.ended` was emitted.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The text of the last assistant answer message that completed.
    pub fn last_assistant_text(&self) -> Option<&str> {
        self.last_assistant_text.as_deref()
    }

    /// The daemon id of the item with this provider id, if it is known.
    pub fn item_by_native(&self, native_item_id: &str) -> Option<&str> {
        self.by_native.get(native_item_id)
    }

    /// The daemon id of the open item with this provider id, shared (no allocation): what a
    /// backend streams deltas to.
    pub fn open_item_by_native(&self, native_item_id: &str) -> Option<Arc<str>> {
        if let Some((native, id)) = &self.last_opened {
            if **native == *native_item_id {
                return Some(id.clone());
            }
        }
        self.items
            .get(self.by_native.get(native_item_id)?)
            .map(|open| open.id.clone())
    }

    /// The current state of an open item.
    pub fn open_item(&self, item_id: &str) -> Option<&UniversalItem> {
        self.items.get(item_id).map(|o| &*o.item)
    }

    /// Ids of items still open, oldest first.
    pub fn open_items(&self) -> impl Iterator<Item = &str> + '_ {
        self.open.iter().map(|id| &**id)
    }

    /// Takes the events emitted so far, as one batch (without moving them again).
    pub fn take_events(&mut self) -> Vec<UniversalEvent> {
        self.take_events_reusing(None, usize::MAX)
    }

    /// [`Transcript::take_events`], at most `max` of them (the oldest; the rest wait for the
    /// next batch), gathering the next batch in `spare` (an earlier batch, back with its spent
    /// events) when its room fits about as many events as this batch had.
    ///
    /// The spent events are not freed at once: each event built from now on frees one. Freed
    /// together, a batch's events overflowed the allocator's per-thread cache of each size, and
    /// every free and the next batch's every allocation took its slow path; one freed per one
    /// built, the cache hands each freed block to the next allocation of its size.
    pub(crate) fn take_events_reusing(
        &mut self,
        spare: Option<Vec<UniversalEvent>>,
        max: usize,
    ) -> Vec<UniversalEvent> {
        self.now = None;
        // The batch back becomes the spent events; the vector they were in before (emptied: what
        // is left of that earlier batch is freed now) gathers the next batch.
        let spare = spare.map(|mut spare| {
            self.spent.clear();
            std::mem::swap(&mut self.spent, &mut spare);
            spare
        });
        if self.events.len() > max {
            // Rare (one native line made more events than a batch holds): the rest stay here,
            // in order, ahead of whatever comes next.
            let rest = self.events.split_off(max);
            return std::mem::replace(&mut self.events, rest);
        }
        let len = self.events.len();
        // The next batch is likely about as long as this one (a batch ends at the line that
        // takes it past its size, and a line may add a few events): room for that at once,
        // instead of a vector grown by doubling that moves every event again at each step.
        // Room much larger would count against the byte budget for nothing.
        let room = len + len / 4;
        let next = match spare {
            Some(spare) if spare.is_empty() && (len..=2 * room).contains(&spare.capacity()) => {
                spare
            }
            _ => Vec::with_capacity(room),
        };
        std::mem::replace(&mut self.events, next)
    }

    /// What is emitted from now on is stamped anew: the events of one moment (the lines read
    /// together, a command handled) share a time, and the next moment's do not take it over,
    /// even where the earlier events still wait to be taken (a session's between its turns).
    pub(crate) fn next_moment(&mut self) {
        self.now = None;
    }

    /// Takes the events emitted so far.
    pub fn drain(&mut self) -> std::vec::Drain<'_, UniversalEvent> {
        // Events drained together were emitted together: they share one timestamp.
        self.now = None;
        self.events.drain(..)
    }

    fn emit(&mut self, source: EventSource, body: UniversalEventBody) {
        if self.ended {
            return;
        }
        if !self.started {
            self.started = true;
            if !matches!(body, UniversalEventBody::SessionStarted(_)) {
                self.push(
                    EventSource::Daemon,
                    UniversalEventBody::SessionStarted(SessionStartedData::default()),
                );
            }
        }
        self.push(source, body);
    }

    /// The id of this session's event at `sequence`.
    pub(crate) fn event_id(&self, sequence: u64) -> EventId {
        EventId::numbered(&self.id_prefix, sequence)
    }

    fn push(&mut self, source: EventSource, mut body: UniversalEventBody) {
        masking::mask_body(&mut body);
        drop(self.spent.pop());
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.events.push(UniversalEvent {
            event_id: self.event_id(sequence),
            sequence,
            time: self.now.get_or_insert_with(|| now_rfc3339().into()).clone(),
            session_id: self.session_id.clone(),
            native_session_id: self.native_session_id.clone(),
            synthetic: source == EventSource::Daemon,
            source,
            body,
            raw: if self.include_raw {
                self.raw.clone()
            } else {
                None
            },
        });
    }

    /// The agent reported the start of its session. A repeated start (some agents repeat it
    /// every turn) is ignored; returns whether an event was emitted.
    pub fn session_started(&mut self, metadata: Option<Value>) -> bool {
        if self.started {
            return false;
        }
        self.emit(
            EventSource::Agent,
            UniversalEventBody::SessionStarted(SessionStartedData { metadata }),
        );
        true
    }

    /// Opens an item and emits `item.started`; returns its daemon id.
    pub fn start_item(&mut self, new: NewItem) -> String {
        let mut item_id = String::with_capacity(4 + 20);
        item_id.push_str("itm_");
        item_id.push_str(itoa::Buffer::new().format(self.next_item));
        self.next_item += 1;
        let item = UniversalItem {
            item_id: item_id.clone(),
            native_item_id: new.native_item_id,
            parent_id: new.parent_id,
            kind: new.kind,
            role: new.role,
            content: new.content,
            status: ItemStatus::InProgress,
            tool: new.tool,
        };
        let source = if new.synthetic {
            EventSource::Daemon
        } else {
            EventSource::Agent
        };
        let (id, native_id): (Arc<str>, Option<Arc<str>>) = (
            Arc::from(item_id.as_str()),
            item.native_item_id.as_deref().map(Arc::from),
        );
        if let Some(native) = &native_id {
            self.by_native.insert(native.clone(), id.clone());
            self.last_opened = Some((native.clone(), id.clone()));
        }
        let item = Arc::new(item);
        self.emit(
            source,
            UniversalEventBody::ItemStarted(ItemEventData { item: item.clone() }),
        );
        self.open.push(id.clone());
        let open = OpenItem {
            item,
            id,
            native_id,
            assembled: String::new(),
            had_delta: false,
            synthetic: new.synthetic,
        };
        self.items.insert(open.id.clone(), open);
        item_id
    }

    /// Streams a fragment of an open item's content. Unknown or closed items are ignored.
    /// An owned `text` becomes the event's without a copy; a borrowed one is copied only when
    /// it becomes an event of its own (not when it joins a waiting delta).
    pub fn delta(&mut self, item_id: &str, text: impl AsRef<str> + Into<String>) {
        self.delta_from(EventSource::Agent, item_id, text);
    }

    fn delta_from(
        &mut self,
        source: EventSource,
        item_id: &str,
        text: impl AsRef<str> + Into<String>,
    ) {
        let max = self.limits.max_item_text;
        let Some(open) = self.items.get_mut(item_id) else {
            tracing::debug!(item_id, "delta for an item that is not open");
            return;
        };
        if let std::borrow::Cow::Owned(masked) = masking::mask_delta(open.item.kind, text.as_ref())
        {
            // A tool's streamed output with a key in it: the masked text takes its place.
            return self.delta_from(source, item_id, masked);
        }
        open.had_delta = true;
        let room = max.saturating_sub(open.assembled.len());
        let kept = crate::guards::bounds::utf8_prefix(text.as_ref(), room);
        if open.assembled.capacity() == 0 {
            // A streamed item usually takes many deltas: start with room for a few.
            open.assembled.reserve(kept.len().max(STREAM_START));
        }
        open.assembled.push_str(kept);
        let delta = if text.as_ref().len() <= DeltaText::INLINE {
            // Kept inline: an owned text's allocation would only be freed.
            DeltaText::from(text.as_ref())
        } else {
            DeltaText::from(text.into())
        };
        let (item_id, native_item_id) = (open.id.clone(), open.native_id.clone());
        self.emit(
            source,
            UniversalEventBody::ItemDelta(ItemDeltaData {
                item_id,
                native_item_id,
                delta,
            }),
        );
    }

    /// Streams a fragment for the item with this provider id; when that item is not known yet,
    /// opens `stub()` first as a synthetic item (the ordering rule). Returns the daemon id.
    pub fn delta_native(
        &mut self,
        native_item_id: &str,
        text: &str,
        stub: impl FnOnce() -> NewItem,
    ) -> String {
        let item_id = match self.by_native.get(native_item_id) {
            Some(id) if self.items.contains_key(id) => id.to_string(),
            _ => self.start_item(stub().native(native_item_id).synthetic()),
        };
        self.delta(&item_id, text);
        item_id
    }

    /// Changes an open item without emitting an event (for example to add tool metadata that
    /// arrives before completion).
    pub fn update_item(&mut self, item_id: &str, change: impl FnOnce(&mut UniversalItem)) {
        if let Some(open) = self.items.get_mut(item_id) {
            change(Arc::make_mut(&mut open.item));
        }
    }

    /// Completes an open item with the content it assembled from deltas.
    pub fn complete_item(&mut self, item_id: &str) {
        self.close_item(item_id, ItemStatus::Completed, None);
    }

    /// Completes an open item with final `content` (which replaces what deltas assembled).
    pub fn complete_item_with(&mut self, item_id: &str, content: Vec<ContentPart>) {
        self.close_item(item_id, ItemStatus::Completed, Some(content));
    }

    /// Completes an open item as failed.
    pub fn fail_item(&mut self, item_id: &str) {
        self.close_item(item_id, ItemStatus::Failed, None);
    }

    fn close_item(&mut self, item_id: &str, status: ItemStatus, content: Option<Vec<ContentPart>>) {
        let Some(open) = self.items.remove(item_id) else {
            tracing::debug!(item_id, "completion for an item that is not open");
            return;
        };
        self.open.retain(|id| **id != *item_id);
        if self
            .last_opened
            .as_ref()
            .is_some_and(|(_, id)| *id == open.id)
        {
            self.last_opened = None;
        }
        let mut item = match Arc::try_unwrap(open.item) {
            Ok(item) => item,
            // Its `item.started` still holds it (in a batch not handed over or not read yet):
            // a copy, without the content that the final `content` replaces anyway (a tool
            // call's or result's strings copied only to be dropped).
            Err(shared) => UniversalItem {
                item_id: shared.item_id.clone(),
                native_item_id: shared.native_item_id.clone(),
                parent_id: shared.parent_id.clone(),
                kind: shared.kind,
                role: shared.role,
                content: match content {
                    Some(_) => Vec::new(),
                    None => shared.content.clone(),
                },
                status: shared.status,
                tool: shared.tool.clone(),
            },
        };
        if let Some(native) = &item.native_item_id {
            let native = match &open.native_id {
                Some(shared) if **shared == **native => shared.clone(),
                _ => Arc::from(native.as_str()),
            };
            self.by_native.closed(native, open.id.clone());
        }
        item.content = match content {
            Some(content) => content,
            None => fill_assembled(item.content, &open.assembled, open.had_delta),
        };
        item.status = status;
        if item.kind == ItemKind::Message && !open.had_delta {
            // The delta policy: every message streams; without native deltas, one synthetic
            // delta with the full content comes right before the completion.
            let full = streamable_text(&item);
            if !full.is_empty() {
                self.emit(
                    EventSource::Daemon,
                    UniversalEventBody::ItemDelta(ItemDeltaData {
                        item_id: open.id.clone(),
                        native_item_id: open.native_id.clone(),
                        delta: full.into(),
                    }),
                );
            }
        }
        if item.kind == ItemKind::Message
            && item.role == Some(ItemRole::Assistant)
            && !item.is_reasoning()
            && status == ItemStatus::Completed
        {
            let text = item.text();
            // A message that only carried tool calls is not an answer.
            if !text.is_empty() {
                self.last_assistant_text = Some(text);
            }
        }
        // A made-up item completes as made up; so does one the daemon fails at the end.
        let source = if open.synthetic || self.closing {
            EventSource::Daemon
        } else {
            EventSource::Agent
        };
        self.emit(
            source,
            UniversalEventBody::ItemCompleted(ItemEventData {
                item: Arc::new(item),
            }),
        );
    }

    /// A whole message at once: `item.started`, one delta, `item.completed`.
    pub fn message(&mut self, new: NewItem, text: &str) -> String {
        let synthetic = new.synthetic;
        let id = self.start_item(new);
        let source = if synthetic {
            EventSource::Daemon
        } else {
            EventSource::Agent
        };
        self.delta_from(source, &id, text);
        self.complete_item(&id);
        id
    }

    /// The user's input as a synthetic user message, for agents that do not echo it.
    pub fn user_message(&mut self, text: &str) -> String {
        // The SDK sent this message: whatever native line is being handled is not its source.
        let raw = self.raw.take();
        let id = self.message(NewItem::message(ItemRole::User).synthetic(), text);
        self.raw = raw;
        id
    }

    /// A status item from the agent (started and completed at once).
    /// The label [`RETRY_STATUS`] marks a retry notice: the agent retries by itself, which the
    /// run's timeouts do not count as progress (`spec/run-protocol.md` §4).
    pub fn status(&mut self, label: impl Into<String>, detail: Option<String>) -> String {
        let label = label.into();
        let retry = label == RETRY_STATUS;
        let before = self.events.len();
        let id = self.start_item(NewItem::status(label, detail));
        self.complete_item(&id);
        if retry {
            self.retry_events += self.events.len().saturating_sub(before);
        }
        id
    }

    /// How many events retry notices emitted since the last call (the driver's batch).
    pub(crate) fn take_retry_events(&mut self) -> usize {
        std::mem::take(&mut self.retry_events)
    }

    /// A status item from the daemon itself (for example an oversized line was skipped).
    pub fn daemon_status(&mut self, label: impl Into<String>, detail: Option<String>) -> String {
        let id = self.start_item(NewItem::status(label, detail).synthetic());
        self.complete_item(&id);
        id
    }

    /// An error the agent reported.
    pub fn error(
        &mut self,
        message: impl Into<String>,
        code: Option<String>,
        details: Option<Value>,
    ) {
        let message = crate::guards::secrets::redact_bounded(
            &message.into(),
            crate::guards::bounds::MESSAGE_BOUND,
        );
        let code = code.map(|c| crate::guards::secrets::redact(&c).into_owned());
        self.emit(
            EventSource::Agent,
            UniversalEventBody::Error(Box::new(ErrorData {
                message,
                code,
                details,
            })),
        );
    }

    /// Whether a permission request or a question waits for its answer.
    pub fn awaits_caller(&self) -> bool {
        !self.permissions.is_empty() || !self.questions.is_empty()
    }

    /// The run's one terminal error, emitted by the driver when a run fails.
    pub fn terminal_error(&mut self, error: &AgentError) {
        let message = crate::guards::secrets::redact_bounded(
            &error.to_string(),
            crate::guards::bounds::MESSAGE_BOUND,
        );
        let details = Some(serde_json::json!({ "terminal": true }));
        self.emit(
            EventSource::Daemon,
            UniversalEventBody::Error(Box::new(ErrorData {
                message,
                code: Some(error.code().to_string()),
                details,
            })),
        );
    }

    /// A native payload that could not be parsed. Never pass the payload itself as `error`.
    pub fn unparsed(
        &mut self,
        error: impl Into<String>,
        location: impl Into<String>,
        raw_hash: Option<String>,
    ) {
        let data = AgentUnparsedData {
            error: error.into(),
            location: location.into(),
            raw_hash,
        };
        self.emit(
            EventSource::Daemon,
            UniversalEventBody::AgentUnparsed(Box::new(data)),
        );
    }

    /// Closes what is still in progress: open items complete as failed, unanswered permissions
    /// resolve as denied and questions as rejected, decided by [`Transcript::stop_cause`]. [`Transcript::end`] does this first; the
    /// driver calls it before a run's terminal error so that nothing follows that error.
    pub fn close_open(&mut self) {
        self.closing = true;
        for item_id in self.open.clone() {
            self.fail_item(&item_id);
        }
        let mut permissions: Vec<String> = self.permissions.keys().cloned().collect();
        permissions.sort();
        let by = self.stop_cause();
        for id in permissions {
            let _ = self.permission_resolved(&id, false, by);
        }
        let mut questions: Vec<String> = self.questions.keys().cloned().collect();
        questions.sort();
        for id in questions {
            let _ = self.question_resolved(&id, None, by);
        }
    }

    /// A session's next turn begins: its final text is its own (the previous turn's last answer
    /// is forgotten) and the previous turn's timeout no longer decides what is still waiting.
    pub fn begin_turn(&mut self) {
        self.last_assistant_text = None;
        self.timed_out = false;
        self.closing = false;
    }

    /// Ends the session: [`Transcript::close_open`], then `session.ended`. Later calls do nothing.
    pub fn end(&mut self, end: SessionEnd) {
        if self.ended {
            return;
        }
        self.close_open();
        let data = SessionEndedData {
            reason: end.reason,
            terminated_by: end.terminated_by,
            message: end.message,
            exit_code: end.exit_code,
            stderr: end.stderr,
        };
        self.emit(
            EventSource::Daemon,
            UniversalEventBody::SessionEnded(Box::new(data)),
        );
        self.ended = true;
    }
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string()
}

/// For tests of what follows a transcript's answer text: public reasoning (`hmm`), an assistant
/// message cut after `Hel`, then an answer (`Hello `, `world`) still open; with the answer's id.
#[cfg(test)]
pub(crate) fn cut_then_answering(session_id: &str) -> (Transcript, String) {
    use crate::vocabulary::universal::{ItemRole, ReasoningVisibility};
    let mut t = Transcript::new(session_id.into(), false);
    let thinking = t.start_item(NewItem::reasoning(ReasoningVisibility::Public));
    t.delta(&thinking, "hmm");
    let cut = t.start_item(NewItem::message(ItemRole::Assistant));
    t.delta(&cut, "Hel");
    t.fail_item(&cut);
    let answer = t.start_item(NewItem::message(ItemRole::Assistant));
    t.delta(&answer, "Hello ");
    t.delta(&answer, "world");
    (t, answer)
}

#[cfg(test)]
mod tests;

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("session_id", &self.session_id)
            .field("native_session_id", &self.native_session_id)
            .finish_non_exhaustive()
    }
}
