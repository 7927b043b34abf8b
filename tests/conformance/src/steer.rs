//! The end-to-end steering checks (`agent_api.control.steer`) every steerable backend runs on its
//! real CLI and the bench's `steer` model: a turn whose shell command (`sleep 4`) is running is
//! steered mid-way; the model's next request holds the steering message in the same conversation
//! as the command's result, the turn ends once, with one completion whose answer echoes it; a
//! steer after the turn ended is a typed error; a steered turn cancelled afterwards leaves no
//! process.

use std::time::{Duration, Instant};

use agent_api::universal::{ItemKind, ItemRole, UniversalEventBody};
use agent_api::{AgentBackend, AgentError, RunControl, RunHandle, RunRequest, UniversalEvent};
use futures::StreamExt;

use crate::session::e2e::none_left;
use crate::session::status_of;
use crate::RunRecord;

/// The steering message the checks send.
pub const STEER_TEXT: &str = "Also say banana.";

/// The prompt of a steered turn (the `steer` model runs its slow command whatever it is).
pub const PROMPT: &str = "Run the slow command.";

/// A steered run: both views, and how the steer went.
#[derive(Debug)]
pub struct Steered {
    /// The run.
    pub run: RunRecord,
    /// What `RunControl::steer` returned.
    pub steer: Result<(), AgentError>,
    /// How long `steer` took to return (to the agent's acknowledgement).
    pub took: Duration,
    /// The run's control, for a steer after it ended.
    pub control: RunControl,
}

/// When [`drive_steered`] steers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerAt {
    /// Once the first tool call has started (the command runs).
    ToolCall,
    /// Once the answer after the tool's result has started (the turn's last step).
    Answer,
}

/// Reads `handle`'s run, steering it with [`STEER_TEXT`] at `at` (and then cancelling it, when
/// `cancel_after`).
pub async fn drive_steered(handle: RunHandle, at: SteerAt, cancel_after: bool) -> Steered {
    let mut projector = agent_api::kit::projection::Projector::new(
        handle.agent_kind().clone(),
        handle.tools_structured(),
    );
    let tools_structured = handle.tools_structured();
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut universal: Vec<UniversalEvent> = Vec::new();
    let mut steering = None;
    let mut results = 0;
    while let Some(event) = events.next().await {
        let started = match &event.body {
            UniversalEventBody::ItemStarted(data) => Some(&data.item),
            _ => None,
        };
        results += usize::from(
            event
                .completed_item()
                .is_some_and(|item| item.kind == ItemKind::ToolResult),
        );
        let now = match at {
            SteerAt::ToolCall => started.is_some_and(|item| item.kind == ItemKind::ToolCall),
            SteerAt::Answer => {
                results > 0
                    && started.is_some_and(|item| {
                        item.kind == ItemKind::Message && item.role == Some(ItemRole::Assistant)
                    })
            }
        };
        if now && steering.is_none() {
            let control = control.clone();
            steering = Some(tokio::spawn(async move {
                let start = Instant::now();
                let result = control.steer(STEER_TEXT).await;
                let took = start.elapsed();
                if cancel_after {
                    control.cancel();
                }
                (result, took)
            }));
        }
        universal.push(event);
    }
    let completion = completion.await;
    let (steer, took) = steering
        .expect("the run started a tool call to steer during")
        .await
        .expect("the steering task ends");
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    Steered {
        run: RunRecord {
            universal,
            wrapper,
            completion,
            tools_structured,
        },
        steer,
        took,
        control,
    }
}

/// The texts of the user message items the run completed.
pub fn user_messages(run: &RunRecord) -> Vec<String> {
    run.universal
        .iter()
        .filter_map(UniversalEvent::completed_item)
        .filter(|item| item.kind == ItemKind::Message && item.role == Some(ItemRole::User))
        .map(|item| item.text())
        .collect()
}

/// The answer of a run that completed.
fn answer_of(run: &RunRecord) -> String {
    run.completion
        .as_ref()
        .expect("the steered turn completes")
        .final_text
        .clone()
        .unwrap_or_default()
}

/// A warm session's turn steered while its command runs: the steer is taken, the message is a
/// user message item of that turn (and a user text in the wrapper view), the model's request
/// after the command holds the message with the command's call (one conversation, one turn),
/// the turn completes once and its answer echoes the message; a steer after the turn is
/// [`AgentError::NoTurnRunning`]. Returns how long the steer took.
pub async fn steered_turn_reads_the_message_in_the_same_turn(
    backend: &dyn AgentBackend,
    template: RunRequest,
    server: &agent_bench::ModelServer,
    left: &dyn Fn() -> Vec<i32>,
) -> Duration {
    let mut session = backend.open_session(template).await.expect("session opens");
    let handle = session
        .send(PROMPT)
        .await
        .expect("the session takes the turn");
    let steered = drive_steered(handle, SteerAt::ToolCall, false).await;
    assert!(steered.steer.is_ok(), "steer: {:?}", steered.steer);
    let run = &steered.run;
    let answer = answer_of(run);
    assert!(
        answer.contains(&format!("last={STEER_TEXT}")),
        "the answer after the command echoes the steering message as the last user text: {answer:?}"
    );
    let users = user_messages(run);
    assert_eq!(
        users.iter().filter(|t| t.contains(STEER_TEXT)).count(),
        1,
        "one user message item holds the steering text: {users:?}"
    );
    let ends = run
        .universal
        .iter()
        .filter_map(status_of)
        .filter(|(label, _)| *label == "turn_completed" || *label == "turn_failed")
        .count();
    assert!(ends >= 1, "the turn ends");
    let turn_ends_after_steer = run
        .universal
        .iter()
        .skip_while(|e| {
            !e.completed_item().is_some_and(|item| {
                item.role == Some(ItemRole::User) && item.text().contains(STEER_TEXT)
            })
        })
        .filter_map(status_of)
        .filter(|(label, _)| label.starts_with("turn_"))
        .map(|(label, _)| label.to_string())
        .collect::<Vec<_>>();
    assert!(
        !turn_ends_after_steer.iter().any(|l| l == "turn_started"),
        "no turn starts after the steering message: it is in the running turn ({turn_ends_after_steer:?})"
    );
    assert!(
        run.wrapper
            .iter()
            .any(|e| e.channel == Some(agent_api::run::Channel::User)
                && e.text.as_deref().is_some_and(|t| t.contains(STEER_TEXT))),
        "the wrapper view has the steering message as a user text"
    );
    let requests = server.requests();
    let steered_request = requests
        .iter()
        .map(|r| r.body.to_string())
        .find(|body| body.contains(STEER_TEXT))
        .expect("a model request holds the steering message");
    assert!(
        steered_request.contains("sleep 4") && steered_request.contains(PROMPT.trim_end_matches('.')),
        "the request with the steering message continues the turn: the prompt and the command's call are in it"
    );
    let late = steered.control.steer("too late").await;
    assert!(
        matches!(late, Err(AgentError::NoTurnRunning)),
        "a steer after the turn ended is typed: {late:?}"
    );
    let trailing = session.close().await.expect("the session closes");
    let took = steered.took;
    crate::session::assert_session_conformant(&crate::session::SessionRecord {
        turns: vec![steered.run],
        trailing,
    });
    assert_eq!(none_left(left).await, Vec::<i32>::new(), "processes left");
    took
}

/// A one-shot run steered while its command runs, then cancelled: `Cancelled`, and nothing of the
/// agent is left; a steer after it is [`AgentError::NoTurnRunning`].
pub async fn steered_run_cancelled_leaves_no_process(
    backend: &dyn AgentBackend,
    request: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let handle = backend.run(request).await.expect("run starts");
    let steered = drive_steered(handle, SteerAt::ToolCall, true).await;
    assert!(steered.steer.is_ok(), "steer: {:?}", steered.steer);
    crate::assert_conformant(&steered.run);
    assert!(
        matches!(steered.run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        steered.run.completion
    );
    assert_eq!(none_left(left).await, Vec::<i32>::new(), "processes left");
    let late = steered.control.steer("too late").await;
    assert!(matches!(late, Err(AgentError::NoTurnRunning)), "{late:?}");
}

/// A warm session's turn steered once its last step (the answer) has begun: the steer is taken
/// (the agent runs the message right after that step, in the same turn) or refused as
/// [`AgentError::TurnEndedBeforeSteer`]; either way the turn completes once and the session's
/// next turn is in step (its answer is its own).
pub async fn steered_at_the_answer_the_session_stays_in_step(
    backend: &dyn AgentBackend,
    template: RunRequest,
    left: &dyn Fn() -> Vec<i32>,
) {
    let mut session = backend.open_session(template).await.expect("session opens");
    let handle = session
        .send(PROMPT)
        .await
        .expect("the session takes the turn");
    let steered = drive_steered(handle, SteerAt::Answer, false).await;
    let answer = answer_of(&steered.run);
    match &steered.steer {
        Ok(()) => assert!(
            answer.contains(&format!("last={STEER_TEXT}")),
            "a steer the agent took is answered in the turn: {answer:?}"
        ),
        Err(AgentError::TurnEndedBeforeSteer) => {}
        Err(other) => panic!("steer at the answer: {other:?}"),
    }
    let mut record = crate::session::SessionRecord {
        turns: vec![steered.run],
        trailing: Vec::new(),
    };
    let next = record.turn(&mut session, "Second turn.").await;
    let next = next.as_ref().expect("the next turn completes");
    assert!(
        next.final_text
            .as_deref()
            .is_some_and(|t| t.contains("last=Second turn.")),
        "the next turn's answer is its own: {:?}",
        next.final_text
    );
    record.trailing = session.close().await.expect("the session closes");
    crate::session::assert_session_conformant(&record);
    assert_eq!(none_left(left).await, Vec::<i32>::new(), "processes left");
}
