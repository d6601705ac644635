//! Pollers: one background task per distinct source, shared by every trigger
//! that reads it.
//!
//! A poller owns timing and failure for its source: it reads every poll
//! interval, bounds each poll with a deadline, retries a transient failure
//! within it (`retry`), polls again sooner after a transient failed poll and
//! later, backing off to a cap, after a permanent one (`backoff`), and
//! publishes the latest [`SignalState`] on a watch channel. It keeps the
//! last good reading; judging whether that reading is still young enough is
//! the trigger's job, because the age limit is per trigger. A poller stops
//! when the last trigger using it drops its handle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::decide::signal_state::FailingPod;
pub use crate::decide::signal_state::{SignalState, Timed};
use crate::runtime::backoff::{SplitMix, backoff_after, transient_delay};
use crate::runtime::retry::read_with_retries;
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
    /// Bumped when a trigger with new metadata starts using this poller:
    /// a backoff ends and the next poll starts at once.
    registrations: watch::Sender<u64>,
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
            // Only a new registration gets here (a known trigger keeps its
            // handles): its metadata may be the fix for what failed.
            existing
                .registrations
                .send_modify(|n| *n = n.wrapping_add(1));
            return existing;
        }
        pollers.retain(|_, weak| weak.strong_count() > 0);
        let label = key.source.label();
        let (tx, rx) = watch::channel(Arc::new(SignalState::default()));
        let (registrations, registered) = watch::channel(0u64);
        let task = tokio::spawn(poll_loop(
            key.clone(),
            label.clone(),
            self.ctx.clone(),
            tx,
            registered,
            self.telemetry.clone(),
        ));
        let poller = Arc::new(Poller {
            key: key.clone(),
            label: label.clone(),
            state: rx,
            registrations,
            task: task.abort_handle(),
            telemetry: self.telemetry.clone(),
        });
        self.telemetry.add_pollers(1);
        tracing::info!(source = %label, interval_s = key.interval.as_secs(), "poller started");
        pollers.insert(key, Arc::downgrade(&poller));
        poller
    }
}

/// Each poll may take at most this share of the interval, so a slow
/// upstream never makes polls pile up.
const TIMEOUT_SHARE: f64 = 0.8;

/// The poll timeout for a poll interval: every attempt of a poll, retries
/// included, ends within it.
pub fn read_timeout(interval: Duration) -> Duration {
    interval.mul_f64(TIMEOUT_SHARE).min(Duration::from_secs(10))
}

async fn poll_loop(
    key: PollerKey,
    label: String,
    ctx: SourceContext,
    tx: watch::Sender<Arc<SignalState>>,
    mut registered: watch::Receiver<u64>,
    telemetry: Arc<Telemetry>,
) {
    let timeout = read_timeout(key.interval);
    let mut state = SignalState::default();
    let mut memory = SourceMemory::default();
    let mut rng = SplitMix::for_source(&label);
    // Broker calls get the same bound as the reading, so an abandoned
    // blocking call (librdkafka) ends by itself.
    let ctx = SourceContext {
        brokers: ctx.brokers.with_request_timeout(timeout),
        ..ctx
    };
    // Set when a registration ended a backoff: the count restarted, and a
    // success still ends a failure episode.
    let mut reset = false;
    // Set while the newest poll's failure backs off: its start is logged once.
    let mut backing_off = false;
    loop {
        // Registrations before this poll see its outcome; only a later one
        // ends the backoff that outcome may start.
        registered.borrow_and_update();
        let started = Instant::now();
        let attempted = tokio::time::timeout(
            timeout,
            read_with_retries(
                &key.source,
                &ctx,
                &mut memory,
                started + timeout,
                timeout,
                &mut rng,
            ),
        )
        .await;
        let result = match attempted {
            Ok(attempted) => {
                if attempted.retries > 0 {
                    tracing::debug!(source = %label, retries = attempted.retries, ok = attempted.result.is_ok(), "poll retried");
                }
                attempted.result
            }
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
                if state.failing() || reset {
                    tracing::info!(source = %label, failures = state.consecutive_failures, "source recovered");
                }
                reset = false;
                state.last_good = Some(timed_now(reading));
                state.consecutive_failures = 0;
            }
            Err(error) => {
                telemetry.record_poll(&label, error.outcome(), elapsed, 0);
                // Log the first failure and changes of reason, not every
                // poll; a reason is its kind and target (`same_failure`).
                let reason_changed = state
                    .last_failure
                    .as_ref()
                    .is_none_or(|f| !f.value.same_failure(&error));
                if !state.failing() || reason_changed {
                    tracing::warn!(source = %label, outcome = error.outcome().as_str(), error = %error, "source read failed");
                }
                state.last_failure = Some(timed_now(error));
                state.consecutive_failures = state.consecutive_failures.saturating_add(1);
            }
        }
        tx.send_replace(Arc::new(state.clone()));
        let backoff = state.last_failure.as_ref().and_then(|failure| {
            backoff_after(
                failure.value.kind(),
                state.consecutive_failures,
                failure.at,
                key.interval,
                &label,
            )
        });
        match backoff {
            Some(backoff) => {
                if !backing_off {
                    tracing::warn!(source = %label, delay_s = backoff.delay.as_secs_f64(), "source fails permanently; backing off (doubling per failed poll, up to 300 s) until it answers or a trigger with new metadata uses it");
                }
                // `/explain` recomputes this wait from the published state
                // (`backoff_after`), so the poller sleeps exactly by it.
                let woken = tokio::select! {
                    _ = tokio::time::sleep_until(backoff.next_attempt.into()) => false,
                    changed = registered.changed() => changed.is_ok(),
                };
                backing_off = !woken;
                if woken {
                    reset = true;
                    tracing::info!(source = %label, "backoff reset: a trigger with new metadata uses this source");
                    // The count restarts, and with it the backoff.
                    state.consecutive_failures = 0;
                }
            }
            None => {
                backing_off = false;
                let wait = match state.consecutive_failures {
                    0 => key.interval,
                    failures => transient_delay(failures, key.interval, &mut rng),
                };
                tokio::time::sleep_until((started + wait).into()).await;
            }
        }
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

/// Log a pod's first failure, a change of its reason (its kind:
/// [`SourceError::same_failure`]), and its recovery; not every poll.
fn log_pod_changes(label: &str, before: &[FailingPod], after: &[FailingPod], now: &Reading) {
    for pod in after {
        let previous = before.iter().find(|b| b.target == pod.target);
        if previous.is_none_or(|b| !b.last_failure.value.same_failure(&pod.last_failure.value)) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            generation_tokens_total: None,
            prompt_tokens_total: None,
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
