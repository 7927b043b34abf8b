//! Bounded runs under a misbehaving CLI or caller (`fake_agent_cli`): the byte budget of waiting
//! events, the bounded reply queue, an agent that closes its output but lives on, and timeouts
//! past the clock's range. Every run still ends with one typed completion and `session.ended`.

use std::time::{Duration, Instant};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::kit::{Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::universal::UniversalEventBody;
use agent_api::{AgentError, AgentKind, RunCompletion, RunHandle};
use agent_api_conformance::fake::FakeProtocol;
use agent_api_conformance::{assert_conformant, record};
use futures::StreamExt;
use serde_json::Value;

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("fake"));
    settings.cancel_grace = Duration::from_millis(300);
    settings.term_grace = Duration::from_millis(500);
    settings
}

fn start(args: &[&str], settings: RunSettings, protocol: Box<dyn Protocol>) -> RunHandle {
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli"))
        .args(args)
        .with_stdin();
    let transport = Transport::spawn(&spec, settings.line_cap).expect("the fake CLI spawns");
    start_run(settings, transport, protocol)
}

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

fn progress(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Waits until the child's progress stops moving; returns the bytes it managed to write.
async fn stalled(path: &std::path::Path) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = progress(path);
        if now == last && now > 0 {
            return now;
        }
        assert!(Instant::now() < deadline, "the child never stalled");
        last = now;
    }
}

/// A run of the fake CLI printing `lines` numbered lines within a `budget`-byte budget; the CLI
/// writes its progress (bytes written) to the returned file, in the returned directory.
fn numbered_run(lines: usize, budget: usize) -> (tempfile::TempDir, std::path::PathBuf, RunHandle) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("progress");
    let mut settings = settings();
    settings.buffer_budget = budget;
    let handle = start(
        &["numbered", &lines.to_string(), file.to_str().unwrap()],
        settings,
        Box::new(FakeProtocol::default()),
    );
    (dir, file, handle)
}

#[tokio::test]
async fn a_paused_consumer_blocks_the_agent_on_its_pipe_within_the_budget_and_every_event_arrives_in_order(
) {
    const LINES: usize = 20_000;
    let budget = 64 * 1024;
    let (_dir, file, handle) = numbered_run(LINES, budget);
    let (mut events, completion) = handle.into_universal();
    let first = events.next().await.expect("session.started");
    assert_eq!(first.type_name(), "session.started");

    // The consumer stops polling: the child must block on its full pipe.
    let written = stalled(&file).await;
    let line_len = 1024;
    assert!(
        written < LINES * line_len,
        "the child wrote everything ({written} bytes): nothing pushed back"
    );
    assert!(
        events.buffered_bytes() <= budget,
        "{} bytes buffered over a {budget}-byte budget",
        events.buffered_bytes()
    );
    // Ahead of the consumer: the budget, half a budget of lines in the batch being built, the
    // line reader's 64 KiB buffer and the pipe's 64 KiB.
    let ahead = budget + budget / 2 + 128 * 1024 + 2 * line_len;
    assert!(
        written <= ahead,
        "the child got {written} bytes ahead of a paused consumer (bound {ahead})"
    );

    let mut next = 0usize;
    while let Some(event) = events.next().await {
        if let UniversalEventBody::ItemDelta(delta) = &event.body {
            let number: usize = delta.delta[..8].parse().unwrap();
            assert_eq!(number, next, "events out of order or lost");
            next += 1;
        }
    }
    assert_eq!(next, LINES);
    assert!(completion.await.is_ok());
}

/// A consumer that keeps up gets each batch before the run reads on: the run does not fill its
/// budget ahead of a consumer that only waits for its turn on the same thread. (The source here
/// is always ready, as a fast agent's full pipe is, so nothing else would stop the run.)
#[tokio::test]
async fn a_consumer_that_keeps_up_gets_each_batch_before_the_run_reads_on() {
    const LINES: usize = 20_000;
    let log: String = (0..LINES)
        .map(|i| {
            format!(
                "{{\"type\":\"text\",\"text\":\"{i:08} {}\"}}\n",
                "p".repeat(80)
            )
        })
        .collect();
    let settings = settings();
    let budget = settings.buffer_budget;
    let source =
        agent_api::kit::line_source(std::io::Cursor::new(log.into_bytes()), settings.line_cap);
    let handle = start_run(
        settings,
        Transport::replay(source, Some(0)),
        Box::new(FakeProtocol::default()),
    );
    let (mut events, completion) = handle.into_universal();
    let (mut deltas, mut most_buffered) = (0usize, 0usize);
    while let Some(event) = events.next().await {
        // Only while the deltas stream: the completed message at the end holds all their text.
        if let UniversalEventBody::ItemDelta(_) = event.body {
            most_buffered = most_buffered.max(events.buffered_bytes());
            deltas += 1;
        }
    }
    assert_eq!(deltas, LINES);
    assert!(completion.await.is_ok());
    // A batch of these deltas weighs 70-80 KiB; the budget is 1 MiB.
    assert!(
        most_buffered <= budget / 8,
        "{most_buffered} bytes waited for a consumer that keeps up ({budget}-byte budget)"
    );
}

/// A universal-view consumer that gives every event back (to be freed by the run) gets the same
/// events, in order, within the same budget: giving back changes only which thread frees them.
#[tokio::test]
async fn events_given_back_are_freed_by_the_run_and_change_nothing_the_consumer_sees() {
    const LINES: usize = 5_000;
    let budget = 64 * 1024;
    let (_dir, _file, handle) = numbered_run(LINES, budget);
    let (mut events, completion) = handle.into_universal();
    let (mut next, mut sequence) = (0usize, 0u64);
    while let Some(event) = events.next().await {
        assert_eq!(event.sequence, sequence + 1, "gap-free");
        sequence = event.sequence;
        if let UniversalEventBody::ItemDelta(delta) = &event.body {
            assert_eq!(
                delta.delta[..8].parse::<usize>().unwrap(),
                next,
                "events out of order or lost"
            );
            next += 1;
        }
        events.give_back(event);
        assert!(events.buffered_bytes() <= budget);
    }
    assert_eq!(next, LINES);
    assert!(completion.await.is_ok());
}

/// The pid of the process whose command line names `needle` (the test's own temporary path).
fn pid_naming(needle: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            (alive(pid) && String::from_utf8_lossy(&cmdline).contains(needle)).then_some(pid)
        })
}

/// Starts a run whose consumer stops polling once the budget is full, applies `stop` and waits
/// for the agent to be gone without polling; then reads the rest of the stream.
async fn stopped_while_paused(
    settings: RunSettings,
    stop: impl FnOnce(&agent_api::RunControl),
) -> agent_api_conformance::RunRecord {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("progress");
    let mut settings = settings;
    settings.buffer_budget = 64 * 1024;
    let handle = start(
        &["numbered", "20000", file.to_str().unwrap()],
        settings,
        Box::new(FakeProtocol::default()),
    );
    let tools_structured = handle.tools_structured();
    let mut projector =
        agent_api::kit::projection::Projector::new(handle.agent_kind().clone(), tools_structured);
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut universal = vec![events.next().await.expect("session.started")];

    // The consumer stops polling; the budget fills and the child blocks on its pipe.
    stalled(&file).await;
    let pid = pid_naming(file.to_str().unwrap()).expect("the fake agent runs");
    stop(&control);
    // Without the consumer polling, the driver stops the agent and reaps its group.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !alive(pid),
        "the stop waited for the paused consumer: the agent still runs"
    );

    while let Some(event) = events.next().await {
        universal.push(event);
    }
    let completion = completion.await;
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    let run = agent_api_conformance::RunRecord {
        universal,
        wrapper,
        completion,
        tools_structured,
    };
    assert_conformant(&run);
    assert_eq!(
        run.of_type("error").count(),
        1,
        "exactly one terminal error ends the stream"
    );
    run
}

#[tokio::test]
async fn a_cancel_acts_while_the_consumer_is_paused_on_a_full_budget_and_the_stream_ends_with_one_terminal_error(
) {
    let run = stopped_while_paused(settings(), |control| control.cancel()).await;
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn a_timeout_acts_while_the_consumer_is_paused_on_a_full_budget() {
    let mut settings = settings();
    // Long enough for the budget to fill and the child to stall first (`stalled` needs 600 ms).
    settings.timeout = Some(Duration::from_secs(8));
    let run = stopped_while_paused(settings, |_| {}).await;
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
}

/// Sends a 64 KiB reply for every line the agent prints.
struct Chatty;

impl Protocol for Chatty {
    fn name(&self) -> &'static str {
        "chatty"
    }
    fn on_message(&mut self, _message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        ctx.send(&Value::String("r".repeat(64 * 1024)));
        Ok(())
    }
    fn finish(&mut self, exit: &ExitInfo, _ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        Err(exit.early_exit_error())
    }
}

#[tokio::test]
async fn an_agent_that_never_reads_its_stdin_fails_the_run_typed_once_the_reply_queue_is_full() {
    let mut settings = settings();
    settings.input_limit = 256 * 1024;
    let run = tokio::time::timeout(
        Duration::from_secs(20),
        record(start(&["ignore-stdin", "100"], settings, Box::new(Chatty))),
    )
    .await
    .expect("the run ends instead of queueing replies forever");
    assert_conformant(&run);
    match &run.completion {
        Err(AgentError::InputBlocked { queued_bytes }) => {
            assert!(*queued_bytes <= 256 * 1024, "{queued_bytes}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_agent_that_closes_stdout_but_lives_on_ends_typed_after_the_grace_and_is_reaped() {
    let mut settings = settings();
    settings.output_closed_grace = Duration::from_millis(500);
    let started = Instant::now();
    let run = tokio::time::timeout(
        Duration::from_secs(20),
        record(start(
            &["close-stdout"],
            settings,
            Box::new(FakeProtocol::default()),
        )),
    )
    .await
    .expect("the run ends without a timeout");
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::OutputClosed { .. })),
        "{:?}",
        run.completion
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid = run
        .universal
        .iter()
        .find_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) => d.item.content.iter().find_map(|p| match p {
                agent_api::universal::ContentPart::Status {
                    label,
                    detail: Some(detail),
                } if label == "pid" => serde_json::from_str::<Value>(detail).ok()?["pid"].as_i64(),
                _ => None,
            }),
            _ => None,
        })
        .expect("the pid line") as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pid), "the agent outlived its run");
}

#[tokio::test]
async fn a_timeout_of_duration_max_saturates_and_the_run_still_ends_with_its_session_end() {
    let mut settings = settings();
    settings.timeout = Some(Duration::MAX);
    settings.cancel_grace = Duration::MAX;
    let run = record(start(
        &["crash"],
        settings,
        Box::new(FakeProtocol::default()),
    ))
    .await;
    assert_conformant(&run);
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ProcessExited {
                exit_code: Some(3),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
    assert_eq!(run.universal.last().unwrap().type_name(), "session.ended");
}

/// Records, per line, whether the run built a raw payload for it.
struct RawProbe(std::sync::Arc<std::sync::Mutex<Vec<bool>>>);

impl Protocol for RawProbe {
    fn name(&self) -> &'static str {
        "raw_probe"
    }
    fn on_message(&mut self, _message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        self.0.lock().unwrap().push(ctx.transcript.raw().is_some());
        ctx.transcript.status("line", None);
        ctx.transcript.status("again", None);
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

async fn probe_raw(wrapper: bool) -> (Vec<bool>, Vec<agent_api::UniversalEvent>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("progress");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut settings = settings();
    settings.include_raw = true;
    let handle = start(
        &["numbered", "200", file.to_str().unwrap()],
        settings,
        Box::new(RawProbe(seen.clone())),
    );
    let universal = if wrapper {
        let (events, completion) = handle.into_wrapper();
        events.count().await;
        completion.await.unwrap();
        Vec::new()
    } else {
        handle.collect_universal().await.0
    };
    let seen = seen.lock().unwrap().clone();
    (seen, universal)
}

#[tokio::test]
async fn raw_payloads_are_shared_by_the_events_of_one_line_whichever_view_reads_the_run() {
    let (seen, events) = probe_raw(false).await;
    assert_eq!(seen.len(), 200);
    assert!(
        seen.iter().all(|&raw| raw),
        "the universal view with include_raw gets every payload"
    );
    let items = events.iter().filter(|e| {
        matches!(
            e.body,
            UniversalEventBody::ItemStarted(_) | UniversalEventBody::ItemCompleted(_)
        )
    });
    let lines: Vec<_> = items.filter_map(|e| e.raw.clone()).collect();
    assert_eq!(
        lines.len(),
        200 * 2 * 2,
        "two status items, started and completed, per line"
    );
    for chunk in lines.chunks(4) {
        assert!(
            chunk
                .iter()
                .all(|raw| std::sync::Arc::ptr_eq(raw, &chunk[0])),
            "the events of one line share its payload"
        );
    }
    // The driver does not know which view reads the run: it builds the same events for both.
    let (seen, _) = probe_raw(true).await;
    assert_eq!(seen.len(), 200);
    assert!(
        seen.iter().all(|&raw| raw),
        "the run read through the wrapper view builds what the universal view gets"
    );
}

#[test]
fn the_scripted_typed_path_matches_its_value_path() {
    use agent_api::kit::replay::RecordingFormat;
    use agent_api::kit::replay::Replay;
    let lines = [
        r#"{"type":"session","id":"s","model":"m"}"#,
        r#"{"type":"text_delta","message_id":"m1","text":"hel"}"#,
        r#"{"type":"text_delta","message_id":"m1","text":"lo"}"#,
        r#"{"type":"message_done","message_id":"m1","text":"hello"}"#,
        r#"{"type":"tool_call","call_id":"c1","name":"shell","message_id":"m1","input":{"command":"ls"}}"#,
        r#"{"type":"tool_result","call_id":"c1","exit_code":0,"stdout":"a\n","denied":false}"#,
        r#"{"type":"text_delta","message_id":7}"#,
        r#"not json"#,
        r#"{"type":"done","status":"success","input_tokens":1,"output_tokens":2}"#,
    ];
    let lines: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    let backend = agent_api_scripted::ScriptedBackend::new();
    agent_api_conformance::typed::assert_typed_matches_value(
        || {
            backend
                .replay_protocol(RecordingFormat::NativeStdout)
                .unwrap()
        },
        &lines,
    );
}
