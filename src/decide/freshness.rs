//! From the sources' states to one [`Evaluation`]: freshness (which readings
//! are young enough, which sources are held or lost), then `assemble`'s
//! rules that turn readings into signals (what an empty PromQL answer means,
//! which signals a trigger requires, the TTFT window, the capacity
//! estimate), then the pure fusion.
//!
//! Pure given its inputs and `now`; the trigger task in `cache` owns the
//! [`TriggerMemory`] that carries the TTFT window across evaluations.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::decide::fusion::{self, Decision, Policy};
use crate::decide::quorum::{self, Fleet};
use crate::decide::signal_state::SignalState;
use crate::decide::unavailable::MAX_METRIC_VALUE;
pub use crate::decide::unavailable::Unavailable;
use crate::source::{EngineReading, Reading, SourceSpec};
use crate::trigger::{EngineInput, GpuInput, TriggerSpec};

/// The state of one trigger's number.
// One Status per evaluation, held in an `Arc<Evaluation>`: the size of the
// Ready variant costs nothing, and boxing it would add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// No source has answered yet.
    Pending,
    /// A value, valid until `valid_until`.
    Ready {
        /// The fused decision.
        decision: Decision,
        /// When the oldest reading behind it passes `maxSignalAgeSeconds`.
        valid_until: Instant,
    },
    /// No value can be given.
    Unavailable(Unavailable),
}

/// How one source stood at an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalReport {
    /// The source.
    pub source: SourceSpec,
    /// The source's label.
    pub label: String,
    /// The source's state at evaluation time.
    pub state: Arc<SignalState>,
}

/// One evaluation of a trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The outcome.
    pub status: Status,
    /// A source is failing and its last good reading is held, some pods
    /// are held or left out (`fleet`), or some pods may be missing
    /// (`empty_names`).
    pub degraded: bool,
    /// How the pods of the scraped engine source stand, while some of them
    /// fail (below the quorum too: then the status says UNAVAILABLE).
    pub fleet: Option<Fleet>,
    /// `dns+` names that answered no addresses while the trigger's other
    /// targets answered: if that name has pods, they are not counted.
    pub empty_names: Vec<String>,
    /// Per source, what the evaluation saw.
    pub signals: Vec<SignalReport>,
    /// Warm-up seconds left on a fresh trigger (`D` ≥ the backlog formula).
    pub warming_seconds: Option<f64>,
    /// When it was computed.
    pub evaluated_at: SystemTime,
}

impl Evaluation {
    /// The evaluation of a trigger no source has answered yet, as of `wall`.
    pub fn pending(wall: SystemTime) -> Evaluation {
        Evaluation {
            status: Status::Pending,
            degraded: false,
            fleet: None,
            empty_names: Vec::new(),
            signals: Vec::new(),
            warming_seconds: None,
            evaluated_at: wall,
        }
    }

    /// The decision if it is still valid at `now`.
    pub fn decision_at(&self, now: Instant) -> Result<Decision, Unavailable> {
        match &self.status {
            Status::Ready {
                decision,
                valid_until,
            } if now <= *valid_until => Ok(*decision),
            Status::Ready { .. } => Err(Unavailable::Expired),
            Status::Pending => Err(Unavailable::NoReadingYet),
            Status::Unavailable(reason) => Err(reason.clone()),
        }
    }

    /// `pending`, `ok`, `degraded` or `unavailable`.
    pub fn kind(&self) -> &'static str {
        match (&self.status, self.degraded) {
            (Status::Pending, _) => "pending",
            (Status::Ready { .. }, false) => "ok",
            (Status::Ready { .. }, true) => "degraded",
            (Status::Unavailable(_), _) => "unavailable",
        }
    }
}

/// Decide from one engine reading: the path the server takes for a scraped
/// trigger, exposed so the simulator runs exactly this code. `spec` must
/// read its engine signals by scraping (the capacity policy needs per-pod
/// counters).
pub fn decide_engine(
    spec: &TriggerSpec,
    reading: &EngineReading,
    at: Instant,
    memory: &mut TriggerMemory,
) -> Result<Decision, String> {
    // The simulator records reasons as text; the typed reason stays here.
    let signals = engine_signals(spec, reading, at, memory).map_err(|e| e.to_string())?;
    Ok(fusion::fuse(&spec.fusion, &signals))
}

/// Combine the sources' states into an evaluation at `now` (monotonic, for
/// ages); `wall` stamps it for display. The caller reads both clocks, so this
/// stays a pure function of its inputs.
pub fn evaluate(
    spec: &TriggerSpec,
    signals: Vec<SignalReport>,
    memory: &mut TriggerMemory,
    now: Instant,
    wall: SystemTime,
) -> Evaluation {
    let max_age = spec.max_signal_age;
    let mut problems = Vec::new();
    let mut pending = false;
    let mut degraded = false;
    let mut oldest: Option<Instant> = None;
    let mut fresh: Fresh<'_> = Vec::new();
    let mut fleet = None;
    // Failing pods folded into their source's reading first: `fresh`
    // borrows the merged readings.
    let merged: Vec<Option<(Reading, Fleet)>> = signals
        .iter()
        .map(|r| {
            quorum::merge(
                &r.source,
                &r.state,
                now,
                max_age,
                spec.min_reporting_fraction,
            )
        })
        .collect();
    for (report, merged) in signals.iter().zip(&merged) {
        let state = &report.state;
        let last_error = || state.last_failure.as_ref().map(|f| f.value.clone());
        let Some(good) = &state.last_good else {
            if state.failing() {
                problems.push(Unavailable::NeverRead {
                    label: report.label.clone(),
                    failed_polls: state.consecutive_failures,
                    last_error: last_error(),
                });
            } else {
                pending = true;
            }
            continue;
        };
        let age = now.saturating_duration_since(good.at);
        if age > max_age {
            problems.push(Unavailable::TooOld {
                label: report.label.clone(),
                age,
                max_age,
                failed_polls: state.consecutive_failures,
                last_error: last_error(),
            });
            continue;
        }
        let mut value = &good.value;
        if let Some((reading, pods)) = merged {
            fleet = Some(pods.clone());
            if !pods.has_quorum() {
                problems.push(Unavailable::BelowQuorum {
                    label: report.label.clone(),
                    reporting: pods.reporting,
                    discovered: pods.discovered,
                    min_fraction: pods.min_reporting_fraction,
                    left_out: pods.left_out(),
                });
                continue;
            }
            value = reading;
        }
        degraded |= state.failing() || merged.is_some();
        oldest = Some(oldest.map_or(good.at, |o| o.min(good.at)));
        fresh.push((&report.source, value, good.at));
    }
    let empty_names = partial_discovery(spec, &fresh);
    degraded |= !empty_names.is_empty();
    let status = if let Some(reason) = Unavailable::from_problems(problems) {
        Status::Unavailable(reason)
    } else if pending {
        Status::Pending
    } else {
        match (assemble(spec, &fresh, memory, fleet.as_ref()), oldest) {
            (Ok(signals), Some(oldest)) => {
                let decision = fusion::fuse(&spec.fusion, &signals);
                if decision.backlog <= MAX_METRIC_VALUE {
                    Status::Ready {
                        decision,
                        valid_until: oldest + max_age,
                    }
                } else {
                    Status::Unavailable(Unavailable::Unrepresentable {
                        backlog: decision.backlog,
                    })
                }
            }
            (Ok(_), None) => Status::Unavailable(Unavailable::NoSources),
            (Err(reason), _) => Status::Unavailable(reason),
        }
    };
    let warming_seconds = match (&status, &spec.fusion.policy, memory.epoch) {
        (Status::Ready { .. }, Policy::Capacity(p), Some(e)) => {
            memory.capacity.warming(p, (now - e).as_secs_f64())
        }
        _ => None,
    };
    Evaluation {
        status,
        degraded,
        fleet,
        empty_names,
        signals,
        warming_seconds,
        evaluated_at: wall,
    }
}

/// The scrape's `dns+` names that answered no addresses while other
/// targets gave pods. All names empty is zero pods (with a broker) or a
/// lost signal (without, [`Unavailable::NoAddresses`]); one empty among
/// answering targets is neither: the reading goes on, flagged degraded.
fn partial_discovery(spec: &TriggerSpec, fresh: &Fresh<'_>) -> Vec<String> {
    let mut empty = Vec::new();
    if let Some(EngineInput::Scrape(source)) = &spec.engine
        && let Some((Reading::Engine(reading), _)) =
            lookup(fresh, &SourceSpec::Engine(source.clone()))
        && !reading.pods.is_empty()
    {
        empty.extend(reading.empty_discovery.iter().cloned());
    }
    // dcgm-exporter runs one pod per node: an empty name among answering
    // ones hides some nodes' GPUs from `U`.
    if let Some(GpuInput::Scrape(source)) = &spec.gpu
        && let Some((Reading::Gpu(reading), _)) = lookup(fresh, &SourceSpec::Dcgm(source.clone()))
        && !reading.gpus.is_empty()
    {
        empty.extend(reading.empty_discovery.iter().cloned());
    }
    empty
}

mod assemble;
pub use assemble::TriggerMemory;
use assemble::{Fresh, assemble, engine_signals, lookup};

#[cfg(test)]
mod activation_tests;
#[cfg(test)]
mod tests;
