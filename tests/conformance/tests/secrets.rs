//! Sentinel secrets never leak, on any backend: API keys in the environment each backend knows,
//! `OPENCODE_SERVER_PASSWORD`, and tokens in argv options are handed to a CLI (`fake_agent_cli` in
//! `echo-secrets` mode) that echoes its whole environment and argv to stderr and inside stdout
//! lines, then fails. The sentinel must appear in no wrapper event, no universal event (raw
//! payloads off), no error's `Display` or `Debug`, no `Debug` of the completion, and no `tracing`
//! log line. Raw payloads are the caller's explicit, documented-as-unredacted opt-in
//! (`spec/run-protocol.md`), so they are left out here on purpose.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_conformance::{record, RunRecord};

/// A value no redaction pattern knows: only keeping the value itself out proves the guarantee.
const SENTINEL: &str = "zq7SENTINELzq7";

fn fake() -> &'static str {
    env!("CARGO_BIN_EXE_fake_agent_cli")
}

/// Every `tracing` event and span field of this test binary, as text.
fn logs() -> Arc<Mutex<String>> {
    static LOGS: OnceLock<Arc<Mutex<String>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(String::new()));
        tracing::subscriber::set_global_default(Capture(logs.clone()))
            .expect("the only subscriber of this binary");
        logs
    })
    .clone()
}

/// A subscriber that writes every field of every event and span into one string, at every level.
struct Capture(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = writeln!(self.0, "{}={value:?}", field.name());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        span.record(&mut Fields(&mut self.0.lock().unwrap()));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        event.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Where the sentinel showed up in one backend's run, as `backend: place: text` lines.
fn leaks(name: &str, outcome: &Result<RunRecord, AgentError>) -> Vec<String> {
    let mut texts: Vec<(&str, String)> = Vec::new();
    match outcome {
        Err(error) => texts.extend([
            ("start error", error.to_string()),
            ("start error Debug", format!("{error:?}")),
        ]),
        Ok(run) => {
            texts.extend(
                run.universal
                    .iter()
                    .map(|e| ("universal event", serde_json::to_string(e).unwrap())),
            );
            texts.extend(
                run.wrapper
                    .iter()
                    .map(|e| ("wrapper event", serde_json::to_string(e).unwrap())),
            );
            texts.push(("completion Debug", format!("{:?}", run.completion)));
            if let Err(error) = &run.completion {
                texts.push(("completion error", error.to_string()));
            }
        }
    }
    texts
        .into_iter()
        .filter(|(_, text)| text.contains(SENTINEL))
        .map(|(place, text)| format!("{name}: {place}: {text}"))
        .collect()
}

/// Runs `request` on `backend` in a fresh directory and lists every leak of the sentinel.
async fn leaks_of(name: &str, backend: &dyn AgentBackend, request: RunRequest) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let request = request
        .with_working_dir(dir.path())
        .with_timeout(std::time::Duration::from_secs(20));
    let mut found = Vec::new();
    if format!("{request:?}").contains(SENTINEL) {
        found.push(format!("{name}: Debug of the request"));
    }
    let outcome = match backend.run(request).await {
        Ok(handle) => Ok(record(handle).await),
        Err(error) => Err(error),
    };
    if let Ok(run) = &outcome {
        assert!(
            run.completion.is_err(),
            "{name}: the echoing CLI fails every run"
        );
        let problems = agent_api_conformance::problems(run);
        assert!(
            problems.iter().all(|p| p.contains("is agent.unparsed")),
            "{name}: {problems:?}"
        );
    }
    found.extend(leaks(name, &outcome));
    found
}

/// One backend under test, with the `Debug` text of its configured value and its request.
struct Case {
    name: String,
    backend: Box<dyn AgentBackend>,
    debug: String,
    request: RunRequest,
}

impl Case {
    fn new(
        name: impl Into<String>,
        backend: impl AgentBackend + std::fmt::Debug + 'static,
        request: RunRequest,
    ) -> Self {
        let debug = format!("{backend:?}");
        Self {
            name: name.into(),
            backend: Box::new(backend),
            debug,
            request,
        }
    }
}

/// The request every backend gets: the sentinel in the request's environment too.
fn request() -> RunRequest {
    RunRequest::new("print your configuration").with_env("AGENT_API_TOKEN", SENTINEL)
}

fn key(name: &str) -> (String, String) {
    (name.to_string(), SENTINEL.to_string())
}

/// The environment each backend is configured with: its own key variables and the fake's mode.
fn env_for(keys: &[&str]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = keys.iter().map(|k| key(k)).collect();
    env.push(("FAKE_AGENT_MODE".into(), "echo-secrets".into()));
    env
}

/// Every backend, configured with sentinel keys and a sentinel token in its argv. The `Debug` of
/// each configured backend is checked as it is built.
fn backends() -> Vec<Case> {
    use agent_api_acp::{AcpBackend, AcpConfig, AcpOptions};
    use agent_api_gemini::GeminiBackend;
    use agent_api_opencode::{Interface, OpenCodeBackend, OpenCodeConfig, OpenCodeOptions};
    use agent_api_qwen::QwenBackend;
    let token = format!("--api-token={SENTINEL}");
    let mut out: Vec<Case> = Vec::new();

    let mut claude = agent_api_claude_code::ClaudeCodeConfig::default()
        .with_binary(fake())
        .with_extra_args([token.clone()]);
    for (k, v) in env_for(&["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]) {
        claude = claude.with_env(k, v);
    }
    out.push(Case::new(
        "claude_code",
        agent_api_claude_code::ClaudeCodeBackend::new(claude),
        request(),
    ));

    let mut codex = agent_api_codex::CodexConfig::with_binary(fake())
        .config_overrides([format!("api_key=\"{SENTINEL}\"")]);
    for (k, v) in env_for(&["OPENAI_API_KEY", "CODEX_API_KEY"]) {
        codex = codex.env(k, v);
    }
    out.push(Case::new(
        "codex",
        agent_api_codex::CodexBackend::new(codex),
        request(),
    ));

    for interface in [Interface::Run, Interface::Serve, Interface::Acp] {
        let mut config =
            OpenCodeConfig::with_binary(fake()).startup_timeout(std::time::Duration::from_secs(3));
        for (k, v) in env_for(&[
            "OPENCODE_SERVER_PASSWORD",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
        ]) {
            config = config.env(k, v);
        }
        let request = request().with_options(&OpenCodeOptions::default().interface(interface));
        out.push(Case::new(
            format!("opencode {interface:?}"),
            OpenCodeBackend::new(config),
            request,
        ));
    }

    for (name, keys) in [
        ("gemini", &["GEMINI_API_KEY", "GOOGLE_API_KEY"][..]),
        ("qwen", &["OPENAI_API_KEY", "DASHSCOPE_API_KEY"][..]),
    ] {
        let mut config = AcpConfig::with_binary(fake()).args([token.clone()]);
        for (k, v) in env_for(keys) {
            config = config.env(k, v);
        }
        match name {
            "gemini" => out.push(Case::new(name, GeminiBackend::new(config), request())),
            _ => out.push(Case::new(name, QwenBackend::new(config), request())),
        }
    }
    let mut acp = AcpConfig::default();
    for (k, v) in env_for(&["AGENT_API_KEY"]) {
        acp = acp.env(k, v);
    }
    let generic =
        request().with_options(&AcpOptions::default().command([fake().to_string(), token.clone()]));
    out.push(Case::new("acp", AcpBackend::new(acp), generic));

    let mut amp = agent_api_amp::AmpConfig::default()
        .with_binary(fake())
        .with_delegate_helper(fake());
    amp.extra_args.push(token);
    for (k, v) in env_for(&["AMP_API_KEY"]) {
        amp = amp.with_env(k, v);
    }
    out.push(Case::new(
        "amp",
        agent_api_amp::AmpBackend::new(amp),
        request(),
    ));

    let scripted =
        request().with_options(&agent_api_scripted::ScriptedOptions::scenario("error").delay_ms(0));
    out.push(Case::new(
        "scripted",
        agent_api_scripted::ScriptedBackend::new(),
        scripted,
    ));
    out
}

#[tokio::test]
async fn no_backend_leaks_a_sentinel_secret_the_cli_echoes() {
    let logs = logs();
    let mut found = Vec::new();
    for case in backends() {
        if case.debug.contains(SENTINEL) {
            found.push(format!(
                "{}: Debug of the backend: {}",
                case.name, case.debug
            ));
        }
        found.extend(leaks_of(&case.name, case.backend.as_ref(), case.request).await);
    }
    let logged = logs.lock().unwrap().clone();
    if logged.contains(SENTINEL) {
        found.push(format!("tracing: {logged}"));
    }
    assert!(
        found.is_empty(),
        "the sentinel leaked:\n{}",
        found.join("\n")
    );
}
