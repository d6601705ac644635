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

pub use crate::decide::signal_state::{SignalState, Timed};
use crate::runtime::telemetry::Telemetry;
use crate::source::context::SourceContext;
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
        let result =
            match tokio::time::timeout(timeout, read_once(&key.source, &ctx, &mut memory)).await {
                Ok(result) => result,
                Err(_) => Err(SourceError::timeout(timeout)),
            };
        let elapsed = started.elapsed();
        match result {
            Ok(reading) => {
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

/// Take one reading of `source`, calling its reader directly. `memory` is
/// the poller's state between readings (open broker connections, Kafka's
/// previous offsets).
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
    fn read_timeout_is_below_the_interval() {
        assert_eq!(read_timeout(Duration::from_secs(5)), Duration::from_secs(4));
        assert_eq!(
            read_timeout(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
    }
}
