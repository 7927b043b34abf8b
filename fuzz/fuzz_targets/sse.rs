//! The SSE decoder: any bytes, cut into chunks where the first byte says, give bounded events.
#![no_main]

use agent_api::kit::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

const MAX_EVENT: usize = 256;

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let mut decoder = SseDecoder::new(MAX_EVENT);
    for chunk in rest.chunks(usize::from(step).max(1)) {
        for event in decoder.push(chunk) {
            assert!(event.data.len() <= MAX_EVENT + 1, "an event over the bound");
        }
    }
});
