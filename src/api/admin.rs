//! The admin HTTP server: `/metrics`, `/healthz`, `/readyz`, `/explain`, and
//! the live page `/ui` ([`crate::api::ui`]).
//!
//! Plain HTTP on its own port, so it can be bound apart from gRPC (e.g. to
//! localhost) and probed by kubelet without TLS.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::api::explain::TriggerExplain;
use crate::api::ui;
use crate::runtime::cache::DecisionCache;
use crate::runtime::telemetry::Telemetry;

/// What the admin handlers read.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// Triggers to explain.
    pub cache: Arc<DecisionCache>,
    /// Self-metrics.
    pub telemetry: Arc<Telemetry>,
    /// True once the gRPC listener is bound, false again at shutdown.
    pub ready: Arc<AtomicBool>,
}

/// The router.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/explain", get(explain))
        .merge(ui::routes())
        .with_state(state)
}

async fn metrics(State(state): State<AdminState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.telemetry.encode(),
    )
        .into_response()
}

/// Liveness: the process serves HTTP. Sources being down is not a reason
/// to restart the scaler, so this never looks at them.
async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// Filters for `/explain`.
#[derive(Debug, Deserialize)]
struct ExplainQuery {
    /// Only this namespace.
    namespace: Option<String>,
    /// Only this ScaledObject name.
    name: Option<String>,
}

async fn explain(State(state): State<AdminState>, Query(filter): Query<ExplainQuery>) -> Response {
    let now = Instant::now();
    let triggers: Vec<TriggerExplain> = state
        .cache
        .entries()
        .iter()
        .filter(|e| {
            filter
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == e.namespace)
        })
        .filter(|e| filter.name.as_ref().is_none_or(|n| *n == e.name))
        .map(|e| TriggerExplain::of(e, now))
        .collect();
    axum::Json(serde_json::json!({ "triggers": triggers })).into_response()
}
