//! The contract: the vocabulary every caller and every backend shares — kinds, requests, events,
//! errors, capabilities, the universal transcript's types and the [`backend::AgentBackend`] trait.
//!
//! It imports nothing of the [`crate::kit`] or of the features above it (sessions, history,
//! caller tools, structured output, homes): `agent_api/tests/layers.rs` holds it to that.

pub(crate) mod answer;
pub(crate) mod backend;
pub(crate) mod backend_info;
pub mod bounds;
pub mod budget;
pub(crate) mod caller_tool;
pub(crate) mod capability;
pub(crate) mod error;
pub(crate) mod event;
pub mod files;
pub(crate) mod home;
pub mod images;
pub(crate) mod kind;
pub(crate) mod launcher;
pub(crate) mod modes;
pub(crate) mod options;
pub(crate) mod portable;
pub mod projection;
pub(crate) mod request;
pub(crate) mod run;
pub mod secrets;
pub(crate) mod session;
pub(crate) mod session_ref;
pub(crate) mod snapshot;
pub(crate) mod snapshot_error;
pub(crate) mod spans;
pub(crate) mod store;
pub mod structured;
pub mod tool_table;
pub(crate) mod tools_facet;
pub(crate) mod universal;
