//! Results: means over seeds, the stdout table, the Markdown table, CSV.

use std::fmt::Write as _;

use super::policies::PolicyKind;
use super::run::{RunResult, Trace};

/// The mean over seeds of one scenario × policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Policy.
    pub policy: PolicyKind,
    /// Seeds averaged.
    pub seeds: usize,
    /// SLO attainment, 0–1.
    pub slo_attainment: f64,
    /// TTFT p50, seconds.
    pub ttft_p50: f64,
    /// TTFT p95, seconds.
    pub ttft_p95: f64,
    /// TTFT p99, seconds.
    pub ttft_p99: f64,
    /// Replica-hours, warm-up included.
    pub replica_hours: f64,
    /// Peak replicas.
    pub peak_replicas: f64,
    /// Scale events.
    pub scale_events: f64,
    /// Minutes under-provisioned.
    pub under_provisioned_minutes: f64,
    /// Replica-hours over the oracle's, both means over the same seeds (the oracle's own
    /// row: 1).
    pub replica_hours_vs_oracle: Option<f64>,
}

/// Means over seeds, per scenario × policy, in first-seen order.
pub fn summarize(results: &[RunResult]) -> Vec<Summary> {
    let mut keys: Vec<(String, PolicyKind)> = Vec::new();
    for r in results {
        let key = (r.scenario.clone(), r.policy);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut summaries: Vec<Summary> = keys
        .into_iter()
        .map(|(scenario, policy)| {
            let runs: Vec<&RunResult> = results
                .iter()
                .filter(|r| r.scenario == scenario && r.policy == policy)
                .collect();
            let n = runs.len().max(1) as f64;
            let mean = |f: &dyn Fn(&RunResult) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
            Summary {
                seeds: runs.len(),
                slo_attainment: mean(&|r| r.slo_attainment),
                ttft_p50: mean(&|r| r.ttft_p50),
                ttft_p95: mean(&|r| r.ttft_p95),
                ttft_p99: mean(&|r| r.ttft_p99),
                replica_hours: mean(&|r| r.replica_hours),
                peak_replicas: mean(&|r| f64::from(r.peak_replicas)),
                scale_events: mean(&|r| f64::from(r.scale_events)),
                under_provisioned_minutes: mean(&|r| f64::from(r.under_provisioned_minutes)),
                replica_hours_vs_oracle: None,
                scenario,
                policy,
            }
        })
        .collect();
    versus_oracle(&mut summaries);
    summaries
}

/// Fill `replica_hours_vs_oracle` from each scenario's oracle row.
fn versus_oracle(summaries: &mut [Summary]) {
    let oracles: Vec<(String, f64)> = summaries
        .iter()
        .filter(|s| s.policy == PolicyKind::Oracle)
        .map(|s| (s.scenario.clone(), s.replica_hours))
        .collect();
    for s in summaries.iter_mut() {
        s.replica_hours_vs_oracle = oracles
            .iter()
            .find(|(scenario, hours)| *scenario == s.scenario && *hours > 0.0)
            .map(|(_, hours)| s.replica_hours / hours);
    }
}

/// Replica-hours relative to the seed ScaledObject's in the same scenario.
fn versus_seed(summaries: &[Summary], s: &Summary) -> Option<f64> {
    let seed = summaries
        .iter()
        .find(|o| o.scenario == s.scenario && o.policy == PolicyKind::Seed)?;
    (seed.replica_hours > 0.0).then(|| 100.0 * (s.replica_hours / seed.replica_hours - 1.0))
}

fn seconds(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "inf".to_owned()
    }
}

fn percent_change(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |p| format!("{p:+.1}%"))
}

const COLUMNS: [&str; 12] = [
    "scenario",
    "policy",
    "SLO met",
    "TTFT p50 s",
    "p95 s",
    "p99 s",
    "replica-h",
    "vs oracle",
    "vs seed",
    "peak",
    "scale events",
    "under-prov. min",
];

fn rows(summaries: &[Summary]) -> Vec<[String; 12]> {
    summaries
        .iter()
        .map(|s| {
            // The oracle is a bound on GPU-hours: it serves no requests of its own.
            let bound = s.policy == PolicyKind::Oracle;
            let latency = |v: f64| if bound { "-".to_owned() } else { seconds(v) };
            [
                s.scenario.clone(),
                s.policy.name().to_owned(),
                if bound {
                    "-".to_owned()
                } else {
                    format!("{:.2}%", 100.0 * s.slo_attainment)
                },
                latency(s.ttft_p50),
                latency(s.ttft_p95),
                latency(s.ttft_p99),
                format!("{:.2}", s.replica_hours),
                s.replica_hours_vs_oracle
                    .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}×")),
                percent_change(versus_seed(summaries, s)),
                format!("{:.1}", s.peak_replicas),
                format!("{:.1}", s.scale_events),
                format!("{:.1}", s.under_provisioned_minutes),
            ]
        })
        .collect()
}

/// The table for a terminal: aligned columns.
pub fn text_table(summaries: &[Summary]) -> String {
    let rows = rows(summaries);
    let mut widths = COLUMNS.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w - cell.chars().count();
            if i < 2 {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(&COLUMNS.map(str::to_owned), &mut out);
    for row in &rows {
        line(row, &mut out);
    }
    out
}

/// The table in Markdown (for the README).
pub fn markdown_table(summaries: &[Summary]) -> String {
    let mut out = format!("| {} |\n", COLUMNS.join(" | "));
    out.push_str("|---|---|");
    out.push_str(&"---:|".repeat(COLUMNS.len() - 2));
    out.push('\n');
    for row in rows(summaries) {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// One CSV row per run.
pub fn runs_csv(results: &[RunResult]) -> String {
    let mut out = String::from(
        "scenario,policy,seed,requests,slo_attainment,ttft_p50_s,ttft_p95_s,ttft_p99_s,replica_hours,peak_replicas,scale_events,under_provisioned_minutes,scaler_errors\n",
        // The oracle's rows leave the latency fields empty: it is a bound, not a fleet.
    );
    for r in results {
        let bound = r.policy == PolicyKind::Oracle;
        let field = |v: f64, digits: usize| {
            if bound {
                String::new()
            } else {
                format!("{v:.digits$}")
            }
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{:.4},{},{},{},{}",
            r.scenario,
            r.policy.name(),
            r.seed,
            r.requests,
            field(r.slo_attainment, 6),
            field(r.ttft_p50, 4),
            field(r.ttft_p95, 4),
            field(r.ttft_p99, 4),
            r.replica_hours,
            r.peak_replicas,
            r.scale_events,
            r.under_provisioned_minutes,
            r.scaler_errors
        );
    }
    out
}

/// One CSV row per scenario × policy (means over seeds).
pub fn summary_csv(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "scenario,policy,seeds,slo_attainment,ttft_p50_s,ttft_p95_s,ttft_p99_s,replica_hours,replica_hours_vs_seed_percent,peak_replicas,scale_events,under_provisioned_minutes,replica_hours_vs_oracle\n",
    );
    for s in summaries {
        let bound = s.policy == PolicyKind::Oracle;
        let field = |v: f64, digits: usize| {
            if bound {
                String::new()
            } else {
                format!("{v:.digits$}")
            }
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{:.4},{},{:.2},{:.2},{:.2},{}",
            s.scenario,
            s.policy.name(),
            s.seeds,
            field(s.slo_attainment, 6),
            field(s.ttft_p50, 4),
            field(s.ttft_p95, 4),
            field(s.ttft_p99, 4),
            s.replica_hours,
            versus_seed(summaries, s).map_or_else(String::new, |p| format!("{p:.2}")),
            s.peak_replicas,
            s.scale_events,
            s.under_provisioned_minutes,
            s.replica_hours_vs_oracle
                .map_or_else(String::new, |x| format!("{x:.4}")),
        );
    }
    out
}

/// The time series of recorded runs: one row per policy and 5 s, with the
/// containing minute's arrivals, needed replicas and TTFT p95, and the `μ`
/// this scaler's capacity trigger used (empty for other policies).
pub fn series_csv(traces: &[(PolicyKind, Trace)]) -> String {
    let mut out = String::from(
        "policy,t_seconds,replicas,ready,waiting,running,minute_arrivals,needed_replicas,minute_ttft_p95_s,drain_rate\n",
    );
    for (policy, trace) in traces {
        for p in &trace.series {
            let minute = trace.minutes.get(((p.t - 1.0).max(0.0) / 60.0) as usize);
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{}",
                policy.name(),
                p.t,
                p.replicas,
                p.ready,
                p.waiting,
                p.running,
                minute.map_or(0, |m| m.arrivals),
                minute.map_or_else(String::new, |m| format!("{:.3}", m.needed_replicas)),
                minute
                    .and_then(|m| m.ttft_p95)
                    .map_or_else(String::new, |v| format!("{v:.3}")),
                p.drain_rate.map_or_else(String::new, |v| format!("{v:.3}")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(policy: PolicyKind, seed: u64, slo: f64, hours: f64) -> RunResult {
        RunResult {
            scenario: "step".to_owned(),
            policy,
            seed,
            requests: 100,
            slo_attainment: slo,
            ttft_p50: 0.2,
            ttft_p95: 1.0,
            ttft_p99: f64::INFINITY,
            replica_hours: hours,
            peak_replicas: 4,
            scale_events: 3,
            under_provisioned_minutes: 1,
            scaler_errors: 0,
            learned_mu_errors: Vec::new(),
        }
    }

    #[test]
    fn means_and_relative_hours() {
        let results = [
            result(PolicyKind::Seed, 0, 0.9, 10.0),
            result(PolicyKind::Seed, 1, 0.8, 12.0),
            result(PolicyKind::Capacity, 0, 1.0, 8.0),
            result(PolicyKind::Capacity, 1, 0.9, 8.5),
            result(PolicyKind::Oracle, 0, f64::NAN, 4.0),
            result(PolicyKind::Oracle, 1, f64::NAN, 4.25),
        ];
        let summaries = summarize(&results);
        assert_eq!(summaries.len(), 3);
        assert_eq!(summaries[1].replica_hours_vs_oracle, Some(2.0));
        assert_eq!(summaries[2].replica_hours_vs_oracle, Some(1.0));
        assert!((summaries[0].slo_attainment - 0.85).abs() < 1e-12);
        assert_eq!(summaries[1].replica_hours, 8.25);
        assert_eq!(versus_seed(&summaries, &summaries[1]), Some(-25.0));
        let table = text_table(&summaries);
        assert!(table.contains("-25.0%") && table.contains("inf"), "{table}");
        assert!(table.contains("2.00×"), "{table}");
        let md = markdown_table(&summaries);
        assert_eq!(md.lines().count(), 5);
        assert_eq!(runs_csv(&results).lines().count(), 7);
        let csv = summary_csv(&summaries);
        assert_eq!(csv.lines().count(), 4);
        // The oracle's row has no latency: it is a bound.
        assert!(
            csv.lines()
                .any(|l| l.starts_with("step,oracle,2,,,,,4.1250")),
            "{csv}"
        );
    }
}
