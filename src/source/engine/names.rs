//! Where each signal lives in each engine's exposition: the metric names of
//! vLLM, SGLang, Triton and TGI (shared/reference/signals.md), for the pod
//! parser and for the default PromQL queries alike.

use std::fmt;

use serde::Serialize;

/// Which inference server the pods run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// vLLM (V1 and V0 metric names).
    #[default]
    Vllm,
    /// SGLang (`--enable-metrics`).
    Sglang,
    /// NVIDIA Triton Inference Server (metrics port 8002).
    Triton,
    /// Hugging Face text-generation-inference.
    Tgi,
}

/// A histogram family and the factor that turns its bounds into seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramName {
    /// Family name; samples are `<name>_bucket`.
    pub family: &'static str,
    /// Multiply `le` by this to get seconds (Triton reports milliseconds).
    pub to_seconds: f64,
}

/// Where each signal lives in one engine's exposition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineMetrics {
    /// Gauge of requests waiting (`W`).
    pub waiting: &'static str,
    /// Gauge of requests running (`R`), if the engine has one.
    pub running: Option<&'static str>,
    /// KV-cache usage gauges as a 0–1 fraction, newest name first.
    pub kv_cache: &'static [&'static str],
    /// Time-to-first-token histogram, if the engine has one.
    pub ttft: Option<HistogramName>,
    /// Label carrying the served model's name, if any.
    pub model_label: Option<&'static str>,
    /// Counters of finished requests (all outcomes), summed: `F` of the
    /// capacity policy.
    pub finished: &'static [&'static str],
    /// Labels whose series repeat one value per rank (SGLang reports every
    /// scheduler gauge once per tensor- and pipeline-parallel rank): only
    /// rank "0" is read, so TP=4 does not count the queue four times.
    pub rank_labels: &'static [&'static str],
}

impl Engine {
    /// Parse a metadata value.
    pub fn parse(value: &str) -> Option<Engine> {
        match value.to_ascii_lowercase().as_str() {
            "vllm" => Some(Engine::Vllm),
            "sglang" => Some(Engine::Sglang),
            "triton" => Some(Engine::Triton),
            "tgi" => Some(Engine::Tgi),
            _ => None,
        }
    }

    /// The engine's metric names.
    pub fn metrics(self) -> EngineMetrics {
        match self {
            Engine::Vllm => EngineMetrics {
                waiting: "vllm:num_requests_waiting",
                running: Some("vllm:num_requests_running"),
                // Renamed in 0.9.2; older servers only have the second.
                kv_cache: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
                ttft: Some(HistogramName {
                    family: "vllm:time_to_first_token_seconds",
                    to_seconds: 1.0,
                }),
                model_label: Some("model_name"),
                finished: &["vllm:request_success_total"],
                rank_labels: &[],
            },
            Engine::Sglang => EngineMetrics {
                waiting: "sglang:num_queue_reqs",
                running: Some("sglang:num_running_reqs"),
                kv_cache: &["sglang:token_usage"],
                ttft: Some(HistogramName {
                    family: "sglang:time_to_first_token_seconds",
                    to_seconds: 1.0,
                }),
                model_label: Some("model_name"),
                finished: &["sglang:num_requests_total"],
                rank_labels: &["tp_rank", "pp_rank"],
            },
            Engine::Triton => EngineMetrics {
                waiting: "nv_inference_pending_request_count",
                running: None,
                kv_cache: &[],
                ttft: Some(HistogramName {
                    family: "nv_inference_first_response_histogram_ms",
                    to_seconds: 0.001,
                }),
                model_label: Some("model"),
                finished: &[
                    "nv_inference_request_success",
                    "nv_inference_request_failure",
                ],
                rank_labels: &[],
            },
            Engine::Tgi => EngineMetrics {
                waiting: "tgi_queue_size",
                running: Some("tgi_batch_current_size"),
                kv_cache: &[],
                ttft: None,
                model_label: None,
                finished: &["tgi_request_success", "tgi_request_failure"],
                rank_labels: &[],
            },
        }
    }

    /// The metadata spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Triton => "triton",
            Engine::Tgi => "tgi",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
