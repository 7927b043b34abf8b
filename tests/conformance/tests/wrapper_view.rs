//! The wrapper view read straight from a run shows exactly what projecting that run's universal
//! view shows, on every backend's recordings. The run builds less for the wrapper view (an
//! answer's deltas waiting in one batch go as one universal event, since the view shows an
//! answer once, when it completes); what the caller sees must not change with it.

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api::projection::Projector;
use agent_api::AgentWrapperEvent;
use subjects::{backends, Subject};

mod subjects;

/// The events as JSON, with the run's own session id (random per run) made the same.
fn comparable(events: &[AgentWrapperEvent], session_id: &str) -> Vec<String> {
    events.iter().map(|e| serde_json::to_string(e).unwrap().replace(session_id, "SESSION")).collect()
}

/// The daemon session id a wrapper view shows (in its `session started` event).
fn session_id_of(events: &[AgentWrapperEvent]) -> String {
    events.iter().find_map(|e| e.data.as_ref()?.get("session_id")?.as_str().map(str::to_string)).unwrap_or_default()
}

async fn both_views(subject: &Subject, bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    let read = || std::io::Cursor::new(bytes.to_vec());
    let direct = replay(subject.backend.as_ref(), read(), ReplayOptions::default()).await.unwrap();
    let (direct, direct_completion) = direct.collect_wrapper().await;
    let universal = replay(subject.backend.as_ref(), read(), ReplayOptions::default()).await.unwrap();
    let mut projector = Projector::new(universal.agent_kind().clone(), universal.tools_structured());
    let (universal, universal_completion) = universal.collect_universal().await;
    assert_eq!(direct_completion.is_ok(), universal_completion.is_ok(), "{}: the two runs ended alike", subject.name);
    let projected: Vec<AgentWrapperEvent> = universal.iter().flat_map(|e| projector.project(e)).collect();
    let session = universal.first().map(|e| e.session_id.to_string()).unwrap_or_default();
    (comparable(&direct, &session_id_of(&direct)), comparable(&projected, &session))
}

#[test]
fn the_wrapper_view_shows_what_the_projected_universal_view_shows_on_every_recording() {
    let subjects = backends();
    // Two workers, as a caller's runtime has: the driver and the consumer on their own threads.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut compared = 0;
    for subject in subjects {
        for (n, lines) in subject.recordings.iter().enumerate() {
            let (direct, projected) = runtime.block_on(both_views(subject, &lines.join(&b'\n')));
            assert_eq!(direct, projected, "{} recording #{n}", subject.name);
            compared += 1;
        }
    }
    assert!(compared > 20, "only {compared} recordings were compared");
}
