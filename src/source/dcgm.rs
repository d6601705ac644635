//! The DCGM source: scrape dcgm-exporter and average the GPU utilisation
//! (`DCGM_FI_DEV_GPU_UTIL`, percent) over the GPUs assigned to the scaled
//! workload's pods.
//!
//! dcgm-exporter runs once per node and reports every GPU on it; in
//! Kubernetes mode a GPU assigned to a pod carries `namespace` and `pod`
//! labels, or `pod_namespace` and `pod_name` with `--use-old-namespace`
//! (shared/reference/signals.md §6, §8). The source keeps only GPUs whose
//! namespace equals the trigger's `namespace` and whose pod matches
//! `podSelectorRegex`, so other tenants' GPUs on the same node do not count.
//! A MIG instance (`GPU_I_ID` label) has no usable `DCGM_FI_DEV_GPU_UTIL`
//! (absent, or 0): its `DCGM_FI_PROF_GR_ENGINE_ACTIVE` ratio × 100 is read
//! instead, and so is any GPU's when `DCGM_FI_DEV_GPU_UTIL` is missing.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::Serialize;

use super::context::SourceContext;
use super::error::SourceError;
use super::http::ScrapeTarget;
use super::prom_text;
use crate::guard::redact::redact;

/// GPU utilisation in percent, 0–100.
pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// Graphics-engine activity, a 0–1 ratio: the utilisation of a MIG instance.
pub const GR_ENGINE_ACTIVE: &str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
/// (namespace, pod) label names dcgm-exporter writes: the default, then
/// `--use-old-namespace`'s.
pub const EXPORTER_POD_LABELS: [(&str, &str); 2] =
    [("namespace", "pod"), ("pod_namespace", "pod_name")];
/// (namespace, pod) label names a GPU's pod can have in Prometheus: the
/// exporter's, then the `exported_` ones a scrape with `honorLabels: false`
/// stores when the target already has `namespace`/`pod`.
pub const DCGM_POD_LABELS: [(&str, &str); 3] = [
    EXPORTER_POD_LABELS[0],
    EXPORTER_POD_LABELS[1],
    ("exported_namespace", "exported_pod"),
];

/// A compiled `podSelectorRegex`, compared and hashed by its text so a
/// source can be a poller key.
#[derive(Debug, Clone)]
pub struct PodSelector(pub regex::Regex);

impl PodSelector {
    /// Compile `pattern`, anchored: it must match the whole pod name.
    pub fn new(pattern: &str) -> Result<PodSelector, regex::Error> {
        regex::Regex::new(&format!("^(?:{pattern})$")).map(PodSelector)
    }
}

impl PartialEq for PodSelector {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}
impl Eq for PodSelector {}
impl Hash for PodSelector {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_str().hash(state);
    }
}

/// Identity of a DCGM source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DcgmSource {
    /// dcgm-exporter endpoints (`dcgmTargets`).
    pub targets: Vec<ScrapeTarget>,
    /// Only GPUs of pods in this namespace (`namespace`).
    pub namespace: Option<String>,
    /// Only GPUs of pods whose name matches (`podSelectorRegex`).
    pub pods: Option<PodSelector>,
}

/// One GPU's utilisation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuSample {
    /// The exporter scraped.
    pub target: String,
    /// The `UUID` label (or `gpu` index when absent).
    pub gpu: String,
    /// The MIG instance (`GPU_I_ID`), for a MIG slice of the GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The pod the GPU is assigned to.
    pub pod: String,
    /// Utilisation, percent (`DCGM_FI_DEV_GPU_UTIL`, or
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE` × 100).
    pub utilization: f64,
    /// Which field and pod labels it was read from, e.g.
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE ×100{pod,namespace} (MIG 1g.10gb, GPU_I_ID 3)`.
    pub read: String,
}

/// One reading of the selected GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuReading {
    /// Every selected GPU.
    pub gpus: Vec<GpuSample>,
    /// Lines skipped as malformed.
    pub malformed_lines: usize,
    /// `dns+` targets whose name answered "no addresses" while others gave
    /// exporters: their GPUs are missing, so the trigger is flagged degraded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub empty_discovery: Vec<String>,
}

impl GpuReading {
    /// `U`: mean utilisation over the selected GPUs; `None` when none matched.
    pub fn mean_utilization(&self) -> Option<f64> {
        (!self.gpus.is_empty())
            .then(|| self.gpus.iter().map(|g| g.utilization).sum::<f64>() / self.gpus.len() as f64)
    }
}

impl fmt::Display for DcgmSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl DcgmSource {
    /// A short label, credential-shaped parts redacted.
    pub fn label(&self) -> String {
        let first = self
            .targets
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut label = format!("dcgm {first}");
        if self.targets.len() > 1 {
            label.push_str(&format!(" +{}", self.targets.len() - 1));
        }
        if let Some(ns) = &self.namespace {
            label.push_str(&format!(" namespace={ns}"));
        }
        if let Some(pods) = &self.pods {
            // The pattern is redacted on its own too, so what it hides does
            // not hang on the `^(?:` around it, which the redactor reads as
            // part of a name or of a `user:password`.
            let anchored = pods.0.as_str();
            let pattern = anchored
                .strip_prefix("^(?:")
                .and_then(|p| p.strip_suffix(")$"))
                .unwrap_or(anchored);
            label.push_str(&format!(" pod=~^(?:{})$", redact(pattern)));
        }
        redact(&label)
    }

    /// Scrape every exporter and select the workload's GPUs.
    pub async fn read(&self, ctx: &SourceContext) -> Result<GpuReading, SourceError> {
        let scraped = ctx.http.scrape_all(&self.targets, &self.label()).await?;
        let mut gpus = Vec::new();
        let mut malformed_lines = 0;
        for (url, body) in scraped.bodies {
            malformed_lines += self.parse_exporter(url.as_str(), &body, &mut gpus)?;
        }
        gpus.sort_by(|a, b| (&a.pod, &a.gpu, &a.instance).cmp(&(&b.pod, &b.gpu, &b.instance)));
        Ok(GpuReading {
            gpus,
            malformed_lines,
            empty_discovery: scraped.empty_names,
        })
    }

    /// Select the matching GPUs of one exporter's body into `out`.
    pub fn parse_exporter(
        &self,
        target: &str,
        body: &str,
        out: &mut Vec<GpuSample>,
    ) -> Result<usize, SourceError> {
        let mut bad: Option<(&'static str, f64)> = None;
        let mut seen_family = false;
        // Per GPU (or MIG instance) of a selected pod: both fields, when present.
        let mut gpus: BTreeMap<(String, String, Option<String>), Fields> = BTreeMap::new();
        let stats = prom_text::parse(
            body,
            |name| name == GPU_UTIL || name == GR_ENGINE_ACTIVE,
            |sample| {
                seen_family = true;
                let Some((pod, (ns_label, pod_label))) =
                    EXPORTER_POD_LABELS.iter().find_map(|form| {
                        let pod = sample.label(form.1).filter(|p| !p.is_empty())?;
                        Some((pod, *form))
                    })
                else {
                    return; // not assigned to any pod
                };
                if let Some(ns) = &self.namespace
                    && sample.label(ns_label).as_deref() != Some(ns.as_str())
                {
                    return;
                }
                if let Some(selector) = &self.pods
                    && !selector.0.is_match(&pod)
                {
                    return;
                }
                let util = sample.name == GPU_UTIL;
                let range = if util { 100.0 } else { 1.0 };
                if !(0.0..=range).contains(&sample.value) {
                    bad.get_or_insert((
                        if util { GPU_UTIL } else { GR_ENGINE_ACTIVE },
                        sample.value,
                    ));
                    return;
                }
                let gpu = sample
                    .label("UUID")
                    .or_else(|| sample.label("uuid"))
                    .or_else(|| sample.label("gpu"))
                    .unwrap_or_default();
                let instance = sample.label("GPU_I_ID").map(|i| i.into_owned());
                let fields = gpus
                    .entry((pod.into_owned(), gpu.into_owned(), instance))
                    .or_default();
                fields.pod_labels = (pod_label, ns_label);
                fields.profile = sample.label("GPU_I_PROFILE").map(|p| p.into_owned());
                if util {
                    fields.util = Some(sample.value);
                } else {
                    fields.active = Some(sample.value);
                }
            },
        );
        if let Some((family, value)) = bad {
            let what = if family == GPU_UTIL {
                "a percentage"
            } else {
                "a 0–1 ratio"
            };
            return Err(SourceError::parse(
                target,
                format!("{family} has value {value}, not {what}"),
            ));
        }
        if !seen_family {
            return Err(SourceError::parse(
                target,
                format!(
                    "no {GPU_UTIL} or {GR_ENGINE_ACTIVE} samples ({} malformed lines)",
                    stats.malformed_lines
                ),
            ));
        }
        for ((pod, gpu, instance), f) in gpus {
            let labels = format!("{{{},{}}}", f.pod_labels.0, f.pod_labels.1);
            let mig = match (&instance, &f.profile) {
                (Some(i), Some(p)) => format!(" (MIG {p}, GPU_I_ID {i})"),
                (Some(i), None) => format!(" (MIG GPU_I_ID {i})"),
                _ => String::new(),
            };
            // NVML reports no per-instance utilisation: on MIG, GPU_UTIL is
            // absent or 0 while the engine-activity ratio is per instance.
            let (utilization, read) = match (instance.is_some(), f.active, f.util) {
                (true, Some(active), _) => (active * 100.0, format!("{GR_ENGINE_ACTIVE} ×100")),
                (_, _, Some(util)) => (util, GPU_UTIL.to_owned()),
                (_, Some(active), None) => (
                    active * 100.0,
                    format!("{GR_ENGINE_ACTIVE} ×100 (no {GPU_UTIL})"),
                ),
                (_, None, None) => continue,
            };
            out.push(GpuSample {
                target: target.to_owned(),
                gpu,
                instance,
                pod,
                utilization,
                read: format!("{read}{labels}{mig}"),
            });
        }
        Ok(stats.malformed_lines)
    }
}

/// The two utilisation fields of one GPU or MIG instance, as found.
#[derive(Default)]
struct Fields {
    util: Option<f64>,
    active: Option<f64>,
    profile: Option<String>,
    /// The (pod, namespace) label names the exporter used.
    pod_labels: (&'static str, &'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",pci_bus_id="00000000:4E:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="vllm",namespace="inference",pod="vllm-llama-7f9d8c6b5-x2k4p"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",pci_bus_id="00000000:62:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c",pci_bus_id="00000000:63:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="vllm",namespace="inference",pod="vllm-llama-7f9d8c6b5-abcde"} 93
DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-d",pci_bus_id="00000000:64:00.0",device="nvidia3",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="train",namespace="research",pod="trainer-0"} 100
"#;

    fn source(ns: Option<&str>, pods: Option<&str>) -> DcgmSource {
        DcgmSource {
            targets: vec![],
            namespace: ns.map(str::to_owned),
            pods: pods.map(|p| PodSelector::new(p).expect("regex")),
        }
    }

    #[test]
    fn selects_the_workloads_gpus() {
        let mut gpus = Vec::new();
        source(Some("inference"), Some("vllm-llama-.*"))
            .parse_exporter("t", BODY, &mut gpus)
            .expect("parses");
        let reading = GpuReading {
            gpus,
            malformed_lines: 0,
            empty_discovery: Vec::new(),
        };
        assert_eq!(reading.gpus.len(), 2);
        assert_eq!(reading.mean_utilization(), Some(90.0));
    }

    #[test]
    fn unassigned_gpus_never_count_and_no_match_is_none() {
        let mut gpus = Vec::new();
        source(None, None)
            .parse_exporter("t", BODY, &mut gpus)
            .expect("parses");
        assert_eq!(gpus.len(), 3, "the unassigned GPU is skipped");
        let mut gpus = Vec::new();
        source(Some("nobody"), None)
            .parse_exporter("t", BODY, &mut gpus)
            .expect("parses");
        assert!(
            GpuReading {
                gpus,
                malformed_lines: 0,
                empty_discovery: Vec::new(),
            }
            .mean_utilization()
            .is_none()
        );
    }

    #[test]
    fn the_label_shows_the_selector_redacted() {
        let target = ScrapeTarget::parse("http://10.0.0.9:9400/metrics").expect("target");
        for pattern in ["llama-8b-.*", "vllm-(a|b)-[0-9]+", "[a-z]+-\\d{2,}"] {
            let source = DcgmSource {
                targets: vec![target.clone()],
                ..source(Some("inference"), Some(pattern))
            };
            assert_eq!(
                source.label(),
                format!(
                    "dcgm http://10.0.0.9:9400/metrics namespace=inference pod=~^(?:{pattern})$"
                ),
            );
        }
        // A value runs to the end of its word (a password may hold `)`), so
        // these lose the closing `)$` too.
        for pattern in [
            "token=S3CRET",
            "x|password=S3CRET",
            "secret:S3CRET",
            "Authorization:S3CRET",
            "bearer:S3CRET",
            "S3CRET_abc123@h:1",
            "Bearer S3CRET",
        ] {
            let label = source(None, Some(pattern)).label();
            assert!(
                !label.contains("S3CRET") && label.contains("[redacted]"),
                "{pattern} → {label}"
            );
        }
    }

    #[test]
    fn selector_is_anchored() {
        let mut gpus = Vec::new();
        source(None, Some("vllm"))
            .parse_exporter("t", BODY, &mut gpus)
            .expect("parses");
        assert!(gpus.is_empty(), "`vllm` must not match `vllm-llama-…`");
    }

    #[test]
    fn a_body_without_the_family_is_an_error() {
        let mut gpus = Vec::new();
        let err = source(None, None)
            .parse_exporter("t", "up 1\n", &mut gpus)
            .expect_err("no family");
        assert!(
            err.to_string().contains(GPU_UTIL) && err.to_string().contains(GR_ENGINE_ACTIVE),
            "{err}"
        );
    }

    /// MIG (signals.md §6, §8): `GPU_I_PROFILE`/`GPU_I_ID` after the fixed
    /// prefix, no `DCGM_FI_DEV_GPU_UTIL` for an instance (or a 0).
    const MIG: &str = r#"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",pci_bus_id="00000000:62:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="vllm",namespace="inference",pod="vllm-llama-c"} 0
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a",pci_bus_id="00000000:4E:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="vllm",namespace="inference",pod="vllm-llama-a"} 0.450000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a",pci_bus_id="00000000:4E:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="4",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="vllm",namespace="inference",pod="vllm-llama-b"} 0.950000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",UUID="GPU-b",pci_bus_id="00000000:62:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container="vllm",namespace="inference",pod="vllm-llama-c"} 0.700000
"#;

    #[test]
    fn mig_instances_read_the_engine_activity_ratio() {
        let mut gpus = Vec::new();
        source(Some("inference"), Some("vllm-llama-.*"))
            .parse_exporter("t", MIG, &mut gpus)
            .expect("parses");
        let got: Vec<(&str, Option<&str>, f64)> = gpus
            .iter()
            .map(|g| (g.gpu.as_str(), g.instance.as_deref(), g.utilization))
            .collect();
        // GPU-b's instance reports GPU_UTIL 0 but is 70 % busy.
        assert_eq!(
            got,
            [
                ("GPU-a", Some("3"), 45.0),
                ("GPU-a", Some("4"), 95.0),
                ("GPU-b", Some("1"), 70.0)
            ]
        );
        assert_eq!(
            gpus[0].read,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE ×100{pod,namespace} (MIG 1g.10gb, GPU_I_ID 3)"
        );
        let reading = GpuReading {
            gpus,
            malformed_lines: 0,
            empty_discovery: Vec::new(),
        };
        assert_eq!(reading.mean_utilization(), Some(70.0));
        // Without the ratio a GPU's own GPU_UTIL still counts.
        let mut gpus = Vec::new();
        source(None, None)
            .parse_exporter("t", BODY, &mut gpus)
            .expect("parses");
        assert!(
            gpus.iter()
                .all(|g| g.read == "DCGM_FI_DEV_GPU_UTIL{pod,namespace}")
        );
    }

    #[test]
    fn a_missing_gpu_util_falls_back_and_bad_ratios_are_errors() {
        let only_active: String = BODY.replace("DCGM_FI_DEV_GPU_UTIL", GR_ENGINE_ACTIVE);
        let only_active = only_active
            .replace("} 87", "} 0.870000")
            .replace("} 93", "} 0.930000")
            .replace("} 100", "} 1.000000");
        let mut gpus = Vec::new();
        source(Some("inference"), None)
            .parse_exporter("t", &only_active, &mut gpus)
            .expect("parses");
        let utils: Vec<f64> = gpus.iter().map(|g| g.utilization).collect();
        assert_eq!(utils, [93.0, 87.0]);
        assert!(
            gpus[0].read.contains("(no DCGM_FI_DEV_GPU_UTIL)"),
            "{}",
            gpus[0].read
        );
        let err = source(None, None)
            .parse_exporter(
                "t",
                &BODY.replace("DCGM_FI_DEV_GPU_UTIL", GR_ENGINE_ACTIVE),
                &mut gpus,
            )
            .expect_err("87 is not a ratio");
        assert!(err.to_string().contains("not a 0–1 ratio"), "{err}");
    }

    #[test]
    fn old_namespace_pod_labels_are_accepted() {
        // `--use-old-namespace`: `uuid`, and `container_name`, `pod_name`,
        // `pod_namespace` (byte-sorted attributes).
        let body = r#"DCGM_FI_DEV_GPU_UTIL{gpu="0",uuid="GPU-a",pci_bus_id="00000000:4E:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container_name="vllm",pod_name="vllm-llama-a",pod_namespace="inference"} 64
DCGM_FI_DEV_GPU_UTIL{gpu="1",uuid="GPU-b",pci_bus_id="00000000:62:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07",container_name="train",pod_name="vllm-llama-x",pod_namespace="research"} 100
"#;
        let mut gpus = Vec::new();
        source(Some("inference"), Some("vllm-llama-.*"))
            .parse_exporter("t", body, &mut gpus)
            .expect("parses");
        assert_eq!(gpus.len(), 1, "the other namespace's GPU does not count");
        assert_eq!(
            (
                gpus[0].gpu.as_str(),
                gpus[0].pod.as_str(),
                gpus[0].utilization
            ),
            ("GPU-a", "vllm-llama-a", 64.0)
        );
        assert_eq!(gpus[0].read, "DCGM_FI_DEV_GPU_UTIL{pod_name,pod_namespace}");
    }
}
