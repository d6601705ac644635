//! The clairvoyant oracle: the fewest GPU-hours any fleet could spend on a run's requests,
//! knowing the future and paying the cold start. Defined exactly in
//! docs/decisions/0018-simulator-v2-oracle.md; in short:
//!
//! 1. Each minute `m` needs `n_m = max(minReplicas, ⌈w_m / 60⌉)` ready pods, where `w_m` is
//!    the pod-seconds the requests arriving in `m` cost at a full batch (their number over
//!    [`PodModel::saturated_throughput`] of the minute's mix: the most efficient a pod ever
//!    is), so fewer ready pods could not finish that minute's work without carrying it into
//!    the next.
//! 2. Pods are interchangeable, so the schedule is a stack of *levels*: level `j` is needed in
//!    the minutes where `n_m ≥ j`. Between two needed stretches a level either stays up (it
//!    costs the gap) or goes and comes back (it costs a cold start), whichever is less; a
//!    level first needed after `t = 0` pays one cold start. The levels up at `t = 0` (the warm
//!    start) are free before it.
//!
//! The oracle is a bound, not a fleet: it has no queue and no SLO of its own, so its row
//! reports GPU-hours only.

use super::model::PodModel;
use super::workload::RequestTotals;

/// Requests per minute, accumulated during a run.
pub type MinuteLoad = RequestTotals;

/// Pod-seconds of a minute's work at a full batch of the minute's own mix.
pub fn work_seconds(minute: &MinuteLoad, model: &PodModel) -> f64 {
    minute.means().map_or(0.0, |means| {
        f64::from(minute.requests) / model.saturated_throughput(means)
    })
}

/// Ready pods the oracle keeps in each minute.
pub fn schedule(minutes: &[MinuteLoad], model: &PodModel, min_replicas: usize) -> Vec<usize> {
    minutes
        .iter()
        .map(|m| {
            let pods = (work_seconds(m, model) / 60.0 - 1e-9).ceil().max(0.0) as usize;
            pods.max(min_replicas)
        })
        .collect()
}

/// GPU-hours of the cheapest way to have `needed[m]` pods ready in every minute `m`, given
/// `initial` pods warm at `t = 0` and `cold_start_seconds` before a new pod is ready.
pub fn gpu_hours(needed: &[usize], initial: usize, cold_start_seconds: f64) -> f64 {
    let top = needed.iter().copied().max().unwrap_or(0);
    let mut seconds = 0.0;
    for level in 1..=top {
        // Minutes where this level is needed, and the gaps between them.
        let mut last_needed: Option<usize> = None;
        for (minute, &n) in needed.iter().enumerate() {
            if n < level {
                continue;
            }
            seconds += 60.0;
            match last_needed {
                Some(previous) => {
                    let gap = (minute - previous - 1) as f64 * 60.0;
                    seconds += gap.min(cold_start_seconds);
                }
                None if level <= initial => {
                    // Up since the warm start: the minutes before are bridged.
                    seconds += minute as f64 * 60.0;
                }
                None => seconds += cold_start_seconds,
            }
            last_needed = Some(minute);
        }
    }
    seconds / 3600.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::MixMeans;
    use crate::sim::workload::Request;

    #[test]
    fn levels_bridge_short_gaps_and_restart_after_long_ones() {
        // One level, needed in minutes 0, 2 and 10; cold start 90 s; up at t = 0.
        let needed = [1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        // 3 needed minutes + the 60 s gap (< 90 s) + a 90 s restart instead of 420 s.
        let hours = gpu_hours(&needed, 1, 90.0);
        assert!(
            (hours * 3600.0 - (180.0 + 60.0 + 90.0)).abs() < 1e-9,
            "{hours}"
        );
        // Not up at t = 0: the first stretch pays a cold start too.
        let cold = gpu_hours(&needed, 0, 90.0);
        assert!((cold * 3600.0 - (180.0 + 60.0 + 90.0 + 90.0)).abs() < 1e-9);
    }

    #[test]
    fn a_minute_needs_its_work_at_a_full_batch() {
        let model = PodModel::default();
        let mut minute = MinuteLoad::default();
        for _ in 0..600 {
            minute.add(&Request {
                arrival: 0.0,
                input_tokens: 1000,
                output_tokens: 200,
            });
        }
        let mu = model.saturated_throughput(MixMeans::uniform(1000.0, 200.0));
        let expected = (600.0 / mu / 60.0).ceil() as usize;
        assert_eq!(
            schedule(&[minute, MinuteLoad::default()], &model, 1),
            vec![expected, 1]
        );
    }
}
