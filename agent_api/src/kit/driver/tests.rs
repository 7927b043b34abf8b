//! The driver's own rules, on small protocols written here: batches stay within their cap
//! whatever one line makes, and a warm session's stderr reaches its protocol during the turn.

use std::time::Duration;

use futures::StreamExt;

use super::*;
use crate::kit::line_source;
use crate::kit::process::CommandSpec;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::request::Prompt;
use crate::vocabulary::universal::{ContentPart, UniversalEventBody};

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("test"));
    settings.cancel_grace = Duration::from_millis(200);
    settings.term_grace = Duration::from_millis(200);
    settings.shutdown_grace = Duration::from_millis(500);
    settings
}

/// Every native line makes `STATUSES` status items: two events each.
struct Flood;

const STATUSES: usize = 300;

impl Protocol for Flood {
    fn name(&self) -> &'static str {
        "flood"
    }

    fn on_message(
        &mut self,
        _message: serde_json::Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        for n in 0..STATUSES {
            ctx.transcript.status("flood", Some(n.to_string()));
        }
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

fn one_line() -> Transport {
    let source = line_source(std::io::Cursor::new(b"{}\n".to_vec()), 1024);
    Transport::replay(source, Some(0))
}

#[tokio::test]
async fn a_line_that_makes_more_events_than_a_batch_holds_goes_out_in_several_batches() {
    let (mut core, _io) = Core::new(settings(), one_line(), Box::new(Flood));
    let (tx, mut rx) = budget::channel(settings().buffer_budget);
    core.events_tx = Some(tx);
    core.handle_line(b"{}");
    assert!(
        core.transcript.pending_events() > EVENTS_PER_BATCH,
        "the line made {} events",
        core.transcript.pending_events()
    );
    assert!(core.stage(), "the batches went to the caller");
    let sizes = rx.waiting_batch_sizes();
    assert_eq!(
        sizes.iter().sum::<usize>(),
        2 * STATUSES + 1,
        "every event went out (with session.started): {sizes:?}"
    );
    assert!(
        sizes.iter().all(|&n| n <= EVENTS_PER_BATCH),
        "a batch over {EVENTS_PER_BATCH} events: {sizes:?}"
    );
    assert_eq!(core.transcript.pending_events(), 0);
}

#[tokio::test]
async fn the_events_of_a_line_split_into_batches_come_whole_and_in_order() {
    let (events, completion) = start_run(settings(), one_line(), Box::new(Flood))
        .collect_universal()
        .await;
    completion.unwrap();
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(
        sequences,
        (1..=sequences.len() as u64).collect::<Vec<_>>(),
        "no gap, no reordering"
    );
    let statuses = events
        .iter()
        .filter_map(UniversalEvent::completed_item)
        .filter(|i| i.text().is_empty())
        .count();
    assert!(
        statuses >= STATUSES,
        "{statuses} status items of {STATUSES}"
    );
}

/// A warm agent that says what it does on stderr: each stderr line becomes a status item, each
/// turn is one line to its stdin, `{"done":true}` on its stdout ends the turn.
struct Chatty;

impl Protocol for Chatty {
    fn name(&self) -> &'static str {
        "chatty"
    }

    fn reads_stderr(&self) -> bool {
        true
    }

    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        ctx.transcript.status("notice", Some(line.to_string()));
    }

    fn send_turn(&mut self, _prompt: &Prompt, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        ctx.send_text("turn\n");
        Ok(())
    }

    fn on_message(
        &mut self,
        message: serde_json::Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        if message["done"] == true {
            ctx.end_turn(Ok(RunCompletion::new()));
        }
        Ok(())
    }

    fn finish(&mut self, exit: &ExitInfo, _ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        Err(exit.early_exit_error())
    }
}

fn notice_of(event: &UniversalEvent) -> Option<String> {
    let UniversalEventBody::ItemCompleted(data) = &event.body else {
        return None;
    };
    data.item.content.iter().find_map(|part| match part {
        ContentPart::Status { label, detail } if label == "notice" => detail.clone(),
        _ => None,
    })
}

#[tokio::test]
async fn a_warm_sessions_stderr_notice_arrives_during_the_turn() {
    // The agent takes the turn, says "retrying" on stderr, and then waits (for its stdin to close).
    let script = r#"read turn; echo "retrying in 1s" >&2; cat >/dev/null; echo '{"done":true}'"#;
    let spec = CommandSpec::new("/bin/sh")
        .args(["-c", script])
        .with_stdin();
    let transport = Transport::spawn(&spec, 1024 * 1024).expect("sh spawns");
    let mut session = start_session(settings(), transport, Box::new(Chatty));
    let handle = session.send("go").await.expect("the turn starts");
    let (mut events, completion) = handle.into_universal();
    let notice = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.next().await {
            if let Some(notice) = notice_of(&event) {
                return Some(notice);
            }
        }
        None
    })
    .await;
    let notice =
        notice.expect("the stderr notice arrived while the agent still worked on its turn");
    assert_eq!(notice.as_deref(), Some("retrying in 1s"));
    // The turn had not ended: the agent was still waiting.
    let mut completion = std::pin::pin!(completion);
    assert!(
        futures::FutureExt::now_or_never(completion.as_mut()).is_none(),
        "the turn was still in progress"
    );
    drop(events);
    session.close().await.expect("the session closes");
    assert!(
        matches!(completion.await, Err(AgentError::Cancelled)),
        "closing during a turn cancels it"
    );
}

/// Takes every steering message to be acknowledged later, and never acknowledges one.
struct Unanswered;

impl Protocol for Unanswered {
    fn name(&self) -> &'static str {
        "unanswered"
    }

    fn on_message(
        &mut self,
        _message: serde_json::Value,
        _ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        Ok(())
    }

    fn steer(
        &mut self,
        _prompt: &Prompt,
        _ctx: &mut Ctx<'_>,
    ) -> Result<crate::kit::Steering, AgentError> {
        Ok(crate::kit::Steering::Awaiting(7))
    }

    fn finish(
        &mut self,
        _exit: &ExitInfo,
        _ctx: &mut Ctx<'_>,
    ) -> Result<RunCompletion, AgentError> {
        Ok(RunCompletion::new())
    }
}

/// A run whose agent prints one line after `delay` seconds, then ends.
fn slow_line(delay: &str) -> Transport {
    let spec = CommandSpec::new("/bin/sh").args(["-c", &format!("sleep {delay}; echo '{{}}'")]);
    Transport::spawn(&spec, 1024 * 1024).expect("sh spawns")
}

#[tokio::test]
async fn a_steer_the_agent_never_took_fails_typed_when_the_turn_ends_and_later_ones_find_no_turn() {
    let handle = start_run(settings(), slow_line("0.3"), Box::new(Unanswered));
    let control = handle.control();
    let steer = tokio::spawn({
        let control = control.clone();
        async move { control.steer("also this").await }
    });
    let (_events, completion) = handle.collect_universal().await;
    assert!(completion.is_ok());
    assert!(
        matches!(steer.await.unwrap(), Err(AgentError::TurnEndedBeforeSteer)),
        "the turn ended before the agent took it"
    );
    assert!(matches!(
        control.steer("later").await,
        Err(AgentError::NoTurnRunning)
    ));
}

#[tokio::test]
async fn a_protocol_that_cannot_be_steered_refuses_naming_the_capability_and_an_empty_message_is_invalid(
) {
    let handle = start_run(settings(), slow_line("0.3"), Box::new(Flood));
    let control = handle.control();
    let refused = control.steer("also this").await;
    assert!(
        matches!(&refused, Err(AgentError::UnsupportedCapability { capability, .. }) if capability == "agent_api.control.steer"),
        "{refused:?}"
    );
    assert!(matches!(
        control.steer("  ").await,
        Err(AgentError::InvalidRequest { .. })
    ));
    let (_events, completion) = handle.collect_universal().await;
    assert!(completion.is_ok(), "a refused steer leaves the run alone");
}

/// The time of an event as it says.
fn time_of(event: &UniversalEvent) -> std::time::SystemTime {
    humantime::parse_rfc3339(&event.time).expect("an RFC 3339 time")
}

#[tokio::test]
async fn a_turn_started_after_output_held_between_turns_is_stamped_when_it_starts() {
    // Between its turns the agent says something (stderr): nobody takes it then, it waits in
    // the transcript; the next turn starts later and its own events must say so.
    let script = r#"read turn; echo '{"done":true}'; echo "between turns" >&2; read turn; echo '{"done":true}'"#;
    let spec = CommandSpec::new("/bin/sh")
        .args(["-c", script])
        .with_stdin();
    let transport = Transport::spawn(&spec, 1024 * 1024).expect("sh spawns");
    let mut session = start_session(settings(), transport, Box::new(Chatty));
    let first = session.send("one").await.expect("turn 1 starts");
    let (events, completion) = first.into_universal();
    let _: Vec<UniversalEvent> = events.collect().await;
    completion.await.expect("turn 1 completes");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = std::time::SystemTime::now();
    let second = session.send("two").await.expect("turn 2 starts");
    let (events, completion) = second.into_universal();
    let events: Vec<UniversalEvent> = events.collect().await;
    completion.await.expect("turn 2 completes");
    let held = events
        .iter()
        .find(|event| notice_of(event).as_deref() == Some("between turns"))
        .expect("the notice said between the turns comes with turn 2");
    assert!(
        time_of(held) < before,
        "the notice keeps the time it was said"
    );
    let item_of = |event: &UniversalEvent| match &event.body {
        UniversalEventBody::ItemStarted(data) | UniversalEventBody::ItemCompleted(data) => {
            Some(data.item.item_id.clone())
        }
        _ => None,
    };
    let notice_item = item_of(held);
    for event in events.iter().filter(|event| item_of(event) != notice_item) {
        assert!(
            time_of(event) >= before,
            "an event of turn 2 is stamped {} though the turn started after {}: {:?}",
            event.time,
            humantime::format_rfc3339_nanos(before),
            event.body
        );
    }
    session.close().await.expect("the session closes");
}
