//! The bounded line reader: any bytes give lines without their newline, none over the cap.
#![no_main]

use agent_api::kit::lines::{BoundedLineReader, Line};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 64;

fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let mut lines = BoundedLineReader::new(tokio::io::BufReader::with_capacity(16, data), CAP);
        while let Ok(Some(line)) = lines.next_line().await {
            if let Line::Complete(bytes) = line {
                assert!(bytes.len() <= CAP, "a line over the cap was kept");
                assert!(!bytes.contains(&b'\n'), "a line kept its newline");
            }
        }
    });
});
