//! The policies compared, and how each turns what it sees into HPA metrics.
//!
//! - `backlog` and `capacity`: this scaler. Every poll, the ready pods'
//!   readings go through [`crate::decide::freshness::decide_engine`], the code the
//!   server runs for a `vllmTargets` trigger, with metadata parsed by
//!   [`TriggerSpec::from_metadata`] as the server parses it; the HPA gets
//!   `B` against an `AverageValue` target `T`. Nothing of the formula is
//!   copied here.
//! - `seed`: the seed article's three KEDA `prometheus` triggers, from the
//!   Prometheus view: `sum(vllm:num_requests_waiting)` AverageValue 10,
//!   `sum(vllm:num_requests_running)` AverageValue 32, and the TTFT p95 over
//!   1 min, `Value` 2 s; the HPA takes the max.
//! - `production-stack`: vLLM production-stack's Helm default,
//!   `sum(vllm:num_requests_waiting)` AverageValue 5, from Prometheus.
//! - `fixed`: no autoscaling; a fleet sized for the scenario's peak.
//!
//! A Prometheus query with no answer (no requests in the TTFT window) reads
//! 0, as KEDA's `ignoreNullValues` default does.

use std::time::Instant;

use super::hpa::Target;
use super::view::{PrometheusView, instant_at};
use crate::decide::freshness::{TriggerMemory, decide_engine};
use crate::decide::fusion::Decision;
use crate::source::engine::EngineReading;
use crate::trigger::TriggerSpec;

/// A policy under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// This scaler as a user deploys it without a load test: no `policy` key and no
    /// `drainRatePerReplica`, so whatever the server does then.
    Default,
    /// This scaler, `policy: capacity` with the pod model's true `μ`, fixed
    /// (`learnDrainRate: false`).
    Capacity,
    /// This scaler, `policy: backlog` (`B = W + T·R/C`).
    Backlog,
    /// The seed article's three-trigger ScaledObject.
    Seed,
    /// vLLM production-stack's default trigger.
    ProductionStack,
    /// A fixed fleet sized for the peak.
    Fixed,
    /// The clairvoyant lower bound on GPU-hours ([`super::oracle`]): computed, not simulated.
    Oracle,
}

impl PolicyKind {
    /// Every policy, in report order.
    pub const ALL: [PolicyKind; 7] = [
        PolicyKind::Default,
        PolicyKind::Capacity,
        PolicyKind::Backlog,
        PolicyKind::Seed,
        PolicyKind::ProductionStack,
        PolicyKind::Fixed,
        PolicyKind::Oracle,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Default => "default",
            PolicyKind::Backlog => "backlog",
            PolicyKind::Capacity => "capacity",
            PolicyKind::Seed => "seed",
            PolicyKind::ProductionStack => "production-stack",
            PolicyKind::Fixed => "fixed",
            PolicyKind::Oracle => "oracle",
        }
    }
}

/// The knobs of the policies.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySettings {
    /// `targetBacklogPerReplica` of this scaler's triggers, and the seed's
    /// waiting-per-replica target.
    pub target_backlog_per_replica: f64,
    /// `runningPerReplica` (vLLM `--max-num-seqs`) of this scaler's triggers.
    pub running_per_replica: f64,
    /// The seed article's running-per-replica target: its literal 32, not the
    /// engine's batch limit (decision 0018).
    pub seed_running_per_replica: f64,
    /// The TTFT SLO, seconds: `ttftSloSeconds` and the seed's `Value` target.
    pub ttft_slo_seconds: f64,
    /// `drainRatePerReplica` (`μ`) for `capacity`, requests/s.
    pub drain_rate_per_replica: f64,
    /// Set `ttftSloSeconds` on this scaler's triggers (the latency guard).
    pub scaler_ttft_guard: bool,
    /// `default`'s `drainRatePerReplica` prior as a multiple of
    /// `drain_rate_per_replica` (`--prior-factor`: a load test that far off);
    /// `None`: no prior, as a user without a load test deploys it.
    pub default_prior_factor: Option<f64>,
    /// Extra metadata of the `default` and `capacity` triggers
    /// (`--capacity-set`), applied last: overrides the keys above.
    pub capacity_extra: Vec<(String, String)>,
    /// Window of the seed's TTFT p95 query, seconds.
    pub seed_ttft_window_seconds: f64,
    /// production-stack's waiting-per-replica target.
    pub production_stack_waiting: f64,
}

/// The trigger metadata this scaler's policy would be deployed with.
pub fn scaler_metadata(kind: PolicyKind, settings: &PolicySettings) -> Vec<(String, String)> {
    let mut metadata = vec![
        ("vllmTargets", "http://sim/metrics".to_owned()),
        (
            "targetBacklogPerReplica",
            settings.target_backlog_per_replica.to_string(),
        ),
        (
            "runningPerReplica",
            settings.running_per_replica.to_string(),
        ),
    ];
    if settings.scaler_ttft_guard {
        metadata.push(("ttftSloSeconds", settings.ttft_slo_seconds.to_string()));
    }
    if kind == PolicyKind::Backlog {
        metadata.push(("policy", "backlog".to_owned()));
    }
    if kind == PolicyKind::Capacity {
        metadata.push(("policy", "capacity".to_owned()));
        metadata.push((
            "drainRatePerReplica",
            format!("{:.3}", settings.drain_rate_per_replica),
        ));
        // The reference row: the true μ, fixed (a learned μ is `default`'s
        // job, docs/decisions/0022).
        metadata.push(("learnDrainRate", "false".to_owned()));
    }
    if kind == PolicyKind::Default
        && let Some(factor) = settings.default_prior_factor
    {
        metadata.push((
            "drainRatePerReplica",
            format!("{:.3}", factor * settings.drain_rate_per_replica),
        ));
    }
    let mut metadata: Vec<(String, String)> = metadata
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    // Both are this scaler's capacity triggers: a tuning tried with
    // `--capacity-set` is judged as a user would deploy it (no μ) and
    // against the true μ.
    if matches!(kind, PolicyKind::Capacity | PolicyKind::Default) {
        for (key, value) in &settings.capacity_extra {
            metadata.retain(|(k, _)| k != key);
            metadata.push((key.clone(), value.clone()));
        }
    }
    metadata
}

/// One call of the scaler's decision code, kept when recording.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalerCall {
    /// Simulated time, seconds.
    pub t: f64,
    /// The reading it was given.
    pub reading: EngineReading,
    /// What it answered.
    pub decision: Result<Decision, String>,
}

/// The hook into the server's decision code for one trigger.
#[derive(Debug)]
pub struct ScalerHook {
    spec: TriggerSpec,
    memory: TriggerMemory,
    base: Instant,
    last: Option<Decision>,
    errors: usize,
    calls: Option<Vec<ScalerCall>>,
}

impl ScalerHook {
    /// Parse `metadata` as the server does. `base` is the instant of
    /// simulated time 0; `record` keeps every call.
    pub fn new(
        metadata: &[(String, String)],
        base: Instant,
        record: bool,
    ) -> Result<ScalerHook, String> {
        let spec =
            TriggerSpec::from_metadata(metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|e| format!("simulated trigger metadata: {e}"))?;
        Ok(ScalerHook {
            spec,
            memory: TriggerMemory::default(),
            base,
            last: None,
            errors: 0,
            calls: record.then(Vec::new),
        })
    }

    /// `pollIntervalSeconds`.
    pub fn poll_interval_seconds(&self) -> f64 {
        self.spec.poll_interval.as_secs_f64()
    }

    /// `targetBacklogPerReplica`.
    pub fn target(&self) -> f64 {
        self.spec.fusion.target_per_replica
    }

    /// One poll at simulated time `t`: [`decide_engine`] on `reading`.
    pub fn observe(&mut self, t: f64, reading: EngineReading) -> Result<Decision, String> {
        let at = instant_at(self.base, t);
        let decision = decide_engine(&self.spec, &reading, at, &mut self.memory);
        match &decision {
            Ok(d) => self.last = Some(*d),
            Err(_) => self.errors += 1,
        }
        if let Some(calls) = &mut self.calls {
            calls.push(ScalerCall {
                t,
                reading,
                decision: decision.clone(),
            });
        }
        decision
    }

    /// The latest good decision (what GetMetrics answers).
    pub fn last(&self) -> Option<&Decision> {
        self.last.as_ref()
    }

    /// Polls that answered an error.
    pub fn errors(&self) -> usize {
        self.errors
    }

    /// The recorded calls.
    pub fn take_calls(&mut self) -> Vec<ScalerCall> {
        self.calls.take().unwrap_or_default()
    }
}

/// A query of a KEDA `prometheus` trigger.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PromQuery {
    /// `sum(vllm:num_requests_waiting)`.
    Waiting,
    /// `sum(vllm:num_requests_running)`.
    Running,
    /// `histogram_quantile(q, sum by (le)(rate(ttft_bucket[window])))`.
    TtftQuantile {
        /// The quantile.
        quantile: f64,
        /// The rate window, seconds.
        window_seconds: f64,
    },
}

/// A KEDA `prometheus` trigger: a query and its target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromTrigger {
    /// The query.
    pub query: PromQuery,
    /// Its `metricType` and `threshold`.
    pub target: Target,
}

impl PromTrigger {
    fn value(&self, t: f64, view: &PrometheusView) -> Option<f64> {
        // Nothing scraped yet is an error (a missing metric); an empty
        // quantile is 0 (ignoreNullValues).
        view.latest(t)?;
        Some(match self.query {
            PromQuery::Waiting => view.waiting(t).unwrap_or(0.0),
            PromQuery::Running => view.running(t).unwrap_or(0.0),
            PromQuery::TtftQuantile {
                quantile,
                window_seconds,
            } => view
                .ttft_quantile(t, quantile, window_seconds)
                .unwrap_or(0.0),
        })
    }
}

/// What drives the replica count.
#[derive(Debug)]
pub enum Controller {
    /// This scaler, through the server's decision code.
    Scaler(Box<ScalerHook>),
    /// KEDA `prometheus` triggers.
    Prometheus(Vec<PromTrigger>),
    /// No autoscaling.
    Fixed(i32),
}

impl Controller {
    /// The controller of `kind`; `fixed_replicas` is used by `fixed` only.
    pub fn new(
        kind: PolicyKind,
        settings: &PolicySettings,
        fixed_replicas: i32,
        base: Instant,
        record: bool,
    ) -> Result<Controller, String> {
        Ok(match kind {
            PolicyKind::Default | PolicyKind::Backlog | PolicyKind::Capacity => {
                Controller::Scaler(Box::new(ScalerHook::new(
                    &scaler_metadata(kind, settings),
                    base,
                    record,
                )?))
            }
            PolicyKind::Seed => Controller::Prometheus(vec![
                PromTrigger {
                    query: PromQuery::Waiting,
                    target: Target::AverageValue(settings.target_backlog_per_replica),
                },
                PromTrigger {
                    query: PromQuery::Running,
                    target: Target::AverageValue(settings.seed_running_per_replica),
                },
                PromTrigger {
                    query: PromQuery::TtftQuantile {
                        quantile: 0.95,
                        window_seconds: settings.seed_ttft_window_seconds,
                    },
                    target: Target::Value(settings.ttft_slo_seconds),
                },
            ]),
            PolicyKind::ProductionStack => Controller::Prometheus(vec![PromTrigger {
                query: PromQuery::Waiting,
                target: Target::AverageValue(settings.production_stack_waiting),
            }]),
            PolicyKind::Fixed => Controller::Fixed(fixed_replicas),
            PolicyKind::Oracle => {
                return Err("the oracle is computed from the requests, not simulated".to_owned());
            }
        })
    }

    /// The HPA's metrics at `t`: `(target, value)`, `None` when unavailable.
    pub fn metrics(&self, t: f64, view: &PrometheusView) -> Vec<(Target, Option<f64>)> {
        match self {
            Controller::Scaler(hook) => {
                vec![(
                    Target::AverageValue(hook.target()),
                    hook.last().map(|d| d.backlog),
                )]
            }
            Controller::Prometheus(triggers) => triggers
                .iter()
                .map(|trigger| (trigger.target, trigger.value(t, view)))
                .collect(),
            Controller::Fixed(_) => Vec::new(),
        }
    }

    /// KEDA's activity check at `t` (IsActive; `activationThreshold` 0 for
    /// Prometheus triggers).
    pub fn active(&self, t: f64, view: &PrometheusView) -> bool {
        match self {
            Controller::Scaler(hook) => hook.last().is_some_and(|d| d.active),
            Controller::Prometheus(triggers) => triggers
                .iter()
                .any(|trigger| trigger.value(t, view).is_some_and(|v| v > 0.0)),
            Controller::Fixed(_) => true,
        }
    }
}
