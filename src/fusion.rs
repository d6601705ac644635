//! The fused metric: signals in, one backlog-equivalent [`Decision`] out.
//!
//! A pure function so it can be tested with a table and reused unchanged by
//! the simulator. Formula (ARCHITECTURE.md §2, policy `backlog`):
//!
//! ```text
//! D      = W + (C set ? T·R/C : 0)
//! B      = D
//! active = B > A            (strictly, as KEDA's activation thresholds)
//! ```
//!
//! `T·R/C` turns running requests into the same unit as waiting ones: a pod
//! running a full batch of `C` counts as one replica's worth (`T`) of work.
//! Adding them, instead of taking the max of two triggers, is the point: 10
//! full pods with 50 requests waiting (T=10, C=32) give `ceil(320/32 + 50/10) =
//! 15` replicas, where max-of-triggers gives 10 and never scales up.

use serde::Serialize;

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
}

/// Measured inputs of one evaluation. Every value is a measurement: a signal
/// that could not be measured never reaches this struct (the caller answers
/// UNAVAILABLE instead), so 0 here always means "measured: no work".
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Signals {
    /// `W`: requests waiting in the engines, summed over pods.
    pub waiting: f64,
    /// `R`: requests running in the engines, summed over pods.
    pub running: f64,
    /// `n`: engine pods that reported.
    pub replicas_reporting: usize,
}

/// Each term of the formula, so a number can be explained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// `W`.
    pub waiting: f64,
    /// `R`.
    pub running: f64,
    /// `T·R/C`, or `None` when `runningPerReplica` is unset.
    pub running_term: Option<f64>,
    /// `D = W + T·R/C`.
    pub demand: f64,
    /// `n`.
    pub replicas_reporting: usize,
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
    let waiting = sanitize(signals.waiting);
    let running = sanitize(signals.running);
    let target = params.target_per_replica;
    let running_term = params
        .running_per_replica
        .map(|per_replica| target * running / per_replica);
    let demand = waiting + running_term.unwrap_or(0.0);
    let backlog = demand;
    Decision {
        backlog,
        active: backlog > params.activation_backlog,
        desired_replicas: desired_replicas(backlog, target),
        components: Components {
            waiting,
            running,
            running_term,
            demand,
            replicas_reporting: signals.replicas_reporting,
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
    fn table() {
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
            let params = FusionParams {
                target_per_replica: case.t,
                running_per_replica: case.c,
                activation_backlog: case.a,
            };
            let signals = Signals {
                waiting: case.w,
                running: case.r,
                replicas_reporting: 3,
            };
            let decision = fuse(&params, &signals);
            assert_eq!(decision.backlog, case.backlog, "{}", case.name);
            assert_eq!(decision.desired_replicas, case.desired, "{}", case.name);
            assert_eq!(decision.active, case.active, "{}", case.name);
            assert_eq!(decision.components.replicas_reporting, 3, "{}", case.name);
        }
    }

    #[test]
    fn components_record_each_term() {
        let params = FusionParams {
            target_per_replica: 10.0,
            running_per_replica: Some(32.0),
            activation_backlog: 0.0,
        };
        let d = fuse(
            &params,
            &Signals {
                waiting: 45.0,
                running: 94.0,
                replicas_reporting: 3,
            },
        );
        assert_eq!(d.components.waiting, 45.0);
        assert_eq!(d.components.running, 94.0);
        assert_eq!(d.components.running_term, Some(29.375));
        assert_eq!(d.components.demand, 74.375);
    }

    #[test]
    fn huge_backlog_saturates_instead_of_overflowing() {
        let params = FusionParams {
            target_per_replica: 1e-300,
            running_per_replica: None,
            activation_backlog: 0.0,
        };
        let d = fuse(
            &params,
            &Signals {
                waiting: 1e300,
                running: 0.0,
                replicas_reporting: 1,
            },
        );
        assert_eq!(d.desired_replicas, u64::MAX);
    }
}
