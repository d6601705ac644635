//! KEDA's gRPC calls: how many, by status code, and how long each took.
//!
//! The count is recorded by the service when it answers; the duration by a
//! wrapper around the service in the api layer (the gRPC server wiring), from
//! the request reaching the service until its response headers are ready.
//! For `StreamIsActive` both are one per stream opened: the stream's later
//! messages are pushed on activation edges, so their timing is KEDA's
//! cooldown, not the scaler's latency.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `externalscaler.ExternalScaler` methods, as the `method` label reads.
const METHODS: [&str; 4] = ["IsActive", "StreamIsActive", "GetMetricSpec", "GetMetrics"];

/// Upper bounds of the duration buckets, seconds: a warm answer is a map
/// lookup (tens of µs), a trigger's first call waits up to the cold-start
/// budget (2 s by default) for its first reading.
const DURATION_BUCKETS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrpcLabels {
    method: &'static str,
    code: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// The gRPC families.
#[derive(Debug)]
pub(super) struct GrpcMetrics {
    requests: Family<GrpcLabels, Counter>,
    duration: Family<MethodLabels, Histogram>,
}

impl GrpcMetrics {
    pub(super) fn new() -> GrpcMetrics {
        GrpcMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
        }
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "grpc_requests",
            "gRPC requests by method and status code",
            self.requests.clone(),
        );
        registry.register(
            "grpc_request_duration_seconds",
            "Time from a KEDA call reaching the service to its response headers (StreamIsActive: to the stream being open)",
            self.duration.clone(),
        );
    }
}

impl GrpcMetrics {
    pub(super) fn methods() -> &'static [&'static str] {
        &METHODS
    }

    pub(super) fn count(&self, method: &'static str, code: tonic::Code) {
        self.requests
            .get_or_create(&GrpcLabels {
                method,
                code: code_name(code),
            })
            .inc();
    }

    pub(super) fn observe(&self, method: &'static str, elapsed: Duration) {
        self.duration
            .get_or_create(&MethodLabels { method })
            .observe(elapsed.as_secs_f64());
    }
}

/// gRPC status code names as in the gRPC spec (`OK`, `UNAVAILABLE`, …).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}
