//! The portable options (`RunRequest::portable`) as an ACP agent takes them: ACP `session/new`
//! `mcpServers`, and where no schema flag exists the SDK's schema in the prompt; and [`RunFiles`],
//! the files a run gives its agent, which the agents built on this client fill with their own
//! flags and variables.

use agent_api::capabilities as caps;
use agent_api::kit::cli::Launch;
use agent_api::kit::options::OptionMapping;
use agent_api::kit::CommandSpec;
use agent_api::request::{McpServer, PrivateFile, TextOrFile};
use agent_api::PortableOptions;
use agent_api::{AgentError, RunRequest};
use serde_json::{json, Value};

/// How an agent on this client takes images (only its ACP interface carries them; its others
/// refuse them before spawn).
pub const ACP_IMAGES: &str = "ACP session/prompt image blocks (base64; acp interface)";
/// How an agent on this client takes attachments (only on its ACP interface).
pub const ACP_ATTACHMENTS: &str = "ACP session/prompt resource_link blocks (acp interface)";

/// How the generic `acp` kind takes each portable option.
pub(crate) const MAPPINGS: &[OptionMapping] = &[
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, agent_api::kit::options::SDK_SCHEMA),
    OptionMapping::new(caps::IMAGES, "ACP session/prompt image blocks (base64)"),
    OptionMapping::new(
        caps::FILE_ATTACHMENTS,
        "ACP session/prompt resource_link blocks",
    ),
];

/// What a run gives its agent as files where it can (a replacement system prompt, an MCP
/// document whose headers carry the caller tools' secret): 0600 files the SDK writes for the run
/// when the agent reads this machine's files, else the text on argv where the CLI takes it. Off
/// argv wherever possible, so a long prompt meets no OS limit and `ps` shows no secret. Hold it
/// until the run ends ([`agent_api::kit::RunSettings::hold`]): the files go with it.
#[derive(Debug, Default)]
pub struct RunFiles {
    args: Vec<String>,
    env: Vec<(String, String)>,
    files: Vec<PrivateFile>,
}

impl RunFiles {
    /// A run of `spec` (with these files' arguments and variables) read by `protocol`, holding
    /// the files until it ends.
    pub fn launch(self, spec: CommandSpec, protocol: Box<dyn agent_api::kit::Protocol>) -> Launch {
        Launch::boxed(self.apply(spec), protocol).holding(self)
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, args: I) {
        self.args.extend(args.into_iter().map(Into::into));
    }

    /// The variable `name` names the private file `path`.
    pub fn env_file(&mut self, name: &str, path: PrivateFile) {
        self.env
            .push((name.to_string(), path.display().to_string()));
        self.files.push(path);
    }

    /// `flag PATH` for the private file `path`.
    pub fn flag_file(&mut self, flag: &str, path: PrivateFile) {
        self.args
            .extend([flag.to_string(), path.display().to_string()]);
        self.files.push(path);
    }

    /// `flag` with `text` as a private file's path where the agent reads this machine's files
    /// (`request`'s launcher), else `flag TEXT` (a CLI that takes both forms).
    pub fn flag_text_or_file(
        &mut self,
        request: &RunRequest,
        flag: &str,
        text: &str,
    ) -> Result<(), AgentError> {
        match TextOrFile::for_launcher(request.launcher.as_ref(), text)? {
            TextOrFile::File(path) => self.flag_file(flag, path),
            TextOrFile::Text(text) => self.args.extend([flag.to_string(), text]),
        }
        Ok(())
    }

    /// The variable `var` names a 0600 JSON file holding `settings`, for an agent that reads
    /// settings only from files (a run's variant): only where the agent reads this machine's files
    /// (`request`'s launcher), else refused naming `agent`.
    pub fn settings_file(
        &mut self,
        request: &RunRequest,
        var: &str,
        settings: &Value,
        agent: &str,
    ) -> Result<(), AgentError> {
        if !request
            .launcher
            .as_ref()
            .is_none_or(agent_api::request::Launcher::is_local_filesystem)
        {
            return Err(AgentError::InvalidRequest {
                reason: format!("{agent} reads this setting only from a file on the machine it runs on, which this launcher cannot carry"),
            });
        }
        let path = agent_api::kit::options::write_private_file(
            "agent-api-settings-",
            ".json",
            settings.to_string().as_bytes(),
        )?;
        self.env_file(var, path);
        Ok(())
    }

    /// `spec` with these arguments, variables and files (a sandbox binds the files in).
    pub fn apply(&self, spec: CommandSpec) -> CommandSpec {
        let mut spec = spec.args(self.args.iter().cloned());
        for (name, value) in &self.env {
            spec = spec.env(name, value);
        }
        for path in &self.files {
            spec = spec.local_file(path.to_path_buf());
        }
        spec
    }
}

/// The run's MCP servers as ACP `McpServer` values (stdio, or streamable HTTP).
pub fn acp_servers(portable: &PortableOptions) -> Vec<Value> {
    let pairs = |map: &std::collections::BTreeMap<String, String>| -> Vec<Value> {
        map.iter()
            .map(|(name, value)| json!({ "name": name, "value": value }))
            .collect()
    };
    portable
        .mcp_servers
        .iter()
        .filter_map(|(name, server)| match server {
            McpServer::Stdio { command, args, env } => {
                Some(json!({ "name": name, "command": command, "args": args, "env": pairs(env) }))
            }
            McpServer::Http { url, headers } => {
                Some(json!({ "type": "http", "name": name, "url": url, "headers": pairs(headers) }))
            }
            _ => None,
        })
        .collect()
}

/// The request as the agent gets it: where its interface has no schema flag (`native_schema`
/// false), the SDK puts the output schema in the prompt.
pub fn prepare(request: RunRequest, native_schema: bool) -> RunRequest {
    if native_schema {
        request
    } else {
        agent_api::kit::structured::ask_in_prompt(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_servers_go_to_the_agent_as_acp_values() {
        let portable =
            PortableOptions::default().mcp_server("m", McpServer::http("http://127.0.0.1:1/mcp"));
        assert_eq!(
            acp_servers(&portable),
            [json!({"type": "http", "name": "m", "url": "http://127.0.0.1:1/mcp", "headers": []})]
        );
    }
}
