//! The decision cache: the latest [`Evaluation`] of every trigger KEDA has
//! asked about, kept fresh by one task per trigger.
//!
//! gRPC handlers only read from here (no upstream I/O on the warm path). A
//! trigger is registered on first sight, which starts (or joins) its pollers;
//! its task re-evaluates whenever a poller publishes and whenever a held
//! reading reaches `maxSignalAgeSeconds`, so staleness shows in `/explain`,
//! the self-metrics and the logs even when nothing new arrives. A trigger no
//! call has touched for the idle timeout, with no open stream, is dropped
//! with its pollers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio_stream::StreamExt;
use tokio_stream::StreamMap;
use tokio_stream::wrappers::WatchStream;

use crate::fusion::{self, Decision, Signals};
use crate::poller::{Poller, PollerKey, PollerRegistry, SignalState};
use crate::source::Reading;
use crate::telemetry::{Telemetry, TriggerLabels};
use crate::trigger::{MetadataErrors, TriggerSpec};

/// Server-wide settings of the cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheSettings {
    /// How long the first call for a new trigger waits for a first reading.
    pub cold_start_budget: Duration,
    /// Drop a trigger nobody asked about for this long.
    pub idle_timeout: Duration,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            // Under KEDA's 3 s deadline for GetMetricSpec+GetMetrics+IsActive.
            cold_start_budget: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(600),
        }
    }
}

/// Why a trigger has no value to give.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// The state of one trigger's number.
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
    Unavailable(String),
}

/// How one source stood at an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalReport {
    /// The source's label.
    pub source: String,
    /// The source's state at evaluation time.
    pub state: Arc<SignalState>,
}

/// One evaluation of a trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The outcome.
    pub status: Status,
    /// A source is failing and its last good reading is held.
    pub degraded: bool,
    /// Per source, what the evaluation saw.
    pub signals: Vec<SignalReport>,
    /// When it was computed.
    pub evaluated_at: SystemTime,
}

impl Evaluation {
    fn pending() -> Evaluation {
        Evaluation {
            status: Status::Pending,
            degraded: false,
            signals: Vec::new(),
            evaluated_at: SystemTime::now(),
        }
    }

    /// The decision if it is still valid at `now`.
    pub fn decision_at(&self, now: Instant) -> Result<Decision, Unavailable> {
        match &self.status {
            Status::Ready {
                decision,
                valid_until,
            } if now <= *valid_until => Ok(*decision),
            Status::Ready { .. } => Err(Unavailable(
                "the last good reading has passed maxSignalAgeSeconds".to_owned(),
            )),
            Status::Pending => Err(Unavailable("no reading from any source yet".to_owned())),
            Status::Unavailable(reason) => Err(Unavailable(reason.clone())),
        }
    }

    fn kind(&self) -> &'static str {
        match (&self.status, self.degraded) {
            (Status::Pending, _) => "pending",
            (Status::Ready { .. }, false) => "ok",
            (Status::Ready { .. }, true) => "degraded",
            (Status::Unavailable(_), _) => "unavailable",
        }
    }
}

/// Combine the sources' states into an evaluation. Pure given `now`.
pub fn evaluate(spec: &TriggerSpec, signals: Vec<SignalReport>, now: Instant) -> Evaluation {
    let max_age = spec.max_signal_age;
    let mut problems = Vec::new();
    let mut pending = false;
    let mut degraded = false;
    let mut oldest: Option<Instant> = None;
    let mut engine = Signals::default();
    for report in &signals {
        let state = &report.state;
        let last_error = state
            .last_failure
            .as_ref()
            .map(|f| f.value.to_string())
            .unwrap_or_default();
        let Some(good) = &state.last_good else {
            if state.failing() {
                problems.push(format!(
                    "{}: no successful reading yet ({} failed polls; last error: {last_error})",
                    report.source, state.consecutive_failures
                ));
            } else {
                pending = true;
            }
            continue;
        };
        let age = now.saturating_duration_since(good.at);
        if age > max_age {
            problems.push(format!(
                "{}: last good reading is {}s old, past maxSignalAgeSeconds={} ({} failed polls; last error: {last_error})",
                report.source,
                age.as_secs(),
                max_age.as_secs(),
                state.consecutive_failures
            ));
            continue;
        }
        degraded |= state.failing();
        oldest = Some(oldest.map_or(good.at, |o| o.min(good.at)));
        match &good.value {
            Reading::Engine(reading) => {
                engine.waiting += reading.waiting();
                engine.running += reading.running();
                engine.replicas_reporting += reading.pods.len();
            }
        }
    }
    let status = if !problems.is_empty() {
        Status::Unavailable(problems.join("; "))
    } else if pending {
        Status::Pending
    } else {
        match oldest {
            Some(oldest) => Status::Ready {
                decision: fusion::fuse(&spec.fusion, &engine),
                valid_until: oldest + max_age,
            },
            // A spec always has a source; stay total anyway.
            None => Status::Unavailable("the trigger has no sources".to_owned()),
        }
    };
    Evaluation {
        status,
        degraded,
        signals,
        evaluated_at: SystemTime::now(),
    }
}

/// What makes two triggers the same: the ScaledObject and its exact metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TriggerKey {
    /// ScaledObject namespace.
    pub namespace: String,
    /// ScaledObject name.
    pub name: String,
    /// The metadata, sorted.
    pub metadata: BTreeMap<String, String>,
}

/// One tracked trigger.
#[derive(Debug)]
pub struct TriggerEntry {
    /// ScaledObject namespace.
    pub namespace: String,
    /// ScaledObject name.
    pub name: String,
    /// Its validated metadata.
    pub spec: Arc<TriggerSpec>,
    evaluation: watch::Receiver<Arc<Evaluation>>,
    last_access_ms: AtomicU64,
    epoch: Instant,
    task: AbortHandle,
    labels: TriggerLabels,
    telemetry: Arc<Telemetry>,
}

impl TriggerEntry {
    /// The latest evaluation.
    pub fn evaluation(&self) -> Arc<Evaluation> {
        self.evaluation.borrow().clone()
    }

    /// A receiver of evaluations, for streams.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Evaluation>> {
        self.evaluation.clone()
    }

    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_access_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_access_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// The current decision, waiting up to `budget` while no source has
    /// answered yet (the cold start of a new trigger).
    pub async fn decision(&self, budget: Duration) -> Result<Decision, Unavailable> {
        let deadline = tokio::time::Instant::now() + budget;
        let mut rx = self.evaluation.clone();
        loop {
            let evaluation = rx.borrow_and_update().clone();
            if evaluation.status != Status::Pending {
                return evaluation.decision_at(Instant::now());
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => {
                    return Err(Unavailable(format!(
                        "no reading yet: the first poll of {} has not finished within the {} ms cold-start budget; polling continues",
                        self.spec
                            .sources
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        budget.as_millis()
                    )));
                }
            }
        }
    }
}

impl Drop for TriggerEntry {
    fn drop(&mut self) {
        self.task.abort();
        self.telemetry.forget_trigger(&self.labels);
    }
}

/// Every tracked trigger, with the pollers behind them.
#[derive(Debug)]
pub struct DecisionCache {
    triggers: RwLock<HashMap<TriggerKey, Arc<TriggerEntry>>>,
    pollers: PollerRegistry,
    telemetry: Arc<Telemetry>,
    settings: CacheSettings,
}

impl DecisionCache {
    /// An empty cache.
    pub fn new(
        pollers: PollerRegistry,
        telemetry: Arc<Telemetry>,
        settings: CacheSettings,
    ) -> DecisionCache {
        DecisionCache {
            triggers: RwLock::new(HashMap::new()),
            pollers,
            telemetry,
            settings,
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> CacheSettings {
        self.settings
    }

    /// The entry for a trigger, registering it (and starting its pollers) on
    /// first sight. Invalid metadata is never registered.
    pub fn get_or_register(
        &self,
        namespace: String,
        name: String,
        metadata: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Arc<TriggerEntry>, MetadataErrors> {
        let key = TriggerKey {
            namespace,
            name,
            metadata: metadata.into_iter().collect(),
        };
        if let Some(entry) = self
            .triggers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            entry.touch();
            return Ok(entry.clone());
        }
        let spec =
            TriggerSpec::from_metadata(key.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        let mut triggers = self.triggers.write().unwrap_or_else(|e| e.into_inner());
        // Another call may have registered it while we parsed.
        if let Some(entry) = triggers.get(&key) {
            entry.touch();
            return Ok(entry.clone());
        }
        let entry = Arc::new(self.start_trigger(&key, spec));
        tracing::info!(
            namespace = %entry.namespace,
            name = %entry.name,
            metric = %entry.spec.metric_name,
            sources = entry.spec.sources.len(),
            "trigger registered"
        );
        triggers.insert(key, entry.clone());
        self.telemetry.set_triggers(triggers.len());
        Ok(entry)
    }

    fn start_trigger(&self, key: &TriggerKey, spec: TriggerSpec) -> TriggerEntry {
        let spec = Arc::new(spec);
        let pollers: Vec<Arc<Poller>> = spec
            .sources
            .iter()
            .map(|source| {
                self.pollers.acquire(PollerKey {
                    source: source.clone(),
                    interval: spec.poll_interval,
                })
            })
            .collect();
        let labels = TriggerLabels {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            metric: spec.metric_name.clone(),
        };
        let (tx, rx) = watch::channel(Arc::new(Evaluation::pending()));
        let task = tokio::spawn(trigger_loop(
            spec.clone(),
            pollers,
            tx,
            labels.clone(),
            self.telemetry.clone(),
        ));
        let entry = TriggerEntry {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            spec,
            evaluation: rx,
            last_access_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            task: task.abort_handle(),
            labels,
            telemetry: self.telemetry.clone(),
        };
        entry.touch();
        entry
    }

    /// Every tracked trigger.
    pub fn entries(&self) -> Vec<Arc<TriggerEntry>> {
        let triggers = self.triggers.read().unwrap_or_else(|e| e.into_inner());
        let mut entries: Vec<_> = triggers.values().cloned().collect();
        entries.sort_by(|a, b| {
            (&a.namespace, &a.name, &a.spec.metric_name).cmp(&(
                &b.namespace,
                &b.name,
                &b.spec.metric_name,
            ))
        });
        entries
    }

    /// Drop triggers idle past the timeout that no stream holds.
    pub fn sweep_idle(&self) -> usize {
        let mut triggers = self.triggers.write().unwrap_or_else(|e| e.into_inner());
        let before = triggers.len();
        triggers.retain(|_, entry| {
            // The map holds one reference; any other is an open stream.
            let in_use = Arc::strong_count(entry) > 1;
            let keep = in_use || entry.idle_for() < self.settings.idle_timeout;
            if !keep {
                tracing::info!(namespace = %entry.namespace, name = %entry.name, metric = %entry.spec.metric_name, "trigger dropped after idle timeout");
            }
            keep
        });
        self.telemetry.set_triggers(triggers.len());
        before - triggers.len()
    }

    /// Run [`Self::sweep_idle`] periodically until `shutdown` fires.
    pub async fn run_janitor(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let period = (self.settings.idle_timeout / 10)
            .clamp(Duration::from_millis(100), Duration::from_secs(30));
        let mut ticker = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = ticker.tick() => { self.sweep_idle(); }
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

async fn trigger_loop(
    spec: Arc<TriggerSpec>,
    pollers: Vec<Arc<Poller>>,
    tx: watch::Sender<Arc<Evaluation>>,
    labels: TriggerLabels,
    telemetry: Arc<Telemetry>,
) {
    let mut updates = StreamMap::new();
    for (i, poller) in pollers.iter().enumerate() {
        updates.insert(i, WatchStream::new(poller.subscribe()));
    }
    let mut previous = Evaluation::pending();
    loop {
        let now = Instant::now();
        let signals = pollers
            .iter()
            .map(|p| SignalReport {
                source: p.label().to_owned(),
                state: p.subscribe().borrow().clone(),
            })
            .collect();
        let evaluation = evaluate(&spec, signals, now);
        log_transition(&labels, &previous, &evaluation);
        match &evaluation.status {
            Status::Ready { decision, .. } => {
                telemetry.record_decision(&labels, decision, evaluation.degraded)
            }
            Status::Unavailable(_) => telemetry.record_unavailable(&labels),
            Status::Pending => {}
        }
        let wake_at = match &evaluation.status {
            // Re-evaluate just after the held reading expires.
            Status::Ready { valid_until, .. } => {
                (*valid_until + Duration::from_millis(1)).min(now + spec.poll_interval)
            }
            _ => now + spec.poll_interval,
        };
        previous = evaluation.clone();
        tx.send_replace(Arc::new(evaluation));
        tokio::select! {
            update = updates.next() => {
                if update.is_none() {
                    return;
                }
            }
            _ = tokio::time::sleep_until(wake_at.into()) => {}
        }
    }
}

fn log_transition(labels: &TriggerLabels, before: &Evaluation, after: &Evaluation) {
    let (from, to) = (before.kind(), after.kind());
    if from != to {
        let reason = match &after.status {
            Status::Unavailable(reason) => reason.as_str(),
            _ => "",
        };
        if to == "unavailable" || to == "degraded" {
            tracing::warn!(namespace = %labels.namespace, name = %labels.name, metric = %labels.metric, from, to, reason, "trigger state changed");
        } else {
            tracing::info!(namespace = %labels.namespace, name = %labels.name, metric = %labels.metric, from, to, "trigger state changed");
        }
    }
    let active = |e: &Evaluation| match &e.status {
        Status::Ready { decision, .. } => Some(decision.active),
        _ => None,
    };
    if let (Some(was), Some(is)) = (active(before), active(after))
        && was != is
        && let Status::Ready { decision, .. } = &after.status
    {
        tracing::info!(namespace = %labels.namespace, name = %labels.name, metric = %labels.metric, active = is, backlog = decision.backlog, "activity changed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::Timed;
    use crate::source::{EngineReading, PodReading, SourceError};

    fn spec() -> TriggerSpec {
        TriggerSpec::from_metadata([
            ("vllmTargets", "http://127.0.0.1:1/metrics"),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("pollIntervalSeconds", "5"),
        ])
        .expect("valid")
    }

    fn reading(waiting: f64, running: f64, at: Instant) -> Timed<Reading> {
        Timed {
            value: Reading::Engine(EngineReading {
                pods: vec![PodReading {
                    target: "t".into(),
                    waiting,
                    running,
                }],
                malformed_lines: 0,
            }),
            at,
            wall: SystemTime::now(),
        }
    }

    fn report(state: SignalState) -> Vec<SignalReport> {
        vec![SignalReport {
            source: "vllm t".into(),
            state: Arc::new(state),
        }]
    }

    fn failure(at: Instant) -> Timed<SourceError> {
        Timed {
            value: SourceError::Upstream {
                target: "t".into(),
                reason: "connect failed: Connection refused".into(),
            },
            at,
            wall: SystemTime::now(),
        }
    }

    #[test]
    fn fresh_reading_is_ready() {
        let now = Instant::now();
        let e = evaluate(
            &spec(),
            report(SignalState {
                last_good: Some(reading(10.0, 32.0, now)),
                ..Default::default()
            }),
            now,
        );
        let d = e.decision_at(now).expect("ready");
        assert_eq!(d.backlog, 20.0);
        assert!(!e.degraded);
    }

    #[test]
    fn failing_source_holds_last_good_until_max_age_then_unavailable() {
        let t0 = Instant::now();
        let state = SignalState {
            last_good: Some(reading(10.0, 0.0, t0)),
            last_failure: Some(failure(t0 + Duration::from_secs(5))),
            consecutive_failures: 1,
        };
        let held = evaluate(&spec(), report(state.clone()), t0 + Duration::from_secs(5));
        assert!(held.degraded);
        assert_eq!(
            held.decision_at(t0 + Duration::from_secs(5))
                .expect("held")
                .backlog,
            10.0
        );
        // The held value expires at max age even if nobody re-evaluates.
        assert!(held.decision_at(t0 + Duration::from_secs(16)).is_err());
        let lost = evaluate(&spec(), report(state), t0 + Duration::from_secs(16));
        let err = lost
            .decision_at(t0 + Duration::from_secs(16))
            .expect_err("stale");
        assert!(err.0.contains("maxSignalAgeSeconds=15"), "{err}");
        assert!(err.0.contains("Connection refused"), "{err}");
    }

    #[test]
    fn no_reading_yet_is_pending_and_first_failure_is_unavailable() {
        let now = Instant::now();
        let pending = evaluate(&spec(), report(SignalState::default()), now);
        assert_eq!(pending.status, Status::Pending);
        let failed = evaluate(
            &spec(),
            report(SignalState {
                last_failure: Some(failure(now)),
                consecutive_failures: 1,
                ..Default::default()
            }),
            now,
        );
        let err = failed.decision_at(now).expect_err("unavailable");
        assert!(err.0.contains("no successful reading yet"), "{err}");
    }
}
