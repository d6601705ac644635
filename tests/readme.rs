//! The README's reference tables against the code, read at run time:
//!
//! - every metadata key the registry accepts (`trigger::keys::ALL`, KEDA's
//!   own keys, the KEDA names read as aliases or refused) is in the README's
//!   "Metadata reference", and every key its tables name is one the code
//!   reads (folded through the same `Metadata::fold` the server uses);
//! - every self-metric the telemetry registry exports, its labels and the
//!   values of its enumerated labels (`component`, `guard`, `outcome`) are in
//!   the "Admin HTTP and self-metrics" table, and that table names nothing the
//!   registry does not export.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use backlog_scaler::decide::capacity::{CapacityState, PodCounters};
use backlog_scaler::decide::fusion::{
    CapacityParams, FusionParams, GpuGuard, LatencyGuard, Policy, Signals, fuse,
};
use backlog_scaler::decide::quorum::PodState;
use backlog_scaler::runtime::telemetry::{Telemetry, TriggerLabels};
use backlog_scaler::source::PollOutcome;
use backlog_scaler::trigger::{Metadata, MetadataError, keys};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

/// The text of the `## heading` section, up to the next `## ` heading.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("the README has no `## {heading}` section"));
    let body = &text[start + 1..];
    let end = body[3..].find("\n## ").map_or(body.len(), |i| i + 3);
    &body[..end]
}

/// The cells of a table row (`\|` is a literal bar inside a cell).
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner
        .replace("\\|", "\u{0}")
        .split('|')
        .map(|c| c.replace('\u{0}', "|").trim().to_owned())
        .collect()
}

/// Every table of `text` as `(header cells, body rows)`.
fn tables(text: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let is_separator = |l: &str| l.trim_start().starts_with("|---") || l.contains("|---|");
        if line.trim_start().starts_with('|') && lines.peek().is_some_and(|l| is_separator(l)) {
            lines.next();
            let mut rows = Vec::new();
            while let Some(row) = lines.next_if(|l| l.trim_start().starts_with('|')) {
                rows.push(cells(row));
            }
            out.push((cells(line), rows));
        }
    }
    out
}

/// Every `` `code` `` span of a cell.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

fn is_key_name(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The keys the README's metadata tables (header `key`) list in their first
/// column, each with the number of rows naming it.
fn documented_keys(reference: &str) -> BTreeMap<String, usize> {
    let mut keys = BTreeMap::new();
    for (header, rows) in tables(reference) {
        if header.first().map(String::as_str) != Some("key") {
            continue;
        }
        for row in rows {
            for key in code_spans(&row[0]).into_iter().filter(|k| is_key_name(k)) {
                *keys.entry(key.to_owned()).or_insert(0) += 1;
            }
        }
    }
    keys
}

#[test]
fn every_registered_key_is_in_the_metadata_reference_and_back() {
    let text = readme();
    let reference = section(&text, "Metadata reference");
    let documented = documented_keys(reference);
    assert!(
        documented.len() > 40,
        "the metadata tables were not found: {documented:?}"
    );
    let mentioned: BTreeSet<&str> = code_spans(reference).into_iter().collect();

    // Code → README: each key of the registry has its row; `authProfile`
    // serves the engine and the broker side and has a row in each table.
    let mut missing = Vec::new();
    for key in keys::ALL.iter().chain(keys::KEDAS) {
        if !documented.contains_key(*key) {
            missing.push(*key);
        }
    }
    assert!(
        missing.is_empty(),
        "keys the scaler reads but the README's metadata tables do not list: {missing:?}"
    );
    // KEDA's names, read as ours, refused with a mapping or renamed here,
    // are named in the reference (in a row or the text around the tables).
    let keda_names = keys::KEDA_ALIASES
        .iter()
        .map(|(alias, _)| *alias)
        .chain(keys::KEDA_REFUSED.iter().copied())
        .chain(keys::KEDA_RENAMED.iter().map(|(keda, _)| *keda));
    let unmentioned: Vec<&str> = keda_names.filter(|k| !mentioned.contains(k)).collect();
    assert!(
        unmentioned.is_empty(),
        "KEDA scaler names the scaler aliases or refuses, not in the metadata reference: {unmentioned:?}"
    );

    // README → code: every key a table lists is one the server's own fold
    // recognises (a key, KEDA's own, an alias, or a KEDA name it refuses
    // with what to write instead), never "unknown key".
    let mut unknown = Vec::new();
    for key in documented.keys() {
        let mut errors = Vec::new();
        let _ = Metadata::fold([(key.as_str(), "1")], &mut errors);
        if errors
            .iter()
            .any(|e| matches!(e, MetadataError::Unknown { .. }))
        {
            unknown.push(key.as_str());
        }
    }
    assert!(
        unknown.is_empty(),
        "the README's metadata tables list keys the scaler does not read: {unknown:?}"
    );
    for key in documented.keys() {
        // One row per key (KEDA's names may also be named in their key's row).
        let once = key != keys::AUTH_PROFILE && keys::ALL.contains(&key.as_str());
        assert!(
            !once || documented[key] == 1,
            "`{key}` has {} rows in the metadata tables",
            documented[key]
        );
    }
}

/// Every poll outcome. The match fails to compile when a variant is added:
/// add it to the list.
fn every_outcome() -> [PollOutcome; 4] {
    let all = [
        PollOutcome::Ok,
        PollOutcome::Timeout,
        PollOutcome::UpstreamError,
        PollOutcome::ParseError,
    ];
    for outcome in all {
        match outcome {
            PollOutcome::Ok
            | PollOutcome::Timeout
            | PollOutcome::UpstreamError
            | PollOutcome::ParseError => {}
        }
    }
    all
}

/// A registry with a series in every family: a decision with every term
/// configured, a `capacity` trigger's decision, a left-out pod, every poll
/// outcome, a timed gRPC call.
fn exposition() -> String {
    let telemetry = Telemetry::new();
    let labels = TriggerLabels {
        namespace: "ns".into(),
        name: "so".into(),
        metric: "backlog".into(),
    };
    let mut params = FusionParams::with_target(10.0);
    params.running_per_replica = Some(32.0);
    params.kv_cache_target = Some(0.8);
    params.latency = Some(LatencyGuard {
        slo_seconds: 1.0,
        tolerance: 0.1,
    });
    params.gpu = Some(GpuGuard {
        busy_percent: Some(90.0),
        idle_percent: None,
    });
    let signals = Signals {
        waiting: 4.0,
        running: Some(16.0),
        replicas_reporting: 2,
        ttft_seconds: Some(1.5),
        kv_cache_usage: Some(0.5),
        gpu_utilization: Some(95.0),
        broker_backlog: Some(3.0),
        ..Signals::default()
    };
    let decision = fuse(&params, &signals);
    telemetry.record_decision(&labels, &decision, false);
    telemetry.record_shadow(&labels, &decision);
    // A trigger with a failing pod: the degraded-pods family has a series
    // only then.
    telemetry.record_degraded_pods(&labels, &[(PodState::LeftOut, "timeout", 1)]);
    for outcome in every_outcome() {
        telemetry.record_poll("pod", outcome, Duration::from_millis(3), 1);
    }
    telemetry.record_grpc("GetMetrics", tonic::Code::Ok);
    telemetry.record_grpc_duration("GetMetrics", Duration::from_micros(300));
    // Only a `capacity` trigger's decision carries the capacity families.
    let capacity_params = CapacityParams {
        drain_rate_per_replica: Some(2.0),
        arrival_smoothing_seconds: 15.0,
        peak_hold_seconds: 600.0,
        headroom: 0.2,
        drain_horizon_seconds: 30.0,
        learn_drain_rate: true,
    };
    let pod = PodCounters {
        pod: "pod".into(),
        waiting: 4.0,
        running: 16.0,
        finished_total: Some(100.0),
        kv_cache_usage: Some(0.5),
        generation_tokens_total: None,
        prompt_tokens_total: None,
    };
    let estimate = CapacityState::default().observe(&capacity_params, 0.0, &[pod], Some(32.0));
    params.policy = Policy::Capacity(capacity_params);
    let capacity = fuse(
        &params,
        &Signals {
            capacity: Some(estimate),
            ..signals
        },
    );
    let capacity_labels = TriggerLabels {
        name: "capacity".into(),
        ..labels.clone()
    };
    telemetry.record_decision(&capacity_labels, &capacity, false);
    telemetry.set_triggers(1);
    telemetry.add_pollers(1);
    telemetry.encode()
}

/// What the registry exports, per name a user queries: its label names and
/// every label value seen. Counters are queried as `NAME_total`, histograms
/// by their family name (`_bucket`, `_sum`, `_count` and `le` are the
/// format's).
#[derive(Debug, Default)]
struct Exported {
    labels: BTreeSet<String>,
    values: BTreeMap<String, BTreeSet<String>>,
}

fn exported() -> BTreeMap<String, Exported> {
    let text = exposition();
    let mut types = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE NAME KIND");
            types.insert(name.to_owned(), kind.to_owned());
        }
    }
    let mut out: BTreeMap<String, Exported> = BTreeMap::new();
    for (family, kind) in &types {
        let name = match kind.as_str() {
            "counter" => format!("{family}_total"),
            _ => family.clone(),
        };
        out.entry(name).or_default();
    }
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, _) = line.rsplit_once(' ').expect("NAME{LABELS} VALUE");
        let (sample, labels) = series.split_once('{').unwrap_or((series, "}"));
        let family = types
            .keys()
            .filter(|f| sample.starts_with(f.as_str()))
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("sample {sample} has no # TYPE"));
        let name = match types[family].as_str() {
            "counter" => format!("{family}_total"),
            _ => family.clone(),
        };
        let entry = out.entry(name).or_default();
        for pair in labels
            .trim_end_matches('}')
            .split(',')
            .filter(|p| !p.is_empty())
        {
            let (label, value) = pair.split_once('=').expect("label=\"value\"");
            if label == "le" {
                continue;
            }
            entry.labels.insert(label.to_owned());
            entry
                .values
                .entry(label.to_owned())
                .or_default()
                .insert(value.trim_matches('"').to_owned());
        }
    }
    out
}

/// The labels whose every value the README lists.
const ENUMERATED: [&str; 3] = ["component", "guard", "outcome"];

#[test]
fn every_exported_self_metric_is_in_the_readme_table_and_back() {
    let exported = exported();
    assert!(
        exported.contains_key("backlog_scaler_guard_fired")
            && exported["backlog_scaler_polls_total"]
                .labels
                .contains("outcome"),
        "the exposition was not read: {exported:?}"
    );
    // Every value an enumerated label can take: the telemetry's own lists
    // and every poll outcome, which the exposition above must show too.
    let mut all_values: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    all_values.insert("component", owned(Telemetry::component_names()));
    all_values.insert("guard", owned(Telemetry::guard_names()));
    all_values.insert(
        "outcome",
        every_outcome()
            .iter()
            .map(|o| o.as_str().to_owned())
            .collect(),
    );
    for (name, export) in &exported {
        for (label, values) in &export.values {
            if let Some(all) = all_values.get(label.as_str()) {
                assert_eq!(values, all, "`{name}`: the {label} values exported");
            }
        }
    }
    let text = readme();
    let admin = section(&text, "Admin HTTP and self-metrics");
    let (_, rows) = tables(admin)
        .into_iter()
        .find(|(header, _)| header.first().map(String::as_str) == Some("metric"))
        .expect("the self-metrics table (header `metric`)");

    let mut documented = BTreeSet::new();
    for row in &rows {
        let [metric, labels, meaning] = &row[..] else {
            panic!("a self-metrics row has three cells: {row:?}");
        };
        let names: Vec<&str> = code_spans(metric);
        assert!(!names.is_empty(), "{row:?}");
        let labels: BTreeSet<String> = labels
            .split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        for name in names {
            documented.insert(name.to_owned());
            let Some(export) = exported.get(name) else {
                panic!("the README documents `{name}`, which the scaler does not export");
            };
            assert_eq!(
                labels, export.labels,
                "`{name}`: the README's labels against the exported ones"
            );
            let listed: BTreeSet<&str> = code_spans(meaning)
                .into_iter()
                .filter(|v| v.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                .collect();
            for label in ENUMERATED.iter().filter(|l| export.labels.contains(**l)) {
                let values = &all_values[*label];
                let missing: Vec<&String> = values
                    .iter()
                    .filter(|v| !listed.contains(v.as_str()))
                    .collect();
                assert!(
                    missing.is_empty(),
                    "`{name}`: {label} values the README's row does not list: {missing:?}"
                );
                let extra: Vec<&&str> = listed.iter().filter(|v| !values.contains(**v)).collect();
                assert!(
                    extra.is_empty(),
                    "`{name}`: the README lists {label} values the scaler never exports: {extra:?}"
                );
            }
        }
    }
    let undocumented: Vec<&String> = exported
        .keys()
        .filter(|name| !documented.contains(*name))
        .collect();
    assert!(
        undocumented.is_empty(),
        "self-metrics missing from the README's table: {undocumented:?}"
    );
}
