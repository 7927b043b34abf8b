//! Scripted client of Claude Code's two-way control protocol (`--input-format stream-json
//! --permission-prompt-tool stdio`; Qwen Code speaks the same with `--input-format stream-json`): initialize, one user message, allow every `can_use_tool` with the
//! same input (for `AskUserQuestion` the input plus `answers`, the first option of every question), close
//! stdin after the `result`.

use std::time::Instant;

use serde_json::{json, Value};

use super::duplex::Duplex;
use crate::BenchError;

/// Drives one turn with `prompt`; returns when the turn's `result` arrived.
pub async fn drive(
    session: &mut Duplex,
    prompt: &str,
    deadline: Instant,
) -> Result<(), BenchError> {
    let init = json!({"type": "control_request", "request_id": "req_1_init",
        "request": {"subtype": "initialize", "hooks": null}});
    session.send(&init.to_string()).await?;
    wait_for(session, deadline, |msg| {
        msg["type"] == "control_response" && msg["response"]["request_id"] == "req_1_init"
    })
    .await?;
    let user = json!({"type": "user", "message": {"role": "user", "content": prompt},
        "parent_tool_use_id": null, "session_id": "default"});
    session.send(&user.to_string()).await?;
    loop {
        let Some(msg) = next_json(session, deadline).await? else {
            return Err(BenchError::Protocol(
                "the CLI closed stdout before the turn's result".into(),
            ));
        };
        match msg["type"].as_str() {
            Some("result") => return Ok(()),
            Some("control_request") => {
                let id = msg["request_id"].clone();
                let request = &msg["request"];
                let response = if request["subtype"] == "can_use_tool" {
                    let mut input = request["input"].clone();
                    if request["tool_name"] == "AskUserQuestion" {
                        input["answers"] = first_options(&input);
                    }
                    json!({"subtype": "success", "request_id": id,
                        "response": {"behavior": "allow", "updatedInput": input}})
                } else {
                    json!({"subtype": "error", "request_id": id,
                        "error": format!("{} is not supported by the bench recorder", request["subtype"])})
                };
                session
                    .send(&json!({"type": "control_response", "response": response}).to_string())
                    .await?;
            }
            _ => {}
        }
    }
}

/// `{question text: first option label}` for every question of an `AskUserQuestion` input.
fn first_options(input: &Value) -> Value {
    let answers = input["questions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| {
            let label = q["options"][0]["label"].as_str()?;
            Some((q["question"].as_str()?.to_string(), Value::from(label)))
        });
    Value::Object(answers.collect())
}

async fn next_json(session: &mut Duplex, deadline: Instant) -> Result<Option<Value>, BenchError> {
    while let Some(line) = session.next_line(deadline).await? {
        if let Ok(value) = serde_json::from_str::<Value>(&line) {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

async fn wait_for(
    session: &mut Duplex,
    deadline: Instant,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, BenchError> {
    while let Some(msg) = next_json(session, deadline).await? {
        if done(&msg) {
            return Ok(msg);
        }
    }
    Err(BenchError::Protocol(
        "the CLI closed stdout while the driver waited for an answer".into(),
    ))
}
