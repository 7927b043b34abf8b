//! The command line of one run: the request and [`AmpOptions`] turned into amp's argv (never a
//! shell string), environment, working directory and settings file; and the credentials check
//! that runs before anything is spawned.

use std::path::{Path, PathBuf};

use agent_api::kit::CommandSpec;
use agent_api::request::Launcher;
use agent_api::PortableOptions;
use agent_api::{AgentError, RunRequest, SessionSelector};
use serde_json::{json, Value};

use crate::delegate::DelegateChannel;
use crate::options::{AmpOptions, Interface};
use crate::AmpConfig;

/// The environment variable holding amp's access token.
pub const API_KEY_VAR: &str = "AMP_API_KEY";

/// The command of a run and its permission channel.
#[derive(Debug)]
pub struct Invocation {
    /// What to spawn.
    pub spec: CommandSpec,
    /// One-way or two-way.
    pub interface: Interface,
    /// The run's files, to keep while it runs.
    pub files: RunFiles,
}

/// What a run keeps on disk while it runs (removed when dropped).
#[derive(Debug, Default)]
pub struct RunFiles {
    /// The run's permission channel (and its settings file); `None` when amp asks nothing.
    pub channel: Option<DelegateChannel>,
    /// The directory of the settings file of a run without a channel.
    pub dir: Option<tempfile::TempDir>,
}

/// Refuses a run that has no credentials: without them amp starts an interactive login that
/// reads a code from stdin (and would swallow the first user message).
pub fn check_credentials(config: &AmpConfig, request: &RunRequest) -> Result<(), AgentError> {
    let set = |v: Option<&String>| v.is_some_and(|v| !v.trim().is_empty());
    let inherited =
        config.inherit_env && std::env::var(API_KEY_VAR).is_ok_and(|v| !v.trim().is_empty());
    if config.credentials_configured
        || set(request.env.get(API_KEY_VAR))
        || set(config.env.get(API_KEY_VAR))
        || inherited
    {
        return Ok(());
    }
    Err(AgentError::Auth {
        message: format!("no Amp credentials: set {API_KEY_VAR} in the run's environment (or declare configured credentials in AmpConfig)"),
    })
}

/// amp's settings key of the MCP servers it starts or reaches (`{name: {command, args, env}}` or
/// `{name: {url, headers}}`).
pub const MCP_SERVERS: &str = "amp.mcpServers";

/// amp's settings key listing the tools it does not offer to the model.
pub const TOOLS_DISABLE: &str = "amp.tools.disable";

/// What amp reads from its environment: credentials and the service's address.
pub const READS_ENV: &[&str] = &[API_KEY_VAR, "AMP_URL"];

/// The command, settings and channel of a run. `two_way_session` asks for a session (two-way
/// whatever the options say).
pub async fn invocation(
    config: &AmpConfig,
    request: &RunRequest,
    two_way_session: bool,
) -> Result<Invocation, AgentError> {
    let options: AmpOptions = request.options()?;
    check_credentials(config, request)?;
    let interface = if two_way_session {
        Interface::TwoWay
    } else {
        options.interface.unwrap_or_default()
    };
    let mut spec = CommandSpec::new(config.binary.clone()).args(config.extra_args.iter().cloned());
    match &request.session {
        SessionSelector::New => {}
        SessionSelector::Resume(session) => {
            spec = spec.args(["threads", "continue", session.id.as_str()])
        }
        _ => {
            return Err(AgentError::InvalidRequest {
                reason: "amp resumes a thread by its id only (no last-thread or fork)".into(),
            })
        }
    }
    spec = spec.arg("--execute");
    if interface == Interface::OneWay {
        spec = spec.arg(&request.prompt.text);
    }
    let thinking = options.thinking.unwrap_or(true);
    spec = spec.arg(if thinking {
        "--stream-json-thinking"
    } else {
        "--stream-json"
    });
    if thinking {
        // `--stream-json-thinking` implies it; the flag keeps the command readable.
        spec = spec.arg("--stream-json");
    }
    if interface == Interface::TwoWay {
        spec = spec.arg("--stream-json-input").with_stdin();
    }
    let launcher = request.launcher.clone().unwrap_or_default();
    // The relay puts the run's directory where the agent's temporary files go, when the run says.
    let tmpdir = request
        .env
        .get("TMPDIR")
        .or(config.env.get("TMPDIR"))
        .map(String::as_str);
    let (settings, files) =
        settings(config, &options, &request.portable, &launcher, tmpdir).await?;
    // The run's directory (settings, the delegate link, its channel and socket): a sandbox binds
    // it in, so the delegate amp runs there still reaches this run. Through a far launcher it is
    // on the far side already (made by the relay).
    let run_dir = settings
        .parent()
        .map(Path::to_path_buf)
        .filter(|_| launcher.is_local_filesystem());
    spec = spec.arg("--settings-file").arg(settings);
    spec = flags(spec, &options, request);
    for (key, value) in &config.env {
        spec = spec.env(key, value);
    }
    spec.clear_env = !config.inherit_env;
    if let Some(dir) = &config.working_dir {
        spec = spec.cwd(dir);
    }
    spec = spec.for_request(request).reads_env(READS_ENV).home_state([
        ".config/amp",
        ".local/share/amp",
        ".cache/amp",
    ]);
    // The permission helper the delegate runs, where the sandbox's fresh /tmp would hide it.
    if matches!(launcher, agent_api::request::Launcher::Sandbox(_)) && files.channel.is_some() {
        spec = spec.local_file(config.delegate_helper()?);
    }
    if let Some(dir) = run_dir {
        spec = spec.local_file(dir);
    }
    Ok(Invocation {
        spec,
        interface,
        files,
    })
}

/// The typed options that are plain flags, and the request's mode (checked against Amp's
/// before spawn; the `mode` extension, which names the native value, wins).
fn flags(mut spec: CommandSpec, options: &AmpOptions, request: &RunRequest) -> CommandSpec {
    let chosen = request
        .mode
        .as_ref()
        .filter(|m| **m != agent_api::request::AgentMode::Default);
    match (options.mode, chosen) {
        (Some(mode), _) => spec = spec.args(["--mode", mode.as_str()]),
        (None, Some(mode)) => spec = spec.args(["--mode", mode.as_str()]),
        (None, None) => {}
    }
    if let Some(mcp) = &options.mcp_config {
        spec = spec.arg("--mcp-config").arg(mcp);
    }
    for label in &options.labels {
        spec = spec.arg("--label").arg(label);
    }
    if let Some(visibility) = options.visibility {
        spec = spec.args(["--visibility", visibility.as_str()]);
    }
    if options.no_archive == Some(true) {
        spec = spec.arg("--no-archive-after-execute");
    }
    if let Some(log) = &options.log_file {
        spec = spec.arg("--log-file").arg(log);
    }
    spec
}

/// The run's settings file: the caller's settings plus the delegate rule (and its channel), or
/// with `dangerously_allow_all`, the caller's settings with `amp.dangerouslyAllowAll` and no
/// delegation. Through a launcher whose agent runs elsewhere the file and channel are the far
/// side's relay's, in `tmpdir` when the run sets the agent's `TMPDIR`.
async fn settings(
    config: &AmpConfig,
    options: &AmpOptions,
    portable: &PortableOptions,
    launcher: &Launcher,
    tmpdir: Option<&str>,
) -> Result<(PathBuf, RunFiles), AgentError> {
    let mut base = match &options.settings_file {
        Some(path) => Some(read_settings(path)?),
        None => None,
    };
    if !portable.denied_tools.is_empty() {
        // amp's own switch: the tools it lists are not offered to the model. The caller's list stays.
        let settings = base.get_or_insert_with(|| json!({}));
        let mut disabled = settings
            .get(TOOLS_DISABLE)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        disabled.extend(portable.denied_tools.iter().map(|name| json!(name)));
        settings[TOOLS_DISABLE] = Value::Array(disabled);
    }
    if !portable.mcp_servers.is_empty() {
        // The run's servers join the caller's under their names. The file is the run's own, in a
        // directory only its owner reads: the servers' env and headers often hold secrets.
        let settings = base.get_or_insert_with(|| json!({}));
        let mut servers = settings
            .get(MCP_SERVERS)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        servers.extend(
            portable
                .mcp_servers
                .iter()
                .map(|(name, server)| (name.clone(), server.to_mcp_json())),
        );
        settings[MCP_SERVERS] = Value::Object(servers);
    }
    let delegate = options.dangerously_allow_all != Some(true);
    if !delegate {
        base.get_or_insert_with(|| json!({}))["amp.dangerouslyAllowAll"] = json!(true);
    }
    if !launcher.is_local_filesystem() {
        let helper = config.far_delegate_helper();
        let channel = DelegateChannel::open_far(
            launcher,
            &helper,
            tmpdir,
            base.unwrap_or(Value::Null),
            delegate,
        )
        .await?;
        return Ok((
            channel.settings_file(),
            RunFiles {
                channel: Some(channel),
                dir: None,
            },
        ));
    }
    if !delegate {
        let dir = crate::delegate::private_dir()?;
        let path = dir.path().join(crate::delegate::wire::SETTINGS_FILE);
        std::fs::write(
            &path,
            crate::delegate::settings_bytes(base, dir.path(), false)?,
        )?;
        return Ok((
            path,
            RunFiles {
                channel: None,
                dir: Some(dir),
            },
        ));
    }
    let channel = DelegateChannel::open(&config.delegate_helper()?, base)?;
    Ok((
        channel.settings_file(),
        RunFiles {
            channel: Some(channel),
            dir: None,
        },
    ))
}

/// The largest Amp settings file read (a caller's file; its JSON is merged into the run's).
const SETTINGS_CAP: u64 = 4 << 20;

fn read_settings(path: &str) -> Result<Value, AgentError> {
    let invalid = |reason: String| AgentError::InvalidExtension {
        key: "backend.amp.settings_file".into(),
        reason,
    };
    let text = agent_api::kit::files::read_regular(path.as_ref(), SETTINGS_CAP)
        .map_err(|e| invalid(format!("cannot read it: {e}")))?;
    let value: Value = serde_json::from_slice(&text)
        .map_err(|e| invalid(agent_api::kit::describe_json_error(&e)))?;
    if !value.is_object() {
        return Err(invalid("it is not a JSON object".into()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests;
