//! Pollers: one background task per distinct source, shared by every trigger
//! that reads it.
//!
//! A poller owns timing and failure for its source: it reads every poll
//! interval, bounds each reading with a timeout, retries sooner (with jitter)
//! after a failure, and publishes the latest [`SignalState`] on a watch
//! channel. It keeps the last good reading; judging whether that reading is
//! still young enough is the trigger's job, because the age limit is per
//! trigger. A poller stops when the last trigger using it drops its handle.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::decide::signal_state::FailingPod;
pub use crate::decide::signal_state::{SignalState, Timed};
use crate::runtime::telemetry::Telemetry;
use crate::source::context::SourceContext;
use crate::source::engine::PodFailure;
use crate::source::error::{PollOutcome, SourceError};
use crate::source::spec::{Reading, SourceMemory, SourceSpec};

/// What identifies a poller: the source and how often it is read. Triggers
/// with the same source but another interval get their own poller, so that
/// neither is read at the wrong rate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PollerKey {
    /// The source.
    pub source: SourceSpec,
    /// Its poll interval.
    pub interval: Duration,
}

/// `value`, stamped now (the poller owns the clock; `decide` only compares).
fn timed_now<T>(value: T) -> Timed<T> {
    Timed {
        value,
        at: Instant::now(),
        wall: SystemTime::now(),
    }
}

/// A running poller. Dropping the last handle stops its task.
#[derive(Debug)]
pub struct Poller {
    key: PollerKey,
    label: String,
    state: watch::Receiver<Arc<SignalState>>,
    task: AbortHandle,
    telemetry: Arc<Telemetry>,
}

impl Poller {
    /// The source label used in logs and metrics.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What this poller reads.
    pub fn key(&self) -> &PollerKey {
        &self.key
    }

    /// A receiver of state updates.
    pub fn subscribe(&self) -> watch::Receiver<Arc<SignalState>> {
        self.state.clone()
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.task.abort();
        self.telemetry.add_pollers(-1);
        tracing::info!(source = %self.label, "poller stopped");
    }
}

/// Starts pollers, or hands out the running one for a key.
#[derive(Debug)]
pub struct PollerRegistry {
    pollers: Mutex<HashMap<PollerKey, Weak<Poller>>>,
    ctx: SourceContext,
    telemetry: Arc<Telemetry>,
}

impl PollerRegistry {
    /// A registry whose pollers read with `ctx`.
    pub fn new(ctx: SourceContext, telemetry: Arc<Telemetry>) -> PollerRegistry {
        PollerRegistry {
            pollers: Mutex::new(HashMap::new()),
            ctx,
            telemetry,
        }
    }

    /// What the pollers read with (HTTP client, outbound policy).
    pub fn context(&self) -> &SourceContext {
        &self.ctx
    }

    /// The poller for `key`, started if none runs. Must be called within a
    /// tokio runtime.
    pub fn acquire(&self, key: PollerKey) -> Arc<Poller> {
        let mut pollers = self.pollers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = pollers.get(&key).and_then(Weak::upgrade) {
            return existing;
        }
        pollers.retain(|_, weak| weak.strong_count() > 0);
        let label = key.source.label();
        let (tx, rx) = watch::channel(Arc::new(SignalState::default()));
        let task = tokio::spawn(poll_loop(
            key.clone(),
            label.clone(),
            self.ctx.clone(),
            tx,
            self.telemetry.clone(),
        ));
        let poller = Arc::new(Poller {
            key: key.clone(),
            label: label.clone(),
            state: rx,
            task: task.abort_handle(),
            telemetry: self.telemetry.clone(),
        });
        self.telemetry.add_pollers(1);
        tracing::info!(source = %label, interval_s = key.interval.as_secs(), "poller started");
        pollers.insert(key, Arc::downgrade(&poller));
        poller
    }
}

/// Each reading may take at most this share of the interval, so a slow
/// upstream never makes polls pile up.
const TIMEOUT_SHARE: f64 = 0.8;
/// First retry after a failure comes this soon (then doubles up to the interval).
const FIRST_RETRY: Duration = Duration::from_millis(250);

/// Each pod's scrape may take at most this share of the reading timeout:
/// a pod that hangs fails on its own, before the whole reading times out
/// and takes every other pod's answer with it.
const POD_SHARE: f64 = 0.9;

/// The reading timeout for a poll interval.
pub fn read_timeout(interval: Duration) -> Duration {
    interval.mul_f64(TIMEOUT_SHARE).min(Duration::from_secs(10))
}

async fn poll_loop(
    key: PollerKey,
    label: String,
    ctx: SourceContext,
    tx: watch::Sender<Arc<SignalState>>,
    telemetry: Arc<Telemetry>,
) {
    let timeout = read_timeout(key.interval);
    let mut state = SignalState::default();
    let mut memory = SourceMemory::default();
    // Broker calls get the same bound as the reading, so an abandoned
    // blocking call (librdkafka) ends by itself.
    let ctx = SourceContext {
        brokers: ctx.brokers.with_request_timeout(timeout),
        ..ctx
    };
    loop {
        let started = Instant::now();
        let result = match tokio::time::timeout(
            timeout,
            read_polled(&key.source, &ctx, &mut memory, timeout),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(SourceError::timeout(timeout)),
        };
        let elapsed = started.elapsed();
        match result {
            Ok((reading, failed)) => {
                let failing = failing_pods(&state, failed, Instant::now(), SystemTime::now());
                log_pod_changes(&label, &state.failing_pods, &failing, &reading);
                state.failing_pods = failing;
                let malformed = reading.malformed_lines();
                telemetry.record_poll(&label, PollOutcome::Ok, elapsed, malformed);
                if malformed > 0 {
                    tracing::warn!(source = %label, malformed_lines = malformed, "skipped malformed lines in upstream data");
                }
                if state.failing() {
                    tracing::info!(source = %label, failures = state.consecutive_failures, "source recovered");
                }
                state.last_good = Some(timed_now(reading));
                state.consecutive_failures = 0;
            }
            Err(error) => {
                telemetry.record_poll(&label, error.outcome(), elapsed, 0);
                // Log the first failure and changes of reason, not every poll.
                let reason_changed = state.last_failure.as_ref().is_none_or(|f| f.value != error);
                if !state.failing() || reason_changed {
                    tracing::warn!(source = %label, outcome = error.outcome().as_str(), error = %error, "source read failed");
                }
                state.last_failure = Some(timed_now(error));
                state.consecutive_failures = state.consecutive_failures.saturating_add(1);
            }
        }
        let failures = state.consecutive_failures;
        tx.send_replace(Arc::new(state.clone()));
        let wait = if failures == 0 {
            key.interval
        } else {
            retry_delay(failures, key.interval, &label)
        };
        tokio::time::sleep_until((started + wait).into()).await;
    }
}

/// One poll's reading: pod-scrape sources pod by pod (the pods that
/// answered, and how each other discovered pod failed), every other source
/// as [`read_once`].
async fn read_polled(
    source: &SourceSpec,
    ctx: &SourceContext,
    memory: &mut SourceMemory,
    timeout: Duration,
) -> Result<(Reading, Vec<PodFailure>), SourceError> {
    match source {
        SourceSpec::Engine(source) => {
            let read = source.read_pods(ctx, timeout.mul_f64(POD_SHARE)).await?;
            Ok((Reading::Engine(read.reading), read.failed))
        }
        other => Ok((read_once(other, ctx, memory).await?, Vec::new())),
    }
}

/// The pods of a successful poll that failed, each with its newest good
/// reading: carried over if it was failing already, else taken from the
/// previous reading (with that poll's time). A pod the poll did not
/// discover is gone at once, whatever it held.
fn failing_pods(
    previous: &SignalState,
    failed: Vec<PodFailure>,
    at: Instant,
    wall: SystemTime,
) -> Vec<FailingPod> {
    failed
        .into_iter()
        .map(|failure| {
            let before = previous
                .failing_pods
                .iter()
                .find(|p| p.target == failure.target);
            let last_good = match before {
                Some(before) => before.last_good.clone(),
                None => previous
                    .last_good
                    .as_ref()
                    .and_then(|good| match &good.value {
                        Reading::Engine(reading) => reading
                            .pods
                            .iter()
                            .find(|p| p.target == failure.target)
                            .map(|pod| Timed {
                                value: pod.clone(),
                                at: good.at,
                                wall: good.wall,
                            }),
                        _ => None,
                    }),
            };
            FailingPod {
                target: failure.target,
                last_good,
                last_failure: Timed {
                    value: failure.error,
                    at,
                    wall,
                },
                consecutive_failures: before
                    .map_or(1, |b| b.consecutive_failures.saturating_add(1)),
            }
        })
        .collect()
}

/// Log a pod's first failure, a change of its reason, and its recovery;
/// not every poll.
fn log_pod_changes(label: &str, before: &[FailingPod], after: &[FailingPod], now: &Reading) {
    for pod in after {
        let previous = before.iter().find(|b| b.target == pod.target);
        if previous.is_none_or(|b| b.last_failure.value != pod.last_failure.value) {
            let error = &pod.last_failure.value;
            tracing::warn!(source = %label, pod = %pod.target, outcome = error.kind().as_str(), error = %error, "pod scrape failed; the other pods answered");
        }
    }
    for pod in before {
        if after.iter().any(|a| a.target == pod.target) {
            continue;
        }
        let answered =
            matches!(now, Reading::Engine(r) if r.pods.iter().any(|p| p.target == pod.target));
        if answered {
            tracing::info!(source = %label, pod = %pod.target, failures = pod.consecutive_failures, "pod recovered");
        } else {
            tracing::info!(source = %label, pod = %pod.target, "failing pod is gone from discovery; dropped");
        }
    }
}

/// Take one reading of `source`, calling its reader directly. `memory` is
/// the poller's state between readings (open broker connections, Kafka's
/// previous offsets). A pod-scrape source is read all-or-nothing here (as
/// `check` probes it); the pollers read it pod by pod.
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

/// Exponential backoff from [`FIRST_RETRY`] to the interval, with ±25 %
/// jitter so that many pollers failing together do not retry in lockstep.
fn retry_delay(failures: u32, interval: Duration, seed: &str) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    let base = FIRST_RETRY.saturating_mul(1 << exponent).min(interval);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    seed.hash(&mut hasher);
    failures.hash(&mut hasher);
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
        .hash(&mut hasher);
    let jitter = (hasher.finish() % 1000) as f64 / 1000.0; // 0..1
    base.mul_f64(0.75 + jitter * 0.5).min(interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_backs_off_within_the_interval() {
        let interval = Duration::from_secs(5);
        let first = retry_delay(1, interval, "s");
        assert!(
            first >= Duration::from_millis(187) && first <= Duration::from_millis(313),
            "{first:?}"
        );
        for failures in 1..40 {
            assert!(retry_delay(failures, interval, "s") <= interval);
        }
        assert!(retry_delay(10, interval, "s") >= Duration::from_millis(3750));
    }

    #[test]
    fn a_failing_pod_carries_its_last_good_reading_and_a_gone_one_is_dropped() {
        use crate::source::{Engine, EngineReading, FailureKind, PodReading};
        let pod = |target: &str, waiting: f64| PodReading {
            target: target.into(),
            waiting,
            running: None,
            kv_cache_usage: None,
            ttft: None,
            finished_total: None,
            read: Default::default(),
        };
        let failure = |target: &str| PodFailure {
            target: target.into(),
            error: SourceError::new(FailureKind::Timeout, target, "no answer"),
        };
        let t0 = Instant::now();
        let mut state = SignalState {
            last_good: Some(Timed {
                value: Reading::Engine(EngineReading {
                    engine: Engine::Vllm,
                    pods: vec![pod("a", 1.0), pod("b", 2.0), pod("c", 3.0)],
                    malformed_lines: 0,
                    empty_discovery: Vec::new(),
                }),
                at: t0,
                wall: SystemTime::now(),
            }),
            ..SignalState::default()
        };
        // Poll 2: `b` fails; its reading of poll 1 is carried, with poll 1's time.
        let t1 = t0 + Duration::from_secs(5);
        let failing = failing_pods(&state, vec![failure("b")], t1, SystemTime::now());
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].consecutive_failures, 1);
        let held = failing[0].last_good.as_ref().expect("held");
        assert_eq!((held.value.waiting, held.at), (2.0, t0));
        state.failing_pods = failing;
        state.last_good = Some(Timed {
            value: Reading::Engine(EngineReading {
                engine: Engine::Vllm,
                pods: vec![pod("a", 1.5), pod("c", 3.5)],
                malformed_lines: 0,
                empty_discovery: Vec::new(),
            }),
            at: t1,
            wall: SystemTime::now(),
        });
        // Poll 3: `b` still fails (same held reading, count 2); `d`, new and
        // failing, never answered.
        let t2 = t1 + Duration::from_secs(5);
        let failing = failing_pods(
            &state,
            vec![failure("b"), failure("d")],
            t2,
            SystemTime::now(),
        );
        assert_eq!(failing[0].consecutive_failures, 2);
        assert_eq!(
            failing[0]
                .last_good
                .as_ref()
                .map(|g| (g.value.waiting, g.at)),
            Some((2.0, t0))
        );
        assert_eq!(failing[0].last_failure.at, t2);
        assert!(failing[1].last_good.is_none());
        state.failing_pods = failing;
        // Poll 4: `b` is gone from discovery: dropped, whatever it held.
        let failing = failing_pods(&state, vec![failure("d")], t2, SystemTime::now());
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].target, "d");
    }

    #[test]
    fn read_timeout_is_below_the_interval() {
        assert_eq!(read_timeout(Duration::from_secs(5)), Duration::from_secs(4));
        assert_eq!(
            read_timeout(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
    }
}
