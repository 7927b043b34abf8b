//! The kit for backend authors: everything between "spawn this CLI" and "here are its events".
//!
//! A backend writes a [`Protocol`] (parse native messages, describe them to the
//! [`Transcript`](crate::kit::transcript::Transcript), answer control commands) and a
//! [`CommandSpec`]; [`start_run`] does the rest. The short path, for an agent with a CLI of its
//! own, is [`cli`]: describe the agent ([`cli::CliAgent`]: what it is, how a run of it starts,
//! where it keeps its sessions) and [`cli::CliBackend`] is its backend, validation, caller
//! tools, spawn, sessions, history, snapshots and discovery included.
//!
//! - [`cli`]: the one backend over an agent's description, and the one CLI configuration;
//!
//! - [`process`]: spawns the CLI in its own process group with default signal dispositions,
//!   and terminates the whole group on cancel, timeout or drop;
//! - [`launch`]: where the agent runs (locally, in a bubblewrap sandbox, in a container, on an
//!   ssh host, behind any argv prefix), with its explicit environment and, on a far side, its own
//!   process group there that a stop command ends;
//! - [`lines`]: a bounded line reader; a line over the cap is skipped without being buffered
//!   and reported as one bounded status event;
//! - [`stderr`]: per-run stderr capture, bounded to a head and a tail;
//! - [`Protocol`]: the trait a backend implements, with its typed line entry ([`parse_typed`]);
//! - [`Transport`]: where lines come from (a process, an in-process agent, a recording);
//! - [`budget`]: the byte budget of events waiting for the caller;
//! - [`start_run`] and [`start_session`]: the pump, with backpressure, that never drops an event, applies timeouts and
//!   cancellation, and guarantees one completion and one terminal error for a failed run;
//! - [`jsonrpc`], `http` (feature `http`) and [`sse`]: helpers for the two-way protocols (JSON-RPC over stdio, and
//!   HTTP plus a server-sent event stream to an agent's local server);
//! - [`hitl`]: permissions and questions: the run's policy, the caller's answers, and one
//!   requested and one resolved event per request, saying who decided;
//! - [`replay`]: plays a recorded native log through the same protocol;
//! - [`tool_table`]: each agent's tools by name, with their permission category and tools-facet
//!   kind, read by every place that decides by a tool's name;
//! - [`files`]: bounded reads of the files a caller names, and the file service for agents,
//!   confined by the kernel to the working directory.
//!
//! # Defaults
//!
//! [`RunSettings::new`] (and so [`RunSettings::for_request`] for what the request leaves unset):
//! no timeouts and no limits; a [`lines::DEFAULT_LINE_CAP`] (16 MiB) line cap; a
//! [`budget::DEFAULT_BUFFER_BUDGET`] (1 MiB) buffer budget; a [`driver::DEFAULT_INPUT_LIMIT`]
//! (1 MiB) of replies waiting on the agent's stdin; caller waits without deadline; no tools facet
//! unless the backend advertises `agent_api.tools.structured.v1`; no raw payloads. On cancel the
//! agent gets 3 s after the soft interrupt before SIGTERM, then 2 s before SIGKILL; after
//! [`Ctx::shutdown`] 5 s before SIGTERM; after it exits, 2 s for its output to drain; after it
//! closes its output, 5 s to exit. [`stderr`] keeps the first [`stderr::HEAD_LINES`] (20) and the
//! last [`stderr::TAIL_LINES`] (50) lines, each cut to [`stderr::MAX_LINE_BYTES`] (2 KiB).
//! [`hitl`] applies the request's policy, [`PermissionPolicy::Ask`](crate::PermissionPolicy::Ask)
//! unless set.
//!
//! Two calls a new backend easily misses: a two-way protocol (the agent reads its stdin for
//! answers, permissions or later turns) needs [`CommandSpec::with_stdin`], or the agent's stdin
//! is closed at spawn; and the transcript holds what was asked only when the protocol writes it:
//! the run's prompt, and each message a warm session's [`Protocol::send_turn`] sends, go in with
//! [`Transcript::user_message`](crate::kit::transcript::Transcript::user_message) once the
//! session has started (for example at the line that opens the session).
//!
//! Check a backend with the conformance crate (`tests/conformance`): `record` and
//! `assert_conformant` check one run against the specs; `capabilities::assert_backend_conformant`
//! exercises each capability the backend advertises that a run can show (text, streaming deltas,
//! usage, cancel, resume, a warm session, modes and their switch), fails naming each that does
//! not hold, and lists the rest as unchecked, for the backend's own tests to prove.
//!
//! A new backend also joins the workspace's shared harnesses (see the README's "Writing a
//! backend"): the converter property tests (`tests/conformance/tests/converter_props.rs`), the
//! secret-sentinel test (`tests/conformance/tests/secrets.rs`), the fault table (`spec/faults.md`) and
//! the fuzz targets (a `parser_<name>` target in `fuzz/`, see its README).

pub use crate::pipeline::budget;
pub mod caller_tools;
pub mod cli;
mod command;
pub mod detect;
mod driver;
pub use crate::guards::files;
pub mod hitl;
pub mod home;
#[cfg(feature = "http")]
pub mod http;
pub mod jsonrpc;
pub mod launch;
mod limits;
pub mod lines;
pub mod process;
mod protocol;
pub mod rate_limit;
mod reap;
pub mod replay;
pub mod snapshot;
pub mod sse;
pub mod stderr;
pub(crate) mod timeouts;
mod transport;

pub use crate::guards::{bounds, secrets};
pub use crate::pipeline::{images, projection, structured};
pub use crate::vocabulary::tool_table;

pub use async_trait::async_trait;
pub use command::CommandSpec;
pub use driver::{start_run, start_session, RunSettings, DEFAULT_INPUT_LIMIT};
pub use protocol::{
    describe_json_error, parse_typed, parse_value, Ctx, ExitInfo, LineStr, Protocol,
    ProtocolHarness, Steering, Unparsed,
};
pub use transport::{line_source, AgentPipes, LineSource, SourceItem, Transport};

pub use crate::contract::backend::{
    check_choices, check_working_dir, validate_request, validate_template,
};
pub use crate::vocabulary::modes::check_mode;
pub use crate::vocabulary::session_ref::is_uuid;

pub mod options {
    //! A backend's options: its own typed extension keys (`backend.<kind>.*`) and how it maps the
    //! portable options to its CLI's flags, config keys and protocol fields (`spec/options.md`).
    pub use crate::vocabulary::options::{extension_keys, unknown_key, value_from_text};
    pub use crate::vocabulary::portable::{
        with_mappings, write_private_file, OptionMapping, DENIABLE_CATEGORIES, SDK_ONLY, SDK_SCHEMA,
    };
}

pub mod transcript {
    //! Building the universal transcript: a backend describes what its agent did to a
    //! [`Transcript`], which numbers, bounds, masks and emits the events.
    pub use crate::pipeline::transcript::{
        NewItem, SessionEnd, Transcript, TranscriptLimits, RETRY_STATUS,
    };
    pub use crate::vocabulary::universal::{
        replacement_diff, shell_fields, COMMAND_BOUND, SHELL_FIELD_BOUND,
    };
}
