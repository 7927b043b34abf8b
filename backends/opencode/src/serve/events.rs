//! The server's events of one session, into the transcript. Unknown event types are ignored:
//! OpenCode adds new ones often, and none of them may fail a run.

use agent_api::kit::hitl::PermissionRequest;
use agent_api::kit::Ctx;
use agent_api::kit::Unparsed;
use agent_api::universal::PermissionDetails;
use serde_json::Value;

use super::ServeProtocol;
use crate::errors::NativeError;
use crate::parts::Part;

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// One event's payload (`{"type", "properties"}`).
pub(super) fn on_event(
    p: &mut ServeProtocol,
    payload: &Value,
    ctx: &mut Ctx<'_>,
) -> Result<(), Unparsed> {
    let kind = payload
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Unparsed("an event without a type".into()))?;
    let props = payload.get("properties").unwrap_or(&Value::Null);
    let session = str_at(props, "/sessionID")
        .or_else(|| str_at(props, "/part/sessionID"))
        .or_else(|| str_at(props, "/info/sessionID"));
    // The stream is the server's: only this run's session counts, and only until its turn ends.
    if p.session_id.is_none() || session != p.session_id.as_deref() || p.idle {
        return Ok(());
    }
    let t = &mut *ctx.transcript;
    match kind {
        "message.updated" if str_at(props, "/info/role") == Some("user") => {
            if let Some(id) = str_at(props, "/info/id") {
                if p.user_messages.insert(id.to_string()) {
                    p.steers.user_message(id);
                }
            }
        }
        "message.updated" => {
            // An answer to a steering message: OpenCode's loop read it at this step.
            if let Some(parent) = str_at(props, "/info/parentID") {
                p.steers.answered(parent, ctx);
            }
        }
        "message.part.updated" => {
            let part: Part =
                serde_json::from_value(props.get("part").cloned().unwrap_or_default())?;
            if !p.user_messages.contains(&part.message_id) {
                p.parts.part(t, part, false);
            }
        }
        "message.part.delta" => {
            let (Some(part), Some(delta)) = (str_at(props, "/partID"), str_at(props, "/delta"))
            else {
                return Ok(());
            };
            let user = str_at(props, "/messageID").is_some_and(|m| p.user_messages.contains(m));
            if str_at(props, "/field") == Some("text") && !user {
                p.parts.delta(t, part, delta);
            }
        }
        "permission.asked" => permission_asked(p, props, ctx),
        "permission.replied" => {
            // Another client (or this one) answered; a request still pending here resolves too.
            if let Some(id) = str_at(props, "/requestID") {
                let approved = str_at(props, "/reply") != Some("reject");
                p.hitl.recorded_permission(t, id, approved);
            }
        }
        "question.asked" => super::questions::asked(p, props, ctx),
        "question.replied" | "question.rejected" => super::questions::closed(p, props, ctx),
        "session.status" if str_at(props, "/status/type") == Some("busy") => p.busy = true,
        "session.error" if p.busy => {
            let error: NativeError =
                serde_json::from_value(props.get("error").cloned().unwrap_or_default())?;
            p.error.get_or_insert(error);
        }
        "session.idle" if p.prompted && p.busy => p.turn_ended(ctx),
        "session.status" if str_at(props, "/status/type") == Some("retry") => {
            let attempt = props
                .pointer("/status/attempt")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            t.status(
                "retry",
                Some(format!(
                    "OpenCode retries the model request (attempt {attempt})"
                )),
            );
            if let Some(notice) = retry_notice(props.get("status").unwrap_or(&Value::Null)) {
                notice.emit(t);
            }
        }
        "session.updated" => {
            let title = str_at(props, "/info/title").map(str::to_string);
            if title.is_some() && title != p.title {
                p.title = title.clone();
                t.status("session_title", title);
            }
        }
        "session.diff" => {
            let files = props
                .get("diff")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if files > 0 {
                t.status(
                    "session_diff",
                    Some(format!("{files} file(s) changed in this session")),
                );
            }
        }
        _ => {}
    }
    Ok(())
}

fn permission_asked(p: &mut ServeProtocol, props: &Value, ctx: &mut Ctx<'_>) {
    let Some(id) = str_at(props, "/id") else {
        return;
    };
    let permission = str_at(props, "/permission").unwrap_or("unknown");
    let command = str_at(props, "/metadata/command");
    let file = str_at(props, "/metadata/filepath").or_else(|| str_at(props, "/metadata/filePath"));
    let action = match (command, file) {
        (Some(command), _) => format!("{permission}: {command}"),
        (None, Some(file)) => format!("{permission}: {file}"),
        _ => permission.to_string(),
    };
    let request = PermissionRequest::new(id, crate::tools::TOOLS.category(permission), action)
        .tool_name(permission)
        .details(
            PermissionDetails::default()
                .call_id(str_at(props, "/tool/callID"))
                .command(command)
                .file(file)
                .diff(str_at(props, "/metadata/diff")),
        );
    if let Some(decided) = p
        .hitl
        .request_permission(ctx.transcript, request, id.to_string())
    {
        if p.plan.is_some() {
            p.reply_permission(ctx, &decided.native, &decided.decision);
        }
    }
}

/// The `rate_limited` notice of a `retry` session status whose message names a rate limit or an
/// overload, with the attempt and the wait until `next` (Unix milliseconds).
fn retry_notice(status: &Value) -> Option<agent_api::kit::rate_limit::RateLimitNotice> {
    let words = agent_api::kit::rate_limit::LimitWords::in_text(
        status
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    if !(words.limited || words.overloaded) {
        return None;
    }
    let mut notice = agent_api::kit::rate_limit::RateLimitNotice::default();
    notice.overloaded = words.overloaded;
    notice.attempt = status
        .get("attempt")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    notice.retry_after = status
        .get("next")
        .and_then(Value::as_u64)
        .map(|next| std::time::Duration::from_millis(next.saturating_sub(now_ms)));
    Some(notice)
}
