//! The vLLM source: scrape every engine pod's `/metrics` and keep, per pod,
//! the requests waiting (`W`) and running (`R`).
//!
//! Per-pod readings are kept (not only sums) so that `/explain` can show
//! where a number came from and so that later policies can work per pod.
//!
//! A reading is all-or-nothing: every discovered pod must answer. Summing the
//! pods that did answer would under-count a busy fleet exactly when pods are
//! struggling; instead the poller holds the last complete reading until
//! `maxSignalAgeSeconds` (ARCHITECTURE.md §3).

use std::time::Instant;

use reqwest::Url;
use serde::Serialize;
use tokio::task::JoinSet;

use super::http::ScrapeTarget;
use super::{SourceContext, SourceError, prom_text};

/// Gauge of requests queued in the engine (`W`).
pub const WAITING: &str = "vllm:num_requests_waiting";
/// Gauge of requests in the running batch (`R`).
pub const RUNNING: &str = "vllm:num_requests_running";
const MODEL_LABEL: &str = "model_name";

/// Identity of a vLLM source: which pods, which model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VllmSource {
    /// Targets to scrape (`vllmTargets`).
    pub targets: Vec<ScrapeTarget>,
    /// Only series with this `model_name` label count (`modelName`).
    pub model_name: Option<String>,
}

/// One pod's gauges.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReading {
    /// The URL scraped.
    pub target: String,
    /// `vllm:num_requests_waiting`, summed over the pod's engines.
    pub waiting: f64,
    /// `vllm:num_requests_running`, summed over the pod's engines.
    pub running: f64,
}

/// One reading of every pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineReading {
    /// One entry per pod, sorted by target.
    pub pods: Vec<PodReading>,
    /// Lines skipped as malformed, over all pods.
    pub malformed_lines: usize,
}

impl EngineReading {
    /// `W`, summed over pods.
    pub fn waiting(&self) -> f64 {
        self.pods.iter().map(|p| p.waiting).sum()
    }
    /// `R`, summed over pods.
    pub fn running(&self) -> f64 {
        self.pods.iter().map(|p| p.running).sum()
    }
}

impl VllmSource {
    /// A short label: the first target and how many more.
    pub fn label(&self) -> String {
        let first = self
            .targets
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut label = format!("vllm {first}");
        if self.targets.len() > 1 {
            label.push_str(&format!(" +{}", self.targets.len() - 1));
        }
        if let Some(model) = &self.model_name {
            label.push_str(&format!(" model={model}"));
        }
        label
    }

    /// Resolve targets, scrape all pods concurrently, parse each.
    pub async fn read(&self, ctx: &SourceContext) -> Result<EngineReading, SourceError> {
        let mut urls: Vec<Url> = Vec::new();
        for target in &self.targets {
            urls.extend(target.resolve().await?);
        }
        urls.sort();
        urls.dedup();

        let mut scrapes = JoinSet::new();
        for url in urls {
            let http = ctx.http.clone();
            scrapes.spawn(async move {
                let body = http.get_text(&url).await;
                (url, body)
            });
        }
        let mut pods = Vec::new();
        let mut malformed_lines = 0;
        let mut first_error = None;
        while let Some(joined) = scrapes.join_next().await {
            let result = match joined {
                Ok((url, Ok(body))) => self.parse_pod(url.as_str(), &body),
                Ok((_, Err(error))) => Err(error),
                Err(join_error) => Err(SourceError::Upstream {
                    target: self.label(),
                    reason: format!("scrape task failed: {join_error}"),
                }),
            };
            match result {
                Ok((pod, malformed)) => {
                    pods.push(pod);
                    malformed_lines += malformed;
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
        pods.sort_by(|a, b| a.target.cmp(&b.target));
        Ok(EngineReading {
            pods,
            malformed_lines,
        })
    }

    /// Extract one pod's gauges from its exposition text.
    pub fn parse_pod(&self, target: &str, body: &str) -> Result<(PodReading, usize), SourceError> {
        let started = Instant::now();
        let mut waiting = Gauge::default();
        let mut running = Gauge::default();
        let stats = prom_text::parse(
            body,
            |name| gauge_of(name).is_some(),
            |sample| {
                if let Some(model) = &self.model_name
                    && sample.label(MODEL_LABEL).as_deref() != Some(model.as_str())
                {
                    return;
                }
                match gauge_of(sample.name) {
                    Some(Which::Waiting) => waiting.add(sample.value),
                    Some(Which::Running) => running.add(sample.value),
                    None => {}
                }
            },
        );
        let parse_error = |reason: String| SourceError::Parse {
            target: target.to_owned(),
            reason,
        };
        let model_note = self
            .model_name
            .as_ref()
            .map(|m| format!(" with model_name=\"{m}\""))
            .unwrap_or_default();
        let mut missing_note = String::new();
        if stats.malformed_lines > 0
            && let Some(first) = &stats.first_error
        {
            missing_note = format!(
                " ({} malformed lines, first at {first})",
                stats.malformed_lines
            );
        }
        let waiting = waiting
            .total(WAITING)
            .map_err(|e| parse_error(e.to_string()))?
            .ok_or_else(|| parse_error(format!("no {WAITING} sample{model_note}{missing_note}")))?;
        let running = running
            .total(RUNNING)
            .map_err(|e| parse_error(e.to_string()))?
            .ok_or_else(|| parse_error(format!("no {RUNNING} sample{model_note}{missing_note}")))?;
        tracing::trace!(
            target_url = target,
            elapsed_us = started.elapsed().as_micros() as u64,
            "parsed pod"
        );
        Ok((
            PodReading {
                target: target.to_owned(),
                waiting,
                running,
            },
            stats.malformed_lines,
        ))
    }
}

enum Which {
    Waiting,
    Running,
}

/// Accept `vllm:` and `vllm_` spellings: prometheus_client's OpenMetrics
/// escaping bug (client_python#1177) rewrites `:` to `_` in sample names.
fn gauge_of(name: &str) -> Option<Which> {
    let rest = name
        .strip_prefix("vllm:")
        .or_else(|| name.strip_prefix("vllm_"))?;
    match rest {
        "num_requests_waiting" => Some(Which::Waiting),
        "num_requests_running" => Some(Which::Running),
        _ => None,
    }
}

/// Sum of a gauge's series on one pod (data-parallel engines each report).
#[derive(Default)]
struct Gauge {
    sum: f64,
    series: usize,
    bad: Option<f64>,
}

impl Gauge {
    fn add(&mut self, value: f64) {
        if value.is_finite() && value >= 0.0 {
            self.sum += value;
        } else {
            self.bad.get_or_insert(value);
        }
        self.series += 1;
    }

    fn total(&self, name: &str) -> Result<Option<f64>, String> {
        if let Some(bad) = self.bad {
            return Err(format!("{name} has value {bad}, not a count"));
        }
        Ok((self.series > 0).then_some(self.sum))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 3.0
vllm:num_requests_running{engine="1",model_name="a"} 4.0
vllm:num_requests_running{engine="0",model_name="b"} 30.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="a"} 1.0
vllm:num_requests_waiting{engine="1",model_name="a"} 2.0
vllm:num_requests_waiting{engine="0",model_name="b"} 10.0
"#;

    fn source(model: Option<&str>) -> VllmSource {
        VllmSource {
            targets: vec![],
            model_name: model.map(str::to_owned),
        }
    }

    #[test]
    fn sums_engines_and_filters_models() {
        let (pod, malformed) = source(Some("a")).parse_pod("t", BODY).expect("parses");
        assert_eq!((pod.waiting, pod.running, malformed), (3.0, 7.0, 0));
        let (pod, _) = source(None).parse_pod("t", BODY).expect("parses");
        assert_eq!((pod.waiting, pod.running), (13.0, 37.0));
    }

    #[test]
    fn missing_model_or_gauge_is_a_parse_error_not_zero() {
        let err = source(Some("c"))
            .parse_pod("t", BODY)
            .expect_err("no model c");
        assert!(err.to_string().contains("model_name=\"c\""), "{err}");
        let err = source(None)
            .parse_pod("t", "<html>oops</html>")
            .expect_err("garbage");
        assert!(matches!(err, SourceError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("malformed"), "{err}");
    }

    #[test]
    fn nan_or_negative_gauges_are_errors() {
        let body = "vllm:num_requests_waiting{model_name=\"a\"} NaN\nvllm:num_requests_running{model_name=\"a\"} 1.0\n";
        let err = source(None).parse_pod("t", body).expect_err("NaN");
        assert!(err.to_string().contains("NaN"), "{err}");
    }

    #[test]
    fn underscore_spelling_is_accepted() {
        let body = "vllm_num_requests_waiting{model_name=\"a\"} 2.0\nvllm_num_requests_running{model_name=\"a\"} 1.0\n# EOF\n";
        let (pod, _) = source(None).parse_pod("t", body).expect("parses");
        assert_eq!((pod.waiting, pod.running), (2.0, 1.0));
    }

    #[test]
    fn malformed_lines_are_counted_and_skipped() {
        let body = format!("{BODY}vllm:num_requests_waiting{{model_name=\"a\" 5\ngarbage line\n");
        let (pod, malformed) = source(Some("a")).parse_pod("t", &body).expect("parses");
        assert_eq!(pod.waiting, 3.0);
        assert!(malformed >= 1);
    }
}
