//! What the fake dcgm-exporter knows about one GPU (or MIG instance): its sampled fields, its
//! pod, and the default CSV's families with how each is read from a GPU (signals.md §6).

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
/// may then overwrite single fields ([`FakeDcgmExporter::update_gpu`](super::FakeDcgmExporter::update_gpu)).
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
    /// A MIG instance of GPU `index` rather than the whole GPU: `GPU_I_PROFILE`/`GPU_I_ID`
    /// labels, and no `DCGM_FI_DEV_GPU_UTIL` (NVML has no per-instance utilisation; DCGM
    /// answers blank and the exporter skips it).
    pub mig: Option<DcgmMig>,
}

/// A MIG GPU instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcgmMig {
    /// `GPU_I_PROFILE`, e.g. `1g.10gb`.
    pub profile: String,
    /// `GPU_I_ID`.
    pub instance: u32,
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
            mig: None,
        }
    }

    /// MIG instance `instance` (profile e.g. `1g.10gb`) of GPU `index`, its graphics engine
    /// `gr_engine_active` (0–1) busy, the other fields derived as [`new`](Self::new) derives them.
    pub fn mig(
        index: u32,
        instance: u32,
        profile: &str,
        gr_engine_active: f64,
        pod: Option<(&str, &str, &str)>,
    ) -> DcgmGpu {
        let percent = (gr_engine_active / 0.93 * 100.0).round().clamp(0.0, 100.0) as u32;
        DcgmGpu {
            gr_engine_active,
            mig: Some(DcgmMig {
                profile: profile.to_owned(),
                instance,
            }),
            ..DcgmGpu::new(index, percent, pod)
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

pub(super) enum Field {
    Int(fn(&DcgmGpu) -> i64),
    Double(fn(&DcgmGpu) -> f64),
}

/// (field, prometheus type, help, value), in the default CSV's order.
pub(super) const FAMILIES: &[(&str, &str, &str, Field)] = &[
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
