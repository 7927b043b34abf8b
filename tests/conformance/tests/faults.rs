//! The run driver under a misbehaving CLI (`fake_agent_cli`): crashes, hangs, huge lines,
//! invalid UTF-8, ignored signals, a missing binary, grandchildren that left the agent's group and
//! session with `setsid` (as Claude Code's tool shells do). Every run ends with one typed completion,
//! and no process of its group survives.

use std::time::{Duration, Instant};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::kit::{Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::universal::UniversalEventBody;
use agent_api::{AgentError, AgentKind, AgentWrapperEventKind, RunCompletion, RunHandle};
use agent_api_conformance::fake::FakeProtocol;
use agent_api_conformance::{assert_conformant, record, RunRecord};
use serde_json::Value;

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("fake"));
    settings.tools_structured = true;
    settings.cancel_grace = Duration::from_millis(300);
    settings.term_grace = Duration::from_millis(500);
    settings
}

fn start(args: &[&str], settings: RunSettings) -> RunHandle {
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).args(args);
    let transport = Transport::spawn(&spec, settings.line_cap).expect("the fake CLI spawns");
    start_run(settings, transport, Box::new(FakeProtocol::default()))
}

/// Whether a process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

/// The pid the fake CLI reported for its child, if `event` is that report.
fn reported_pid(event: &agent_api::UniversalEvent) -> Option<i32> {
    let UniversalEventBody::ItemCompleted(d) = &event.body else {
        return None;
    };
    d.item.content.iter().find_map(|part| match part {
        agent_api::universal::ContentPart::Status {
            label,
            detail: Some(detail),
        } if label == "pid" => serde_json::from_str::<Value>(detail).ok()?["pid"]
            .as_i64()
            .map(|pid| pid as i32),
        _ => None,
    })
}

fn grandchild_pid(run: &RunRecord) -> i32 {
    run.universal
        .iter()
        .find_map(reported_pid)
        .expect("the fake CLI reported its child's pid")
}

async fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A crash says why: the error carries the last stderr lines (bounded, masked), and shows the last
/// one in its message (issue 39); the rest of stderr stays in `session.ended`.
#[tokio::test]
async fn a_crash_mid_stream_is_a_typed_exit_with_one_terminal_error_naming_the_last_stderr_lines() {
    // The secret the run hands the agent, which it then prints on stderr.
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli"))
        .args(["crash"])
        .env("FAKE_API_KEY", "secret-token-123");
    let transport = Transport::spawn(&spec, settings().line_cap).expect("the fake CLI spawns");
    let run = record(start_run(
        settings(),
        transport,
        Box::new(FakeProtocol::default()),
    ))
    .await;
    assert_conformant(&run);
    let Err(AgentError::ProcessExited {
        exit_code: Some(3),
        stderr,
        ..
    }) = &run.completion
    else {
        panic!("{:?}", run.completion)
    };
    assert_eq!(
        stderr,
        &["fatal: [redacted] went wrong"],
        "the last lines, masked"
    );
    assert_eq!(run.assistant_text(), "before the crash");
    let error = run.completion.as_ref().unwrap_err().to_string();
    assert!(
        error.contains("exit code 3") && error.contains("fatal: [redacted] went wrong"),
        "{error}"
    );
    for event in &run.wrapper {
        let json = serde_json::to_string(event).unwrap();
        assert!(
            !json.contains("secret-token-123"),
            "a secret leaked into {json}"
        );
    }
    match &run.universal.last().unwrap().body {
        UniversalEventBody::SessionEnded(end) => {
            assert_eq!(end.exit_code, Some(3));
            assert!(
                end.stderr
                    .as_ref()
                    .and_then(|s| s.head.as_ref())
                    .is_some_and(|h| h.contains("went wrong")),
                "session.ended keeps the stderr head"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_hang_past_the_timeout_reports_timeout_and_reaps_the_whole_group() {
    let mut settings = settings();
    settings.timeout = Some(Duration::from_millis(800));
    let run = record(start(&["hang-with-child"], settings)).await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
    assert!(
        wait_gone(grandchild_pid(&run)).await,
        "the grandchild survived the timeout"
    );
}

#[tokio::test]
async fn cancel_terminates_the_group_and_reports_cancelled() {
    let handle = start(&["hang-with-child"], settings());
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    use futures::StreamExt;
    let mut pid = None;
    while let Some(event) = events.next().await {
        if let Some(reported) = reported_pid(&event) {
            pid = Some(reported);
            control.cancel();
            control.cancel();
        }
    }
    assert!(matches!(completion.await, Err(AgentError::Cancelled)));
    assert!(wait_gone(pid.expect("pid line")).await);
}

#[tokio::test]
async fn dropping_the_handle_reaps_the_group() {
    let handle = start(&["hang-with-child"], settings());
    let (mut events, completion) = handle.into_universal();
    use futures::StreamExt;
    let mut pid = None;
    while let Some(event) = events.next().await {
        pid = reported_pid(&event);
        if pid.is_some() {
            break;
        }
    }
    drop(events);
    drop(completion);
    assert!(
        wait_gone(pid.expect("pid line")).await,
        "the grandchild outlived the dropped handle"
    );
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let handle = start(&["ignore-term"], settings());
    let control = handle.control();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    control.cancel();
    let run = record(handle).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_conformant(&run);
}

#[tokio::test]
async fn a_line_over_the_cap_is_skipped_with_one_bounded_status_and_the_run_goes_on() {
    let run = record(start(&["big-line", "20"], settings())).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(run.assistant_text(), "beforeafter");
    let skipped: Vec<_> = run
        .wrapper_of(AgentWrapperEventKind::Status)
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("native_line_skipped"))
        })
        .collect();
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].message.as_ref().unwrap().len() < 200);
}

#[tokio::test]
async fn invalid_utf8_is_replaced_reported_and_loses_no_other_line() {
    let run = record(start(&["invalid-utf8"], settings())).await;
    assert!(run.completion.is_ok());
    let text = run.assistant_text();
    assert!(
        text.starts_with("beforebad \u{fffd}\u{fffd} bytes"),
        "{text:?}"
    );
    assert!(text.ends_with("after"));
    let statuses: Vec<_> = run
        .wrapper_of(AgentWrapperEventKind::Status)
        .filter_map(|e| e.message.clone())
        .filter(|m| m.starts_with("native_line_invalid_utf8"))
        .collect();
    assert_eq!(statuses.len(), 2);
    let unparsed: Vec<_> = run.of_type("agent.unparsed").collect();
    assert_eq!(
        unparsed.len(),
        1,
        "the line that is not JSON becomes agent.unparsed"
    );
    assert!(run.wrapper_of(AgentWrapperEventKind::Unknown).count() == 1);
}

#[tokio::test]
async fn a_missing_binary_is_a_typed_error_before_anything_runs() {
    let spec = CommandSpec::new("/nonexistent/agent-cli-for-tests");
    match Transport::spawn(&spec, 1024) {
        Err(AgentError::BinaryNotFound { program }) => assert_eq!(
            program,
            std::path::PathBuf::from("/nonexistent/agent-cli-for-tests")
        ),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("spawned a missing binary"),
    }
}

#[tokio::test]
async fn cancel_before_the_first_line_reports_cancelled() {
    let handle = start(&["hang"], settings());
    handle.control().cancel();
    let run = record(handle).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
    assert_conformant(&run);
}

#[tokio::test]
async fn a_two_way_agent_gets_lines_on_stdin_and_stops_when_input_closes() {
    struct Echo;
    impl Protocol for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
            ctx.send(&serde_json::json!({"hello": 1}));
            Ok(())
        }
        fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
            ctx.transcript
                .status("echo", message["line"].as_str().map(str::to_string));
            ctx.close_input();
            Ok(())
        }
        fn finish(
            &mut self,
            exit: &ExitInfo,
            _ctx: &mut Ctx<'_>,
        ) -> Result<RunCompletion, AgentError> {
            if exit.success() {
                Ok(RunCompletion::new())
            } else {
                Err(exit.early_exit_error())
            }
        }
    }
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli"))
        .arg("echo-stdin")
        .with_stdin();
    let transport = Transport::spawn(&spec, 1024).unwrap();
    let run = record(start_run(settings(), transport, Box::new(Echo))).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok());
    let echoed = run
        .wrapper_of(AgentWrapperEventKind::Status)
        .filter_map(|e| e.message.clone())
        .find(|m| m.starts_with("echo"));
    assert_eq!(echoed.as_deref(), Some("echo: {\"hello\":1}"));
}

#[tokio::test]
async fn a_panicking_converter_fails_the_run_with_one_terminal_error_and_no_process_left() {
    struct Panics;
    impl Protocol for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn on_message(&mut self, _message: Value, _ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
            panic!("a converter bug");
        }
        fn finish(
            &mut self,
            _exit: &ExitInfo,
            _ctx: &mut Ctx<'_>,
        ) -> Result<RunCompletion, AgentError> {
            Ok(RunCompletion::new())
        }
    }
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).arg("hang");
    let transport = Transport::spawn(&spec, 1024).unwrap();
    let run = record(start_run(settings(), transport, Box::new(Panics))).await;
    assert_conformant(&run);
    match &run.completion {
        Err(AgentError::Protocol { reason }) => assert_eq!(reason, "the panics converter panicked"),
        other => panic!("{other:?}"),
    }
}

/// The grandchild's session id, proving it left the agent's group and session.
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// Whether `pid` is gone entirely: killed and reaped, not left as a zombie.
async fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Reads events until the fake CLI reports its grandchild; checks it is in a session of its own.
async fn grandchild(events: &mut agent_api::run::UniversalEvents) -> i32 {
    use futures::StreamExt;
    while let Some(event) = events.next().await {
        if let Some(pid) = reported_pid(&event) {
            assert_eq!(
                session_of(pid),
                Some(pid),
                "the grandchild leads its own session"
            );
            return pid;
        }
    }
    panic!("the fake CLI never reported its grandchild");
}

#[tokio::test]
async fn a_setsid_grandchild_dies_on_cancel() {
    let handle = start(&["setsid-child"], settings());
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let pid = grandchild(&mut events).await;
    control.cancel();
    while futures::StreamExt::next(&mut events).await.is_some() {}
    assert!(matches!(completion.await, Err(AgentError::Cancelled)));
    assert!(gone(pid).await, "the setsid grandchild survived cancel");
}

#[tokio::test]
async fn a_setsid_grandchild_dies_on_timeout() {
    let mut settings = settings();
    settings.timeout = Some(Duration::from_millis(800));
    let run = record(start(&["setsid-child"], settings)).await;
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
    let pid = run
        .universal
        .iter()
        .find_map(reported_pid)
        .expect("pid reported");
    assert!(
        gone(pid).await,
        "the setsid grandchild survived the timeout"
    );
}

#[tokio::test]
async fn a_setsid_grandchild_dies_when_the_handle_is_dropped() {
    let (mut events, completion) = start(&["setsid-child"], settings()).into_universal();
    let pid = grandchild(&mut events).await;
    drop(events);
    drop(completion);
    assert!(
        gone(pid).await,
        "the setsid grandchild outlived the dropped handle"
    );
}

#[tokio::test]
async fn an_orphan_left_by_an_agent_that_exited_is_killed_and_reaped() {
    let (mut events, completion) = start(&["setsid-orphan"], settings()).into_universal();
    let pid = grandchild(&mut events).await;
    while futures::StreamExt::next(&mut events).await.is_some() {}
    assert!(completion.await.is_ok());
    assert!(
        gone(pid).await,
        "the orphaned grandchild outlived the run (or stayed a zombie)"
    );
}
