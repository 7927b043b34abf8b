//! The faults of `spec/faults.md` that `faults.rs` and `lean.rs` do not already prove, on the fake
//! CLI (`fake_agent_cli`): a stderr flood while stdout is idle, a 256 MiB line, a binary that is
//! not executable, an agent that closes its stdin while the SDK writes, cancel after completion,
//! a permission answered after its run ended. Every run ends with exactly one completion, its
//! transcript passes the conformance checks (one terminal error when failing), and no process of
//! its group is left (checked by process group id).

use std::time::Duration;

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::kit::{Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::universal::{ContentPart, UniversalEventBody};
use agent_api::UniversalEvent;
use agent_api::{
    AgentBackend, AgentError, AgentKind, AgentWrapperEventKind, PermissionDecision, RunCompletion,
    RunHandle, RunRequest,
};
use agent_api_conformance::fake::FakeProtocol;
use agent_api_conformance::{assert_conformant, record, record_answering, Answers, RunRecord};
use agent_bench::process::group_gone_within;
use serde_json::Value;

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("fake"));
    settings.cancel_grace = Duration::from_millis(300);
    settings.term_grace = Duration::from_millis(500);
    settings
}

fn spec(args: &[&str]) -> CommandSpec {
    CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).args(args)
}

fn start(args: &[&str]) -> RunHandle {
    let transport =
        Transport::spawn(&spec(args), settings().line_cap).expect("the fake CLI spawns");
    start_run(settings(), transport, Box::new(FakeProtocol::default()))
}

/// The pid the fake CLI reported for itself: the id of the run's process group.
fn group_of(run: &RunRecord) -> i32 {
    run.universal
        .iter()
        .find_map(reported_pid)
        .expect("the fake CLI reported its pid")
}

fn reported_pid(event: &UniversalEvent) -> Option<i32> {
    let UniversalEventBody::ItemCompleted(d) = &event.body else {
        return None;
    };
    d.item.content.iter().find_map(|part| match part {
        ContentPart::Status {
            label,
            detail: Some(detail),
        } if label == "pid" => serde_json::from_str::<Value>(detail).ok()?["pid"]
            .as_i64()
            .map(|pid| pid as i32),
        _ => None,
    })
}

/// The run's process group has no process left (not even a zombie) within five seconds.
async fn assert_group_gone(run: &RunRecord) {
    let pgid = group_of(run);
    assert!(
        group_gone_within(pgid, Duration::from_secs(5)).await,
        "process group {pgid} outlived its run"
    );
}

/// The peak resident set of this test process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_stderr_flood_while_stdout_is_idle_never_wedges_the_run_and_is_kept_bounded() {
    let run = tokio::time::timeout(
        Duration::from_secs(60),
        record(start(&["stderr-flood", "64"])),
    )
    .await
    .expect("a 64 MiB stderr flood does not wedge the run");
    assert_conformant(&run);
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ProcessExited {
                exit_code: Some(4),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
    assert_eq!(run.assistant_text(), "after the flood");
    assert_eq!(
        run.of_type("error").count(),
        1,
        "exactly one terminal error: {:?}",
        run.types()
    );
    let UniversalEventBody::SessionEnded(end) = &run.universal.last().unwrap().body else {
        panic!("the run ends with session.ended")
    };
    let stderr = end.stderr.as_ref().expect("the stderr summary");
    assert!(
        stderr.truncated && stderr.total_lines == Some(64 * 1024),
        "{stderr:?}"
    );
    let kept = stderr.head.as_deref().unwrap_or_default().len()
        + stderr.tail.as_deref().unwrap_or_default().len();
    assert!(
        kept < 128 * 1024,
        "the stderr summary keeps {kept} bytes of a 64 MiB flood"
    );
    assert_group_gone(&run).await;
}

#[tokio::test]
async fn a_256_mib_line_is_skipped_with_one_bounded_status_and_memory_stays_bounded() {
    let before = peak_rss_kib();
    let run = record(start(&["big-line", "256"])).await;
    let grown = peak_rss_kib().saturating_sub(before);
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(run.assistant_text(), "beforeafter");
    let skipped = run.wrapper_of(AgentWrapperEventKind::Status).filter(|e| {
        e.message
            .as_deref()
            .is_some_and(|m| m.starts_with("native_line_skipped"))
    });
    assert_eq!(skipped.count(), 1);
    // The line is never held: the peak grows by far less than the line's 256 MiB.
    assert!(
        grown < 96 * 1024,
        "peak RSS grew by {grown} KiB reading a 256 MiB line"
    );
}

#[tokio::test]
async fn a_binary_that_is_not_executable_is_a_typed_spawn_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("agent");
    std::fs::write(&program, "#!/bin/sh\necho never\n").unwrap();
    match Transport::spawn(&CommandSpec::new(&program), 1024) {
        Err(AgentError::Spawn {
            program: named,
            source,
        }) => {
            assert_eq!(named, program);
            assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied);
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("spawned a file without the execute bit"),
    }
}

/// Replies to every line the agent prints, as a two-way protocol answering requests would.
struct Replier(FakeProtocol);

impl Protocol for Replier {
    fn name(&self) -> &'static str {
        "replier"
    }
    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        ctx.send(&serde_json::json!({"reply": "x".repeat(4096)}));
        self.0.on_message(message, ctx)
    }
    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.0.finish(exit, ctx)
    }
}

#[tokio::test]
async fn an_agent_that_closes_its_stdin_while_the_sdk_writes_ends_cleanly_with_every_line() {
    let transport =
        Transport::spawn(&spec(&["close-stdin", "20"]).with_stdin(), 1024 * 1024).unwrap();
    let run = record(start_run(
        settings(),
        transport,
        Box::new(Replier(FakeProtocol::default())),
    ))
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let expected: String = (0..20).map(|i| format!("{i} ")).collect();
    assert_eq!(run.assistant_text(), expected);
    assert_group_gone(&run).await;
}

#[tokio::test]
async fn cancel_after_completion_changes_nothing_and_cancelling_twice_is_harmless() {
    let handle = start(&["text", "3"]);
    let control = handle.control();
    let run = record(handle).await;
    control.cancel();
    control.cancel();
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(run.assistant_text(), "line 0 line 1 line 2 ");
    assert_eq!(run.of_type("session.ended").count(), 1);
    assert_group_gone(&run).await;
}

#[tokio::test]
async fn a_permission_answered_after_its_run_ended_is_run_finished() {
    let options = agent_api_scripted::ScriptedOptions::scenario("permission").delay_ms(0);
    let handle = agent_api_scripted::ScriptedBackend::new()
        .run(RunRequest::new("hi").with_options(&options))
        .await
        .unwrap();
    let control = handle.control();
    let answers = Answers {
        cancel_at_permission: true,
        ..Answers::none()
    };
    let run = record_answering(handle, answers).await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    let id = run
        .universal
        .iter()
        .find_map(|e| match &e.body {
            UniversalEventBody::PermissionRequested(p) => Some(p.permission_id.clone()),
            _ => None,
        })
        .expect("the scenario asked for a permission");
    let late = control
        .respond_permission(&id, PermissionDecision::Allow)
        .await;
    assert!(matches!(late, Err(AgentError::RunFinished)), "{late:?}");
}

#[tokio::test]
async fn a_grandchild_holding_the_pipes_after_the_agent_exits_neither_wedges_the_run_nor_survives_it(
) {
    let run = tokio::time::timeout(Duration::from_secs(30), record(start(&["pipe-holder"])))
        .await
        .expect("the run ends although a grandchild still holds stdout and stderr");
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(run.assistant_text(), "done");
    let grandchild = run
        .universal
        .iter()
        .find_map(reported_pid)
        .expect("the fake CLI reported its grandchild");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while agent_bench::process::process_alive(grandchild) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        !agent_bench::process::process_alive(grandchild),
        "the grandchild holding the pipes outlived the run"
    );
}

#[tokio::test]
async fn what_an_agent_wrote_before_it_exited_is_read_whole_however_short_the_drain_grace() {
    // The pipe holds up to 64 KiB the agent wrote before it exited; a driver that a loaded
    // machine runs late reads it after the grace has begun, and may find the grace over with
    // lines still waiting (or not yet seen ready by the runtime). A grace of 1 ms (the default
    // is 2 s) makes that likely: the driver that cut the drain at the grace read 18,940 lines of
    // 20,000 on a quiet machine; the one whose grace counted from the last read, 19,399–19,711
    // with six busy loops beside it. Now a drain's end only kills the writers; the pipe is
    // read to its end.
    const LINES: usize = 20_000;
    for _ in 0..5 {
        let mut settings = settings();
        settings.drain_grace = Duration::from_millis(1);
        let transport = Transport::spawn(&spec(&["text", &LINES.to_string()]), settings.line_cap)
            .expect("the fake CLI spawns");
        let run = record(start_run(
            settings,
            transport,
            Box::new(FakeProtocol::default()),
        ))
        .await;
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        let text = run.assistant_text();
        let lines = text.matches("line ").count();
        assert_eq!(lines, LINES, "lines read of the {LINES} written");
        assert!(text.ends_with(&format!("line {} ", LINES - 1)));
    }
}
