//! [`TurnWatch`]: one turn seen by the operator: its span (the parent of the library's run, tool
//! call and wait spans), its metrics (started, ended by outcome, duration, tokens and cost,
//! requests waiting for a person and how long they waited) and its log line at the end (session
//! id, turn, agent, outcome, duration, tokens, trace id: never the prompt or the answer).

use std::collections::HashMap;
use std::time::Instant;

use agent_api::universal::UniversalEventBody;
use agent_api::{AgentError, RunCompletion, UniversalEvent};
use tracing::field::Empty;

use crate::metrics::{AgentLabel, ModelLabels, OutcomeLabels, Shared, TokenLabels, WaitLabel};

/// The `code` of the `error` event of a session ended because the store failed for too long.
pub(crate) const STORE_UNAVAILABLE: &str = "store_unavailable";

/// Requests waiting for a person that one turn tracks at most (a hostile agent asking without
/// end gets no more gauge movement, not unbounded memory).
const MAX_WAITS: usize = 256;

/// A model name as a label: bounded, `unknown` when no one said.
fn model_label(model: Option<&str>) -> String {
    model
        .filter(|m| !m.is_empty())
        .map_or_else(|| "unknown".into(), |m| agent_api::display::line(m, 64))
}

/// One turn, watched from its start to its end.
pub(crate) struct TurnWatch {
    metrics: Shared,
    span: tracing::Span,
    session: String,
    turn: u64,
    agent: String,
    model: Option<String>,
    started: Instant,
    /// Requests waiting now, by id: their kind and since when.
    waits: HashMap<String, (&'static str, Instant)>,
}

impl TurnWatch {
    /// Turn `turn` of `session` (agent `agent`, model and mode as the session asked) starts now.
    pub(crate) fn start(
        metrics: &Shared,
        session: &str,
        turn: u64,
        agent: &str,
        model: Option<&str>,
        mode: &str,
    ) -> Self {
        let span = tracing::info_span!(
            target: "agent_api_server::turn",
            "turn",
            otel.name = %format_args!("turn {agent}"),
            otel.status_code = Empty,
            agent_api.session.id = %session,
            agent_api.turn = turn,
            agent_api.agent.mode = %mode,
            gen_ai.system = %agent,
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
        );
        metrics
            .turns_started
            .get_or_create(&AgentLabel {
                agent: agent.into(),
            })
            .inc();
        Self {
            metrics: metrics.clone(),
            span,
            session: session.into(),
            turn,
            agent: agent.into(),
            model: model.map(Into::into),
            started: Instant::now(),
            waits: HashMap::new(),
        }
    }

    /// The turn's span: the agent's run, its process and its tool calls are its children.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Follows the permission requests and questions of `events`.
    pub(crate) fn events(&mut self, events: &[UniversalEvent]) {
        for event in events {
            let (id, kind, asked) = match &event.body {
                UniversalEventBody::PermissionRequested(d) => {
                    (&d.permission_id, "permission", true)
                }
                UniversalEventBody::PermissionResolved(d) => {
                    (&d.permission_id, "permission", false)
                }
                UniversalEventBody::QuestionRequested(d) => (&d.question_id, "question", true),
                UniversalEventBody::QuestionResolved(d) => (&d.question_id, "question", false),
                _ => continue,
            };
            if asked {
                if self.waits.len() < MAX_WAITS && !self.waits.contains_key(id) {
                    self.waits.insert(id.clone(), (kind, Instant::now()));
                    self.metrics
                        .waiting
                        .get_or_create(&WaitLabel { kind })
                        .inc();
                }
            } else if let Some((kind, since)) = self.waits.remove(id) {
                self.resolved(kind, since);
            }
        }
    }

    fn resolved(&self, kind: &'static str, since: Instant) {
        let label = WaitLabel { kind };
        self.metrics.waiting.get_or_create(&label).dec();
        self.metrics
            .wait_seconds
            .get_or_create(&label)
            .observe(since.elapsed().as_secs_f64());
    }

    /// The turn ended: with the agent's completion, or (`store_failed`) because the store failed.
    pub(crate) fn ended(mut self, done: &Result<RunCompletion, AgentError>, store_failed: bool) {
        for (_, (kind, since)) in std::mem::take(&mut self.waits) {
            self.resolved(kind, since);
        }
        let outcome = match (store_failed, done) {
            (true, _) => STORE_UNAVAILABLE,
            (false, Ok(_)) => "completed",
            (false, Err(error)) => error.code(),
        };
        let took = self.started.elapsed();
        let agent = AgentLabel {
            agent: self.agent.clone(),
        };
        self.metrics
            .turns_ended
            .get_or_create(&OutcomeLabels {
                agent: self.agent.clone(),
                outcome: outcome.into(),
            })
            .inc();
        self.metrics
            .turn_seconds
            .get_or_create(&agent)
            .observe(took.as_secs_f64());
        let usage = done.as_ref().ok().and_then(|d| d.usage.as_ref());
        if let Some(usage) = usage {
            let model = model_label(usage.model.as_deref().or(self.model.as_deref()));
            for (kind, tokens) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cached_input", usage.cached_input_tokens),
                ("cache_write", usage.cache_write_tokens),
                ("reasoning", usage.reasoning_tokens),
            ] {
                if let Some(tokens) = tokens {
                    self.metrics
                        .tokens
                        .get_or_create(&TokenLabels {
                            agent: self.agent.clone(),
                            model: model.clone(),
                            kind,
                        })
                        .inc_by(tokens);
                }
            }
            if let Some(cost) = usage.cost_usd.filter(|c| c.is_finite() && *c > 0.0) {
                self.metrics
                    .cost
                    .get_or_create(&ModelLabels {
                        agent: self.agent.clone(),
                        model,
                    })
                    .inc_by(cost);
            }
            if let Some(tokens) = usage.input_tokens {
                self.span.record("gen_ai.usage.input_tokens", tokens);
            }
            if let Some(tokens) = usage.output_tokens {
                self.span.record("gen_ai.usage.output_tokens", tokens);
            }
        }
        if outcome != "completed" {
            self.span.record("otel.status_code", "ERROR");
            self.span.record("error.type", outcome);
        }
        tracing::info!(
            target: "agent_api_server::turn",
            parent: &self.span,
            session_id = %self.session,
            turn = self.turn,
            agent = %self.agent,
            outcome,
            duration_ms = took.as_millis() as u64,
            input_tokens = usage.and_then(|u| u.input_tokens),
            output_tokens = usage.and_then(|u| u.output_tokens),
            trace_id = crate::telemetry::trace_id(&self.span).as_deref(),
            "turn ended"
        );
    }
}
