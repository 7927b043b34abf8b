//! The `acp` interface: `opencode acp --cwd DIR` over stdio, driven by the ACP client of
//! `agent_api_acp` ([`agent_api_acp::Acp`]), so OpenCode gets the same converter,
//! permission path and confined file system as every other ACP agent.
//!
//! OpenCode's ACP session takes no permission rules, so the backend passes them in
//! `OPENCODE_PERMISSION` (which OpenCode merges over its configuration): shell commands and edits
//! ask, so the caller's policy decides, unless the caller chose
//! `RunRequest::skip_permission_prompts`. An approved edit is written by OpenCode through
//! `fs/write_text_file`, which the client serves confined to the working directory (unless
//! [`crate::OpenCodeOptions::fs`] turns it off). The interface has no model flag: OpenCode's
//! configuration chooses the model, and a request naming one is refused. OpenCode 1.18.33
//! advertises its modes as the values of a config option `mode` (`build`, the one a session
//! opens in, or `plan`; no `default`), and sends an execute call's raw input only once the call
//! runs: the client reads both, as it would of any agent.

use std::collections::VecDeque;
use std::path::Path;

use agent_api::kit::{CommandSpec, Protocol};
use agent_api::{AgentError, RunRequest};
use agent_api_acp::{Acp, Plan};
use agent_api_acp::{FsMode, Requests};

use crate::config::OpenCodeConfig;

/// The parser name of the interface's converter.
pub const PARSER: &str = "opencode.acp";

/// `OPENCODE_PERMISSION` for a run: ask before shell commands and edits, or allow everything.
fn permission_rules(ask_first: bool) -> &'static str {
    if ask_first {
        r#"{"bash":"ask","edit":"ask"}"#
    } else {
        r#"{"*":"allow"}"#
    }
}

/// The command line of a run in `cwd`: `opencode acp --cwd CWD`, with the run's permission rules
/// replacing any `OPENCODE_PERMISSION` of the environment, so the run's policy decides what asks.
pub fn command_spec(
    config: &OpenCodeConfig,
    request: &RunRequest,
    cwd: &Path,
) -> Result<CommandSpec, AgentError> {
    if request.model.is_some() {
        return Err(AgentError::InvalidRequest {
            reason: "opencode acp has no model flag: set the model in OpenCode's configuration, or use the serve or run interface".into(),
        });
    }
    let mut spec = crate::base_spec(config, request)?
        .arg("acp")
        .args(["--cwd".to_string(), cwd.display().to_string()])
        .env(
            "OPENCODE_PERMISSION",
            permission_rules(!request.skip_permission_prompts),
        );
    spec.stdin = true;
    Ok(spec)
}

/// The live converter of a run in `cwd` with its first prompt; `serve_fs` serves `fs/*` confined
/// to `cwd`.
pub fn live(request: &RunRequest, cwd: &Path, serve_fs: bool) -> Result<Acp, AgentError> {
    let fs = if serve_fs {
        FsMode::Confined {
            fs: agent_api_acp::ConfinedFs::new(cwd)?,
            empty_on_missing: false,
        }
    } else {
        FsMode::Off
    };
    let prompt = agent_api_acp::prompt_blocks(&request.prompt)?;
    let plan = Plan {
        cwd: cwd.to_path_buf(),
        session: request.session.clone(),
        prompts: VecDeque::from([prompt]),
    };
    Ok(Acp::live(
        PARSER,
        plan,
        Requests::live(request.permissions.clone(), fs),
    ))
}

/// The replay converter of a recorded `opencode acp` session.
pub fn replay() -> Box<dyn Protocol> {
    Box::new(Acp::replay(PARSER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_decides_through_opencode_permission_and_a_model_is_refused() {
        let config = OpenCodeConfig::default().env("OPENCODE_PERMISSION", "{}");
        let spec = command_spec(&config, &RunRequest::new("hi"), Path::new("/w")).unwrap();
        assert_eq!(spec.args, ["acp", "--cwd", "/w"]);
        assert_eq!(
            spec.env["OPENCODE_PERMISSION"], r#"{"bash":"ask","edit":"ask"}"#,
            "the run's rules replace the config's"
        );
        let skip = command_spec(
            &config,
            &RunRequest::new("hi").with_skip_permission_prompts(true),
            Path::new("/w"),
        )
        .unwrap();
        assert_eq!(skip.env["OPENCODE_PERMISSION"], r#"{"*":"allow"}"#);
        let refused = command_spec(
            &config,
            &RunRequest::new("hi").with_model("mock/m"),
            Path::new("/w"),
        );
        assert!(matches!(refused, Err(AgentError::InvalidRequest { .. })));
    }
}
