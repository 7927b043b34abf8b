//! Event-type sequences of transcripts, for checking that a new recording matches a reference fixture.
//!
//! Each event is reduced to a key: `method` for JSON-RPC notifications and requests (`response` for
//! answers), else `type` plus `/subtype`, plus `:<item type>` for Codex exec items and `:<first content
//! block type>` for Claude-style assistant/user messages. Consecutive repeats are collapsed, so the number
//! of streamed deltas does not matter.

use serde_json::Value;

/// The key of one event.
pub fn event_key(msg: &Value) -> String {
    if let Some(method) = msg.get("method").and_then(Value::as_str) {
        return method.to_string();
    }
    if msg.get("id").is_some() && (msg.get("result").is_some() || msg.get("error").is_some()) {
        return if msg.get("error").is_some() {
            "error-response"
        } else {
            "response"
        }
        .to_string();
    }
    let mut key = msg
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    if let Some(sub) = msg.get("subtype").and_then(Value::as_str) {
        key = format!("{key}/{sub}");
    }
    if let Some(item) = msg.pointer("/item/type").and_then(Value::as_str) {
        key = format!("{key}:{item}");
    }
    if let Some(block) = msg
        .pointer("/message/content/0/type")
        .and_then(Value::as_str)
    {
        key = format!("{key}:{block}");
    }
    key
}

fn collapse(keys: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for key in keys {
        if out.last() != Some(&key) {
            out.push(key);
        }
    }
    out
}

/// Event keys of a `.stdout.jsonl` text (non-JSON lines skipped).
pub fn stdout_event_types(text: &str) -> Vec<String> {
    collapse(
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| event_key(&v)),
    )
}

/// `dir:key` of every send and recv entry of a `.session.jsonl` text (stderr entries skipped).
pub fn session_event_types(text: &str) -> Vec<String> {
    collapse(
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|entry| {
                let dir = entry.get("dir")?.as_str()?;
                let msg = entry.get("msg")?;
                (dir == "send" || dir == "recv").then(|| format!("{dir}:{}", event_key(msg)))
            }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_distinguish_block_and_item_types_and_collapse_repeats() {
        let text = concat!(
            r#"{"type":"system","subtype":"init"}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"text"}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use"}]}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"type":"agent_message"}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"type":"agent_message"}}"#,
            "\nnot json\n"
        );
        assert_eq!(
            stdout_event_types(text),
            [
                "system/init",
                "assistant:text",
                "assistant:tool_use",
                "item.completed:agent_message"
            ]
        );
    }

    #[test]
    fn session_keys_carry_direction_and_skip_stderr() {
        let text = concat!(
            r#"{"t":0,"dir":"send","msg":{"id":1,"method":"initialize"}}"#,
            "\n",
            r#"{"t":0.1,"dir":"stderr","msg":"warn"}"#,
            "\n",
            r#"{"t":0.2,"dir":"recv","msg":{"id":1,"result":{}}}"#,
            "\n"
        );
        assert_eq!(
            session_event_types(text),
            ["send:initialize", "recv:response"]
        );
    }
}
