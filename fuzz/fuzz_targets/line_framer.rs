//! The bounded line reader: any bytes give lines without their newline, none over the cap, and
//! reading whole chunks of lines at once gives the same lines as reading them one by one.
#![no_main]

use agent_api::kit::lines::{BoundedLineReader, Line, Lines};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 64;

fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut one_by_one = Vec::new();
        let mut lines = BoundedLineReader::new(tokio::io::BufReader::with_capacity(16, data), CAP);
        while let Ok(Some(line)) = lines.next_line().await {
            if let Line::Complete(bytes) = &line {
                assert!(bytes.len() <= CAP, "a line over the cap was kept");
                assert!(!bytes.contains(&b'\n'), "a line kept its newline");
            }
            one_by_one.push(line);
        }
        let mut chunked = Vec::new();
        let mut lines = BoundedLineReader::new(tokio::io::BufReader::with_capacity(256, data), CAP);
        while let Ok(Some(read)) = lines.next_lines().await {
            match read {
                Lines::Chunk(mut chunk) => {
                    while let Some(line) = chunk.next_line() {
                        chunked.push(Line::Complete(line.to_vec()));
                    }
                }
                Lines::One(line) => chunked.push(line),
            }
        }
        assert_eq!(chunked, one_by_one, "chunks gave other lines");
    });
});
