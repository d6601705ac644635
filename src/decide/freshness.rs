//! From the sources' states to one [`Evaluation`]: freshness, the rules that
//! turn readings into signals (what an empty PromQL answer means, which
//! signals a trigger requires), the TTFT window, then the pure fusion.
//!
//! Pure given its inputs and `now`; the trigger task in `cache` owns the
//! [`TriggerMemory`] that carries the TTFT window across evaluations.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::decide::capacity::{CapacityState, PodCounters};
use crate::decide::fusion::{self, Decision, Policy, Signals};
use crate::decide::quorum::{self, Fleet};
use crate::decide::signal_state::SignalState;
use crate::decide::ttft_window::{TtftSnapshot, TtftWindow};
use crate::decide::unavailable::QueryProblem;
pub use crate::decide::unavailable::Unavailable;
use crate::source::{EngineReading, PromQuery, QueryReading, Reading, SourceSpec};
use crate::trigger::{EngineInput, GpuInput, PromSignals, TriggerSpec};

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

/// State a trigger keeps across evaluations; rebuilt from scratch on restart.
#[derive(Debug, Default)]
pub struct TriggerMemory {
    ttft: TtftWindow,
    capacity: CapacityState,
    /// Origin of the capacity policy's clock (its first reading).
    epoch: Option<Instant>,
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
            (Ok(signals), Some(oldest)) => Status::Ready {
                decision: fusion::fuse(&spec.fusion, &signals),
                valid_until: oldest + max_age,
            },
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

/// Fresh readings by source. A list, not a map: a few entries per trigger,
/// and `SourceSpec` holds a compiled regex, which is not a sound hash key.
type Fresh<'a> = Vec<(&'a SourceSpec, &'a Reading, Instant)>;

fn lookup<'a>(fresh: &Fresh<'a>, source: &SourceSpec) -> Option<(&'a Reading, Instant)> {
    fresh
        .iter()
        .find(|(s, _, _)| *s == source)
        .map(|(_, r, at)| (*r, *at))
}

/// Turn fresh readings into the fusion's inputs, applying each signal's rules.
fn assemble(
    spec: &TriggerSpec,
    fresh: &Fresh<'_>,
    memory: &mut TriggerMemory,
    fleet: Option<&Fleet>,
) -> Result<Signals, Unavailable> {
    let (broker_backlog, broker_activation) = match &spec.broker {
        None => (None, None),
        Some(broker) => {
            let key = SourceSpec::Broker(broker.source.clone());
            let Some((Reading::Broker(reading), _)) = lookup(fresh, &key) else {
                return Err(Unavailable::NoReading {
                    label: broker.source.label(),
                });
            };
            let weighted = broker.message_weight * reading.messages.max(0.0);
            // Kafka without allowIdleConsumers: a consumer per partition at
            // most, so w·Q never asks for more than T × partitions (KEDA's
            // kafka scaler caps the same way).
            let capped = match reading.partitions {
                Some(partitions) => {
                    weighted.min(spec.fusion.target_per_replica * partitions as f64)
                }
                None => weighted,
            };
            // Activation counts the lag as KEDA's IsActive does: persistent
            // lag included, no cap.
            let activation = broker.message_weight * reading.activation_messages().max(0.0);
            (Some(capped), Some(activation))
        }
    };
    let mut signals = match &spec.engine {
        None => Signals::default(),
        Some(EngineInput::Scrape(source)) => {
            let key = SourceSpec::Engine(source.clone());
            let Some((Reading::Engine(reading), at)) = lookup(fresh, &key) else {
                return Err(Unavailable::NoReading {
                    label: source.label(),
                });
            };
            if reading.pods.is_empty()
                && !reading.empty_discovery.is_empty()
                && spec.broker.is_none()
            {
                return Err(Unavailable::NoAddresses {
                    names: reading.empty_discovery.clone(),
                });
            }
            let mut signals = engine_signals(spec, reading, at, memory)?;
            if let Some(fleet) = fleet {
                quorum::extrapolate(&mut signals, fleet);
            }
            signals
        }
        Some(EngineInput::Prometheus(queries)) => prometheus_signals(spec, queries, fresh)?,
    };
    signals.broker_backlog = broker_backlog;
    signals.broker_activation = broker_activation;
    signals.gpu_utilization = match &spec.gpu {
        None => None,
        Some(GpuInput::Scrape(source)) => {
            let key = SourceSpec::Dcgm(source.clone());
            let Some((Reading::Gpu(reading), _)) = lookup(fresh, &key) else {
                return Err(Unavailable::NoReading {
                    label: source.label(),
                });
            };
            match reading.mean_utilization() {
                Some(u) => Some(u),
                // No engine pods: no GPUs of theirs either, and nothing to guard.
                None if signals.replicas_reporting == 0 => None,
                None => {
                    return Err(Unavailable::NoGpuMatched {
                        label: source.label(),
                        engine_pods: signals.replicas_reporting,
                    });
                }
            }
        }
        Some(GpuInput::Prometheus(query)) => {
            let replicas_zero = signals.replicas_reporting == 0;
            single_value(query, fresh, "gpuUtilQuery", replicas_zero)?
        }
    };
    Ok(signals)
}

fn engine_signals(
    spec: &TriggerSpec,
    reading: &EngineReading,
    at: Instant,
    memory: &mut TriggerMemory,
) -> Result<Signals, Unavailable> {
    let fusion = &spec.fusion;
    let running = reading.running();
    if fusion.running_per_replica.is_some()
        && running.is_none()
        && let Some(pod) = reading.pods.iter().find(|p| p.running.is_none())
    {
        return Err(Unavailable::NoRunningGauge {
            pod: pod.target.clone(),
        });
    }
    let kv_cache_usage = reading.kv_cache_usage();
    if fusion.kv_cache_target.is_some()
        && kv_cache_usage.is_none()
        && let Some(pod) = reading.pods.iter().find(|p| p.kv_cache_usage.is_none())
    {
        return Err(Unavailable::NoKvCacheGauge {
            pod: pod.target.clone(),
        });
    }
    let ttft_seconds = if fusion.latency.is_some() {
        memory.ttft.push(
            TtftSnapshot {
                at,
                pods: reading
                    .pods
                    .iter()
                    .filter_map(|p| p.ttft.as_ref().map(|b| (p.target.clone(), b.clone())))
                    .collect(),
            },
            spec.ttft.window,
        );
        memory.ttft.quantile(spec.ttft.quantile)
    } else {
        None
    };
    let capacity = match &fusion.policy {
        Policy::Backlog => None,
        Policy::Capacity(params) => {
            let mut pods = Vec::with_capacity(reading.pods.len());
            for pod in &reading.pods {
                // A fixed μ has no floor to fall back on; a learned one
                // holds λ̂ and keeps the backlog formula as its floor.
                if pod.finished_total.is_none() && !params.learn_drain_rate {
                    return Err(Unavailable::NoFinishedCounter {
                        pod: pod.target.clone(),
                        engine: reading.engine,
                    });
                }
                pods.push(PodCounters::from_reading(pod));
            }
            let epoch = *memory.epoch.get_or_insert(at);
            let t = at.saturating_duration_since(epoch).as_secs_f64();
            Some(
                memory
                    .capacity
                    .observe(params, t, &pods, fusion.running_per_replica),
            )
        }
    };
    Ok(Signals {
        waiting: reading.waiting(),
        running,
        replicas_reporting: reading.pods.len(),
        ttft_seconds,
        kv_cache_usage,
        gpu_utilization: None,
        capacity,
        broker_backlog: None,
        broker_activation: None,
    })
}

/// The PromQL rules (docs/decisions/0006): sums (`W`, `R`) add their series;
/// every other signal must be one series. An empty answer is 0 (or "no
/// value") only when `replicasQuery` answers an explicit 0; otherwise it is a
/// lost target, never read as 0 (KEDA issue 3065). TTFT is the exception:
/// empty or NaN means no requests in the window, so the guard is off.
fn prometheus_signals(
    spec: &TriggerSpec,
    queries: &PromSignals,
    fresh: &Fresh<'_>,
) -> Result<Signals, Unavailable> {
    let replicas = match query_reading(&queries.replicas, fresh)?.series.as_slice() {
        [] => None,
        [one] if one.value.is_finite() && one.value >= 0.0 => Some(one.value.round() as usize),
        [one] => {
            return Err(query_error(
                "replicasQuery",
                &queries.replicas,
                QueryProblem::NotACount(one.value),
            ));
        }
        more => {
            return Err(query_error(
                "replicasQuery",
                &queries.replicas,
                QueryProblem::Several(more.len()),
            ));
        }
    };
    let zero_replicas = replicas == Some(0);
    let waiting = summed(&queries.waiting, fresh, "waitingQuery", zero_replicas)?;
    let running = match &queries.running {
        Some(q) => Some(summed(q, fresh, "runningQuery", zero_replicas)?),
        None => None,
    };
    let kv_cache_usage = match &queries.kv_cache {
        Some(q) => single_value(q, fresh, "kvCacheQuery", zero_replicas)?,
        None => None,
    };
    let ttft_seconds = match &queries.ttft {
        Some(q) => match query_reading(q, fresh)?.series.as_slice() {
            [] => None,
            [one] => Some(one.value).filter(|v| v.is_finite()),
            more => {
                return Err(query_error(
                    "ttftQuery",
                    q,
                    QueryProblem::Several(more.len()),
                ));
            }
        },
        None => None,
    };
    let needs_n = spec.fusion.latency.is_some()
        || spec.fusion.kv_cache_target.is_some()
        || spec.fusion.gpu.is_some();
    let replicas_reporting = match replicas {
        Some(n) => n,
        None if needs_n => {
            return Err(query_error(
                "replicasQuery",
                &queries.replicas,
                QueryProblem::NoReplicaCount,
            ));
        }
        None => 0,
    };
    Ok(Signals {
        waiting,
        running,
        replicas_reporting,
        ttft_seconds,
        kv_cache_usage,
        gpu_utilization: None,
        capacity: None,
        broker_backlog: None,
        broker_activation: None,
    })
}

fn query_reading<'a>(
    query: &PromQuery,
    fresh: &Fresh<'a>,
) -> Result<&'a QueryReading, Unavailable> {
    match lookup(fresh, &SourceSpec::Prometheus(query.clone())) {
        Some((Reading::Query(reading), _)) => Ok(reading),
        _ => Err(Unavailable::NoReading {
            label: query.label(),
        }),
    }
}

fn query_error(key: &'static str, query: &PromQuery, problem: QueryProblem) -> Unavailable {
    Unavailable::Query {
        key,
        query: query.query.clone(),
        problem,
    }
}

fn summed(
    query: &PromQuery,
    fresh: &Fresh<'_>,
    key: &'static str,
    zero_replicas: bool,
) -> Result<f64, Unavailable> {
    let reading = query_reading(query, fresh)?;
    if reading.series.is_empty() {
        return if zero_replicas {
            Ok(0.0)
        } else {
            Err(query_error(key, query, QueryProblem::Empty))
        };
    }
    let mut total = 0.0;
    for series in &reading.series {
        if !series.value.is_finite() || series.value < 0.0 {
            return Err(query_error(
                key,
                query,
                QueryProblem::SeriesNotACount {
                    value: series.value,
                    series: series.labels.clone(),
                },
            ));
        }
        total += series.value;
    }
    Ok(total)
}

fn single_value(
    query: &PromQuery,
    fresh: &Fresh<'_>,
    key: &'static str,
    zero_replicas: bool,
) -> Result<Option<f64>, Unavailable> {
    match query_reading(query, fresh)?.series.as_slice() {
        [] if zero_replicas => Ok(None),
        [] => Err(query_error(key, query, QueryProblem::Empty)),
        [one] if one.value.is_finite() && one.value >= 0.0 => Ok(Some(one.value)),
        [one] => Err(query_error(key, query, QueryProblem::Invalid(one.value))),
        more => Err(query_error(key, query, QueryProblem::Several(more.len()))),
    }
}

#[cfg(test)]
mod activation_tests;
#[cfg(test)]
mod tests;
