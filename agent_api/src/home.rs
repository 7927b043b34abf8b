//! Per-run homes (`spec/run-protocol.md` §9): on request, each run (each warm session) gets its own
//! config and state directories, so agents running side by side never write the same file.
//!
//! A backend declares once, in a [`HomeLayout`], which variables name its CLI's directories and
//! which files there are credentials; [`HomeLayout::apply`] makes the run's directory, seeds it,
//! points the variables at it and ties its life to the agent's process group.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::AgentError;
use crate::kit::CommandSpec;

/// Where the agent keeps its config and state for one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Home {
    /// The user's own directories, as the agent finds them (the default).
    #[default]
    Inherit,
    /// A directory of the run's own for each of the agent's config variables, seeded with `seed`;
    /// the rest of the user's home (`HOME`, XDG directories) stays visible.
    Isolated {
        /// What the new directories start with.
        seed: HomeSeed,
    },
    /// A fresh home with the user's credentials only, and `HOME` and the XDG directories pointed
    /// into it too: none of the user's settings, hooks, MCP servers or memory reach the agent.
    Hermetic,
}

/// What an isolated home starts with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HomeSeed {
    /// Copies of the user's credential files (login tokens), read-only. API keys in the
    /// environment pass through either way.
    #[default]
    Credentials,
    /// Nothing: the agent starts as on a fresh machine.
    Empty,
}

impl Home {
    /// The capability a backend needs to serve this home, if any.
    pub fn required_capability(&self) -> Option<&'static str> {
        match self {
            Home::Inherit => None,
            Home::Isolated { .. } => Some(agent_api_capabilities::HOME_ISOLATED),
            Home::Hermetic => Some(agent_api_capabilities::HOME_HERMETIC),
        }
    }

    fn seed(&self) -> Option<HomeSeed> {
        match self {
            Home::Inherit => None,
            Home::Isolated { seed } => Some(*seed),
            Home::Hermetic => Some(HomeSeed::Credentials),
        }
    }
}

/// One variable that names a directory the agent's CLI keeps config or state in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeVar {
    /// The variable (`CLAUDE_CONFIG_DIR`).
    pub name: &'static str,
    /// Where the CLI looks when the variable is unset, relative to `HOME` (`.claude`).
    pub default_under_home: &'static str,
}

/// Where a backend's CLI keeps its config, state and credentials: declared once per backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeLayout {
    /// The variables that name its directories.
    pub vars: &'static [HomeVar],
    /// Credential files: the variable whose directory holds each, and its path there.
    pub credentials: &'static [(&'static str, &'static str)],
}

/// The variables a hermetic home also points into itself, with their paths under the new `HOME`.
const HERMETIC_VARS: [(&str, &str); 5] = [
    ("HOME", ""),
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
];

/// One run's home: removed, with everything the agent wrote there, when the agent's process
/// group is gone.
#[derive(Debug)]
pub struct RunHome {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl RunHome {
    /// The run's home directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The variables pointed into it, and where.
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }
}

impl HomeLayout {
    /// `spec` with `home` applied: for anything but [`Home::Inherit`], a new directory per
    /// variable, seeded, the variables set to it (overriding what the spec had), and the
    /// directory kept until the agent's process group is gone. The user's directories are found
    /// from the spec's own environment (and this process's, when the spec inherits it).
    pub fn apply(&self, mut spec: CommandSpec, home: &Home) -> Result<CommandSpec, AgentError> {
        let Some(seed) = home.seed() else { return Ok(spec) };
        let user_var = |name: &str| spec.env.get(name).cloned().or_else(|| (!spec.clear_env).then(|| std::env::var(name).ok()).flatten());
        let user_dir = |var: &HomeVar| -> Option<PathBuf> {
            user_var(var.name).map(PathBuf::from).or_else(|| user_var("HOME").map(|h| Path::new(&h).join(var.default_under_home)))
        };
        let dir =
            tempfile::Builder::new().prefix("agent-api-home-").tempdir().map_err(|source| home_error(std::env::temp_dir(), source))?;
        let mut env = BTreeMap::new();
        if *home == Home::Hermetic {
            for (name, under) in HERMETIC_VARS {
                env.insert(name.to_string(), made(&dir.path().join("home").join(under))?);
            }
        }
        for var in self.vars {
            let own = dir.path().join(var.name.to_ascii_lowercase());
            env.insert(var.name.to_string(), made(&own)?);
            if seed == HomeSeed::Credentials {
                let Some(user) = user_dir(var) else { continue };
                for (_, file) in self.credentials.iter().filter(|(v, _)| *v == var.name) {
                    copy_read_only(&user.join(file), &own.join(file))?;
                }
            }
        }
        spec.env.extend(env.clone());
        spec.keep_alive.push(Arc::new(RunHome { dir, env }));
        Ok(spec)
    }
}

fn home_error(path: PathBuf, source: std::io::Error) -> AgentError {
    AgentError::HomeSetup { path, source }
}

/// Creates `dir` and returns it as a variable's value.
fn made(dir: &Path) -> Result<String, AgentError> {
    std::fs::create_dir_all(dir).map_err(|source| home_error(dir.to_path_buf(), source))?;
    Ok(dir.display().to_string())
}

/// Copies a credential file the user has (none is fine) and makes the copy read-only, so the
/// agent cannot rotate a token the user's own copy still holds.
fn copy_read_only(from: &Path, to: &Path) -> Result<(), AgentError> {
    use std::os::unix::fs::PermissionsExt;
    if !from.is_file() {
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        made(parent)?;
    }
    std::fs::copy(from, to).map_err(|source| home_error(from.to_path_buf(), source))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o400)).map_err(|source| home_error(to.to_path_buf(), source))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: HomeLayout =
        HomeLayout { vars: &[HomeVar { name: "TOOL_HOME", default_under_home: ".tool" }], credentials: &[("TOOL_HOME", "auth.json")] };

    fn user_home() -> tempfile::TempDir {
        let user = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(user.path().join(".tool")).unwrap();
        std::fs::write(user.path().join(".tool/auth.json"), "token").unwrap();
        std::fs::write(user.path().join(".tool/settings.json"), "{\"hooks\":1}").unwrap();
        user
    }

    fn spec_for(user: &Path) -> CommandSpec {
        let mut spec = CommandSpec::new("tool").env("HOME", user.display().to_string());
        spec.clear_env = true;
        spec
    }

    #[test]
    fn isolated_homes_copy_credentials_only_read_only_and_vanish_with_the_run() {
        let user = user_home();
        let spec = LAYOUT.apply(spec_for(user.path()), &Home::Isolated { seed: HomeSeed::Credentials }).unwrap();
        let own = PathBuf::from(&spec.env["TOOL_HOME"]);
        assert!(!own.starts_with(user.path()));
        assert_eq!(std::fs::read_to_string(own.join("auth.json")).unwrap(), "token");
        assert!(std::fs::metadata(own.join("auth.json")).unwrap().permissions().readonly());
        assert!(!own.join("settings.json").exists(), "settings stay with the user");
        assert_eq!(spec.env["HOME"], user.path().display().to_string(), "isolated keeps HOME");
        drop(spec);
        assert!(!own.exists(), "the home goes with the last holder");
    }

    #[test]
    fn empty_and_hermetic_homes() {
        let user = user_home();
        let empty = LAYOUT.apply(spec_for(user.path()), &Home::Isolated { seed: HomeSeed::Empty }).unwrap();
        assert!(!Path::new(&empty.env["TOOL_HOME"]).join("auth.json").exists());
        let hermetic = LAYOUT.apply(spec_for(user.path()), &Home::Hermetic).unwrap();
        assert!(Path::new(&hermetic.env["TOOL_HOME"]).join("auth.json").exists());
        let home = PathBuf::from(&hermetic.env["HOME"]);
        assert!(home.is_dir() && !home.starts_with(user.path()));
        assert!(Path::new(&hermetic.env["XDG_CONFIG_HOME"]).starts_with(&home));
        let inherit = LAYOUT.apply(spec_for(user.path()), &Home::Inherit).unwrap();
        assert!(!inherit.env.contains_key("TOOL_HOME") && inherit.keep_alive.is_empty());
    }
}
