//! The cold-start sweep's tables: per cold start and policy, the mean SLO attainment over the
//! scenarios and the replica-hours summed over them, against the oracle's sum.

use std::fmt::Write as _;

use super::policies::PolicyKind;
use super::report::Summary;

/// One cold start × policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    /// Cold start, seconds.
    pub cold_start_seconds: f64,
    /// Policy.
    pub policy: PolicyKind,
    /// Mean over the scenarios of each one's SLO attainment (`NaN` for the oracle).
    pub slo_attainment: f64,
    /// Replica-hours summed over the scenarios.
    pub replica_hours: f64,
    /// `replica_hours` over the oracle's at the same cold start.
    pub versus_oracle: Option<f64>,
}

/// Fold `(cold start, summary)` pairs into one row per cold start × policy, in input order.
pub fn sweep_table(rows: &[(f64, Summary)]) -> Vec<SweepRow> {
    let mut out: Vec<SweepRow> = Vec::new();
    for (cold, _) in rows {
        for policy in rows.iter().map(|(_, s)| s.policy) {
            if out
                .iter()
                .any(|r| r.cold_start_seconds == *cold && r.policy == policy)
            {
                continue;
            }
            let cells: Vec<&Summary> = rows
                .iter()
                .filter(|(c, s)| c == cold && s.policy == policy)
                .map(|(_, s)| s)
                .collect();
            if cells.is_empty() {
                continue;
            }
            let n = cells.len() as f64;
            out.push(SweepRow {
                cold_start_seconds: *cold,
                policy,
                slo_attainment: cells.iter().map(|s| s.slo_attainment).sum::<f64>() / n,
                replica_hours: cells.iter().map(|s| s.replica_hours).sum(),
                versus_oracle: None,
            });
        }
    }
    let oracles: Vec<(f64, f64)> = out
        .iter()
        .filter(|r| r.policy == PolicyKind::Oracle)
        .map(|r| (r.cold_start_seconds, r.replica_hours))
        .collect();
    for row in &mut out {
        row.versus_oracle = oracles
            .iter()
            .find(|(cold, hours)| *cold == row.cold_start_seconds && *hours > 0.0)
            .map(|(_, hours)| row.replica_hours / hours);
    }
    out
}

const COLUMNS: [&str; 5] = [
    "cold start s",
    "policy",
    "SLO met",
    "replica-h",
    "vs oracle",
];

fn cells(row: &SweepRow) -> [String; 5] {
    [
        format!("{}", row.cold_start_seconds),
        row.policy.name().to_owned(),
        if row.policy == PolicyKind::Oracle {
            "-".to_owned()
        } else {
            format!("{:.2}%", 100.0 * row.slo_attainment)
        },
        format!("{:.2}", row.replica_hours),
        row.versus_oracle
            .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}×")),
    ]
}

/// The sweep for a terminal.
pub fn text(rows: &[SweepRow]) -> String {
    let body: Vec<[String; 5]> = rows.iter().map(cells).collect();
    let mut widths = COLUMNS.map(str::len);
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if i == 1 {
                let _ = write!(text, "{cell}{pad}  ");
            } else {
                let _ = write!(text, "{pad}{cell}  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&COLUMNS.map(str::to_owned));
    for row in &body {
        line(row);
    }
    out
}

/// The sweep in Markdown (for the README).
pub fn markdown(rows: &[SweepRow]) -> String {
    let mut out = format!("| {} |\n|---:|---|---:|---:|---:|\n", COLUMNS.join(" | "));
    for row in rows {
        let _ = writeln!(out, "| {} |", cells(row).join(" | "));
    }
    out
}

/// Every cold start × scenario × policy (means over seeds).
pub fn csv(rows: &[(f64, Summary)]) -> String {
    let mut out = String::from(
        "cold_start_seconds,scenario,policy,slo_attainment,replica_hours,replica_hours_vs_oracle\n",
    );
    for (cold, s) in rows {
        let _ = writeln!(
            out,
            "{cold},{},{},{},{:.4},{}",
            s.scenario,
            s.policy.name(),
            if s.policy == PolicyKind::Oracle {
                String::new()
            } else {
                format!("{:.6}", s.slo_attainment)
            },
            s.replica_hours,
            s.replica_hours_vs_oracle
                .map_or_else(String::new, |x| format!("{x:.4}")),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(scenario: &str, policy: PolicyKind, slo: f64, hours: f64) -> Summary {
        Summary {
            scenario: scenario.to_owned(),
            policy,
            seeds: 1,
            slo_attainment: slo,
            ttft_p50: 0.1,
            ttft_p95: 0.2,
            ttft_p99: 0.3,
            replica_hours: hours,
            peak_replicas: 3.0,
            scale_events: 1.0,
            under_provisioned_minutes: 0.0,
            replica_hours_vs_oracle: None,
        }
    }

    #[test]
    fn rows_average_slo_and_sum_hours_per_cold_start() {
        let rows = vec![
            (30.0, summary("a", PolicyKind::Capacity, 1.0, 4.0)),
            (30.0, summary("b", PolicyKind::Capacity, 0.9, 6.0)),
            (30.0, summary("a", PolicyKind::Oracle, f64::NAN, 2.0)),
            (30.0, summary("b", PolicyKind::Oracle, f64::NAN, 3.0)),
            (300.0, summary("a", PolicyKind::Capacity, 0.5, 8.0)),
        ];
        let table = sweep_table(&rows);
        assert_eq!(table.len(), 3);
        assert!((table[0].slo_attainment - 0.95).abs() < 1e-12);
        assert_eq!(table[0].replica_hours, 10.0);
        assert_eq!(table[0].versus_oracle, Some(2.0));
        assert_eq!(table[2].versus_oracle, None, "no oracle at 300 s");
        let text = text(&table);
        assert!(text.contains("95.00%") && text.contains("2.00×"), "{text}");
        assert_eq!(markdown(&table).lines().count(), 5);
        assert_eq!(csv(&rows).lines().count(), 6);
    }
}
