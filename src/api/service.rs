//! The `externalscaler.ExternalScaler` gRPC service KEDA calls.
//!
//! Handlers read the decision cache and never contact an upstream: the warm
//! path is a map lookup. Only the first call for a new trigger may wait, up
//! to the cold-start budget, for its first reading.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::api::status::ScalerError;
use crate::decide::fusion::Decision;
use crate::proto::external_scaler_server::ExternalScaler;
use crate::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use crate::runtime::cache::{DecisionCache, Evaluation, TriggerEntry};
use crate::runtime::telemetry::Telemetry;
use crate::trigger::Mode;

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct ScalerService {
    cache: Arc<DecisionCache>,
    telemetry: Arc<Telemetry>,
    shutdown: CancellationToken,
    refusals_logged: Arc<std::sync::Mutex<std::collections::HashMap<String, Instant>>>,
}

/// A refused target is logged once per message in this interval: KEDA
/// repeats the refused calls on every poll.
const REFUSAL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(600);

impl ScalerService {
    /// A service answering from `cache`; open streams end (with OK) when
    /// `shutdown` fires.
    pub fn new(
        cache: Arc<DecisionCache>,
        telemetry: Arc<Telemetry>,
        shutdown: CancellationToken,
    ) -> Self {
        ScalerService {
            cache,
            telemetry,
            shutdown,
            refusals_logged: Arc::default(),
        }
    }

    fn entry(&self, object: ScaledObjectRef) -> Result<Arc<TriggerEntry>, ScalerError> {
        let ScaledObjectRef {
            name,
            namespace,
            scaler_metadata,
        } = object;
        for (field, value) in [("name", &name), ("namespace", &namespace)] {
            if let Some(problem) = not_a_kubernetes_name(value) {
                return Err(ScalerError::BadRef { field, problem });
            }
        }
        self.cache
            .get_or_register(namespace.clone(), name.clone(), scaler_metadata)
            .map_err(|error| ScalerError::NotRegistered {
                namespace,
                name,
                error: Box::new(error),
            })
    }

    async fn decision(&self, entry: &TriggerEntry) -> Result<Decision, ScalerError> {
        entry
            .decision(self.cache.settings().cold_start_budget)
            .await
            .map_err(|reason| ScalerError::Unavailable {
                namespace: entry.namespace.clone(),
                name: entry.name.clone(),
                metric: entry.spec.metric_name.clone(),
                reason: Box::new(reason),
            })
    }

    fn finish<T>(
        &self,
        method: &'static str,
        result: Result<T, ScalerError>,
    ) -> Result<Response<T>, Status> {
        let result = result.map(Response::new).map_err(Status::from);
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(status) => status.code(),
        };
        self.telemetry.record_grpc(method, code);
        if let Err(status) = &result {
            match status.code() {
                tonic::Code::InvalidArgument => {
                    tracing::debug!(method, error = status.message(), "rejected request");
                }
                // A ScaledObject pointing the scaler somewhere it may not go
                // is worth an operator's attention; the message names the
                // targets and rules (metadata carries no credentials).
                tonic::Code::PermissionDenied if self.first_refusal(status.message()) => {
                    tracing::warn!(method, error = status.message(), "refused outbound target");
                }
                _ => {}
            }
        }
        result
    }

    /// True when `message` was not logged within [`REFUSAL_LOG_INTERVAL`].
    fn first_refusal(&self, message: &str) -> bool {
        let now = Instant::now();
        let mut logged = self
            .refusals_logged
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        logged.retain(|_, at| now.duration_since(*at) < REFUSAL_LOG_INTERVAL);
        if logged.contains_key(message) {
            return false;
        }
        logged.insert(message.to_owned(), now);
        true
    }

    async fn get_metric_spec_inner(
        &self,
        object: ScaledObjectRef,
    ) -> Result<GetMetricSpecResponse, ScalerError> {
        let entry = self.entry(object)?;
        let target = entry.spec.fusion.target_per_replica;
        Ok(GetMetricSpecResponse {
            metric_specs: vec![MetricSpec {
                metric_name: entry.spec.metric_name.clone(),
                // KEDA <= 2.16 reads only the int; never send it below 1.
                target_size: (target.round() as i64).max(1),
                target_size_float: target,
            }],
        })
    }

    async fn get_metrics_inner(
        &self,
        request: GetMetricsRequest,
    ) -> Result<GetMetricsResponse, ScalerError> {
        let object = request.scaled_object_ref.ok_or(ScalerError::MissingRef)?;
        let entry = self.entry(object)?;
        let served = &entry.spec.metric_name;
        // KEDA has been seen to lowercase names (keda#4954); an empty name is
        // accepted for hand-made calls (grpcurl).
        if !request.metric_name.is_empty() && !request.metric_name.eq_ignore_ascii_case(served) {
            return Err(ScalerError::UnknownMetric {
                requested: request.metric_name,
                served: served.clone(),
            });
        }
        let value = match self.answer(&entry).await? {
            Some(decision) => decision.backlog,
            // Shadow: 0 is below any other trigger's value, so the HPA's max
            // is theirs; the decision lives in `/explain` and the self-metrics.
            None => 0.0,
        };
        Ok(GetMetricsResponse {
            metric_values: vec![MetricValue {
                metric_name: served.clone(),
                // Ceil so KEDA <= 2.16, which reads only the int, never
                // scales below what the exact value asks for.
                metric_value: value.ceil() as i64,
                metric_value_float: value,
            }],
        })
    }

    async fn is_active_inner(
        &self,
        object: ScaledObjectRef,
    ) -> Result<IsActiveResponse, ScalerError> {
        let entry = self.entry(object)?;
        Ok(IsActiveResponse {
            result: self.answer(&entry).await?.is_some_and(|d| d.active),
        })
    }

    /// The decision KEDA is answered with: `None` for a shadow trigger,
    /// which answers 0 / inactive whatever it decided, even while its
    /// signal is lost. UNAVAILABLE would make KEDA apply the ScaledObject's
    /// `fallback` and change the replica count the trial must not touch.
    async fn answer(&self, entry: &TriggerEntry) -> Result<Option<Decision>, ScalerError> {
        let decision = self.decision(entry).await;
        match entry.spec.mode {
            Mode::Active => decision.map(Some),
            // Still waited for: a new trigger's first call registers it and
            // its first reading, as in active mode.
            Mode::Shadow => Ok(None),
        }
    }
}

/// `Some(active)` for a valid decision, `None` when unknown (pending or
/// unavailable): an unknown state is neither an edge up nor down.
fn activity(evaluation: &Evaluation) -> Option<bool> {
    evaluation
        .decision_at(Instant::now())
        .ok()
        .map(|d| d.active)
}

type ActivityStream = Pin<Box<dyn Stream<Item = Result<IsActiveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalScaler for ScalerService {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        let result = self.is_active_inner(request.into_inner()).await;
        self.finish("IsActive", result)
    }

    type StreamIsActiveStream = ActivityStream;

    /// Sends `true` at once if the trigger is active, then on every
    /// inactive→active edge. Never sends `false` (KEDA ignores it, and
    /// repeated `true` would keep resetting KEDA's cooldown). Ends with OK on
    /// shutdown so KEDA reconnects after its shortest backoff. A shadow
    /// trigger sends nothing.
    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamIsActiveStream>, Status> {
        let entry = match self.entry(request.into_inner()) {
            Ok(entry) => entry,
            Err(error) => return self.finish("StreamIsActive", Err(error)),
        };
        self.telemetry
            .record_grpc("StreamIsActive", tonic::Code::Ok);
        let (tx, rx) = mpsc::channel(4);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            if entry.spec.mode == Mode::Shadow {
                // A shadow trigger never activates: hold the stream open,
                // silent, so KEDA does not reconnect in a loop.
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tx.closed() => {}
                }
                return;
            }
            let mut evaluations = entry.subscribe();
            let mut was_active = false;
            let first = evaluations.borrow_and_update().clone();
            if activity(&first) == Some(true) {
                was_active = true;
                if tx
                    .send(Ok(IsActiveResponse { result: true }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tx.closed() => break,
                    changed = evaluations.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        let now = evaluations.borrow_and_update().clone();
                        match activity(&now) {
                            Some(true) if !was_active => {
                                was_active = true;
                                tracing::debug!(namespace = %entry.namespace, name = %entry.name, "pushing activation");
                                if tx.send(Ok(IsActiveResponse { result: true })).await.is_err() {
                                    break;
                                }
                            }
                            Some(active) => was_active = active,
                            None => {}
                        }
                    }
                }
            }
            // Dropping `tx` (and `entry`) ends the stream with status OK.
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        let result = self.get_metric_spec_inner(request.into_inner()).await;
        self.finish("GetMetricSpec", result)
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let result = self.get_metrics_inner(request.into_inner()).await;
        self.finish("GetMetrics", result)
    }
}

/// Why `value` cannot be a Kubernetes object name or namespace, if it cannot.
/// Deliberately loose (no case or character-set rule): only what would make
/// two triggers' `namespace/name` ambiguous or a message unreadable.
fn not_a_kubernetes_name(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("is empty")
    } else if value.len() > 253 {
        Some("is longer than 253 bytes")
    } else if value
        .chars()
        .any(|c| c == '/' || c.is_whitespace() || c.is_control())
    {
        Some("holds a `/`, whitespace or a control character")
    } else {
        None
    }
}
