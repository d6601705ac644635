//! `/ui`: a live page on the admin port, drawing `/explain` as it moves.
//!
//! One HTML page, one script and one stylesheet, compiled into the binary
//! (no external assets, no build step), served under a strict
//! Content-Security-Policy: everything from this origin, nothing inline, no
//! frames, no forms. The script polls `explain` every second and draws, per
//! trigger, `B` and its terms and the replicas: `desiredReplicas` from
//! `/explain` and, when the process knows them, ready pods from
//! `/ui/replicas`.
//!
//! Only the embedding process knows ready pods: `serve` never does (the HPA
//! and the Deployment do), `demo` reports its fake fleet's with
//! [`report_replicas`]. The page keeps its history in the browser's
//! `localStorage`, so a reload (or a headless browser run again with the
//! same profile) continues the chart instead of starting it empty.

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

/// The page's Content-Security-Policy: scripts, styles and fetches from this
/// origin only; no inline script or style, no plugins, not framable.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE: &str = include_str!("ui/page.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/style.css");

/// Pods of one ScaledObject as the embedding process sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaCounts {
    /// What the (simulated) HPA asked for: `ceil(B/T)` within min/max.
    pub desired: u64,
    /// Pods ready and serving.
    pub ready: u64,
    /// Pods started but still in their cold start.
    pub starting: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaRow {
    namespace: String,
    name: String,
    #[serde(flatten)]
    counts: ReplicaCounts,
}

/// Reported pods per (namespace, name). Process-wide because the admin
/// router is built inside the server; only `demo` writes it.
static REPORTED: Mutex<BTreeMap<(String, String), ReplicaCounts>> = Mutex::new(BTreeMap::new());

/// Publish the pods of ScaledObject `namespace/name` for `/ui/replicas`
/// (the demo's fake fleet after each step).
pub fn report_replicas(namespace: &str, name: &str, counts: ReplicaCounts) {
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    reported.insert((namespace.to_owned(), name.to_owned()), counts);
}

/// The `/ui` routes; they read no state, so they fit any router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(page))
        .route("/ui/app.js", get(script))
        .route("/ui/style.css", get(style))
        .route("/ui/replicas", get(replicas))
}

/// A static asset with the page's security headers. `no-store`: the page
/// is small, and a stale script after an upgrade would misread `/explain`.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

async fn replicas() -> Response {
    let rows: Vec<ReplicaRow> = REPORTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|((namespace, name), counts)| ReplicaRow {
            namespace: namespace.clone(),
            name: name.clone(),
            counts: *counts,
        })
        .collect();
    (
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(serde_json::json!({ "replicas": rows })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        // Anything inline would be refused by the CSP; anything remote breaks
        // "no external assets".
        assert!(PAGE.contains("src=\"ui/app.js\"") && PAGE.contains("href=\"ui/style.css\""));
        for text in [PAGE, SCRIPT, STYLE] {
            // The SVG namespace is a name, not a location.
            let text = text.replace("\"http://www.w3.org/2000/svg\"", "");
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("//cdn") && !text.contains("@import"));
        }
        assert!(!PAGE.contains("<style") && !PAGE.contains(" style="));
        for handler in [" onload=", " onclick=", " onerror=", "javascript:"] {
            assert!(!PAGE.contains(handler), "{handler}");
        }
        assert_eq!(PAGE.matches("<script").count(), 1);
        assert!(SCRIPT.contains("getJson(\"explain\")") && SCRIPT.contains("setTimeout(poll"));
    }
}
