//! `agent_api`: drive coding-agent CLIs (each in a crate of its own; `agent_api_builtin` has them
//! all) through one async trait and get back one bounded, safe event stream, whatever the agent.
//!
//! - [`AgentBackend`] is the trait every agent implements; a [`Gateway`] routes by [`AgentKind`].
//! - [`AgentBackend::run`] returns a [`RunHandle`]: the events, a completion that resolves
//!   exactly once, and a [`RunControl`] to cancel and to answer permissions and questions.
//! - Each run has two views: bounded [`AgentWrapperEvent`]s ([`RunHandle::into_wrapper`]) and the
//!   universal transcript of [`UniversalEvent`]s ([`RunHandle::into_universal`]).
//! - A tool call arrives as two to four events; [`run::ToolCalls`] joins them (name, command,
//!   cwd, exit code, status), and [`run::RunSummary`] sums up a finished run for callers who do
//!   not stream.
//!
//! # Where things are
//!
//! The root holds what a caller needs to run an agent; four modules hold the rest of it:
//! [`request`] (everything else a request can say), [`run`] (everything else a run gives back),
//! [`universal`] (the transcript's types), [`history`] (the agents' own stored sessions), and
//! [`display`] (agent text made safe to show a person). A backend author's tools are in the
//! [`kit`]: native line → stateful [`kit::Protocol`] → [`kit::transcript::Transcript`] → the
//! shared [`kit::projection`] → wrapper events, bounded as [`kit::bounds`] says.
//!
//! Inside, the crate has layers that only point down (the workspace's
//! `tests/conformance/tests/layers.rs` holds it to that), each named for what it holds:
//!
//! 1. the guards: a text cut to its bound, secrets masked, files confined ([`kit::bounds`],
//!    [`kit::secrets`], [`kit::files`]); rules that know no agent, which every layer above obeys;
//! 2. the vocabulary: the types a caller or a backend names (kinds, requests, events, errors,
//!    capabilities, the universal transcript's types, a run's completion and control), which run
//!    nothing;
//! 3. the pipeline: the machinery that turns what a backend observed into bounded, masked events
//!    and carries them to the caller (the [`kit::transcript`] builder, the [`kit::budget`], the
//!    [`kit::projection`], the run's tracing spans, the request's [`kit::images`] and
//!    [`kit::structured`] schema);
//! 4. the contract: what a backend promises ([`AgentBackend`] and the checks every request
//!    passes, [`Session`], the [`RunHandle`] whose two views read the pipeline);
//! 5. the kit: what backends are built from (processes, launchers, framing, the driver,
//!    permissions and questions, replay, homes, caller tools);
//! 6. the features on runs: the gateway, sessions resumed per turn, history, summaries.
//!
//! # Defaults
//!
//! What [`RunRequest::new`] leaves set, and so what a run does unless told otherwise:
//!
//! - Permissions: [`PermissionPolicy::Ask`], every request goes to the caller and waits for an
//!   answer through [`RunControl`]; prompts are not skipped (`skip_permission_prompts: false`).
//! - Caller waits ([`request::CallerWait`]): no deadline, a permission or question waits as long
//!   as the run lasts (with a `waiting_for_caller` status); with a deadline,
//!   [`request::OnCallerTimeout::Deny`].
//! - Timeouts: none (`timeout`, `startup_timeout`, `idle_timeout`, `turn_timeout` all `None`).
//! - Limits ([`request::Limits`]): none (no turn, token or cost limit).
//! - Buffer budget: [`kit::budget::DEFAULT_BUFFER_BUDGET`] (1 MiB) of events waiting for the
//!   caller before the run stops reading the agent.
//! - Session: [`SessionSelector::New`]; home: [`request::Home::Inherit`] (the user's own); working
//!   directory: the caller's; no extra environment; no cancellation token; `include_raw: false`.
//! - Wrapper events are bounded by [`kit::bounds`] ([`kit::bounds::TEXT_BOUND`],
//!   [`kit::bounds::DATA_BOUND`], …).
//!
//! ```no_run
//! use agent_api::{AgentBackend, RunRequest};
//! use futures::StreamExt;
//!
//! # async fn demo(backend: &dyn AgentBackend) -> Result<(), agent_api::AgentError> {
//! let handle = backend.run(RunRequest::new("Say hello")).await?;
//! let (mut events, completion) = handle.into_wrapper();
//! while let Some(event) = events.next().await {
//!     if let Some(text) = &event.text {
//!         print!("{text}");
//!     }
//! }
//! let done = completion.await?;
//! println!("\nsession: {:?}", done.native_session_id);
//! # Ok(()) }
//! ```

mod contract;
pub mod display;
mod gateway;
mod guards;
pub mod history;
pub mod kit;
mod pipeline;
mod resumed;
pub mod snapshot;
mod summary;
mod tool_calls;
mod vocabulary;

pub use contract::backend::AgentBackend;
pub use contract::handle::RunHandle;
pub use contract::session::Session;
pub use gateway::Gateway;
pub use vocabulary::backend_info::BackendInfo;
pub use vocabulary::capability::CapabilitySet;
pub use vocabulary::error::AgentError;
pub use vocabulary::event::{AgentWrapperEvent, AgentWrapperEventKind};
pub use vocabulary::kind::AgentKind;
pub use vocabulary::portable::PortableOptions;
pub use vocabulary::request::{PermissionPolicy, Prompt, RunRequest, SessionSelector};
pub use vocabulary::run::{PermissionDecision, QuestionAnswer, RunCompletion, RunControl};
pub use vocabulary::snapshot::SessionSnapshot;
pub use vocabulary::universal::UniversalEvent;

/// The capability ids (`agent_api.*`) backends advertise and requests need.
#[doc(inline)]
pub use agent_api_capabilities as capabilities;

pub mod request {
    //! Everything else a [`RunRequest`](crate::RunRequest) can say: limits, caller waits and
    //! permission rules, MCP servers and private files, the agent's home, where it runs (the
    //! launcher), tools the caller defines, the session to resume, backend options, cancellation.
    pub use crate::vocabulary::caller_tool::{
        CallerTool, ToolFuture, ToolHandler, ToolOutput, DEFAULT_TOOL_TIMEOUT,
    };
    pub use crate::vocabulary::home::{Home, HomeSeed};
    pub use crate::vocabulary::launcher::{
        Bwrap, Container, ContainerTarget, Engine, Launcher, Mount, Ssh, ViaError,
    };
    pub use crate::vocabulary::modes::{variants_for, AgentMode, ModeInfo, VariantSet};
    pub use crate::vocabulary::options::BackendOptions;
    pub use crate::vocabulary::portable::{
        McpConfigFile, McpServer, NativeLimits, PrivateFile, TextOrFile,
    };
    pub use crate::vocabulary::request::{CallerWait, Limits, OnCallerTimeout, PermissionRule};
    pub use crate::vocabulary::session_ref::SessionRef;
    pub use crate::vocabulary::tools_facet::ToolCategory;
    pub use tokio_util::sync::CancellationToken;
}

pub mod run {
    //! What a run gives back besides its [`RunHandle`](crate::RunHandle) and
    //! [`RunCompletion`](crate::RunCompletion): the two event streams, the wrapper events' facets,
    //! usage, control commands, the errors' kinds, and the summaries built from a run's events
    //! (the answer's text, the tool calls joined, [`RunSummary`]).
    pub use crate::contract::handle::{Completion, UniversalEvents, WrapperEvents};
    pub use crate::summary::RunSummary;
    pub use crate::tool_calls::{ToolCallSummary, ToolCalls};
    pub use crate::vocabulary::answer::{AnswerDelta, AnswerText};
    pub use crate::vocabulary::error::{LimitKind, TimeoutKind};
    pub use crate::vocabulary::event::{
        enforce, enforce_into, within_bounds, Channel, EventData, PermissionFacet, QuestionFacet,
        Retraction,
    };
    pub use crate::vocabulary::run::{ControlCommand, Usage};
    pub use crate::vocabulary::tools_facet::{
        FacetKind, ToolBytes, ToolPhase, ToolStatus, ToolsFacet, TOOLS_FACET_SCHEMA,
    };
}

pub mod universal {
    //! The universal session transcript's types (`spec/universal-schema.md`): every
    //! [`UniversalEvent`](crate::UniversalEvent)'s body, its items and content parts, permissions
    //! and questions. Building a transcript is the kit's ([`crate::kit::transcript`]).
    pub use crate::vocabulary::universal::{
        AgentUnparsedData, ContentPart, DecidedBy, DeltaText, ErrorData, EventId, EventSource,
        FileAction, ItemDeltaData, ItemEventData, ItemKind, ItemRole, ItemStatus,
        PermissionDetails, PermissionEventData, PermissionStatus, QuestionEventData,
        QuestionStatus, ReasoningVisibility, SessionEndReason, SessionEndedData,
        SessionStartedData, StderrOutput, TerminatedBy, ToolCallRef, ToolMeta, UniversalEventBody,
        UniversalItem, COMMAND_BOUND, PERMISSION_DIFF_BOUND,
    };
}
