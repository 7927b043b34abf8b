//! The contract: what a backend promises a caller. The [`backend::AgentBackend`] trait and the
//! checks every request passes before a backend sees it, a warm [`session::Session`], an agent's
//! own session store, and the [`handle::RunHandle`] a run gives back, whose two views read the
//! events the pipeline carries.
//!
//! It stands on the vocabulary (the words it speaks) and the pipeline (what its run handle
//! reads), and imports nothing of the [`crate::kit`] or of the features above it:
//! `tests/conformance/tests/layers.rs` holds it to that.

pub(crate) mod backend;
pub(crate) mod handle;
pub(crate) mod session;
pub(crate) mod store;
