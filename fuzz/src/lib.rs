//! What every parser target shares: feed fuzzer bytes to one backend's replay converter.
//!
//! The first byte picks the recording format (its low bit) and, for a backend with several
//! interfaces, nothing else: each backend has its own target so libFuzzer's coverage map and
//! corpus belong to one parser at a time.

use agent_api::kit::replay::{RecordingFormat, Replay};
use agent_api::kit::ExitInfo;
use agent_api::kit::ProtocolHarness;

/// Feeds `data` (split at newlines, after its first byte) to `backend`'s converter, then ends the
/// run, and drains every event it built. Panics only if the converter does.
pub fn parse_lines(backend: &dyn Replay, data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let format = if pick & 1 == 0 {
        RecordingFormat::NativeStdout
    } else {
        RecordingFormat::Session
    };
    let Ok(mut protocol) = backend.replay_protocol(format) else {
        return;
    };
    let mut harness = ProtocolHarness::new();
    for line in rest.split(|b| *b == b'\n') {
        let _ = protocol.on_line(line, &mut harness.ctx());
    }
    let _ = protocol.finish(&ExitInfo::default(), &mut harness.ctx());
    harness.transcript.drain().for_each(drop);
}
