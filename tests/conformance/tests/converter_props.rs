//! Property tests of every converter, in one place: each backend's native parser fed through the
//! replay reader (both recording formats), the line framer and the run driver, on recorded lines
//! mutated at random (`agent_api_conformance::props`: wrong types, missing fields, huge strings,
//! deep nesting, cut and corrupted lines) and on raw byte noise; the SSE framer on random chunks;
//! the JSON-RPC classifier on random JSON. Zero panics, and every run passes the conformance checks
//! but `agent.unparsed` (the unreadable lines themselves).
//!
//! Case counts are small for CI (a few seconds each); `AGENT_API_PROPTEST_CASES=5000` runs longer.
//! A new backend joins by adding a row to [`backends`] with the recordings of its own CLI.

use std::path::PathBuf;
use std::sync::OnceLock;

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api::{AgentBackend, RunRequest};
use agent_api_conformance::props::{cases, check_run, file_lines, json_value, mutate, mutation, record_within};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// One converter under test: a backend, and the recorded native lines it reads.
struct Subject {
    name: &'static str,
    backend: Box<dyn AgentBackend>,
    recordings: Vec<Vec<Vec<u8>>>,
}

/// Every `*.stdout.jsonl` and `*.session.jsonl` under these fixture folders, one entry per file.
fn recordings(folders: &[&str]) -> Vec<Vec<Vec<u8>>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for folder in folders {
        let dir = agent_bench::fixtures_dir().join(folder);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".stdout.jsonl") || name.ends_with(".session.jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no recordings in {folders:?}");
    files.iter().map(|p| file_lines(p)).collect()
}

/// The scripted backend's own native lines: the raw payloads of a run of its tour.
fn scripted_lines() -> Vec<Vec<Vec<u8>>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let lines = runtime.block_on(async {
        let options = agent_api_scripted::ScriptedOptions::scenario("tour").delay_ms(0);
        let request = RunRequest::new("hi").with_options(&options).with_include_raw(true);
        let answers = agent_api_conformance::Answers::permissions(agent_api::PermissionDecision::Allow).with_answer("yes");
        let handle = agent_api_scripted::ScriptedBackend::new().run(request).await.unwrap();
        let run = agent_api_conformance::record_answering(handle, answers).await;
        let mut lines: Vec<Vec<u8>> = run.universal.iter().filter_map(|e| e.raw.as_ref()).map(|raw| raw.to_string().into_bytes()).collect();
        lines.dedup();
        lines
    });
    assert!(!lines.is_empty(), "the scripted tour kept its raw lines");
    vec![lines]
}

/// Every backend with the recordings of its CLI. New backends add a row here.
fn backends() -> &'static [Subject] {
    use agent_api_acp::{AcpBackend, AcpConfig};
    static SUBJECTS: OnceLock<Vec<Subject>> = OnceLock::new();
    SUBJECTS.get_or_init(|| {
        let subject = |name, backend: Box<dyn AgentBackend>, recordings| Subject { name, backend, recordings };
        vec![
            subject("scripted", Box::new(agent_api_scripted::ScriptedBackend::new()), scripted_lines()),
            subject(
                "claude_code",
                Box::new(agent_api_claude_code::ClaudeCodeBackend::new(Default::default())),
                recordings(&["claude_code/control", "claude_code/print", "handwritten"]),
            ),
            subject(
                "codex",
                Box::new(agent_api_codex::CodexBackend::new(Default::default())),
                recordings(&["codex/exec", "codex/app_server"]),
            ),
            subject(
                "opencode",
                Box::new(agent_api_opencode::OpenCodeBackend::new(Default::default())),
                recordings(&["opencode/run", "opencode/serve"]),
            ),
            subject("gemini", Box::new(AcpBackend::gemini(AcpConfig::default())), recordings(&["gemini/acp", "gemini/headless"])),
            // Qwen speaks ACP and Claude-shaped stream-json; no Qwen recording is committed yet.
            subject("qwen", Box::new(AcpBackend::qwen(AcpConfig::default())), recordings(&["gemini/acp", "claude_code/print"])),
            subject("acp", Box::new(AcpBackend::generic(AcpConfig::default())), recordings(&["opencode/acp", "gemini/acp"])),
            subject("amp", Box::new(agent_api_amp::AmpBackend::new(Default::default())), recordings(&["amp"])),
        ]
    })
}

/// Replays `lines` through `subject`'s converter and checks the run.
fn check(subject: &Subject, lines: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let bytes = lines.join(&b'\n');
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let reader = std::io::Cursor::new(bytes);
        match replay(subject.backend.as_ref(), reader, ReplayOptions::default()).await {
            Ok(handle) => check_run(&record_within(handle).await?).map_err(|e| TestCaseError::fail(format!("{}: {e}", subject.name))),
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
        if let Some(retry) = agent_api_acp::retries::Retry::in_line(&line) {
            let mut t = agent_api::universal::Transcript::new("sess_props".into(), false);
            retry.emit(&mut t);
            let shown = format!("{:?}", t.drain().collect::<Vec<_>>());
            prop_assert!(middle.trim().len() < 6 || !shown.contains(middle.trim()), "the agent's text reached an event");
        }
    }
}
