//! The parameters a trigger's metadata sets for the decision layer: the
//! fusion formula's `T`, `C`, `A`, guards and policy. Plain data, built by
//! `TriggerSpec::from_metadata` and read by `decide`; they live here because
//! `decide` sits above `trigger`.

use serde::Serialize;

/// How demand `D` is computed (`policy`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "name")]
pub enum Policy {
    /// `D = W + T·R/C`: work in flight plus work queued.
    Backlog,
    /// `D = T·((1+headroom)·λ_peak/μ + Σ min(1, W_i/(μ·H)))`: from the
    /// arrival rate, with `μ` learned or configured (the estimator is
    /// `decide::capacity`).
    Capacity(CapacityParams),
}

/// The latency guard's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyGuard {
    /// `S`: the TTFT SLO in seconds (`ttftSloSeconds`).
    pub slo_seconds: f64,
    /// The guard fires above `S·(1 + tolerance)` (`ttftTolerance`).
    pub tolerance: f64,
}

/// The GPU guard's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuGuard {
    /// Busy hold at or above this utilisation % (`gpuBusyPercent`), if on.
    pub busy_percent: Option<f64>,
    /// Idle veto at or below this utilisation % (`gpuIdlePercent`), if on.
    pub idle_percent: Option<f64>,
}

/// Parameters of the formula, from trigger metadata.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FusionParams {
    /// `T`: backlog one replica absorbs (`targetBacklogPerReplica`), > 0.
    pub target_per_replica: f64,
    /// `C`: requests one replica runs at a full batch (`runningPerReplica`).
    pub running_per_replica: Option<f64>,
    /// `A`: active when `B > A` (`activationBacklog`).
    pub activation_backlog: f64,
    /// The TTFT guard, when `ttftSloSeconds` is set.
    pub latency: Option<LatencyGuard>,
    /// KV-cache usage a replica should run at (`kvCacheTarget`), 0–1.
    pub kv_cache_target: Option<f64>,
    /// The GPU guard, when a GPU signal is configured.
    pub gpu: Option<GpuGuard>,
    /// How `D` is computed.
    pub policy: Policy,
}

impl FusionParams {
    /// Parameters with only `T` set.
    pub fn with_target(target_per_replica: f64) -> FusionParams {
        FusionParams {
            target_per_replica,
            running_per_replica: None,
            activation_backlog: 0.0,
            latency: None,
            kv_cache_target: None,
            gpu: None,
            policy: Policy::Backlog,
        }
    }
}

/// The policy's parameters (trigger metadata).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityParams {
    /// `μ`: requests per second one replica finishes at a full batch
    /// (`drainRatePerReplica`): the prior of the learned `μ`, or its fixed
    /// value with `learnDrainRate: false`; `None` when learned from nothing.
    pub drain_rate_per_replica: Option<f64>,
    /// `τ` of the arrival-rate EWMA, seconds (`arrivalSmoothingSeconds`).
    pub arrival_smoothing_seconds: f64,
    /// Window of the peak hold, seconds (`peakHoldSeconds`).
    pub peak_hold_seconds: f64,
    /// Spare capacity on top of the peak rate (`headroom`).
    pub headroom: f64,
    /// `H`: a pod's queue should drain within this, seconds (`drainHorizonSeconds`).
    pub drain_horizon_seconds: f64,
    /// Learn `μ` online from the pods' counters (`learnDrainRate`, default
    /// true): until it is confident, `D` is at least the backlog formula.
    pub learn_drain_rate: bool,
}
