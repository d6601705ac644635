//! The serializer: prometheus_client 0.22's classic `generate_latest`, applied to the registry a
//! vLLM V1 API server holds.
//!
//! Rules reproduced (signals.md §0): HELP text escapes `\` and newline; label values also escape
//! `"`; labels are sorted by name with `le` sorted in (`engine`, `le`, `model_name`); histogram
//! children print buckets, `_count`, `_sum`; counters are written `name_total` and their
//! `_created` samples (histograms' too) move into a separate `name_created` gauge family right
//! after the parent; a labelled family with no children prints only HELP and TYPE; family order
//! is registration order: default collectors (gc, platform, process), then the engine's metrics,
//! then the API server's HTTP instrumentation.

use super::format::write_float;
use super::state::{FinishReason, Histogram, ModelLoad, ModelMetrics, PodState, Rng};

/// The `Content-Type` vLLM's `/metrics` route sends (prometheus_client ≤ 0.22 `CONTENT_TYPE_LATEST`).
pub const VLLM_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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

pub(super) struct Writer {
    pub(super) out: String,
}

/// Append a label value escaped as the text format requires (`\\`, `\"`,
/// `\n`); every client library the fixtures imitate escapes the same three.
pub(super) fn push_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl Writer {
    pub(super) fn header(&mut self, name: &str, suffix: &str, help: &str, kind: &str) {
        self.out.push_str("# HELP ");
        self.out.push_str(name);
        self.out.push_str(suffix);
        self.out.push(' ');
        for c in help.chars() {
            match c {
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                c => self.out.push(c),
            }
        }
        self.out.push_str("\n# TYPE ");
        self.out.push_str(name);
        self.out.push_str(suffix);
        self.out.push(' ');
        self.out.push_str(kind);
        self.out.push('\n');
    }

    /// One sample line; `labels` must already be sorted by name, as `sorted(labels.items())` is.
    pub(super) fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], value: f64) {
        debug_assert!(
            labels.windows(2).all(|w| w[0].0 < w[1].0),
            "unsorted labels {labels:?}"
        );
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
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
        write_float(&mut self.out, value);
        self.out.push('\n');
    }

    /// Buckets, `_count`, `_sum` of one histogram child; `before` holds the labels sorting
    /// before `le` and `after` those sorting after it.
    fn histogram(
        &mut self,
        name: &str,
        h: &Histogram,
        les: &[String],
        before: &[(&str, &str)],
        after: &[(&str, &str)],
    ) {
        let mut labels: Vec<(&str, &str)> = Vec::with_capacity(before.len() + after.len() + 1);
        let mut acc = 0.0;
        for (le, count) in les
            .iter()
            .map(String::as_str)
            .chain(["+Inf"])
            .zip(h.counts())
        {
            acc += *count as f64;
            labels.clear();
            labels.extend_from_slice(before);
            labels.push(("le", le));
            labels.extend_from_slice(after);
            self.sample(name, "_bucket", &labels, acc);
        }
        labels.clear();
        labels.extend_from_slice(before);
        labels.extend_from_slice(after);
        self.sample(name, "_count", &labels, acc);
        self.sample(name, "_sum", &labels, h.sum());
    }
}

pub(super) fn bound_labels(bounds: &[f64]) -> Vec<String> {
    bounds.iter().map(|b| super::format_float(*b)).collect()
}

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
        w.header(name, "", help, "gauge");
        for (i, s) in series.iter().enumerate() {
            w.sample(name, "", &base(i), get(&s.load));
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
mod tests {
    use super::*;

    /// The pod of signals.md §2's example. `GOLDEN` was produced by prometheus_client 0.22.1's own
    /// `generate_latest` over a registry holding the same families and values (real `Counter`,
    /// `Gauge`, `Histogram`, `Summary` objects, vLLM's names, help texts and bucket lists).
    fn golden_state() -> PodState {
        let mut s = PodState::with_start_time(1_756_304_599.12);
        let m = "meta-llama/Llama-3.1-8B-Instruct";
        s.set_load(
            m,
            ModelLoad {
                waiting: 2.0,
                running: 3.0,
                kv_cache_usage: 0.0421875,
            },
        );
        s.record_request(m, 0.05, 1.25, 1000, 51);
        s.record_request(m, 2.0, 30.5, 4000, 2);
        let mm = s.model_mut(m);
        mm.prompt_tokens = 1_234_567.0;
        *mm.success_mut(FinishReason::Length) = 12.0;
        mm.prefix_cache_hits = 768.0;
        s
    }

    const GOLDEN: &str = r#"# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 18453.0
python_gc_objects_collected_total{generation="1"} 3217.0
python_gc_objects_collected_total{generation="2"} 912.0
# HELP python_gc_objects_uncollectable_total Uncollectable objects found during GC
# TYPE python_gc_objects_uncollectable_total counter
python_gc_objects_uncollectable_total{generation="0"} 0.0
python_gc_objects_uncollectable_total{generation="1"} 0.0
python_gc_objects_uncollectable_total{generation="2"} 0.0
# HELP python_gc_collections_total Number of times this generation was collected
# TYPE python_gc_collections_total counter
python_gc_collections_total{generation="0"} 1634.0
python_gc_collections_total{generation="1"} 148.0
python_gc_collections_total{generation="2"} 11.0
# HELP python_info Python platform information
# TYPE python_info gauge
python_info{implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"} 1.0
# HELP process_virtual_memory_bytes Virtual memory size in bytes.
# TYPE process_virtual_memory_bytes gauge
process_virtual_memory_bytes 4.521992192e+010
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 3.21765376e+09
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.75630459912e+09
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 187.43
# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 87.0
# HELP process_max_fds Maximum number of open file descriptors.
# TYPE process_max_fds gauge
process_max_fds 1.048576e+06
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0421875
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5000.0
# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.75630464062e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 768.0
# HELP vllm:prefix_cache_hits_created Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_created gauge
vllm:prefix_cache_hits_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.75630464062003e+09
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.75630464062006e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.234567e+06
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7563046406200898e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 53.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7563046406201198e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:request_success_created Count of successfully processed requests.
# TYPE vllm:request_success_created gauge
vllm:request_success_created{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7563046406201499e+09
vllm:request_success_created{engine="0",finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.756304640620154e+09
vllm:request_success_created{engine="0",finished_reason="abort",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.756304640620158e+09
vllm:request_success_created{engine="0",finished_reason="error",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7563046406201618e+09
vllm:request_success_created{engine="0",finished_reason="repetition",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7563046406201658e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.005",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.04",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.06",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.08",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.75",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="5.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="7.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="10.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="20.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="40.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="80.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="160.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="640.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="2560.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.05
# HELP vllm:time_to_first_token_seconds_created Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.75630464062018e+09
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.05",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.075",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.15",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.2",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.3",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.4",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.75",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="5.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="7.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="10.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="20.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 50.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="40.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 51.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="80.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 51.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 51.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 51.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 29.7
# HELP vllm:inter_token_latency_seconds_created Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds_created gauge
vllm:inter_token_latency_seconds_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.75630464062021e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.8",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="2.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="5.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="10.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="15.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="20.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="30.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="40.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="50.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="60.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="120.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="240.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="480.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="960.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1920.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="7680.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 31.75
# HELP vllm:e2e_request_latency_seconds_created Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds_created gauge
vllm:e2e_request_latency_seconds_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.75630464062024e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="29127",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0
# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 2.0
# HELP http_requests_created Total number of requests by method, status and handler.
# TYPE http_requests_created gauge
http_requests_created{handler="/v1/chat/completions",method="POST",status="2xx"} 1.75630464612e+09
# HELP http_request_size_bytes Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. 
# TYPE http_request_size_bytes summary
http_request_size_bytes_count{handler="/v1/chat/completions"} 2.0
http_request_size_bytes_sum{handler="/v1/chat/completions"} 20360.0
# HELP http_request_size_bytes_created Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. 
# TYPE http_request_size_bytes_created gauge
http_request_size_bytes_created{handler="/v1/chat/completions"} 1.75630464612003e+09
# HELP http_response_size_bytes Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. 
# TYPE http_response_size_bytes summary
http_response_size_bytes_count{handler="/v1/chat/completions"} 2.0
http_response_size_bytes_sum{handler="/v1/chat/completions"} 852.0
# HELP http_response_size_bytes_created Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. 
# TYPE http_response_size_bytes_created gauge
http_response_size_bytes_created{handler="/v1/chat/completions"} 1.75630464612006e+09
# HELP http_request_duration_highr_seconds Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. 
# TYPE http_request_duration_highr_seconds histogram
http_request_duration_highr_seconds_bucket{le="0.01"} 0.0
http_request_duration_highr_seconds_bucket{le="0.025"} 0.0
http_request_duration_highr_seconds_bucket{le="0.05"} 0.0
http_request_duration_highr_seconds_bucket{le="0.075"} 0.0
http_request_duration_highr_seconds_bucket{le="0.1"} 0.0
http_request_duration_highr_seconds_bucket{le="0.25"} 0.0
http_request_duration_highr_seconds_bucket{le="0.5"} 0.0
http_request_duration_highr_seconds_bucket{le="0.75"} 0.0
http_request_duration_highr_seconds_bucket{le="1.0"} 0.0
http_request_duration_highr_seconds_bucket{le="1.5"} 1.0
http_request_duration_highr_seconds_bucket{le="2.0"} 1.0
http_request_duration_highr_seconds_bucket{le="2.5"} 1.0
http_request_duration_highr_seconds_bucket{le="3.0"} 1.0
http_request_duration_highr_seconds_bucket{le="3.5"} 1.0
http_request_duration_highr_seconds_bucket{le="4.0"} 1.0
http_request_duration_highr_seconds_bucket{le="4.5"} 1.0
http_request_duration_highr_seconds_bucket{le="5.0"} 1.0
http_request_duration_highr_seconds_bucket{le="7.5"} 1.0
http_request_duration_highr_seconds_bucket{le="10.0"} 1.0
http_request_duration_highr_seconds_bucket{le="30.0"} 1.0
http_request_duration_highr_seconds_bucket{le="60.0"} 2.0
http_request_duration_highr_seconds_bucket{le="+Inf"} 2.0
http_request_duration_highr_seconds_count 2.0
http_request_duration_highr_seconds_sum 31.75
# HELP http_request_duration_highr_seconds_created Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. 
# TYPE http_request_duration_highr_seconds_created gauge
http_request_duration_highr_seconds_created 1.7563046423700898e+09
# HELP http_request_duration_seconds Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. 
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{handler="/v1/chat/completions",le="0.1",method="POST"} 0.0
http_request_duration_seconds_bucket{handler="/v1/chat/completions",le="0.5",method="POST"} 0.0
http_request_duration_seconds_bucket{handler="/v1/chat/completions",le="1.0",method="POST"} 0.0
http_request_duration_seconds_bucket{handler="/v1/chat/completions",le="+Inf",method="POST"} 2.0
http_request_duration_seconds_count{handler="/v1/chat/completions",method="POST"} 2.0
http_request_duration_seconds_sum{handler="/v1/chat/completions",method="POST"} 31.75
# HELP http_request_duration_seconds_created Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. 
# TYPE http_request_duration_seconds_created gauge
http_request_duration_seconds_created{handler="/v1/chat/completions",method="POST"} 1.7563046461201198e+09
"#;

    #[test]
    fn golden_pod_renders_exactly_like_prometheus_client() {
        let got = render_vllm_metrics(&golden_state());
        for (n, (g, w)) in got.lines().zip(GOLDEN.lines()).enumerate() {
            assert_eq!(g, w, "line {}", n + 1);
        }
        assert_eq!(got, GOLDEN);
    }

    #[test]
    fn golden_has_every_ttft_bound_in_python_spelling() {
        let les: Vec<&str> = GOLDEN
            .lines()
            .filter(|l| l.starts_with("vllm:time_to_first_token_seconds_bucket{"))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        let want: Vec<String> = crate::fake::TTFT_BUCKETS
            .iter()
            .map(|b| crate::fake::format_float(*b))
            .chain(["+Inf".to_owned()])
            .collect();
        assert_eq!(les, want);
        assert_eq!(les.len(), 23);
        assert!(les.contains(&"1.0") && les.contains(&"2560.0") && les.contains(&"0.001"));
    }

    #[test]
    fn escapes_labels_and_spells_special_values_like_python() {
        let mut s = PodState::with_start_time(1_756_304_599.12);
        s.set_engine_load(
            "a\"b\\c\nd",
            0,
            ModelLoad {
                waiting: 1e10,
                running: 1e-7,
                kv_cache_usage: f64::NAN,
            },
        );
        s.set_engine_load(
            "x",
            1,
            ModelLoad {
                waiting: -1_234_567.0,
                running: f64::INFINITY,
                kv_cache_usage: 0.5,
            },
        );
        s.set_engine_load("x", 0, ModelLoad::default());
        let body = render_vllm_metrics(&s);
        // Expected lines from prometheus_client 0.22.1 for the same registry.
        for want in [
            r#"vllm:num_requests_waiting{engine="0",model_name="a\"b\\c\nd"} 1e+010"#,
            r#"vllm:num_requests_waiting{engine="1",model_name="x"} -1234567.0"#,
            r#"vllm:num_requests_waiting{engine="0",model_name="x"} 0.0"#,
            r#"vllm:num_requests_running{engine="0",model_name="a\"b\\c\nd"} 1e-07"#,
            r#"vllm:num_requests_running{engine="1",model_name="x"} +Inf"#,
            r#"vllm:num_requests_running{engine="0",model_name="x"} 0.0"#,
            r#"vllm:kv_cache_usage_perc{engine="0",model_name="a\"b\\c\nd"} NaN"#,
            r#"vllm:kv_cache_usage_perc{engine="1",model_name="x"} 0.5"#,
            r#"vllm:kv_cache_usage_perc{engine="0",model_name="x"} 0.0"#,
            r#"vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="29127",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0"#,
            r#"vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="1",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="29127",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0"#,
        ] {
            assert!(body.lines().any(|l| l == want), "missing {want}");
        }
        // Children keep creation order: the engine-1 series was touched before engine 0.
        let waiting: Vec<&str> = body
            .lines()
            .filter(|l| l.starts_with("vllm:num_requests_waiting{"))
            .collect();
        assert_eq!(waiting.len(), 3);
        assert!(waiting[1].contains("engine=\"1\"") && waiting[2].contains("engine=\"0\""));
    }

    #[test]
    fn empty_pod_keeps_headers_of_labelled_families_only() {
        let body = render_vllm_metrics(&PodState::with_start_time(1_700_000_000.5));
        assert!(body.contains(
            "# TYPE vllm:num_requests_waiting gauge\n# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
        ));
        assert!(!body.contains("_created{engine"));
        assert!(
            body.contains("# TYPE http_requests_total counter\n# HELP http_request_size_bytes ")
        );
        // The unlabelled HTTP histogram exists from registration on.
        assert!(body.contains("http_request_duration_highr_seconds_bucket{le=\"+Inf\"} 0.0\n"));
        assert!(
            body.contains("http_request_duration_highr_seconds_created 1.70000004375009e+09\n")
        );
        assert!(body.contains("process_start_time_seconds 1.7000000005e+09\n"));
    }

    #[test]
    fn synthetic_body_is_benchmark_sized_and_deterministic() {
        let body = synthetic_vllm_body(60);
        assert!(
            (400_000..=700_000).contains(&body.len()),
            "{} bytes",
            body.len()
        );
        assert_eq!(body, synthetic_vllm_body(60));
        let state = synthetic_pod_state(60);
        let mut models: Vec<&str> = state.series().iter().map(|s| s.model()).collect();
        models.dedup();
        assert_eq!(models.len(), 60);
        assert!(state.series().iter().any(|s| s.engine() == 1));
        assert!(
            body.contains("e+010\n"),
            "the three-digit exponent quirk is exercised"
        );
        for family in [
            "vllm:num_requests_waiting{",
            "vllm:num_requests_running{",
            "vllm:kv_cache_usage_perc{",
            "vllm:request_success_total{",
            "vllm:time_to_first_token_seconds_bucket{",
            "vllm:inter_token_latency_seconds_bucket{",
            "vllm:e2e_request_latency_seconds_bucket{",
            "vllm:prompt_tokens_created{",
        ] {
            assert!(body.contains(family), "{family}");
        }
        assert_eq!(
            synthetic_vllm_body(0)
                .lines()
                .filter(|l| l.contains("model_name"))
                .count(),
            0
        );
    }
}
