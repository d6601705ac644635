//! Triton Inference Server's exposition: prometheus-cpp's `TextSerializer`.
//!
//! Rules reproduced (signals.md §0, §5): values through an `ostream` at precision 16 (`161`,
//! `0.87`, `Nan`); labels in `std::map` order with `le` appended last; histograms write
//! `_count`, `_sum`, then buckets (counts as integers); never `_created`; HELP text is written
//! raw; a family without children is left out entirely; families come counters first, then
//! gauges, then histograms, each group in registration order.
//!
//! Per-model series are labelled `{model, version="1"}` (a model's data-parallel engine series are
//! merged: Triton has no such split). GPU series are labelled `{gpu_uuid}` only, one per GPU of
//! the pod ([`PodState::tensor_parallel`](super::PodState::tensor_parallel) GPUs, UUIDs from
//! [`dcgm_gpu_uuid`] so they match a [`FakeDcgmExporter`](super::FakeDcgmExporter)).
//!
//! With [`PodState::triton_trt_llm`](super::PodState::triton_trt_llm) the model runs on the
//! TensorRT-LLM backend: its `nv_trt_llm_*` families follow Triton's own in each group and
//! `nv_inference_pending_request_count` is 0 (see [`trt_llm_gauges`]).
//!
//! What the fake derives from the state: `nv_inference_pending_request_count` = waiting;
//! success = finished requests other than abort/error; failures by reason: `CANCELED` = abort,
//! `BACKEND` = error; `nv_inference_request_duration_us` = Σ e2e; `nv_inference_queue_duration_us`
//! = Σ TTFT (no separate queue time is modelled); `..._compute_infer_duration_us` = Σ (e2e −
//! TTFT); `nv_gpu_utilization` = [`PodState::gpu_utilization`](super::PodState::gpu_utilization);
//! the opt-in first-response histogram = TTFT in ms.

use std::fmt::Write as _;

use super::buckets::TRITON_FIRST_RESPONSE_MS_BUCKETS;
use super::dcgm_gpu::dcgm_gpu_uuid;
use super::format::write_cpp_double;
use super::histogram::Histogram;
use super::state::{FinishReason, PodState};
use super::writer::push_label_value;

/// The `version` label of every model (Triton's default model version policy serves "1").
const VERSION: &str = "1";
/// Per-request compute input / output time the fake adds to the cumulative counters, µs.
const COMPUTE_INPUT_US: f64 = 120.0;
const COMPUTE_OUTPUT_US: f64 = 85.0;
/// H100 80GB HBM3 frame buffer, bytes (81559 MiB).
const GPU_MEMORY_TOTAL: f64 = 85_520_809_984.0;
/// What a resident LLM backend holds, bytes (72 GiB).
const GPU_MEMORY_USED: f64 = 77_309_411_328.0;
const GPU_POWER_LIMIT: f64 = 700.0;
const GPU_IDLE_POWER: f64 = 70.0;
/// Extra watts at 100 % utilization (an LLM decode rarely reaches the limit).
const GPU_BUSY_POWER: f64 = 560.0;
/// Energy since start-up, joules (a constant: the fake keeps no clock).
const GPU_ENERGY: f64 = 4_213_657.0;
const CPU_UTILIZATION: f64 = 0.0421875;
const CPU_MEMORY_TOTAL: f64 = 2_163_958_546_432.0;
const CPU_MEMORY_USED: f64 = 118_111_600_640.0;

/// A value as prometheus-cpp streams it: doubles at precision 16, bucket counts as integers.
enum Value {
    Double(f64),
    Count(u64),
}

struct CppWriter {
    out: String,
}

impl CppWriter {
    fn family(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// `labels` in `std::map` (byte) order; `le` goes after them, as `WriteHead` does.
    fn sample(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        le: Option<&str>,
        value: Value,
    ) {
        debug_assert!(labels.windows(2).all(|w| w[0].0 < w[1].0));
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() || le.is_some() {
            self.out.push('{');
            let extra = le.map(|le| ("le", le));
            for (i, (k, v)) in labels.iter().chain(extra.iter()).enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                push_label_value(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        match value {
            Value::Double(v) => write_cpp_double(&mut self.out, v),
            Value::Count(n) => {
                let _ = write!(self.out, "{n}");
            }
        }
        self.out.push('\n');
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let count = h.count();
        self.sample(name, "_count", labels, None, Value::Count(count));
        self.sample(name, "_sum", labels, None, Value::Double(h.sum()));
        let mut acc = 0u64;
        for (bound, n) in h.bounds().iter().zip(h.counts()) {
            acc += n;
            let mut le = String::new();
            write_cpp_double(&mut le, *bound);
            self.sample(name, "_bucket", labels, Some(&le), Value::Count(acc));
        }
        self.sample(name, "_bucket", labels, Some("+Inf"), Value::Count(count));
    }
}

/// One model's totals over its engine series.
struct Model<'a> {
    name: &'a str,
    waiting: f64,
    running: f64,
    /// The largest KV usage of the model's engine series.
    kv_cache_usage: f64,
    success: f64,
    canceled: f64,
    backend: f64,
    ttft_sum: f64,
    e2e_sum: f64,
    first_response_ms: Histogram,
}

fn models(state: &PodState) -> Vec<Model<'_>> {
    let mut out: Vec<Model> = Vec::new();
    for s in &state.series {
        let idx = match out.iter().position(|m| m.name == s.model()) {
            Some(idx) => idx,
            None => {
                out.push(Model {
                    name: s.model(),
                    waiting: 0.0,
                    running: 0.0,
                    kv_cache_usage: 0.0,
                    success: 0.0,
                    canceled: 0.0,
                    backend: 0.0,
                    ttft_sum: 0.0,
                    e2e_sum: 0.0,
                    first_response_ms: Histogram::new(&TRITON_FIRST_RESPONSE_MS_BUCKETS),
                });
                out.len() - 1
            }
        };
        let m = &mut out[idx];
        m.waiting += s.load.waiting;
        m.running += s.load.running;
        m.kv_cache_usage = m.kv_cache_usage.max(s.load.kv_cache_usage);
        for reason in FinishReason::ALL {
            match reason {
                FinishReason::Abort => m.canceled += s.success(reason),
                FinishReason::Error => m.backend += s.success(reason),
                _ => m.success += s.success(reason),
            }
        }
        m.ttft_sum += s.ttft.sum();
        m.e2e_sum += s.e2e.sum();
        m.first_response_ms
            .merge(&s.engine_histograms.triton_first_response_ms);
    }
    out
}

/// Whole microseconds, as Triton's counters accumulate them.
fn micros(seconds: f64) -> f64 {
    (seconds * 1e6).round()
}

/// Render Triton's `/metrics` body (port 8002) for `state`.
pub(crate) fn render(state: &PodState) -> String {
    let mut w = CppWriter {
        out: String::with_capacity(4096 + state.series.len() * 2048),
    };
    let models = models(state);
    let gpus: Vec<String> = (0..state.tensor_parallel.max(1) as u32)
        .map(dcgm_gpu_uuid)
        .collect();

    // Counters, in `Metrics()` registration order.
    type CounterOf = fn(&Model) -> f64;
    let counters: [(&str, &str, CounterOf); 4] = [
        (
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            |m| m.success,
        ),
        (
            "nv_inference_request_failure",
            "Number of failed inference requests, all batch sizes",
            |_| 0.0,
        ),
        (
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            |m| m.success,
        ),
        (
            "nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)",
            |m| m.success,
        ),
    ];
    if !models.is_empty() {
        for (name, help, get) in counters {
            w.family(name, help, "counter");
            for m in &models {
                if name == "nv_inference_request_failure" {
                    for (reason, v) in [
                        ("BACKEND", m.backend),
                        ("CANCELED", m.canceled),
                        ("OTHER", 0.0),
                        ("REJECTED", 0.0),
                    ] {
                        let labels = [("model", m.name), ("reason", reason), ("version", VERSION)];
                        w.sample(name, "", &labels, None, Value::Double(v));
                    }
                } else {
                    let labels = [("model", m.name), ("version", VERSION)];
                    w.sample(name, "", &labels, None, Value::Double(get(m)));
                }
            }
        }
        let durations: [(&str, &str, CounterOf); 5] = [
            (
                "nv_inference_request_duration_us",
                "Cumulative inference request duration in microseconds (includes cached requests)",
                |m| micros(m.e2e_sum),
            ),
            (
                "nv_inference_queue_duration_us",
                "Cumulative inference queuing duration in microseconds (includes cached requests)",
                |m| micros(m.ttft_sum),
            ),
            (
                "nv_inference_compute_input_duration_us",
                "Cumulative compute input duration in microseconds (does not include cached requests)",
                |m| m.success * COMPUTE_INPUT_US,
            ),
            (
                "nv_inference_compute_infer_duration_us",
                "Cumulative compute inference duration in microseconds (does not include cached requests)",
                |m| micros((m.e2e_sum - m.ttft_sum).max(0.0)),
            ),
            (
                "nv_inference_compute_output_duration_us",
                "Cumulative inference compute output duration in microseconds (does not include cached requests)",
                |m| m.success * COMPUTE_OUTPUT_US,
            ),
        ];
        for (name, help, get) in durations {
            w.family(name, help, "counter");
            for m in &models {
                let labels = [("model", m.name), ("version", VERSION)];
                w.sample(name, "", &labels, None, Value::Double(get(m)));
            }
        }
    }
    let gpu_counter = |w: &mut CppWriter, name: &str, help: &str, v: f64| {
        w.family(name, help, "counter");
        for uuid in &gpus {
            w.sample(name, "", &[("gpu_uuid", uuid)], None, Value::Double(v));
        }
    };
    gpu_counter(
        &mut w,
        "nv_energy_consumption",
        "GPU energy consumption in joules since the Triton Server started",
        GPU_ENERGY,
    );
    if state.triton_trt_llm {
        trt_llm_counters(&mut w, &models);
    }

    // Gauges.
    if !models.is_empty() {
        let name = "nv_inference_pending_request_count";
        w.family(
            name,
            "Instantaneous number of pending requests awaiting execution per-model.",
            "gauge",
        );
        for m in &models {
            let labels = [("model", m.name), ("version", VERSION)];
            // In-flight batching takes every request off Triton's queue at once.
            let pending = if state.triton_trt_llm { 0.0 } else { m.waiting };
            w.sample(name, "", &labels, None, Value::Double(pending));
        }
    }
    let util = state.gpu_utilization;
    for (name, help, v) in [
        (
            "nv_gpu_utilization",
            "GPU utilization rate [0.0 - 1.0)",
            util,
        ),
        (
            "nv_gpu_memory_total_bytes",
            "GPU total memory, in bytes",
            GPU_MEMORY_TOTAL,
        ),
        (
            "nv_gpu_memory_used_bytes",
            "GPU used memory, in bytes",
            GPU_MEMORY_USED,
        ),
        (
            "nv_gpu_power_usage",
            "GPU power usage in watts",
            GPU_IDLE_POWER + GPU_BUSY_POWER * util,
        ),
        (
            "nv_gpu_power_limit",
            "GPU power management limit in watts",
            GPU_POWER_LIMIT,
        ),
    ] {
        w.family(name, help, "gauge");
        for uuid in &gpus {
            w.sample(name, "", &[("gpu_uuid", uuid)], None, Value::Double(v));
        }
    }
    for (name, help, v) in [
        (
            "nv_cpu_utilization",
            "CPU utilization rate [0.0 - 1.0]",
            CPU_UTILIZATION,
        ),
        (
            "nv_cpu_memory_total_bytes",
            "CPU total memory (RAM), in bytes",
            CPU_MEMORY_TOTAL,
        ),
        (
            "nv_cpu_memory_used_bytes",
            "CPU used memory (RAM), in bytes",
            CPU_MEMORY_USED,
        ),
    ] {
        w.family(name, help, "gauge");
        w.sample(name, "", &[], None, Value::Double(v));
    }
    if state.triton_trt_llm {
        trt_llm_gauges(&mut w, state, &models);
    }

    // Histograms (`--metrics-config histogram_latencies=true`).
    if state.triton_histogram_latencies && !models.is_empty() {
        let name = "nv_inference_first_response_histogram_ms";
        w.family(
            name,
            "Duration from request to first response in milliseconds",
            "histogram",
        );
        for m in &models {
            let labels = [("model", m.name), ("version", VERSION)];
            w.histogram(name, &labels, &m.first_response_ms);
        }
    }
    w.out
}

/// TensorRT-LLM's KV pool of the fake, blocks (`kv_cache_block_type="max"`).
const TRT_LLM_KV_BLOCKS: f64 = 6400.0;
/// `tokens_per` KV block.
const TRT_LLM_TOKENS_PER_BLOCK: f64 = 64.0;
/// `request_type="max"`: the engine's `max_batch_size`.
const TRT_LLM_MAX_REQUESTS: f64 = 256.0;
/// `memory_type="gpu"`: the runtime's own buffers, bytes (1.5 GiB).
const TRT_LLM_RUNTIME_GPU_MEMORY: f64 = 1_610_612_736.0;

/// The TensorRT-LLM backend's counter family (`custom_metrics_reporter.cc`), registered after
/// Triton's own counters.
fn trt_llm_counters(w: &mut CppWriter, models: &[Model]) {
    if models.is_empty() {
        return;
    }
    let name = "nv_trt_llm_disaggregated_serving_metrics";
    w.family(name, "TRT LLM disaggregated serving metrics", "counter");
    for m in models {
        for kind in ["kv_cache_transfer_ms", "request_count"] {
            let labels = [
                ("disaggregated_serving_type", kind),
                ("model", m.name),
                ("version", VERSION),
            ];
            w.sample(name, "", &labels, None, Value::Double(0.0));
        }
    }
}

/// The TensorRT-LLM backend's gauge families, registered after Triton's own gauges; children in
/// the order `CreateGroup` creates them. The queue: `waiting` = the state's waiting requests,
/// `active` = `scheduled` = running; KV blocks in use = usage × [`TRT_LLM_KV_BLOCKS`] and
/// `fraction` = used / max, as the batch manager computes it. The token-length histograms
/// (`nv_llm_{input,output}_token_len`) are left out.
fn trt_llm_gauges(w: &mut CppWriter, state: &PodState, models: &[Model]) {
    type Group<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, f64)>);
    let mut per_model: Vec<(&str, [Group; 5])> = Vec::with_capacity(models.len());
    for m in models {
        let used = (m.kv_cache_usage * TRT_LLM_KV_BLOCKS).round();
        // Microseconds since the epoch of the last iteration (the fake keeps no clock).
        let timestamp = ((state.start_time() + 60.0) * 1e6).round();
        let groups: [Group; 5] = [
            (
                "nv_trt_llm_request_metrics",
                "TRT LLM request metrics",
                "request_type",
                vec![
                    ("active", m.running),
                    ("max", TRT_LLM_MAX_REQUESTS),
                    ("scheduled", m.running),
                    ("context", 0.0),
                    ("waiting", m.waiting),
                ],
            ),
            (
                "nv_trt_llm_runtime_memory_metrics",
                "TRT LLM runtime memory metrics",
                "memory_type",
                vec![
                    ("cpu", 0.0),
                    ("gpu", TRT_LLM_RUNTIME_GPU_MEMORY),
                    ("pinned", 0.0),
                ],
            ),
            (
                "nv_trt_llm_kv_cache_block_metrics",
                "TRT LLM KV cache block metrics",
                "kv_cache_block_type",
                vec![
                    ("max", TRT_LLM_KV_BLOCKS),
                    ("free", TRT_LLM_KV_BLOCKS - used),
                    ("used", used),
                    ("tokens_per", TRT_LLM_TOKENS_PER_BLOCK),
                    ("reused", 0.0),
                    ("fraction", used / TRT_LLM_KV_BLOCKS),
                ],
            ),
            (
                "nv_trt_llm_inflight_batcher_metrics",
                "TRT LLM inflight_batcher-specific metrics",
                "inflight_batcher_specific_metric",
                vec![
                    ("total_context_tokens", 0.0),
                    ("generation_requests", m.running),
                    ("micro_batch_id", 0.0),
                    ("paused_requests", 0.0),
                ],
            ),
            (
                "nv_trt_llm_general_metrics",
                "General TRT LLM metrics",
                "general_type",
                vec![("timestamp", timestamp), ("iteration_counter", m.success)],
            ),
        ];
        per_model.push((m.name, groups));
    }
    let Some((_, first)) = per_model.first() else {
        return;
    };
    let headers: Vec<(&str, &str, &str)> = first.iter().map(|g| (g.0, g.1, g.2)).collect();
    for (i, (name, help, category)) in headers.into_iter().enumerate() {
        w.family(name, help, "gauge");
        for (model, groups) in &per_model {
            for (sub, value) in &groups[i].3 {
                // `std::map` order: the category label sorts before or after `model`.
                let labels: Vec<(&str, &str)> = if category < "model" {
                    vec![(category, sub), ("model", model), ("version", VERSION)]
                } else {
                    vec![("model", model), (category, sub), ("version", VERSION)]
                };
                w.sample(name, "", &labels, None, Value::Double(*value));
            }
        }
    }
}
