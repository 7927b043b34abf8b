//! Processes that leave the agent's process group (`setsid`, as Claude Code's tool shells do) die
//! with the run on every path out of it: timeout, cancel, drop and the agent's own exit. Rows of
//! the fault table (spec/run-protocol.md §5).

use std::time::{Duration, Instant};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::universal::{ContentPart, UniversalEvent, UniversalEventBody};
use agent_api::{AgentError, AgentKind, RunHandle};
use agent_api_conformance::fake::FakeProtocol;
use agent_api_conformance::record;
use futures::StreamExt;
use serde_json::Value;

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("fake"));
    settings.cancel_grace = Duration::from_millis(300);
    settings.term_grace = Duration::from_millis(500);
    settings
}

fn start(mode: &str, settings: RunSettings) -> RunHandle {
    let spec = CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).arg(mode);
    let transport = Transport::spawn(&spec, settings.line_cap).expect("the fake CLI spawns");
    start_run(settings, transport, Box::new(FakeProtocol::default()))
}

fn reported_pid(event: &UniversalEvent) -> Option<i32> {
    let UniversalEventBody::ItemCompleted(d) = &event.body else { return None };
    d.item.content.iter().find_map(|part| match part {
        ContentPart::Status { label, detail: Some(detail) } if label == "pid" => {
            serde_json::from_str::<Value>(detail).ok()?["pid"].as_i64().map(|pid| pid as i32)
        }
        _ => None,
    })
}

/// The grandchild's session id, proving it left the agent's group and session.
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().nth(3)?.parse().ok()
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
async fn grandchild(events: &mut agent_api::UniversalEvents) -> i32 {
    while let Some(event) = events.next().await {
        if let Some(pid) = reported_pid(&event) {
            assert_eq!(session_of(pid), Some(pid), "the grandchild leads its own session");
            return pid;
        }
    }
    panic!("the fake CLI never reported its grandchild");
}

#[tokio::test]
async fn a_setsid_grandchild_dies_on_cancel() {
    let handle = start("setsid-child", settings());
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let pid = grandchild(&mut events).await;
    control.cancel();
    while events.next().await.is_some() {}
    assert!(matches!(completion.await, Err(AgentError::Cancelled)));
    assert!(gone(pid).await, "the setsid grandchild survived cancel");
}

#[tokio::test]
async fn a_setsid_grandchild_dies_on_timeout() {
    let mut settings = settings();
    settings.timeout = Some(Duration::from_millis(800));
    let run = record(start("setsid-child", settings)).await;
    assert!(matches!(run.completion, Err(AgentError::Timeout { .. })), "{:?}", run.completion);
    let pid = run.universal.iter().find_map(reported_pid).expect("pid reported");
    assert!(gone(pid).await, "the setsid grandchild survived the timeout");
}

#[tokio::test]
async fn a_setsid_grandchild_dies_when_the_handle_is_dropped() {
    let (mut events, completion) = start("setsid-child", settings()).into_universal();
    let pid = grandchild(&mut events).await;
    drop(events);
    drop(completion);
    assert!(gone(pid).await, "the setsid grandchild outlived the dropped handle");
}

#[tokio::test]
async fn an_orphan_left_by_an_agent_that_exited_is_killed_and_reaped() {
    let (mut events, completion) = start("setsid-orphan", settings()).into_universal();
    let pid = grandchild(&mut events).await;
    while events.next().await.is_some() {}
    assert!(completion.await.is_ok());
    assert!(gone(pid).await, "the orphaned grandchild outlived the run (or stayed a zombie)");
}
