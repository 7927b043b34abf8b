//! Where an agent's process is started, as a request names it ([`Launcher`] and its settings).
//! How each launcher starts and stops a process is the kit's (`crate::kit::launch`).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use agent_api_capabilities as caps;

use crate::vocabulary::capability::CapabilitySet;
use crate::vocabulary::error::AgentError;

/// How an agent's process is started. The default is [`Launcher::Local`].
///
/// ```
/// use agent_api::request::{Bwrap, Launcher};
/// let sandboxed = Launcher::Sandbox(Bwrap::new().with_network(false));
/// assert_eq!(sandboxed.capability(), agent_api::capabilities::LAUNCHER_BWRAP);
/// assert_eq!(sandboxed.to_string(), "bwrap");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launcher {
    /// A child process of this one, in its own process group (`agent_api.launcher.local`).
    #[default]
    Local,
    /// A bubblewrap sandbox on this machine (`agent_api.launcher.bwrap`).
    Sandbox(Bwrap),
    /// A docker or podman container (`agent_api.launcher.container`).
    Container(Container),
    /// Another host through the system `ssh` client (`agent_api.launcher.ssh`).
    Ssh(Ssh),
    /// Any argv prefix whose last element runs the argv that follows it on the far side, such as
    /// `kubectl exec -i POD -c C --` (`agent_api.launcher.prefix`). The far side needs a POSIX `sh`
    /// and `setsid`; the prefix's own process gets the agent's explicit environment.
    Prefix(Vec<OsString>),
}

/// The bubblewrap sandbox's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Bwrap {
    /// The `bwrap` program (a path, or a name looked up on `PATH`).
    pub program: PathBuf,
    /// Whether the agent shares this machine's network (`false`: `--unshare-net`, loopback only).
    pub network: bool,
    /// Directories writable inside the sandbox besides the run's own (see the module docs).
    pub writable: Vec<PathBuf>,
    /// Directories visible read-only even if they sit under a writable one.
    pub read_only: Vec<PathBuf>,
    /// Files and folders the agent must not read although the rest of the filesystem is visible
    /// (a server's token file, its store): an empty file or folder is mounted over each.
    pub hidden: Vec<PathBuf>,
}

impl Default for Bwrap {
    fn default() -> Self {
        Self {
            program: PathBuf::from("bwrap"),
            network: true,
            writable: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
        }
    }
}

impl Bwrap {
    /// A sandbox with the network shared and nothing writable but the run's own directories.
    pub fn new() -> Self {
        Self::default()
    }

    /// Shares this machine's network (`true`) or gives the agent none (`false`).
    pub fn with_network(mut self, network: bool) -> Self {
        self.network = network;
        self
    }

    /// Uses `program` as `bwrap` (a path, or a name looked up on `PATH`).
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = program.into();
        self
    }

    /// Makes `dir` writable inside the sandbox too.
    pub fn with_writable(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable.push(dir.into());
        self
    }

    /// Hides `path` (a file or folder) from the agent: it reads an empty one there.
    pub fn with_hidden(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(path.into());
        self
    }

    /// Makes `path` (a file or folder) visible read-only inside the sandbox, where it would
    /// otherwise be hidden: under `/tmp`, which the sandbox replaces, or under a writable folder.
    pub fn with_read_only(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only.push(path.into());
        self
    }
}

/// The container engine's command-line client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// `docker`.
    Docker,
    /// `podman`.
    Podman,
}

impl Engine {
    /// The client's program name.
    pub fn program(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }
}

/// Which container the agent runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContainerTarget {
    /// `exec -i NAME`: a running container.
    Exec(String),
    /// `run --rm -i IMAGE`: a fresh container from an image, removed afterwards.
    Image(String),
}

/// A bind mount into a container started from an image.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mount {
    /// The path on this machine.
    pub host: PathBuf,
    /// The path inside the container.
    pub container: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A container launcher's settings (docker or podman).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Container {
    /// The engine's client.
    pub engine: Engine,
    /// The container or image.
    pub target: ContainerTarget,
    /// Bind mounts (for [`ContainerTarget::Image`]).
    pub mounts: Vec<Mount>,
    /// Extra arguments given to `exec`/`run` before the container name or image
    /// (`--network host`, `--user 1000`, …).
    pub extra_args: Vec<OsString>,
}

impl Container {
    /// `ENGINE exec -i NAME`.
    pub fn exec(engine: Engine, name: impl Into<String>) -> Self {
        Self {
            engine,
            target: ContainerTarget::Exec(name.into()),
            mounts: Vec::new(),
            extra_args: Vec::new(),
        }
    }

    /// `ENGINE run --rm -i IMAGE`.
    pub fn image(engine: Engine, image: impl Into<String>) -> Self {
        Self {
            engine,
            target: ContainerTarget::Image(image.into()),
            mounts: Vec::new(),
            extra_args: Vec::new(),
        }
    }

    /// Adds a bind mount.
    pub fn with_mount(
        mut self,
        host: impl Into<PathBuf>,
        container: impl Into<PathBuf>,
        read_only: bool,
    ) -> Self {
        self.mounts.push(Mount {
            host: host.into(),
            container: container.into(),
            read_only,
        });
        self
    }
}

/// An ssh launcher's settings: `ssh [options] [-p PORT] [user@]host`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ssh {
    /// The `ssh` program.
    pub program: PathBuf,
    /// The user, if not the ssh config's.
    pub user: Option<String>,
    /// The host name or address.
    pub host: String,
    /// The port, if not the ssh config's.
    pub port: Option<u16>,
    /// Extra options, each one argv element (`-i`, `KEY`, `-o`, `StrictHostKeyChecking=yes`, …).
    pub options: Vec<OsString>,
}

impl Ssh {
    /// `ssh host`.
    pub fn new(host: impl Into<String>) -> Self {
        Self {
            program: PathBuf::from("ssh"),
            user: None,
            host: host.into(),
            port: None,
            options: Vec::new(),
        }
    }

    /// Parses `[user@]host[:port]` (an IPv6 address in brackets: `[::1]:2222`); `None` when the
    /// host is empty or starts with `-`, or the port is not a number.
    ///
    /// ```
    /// let ssh = agent_api::request::Ssh::parse("dev@build-3:2222").unwrap();
    /// assert_eq!((ssh.user.as_deref(), ssh.host.as_str(), ssh.port), (Some("dev"), "build-3", Some(2222)));
    /// ```
    pub fn parse(destination: &str) -> Option<Self> {
        let (user, rest) = match destination.split_once('@') {
            Some((user, rest)) if !user.is_empty() => (Some(user.to_string()), rest),
            Some(_) => return None,
            None => (None, destination),
        };
        let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
            // `[v6-address]` or `[v6-address]:port`.
            let (host, after) = bracketed.split_once(']')?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':')?.parse().ok()?)),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port.parse().ok()?)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.starts_with('-') {
            return None;
        }
        Some(Self {
            user,
            port,
            ..Self::new(host)
        })
    }
}

/// The launcher capabilities of a backend that spawns its agent through [`crate::kit::process::spawn`]
/// with the request's launcher (see [`crate::kit::CommandSpec::for_request`]).
pub const CAPABILITIES: &[&str] = &[
    caps::LAUNCHER_LOCAL,
    caps::LAUNCHER_BWRAP,
    caps::LAUNCHER_CONTAINER,
    caps::LAUNCHER_SSH,
    caps::LAUNCHER_PREFIX,
];

/// `set` with [`CAPABILITIES`] added.
pub fn with_launchers(mut set: CapabilitySet) -> CapabilitySet {
    for id in CAPABILITIES {
        set.insert(*id);
    }
    set
}

impl Launcher {
    /// The capability id a backend advertises when it can run through this launcher.
    pub fn capability(&self) -> &'static str {
        match self {
            Launcher::Local => caps::LAUNCHER_LOCAL,
            Launcher::Sandbox(_) => caps::LAUNCHER_BWRAP,
            Launcher::Container(_) => caps::LAUNCHER_CONTAINER,
            Launcher::Ssh(_) => caps::LAUNCHER_SSH,
            Launcher::Prefix(_) => caps::LAUNCHER_PREFIX,
        }
    }

    /// Whether the agent runs on this machine's filesystem (so its working directory is a local
    /// path that can be checked before spawning).
    pub fn is_local_filesystem(&self) -> bool {
        matches!(self, Launcher::Local | Launcher::Sandbox(_))
    }

    /// The local program this launcher starts (`bwrap`, `docker`, `ssh`, the prefix's first
    /// element); `None` for [`Launcher::Local`].
    pub fn program(&self) -> Option<PathBuf> {
        match self {
            Launcher::Local => None,
            Launcher::Sandbox(b) => Some(b.program.clone()),
            Launcher::Container(c) => Some(PathBuf::from(c.engine.program())),
            Launcher::Ssh(s) => Some(s.program.clone()),
            Launcher::Prefix(argv) => argv.first().map(PathBuf::from),
        }
    }
}

/// A short name for people: `local`, `bwrap`, `docker:NAME`, `podman-image:IMAGE`, `ssh:HOST`,
/// `prefix:PROGRAM` (never an option or argument value, which may hold a secret).
impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Launcher::Local => f.write_str("local"),
            Launcher::Sandbox(_) => f.write_str("bwrap"),
            Launcher::Container(c) => match &c.target {
                ContainerTarget::Exec(name) => write!(f, "{}:{name}", c.engine.program()),
                ContainerTarget::Image(image) => write!(f, "{}-image:{image}", c.engine.program()),
            },
            Launcher::Ssh(s) => write!(f, "ssh:{}", s.host),
            Launcher::Prefix(argv) => {
                write!(
                    f,
                    "prefix:{}",
                    argv.first()
                        .map(|p| p.to_string_lossy())
                        .unwrap_or_default()
                )
            }
        }
    }
}

/// Why a `--via` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViaError {
    /// Not one of the known forms.
    #[error("unknown launcher `{0}`: expected local, bwrap, docker:NAME, podman:NAME, docker-image:IMAGE, podman-image:IMAGE, ssh:[user@]host[:port] or prefix:JSON_ARGV")]
    Unknown(String),
    /// A form with an empty or malformed value.
    #[error("launcher `{form}` needs {expected}")]
    Malformed {
        /// The form (`docker`, `ssh`, `prefix`, …).
        form: &'static str,
        /// What its value must be.
        expected: &'static str,
    },
}

impl std::str::FromStr for Launcher {
    type Err = ViaError;

    /// Parses the command line's `--via` forms: `local`, `bwrap`, `docker:NAME`, `podman:NAME`,
    /// `docker-image:IMAGE`, `podman-image:IMAGE`, `ssh:[user@]host[:port]`, `prefix:JSON_ARGV`.
    ///
    /// ```
    /// use agent_api::request::Launcher;
    /// let prefix: Launcher = r#"prefix:["kubectl","exec","-i","pod-1","--"]"#.parse().unwrap();
    /// assert_eq!(prefix.to_string(), "prefix:kubectl");
    /// assert!("docker:".parse::<Launcher>().is_err());
    /// ```
    fn from_str(via: &str) -> Result<Self, ViaError> {
        let malformed = |form, expected| ViaError::Malformed { form, expected };
        let named = |form: &'static str, value: &str| {
            (!value.is_empty() && !value.starts_with('-'))
                .then(|| value.to_string())
                .ok_or(malformed(form, "a name"))
        };
        match via.split_once(':') {
            None if via == "local" => Ok(Launcher::Local),
            None if via == "bwrap" => Ok(Launcher::Sandbox(Bwrap::new())),
            Some(("docker", v)) => Ok(Launcher::Container(Container::exec(
                Engine::Docker,
                named("docker", v)?,
            ))),
            Some(("podman", v)) => Ok(Launcher::Container(Container::exec(
                Engine::Podman,
                named("podman", v)?,
            ))),
            Some(("docker-image", v)) => Ok(Launcher::Container(Container::image(
                Engine::Docker,
                named("docker-image", v)?,
            ))),
            Some(("podman-image", v)) => Ok(Launcher::Container(Container::image(
                Engine::Podman,
                named("podman-image", v)?,
            ))),
            Some(("ssh", v)) => Ssh::parse(v)
                .map(Launcher::Ssh)
                .ok_or(malformed("ssh", "[user@]host[:port]")),
            Some(("prefix", v)) => match serde_json::from_str::<Vec<String>>(v) {
                Ok(argv) if !argv.is_empty() => Ok(Launcher::Prefix(
                    argv.into_iter().map(OsString::from).collect(),
                )),
                _ => Err(malformed("prefix", "a non-empty JSON array of strings")),
            },
            _ => Err(ViaError::Unknown(via.to_string())),
        }
    }
}

impl Launcher {
    /// Checks, before anything is spawned, that this launcher can run here: its program is
    /// installed (else [`AgentError::LauncherUnavailable`]) and a prefix is not empty (else
    /// [`AgentError::InvalidRequest`]).
    pub fn check_available(&self) -> Result<(), AgentError> {
        if let Launcher::Prefix(argv) = self {
            if argv.is_empty() {
                return Err(AgentError::InvalidRequest {
                    reason: "the launcher prefix is empty".into(),
                });
            }
        }
        match self.program() {
            Some(program) if crate::guards::files::resolve_program(&program).is_none() => {
                Err(AgentError::LauncherUnavailable {
                    launcher: self.to_string(),
                    program,
                })
            }
            _ => Ok(()),
        }
    }
}
