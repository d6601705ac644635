//! Fake vLLM engine pods: HTTP servers on loopback whose `GET /metrics` answer is byte-for-byte
//! what a vLLM V1 API server (prometheus_client 0.22, single API server, so single-process mode)
//! writes, with values that tests control.
//!
//! Real vLLM needs a GPU and model weights, so nothing in CI or on a laptop can scrape one. The
//! scaler's parser and fusion logic must still be proven against the exact bytes it will meet in
//! production: Python float spelling (`3.0`, `1e+06`, the `e+010` quirk), labels sorted with `le`
//! in the middle, `_created` gauge families after their parent, `_total` counters, every bucket
//! bound, and the unrelated `python_gc_*` / `process_*` / `http_*` families a parser must skip.
//! This module reproduces all of that (see `shared/reference/signals.md` §0–2) and is used by the
//! integration tests, by `backlog-scaler demo` ([`FakeFleet`]) and by the parser benchmarks
//! ([`synthetic_vllm_body`]).
//!
//! The same pod can impersonate the other engines a scaler meets ([`EngineKind`]: SGLang,
//! Triton, TGI, each with its own serializer's quirks, see [`render_engine_metrics`]), and
//! [`FakeDcgmExporter`] serves NVIDIA dcgm-exporter's GPU metrics for pods the test assigns GPUs
//! to (signals.md §3–6).
//!
//! Layout: [`format_float`] (prometheus_client's `floatToGoString`) and [`format_cpp_double`]
//! (prometheus-cpp's), the state model ([`PodState`]), the serializers ([`render_vllm_metrics`],
//! [`render_engine_metrics`], [`render_dcgm_metrics`]), the HTTP servers ([`FakeVllmPod`],
//! [`FakeDcgmExporter`]) and the demand simulator ([`FakeFleet`]).

mod dcgm;
mod engine;
mod fleet;
mod format;
mod http;
mod render;
mod server;
mod sglang;
mod state;
mod tgi;
mod triton;

pub use dcgm::{
    DCGM_CONTENT_TYPE, DCGM_DEFAULT_HOSTNAME, DCGM_DRIVER_VERSION, DCGM_FB_TOTAL_MIB,
    DCGM_MODEL_NAME, DcgmGpu, DcgmPod, FakeDcgmExporter, dcgm_gpu_uuid, render_dcgm_metrics,
};
pub use engine::{
    EngineKind, SGLANG_CONTENT_TYPE, TGI_CONTENT_TYPE, TRITON_CONTENT_TYPE, render_engine_metrics,
};
pub use fleet::{DEFAULT_MAX_NUM_SEQS, FakeFleet};
pub use format::{format_cpp_double, format_float};
pub use render::{
    VLLM_CONTENT_TYPE, render_vllm_metrics, synthetic_pod_state, synthetic_vllm_body,
};
pub use server::FakeVllmPod;
pub use sglang::SGLANG_MAX_TOTAL_NUM_TOKENS;
pub use state::{
    E2E_BUCKETS, EngineHistograms, FinishReason, Histogram, ITL_BUCKETS, ModelLoad, ModelMetrics,
    PodState, ProcessInfo, SGLANG_E2E_BUCKETS, SGLANG_ITL_BUCKETS, SGLANG_TTFT_BUCKETS,
    TGI_DURATION_BUCKETS, TGI_GENERATED_TOKENS_BUCKETS, TGI_INPUT_LENGTH_BUCKETS,
    TGI_MAX_INPUT_TOKENS, TGI_MAX_TOTAL_TOKENS, TGI_VALIDATION_SECONDS,
    TRITON_FIRST_RESPONSE_MS_BUCKETS, TTFT_BUCKETS,
};
pub use tgi::TGI_MAX_BATCH_TOTAL_TOKENS;
