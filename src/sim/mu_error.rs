//! How far the learned `μ` is from the pod model's: issue 13's convergence targets as a
//! benchmark over every seed, not a test of one.
//!
//! At each poll of a run the `default` trigger's `μ` (what its `/explain` would show) is
//! compared with the pod model's `μ` for the mix of that moment. Only *settled* polls count:
//! from [`SETTLE_SECONDS`] into the run on, and not within [`AFTER_CHANGE_SECONDS`] of a change
//! of the mix (`drift`'s outputs doubling). The target is every settled poll within
//! [`WITHIN`] of the model's. Together with `--warmup-seconds 0` (no warm start) and
//! `--prior-factor F` (a `drainRatePerReplica` F times the model's) this measures convergence
//! from a wrong load test, or from none.

use std::fmt::Write as _;

use super::arrivals::Scenario;
use super::model::PodModel;

/// Polls before this (seconds from `t = 0`) are the learning period, not judged.
pub const SETTLE_SECONDS: f64 = 900.0;
/// After the mix changes the learned `μ` has this long to follow it.
pub const AFTER_CHANGE_SECONDS: f64 = 600.0;
/// A settled poll's `μ` should be within this fraction of the model's.
pub const WITHIN: f64 = 0.10;

/// The pod model's `μ` over a run.
#[derive(Debug, Clone, Copy)]
pub struct ModelMu<'a> {
    pod: &'a PodModel,
    scenario: &'a Scenario,
    /// A request-level trace's `μ` over all its requests (what `simulate` prints).
    whole_trace: f64,
}

impl<'a> ModelMu<'a> {
    /// `whole_trace`: the scenario's `μ` as `simulate` prints it (a trace's over all its
    /// requests), computed once by the caller.
    pub fn new(pod: &'a PodModel, scenario: &'a Scenario, whole_trace: f64) -> ModelMu<'a> {
        ModelMu {
            pod,
            scenario,
            whole_trace,
        }
    }

    /// The model's `μ` at `t`: a request-level trace's over all its requests, a built-in
    /// shape's for the mix it draws at `t`.
    pub fn at(&self, t: f64) -> f64 {
        if self.scenario.is_request_level() {
            self.whole_trace
        } else {
            self.pod
                .saturated_throughput(self.scenario.mix_at(t).means())
        }
    }

    /// The model's `μ` at `t` if the poll at `t` is judged, `None` if it is not.
    pub fn settled(&self, t: f64) -> Option<f64> {
        let now = self.at(t);
        (t >= SETTLE_SECONDS && self.at(t - AFTER_CHANGE_SECONDS) == now).then_some(now)
    }
}

/// What a settled poll is, in words, for the table's caption.
pub fn settled_caption() -> String {
    format!(
        "settled polls: from {:.0} minutes on, and {:.0} minutes after the mix changes",
        SETTLE_SECONDS / 60.0,
        AFTER_CHANGE_SECONDS / 60.0
    )
}

/// One scenario's learned `μ` over its seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct MuSummary {
    /// Scenario name.
    pub scenario: String,
    /// Settled polls, all seeds.
    pub polls: usize,
    /// Share of them within [`WITHIN`] of the model's `μ`.
    pub within: f64,
    /// Median of `learned/model − 1` (signed: below 0 is fewer requests/s than the pod does).
    pub median: f64,
    /// The settled poll furthest from the model's, signed.
    pub worst: f64,
}

/// Per scenario, the runs' settled errors (`(scenario, errors)` per run) pooled over seeds.
pub fn summarize<'a>(runs: impl IntoIterator<Item = (&'a str, &'a [f64])>) -> Vec<MuSummary> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    for (scenario, run) in runs {
        match out.iter_mut().find(|(name, _)| name == scenario) {
            Some((_, errors)) => errors.extend(run),
            None => out.push((scenario.to_owned(), run.to_vec())),
        }
    }
    out.into_iter()
        .filter(|(_, errors)| !errors.is_empty())
        .map(|(scenario, mut errors)| {
            errors.sort_unstable_by(f64::total_cmp);
            let within = errors.iter().filter(|e| e.abs() <= WITHIN).count();
            let worst = errors
                .iter()
                .copied()
                .max_by(|a, b| a.abs().total_cmp(&b.abs()))
                .unwrap_or(0.0);
            MuSummary {
                scenario,
                polls: errors.len(),
                within: within as f64 / errors.len() as f64,
                median: errors[errors.len() / 2],
                worst,
            }
        })
        .collect()
}

/// The table `simulate` prints and writes to `mu.md`.
pub fn markdown_table(summaries: &[MuSummary]) -> String {
    let mut out = format!(
        "| scenario | settled polls | within ±{:.0} % | median error | worst error |\n|---|---:|---:|---:|---:|\n",
        100.0 * WITHIN
    );
    for s in summaries {
        // Rounded down, so "100%" means every poll.
        let within = if s.within >= 1.0 {
            "100%".to_owned()
        } else {
            format!("{:.1}%", (1000.0 * s.within).floor() / 10.0)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {within} | {:+.1}% | {:+.1}% |",
            s.scenario,
            s.polls,
            100.0 * s.median,
            100.0 * s.worst
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::arrivals::Builtin;

    #[test]
    fn polls_are_judged_from_fifteen_minutes_and_ten_minutes_after_the_mix_changes() {
        let pod = PodModel::default();
        let drift = Scenario::builtin(Builtin::Drift, Some(3600.0));
        let ramp = Scenario::builtin(Builtin::Ramp, Some(3600.0));
        // (scenario, t, judged): drift's outputs double at 1800 s.
        for (scenario, t, judged) in [
            (&ramp, 899.0, false),
            (&ramp, 900.0, true),
            (&ramp, 3595.0, true),
            (&drift, 1795.0, true),
            (&drift, 1800.0, false),
            (&drift, 2399.0, false),
            (&drift, 2400.0, true),
        ] {
            let model = ModelMu::new(&pod, scenario, 0.0);
            assert_eq!(
                model.settled(t).is_some(),
                judged,
                "{} at {t}",
                scenario.name
            );
        }
        let model = ModelMu::new(&pod, &drift, 0.0);
        assert!(model.at(2400.0) < 0.7 * model.at(0.0), "outputs doubled");
    }

    #[test]
    fn the_summary_pools_seeds_and_keeps_the_sign_of_the_worst() {
        let (a, b) = ([0.02, -0.05, 0.08], [-0.15, 0.01]);
        let summaries = summarize([("ramp", &a[..]), ("ramp", &b[..]), ("spike", &[][..])]);
        assert_eq!(summaries.len(), 1, "{summaries:?}");
        let s = &summaries[0];
        assert_eq!((s.scenario.as_str(), s.polls), ("ramp", 5));
        assert!((s.within - 0.8).abs() < 1e-12);
        assert_eq!(s.median, 0.01);
        assert_eq!(s.worst, -0.15);
        assert_eq!(
            markdown_table(&summaries).lines().nth(2),
            Some("| ramp | 5 | 80.0% | +1.0% | -15.0% |")
        );
        let all = summarize([("ramp", &[0.0; 3][..])]);
        assert_eq!(
            markdown_table(&all).lines().nth(2),
            Some("| ramp | 3 | 100% | +0.0% | +0.0% |")
        );
        let almost = [vec![0.0; 1999], vec![0.2]].concat();
        let almost = summarize([("ramp", &almost[..])]);
        assert!(markdown_table(&almost).contains("| 99.9% |"));
    }
}
