//! A permission's typed `command` is the command its tool call runs (`ToolMeta.command`), on every
//! backend and every recording of its CLI: an allow-list written against
//! `PermissionDetails::command` decides on what will run, not on a description of it (issue 39).

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api::{AgentBackend, PermissionPolicy, RunRequest};
use agent_api_conformance::{permission_commands_match_their_calls, record};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use subjects::backends;

mod subjects;

#[test]
fn every_recorded_permission_names_its_calls_command() {
    // The subjects are built first: the scripted one plays its tour on a runtime of its own.
    let subjects = backends();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(check_every_recording(subjects));
}

async fn check_every_recording(subjects: &[subjects::Subject]) {
    let mut findings = Vec::new();
    let mut permissions = 0;
    for subject in subjects {
        for (i, lines) in subject.recordings.iter().enumerate() {
            let bytes = lines.join(&b'\n');
            let handle = replay(
                subject.backend.as_ref(),
                std::io::Cursor::new(bytes),
                ReplayOptions::default(),
            )
            .await;
            let Ok(handle) = handle else { continue };
            let run = record(handle).await;
            permissions += run
                .universal
                .iter()
                .filter(|e| {
                    e.permission_request()
                        .is_some_and(|p| p.details.call_id.is_some())
                })
                .count();
            let mut out = Vec::new();
            permission_commands_match_their_calls(&run.universal, &mut out);
            findings.extend(
                out.into_iter()
                    .map(|f| format!("{} recording {i}: {f}", subject.name)),
            );
        }
    }
    assert!(
        permissions > 5,
        "the recordings hold permissions tied to calls ({permissions})"
    );
    assert!(findings.is_empty(), "{findings:#?}");
}

/// The scripted agent every newcomer starts with: an allow-list on the documented field decides
/// on the command itself.
#[tokio::test]
async fn the_scripted_agents_permission_command_is_the_command() {
    let options = ScriptedOptions::scenario("permission").delay_ms(0);
    let request = RunRequest::new("hi")
        .with_options(&options)
        .with_permissions(PermissionPolicy::ApproveAll);
    let run = record(ScriptedBackend::new().run(request).await.unwrap()).await;
    let permission = run
        .universal
        .iter()
        .find_map(|e| e.permission_request())
        .expect("a permission request");
    assert_eq!(permission.details.command.as_deref(), Some("echo hi"));
    let mut out = Vec::new();
    permission_commands_match_their_calls(&run.universal, &mut out);
    assert!(out.is_empty(), "{out:?}");
}
