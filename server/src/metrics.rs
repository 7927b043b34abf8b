//! The server's figures, served by `GET /metrics` ([`crate::scrape`]) in the Prometheus
//! (OpenMetrics) text format, from the Prometheus project's own client crate.
//!
//! Every figure is this server's own (a fleet sums its servers): live and resumable sessions,
//! turns started and ended by agent and outcome, turn durations by agent, tokens and cost by agent
//! and model, permission requests and questions waiting for a person and how long each waited,
//! agent processes, SSE subscribers, and how long the store takes to write. Labels take bounded
//! values only: agent kinds, error codes, the model names agents report (cut to 64 bytes), fixed
//! words. Never a session id, a prompt or a path.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AgentLabel {
    pub(crate) agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    pub(crate) agent: String,
    /// `completed`, or the error's code (`cancelled`, `timeout`, `store_unavailable`, …).
    pub(crate) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelLabels {
    pub(crate) agent: String,
    pub(crate) model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TokenLabels {
    pub(crate) agent: String,
    pub(crate) model: String,
    /// `input`, `output`, `cached_input`, `cache_write` or `reasoning`.
    pub(crate) kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WaitLabel {
    /// `permission` or `question`.
    pub(crate) kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DeliveryLabel {
    /// `delivered`, `retrying` (failed, tried again) or `abandoned`.
    pub(crate) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OperationLabel {
    /// `append`, `create`, ….
    pub(crate) operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ForwardLabels {
    /// `owner` (to the server that runs the session) or `any` (to a server with room).
    pub(crate) to: &'static str,
    /// `answered`, `owner_gone` (its owner's lease ran out while it waited: run here),
    /// `not_taken` (503: nobody took it in time) or `lost` (503: its taker died).
    pub(crate) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TakeoverLabel {
    /// Why the session was not running: `server_died`, `server_stopped`, `idle_release`,
    /// `agent_exited` or `native_refused`.
    pub(crate) after: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SnapshotLabel {
    /// `whole` (a base) or `delta` (on the kept base).
    pub(crate) kind: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// A turn lasts from a second to an hour.
fn turn_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.25, 2.0, 16))
}

/// A person answers within seconds to hours.
fn wait_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 16))
}

/// A write takes a fraction of a millisecond (SQLite, batched) to seconds (a failing database).
fn write_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 14))
}

/// The server's metrics.
pub(crate) struct Metrics {
    pub(crate) registry: Registry,
    pub(crate) sessions_live: Gauge,
    pub(crate) sessions_resumable: Gauge,
    pub(crate) agent_processes: Gauge,
    pub(crate) turns_started: Family<AgentLabel, Counter>,
    pub(crate) turns_ended: Family<OutcomeLabels, Counter>,
    pub(crate) turn_seconds: Histograms<AgentLabel>,
    pub(crate) tokens: Family<TokenLabels, Counter>,
    pub(crate) cost: Family<ModelLabels, Counter<f64, AtomicU64>>,
    pub(crate) waiting: Family<WaitLabel, Gauge>,
    pub(crate) wait_seconds: Histograms<WaitLabel>,
    pub(crate) sse_subscribers: Gauge,
    pub(crate) store_write_seconds: Histograms<OperationLabel>,
    pub(crate) webhook_deliveries: Family<DeliveryLabel, Counter>,
    pub(crate) forwarded: Family<ForwardLabels, Counter>,
    pub(crate) forward_seconds: Histograms<ForwardLabels>,
    pub(crate) commands_run: Counter,
    pub(crate) takeovers: Family<TakeoverLabel, Counter>,
    snapshot_bytes: Family<SnapshotLabel, Counter>,
    snapshot_seconds: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut this = Self {
            registry: Registry::with_prefix("agent_api"),
            sessions_live: Gauge::default(),
            sessions_resumable: Gauge::default(),
            agent_processes: Gauge::default(),
            turns_started: Family::default(),
            turns_ended: Family::default(),
            turn_seconds: Family::new_with_constructor(turn_buckets),
            tokens: Family::default(),
            cost: Family::default(),
            waiting: Family::default(),
            wait_seconds: Family::new_with_constructor(wait_buckets),
            sse_subscribers: Gauge::default(),
            store_write_seconds: Family::new_with_constructor(write_buckets),
            webhook_deliveries: Family::default(),
            forwarded: Family::default(),
            forward_seconds: Family::new_with_constructor(write_buckets),
            commands_run: Counter::default(),
            takeovers: Family::default(),
            snapshot_bytes: Family::default(),
            snapshot_seconds: write_buckets(),
        };
        let r = &mut this.registry;
        r.register(
            "sessions_live",
            "Sessions this server runs now",
            this.sessions_live.clone(),
        );
        r.register(
            "sessions_resumable",
            "Sessions the store holds as not ended that no live session of this server runs",
            this.sessions_resumable.clone(),
        );
        r.register(
            "turns_started",
            "Turns started, by agent",
            this.turns_started.clone(),
        );
        r.register(
            "turns_ended",
            "Turns ended, by agent and outcome (completed, or the error's code)",
            this.turns_ended.clone(),
        );
        r.register_with_unit(
            "turn_duration",
            "How long turns took, by agent",
            Unit::Seconds,
            this.turn_seconds.clone(),
        );
        r.register(
            "tokens",
            "Tokens the agents reported, by agent, model and kind",
            this.tokens.clone(),
        );
        r.register(
            "cost_usd",
            "Cost the agents reported in US dollars, by agent and model",
            this.cost.clone(),
        );
        r.register(
            "human_requests_waiting",
            "Permission requests and questions waiting for a reply, by kind",
            this.waiting.clone(),
        );
        r.register_with_unit(
            "human_wait",
            "How long permission requests and questions waited for their reply, by kind",
            Unit::Seconds,
            this.wait_seconds.clone(),
        );
        r.register(
            "agent_processes",
            "Agent process groups this server holds",
            this.agent_processes.clone(),
        );
        r.register(
            "sse_subscribers",
            "SSE streams open now",
            this.sse_subscribers.clone(),
        );
        r.register_with_unit(
            "store_write",
            "How long the store took to write, by operation",
            Unit::Seconds,
            this.store_write_seconds.clone(),
        );
        r.register(
            "webhook_deliveries",
            "Tries to deliver a webhook, by outcome (delivered, retrying, abandoned)",
            this.webhook_deliveries.clone(),
        );
        r.register(
            "commands_forwarded",
            "Requests this server handed to another through the store (fleet), by destination and outcome",
            this.forwarded.clone(),
        );
        r.register_with_unit(
            "command_forward",
            "How long a request handed to another server took to be answered, by destination and outcome",
            Unit::Seconds,
            this.forward_seconds.clone(),
        );
        r.register(
            "commands_taken",
            "Requests another server handed to this one that it ran (fleet)",
            this.commands_run.clone(),
        );
        r.register(
            "takeovers",
            "Sessions this server brought back that another server (or it) had run, by why they were not running",
            this.takeovers.clone(),
        );
        r.register_with_unit(
            "snapshot_written",
            "Bytes of session snapshots written to the store, whole (a base) or as a delta on the kept base",
            Unit::Bytes,
            this.snapshot_bytes.clone(),
        );
        r.register_with_unit(
            "snapshot",
            "Time to keep a session resumable after a turn: the agent's export, the delta on what the store holds, the store write",
            Unit::Seconds,
            this.snapshot_seconds.clone(),
        );
        this
    }

    /// Counts a snapshot write of `bytes`, `whole` or `delta`.
    pub(crate) fn snapshot_written(&self, kind: &'static str, bytes: u64) {
        self.snapshot_bytes
            .get_or_create(&SnapshotLabel { kind })
            .inc_by(bytes);
    }

    /// Times one snapshot kept after a turn (taken, compared, written).
    pub(crate) fn snapshot_kept(&self, took: Duration) {
        self.snapshot_seconds.observe(took.as_secs_f64());
    }

    /// Counts one try to deliver a webhook.
    pub(crate) fn webhook_delivery(&self, outcome: crate::store::AttemptOutcome) {
        self.webhook_deliveries
            .get_or_create(&DeliveryLabel {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Counts an open SSE stream until the returned guard is dropped.
    pub(crate) fn sse_opened(&self) -> Counted {
        self.sse_subscribers.inc();
        Counted(self.sse_subscribers.clone())
    }

    /// Records one store write of `operation` that took `took`.
    pub(crate) fn store_write(&self, operation: &'static str, took: Duration) {
        self.store_write_seconds
            .get_or_create(&OperationLabel { operation })
            .observe(took.as_secs_f64());
    }
}

/// One unit of a gauge, given back when dropped.
#[derive(Debug)]
pub(crate) struct Counted(Gauge);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The metrics of a server, shared by its sessions.
pub(crate) type Shared = Arc<Metrics>;
