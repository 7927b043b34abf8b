//! OpenCode's question tool (`question.asked`): each question of a request becomes one question
//! through `agent_api::kit::hitl`; once all are answered, the request is answered with
//! `POST /question/{id}/reply {"answers": [[label], …]}`; a declined question rejects the whole
//! request (`POST /question/{id}/reject`).

use std::collections::{BTreeMap, HashMap};

use agent_api::kit::hitl::QuestionRequest;
use agent_api::kit::Ctx;
use agent_api::{AgentError, QuestionAnswer};
use serde_json::{json, Value};

use super::{Pending, ServeProtocol};

/// A question's native context: its request and its place in it.
pub(super) type QuestionRef = (String, usize);

/// The question requests waiting for answers, by OpenCode's request id.
#[derive(Debug, Default)]
pub(super) struct Questions {
    open: HashMap<String, (usize, BTreeMap<usize, String>)>,
}

/// The agent asks (`question.asked`).
pub(super) fn asked(p: &mut ServeProtocol, props: &Value, ctx: &mut Ctx<'_>) {
    let Some(request) = props.get("id").and_then(Value::as_str) else {
        return;
    };
    let questions = props
        .get("questions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, q) in questions.iter().enumerate() {
        let text = q.get("question").and_then(Value::as_str).unwrap_or("");
        let labels = q
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let options = labels
            .filter_map(|o| o.get("label").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        let id = format!("{request}/{i}");
        let question = QuestionRequest::new(id, text, options)
            .call_id(props.pointer("/tool/callID").and_then(Value::as_str));
        p.hitl
            .request_question(ctx.transcript, question, (request.to_string(), i));
    }
    p.questions
        .open
        .insert(request.to_string(), (questions.len(), BTreeMap::new()));
}

/// The caller answers question `id`.
pub(super) fn answer(
    p: &mut ServeProtocol,
    id: &str,
    answer: QuestionAnswer,
    ctx: &mut Ctx<'_>,
) -> Result<(), AgentError> {
    let answered = p.hitl.answer_question(ctx.transcript, id, answer)?;
    let (request, index) = answered.native;
    match answered.answer {
        QuestionAnswer::Text(text) => {
            let Some((count, answers)) = p.questions.open.get_mut(&request) else {
                return Ok(());
            };
            answers.insert(index, text);
            if answers.len() == *count {
                let answers: Vec<Value> = answers.values().map(|a| json!([a])).collect();
                p.questions.open.remove(&request);
                let path = format!("/question/{request}/reply{}", p.query());
                p.send(
                    ctx,
                    Pending::Other,
                    "POST",
                    path,
                    json!({"answers": answers}),
                );
            }
        }
        _ => reject(p, &request, ctx),
    }
    Ok(())
}

/// Rejects request `request`; its other questions resolve as withdrawn.
pub(super) fn reject(p: &mut ServeProtocol, request: &str, ctx: &mut Ctx<'_>) {
    let Some((count, _)) = p.questions.open.remove(request) else {
        return;
    };
    for i in 0..count {
        p.hitl
            .withdraw_question(ctx.transcript, &format!("{request}/{i}"));
    }
    let path = format!("/question/{request}/reject{}", p.query());
    p.send(ctx, Pending::Other, "POST", path, Value::Null);
}

/// The run stops: every open request is rejected; its questions resolve as cancelled.
pub(super) fn cancel_all(p: &mut ServeProtocol, ctx: &mut Ctx<'_>) {
    let _ = p.hitl.cancel_questions(ctx.transcript);
    let mut open: Vec<String> = p.questions.open.keys().cloned().collect();
    open.sort();
    for request in open {
        reject(p, &request, ctx);
    }
}

/// The request was answered or rejected elsewhere (`question.replied`, `question.rejected`).
pub(super) fn closed(p: &mut ServeProtocol, props: &Value, ctx: &mut Ctx<'_>) {
    let Some(request) = props.get("requestID").and_then(Value::as_str) else {
        return;
    };
    if let Some((count, _)) = p.questions.open.remove(request) {
        for i in 0..count {
            p.hitl
                .withdraw_question(ctx.transcript, &format!("{request}/{i}"));
        }
    }
}
