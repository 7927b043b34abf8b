//! `assert_backend_conformant` checks what a backend advertises instead of trusting it (issue 53
//! item 5): the scripted agent holds every capability a run can show, and a backend that
//! advertises streaming, usage, resume and a warm session it does not have is caught, each
//! named; what a run cannot show is listed as unchecked.

use agent_api::capabilities as caps;
use agent_api::kit::transcript::NewItem;
use agent_api::kit::{start_run, Ctx, ExitInfo, Protocol, RunSettings, Transport, Unparsed};
use agent_api::universal::ItemRole;
use agent_api::{
    AgentBackend, AgentError, AgentKind, BackendInfo, CapabilitySet, RunCompletion, RunHandle,
    RunRequest,
};
use agent_api_conformance::capabilities::{assert_backend_conformant, check_capabilities};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

#[tokio::test]
async fn the_scripted_agent_holds_what_it_advertises() {
    let template =
        RunRequest::new("Say hello.").with_options(&ScriptedOptions::scenario("text").delay_ms(0));
    let report = assert_backend_conformant(&ScriptedBackend::new(), template).await;
    for held in [
        caps::TEXT_MESSAGES,
        caps::STREAMING_DELTAS,
        caps::USAGE,
        caps::SESSION_RESUME,
        caps::SESSION_WARM,
        caps::MODES,
        caps::SESSION_MODE_SWITCH,
        caps::CONTROL_CANCEL,
    ] {
        assert!(report.held.contains(&held), "{held}: {report:?}");
    }
    assert!(
        report.unchecked.iter().any(|c| c == caps::PERMISSIONS),
        "{report:?}"
    );
}

/// Answers one line of text, all at once, with no usage and no session: and advertises more.
struct Boastful;

struct Says;

impl Protocol for Says {
    fn name(&self) -> &'static str {
        "boastful"
    }

    fn on_message(
        &mut self,
        message: serde_json::Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        let text = message["text"].as_str().unwrap_or_default().to_string();
        ctx.transcript.session_started(None);
        ctx.transcript
            .message(NewItem::message(ItemRole::Assistant), &text);
        Ok(())
    }

    fn finish(
        &mut self,
        _exit: &ExitInfo,
        _ctx: &mut Ctx<'_>,
    ) -> Result<RunCompletion, AgentError> {
        Ok(RunCompletion::new())
    }
}

#[agent_api::kit::async_trait]
impl AgentBackend for Boastful {
    fn info(&self) -> &BackendInfo {
        static INFO: std::sync::LazyLock<BackendInfo> = std::sync::LazyLock::new(|| {
            BackendInfo::new(
                AgentKind::new("boastful").unwrap(),
                CapabilitySet::from_ids([
                    caps::RUN,
                    caps::EVENTS,
                    caps::TEXT_MESSAGES,
                    caps::STREAMING_DELTAS,
                    caps::USAGE,
                    caps::SESSION_RESUME,
                    caps::SESSION_WARM,
                    caps::REASONING,
                ]),
            )
        });
        &INFO
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let settings = RunSettings::for_request(
            self.info().kind.clone(),
            &request,
            &self.info().capabilities,
        );
        let transport = Transport::in_process(settings.line_cap, |mut pipes| async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipes.stdout.write_all(b"{\"text\":\"hello\"}\n").await;
            0
        });
        Ok(start_run(settings, transport, Box::new(Says)))
    }
}

#[tokio::test]
async fn a_backend_advertising_what_it_does_not_do_is_caught_naming_each_capability() {
    let report = check_capabilities(&Boastful, RunRequest::new("Say hello.")).await;
    let failed: Vec<&str> = report.failed.iter().map(|(id, _)| *id).collect();
    for lie in [
        caps::STREAMING_DELTAS,
        caps::USAGE,
        caps::SESSION_RESUME,
        caps::SESSION_WARM,
    ] {
        assert!(failed.contains(&lie), "{lie} not caught: {report:?}");
    }
    assert!(report.held.contains(&caps::TEXT_MESSAGES), "{report:?}");
    assert!(
        report.unchecked.iter().any(|c| c == caps::REASONING),
        "{report:?}"
    );
    let panicked = tokio::spawn(async {
        assert_backend_conformant(&Boastful, RunRequest::new("Say hello.")).await;
    })
    .await;
    assert!(panicked.is_err(), "the assertion fails on a lie");
}
