//! vLLM's serializer: prometheus_client 0.22's classic `generate_latest`, applied to the registry a
//! vLLM V1 API server holds.
//!
//! Rules reproduced (signals.md §0): HELP text escapes `\` and newline; label values also escape
//! `"`; labels are sorted by name with `le` sorted in (`engine`, `le`, `model_name`); histogram
//! children print buckets, `_count`, `_sum`; counters are written `name_total` and their
//! `_created` samples (histograms' too) move into a separate `name_created` gauge family right
//! after the parent; a labelled family with no children prints only HELP and TYPE; family order
//! is registration order: default collectors (gc, platform, process), then the engine's metrics,
//! then the API server's HTTP instrumentation.

use super::histogram::Histogram;
use super::rng::Rng;
use super::state::{FinishReason, ModelLoad, ModelMetrics, PodState};
use super::writer::{Writer, bound_labels};

/// The `Content-Type` vLLM's `/metrics` route sends (prometheus_client ≤ 0.22 `CONTENT_TYPE_LATEST`).
pub const VLLM_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// vLLM 0.33.0's (prometheus_client 0.26 `CONTENT_TYPE_LATEST`), same body format.
pub const VLLM_033_CONTENT_TYPE: &str = "text/plain; version=1.0.0; charset=utf-8";

/// The OpenAI route the HTTP instrumentation series are attributed to.
const API_HANDLER: &str = "/v1/chat/completions";

/// `CacheConfig.metrics_info()` as `vllm:cache_config_info` labels (plus `engine`).
const CACHE_CONFIG: &[(&str, &str)] = &[
    ("block_size", "16"),
    ("cache_dtype", "auto"),
    ("calculate_kv_scales", "False"),
    ("cpu_offload_gb", "0"),
    ("enable_prefix_caching", "True"),
    ("gpu_memory_utilization", "0.9"),
    ("is_attention_free", "False"),
    ("num_cpu_blocks", "None"),
    ("num_gpu_blocks", "29127"),
    ("num_gpu_blocks_override", "None"),
    ("prefix_caching_hash_algo", "sha256"),
    ("sliding_window", "None"),
    ("swap_space", "4"),
    ("swap_space_bytes", "4294967296"),
];

/// A metric family as (name, help, how to read its value from `T`).
type Family<T, V> = (&'static str, &'static str, fn(&T) -> V);
/// Picks one histogram out of a series.
type HistogramOf = fn(&ModelMetrics) -> &Histogram;

/// Render vLLM's exposition text for a pod (classic text format, `text/plain; version=0.0.4; charset=utf-8`).
pub fn render_vllm_metrics(state: &PodState) -> String {
    let mut w = Writer {
        out: String::with_capacity(16 * 1024 + state.series.len() * 10 * 1024),
    };
    render_process(&mut w, state);
    render_engine(&mut w, state);
    render_http(&mut w, state);
    w.out
}

fn render_process(w: &mut Writer, state: &PodState) {
    let p = &state.process;
    let generations = ["0", "1", "2"];
    for (name, help, values) in [
        (
            "python_gc_objects_collected",
            "Objects collected during gc",
            &p.gc_objects_collected,
        ),
        (
            "python_gc_objects_uncollectable",
            "Uncollectable objects found during GC",
            &p.gc_objects_uncollectable,
        ),
        (
            "python_gc_collections",
            "Number of times this generation was collected",
            &p.gc_collections,
        ),
    ] {
        // Custom-collector counters: `_total` but no `_created`.
        w.header(name, "_total", help, "counter");
        for (generation, v) in generations.iter().zip(values) {
            w.sample(name, "_total", &[("generation", generation)], *v);
        }
    }

    let version = p.python_version.as_str();
    let mut parts = version.splitn(3, '.');
    let (major, minor, patch) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    w.header("python_info", "", "Python platform information", "gauge");
    w.sample(
        "python_info",
        "",
        &[
            ("implementation", "CPython"),
            ("major", major),
            ("minor", minor),
            ("patchlevel", patch),
            ("version", version),
        ],
        1.0,
    );

    let gauge = |w: &mut Writer, name: &str, help: &str, v: f64| {
        w.header(name, "", help, "gauge");
        w.sample(name, "", &[], v);
    };
    gauge(
        w,
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        p.virtual_memory_bytes,
    );
    gauge(
        w,
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        p.resident_memory_bytes,
    );
    gauge(
        w,
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        state.start_time(),
    );
    w.header(
        "process_cpu_seconds_total",
        "",
        "Total user and system CPU time spent in seconds.",
        "counter",
    );
    w.sample("process_cpu_seconds_total", "", &[], p.cpu_seconds_total);
    gauge(
        w,
        "process_open_fds",
        "Number of open file descriptors.",
        p.open_fds,
    );
    gauge(
        w,
        "process_max_fds",
        "Maximum number of open file descriptors.",
        p.max_fds,
    );
}

fn render_engine(w: &mut Writer, state: &PodState) {
    let series = &state.series;
    let engines: Vec<String> = series.iter().map(|s| s.engine().to_string()).collect();
    let base = |i: usize| -> [(&str, &str); 2] {
        [
            ("engine", engines[i].as_str()),
            ("model_name", series[i].model()),
        ]
    };

    let gauges: [Family<ModelLoad, f64>; 3] = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            |l| l.running,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            |l| l.waiting,
        ),
        (
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            |l| l.kv_cache_usage,
        ),
    ];
    for (name, help, get) in gauges {
        if state.vllm_033 && name == "vllm:kv_cache_usage_perc" {
            render_033_gauges(w, state, &engines);
        }
        w.header(name, "", help, "gauge");
        for (i, s) in series.iter().enumerate() {
            let mut value = get(&s.load);
            if state.vllm_033 && name == "vllm:num_requests_waiting" {
                // 0.33: `num_waiting_reqs + num_skipped_waiting_reqs`.
                value += s.waiting_deferred;
            }
            w.sample(name, "", &base(i), value);
        }
    }

    // Counter and histogram families in registration order; the index feeds `_created`.
    let counters: [Family<ModelMetrics, f64>; 5] = [
        (
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            |m| m.prefix_cache_queries,
        ),
        (
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            |m| m.prefix_cache_hits,
        ),
        (
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            |m| m.num_preemptions,
        ),
        (
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            |m| m.prompt_tokens,
        ),
        (
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            |m| m.generation_tokens,
        ),
    ];
    let mut family = 0;
    for (name, help, get) in counters {
        w.header(name, "_total", help, "counter");
        for (i, s) in series.iter().enumerate() {
            w.sample(name, "_total", &base(i), get(s));
        }
        if !series.is_empty() {
            w.header(name, "_created", help, "gauge");
            for i in 0..series.len() {
                w.sample(name, "_created", &base(i), state.created(i, family));
            }
        }
        family += 1;
    }

    // vLLM creates these children reason-major (`for reason in FinishReason: for engine ...`).
    let name = "vllm:request_success";
    let help = "Count of successfully processed requests.";
    w.header(name, "_total", help, "counter");
    for reason in FinishReason::ALL {
        for (i, s) in series.iter().enumerate() {
            let [engine, model] = base(i);
            w.sample(
                name,
                "_total",
                &[engine, ("finished_reason", reason.as_str()), model],
                s.success(reason),
            );
        }
    }
    if !series.is_empty() {
        w.header(name, "_created", help, "gauge");
        for (r, reason) in FinishReason::ALL.iter().enumerate() {
            for i in 0..series.len() {
                let [engine, model] = base(i);
                let created = state.created(i, family) + r as f64 * 4.0e-6;
                w.sample(
                    name,
                    "_created",
                    &[engine, ("finished_reason", reason.as_str()), model],
                    created,
                );
            }
        }
    }
    family += 1;

    let histograms: [(&str, &str, HistogramOf); 3] = [
        (
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            |m| &m.ttft,
        ),
        (
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            |m| &m.itl,
        ),
        (
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            |m| &m.e2e,
        ),
    ];
    for (name, help, get) in histograms {
        w.header(name, "", help, "histogram");
        let mut les: Option<Vec<String>> = None;
        for (i, s) in series.iter().enumerate() {
            let h = get(s);
            let les = les.get_or_insert_with(|| bound_labels(h.bounds()));
            let [engine, model] = base(i);
            w.histogram(name, h, les, &[engine], &[model]);
        }
        if !series.is_empty() {
            w.header(name, "_created", help, "gauge");
            for i in 0..series.len() {
                w.sample(name, "_created", &base(i), state.created(i, family));
            }
        }
        family += 1;
    }

    // Registered by `log_engine_initialized`, once per engine index, with no model_name.
    let name = "vllm:cache_config_info";
    w.header(
        name,
        "",
        "Information of the LLMEngine CacheConfig",
        "gauge",
    );
    let mut seen: Vec<&str> = Vec::new();
    for engine in &engines {
        if seen.contains(&engine.as_str()) {
            continue;
        }
        seen.push(engine);
        let mut labels: Vec<(&str, &str)> = CACHE_CONFIG.to_vec();
        labels.push(("engine", engine));
        labels.sort_unstable_by_key(|(k, _)| *k);
        w.sample(name, "", &labels, 1.0);
    }
}

/// vLLM 0.33.0's gauges between the waiting gauge and the KV gauge, children in creation order
/// (`create_metric_per_engine` per reason, then per sleep state).
fn render_033_gauges(w: &mut Writer, state: &PodState, engines: &[String]) {
    let name = "vllm:num_requests_waiting_by_reason";
    w.header(
        name,
        "",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        "gauge",
    );
    type ReasonOf = fn(&ModelMetrics) -> f64;
    let reasons: [(&str, ReasonOf); 2] = [
        ("capacity", |m| m.load.waiting),
        ("deferred", |m| m.waiting_deferred),
    ];
    for (reason, get) in reasons {
        for (s, engine) in state.series.iter().zip(engines) {
            let labels = [
                ("engine", engine.as_str()),
                ("model_name", s.model()),
                ("reason", reason),
            ];
            w.sample(name, "", &labels, get(s));
        }
    }
    let name = "vllm:engine_sleep_state";
    w.header(
        name,
        "",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        "gauge",
    );
    for (sleep_state, value) in [
        ("awake", 1.0),
        ("weights_offloaded", 0.0),
        ("discard_all", 0.0),
    ] {
        for (s, engine) in state.series.iter().zip(engines) {
            let labels = [
                ("engine", engine.as_str()),
                ("model_name", s.model()),
                ("sleep_state", sleep_state),
            ];
            w.sample(name, "", &labels, value);
        }
    }
}

fn render_http(w: &mut Writer, state: &PodState) {
    let http = &state.http;
    let used = http.requests > 0.0;
    let handler = ("handler", API_HANDLER);

    let name = "http_requests_total";
    let help = "Total number of requests by method, status and handler.";
    w.header(name, "", help, "counter");
    if used {
        let labels = [handler, ("method", "POST"), ("status", "2xx")];
        w.sample(name, "", &labels, http.requests);
        w.header("http_requests", "_created", help, "gauge");
        w.sample(
            "http_requests",
            "_created",
            &labels,
            state.first_request_created(0),
        );
    }

    let summaries = [
        (
            "http_request_size_bytes",
            "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
            http.request_bytes,
        ),
        (
            "http_response_size_bytes",
            "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
            http.response_bytes,
        ),
    ];
    for (family, (name, help, sum)) in summaries.into_iter().enumerate() {
        w.header(name, "", help, "summary");
        if used {
            w.sample(name, "_count", &[handler], http.requests);
            w.sample(name, "_sum", &[handler], sum);
            w.header(name, "_created", help, "gauge");
            w.sample(
                name,
                "_created",
                &[handler],
                state.first_request_created(family + 1),
            );
        }
    }

    // No labels, so its only child exists from registration on.
    let name = "http_request_duration_highr_seconds";
    let help = "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ";
    w.header(name, "", help, "histogram");
    w.histogram(
        name,
        &http.highr,
        &bound_labels(http.highr.bounds()),
        &[],
        &[],
    );
    w.header(name, "_created", help, "gauge");
    w.sample(name, "_created", &[], state.http_created(3));

    let name = "http_request_duration_seconds";
    let help = "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ";
    w.header(name, "", help, "histogram");
    if used {
        let les = bound_labels(http.lowr.bounds());
        w.histogram(name, &http.lowr, &les, &[handler], &[("method", "POST")]);
        w.header(name, "_created", help, "gauge");
        w.sample(
            name,
            "_created",
            &[handler, ("method", "POST")],
            state.first_request_created(4),
        );
    }
}

/// Model name of the `i`-th synthetic model: a mix of Hugging Face repository ids and the short
/// `--served-model-name` aliases production deployments tend to use.
fn synthetic_model_name(i: usize) -> String {
    const BASES: [&str; 6] = [
        "meta-llama/Llama-3.1-8B-Instruct",
        "qwen3-8b",
        "mistral-7b-instruct",
        "Qwen/Qwen3-8B",
        "gemma-3-4b",
        "granite-3.3-8b",
    ];
    format!("{}-{i:02}", BASES[i % BASES.len()])
}

/// A ~600 KB body with `models` models (60 for the benchmark): gauges, counters, TTFT/e2e/ITL histograms.
///
/// vLLM's layout costs ~9.5 KB per model (97 lines, every bucket bound spelled out), so 60 models
/// come to ~600 KB. Deterministic: the same `models` always gives the same bytes. Every 30th
/// model runs with two data-parallel engines (`engine="0"` and `"1"`), one model's prompt counter is past 1e10 (the
/// `e+010` spelling), and the usual process/Python/HTTP families are present.
pub fn synthetic_vllm_body(models: usize) -> String {
    render_vllm_metrics(&synthetic_pod_state(models))
}

/// The state behind [`synthetic_vllm_body`], for checks that compare parsed values with the truth.
pub fn synthetic_pod_state(models: usize) -> PodState {
    let mut state = PodState::with_start_time(1_756_304_599.12);
    let mut rng = Rng::new(0x5EED_F00D);
    for i in 0..models {
        let model = synthetic_model_name(i);
        let engines = if i % 30 == 29 { 2 } else { 1 };
        for engine in 0..engines {
            let running = rng.below(33) as f64;
            let waiting = if running >= 32.0 {
                rng.below(40) as f64
            } else {
                0.0
            };
            state.set_engine_load(
                &model,
                engine,
                ModelLoad {
                    waiting,
                    running,
                    kv_cache_usage: running / 40.0 + rng.unit() * 0.05,
                },
            );
            let requests = 20 + rng.below(60);
            for _ in 0..requests {
                let reason = match rng.below(20) {
                    0 => FinishReason::Length,
                    1 => FinishReason::Abort,
                    _ => FinishReason::Stop,
                };
                let prompt = 64 + rng.below(3000);
                let generation = 1 + rng.below(700);
                let ttft = 0.02 + prompt as f64 * 0.00004 + rng.unit() * rng.unit() * 3.0;
                let itl = 0.008 + rng.unit() * 0.04;
                let e2e = ttft + generation as f64 * itl;
                state.record_finished(&model, engine, reason, ttft, e2e, prompt, generation);
            }
            let series = state.series_mut(&model, engine);
            series.prefix_cache_hits = (series.prefix_cache_queries * rng.unit() * 0.6).floor();
            series.num_preemptions = rng.below(4) as f64;
            // Pods that have been up for weeks: counters in the millions spell with exponents.
            series.prompt_tokens += (rng.below(40_000) * 1000) as f64;
            series.generation_tokens += (rng.below(9_000) * 1000) as f64;
            if i == 7 {
                series.prompt_tokens += 1.2e10;
            }
        }
    }
    state
}

#[cfg(test)]
mod tests;
