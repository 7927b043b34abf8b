//! `ToolCalls` joins a tool call's two to four events into one entry, whatever order they come
//! in and whichever are missing.

use agent_api::kit::transcript::{NewItem, Transcript};
use agent_api::request::ToolCategory;
use agent_api::run::ToolCalls;
use agent_api::run::{ToolBytes, ToolStatus};
use agent_api::universal::{ContentPart, PermissionDetails, PermissionEventData, ToolMeta};
use agent_api::UniversalEvent;
use serde_json::json;

fn shell_meta() -> ToolMeta {
    ToolMeta {
        kind: "command_execution".into(),
        tool_name: Some("Bash".into()),
        ..ToolMeta::default()
    }
    .with_shell_fields(&json!({"command": "make", "cwd": "/w"}))
}

fn call(t: &mut Transcript, id: &str) {
    let item =
        t.start_item(NewItem::tool_call("Bash", r#"{"command":"make"}"#, id).tool(shell_meta()));
    t.complete_item(&item);
}

fn result(t: &mut Transcript, id: &str, exit_code: i64, output: &str, failed: bool) {
    let meta = ToolMeta {
        exit_code: Some(exit_code),
        bytes: ToolBytes {
            stdout: output.len() as u64,
            ..ToolBytes::default()
        },
        ..shell_meta()
    };
    let item = t.start_item(NewItem::tool_result(id).tool(meta));
    let content = vec![ContentPart::ToolResult {
        call_id: id.into(),
        output: output.into(),
    }];
    if failed {
        t.update_item(&item, |i| i.content = content);
        t.fail_item(&item);
    } else {
        t.complete_item_with(&item, content);
    }
}

fn fold(events: &[UniversalEvent]) -> ToolCalls {
    let mut calls = ToolCalls::new();
    for event in events {
        calls.push_universal(event);
    }
    calls
}

#[test]
fn a_call_and_its_result_are_one_entry_with_every_field() {
    let mut t = Transcript::new("s".into(), false);
    call(&mut t, "c1");
    result(&mut t, "c1", 2, "boom", true);
    let events: Vec<_> = t.drain().collect();
    let calls = fold(&events);
    assert_eq!(calls.calls().len(), 1);
    let c = calls.get("c1").unwrap();
    assert_eq!(
        (c.name.as_str(), c.command.as_deref(), c.cwd.as_deref()),
        ("Bash", Some("make"), Some("/w"))
    );
    assert_eq!(
        (c.exit_code, c.status, c.output_bytes, c.category),
        (Some(2), ToolStatus::Failed, 4, Some(ToolCategory::Shell))
    );
}

#[test]
fn a_result_before_its_call_is_not_undone_by_the_call() {
    let mut t = Transcript::new("s".into(), false);
    result(&mut t, "c1", 0, "ok", false);
    call(&mut t, "c1");
    let events: Vec<_> = t.drain().collect();
    let calls = fold(&events);
    let c = calls.get("c1").unwrap();
    assert_eq!(
        (c.status, c.exit_code, c.command.as_deref()),
        (ToolStatus::Completed, Some(0), Some("make"))
    );
    assert_eq!(calls.calls().len(), 1);
}

#[test]
fn missing_phases_leave_what_was_seen() {
    let mut t = Transcript::new("s".into(), false);
    call(&mut t, "no_result");
    result(&mut t, "no_call", 0, "out", false);
    let events: Vec<_> = t.drain().collect();
    let calls = fold(&events);
    let ids: Vec<_> = calls.calls().iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["no_result", "no_call"], "first seen first");
    assert_eq!(
        calls.get("no_result").unwrap().status,
        ToolStatus::Running,
        "a call without a result never finished"
    );
    let orphan = calls.get("no_call").unwrap();
    assert_eq!(
        (
            orphan.name.as_str(),
            orphan.status,
            orphan.command.as_deref()
        ),
        ("Bash", ToolStatus::Completed, Some("make"))
    );
}

#[test]
fn a_permission_names_the_category_of_its_call() {
    let mut t = Transcript::new("s".into(), false);
    let item = t.start_item(NewItem::tool_call(
        "fetch_page",
        r#"{"url":"https://x"}"#,
        "c1",
    ));
    t.complete_item(&item);
    let mut asked = PermissionEventData::requested("p1", "fetch https://x");
    asked.category = Some(ToolCategory::Network);
    asked.details = PermissionDetails::default().call_id(Some("c1"));
    t.record_permission_request(asked);
    let events: Vec<_> = t.drain().collect();
    let calls = fold(&events);
    let c = calls.get("c1").unwrap();
    assert_eq!(
        (c.category, c.kind.as_deref(), c.command.as_deref()),
        (Some(ToolCategory::Network), None, None)
    );
}

#[test]
fn the_tools_facet_names_the_command_with_its_secrets_masked() {
    let mut t = Transcript::new("s".into(), false);
    let arguments =
        json!({"command": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9' https://x"});
    let meta = ToolMeta {
        kind: "command_execution".into(),
        ..ToolMeta::default()
    }
    .with_shell_fields(&arguments);
    let item = t.start_item(NewItem::tool_call("Bash", arguments.to_string(), "c1").tool(meta));
    t.complete_item(&item);
    let mut projector =
        agent_api::kit::projection::Projector::new(agent_api::AgentKind::from_static("test"), true);
    let events: Vec<_> = t.drain().collect();
    let facets: Vec<_> = events
        .iter()
        .flat_map(|e| projector.project(e))
        .filter_map(|e| e.tools_facet())
        .collect();
    let command = facets
        .iter()
        .find_map(|f| f.command.clone())
        .expect("a facet with the command");
    assert!(
        command.starts_with("curl -H 'Authorization: ") && command.ends_with("https://x"),
        "{command}"
    );
    assert!(
        command.contains(agent_api::kit::secrets::REDACTED),
        "{command}"
    );
    assert!(!command.contains("eyJhbGciOiJIUzI1NiJ9"), "{command}");
}

/// `push_*_finished` gives each call once, when its result ends it, in both streams (issue 39):
/// a caller printing "ran X" does not print it once per event.
#[test]
fn each_call_is_seen_once_when_it_finishes() {
    let mut t = Transcript::new("sess_once".into(), true);
    call(&mut t, "c1");
    call(&mut t, "c2");
    result(&mut t, "c1", 0, "ok\n", false);
    result(&mut t, "c2", 2, "", true);
    let events: Vec<UniversalEvent> = t.drain().collect();
    let mut calls = ToolCalls::new();
    let finished: Vec<(String, ToolStatus)> = events
        .iter()
        .filter_map(|e| {
            calls
                .push_universal_finished(e)
                .map(|c| (c.call_id.clone(), c.status))
        })
        .collect();
    assert_eq!(
        finished,
        [
            ("c1".to_string(), ToolStatus::Completed),
            ("c2".to_string(), ToolStatus::Failed)
        ]
    );
    let mut projector =
        agent_api::kit::projection::Projector::new(agent_api::AgentKind::from_static("x"), true);
    let mut calls = ToolCalls::new();
    let finished: Vec<String> = events
        .iter()
        .flat_map(|e| projector.project(e))
        .filter_map(|w| calls.push_wrapper_finished(&w).map(|c| c.call_id.clone()))
        .collect();
    assert_eq!(finished, ["c1", "c2"]);
}
