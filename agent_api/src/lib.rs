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
pub mod kind;
pub mod kit;
pub mod options;
pub mod portable;
pub mod projection;
pub mod request;
pub mod run;
pub mod secrets;
pub mod session;
pub mod structured;
pub mod summary;
pub mod tools_facet;
pub mod universal;

#[doc(inline)]
pub use agent_api_capabilities as capabilities;
pub use backend::{validate_request, AgentBackend};
pub use capability::CapabilitySet;
pub use error::{AgentError, LimitKind, TimeoutKind};
pub use event::{AgentWrapperEvent, AgentWrapperEventKind, Channel, PermissionFacet, QuestionFacet};
pub use gateway::Gateway;
pub use home::{Home, HomeSeed};
pub use kind::AgentKind;
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
pub use summary::RunSummary;
pub use tokio_util::sync::CancellationToken;
