//! The separate timeouts (`spec/run-protocol.md` §4): start-up, idle, per turn and total, each
//! ending the run with a typed timeout that names it; on the fake CLI and the scripted agent.

use std::time::{Duration, Instant};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::run::TimeoutKind;
use agent_api::{AgentError, AgentKind, Gateway, RunRequest};
use agent_api_conformance::fake::FakeProtocol;
use agent_api_conformance::session::{assert_session_conformant, SessionRecord};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("fake"));
    settings.cancel_grace = Duration::from_millis(300);
    settings.term_grace = Duration::from_millis(500);
    settings
}

async fn fake(args: &[&str], settings: RunSettings) -> (RunRecord, Duration) {
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).args(args);
    let transport = Transport::spawn(&spec, settings.line_cap).expect("the fake CLI spawns");
    let started = Instant::now();
    let run = record(start_run(
        settings,
        transport,
        Box::new(FakeProtocol::default()),
    ))
    .await;
    assert_conformant(&run);
    (run, started.elapsed())
}

fn timed_out(run: &RunRecord) -> Option<(TimeoutKind, Duration)> {
    match &run.completion {
        Err(AgentError::Timeout { which, after }) => Some((*which, *after)),
        _ => None,
    }
}

#[tokio::test]
async fn a_silent_agent_hits_the_startup_timeout_not_the_total_one() {
    // `ignore-stdin 0` writes nothing and hangs.
    let mut settings = settings();
    settings.startup_timeout = Some(Duration::from_millis(400));
    settings.timeout = Some(Duration::from_secs(30));
    let (run, took) = fake(&["ignore-stdin", "0"], settings).await;
    assert_eq!(
        timed_out(&run),
        Some((TimeoutKind::Startup, Duration::from_millis(400))),
        "{:?}",
        run.completion
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let message = run.completion.as_ref().unwrap_err().to_string();
    assert!(message.contains("first message"), "{message}");
}

#[tokio::test]
async fn an_agent_that_spoke_then_went_quiet_hits_the_idle_timeout() {
    // `hang` writes one line, then sleeps: the start-up timeout is met, the idle one is not.
    let mut settings = settings();
    settings.startup_timeout = Some(Duration::from_secs(20));
    settings.idle_timeout = Some(Duration::from_millis(500));
    let (run, took) = fake(&["hang"], settings).await;
    assert_eq!(
        timed_out(&run),
        Some((TimeoutKind::Idle, Duration::from_millis(500))),
        "{:?}",
        run.completion
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn the_total_timeout_is_named_total_and_the_turn_timeout_bounds_a_one_shot_run() {
    let mut total = settings();
    total.timeout = Some(Duration::from_millis(400));
    total.idle_timeout = Some(Duration::from_secs(30));
    let (run, _) = fake(&["hang"], total).await;
    assert_eq!(
        timed_out(&run).map(|(which, _)| which),
        Some(TimeoutKind::Total),
        "{:?}",
        run.completion
    );
    let mut turn = settings();
    turn.turn_timeout = Some(Duration::from_millis(400));
    let (run, _) = fake(&["hang"], turn).await;
    assert_eq!(
        timed_out(&run).map(|(which, _)| which),
        Some(TimeoutKind::Turn),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn a_busy_agent_outlives_an_idle_timeout_shorter_than_the_run() {
    // `slow` streams a word every 40 ms for longer than the idle timeout: output keeps it alive.
    let request = RunRequest::new("go")
        .with_options(&ScriptedOptions::scenario("slow").delay_ms(40))
        .with_idle_timeout(Duration::from_millis(300))
        .with_startup_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let run = record(
        agent_api::AgentBackend::run(&ScriptedBackend::new(), request)
            .await
            .unwrap(),
    )
    .await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(
        started.elapsed() > Duration::from_millis(300),
        "the run must outlast the idle timeout to test it"
    );
}

fn session_template(scenario: &str, delay_ms: u64) -> RunRequest {
    RunRequest::new("").with_options(&ScriptedOptions::scenario(scenario).delay_ms(delay_ms))
}

#[tokio::test]
async fn a_turn_timeout_names_the_turn_and_nothing_is_timed_between_turns() {
    let mut gateway = Gateway::new();
    gateway
        .register(std::sync::Arc::new(ScriptedBackend::new()))
        .unwrap();
    let request = session_template("slow", 20)
        .with_turn_timeout(Duration::from_millis(300))
        .with_idle_timeout(Duration::from_millis(200));
    let mut session = gateway
        .open_session(&agent_api_scripted::KIND, request)
        .await
        .unwrap();
    let mut record = SessionRecord::default();
    let first = record.turn(&mut session, "slowly").await;
    assert!(
        matches!(
            first,
            Err(AgentError::Timeout {
                which: TimeoutKind::Turn,
                ..
            })
        ),
        "{first:?}"
    );
    // Longer than the idle timeout between turns: the session is not idle, it waits for the caller.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = record.turn(&mut session, "slowly again").await;
    assert!(
        matches!(
            second,
            Err(AgentError::Timeout {
                which: TimeoutKind::Turn,
                ..
            })
        ),
        "{second:?}"
    );
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

#[tokio::test]
async fn a_zero_timeout_of_any_kind_is_refused_before_anything_runs() {
    let request = RunRequest::new("go")
        .with_options(&ScriptedOptions::scenario("text"))
        .with_idle_timeout(Duration::ZERO);
    let error = agent_api::AgentBackend::run(&ScriptedBackend::new(), request)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AgentError::InvalidRequest { reason } if reason.contains("idle")),
        "{error}"
    );
}
