//! `agent_api`: drive coding-agent CLIs (Claude Code, Codex, …) through one async trait and get
//! back one bounded, safe event stream, whatever the agent.
//!
//! - [`AgentBackend`] is the trait every agent implements; a [`Gateway`] routes by [`AgentKind`].
//! - [`AgentBackend::run`] returns a [`RunHandle`]: the events, a completion that resolves
//!   exactly once, and a [`RunControl`] to cancel and to answer permissions and questions.
//! - Each run has two views: bounded [`AgentWrapperEvent`]s ([`RunHandle::into_wrapper`]) and the
//!   universal transcript of [`universal::UniversalEvent`]s ([`RunHandle::into_universal`]).
//! - Backends are built from the [`kit`]: native line → stateful [`kit::Protocol`] →
//!   [`universal::Transcript`] → the shared [`projection`] → wrapper events through [`bounds`].
//! - A tool call arrives as two to four events; [`tool_calls::ToolCalls`] joins them (name,
//!   command, cwd, exit code, status), and [`RunSummary`] sums up a finished run for callers who
//!   do not stream.
//!
//! # Defaults
//!
//! What [`RunRequest::new`] leaves set, and so what a run does unless told otherwise:
//!
//! - Permissions: [`PermissionPolicy::Ask`], every request goes to the caller and waits for an
//!   answer through [`RunControl`]; prompts are not skipped (`skip_permission_prompts: false`).
//! - Caller waits ([`CallerWait`]): no deadline, a permission or question waits as long as the
//!   run lasts (with a `waiting_for_caller` status); with a deadline, [`OnCallerTimeout::Deny`].
//! - Timeouts: none (`timeout`, `startup_timeout`, `idle_timeout`, `turn_timeout` all `None`).
//! - Limits ([`Limits`]): none (no turn, token or cost limit).
//! - Buffer budget: [`kit::budget::DEFAULT_BUFFER_BUDGET`] (1 MiB) of events waiting for the
//!   caller before the run stops reading the agent.
//! - Session: [`SessionSelector::New`]; home: [`home::Home::Inherit`] (the user's own); working
//!   directory: the caller's; no extra environment; no cancellation token; `include_raw: false`.
//! - Wrapper events are bounded by [`bounds`] ([`bounds::TEXT_BOUND`], [`bounds::DATA_BOUND`], …).
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

pub mod answer;
pub mod backend;
pub mod bounds;
pub mod caller_tools;
pub mod capability;
pub mod detect;
pub mod display;
pub mod error;
pub mod event;
pub mod gateway;
pub mod history;
pub mod home;
pub mod images;
pub mod kind;
pub mod kit;
pub mod modes;
pub mod options;
pub mod portable;
pub mod projection;
pub mod rate_limit;
pub mod request;
pub mod run;
pub mod secrets;
pub mod session;
pub mod session_ref;
pub mod structured;
pub mod summary;
pub mod tool_calls;
pub mod tools_facet;
pub mod universal;

#[doc(inline)]
pub use agent_api_capabilities as capabilities;
pub use backend::{validate_request, AgentBackend};
pub use capability::CapabilitySet;
pub use error::{AgentError, LimitKind, TimeoutKind};
pub use event::{AgentWrapperEvent, AgentWrapperEventKind, Channel, PermissionFacet, QuestionFacet, Retraction};
pub use gateway::Gateway;
pub use home::{Home, HomeSeed};
pub use kind::AgentKind;
pub use modes::AgentMode;
pub use options::BackendOptions;
pub use portable::{McpServer, PortableOptions};
pub use request::{
    CallerWait, Limits, OnCallerTimeout, PermissionPolicy, PermissionRule, Prompt, RunRequest, SessionSelector, ToolCategory,
};
pub use run::{
    Completion, ControlCommand, PermissionDecision, QuestionAnswer, RunCompletion, RunControl, RunHandle, UniversalEvents, Usage,
    WrapperEvents,
};
pub use session::Session;
pub use session_ref::SessionRef;
pub use summary::RunSummary;
pub use tokio_util::sync::CancellationToken;
