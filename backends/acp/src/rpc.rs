//! The small pieces of JSON-RPC that the converter (`protocol.rs`) and the handler of the
//! agent's requests (`requests.rs`) share: what each of our requests was for, the key of a
//! request id, and a schema value as JSON.

use serde_json::Value;

/// What one of our requests was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// `initialize`.
    Initialize,
    /// `session/new`.
    NewSession,
    /// `session/load`.
    LoadSession,
    /// `session/prompt`.
    Prompt,
    /// Anything else.
    Other,
}

impl Pending {
    pub(crate) fn of_method(method: &str) -> Self {
        match method {
            "initialize" => Pending::Initialize,
            "session/new" => Pending::NewSession,
            "session/load" => Pending::LoadSession,
            "session/prompt" => Pending::Prompt,
            _ => Pending::Other,
        }
    }
}

/// A schema value as JSON (these types always serialize).
pub(crate) fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The key of a JSON-RPC id (`0` and `"0"` alike), which is also the permission id.
pub(crate) fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
