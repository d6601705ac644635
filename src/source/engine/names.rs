//! Where each signal lives in each engine's exposition: the metric names of
//! vLLM, SGLang, Triton and TGI (shared/reference/signals.md), for the pod
//! parser and for the default PromQL queries alike.

use std::fmt;

use serde::Serialize;

/// Triton's TensorRT-LLM backend: one gauge per `request_type`.
pub const TRT_LLM_REQUESTS: &str = "nv_trt_llm_request_metrics";

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

/// One value of a labelled gauge family, e.g.
/// `vllm:num_requests_waiting_by_reason{reason="capacity"}`: read instead of
/// the engine's plain gauge whenever the pod exposes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelledGauge {
    /// The family name.
    pub family: &'static str,
    /// The label that splits the family.
    pub label: &'static str,
    /// The label value to read.
    pub value: &'static str,
}

/// How SGLang's scheduler gauges repeat: once per scheduler process that
/// logs, and (with priority scheduling) once more per priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerRanks {
    /// Ranks whose schedulers hold the same requests, in the order the
    /// lowest is chosen: every pipeline stage and every attention-TP rank of
    /// one data-parallel group logs the same queue, so one of them is read.
    pub ranks: &'static [&'static str],
    /// Labels that follow the rank (`moe_ep_rank`) and so never split a group.
    pub rank_attached: &'static [&'static str],
    /// Priority scheduling's label: the total is written under `""`, the
    /// breakdown under `"<n>"`; the total is read (the breakdown summed only
    /// when no total exists), never both.
    pub priority: &'static str,
}

/// Where each signal lives in one engine's exposition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineMetrics {
    /// Gauge of requests waiting (`W`).
    pub waiting: &'static str,
    /// Read for `W` instead of [`waiting`](Self::waiting) when the pod has it.
    pub waiting_preferred: Option<LabelledGauge>,
    /// Gauge of requests running (`R`), if every server of this engine has
    /// one (registration refuses `runningPerReplica` otherwise).
    pub running: Option<&'static str>,
    /// Read for `R` when the pod has it (Triton's TensorRT-LLM backend).
    pub running_preferred: Option<LabelledGauge>,
    /// KV-cache usage gauges as a 0–1 fraction, newest name first.
    pub kv_cache: &'static [&'static str],
    /// Read for KV usage when the pod has it (Triton's TensorRT-LLM backend).
    pub kv_cache_preferred: Option<LabelledGauge>,
    /// Time-to-first-token histogram, if the engine has one.
    pub ttft: Option<HistogramName>,
    /// Label carrying the served model's name, if any.
    pub model_label: Option<&'static str>,
    /// Counters of finished requests (all outcomes), summed: `F` of the
    /// capacity policy.
    pub finished: &'static [&'static str],
    /// Counters of generated tokens, summed (`G`: the capacity policy learns
    /// `μ` in tokens when a pod has them and [`prompt_tokens`](Self::prompt_tokens)).
    pub generation_tokens: &'static [&'static str],
    /// Counters of prompt tokens, summed (`P`).
    pub prompt_tokens: &'static [&'static str],
    /// Labels that split one pod's gauge into several series which are
    /// summed (vLLM's data-parallel `engine`): `n` counts pods, not these.
    pub split_labels: &'static [&'static str],
    /// SGLang's scheduler ranks and priorities (gauges repeat per rank).
    pub scheduler: Option<SchedulerRanks>,
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
                // 0.33: the total includes requests deferred on a LoRA budget
                // or a KV transfer, which more replicas would not serve.
                waiting_preferred: Some(LabelledGauge {
                    family: "vllm:num_requests_waiting_by_reason",
                    label: "reason",
                    value: "capacity",
                }),
                running: Some("vllm:num_requests_running"),
                running_preferred: None,
                // Renamed in 0.9.2, the old name gone by 0.33; older servers
                // only have the second.
                kv_cache: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
                kv_cache_preferred: None,
                ttft: Some(HistogramName {
                    family: "vllm:time_to_first_token_seconds",
                    to_seconds: 1.0,
                }),
                model_label: Some("model_name"),
                finished: &["vllm:request_success_total"],
                generation_tokens: &["vllm:generation_tokens_total"],
                prompt_tokens: &["vllm:prompt_tokens_total"],
                split_labels: &["engine"],
                scheduler: None,
            },
            Engine::Sglang => EngineMetrics {
                waiting: "sglang:num_queue_reqs",
                waiting_preferred: None,
                running: Some("sglang:num_running_reqs"),
                running_preferred: None,
                kv_cache: &["sglang:token_usage"],
                kv_cache_preferred: None,
                ttft: Some(HistogramName {
                    family: "sglang:time_to_first_token_seconds",
                    to_seconds: 1.0,
                }),
                model_label: Some("model_name"),
                finished: &["sglang:num_requests_total"],
                generation_tokens: &["sglang:generation_tokens_total"],
                prompt_tokens: &["sglang:prompt_tokens_total"],
                split_labels: &["dp_rank"],
                scheduler: Some(SchedulerRanks {
                    ranks: &["pp_rank", "tp_rank"],
                    rank_attached: &["moe_ep_rank", "pid"],
                    priority: "priority",
                }),
            },
            Engine::Triton => EngineMetrics {
                waiting: "nv_inference_pending_request_count",
                // The TensorRT-LLM backend takes requests off Triton's queue at
                // once and queues them itself (in-flight batching).
                waiting_preferred: Some(LabelledGauge {
                    family: TRT_LLM_REQUESTS,
                    label: "request_type",
                    value: "waiting",
                }),
                running: None,
                running_preferred: Some(LabelledGauge {
                    family: TRT_LLM_REQUESTS,
                    label: "request_type",
                    value: "scheduled",
                }),
                kv_cache: &[],
                kv_cache_preferred: Some(LabelledGauge {
                    family: "nv_trt_llm_kv_cache_block_metrics",
                    label: "kv_cache_block_type",
                    value: "fraction",
                }),
                ttft: Some(HistogramName {
                    family: "nv_inference_first_response_histogram_ms",
                    to_seconds: 0.001,
                }),
                model_label: Some("model"),
                finished: &[
                    "nv_inference_request_success",
                    "nv_inference_request_failure",
                ],
                // Only per request, in the TensorRT-LLM backend's histograms.
                generation_tokens: &[],
                prompt_tokens: &[],
                split_labels: &[],
                scheduler: None,
            },
            Engine::Tgi => EngineMetrics {
                waiting: "tgi_queue_size",
                waiting_preferred: None,
                running: Some("tgi_batch_current_size"),
                running_preferred: None,
                kv_cache: &[],
                kv_cache_preferred: None,
                ttft: None,
                model_label: None,
                finished: &["tgi_request_success", "tgi_request_failure"],
                // Histograms observed when a request ends, not as tokens are
                // made: the request unit is used.
                generation_tokens: &[],
                prompt_tokens: &[],
                split_labels: &[],
                scheduler: None,
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
