//! Callers read what an event is through typed accessors on both views, never by digging in JSON.

use agent_api::kit::projection::Projector;
use agent_api::kit::transcript::{NewItem, SessionEnd, Transcript};
use agent_api::request::ToolCategory;
use agent_api::run::Channel;
use agent_api::run::{ToolPhase, ToolStatus};
use agent_api::universal::{
    DecidedBy, ItemRole, PermissionDetails, PermissionEventData, PermissionStatus, QuestionStatus,
    ReasoningVisibility, ToolMeta,
};
use agent_api::UniversalEvent;
use agent_api::{AgentError, AgentKind, AgentWrapperEvent, AgentWrapperEventKind};

/// A transcript with one of everything, and both views of it.
fn one_of_everything() -> (Vec<UniversalEvent>, Vec<AgentWrapperEvent>) {
    let mut t = Transcript::new("sess_typed".into(), false);
    let thinking = t.start_item(NewItem::reasoning(ReasoningVisibility::Public));
    t.delta(&thinking, "let me see");
    t.complete_item(&thinking);
    let meta = ToolMeta {
        kind: "command_execution".into(),
        tool_name: Some("Bash".into()),
        exit_code: Some(0),
        ..ToolMeta::default()
    };
    let call =
        t.start_item(NewItem::tool_call("Bash", r#"{"command":"ls -la"}"#, "call_1").tool(meta));
    let mut request = PermissionEventData::requested("perm_1", "Bash: ls -la");
    request.category = Some(ToolCategory::Shell);
    request.details = PermissionDetails::default()
        .call_id(Some("call_1"))
        .command(Some("ls -la"));
    t.record_permission_request(request);
    t.permission_resolved("perm_1", true, DecidedBy::Caller)
        .unwrap();
    t.complete_item(&call);
    t.question_requested("q_1", "Which colour?", vec!["red".into(), "blue".into()]);
    t.question_resolved("q_1", Some("blue".into()), DecidedBy::Caller)
        .unwrap();
    let answer = t.start_item(NewItem::message(ItemRole::Assistant));
    t.delta(&answer, "Done.");
    t.complete_item(&answer);
    t.close_open();
    t.terminal_error(&AgentError::Cancelled);
    t.end(SessionEnd::completed());
    let universal: Vec<UniversalEvent> = t.drain().collect();
    let mut projector = Projector::new(AgentKind::from_static("scripted"), true);
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    (universal, wrapper)
}

#[test]
fn wrapper_channels_are_typed_and_carry_their_text() {
    let (_, wrapper) = one_of_everything();
    let answer: String = wrapper
        .iter()
        .filter_map(AgentWrapperEvent::assistant_text)
        .collect();
    assert_eq!(answer, "Done.");
    let thinking: String = wrapper
        .iter()
        .filter_map(|e| e.text_on(&Channel::Reasoning))
        .collect();
    assert_eq!(thinking, "let me see");
    assert!(wrapper.iter().any(|e| e.is_on(&Channel::Tool)));
    assert!(
        wrapper
            .iter()
            .all(|e| !matches!(e.channel, Some(Channel::Other(_)))),
        "every projected channel is a known one"
    );
}

#[test]
fn wrapper_tool_events_expose_the_facet_as_a_struct() {
    let (_, wrapper) = one_of_everything();
    let facets: Vec<_> = wrapper
        .iter()
        .filter_map(AgentWrapperEvent::tools_facet)
        .collect();
    assert_eq!(facets.len(), 2, "start and completion of the one tool call");
    let done = facets.last().unwrap();
    assert_eq!(
        (done.kind.as_str(), done.phase, done.status),
        (
            "command_execution",
            ToolPhase::Complete,
            ToolStatus::Completed
        )
    );
    assert_eq!(done.exit_code, Some(0));
    assert_eq!(done.tool_name.as_deref(), Some("Bash"));
    assert_eq!(done.tool_use_id.as_deref(), Some("call_1"));
}

#[test]
fn wrapper_permission_and_question_events_expose_what_they_are_about() {
    let (_, wrapper) = one_of_everything();
    let permissions: Vec<_> = wrapper
        .iter()
        .filter_map(AgentWrapperEvent::permission)
        .collect();
    assert_eq!(
        permissions.iter().map(|p| p.status).collect::<Vec<_>>(),
        [PermissionStatus::Requested, PermissionStatus::Approved]
    );
    assert!(permissions
        .iter()
        .all(|p| p.id == "perm_1" && p.action == "Bash: ls -la"));
    assert_eq!(
        permissions.iter().map(|p| p.decided_by).collect::<Vec<_>>(),
        [None, Some(DecidedBy::Caller)]
    );
    // Each links to its tool call, on both events, by the facet's `tool_use_id`.
    let call_id = wrapper
        .iter()
        .find_map(AgentWrapperEvent::tools_facet)
        .and_then(|f| f.tool_use_id)
        .unwrap();
    assert!(permissions
        .iter()
        .all(|p| p.details.call_id.as_deref() == Some(call_id.as_str())));
    assert!(permissions
        .iter()
        .all(|p| p.category == Some(ToolCategory::Shell)
            && p.details.command.as_deref() == Some("ls -la")));
    let questions: Vec<_> = wrapper
        .iter()
        .filter_map(AgentWrapperEvent::question)
        .collect();
    assert_eq!(questions[0].options, ["red", "blue"]);
    assert_eq!(
        (questions[1].status, questions[1].response.as_deref()),
        (QuestionStatus::Answered, Some("blue"))
    );
    // A text event is none of these.
    let text = wrapper
        .iter()
        .find(|e| e.assistant_text().is_some())
        .unwrap();
    assert!(
        text.permission().is_none() && text.question().is_none() && text.tools_facet().is_none()
    );
}

#[test]
fn wrapper_terminal_error_exposes_its_typed_code() {
    let (_, wrapper) = one_of_everything();
    let error = wrapper
        .iter()
        .find(|e| e.kind == AgentWrapperEventKind::Error)
        .unwrap();
    assert_eq!(error.error_code(), Some(AgentError::Cancelled.code()));
}

#[test]
fn universal_events_expose_items_requests_and_errors() {
    let (universal, _) = one_of_everything();
    let call = universal
        .iter()
        .filter_map(UniversalEvent::completed_item)
        .find_map(|i| i.tool_call())
        .unwrap();
    assert_eq!(call.name, "Bash");
    assert_eq!(call.arguments_json().unwrap()["command"], "ls -la");
    let reasoning = universal
        .iter()
        .filter_map(UniversalEvent::completed_item)
        .find(|i| i.is_reasoning())
        .unwrap();
    assert_eq!(reasoning.reasoning_text(), "let me see");
    assert_eq!(
        universal
            .iter()
            .filter_map(UniversalEvent::permission_request)
            .count(),
        1
    );
    assert_eq!(
        universal
            .iter()
            .filter_map(UniversalEvent::permission)
            .count(),
        2
    );
    assert_eq!(
        universal
            .iter()
            .filter_map(UniversalEvent::question_request)
            .map(|q| q.prompt.as_str())
            .collect::<Vec<_>>(),
        ["Which colour?"]
    );
    let deltas: String = universal
        .iter()
        .filter_map(UniversalEvent::delta)
        .map(|d| d.delta.as_str())
        .collect();
    assert!(deltas.ends_with("Done."), "{deltas}");
    assert_eq!(
        universal.iter().filter(|e| e.is_terminal_error()).count(),
        1
    );
    assert!(universal.last().unwrap().session_ended().is_some());
}
