//! One failure is one error event in the universal view (issue 39): an agent's own notice of the
//! error a run then fails of (Claude Code's API-error message, a failing `result`) is not shown
//! again beside the run's terminal error, on every recording of every backend.

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api_conformance::{failure_reported_once, record};
use subjects::backends;

mod subjects;

#[test]
fn a_failed_recording_reports_its_failure_once() {
    let subjects = backends();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut failed, mut findings) = (0, Vec::new());
    for subject in subjects {
        for (n, lines) in subject.recordings.iter().enumerate() {
            let bytes = lines.join(&b'\n');
            let run = runtime.block_on(async {
                let handle = replay(
                    subject.backend.as_ref(),
                    std::io::Cursor::new(bytes),
                    ReplayOptions::default(),
                )
                .await
                .unwrap();
                record(handle).await
            });
            failed += usize::from(run.completion.is_err());
            let mut out = Vec::new();
            failure_reported_once(&run.universal, &mut out);
            findings.extend(
                out.into_iter()
                    .map(|f| format!("{} recording #{n}: {f}", subject.name)),
            );
        }
    }
    assert!(failed > 10, "the recordings hold failed runs ({failed})");
    assert!(findings.is_empty(), "{findings:#?}");
}
