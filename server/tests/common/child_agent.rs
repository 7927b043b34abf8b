//! A real CLI served by a child server process on a machine of its own (a bench sandbox: its own
//! HOME, working directory and environment), for the tests that start servers as processes.

use std::sync::Arc;
use std::time::Duration;

use agent_bench::Sandbox;
use serde::{Deserialize, Serialize};

/// What a child server runs: one real CLI, as a bench sandbox sets it up (passed to the child as
/// JSON in an environment variable).
#[derive(Serialize, Deserialize)]
pub struct ChildAgent {
    pub agent: String,
    pub name: String,
    pub program: std::path::PathBuf,
    pub env: Vec<(String, String)>,
    pub base_args: Vec<String>,
    pub cwd: std::path::PathBuf,
}

impl ChildAgent {
    /// The server `name`'s agent `agent` (a bench CLI's name: `claude_code`, `codex`, `opencode`,
    /// `gemini` or `qwen`; `gemini_acp`: Gemini CLI left on its default ACP interface), as
    /// `sandbox` sets it up.
    pub fn new(agent: &str, name: &str, sandbox: &Sandbox) -> Self {
        Self {
            agent: agent.into(),
            name: name.into(),
            program: sandbox.program.clone(),
            env: sandbox.env.clone(),
            base_args: sandbox.base_args.clone(),
            cwd: sandbox.cwd.clone(),
        }
    }

    /// The child's agent, read from the environment variable `var` its parent set.
    pub fn from_env(var: &str) -> Option<Self> {
        let json = std::env::var(var).ok()?;
        Some(serde_json::from_str(&json).expect("the parent test wrote the child's agent"))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap()
    }

    /// The requests' defaults of a server running it: its working directory, a bound per turn,
    /// and its [`ChildAgent::settings`].
    pub fn defaults(&self) -> agent_api::RunRequest {
        let (model, options) = self.settings();
        let mut request = agent_api::RunRequest::new("")
            .with_working_dir(&self.cwd)
            .with_timeout(Duration::from_secs(300));
        if let Some(model) = model {
            request = request.with_model(model);
        }
        for (key, value) in options {
            request = request.with_extension(*key, serde_json::json!(value));
        }
        request
    }

    /// What its CLI needs of every request beyond its sandbox: the model, and backend options by
    /// key. Gemini CLI: the sandbox's model (the backend passes the request's `-m`, not the
    /// sandbox's arguments), and its headless interface, a process per turn resuming with
    /// `--resume`: the interface a chat restored from a snapshot goes on in, since its own ACP
    /// `session/load` loses a race with itself (see `agent_api_gemini`).
    pub fn settings(
        &self,
    ) -> (
        Option<&'static str>,
        &'static [(&'static str, &'static str)],
    ) {
        match self.agent.as_str() {
            "gemini" => (
                Some(agent_bench::sandbox::GEMINI_MODEL),
                &[("backend.gemini.interface", "headless")],
            ),
            "gemini_acp" => (Some(agent_bench::sandbox::GEMINI_MODEL), &[]),
            _ => (None, &[]),
        }
    }

    /// The user turns its CLI adds to every conversation (Qwen Code's environment message).
    pub fn context_turns(&self) -> u64 {
        u64::from(self.agent == "qwen")
    }

    /// A child server's whole life serving this agent alone on the store `url` (clients may set
    /// `permissionMode`), as [`super::serve_until_sigterm`] serves, printing `listening`.
    pub async fn serve(self, url: &str, listening: &str) {
        let store = agent_api_server::StoreUrl::parse(url)
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut gateway = agent_api::Gateway::new();
        gateway.register(self.backend()).unwrap();
        let config = agent_api_server::ServerConfig::default()
            .with_daemon_id(&self.name)
            .with_idle_release(None)
            .with_client_option("permissionMode");
        let server = agent_api_server::Server::new(gateway, self.defaults(), store, config)
            .await
            .unwrap();
        super::serve_until_sigterm(server, listening).await;
    }

    pub fn backend(&self) -> Arc<dyn agent_api::AgentBackend> {
        match self.agent.as_str() {
            "claude_code" => {
                let mut config = agent_api_claude_code::ClaudeCodeConfig::default()
                    .with_binary(&self.program)
                    .with_inherit_env(false)
                    .with_working_dir(&self.cwd);
                for (key, value) in &self.env {
                    config = config.with_env(key, value);
                }
                Arc::new(agent_api_claude_code::ClaudeCodeBackend::new(config))
            }
            "codex" => {
                // The sandbox's `-c` overrides point Codex at the model server.
                let overrides: Vec<String> = self
                    .base_args
                    .windows(2)
                    .filter(|w| w[0] == "-c")
                    .map(|w| w[1].clone())
                    .collect();
                let mut config = agent_api_codex::CodexConfig::with_binary(&self.program)
                    .config_overrides(overrides)
                    .working_dir(&self.cwd);
                for (key, value) in &self.env {
                    config = config.env(key, value);
                }
                Arc::new(agent_api_codex::CodexBackend::new(config))
            }
            "opencode" => {
                let mut config = agent_api_opencode::OpenCodeConfig::with_binary(&self.program);
                for (key, value) in &self.env {
                    config = config.env(key, value);
                }
                config.working_dir = Some(self.cwd.clone());
                Arc::new(agent_api_opencode::OpenCodeBackend::new(config))
            }
            "gemini" | "gemini_acp" | "qwen" => {
                let mut config =
                    agent_api_acp::AcpConfig::with_binary(&self.program).working_dir(&self.cwd);
                for (key, value) in &self.env {
                    config = config.env(key, value);
                }
                if self.agent.starts_with("gemini") {
                    Arc::new(agent_api_gemini::GeminiBackend::new(config))
                } else {
                    Arc::new(agent_api_qwen::QwenBackend::new(config))
                }
            }
            other => panic!("a child server runs a bench CLI, not {other}"),
        }
    }
}

/// The live processes but `server` whose HOME is `home`: the agents a server on that machine
/// started (the server itself excluded).
pub fn agents_on(home: &std::path::Path, server: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let home = home.to_string_lossy();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != server as i32)
        .filter(|pid| agent_bench::process::process_env(*pid, "HOME").as_deref() == Some(&*home))
        .filter(|pid| agent_bench::process::process_alive(*pid))
        .collect()
}

/// Kills every agent process left on the machine whose HOME is `home` (what a killed server
/// cannot stop), and waits until they are gone.
pub fn reap_agents(home: &std::path::Path, server: u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = agents_on(home, server);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{left:?} outlived SIGKILL"
        );
        for pid in left {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Deletes a machine's HOME once its server is gone, as a replaced machine's disk is (a process
/// that was writing there as it died may leave a file behind a moment later).
pub fn remove_home(home: &std::path::Path) {
    let mut tries = 0;
    while let Err(error) = std::fs::remove_dir_all(home) {
        if error.kind() == std::io::ErrorKind::NotFound {
            return;
        }
        tries += 1;
        assert!(tries < 50, "the home cannot be deleted: {error}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
