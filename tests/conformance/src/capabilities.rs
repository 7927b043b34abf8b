//! Advertised capabilities checked, not trusted (issue 53 item 5): [`check_capabilities`] runs a
//! backend and exercises each capability it advertises that a run can show without knowing the
//! agent (text, streaming, usage, cancel, resume, warm sessions, modes and their switch), and
//! lists every other one as unchecked; [`assert_backend_conformant`] panics naming each
//! advertised capability that did not hold, and checks each run with [`crate::problems`].
//!
//! ```no_run
//! # async fn demo(backend: &dyn agent_api::AgentBackend) {
//! let report = agent_api_conformance::capabilities::assert_backend_conformant(
//!     backend,
//!     agent_api::RunRequest::new("Say hello."),
//! )
//! .await;
//! println!("not checked: {:?}", report.unchecked);
//! # }
//! ```

use std::time::Duration;

use agent_api::capabilities as caps;
use agent_api::request::AgentMode;
use agent_api::{AgentBackend, AgentError, RunRequest, SessionSelector};

use crate::{problems, record, RunRecord};

/// How long one exercise may take before it counts as failed.
const STEP: Duration = Duration::from_secs(60);

/// What [`check_capabilities`] found.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct CapabilityReport {
    /// Advertised and shown by a run.
    pub held: Vec<&'static str>,
    /// Advertised and not shown, with why.
    pub failed: Vec<(&'static str, String)>,
    /// Advertised, but not something a run of an unknown agent can show (tool calls need a
    /// model that calls tools, permissions one that asks, …): the backend's own tests prove them.
    pub unchecked: Vec<String>,
}

impl CapabilityReport {
    fn check(&mut self, capability: &'static str, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.held.push(capability),
            Err(why) => self.failed.push((capability, why)),
        }
    }
}

/// The capabilities [`check_capabilities`] exercises when advertised.
pub const EXERCISED: &[&str] = &[
    caps::RUN,
    caps::TEXT_MESSAGES,
    caps::STREAMING_DELTAS,
    caps::USAGE,
    caps::CONTROL_CANCEL,
    caps::SESSION_RESUME,
    caps::SESSION_WARM,
    caps::MODES,
    caps::SESSION_MODE_SWITCH,
];

async fn run(backend: &dyn AgentBackend, request: RunRequest) -> Result<RunRecord, String> {
    let handle = backend
        .run(request)
        .await
        .map_err(|e| format!("the run did not start: {e}"))?;
    let run = tokio::time::timeout(STEP, record(handle))
        .await
        .map_err(|_| format!("the run did not end within {STEP:?}"))?;
    let problems = problems(&run);
    if !problems.is_empty() {
        return Err(format!("the run breaks the specs: {}", problems.join("; ")));
    }
    Ok(run)
}

/// Runs `backend` with `template` (a prompt any agent answers with text) and exercises each
/// advertised capability of [`EXERCISED`]; lists the others as unchecked.
pub async fn check_capabilities(
    backend: &dyn AgentBackend,
    template: RunRequest,
) -> CapabilityReport {
    let advertised = backend.info().capabilities.clone();
    let has = |id: &str| advertised.contains(id);
    let mut report = CapabilityReport {
        unchecked: advertised
            .iter()
            .filter(|id| !EXERCISED.contains(id))
            .map(str::to_string)
            .collect(),
        ..CapabilityReport::default()
    };

    let first = run(backend, template.clone()).await;
    if has(caps::RUN) {
        report.check(
            caps::RUN,
            first
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|r| r.completion.as_ref().map(drop).map_err(|e| e.to_string())),
        );
    }
    let first = first.ok().filter(|r| r.completion.is_ok());
    if has(caps::TEXT_MESSAGES) {
        report.check(
            caps::TEXT_MESSAGES,
            match &first {
                Some(r) if !r.assistant_text().is_empty() => Ok(()),
                Some(_) => Err("the run's answer has no assistant text".into()),
                None => Err("no run to read".into()),
            },
        );
    }
    if has(caps::STREAMING_DELTAS) {
        report.check(
            caps::STREAMING_DELTAS,
            match &first {
                // One delta holding a whole message (what the transcript writes for a message
                // that came at once) is no streaming: some item must arrive in pieces.
                Some(r) if streamed(r) => Ok(()),
                Some(_) => Err("no item arrived in more than one item.delta".into()),
                None => Err("no run to read".into()),
            },
        );
    }
    if has(caps::USAGE) {
        report.check(
            caps::USAGE,
            match first.as_ref().map(|r| r.completion.as_ref()) {
                Some(Ok(c)) if c.usage.is_some() => Ok(()),
                Some(_) => Err("the completion reports no usage".into()),
                None => Err("no run to read".into()),
            },
        );
    }
    if has(caps::SESSION_RESUME) {
        let native = first
            .as_ref()
            .and_then(|r| r.completion.as_ref().ok())
            .and_then(|c| c.native_session_id.clone());
        let outcome = match native {
            None => Err("the run named no native session to resume".into()),
            Some(id) => run(
                backend,
                template
                    .clone()
                    .with_session(SessionSelector::Resume(id.into())),
            )
            .await
            .and_then(|r| r.completion.map(drop).map_err(|e| e.to_string())),
        };
        report.check(caps::SESSION_RESUME, outcome);
    }
    if has(caps::CONTROL_CANCEL) {
        report.check(
            caps::CONTROL_CANCEL,
            cancel(backend, template.clone()).await,
        );
    }
    if has(caps::SESSION_WARM) {
        report.check(caps::SESSION_WARM, warm(backend, template.clone()).await);
    }
    if has(caps::MODES) {
        let outcome = if backend.info().modes.is_empty() {
            Err("the backend lists no mode".into())
        } else {
            backend.info().modes.iter().try_for_each(|m| {
                backend
                    .validate(&template.clone().with_mode(AgentMode::parse(m.id)))
                    .map_err(|e| format!("mode `{}` is refused: {e}", m.id))
            })
        };
        report.check(caps::MODES, outcome);
    }
    if has(caps::SESSION_MODE_SWITCH) {
        report.check(
            caps::SESSION_MODE_SWITCH,
            mode_switch(backend, template).await,
        );
    }
    report
}

/// Whether some item of the run came in two deltas or more from the agent.
fn streamed(run: &RunRecord) -> bool {
    let mut seen = std::collections::HashMap::<&str, usize>::new();
    run.universal
        .iter()
        .filter(|e| !e.synthetic)
        .filter_map(|e| match &e.body {
            agent_api::universal::UniversalEventBody::ItemDelta(d) => Some(&*d.item_id),
            _ => None,
        })
        .any(|item| {
            let count = seen.entry(item).or_default();
            *count += 1;
            *count >= 2
        })
}

async fn cancel(backend: &dyn AgentBackend, request: RunRequest) -> Result<(), String> {
    let handle = backend
        .run(request)
        .await
        .map_err(|e| format!("the run did not start: {e}"))?;
    handle.control().cancel();
    let run = tokio::time::timeout(STEP, record(handle))
        .await
        .map_err(|_| format!("a cancelled run did not end within {STEP:?}"))?;
    match run.completion {
        // A run that finished before the cancel reached it ends well; any other end is wrong.
        Ok(_) | Err(AgentError::Cancelled) => Ok(()),
        Err(e) => Err(format!("a cancelled run ended with {e}")),
    }
}

async fn warm(backend: &dyn AgentBackend, template: RunRequest) -> Result<(), String> {
    let prompt = template.prompt.text.clone();
    let mut session = backend
        .open_session(template)
        .await
        .map_err(|e| format!("no session opened: {e}"))?;
    for turn in 1..=2 {
        let handle = session
            .send(prompt.as_str())
            .await
            .map_err(|e| format!("turn {turn} did not start: {e}"))?;
        let run = tokio::time::timeout(STEP, record(handle))
            .await
            .map_err(|_| format!("turn {turn} did not end within {STEP:?}"))?;
        run.completion
            .map_err(|e| format!("turn {turn} failed: {e}"))?;
    }
    session.close().await.map(drop).map_err(|e| e.to_string())
}

async fn mode_switch(backend: &dyn AgentBackend, template: RunRequest) -> Result<(), String> {
    let Some(mode) = backend.info().modes.first() else {
        return Err("the backend lists no mode to switch to".into());
    };
    let mut session = backend
        .open_session(template)
        .await
        .map_err(|e| format!("no session opened: {e}"))?;
    session
        .set_mode(AgentMode::parse(mode.id))
        .await
        .map_err(|e| format!("switching to `{}` failed: {e}", mode.id))?;
    session
        .set_mode(AgentMode::Default)
        .await
        .map_err(|e| format!("switching back to the default failed: {e}"))?;
    session.close().await.map(drop).map_err(|e| e.to_string())
}

/// [`check_capabilities`], panicking with every advertised capability that did not hold;
/// returns the report (its `unchecked` list says what the backend's own tests must prove).
pub async fn assert_backend_conformant(
    backend: &dyn AgentBackend,
    template: RunRequest,
) -> CapabilityReport {
    let report = check_capabilities(backend, template).await;
    assert!(
        report.failed.is_empty(),
        "advertised capabilities that do not hold:\n- {}",
        report
            .failed
            .iter()
            .map(|(id, why)| format!("{id}: {why}"))
            .collect::<Vec<_>>()
            .join("\n- ")
    );
    report
}
