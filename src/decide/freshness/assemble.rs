//! The rules that turn fresh readings into the fusion's inputs: the broker
//! term, the engine's per-pod reading (and its capacity estimate), what an
//! empty or failing PromQL answer means, and which signals a trigger
//! requires. Split from [`super`], which owns freshness and the evaluation.

use std::time::Instant;

use crate::decide::capacity::{CapacityState, PodCounters};
use crate::decide::fusion::{Policy, Signals};
use crate::decide::quorum::{self, Fleet};
use crate::decide::ttft_window::{TtftSnapshot, TtftWindow};
use crate::decide::unavailable::{QueryProblem, Unavailable};
use crate::source::{EngineReading, PromQuery, QueryReading, Reading, SourceSpec};
use crate::trigger::{EngineInput, GpuInput, PromSignals, TriggerSpec};

/// State a trigger keeps across evaluations; rebuilt from scratch on restart.
#[derive(Debug, Default)]
pub struct TriggerMemory {
    ttft: TtftWindow,
    pub(super) capacity: CapacityState,
    /// Origin of the capacity policy's clock (its first reading).
    pub(super) epoch: Option<Instant>,
}

/// Fresh readings by source. A list, not a map: a few entries per trigger,
/// and `SourceSpec` holds a compiled regex, which is not a sound hash key.
pub(super) type Fresh<'a> = Vec<(&'a SourceSpec, &'a Reading, Instant)>;

pub(super) fn lookup<'a>(fresh: &Fresh<'a>, source: &SourceSpec) -> Option<(&'a Reading, Instant)> {
    fresh
        .iter()
        .find(|(s, _, _)| *s == source)
        .map(|(_, r, at)| (*r, *at))
}

/// Turn fresh readings into the fusion's inputs, applying each signal's rules.
pub(super) fn assemble(
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

pub(super) fn engine_signals(
    spec: &TriggerSpec,
    reading: &EngineReading,
    at: Instant,
    memory: &mut TriggerMemory,
) -> Result<Signals, Unavailable> {
    let fusion = &spec.fusion;
    // The source fails a pod without a signal the trigger requires when it
    // parses the pod (`RequiredSignals`, set from the same metadata), so a
    // polled reading always has them. These checks stand for a reading
    // built elsewhere (the simulator, a test): a missing `R` or KV usage
    // is refused, never fused as if there were none.
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
/// every other signal is one series. An empty answer is 0 (or "no value")
/// only when `replicasQuery` answers an explicit 0; otherwise it is a lost
/// target, never read as 0 (KEDA issue 3065). TTFT is the exception: empty
/// or NaN means no requests in the window, so the guard is off.
///
/// The source refuses an answer of the wrong shape or a value that is no
/// count when it reads it (`PromQuery::answer`: a failed poll, held until
/// `maxSignalAgeSeconds`), so a fresh reading here has at most one series
/// where one is meant and only counts where counts are meant.
fn prometheus_signals(
    spec: &TriggerSpec,
    queries: &PromSignals,
    fresh: &Fresh<'_>,
) -> Result<Signals, Unavailable> {
    let replicas = query_reading(&queries.replicas, fresh)?
        .series
        .first()
        .map(|one| one.value.round() as usize);
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
        Some(q) => query_reading(q, fresh)?
            .series
            .first()
            .map(|one| one.value)
            .filter(|v| v.is_finite()),
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
    Ok(reading.series.iter().map(|series| series.value).sum())
}

fn single_value(
    query: &PromQuery,
    fresh: &Fresh<'_>,
    key: &'static str,
    zero_replicas: bool,
) -> Result<Option<f64>, Unavailable> {
    match query_reading(query, fresh)?.series.first() {
        None if zero_replicas => Ok(None),
        None => Err(query_error(key, query, QueryProblem::Empty)),
        Some(one) => Ok(Some(one.value)),
    }
}
