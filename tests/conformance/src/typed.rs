//! The typed line entry of a backend must say what its `Value` path says: [`assert_typed_matches_value`]
//! feeds the same lines to two fresh converters, one through `Protocol::on_line` and one through
//! `Protocol::on_message`, and compares the transcripts.

use agent_api::kit::{parse_value, Protocol, ProtocolHarness};
use serde_json::Value;

fn transcript(protocol: &mut dyn Protocol, lines: &[&[u8]], typed: bool) -> Vec<Value> {
    let mut harness = ProtocolHarness::new();
    let mut out = Vec::new();
    for line in lines {
        let result = match typed {
            true => protocol.on_line(line, &mut harness.ctx()),
            false => parse_value(line)
                .and_then(|message| protocol.on_message(message, &mut harness.ctx())),
        };
        out.push(serde_json::json!({ "unparsed": result.err().map(|e| e.0) }));
        out.extend(harness.transcript.drain().map(|mut e| {
            // Times differ between the two runs; everything else must not.
            e.time = "".into();
            serde_json::to_value(e).expect("events serialize")
        }));
        out.push(serde_json::json!({ "sent": harness.take_sent() }));
    }
    out
}

/// Panics unless `make()`'s typed entry and its `Value` path turn `lines` into the same
/// transcript, the same replies and the same unparsed reports.
pub fn assert_typed_matches_value(make: impl Fn() -> Box<dyn Protocol>, lines: &[&[u8]]) {
    let typed = transcript(make().as_mut(), lines, true);
    let value = transcript(make().as_mut(), lines, false);
    assert_eq!(
        typed.len(),
        value.len(),
        "the typed path emitted a different number of events"
    );
    for (t, v) in typed.iter().zip(&value) {
        assert_eq!(t, v, "the typed path differs from the Value path");
    }
}
