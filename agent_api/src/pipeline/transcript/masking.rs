//! The one place every event's strings pass the secret redactor ([`crate::kit::secrets::redact`]):
//! whatever a backend put in a status, a tool's name, arguments or output, a permission, a
//! question, an error or the session's metadata, a key shape in it is masked before the event
//! exists.
//!
//! The model's own prose (the text and reasoning of message items, and their deltas) is left as
//! the model wrote it: the redactor's field rule (`key: value`) would rewrite ordinary answers, a
//! key split across two deltas could not be masked in both views alike, and the answer is what
//! the caller asked for. A tool's streamed output is masked delta by delta
//! ([`mask_delta`]).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::guards::secrets::redact;
use crate::vocabulary::universal::{
    ContentPart, ItemKind, ToolMeta, UniversalEventBody, UniversalItem,
};

/// Masks every string of `body` that may hold a key (see the module doc for what is left).
/// Deltas are masked where they are made ([`mask_delta`]), which knows their item's kind.
pub(super) fn mask_body(body: &mut UniversalEventBody) {
    match body {
        UniversalEventBody::SessionStarted(data) => data.metadata.iter_mut().for_each(mask_value),
        UniversalEventBody::SessionEnded(data) => {
            mask_opt(&mut data.message);
            if let Some(stderr) = &mut data.stderr {
                mask_opt(&mut stderr.head);
                mask_opt(&mut stderr.tail);
            }
        }
        UniversalEventBody::ItemStarted(data) | UniversalEventBody::ItemCompleted(data) => {
            mask_item(&mut data.item)
        }
        UniversalEventBody::ItemDelta(_) => {}
        UniversalEventBody::Error(data) => {
            mask(&mut data.message);
            mask_opt(&mut data.code);
            data.details.iter_mut().for_each(mask_value);
        }
        UniversalEventBody::PermissionRequested(data)
        | UniversalEventBody::PermissionResolved(data) => {
            mask(&mut data.action);
            mask_opt(&mut data.tool_name);
            let details = &mut data.details;
            for field in [
                &mut details.command,
                &mut details.cwd,
                &mut details.file,
                &mut details.diff,
                &mut details.reason,
            ] {
                mask_opt(field);
            }
            data.metadata.iter_mut().for_each(mask_value);
        }
        UniversalEventBody::QuestionRequested(data)
        | UniversalEventBody::QuestionResolved(data) => {
            mask(&mut data.prompt);
            data.options.iter_mut().for_each(mask);
            mask_opt(&mut data.response);
        }
        UniversalEventBody::AgentUnparsed(data) => mask(&mut data.error),
    }
}

/// A delta of an item of `kind`, masked unless it is the model's prose.
pub(super) fn mask_delta<'t>(kind: ItemKind, text: &'t str) -> Cow<'t, str> {
    if kind == ItemKind::Message {
        Cow::Borrowed(text)
    } else {
        redact(text)
    }
}

/// Masks an item, copying it only when something in it is masked (an item is shared with the
/// transcript's open items).
fn mask_item(item: &mut Arc<UniversalItem>) {
    let mut masked = None::<UniversalItem>;
    let prose = item.kind == ItemKind::Message;
    for (index, part) in item.content.iter().enumerate() {
        if let Some(part) = part.clone_if_masked(prose) {
            masked.get_or_insert_with(|| (**item).clone()).content[index] = part;
        }
    }
    if let Some(tool) = &item.tool {
        if let Some(tool) = masked_tool(tool) {
            masked.get_or_insert_with(|| (**item).clone()).tool = Some(tool);
        }
    }
    if let Some(masked) = masked {
        *item = Arc::new(masked);
    }
}

impl ContentPart {
    /// This part with its strings masked, when any of them changes (`prose`: the item is a
    /// message, whose text and reasoning are left alone).
    fn clone_if_masked(&self, prose: bool) -> Option<ContentPart> {
        let changed = |s: &str| matches!(redact(s), Cow::Owned(_));
        let owned = |s: &str| redact(s).into_owned();
        match self {
            ContentPart::Text { text } if !prose && changed(text) => {
                Some(ContentPart::Text { text: owned(text) })
            }
            ContentPart::Reasoning { text, visibility } if !prose && changed(text) => {
                Some(ContentPart::Reasoning {
                    text: owned(text),
                    visibility: *visibility,
                })
            }
            ContentPart::ToolCall {
                name,
                arguments,
                call_id,
            } if changed(name) || changed(arguments) => {
                let arguments = masked_arguments(arguments);
                Some(ContentPart::ToolCall {
                    name: owned(name),
                    arguments,
                    call_id: call_id.clone(),
                })
            }
            ContentPart::ToolResult { call_id, output } if changed(output) => {
                Some(ContentPart::ToolResult {
                    call_id: call_id.clone(),
                    output: owned(output),
                })
            }
            ContentPart::Status { label, detail }
                if changed(label) || detail.as_deref().is_some_and(changed) =>
            {
                Some(ContentPart::Status {
                    label: owned(label),
                    detail: detail.as_deref().map(owned),
                })
            }
            ContentPart::FileRef { path, action, diff }
                if changed(path) || diff.as_deref().is_some_and(changed) =>
            {
                Some(ContentPart::FileRef {
                    path: owned(path),
                    action: *action,
                    diff: diff.as_deref().map(owned),
                })
            }
            ContentPart::Json { json } => {
                let mut masked = json.clone();
                mask_value(&mut masked);
                (masked != *json).then_some(ContentPart::Json { json: masked })
            }
            _ => None,
        }
    }
}

/// The tool metadata with its strings masked, when any of them changes.
fn masked_tool(tool: &ToolMeta) -> Option<ToolMeta> {
    let fields = [&tool.tool_name, &tool.command, &tool.cwd];
    if !fields.iter().any(|f| {
        f.as_deref()
            .is_some_and(|s| matches!(redact(s), Cow::Owned(_)))
    }) {
        return None;
    }
    let mut tool = tool.clone();
    for field in [&mut tool.tool_name, &mut tool.command, &mut tool.cwd] {
        mask_opt(field);
    }
    Some(tool)
}

fn mask(text: &mut String) {
    if let Cow::Owned(masked) = redact(text) {
        *text = masked;
    }
}

fn mask_opt(text: &mut Option<String>) {
    text.iter_mut().for_each(mask);
}

/// A tool's arguments masked so that JSON stays JSON (its arguments are "JSON text whose shape is
/// the tool's own"): parsed, masked value by value, written again; text that is not JSON is masked
/// as text.
fn masked_arguments(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(mut value) => {
            mask_value(&mut value);
            value.to_string()
        }
        Err(_) => redact(arguments).into_owned(),
    }
}

/// Masks every string in a JSON value, and the whole string value of a secret-named field
/// (`"api_key": "…"`, judged as the text rule judges `api_key=…`). Keys are names: left alone.
fn mask_value(value: &mut Value) {
    match value {
        Value::String(text) => mask(text),
        Value::Array(items) => items.iter_mut().for_each(mask_value),
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                match field {
                    Value::String(text) => {
                        let alone = redact(text).into_owned();
                        // The field rule hit: the value is a secret whatever it looks like.
                        let named_secret =
                            *redact(&format!("{key}={text}")) != format!("{key}={alone}");
                        *text = if named_secret {
                            crate::guards::secrets::REDACTED.to_string()
                        } else {
                            alone
                        };
                    }
                    other => mask_value(other),
                }
            }
        }
        _ => {}
    }
}
