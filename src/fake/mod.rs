//! Fakes of what the scaler scrapes, for tests, the demo and benchmarks: engine pods emitting
//! each engine's exact exposition bytes ([`FakeVllmPod`]), a fake dcgm-exporter
//! ([`FakeDcgmExporter`]), and the demo's load driver ([`FakeFleet`]).
//!
//! Rule: a fake emits exactly the bytes the real component emits, and imports nothing from the
//! scaler's layers, so a fake can never agree with the scaler by sharing its code.
//!
//! Real engines need a GPU and model weights, so nothing in CI or on a laptop can scrape one.
//! The scaler's parser and fusion logic must still be proven against the exact bytes it will
//! meet in production. A fake pod answers `GET /metrics` byte-for-byte as a vLLM V1 API server
//! (prometheus_client 0.22, single API server, so single-process mode) writes it, with values
//! that tests control: Python float spelling (`3.0`, `1e+06`, the `e+010` quirk), labels sorted
//! with `le` in the middle, `_created` gauge families after their parent, `_total` counters,
//! every bucket bound, and the unrelated `python_gc_*` / `process_*` / `http_*` families a
//! parser must skip (see `shared/reference/signals.md` §0–2). The same pod can impersonate the
//! other engines a scaler meets ([`EngineKind`]: SGLang, Triton, TGI, each with its own
//! serializer's quirks, see [`render_engine_metrics`]), and [`FakeDcgmExporter`] serves NVIDIA
//! dcgm-exporter's GPU metrics for pods the test assigns GPUs to (signals.md §3–6). Used by the
//! integration tests, by `backlog-scaler demo` ([`FakeFleet`]) and by the parser benchmarks
//! ([`synthetic_vllm_body`]).
//!
//! | file | job |
//! |---|---|
//! | `format` | value spelling: prometheus_client's `floatToGoString` ([`format_float`]), prometheus-cpp's ([`format_cpp_double`]), Go's `%f` |
//! | `buckets` | every engine's bucket bounds |
//! | `histogram`, `state` | what one pod holds ([`Histogram`], [`PodState`]) |
//! | `options` | server flags whose expositions differ ([`SglangOptions`], [`PriorityLoad`]) |
//! | `writer` | prometheus_client's text writer, and the label escaper all writers share |
//! | `vllm`, `sglang`, `triton`, `tgi` | each engine's serializer ([`render_vllm_metrics`]) |
//! | `engine` | which engine a pod impersonates ([`EngineKind`], [`render_engine_metrics`]) |
//! | `dcgm_gpu`, `dcgm` | one GPU's fields ([`DcgmGpu`]); the fake dcgm-exporter and its serializer ([`render_dcgm_metrics`]) |
//! | `http`, `server` | the loopback listeners; one fake pod ([`FakeVllmPod`]) |
//! | `fleet` | the demo's pods under a demand curve ([`FakeFleet`]) |
//! | `rng` | seeded noise, so the same inputs give the same bytes |

mod buckets;
mod dcgm;
mod dcgm_gpu;
mod engine;
mod fleet;
mod format;
mod histogram;
mod http;
mod options;
mod rng;
mod server;
mod sglang;
mod state;
mod tgi;
mod triton;
mod vllm;
mod writer;

pub use buckets::{
    E2E_BUCKETS, ITL_BUCKETS, SGLANG_E2E_BUCKETS, SGLANG_ITL_BUCKETS, SGLANG_TTFT_BUCKETS,
    TGI_DURATION_BUCKETS, TGI_GENERATED_TOKENS_BUCKETS, TGI_INPUT_LENGTH_BUCKETS,
    TGI_MAX_INPUT_TOKENS, TGI_MAX_TOTAL_TOKENS, TRITON_FIRST_RESPONSE_MS_BUCKETS, TTFT_BUCKETS,
};
pub use dcgm::{FakeDcgmExporter, render_dcgm_metrics, render_dcgm_metrics_old_namespace};
pub use dcgm_gpu::{
    DCGM_CONTENT_TYPE, DCGM_DEFAULT_HOSTNAME, DCGM_DRIVER_VERSION, DCGM_FB_TOTAL_MIB,
    DCGM_MODEL_NAME, DcgmGpu, DcgmMig, DcgmPod, dcgm_gpu_uuid,
};
pub use engine::{
    EngineKind, SGLANG_CONTENT_TYPE, TGI_CONTENT_TYPE, TRITON_CONTENT_TYPE, engine_content_type,
    render_engine_metrics,
};
pub use fleet::{DEFAULT_MAX_NUM_SEQS, FakeFleet};
pub use format::{format_cpp_double, format_float};
pub use histogram::Histogram;
pub use options::{PriorityLoad, SglangOptions};
pub use server::FakeVllmPod;
pub use sglang::SGLANG_MAX_TOTAL_NUM_TOKENS;
pub use state::{
    EngineHistograms, FinishReason, ModelLoad, ModelMetrics, PodState, ProcessInfo,
    TGI_VALIDATION_SECONDS,
};
pub use tgi::TGI_MAX_BATCH_TOTAL_TOKENS;
pub use vllm::{
    VLLM_033_CONTENT_TYPE, VLLM_CONTENT_TYPE, render_vllm_metrics, synthetic_pod_state,
    synthetic_vllm_body,
};
