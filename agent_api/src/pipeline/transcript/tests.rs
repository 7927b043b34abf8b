use super::*;
use crate::vocabulary::universal::{ContentPart, ItemRole, ReasoningVisibility, ToolMeta};

fn types(t: &mut Transcript) -> Vec<&'static str> {
    t.drain().map(|e| e.type_name()).collect()
}

#[test]
fn the_first_event_is_a_synthetic_session_start_when_the_agent_has_none() {
    let mut t = Transcript::new("sess_abcdefgh12".into(), false);
    t.status("working", None);
    let events: Vec<_> = t.drain().collect();
    assert_eq!(events[0].type_name(), "session.started");
    assert!(events[0].synthetic);
    assert_eq!(events[0].source, EventSource::Daemon);
    assert_eq!(
        events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[test]
fn a_native_session_start_is_not_duplicated_on_later_turns() {
    let mut t = Transcript::new("sess_1".into(), false);
    assert!(t.session_started(None));
    assert!(!t.session_started(None));
    assert_eq!(types(&mut t), ["session.started"]);
}

#[test]
fn a_message_without_native_deltas_gets_one_synthetic_delta_before_completion() {
    let mut t = Transcript::new("sess_1".into(), false);
    t.session_started(None);
    let id = t.start_item(NewItem::message(ItemRole::Assistant).native("msg_1"));
    t.complete_item_with(
        &id,
        vec![ContentPart::Text {
            text: "Hello from mock".into(),
        }],
    );
    let events: Vec<_> = t.drain().collect();
    let delta = &events[2];
    assert_eq!(delta.type_name(), "item.delta");
    assert!(delta.synthetic);
    match &delta.body {
        UniversalEventBody::ItemDelta(d) => {
            assert_eq!(d.delta, "Hello from mock");
            assert_eq!(d.native_item_id.as_deref(), Some("msg_1"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events[3].type_name(), "item.completed");
    assert_eq!(t.last_assistant_text(), Some("Hello from mock"));
}

#[test]
fn streamed_text_is_assembled_exactly_once_into_the_completed_item() {
    let mut t = Transcript::new("sess_1".into(), false);
    let id = t.start_item(NewItem::message(ItemRole::Assistant));
    for piece in ["Hel", "lo ", "world"] {
        t.delta(&id, piece);
    }
    t.complete_item(&id);
    let completed = t.drain().next_back().unwrap();
    match completed.body {
        UniversalEventBody::ItemCompleted(d) => assert_eq!(
            d.item.content,
            vec![ContentPart::Text {
                text: "Hello world".into()
            }]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_delta_for_an_unknown_native_item_opens_a_stub_first() {
    let mut t = Transcript::new("sess_1".into(), false);
    t.session_started(None);
    let id = t.delta_native("part_9", "hi", || NewItem::message(ItemRole::Assistant));
    let events: Vec<_> = t.drain().collect();
    assert_eq!(events[1].type_name(), "item.started");
    assert!(events[1].synthetic);
    assert_eq!(events[2].type_name(), "item.delta");
    assert_eq!(t.item_by_native("part_9"), Some(id.as_str()));
}

#[test]
fn ending_fails_open_items_and_denies_pending_requests() {
    let mut t = Transcript::new("sess_1".into(), false);
    let id = t.start_item(NewItem::tool_call("Bash", "{}", "toolu_1"));
    t.permission_requested("perm_1", "Bash: echo hi", None);
    t.question_requested("q_1", "Which?", vec!["a".into(), "b".into()]);
    t.end(SessionEnd::completed());
    let events: Vec<_> = t.drain().collect();
    let names: Vec<_> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        names,
        [
            "session.started",
            "item.started",
            "permission.requested",
            "question.requested",
            "item.completed",
            "permission.resolved",
            "question.resolved",
            "session.ended"
        ]
    );
    match &events[4].body {
        UniversalEventBody::ItemCompleted(d) => {
            assert_eq!(d.item.item_id, id);
            assert_eq!(d.item.status, ItemStatus::Failed);
        }
        other => panic!("{other:?}"),
    }
    match &events[5].body {
        UniversalEventBody::PermissionResolved(p) => assert_eq!(p.status, PermissionStatus::Denied),
        other => panic!("{other:?}"),
    }
    t.status("after end", None);
    assert_eq!(t.drain().count(), 0, "nothing follows session.ended");
}

#[test]
fn resolving_an_unknown_permission_is_a_typed_error() {
    let mut t = Transcript::new("sess_1".into(), false);
    assert!(matches!(
        t.permission_resolved("nope", true, DecidedBy::Caller),
        Err(AgentError::UnknownPermission { .. })
    ));
    assert!(matches!(
        t.question_resolved("nope", None, DecidedBy::Caller),
        Err(AgentError::UnknownQuestion { .. })
    ));
}

#[test]
fn raw_is_filled_only_when_opted_in() {
    for include in [false, true] {
        let mut t = Transcript::new("sess_1".into(), include);
        t.set_raw(Some(std::sync::Arc::new(serde_json::json!({"type": "x"}))));
        t.status("s", None);
        let events: Vec<_> = t.drain().collect();
        assert!(events.iter().all(|e| e.raw.is_some() == include));
    }
}

#[test]
fn the_user_message_the_sdk_sent_carries_no_native_line() {
    let mut t = Transcript::new("sess_1".into(), true);
    t.set_raw(Some(std::sync::Arc::new(
        serde_json::json!({"type": "system", "subtype": "init"}),
    )));
    t.user_message("hi");
    let user: Vec<_> = t.drain().collect();
    assert!(
        !user.is_empty() && user.iter().all(|e| e.raw.is_none()),
        "{user:?}"
    );
    t.status("s", None);
    assert!(
        t.drain().all(|e| e.raw.is_some()),
        "the line's own events keep it"
    );
}

#[test]
fn assembled_text_is_capped_but_every_delta_is_forwarded() {
    let mut t =
        Transcript::new("sess_1".into(), false).with_limits(TranscriptLimits { max_item_text: 8 });
    let id = t.start_item(NewItem::message(ItemRole::Assistant));
    t.delta(&id, "12345");
    t.delta(&id, "67890");
    t.complete_item(&id);
    let events: Vec<_> = t.drain().collect();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.type_name() == "item.delta")
            .count(),
        2
    );
    match &events.last().unwrap().body {
        UniversalEventBody::ItemCompleted(d) => assert_eq!(d.item.text(), "12345678"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_provider_id_index_keeps_recent_closed_items_findable_and_stays_bounded() {
    let mut t = Transcript::new("sess_index".into(), false);
    for i in 0..(super::native_index::KEEP_CLOSED + 1000) {
        let id = t.start_item(NewItem::message(ItemRole::Assistant).native(format!("native_{i}")));
        t.complete_item(&id);
        t.drain();
    }
    assert!(
        t.by_native.len() <= super::native_index::KEEP_CLOSED,
        "{} provider ids kept",
        t.by_native.len()
    );
    let last = super::native_index::KEEP_CLOSED + 999;
    assert!(
        t.item_by_native(&format!("native_{last}")).is_some(),
        "a recently closed item is still found"
    );
    assert!(
        t.item_by_native("native_0").is_none(),
        "the oldest closed items are forgotten"
    );
}

fn deltas(events: &[UniversalEvent]) -> Vec<(&str, &str)> {
    events
        .iter()
        .filter_map(|e| e.delta())
        .map(|d| (&*d.item_id, d.delta.as_str()))
        .collect()
}

#[test]
fn every_delta_is_an_event_of_its_own_however_many_wait_together() {
    // The universal events depend on the native input only: not on how the driver batches
    // them, nor on which view reads them (`spec/run-protocol.md` §1).
    let mut t = Transcript::new("sess_1".into(), false);
    let answer = t.start_item(NewItem::message(ItemRole::Assistant));
    let thinking = t.start_item(NewItem::reasoning(ReasoningVisibility::Public));
    t.delta(&answer, "Hel");
    t.delta(&answer, String::from("lo"));
    t.delta(&thinking, "hm");
    t.delta(&answer, " world");
    let first: Vec<_> = t.take_events();
    assert_eq!(
        deltas(&first),
        [
            (answer.as_str(), "Hel"),
            (answer.as_str(), "lo"),
            (thinking.as_str(), "hm"),
            (answer.as_str(), " world")
        ]
    );
    t.delta(&answer, "!");
    t.complete_item(&answer);
    let second: Vec<_> = t.take_events();
    assert_eq!(deltas(&second), [(answer.as_str(), "!")]);
    assert_eq!(
        second
            .last()
            .and_then(UniversalEvent::completed_item)
            .map(UniversalItem::text)
            .as_deref(),
        Some("Hello world!")
    );
}

#[test]
fn a_batch_takes_at_most_the_events_asked_for_and_leaves_the_rest_in_order() {
    let mut t = Transcript::new("sess_1".into(), false);
    for n in 0..10 {
        t.status("note", Some(format!("{n}")));
    }
    let held = t.pending_events();
    let first = t.take_events_reusing(None, 4);
    assert_eq!(first.len(), 4);
    assert_eq!(t.pending_events(), held - 4);
    let rest = t.take_events_reusing(None, 100);
    let sequences: Vec<u64> = first.iter().chain(&rest).map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=held as u64).collect::<Vec<_>>());
}

#[test]
fn every_delta_is_its_own_event_unless_merging_is_asked_for() {
    let mut t = Transcript::new("sess_1".into(), false);
    let answer = t.start_item(NewItem::message(ItemRole::Assistant));
    t.delta(&answer, "Hel");
    t.delta(&answer, "lo");
    let events: Vec<_> = t.drain().collect();
    assert_eq!(
        deltas(&events),
        [(answer.as_str(), "Hel"), (answer.as_str(), "lo")]
    );
}

#[test]
fn a_batch_back_from_the_caller_is_freed_one_event_per_new_event() {
    let mut t = Transcript::new("sess_1".into(), false);
    t.session_started(None);
    let payload = Arc::new(serde_json::json!({"native": "line"}));
    for i in 0..4 {
        t.status("working", Some(format!("step {i}")));
    }
    let mut spent = t.take_events_reusing(None, usize::MAX);
    for event in &mut spent {
        event.raw = Some(payload.clone());
    }
    let held = spent.len();
    assert_eq!(Arc::strong_count(&payload), held + 1);
    // The caller read `spent`; it comes back to gather a batch in.
    t.daemon_status("next", None);
    let first = t.take_events_reusing(Some(spent), usize::MAX);
    assert_eq!(
        Arc::strong_count(&payload),
        held + 1,
        "taking the batch back frees nothing yet"
    );
    for freed in 1..=2 {
        t.status("working", None);
        assert_eq!(
            Arc::strong_count(&payload),
            held + 1 - 2 * freed,
            "each new event (two a status) frees one spent"
        );
    }
    let second = t.take_events_reusing(Some(first), usize::MAX);
    assert_eq!(
        Arc::strong_count(&payload),
        1,
        "what was left is freed when the next batch comes back"
    );
    assert_eq!(second.len(), 4);
}

#[test]
fn an_item_is_found_by_its_provider_id_only_while_it_is_open_and_a_reused_id_finds_the_newer_item()
{
    let mut t = Transcript::new("sess_1".into(), false);
    let first = t.start_item(NewItem::message(ItemRole::Assistant).native("msg_1"));
    let other = t.start_item(NewItem::message(ItemRole::Assistant).native("msg_2"));
    assert_eq!(
        t.open_item_by_native("msg_1").as_deref(),
        Some(first.as_str()),
        "not only the last one opened"
    );
    assert_eq!(
        t.open_item_by_native("msg_2").as_deref(),
        Some(other.as_str())
    );
    t.complete_item(&other);
    assert_eq!(t.open_item_by_native("msg_2"), None, "closed");
    let reused = t.start_item(NewItem::message(ItemRole::Assistant).native("msg_1"));
    assert_eq!(
        t.open_item_by_native("msg_1").as_deref(),
        Some(reused.as_str()),
        "the newer item with that id"
    );
    // An item whose provider id was taken away is no longer found once closed either.
    t.update_item(&reused, |item| item.native_item_id = None);
    t.complete_item(&reused);
    assert_eq!(t.open_item_by_native("msg_1"), None);
    assert_eq!(t.open_item_by_native("msg_3"), None);
}

/// A key glued to a word in every kind of string a backend puts in an event: each is masked in
/// the one place events are made, and the model's own prose is left as written.
#[test]
fn every_events_strings_are_masked_but_the_models_prose() {
    const KEY: &str = "Q2x9vLmN4pR7tY1wZ8";
    let glued = format!("xsk-proj-{KEY}");
    let mut t = Transcript::new("sess_1".into(), false);
    t.session_started(Some(
        serde_json::json!({"tools": [format!("mcp__{glued}")]}),
    ));
    t.status(
        format!("retry {glued}"),
        Some(format!("rerouted to {glued}")),
    );
    let meta = ToolMeta {
        kind: "command_execution".into(),
        tool_name: Some(glued.clone()),
        command: Some(format!("curl -H x{glued}")),
        ..ToolMeta::default()
    };
    let tool = t.start_item(NewItem::tool_call(glued.clone(), "{}", "c1").tool(meta));
    t.delta(&tool, format!("progress {glued}"));
    t.complete_item_with(
        &tool,
        vec![ContentPart::ToolCall {
            name: glued.clone(),
            arguments: format!("{{\"q\":\"{glued}\"}}"),
            call_id: "c1".into(),
        }],
    );
    let mut permission = PermissionEventData::requested("p1", format!("run {glued}"));
    permission.details = PermissionDetails::default().command(Some(format!("echo {glued}")));
    t.record_permission_request(permission);
    t.question_requested("q1", format!("use {glued}?"), vec![glued.clone()]);
    t.error(
        format!("failed: {glued}"),
        Some(format!("code_{glued}")),
        Some(serde_json::json!({"why": glued})),
    );
    let answer = t.start_item(NewItem::message(ItemRole::Assistant));
    t.delta(&answer, "set api_key: your-key-here");
    t.complete_item(&answer);
    let events: Vec<UniversalEvent> = t.drain().collect();
    let json = serde_json::to_string(&events).unwrap();
    assert!(!json.contains(KEY), "a key survived: {json}");
    for event in &events {
        let shown = serde_json::to_string(event).unwrap();
        let prose = shown.contains("\"itm_3\"");
        assert!(
            prose || shown.contains("[redacted]"),
            "nothing masked in {shown}"
        );
    }
    assert!(
        json.contains("set api_key: your-key-here"),
        "the answer is left as the model wrote it: {json}"
    );
    // A tool's arguments stay JSON, with a secret-named field's value masked.
    let mut t = Transcript::new("sess_2".into(), false);
    let call = t.start_item(NewItem::tool_call(
        "Fetch",
        r#"{"api_key": "abcdef123456", "max_tokens": 5, "url": "https://h/x?key=s3cr3t"}"#,
        "c2",
    ));
    t.complete_item(&call);
    let arguments = t
        .drain()
        .find_map(|e| {
            e.completed_item()
                .and_then(|i| i.tool_call().map(|c| c.arguments.to_string()))
        })
        .unwrap();
    let parsed: Value = serde_json::from_str(&arguments).expect("the arguments are still JSON");
    assert_eq!(
        parsed,
        serde_json::json!({"api_key": "[redacted]", "max_tokens": 5, "url": "https://h/x"}),
        "{arguments}"
    );
}
