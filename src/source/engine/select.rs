//! Which series of one pod's gauge family count, and how they combine into
//! one number per pod (shared/reference/signals.md §3, §8).
//!
//! Most engines write one series per data-parallel engine, summed (`W`, `R`)
//! or averaged (KV usage). SGLang repeats its scheduler gauges: every
//! scheduler process that logs writes one series (with DP attention only each
//! group's attention-TP rank 0 logs, under a *global* `tp_rank` 0, k, 2k…;
//! every pipeline stage logs the same requests, relayed from stage 0), and
//! priority scheduling writes each queue gauge twice, the total under
//! `priority=""` and a breakdown under `priority="<n>"`. Summing all of that
//! counts a request several times, so per data-parallel group (all labels but
//! the rank and priority labels) one scheduler is read, the lowest
//! (`pp_rank`, `tp_rank`), and of its series the `priority=""` total, or the
//! breakdown summed when there is no total, never both.

use std::collections::BTreeMap;

use super::names::SchedulerRanks;
use crate::source::prom_text::Sample;

/// How one pod's series of a signal make one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Combine {
    /// Requests: every group holds its own.
    Sum,
    /// A usage fraction: every group has its own cache.
    Mean,
}

/// The number read and a description of where it came from, for `/explain`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Selected {
    /// The combined value.
    pub value: f64,
    /// E.g. `sglang:num_queue_reqs{priority=""} ×2 groups (tp_rank 0,4)`.
    pub read: String,
}

/// Combine `series` (one family, already narrowed to the model and to
/// `selection`, written into the description, e.g. `reason="capacity"`).
/// `Ok(None)` when there are none; a NaN, infinite or negative value is an
/// error naming the family.
pub(super) fn combine(
    series: &[Sample<'_>],
    selection: &str,
    scheduler: Option<&SchedulerRanks>,
    how: Combine,
) -> Result<Option<Selected>, String> {
    let Some(first) = series.first() else {
        return Ok(None);
    };
    let name = first.name;
    if let Some(bad) = series
        .iter()
        .find(|s| !(s.value.is_finite() && s.value >= 0.0))
    {
        return Err(format!(
            "{} has value {}, not a count or fraction",
            bad.name, bad.value
        ));
    }
    let Some(ranks) = scheduler else {
        let values: Vec<f64> = series.iter().map(|s| s.value).collect();
        return Ok(Some(Selected {
            value: fold(&values, how),
            read: describe(name, selection, how, values.len(), "series"),
        }));
    };
    let mut groups: BTreeMap<Vec<(String, String)>, Vec<&Sample<'_>>> = BTreeMap::new();
    for s in series {
        let key: Vec<(String, String)> = s
            .labels()
            .filter(|(k, _)| {
                !ranks.ranks.contains(k) && !ranks.rank_attached.contains(k) && *k != ranks.priority
            })
            .map(|(k, v)| (k.to_owned(), v.into_owned()))
            .collect();
        groups.entry(key).or_default().push(s);
    }
    let mut values = Vec::with_capacity(groups.len());
    let mut read_ranks = Vec::with_capacity(groups.len());
    let (mut totals, mut breakdowns, mut has_priority) = (0, 0, false);
    for members in groups.values() {
        let rank_of = |s: &Sample<'_>| -> Vec<u64> {
            ranks
                .ranks
                .iter()
                .map(|r| match s.label(r) {
                    None => 0,
                    Some(v) => v.parse().unwrap_or(u64::MAX),
                })
                .collect()
        };
        let Some(lowest) = members.iter().map(|s| rank_of(s)).min() else {
            continue;
        };
        let scheduler: Vec<&&Sample<'_>> =
            members.iter().filter(|s| rank_of(s) == lowest).collect();
        if let Some(last) = ranks.ranks.last()
            && let Some(rank) = scheduler.first().and_then(|s| s.label(last))
        {
            read_ranks.push(rank.into_owned());
        }
        has_priority |= scheduler.iter().any(|s| s.label(ranks.priority).is_some());
        let total: Vec<f64> = scheduler
            .iter()
            .filter(|s| s.label(ranks.priority).is_none_or(|p| p.is_empty()))
            .map(|s| s.value)
            .collect();
        if total.is_empty() {
            breakdowns += 1;
            values.push(scheduler.iter().map(|s| s.value).sum());
        } else {
            totals += 1;
            values.push(total.iter().sum());
        }
    }
    let priority_note = match (has_priority, totals, breakdowns) {
        (false, ..) => String::new(),
        (true, _, 0) => format!("{}=\"\"", ranks.priority),
        (true, 0, _) => format!("{}!=\"\" summed", ranks.priority),
        (true, ..) => format!("{}=\"\" or its breakdown summed", ranks.priority),
    };
    let selection = [selection, priority_note.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    let mut read = describe(name, &selection, how, values.len(), "groups");
    if let Some(last) = ranks.ranks.last()
        && !read_ranks.is_empty()
    {
        read.push_str(&format!(" ({last} {})", read_ranks.join(",")));
    }
    Ok(Some(Selected {
        value: fold(&values, how),
        read,
    }))
}

fn fold(values: &[f64], how: Combine) -> f64 {
    let sum: f64 = values.iter().sum();
    match how {
        Combine::Sum => sum,
        Combine::Mean if values.is_empty() => 0.0,
        Combine::Mean => sum / values.len() as f64,
    }
}

fn describe(name: &str, selection: &str, how: Combine, n: usize, unit: &str) -> String {
    let selection = if selection.is_empty() {
        String::new()
    } else {
        format!("{{{selection}}}")
    };
    let unit = match (n, unit) {
        (1, "groups") => "group",
        _ => unit,
    };
    match how {
        Combine::Sum => format!("{name}{selection} ×{n} {unit}"),
        Combine::Mean => format!("{name}{selection} mean of {n} {unit}"),
    }
}
