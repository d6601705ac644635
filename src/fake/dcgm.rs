//! A fake NVIDIA dcgm-exporter: GPU metrics exactly as its Go `text/template` writes them
//! (signals.md §6), for GPUs a test assigns to pods.
//!
//! Rules reproduced: `# HELP` / `# TYPE` then one line per GPU (index order), families back to
//! back with no blank line; labels `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`,
//! (`GPU_I_PROFILE`, `GPU_I_ID` for a MIG instance, which has no `DCGM_FI_DEV_GPU_UTIL`),
//! `Hostname`, `DCGM_FI_DRIVER_VERSION`, then `container`, `namespace`, `pod` **only** for a GPU
//! mapped to a pod (Kubernetes mode; `--use-old-namespace` writes `uuid` and `container_name`,
//! `pod_name`, `pod_namespace`); no space after commas; int64 fields `%d`, double fields `%f`
//! (six decimals); counters keep their bare name (no `_total`); label values are not escaped (Go
//! `text/template`); the response has no explicit `Content-Type`, so Go sniffs
//! `text/plain; charset=utf-8`, plus `X-Content-Type-Options: nosniff`. Family order follows a Go
//! map and changes between scrapes: the server reshuffles it on every scrape
//! ([`FakeDcgmExporter::set_shuffle_families`]); [`render_dcgm_metrics`] gives the CSV order.
//!
//! The families are the default CSV's (dcgm-exporter 4.x) except `DCGM_FI_DEV_XID_ERRORS` and
//! `DCGM_FI_DEV_VGPU_LICENSE_STATUS` (blank on a healthy, non-vGPU GPU, so skipped there too).
//! Values are sampled instantly here (the real exporter refreshes every 30 s).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::dcgm_gpu::{
    DCGM_CONTENT_TYPE, DCGM_DEFAULT_HOSTNAME, DCGM_DRIVER_VERSION, DCGM_MODEL_NAME, DcgmGpu,
    FAMILIES, Field,
};
use super::format::write_go_f;
use super::http::Endpoint;
use super::rng::Rng;

/// Render dcgm-exporter's body for `gpus` (sorted by index here) on node `hostname`, families in
/// the default CSV's order.
pub fn render_dcgm_metrics(gpus: &[DcgmGpu], hostname: &str) -> String {
    render_ordered(gpus, hostname, None, false)
}

/// [`render_dcgm_metrics`] with `--use-old-namespace`: `uuid` for `UUID`, and the pod
/// attributes `container_name`, `pod_name`, `pod_namespace`.
pub fn render_dcgm_metrics_old_namespace(gpus: &[DcgmGpu], hostname: &str) -> String {
    render_ordered(gpus, hostname, None, true)
}

/// `shuffle`: a seed to permute the family order with, as a Go map iteration would.
fn render_ordered(
    gpus: &[DcgmGpu],
    hostname: &str,
    shuffle: Option<u64>,
    old_namespace: bool,
) -> String {
    let mut gpus: Vec<&DcgmGpu> = gpus.iter().collect();
    gpus.sort_by_key(|g| (g.index, g.mig.as_ref().map(|m| m.instance)));
    let uuid_label = if old_namespace { "uuid" } else { "UUID" };
    // The fixed label prefix of each GPU, computed once.
    let prefixes: Vec<String> = gpus
        .iter()
        .map(|g| {
            let mut p = format!(
                "gpu=\"{i}\",{uuid_label}=\"{uuid}\",pci_bus_id=\"{bus}\",device=\"nvidia{i}\",modelName=\"{DCGM_MODEL_NAME}\"",
                i = g.index,
                uuid = g.uuid(),
                bus = g.pci_bus_id(),
            );
            if let Some(mig) = &g.mig {
                let _ = write!(
                    p,
                    ",GPU_I_PROFILE=\"{}\",GPU_I_ID=\"{}\"",
                    mig.profile, mig.instance
                );
            }
            if !hostname.is_empty() {
                let _ = write!(p, ",Hostname=\"{hostname}\"");
            }
            let _ = write!(p, ",DCGM_FI_DRIVER_VERSION=\"{DCGM_DRIVER_VERSION}\"");
            match (&g.pod, old_namespace) {
                (Some(pod), false) => {
                    let _ = write!(
                        p,
                        ",container=\"{}\",namespace=\"{}\",pod=\"{}\"",
                        pod.container, pod.namespace, pod.pod
                    );
                }
                // Byte-sorted attributes: container_name, pod_name, pod_namespace.
                (Some(pod), true) => {
                    let _ = write!(
                        p,
                        ",container_name=\"{}\",pod_name=\"{}\",pod_namespace=\"{}\"",
                        pod.container, pod.pod, pod.namespace
                    );
                }
                (None, _) => {}
            }
            p
        })
        .collect();

    let mut order: Vec<usize> = (0..FAMILIES.len()).collect();
    if let Some(seed) = shuffle {
        let mut rng = Rng::new(seed);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }
    let mut out = String::with_capacity(FAMILIES.len() * (200 + gpus.len() * 260));
    if gpus.is_empty() {
        return out;
    }
    for idx in order {
        let (name, kind, help, field) = &FAMILIES[idx];
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
        for (g, prefix) in gpus.iter().zip(&prefixes) {
            if g.mig.is_some() && *name == "DCGM_FI_DEV_GPU_UTIL" {
                continue;
            }
            let _ = write!(out, "{name}{{{prefix}}} ");
            match field {
                Field::Int(get) => {
                    let _ = write!(out, "{}", get(g));
                }
                Field::Double(get) => write_go_f(&mut out, get(g)),
            }
            out.push('\n');
        }
    }
    out
}

struct Shared {
    /// By (GPU index, MIG instance).
    gpus: Mutex<BTreeMap<(u32, Option<u32>), DcgmGpu>>,
    hostname: Mutex<String>,
    old_namespace: AtomicBool,
    shuffle: AtomicBool,
    status_override: Mutex<Option<u16>>,
    scrapes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn render(&self, shuffle: Option<u64>) -> String {
        let gpus: Vec<DcgmGpu> = lock(&self.gpus).values().cloned().collect();
        let old_namespace = self.old_namespace.load(Ordering::Relaxed);
        render_ordered(&gpus, &lock(&self.hostname), shuffle, old_namespace)
    }
}

/// A fake dcgm-exporter on loopback: `GET /metrics` renders the GPUs set with
/// [`set_gpu`](Self::set_gpu) (none at first, which gives an empty body).
pub struct FakeDcgmExporter {
    shared: Arc<Shared>,
    endpoint: Endpoint,
}

impl FakeDcgmExporter {
    /// Bind 127.0.0.1:0 (a free port) and serve.
    pub async fn start() -> io::Result<FakeDcgmExporter> {
        let shared = Arc::new(Shared {
            gpus: Mutex::new(BTreeMap::new()),
            hostname: Mutex::new(DCGM_DEFAULT_HOSTNAME.to_owned()),
            old_namespace: AtomicBool::new(false),
            shuffle: AtomicBool::new(true),
            status_override: Mutex::new(None),
            scrapes: AtomicU64::new(0),
        });
        let router = Router::new()
            .route("/metrics", get(metrics))
            .fallback(not_found)
            .with_state(shared.clone());
        let endpoint = Endpoint::start(router, "fake dcgm-exporter")?;
        Ok(FakeDcgmExporter { shared, endpoint })
    }

    /// The bound address (kept across [`stop`](Self::stop) / [`restart`](Self::restart)).
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr()
    }

    /// `"http://127.0.0.1:PORT/metrics"`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addr())
    }

    /// Add or replace GPU `index` with [`DcgmGpu::new`]`(index, util_percent, pod)`; `pod` is
    /// `(namespace, pod, container)`. Replacing discards earlier [`update_gpu`](Self::update_gpu)
    /// overrides.
    pub fn set_gpu(&self, index: u32, util_percent: u32, pod: Option<(&str, &str, &str)>) {
        lock(&self.shared.gpus).insert((index, None), DcgmGpu::new(index, util_percent, pod));
    }

    /// Change GPU `index` in place (created idle and unassigned if absent).
    pub fn update_gpu(&self, index: u32, f: impl FnOnce(&mut DcgmGpu)) {
        let mut gpus = lock(&self.shared.gpus);
        f(gpus
            .entry((index, None))
            .or_insert_with(|| DcgmGpu::new(index, 0, None)));
    }

    /// Add or replace a GPU or MIG instance as given (keyed by index and MIG instance).
    pub fn put_gpu(&self, gpu: DcgmGpu) {
        let key = (gpu.index, gpu.mig.as_ref().map(|m| m.instance));
        lock(&self.shared.gpus).insert(key, gpu);
    }

    /// Remove GPU `index` and its MIG instances (their series vanish, as when DCGM returns
    /// blanks).
    pub fn remove_gpu(&self, index: u32) {
        lock(&self.shared.gpus).retain(|(i, _), _| *i != index);
    }

    /// `--use-old-namespace` (default off): `uuid`, `container_name`, `pod_name`,
    /// `pod_namespace`.
    pub fn set_use_old_namespace(&self, old: bool) {
        self.shared.old_namespace.store(old, Ordering::Relaxed);
    }

    /// The GPUs, by index.
    pub fn gpus(&self) -> Vec<DcgmGpu> {
        lock(&self.shared.gpus).values().cloned().collect()
    }

    /// The `Hostname` label (default [`DCGM_DEFAULT_HOSTNAME`]); empty drops it, as
    /// `--no-hostname` does.
    pub fn set_hostname(&self, hostname: &str) {
        *lock(&self.shared.hostname) = hostname.to_owned();
    }

    /// Whether each scrape permutes the family order (default true, like Go's map iteration).
    pub fn set_shuffle_families(&self, shuffle: bool) {
        self.shared.shuffle.store(shuffle, Ordering::Relaxed);
    }

    /// Respond with this HTTP status (empty body) instead; None restores.
    pub fn set_status_override(&self, status: Option<u16>) {
        *lock(&self.shared.status_override) = status;
    }

    /// The body in the default CSV family order (a scrape may order families differently).
    pub fn render(&self) -> String {
        self.shared.render(None)
    }

    /// `GET /metrics` requests answered so far.
    pub fn scrapes(&self) -> u64 {
        self.shared.scrapes.load(Ordering::Relaxed)
    }

    /// Whether the exporter is listening.
    pub fn is_running(&self) -> bool {
        self.endpoint.is_running()
    }

    /// Stop listening (connections refused) but keep the GPUs.
    pub async fn stop(&mut self) {
        self.endpoint.stop().await;
    }

    /// Listen again on the same port.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.endpoint.restart().await
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let n = shared.scrapes.fetch_add(1, Ordering::Relaxed);
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(DCGM_CONTENT_TYPE),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ];
    if let Some(code) = *lock(&shared.status_override) {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, headers, String::new()).into_response();
    }
    let shuffle = shared.shuffle.load(Ordering::Relaxed).then_some(n);
    (StatusCode::OK, headers, shared.render(shuffle)).into_response()
}

/// Go's `http.NotFound`.
async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        "404 page not found\n",
    )
        .into_response()
}
