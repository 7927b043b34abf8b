//! The agent's explicit environment through any launcher but Local.

use std::collections::BTreeMap;

use crate::kit::command::CommandSpec;

/// Variables every launcher but Local passes on from this process's environment when set: what
/// any program needs to find its tools and speak the user's language, and where the launchers' own
/// clients find their agent, daemon or cluster (`SSH_AUTH_SOCK`, `DOCKER_HOST`, `KUBECONFIG`).
pub const LAUNCHER_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "TMPDIR",
    "SSH_AUTH_SOCK",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "KUBECONFIG",
];

/// The whole environment the agent gets through a launcher other than Local: [`LAUNCHER_ENV`], the
/// spec's [`reads_env`](CommandSpec::reads_env) and [`state_vars`](CommandSpec::state_vars), each taken from this process's environment
/// (unless the spec removes it or clears the inherited environment, in which case only what it
/// sets counts), then the spec's own `env` (the request's included) over them.
///
/// ```
/// use agent_api::kit::launch::agent_env;
/// use agent_api::kit::CommandSpec;
/// std::env::set_var("MY_AGENT_TOKEN", "t0k3n");
/// std::env::set_var("UNRELATED_SECRET", "nope");
/// let spec = CommandSpec::new("my-agent").reads_env(["MY_AGENT_TOKEN"]).env("MODE", "fast");
/// let env = agent_env(&spec);
/// assert_eq!(env["MY_AGENT_TOKEN"], "t0k3n");
/// assert_eq!(env["MODE"], "fast");
/// assert!(!env.contains_key("UNRELATED_SECRET"));
/// ```
pub fn agent_env(spec: &CommandSpec) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    if !spec.clear_env {
        let declared = spec
            .reads_env
            .iter()
            .chain(&spec.state_vars)
            .map(String::as_str);
        let names = LAUNCHER_ENV.iter().copied().chain(declared);
        for name in names {
            if spec.env_remove.iter().any(|removed| removed == name) {
                continue;
            }
            if let Ok(value) = std::env::var(name) {
                env.insert(name.to_string(), value);
            }
        }
    }
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}
