use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::vocabulary::event::{enforce, within_bounds, AgentWrapperEvent, AgentWrapperEventKind};
use crate::vocabulary::kind::AgentKind;

fn event(kind: AgentWrapperEventKind) -> AgentWrapperEvent {
    AgentWrapperEvent::new(AgentKind::from_static("my_agent"), kind)
}

#[test]
fn long_channel_is_dropped_to_none() {
    let ev = event(AgentWrapperEventKind::Status).with_channel("c".repeat(129));
    assert_eq!(enforce(ev)[0].channel, None);
    let ev = event(AgentWrapperEventKind::Status).with_channel("c".repeat(128));
    assert_eq!(
        enforce(ev)[0].channel.as_ref().map(|c| c.as_str().len()),
        Some(128)
    );
}

#[test]
fn message_truncation_follows_the_suffix_algorithm() {
    let msg = "é".repeat(3000); // 6000 bytes
    let cut = truncate_message(&msg, MESSAGE_BOUND);
    assert!(cut.len() <= MESSAGE_BOUND);
    assert!(cut.ends_with(TRUNCATION_SUFFIX));
    assert!(msg.starts_with(cut.trim_end_matches(TRUNCATION_SUFFIX)));
}

#[test]
fn tiny_bounds_use_a_lone_ellipsis() {
    assert_eq!(truncate_message("abcdefghijklmnopqrstuvwxyz", 14), "…");
    assert_eq!(truncate_message("abcdefghijklmnopqrstuvwxyz", 2), "");
}

#[test]
fn oversize_data_is_replaced_by_the_marker() {
    let big = json!({ "blob": "x".repeat(DATA_BOUND) });
    let ev = event(AgentWrapperEventKind::Status).with_data(big);
    assert_eq!(
        enforce(ev)[0].data.as_deref(),
        Some(&json!({"dropped": {"reason": "oversize"}}))
    );
}

#[test]
fn data_at_the_bound_is_kept() {
    let overhead = serialized_json_bytes(&json!({ "b": "" }));
    let exact = json!({ "b": "y".repeat(DATA_BOUND - overhead) });
    assert_eq!(serialized_json_bytes(&exact), DATA_BOUND);
    assert_eq!(bound_data(exact.clone()), exact);
}

#[test]
fn data_judged_by_its_serialized_size_when_the_quick_bound_is_not_enough() {
    // Control characters serialize to six bytes each: the quick upper bound is far over the
    // bound for both values, so the exact size decides.
    let fits = json!({ "c": "\u{1}".repeat(DATA_BOUND / 6 - 2) });
    assert!(serialized_json_bytes(&fits) <= DATA_BOUND);
    assert_eq!(bound_data(fits.clone()), fits);
    let over = json!({ "c": "\u{1}".repeat(DATA_BOUND / 6 + 1) });
    assert!(
        over["c"].as_str().unwrap().len() < DATA_BOUND,
        "over the bound only once escaped"
    );
    assert_eq!(bound_data(over), oversize_marker());
}

proptest! {
    #[test]
    fn the_quick_bound_is_never_below_the_serialized_size(
        texts in prop::collection::vec(prop::sample::select(vec!["a", "\"", "\\", "\u{1}", "é", "𝄞", "\n"]), 0..40),
        number in any::<f64>(),
    ) {
        let text = texts.concat();
        let value = json!({ "s": text, text.clone(): [number, null, true, { "n": -1 }], "e": {} , "a": [] });
        prop_assert!(serialized_json_bytes_at_most(&value) >= serialized_json_bytes(&value));
    }
}

#[test]
fn oversized_text_of_other_kinds_stays_one_event() {
    let ev = event(AgentWrapperEventKind::Unknown).with_text("z".repeat(TEXT_BOUND + 10));
    let out = enforce(ev);
    assert_eq!(out.len(), 1);
    assert!(within_bounds(&out[0]));
}

fn arb_text() -> impl Strategy<Value = String> {
    // Mixes 1- to 4-byte chars; lengths around the bounds are reached by repetition.
    (
        prop::collection::vec(prop::sample::select(vec!["a", "é", "€", "𝄞", "\n"]), 0..64),
        0usize..3000,
    )
        .prop_map(|(chars, repeat)| chars.concat().repeat(repeat.max(1)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_output_satisfies_every_bound(
        channel in prop::option::of("[a-z]{0,200}"),
        text in arb_text(),
        message in arb_text(),
        pad in 0usize..100_000,
    ) {
        let mut ev = event(AgentWrapperEventKind::TextOutput).with_text(text).with_message(message)
            .with_data(json!({ "pad": "p".repeat(pad) }));
        ev.channel = channel.map(crate::vocabulary::event::Channel::from);
        for out in enforce(ev) {
            prop_assert!(within_bounds(&out));
        }
    }

    #[test]
    fn splits_keep_order_and_concatenate_back(text in arb_text()) {
        let ev = event(AgentWrapperEventKind::TextOutput).with_text(text.clone());
        let out = enforce(ev);
        let joined: String = out.iter().map(|e| e.text.clone().unwrap()).collect();
        prop_assert_eq!(joined, text.clone());
        // Every piece but the last is full up to a char boundary (a char is at most 4 bytes).
        for piece in &out[..out.len() - 1] {
            prop_assert!(piece.text.as_ref().unwrap().len() > TEXT_BOUND - 4);
        }
    }

    #[test]
    fn truncation_stays_valid_utf8_and_is_a_prefix(text in arb_text(), bound in 0usize..6000) {
        let cut = truncate_message(&text, bound);
        prop_assert!(cut.len() <= bound.max(text.len().min(bound)));
        prop_assert!(std::str::from_utf8(cut.as_bytes()).is_ok());
        if text.len() <= bound {
            prop_assert_eq!(&cut, &text);
        } else if bound > TRUNCATION_SUFFIX.len() {
            prop_assert!(text.starts_with(cut.strip_suffix(TRUNCATION_SUFFIX).unwrap()));
        }
    }

    #[test]
    fn enforcing_twice_changes_nothing(text in arb_text(), message in arb_text(), pad in 0usize..80_000) {
        let ev = event(AgentWrapperEventKind::TextOutput).with_text(text).with_message(message)
            .with_data(json!({ "pad": "p".repeat(pad) }));
        let once = enforce(ev);
        let twice: Vec<_> = once.iter().cloned().flat_map(enforce).collect();
        prop_assert_eq!(once, twice);
    }
}
