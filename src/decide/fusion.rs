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
//! active = B > A            (strictly, as KEDA's activation thresholds)
//! ```
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

pub use crate::decide::capacity::{CapacityEstimate, CapacityParams};

/// How demand `D` is computed (`policy`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "name")]
pub enum Policy {
    /// `D = W + T·R/C`: work in flight plus work queued.
    Backlog,
    /// `D = T·((1+headroom)·λ_peak/μ + Σ min(1, W_i/(μ·H)))`: from the
    /// arrival rate (see [`crate::decide::capacity`]).
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
    /// `B > A`.
    pub active: bool,
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
            t * (e.rate_term + e.pod_backlog_term + broker_pods)
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
        desired_replicas: desired_replicas(backlog, t),
        components: Components {
            waiting,
            running,
            running_term,
            demand,
            capacity,
            broker_term,
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

fn sanitize(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
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
mod tests {
    use super::*;

    fn params(t: f64, c: Option<f64>, a: f64) -> FusionParams {
        FusionParams {
            running_per_replica: c,
            activation_backlog: a,
            ..FusionParams::with_target(t)
        }
    }

    fn signals(w: f64, r: f64, n: usize) -> Signals {
        Signals {
            waiting: w,
            running: Some(r),
            replicas_reporting: n,
            ..Signals::default()
        }
    }

    struct Case {
        name: &'static str,
        t: f64,
        c: Option<f64>,
        a: f64,
        w: f64,
        r: f64,
        backlog: f64,
        desired: u64,
        active: bool,
    }

    #[test]
    fn demand_table() {
        let cases = [
            Case {
                name: "issue example: three pods, T=10, C=32",
                t: 10.0,
                c: Some(32.0),
                a: 0.0,
                w: 45.0,
                r: 94.0,
                backlog: 74.375,
                desired: 8,
                active: true,
            },
            Case {
                name: "architecture example: 10 full pods + 50 waiting",
                t: 10.0,
                c: Some(32.0),
                a: 0.0,
                w: 50.0,
                r: 320.0,
                backlog: 150.0,
                desired: 15,
                active: true,
            },
            Case {
                name: "running ignored without C",
                t: 10.0,
                c: None,
                a: 0.0,
                w: 7.0,
                r: 300.0,
                backlog: 7.0,
                desired: 1,
                active: true,
            },
            Case {
                name: "idle fleet is measured zero, inactive",
                t: 10.0,
                c: Some(32.0),
                a: 0.0,
                w: 0.0,
                r: 0.0,
                backlog: 0.0,
                desired: 0,
                active: false,
            },
            Case {
                name: "activation is strict: B == A is inactive",
                t: 10.0,
                c: None,
                a: 3.0,
                w: 3.0,
                r: 0.0,
                backlog: 3.0,
                desired: 1,
                active: false,
            },
            Case {
                name: "just above activation",
                t: 10.0,
                c: None,
                a: 3.0,
                w: 3.5,
                r: 0.0,
                backlog: 3.5,
                desired: 1,
                active: true,
            },
            Case {
                name: "exact multiple of T does not round up",
                t: 10.0,
                c: None,
                a: 0.0,
                w: 20.0,
                r: 0.0,
                backlog: 20.0,
                desired: 2,
                active: true,
            },
            Case {
                name: "garbage inputs read as zero",
                t: 10.0,
                c: Some(32.0),
                a: 0.0,
                w: f64::NAN,
                r: -4.0,
                backlog: 0.0,
                desired: 0,
                active: false,
            },
        ];
        for case in cases {
            let d = fuse(&params(case.t, case.c, case.a), &signals(case.w, case.r, 3));
            assert_eq!(d.backlog, case.backlog, "{}", case.name);
            assert_eq!(d.desired_replicas, case.desired, "{}", case.name);
            assert_eq!(d.active, case.active, "{}", case.name);
            assert_eq!(d.components.replicas_reporting, 3, "{}", case.name);
            assert_eq!(d.components.driver, Driver::Demand, "{}", case.name);
        }
    }

    #[test]
    fn components_record_each_term() {
        let d = fuse(&params(10.0, Some(32.0), 0.0), &signals(45.0, 94.0, 3));
        assert_eq!(d.components.waiting, 45.0);
        assert_eq!(d.components.running, Some(94.0));
        assert_eq!(d.components.running_term, Some(29.375));
        assert_eq!(d.components.demand, 74.375);
        assert_eq!(d.components.latency_term, None);
        assert_eq!(d.components.kv_term, None);
    }

    #[test]
    fn latency_guard_table() {
        // T=10, n=4, S=2 s, tolerance 0.1 → fires above 2.2 s; D = W (no C).
        let guard = FusionParams {
            latency: Some(LatencyGuard {
                slo_seconds: 2.0,
                tolerance: 0.1,
            }),
            ..FusionParams::with_target(10.0)
        };
        // (name, W, L, expected B, expected latency term, driver)
        type Case = (&'static str, f64, Option<f64>, f64, f64, Driver);
        let cases: [Case; 7] = [
            ("below the SLO", 5.0, Some(1.5), 5.0, 0.0, Driver::Demand),
            (
                "inside the tolerance band",
                5.0,
                Some(2.2),
                5.0,
                0.0,
                Driver::Demand,
            ),
            (
                "above the band: T·n·L/S",
                5.0,
                Some(3.0),
                60.0,
                60.0,
                Driver::Latency,
            ),
            (
                "clamped at 2×",
                5.0,
                Some(30.0),
                80.0,
                80.0,
                Driver::Latency,
            ),
            (
                "silent with nothing waiting, however high L",
                0.0,
                Some(30.0),
                0.0,
                0.0,
                Driver::Demand,
            ),
            (
                "no requests in the window: off",
                5.0,
                None,
                5.0,
                0.0,
                Driver::Demand,
            ),
            (
                "demand above the guard wins",
                100.0,
                Some(3.0),
                100.0,
                60.0,
                Driver::Demand,
            ),
        ];
        for (name, w, l, backlog, term, driver) in cases {
            let s = Signals {
                waiting: w,
                replicas_reporting: 4,
                ttft_seconds: l,
                ..Signals::default()
            };
            let d = fuse(&guard, &s);
            assert_eq!(d.backlog, backlog, "{name}");
            assert_eq!(d.components.latency_term, Some(term), "{name}");
            assert_eq!(d.components.driver, driver, "{name}");
        }
    }

    #[test]
    fn kv_cache_table() {
        let p = FusionParams {
            kv_cache_target: Some(0.8),
            ..FusionParams::with_target(10.0)
        };
        // n = 4: T·n = 40 at kv == target.
        for (name, kv, backlog, driver) in [
            ("below target: demand rules", 0.4, 25.0, Driver::Demand),
            ("at target: holds the fleet", 0.8, 40.0, Driver::KvCache),
            ("above target: scales up", 0.96, 48.0, Driver::KvCache),
        ] {
            let s = Signals {
                waiting: 25.0,
                replicas_reporting: 4,
                kv_cache_usage: Some(kv),
                ..Signals::default()
            };
            let d = fuse(&p, &s);
            assert!((d.backlog - backlog).abs() < 1e-9, "{name}: {}", d.backlog);
            assert_eq!(d.components.driver, driver, "{name}");
        }
    }

    #[test]
    fn gpu_guard_table() {
        let p = |idle: Option<f64>| FusionParams {
            running_per_replica: Some(32.0),
            gpu: Some(GpuGuard {
                busy_percent: Some(90.0),
                idle_percent: idle,
            }),
            ..FusionParams::with_target(10.0)
        };
        // n = 4, T·n = 40.
        // (name, idle veto, W, R, U, expected B, action)
        type Case = (
            &'static str,
            Option<f64>,
            f64,
            f64,
            f64,
            f64,
            Option<GpuAction>,
        );
        let cases: [Case; 7] = [
            (
                "busy hold: saturated fleet with work queued keeps T·n",
                None,
                2.0,
                64.0,
                97.0,
                40.0,
                Some(GpuAction::BusyHold),
            ),
            (
                "busy but nothing queued: no hold",
                None,
                0.0,
                64.0,
                97.0,
                20.0,
                None,
            ),
            (
                "busy below the threshold: no hold",
                None,
                2.0,
                64.0,
                80.0,
                22.0,
                None,
            ),
            (
                "busy never drives scale-up beyond T·n",
                None,
                100.0,
                128.0,
                99.0,
                140.0,
                None,
            ),
            (
                "idle veto off by default",
                None,
                100.0,
                128.0,
                5.0,
                140.0,
                None,
            ),
            (
                "idle veto caps at T·n when opted in",
                Some(10.0),
                100.0,
                128.0,
                5.0,
                40.0,
                Some(GpuAction::IdleVeto),
            ),
            (
                "idle veto needs queued work",
                Some(10.0),
                0.0,
                160.0,
                5.0,
                50.0,
                None,
            ),
        ];
        for (name, idle, w, r, u, backlog, action) in cases {
            let s = Signals {
                waiting: w,
                running: Some(r),
                replicas_reporting: 4,
                gpu_utilization: Some(u),
                ..Signals::default()
            };
            let d = fuse(&p(idle), &s);
            assert_eq!(d.backlog, backlog, "{name}");
            assert_eq!(d.components.gpu_action, action, "{name}");
        }
    }

    #[test]
    fn capacity_policy_uses_the_estimate_and_guards_still_apply() {
        let cap = CapacityParams {
            drain_rate_per_replica: 2.0,
            arrival_smoothing_seconds: 15.0,
            peak_hold_seconds: 1200.0,
            headroom: 0.2,
            drain_horizon_seconds: 30.0,
            learn_drain_rate: false,
        };
        let p = FusionParams {
            policy: Policy::Capacity(cap),
            running_per_replica: Some(32.0),
            latency: Some(LatencyGuard {
                slo_seconds: 1.0,
                tolerance: 0.1,
            }),
            ..FusionParams::with_target(10.0)
        };
        let estimate = CapacityEstimate {
            arrival_rate: 6.0,
            smoothed_rate: 6.0,
            peak_rate: 6.0,
            drain_rate: 2.0,
            drain_rate_learned: false,
            rate_term: 3.6,
            pod_backlog_term: 0.5,
        };
        let s = Signals {
            waiting: 30.0,
            running: Some(64.0),
            replicas_reporting: 2,
            capacity: Some(estimate),
            ..Signals::default()
        };
        let d = fuse(&p, &s);
        // D = T·(3.6 + 0.5) = 41, not W + T·R/C = 50.
        assert!((d.components.demand - 41.0).abs() < 1e-9, "{d:?}");
        assert_eq!(d.components.capacity, Some(estimate));
        // TTFT 3 s with work waiting: D_lat = 10·2·2 = 40 < 41, demand still wins.
        let d = fuse(
            &p,
            &Signals {
                ttft_seconds: Some(3.0),
                ..s
            },
        );
        assert_eq!(d.components.driver, Driver::Demand);
        assert_eq!(d.components.latency_term, Some(40.0));
    }

    #[test]
    fn huge_backlog_saturates_instead_of_overflowing() {
        let d = fuse(&FusionParams::with_target(1e-300), &signals(1e300, 0.0, 1));
        assert_eq!(d.desired_replicas, u64::MAX);
    }
}
