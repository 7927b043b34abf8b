use std::collections::BTreeMap;

use super::*;
use crate::pipeline::transcript::SessionEnd;
use crate::vocabulary::universal::{
    PermissionStatus, QuestionStatus, UniversalEvent, UniversalEventBody,
};

const CATEGORIES: [ToolCategory; 6] = [
    ToolCategory::Shell,
    ToolCategory::FileWrite,
    ToolCategory::FileRead,
    ToolCategory::Network,
    ToolCategory::Mcp,
    ToolCategory::Other,
];

fn transcript() -> Transcript {
    Transcript::new("sess_hitltest".into(), false)
}

/// Every `permission.resolved` of the events: (id, status, who decided).
fn resolutions(events: &[UniversalEvent]) -> Vec<(String, PermissionStatus, Option<DecidedBy>)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::PermissionResolved(p) => {
                Some((p.permission_id.clone(), p.status, e.decided_by()))
            }
            _ => None,
        })
        .collect()
}

fn request(id: &str, category: ToolCategory) -> PermissionRequest {
    PermissionRequest::new(id, category, format!("tool {id}"))
}

#[test]
fn every_policy_decides_every_category_and_records_both_events() {
    let by_category: BTreeMap<ToolCategory, PermissionRule> = [
        (ToolCategory::Shell, PermissionRule::Approve),
        (ToolCategory::FileWrite, PermissionRule::Deny),
    ]
    .into_iter()
    .collect();
    for policy in [
        PermissionPolicy::Ask,
        PermissionPolicy::ApproveAll,
        PermissionPolicy::DenyAll,
        PermissionPolicy::ByCategory(by_category),
    ] {
        for category in CATEGORIES {
            let mut t = transcript();
            let mut hitl: Hitl<u32, ()> = Hitl::live(policy.clone());
            let decided = hitl.request_permission(&mut t, request("p1", category), 7);
            let events: Vec<_> = t.drain().collect();
            assert_eq!(events[1].type_name(), "permission.requested");
            let expected = policy.rule(category);
            match (expected, decided) {
                (PermissionRule::Ask, None) => {
                    assert!(hitl.is_waiting());
                    assert!(resolutions(&events).is_empty(), "{policy:?} {category:?}");
                }
                (PermissionRule::Approve, Some(d)) => {
                    assert_eq!(
                        (d.native, d.decision, d.by),
                        (7, PermissionDecision::Allow, DecidedBy::Policy)
                    );
                    assert_eq!(
                        resolutions(&events),
                        [(
                            "p1".to_string(),
                            PermissionStatus::Approved,
                            Some(DecidedBy::Policy)
                        )]
                    );
                }
                (PermissionRule::Deny, Some(d)) => {
                    assert!(!d.decision.is_approval() && d.by == DecidedBy::Policy);
                    assert_eq!(
                        resolutions(&events),
                        [(
                            "p1".to_string(),
                            PermissionStatus::Denied,
                            Some(DecidedBy::Policy)
                        )]
                    );
                }
                (rule, decided) => panic!("{policy:?} {category:?}: rule {rule:?} but {decided:?}"),
            }
        }
    }
}

#[test]
fn the_requested_event_carries_the_typed_details() {
    let mut t = transcript();
    let mut hitl: Hitl<(), ()> = Hitl::live(PermissionPolicy::Ask);
    let details = PermissionDetails::default()
        .call_id(Some("toolu_1"))
        .command(Some("ls -la"))
        .cwd(Some("/w"));
    let req = request("p1", ToolCategory::Shell)
        .tool_name("Bash")
        .details(details)
        .metadata(serde_json::json!({"input": {"command": "ls -la"}}));
    hitl.request_permission(&mut t, req, ());
    let event = t.drain().nth(1).unwrap();
    let UniversalEventBody::PermissionRequested(p) = &event.body else {
        panic!("{event:?}")
    };
    assert_eq!(p.category, Some(ToolCategory::Shell));
    assert_eq!(p.tool_name.as_deref(), Some("Bash"));
    assert_eq!(
        (
            p.details.call_id.as_deref(),
            p.details.command.as_deref(),
            p.details.cwd.as_deref()
        ),
        (Some("toolu_1"), Some("ls -la"), Some("/w"))
    );
    assert_eq!(p.details.file, None);
    assert_eq!(p.metadata.as_ref().unwrap()["input"]["command"], "ls -la");
    // On the wire the typed fields sit beside the id, where a reader of the JSON expects them.
    let json = serde_json::to_value(p).unwrap();
    assert_eq!(
        (&json["category"], &json["call_id"], &json["command"]),
        (&"shell".into(), &"toolu_1".into(), &"ls -la".into())
    );
    assert!(json.get("file").is_none());
    assert_eq!(p.decided_by, None);
}

#[test]
fn the_callers_decision_resolves_once_and_a_second_one_is_a_typed_error() {
    let mut t = transcript();
    let mut hitl: Hitl<&str, ()> = Hitl::live(PermissionPolicy::Ask);
    assert!(hitl
        .request_permission(&mut t, request("p1", ToolCategory::Shell), "ctx")
        .is_none());
    let decided = hitl
        .decide_permission(&mut t, "p1", PermissionDecision::AllowForSession)
        .unwrap();
    assert_eq!(
        (decided.native, decided.by, decided.decision),
        (
            "ctx",
            DecidedBy::Caller,
            PermissionDecision::AllowForSession
        )
    );
    let again = hitl
        .decide_permission(&mut t, "p1", PermissionDecision::Allow)
        .unwrap_err();
    assert!(
        matches!(again, AgentError::AlreadyResolved { ref id } if id == "p1"),
        "{again:?}"
    );
    let unknown = hitl
        .decide_permission(&mut t, "nope", PermissionDecision::Allow)
        .unwrap_err();
    assert!(
        matches!(unknown, AgentError::UnknownPermission { ref id } if id == "nope"),
        "{unknown:?}"
    );
    let events: Vec<_> = t.drain().collect();
    assert_eq!(
        resolutions(&events),
        [(
            "p1".to_string(),
            PermissionStatus::Approved,
            Some(DecidedBy::Caller)
        )]
    );
}

#[test]
fn a_policy_decided_request_cannot_be_answered_again() {
    let mut t = transcript();
    let mut hitl: Hitl<(), ()> = Hitl::live(PermissionPolicy::DenyAll);
    assert!(hitl
        .request_permission(&mut t, request("p1", ToolCategory::Network), ())
        .is_some());
    assert!(matches!(
        hitl.decide_permission(&mut t, "p1", PermissionDecision::Allow),
        Err(AgentError::AlreadyResolved { .. })
    ));
}

#[test]
fn questions_always_go_to_the_caller_whatever_the_policy() {
    let mut t = transcript();
    let mut hitl: Hitl<(), (String, usize)> = Hitl::live(PermissionPolicy::ApproveAll);
    let colour = QuestionRequest::new("q/0", "Colour?", vec!["Red".into(), "Blue".into()])
        .call_id(Some("toolu_ask"));
    hitl.request_question(&mut t, colour, ("q".into(), 0));
    hitl.request_question(
        &mut t,
        QuestionRequest::new("q/1", "Size?", vec![]),
        ("q".into(), 1),
    );
    assert_eq!(hitl.question("q/1"), Some(&("q".to_string(), 1)));
    let answered = hitl
        .answer_question(&mut t, "q/0", QuestionAnswer::Text("Blue".into()))
        .unwrap();
    assert_eq!(
        (answered.native, answered.by),
        (("q".to_string(), 0), DecidedBy::Caller)
    );
    assert!(matches!(
        hitl.answer_question(&mut t, "q/0", QuestionAnswer::Reject),
        Err(AgentError::AlreadyResolved { .. })
    ));
    assert!(matches!(
        hitl.answer_question(&mut t, "zzz", QuestionAnswer::Reject),
        Err(AgentError::UnknownQuestion { .. })
    ));
    assert_eq!(
        hitl.withdraw_question(&mut t, "q/1"),
        Some(("q".to_string(), 1))
    );
    let resolved: Vec<_> = t
        .drain()
        .filter_map(|e| match &e.body {
            UniversalEventBody::QuestionResolved(q) => Some((
                q.question_id.clone(),
                q.status,
                q.response.clone(),
                e.decided_by(),
                q.call_id.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        resolved,
        [
            (
                "q/0".to_string(),
                QuestionStatus::Answered,
                Some("Blue".to_string()),
                Some(DecidedBy::Caller),
                Some("toolu_ask".to_string())
            ),
            (
                "q/1".to_string(),
                QuestionStatus::Rejected,
                None,
                Some(DecidedBy::Cancel),
                None
            ),
        ]
    );
}

#[test]
fn cancel_resolves_every_pending_request_and_timeout_says_so() {
    for (timed_out, by) in [(false, DecidedBy::Cancel), (true, DecidedBy::Timeout)] {
        let mut t = transcript();
        let mut hitl: Hitl<u8, u8> = Hitl::live(PermissionPolicy::Ask);
        hitl.request_permission(&mut t, request("p2", ToolCategory::Shell), 2);
        hitl.request_permission(&mut t, request("p1", ToolCategory::FileWrite), 1);
        hitl.request_question(&mut t, QuestionRequest::new("q1", "?", vec![]), 9);
        if timed_out {
            t.set_timed_out();
        }
        let cancelled = hitl.cancel_permissions(&mut t);
        let ids: Vec<_> = cancelled
            .iter()
            .map(|d| (d.id.as_str(), d.native, d.decision.clone(), d.by))
            .collect();
        assert_eq!(
            ids,
            [
                ("p1", 1, PermissionDecision::Cancel, by),
                ("p2", 2, PermissionDecision::Cancel, by)
            ]
        );
        let questions = hitl.cancel_questions(&mut t);
        assert_eq!(
            (
                questions.len(),
                questions[0].by,
                questions[0].answer.clone()
            ),
            (1, by, QuestionAnswer::Reject)
        );
        assert!(!hitl.is_waiting());
        let events: Vec<_> = t.drain().collect();
        assert!(resolutions(&events)
            .iter()
            .all(|(_, status, who)| *status == PermissionStatus::Denied && *who == Some(by)));
    }
}

#[test]
fn the_runs_end_resolves_what_still_waits_and_a_late_answer_is_refused_by_the_transcript() {
    let mut t = transcript();
    let mut hitl: Hitl<(), ()> = Hitl::live(PermissionPolicy::Ask);
    hitl.request_permission(&mut t, request("p1", ToolCategory::Shell), ());
    t.end(SessionEnd::completed());
    let events: Vec<_> = t.drain().collect();
    assert_eq!(
        resolutions(&events),
        [(
            "p1".to_string(),
            PermissionStatus::Denied,
            Some(DecidedBy::Cancel)
        )]
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.type_name() == "permission.resolved")
            .count(),
        1
    );
}

#[test]
fn the_agent_withdrawing_a_request_resolves_it_as_cancelled() {
    let mut t = transcript();
    let mut hitl: Hitl<u8, ()> = Hitl::live(PermissionPolicy::Ask);
    hitl.request_permission(&mut t, request("p1", ToolCategory::Shell), 5);
    assert_eq!(hitl.withdraw_permission(&mut t, "p1"), Some(5));
    assert_eq!(hitl.withdraw_permission(&mut t, "p1"), None);
    assert!(matches!(
        hitl.decide_permission(&mut t, "p1", PermissionDecision::Allow),
        Err(AgentError::AlreadyResolved { .. })
    ));
    let events: Vec<_> = t.drain().collect();
    assert_eq!(
        resolutions(&events),
        [(
            "p1".to_string(),
            PermissionStatus::Denied,
            Some(DecidedBy::Cancel)
        )]
    );
}

#[test]
fn a_replay_waits_for_the_recorded_answers_whatever_it_would_decide_live() {
    let mut t = transcript();
    let mut hitl: Hitl<u8, u8> = Hitl::replay();
    assert!(hitl
        .request_permission(&mut t, request("p1", ToolCategory::Shell), 1)
        .is_none());
    assert_eq!(hitl.recorded_permission(&mut t, "p1", true), Some(1));
    hitl.request_question(&mut t, QuestionRequest::new("q1", "?", vec![]), 3);
    assert_eq!(
        hitl.recorded_answer(&mut t, "q1", Some("yes".into())),
        Some(3)
    );
    let events: Vec<_> = t.drain().collect();
    assert_eq!(
        resolutions(&events),
        [(
            "p1".to_string(),
            PermissionStatus::Approved,
            Some(DecidedBy::Caller)
        )]
    );
    assert_eq!(events.last().unwrap().decided_by(), Some(DecidedBy::Caller));
}
