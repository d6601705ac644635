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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::AbortHandle;

pub use crate::decide::freshness::{Evaluation, SignalReport, Status, Unavailable};
use crate::decide::fusion::Decision;
#[cfg(test)]
use crate::decide::quorum::PodState;
use crate::guard::config::DEFAULT_MAX_TRIGGERS;
use crate::guard::credentials::{ProfileError, Section};
use crate::guard::outbound::OutboundDenied;
use crate::runtime::poller::{Poller, PollerKey, PollerRegistry};
use crate::runtime::telemetry::{Telemetry, TriggerLabels};
use crate::source::SourceSpec;
use crate::trigger::{MetadataErrors, TriggerSpec};
#[cfg(test)]
use task::degraded_reason;
use task::{LoopStats, trigger_loop};

/// Server-wide settings of the cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheSettings {
    /// How long the first call for a new trigger waits for a first reading.
    pub cold_start_budget: Duration,
    /// Drop a trigger nobody asked about for this long.
    pub idle_timeout: Duration,
    /// Refuse a new trigger while this many are registered (`maxTriggers`).
    pub max_triggers: usize,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            // Under KEDA's 3 s deadline for GetMetricSpec+GetMetrics+IsActive.
            cold_start_budget: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(600),
            max_triggers: DEFAULT_MAX_TRIGGERS,
        }
    }
}

impl CacheSettings {
    /// The settings a scaler config implies.
    pub fn from_config(config: &crate::guard::config::ScalerConfig) -> CacheSettings {
        CacheSettings {
            cold_start_budget: Duration::from_millis(config.cold_start_budget_millis),
            idle_timeout: Duration::from_secs(config.idle_timeout_seconds),
            max_triggers: config.max_triggers,
        }
    }
}

/// Why a trigger was not registered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegisterError {
    /// The metadata is invalid.
    #[error(transparent)]
    Metadata(#[from] MetadataErrors),
    /// The metadata names targets the outbound allowlist refuses (never empty).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Denied(Vec<OutboundDenied>),
    /// The trigger's namespace may not use the `authProfile` it names.
    #[error("{0}")]
    ProfileDenied(ProfileError),
    /// The `authProfile` does not exist or lacks the section the source needs.
    #[error("{0}")]
    Profile(ProfileError),
    /// The scaler is shutting down: triggers it holds keep their answers
    /// until the streams end, a new one is refused so that KEDA registers
    /// it with the replica that stays.
    #[error(
        "the scaler is shutting down and takes no new triggers; KEDA's next call reaches a replica that stays"
    )]
    ShuttingDown,
    /// The scaler already holds `maxTriggers` triggers: a refusal of the
    /// scaler's own capacity, not a judgement of the metadata.
    #[error(
        "the scaler's trigger count ({held}) has reached its limit (`maxTriggers` in --config) of {limit}; raise it or run another scaler"
    )]
    AtCapacity {
        /// Triggers registered when this one was refused.
        held: usize,
        /// The `maxTriggers` limit.
        limit: usize,
    },
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
    stats: Arc<LoopStats>,
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

    /// Evaluations its task has run: one at registration, then one per
    /// poll publish and per expiry (what a trigger costs, for tests).
    pub fn evaluations(&self) -> u64 {
        self.stats.evaluations.load(Ordering::Relaxed)
    }

    /// Evaluations that wrote the self-metrics: only those whose decision
    /// (or availability, or failing pods) differed from the last written.
    pub fn recordings(&self) -> u64 {
        self.stats.recordings.load(Ordering::Relaxed)
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
                    return Err(Unavailable::ColdStart {
                        sources: self.spec.sources(),
                        budget,
                    });
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
    /// Set while at capacity and the refusal was logged: KEDA retries a
    /// refused trigger every polling interval, and one warning per episode
    /// says it all.
    full_logged: AtomicBool,
    /// Set at shutdown: new triggers are refused.
    draining: AtomicBool,
}

impl DecisionCache {
    /// An empty cache.
    pub fn new(
        pollers: PollerRegistry,
        telemetry: Arc<Telemetry>,
        settings: CacheSettings,
    ) -> DecisionCache {
        telemetry.set_max_triggers(settings.max_triggers);
        DecisionCache {
            triggers: RwLock::new(HashMap::new()),
            pollers,
            telemetry,
            settings,
            full_logged: AtomicBool::new(false),
            draining: AtomicBool::new(false),
        }
    }

    /// Refuse new triggers from now on ([`RegisterError::ShuttingDown`]);
    /// registered ones keep answering.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// True once [`Self::start_draining`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Drop every trigger, which stops their tasks and (with the last
    /// handle, once open streams have ended) their pollers. Returns how
    /// many were held.
    pub fn close(&self) -> usize {
        self.start_draining();
        let dropped: Vec<Arc<TriggerEntry>> = {
            let mut triggers = self.triggers.write().unwrap_or_else(|e| e.into_inner());
            triggers.drain().map(|(_, entry)| entry).collect()
        };
        self.telemetry.set_triggers(0);
        dropped.len()
    }

    /// The settings in force.
    pub fn settings(&self) -> CacheSettings {
        self.settings
    }

    /// The entry for a trigger, registering it (and starting its pollers) on
    /// first sight. Invalid metadata, metadata naming a target the outbound
    /// allowlist refuses, and a new trigger while `maxTriggers` are held are
    /// never registered.
    pub fn get_or_register(
        &self,
        namespace: String,
        name: String,
        metadata: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Arc<TriggerEntry>, RegisterError> {
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
        // Checked before the metadata: a replica going away has nothing to
        // say about it, and KEDA retries on the one that stays.
        if self.is_draining() {
            return Err(RegisterError::ShuttingDown);
        }
        let spec =
            TriggerSpec::from_metadata(key.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        let outbound = &self.pollers.context().outbound;
        let denied: Vec<OutboundDenied> = spec
            .sources()
            .iter()
            .flat_map(|source| source.check_outbound(outbound))
            .collect();
        if !denied.is_empty() {
            return Err(RegisterError::Denied(denied));
        }
        self.authorize(&spec, &key.namespace)?;
        let mut triggers = self.triggers.write().unwrap_or_else(|e| e.into_inner());
        // Another call may have registered it while we parsed.
        if let Some(entry) = triggers.get(&key) {
            entry.touch();
            return Ok(entry.clone());
        }
        if self.is_draining() {
            return Err(RegisterError::ShuttingDown);
        }
        if triggers.len() >= self.settings.max_triggers {
            if !self.full_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    namespace = %key.namespace,
                    name = %key.name,
                    held = triggers.len(),
                    limit = self.settings.max_triggers,
                    "trigger refused: maxTriggers reached; new triggers are refused until one is dropped"
                );
            }
            return Err(RegisterError::AtCapacity {
                held: triggers.len(),
                limit: self.settings.max_triggers,
            });
        }
        let entry = Arc::new(self.start_trigger(&key, spec));
        tracing::info!(
            namespace = %entry.namespace,
            name = %entry.name,
            metric = %entry.spec.metric_name,
            sources = entry.spec.sources().len(),
            "trigger registered"
        );
        triggers.insert(key, entry.clone());
        self.telemetry.set_triggers(triggers.len());
        Ok(entry)
    }

    fn start_trigger(&self, key: &TriggerKey, spec: TriggerSpec) -> TriggerEntry {
        let spec = Arc::new(spec);
        let pollers: Vec<Arc<Poller>> = spec
            .sources()
            .into_iter()
            .map(|source| {
                self.pollers.acquire(PollerKey {
                    source,
                    interval: spec.poll_interval,
                })
            })
            .collect();
        let labels = TriggerLabels {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            metric: spec.metric_name.clone(),
        };
        let (tx, rx) = watch::channel(Arc::new(Evaluation::pending(SystemTime::now())));
        let stats = Arc::new(LoopStats::default());
        let task = tokio::spawn(trigger_loop(
            spec.clone(),
            pollers,
            tx,
            labels.clone(),
            self.telemetry.clone(),
            stats.clone(),
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
            stats,
        };
        entry.touch();
        entry
    }

    /// Check the trigger may use the credential profiles it names.
    fn authorize(&self, spec: &TriggerSpec, namespace: &str) -> Result<(), RegisterError> {
        let profiles = self.pollers.context().profiles();
        let classify = |e: ProfileError| {
            if e.is_permission_denied() {
                RegisterError::ProfileDenied(e)
            } else {
                RegisterError::Profile(e)
            }
        };
        if let Some(broker) = &spec.broker {
            broker
                .source
                .authorize(profiles, namespace)
                .map_err(classify)?;
        }
        // Summed PromQL queries carry their profile; the per-pod path carries
        // it on the engine source that reads through Prometheus.
        let prometheus_profiles = spec.sources().into_iter().filter_map(|s| match s {
            SourceSpec::Prometheus(q) => q.auth_profile,
            SourceSpec::Engine(e) => e.prometheus.and_then(|q| q.auth_profile),
            _ => None,
        });
        for name in prometheus_profiles {
            let profile = profiles.resolve(&name, namespace).map_err(classify)?;
            profile
                .require(&name, Section::Prometheus)
                .map_err(classify)?;
        }
        Ok(())
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
        if triggers.len() < self.settings.max_triggers {
            self.full_logged.store(false, Ordering::Relaxed);
        }
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

mod task;

#[cfg(test)]
mod capacity_tests;

#[cfg(test)]
mod cost_tests;

#[cfg(test)]
mod tests;
