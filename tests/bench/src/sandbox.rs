//! A private place to run one CLI: its own HOME, XDG folders, TMPDIR and working directory, and the
//! environment and flags (from the shared NOTES.md) that point it at the model server and keep every
//! request on loopback.
//!
//! Layout (the root is a temporary folder, removed when the last `Sandbox` sharing it is dropped):
//!
//! ```text
//! <root>/home            HOME; XDG_CONFIG_HOME=home/.config, XDG_DATA_HOME=home/.local/share,
//!                        XDG_CACHE_HOME=home/.cache, XDG_STATE_HOME=home/.local/state, CODEX_HOME=home/.codex
//! <root>/home/work/<s>   the working directory (s = the first scenario's name)
//! <root>/tmp             TMPDIR
//! ```
//!
//! The root is made under `$AGENT_API_SANDBOX_DIR`, else `$HOME/.cache/agent_api/sandboxes`: not under
//! /tmp, where Codex refuses to set up its helper links.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use tempfile::TempDir;
use tokio::process::Command;

use crate::{clis, process, BenchError, Cli, ModelServer};

/// The model every Codex sandbox asks for (one `codex debug models` lists; others lose `apply_patch`).
pub const CODEX_MODEL: &str = "gpt-5.5";
/// The model Gemini sandboxes pass with `-m` (without it every turn starts with a routing request).
pub const GEMINI_MODEL: &str = "gemini-2.5-flash";
/// The model name OpenCode and Qwen are configured with.
pub const CHAT_MODEL: &str = "mock-model";

/// A prepared, private environment for one CLI, pointed at `server.base_url(scenario)`.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Which CLI.
    pub cli: Cli,
    /// The CLI's executable.
    pub program: PathBuf,
    /// The complete environment of the child (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The private HOME.
    pub home: PathBuf,
    /// The private TMPDIR.
    pub tmp: PathBuf,
    /// Arguments put before the caller's (Codex: the `-c` model-provider flags; Gemini: `--skip-trust -m ...`).
    pub base_args: Vec<String>,
    /// The scenario (with tag) this sandbox points at.
    pub scenario: String,
    /// The model server's base URL for that scenario.
    pub base_url: String,
    server_origin: String,
    _root: Arc<TempDir>,
}

impl Sandbox {
    /// Prepares a sandbox for `cli` pointed at `server` with `scenario` (`name` or `name.tag`). Fails when
    /// the CLI is not installed or the folders cannot be made.
    pub fn new(cli: Cli, server: &ModelServer, scenario: &str) -> Result<Sandbox, BenchError> {
        Sandbox::with_program(cli, clis::find_cli(cli)?, server, scenario)
    }

    /// The same as [`Sandbox::new`] with another executable standing in for the CLI (a wrapper script, a
    /// locally built CLI, or a fake in hermetic tests); the environment and `base_args` are `cli`'s.
    pub fn with_program(
        cli: Cli,
        program: PathBuf,
        server: &ModelServer,
        scenario: &str,
    ) -> Result<Sandbox, BenchError> {
        let parent = sandbox_parent()?;
        let root = tempfile::Builder::new()
            .prefix(&format!("{}-", cli.name()))
            .tempdir_in(&parent)
            .map_err(|e| {
                BenchError::io(format!("making a sandbox under {}", parent.display()), e)
            })?;
        let home = root.path().join("home");
        let dir_name: String = scenario
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let cwd = home.join("work").join(dir_name);
        let tmp = root.path().join("tmp");
        for dir in [
            &cwd,
            &tmp,
            &home.join(".config"),
            &home.join(".local/share"),
            &home.join(".cache"),
        ] {
            std::fs::create_dir_all(dir)
                .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
        }
        std::fs::create_dir_all(home.join(".local/state"))
            .map_err(|e| BenchError::io("creating the XDG state folder", e))?;
        write_config_files(cli, &home)?;
        let mut sandbox = Sandbox {
            cli,
            program,
            env: Vec::new(),
            cwd,
            home,
            tmp,
            base_args: Vec::new(),
            scenario: String::new(),
            base_url: String::new(),
            server_origin: format!("http://{}", server.addr()),
            _root: Arc::new(root),
        };
        sandbox.point_at(scenario);
        Ok(sandbox)
    }

    /// The same HOME and working directory (so sessions can be resumed), pointed at another scenario.
    pub fn for_resume(&self, scenario: &str) -> Sandbox {
        let mut next = self.clone();
        next.point_at(scenario);
        next
    }

    /// A command for the CLI with `base_args` then `args`: the sandbox's environment only, its working
    /// directory, its own process group, SIGINT/SIGTERM at default, stdin at /dev/null (set it again to
    /// drive stdin) and killed when dropped. Kill the whole group with [`crate::process::GroupGuard`].
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.base_args)
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.current_dir(&self.cwd).kill_on_drop(true);
        process::isolate(&mut cmd);
        cmd
    }

    /// The value of one of the sandbox's environment variables.
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn point_at(&mut self, scenario: &str) {
        self.scenario = scenario.to_string();
        self.base_url = format!("{}/s/{scenario}", self.server_origin);
        let (env, base_args) = cli_env(self.cli, &self.base_url, &self.server_origin, &self.home);
        let p = |p: &Path| p.display().to_string();
        let mut all = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("HOME".into(), p(&self.home)),
            ("XDG_CONFIG_HOME".into(), p(&self.home.join(".config"))),
            ("XDG_DATA_HOME".into(), p(&self.home.join(".local/share"))),
            ("XDG_CACHE_HOME".into(), p(&self.home.join(".cache"))),
            ("XDG_STATE_HOME".into(), p(&self.home.join(".local/state"))),
            ("TMPDIR".into(), p(&self.tmp)),
            ("PWD".into(), p(&self.cwd)),
            ("LANG".into(), "C.UTF-8".into()),
            ("TERM".into(), "dumb".into()),
        ];
        all.extend(env);
        self.env = all;
        self.base_args = base_args;
    }
}

fn sandbox_parent() -> Result<PathBuf, BenchError> {
    let dir = match std::env::var_os("AGENT_API_SANDBOX_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            let home =
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .ok_or(BenchError::BadPath {
                        path: PathBuf::from("$HOME"),
                        reason: "HOME is unset; set AGENT_API_SANDBOX_DIR",
                    })?;
            PathBuf::from(home).join(".cache/agent_api/sandboxes")
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    Ok(dir)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The CLI's own variables and leading arguments for `base_url`.
fn cli_env(
    cli: Cli,
    base_url: &str,
    origin: &str,
    home: &Path,
) -> (Vec<(String, String)>, Vec<String>) {
    let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
    match cli {
        Cli::ClaudeCode => {
            let mut env = vec![
                kv("ANTHROPIC_BASE_URL", base_url),
                kv("ANTHROPIC_API_KEY", "sk-test"),
                kv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                kv("DISABLE_AUTOUPDATER", "1"),
                kv("CLAUDE_CODE_MAX_RETRIES", "0"),
            ];
            if is_root() {
                env.push(kv("IS_SANDBOX", "1"));
            }
            (env, Vec::new())
        }
        Cli::Codex => {
            let provider = format!(
                "model_providers.mock={{name=\"mock\",base_url=\"{base_url}/v1\",env_key=\"OPENAI_API_KEY\",\
                 wire_api=\"responses\",request_max_retries=0,stream_max_retries=0}}"
            );
            let args = [
                "-c",
                "model_provider=\"mock\"",
                "-c",
                &provider,
                "-c",
                &format!("model=\"{CODEX_MODEL}\""),
                "--disable",
                "plugins",
                "-c",
                "analytics.enabled=false",
            ];
            let env = vec![
                kv("CODEX_HOME", &home.join(".codex").display().to_string()),
                kv("OPENAI_API_KEY", "sk-test"),
            ];
            (env, args.iter().map(|s| s.to_string()).collect())
        }
        Cli::OpenCode => {
            let config = json!({
                "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                    "options": {"baseURL": format!("{base_url}/v1"), "apiKey": "sk-test"},
                    "models": {CHAT_MODEL: {"name": "Mock Model", "tool_call": true, "reasoning": true, "attachment": true,
                        "modalities": {"input": ["text", "image"], "output": ["text"]}}}}},
                "model": format!("mock/{CHAT_MODEL}"), "small_model": format!("mock/{CHAT_MODEL}"),
                "autoupdate": false, "share": "disabled",
            });
            let env = vec![
                kv("OPENCODE_CONFIG_CONTENT", &config.to_string()),
                kv("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                kv("OPENCODE_DISABLE_AUTOUPDATE", "1"),
                kv("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
                kv("npm_config_registry", &format!("{origin}/npm-registry/")),
            ];
            (env, Vec::new())
        }
        Cli::Gemini => {
            let env = vec![
                kv("GOOGLE_GEMINI_BASE_URL", base_url),
                kv("GEMINI_API_KEY", "test-key"),
                kv("GEMINI_CLI_NO_RELAUNCH", "true"),
            ];
            (
                env,
                vec!["--skip-trust".into(), "-m".into(), GEMINI_MODEL.into()],
            )
        }
        Cli::Qwen => {
            let env = vec![
                kv("OPENAI_BASE_URL", &format!("{base_url}/v1")),
                kv("OPENAI_API_KEY", "sk-test"),
                kv("OPENAI_MODEL", CHAT_MODEL),
            ];
            (env, Vec::new())
        }
    }
}

/// The settings files a CLI needs before its first run.
fn write_config_files(cli: Cli, home: &Path) -> Result<(), BenchError> {
    let (path, settings) = match cli {
        Cli::Gemini => (home.join(".gemini/settings.json"), gemini_settings()),
        Cli::Qwen => (home.join(".qwen/settings.json"), qwen_settings()),
        Cli::Codex => {
            let dir = home.join(".codex");
            return std::fs::create_dir_all(&dir)
                .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e));
        }
        _ => return Ok(()),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    }
    let text = serde_json::to_string_pretty(&settings)
        .map_err(|e| BenchError::json("serializing settings", e))?;
    std::fs::write(&path, text)
        .map_err(|e| BenchError::io(format!("writing {}", path.display()), e))
}

/// `~/.gemini/settings.json`: API-key auth, no usage statistics or telemetry, no updates, one attempt.
pub fn gemini_settings() -> serde_json::Value {
    json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "maxAttempts": 1},
    })
}

/// `~/.qwen/settings.json`: OpenAI-compatible auth, no SDK retries, image input, no managed auto-memory (an extraction
/// subagent that would otherwise replay the scenario after every turn), no usage statistics or telemetry,
/// no updates.
pub fn qwen_settings() -> serde_json::Value {
    json!({
        "security": {"auth": {"selectedType": "openai"}},
        // The bench's model takes images, as the multimodal models users point Qwen at do.
        "model": {"generationConfig": {"maxRetries": 0, "modalities": {"image": true}}},
        "memory": {"enableManagedAutoMemory": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
    })
}

/// The bench of one end-to-end test: a fresh model server and a sandbox where `cli` plays
/// `scenario`, behind the gate of [`crate::e2e_enabled_or_explain`] (`None` only when skipping was asked for).
pub async fn e2e_bench_or_explain(
    cli: Cli,
    scenario: &str,
) -> Option<(crate::ModelServer, crate::Sandbox)> {
    clis::e2e_enabled_or_explain(cli)?;
    let server = crate::ModelServer::start(None)
        .await
        .expect("the model server starts on a loopback port");
    let sandbox = crate::Sandbox::new(cli, &server, scenario)
        .expect("the sandbox is made in a fresh temporary directory");
    Some((server, sandbox))
}
