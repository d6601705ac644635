//! What one fake pod exposes, kept the way prometheus_client keeps it: non-cumulative bucket
//! counts, float counters, and children in creation order (which is exposition order).

use std::time::{SystemTime, UNIX_EPOCH};

use super::buckets::{
    E2E_BUCKETS, HTTP_HIGHR_BUCKETS, HTTP_LOWR_BUCKETS, ITL_BUCKETS, SGLANG_E2E_BUCKETS,
    SGLANG_ITL_BUCKETS, SGLANG_TTFT_BUCKETS, TGI_DURATION_BUCKETS, TGI_GENERATED_TOKENS_BUCKETS,
    TGI_INPUT_LENGTH_BUCKETS, TRITON_FIRST_RESPONSE_MS_BUCKETS, TTFT_BUCKETS,
};
use super::histogram::Histogram;
use super::options::{PriorityLoad, SglangOptions};

/// What the fake TGI spends validating a request, observed into `tgi_request_validation_duration`.
pub const TGI_VALIDATION_SECONDS: f64 = 0.0004;

/// Seconds between process start and the engine's metrics being created: a real pod spends this
/// loading weights and profiling memory, so `_created` is well after `process_start_time_seconds`.
pub(crate) const ENGINE_METRICS_AFTER_START: f64 = 41.5;
/// The API server (and its HTTP instrumentation) comes up after the engine.
pub(crate) const HTTP_METRICS_AFTER_START: f64 = 43.25;
/// When the first API request arrived, which creates the labelled HTTP series.
pub(crate) const FIRST_REQUEST_AFTER_START: f64 = 47.0;
/// Gap between consecutively created metric children (real ones are tens of µs apart).
pub(crate) const CREATED_STEP: f64 = 3.0e-5;

/// Load of one served model on one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelLoad {
    /// `vllm:num_requests_waiting`: queued, not yet scheduled.
    pub waiting: f64,
    /// `vllm:num_requests_running`: in the running batch (at most `max_num_seqs`).
    pub running: f64,
    /// `vllm:kv_cache_usage_perc`: a 0–1 fraction despite the name.
    pub kv_cache_usage: f64,
}

impl Default for ModelLoad {
    fn default() -> Self {
        Self {
            waiting: 0.0,
            running: 0.0,
            kv_cache_usage: 0.0,
        }
    }
}

/// vLLM's `FinishReason`, in its enum order, which is the exposition order of
/// `vllm:request_success_total` (every reason is pre-created at 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// EOS or a stop string.
    Stop,
    /// `max_tokens` or the context length reached.
    Length,
    /// Client went away or the request was cancelled.
    Abort,
    /// Engine-side failure.
    Error,
    /// Repetition detection stopped it (newer vLLM).
    Repetition,
}

impl FinishReason {
    /// Every reason in exposition order.
    pub const ALL: [FinishReason; 5] = [
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::Abort,
        FinishReason::Error,
        FinishReason::Repetition,
    ];

    /// The `finished_reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
            FinishReason::Repetition => "repetition",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The same finished requests as vLLM's histograms, bucketed the way the other engines bucket
/// them (see [`render_engine_metrics`](super::render_engine_metrics)).
///
/// Every [`PodState::record_finished`] observes into these as well as into vLLM's histograms, so
/// one test drive serves every engine. [`Histogram::set`] on a vLLM histogram does not touch them.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineHistograms {
    /// `sglang:time_to_first_token_seconds` ([`SGLANG_TTFT_BUCKETS`]).
    pub sglang_ttft: Histogram,
    /// `sglang:inter_token_latency_seconds` ([`SGLANG_ITL_BUCKETS`]), one observation per output
    /// token after the first, like vLLM's.
    pub sglang_itl: Histogram,
    /// `sglang:e2e_request_latency_seconds` ([`SGLANG_E2E_BUCKETS`]).
    pub sglang_e2e: Histogram,
    /// `nv_inference_first_response_histogram_ms`: TTFT in milliseconds
    /// ([`TRITON_FIRST_RESPONSE_MS_BUCKETS`]).
    pub triton_first_response_ms: Histogram,
    /// `tgi_request_duration`: the e2e latency.
    pub tgi_request_duration: Histogram,
    /// `tgi_request_validation_duration`: [`TGI_VALIDATION_SECONDS`] per request.
    pub tgi_validation_duration: Histogram,
    /// `tgi_request_queue_duration`. TGI exports no TTFT; the fake has no separate queue time
    /// and observes the request's TTFT here (i.e. it models prefill as instantaneous).
    pub tgi_queue_duration: Histogram,
    /// `tgi_request_inference_duration`: e2e minus TTFT.
    pub tgi_inference_duration: Histogram,
    /// `tgi_request_mean_time_per_token_duration`: (e2e - TTFT) / generated tokens.
    pub tgi_mean_time_per_token: Histogram,
    /// `tgi_request_input_length`: prompt tokens ([`TGI_INPUT_LENGTH_BUCKETS`]).
    pub tgi_input_length: Histogram,
    /// `tgi_request_generated_tokens`: generated tokens ([`TGI_GENERATED_TOKENS_BUCKETS`]).
    pub tgi_generated_tokens: Histogram,
}

impl Default for EngineHistograms {
    fn default() -> Self {
        Self {
            sglang_ttft: Histogram::new(&SGLANG_TTFT_BUCKETS),
            sglang_itl: Histogram::new(&SGLANG_ITL_BUCKETS),
            sglang_e2e: Histogram::new(&SGLANG_E2E_BUCKETS),
            triton_first_response_ms: Histogram::new(&TRITON_FIRST_RESPONSE_MS_BUCKETS),
            tgi_request_duration: Histogram::new(&TGI_DURATION_BUCKETS),
            tgi_validation_duration: Histogram::new(&TGI_DURATION_BUCKETS),
            tgi_queue_duration: Histogram::new(&TGI_DURATION_BUCKETS),
            tgi_inference_duration: Histogram::new(&TGI_DURATION_BUCKETS),
            tgi_mean_time_per_token: Histogram::new(&TGI_DURATION_BUCKETS),
            tgi_input_length: Histogram::new(&TGI_INPUT_LENGTH_BUCKETS),
            tgi_generated_tokens: Histogram::new(&TGI_GENERATED_TOKENS_BUCKETS),
        }
    }
}

impl EngineHistograms {
    fn record(&mut self, ttft: f64, e2e: f64, itl: Option<f64>, prompt: u64, generation: u64) {
        self.sglang_ttft.observe(ttft);
        self.sglang_e2e.observe(e2e);
        if let Some(itl) = itl {
            self.sglang_itl.observe_n(itl, generation - 1);
        }
        self.triton_first_response_ms.observe(ttft * 1000.0);
        let inference = (e2e - ttft).max(0.0);
        self.tgi_request_duration.observe(e2e);
        self.tgi_validation_duration.observe(TGI_VALIDATION_SECONDS);
        self.tgi_queue_duration.observe(ttft);
        self.tgi_inference_duration.observe(inference);
        if generation > 0 {
            self.tgi_mean_time_per_token
                .observe(inference / generation as f64);
        }
        self.tgi_input_length.observe(prompt as f64);
        self.tgi_generated_tokens.observe(generation as f64);
    }

    /// Add `other`'s observations (same bounds) into `self`, for engines that do not split a
    /// model's series the way vLLM's `engine` label does.
    pub(crate) fn merge(&mut self, other: &EngineHistograms) {
        self.sglang_ttft.merge(&other.sglang_ttft);
        self.sglang_itl.merge(&other.sglang_itl);
        self.sglang_e2e.merge(&other.sglang_e2e);
        self.triton_first_response_ms
            .merge(&other.triton_first_response_ms);
        self.tgi_request_duration.merge(&other.tgi_request_duration);
        self.tgi_validation_duration
            .merge(&other.tgi_validation_duration);
        self.tgi_queue_duration.merge(&other.tgi_queue_duration);
        self.tgi_inference_duration
            .merge(&other.tgi_inference_duration);
        self.tgi_mean_time_per_token
            .merge(&other.tgi_mean_time_per_token);
        self.tgi_input_length.merge(&other.tgi_input_length);
        self.tgi_generated_tokens.merge(&other.tgi_generated_tokens);
    }
}

/// Every vLLM series for one `(model_name, engine)` pair.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMetrics {
    model: String,
    engine: u32,
    /// The three gauges.
    pub load: ModelLoad,
    /// `vllm:prefix_cache_queries_total` (tokens looked up).
    pub prefix_cache_queries: f64,
    /// `vllm:prefix_cache_hits_total` (tokens found).
    pub prefix_cache_hits: f64,
    /// `vllm:num_preemptions_total`.
    pub num_preemptions: f64,
    /// `vllm:prompt_tokens_total`.
    pub prompt_tokens: f64,
    /// `vllm:generation_tokens_total`.
    pub generation_tokens: f64,
    /// `vllm:request_success_total`, indexed in [`FinishReason::ALL`] order.
    pub request_success: [f64; 5],
    /// vLLM 0.33 ([`PodState::vllm_033`]): requests deferred by a LoRA budget or a KV transfer,
    /// in `vllm:num_requests_waiting` but under `reason="deferred"`, while
    /// [`ModelLoad::waiting`] is `reason="capacity"`.
    pub waiting_deferred: f64,
    /// SGLang's priority scheduling: the per-priority breakdown of the queues, in ascending
    /// priority order ([`SglangOptions::priority_scheduling`]).
    pub priority_breakdown: Vec<PriorityLoad>,
    /// `vllm:time_to_first_token_seconds`.
    pub ttft: Histogram,
    /// `vllm:inter_token_latency_seconds`.
    pub itl: Histogram,
    /// `vllm:e2e_request_latency_seconds`.
    pub e2e: Histogram,
    /// The same requests in SGLang's, Triton's and TGI's buckets and units.
    pub engine_histograms: EngineHistograms,
}

impl ModelMetrics {
    fn new(model: &str, engine: u32) -> Self {
        Self {
            model: model.to_owned(),
            engine,
            load: ModelLoad::default(),
            prefix_cache_queries: 0.0,
            prefix_cache_hits: 0.0,
            num_preemptions: 0.0,
            prompt_tokens: 0.0,
            generation_tokens: 0.0,
            request_success: [0.0; 5],
            waiting_deferred: 0.0,
            priority_breakdown: Vec::new(),
            ttft: Histogram::new(&TTFT_BUCKETS),
            itl: Histogram::new(&ITL_BUCKETS),
            e2e: Histogram::new(&E2E_BUCKETS),
            engine_histograms: EngineHistograms::default(),
        }
    }

    /// The `model_name` label.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The data-parallel engine index (`engine` label).
    pub fn engine(&self) -> u32 {
        self.engine
    }

    /// `vllm:request_success_total{finished_reason=reason}`.
    pub fn success(&self, reason: FinishReason) -> f64 {
        self.request_success[reason.index()]
    }

    /// Mutable [`success`](Self::success).
    pub fn success_mut(&mut self, reason: FinishReason) -> &mut f64 {
        &mut self.request_success[reason.index()]
    }

    fn record(&mut self, reason: FinishReason, ttft: f64, e2e: f64, prompt: u64, generation: u64) {
        self.request_success[reason.index()] += 1.0;
        self.ttft.observe(ttft);
        self.e2e.observe(e2e);
        // vLLM observes one inter-token gap per output token after the first.
        let itl = (generation > 1).then(|| ((e2e - ttft) / (generation - 1) as f64).max(0.0));
        if let Some(itl) = itl {
            self.itl.observe_n(itl, generation - 1);
        }
        self.engine_histograms
            .record(ttft, e2e, itl, prompt, generation);
        self.prompt_tokens += prompt as f64;
        self.generation_tokens += generation as f64;
        // Every prompt token is looked up in the prefix cache; hits are left to the caller.
        self.prefix_cache_queries += prompt as f64;
    }
}

/// Process-level noise from prometheus_client's default collectors. Values are arbitrary but
/// shaped like a vLLM container's (tens of GB of virtual memory from CUDA mappings, etc.).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    /// `python_gc_objects_collected_total`, generations 0–2.
    pub gc_objects_collected: [f64; 3],
    /// `python_gc_objects_uncollectable_total`, generations 0–2.
    pub gc_objects_uncollectable: [f64; 3],
    /// `python_gc_collections_total`, generations 0–2.
    pub gc_collections: [f64; 3],
    /// `python_info` `version` label, e.g. `3.12.11`.
    pub python_version: String,
    /// `process_virtual_memory_bytes`.
    pub virtual_memory_bytes: f64,
    /// `process_resident_memory_bytes`.
    pub resident_memory_bytes: f64,
    /// `process_cpu_seconds_total`.
    pub cpu_seconds_total: f64,
    /// `process_open_fds`.
    pub open_fds: f64,
    /// `process_max_fds`.
    pub max_fds: f64,
}

impl Default for ProcessInfo {
    fn default() -> Self {
        Self {
            gc_objects_collected: [18_453.0, 3_217.0, 912.0],
            gc_objects_uncollectable: [0.0; 3],
            gc_collections: [1_634.0, 148.0, 11.0],
            python_version: "3.12.11".to_owned(),
            virtual_memory_bytes: 4.521_992_192e10,
            resident_memory_bytes: 3.217_653_76e9,
            cpu_seconds_total: 187.43,
            open_fds: 87.0,
            max_fds: 1_048_576.0,
        }
    }
}

/// prometheus-fastapi-instrumentator's series for the OpenAI endpoint (vLLM excludes `/metrics`
/// from instrumentation, so scrapes never show up here).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpStats {
    pub(crate) requests: f64,
    pub(crate) request_bytes: f64,
    pub(crate) response_bytes: f64,
    pub(crate) highr: Histogram,
    pub(crate) lowr: Histogram,
}

impl Default for HttpStats {
    fn default() -> Self {
        Self {
            requests: 0.0,
            request_bytes: 0.0,
            response_bytes: 0.0,
            highr: Histogram::new(&HTTP_HIGHR_BUCKETS),
            lowr: Histogram::new(&HTTP_LOWR_BUCKETS),
        }
    }
}

/// Everything one fake pod exposes: per `(model_name, engine)` gauges, counters and TTFT / ITL /
/// e2e histograms, plus process, Python and HTTP noise.
///
/// Series are rendered in the order they were first touched, as prometheus_client does. Real
/// vLLM serves one model name per pod; several models are allowed for benchmarks.
#[derive(Debug, Clone)]
pub struct PodState {
    pub(crate) series: Vec<ModelMetrics>,
    /// Default-collector noise (`python_*`, `process_*`).
    pub process: ProcessInfo,
    pub(crate) http: HttpStats,
    start_time: f64,
    /// Tensor-parallel degree per data-parallel engine (default 1). SGLang writes its scheduler
    /// gauges from attention-TP rank 0 only, or once per `tp_rank` with the same value under
    /// [`SglangOptions::metrics_for_all_schedulers`]; Triton reports one `nv_gpu_*` series per
    /// GPU. vLLM is unaffected (one series per data-parallel engine whatever the TP).
    pub tensor_parallel: usize,
    /// GPU busy fraction (0–1) for Triton's `nv_gpu_utilization` (every GPU of the pod reads
    /// the same). The Python servers and TGI export no GPU metrics.
    pub gpu_utilization: f64,
    /// Triton's `--metrics-config histogram_latencies=true`: expose
    /// `nv_inference_first_response_histogram_ms`. Off by default, as in Triton.
    pub triton_histogram_latencies: bool,
    /// Triton serves the model through the TensorRT-LLM backend (in-flight batching): the queue
    /// moves to `nv_trt_llm_request_metrics` and `nv_inference_pending_request_count` stays 0.
    pub triton_trt_llm: bool,
    /// The vLLM registry is 0.33.0's: `vllm:num_requests_waiting_by_reason` and
    /// `vllm:engine_sleep_state` join the gauges, and the answer's `Content-Type` is
    /// prometheus_client 0.26's `text/plain; version=1.0.0; charset=utf-8`.
    pub vllm_033: bool,
    /// The SGLang server's flags.
    pub sglang: SglangOptions,
}

impl Default for PodState {
    /// A pod whose process started "now" (rounded to clock ticks like `/proc` reports it).
    fn default() -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        Self::with_start_time((now * 100.0).floor() / 100.0)
    }
}

impl PodState {
    /// A pod whose process started at `start_time` (Unix seconds). Every `_created` value derives
    /// from it, so the same start time and the same updates render the same bytes.
    pub fn with_start_time(start_time: f64) -> Self {
        Self {
            series: Vec::new(),
            process: ProcessInfo::default(),
            http: HttpStats::default(),
            start_time,
            tensor_parallel: 1,
            gpu_utilization: 0.0,
            triton_histogram_latencies: false,
            triton_trt_llm: false,
            vllm_033: false,
            sglang: SglangOptions::default(),
        }
    }

    /// `process_start_time_seconds`.
    pub fn start_time(&self) -> f64 {
        self.start_time
    }

    /// Move the process start (and with it every `_created` value).
    pub fn set_start_time(&mut self, start_time: f64) {
        self.start_time = start_time;
    }

    /// Gauges of `model` on engine 0.
    pub fn set_load(&mut self, model: &str, load: ModelLoad) {
        self.series_mut(model, 0).load = load;
    }

    /// Gauges of `model` on data-parallel engine `engine`.
    pub fn set_engine_load(&mut self, model: &str, engine: u32, load: ModelLoad) {
        self.series_mut(model, engine).load = load;
    }

    /// One finished request: updates TTFT and e2e histograms, request_success{finished_reason="stop"}, token counters.
    ///
    /// Also observes `(e2e - ttft) / (generation_tokens - 1)` once per output token after the
    /// first into the ITL histogram, adds the prompt tokens to `prefix_cache_queries`, and counts
    /// the request in the HTTP instrumentation series.
    pub fn record_request(
        &mut self,
        model: &str,
        ttft_seconds: f64,
        e2e_seconds: f64,
        prompt_tokens: u64,
        generation_tokens: u64,
    ) {
        self.record_finished(
            model,
            0,
            FinishReason::Stop,
            ttft_seconds,
            e2e_seconds,
            prompt_tokens,
            generation_tokens,
        );
    }

    /// [`record_request`](Self::record_request) with an explicit engine and finish reason.
    #[allow(clippy::too_many_arguments)]
    pub fn record_finished(
        &mut self,
        model: &str,
        engine: u32,
        reason: FinishReason,
        ttft_seconds: f64,
        e2e_seconds: f64,
        prompt_tokens: u64,
        generation_tokens: u64,
    ) {
        self.series_mut(model, engine).record(
            reason,
            ttft_seconds,
            e2e_seconds,
            prompt_tokens,
            generation_tokens,
        );
        let http = &mut self.http;
        http.requests += 1.0;
        // A chat request body is JSON around the prompt (~4 bytes a token); non-streamed answers likewise.
        http.request_bytes += (180 + 4 * prompt_tokens) as f64;
        http.response_bytes += (320 + 4 * generation_tokens) as f64;
        http.highr.observe(e2e_seconds);
        http.lowr.observe(e2e_seconds);
    }

    /// The engine-0 series of `model`, created (with every counter at 0) if new.
    pub fn model_mut(&mut self, model: &str) -> &mut ModelMetrics {
        self.series_mut(model, 0)
    }

    /// The series of `(model, engine)`, created if new.
    pub fn series_mut(&mut self, model: &str, engine: u32) -> &mut ModelMetrics {
        let idx = match self
            .series
            .iter()
            .position(|s| s.engine == engine && s.model == model)
        {
            Some(idx) => idx,
            None => {
                self.series.push(ModelMetrics::new(model, engine));
                self.series.len() - 1
            }
        };
        &mut self.series[idx]
    }

    /// The engine-0 series of `model`, if any.
    pub fn model(&self, model: &str) -> Option<&ModelMetrics> {
        self.series
            .iter()
            .find(|s| s.engine == 0 && s.model == model)
    }

    /// All series in exposition order.
    pub fn series(&self) -> &[ModelMetrics] {
        &self.series
    }

    /// Drop every series of `model` (a restarted pod serving something else).
    pub fn remove_model(&mut self, model: &str) {
        self.series.retain(|s| s.model != model);
    }

    /// `_created` of the `family`-th counter/histogram family (registration order) for the
    /// `series`-th series: children are created one after another at engine start.
    pub(crate) fn created(&self, series: usize, family: usize) -> f64 {
        self.start_time
            + ENGINE_METRICS_AFTER_START
            + series as f64 * 0.01
            + family as f64 * CREATED_STEP
    }

    pub(crate) fn http_created(&self, family: usize) -> f64 {
        self.start_time + HTTP_METRICS_AFTER_START + family as f64 * CREATED_STEP
    }

    pub(crate) fn first_request_created(&self, family: usize) -> f64 {
        self.start_time + FIRST_REQUEST_AFTER_START + family as f64 * CREATED_STEP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_keep_first_touch_order_and_record_updates_everything() {
        let mut s = PodState::with_start_time(1.0e9);
        s.set_load(
            "b",
            ModelLoad {
                waiting: 1.0,
                running: 2.0,
                kv_cache_usage: 0.5,
            },
        );
        s.record_request("a", 0.2, 3.0, 100, 11);
        let names: Vec<_> = s.series().iter().map(|m| m.model().to_owned()).collect();
        assert_eq!(names, ["b", "a"]);
        let a = s.model("a").expect("series a exists");
        assert_eq!(a.success(FinishReason::Stop), 1.0);
        assert_eq!(a.prompt_tokens, 100.0);
        assert_eq!(a.generation_tokens, 11.0);
        assert_eq!(a.ttft.count(), 1);
        assert_eq!(a.e2e.count(), 1);
        assert_eq!(a.itl.count(), 10);
        assert_eq!(s.http.requests, 1.0);
    }
}
