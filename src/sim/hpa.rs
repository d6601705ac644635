//! The Kubernetes HPA and KEDA's activation, as their code runs them.
//!
//! From `pkg/controller/podautoscaler` (`replica_calculator.go`,
//! `horizontal.go`):
//! - External metric, `AverageValue` target `T`: ratio = `m / (T·status
//!   replicas)`; within the tolerance (|ratio − 1| ≤ 0.1) the count stays,
//!   else `ceil(m / T)`.
//! - External metric, `Value` target `T`: ratio = `m / T`; within the
//!   tolerance the count stays, else `ceil(ratio · ready pods)`.
//! - Values are milli-quantities (KEDA sends `int64(v·1000)` milli).
//! - The max over metrics; a missing metric blocks a scale-down (and, if
//!   all are missing, any change).
//! - `behavior`: the stabilized recommendation is the current count clamped
//!   to [min of recommendations in the scale-up window, max of those in the
//!   scale-down window] (this sync's included); then the rate policies:
//!   each policy's limit from the count at the start of its period (current
//!   minus the scale-ups plus the scale-downs of the last `periodSeconds`),
//!   `Pods`: ± value, `Percent`: up `ceil(start·(1 + v/100))`, down
//!   `trunc(start·(1 − v/100))`; `selectPolicy` Max takes the largest change,
//!   Min the smallest, Disabled none; then min/max replicas.
//! - Defaults: scale-up window 0 s, max(4 pods, 100 %) per 15 s; scale-down
//!   window 300 s, 100 % per 15 s.
//!
//! KEDA (`scale_executor`): with `minReplicaCount: 0` the HPA's min is 1 and
//! KEDA itself scales 0 → max(min, 1) when a trigger is active and → 0 when
//! none was active for `cooldownPeriod`; with min ≥ 1 activation is ignored.

/// `Pods` or `Percent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    /// A number of pods per period.
    Pods,
    /// A percentage of the count at the period's start.
    Percent,
}

/// One scaling policy of a `behavior` direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalingPolicy {
    /// Pods or Percent.
    pub kind: PolicyType,
    /// Pods, or percent.
    pub value: i32,
    /// The period the change is counted over, seconds.
    pub period_seconds: f64,
}

/// `selectPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectPolicy {
    /// The policy allowing the largest change (default).
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// `behavior.scaleUp` or `behavior.scaleDown`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRules {
    /// `stabilizationWindowSeconds`.
    pub stabilization_seconds: f64,
    /// `selectPolicy`.
    pub select: SelectPolicy,
    /// `policies`.
    pub policies: Vec<ScalingPolicy>,
}

/// `spec.behavior`.
#[derive(Debug, Clone, PartialEq)]
pub struct Behavior {
    /// Scale-up rules.
    pub scale_up: ScalingRules,
    /// Scale-down rules.
    pub scale_down: ScalingRules,
}

impl Default for Behavior {
    /// The API server's defaults.
    fn default() -> Behavior {
        Behavior {
            scale_up: ScalingRules {
                stabilization_seconds: 0.0,
                select: SelectPolicy::Max,
                policies: vec![
                    ScalingPolicy {
                        kind: PolicyType::Pods,
                        value: 4,
                        period_seconds: 15.0,
                    },
                    ScalingPolicy {
                        kind: PolicyType::Percent,
                        value: 100,
                        period_seconds: 15.0,
                    },
                ],
            },
            scale_down: ScalingRules {
                stabilization_seconds: 300.0,
                select: SelectPolicy::Max,
                policies: vec![ScalingPolicy {
                    kind: PolicyType::Percent,
                    value: 100,
                    period_seconds: 15.0,
                }],
            },
        }
    }
}

/// A metric's target type and value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// `AverageValue`: per-replica target.
    AverageValue(f64),
    /// `Value`: target of the metric itself.
    Value(f64),
}

/// The HPA's default `--horizontal-pod-autoscaler-tolerance`.
pub const TOLERANCE: f64 = 0.1;

fn milli(v: f64) -> i64 {
    // KEDA: resource.NewMilliQuantity(int64(value*1000), …); Go truncates.
    (v * 1000.0) as i64
}

/// Replicas one external metric asks for (`None`: the HPA cannot compute
/// it, e.g. `Value` with no pods listed).
pub fn replicas_for_metric(
    target: Target,
    value: f64,
    current: i32,
    ready: i32,
    tolerance: f64,
) -> Option<i32> {
    let usage = milli(value) as f64;
    match target {
        Target::AverageValue(t) => {
            let t = milli(t) as f64;
            let ratio = usage / (t * f64::from(current));
            if (1.0 - ratio).abs() > tolerance {
                Some((usage / t).ceil() as i32)
            } else {
                Some(current)
            }
        }
        Target::Value(t) => {
            let ratio = usage / milli(t) as f64;
            if current == 0 {
                return Some(ratio.ceil() as i32);
            }
            if (1.0 - ratio).abs() <= tolerance {
                return Some(current);
            }
            Some((ratio * f64::from(ready)).ceil() as i32)
        }
    }
}

/// One HPA: bounds, behavior, and the history its behavior needs.
#[derive(Debug, Clone)]
pub struct Hpa {
    /// `minReplicas` (≥ 1).
    pub min_replicas: i32,
    /// `maxReplicas`.
    pub max_replicas: i32,
    /// `behavior`.
    pub behavior: Behavior,
    /// Tolerance.
    pub tolerance: f64,
    recommendations: Vec<(f64, i32)>,
    scale_up_events: Vec<(f64, i32)>,
    scale_down_events: Vec<(f64, i32)>,
}

impl Hpa {
    /// An HPA with the default tolerance.
    pub fn new(min_replicas: i32, max_replicas: i32, behavior: Behavior) -> Hpa {
        Hpa {
            min_replicas: min_replicas.max(1),
            max_replicas,
            behavior,
            tolerance: TOLERANCE,
            recommendations: Vec::new(),
            scale_up_events: Vec::new(),
            scale_down_events: Vec::new(),
        }
    }

    /// Record that the HPA recommended `replicas` at `at`, as if it had
    /// been running before the simulation began (a new HPA has no history
    /// and may scale down at its first sync).
    pub fn assume_history(&mut self, at: f64, replicas: i32) {
        self.recommendations.push((at, replicas));
    }

    /// One sync at `now`: the replica count to set (equal to `current`
    /// when nothing changes). `metrics` are `(target, value)`; `None` is a
    /// metric that could not be read. With 0 replicas the HPA is idle
    /// (KEDA owns 0 ↔ 1).
    pub fn sync(
        &mut self,
        now: f64,
        current: i32,
        ready: i32,
        metrics: &[(Target, Option<f64>)],
    ) -> i32 {
        if current == 0 {
            return 0;
        }
        let desired = if current > self.max_replicas {
            self.max_replicas
        } else if current < self.min_replicas {
            self.min_replicas
        } else {
            let mut proposal: Option<i32> = None;
            let mut invalid = 0;
            for (target, value) in metrics {
                match value
                    .and_then(|v| replicas_for_metric(*target, v, current, ready, self.tolerance))
                {
                    Some(r) => proposal = Some(proposal.map_or(r, |p| p.max(r))),
                    None => invalid += 1,
                }
            }
            let Some(proposal) = proposal else {
                return current;
            };
            if invalid > 0 && proposal < current {
                return current;
            }
            let stabilized = self.stabilize(now, current, proposal);
            self.limit_rate(now, current, stabilized)
        };
        if desired != current {
            let events = if desired > current {
                &mut self.scale_up_events
            } else {
                &mut self.scale_down_events
            };
            events.push((now, (desired - current).abs()));
        }
        desired
    }

    fn stabilize(&mut self, now: f64, current: i32, proposal: i32) -> i32 {
        let up_cutoff = now - self.behavior.scale_up.stabilization_seconds;
        let down_cutoff = now - self.behavior.scale_down.stabilization_seconds;
        let mut up = proposal;
        let mut down = proposal;
        for &(at, rec) in &self.recommendations {
            if at > up_cutoff {
                up = up.min(rec);
            }
            if at > down_cutoff {
                down = down.max(rec);
            }
        }
        self.recommendations
            .retain(|(at, _)| *at >= up_cutoff || *at >= down_cutoff);
        self.recommendations.push((now, proposal));
        current.max(up).min(down)
    }

    fn limit_rate(&self, now: f64, current: i32, desired: i32) -> i32 {
        if desired > current {
            let limit = self
                .limit(now, current, &self.behavior.scale_up, true)
                .max(current);
            desired.min(self.max_replicas.min(limit))
        } else if desired < current {
            let limit = self
                .limit(now, current, &self.behavior.scale_down, false)
                .min(current);
            desired.max(self.min_replicas.max(limit))
        } else {
            desired
        }
    }

    /// `calculateScaleUpLimitWithScalingRules` / `…ScaleDownLimit…`.
    fn limit(&self, now: f64, current: i32, rules: &ScalingRules, up: bool) -> i32 {
        let change_in = |events: &[(f64, i32)], period: f64| -> i32 {
            events
                .iter()
                .filter(|(at, _)| *at > now - period)
                .map(|(_, n)| *n)
                .sum()
        };
        let (mut result, pick): (i32, fn(i32, i32) -> i32) = match (rules.select, up) {
            (SelectPolicy::Disabled, _) => return current,
            (SelectPolicy::Max, true) | (SelectPolicy::Min, false) => (i32::MIN, i32::max),
            (SelectPolicy::Min, true) | (SelectPolicy::Max, false) => (i32::MAX, i32::min),
        };
        for policy in &rules.policies {
            let added = change_in(&self.scale_up_events, policy.period_seconds);
            let removed = change_in(&self.scale_down_events, policy.period_seconds);
            let start = current - added + removed;
            let proposed = match (policy.kind, up) {
                (PolicyType::Pods, true) => start + policy.value,
                (PolicyType::Pods, false) => start - policy.value,
                (PolicyType::Percent, true) => {
                    (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32
                }
                (PolicyType::Percent, false) => {
                    (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)) as i32
                }
            };
            result = pick(result, proposed);
        }
        result
    }
}

/// KEDA's part for `minReplicaCount: 0`: activation and cooldown.
#[derive(Debug, Clone, PartialEq)]
pub struct Keda {
    /// `minReplicaCount`.
    pub min_replica_count: i32,
    /// `cooldownPeriod`, seconds.
    pub cooldown_seconds: f64,
    last_active: Option<f64>,
}

impl Keda {
    /// KEDA for a ScaledObject.
    pub fn new(min_replica_count: i32, cooldown_seconds: f64) -> Keda {
        Keda {
            min_replica_count,
            cooldown_seconds,
            last_active: None,
        }
    }

    /// One polling-interval check: `Some(replicas)` when KEDA itself scales
    /// (0 → max(min, 1) on activation, → 0 after the cooldown).
    pub fn poll(&mut self, now: f64, current: i32, active: bool) -> Option<i32> {
        if active {
            self.last_active = Some(now);
        }
        if self.min_replica_count > 0 {
            return None;
        }
        if active && current == 0 {
            return Some(self.min_replica_count.max(1));
        }
        // KEDA: no LastActiveTime, or LastActiveTime + cooldown strictly before now.
        let cooled = self
            .last_active
            .is_none_or(|at| at + self.cooldown_seconds < now);
        if !active && current > 0 && cooled {
            return Some(0);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_examples() {
        // KEDA docs: AverageValue, 20 messages, target 5 → 4 replicas, whatever the count.
        for current in [1, 2, 7] {
            assert_eq!(
                replicas_for_metric(Target::AverageValue(5.0), 20.0, current, current, 0.1),
                Some(4)
            );
        }
        // Value: 3 replicas × 20 / 5 → 12.
        assert_eq!(
            replicas_for_metric(Target::Value(5.0), 20.0, 3, 3, 0.1),
            Some(12)
        );
        // Value uses ready pods, not the replica count.
        assert_eq!(
            replicas_for_metric(Target::Value(5.0), 20.0, 5, 3, 0.1),
            Some(12)
        );
    }

    #[test]
    fn tolerance_keeps_the_count() {
        // ratio 21 / (5·4) = 1.05: no change, where ceil(21/5) = 5.
        assert_eq!(
            replicas_for_metric(Target::AverageValue(5.0), 21.0, 4, 4, 0.1),
            Some(4)
        );
        // ratio 1.15: change.
        assert_eq!(
            replicas_for_metric(Target::AverageValue(5.0), 23.0, 4, 4, 0.1),
            Some(5)
        );
        assert_eq!(
            replicas_for_metric(Target::Value(2.0), 2.1, 4, 4, 0.1),
            Some(4)
        );
        assert_eq!(
            replicas_for_metric(Target::Value(2.0), 1.5, 4, 4, 0.1),
            Some(3)
        );
    }

    #[test]
    fn max_over_metrics_and_missing_metrics_block_scale_down() {
        let mut hpa = Hpa::new(1, 20, Behavior::default());
        let metrics = [
            (Target::AverageValue(10.0), Some(30.0)),
            (Target::AverageValue(32.0), Some(160.0)),
        ];
        assert_eq!(hpa.sync(0.0, 4, 4, &metrics), 5);
        let mut hpa = Hpa::new(1, 20, Behavior::default());
        let metrics = [
            (Target::AverageValue(10.0), Some(10.0)),
            (Target::Value(2.0), None),
        ];
        assert_eq!(hpa.sync(0.0, 4, 4, &metrics), 4);
    }

    #[test]
    fn scale_down_window_holds_the_highest_recommendation() {
        let mut hpa = Hpa::new(1, 20, Behavior::default());
        let t = Target::AverageValue(10.0);
        assert_eq!(hpa.sync(0.0, 8, 8, &[(t, Some(80.0))]), 8);
        // Load falls: recommendations 2, but 8 was recommended within 300 s.
        for now in [15.0, 150.0, 299.0] {
            assert_eq!(hpa.sync(now, 8, 8, &[(t, Some(20.0))]), 8, "t={now}");
        }
        // 300 s after the 8 it has left the window (timestamps must be after the cutoff).
        assert_eq!(hpa.sync(300.0, 8, 8, &[(t, Some(20.0))]), 2);
    }

    #[test]
    fn scale_up_window_holds_the_lowest_recommendation() {
        let mut behavior = Behavior::default();
        behavior.scale_up.stabilization_seconds = 60.0;
        let mut hpa = Hpa::new(1, 20, behavior);
        let t = Target::AverageValue(10.0);
        assert_eq!(hpa.sync(0.0, 2, 2, &[(t, Some(20.0))]), 2);
        assert_eq!(
            hpa.sync(15.0, 2, 2, &[(t, Some(60.0))]),
            2,
            "2 was recommended within 60 s"
        );
        assert_eq!(hpa.sync(61.0, 2, 2, &[(t, Some(60.0))]), 6);
    }

    #[test]
    fn default_scale_up_rate_is_four_pods_or_double_per_15s() {
        let mut hpa = Hpa::new(1, 100, Behavior::default());
        let t = Target::AverageValue(1.0);
        // From 1: max(1+4, 2·1) = 5.
        assert_eq!(hpa.sync(0.0, 1, 1, &[(t, Some(50.0))]), 5);
        // Same period: the 4 added count against it; period start = 1.
        assert_eq!(hpa.sync(10.0, 5, 1, &[(t, Some(50.0))]), 5);
        // Next period: max(5+4, 10) = 10.
        assert_eq!(hpa.sync(15.0, 5, 1, &[(t, Some(50.0))]), 10);
        assert_eq!(hpa.sync(30.0, 10, 1, &[(t, Some(50.0))]), 20);
    }

    #[test]
    fn rate_policies_pods_percent_and_select() {
        let slow = ScalingRules {
            stabilization_seconds: 0.0,
            select: SelectPolicy::Min,
            policies: vec![
                ScalingPolicy {
                    kind: PolicyType::Pods,
                    value: 1,
                    period_seconds: 60.0,
                },
                ScalingPolicy {
                    kind: PolicyType::Percent,
                    value: 50,
                    period_seconds: 60.0,
                },
            ],
        };
        let behavior = Behavior {
            scale_up: slow.clone(),
            scale_down: ScalingRules {
                stabilization_seconds: 0.0,
                ..slow
            },
        };
        let mut hpa = Hpa::new(1, 100, behavior);
        let t = Target::AverageValue(1.0);
        // Min of (+1, ceil(4·1.5)=6) → 5.
        assert_eq!(hpa.sync(0.0, 4, 4, &[(t, Some(40.0))]), 5);
        assert_eq!(
            hpa.sync(30.0, 5, 5, &[(t, Some(40.0))]),
            5,
            "1 pod per 60 s used"
        );
        assert_eq!(hpa.sync(60.0, 5, 5, &[(t, Some(40.0))]), 6);
        // Down, Min select: max of (start−1, trunc(start·0.5)) → 5 from 6.
        assert_eq!(hpa.sync(200.0, 6, 6, &[(t, Some(1.0))]), 5);
        // Disabled.
        let mut hpa = Hpa::new(1, 100, Behavior::default());
        hpa.behavior.scale_down.select = SelectPolicy::Disabled;
        assert_eq!(hpa.sync(0.0, 6, 6, &[(t, Some(1.0))]), 6);
        // Percent down 100 %: straight to the recommendation.
        let mut hpa = Hpa::new(1, 100, Behavior::default());
        hpa.behavior.scale_down.stabilization_seconds = 0.0;
        assert_eq!(hpa.sync(0.0, 6, 6, &[(t, Some(1.0))]), 1);
    }

    #[test]
    fn min_and_max_bound_the_count() {
        let mut hpa = Hpa::new(2, 5, Behavior::default());
        let t = Target::AverageValue(1.0);
        assert_eq!(hpa.sync(0.0, 4, 4, &[(t, Some(100.0))]), 5);
        assert_eq!(
            hpa.sync(15.0, 9, 9, &[(t, Some(100.0))]),
            5,
            "above max: to max"
        );
        let mut hpa = Hpa::new(2, 5, Behavior::default());
        hpa.behavior.scale_down.stabilization_seconds = 0.0;
        assert_eq!(hpa.sync(0.0, 3, 3, &[(t, Some(0.0))]), 2);
        assert_eq!(hpa.sync(15.0, 0, 0, &[(t, Some(100.0))]), 0, "idle at zero");
    }

    #[test]
    fn keda_activation_and_cooldown() {
        let mut keda = Keda::new(0, 300.0);
        assert_eq!(keda.poll(0.0, 0, false), None);
        assert_eq!(keda.poll(15.0, 0, true), Some(1), "activation: 0 → 1");
        assert_eq!(keda.poll(30.0, 1, false), None, "cooling down");
        assert_eq!(
            keda.poll(315.0, 1, false),
            None,
            "not strictly past the cooldown"
        );
        assert_eq!(keda.poll(330.0, 1, false), Some(0), "cooldown passed");
        let mut keda = Keda::new(0, 300.0);
        assert_eq!(
            keda.poll(0.0, 3, false),
            Some(0),
            "never active: no cooldown to wait"
        );
        let mut keda = Keda::new(2, 300.0);
        assert_eq!(keda.poll(0.0, 0, true), None, "min ≥ 1: activation ignored");
    }
}
