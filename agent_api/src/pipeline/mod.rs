//! The pipeline: the machinery between what a backend observed and what a caller reads. The
//! [`transcript`] builder numbers, bounds and masks the universal events; the [`budget`] carries
//! them to the caller without dropping one; the [`projection`] makes the bounded wrapper events
//! of them; [`spans`] traces a run by them. On a request's way in, [`images`] reads the prompt's
//! images and [`structured`] checks a schema (and, at the end, the answer against it).
//!
//! It is made of the [`crate::vocabulary`]'s types and the [`crate::guards`], and knows nothing
//! of the contract's trait, the kit or the features above it: `tests/conformance/tests/layers.rs`
//! holds it to that. Backend authors reach it through the kit (`kit::transcript`, `kit::budget`,
//! `kit::projection`, `kit::images`, `kit::structured`).

pub mod budget;
pub mod images;
pub mod projection;
pub(crate) mod spans;
pub mod structured;
pub(crate) mod transcript;
