//! Every backend's converter with the recordings of its own CLI: the subjects of the tests that
//! run each converter over its recordings. A new backend adds a row to [`backends`].

use std::path::PathBuf;
use std::sync::OnceLock;

use agent_api::kit::replay::Replay;
use agent_api::{AgentBackend, RunRequest};
use agent_api_conformance::props::file_lines;

/// One converter under test: a backend, and the recorded native lines it reads.
pub(crate) struct Subject {
    pub(crate) name: &'static str,
    pub(crate) backend: Box<dyn Replay>,
    pub(crate) recordings: Vec<Vec<Vec<u8>>>,
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lines = runtime.block_on(async {
        let options = agent_api_scripted::ScriptedOptions::scenario("tour").delay_ms(0);
        let request = RunRequest::new("hi")
            .with_options(&options)
            .with_include_raw(true);
        let answers =
            agent_api_conformance::Answers::permissions(agent_api::PermissionDecision::Allow)
                .with_answer("yes");
        let handle = agent_api_scripted::ScriptedBackend::new()
            .run(request)
            .await
            .unwrap();
        let run = agent_api_conformance::record_answering(handle, answers).await;
        let mut lines: Vec<Vec<u8>> = run
            .universal
            .iter()
            .filter_map(|e| e.raw.as_ref())
            .map(|raw| raw.to_string().into_bytes())
            .collect();
        lines.dedup();
        lines
    });
    assert!(!lines.is_empty(), "the scripted tour kept its raw lines");
    vec![lines]
}

/// Every backend with the recordings of its CLI. New backends add a row here.
pub(crate) fn backends() -> &'static [Subject] {
    use agent_api_acp::{AcpBackend, AcpConfig};
    use agent_api_gemini::GeminiBackend;
    use agent_api_qwen::QwenBackend;
    static SUBJECTS: OnceLock<Vec<Subject>> = OnceLock::new();
    SUBJECTS.get_or_init(|| {
        let subject = |name, backend: Box<dyn Replay>, recordings| Subject {
            name,
            backend,
            recordings,
        };
        vec![
            subject(
                "scripted",
                Box::new(agent_api_scripted::ScriptedBackend::new()),
                scripted_lines(),
            ),
            subject(
                "claude_code",
                Box::new(agent_api_claude_code::ClaudeCodeBackend::new(
                    Default::default(),
                )),
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
            subject(
                "gemini",
                Box::new(GeminiBackend::new(AcpConfig::default())),
                recordings(&["gemini/acp", "gemini/headless"]),
            ),
            // Qwen speaks ACP and Claude-shaped stream-json; no Qwen recording is committed yet.
            subject(
                "qwen",
                Box::new(QwenBackend::new(AcpConfig::default())),
                recordings(&["gemini/acp", "claude_code/print"]),
            ),
            subject(
                "acp",
                Box::new(AcpBackend::new(AcpConfig::default())),
                recordings(&["opencode/acp", "gemini/acp"]),
            ),
            subject(
                "amp",
                Box::new(agent_api_amp::AmpBackend::new(Default::default())),
                recordings(&["amp"]),
            ),
        ]
    })
}
