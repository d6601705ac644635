//! One poll's attempts: the reading, tried again within the poll's deadline
//! after a transient failure, and for a pod-scrape source each pod that
//! failed transiently while others answered, tried again on its own.
//!
//! The waits are [`crate::runtime::backoff`]'s; this file only runs them.
//! Sources stay single-shot (src/lib.rs): a retry here is another call of
//! the same reader, or of the same pod's GET and parse.

use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::guard::redact::redact;
use crate::runtime::backoff::{UnitRng, plan_retry, retries_within_poll};
use crate::source::context::SourceContext;
use crate::source::engine::fanout::{PodDeadline, get_pod};
use crate::source::engine::{EngineReading, EngineSource, PodFailure, PodReading};
use crate::source::error::SourceError;
use crate::source::spec::{Reading, SourceMemory, SourceSpec};

/// Each pod's scrape may take at most this share of the time left: a pod
/// that hangs fails on its own, before the whole reading times out and
/// takes every other pod's answer with it.
pub(crate) const POD_SHARE: f64 = 0.9;

/// What one poll got, and how many retries it took.
#[derive(Debug)]
pub struct Attempted {
    /// The reading (for a pod-scrape source, with the pods that still
    /// failed), or the last attempt's error.
    pub result: Result<(Reading, Vec<PodFailure>), SourceError>,
    /// Retries after the first attempt, of the whole reading or of pods.
    pub retries: u32,
}

/// Read `source` once, and again after a transient failure while a retry
/// fits before `deadline` ([`plan_retry`]); then, for a pod-scrape source,
/// retry its transiently failed pods the same way. `timeout` is the poll's
/// bound as a timed-out reading reports it.
pub async fn read_with_retries(
    source: &SourceSpec,
    ctx: &SourceContext,
    memory: &mut SourceMemory,
    deadline: Instant,
    timeout: Duration,
    rng: &mut impl UnitRng,
) -> Attempted {
    let mut retries = 0;
    loop {
        let result = attempt(source, ctx, memory, deadline, timeout).await;
        let error = match result {
            Ok((reading, failed)) => {
                return match (source, reading) {
                    (SourceSpec::Engine(engine), Reading::Engine(mut reading)) => {
                        let mut failed = failed;
                        let pods = PodRetry {
                            deadline,
                            timeout,
                            used: retries,
                        };
                        retries +=
                            retry_pods(engine, ctx, &mut reading, &mut failed, pods, rng).await;
                        Attempted {
                            result: Ok((Reading::Engine(reading), failed)),
                            retries,
                        }
                    }
                    (_, reading) => Attempted {
                        result: Ok((reading, failed)),
                        retries,
                    },
                };
            }
            Err(error) => error,
        };
        let wait = retries_within_poll(error.kind())
            .then(|| plan_retry(retries + 1, Instant::now(), deadline, rng))
            .flatten();
        let Some(wait) = wait else {
            return Attempted {
                result: Err(error),
                retries,
            };
        };
        retries += 1;
        tracing::debug!(source = %source.label(), retry = retries, wait_ms = wait.as_millis() as u64, error = %error, "retrying within the poll");
        tokio::time::sleep(wait).await;
    }
}

/// One attempt, bounded by `deadline`.
async fn attempt(
    source: &SourceSpec,
    ctx: &SourceContext,
    memory: &mut SourceMemory,
    deadline: Instant,
    timeout: Duration,
) -> Result<(Reading, Vec<PodFailure>), SourceError> {
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, read_polled(source, ctx, memory, left, timeout)).await {
        Ok(result) => result,
        Err(_) => Err(SourceError::timeout(timeout)),
    }
}

/// The per-pod deadline of a poll bounded by `timeout`, with `left` of it
/// still to go.
fn pod_deadline(left: Duration, timeout: Duration) -> PodDeadline {
    PodDeadline {
        bound: left.mul_f64(POD_SHARE),
        configured: timeout.mul_f64(POD_SHARE),
    }
}

/// One poll's reading: pod-scrape sources pod by pod (the pods that
/// answered, and how each other discovered pod failed), every other source
/// as [`read_once`].
async fn read_polled(
    source: &SourceSpec,
    ctx: &SourceContext,
    memory: &mut SourceMemory,
    left: Duration,
    timeout: Duration,
) -> Result<(Reading, Vec<PodFailure>), SourceError> {
    match source {
        SourceSpec::Engine(source) => {
            let read = source.read_pods(ctx, pod_deadline(left, timeout)).await?;
            Ok((Reading::Engine(read.reading), read.failed))
        }
        other => Ok((read_once(other, ctx, memory).await?, Vec::new())),
    }
}

/// Take one reading of `source`, calling its reader directly. `memory` is
/// the poller's state between readings (open broker connections, Kafka's
/// previous offsets). A pod-scrape source is read all-or-nothing here; the
/// pollers (and `check`) read it pod by pod ([`read_with_retries`]).
pub async fn read_once(
    source: &SourceSpec,
    ctx: &SourceContext,
    memory: &mut SourceMemory,
) -> Result<Reading, SourceError> {
    match source {
        SourceSpec::Engine(source) => source.read(ctx).await.map(Reading::Engine),
        SourceSpec::Dcgm(source) => source.read(ctx).await.map(Reading::Gpu),
        SourceSpec::Prometheus(query) => query.read(ctx).await.map(Reading::Query),
        SourceSpec::Broker(source) => source
            .read(&ctx.brokers, &mut memory.broker)
            .await
            .map(Reading::Broker),
    }
}

/// The bounds of a poll's pod retries.
#[derive(Debug, Clone, Copy)]
struct PodRetry {
    /// The poll's deadline.
    deadline: Instant,
    /// The poll's bound, as a pod that times out reports it.
    timeout: Duration,
    /// Retries spent on the whole reading already.
    used: u32,
}

/// Retry the pods of `failed` whose failure is transient, each on its own
/// (GET and parse, as the fan-out does), in rounds sharing one jittered
/// wait, while a retry fits before the deadline. A pod that answers moves
/// into `reading`; one that fails again keeps its newest error. Returns the
/// rounds run.
async fn retry_pods(
    source: &EngineSource,
    ctx: &SourceContext,
    reading: &mut EngineReading,
    failed: &mut Vec<PodFailure>,
    bounds: PodRetry,
    rng: &mut impl UnitRng,
) -> u32 {
    let PodRetry {
        deadline,
        timeout,
        used,
    } = bounds;
    let mut rounds = 0;
    if !failed.iter().any(|f| retries_within_poll(f.error.kind())) {
        return 0;
    }
    // The failures name pods by their redacted URL; the URLs to GET come
    // from resolving the targets again (no I/O for fixed URLs).
    let mut urls = Vec::new();
    for target in &source.targets {
        match target.resolve_checked(ctx.http.outbound()).await {
            Ok(found) => urls.extend(found),
            Err(_) => return 0,
        }
    }
    loop {
        let pending: Vec<reqwest::Url> = failed
            .iter()
            .filter(|f| retries_within_poll(f.error.kind()))
            .filter_map(|f| {
                urls.iter()
                    .find(|u| redact(u.as_str()) == f.target)
                    .cloned()
            })
            .collect();
        if pending.is_empty() {
            return rounds;
        }
        let Some(wait) = plan_retry(used + rounds + 1, Instant::now(), deadline, rng) else {
            return rounds;
        };
        rounds += 1;
        tokio::time::sleep(wait).await;
        let per_pod = pod_deadline(deadline.saturating_duration_since(Instant::now()), timeout);
        let mut scrapes = JoinSet::new();
        for url in pending {
            scrapes.spawn(get_pod(ctx.http.clone(), url, per_pod));
        }
        while let Some(joined) = scrapes.join_next().await {
            // A panicked retry task leaves its pod's first error standing.
            let Ok((target, body)) = joined else { continue };
            let parsed: Result<(PodReading, usize), SourceError> =
                body.and_then(|body| source.parse_pod(&target, &body));
            match parsed {
                Ok((pod, malformed)) => {
                    failed.retain(|f| f.target != target);
                    reading.malformed_lines += malformed;
                    reading.pods.push(pod);
                    reading.pods.sort_by(|a, b| a.target.cmp(&b.target));
                }
                Err(error) => {
                    if let Some(f) = failed.iter_mut().find(|f| f.target == target) {
                        f.error = error;
                    }
                }
            }
        }
    }
}
