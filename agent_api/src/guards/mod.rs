//! The guards: the rules every text and every named path passes, whoever made it. A text is cut
//! to its bound ([`bounds`]), its secrets are masked ([`secrets`]), and a file is read or written
//! only where it was named, by the kernel's confinement ([`files`]).
//!
//! They are the ground floor because the vocabulary itself obeys them (an error masks the
//! agent's text it carries, a request's `Debug` shows no secret, an id in an error is cut), and
//! they know nothing of agents, runs or events: `tests/conformance/tests/layers.rs` holds them to
//! that.

pub mod bounds;
pub mod files;
pub mod secrets;
