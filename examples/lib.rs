//! Runnable examples for `agent_api`, each offline on the built-in scripted agent (or, for
//! `custom_backend`, a process every machine has). Run one with
//! `cargo run -p agent_api_examples --example <name>`; `tests/run.sh` runs them all.
//!
//! - `stream_events`: run a prompt through a gateway and print the wrapper events as they stream.
//! - `answer_permissions`: answer permission requests and questions from code with typed accessors.
//! - `fan_out`: several runs under one cancellation token; the first to finish cancels the rest.
//! - `timeout`: a run that takes too long ends with a typed `Timeout`.
//! - `resume`: check the resume capability, then continue a session by its native id.
//! - `snapshot`: a session taken out of one home and continued in another, empty one (two homes
//!   standing for two hosts).
//! - `capabilities`: query what a backend can do before asking for a feature.
//! - `custom_backend`: a small backend for an imaginary CLI, written with the kit.
//! - `remote`: run through the container and ssh launchers (needs `tests/launchers/setup.sh` or arguments).

/// The README's library snippet, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeSnippets;
