//! The JSON that explains every number: what `/explain` serves and the
//! `explain` command prints.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::decide::capacity::DrainRateUnit;
use crate::decide::capacity::learn::DrainRateSource;
use crate::decide::freshness::Evaluation;
use crate::decide::fusion::{
    CapacityEstimate, Components, Driver, FusionParams, GpuAction, Policy,
};
use crate::decide::quorum::{Fleet, PodState};
use crate::runtime::cache::{Status, TriggerEntry};
use crate::source::Reading;

/// `/explain`'s body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainResponse {
    /// One entry per tracked trigger, sorted by namespace, name, metric.
    pub triggers: Vec<serde_json::Value>,
}

/// One trigger, explained.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerExplain {
    /// ScaledObject namespace.
    pub namespace: String,
    /// ScaledObject name.
    pub name: String,
    /// Metric name served to KEDA.
    pub metric_name: String,
    /// `active`, or `shadow`: then GetMetrics answers 0 and IsActive false
    /// whatever this explains, and `state`, `value`, `active` and
    /// `desiredReplicas` are what it would answer (`unavailable`: it would
    /// answer UNAVAILABLE).
    pub mode: &'static str,
    /// `ok`, `degraded` (a failing source's last good value is held, some
    /// pods are held or left out (`pods`), or a `dns+` name answers no
    /// addresses while the other targets answer),
    /// `unavailable` (GetMetrics answers UNAVAILABLE) or `pending`.
    pub state: &'static str,
    /// Why the state is not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `B`, the value GetMetrics returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// What IsActive returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// `ceil(B/T)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<u64>,
    /// The formula with this evaluation's numbers filled in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// Each term.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
    /// The trigger's parameters.
    pub params: FusionParams,
    /// Poll interval in seconds.
    pub poll_interval_seconds: u64,
    /// Max signal age in seconds.
    pub max_signal_age_seconds: u64,
    /// While some scraped pods fail: how many were discovered and report,
    /// the quorum, the extrapolation factor, and each failing pod (held or
    /// left out, with its error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<Fleet>,
    /// Seconds until the value expires unless a new reading arrives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_for_seconds: Option<f64>,
    /// While the `capacity` policy's rate estimate is not valid yet (the
    /// trigger is fresh on this scaler: a restart or a failover), what is
    /// done meanwhile: `D` is at least the backlog formula.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warming: Option<Warming>,
    /// When it was evaluated (Unix seconds).
    pub evaluated_at_unix: f64,
    /// Per source.
    pub sources: Vec<SourceExplain>,
}

/// One source of a trigger, explained.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceExplain {
    /// The source's label.
    pub source: String,
    /// Seconds since its last good reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_good_age_seconds: Option<f64>,
    /// Failed polls since the last good one.
    pub consecutive_failures: u32,
    /// The last error, if the newest poll failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last good reading (per pod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reading: Option<Reading>,
    /// While the source fails permanently (HTTP 404/410, 401/403, no such
    /// host name) and its poller waits longer than the interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffExplain>,
}

/// A fresh trigger's warm-up, explained.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Warming {
    /// `warming`.
    pub state: &'static str,
    /// Seconds until the rate estimate counts on its own (0 while no rate
    /// has been measured yet).
    pub seconds_left: f64,
    /// What the floor is and why.
    pub reason: String,
}

/// A permanently failing source's backoff, explained.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackoffExplain {
    /// `backing off`.
    pub state: &'static str,
    /// Seconds until the next poll.
    pub next_attempt_in_seconds: f64,
    /// The current wait between polls, seconds.
    pub delay_seconds: f64,
    /// Why, and what ends it.
    pub reason: String,
}

/// The backoff of `state`'s source, as its poller computes it.
fn backoff_of(
    label: &str,
    state: &crate::decide::signal_state::SignalState,
    interval: std::time::Duration,
    now: Instant,
) -> Option<BackoffExplain> {
    let failure = state.last_failure.as_ref().filter(|_| state.failing())?;
    let backoff = crate::runtime::backoff::backoff_after(
        failure.value.kind(),
        state.consecutive_failures,
        failure.at,
        interval,
        label,
    )?;
    Some(BackoffExplain {
        state: "backing off",
        next_attempt_in_seconds: round3(
            backoff
                .next_attempt
                .saturating_duration_since(now)
                .as_secs_f64(),
        ),
        delay_seconds: round3(backoff.delay.as_secs_f64()),
        reason: format!(
            "{} ({}) does not go away by itself: after {} failed polls in a row the next poll waits {} s (pollIntervalSeconds doubled per failed poll, at most {} s); a success, or a trigger with new metadata using this source, ends the backoff",
            failure.value,
            failure.value.kind().as_str(),
            state.consecutive_failures,
            round3(backoff.delay.as_secs_f64()),
            crate::runtime::backoff::BACKOFF_CAP.max(interval).as_secs()
        ),
    })
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The formula with numbers, e.g. `B = W + T·R/C = 45 + 10·94/32 = 74.375`,
/// followed by each guard that is configured and what it did.
pub fn formula(params: &FusionParams, c: &Components, backlog: f64) -> String {
    let t = params.target_per_replica;
    let mut text = match (params.policy, c.capacity) {
        // While μ is being learned the backlog formula is the floor: when it
        // decided, it is the formula shown (μ's state is in `capacity`).
        (Policy::Capacity(_), Some(e)) if floor_decided(&e, c) => backlog_formula(params, c),
        (Policy::Capacity(p), Some(e)) => format!(
            "D = T·((1+headroom)·λ_peak/μ + Σ min(1, W_i/(μ·H))) = {t}·((1+{})·{}/{}{} + {}) = {} (arrivals now {} req/s, smoothed {} req/s, peak held {} s)",
            p.headroom,
            round3(e.peak_rate),
            round3(e.drain_rate),
            drain_note(&e),
            round3(e.pod_backlog_term),
            round3(c.demand),
            round3(e.arrival_rate),
            round3(e.smoothed_rate),
            round3(e.peak_hold_seconds)
        ),
        _ => backlog_formula(params, c),
    };
    if matches!(params.policy, Policy::Capacity(_)) {
        text.push_str(&broker_text(c));
    }
    text.push_str(&guards_text(params, c, backlog));
    text
}

/// The backlog floor set `D` (it is at least the capacity terms).
fn floor_decided(e: &CapacityEstimate, c: &Components) -> bool {
    let backlog = c.waiting + c.broker_term.unwrap_or(0.0) + c.running_term.unwrap_or(0.0);
    e.backlog_floor && c.demand <= backlog
}

/// How μ was obtained, after its number: ` learned (fit, ±3 %)`, or
/// ` learned (fit in tokens, ±3 %)` from the step cost (decision 0027).
fn drain_note(e: &CapacityEstimate) -> String {
    let source = match e.drain_rate_source {
        DrainRateSource::Configured => return String::new(),
        DrainRateSource::Prior => return " (prior)".to_owned(),
        DrainRateSource::Samples => "samples",
        DrainRateSource::Fit if e.drain_rate_unit == DrainRateUnit::Tokens => "fit in tokens",
        DrainRateSource::Fit => "fit",
        DrainRateSource::Bounds => "bounds",
        DrainRateSource::None => "none",
    };
    match e.drain_rate_relative_error {
        Some(r) => format!(" learned ({source}, ±{}%)", (r * 1000.0).round() / 10.0),
        None => format!(" learned ({source})"),
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn backlog_formula(params: &FusionParams, c: &Components) -> String {
    let t = params.target_per_replica;
    let (q_symbol, q_value) = match c.broker_term {
        Some(q) => (" + w·Q", format!(" + {q}")),
        None => ("", String::new()),
    };
    match params.running_per_replica {
        Some(per_replica) => format!(
            "D = W{q_symbol} + T·R/C = {}{q_value} + {}·{}/{} = {}",
            c.waiting,
            t,
            c.running.unwrap_or(0.0),
            per_replica,
            c.demand
        ),
        None => format!("D = W{q_symbol} = {}{q_value} = {}", c.waiting, c.demand),
    }
}

fn broker_text(c: &Components) -> String {
    match c.broker_term {
        Some(q) => format!(" (w·Q = {q} from the broker)"),
        None => String::new(),
    }
}

fn guards_text(params: &FusionParams, c: &Components, backlog: f64) -> String {
    let t = params.target_per_replica;
    let mut text = String::new();
    let n = c.replicas_reporting;
    if let (Some(guard), Some(term)) = (params.latency, c.latency_term) {
        match c.ttft_seconds {
            Some(l) if term > 0.0 => text.push_str(&format!(
                "; D_lat = T·n·min(L/S, 2) = {t}·{n}·min({l}/{}, 2) = {term}",
                guard.slo_seconds
            )),
            Some(l) => text.push_str(&format!(
                "; latency guard silent (L = {l} s, fires above {} s while work waits)",
                guard.slo_seconds * (1.0 + guard.tolerance)
            )),
            None => text.push_str("; latency guard off (no requests in the TTFT window)"),
        }
    }
    if let (Some(target), Some(term)) = (params.kv_cache_target, c.kv_term) {
        text.push_str(&format!(
            "; D_kv = T·n·kv/target = {t}·{n}·{}/{target} = {term}",
            c.kv_cache_usage.unwrap_or(0.0)
        ));
    }
    let driver = match c.driver {
        Driver::Demand => "D",
        Driver::Latency => "D_lat",
        Driver::KvCache => "D_kv",
    };
    text.push_str(&format!("; max → {driver}"));
    match c.gpu_action {
        Some(GpuAction::BusyHold) => text.push_str(&format!(
            "; GPU busy hold (U = {}%) raised B to T·n",
            c.gpu_utilization.unwrap_or(0.0)
        )),
        Some(GpuAction::IdleVeto) => text.push_str(&format!(
            "; GPU idle veto (U = {}%) capped B at T·n",
            c.gpu_utilization.unwrap_or(0.0)
        )),
        None => {}
    }
    text.push_str(&format!("; B = {backlog}"));
    text
}

/// Why a ready evaluation is degraded: a failing source held, a `dns+`
/// name with no addresses among answering targets, or both.
fn degraded_reason(evaluation: &Evaluation) -> String {
    let mut reasons = Vec::new();
    if evaluation.signals.iter().any(|s| s.state.failing()) {
        reasons.push(
            "a source is failing; its last good reading is held until maxSignalAgeSeconds"
                .to_owned(),
        );
    }
    if let Some(fleet) = &evaluation.fleet {
        reasons.push(pods_reason(fleet));
    }
    if !evaluation.empty_names.is_empty() {
        reasons.push(format!(
            "{}: the DNS name has no addresses while the other targets answer; pods behind it, if any, are not counted",
            evaluation.empty_names.join(", ")
        ));
    }
    reasons.join("; ")
}

/// Which pods fail and what is done with each, e.g. `1 of 3 pods failing
/// (left out: the other pods' values are extrapolated to 3): http://…: HTTP
/// status 503`.
fn pods_reason(fleet: &Fleet) -> String {
    let count = |state| fleet.pods.iter().filter(|p| p.state == state).count();
    let (held, left_out) = (count(PodState::Held), count(PodState::LeftOut));
    let mut what = Vec::new();
    if held > 0 {
        what.push(format!(
            "{held} held: last good reading counted until maxSignalAgeSeconds"
        ));
    }
    if left_out > 0 {
        what.push(format!(
            "{left_out} left out: the {} reporting pods' values are extrapolated to {}",
            fleet.reporting, fleet.discovered
        ));
    }
    let errors: Vec<&str> = fleet.pods.iter().map(|p| p.error.as_str()).collect();
    format!(
        "{} of {} pods failing ({}): {}",
        fleet.pods.len(),
        fleet.discovered,
        what.join("; "),
        errors.join("; ")
    )
}

impl TriggerExplain {
    /// Explain `entry` as of `now`.
    pub fn of(entry: &TriggerEntry, now: Instant) -> TriggerExplain {
        let evaluation = entry.evaluation();
        let spec = &entry.spec;
        let mut explain = TriggerExplain {
            namespace: entry.namespace.clone(),
            name: entry.name.clone(),
            metric_name: spec.metric_name.clone(),
            mode: spec.mode.as_str(),
            state: "pending",
            reason: None,
            value: None,
            active: None,
            desired_replicas: None,
            formula: None,
            components: None,
            params: spec.fusion,
            poll_interval_seconds: spec.poll_interval.as_secs(),
            max_signal_age_seconds: spec.max_signal_age.as_secs(),
            pods: evaluation.fleet.clone(),
            valid_for_seconds: None,
            warming: None,
            evaluated_at_unix: unix(evaluation.evaluated_at),
            sources: evaluation
                .signals
                .iter()
                .map(|s| SourceExplain {
                    source: s.label.clone(),
                    last_good_age_seconds: s
                        .state
                        .last_good
                        .as_ref()
                        .map(|g| now.saturating_duration_since(g.at).as_secs_f64()),
                    consecutive_failures: s.state.consecutive_failures,
                    last_error: s
                        .state
                        .failing()
                        .then(|| s.state.last_failure.as_ref().map(|f| f.value.to_string()))
                        .flatten(),
                    reading: s.state.last_good.as_ref().map(|g| g.value.clone()),
                    backoff: backoff_of(&s.label, &s.state, spec.poll_interval, now),
                })
                .collect(),
        };
        match evaluation.decision_at(now) {
            Ok(decision) => {
                explain.state = if evaluation.degraded {
                    "degraded"
                } else {
                    "ok"
                };
                if evaluation.degraded {
                    explain.reason = Some(degraded_reason(&evaluation));
                }
                explain.value = Some(decision.backlog);
                explain.active = Some(decision.active);
                explain.desired_replicas = Some(decision.desired_replicas);
                explain.formula = Some(formula(
                    &spec.fusion,
                    &decision.components,
                    decision.backlog,
                ));
                explain.components = Some(decision.components);
                explain.warming = evaluation.warming_seconds.map(|left| Warming {
                    state: "warming",
                    seconds_left: round3(left),
                    reason: format!(
                        "this scaler has not watched the arrival rate for arrivalSmoothingSeconds yet (a restart or a failover); until it has, D is at least the backlog formula W + w·Q + T·R/C = {}",
                        decision.components.waiting
                            + decision.components.broker_term.unwrap_or(0.0)
                            + decision.components.running_term.unwrap_or(0.0)
                    ),
                });
                if let Status::Ready { valid_until, .. } = &evaluation.status {
                    explain.valid_for_seconds =
                        Some(valid_until.saturating_duration_since(now).as_secs_f64());
                }
            }
            Err(reason) => {
                if evaluation.status != Status::Pending {
                    explain.state = "unavailable";
                }
                explain.reason = Some(reason.to_string());
            }
        }
        explain
    }
}
