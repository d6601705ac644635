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
//! Layout: [`format_float`] (prometheus_client's `floatToGoString`), the state model
//! ([`PodState`]), the serializer ([`render_vllm_metrics`]), the HTTP server ([`FakeVllmPod`]) and
//! the demand simulator ([`FakeFleet`]).

mod fleet;
mod format;
mod render;
mod server;
mod state;

pub use fleet::{DEFAULT_MAX_NUM_SEQS, FakeFleet};
pub use format::format_float;
pub use render::{
    VLLM_CONTENT_TYPE, render_vllm_metrics, synthetic_pod_state, synthetic_vllm_body,
};
pub use server::FakeVllmPod;
pub use state::{
    E2E_BUCKETS, FinishReason, Histogram, ITL_BUCKETS, ModelLoad, ModelMetrics, PodState,
    ProcessInfo, TTFT_BUCKETS,
};
