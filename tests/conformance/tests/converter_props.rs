//! Property tests of every converter, in one place: each backend's native parser fed through the
//! replay reader (both recording formats), the line framer and the run driver, on recorded lines
//! mutated at random (`agent_api_conformance::props`: wrong types, missing fields, huge strings,
//! deep nesting, cut and corrupted lines) and on raw byte noise; the SSE framer on random chunks;
//! the JSON-RPC classifier on random JSON. Zero panics, and every run passes the conformance checks
//! but `agent.unparsed` (the unreadable lines themselves).
//!
//! Case counts are small for CI (a few seconds each); `AGENT_API_PROPTEST_CASES=5000` runs longer.
//! A new backend joins by adding a row to `subjects::backends` with the recordings of its own CLI.

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api_conformance::props::{cases, check_run, json_value, mutate, mutation, record_within};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use subjects::{backends, Subject};

mod subjects;

/// Replays `lines` through `subject`'s converter and checks the run.
fn check(subject: &Subject, lines: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let bytes = lines.join(&b'\n');
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let reader = std::io::Cursor::new(bytes);
        match replay(subject.backend.as_ref(), reader, ReplayOptions::default()).await {
            Ok(handle) => check_run(&record_within(handle).await?)
                .map_err(|e| TestCaseError::fail(format!("{}: {e}", subject.name))),
            // A recording the reader refuses (an unknown format) is a typed error, not a panic.
            Err(_) => Ok(()),
        }
    })
}

proptest! {
    #![proptest_config(cases(24))]

    #[test]
    fn mutated_recordings_convert_without_panics_on_every_backend(
        pick in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 0..10),
    ) {
        for subject in backends() {
            let lines = mutate(pick.get(&subject.recordings).clone(), mutations.clone());
            check(subject, &lines)?;
        }
    }

    #[test]
    fn byte_noise_converts_without_panics_on_every_backend(noise in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 0..10)) {
        for subject in backends() {
            check(subject, &noise)?;
        }
    }

    #[test]
    fn the_sse_framer_keeps_whole_bounded_events_whatever_the_chunks(chunks in prop::collection::vec(prop::collection::vec(prop_oneof![Just(b'\n'), Just(b':'), Just(b'd'), any::<u8>()], 0..64), 0..32)) {
        let max = 256;
        let mut decoder = agent_api::kit::sse::SseDecoder::new(max);
        for chunk in &chunks {
            for event in decoder.push(chunk) {
                prop_assert!(event.data.len() <= max + 1, "an event over the bound: {} bytes", event.data.len());
            }
        }
    }

    #[test]
    fn the_json_rpc_classifier_takes_any_json(value in json_value()) {
        let _ = agent_api::kit::jsonrpc::classify(value);
    }

    /// Gemini's stderr retry lines, mutated and noisy: read without panics, and an event never
    /// carries the line's own words.
    #[test]
    fn gemini_stderr_retry_lines_read_without_panics_or_echoing_the_agent(
        attempt in 0u64..u64::MAX,
        middle in "[ -~é日\\n]{0,80}",
        tail in prop_oneof![Just(". Retrying after 5000ms..."), Just(". Retrying with backoff..."), Just(". Max attempts reached"), Just("")],
    ) {
        let line = format!("Attempt {attempt} failed{middle}{tail}");
        if let Some(retry) = agent_api_acp::Retry::in_line(&line) {
            let mut t = agent_api::kit::transcript::Transcript::new("sess_props".into(), false);
            retry.emit(&mut t);
            let shown = format!("{:?}", t.drain().collect::<Vec<_>>());
            prop_assert!(middle.trim().len() < 6 || !shown.contains(middle.trim()), "the agent's text reached an event");
        }
    }
}
