//! TTFT quantiles from scraped histogram buckets, computed inside the scaler.
//!
//! Each reading of an engine source carries every pod's cumulative TTFT
//! buckets. A trigger keeps the snapshots of its window
//! (`ttftWindowSeconds`); the quantile comes from the per-pod increase over
//! that window, summed across pods, interpolated inside the bucket exactly
//! as Prometheus's `histogram_quantile` does. Pure: tested with tables.
//!
//! - Counter resets (a restarted pod) are read as Prometheus's `rate` reads
//!   them: a count that went down started again from zero, so the step's
//!   increase is the new count, never a negative number.
//! - A pod that appears mid-window counts from its first snapshot (its
//!   lifetime totals before that are not this window's requests).
//! - Only pods present in the newest snapshot count: a pod gone from
//!   discovery is dropped at once (ARCHITECTURE.md §3).
//! - No observations in the window is `None`: "no requests", the guard is
//!   off; not an error and not 0.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::source::engine::Buckets;

/// One reading's TTFT buckets per pod.
#[derive(Debug, Clone, PartialEq)]
pub struct TtftSnapshot {
    /// When the reading was taken.
    pub at: Instant,
    /// Buckets per pod (by target URL); pods without the histogram are absent.
    pub pods: HashMap<String, Buckets>,
}

/// The snapshots of one trigger's window.
#[derive(Debug, Clone, Default)]
pub struct TtftWindow {
    snapshots: VecDeque<TtftSnapshot>,
}

impl TtftWindow {
    /// Add a reading's snapshot and forget those older than `window` before
    /// the newest, keeping one just outside as the baseline.
    pub fn push(&mut self, snapshot: TtftSnapshot, window: Duration) {
        if self
            .snapshots
            .back()
            .is_some_and(|last| last.at == snapshot.at)
        {
            return;
        }
        let cutoff = snapshot.at.checked_sub(window);
        self.snapshots.push_back(snapshot);
        if let Some(cutoff) = cutoff {
            // Keep the newest snapshot at or before the cutoff as baseline.
            while self.snapshots.len() > 2 && self.snapshots.get(1).is_some_and(|s| s.at <= cutoff)
            {
                self.snapshots.pop_front();
            }
        }
    }

    /// Number of snapshots held.
    pub fn len(&self) -> usize {
        self.snapshots.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty()
    }

    /// The `quantile` of TTFT over the window, in seconds; `None` when the
    /// window saw no requests (or fewer than two snapshots exist yet).
    pub fn quantile(&self, quantile: f64) -> Option<f64> {
        let increase = window_increase(self.snapshots.iter())?;
        histogram_quantile(quantile, &increase)
    }
}

/// Per-pod bucket increases across consecutive snapshots, summed over the
/// pods of the newest snapshot. `None` with fewer than two snapshots.
pub fn window_increase<'a>(
    snapshots: impl Iterator<Item = &'a TtftSnapshot> + Clone,
) -> Option<Buckets> {
    let newest = snapshots.clone().last()?;
    if snapshots.clone().count() < 2 {
        return None;
    }
    // Sum by bound, over bounds every pod has (pods of two vLLM versions can
    // differ; Prometheus's `sum by (le)` would mix partial buckets).
    let mut total: Option<Buckets> = None;
    for (pod, latest) in &newest.pods {
        let mut previous: Option<&Buckets> = None;
        let mut increase = vec![0.0; latest.counts.len()];
        for snapshot in snapshots.clone() {
            let Some(current) = snapshot.pods.get(pod) else {
                continue;
            };
            if let Some(prev) = previous
                && prev.bounds == current.bounds
                && current.bounds == latest.bounds
            {
                for (i, (now, before)) in current.counts.iter().zip(&prev.counts).enumerate() {
                    // A decrease is a counter reset: the process started again from 0.
                    increase[i] += if now >= before { now - before } else { *now };
                }
            }
            previous = Some(current);
        }
        let pod_increase = Buckets {
            bounds: latest.bounds.clone(),
            counts: increase,
        };
        total = Some(match total {
            None => pod_increase,
            Some(sum) => add_common_bounds(&sum, &pod_increase),
        });
    }
    total
}

fn add_common_bounds(a: &Buckets, b: &Buckets) -> Buckets {
    let mut out = Buckets::default();
    for (i, bound) in a.bounds.iter().enumerate() {
        if let Some(j) = b.bounds.iter().position(|x| x == bound) {
            out.bounds.push(*bound);
            out.counts.push(a.counts[i] + b.counts[j]);
        }
    }
    out
}

/// Prometheus's `histogram_quantile` over cumulative buckets whose last bound
/// is `+Inf`. `None` when there are no observations or the buckets are
/// unusable. Follows promql/quantile.go: linear interpolation inside the
/// bucket, the lowest bucket starting at 0, the `+Inf` bucket answering the
/// highest finite bound, and non-monotonic counts made monotonic.
pub fn histogram_quantile(q: f64, buckets: &Buckets) -> Option<f64> {
    if !(0.0..=1.0).contains(&q)
        || buckets.bounds.len() < 2
        || buckets.bounds.len() != buckets.counts.len()
    {
        return None;
    }
    if buckets.bounds.last().is_none_or(|b| b.is_finite()) {
        return None;
    }
    // Monotonic fix-up, as Prometheus does for scrape races between buckets.
    let mut counts = buckets.counts.clone();
    for i in 1..counts.len() {
        if counts[i] < counts[i - 1] {
            counts[i] = counts[i - 1];
        }
    }
    let observations = *counts.last()?;
    if observations <= 0.0 || !observations.is_finite() {
        return None;
    }
    let rank = q * observations;
    let b = counts.iter().position(|c| *c >= rank)?;
    let bounds = &buckets.bounds;
    if b == bounds.len() - 1 {
        // In the +Inf bucket: the best answer is the highest finite bound.
        return Some(bounds[bounds.len() - 2]);
    }
    if b == 0 && bounds[0] <= 0.0 {
        return Some(bounds[0]);
    }
    let (start, count_before) = if b == 0 {
        (0.0, 0.0)
    } else {
        (bounds[b - 1], counts[b - 1])
    };
    let end = bounds[b];
    let in_bucket = counts[b] - count_before;
    if in_bucket <= 0.0 {
        return Some(end);
    }
    Some(start + (end - start) * (rank - count_before) / in_bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    fn buckets(bounds: &[f64], counts: &[f64]) -> Buckets {
        Buckets {
            bounds: bounds.to_vec(),
            counts: counts.to_vec(),
        }
    }

    #[test]
    fn quantile_matches_prometheus() {
        let b = buckets(&[0.5, 1.0, 2.0, INF], &[0.0, 10.0, 20.0, 20.0]);
        // rank 19 of 20 lies in (1, 2]: 1 + 1 * (19 - 10) / 10
        assert_eq!(histogram_quantile(0.95, &b), Some(1.9));
        // rank 10 is exactly the top of (0.5, 1]
        assert_eq!(histogram_quantile(0.5, &b), Some(1.0));
        // the lowest bucket starts at 0
        let low = buckets(&[0.5, INF], &[4.0, 4.0]);
        assert_eq!(histogram_quantile(0.5, &low), Some(0.25));
        // in +Inf: the highest finite bound
        let high = buckets(&[0.5, 1.0, INF], &[0.0, 1.0, 10.0]);
        assert_eq!(histogram_quantile(0.95, &high), Some(1.0));
    }

    #[test]
    fn unusable_or_empty_histograms_are_none() {
        assert_eq!(
            histogram_quantile(0.95, &buckets(&[1.0, INF], &[0.0, 0.0])),
            None
        );
        assert_eq!(
            histogram_quantile(0.95, &buckets(&[1.0, 2.0], &[1.0, 2.0])),
            None
        );
        assert_eq!(
            histogram_quantile(1.5, &buckets(&[1.0, INF], &[1.0, 1.0])),
            None
        );
        assert_eq!(histogram_quantile(0.5, &buckets(&[INF], &[3.0])), None);
    }

    #[test]
    fn non_monotonic_buckets_are_fixed_up() {
        let b = buckets(&[1.0, 2.0, INF], &[5.0, 4.0, 10.0]);
        assert!(histogram_quantile(0.5, &b).is_some_and(|v| (0.0..=2.0).contains(&v)));
    }

    fn snapshot(at: Instant, pods: &[(&str, &[f64])]) -> TtftSnapshot {
        TtftSnapshot {
            at,
            pods: pods
                .iter()
                .map(|(pod, counts)| ((*pod).to_owned(), buckets(&[0.5, 1.0, 2.0, INF], counts)))
                .collect(),
        }
    }

    #[test]
    fn window_takes_per_pod_increases_summed_over_pods() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = TtftWindow::default();
        w.push(
            snapshot(
                t0,
                &[
                    ("a", &[100.0, 100.0, 100.0, 100.0]),
                    ("b", &[0.0, 0.0, 0.0, 0.0]),
                ],
            ),
            s(60),
        );
        assert_eq!(w.quantile(0.95), None, "one snapshot has no increase");
        w.push(
            snapshot(
                t0 + s(5),
                &[
                    ("a", &[100.0, 105.0, 110.0, 110.0]),
                    ("b", &[0.0, 5.0, 10.0, 10.0]),
                ],
            ),
            s(60),
        );
        // increase: a (0,5,10,10) + b (0,5,10,10) = (0,10,20,20) → p95 = 1.9
        assert_eq!(w.quantile(0.95), Some(1.9));
    }

    #[test]
    fn counter_reset_is_not_negative_or_huge() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = TtftWindow::default();
        w.push(
            snapshot(t0, &[("a", &[1000.0, 2000.0, 3000.0, 3000.0])]),
            s(60),
        );
        w.push(
            snapshot(t0 + s(5), &[("a", &[1000.0, 2000.0, 3000.0, 3000.0])]),
            s(60),
        );
        // The pod restarted: counts start again from zero.
        w.push(snapshot(t0 + s(10), &[("a", &[0.0, 4.0, 4.0, 4.0])]), s(60));
        w.push(snapshot(t0 + s(15), &[("a", &[0.0, 8.0, 8.0, 8.0])]), s(60));
        let inc = window_increase(w.snapshots.iter()).expect("increase");
        assert_eq!(inc.counts, vec![0.0, 8.0, 8.0, 8.0]);
        let p95 = w.quantile(0.95).expect("requests seen");
        assert!((0.5..=1.0).contains(&p95), "{p95}");
    }

    #[test]
    fn pods_joining_count_from_first_sight_and_leaving_pods_are_dropped() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = TtftWindow::default();
        w.push(
            snapshot(
                t0,
                &[
                    ("a", &[0.0, 0.0, 0.0, 0.0]),
                    ("gone", &[0.0, 0.0, 0.0, 0.0]),
                ],
            ),
            s(60),
        );
        w.push(
            snapshot(
                t0 + s(5),
                &[
                    ("a", &[0.0, 0.0, 10.0, 10.0]),
                    ("gone", &[0.0, 0.0, 0.0, 50.0]),
                    ("new", &[500.0, 500.0, 500.0, 500.0]),
                ],
            ),
            s(60),
        );
        w.push(
            snapshot(
                t0 + s(10),
                &[
                    ("a", &[0.0, 0.0, 10.0, 10.0]),
                    ("new", &[510.0, 510.0, 510.0, 510.0]),
                ],
            ),
            s(60),
        );
        let inc = window_increase(w.snapshots.iter()).expect("increase");
        // a: +10 in (1,2]; new: +10 in (0,0.5] (not its 500 lifetime); gone: dropped
        assert_eq!(inc.counts, vec![10.0, 10.0, 20.0, 20.0]);
    }

    #[test]
    fn window_forgets_old_snapshots_but_keeps_a_baseline() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = TtftWindow::default();
        for i in 0..30u64 {
            let n = i as f64;
            w.push(snapshot(t0 + s(5 * i), &[("a", &[0.0, n, n, n])]), s(60));
        }
        // 60 s window at 5 s: 13 snapshots (12 steps) plus at most one baseline.
        assert!((13..=14).contains(&w.len()), "{}", w.len());
        let inc = window_increase(w.snapshots.iter()).expect("increase");
        assert!((12.0..=13.0).contains(&inc.counts[3]), "{:?}", inc.counts);
    }

    #[test]
    fn an_empty_window_means_no_requests() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = TtftWindow::default();
        w.push(snapshot(t0, &[("a", &[3.0, 3.0, 3.0, 3.0])]), s(60));
        w.push(snapshot(t0 + s(5), &[("a", &[3.0, 3.0, 3.0, 3.0])]), s(60));
        assert_eq!(w.quantile(0.95), None);
    }
}
