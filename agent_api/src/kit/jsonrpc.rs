//! JSON-RPC over stdio: classifying incoming messages and building outgoing ones, for agents
//! that speak strict JSON-RPC 2.0 (ACP) or a dialect without the `"jsonrpc"` member.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::protocol::Unparsed;

/// One incoming JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request from the agent, which must be answered.
    Request {
        /// Its id (number or string).
        id: Value,
        /// Method name.
        method: String,
        /// Parameters (`null` when absent).
        params: Value,
    },
    /// A notification from the agent.
    Notification {
        /// Method name.
        method: String,
        /// Parameters (`null` when absent).
        params: Value,
    },
    /// A successful response to one of our requests.
    Response {
        /// The id of our request.
        id: Value,
        /// The result.
        result: Value,
    },
    /// An error response to one of our requests.
    ErrorResponse {
        /// The id of our request (`null` when the agent could not read it).
        id: Value,
        /// Error code.
        code: i64,
        /// Error message (bounded before it reaches any event).
        message: String,
    },
}

/// Classifies a parsed JSON value as a JSON-RPC message.
///
/// ```
/// use agent_api::kit::jsonrpc::{classify, Message};
/// let msg = classify(serde_json::json!({"method": "turn/started", "params": {}})).unwrap();
/// assert!(matches!(msg, Message::Notification { .. }));
/// ```
pub fn classify(value: Value) -> Result<Message, Unparsed> {
    let Value::Object(mut obj) = value else {
        return Err(Unparsed("a JSON-RPC message must be an object".into()));
    };
    let id = obj.remove("id");
    let method = obj.remove("method");
    match (id, method) {
        (Some(id), Some(Value::String(method))) => Ok(Message::Request {
            id,
            method,
            params: obj.remove("params").unwrap_or(Value::Null),
        }),
        (None, Some(Value::String(method))) => Ok(Message::Notification {
            method,
            params: obj.remove("params").unwrap_or(Value::Null),
        }),
        (Some(id), None) => {
            if let Some(error) = obj.remove("error") {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                Ok(Message::ErrorResponse { id, code, message })
            } else if let Some(result) = obj.remove("result") {
                Ok(Message::Response { id, result })
            } else {
                Err(Unparsed(
                    "a JSON-RPC response needs `result` or `error`".into(),
                ))
            }
        }
        _ => Err(Unparsed(
            "not a JSON-RPC request, notification or response".into(),
        )),
    }
}

/// Whether outgoing messages carry `"jsonrpc": "2.0"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Strict JSON-RPC 2.0.
    Strict,
    /// Without the `"jsonrpc"` member (an app-server of that dialect).
    NoVersion,
}

/// Builds outgoing messages and remembers what each of our pending requests was for.
///
/// ```
/// use agent_api::kit::jsonrpc::{Dialect, RpcPeer};
/// let mut peer: RpcPeer<&str> = RpcPeer::new(Dialect::NoVersion);
/// let req = peer.request("initialize", serde_json::json!({}), "init");
/// assert_eq!(req["id"], 1);
/// assert!(req.get("jsonrpc").is_none());
/// assert_eq!(peer.take_pending(&serde_json::json!(1)), Some("init"));
/// ```
#[derive(Debug)]
pub struct RpcPeer<T> {
    dialect: Dialect,
    next_id: u64,
    pending: HashMap<String, T>,
}

impl<T> RpcPeer<T> {
    /// A peer whose request ids start at 1.
    pub fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            next_id: 1,
            pending: HashMap::new(),
        }
    }

    fn envelope(&self, mut obj: Map<String, Value>) -> Value {
        if self.dialect == Dialect::Strict {
            obj.insert("jsonrpc".into(), json!("2.0"));
        }
        Value::Object(obj)
    }

    /// A request; `tag` says what it was for when its response arrives.
    pub fn request(&mut self, method: &str, params: Value, tag: T) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id.to_string(), tag);
        let mut obj = Map::new();
        obj.insert("id".into(), json!(id));
        obj.insert("method".into(), json!(method));
        obj.insert("params".into(), params);
        self.envelope(obj)
    }

    /// A notification.
    pub fn notification(&self, method: &str, params: Option<Value>) -> Value {
        let mut obj = Map::new();
        obj.insert("method".into(), json!(method));
        if let Some(params) = params {
            obj.insert("params".into(), params);
        }
        self.envelope(obj)
    }

    /// A successful response to the agent's request `id`.
    pub fn response(&self, id: &Value, result: Value) -> Value {
        let mut obj = Map::new();
        obj.insert("id".into(), id.clone());
        obj.insert("result".into(), result);
        self.envelope(obj)
    }

    /// An error response to the agent's request `id`.
    pub fn error_response(&self, id: &Value, code: i64, message: &str) -> Value {
        let mut obj = Map::new();
        obj.insert("id".into(), id.clone());
        obj.insert("error".into(), json!({ "code": code, "message": message }));
        self.envelope(obj)
    }

    /// Remembers a request id that was sent elsewhere (for example in a recording being
    /// replayed), so its response finds `tag`.
    pub fn track(&mut self, id: &Value, tag: T) {
        self.pending.insert(id_key(id), tag);
    }

    /// The tag of our pending request `id`, removing it.
    pub fn take_pending(&mut self, id: &Value) -> Option<T> {
        self.pending.remove(&id_key(id))
    }

    /// Whether any of our requests still waits for a response.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// JSON-RPC error code for a method the peer does not implement.
pub const METHOD_NOT_FOUND: i64 = -32601;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_responses_and_errors_are_told_apart() {
        assert!(matches!(
            classify(
                json!({"id": 0, "method": "item/commandExecution/requestApproval", "params": {}})
            )
            .unwrap(),
            Message::Request { .. }
        ));
        assert!(matches!(
            classify(json!({"id": 3, "result": {}})).unwrap(),
            Message::Response { .. }
        ));
        let err =
            classify(json!({"id": 3, "error": {"code": -32602, "message": "Session not found"}}))
                .unwrap();
        assert_eq!(
            err,
            Message::ErrorResponse {
                id: json!(3),
                code: -32602,
                message: "Session not found".into()
            }
        );
        assert!(classify(json!([1, 2])).is_err());
        assert!(classify(json!({"id": 1})).is_err());
    }

    #[test]
    fn strict_dialect_adds_the_version_member() {
        let mut peer: RpcPeer<()> = RpcPeer::new(Dialect::Strict);
        let req = peer.request("session/new", json!({}), ());
        assert_eq!(req["jsonrpc"], "2.0");
        let note = peer.notification("session/cancel", Some(json!({"sessionId": "s"})));
        assert!(note.get("id").is_none());
        assert_eq!(
            peer.error_response(&json!(7), METHOD_NOT_FOUND, "no")["error"]["code"],
            METHOD_NOT_FOUND
        );
    }

    #[test]
    fn string_and_number_ids_match_their_pending_tags() {
        let mut peer: RpcPeer<u8> = RpcPeer::new(Dialect::Strict);
        peer.request("a", json!({}), 1);
        assert_eq!(peer.take_pending(&json!("1")), Some(1));
        assert!(!peer.has_pending());
    }
}
