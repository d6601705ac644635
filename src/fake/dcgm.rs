//! A fake NVIDIA dcgm-exporter: GPU metrics exactly as its Go `text/template` writes them
//! (signals.md §6), for GPUs a test assigns to pods.
//!
//! Rules reproduced: `# HELP` / `# TYPE` then one line per GPU (index order), families back to
//! back with no blank line; labels `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`,
//! `Hostname`, `DCGM_FI_DRIVER_VERSION`, then `container`, `namespace`, `pod` **only** for a GPU
//! mapped to a pod (Kubernetes mode); no space after commas; int64 fields `%d`, double fields `%f`
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

use super::format::write_go_f;
use super::http::Endpoint;
use super::rng::Rng;

/// The `Content-Type` Go's sniffing gives dcgm-exporter's answer.
pub const DCGM_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// `modelName` of every fake GPU.
pub const DCGM_MODEL_NAME: &str = "NVIDIA H100 80GB HBM3";
/// `DCGM_FI_DRIVER_VERSION` of every fake GPU.
pub const DCGM_DRIVER_VERSION: &str = "550.90.07";
/// Default `Hostname` label.
pub const DCGM_DEFAULT_HOSTNAME: &str = "gpu-node-01";
/// H100 80GB HBM3 frame buffer, MiB (`FB_FREE + FB_USED + FB_RESERVED`).
pub const DCGM_FB_TOTAL_MIB: u64 = 81_559;
/// `DCGM_FI_DEV_FB_RESERVED`, MiB.
const FB_RESERVED_MIB: u64 = 591;
/// What vLLM's `--gpu-memory-utilization 0.9` leaves allocated, MiB.
const FB_USED_BY_ENGINE_MIB: u64 = 73_403;

/// The pod a GPU is assigned to (the exporter's `container`, `namespace`, `pod` attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcgmPod {
    /// `namespace` label.
    pub namespace: String,
    /// `pod` label.
    pub pod: String,
    /// `container` label.
    pub container: String,
}

/// One GPU's sampled fields. [`DcgmGpu::new`] derives everything from the utilization; tests
/// may then overwrite single fields ([`FakeDcgmExporter::update_gpu`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DcgmGpu {
    /// `gpu` label: the device index.
    pub index: u32,
    /// `DCGM_FI_DEV_GPU_UTIL`: integer percent 0–100.
    pub util_percent: u32,
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE`: ratio 0–1 (`%f`).
    pub gr_engine_active: f64,
    /// `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`: ratio 0–1.
    pub tensor_active: f64,
    /// `DCGM_FI_PROF_DRAM_ACTIVE`: ratio 0–1.
    pub dram_active: f64,
    /// `DCGM_FI_DEV_FB_USED`, MiB (`FB_FREE` is what is left of [`DCGM_FB_TOTAL_MIB`]).
    pub fb_used_mib: u64,
    /// `DCGM_FI_DEV_POWER_USAGE`, W (`%f`).
    pub power_watts: f64,
    /// The pod holding the GPU; `None` renders no pod attributes at all.
    pub pod: Option<DcgmPod>,
}

impl DcgmGpu {
    /// A GPU at `util_percent` (clamped to 100), optionally assigned to
    /// `(namespace, pod, container)`. Derived: engine activity 0.93 × util, tensor 0.38 × that,
    /// DRAM 0.55 × that, power 69.817 W + 6.12 W per percent, and 73403 MiB used when assigned.
    pub fn new(index: u32, util_percent: u32, pod: Option<(&str, &str, &str)>) -> DcgmGpu {
        let util_percent = util_percent.min(100);
        let util = f64::from(util_percent) / 100.0;
        let gr = util * 0.93;
        DcgmGpu {
            index,
            util_percent,
            gr_engine_active: gr,
            tensor_active: gr * 0.38,
            dram_active: gr * 0.55,
            fb_used_mib: if pod.is_some() {
                FB_USED_BY_ENGINE_MIB
            } else {
                0
            },
            power_watts: 69.817 + 6.12 * f64::from(util_percent),
            pod: pod.map(|(namespace, pod, container)| DcgmPod {
                namespace: namespace.to_owned(),
                pod: pod.to_owned(),
                container: container.to_owned(),
            }),
        }
    }

    /// The `UUID` label, [`dcgm_gpu_uuid`] of the index.
    pub fn uuid(&self) -> String {
        dcgm_gpu_uuid(self.index)
    }

    /// The `pci_bus_id` label, e.g. `00000000:18:00.0`.
    pub fn pci_bus_id(&self) -> String {
        const BUSES: [u8; 8] = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB];
        let bus = BUSES
            .get(self.index as usize)
            .copied()
            .unwrap_or_else(|| (self.index as u8).wrapping_mul(0x11));
        format!("00000000:{bus:02X}:00.0")
    }
}

/// The deterministic `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` UUID of GPU `index`; the fake
/// Triton's `gpu_uuid` labels use the same function, so both fakes name the same GPUs.
pub fn dcgm_gpu_uuid(index: u32) -> String {
    let mut rng = Rng::new(0x6470_5555_4944_0000 ^ u64::from(index));
    let (a, b) = (rng.next_u64(), rng.next_u64());
    format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

enum Field {
    Int(fn(&DcgmGpu) -> i64),
    Double(fn(&DcgmGpu) -> f64),
}

/// (field, prometheus type, help, value), in the default CSV's order.
const FAMILIES: &[(&str, &str, &str, Field)] = &[
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
        Field::Int(|g| if g.util_percent > 0 { 1980 } else { 345 }),
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
        Field::Int(|_| 2619),
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "gauge",
        "Memory temperature (in C).",
        Field::Int(|g| 31 + i64::from(g.util_percent) * 15 / 100),
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        Field::Int(|g| 28 + i64::from(g.util_percent) * 40 / 100),
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
        Field::Double(|g| g.power_watts),
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        Field::Int(|g| 9_876_543_210 + i64::from(g.index) * 1_000_003),
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        Field::Int(|g| i64::from(g.util_percent)),
    ),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "gauge",
        "Memory utilization (in %).",
        Field::Int(|g| i64::from(g.util_percent) * 45 / 100),
    ),
    (
        "DCGM_FI_DEV_ENC_UTIL",
        "gauge",
        "Encoder utilization (in %).",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_DEV_DEC_UTIL",
        "gauge",
        "Decoder utilization (in %).",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        Field::Int(|g| {
            DCGM_FB_TOTAL_MIB
                .saturating_sub(FB_RESERVED_MIB)
                .saturating_sub(g.fb_used_mib) as i64
        }),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        Field::Int(|g| g.fb_used_mib as i64),
    ),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        "gauge",
        "Framebuffer memory reserved (in MiB).",
        Field::Int(|_| FB_RESERVED_MIB as i64),
    ),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "gauge",
        "Total number of NVLink bandwidth counters for all lanes.",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        Field::Int(|_| 0),
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        Field::Double(|g| g.gr_engine_active),
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        Field::Double(|g| g.tensor_active),
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        Field::Double(|g| g.dram_active),
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        Field::Int(|g| 1_048_576 + i64::from(g.util_percent) * 262_144),
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        Field::Int(|g| 2_097_152 + i64::from(g.util_percent) * 131_072),
    ),
];

/// Render dcgm-exporter's body for `gpus` (sorted by index here) on node `hostname`, families in
/// the default CSV's order.
pub fn render_dcgm_metrics(gpus: &[DcgmGpu], hostname: &str) -> String {
    render_ordered(gpus, hostname, None)
}

/// `shuffle`: a seed to permute the family order with, as a Go map iteration would.
fn render_ordered(gpus: &[DcgmGpu], hostname: &str, shuffle: Option<u64>) -> String {
    let mut gpus: Vec<&DcgmGpu> = gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    // The fixed label prefix of each GPU, computed once.
    let prefixes: Vec<String> = gpus
        .iter()
        .map(|g| {
            let mut p = format!(
                "gpu=\"{i}\",UUID=\"{uuid}\",pci_bus_id=\"{bus}\",device=\"nvidia{i}\",modelName=\"{DCGM_MODEL_NAME}\"",
                i = g.index,
                uuid = g.uuid(),
                bus = g.pci_bus_id(),
            );
            if !hostname.is_empty() {
                let _ = write!(p, ",Hostname=\"{hostname}\"");
            }
            let _ = write!(p, ",DCGM_FI_DRIVER_VERSION=\"{DCGM_DRIVER_VERSION}\"");
            if let Some(pod) = &g.pod {
                let _ = write!(
                    p,
                    ",container=\"{}\",namespace=\"{}\",pod=\"{}\"",
                    pod.container, pod.namespace, pod.pod
                );
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
    gpus: Mutex<BTreeMap<u32, DcgmGpu>>,
    hostname: Mutex<String>,
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
        render_ordered(&gpus, &lock(&self.hostname), shuffle)
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
        lock(&self.shared.gpus).insert(index, DcgmGpu::new(index, util_percent, pod));
    }

    /// Change GPU `index` in place (created idle and unassigned if absent).
    pub fn update_gpu(&self, index: u32, f: impl FnOnce(&mut DcgmGpu)) {
        let mut gpus = lock(&self.shared.gpus);
        f(gpus
            .entry(index)
            .or_insert_with(|| DcgmGpu::new(index, 0, None)));
    }

    /// Remove GPU `index` (its series vanish, as when DCGM returns blanks).
    pub fn remove_gpu(&self, index: u32) {
        lock(&self.shared.gpus).remove(&index);
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
