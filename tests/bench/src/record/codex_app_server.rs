//! Scripted client of `codex app-server` (JSON-RPC over stdio): initialize, initialized, thread/start
//! (approval policy `untrusted`, sandbox `workspace-write`), turn/start, accept every approval request,
//! stop at `turn/completed`.

use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use super::duplex::Duplex;
use crate::sandbox::CODEX_MODEL;
use crate::BenchError;

/// Drives one turn with `prompt` in `cwd`; returns when `turn/completed` arrived.
pub async fn drive(
    session: &mut Duplex,
    cwd: &Path,
    prompt: &str,
    deadline: Instant,
) -> Result<(), BenchError> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "clientInfo": {"name": "agent_bench", "title": "agent_bench recorder", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {"experimentalApi": false}}});
    session.send(&init.to_string()).await?;
    response(session, 1, deadline).await?;
    session
        .send(&json!({"jsonrpc": "2.0", "method": "initialized"}).to_string())
        .await?;
    let start = json!({"jsonrpc": "2.0", "id": 2, "method": "thread/start", "params": {
        "model": CODEX_MODEL, "modelProvider": "mock", "cwd": cwd.display().to_string(),
        "approvalPolicy": "untrusted", "sandbox": "workspace-write"}});
    session.send(&start.to_string()).await?;
    let thread = response(session, 2, deadline).await?;
    let thread_id = thread["thread"]["id"].as_str().ok_or_else(|| {
        BenchError::Protocol(format!("thread/start answered without thread.id: {thread}"))
    })?;
    let turn = json!({"jsonrpc": "2.0", "id": 3, "method": "turn/start", "params": {
        "threadId": thread_id, "input": [{"type": "text", "text": prompt, "text_elements": []}]}});
    session.send(&turn.to_string()).await?;
    loop {
        let msg = next_json(session, deadline).await?;
        let method = msg["method"].as_str().unwrap_or_default();
        if method == "turn/completed" {
            return Ok(());
        }
        if let (false, Some(id)) = (method.is_empty(), msg.get("id")) {
            // A server request: accept approvals, refuse what the recorder does not know.
            let reply = if method.ends_with("/requestApproval") {
                json!({"jsonrpc": "2.0", "id": id, "result": {"decision": "accept"}})
            } else {
                json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("{method} is not supported by the bench recorder")}})
            };
            session.send(&reply.to_string()).await?;
        }
    }
}

async fn next_json(session: &mut Duplex, deadline: Instant) -> Result<Value, BenchError> {
    while let Some(line) = session.next_line(deadline).await? {
        if let Ok(value) = serde_json::from_str::<Value>(&line) {
            return Ok(value);
        }
    }
    Err(BenchError::Protocol(
        "codex app-server closed stdout during the turn".into(),
    ))
}

/// Waits for the response to request `id`; an error response is a protocol error.
async fn response(session: &mut Duplex, id: u64, deadline: Instant) -> Result<Value, BenchError> {
    loop {
        let msg = next_json(session, deadline).await?;
        if msg.get("method").is_none() && msg["id"] == id {
            if let Some(err) = msg.get("error") {
                return Err(BenchError::Protocol(format!("request {id} failed: {err}")));
            }
            return Ok(msg["result"].clone());
        }
    }
}
