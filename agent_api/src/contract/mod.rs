//! The contract: the vocabulary every caller and every backend shares — kinds, requests, events,
//! errors, capabilities, the universal transcript's types and the [`backend::AgentBackend`] trait.
//!
//! It imports nothing of the [`crate::kit`] or of the features above it (sessions, history,
//! caller tools, structured output, homes): `agent_api/tests/layers.rs` holds it to that.

pub mod answer;
pub mod backend;
pub mod bounds;
pub mod budget;
pub mod caller_tool;
pub mod capability;
pub mod error;
pub mod event;
pub mod files;
pub mod home;
pub mod images;
pub mod kind;
pub mod launcher;
pub mod options;
pub mod portable;
pub mod projection;
pub mod request;
pub mod run;
pub mod secrets;
pub mod session;
pub mod session_ref;
pub mod store;
pub mod structured;
pub mod tools_facet;
pub mod universal;
