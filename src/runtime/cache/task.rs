//! The task behind one trigger: it re-evaluates when one of its pollers
//! publishes and when a held reading or pod expires, publishes the
//! evaluation, logs transitions and keeps the trigger's self-metrics.
//!
//! Its cost is paid N / interval times a second over N triggers, so it is
//! what bounds how many triggers one scaler holds (issue 14, item 7): one
//! evaluation per poll and no self-metric writes while nothing changed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_stream::StreamMap;
use tokio_stream::wrappers::WatchStream;

use crate::decide::freshness::{Evaluation, SignalReport, Status, TriggerMemory, evaluate};
use crate::decide::quorum::PodState;
use crate::runtime::poller::Poller;
use crate::runtime::telemetry::{Telemetry, TriggerLabels};
use crate::trigger::{Mode, TriggerSpec};

/// Counts of one trigger task's work, for tests that pin its cost.
#[derive(Debug, Default)]
pub(super) struct LoopStats {
    /// Evaluations run.
    pub(super) evaluations: AtomicU64,
    /// Evaluations that wrote the self-metrics.
    pub(super) recordings: AtomicU64,
}

/// Failing pods per (state, reason), as the self-metric counts them.
type PodCounts = Vec<(PodState, &'static str, usize)>;

/// One trigger's loop, until its last poller update stream ends (never,
/// while it holds the pollers) or its task is aborted.
pub(super) async fn trigger_loop(
    spec: Arc<TriggerSpec>,
    pollers: Vec<Arc<Poller>>,
    tx: watch::Sender<Arc<Evaluation>>,
    labels: TriggerLabels,
    telemetry: Arc<Telemetry>,
    stats: Arc<LoopStats>,
) {
    let mut updates = StreamMap::new();
    for (i, poller) in pollers.iter().enumerate() {
        // Changes only: the first evaluation below already reads the
        // current state, and a stream that yields it too would evaluate
        // every new trigger twice.
        updates.insert(i, WatchStream::from_changes(poller.subscribe()));
    }
    let mut previous = Arc::new(Evaluation::pending(SystemTime::now()));
    let mut first = true;
    let mut memory = TriggerMemory::default();
    loop {
        let now = Instant::now();
        let signals = pollers
            .iter()
            .map(|p| SignalReport {
                source: p.key().source.clone(),
                label: p.label().to_owned(),
                state: p.subscribe().borrow().clone(),
            })
            .collect();
        let evaluation = evaluate(&spec, signals, &mut memory, now, SystemTime::now());
        stats.evaluations.fetch_add(1, Ordering::Relaxed);
        log_transition(&labels, &previous, &evaluation);
        // Every evaluation is written or says what the one before it said,
        // so `previous` is what the self-metrics show: no copy is kept.
        if first || !same_metrics(&previous, &evaluation) {
            record(&telemetry, &labels, spec.mode, &evaluation);
            stats.recordings.fetch_add(1, Ordering::Relaxed);
        }
        first = false;
        let wake_at = match &evaluation.status {
            // Only expiries need a wake-up of their own: every poll
            // publishes (a reading or a failure), and each publish wakes
            // this loop. A periodic timer besides raced the next publish
            // and, whenever it won, evaluated twice per poll.
            Status::Ready { valid_until, .. } => {
                let pod_expiry = evaluation.fleet.as_ref().and_then(|f| f.recheck_at);
                let expiry = pod_expiry.map_or(*valid_until, |p| p.min(*valid_until));
                expiry + Duration::from_millis(1)
            }
            _ => now + spec.poll_interval,
        };
        previous = Arc::new(evaluation);
        tx.send_replace(previous.clone());
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

/// Failing pods per (state, reason) of a ready evaluation: the
/// `trigger_degraded_pods` series it shows.
fn pod_counts(evaluation: &Evaluation) -> PodCounts {
    match (&evaluation.status, &evaluation.fleet) {
        (Status::Ready { .. }, Some(fleet)) => fleet.counts(),
        _ => Vec::new(),
    }
}

/// True when `a` and `b` write the same self-metrics: the same decision
/// and degraded flag, or both unavailable, or both pending; and the same
/// failing pods. Writing `b` after `a` would then leave the registry as it
/// is, and skipping it saves a lookup and a copy under a lock every
/// trigger task shares a sixty-fourth of. Only the trigger's own task
/// writes its series.
fn same_metrics(a: &Evaluation, b: &Evaluation) -> bool {
    let status = match (&a.status, &b.status) {
        (Status::Ready { decision: x, .. }, Status::Ready { decision: y, .. }) => {
            x == y && a.degraded == b.degraded
        }
        (Status::Unavailable(_), Status::Unavailable(_)) | (Status::Pending, Status::Pending) => {
            true
        }
        _ => false,
    };
    status && pod_counts(a) == pod_counts(b)
}

/// Write the trigger's self-metrics for `evaluation`.
fn record(telemetry: &Telemetry, labels: &TriggerLabels, mode: Mode, evaluation: &Evaluation) {
    match &evaluation.status {
        Status::Ready { decision, .. } => {
            telemetry.record_decision(labels, decision, evaluation.degraded);
            if mode == Mode::Shadow {
                telemetry.record_shadow(labels, decision);
            }
        }
        Status::Unavailable(_) => telemetry.record_unavailable(labels),
        Status::Pending => {}
    }
    telemetry.record_degraded_pods(labels, &pod_counts(evaluation));
}

fn log_transition(labels: &TriggerLabels, before: &Evaluation, after: &Evaluation) {
    let (from, to) = (before.kind(), after.kind());
    if from != to {
        let reason = match &after.status {
            Status::Unavailable(reason) => reason.to_string(),
            _ if after.degraded => degraded_reason(after),
            _ => String::new(),
        };
        let reason = reason.as_str();
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

/// Why a ready evaluation is degraded: the failing sources whose last good
/// reading is held (with their last error) and the `dns+` names that
/// answered no addresses while others did.
pub(super) fn degraded_reason(evaluation: &Evaluation) -> String {
    let pods = evaluation.fleet.iter().flat_map(|fleet| {
        fleet.pods.iter().map(|pod| match pod.state {
            PodState::Held => format!("{}: holding the pod's last reading", pod.error),
            PodState::LeftOut => format!(
                "{}: pod left out ({} of {} pods report)",
                pod.error, fleet.reporting, fleet.discovered
            ),
        })
    });
    let held = evaluation
        .signals
        .iter()
        .filter(|report| report.state.failing())
        .map(|report| match &report.state.last_failure {
            Some(failure) => format!(
                "{}: holding its last reading ({})",
                report.label, failure.value
            ),
            None => format!("{}: holding its last reading", report.label),
        });
    let empty = evaluation
        .empty_names
        .iter()
        .map(|name| format!("{name}: no addresses while the other targets answer"));
    held.chain(pods).chain(empty).collect::<Vec<_>>().join("; ")
}
