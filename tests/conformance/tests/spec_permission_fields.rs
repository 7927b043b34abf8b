//! `spec/event-envelope.md` says field by field what a permission event's `data.permission`
//! holds; this holds the text to the code: a permission event with every field set projects to
//! exactly the keys the spec's table lists.

use std::collections::BTreeSet;

use agent_api::kit::hitl::{Hitl, PermissionRequest};
use agent_api::kit::projection::Projector;
use agent_api::kit::transcript::Transcript;
use agent_api::request::ToolCategory;
use agent_api::universal::PermissionDetails;
use agent_api::{AgentKind, PermissionPolicy};

const SPEC: &str = include_str!("../../../spec/event-envelope.md");

/// The first column of the table that follows the spec's paragraph on `data.permission`.
fn fields_in_the_spec() -> BTreeSet<String> {
    let start = SPEC
        .find("The `data.permission` object")
        .expect("the spec describes data.permission");
    SPEC[start..]
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .filter_map(|row| {
            row.split('|')
                .nth(1)?
                .trim()
                .strip_prefix('`')?
                .strip_suffix('`')
                .map(str::to_string)
        })
        .collect()
}

/// The keys of `data.permission` on the wrapper events of a permission with every field set.
fn fields_the_code_emits() -> BTreeSet<String> {
    let mut transcript = Transcript::new("sess_1".into(), false);
    let mut hitl: Hitl<(), ()> = Hitl::live(PermissionPolicy::ApproveAll);
    let details = PermissionDetails::default()
        .call_id(Some("call_1"))
        // Over the bound, so that `command_bytes` says how long the whole command is.
        .command(Some(format!(
            "ls -la{}",
            " x".repeat(agent_api::universal::COMMAND_BOUND)
        )))
        .cwd(Some("/work"))
        .file(Some("src/main.rs"))
        .diff(Some("-a\n+b"))
        .reason(Some("to look"));
    let request = PermissionRequest::new("p1", ToolCategory::Shell, "shell: ls -la")
        .tool_name("Bash")
        .details(details)
        .metadata(serde_json::json!({"input": {"command": "ls -la"}}));
    hitl.request_permission(&mut transcript, request, ());
    let mut projector = Projector::new(AgentKind::from_static("scripted"), true);
    let mut keys = BTreeSet::new();
    for event in transcript.drain() {
        for wrapper in projector.project(&event) {
            if let Some(permission) = wrapper
                .data
                .as_ref()
                .and_then(|d| d.get("permission"))
                .and_then(|p| p.as_object())
            {
                keys.extend(permission.keys().cloned());
            }
        }
    }
    keys
}

#[test]
fn the_spec_lists_exactly_the_fields_a_permission_event_carries() {
    let spec = fields_in_the_spec();
    assert!(spec.len() >= 3, "the spec's table was not found: {spec:?}");
    let code = fields_the_code_emits();
    assert!(
        code.contains("decided_by"),
        "the resolved event was projected: {code:?}"
    );
    assert_eq!(
        spec, code,
        "spec/event-envelope.md (left) and the projection (right) disagree"
    );
}
