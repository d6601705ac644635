//! The per-trigger series, kept as one compact record per trigger and
//! written out at scrape time (a [`Collector`]).
//!
//! Why not a `Family` per metric: a trigger has ~20 series across a dozen
//! families, and a `Family` stores each series as its own label set (three
//! owned strings) plus an `Arc`'d atomic in its own hash table. At 100,000
//! triggers that was ~3.5 kB per trigger, a third of the scaler's memory,
//! and every evaluation hashed and cloned those label sets ~20 times
//! (issue 14 item 7). Here the trigger's labels are stored once, its values
//! inline (~0.5 kB), and a decision is one lookup and a copy. The text a
//! scrape gets is the same as the families wrote, series for series.
//!
//! The records are sharded so that a scrape, which walks every record once
//! per metric, holds one shard's lock at a time and never stalls the
//! trigger tasks that record decisions for long.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::capacity::CapacityValues;
use super::labels::TriggerLabels;

/// Enough shards that one holds ~1/64 of the triggers while a scrape
/// writes it out.
const SHARDS: usize = 64;

/// The `component` label's values, in the order of [`Values::components`].
pub(super) const COMPONENTS: [&str; 10] = [
    "waiting",
    "running",
    "running_term",
    "broker_term",
    "demand",
    "ttft_seconds",
    "latency_term",
    "kv_cache_usage",
    "kv_term",
    "gpu_utilization",
];
/// The `guard` label's values, in the order of [`Values::guards`].
pub(super) const GUARDS: [&str; 4] = ["latency", "kv_cache", "gpu_busy_hold", "gpu_idle_veto"];

/// What one decision sets: the value series, all present or all absent
/// (absent while the trigger answers UNAVAILABLE).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Values {
    pub backlog: f64,
    /// One per [`COMPONENTS`] entry; `None` is no series (not configured,
    /// or no requests in the TTFT window) rather than a 0 a dashboard
    /// would misread.
    pub components: [Option<f64>; 10],
    /// One per [`GUARDS`] entry.
    pub guards: [bool; 4],
    pub desired_replicas: i64,
    pub active: bool,
    pub replicas_reporting: i64,
    /// `None` for a `backlog` trigger: no capacity series.
    pub capacity: Option<CapacityValues>,
}

/// A discovered pod state/reason pair and how many pods are in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DegradedPods {
    pub state: &'static str,
    pub reason: &'static str,
    pub count: i64,
}

/// Everything a scrape shows for one trigger.
#[derive(Debug, Default)]
struct Record {
    /// `trigger_available` (and with it `trigger_degraded`): `None` until
    /// the first decision or UNAVAILABLE.
    available: Option<bool>,
    degraded: bool,
    values: Option<Values>,
    /// Set by a `mode: shadow` trigger's decisions; goes with the values.
    shadow_desired_replicas: Option<i64>,
    degraded_pods: Vec<DegradedPods>,
}

impl Record {
    fn is_empty(&self) -> bool {
        self.available.is_none()
            && self.values.is_none()
            && self.shadow_desired_replicas.is_none()
            && self.degraded_pods.is_empty()
    }
}

/// The records, sharded by the labels' hash.
#[derive(Debug)]
pub(super) struct TriggerSeries {
    hasher: RandomState,
    shards: Box<[Mutex<HashMap<TriggerLabels, Record>>]>,
}

impl Default for TriggerSeries {
    fn default() -> Self {
        TriggerSeries {
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a record was being copied leaves it whole or stale,
    // never torn in a way a scrape could misread: keep serving.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl TriggerSeries {
    fn shard(&self, labels: &TriggerLabels) -> MutexGuard<'_, HashMap<TriggerLabels, Record>> {
        // The modulo keeps the index below SHARDS, the slice's length.
        let index = (self.hasher.hash_one(labels) % SHARDS as u64) as usize;
        lock(&self.shards[index])
    }

    /// Change a trigger's record, creating it if `create` says so; a
    /// record left with nothing to show is dropped.
    fn update(&self, labels: &TriggerLabels, create: bool, change: impl FnOnce(&mut Record)) {
        let mut shard = self.shard(labels);
        let record = match shard.get_mut(labels) {
            Some(record) => record,
            None if create => shard.entry(labels.clone()).or_default(),
            None => return,
        };
        change(record);
        if record.is_empty() {
            shard.remove(labels);
        }
    }

    /// A decision: the values, available, degraded as given.
    pub(super) fn set_values(&self, labels: &TriggerLabels, values: Values, degraded: bool) {
        self.update(labels, true, |r| {
            r.values = Some(values);
            r.available = Some(true);
            r.degraded = degraded;
        });
    }

    /// What a shadow trigger would ask for.
    pub(super) fn set_shadow(&self, labels: &TriggerLabels, desired_replicas: i64) {
        self.update(labels, true, |r| {
            r.shadow_desired_replicas = Some(desired_replicas);
        });
    }

    /// UNAVAILABLE: the value series go, available and degraded read 0.
    pub(super) fn set_unavailable(&self, labels: &TriggerLabels) {
        self.update(labels, true, |r| {
            r.values = None;
            r.shadow_desired_replicas = None;
            r.available = Some(false);
            r.degraded = false;
        });
    }

    /// The failing pods' counts (empty: none).
    pub(super) fn set_degraded_pods(&self, labels: &TriggerLabels, pods: Vec<DegradedPods>) {
        let create = !pods.is_empty();
        self.update(labels, create, |r| r.degraded_pods = pods);
    }

    /// A dropped trigger: every series goes.
    pub(super) fn forget(&self, labels: &TriggerLabels) {
        self.shard(labels).remove(labels);
    }

    /// Write one family: a descriptor, then `series` for every record.
    fn family(
        &self,
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        series: impl Fn(&TriggerLabels, &Record, &mut Sink) -> Result<(), std::fmt::Error>,
    ) -> Result<(), std::fmt::Error> {
        let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for shard in self.shards.iter() {
            let shard = lock(shard);
            for (labels, record) in shard.iter() {
                series(labels, record, &mut Sink(&mut metric))?;
            }
        }
        Ok(())
    }

    /// Write a family of at most one series per trigger, without labels
    /// of its own: `value` says whether the record has it, and what.
    fn single(
        &self,
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        value: impl Fn(&Record) -> Option<Sample>,
    ) -> Result<(), std::fmt::Error> {
        self.family(encoder, name, help, |l, r, s| match value(r) {
            Some(Sample::Float(v)) => s.float(l, &[], v),
            Some(Sample::Int(v)) => s.int(l, &[], v),
            None => Ok(()),
        })
    }
}

/// One series' value.
enum Sample {
    Float(f64),
    Int(i64),
}

/// Writes one family's series.
struct Sink<'a, 'b>(&'a mut prometheus_client::encoding::MetricEncoder<'b>);

impl Sink<'_, '_> {
    /// A float series: the trigger's labels, then `extra`.
    fn float(
        &mut self,
        labels: &TriggerLabels,
        extra: &[(&str, &str)],
        value: f64,
    ) -> Result<(), std::fmt::Error> {
        self.write(labels, extra, ConstGauge::new(value))
    }

    /// An integer series.
    fn int(
        &mut self,
        labels: &TriggerLabels,
        extra: &[(&str, &str)],
        value: i64,
    ) -> Result<(), std::fmt::Error> {
        self.write(labels, extra, ConstGauge::new(value))
    }

    fn write<N>(
        &mut self,
        labels: &TriggerLabels,
        extra: &[(&str, &str)],
        gauge: ConstGauge<N>,
    ) -> Result<(), std::fmt::Error>
    where
        ConstGauge<N>: prometheus_client::encoding::EncodeMetric,
    {
        // The label order the derived label sets wrote: the trigger's
        // three, then the family's own.
        let mut all = [("", ""); 3 + MAX_EXTRA_LABELS];
        all[0] = ("namespace", labels.namespace.as_str());
        all[1] = ("name", labels.name.as_str());
        all[2] = ("metric", labels.metric.as_str());
        // Past the cap a label would be dropped without a word and two
        // series could collide: a family that needs more must raise it.
        debug_assert!(
            extra.len() <= MAX_EXTRA_LABELS,
            "{} extra labels, at most {MAX_EXTRA_LABELS}: {extra:?}",
            extra.len()
        );
        let extra = &extra[..extra.len().min(MAX_EXTRA_LABELS)];
        all[3..3 + extra.len()].copy_from_slice(extra);
        let used: &[(&str, &str)] = &all[..3 + extra.len()];
        gauge.encode(self.0.encode_family(&used)?)
    }
}

/// The most labels a family adds to the trigger's (degraded pods: state
/// and reason; drain rate: source and unit).
const MAX_EXTRA_LABELS: usize = 2;

fn flag(value: bool) -> i64 {
    i64::from(value)
}

impl Collector for TriggerSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        self.single(
            e,
            "backlog",
            "Fused backlog-equivalent value B per trigger",
            |r| r.values.as_ref().map(|v| Sample::Float(v.backlog)),
        )?;
        self.family(
            e,
            "backlog_component",
            "Each term of the fused value: waiting, running, running_term, demand, ttft_seconds, latency_term, kv_cache_usage, kv_term, gpu_utilization",
            |l, r, s| {
                let Some(v) = &r.values else { return Ok(()) };
                for (component, value) in COMPONENTS.into_iter().zip(v.components) {
                    if let Some(value) = value {
                        s.float(l, &[("component", component)], value)?;
                    }
                }
                Ok(())
            },
        )?;
        self.family(
            e,
            "guard_fired",
            "1 when a guard set B: latency, kv_cache (won the max), gpu_busy_hold, gpu_idle_veto",
            |l, r, s| {
                let Some(v) = &r.values else { return Ok(()) };
                for (guard, fired) in GUARDS.into_iter().zip(v.guards) {
                    s.int(l, &[("guard", guard)], flag(fired))?;
                }
                Ok(())
            },
        )?;
        self.single(
            e,
            "desired_replicas",
            "ceil(B / targetBacklogPerReplica)",
            |r| r.values.as_ref().map(|v| Sample::Int(v.desired_replicas)),
        )?;
        self.single(
            e,
            "shadow_desired_replicas",
            "ceil(B / targetBacklogPerReplica) a mode: shadow trigger would ask for (it answers 0)",
            |r| r.shadow_desired_replicas.map(Sample::Int),
        )?;
        self.single(e, "active", "1 when B > activationBacklog", |r| {
            r.values.as_ref().map(|v| Sample::Int(flag(v.active)))
        })?;
        self.single(
            e,
            "replicas_reporting",
            "Engine pods in the trigger's last reading",
            |r| r.values.as_ref().map(|v| Sample::Int(v.replicas_reporting)),
        )?;
        self.single(
            e,
            "trigger_available",
            "1 when the trigger answers a value, 0 while it answers UNAVAILABLE (in shadow mode: would answer)",
            |r| r.available.map(|available| Sample::Int(flag(available))),
        )?;
        self.single(
            e,
            "trigger_degraded",
            "1 while a failing source's last good reading is being held, or a dns+ name answers no addresses among answering targets",
            |r| r.available.map(|_| Sample::Int(flag(r.degraded))),
        )?;
        self.family(
            e,
            "trigger_degraded_pods",
            "Discovered engine pods whose scrape fails, by state (held: last good reading counted; left_out: past maxSignalAgeSeconds, not counted, the others extrapolated) and reason (the failure kind)",
            |l, r, s| {
                for pods in &r.degraded_pods {
                    s.int(l, &[("state", pods.state), ("reason", pods.reason)], pods.count)?;
                }
                Ok(())
            },
        )?;
        self.family(
            e,
            "capacity_drain_rate",
            "capacity policy: the drain rate mu in use, requests/s one replica finishes at a full batch, by how it was obtained (source: configured, prior, samples, fit, bounds, none; 0 with none) and the unit it was learned in (unit: requests, tokens; mu is requests/s either way)",
            |l, r, s| match capacity(r) {
                Some(c) => s.float(l, &[("source", c.source), ("unit", c.unit)], c.drain_rate),
                None => Ok(()),
            },
        )?;
        self.family(
            e,
            "capacity_arrival_rate",
            "capacity policy: the arrival rate, requests/s, smoothed (kind=smoothed) and its peak over peakHoldSeconds (kind=peak)",
            |l, r, s| {
                let Some(c) = capacity(r) else { return Ok(()) };
                s.float(l, &[("kind", "smoothed")], c.smoothed_rate)?;
                s.float(l, &[("kind", "peak")], c.peak_rate)
            },
        )?;
        self.single(
            e,
            "capacity_backlog_floor",
            "capacity policy: 1 while the demand is floored at the backlog formula (mu not confident yet, a pod's counter missing, or warming up)",
            |r| capacity(r).map(|c| Sample::Int(flag(c.backlog_floor))),
        )?;
        Ok(())
    }
}

fn capacity(record: &Record) -> Option<&CapacityValues> {
    record.values.as_ref()?.capacity.as_ref()
}
