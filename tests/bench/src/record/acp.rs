//! Scripted client of the Agent Client Protocol (`qwen --acp`): `initialize` (file system offered, no
//! terminal), `session/new` in the working directory, one `session/prompt`; every
//! `session/request_permission` is answered with the first option of kind `allow_once`;
//! `fs/read_text_file` and `fs/write_text_file` are served inside the working directory (a missing file
//! is a "not found" error, a path outside is refused); other agent requests get "method not found".
//! Stops at the prompt's response.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};

use super::duplex::Duplex;
use crate::BenchError;

/// Drives one turn with `prompt` in `cwd`; returns when `session/prompt` was answered.
pub async fn drive(
    session: &mut Duplex,
    cwd: &Path,
    prompt: &str,
    deadline: Instant,
) -> Result<(), BenchError> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false},
        "clientInfo": {"name": "agent_bench", "version": env!("CARGO_PKG_VERSION")}}});
    session.send(&init.to_string()).await?;
    response(session, cwd, 1, deadline).await?;
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd.display().to_string(), "mcpServers": []}});
    session.send(&new.to_string()).await?;
    let created = response(session, cwd, 2, deadline).await?;
    let session_id = created["sessionId"].as_str().ok_or_else(|| {
        BenchError::Protocol(format!("session/new answered without sessionId: {created}"))
    })?;
    let turn = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]}});
    session.send(&turn.to_string()).await?;
    // An error answer to the prompt (a model API failure) is part of the recording, not a failure.
    match response(session, cwd, 3, deadline).await {
        Ok(_) | Err(BenchError::Protocol(_)) => Ok(()),
        Err(other) => Err(other),
    }
}

/// Serves the agent's requests until the response to request `id` arrives; an error response is a
/// protocol error.
async fn response(
    session: &mut Duplex,
    cwd: &Path,
    id: u64,
    deadline: Instant,
) -> Result<Value, BenchError> {
    while let Some(line) = session.next_line(deadline).await? {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match (msg.get("method").and_then(Value::as_str), msg.get("id")) {
            (Some(method), Some(request_id)) => {
                let reply = answer(cwd, request_id, method, &msg["params"]);
                session.send(&reply.to_string()).await?;
            }
            (None, Some(answered)) if answered == id => {
                if let Some(err) = msg.get("error") {
                    return Err(BenchError::Protocol(format!("request {id} failed: {err}")));
                }
                return Ok(msg["result"].clone());
            }
            _ => {}
        }
    }
    Err(BenchError::Protocol(format!(
        "the agent closed stdout before answering request {id}"
    )))
}

fn answer(cwd: &Path, id: &Value, method: &str, params: &Value) -> Value {
    let result = match method {
        "session/request_permission" => {
            let options = params["options"].as_array().cloned().unwrap_or_default();
            let allow = options
                .iter()
                .find(|o| o["kind"] == "allow_once")
                .or(options.first());
            Ok(match allow {
                Some(option) => {
                    json!({"outcome": {"outcome": "selected", "optionId": option["optionId"]}})
                }
                None => json!({"outcome": {"outcome": "cancelled"}}),
            })
        }
        "fs/read_text_file" => {
            inside(cwd, params).and_then(|path| match std::fs::read_to_string(&path) {
                Ok(content) => Ok(json!({"content": content})),
                Err(_) => Err((-32002, format!("Resource not found: {}", path.display()))),
            })
        }
        "fs/write_text_file" => inside(cwd, params).and_then(|path| {
            let content = params["content"].as_str().unwrap_or_default();
            std::fs::write(&path, content)
                .map(|_| json!(null))
                .map_err(|e| (-32603, format!("write failed: {e}")))
        }),
        other => Err((
            -32601,
            format!("{other} is not supported by the bench recorder"),
        )),
    };
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    }
}

/// The request's absolute `path` when it lies inside `cwd` (no `..`), else a refusal.
fn inside(cwd: &Path, params: &Value) -> Result<PathBuf, (i64, String)> {
    let path = PathBuf::from(params["path"].as_str().unwrap_or_default());
    let confined = path.starts_with(cwd)
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
    if confined {
        Ok(path)
    } else {
        Err((
            -32602,
            format!("{} is outside the working directory", path.display()),
        ))
    }
}
