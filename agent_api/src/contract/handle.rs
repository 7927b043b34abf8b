//! [`RunHandle`]: one run's two event streams and its completion, read through the pipeline
//! (the byte budget's channel, the run's spans, the shared projection for the wrapper view).
//!
//! The run's words (its completion, usage, control) are the vocabulary's
//! ([`crate::vocabulary::run`]); what reads the events the pipeline carries is here, above it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::pipeline::budget::BatchReceiver;
use crate::pipeline::projection::Projector;
use crate::pipeline::spans::{self, RunSpans};
use crate::vocabulary::error::AgentError;
use crate::vocabulary::event::AgentWrapperEvent;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::run::{RunCompletion, RunControl};
use crate::vocabulary::universal::UniversalEvent;

/// Kills the run's processes when the last part of its handle is dropped.
///
/// It is all the driver learns of the caller's side: not which view reads the run, so that the
/// universal events are the same whichever view is read (`spec/run-protocol.md` §1).
pub(crate) struct RunGuard {
    pub(crate) abandoned: CancellationToken,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.abandoned.cancel();
    }
}

/// One run: consume it as wrapper events ([`RunHandle::into_wrapper`]) or as the universal
/// transcript ([`RunHandle::into_universal`]); either way the completion resolves exactly once,
/// after the last event. Dropping every part of the handle stops the run and reaps its processes.
///
/// Poll the event stream (or drop it): the run pushes back on the agent while events wait.
pub struct RunHandle {
    agent_kind: AgentKind,
    tools_structured: bool,
    events: BatchReceiver,
    completion: oneshot::Receiver<Result<RunCompletion, AgentError>>,
    control: RunControl,
    guard: Arc<RunGuard>,
}

impl RunHandle {
    pub(crate) fn new(
        agent_kind: AgentKind,
        tools_structured: bool,
        events: BatchReceiver,
        completion: oneshot::Receiver<Result<RunCompletion, AgentError>>,
        control: RunControl,
        guard: Arc<RunGuard>,
    ) -> Self {
        Self {
            agent_kind,
            tools_structured,
            events,
            completion,
            control,
            guard,
        }
    }

    /// The backend running it.
    pub fn agent_kind(&self) -> &AgentKind {
        &self.agent_kind
    }

    /// Whether tool events of this run carry the tools facet.
    pub fn tools_structured(&self) -> bool {
        self.tools_structured
    }

    /// A control for the run.
    pub fn control(&self) -> RunControl {
        self.control.clone()
    }

    /// The wrapper view: bounded [`AgentWrapperEvent`]s, and the completion.
    ///
    /// It is the shared projection ([`Projector`]) of the universal events, which are the same
    /// whichever view reads the run; the projection holds an answer's text until its message
    /// completes and shows it once.
    pub fn into_wrapper(self) -> (WrapperEvents, Completion) {
        self.wrapper(false)
    }

    fn wrapper(self, streaming_answers: bool) -> (WrapperEvents, Completion) {
        let spans = RunSpans::new(&self.agent_kind);
        let projector = Projector::new(self.agent_kind, self.tools_structured);
        let projector = if streaming_answers {
            projector.streaming_answers()
        } else {
            projector
        };
        let span = spans.run().clone();
        let events = WrapperEvents {
            inner: UniversalEvents::new(self.events, self.guard.clone(), spans),
            projector,
            pending: Default::default(),
        };
        (
            events,
            Completion {
                rx: self.completion,
                span,
                _guard: self.guard,
            },
        )
    }

    /// The wrapper view with the answer text streaming: as [`RunHandle::into_wrapper`], but an
    /// answer's text goes out delta by delta as `text_output` events (each naming its message in
    /// `data.item_id`) instead of once its message completes, and a message that gets cut after
    /// some of its text went out is taken back by a `status` event
    /// ([`AgentWrapperEvent::retraction`]). For showing an answer as it is written; the default
    /// view is for acting on answers that are sure.
    pub fn into_wrapper_streaming(self) -> (WrapperEvents, Completion) {
        self.wrapper(true)
    }

    /// The universal view: [`UniversalEvent`]s, and the completion.
    pub fn into_universal(self) -> (UniversalEvents, Completion) {
        let spans = RunSpans::new(&self.agent_kind);
        let span = spans.run().clone();
        let events = UniversalEvents::new(self.events, self.guard.clone(), spans);
        (
            events,
            Completion {
                rx: self.completion,
                span,
                _guard: self.guard,
            },
        )
    }

    /// Reads the whole run as wrapper events.
    pub async fn collect_wrapper(
        self,
    ) -> (Vec<AgentWrapperEvent>, Result<RunCompletion, AgentError>) {
        let (events, completion) = self.into_wrapper();
        let events = events.collect().await;
        (events, completion.await)
    }

    /// Reads the whole run as universal events.
    pub async fn collect_universal(
        self,
    ) -> (Vec<UniversalEvent>, Result<RunCompletion, AgentError>) {
        let (events, completion) = self.into_universal();
        let events = events.collect().await;
        (events, completion.await)
    }
}

/// The universal event stream of a run.
pub struct UniversalEvents {
    rx: BatchReceiver,
    /// The run's spans, opened and closed by its events.
    spans: RunSpans,
    _guard: Arc<RunGuard>,
}

impl UniversalEvents {
    fn new(rx: BatchReceiver, guard: Arc<RunGuard>, spans: RunSpans) -> Self {
        Self {
            rx,
            spans,
            _guard: guard,
        }
    }

    /// Bytes of events the run holds for this stream now; never more than the run's buffer
    /// budget (`RunRequest::with_buffer_budget`, 1 MiB by default).
    pub fn buffered_bytes(&self) -> usize {
        self.rx.buffered_bytes()
    }

    /// Hands back an event you are done with, to be freed by the run's own task with the rest of
    /// its batch instead of on your thread. Optional: dropping the event is always fine. It pays
    /// when the consumer runs on another thread than the run (a multi-thread runtime): memory
    /// allocated on one thread and freed on another makes the system allocator take the first
    /// thread's lock for every free, and the two threads then wait on each other. (The wrapper view
    /// reads each event in place and gives back whole batches.)
    ///
    /// ```no_run
    /// # async fn consume(handle: agent_api::RunHandle) {
    /// use futures::StreamExt;
    /// let (mut events, completion) = handle.into_universal();
    /// while let Some(event) = events.next().await {
    ///     println!("{}", event.type_name());
    ///     events.give_back(event);
    /// }
    /// let _ = completion.await;
    /// # }
    /// ```
    pub fn give_back(&mut self, event: UniversalEvent) {
        self.rx.recycle(event);
    }
}

impl Stream for UniversalEvents {
    type Item = UniversalEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<UniversalEvent>> {
        let polled = self.rx.poll_next(cx);
        if let Poll::Ready(Some(event)) = &polled {
            self.spans.observe(event);
        }
        polled
    }
}

/// The wrapper event stream of a run: the universal events through the shared projection.
pub struct WrapperEvents {
    inner: UniversalEvents,
    projector: Projector,
    pending: std::collections::VecDeque<AgentWrapperEvent>,
}

impl WrapperEvents {
    /// Bytes of events the run holds for this stream now (see [`UniversalEvents::buffered_bytes`]).
    pub fn buffered_bytes(&self) -> usize {
        self.inner.buffered_bytes()
    }
}

impl Stream for WrapperEvents {
    type Item = AgentWrapperEvent;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<AgentWrapperEvent>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Poll::Ready(Some(ev));
            }
            let Self {
                projector,
                pending,
                inner,
            } = &mut *self;
            match inner.rx.poll_lend(cx) {
                Poll::Ready(Some(universal)) => {
                    inner.spans.observe(universal);
                    projector.project_into(universal, pending)
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The completion of a run; resolves once, after the event stream's last event.
pub struct Completion {
    rx: oneshot::Receiver<Result<RunCompletion, AgentError>>,
    /// The run's span: the completion records its usage or error there.
    span: tracing::Span,
    _guard: Arc<RunGuard>,
}

impl std::future::Future for Completion {
    type Output = Result<RunCompletion, AgentError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let done = Pin::new(&mut self.rx).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(AgentError::Protocol {
                    reason: "the run ended without reporting a completion".into(),
                })
            })
        });
        if let Poll::Ready(done) = &done {
            match done {
                Ok(done) => {
                    let usage = done.usage.as_ref();
                    spans::record_usage(
                        &self.span,
                        usage.and_then(|u| u.input_tokens),
                        usage.and_then(|u| u.output_tokens),
                        usage.and_then(|u| u.model.as_deref()),
                    );
                }
                Err(error) => spans::record_error(&self.span, error),
            }
        }
        done
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("agent_kind", &self.agent_kind)
            .field("tools_structured", &self.tools_structured)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for UniversalEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UniversalEvents").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for WrapperEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrapperEvents").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion").finish_non_exhaustive()
    }
}
