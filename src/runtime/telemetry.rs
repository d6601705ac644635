//! Self-metrics, served on the admin port at `/metrics`.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `backlog_scaler_backlog` | gauge | namespace, name, metric | fused value `B` last computed per trigger |
//! | `backlog_scaler_backlog_component` | gauge | namespace, name, metric, component | each term: `waiting`, `running`, `running_term`, `broker_term` (w·Q), `demand`, `ttft_seconds`, `latency_term`, `kv_cache_usage`, `kv_term`, `gpu_utilization` (absent when not configured) |
//! | `backlog_scaler_guard_fired` | gauge | namespace, name, metric, guard | 1 when a guard set `B`: `latency`, `kv_cache`, `gpu_busy_hold`, `gpu_idle_veto` |
//! | `backlog_scaler_desired_replicas` | gauge | namespace, name, metric | `ceil(B/T)` |
//! | `backlog_scaler_shadow_desired_replicas` | gauge | namespace, name, metric | `ceil(B/T)` a `mode: shadow` trigger would ask for (it answers 0) |
//! | `backlog_scaler_active` | gauge | namespace, name, metric | 1 when `B > activationBacklog` |
//! | `backlog_scaler_replicas_reporting` | gauge | namespace, name, metric | engine pods in the last reading |
//! | `backlog_scaler_trigger_available` | gauge | namespace, name, metric | 1 when GetMetrics answers a value, 0 while it answers UNAVAILABLE (in shadow mode: would answer) |
//! | `backlog_scaler_trigger_degraded` | gauge | namespace, name, metric | 1 while a failing source's last good value is being held, or a `dns+` name answers no addresses among answering targets |
//! | `backlog_scaler_trigger_degraded_pods` | gauge | namespace, name, metric, state, reason | discovered engine pods whose scrape fails: `state` `held` (last good reading still counted) or `left_out` (past `maxSignalAgeSeconds`: not counted, the others extrapolated), `reason` the failure kind (`timeout`, `http_status`, `parse`, …); a series only while its count is above 0 and the trigger answers |
//! | `backlog_scaler_triggers` | gauge | | triggers currently tracked |
//! | `backlog_scaler_max_triggers` | gauge | | the `maxTriggers` limit: past it, a new trigger is refused |
//! | `backlog_scaler_pollers` | gauge | | distinct sources being polled |
//! | `backlog_scaler_polls_total` | counter | source, outcome | polls by outcome `ok`, `timeout`, `upstream_error`, `parse_error` |
//! | `backlog_scaler_poll_duration_seconds` | histogram | source | time to take one reading |
//! | `backlog_scaler_malformed_lines_total` | counter | source | upstream lines skipped as unparseable |
//! | `backlog_scaler_grpc_requests_total` | counter | method, code | gRPC calls by method and status code |
//! | `backlog_scaler_grpc_request_duration_seconds` | histogram | method | time to answer a KEDA call (StreamIsActive: to open the stream), see [`grpc`] |
//! | `backlog_scaler_capacity_drain_rate` | gauge | namespace, name, metric, source, unit | `capacity` policy: `μ` in use, requests/s per replica, `source` how it was obtained, `unit` what it was learned in (`requests`, `tokens`) |
//! | `backlog_scaler_capacity_arrival_rate` | gauge | namespace, name, metric, kind | `capacity` policy: `λ̂` (`kind="smoothed"`) and `λ_peak` (`kind="peak"`), requests/s |
//! | `backlog_scaler_capacity_backlog_floor` | gauge | namespace, name, metric | `capacity` policy: 1 while the demand is floored at the backlog formula |
//!
//! Trigger series are removed when the trigger is dropped after its idle
//! timeout, so cardinality follows the live ScaledObjects; value series
//! (the capacity ones among them) also while it answers UNAVAILABLE.

mod capacity;
pub mod grpc;
mod labels;
mod triggers;

pub use labels::TriggerLabels;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use capacity::CapacityValues;
use triggers::{COMPONENTS, DegradedPods, GUARDS, TriggerSeries, Values};

use crate::decide::fusion::{Decision, Driver, GpuAction};
use crate::decide::quorum::PodState;
use crate::source::PollOutcome;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PollLabels {
    source: String,
    outcome: &'static str,
}

/// All self-metrics and their registry.
#[derive(Debug)]
pub struct Telemetry {
    registry: Registry,
    /// Every per-trigger series, written at scrape time.
    trigger_series: Arc<TriggerSeries>,
    triggers: Gauge,
    max_triggers: Gauge,
    pollers: Gauge,
    polls: Family<PollLabels, Counter>,
    poll_duration: Family<SourceLabels, Histogram>,
    malformed_lines: Family<SourceLabels, Counter>,
    grpc: grpc::GrpcMetrics,
}

fn poll_histogram() -> Histogram {
    // 1 ms .. ~16 s: a loopback scrape to a slow, remote PromQL query.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    /// Create and register every metric.
    pub fn new() -> Telemetry {
        let mut registry = Registry::with_prefix("backlog_scaler");
        let t = Telemetry {
            trigger_series: Arc::default(),
            triggers: Gauge::default(),
            max_triggers: Gauge::default(),
            pollers: Gauge::default(),
            polls: Family::default(),
            poll_duration: Family::new_with_constructor(poll_histogram),
            malformed_lines: Family::default(),
            grpc: grpc::GrpcMetrics::new(),
            registry: Registry::default(),
        };
        registry.register("triggers", "Triggers currently tracked", t.triggers.clone());
        registry.register(
            "max_triggers",
            "The maxTriggers limit: past it, a new trigger is refused",
            t.max_triggers.clone(),
        );
        registry.register(
            "pollers",
            "Distinct sources currently polled",
            t.pollers.clone(),
        );
        registry.register("polls", "Polls by source and outcome", t.polls.clone());
        registry.register(
            "poll_duration_seconds",
            "Time to take one reading of a source",
            t.poll_duration.clone(),
        );
        registry.register(
            "malformed_lines",
            "Upstream lines skipped as unparseable",
            t.malformed_lines.clone(),
        );
        t.grpc.register(&mut registry);
        registry.register_collector(Box::new(Arc::clone(&t.trigger_series)));
        Telemetry { registry, ..t }
    }

    /// Every value of the `component` label, in recording order: each is
    /// documented in the README's self-metrics table (tests/readme.rs).
    pub fn component_names() -> &'static [&'static str] {
        &COMPONENTS
    }

    /// Every value of the `guard` label (documented like the components).
    pub fn guard_names() -> &'static [&'static str] {
        &GUARDS
    }

    /// Every value of the `source` label of `backlog_scaler_capacity_drain_rate`
    /// (documented in the README's self-metrics table).
    pub fn drain_rate_source_names() -> &'static [&'static str] {
        capacity::source_names()
    }

    /// Every value of the `unit` label of `backlog_scaler_capacity_drain_rate`:
    /// the unit `μ` was learned in (`μ` is requests/s in both).
    pub fn drain_rate_unit_names() -> &'static [&'static str] {
        capacity::unit_names()
    }

    /// Every value of the `kind` label of `backlog_scaler_capacity_arrival_rate`.
    pub fn arrival_rate_kind_names() -> &'static [&'static str] {
        capacity::kind_names()
    }

    /// The methods KEDA calls, as the `method` label of the gRPC series
    /// spells them.
    pub fn grpc_methods() -> &'static [&'static str] {
        grpc::GrpcMetrics::methods()
    }

    /// Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Record a trigger's new decision.
    pub fn record_decision(&self, labels: &TriggerLabels, decision: &Decision, degraded: bool) {
        let c = &decision.components;
        let values = Values {
            backlog: decision.backlog,
            components: [
                Some(c.waiting),
                c.running,
                c.running_term,
                c.broker_term,
                Some(c.demand),
                c.ttft_seconds,
                c.latency_term,
                c.kv_cache_usage,
                c.kv_term,
                c.gpu_utilization,
            ],
            guards: [
                c.driver == Driver::Latency,
                c.driver == Driver::KvCache,
                c.gpu_action == Some(GpuAction::BusyHold),
                c.gpu_action == Some(GpuAction::IdleVeto),
            ],
            desired_replicas: i64::try_from(decision.desired_replicas).unwrap_or(i64::MAX),
            active: decision.active,
            replicas_reporting: i64::try_from(c.replicas_reporting).unwrap_or(i64::MAX),
            capacity: c.capacity.as_ref().map(CapacityValues::from),
        };
        self.trigger_series.set_values(labels, values, degraded);
    }

    /// Record what a `mode: shadow` trigger's new decision would ask for,
    /// after [`Telemetry::record_decision`]: its own series, so a dashboard
    /// can set it beside the HPA's current replicas (kube-state-metrics)
    /// without mistaking it for a trigger that decides.
    pub fn record_shadow(&self, labels: &TriggerLabels, decision: &Decision) {
        self.trigger_series.set_shadow(
            labels,
            i64::try_from(decision.desired_replicas).unwrap_or(i64::MAX),
        );
    }

    /// Record that a trigger answers UNAVAILABLE. Its value series are
    /// removed rather than left at a stale number a dashboard would trust.
    pub fn record_unavailable(&self, labels: &TriggerLabels) {
        self.trigger_series.set_unavailable(labels);
    }

    /// Set a trigger's failing pods, counted per state and reason; series
    /// it had before and no longer has are removed. An empty list (every
    /// pod answers, or the trigger answers UNAVAILABLE) removes them all.
    pub fn record_degraded_pods(
        &self,
        labels: &TriggerLabels,
        counts: &[(PodState, &'static str, usize)],
    ) {
        let pods = counts
            .iter()
            .map(|(state, reason, count)| DegradedPods {
                state: state.as_str(),
                reason,
                count: i64::try_from(*count).unwrap_or(i64::MAX),
            })
            .collect();
        self.trigger_series.set_degraded_pods(labels, pods);
    }

    /// Forget a dropped trigger.
    pub fn forget_trigger(&self, labels: &TriggerLabels) {
        self.trigger_series.forget(labels);
    }

    /// Set the tracked-trigger count.
    pub fn set_triggers(&self, count: usize) {
        self.triggers.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Set the `maxTriggers` limit shown next to the tracked-trigger count.
    pub fn set_max_triggers(&self, limit: usize) {
        self.max_triggers
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    /// Add to the poller count (negative to remove).
    pub fn add_pollers(&self, delta: i64) {
        self.pollers.inc_by(delta);
    }

    /// Count one poll.
    pub fn record_poll(
        &self,
        source: &str,
        outcome: PollOutcome,
        elapsed: Duration,
        malformed: usize,
    ) {
        self.polls
            .get_or_create(&PollLabels {
                source: source.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
        let labels = SourceLabels {
            source: source.to_owned(),
        };
        self.poll_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if malformed > 0 {
            self.malformed_lines
                .get_or_create(&labels)
                .inc_by(malformed as u64);
        }
    }

    /// Count one gRPC request.
    pub fn record_grpc(&self, method: &'static str, code: tonic::Code) {
        self.grpc.count(method, code);
    }

    /// Observe how long one gRPC call took (the span is described in
    /// [`grpc`]).
    pub fn record_grpc_duration(&self, method: &'static str, elapsed: Duration) {
        self.grpc.observe(method, elapsed);
    }
}

#[cfg(test)]
mod tests;
