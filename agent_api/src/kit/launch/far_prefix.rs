//! How a launcher with a far side (Prefix, Container, Ssh) reaches it: the local client, the
//! arguments before the far-side command, and what the far side needs besides. Each launcher
//! builds one ([`FarPrefix`]); the plan turns it into the commands that start and stop the agent.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use crate::vocabulary::error::AgentError;

/// How a launcher reaches its far side: the local program and the arguments before the far-side
/// command, for starting the agent and for stopping it.
pub(crate) struct FarPrefix {
    /// The local client (`docker`, `ssh`, the prefix's first element).
    pub(crate) program: PathBuf,
    /// Arguments before the far-side command when starting the agent (`exec -i -e NAME… BOX`).
    pub(crate) start: Vec<OsString>,
    /// Arguments before the far-side command when stopping it (`exec BOX`).
    pub(crate) stop: Vec<OsString>,
    /// Whether the far side takes one command string (ssh) rather than an argv.
    pub(crate) one_string: bool,
    /// The local client's environment, when not the agent's own (ssh: the client's needs only;
    /// a container: the agent's plus the engine client's own variables).
    pub(crate) client_env: Option<BTreeMap<String, String>>,
    /// Far-side argv before the start wrapper (ssh: `env -i`, so the agent gets only its own).
    pub(crate) far_start: Vec<OsString>,
    /// Far-side argv before the stop wrapper (ssh: `env TMPDIR=…`, the start's pidfile folder).
    pub(crate) far_stop: Vec<OsString>,
    /// Shell text run before [`START_SCRIPT`](super::far::START_SCRIPT) (ssh: reading the environment from stdin).
    pub(crate) script_preamble: &'static str,
    /// Bytes written to the client's stdin before anything else (ssh: the environment).
    pub(crate) stdin_preamble: Vec<u8>,
}

impl FarPrefix {
    /// A far side reached by `program` `start…`/`stop…` followed by an argv, with nothing else to add.
    pub(crate) fn argv(program: PathBuf, start: Vec<OsString>, stop: Vec<OsString>) -> Self {
        Self {
            program,
            start,
            stop,
            one_string: false,
            client_env: None,
            far_start: Vec::new(),
            far_stop: Vec::new(),
            script_preamble: "",
            stdin_preamble: Vec::new(),
        }
    }
}

impl FarPrefix {
    /// `before` then the far-side command, joined into one quoted string when the far side needs it.
    pub(super) fn join(
        &self,
        mut before: Vec<OsString>,
        command: Vec<OsString>,
    ) -> Result<Vec<OsString>, AgentError> {
        if self.one_string {
            before.push(super::quote::shell_join(&command)?);
        } else {
            before.extend(command);
        }
        Ok(before)
    }
}
