//! How an item's content is put together when it completes.

use crate::vocabulary::universal::{ContentPart, UniversalItem};

/// Puts the text assembled from deltas into the part it belongs to: the first text-bearing
/// part (text, reasoning, tool-call arguments, tool output) becomes exactly the streamed text,
/// so streamed content is never counted twice. Without such a part a text part is added.
pub(super) fn fill_assembled(
    mut content: Vec<ContentPart>,
    assembled: &str,
    had_delta: bool,
) -> Vec<ContentPart> {
    if !had_delta {
        return content;
    }
    for part in &mut content {
        match part {
            ContentPart::Text { text } | ContentPart::Reasoning { text, .. } => {
                *text = assembled.to_string();
                return content;
            }
            ContentPart::ToolCall { arguments, .. } => {
                *arguments = assembled.to_string();
                return content;
            }
            ContentPart::ToolResult { output, .. } => {
                *output = assembled.to_string();
                return content;
            }
            _ => {}
        }
    }
    content.push(ContentPart::Text {
        text: assembled.to_string(),
    });
    content
}

/// The text a message would have streamed: its text parts, or its reasoning.
pub(super) fn streamable_text(item: &UniversalItem) -> String {
    item.content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } | ContentPart::Reasoning { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
