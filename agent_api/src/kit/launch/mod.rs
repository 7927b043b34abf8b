//! Where and how an agent's process is started: on this machine as is ([`Launcher::Local`]), in a
//! bubblewrap sandbox ([`Launcher::Sandbox`]), in a container ([`Launcher::Container`]), on another
//! host over ssh ([`Launcher::Ssh`]), or behind any argv prefix ([`Launcher::Prefix`]).
//!
//! Every backend spawns through [`crate::kit::process::spawn`], which applies the spec's launcher,
//! so a backend gets every launcher for free. How it works (`spec/launchers.md` has the contract):
//!
//! - **Local** spawns the CLI as a child in its own process group, as before.
//! - **Sandbox** wraps the argv in `bwrap`: the whole filesystem read-only, except the run's working
//!   directory, the spec's [`writable_dirs`](crate::kit::CommandSpec::writable_dirs), the agent's
//!   `HOME` and a fresh `/tmp`; the network shared or not as the caller chooses. `bwrap` stays a
//!   local child, so the local process group and run marker reach every process it starts.
//! - **Prefix**, **Container** and **Ssh** run the agent on a *far side* this process cannot
//!   signal. They share one protocol ([`far`]): a small POSIX `sh` wrapper on the far side starts the
//!   agent in its own process group (`setsid`), writes that group's id to a pidfile in a per-run
//!   temporary path there, and waits for it. Stopping the run (cancel, timeout, drop, or the
//!   connection dying) runs a stop command through the same launcher, which sends the far group
//!   SIGTERM, waits a grace period, then SIGKILL. Killing the local client (`ssh`, `docker exec`)
//!   alone would leave the agent running.
//!
//! The argv stays an argv: a prefix receives the wrapper and the agent's arguments as separate
//! elements; where the far side needs one command string (ssh) every element is quoted with
//! [`shell_join`], which refuses what cannot be quoted with a typed error.
//!
//! Through any launcher but Local the agent's environment is explicit ([`agent_env`]): the
//! variables the backend declares its CLI reads ([`CommandSpec::reads_env`](crate::kit::CommandSpec::reads_env))
//! taken from this process's environment, the spec's own `env` (the request's included), and the
//! launcher's own ([`LAUNCHER_ENV`]); never this process's whole environment. Values never go on
//! an argv: a prefix and bwrap pass them in the environment of the local process; a container
//! gets `-e NAME` with the value in the local `docker` client's environment; ssh delivers them on
//! stdin before the agent starts ([`EnvDelivery::Stdin`]).

mod bwrap;
mod container;
mod env;
pub mod far;
mod far_prefix;
mod plan;
mod quote;
mod ssh;

pub use crate::vocabulary::launcher::{with_launchers, CAPABILITIES};
pub(crate) use crate::vocabulary::launcher::{Bwrap, Container, ContainerTarget, Launcher, Ssh};
pub use env::{agent_env, LAUNCHER_ENV};
pub use far::FarGroup;
pub(crate) use plan::plan;
pub use quote::shell_join;
pub(crate) use ssh::write_preamble;

/// How the agent's environment reaches the far side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvDelivery {
    /// The local client's own environment carries it (a prefix, bwrap; docker `-e NAME`).
    Inherit,
    /// Written to the far wrapper's stdin before the agent starts (ssh, whose server does not
    /// pass the client's environment on): `NAME=VALUE` lines that a preamble of
    /// [`far::START_SCRIPT`] reads before it starts the agent on the same stdin.
    Stdin,
}

#[cfg(test)]
mod tests;
