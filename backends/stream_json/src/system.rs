//! `system` lines and the other informational line types: the session start, status items for
//! retries, compaction, hooks, background tasks and the like.
//!
//! Status details are built from a few parsed fields, cut short; hook output, file contents and
//! whole lines never go into them.

use agent_api::kit::rate_limit::RateLimitNotice;
use agent_api::kit::Ctx;
use agent_api::kit::Unparsed;
use serde_json::{json, Value};

use super::{short, StreamJson};

/// A number field as text, or `?`.
fn num(message: &Value, key: &str) -> String {
    match message.get(key) {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.fract() != 0.0 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        _ => "?".into(),
    }
}

/// The metadata of `session.started`: what the CLI said about the session, without paths to
/// its memory or the source of its API key.
fn init_metadata(message: &Value) -> Value {
    let servers: Vec<Value> = message
        .get("mcp_servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| json!({ "name": s.get("name"), "status": s.get("status") }))
        .collect();
    json!({
        "model": message.get("model"),
        "tools": message.get("tools"),
        "mcp_servers": servers,
        "permission_mode": message.get("permissionMode"),
        "cwd": message.get("cwd"),
        "claude_code_version": message.get("claude_code_version"),
        "output_style": message.get("output_style"),
        "agents": message.get("agents"),
        "slash_commands": message.get("slash_commands"),
    })
}

impl StreamJson {
    pub(crate) fn on_system(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let subtype = message
            .get("subtype")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a system line has no `subtype`".into()))?;
        match subtype {
            "init" => {
                if let Some(id) = message.get("session_id").and_then(Value::as_str) {
                    ctx.transcript.set_native_session_id(id);
                }
                // The CLI repeats init at every turn of a two-way session; the transcript keeps
                // the first.
                ctx.transcript.session_started(Some(init_metadata(message)));
                self.flush_user_messages(ctx);
            }
            "status" => {
                let detail = short(message.get("status"), 64).or_else(|| {
                    short(message.get("permissionMode"), 64).map(|m| format!("permission mode {m}"))
                });
                ctx.transcript.status("status", detail);
            }
            "api_retry" => {
                let status = message
                    .get("error_status")
                    .and_then(Value::as_u64)
                    .map_or("no HTTP status".to_string(), |s| format!("HTTP {s}"));
                let error = short(message.get("error"), 64).unwrap_or_else(|| "error".into());
                let detail = format!(
                    "attempt {} of {}: {status} ({error}), retrying in {} ms",
                    num(message, "attempt"),
                    num(message, "max_retries"),
                    num(message, "retry_delay_ms")
                );
                ctx.transcript.status("api_retry", Some(detail));
                if let Some(notice) = retry_notice(message) {
                    notice.emit(ctx.transcript);
                }
            }
            "compact_boundary" => {
                let meta = message
                    .get("compact_metadata")
                    .cloned()
                    .unwrap_or(Value::Null);
                let trigger = short(meta.get("trigger"), 32).unwrap_or_else(|| "unknown".into());
                ctx.transcript.status(
                    "compact_boundary",
                    Some(format!(
                        "conversation compacted ({trigger}, {} tokens before)",
                        num(&meta, "pre_tokens")
                    )),
                );
            }
            "hook_started" | "hook_progress" | "hook_response" => {
                let name = short(message.get("hook_name"), 64).unwrap_or_else(|| "hook".into());
                let event = short(message.get("hook_event"), 64).unwrap_or_else(|| "?".into());
                let mut detail = format!("{name} ({event})");
                if let Some(outcome) = short(message.get("outcome"), 32) {
                    detail.push_str(&format!(": {outcome}"));
                }
                if let Some(code) = message.get("exit_code").and_then(Value::as_i64) {
                    detail.push_str(&format!(", exit code {code}"));
                }
                ctx.transcript.status(subtype.to_string(), Some(detail));
            }
            // An estimate of thinking tokens so far: the thinking itself arrives as content.
            "thinking_tokens" => {}
            _ => {
                let detail = [
                    "description",
                    "summary",
                    "status",
                    "message",
                    "content",
                    "model",
                    "fallback_model",
                ]
                .iter()
                .find_map(|key| short(message.get(*key), 200));
                ctx.transcript.status(
                    format!(
                        "system/{}",
                        agent_api::kit::bounds::utf8_prefix(subtype, 64)
                    ),
                    detail,
                );
            }
        }
        Ok(())
    }

    /// A line of a type this backend has no mapping for (or only a status for).
    pub(crate) fn on_other(
        &mut self,
        kind: &str,
        message: &Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        match kind {
            // Transport liveness only.
            "keep_alive" => {}
            "tool_progress" => {
                let name = short(message.get("tool_name"), 64).unwrap_or_else(|| "tool".into());
                ctx.transcript.status(
                    "tool_progress",
                    Some(format!(
                        "{name} running for {} s",
                        num(message, "elapsed_time_seconds")
                    )),
                );
            }
            "rate_limit_event" => {
                let info = message.get("rate_limit_info");
                let status = short(info.and_then(|i| i.get("status")), 64);
                // `allowed` (and its warning) only informs; anything else is a limit hit.
                if status.as_deref().is_some_and(|s| !s.starts_with("allowed")) {
                    let mut notice = RateLimitNotice::default();
                    notice.resets_at = info.and_then(|i| i.get("resetsAt")).and_then(Value::as_u64);
                    notice.emit(ctx.transcript);
                } else {
                    ctx.transcript.status("rate_limit", status);
                }
            }
            "tool_use_summary" => {
                ctx.transcript
                    .status("tool_use_summary", short(message.get("summary"), 200));
            }
            other => {
                ctx.transcript.status(
                    "unknown_message",
                    Some(agent_api::kit::bounds::utf8_prefix(other, 64).to_string()),
                );
            }
        }
        Ok(())
    }
}

/// The `rate_limited` notice of an `api_retry` line for a 429, 503 or 529 (or a `rate_limit` or
/// `overloaded` error kind), with the CLI's attempt count and retry delay.
fn retry_notice(message: &Value) -> Option<RateLimitNotice> {
    let http = message
        .get("error_status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok());
    let kind = message
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let overloaded = kind.starts_with("overloaded") || matches!(http, Some(503 | 529));
    if !(overloaded || kind.starts_with("rate_limit") || http == Some(429)) {
        return None;
    }
    let count = |key: &str| {
        message
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    let delay = message
        .get("retry_delay_ms")
        .and_then(Value::as_f64)
        .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < 1e12);
    let mut notice = RateLimitNotice::default();
    (notice.status, notice.overloaded) = (http, overloaded);
    (notice.attempt, notice.max_attempts) = (count("attempt"), count("max_retries"));
    notice.retry_after = delay.map(|ms| std::time::Duration::from_secs_f64(ms / 1000.0));
    Some(notice)
}
