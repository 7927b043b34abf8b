//! The JSON-RPC classifier takes any JSON value without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = agent_api::kit::jsonrpc::classify(value);
    }
});
