//! Per-run homes (`spec/run-protocol.md` §9): on request, each run (each warm session) gets its own
//! config and state directories, so agents running side by side never write the same file.
//!
//! A backend declares once, in a [`HomeLayout`], which variables name its CLI's directories and
//! which files there are credentials; [`HomeLayout::apply`] makes the run's directory, seeds it,
//! points the variables at it and ties its life to the agent's process group.
//!
//! # Logins that cannot be shared
//!
//! Some logins hold a single-use refresh token: each refresh returns a new one and revokes the old,
//! so two processes holding the same token race, and the loser's next refresh fails (an
//! authentication error, or a logged-out user). Each backend says whether its CLI's login is one
//! ([`HomeLayout::single_use_login`], with the login named where it is set). A read-only copy
//! in an isolated home keeps the user's file intact but still shares the token with the server.
//! Runs that hold the same single-use login at once (inherited homes, or credential copies made
//! from the same file) are logged with `tracing::warn!` and reported by [`shared_login`];
//! fleets should use API keys, which pass through and can be shared, or a login per home.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::kit::command::CommandSpec;
use crate::vocabulary::error::AgentError;
pub use crate::vocabulary::home::{Home, HomeSeed};

/// One variable that names a directory the agent's CLI keeps config or state in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeVar {
    /// The variable (`MY_AGENT_HOME`).
    pub name: &'static str,
    /// Where the CLI looks when the variable is unset, relative to `HOME` (`.my-agent`).
    pub default_under_home: &'static str,
}

/// Where a backend's CLI keeps its config, state and credentials: declared once per backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeLayout {
    /// The variables that name its directories.
    pub vars: &'static [HomeVar],
    /// Credential files: the variable whose directory holds each, and its path there.
    pub credentials: &'static [(&'static str, &'static str)],
    /// Whether a login in those files holds a single-use refresh token, which runs cannot share
    /// safely (see the module's docs).
    pub single_use_login: bool,
}

/// The XDG base directories, each with where it is under `HOME` when its variable is unset (the
/// XDG spec's defaults). A hermetic home points them into itself (after `HOME`); an agent that
/// keeps its files there names them as its layout's [`HomeLayout::vars`].
pub const XDG_BASE_DIRS: [HomeVar; 4] = [
    HomeVar {
        name: "XDG_CONFIG_HOME",
        default_under_home: ".config",
    },
    HomeVar {
        name: "XDG_DATA_HOME",
        default_under_home: ".local/share",
    },
    HomeVar {
        name: "XDG_STATE_HOME",
        default_under_home: ".local/state",
    },
    HomeVar {
        name: "XDG_CACHE_HOME",
        default_under_home: ".cache",
    },
];

/// `HOME` itself, the first variable a hermetic home points into itself.
const HOME_VAR: HomeVar = HomeVar {
    name: "HOME",
    default_under_home: "",
};

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
    ///
    /// A run that holds a single-use login (see the module's docs) is counted while it lives; when
    /// another live run holds the same one, this warns and [`shared_login`] reports it.
    pub fn apply(&self, spec: CommandSpec, home: &Home) -> Result<CommandSpec, AgentError> {
        let logins = self.single_use_logins(&spec, home);
        let mut spec = match home.seed() {
            Some(seed) => self.make_home(spec, home, seed)?,
            None => spec,
        };
        for path in logins {
            spec.keep_alive.push(Arc::new(LoginHold::new(path)));
        }
        Ok(spec)
    }

    /// The user's credential files with a single-use login that a run in `home` holds (itself or
    /// as a copy).
    fn single_use_logins(&self, spec: &CommandSpec, home: &Home) -> Vec<PathBuf> {
        if !self.single_use_login || home.seed() == Some(HomeSeed::Empty) {
            return Vec::new();
        }
        let user = UserDirs(spec);
        self.credentials
            .iter()
            .filter_map(|(name, file)| {
                self.vars
                    .iter()
                    .find(|v| v.name == *name)
                    .and_then(|var| user.dir(var))
                    .map(|d| d.join(file))
            })
            .filter(|path| path.is_file())
            .collect()
    }

    fn make_home(
        &self,
        mut spec: CommandSpec,
        home: &Home,
        seed: HomeSeed,
    ) -> Result<CommandSpec, AgentError> {
        let user = UserDirs(&spec);
        let dir = tempfile::Builder::new()
            .prefix("agent-api-home-")
            .tempdir()
            .map_err(|source| home_error(std::env::temp_dir(), source))?;
        let mut env = BTreeMap::new();
        if *home == Home::Hermetic {
            for var in std::iter::once(&HOME_VAR).chain(&XDG_BASE_DIRS) {
                env.insert(
                    var.name.to_string(),
                    made(&dir.path().join("home").join(var.default_under_home))?,
                );
            }
        }
        for var in self.vars {
            let own = dir.path().join(var.name.to_ascii_lowercase());
            env.insert(var.name.to_string(), made(&own)?);
            if seed == HomeSeed::Credentials {
                let Some(user) = user.dir(var) else { continue };
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

/// The user's directories, as the agent would find them from the spec's environment (and this
/// process's, when the spec inherits it).
struct UserDirs<'a>(&'a CommandSpec);

impl UserDirs<'_> {
    fn var(&self, name: &str) -> Option<String> {
        self.0.env_value(name)
    }

    fn dir(&self, var: &HomeVar) -> Option<PathBuf> {
        self.var(var.name).map(PathBuf::from).or_else(|| {
            self.var("HOME")
                .map(|h| Path::new(&h).join(var.default_under_home))
        })
    }
}

/// A single-use login that more than one live run holds (see the module's docs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedLogin {
    /// The user's credential file the runs hold (themselves or as copies).
    pub path: PathBuf,
    /// How many live runs hold it, this one included.
    pub holders: usize,
}

/// Live runs per single-use login file.
static LOGIN_HOLDERS: Mutex<Option<HashMap<PathBuf, usize>>> = Mutex::new(None);

fn with_holders<T>(f: impl FnOnce(&mut HashMap<PathBuf, usize>) -> T) -> T {
    let mut holders = LOGIN_HOLDERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    f(holders.get_or_insert_with(HashMap::new))
}

/// One run's hold on a single-use login, counted until the agent's process group is gone.
#[derive(Debug)]
struct LoginHold {
    path: PathBuf,
}

impl LoginHold {
    fn new(path: PathBuf) -> Self {
        let holders = with_holders(|all| {
            let count = all.entry(path.clone()).or_default();
            *count += 1;
            *count
        });
        if holders > 1 {
            tracing::warn!(
                path = %path.display(),
                holders,
                "runs share a single-use login refresh token: one refresh will log the others out; use API keys or a login per home"
            );
        }
        Self { path }
    }
}

impl Drop for LoginHold {
    fn drop(&mut self) {
        with_holders(|all| {
            if let Some(count) = all.get_mut(&self.path) {
                *count -= 1;
                if *count == 0 {
                    all.remove(&self.path);
                }
            }
        });
    }
}

/// The check for a spec built by [`HomeLayout::apply`]: the single-use login it shares with
/// other live runs, if any (`apply` has logged a warning then). Backends whose logins can be
/// shared never report one.
pub fn shared_login(spec: &CommandSpec) -> Option<SharedLogin> {
    spec.keep_alive
        .iter()
        .filter_map(|held| held.downcast_ref::<LoginHold>())
        .find_map(|hold| {
            let holders = with_holders(|all| all.get(&hold.path).copied().unwrap_or(0));
            (holders > 1).then(|| SharedLogin {
                path: hold.path.clone(),
                holders,
            })
        })
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
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o400))
        .map_err(|source| home_error(to.to_path_buf(), source))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: HomeLayout = HomeLayout {
        vars: &[HomeVar {
            name: "TOOL_HOME",
            default_under_home: ".tool",
        }],
        credentials: &[("TOOL_HOME", "auth.json")],
        single_use_login: true,
    };

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

    /// A command of the user whose home is `user`, in `home` as [`LAYOUT`] makes it.
    fn applied(user: &Path, home: &Home) -> CommandSpec {
        LAYOUT.apply(spec_for(user), home).unwrap()
    }

    #[test]
    fn isolated_homes_copy_credentials_only_read_only_and_vanish_with_the_run() {
        let user = user_home();
        let spec = applied(
            user.path(),
            &Home::Isolated {
                seed: HomeSeed::Credentials,
            },
        );
        let own = PathBuf::from(&spec.env["TOOL_HOME"]);
        assert!(!own.starts_with(user.path()));
        assert_eq!(
            std::fs::read_to_string(own.join("auth.json")).unwrap(),
            "token"
        );
        assert!(std::fs::metadata(own.join("auth.json"))
            .unwrap()
            .permissions()
            .readonly());
        assert!(
            !own.join("settings.json").exists(),
            "settings stay with the user"
        );
        assert_eq!(
            spec.env["HOME"],
            user.path().display().to_string(),
            "isolated keeps HOME"
        );
        drop(spec);
        assert!(!own.exists(), "the home goes with the last holder");
    }

    #[test]
    fn empty_and_hermetic_homes() {
        let user = user_home();
        let empty = applied(
            user.path(),
            &Home::Isolated {
                seed: HomeSeed::Empty,
            },
        );
        assert!(!Path::new(&empty.env["TOOL_HOME"])
            .join("auth.json")
            .exists());
        let hermetic = applied(user.path(), &Home::Hermetic);
        assert!(Path::new(&hermetic.env["TOOL_HOME"])
            .join("auth.json")
            .exists());
        let home = PathBuf::from(&hermetic.env["HOME"]);
        assert!(home.is_dir() && !home.starts_with(user.path()));
        assert!(Path::new(&hermetic.env["XDG_CONFIG_HOME"]).starts_with(&home));
        let inherit = applied(user.path(), &Home::Inherit);
        assert!(
            !inherit.env.contains_key("TOOL_HOME")
                && !inherit.keep_alive.iter().any(|held| held.is::<RunHome>())
        );
    }

    #[test]
    fn runs_holding_the_same_single_use_login_are_reported_until_one_ends() {
        let user = user_home();
        let first = applied(user.path(), &Home::Inherit);
        assert_eq!(shared_login(&first), None, "one holder shares nothing");
        let copy = applied(
            user.path(),
            &Home::Isolated {
                seed: HomeSeed::Credentials,
            },
        );
        let shared = shared_login(&copy).expect("a copy shares the user's token");
        assert_eq!(
            (shared.path, shared.holders),
            (user.path().join(".tool/auth.json"), 2)
        );
        assert!(shared_login(&first).is_some());
        let empty = applied(
            user.path(),
            &Home::Isolated {
                seed: HomeSeed::Empty,
            },
        );
        assert_eq!(shared_login(&empty), None, "an empty home holds no login");
        drop(copy);
        assert_eq!(shared_login(&first), None, "the copy's run is gone");
        let shareable = HomeLayout {
            single_use_login: false,
            ..LAYOUT
        };
        let other = shareable
            .apply(spec_for(user.path()), &Home::Inherit)
            .unwrap();
        assert_eq!(
            shared_login(&other),
            None,
            "a login many can hold is never reported"
        );
    }
}
