//! The fused metric: signals in, one backlog-equivalent [`Decision`] out.
//!
//! A pure function so it can be tested with a table and reused unchanged by
//! the simulator. Formula (ARCHITECTURE.md §2, policy `backlog`):
//!
//! ```text
//! D      = W + (C set ? T·R/C : 0)
//! D_lat  = (S set, L > S·(1+tol), work waiting) ? T·n·min(L/S, 2) : 0
//! D_kv   = (kvCacheTarget set) ? T·n·kv/kvCacheTarget : 0
//! B      = max(D, D_lat, D_kv), then the GPU guard
//! active = B' > A           (strictly, as KEDA's activation thresholds)
//! ```
//!
//! `B'` is `B`, except that the broker term counts what KEDA's own scaler
//! counts for activation: Kafka's lag including persistent lag
//! (`excludePersistentLag` leaves it out of `B` only) and before the
//! partition cap, as KEDA's IsActive compares `totalLagWithPersistent`.
//! Without that, a group stuck on one partition would never wake a
//! Deployment at zero replicas.
//!
//! `T·R/C` turns running requests into the same unit as waiting ones: a pod
//! running a full batch of `C` counts as one replica's worth (`T`) of work.
//! Adding them, instead of taking the max of two triggers, is the point: 10
//! full pods with 50 requests waiting (T=10, C=32) give `ceil(320/32 + 50/10) =
//! 15` replicas, where max-of-triggers gives 10 and never scales up.
//!
//! The latency guard is gated on work waiting and clamped at 2×: a TTFT
//! window stays high for its whole length after a burst while new pods become
//! ready, and an ungated guard multiplies the two (a simulation ran a fleet
//! from 7 to 20 pods at a load needing 3 with nothing waiting). The GPU guard
//! never drives scale-up: busy hold keeps a saturated fleet from shrinking
//! while work is queued; idle veto (opt-in) stops adding GPUs when they sit
//! idle while work is queued (the bottleneck is elsewhere).

use serde::Serialize;

pub use crate::decide::capacity::CapacityEstimate;
pub use crate::trigger::params::{CapacityParams, FusionParams, GpuGuard, LatencyGuard, Policy};

/// Measured inputs of one evaluation. Every value is a measurement: a signal
/// that could not be measured never reaches this struct (the caller answers
/// UNAVAILABLE instead), so 0 here always means "measured: no work". `None`
/// means "not configured" or, for TTFT, "no requests in the window".
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Signals {
    /// `W`: requests waiting in the engines, summed over pods.
    pub waiting: f64,
    /// `R`: requests running, summed over pods.
    pub running: Option<f64>,
    /// `n`: replicas reporting.
    pub replicas_reporting: usize,
    /// `L`: TTFT quantile over the window, seconds.
    pub ttft_seconds: Option<f64>,
    /// Mean KV-cache usage, 0–1.
    pub kv_cache_usage: Option<f64>,
    /// `U`: mean GPU utilisation, percent.
    pub gpu_utilization: Option<f64>,
    /// The capacity policy's estimate at this reading.
    pub capacity: Option<CapacityEstimate>,
    /// `w·Q`: broker backlog in requests-equivalent (already capped at
    /// `T × partitions` for Kafka without idle consumers).
    pub broker_backlog: Option<f64>,
    /// `w·Q` as activation counts it: Kafka's lag including persistent
    /// lag, uncapped (KEDA's IsActive reads `totalLagWithPersistent`).
    /// `None`, or equal to `broker_backlog`: activation counts `B` itself.
    pub broker_activation: Option<f64>,
}

/// Which term set `B` before the GPU guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Driver {
    /// `D`, the demand.
    Demand,
    /// `D_lat`, the latency guard.
    Latency,
    /// `D_kv`, KV-cache pressure.
    KvCache,
}

/// What the GPU guard did, when it changed `B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GpuAction {
    /// Raised `B` to `T·n`: GPUs saturated while work is queued.
    BusyHold,
    /// Capped `B` at `T·n`: GPUs idle while work is queued.
    IdleVeto,
}

/// Each term of the formula, so a number can be explained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// `W`.
    pub waiting: f64,
    /// `R`.
    pub running: Option<f64>,
    /// `T·R/C`, or `None` when `runningPerReplica` is unset.
    pub running_term: Option<f64>,
    /// `D`: `W + T·R/C` (backlog policy) or the capacity formula.
    pub demand: f64,
    /// The capacity policy's terms, when that policy is in use.
    pub capacity: Option<CapacityEstimate>,
    /// `w·Q`, when a broker is configured (backlog policy adds it to `D`;
    /// capacity adds `T·w·Q/(μ·H)`, a central queue with no per-pod cap).
    pub broker_term: Option<f64>,
    /// `w·Q` as activation counted it, when that differs from
    /// `broker_term`: Kafka's lag with persistent lag, before the cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation_broker_term: Option<f64>,
    /// `L`, seconds.
    pub ttft_seconds: Option<f64>,
    /// `D_lat`, when the guard is configured (0 when it did not fire).
    pub latency_term: Option<f64>,
    /// Mean KV-cache usage.
    pub kv_cache_usage: Option<f64>,
    /// `D_kv`, when `kvCacheTarget` is set.
    pub kv_term: Option<f64>,
    /// `U`, percent.
    pub gpu_utilization: Option<f64>,
    /// The GPU guard's action, if it changed `B`.
    pub gpu_action: Option<GpuAction>,
    /// `n`.
    pub replicas_reporting: usize,
    /// Which term won the max.
    pub driver: Driver,
}

/// The fused result for one trigger.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// `B`, the metric value KEDA receives.
    pub backlog: f64,
    /// `B' > A`: what IsActive answers.
    pub active: bool,
    /// `B'`, the value compared with `A`: `B`, or `B` recomputed with the
    /// broker term activation counts (`Components::activation_broker_term`).
    pub activation_value: f64,
    /// `ceil(B / T)`: what an HPA with an AverageValue target of `T` asks for
    /// (before its min/max bounds and tolerance). For explanation only.
    pub desired_replicas: u64,
    /// The terms `B` was built from.
    pub components: Components,
}

/// Fuse signals into a decision. Pure and total: negative or non-finite
/// inputs (which sources reject before this point) are read as 0 rather than
/// allowed to poison the result.
pub fn fuse(params: &FusionParams, signals: &Signals) -> Decision {
    let mut decision = fuse_once(params, signals);
    let Some(activation_term) = signals.broker_activation.map(sanitize) else {
        return decision;
    };
    if decision.components.broker_term == Some(activation_term) {
        return decision;
    }
    // The same formula with the broker term activation counts; never below
    // `B` (activation counts at least what scaling does).
    let counted = Signals {
        broker_backlog: Some(activation_term),
        broker_activation: None,
        ..*signals
    };
    let value = fuse_once(params, &counted).backlog.max(decision.backlog);
    decision.activation_value = value;
    decision.active = value > params.activation_backlog;
    decision.components.activation_broker_term = Some(activation_term);
    decision
}

fn fuse_once(params: &FusionParams, signals: &Signals) -> Decision {
    let t = params.target_per_replica;
    let n = signals.replicas_reporting as f64;
    let waiting = sanitize(signals.waiting);
    let running = signals.running.map(sanitize);
    let running_term = params
        .running_per_replica
        .map(|c| t * running.unwrap_or(0.0) / c);
    let capacity = match params.policy {
        Policy::Capacity(_) => signals.capacity,
        Policy::Backlog => None,
    };
    let broker_term = signals.broker_backlog.map(sanitize);
    let queued = broker_term.unwrap_or(0.0);
    let demand = match (capacity, params.policy) {
        (Some(e), Policy::Capacity(p)) => {
            let horizon = e.drain_rate * p.drain_horizon_seconds;
            let broker_pods = if horizon > 0.0 { queued / horizon } else { 0.0 };
            let capacity = t * (e.rate_term + e.pod_backlog_term + broker_pods);
            if e.backlog_floor {
                capacity.max(waiting + queued + running_term.unwrap_or(0.0))
            } else {
                capacity
            }
        }
        _ => waiting + queued + running_term.unwrap_or(0.0),
    };
    let work_waiting = waiting > 0.0 || queued > 0.0;

    let ttft = signals.ttft_seconds.filter(|l| l.is_finite() && *l >= 0.0);
    let latency_term = params.latency.map(|guard| match ttft {
        Some(l) if work_waiting && l > guard.slo_seconds * (1.0 + guard.tolerance) => {
            t * n * (l / guard.slo_seconds).min(2.0)
        }
        _ => 0.0,
    });
    let kv = signals.kv_cache_usage.map(sanitize);
    let kv_term = params
        .kv_cache_target
        .map(|target| t * n * kv.unwrap_or(0.0) / target);

    let mut backlog = demand;
    let mut driver = Driver::Demand;
    if let Some(lat) = latency_term
        && lat > backlog
    {
        backlog = lat;
        driver = Driver::Latency;
    }
    if let Some(kv_b) = kv_term
        && kv_b > backlog
    {
        backlog = kv_b;
        driver = Driver::KvCache;
    }

    let gpu = signals.gpu_utilization.map(sanitize);
    let mut gpu_action = None;
    if let (Some(guard), Some(u)) = (params.gpu, gpu)
        && work_waiting
    {
        let fleet = t * n;
        if guard.busy_percent.is_some_and(|busy| u >= busy) && backlog < fleet {
            backlog = fleet;
            gpu_action = Some(GpuAction::BusyHold);
        } else if guard.idle_percent.is_some_and(|idle| u <= idle) && backlog > fleet {
            backlog = fleet;
            gpu_action = Some(GpuAction::IdleVeto);
        }
    }

    Decision {
        backlog,
        active: backlog > params.activation_backlog,
        activation_value: backlog,
        desired_replicas: desired_replicas(backlog, t),
        components: Components {
            waiting,
            running,
            running_term,
            demand,
            capacity,
            broker_term,
            activation_broker_term: None,
            ttft_seconds: ttft,
            latency_term,
            kv_cache_usage: kv,
            kv_term,
            gpu_utilization: gpu,
            gpu_action,
            replicas_reporting: signals.replicas_reporting,
            driver,
        },
    }
}

/// A negative or NaN signal counts as none (the sources refuse both, so only a hand-built
/// reading has them); +∞ stays, so that a sum past `f64::MAX` reaches `B` and makes the
/// trigger unavailable (`Unavailable::Unrepresentable`) instead of a silent 0.
fn sanitize(v: f64) -> f64 {
    if v > 0.0 { v } else { 0.0 }
}

/// `ceil(B/T)`, saturating; `T > 0` is guaranteed by metadata validation.
fn desired_replicas(backlog: f64, target: f64) -> u64 {
    let ratio = (backlog / target).ceil();
    if ratio > 0.0 {
        // `as` saturates (+inf and anything above u64::MAX give u64::MAX),
        // which is the intent; NaN fails the comparison above.
        ratio as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
