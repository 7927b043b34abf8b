//! A generic ACP agent's parser, in both recording formats: any lines, then the end of the run, with no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    thread_local!(static BACKEND: Box<dyn agent_api::kit::replay::Replay> = Box::new(agent_api_acp::AcpBackend::new(Default::default())));
    BACKEND.with(|backend| agent_api_fuzz::parse_lines(backend.as_ref(), data));
});
