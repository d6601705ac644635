//! Errors a gRPC call can end with, and their one mapping to gRPC status.

use tonic::{Code, Status};

use crate::decide::unavailable::Unavailable;
use crate::runtime::cache::RegisterError;

/// Why a gRPC call failed.
#[derive(Debug, thiserror::Error)]
pub enum ScalerError {
    /// The request carries no `scaledObjectRef`.
    #[error("the request has no scaledObjectRef")]
    MissingRef,
    /// The `scaledObjectRef`'s `name` or `namespace` cannot be a Kubernetes
    /// name (empty, a `/`, whitespace, over 253 bytes): KEDA always sends
    /// real ones, so this is a hand-written probe; refusing it keeps such a
    /// probe from registering a trigger named `/`, or `ns/evil` + `x` that
    /// reads as `ns` + `evil/x`. The value is not echoed.
    #[error(
        "scaledObjectRef.{field} {problem}: KEDA sends the ScaledObject's name and namespace (Kubernetes names), and a probe must too"
    )]
    BadRef {
        /// `name` or `namespace`.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The trigger was not registered: invalid metadata, a target the
    /// outbound allowlist refuses, a credential profile it may not use, the
    /// scaler already holds `maxTriggers` triggers, or it is shutting down.
    #[error("{}", not_registered(.namespace, .name, .error))]
    NotRegistered {
        /// ScaledObject namespace.
        namespace: String,
        /// ScaledObject name.
        name: String,
        /// Why (boxed: errors are rare, and this keeps `Result`s small).
        error: Box<RegisterError>,
    },
    /// GetMetrics asked for a metric this trigger does not serve.
    #[error(
        "metric `{requested}` is not served by this trigger; GetMetricSpec returned `{served}`"
    )]
    UnknownMetric {
        /// What was asked for.
        requested: String,
        /// What the trigger serves.
        served: String,
    },
    /// The value cannot be measured now; KEDA's fallback applies.
    #[error("{namespace}/{name} metric {metric}: {reason}")]
    Unavailable {
        /// ScaledObject namespace.
        namespace: String,
        /// ScaledObject name.
        name: String,
        /// The trigger's metric name.
        metric: String,
        /// Why (boxed: errors are rare, and this keeps `Result`s small).
        reason: Box<Unavailable>,
    },
}

impl From<ScalerError> for Status {
    fn from(error: ScalerError) -> Status {
        let code = match &error {
            ScalerError::MissingRef | ScalerError::BadRef { .. } => Code::InvalidArgument,
            ScalerError::NotRegistered { error, .. } => match error.as_ref() {
                RegisterError::Metadata(_) | RegisterError::Profile(_) => Code::InvalidArgument,
                RegisterError::Denied(_) | RegisterError::ProfileDenied(_) => {
                    Code::PermissionDenied
                }
                // The scaler's own capacity, not the caller's metadata.
                RegisterError::AtCapacity { .. } => Code::ResourceExhausted,
                // Retryable: KEDA's next call, on a new connection, reaches
                // the replica that stays.
                RegisterError::ShuttingDown => Code::Unavailable,
            },
            ScalerError::UnknownMetric { .. } => Code::NotFound,
            ScalerError::Unavailable { .. } => Code::Unavailable,
        };
        Status::new(code, error.to_string())
    }
}

/// The message KEDA logs for a trigger that was not registered; a refusal
/// says "is refused" so operators can grep for it.
fn not_registered(namespace: &str, name: &str, error: &RegisterError) -> String {
    match error {
        RegisterError::Metadata(_) => {
            format!("invalid trigger metadata for {namespace}/{name}: {error}")
        }
        RegisterError::Denied(_)
        | RegisterError::ProfileDenied(_)
        | RegisterError::AtCapacity { .. }
        | RegisterError::ShuttingDown => {
            format!("trigger {namespace}/{name} is refused: {error}")
        }
        RegisterError::Profile(_) => format!("trigger {namespace}/{name}: {error}"),
    }
}
