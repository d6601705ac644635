//! The DCGM source: scrape dcgm-exporter and average `DCGM_FI_DEV_GPU_UTIL`
//! over the GPUs assigned to the scaled workload's pods.
//!
//! dcgm-exporter runs once per node and reports every GPU on it; in
//! Kubernetes mode a GPU assigned to a pod carries `namespace` and `pod`
//! labels (shared/reference/signals.md §6). The source keeps only GPUs whose
//! `namespace` equals the trigger's `namespace` and whose `pod` matches
//! `podSelectorRegex`, so other tenants' GPUs on the same node do not count.

use std::fmt;
use std::hash::{Hash, Hasher};

use serde::Serialize;

use super::context::SourceContext;
use super::error::SourceError;
use super::http::ScrapeTarget;
use super::prom_text;

/// GPU utilisation in percent, 0–100.
pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";

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
    /// The pod the GPU is assigned to.
    pub pod: String,
    /// `DCGM_FI_DEV_GPU_UTIL`, percent.
    pub utilization: f64,
}

/// One reading of the selected GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuReading {
    /// Every selected GPU.
    pub gpus: Vec<GpuSample>,
    /// Lines skipped as malformed.
    pub malformed_lines: usize,
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
    /// A short label.
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
            label.push_str(&format!(" pod=~{}", pods.0.as_str()));
        }
        label
    }

    /// Scrape every exporter and select the workload's GPUs.
    pub async fn read(&self, ctx: &SourceContext) -> Result<GpuReading, SourceError> {
        let scraped = ctx.http.scrape_all(&self.targets, &self.label()).await?;
        let mut gpus = Vec::new();
        let mut malformed_lines = 0;
        for (url, body) in scraped.bodies {
            malformed_lines += self.parse_exporter(url.as_str(), &body, &mut gpus)?;
        }
        gpus.sort_by(|a, b| (&a.pod, &a.gpu).cmp(&(&b.pod, &b.gpu)));
        Ok(GpuReading {
            gpus,
            malformed_lines,
        })
    }

    /// Select the matching GPUs of one exporter's body into `out`.
    pub fn parse_exporter(
        &self,
        target: &str,
        body: &str,
        out: &mut Vec<GpuSample>,
    ) -> Result<usize, SourceError> {
        let mut bad = None;
        let mut seen_family = false;
        let stats = prom_text::parse(
            body,
            |name| name == GPU_UTIL,
            |sample| {
                seen_family = true;
                let Some(pod) = sample.label("pod").filter(|p| !p.is_empty()) else {
                    return; // not assigned to any pod
                };
                if let Some(ns) = &self.namespace
                    && sample.label("namespace").as_deref() != Some(ns.as_str())
                {
                    return;
                }
                if let Some(selector) = &self.pods
                    && !selector.0.is_match(&pod)
                {
                    return;
                }
                if !(0.0..=100.0).contains(&sample.value) {
                    bad.get_or_insert(sample.value);
                    return;
                }
                let gpu = sample
                    .label("UUID")
                    .or_else(|| sample.label("uuid"))
                    .or_else(|| sample.label("gpu"))
                    .unwrap_or_default();
                out.push(GpuSample {
                    target: target.to_owned(),
                    gpu: gpu.into_owned(),
                    pod: pod.into_owned(),
                    utilization: sample.value,
                });
            },
        );
        if let Some(value) = bad {
            return Err(SourceError::parse(
                target,
                format!("{GPU_UTIL} has value {value}, not a percentage"),
            ));
        }
        if !seen_family {
            return Err(SourceError::parse(
                target,
                format!(
                    "no {GPU_UTIL} samples ({} malformed lines)",
                    stats.malformed_lines
                ),
            ));
        }
        Ok(stats.malformed_lines)
    }
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
                malformed_lines: 0
            }
            .mean_utilization()
            .is_none()
        );
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
        assert!(err.to_string().contains(GPU_UTIL), "{err}");
    }
}
