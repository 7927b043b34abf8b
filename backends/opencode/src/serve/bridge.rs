//! The live side of a `serve` run: a task that stands where a process would. It executes the
//! HTTP requests the protocol writes (`{"method", "path", "body"}`, one a line), answers each
//! with `{"status", "body"}`, and forwards the events of the run's sessions; these are the very
//! shapes of a recorded session (`send`, `recv`, `event`), so live runs and replays share one
//! converter.

use std::sync::Arc;

use agent_api::kit::AgentPipes;
use agent_api::AgentError;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::server::{EventRx, Server};

/// One request the protocol asks for.
#[derive(Debug, Deserialize)]
pub struct HttpCall {
    /// `GET` or `POST`.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// JSON body (`null` for none).
    #[serde(default)]
    pub body: Value,
}

/// The session id in a path such as `/session/ses_1/prompt_async?…`.
pub fn path_session(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/session/")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|id| id.starts_with("ses"))
}

/// Whether `method path` sends a prompt: `POST /session/{id}/prompt_async` (what this backend
/// sends), or the synchronous `POST /session/{id}/message` (answered once the turn is over) that
/// other clients send, in a recording of theirs.
pub fn is_prompt(method: &str, path: &str) -> bool {
    let Some(id) = path_session(path) else {
        return false;
    };
    let rest = &path["/session/".len() + id.len()..];
    let call = rest.split('?').next().unwrap_or_default();
    method == "POST" && matches!(call, "/prompt_async" | "/message")
}

/// The answer to `call`; `None` when no HTTP answer came at all (the server is gone).
async fn execute(server: &Server, call: &HttpCall) -> Option<Value> {
    let reply = match call.method.as_str() {
        "GET" => server.client().get_json(&call.path).await,
        _ => server.client().post_json(&call.path, &call.body).await,
    };
    match reply {
        Ok(reply) => Some(json!({"status": reply.status, "body": reply.body})),
        // An answer that is not JSON still has its status; the reason stays out of the transcript.
        Err(AgentError::Http {
            status: Some(status),
            ..
        }) => Some(json!({"status": status, "body": null})),
        Err(_) => None,
    }
}

/// Aborts the turns of a bridge that is dropped before its protocol let it go (the run was
/// abandoned, or its cancel grace ran out): the shared server outlives the run, and a turn nobody
/// reads must not go on using the model.
struct AbortOnDrop {
    server: Arc<Server>,
    /// `/session/{id}/abort?directory=…` for each session the run used.
    aborts: Vec<String>,
    done: bool,
}

impl AbortOnDrop {
    fn note(&mut self, path: &str) {
        let Some(session) = path_session(path) else {
            return;
        };
        let query = path.find('?').map_or("", |at| &path[at..]);
        let abort = format!("/session/{session}/abort{query}");
        if !self.aborts.contains(&abort) {
            self.aborts.push(abort);
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if self.done || self.aborts.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (server, aborts) = (self.server.clone(), std::mem::take(&mut self.aborts));
        runtime.spawn(async move {
            for path in aborts {
                let _ = server.client().post_json(&path, &Value::Null).await;
            }
        });
    }
}

/// Runs the bridge until the protocol closes its input (exit code 0) or the server is gone (its
/// event stream ended, or a request got no answer: exit code 1).
pub async fn run(
    server: Arc<Server>,
    subscriber: u64,
    mut events: EventRx,
    pipes: AgentPipes,
) -> i32 {
    let AgentPipes { mut stdout, stdin } = pipes;
    let mut requests = stdin.lines();
    let mut guard = AbortOnDrop {
        server: server.clone(),
        aborts: Vec::new(),
        done: false,
    };
    let code = loop {
        tokio::select! {
            line = requests.next_line() => {
                let Ok(Some(line)) = line else { break 0 };
                let Ok(call) = serde_json::from_str::<HttpCall>(&line) else { continue };
                if let Some(session) = path_session(&call.path) {
                    server.watch(subscriber, session);
                    guard.note(&call.path);
                }
                let Some(reply) = execute(&server, &call).await else { break 1 };
                // A new or forked session: watch it before the protocol can prompt it.
                if let Some(created) = reply.pointer("/body/id").and_then(Value::as_str).filter(|id| id.starts_with("ses")) {
                    server.watch(subscriber, created);
                }
                if write_line(&mut stdout, &reply).await.is_err() {
                    break 0;
                }
            }
            event = events.recv() => {
                let Some(event) = event else { break 1 };
                let mut line = event.into_bytes();
                line.push(b'\n');
                if stdout.write_all(&line).await.is_err() {
                    break 0;
                }
            }
        }
    };
    guard.done = true;
    server.unsubscribe(subscriber);
    code
}

async fn write_line(out: &mut tokio::io::DuplexStream, value: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).expect("a Value serializes");
    line.push(b'\n');
    out.write_all(&line).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_read_from_paths() {
        assert_eq!(
            path_session("/session/ses_1/prompt_async?directory=%2F"),
            Some("ses_1")
        );
        assert!(
            is_prompt("POST", "/session/ses_1/prompt_async?directory=%2F")
                && is_prompt("POST", "/session/ses_1/message")
        );
        assert!(
            !is_prompt("GET", "/session/ses_1/message")
                && !is_prompt("POST", "/session/ses_1/message/msg_2/part")
        );
        assert_eq!(path_session("/session/ses_2"), Some("ses_2"));
        assert_eq!(path_session("/session?directory=%2F"), None);
        assert_eq!(path_session("/permission/per_1/reply"), None);
    }
}
