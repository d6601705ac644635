//! Which of a pod's optional signals its reading must have: part of an
//! engine source's identity, set by `trigger/` from what the metadata asks
//! of the pods (`runningPerReplica`, `kvCacheTarget`, `policy: capacity`
//! with a fixed `μ`).
//!
//! A pod whose body lacks one cannot stand for itself in the number (the
//! decision would read its running requests or its KV usage as unknown),
//! yet its neighbours may be fine: so it is that pod's parse failure, held
//! then left out under the quorum like a pod that hangs, and a poll in which
//! every pod lacks it is the source's parse error (docs/decisions/0002).
//! Checked where the body is read (`PodReading::lacks`), so the poller
//! counts and logs it.

use super::names::EngineMetrics;

/// The optional signals every pod must expose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RequiredSignals {
    /// Requests running (`R`): `runningPerReplica` is set.
    pub running: bool,
    /// KV-cache usage: `kvCacheTarget` is set.
    pub kv_cache: bool,
    /// The finished-requests counter: `policy: capacity` with
    /// `learnDrainRate: false`, whose fixed `μ` has no backlog floor to
    /// fall back on without a pod's arrivals. (A learned `μ` holds `λ̂`
    /// instead, so it needs no counter.)
    pub finished: bool,
}

/// A required signal a pod's reading lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// No running-requests gauge.
    #[error("no running-requests gauge (runningPerReplica is set)")]
    Running,
    /// No KV-cache usage gauge.
    #[error("no KV-cache usage gauge (kvCacheTarget is set)")]
    KvCache,
    /// No finished-requests counter.
    #[error("no finished-requests counter (policy capacity needs it with learnDrainRate: false)")]
    Finished,
}

impl RequiredSignals {
    /// The first of these signals that `present` (the signals a pod's
    /// reading has) lacks, if any.
    pub fn missing(&self, present: RequiredSignals) -> Option<Missing> {
        if self.running && !present.running {
            Some(Missing::Running)
        } else if self.kv_cache && !present.kv_cache {
            Some(Missing::KvCache)
        } else if self.finished && !present.finished {
            Some(Missing::Finished)
        } else {
            None
        }
    }
}

impl Missing {
    /// The families a scraped body was searched for this signal, as an
    /// error names them (`vllm:kv_cache_usage_perc or
    /// vllm:gpu_cache_usage_perc`).
    pub fn families(self, names: &EngineMetrics) -> String {
        let (preferred, plain): (_, Vec<&str>) = match self {
            Missing::Running => (names.running_preferred, names.running.into_iter().collect()),
            Missing::KvCache => (names.kv_cache_preferred, names.kv_cache.to_vec()),
            Missing::Finished => (None, names.finished.to_vec()),
        };
        preferred
            .map(|p| format!("{}{{{}=\"{}\"}}", p.family, p.label, p.value))
            .into_iter()
            .chain(plain.into_iter().map(str::to_owned))
            .collect::<Vec<_>>()
            .join(" or ")
    }
}
