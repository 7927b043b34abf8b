//! The universal events of a run are the same whichever view reads it (`spec/run-protocol.md`
//! §1): the wrapper views (default and streaming) read straight from a run show exactly what
//! projecting that run's universal view shows, on every backend's recordings.

use agent_api::kit::projection::Projector;
use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api::AgentWrapperEvent;
use subjects::{backends, Subject};

mod subjects;

/// The events as JSON, with the run's own session id (random per run) made the same.
fn comparable(events: &[AgentWrapperEvent], session_id: &str) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_string(e)
                .unwrap()
                .replace(session_id, "SESSION")
        })
        .collect()
}

/// The daemon session id a wrapper view shows (in its `session started` event).
fn session_id_of(events: &[AgentWrapperEvent]) -> String {
    events
        .iter()
        .find_map(|e| {
            e.data
                .as_ref()?
                .get("session_id")?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

async fn both_views(
    subject: &Subject,
    bytes: &[u8],
    streaming: bool,
) -> (Vec<String>, Vec<String>) {
    let read = || std::io::Cursor::new(bytes.to_vec());
    let direct = replay(subject.backend.as_ref(), read(), ReplayOptions::default())
        .await
        .unwrap();
    let (direct, direct_completion) = if streaming {
        direct.into_wrapper_streaming()
    } else {
        direct.into_wrapper()
    };
    let direct: Vec<AgentWrapperEvent> = futures::StreamExt::collect(direct).await;
    let direct_completion = direct_completion.await;
    let universal = replay(subject.backend.as_ref(), read(), ReplayOptions::default())
        .await
        .unwrap();
    let projector = Projector::new(universal.agent_kind().clone(), universal.tools_structured());
    let mut projector = if streaming {
        projector.streaming_answers()
    } else {
        projector
    };
    let (universal, universal_completion) = universal.collect_universal().await;
    assert_eq!(
        direct_completion.is_ok(),
        universal_completion.is_ok(),
        "{}: the two runs ended alike",
        subject.name
    );
    let projected: Vec<AgentWrapperEvent> = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    let session = universal
        .first()
        .map(|e| e.session_id.to_string())
        .unwrap_or_default();
    (
        comparable(&direct, &session_id_of(&direct)),
        comparable(&projected, &session),
    )
}

#[test]
fn the_wrapper_view_shows_what_the_projected_universal_view_shows_on_every_recording() {
    let subjects = backends();
    // Two workers, as a caller's runtime has: the driver and the consumer on their own threads.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut compared = 0;
    for subject in subjects {
        for (n, lines) in subject.recordings.iter().enumerate() {
            let (direct, projected) =
                runtime.block_on(both_views(subject, &lines.join(&b'\n'), false));
            assert_eq!(direct, projected, "{} recording #{n}", subject.name);
            compared += 1;
        }
    }
    assert!(compared > 20, "only {compared} recordings were compared");
}

/// The streaming wrapper view shows every answer delta the run made as one `text_output` of its
/// own, so it sees the universal events themselves: read through it, a run makes the universal
/// events it makes for the universal view, delta for delta (a run that joined an answer's waiting
/// deltas for a wrapper view, as the driver once did, fails this).
#[test]
fn the_universal_events_are_the_same_whichever_view_reads_the_run_on_every_recording() {
    let subjects = backends();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (mut compared, mut deltas) = (0, 0);
    for subject in subjects {
        for (n, lines) in subject.recordings.iter().enumerate() {
            let (direct, projected) =
                runtime.block_on(both_views(subject, &lines.join(&b'\n'), true));
            assert_eq!(
                direct, projected,
                "{} recording #{n}: the streaming wrapper view",
                subject.name
            );
            deltas += direct
                .iter()
                .filter(|e| e.contains("\"text_output\"") && e.contains("\"item_id\""))
                .count();
            compared += 1;
        }
    }
    assert!(compared > 20, "only {compared} recordings were compared");
    assert!(
        deltas > 100,
        "the recordings streamed only {deltas} answer deltas: nothing was compared"
    );
}

/// The answer text as the streaming wrapper view shows it, with every retraction applied.
fn streamed_answer(events: &[AgentWrapperEvent]) -> String {
    let mut shown = String::new();
    for event in events {
        if let Some(text) = event.assistant_text() {
            shown.push_str(text);
        } else if let Some(cut) = event.retraction() {
            shown.truncate(shown.len() - cut.bytes);
        }
    }
    shown
}

/// On every recording, the streaming wrapper view and `AnswerText` on the universal view end up
/// showing the answer the default wrapper view shows once each message is sure.
#[test]
fn streamed_answer_text_less_its_retractions_is_the_held_answer_on_every_recording() {
    use agent_api::run::{AnswerDelta, AnswerText};
    let subjects = backends();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for subject in subjects {
        for (n, lines) in subject.recordings.iter().enumerate() {
            let bytes = lines.join(&b'\n');
            let read = || std::io::Cursor::new(bytes.clone());
            let (held, streamed, from_universal) = runtime.block_on(async {
                let run = |streaming: bool| async move {
                    let handle = replay(subject.backend.as_ref(), read(), ReplayOptions::default())
                        .await
                        .unwrap();
                    let (events, _) = if streaming {
                        handle.into_wrapper_streaming()
                    } else {
                        handle.into_wrapper()
                    };
                    futures::StreamExt::collect::<Vec<_>>(events).await
                };
                let held: String = run(false)
                    .await
                    .iter()
                    .filter_map(AgentWrapperEvent::assistant_text)
                    .collect();
                let streamed = streamed_answer(&run(true).await);
                let handle = replay(subject.backend.as_ref(), read(), ReplayOptions::default())
                    .await
                    .unwrap();
                let (universal, _) = handle.collect_universal().await;
                let (mut answer, mut shown) = (AnswerText::new(), String::new());
                for event in &universal {
                    match answer.push(event) {
                        Some(AnswerDelta::Text { text, .. }) => shown.push_str(text),
                        Some(AnswerDelta::Retracted { bytes, .. }) => {
                            shown.truncate(shown.len() - bytes)
                        }
                        _ => {}
                    }
                }
                (held, streamed, shown)
            });
            assert_eq!(
                streamed, held,
                "{} recording #{n}: streaming wrapper view",
                subject.name
            );
            assert_eq!(
                from_universal, held,
                "{} recording #{n}: AnswerText",
                subject.name
            );
        }
    }
}

/// The README's first program, streaming: a scripted answer arrives word by word, not at the end.
#[tokio::test]
async fn the_streaming_wrapper_view_shows_an_answer_before_its_message_completes() {
    use agent_api::{AgentBackend, RunRequest};
    let request = RunRequest::new("Say hello")
        .with_options(&agent_api_scripted::ScriptedOptions::scenario("slow").delay_ms(5));
    let handle = agent_api_scripted::ScriptedBackend::new()
        .run(request)
        .await
        .unwrap();
    let (events, completion) = handle.into_wrapper_streaming();
    let events: Vec<AgentWrapperEvent> = futures::StreamExt::collect(events).await;
    let pieces = events
        .iter()
        .filter(|e| e.assistant_text().is_some())
        .count();
    assert!(
        pieces > 1,
        "the answer streamed in {pieces} pieces (held, it is one)"
    );
    assert_eq!(
        streamed_answer(&events),
        completion.await.unwrap().final_text.unwrap()
    );
}
