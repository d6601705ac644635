//! Which inference server a fake pod impersonates, and the dispatch to its serializer.
//!
//! One [`PodState`] drives every engine: the waiting/running/KV gauges map onto each server's
//! queue, batch and cache-usage gauges, and every finished request recorded with
//! [`PodState::record_finished`] is observed into vLLM's histograms and, in the other engines'
//! buckets and units, into [`EngineHistograms`](super::EngineHistograms) (we keep per-engine
//! histograms rather than raw observations, so a long demo stays O(1) in memory).
//!
//! | engine | gauges from [`ModelLoad`](super::ModelLoad) | TTFT-like histogram |
//! |---|---|---|
//! | vLLM | `vllm:num_requests_{waiting,running}`, `vllm:kv_cache_usage_perc` | `vllm:time_to_first_token_seconds` |
//! | SGLang | `sglang:num_queue_reqs`, `sglang:num_running_reqs`, `sglang:token_usage` (per logging scheduler; priorities, DP attention: [`SglangOptions`](super::SglangOptions)) | `sglang:time_to_first_token_seconds` (SGLang bounds) |
//! | Triton | `nv_inference_pending_request_count` (no running gauge exists); with TensorRT-LLM `nv_trt_llm_request_metrics`, `nv_trt_llm_kv_cache_block_metrics` | `nv_inference_first_response_histogram_ms` (ms, opt-in) |
//! | TGI | `tgi_queue_size`, `tgi_batch_current_size`, `tgi_batch_current_max_tokens` (KV × `tgi_batch_max_total_tokens`) | none; `tgi_request_queue_duration` holds the TTFT |
//!
//! Engines without vLLM's data-parallel `engine` label (SGLang's tokenizer side, Triton, TGI)
//! merge a model's engine series; TGI, which has no model label, merges everything.

use super::state::PodState;
use super::vllm::{VLLM_033_CONTENT_TYPE, VLLM_CONTENT_TYPE, render_vllm_metrics};
use super::{sglang, tgi, triton};

/// SGLang's `Content-Type` when the scraper gets classic text (`make_asgi_app` negotiates; the
/// fake always answers classic text, see [`EngineKind::content_type`]).
pub const SGLANG_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Triton's `Content-Type` (`src/http_server.cc`).
pub const TRITON_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// TGI's `Content-Type` on the router port (an axum `String` body).
pub const TGI_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// The inference server a [`FakeVllmPod`](super::FakeVllmPod) impersonates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// vLLM V1, prometheus_client single-process mode (the default).
    #[default]
    Vllm,
    /// SGLang, prometheus_client multiprocess mode.
    Sglang,
    /// NVIDIA Triton Inference Server, prometheus-cpp.
    Triton,
    /// Hugging Face TGI, metrics-exporter-prometheus.
    Tgi,
}

impl EngineKind {
    /// Every engine.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Vllm,
        EngineKind::Sglang,
        EngineKind::Triton,
        EngineKind::Tgi,
    ];

    /// Lower-case name: `vllm`, `sglang`, `triton`, `tgi`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::Triton => "triton",
            EngineKind::Tgi => "tgi",
        }
    }

    /// The `Content-Type` of this server's `/metrics` answer (signals.md §1).
    ///
    /// SGLang really negotiates (`make_asgi_app`): a Prometheus 2.x scraper, which prefers
    /// OpenMetrics, would get `application/openmetrics-text` and, with client_python ≥ 0.23,
    /// `sglang_`-escaped sample names. The fake does not negotiate; it always sends classic
    /// text, which is what client_python picks for a scraper that does not ask for OpenMetrics.
    pub fn content_type(self) -> &'static str {
        match self {
            EngineKind::Vllm => VLLM_CONTENT_TYPE,
            EngineKind::Sglang => SGLANG_CONTENT_TYPE,
            EngineKind::Triton => TRITON_CONTENT_TYPE,
            EngineKind::Tgi => TGI_CONTENT_TYPE,
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `Content-Type` `kind`'s server sends for `state`: [`EngineKind::content_type`], except
/// vLLM 0.33's ([`PodState::vllm_033`]), whose prometheus_client 0.26 says `version=1.0.0`.
pub fn engine_content_type(kind: EngineKind, state: &PodState) -> &'static str {
    match kind {
        EngineKind::Vllm if state.vllm_033 => VLLM_033_CONTENT_TYPE,
        _ => kind.content_type(),
    }
}

/// Render `state` the way `kind`'s server writes its `/metrics` body (classic text format).
pub fn render_engine_metrics(kind: EngineKind, state: &PodState) -> String {
    match kind {
        EngineKind::Vllm => render_vllm_metrics(state),
        EngineKind::Sglang => sglang::render(state),
        EngineKind::Triton => triton::render(state),
        EngineKind::Tgi => tgi::render(state),
    }
}
