//! Errors a gRPC call can end with, and their one mapping to gRPC status.

use tonic::{Code, Status};

use crate::cache::Unavailable;
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
            ScalerError::UnknownMetric { .. } => Code::NotFound,
            ScalerError::Unavailable { .. } => Code::Unavailable,
        };
        Status::new(code, error.to_string())
    }
}
