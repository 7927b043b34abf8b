//! The wrapper-event bounds of seed 004 applied to one event (the figures are in
//! [`crate::kit::bounds`]). Every wrapper event of every backend passes through [`enforce`];
//! enforcing twice changes nothing.

use super::{AgentWrapperEvent, AgentWrapperEventKind, EventData};
use crate::guards::bounds::{
    split_text, truncate_message, CHANNEL_BOUND, MESSAGE_BOUND, TEXT_BOUND,
};

/// Applies every bound to one event. Oversized `TextOutput` text becomes several events in
/// order; every other field is bounded in place, so other kinds always give exactly one event.
pub fn enforce(event: AgentWrapperEvent) -> Vec<AgentWrapperEvent> {
    let mut out = Vec::with_capacity(1);
    enforce_into(event, &mut out);
    out
}

/// [`enforce`], appending the bounded event(s) to `out` (no allocation for the common case of one).
pub fn enforce_into(mut event: AgentWrapperEvent, out: &mut impl Extend<AgentWrapperEvent>) {
    if event
        .channel
        .as_ref()
        .is_some_and(|c| c.as_str().len() > CHANNEL_BOUND)
    {
        event.channel = None;
    }
    if let Some(m) = &event.message {
        // No secret reaches a wrapper event, whichever backend built the message.
        if let std::borrow::Cow::Owned(masked) = crate::guards::secrets::redact(m) {
            event.message = Some(masked);
        }
    }
    if let Some(m) = &event.message {
        if m.len() > MESSAGE_BOUND {
            event.message = Some(truncate_message(m, MESSAGE_BOUND));
        }
    }
    if let Some(d) = event.data.take() {
        event.data = Some(d.bounded());
    }
    match event.text.take() {
        Some(text)
            if text.len() > TEXT_BOUND && event.kind == AgentWrapperEventKind::TextOutput =>
        {
            out.extend(split_text(&text, TEXT_BOUND).into_iter().map(|piece| {
                let mut part = event.clone();
                part.text = Some(piece.to_string());
                part
            }))
        }
        Some(text) if text.len() > TEXT_BOUND => {
            // Only TextOutput is split (seed 004); other kinds keep one event and a cut text.
            event.text = Some(truncate_message(&text, TEXT_BOUND));
            out.extend(std::iter::once(event));
        }
        text => {
            event.text = text;
            out.extend(std::iter::once(event));
        }
    }
}

/// Whether an event satisfies every bound (what [`enforce`] guarantees).
pub fn within_bounds(event: &AgentWrapperEvent) -> bool {
    event
        .channel
        .as_ref()
        .is_none_or(|c| c.as_str().len() <= CHANNEL_BOUND)
        && event.text.as_ref().is_none_or(|t| t.len() <= TEXT_BOUND)
        && event
            .message
            .as_ref()
            .is_none_or(|m| m.len() <= MESSAGE_BOUND)
        && event.data.as_ref().is_none_or(EventData::fits)
}
