//! Errors a gRPC call can end with, and their one mapping to gRPC status.

use tonic::{Code, Status};

use crate::guard::outbound::OutboundDenied;
use crate::runtime::cache::Unavailable;
use crate::trigger::MetadataErrors;

/// Why a gRPC call failed.
#[derive(Debug, thiserror::Error)]
pub enum ScalerError {
    /// The request carries no `scaledObjectRef`.
    #[error("the request has no scaledObjectRef")]
    MissingRef,
    /// The trigger's metadata is invalid.
    #[error("invalid trigger metadata for {namespace}/{name}: {errors}")]
    InvalidMetadata {
        /// ScaledObject namespace.
        namespace: String,
        /// ScaledObject name.
        name: String,
        /// What is wrong.
        errors: MetadataErrors,
    },
    /// The metadata names a target the outbound allowlist refuses.
    #[error("trigger {namespace}/{name} is refused: {}", join(.denied))]
    PermissionDenied {
        /// ScaledObject namespace.
        namespace: String,
        /// ScaledObject name.
        name: String,
        /// Each refused target with its rule (never empty).
        denied: Vec<OutboundDenied>,
    },
    /// The trigger's namespace may not use the credential profile it names.
    #[error("trigger {namespace}/{name} is refused: {reason}")]
    ProfileDenied {
        /// ScaledObject namespace.
        namespace: String,
        /// ScaledObject name.
        name: String,
        /// The profile and who may use it.
        reason: String,
    },
    /// The credential profile named in metadata cannot serve the trigger.
    #[error("trigger {namespace}/{name}: {reason}")]
    BadProfile {
        /// ScaledObject namespace.
        namespace: String,
        /// ScaledObject name.
        name: String,
        /// What is wrong with the profile reference.
        reason: String,
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
        /// Why.
        reason: Unavailable,
    },
}

impl From<ScalerError> for Status {
    fn from(error: ScalerError) -> Status {
        let code = match &error {
            ScalerError::MissingRef => Code::InvalidArgument,
            ScalerError::InvalidMetadata { .. } => Code::InvalidArgument,
            ScalerError::PermissionDenied { .. } | ScalerError::ProfileDenied { .. } => {
                Code::PermissionDenied
            }
            ScalerError::BadProfile { .. } => Code::InvalidArgument,
            ScalerError::UnknownMetric { .. } => Code::NotFound,
            ScalerError::Unavailable { .. } => Code::Unavailable,
        };
        Status::new(code, error.to_string())
    }
}

fn join(denied: &[OutboundDenied]) -> String {
    denied
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
