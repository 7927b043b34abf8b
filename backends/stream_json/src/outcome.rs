//! How a run ends: each `result` line closes a turn (usage, cost, the final text, an error
//! event for a failed turn), and [`Outcome::finish`] turns the last result, or its absence,
//! into the run's completion or a typed [`AgentError`].
//!
//! Error messages hold parsed fields only (the result text, an error kind), cut short and with
//! anything that looks like an API key masked; stderr is only matched to classify, never copied.

use agent_api::kit::Unparsed;
use agent_api::kit::{Ctx, ExitInfo};
use agent_api::run::{LimitKind, Usage};
use agent_api::{AgentError, RunCompletion};
use serde_json::{json, Value};

use super::{safe, short, Channel, StreamJson};

/// Longest explanation copied into an error.
const MESSAGE_MAX: usize = 300;

/// An API error the CLI reported (a synthetic assistant message or an error result).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ApiError {
    /// The protocol's error kind (`authentication_failed`, `server_error`, `rate_limit`, …).
    pub kind: Option<String>,
    /// The HTTP status, when known.
    pub status: Option<u16>,
    /// The CLI's explanation.
    pub text: String,
}

/// The parsed `result` of one turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnResult {
    subtype: String,
    is_error: bool,
    text: Option<String>,
    errors: Vec<String>,
    api_error_status: Option<u16>,
}

/// What the turns of a run reported so far.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    last: Option<TurnResult>,
    turns: u64,
    /// The API error of the current turn, from its synthetic assistant message.
    api_error: Option<ApiError>,
    /// Whether the current turn already has its error (see `failure`).
    error_emitted: bool,
    /// The error event of the current turn's failure, held back: the run's terminal error reports
    /// a failure the run ends with, so it is shown only once the agent goes on after it (or the
    /// run succeeds anyway). One failure is one error event.
    failure: Option<HeldError>,
    /// Whether the current turn was interrupted.
    pub interrupted: bool,
    usage: Usage,
    data: Value,
    /// The last result's `structured_output` (the CLI's answer to `--json-schema`).
    structured: Option<Value>,
    /// Reads a successful result's text as an error (see [`super::Dialect::result_error`]).
    pub result_error: Option<ResultError>,
    /// The error [`Outcome::result_error`] found in the last turn's text.
    text_failure: Option<AgentError>,
}

/// An error event not yet shown ([`Outcome::failure`]).
#[derive(Debug)]
struct HeldError {
    message: String,
    code: Option<String>,
    details: Value,
    /// Whether the turn's `result` came after it: the next turn's lines show it survived.
    settled: bool,
}

/// Reads a `result` text that a CLI reports as a success as the typed error it really is.
pub type ResultError = fn(&str) -> Option<AgentError>;

/// Masks secrets ([`agent_api::kit::secrets::redact`]) and cuts `text` to [`MESSAGE_MAX`] bytes.
pub(crate) fn safe_text(text: &str) -> String {
    safe(text, MESSAGE_MAX)
}

/// The typed error for an API failure.
pub(crate) fn classify(error: &ApiError) -> AgentError {
    // The kit's form of an explanation in an error: masked, cut, trimmed, never blank (an error's
    // text never ends in `: `; found by converter_props on a mutated recording).
    let message = agent_api::kit::secrets::redact_bounded(&error.text, MESSAGE_MAX);
    let kind = error.kind.as_deref().unwrap_or_default();
    match (error.status, kind) {
        (_, "authentication_failed" | "oauth_org_not_allowed") => AgentError::Auth { message },
        (_, "rate_limit" | "rate_limit_error") if error.status.is_none_or(|s| s == 429) => {
            AgentError::RateLimited { message }
        }
        (_, "overloaded" | "overloaded_error") => AgentError::Overloaded {
            status: error.status,
            message,
        },
        (Some(status), _) => AgentError::of_http_status(status, message),
        (None, "server_error" | "api_error") => AgentError::ServerError {
            status: None,
            message,
        },
        _ => AgentError::AgentFailed { message },
    }
}

fn add(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(v) = value {
        // Counts saturate: an agent reporting u64::MAX must not wrap (or panic) the sum.
        *total = Some(total.unwrap_or(0).saturating_add(v));
    }
}

impl Outcome {
    /// A turn's outcome, read as `dialect` says.
    pub(crate) fn for_dialect(dialect: &super::Dialect) -> Self {
        Self {
            result_error: dialect.result_error,
            ..Self::default()
        }
    }

    /// Whether `text` is a failure that a CLI reports as text (see `with_result_error`): it
    /// repeats it as an assistant message and its deltas, which are not the model's answer (the
    /// `result` reports the error).
    pub(crate) fn is_error_text(&self, text: &str) -> bool {
        self.result_error.is_some_and(|read| read(text).is_some())
    }

    /// The CLI's synthetic assistant message for an API error: an error (held, see `failure`), never text.
    pub(crate) fn synthetic_error(&mut self, message: &Value) {
        let text = message
            .pointer("/message/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or("the model API request failed");
        let error = ApiError {
            kind: short(message.get("error"), 64),
            status: None,
            text: text.to_string(),
        };
        self.hold_error(
            safe_text(text),
            error.kind.clone(),
            json!({ "source": "api_error_message" }),
        );
        self.api_error = Some(error);
    }

    /// Holds the current turn's error event back (see [`Outcome::failure`]).
    fn hold_error(&mut self, message: String, code: Option<String>, details: Value) {
        self.failure = Some(HeldError {
            message,
            code,
            details,
            settled: false,
        });
        self.error_emitted = true;
    }

    /// Shows the held error: the agent went on after it, or the run succeeded anyway.
    pub(crate) fn show_held_error(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(held) = self.failure.take() {
            ctx.transcript
                .error(held.message, held.code, Some(held.details));
        }
    }

    /// A line of a new turn came: an error its previous turn ended with was survived.
    pub(crate) fn turn_goes_on(&mut self, ctx: &mut Ctx<'_>) {
        if self.failure.as_ref().is_some_and(|held| held.settled) {
            self.show_held_error(ctx);
        }
    }

    /// How the run ended decides the held error: the terminal error reports a failure, so the held
    /// one is dropped; a success shows it.
    pub(crate) fn settle(&mut self, result: &Result<RunCompletion, AgentError>, ctx: &mut Ctx<'_>) {
        match result {
            Ok(_) => self.show_held_error(ctx),
            Err(_) => self.failure = None,
        }
    }

    fn record_usage(&mut self, result: &Value) {
        let usage = result.get("usage");
        let n = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
        let input = [
            n("input_tokens"),
            n("cache_creation_input_tokens"),
            n("cache_read_input_tokens"),
        ];
        let total_input = input.iter().any(Option::is_some).then(|| {
            input
                .iter()
                .flatten()
                .fold(0u64, |sum, n| sum.saturating_add(*n))
        });
        add(&mut self.usage.input_tokens, total_input);
        add(
            &mut self.usage.cached_input_tokens,
            n("cache_read_input_tokens"),
        );
        add(&mut self.usage.output_tokens, n("output_tokens"));
        add(
            &mut self.usage.cache_write_tokens,
            n("cache_creation_input_tokens"),
        );
        // Like the cost, the CLI counts the session's turns so far.
        if let Some(turns) = result.get("num_turns").and_then(Value::as_u64) {
            self.usage.turns = Some(u32::try_from(turns).unwrap_or(u32::MAX));
        }
        // The CLI reports the session's cost so far: the last one is the total.
        if let Some(cost) = result.get("total_cost_usd").and_then(Value::as_f64) {
            self.usage.cost_usd = Some(cost);
        }
        self.structured = result
            .get("structured_output")
            .filter(|v| !v.is_null())
            .cloned();
        let denials = result
            .get("permission_denials")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        self.data = json!({
            "cost_usd": result.get("total_cost_usd"),
            "duration_ms": result.get("duration_ms"),
            "duration_api_ms": result.get("duration_api_ms"),
            "num_turns": result.get("num_turns"),
            "permission_denials": denials,
            "stop_reason": result.get("stop_reason"),
            "subtype": result.get("subtype"),
            "results": self.turns,
        });
    }

    /// The run's completion, or its typed error.
    pub(crate) fn finish(
        &mut self,
        exit: &ExitInfo,
        bypass_requested: bool,
    ) -> Result<RunCompletion, AgentError> {
        let Some(last) = self.last.clone() else {
            if let Some(error) = &self.api_error {
                return Err(classify(error));
            }
            let stderr = exit.stderr.output();
            let said = |needle: &str| {
                [&stderr.head, &stderr.tail]
                    .iter()
                    .any(|part| part.as_deref().is_some_and(|t| t.contains(needle)))
            };
            if bypass_requested && said("root/sudo privileges") {
                return Err(AgentError::PermissionModeRefused {
                    mode: "bypassPermissions".into(),
                    reason: "the agent refuses to skip permission prompts when running as root; run as another user, or set IS_SANDBOX=1 in the run's environment if the machine is a sandbox".into(),
                });
            }
            return Err(exit.early_exit_error());
        };
        if let (true, Some(error)) = (last.is_error, self.text_failure.take()) {
            return Err(error);
        }
        if last.is_error {
            let api = self.api_error.clone().filter(|_| last.subtype == "success");
            return Err(match (api, last.api_error_status) {
                (Some(mut error), status) => {
                    error.status = status.or(error.status);
                    classify(&error)
                }
                (None, Some(status)) => classify(&ApiError {
                    kind: None,
                    status: Some(status),
                    text: last.text.clone().unwrap_or_default(),
                }),
                (None, None) => turn_failure(&last),
            });
        }
        let mut completion = RunCompletion::new();
        completion.final_text = last.text.clone();
        completion.usage = Some(self.usage.clone());
        completion.data = Some(self.data.clone());
        completion.structured_output = self.structured.clone();
        Ok(completion)
    }
}

/// The error of a turn that failed without an API error.
fn turn_failure(last: &TurnResult) -> AgentError {
    // The CLI's own `--max-turns` and `--max-budget-usd` (set from the request's limits).
    match last.subtype.as_str() {
        "error_max_turns" => {
            return AgentError::LimitReached {
                limit: LimitKind::Turns,
            }
        }
        "error_max_budget_usd" => {
            return AgentError::LimitReached {
                limit: LimitKind::CostUsd,
            }
        }
        _ => {}
    }
    // A resume the CLI cannot find (another id, or another project directory than the session's).
    if let Some(id) = last
        .errors
        .iter()
        .find_map(|e| e.strip_prefix("No conversation found with session ID: "))
    {
        return AgentError::SessionNotFound {
            id: safe(id.trim(), 64),
        };
    }
    let what = match last.subtype.as_str() {
        "error_max_structured_output_retries" => {
            "the turn ran out of structured-output retries".to_string()
        }
        "error_during_execution" => "the turn failed during execution".to_string(),
        // A `success` result flagged as an error: the subtype would only mislead.
        "success" => "the turn failed".to_string(),
        other => format!("the turn ended with `{other}`"),
    };
    let errors = (!last.errors.is_empty()).then(|| last.errors.join("; "));
    let detail = errors
        .as_ref()
        .or(last.text.as_ref())
        .map(|e| format!(": {}", safe_text(e)))
        .unwrap_or_default();
    AgentError::AgentFailed {
        message: format!("{what}{detail}"),
    }
}

impl StreamJson {
    pub(crate) fn on_result(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        // The subtype becomes an error code and a message: masked and bounded like any agent text.
        let subtype = short(message.get("subtype"), 64)
            .ok_or_else(|| Unparsed("a result line has no `subtype`".into()))?;
        self.close_all_messages(ctx);
        if ctx.transcript.native_session_id().is_none() {
            if let Some(id) = message.get("session_id").and_then(Value::as_str) {
                ctx.transcript.set_native_session_id(id);
            }
        }
        // The subtype decides: 2.1.0 wrote `error_*` results with `is_error: false`.
        let mut is_error = subtype.starts_with("error")
            || message
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(subtype != "success");
        let text = message.get("result").and_then(Value::as_str);
        let text_failure = self
            .outcome
            .result_error
            .filter(|_| !is_error)
            .and_then(|read| read(text?));
        if let Some(error) = &text_failure {
            is_error = true;
            self.outcome.hold_error(
                safe_text(&error.to_string()),
                Some("api_error".into()),
                json!({ "source": "result_text" }),
            );
        }
        let result = TurnResult {
            is_error,
            text: text.map(str::to_string),
            errors: message
                .get("errors")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                // A dialect may name its one error `error` (a string) where the protocol lists
                // `errors`.
                .chain(message.get("error").and_then(Value::as_str))
                .map(str::to_string)
                .collect(),
            api_error_status: message
                .get("api_error_status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok()),
            subtype,
        };
        let outcome = &mut self.outcome;
        outcome.turns += 1;
        outcome.text_failure = text_failure;
        outcome.record_usage(message);
        if is_error && !outcome.error_emitted {
            if outcome.interrupted {
                ctx.transcript
                    .status("turn_interrupted", Some(result.subtype.clone()));
            } else {
                let text = match (&outcome.api_error, result.api_error_status) {
                    (_, Some(status)) => format!("the model API failed with HTTP {status}"),
                    _ => turn_failure(&result).to_string(),
                };
                let details = json!({ "subtype": result.subtype, "api_error_status": result.api_error_status });
                outcome.hold_error(safe_text(&text), Some(result.subtype.clone()), details);
            }
        }
        match outcome.failure.as_mut() {
            // A turn that succeeded after an API error went on from it.
            Some(_) if !is_error => outcome.show_held_error(ctx),
            Some(held) => held.settled = true,
            None => {}
        }
        // The next turn starts clean; the run's outcome is its last turn's.
        if !is_error || result.subtype != "success" {
            outcome.api_error = None;
        }
        outcome.error_emitted = false;
        outcome.interrupted = false;
        outcome.last = Some(result);
        if !self.steers.is_empty() && self.channel != Channel::Replay {
            // A steering message came after the round's last step: the agent runs it next, as a
            // round of its own, and the caller's turn goes on until that round's result (its
            // usage adds up; the turn's outcome is the last round's).
            ctx.transcript.status("steered_round", None);
            return Ok(());
        }
        self.turn_open = false;
        match self.channel {
            // One turn per process: the CLI exits once its input ends.
            Channel::Control => ctx.shutdown(),
            Channel::Session => {
                let turn = self
                    .outcome
                    .finish(&agent_api::kit::ExitInfo::default(), self.bypass_requested);
                self.outcome.settle(&turn, ctx);
                ctx.end_turn(turn);
            }
            Channel::Print | Channel::Replay => {}
        }
        Ok(())
    }
}
