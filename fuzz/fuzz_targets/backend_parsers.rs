//! Every backend's parser, in both recording formats: any lines, then the end of the run, with
//! no panic. The first byte picks the backend and format; the rest is split into lines.
#![no_main]

use agent_api::kit::protocol::ProtocolHarness;
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::ExitInfo;
use agent_api::AgentBackend;
use libfuzzer_sys::fuzz_target;

fn backends() -> Vec<Box<dyn AgentBackend>> {
    use agent_api_acp::{AcpBackend, AcpConfig};
    vec![
        Box::new(agent_api_scripted::ScriptedBackend::new()),
        Box::new(agent_api_claude_code::ClaudeCodeBackend::new(Default::default())),
        Box::new(agent_api_codex::CodexBackend::new(Default::default())),
        Box::new(agent_api_opencode::OpenCodeBackend::new(Default::default())),
        Box::new(AcpBackend::gemini(AcpConfig::default())),
        Box::new(AcpBackend::qwen(AcpConfig::default())),
        Box::new(AcpBackend::generic(AcpConfig::default())),
        Box::new(agent_api_amp::AmpBackend::new(Default::default())),
    ]
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let backends = backends();
    let backend = &backends[usize::from(pick >> 1) % backends.len()];
    let format = if pick & 1 == 0 { RecordingFormat::NativeStdout } else { RecordingFormat::Session };
    let Ok(mut protocol) = backend.replay_protocol(format) else { return };
    let mut harness = ProtocolHarness::new();
    for line in rest.split(|b| *b == b'\n') {
        let _ = protocol.on_line(line, &mut harness.ctx());
    }
    let _ = protocol.finish(&ExitInfo::default(), &mut harness.ctx());
    harness.transcript.drain().for_each(drop);
});
