//! The end-to-end session checks every warm backend runs on the real CLI and the bench's `echo`
//! model; `left` lists the processes the session may have left behind (none, when it is over).

use std::time::Duration;

use agent_api::{AgentBackend, AgentError, RunRequest};

use super::{assert_session_conformant, SessionRecord};
use crate::Answers;

fn alive(pid: u32) -> bool {
    // Signal 0 only asks whether the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

/// Waits up to 5 s for every process whose working directory is inside `dir` to be gone.
pub(crate) async fn none_left(left: &dyn Fn() -> Vec<i32>) -> Vec<i32> {
    for _ in 0..50 {
        if left().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    left()
}

fn final_text(record: &SessionRecord, turn: usize) -> String {
    record.turns[turn]
        .completion
        .as_ref()
        .unwrap()
        .final_text
        .clone()
        .unwrap_or_default()
}

/// Three turns on one process; the bench's `echo` model sees 1, 2, then 3 user turns.
pub async fn three_turns_on_one_process(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    three_turns_after_context(backend, template, left, 0).await;
}

/// [`three_turns_on_one_process`] for an agent that opens every conversation with `context`
/// user turns of its own (Qwen Code's environment message): the model sees `context` + 1, 2, 3.
pub async fn three_turns_after_context(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
    context: usize,
) {
    let mut session = backend.open_session(template).await.unwrap();
    let pid = session.process_id().expect("a spawned CLI");
    let mut record = SessionRecord::default();
    for (n, prompt) in ["first", "second", "third"].into_iter().enumerate() {
        assert!(
            record.turn(&mut session, prompt).await.is_ok(),
            "turn {}: {:?}",
            n + 1,
            record.turns[n].completion
        );
        let text = final_text(&record, n);
        assert!(
            text.starts_with(&format!("echo: user_turns={} ", context + n + 1)),
            "turn {}: {text}",
            n + 1
        );
        assert!(text.ends_with(&format!("last={prompt}")), "{text}");
        assert_eq!(session.process_id(), Some(pid));
        assert!(alive(pid), "one process for the whole session");
    }
    assert!(session.native_session_id().is_some());
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
}

/// A second turn cancelled at once, then a good third turn on the same process (`echo` model).
pub async fn cancelled_second_turn_then_a_good_third(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut session = backend.open_session(template).await.unwrap();
    let pid = session.process_id().unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let second = session.send("second").await.unwrap();
    second.control().cancel();
    let completion = record.record(second, Answers::none()).await;
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );
    assert!(
        record.turn(&mut session, "third").await.is_ok(),
        "{:?}",
        record.turns[2].completion
    );
    assert!(
        final_text(&record, 2).ends_with("last=third"),
        "{}",
        final_text(&record, 2)
    );
    assert_eq!(session.process_id(), Some(pid));
    assert!(alive(pid), "the interrupt kept the process");
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
}

/// An agent whose interrupt ends its whole session (Qwen Code's stream-json): the cancelled
/// turn ends `Cancelled`, the next send is `SessionClosed` at once, and no process is left.
pub async fn cancel_ends_the_session(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut session = backend.open_session(template).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let second = session.send("second").await.unwrap();
    second.control().cancel();
    let completion = record.record(second, Answers::none()).await;
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );
    let started = std::time::Instant::now();
    assert!(matches!(
        session.send("third").await,
        Err(AgentError::SessionClosed)
    ));
    assert!(started.elapsed() < Duration::from_secs(1));
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
}

/// The agent killed between turns: the next send is `SessionClosed`, at once.
pub async fn killed_between_turns(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut session = backend.open_session(template).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let pid = session.process_id().unwrap();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    assert!(matches!(
        session.send("second").await,
        Err(AgentError::SessionClosed)
    ));
    assert!(started.elapsed() < Duration::from_secs(1));
    record.trailing = session.close().await.unwrap();
    assert_eq!(
        record.trailing.last().map(|e| e.type_name()),
        Some("session.ended")
    );
    assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
}

/// A dropped session leaves no process.
pub async fn dropped_leaves_no_process(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut session = backend.open_session(template).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let pid = session.process_id().unwrap();
    drop(session);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
    // The driver reaps the killed process (no zombie) shortly after.
    for _ in 0..50 {
        if !alive(pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the dropped session's process was reaped");
}

/// A session opened on the native session of an earlier one-shot run (`SessionSelector::Resume`):
/// its first turn is the conversation's second (`echo` model), on the same native session.
pub async fn opened_from_an_earlier_run(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut first = template.clone();
    first.prompt = "first".into();
    let earlier = crate::record(backend.run(first).await.unwrap()).await;
    let id = earlier
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .expect("the run's native session id");
    assert_eq!(none_left(left).await, Vec::<i32>::new());
    let mut session = backend
        .open_session(template.with_session(agent_api::SessionSelector::Resume(id.clone().into())))
        .await
        .unwrap();
    let mut record = SessionRecord::default();
    assert!(
        record.turn(&mut session, "second").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    let text = final_text(&record, 0);
    assert!(
        text.starts_with("echo: user_turns=2 ") && text.ends_with("last=second"),
        "the model sees the earlier turn: {text}"
    );
    assert_eq!(
        session.native_session_id().as_deref(),
        Some(id.as_str()),
        "the same native session"
    );
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
}

/// A warm session switches modes between turns (`agent_api.session.mode_switch`, the bench's
/// `write_edit` model; the template's policy approves every request): an unknown mode is
/// refused naming the valid ones; in plan mode the turn writes nothing; back in the default
/// mode the same turn writes `created.txt` in `cwd`, on the same process.
pub async fn switches_to_plan_and_back(
    backend: &dyn AgentBackend,
    template: RunRequest,
    cwd: &std::path::Path,
    left: &dyn Fn() -> Vec<i32>,
) {
    let session = backend.open_session(template).await.unwrap();
    switch_to_plan_and_back(backend, session, SessionRecord::default(), cwd, left).await;
}

/// [`switches_to_plan_and_back`] for a backend that knows its agent's modes only from the agent
/// (the generic `acp` kind: the modes its `session/new` answer advertised): a first turn in
/// the default mode (its file removed after it) opens the session before the switches.
pub async fn switches_to_plan_and_back_after_a_turn(
    backend: &dyn AgentBackend,
    template: RunRequest,
    cwd: &std::path::Path,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut session = backend.open_session(template).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    std::fs::remove_file(cwd.join("created.txt")).expect("the default mode wrote the file");
    switch_to_plan_and_back(backend, session, record, cwd, left).await;
}

async fn switch_to_plan_and_back(
    backend: &dyn AgentBackend,
    mut session: agent_api::Session,
    mut record: SessionRecord,
    cwd: &std::path::Path,
    left: &dyn Fn() -> Vec<i32>,
) {
    use agent_api::request::AgentMode;
    assert!(session.is_warm());
    let pid = session.process_id();
    let first = record.turns.len();
    session
        .set_mode(AgentMode::Plan)
        .await
        .expect("the session switches to plan mode");
    let err = session
        .set_mode(AgentMode::parse("no-such-mode"))
        .await
        .unwrap_err();
    // The refusal names this agent (not another of the same protocol family).
    assert!(
        matches!(&err, AgentError::UnknownMode { kind, .. } if kind == backend.info().kind.as_str()),
        "{err:?}"
    );
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[first].completion
    );
    assert!(
        !cwd.join("created.txt").exists(),
        "the session wrote a file in plan mode"
    );
    session
        .set_mode(AgentMode::Default)
        .await
        .expect("the session switches back");
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[first + 1].completion
    );
    assert!(
        cwd.join("created.txt").exists(),
        "no file written back in the default mode: {}",
        final_text(&record, first + 1)
    );
    assert_eq!(
        session.process_id(),
        pid,
        "one process for the whole session"
    );
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new());
}
