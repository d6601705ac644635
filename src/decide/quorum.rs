//! A pod-scrape reading with some pods failing: which pods still count,
//! whether enough of the fleet reports, and how the reporting pods stand in
//! for the ones left out (docs/decisions/0002).
//!
//! A failing pod's last good reading is held until `maxSignalAgeSeconds`,
//! then the pod is left out. While at least `minReportingFraction` of the
//! discovered pods report (answered or held), the trigger answers; the sums
//! (`W`, `R`, the capacity policy's rate and per-pod backlog terms) are
//! scaled by discovered / reporting, and `n` is the discovered count: a
//! left-out pod is taken to carry the reporting pods' mean load, never none.
//! Means (KV cache) and the TTFT quantile are the reporting pods' own.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::decide::fusion::Signals;
use crate::decide::signal_state::SignalState;
use crate::source::{EngineReading, Reading, SourceSpec};

/// Whether a failing pod still counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PodState {
    /// Its last good reading is younger than `maxSignalAgeSeconds` and
    /// counts in its place.
    Held,
    /// Failing for longer than `maxSignalAgeSeconds`, or it never answered:
    /// not counted; the reporting pods' values are extrapolated over it.
    LeftOut,
}

impl PodState {
    /// The `state` label of `backlog_scaler_trigger_degraded_pods`.
    pub fn as_str(self) -> &'static str {
        match self {
            PodState::Held => "held",
            PodState::LeftOut => "left_out",
        }
    }
}

/// A discovered pod whose newest scrape failed, as `/explain` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DegradedPod {
    /// The URL scraped.
    pub target: String,
    /// Held or left out.
    pub state: PodState,
    /// The kind of its newest failure (`timeout`, `http_status`, `parse`,
    /// …: `FailureKind::as_str`), the `reason` label of the self-metric.
    pub reason: &'static str,
    /// Its newest error.
    pub error: String,
    /// Its failed scrapes in a row.
    pub failed_polls: u32,
    /// Age of the last good reading it had; absent if it never answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_good_age_seconds: Option<f64>,
}

/// How the discovered pods of one reading stand.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    /// Pods the newest successful poll discovered.
    pub discovered: usize,
    /// Pods that count: answered, or held.
    pub reporting: usize,
    /// The trigger's `minReportingFraction`.
    pub min_reporting_fraction: f64,
    /// `discovered / reporting`: the factor the sums are scaled by (1 while
    /// no pod is left out).
    pub extrapolation: f64,
    /// Every failing pod, sorted by target.
    pub pods: Vec<DegradedPod>,
    /// When the first held pod passes `maxSignalAgeSeconds` (and is left
    /// out at the next evaluation).
    #[serde(skip)]
    pub recheck_at: Option<Instant>,
}

impl Fleet {
    /// True while enough of the discovered pods report.
    pub fn has_quorum(&self) -> bool {
        // Exact for the fractions people write (2 of 3 at 0.5, 3 of 4 at
        // 0.75), not undone by the rounding of `fraction × discovered`.
        self.discovered == 0
            || self.reporting as f64 >= self.min_reporting_fraction * self.discovered as f64 - 1e-9
    }

    /// The left-out pods, as the `UNAVAILABLE` reason names them.
    pub fn left_out(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|p| p.state == PodState::LeftOut)
            .map(|p| format!("{} ({} failed polls)", p.error, p.failed_polls))
            .collect()
    }

    /// Pods per (state, reason), for the self-metric.
    pub fn counts(&self) -> Vec<(PodState, &'static str, usize)> {
        let mut counts: Vec<(PodState, &'static str, usize)> = Vec::new();
        for pod in &self.pods {
            match counts
                .iter_mut()
                .find(|(s, r, _)| *s == pod.state && *r == pod.reason)
            {
                Some((_, _, n)) => *n += 1,
                None => counts.push((pod.state, pod.reason, 1)),
            }
        }
        counts
    }
}

/// A pod-scrape source's reading with its failing pods folded in: the
/// answered pods and the held ones, sorted by target, and how the fleet
/// stands. `None` unless `source` scrapes pods, has a good reading, and
/// some pod of it is failing.
pub fn merge(
    source: &SourceSpec,
    state: &SignalState,
    now: Instant,
    max_age: Duration,
    min_reporting_fraction: f64,
) -> Option<(Reading, Fleet)> {
    let (SourceSpec::Engine(_), Some(good)) = (source, &state.last_good) else {
        return None;
    };
    let Reading::Engine(answered) = &good.value else {
        return None;
    };
    if state.failing_pods.is_empty() {
        return None;
    }
    let mut reading: EngineReading = answered.clone();
    let mut pods = Vec::with_capacity(state.failing_pods.len());
    let mut recheck_at: Option<Instant> = None;
    for failing in &state.failing_pods {
        let age = failing
            .last_good
            .as_ref()
            .map(|g| now.saturating_duration_since(g.at));
        let held = match (&failing.last_good, age) {
            (Some(good), Some(age)) if age <= max_age => {
                reading.pods.push(good.value.clone());
                let expires = good.at + max_age;
                recheck_at = Some(recheck_at.map_or(expires, |r| r.min(expires)));
                true
            }
            _ => false,
        };
        let error = &failing.last_failure.value;
        pods.push(DegradedPod {
            target: failing.target.clone(),
            state: if held {
                PodState::Held
            } else {
                PodState::LeftOut
            },
            reason: error.kind().as_str(),
            error: error.to_string(),
            failed_polls: failing.consecutive_failures,
            last_good_age_seconds: age.map(|a| a.as_secs_f64()),
        });
    }
    reading.pods.sort_by(|a, b| a.target.cmp(&b.target));
    let discovered = answered.pods.len() + state.failing_pods.len();
    let reporting = reading.pods.len();
    let fleet = Fleet {
        discovered,
        reporting,
        min_reporting_fraction,
        extrapolation: if reporting > 0 {
            discovered as f64 / reporting as f64
        } else {
            1.0
        },
        pods,
        recheck_at,
    };
    Some((Reading::Engine(reading), fleet))
}

/// Stand the reporting pods in for the left-out ones: sums scaled by
/// `discovered / reporting`, `n` the discovered count. Nothing changes
/// while every discovered pod reports.
pub fn extrapolate(signals: &mut Signals, fleet: &Fleet) {
    if fleet.reporting == 0 || fleet.reporting >= fleet.discovered {
        return;
    }
    let factor = fleet.extrapolation;
    signals.waiting *= factor;
    signals.running = signals.running.map(|r| r * factor);
    signals.replicas_reporting = fleet.discovered;
    if let Some(estimate) = signals.capacity.as_mut() {
        // The rate was measured on the reporting pods' counters: the
        // arrivals routed to them. Scale what is shown with it, so the
        // explained formula adds up.
        estimate.arrival_rate *= factor;
        estimate.smoothed_rate *= factor;
        estimate.peak_rate *= factor;
        estimate.rate_term *= factor;
        estimate.pod_backlog_term *= factor;
    }
}

#[cfg(test)]
mod tests;
