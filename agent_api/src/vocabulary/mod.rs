//! The vocabulary: the types a caller or a backend names, and nothing that runs. Kinds,
//! requests and their options, launchers and homes, events (wrapper and universal), errors,
//! capabilities, modes, a run's completion, usage and control, session references and snapshots.
//!
//! It stands on the [`crate::guards`] alone; the machinery that makes its events (the
//! [`crate::pipeline`]), the contract, the kit and the features all stand above it:
//! `tests/conformance/tests/layers.rs` holds it to that.

pub(crate) mod answer;
pub(crate) mod backend_info;
pub(crate) mod caller_tool;
pub(crate) mod capability;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod home;
pub(crate) mod kind;
pub(crate) mod launcher;
pub(crate) mod modes;
pub(crate) mod options;
pub(crate) mod portable;
pub(crate) mod request;
pub(crate) mod run;
pub(crate) mod session_ref;
pub(crate) mod snapshot;
pub(crate) mod snapshot_error;
pub mod tool_table;
pub(crate) mod tools_facet;
pub(crate) mod universal;
