//! SGLang's exposition: prometheus_client in multiprocess mode (`PROMETHEUS_MULTIPROC_DIR` is
//! always set), classic text.
//!
//! Rules reproduced (signals.md §0, §3): values and `le` through `floatToGoString` (`7.0`,
//! `8.128902e+06`, `le="1.0"`); labels sorted with `le` sorted in; no `_created`, no `python_*` /
//! `process_*`; histogram samples in `MultiProcessCollector` order: every child's `_sum` first,
//! then per child its buckets and `_count`; a family appears only once it has a child (so the
//! tokenizer-side families are absent until the first request); scheduler gauges
//! (`multiprocess_mode="mostrecent"`) carry `engine_type`, `model_name`, `pp_rank`, `tp_rank`
//! (plus `dp_rank` when the state has more than one data-parallel engine) and are repeated once
//! per TP rank with the same value; the mode-less `sglang:num_retracted_reqs` also carries the
//! scheduler's `pid`. Family order is arbitrary in multiprocess mode; the fake uses a fixed one
//! (tokenizer histograms, scheduler gauges, tokenizer counters).

use super::histogram::Histogram;
use super::state::{EngineHistograms, FinishReason, ModelMetrics, PodState};
use super::writer::{Writer, bound_labels};

/// `engine_type` of a non-disaggregated server.
const ENGINE_TYPE: &str = "unified";
/// `sglang:max_total_num_tokens` of the fake (KV pool of an 8B model on one 80 GB GPU).
pub const SGLANG_MAX_TOTAL_NUM_TOKENS: f64 = 441_184.0;
/// `sglang:gen_throughput` per running request, tokens/s.
const TOKENS_PER_SECOND_PER_REQUEST: f64 = 40.0;
/// pid of the TP-rank-0 scheduler process; rank r of DP group d is `BASE + d * tp + r`.
const SCHEDULER_PID_BASE: u32 = 2817;

/// One model's tokenizer-side totals (SGLang's tokenizer manager has no DP split).
struct Tokenizer<'a> {
    model: &'a str,
    prompt: f64,
    generation: f64,
    cached: f64,
    requests: f64,
    aborted: f64,
    hist: EngineHistograms,
}

impl Tokenizer<'_> {
    fn active(&self) -> bool {
        self.requests + self.aborted > 0.0 || self.hist.sglang_ttft.count() > 0
    }
}

/// Render SGLang's `/metrics` body for `state`.
pub(crate) fn render(state: &PodState) -> String {
    let mut w = Writer {
        out: String::with_capacity(4096 + state.series.len() * 6 * 1024),
    };
    let tokenizers = tokenizers(state);
    let active: Vec<&Tokenizer> = tokenizers.iter().filter(|t| t.active()).collect();

    type HistogramOf = fn(&EngineHistograms) -> &Histogram;
    let histograms: [(&str, &str, HistogramOf); 3] = [
        (
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            |h| &h.sglang_ttft,
        ),
        (
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            |h| &h.sglang_itl,
        ),
        (
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            |h| &h.sglang_e2e,
        ),
    ];
    for (name, help, get) in histograms {
        if active.is_empty() {
            continue;
        }
        w.header(name, "", help, "histogram");
        // MultiProcessCollector inserts every `_sum` while reading the files, then the
        // accumulated buckets and `_count` child by child.
        for t in &active {
            let labels = [("engine_type", ENGINE_TYPE), ("model_name", t.model)];
            w.sample(name, "_sum", &labels, get(&t.hist).sum());
        }
        for t in &active {
            let h = get(&t.hist);
            let mut acc = 0.0;
            for (le, count) in bound_labels(h.bounds())
                .iter()
                .map(String::as_str)
                .chain(["+Inf"])
                .zip(h.counts())
            {
                acc += *count as f64;
                let labels = [
                    ("engine_type", ENGINE_TYPE),
                    ("le", le),
                    ("model_name", t.model),
                ];
                w.sample(name, "_bucket", &labels, acc);
            }
            let labels = [("engine_type", ENGINE_TYPE), ("model_name", t.model)];
            w.sample(name, "_count", &labels, acc);
        }
    }

    render_scheduler(&mut w, state);

    // (name, help, value, labelled by `cache_source`, child only once something was counted).
    type CounterOf = fn(&Tokenizer) -> f64;
    let counters: [(&str, &str, CounterOf, bool, bool); 5] = [
        (
            "sglang:prompt_tokens",
            "Number of prefill tokens processed.",
            |t| t.prompt,
            false,
            false,
        ),
        (
            "sglang:generation_tokens",
            "Number of generation tokens processed.",
            |t| t.generation,
            false,
            false,
        ),
        (
            "sglang:cached_tokens",
            "Number of cached prompt tokens by source (device/host/storage).",
            |t| t.cached,
            true,
            true,
        ),
        (
            "sglang:num_requests",
            "Number of requests processed.",
            |t| t.requests,
            false,
            false,
        ),
        (
            "sglang:num_aborted_requests",
            "Number of requests aborted.",
            |t| t.aborted,
            false,
            true,
        ),
    ];
    for (name, help, get, by_source, only_when_counted) in counters {
        // A child exists once `.labels(...).inc()` ran; cached tokens and aborts are only
        // incremented when there is something to count.
        let children: Vec<&Tokenizer> = active
            .iter()
            .copied()
            .filter(|t| !only_when_counted || get(t) > 0.0)
            .collect();
        if children.is_empty() {
            continue;
        }
        w.header(name, "_total", help, "counter");
        for t in children {
            if by_source {
                let labels = [
                    ("cache_source", "device"),
                    ("engine_type", ENGINE_TYPE),
                    ("model_name", t.model),
                ];
                w.sample(name, "_total", &labels, get(t));
            } else {
                let labels = [("engine_type", ENGINE_TYPE), ("model_name", t.model)];
                w.sample(name, "_total", &labels, get(t));
            }
        }
    }
    w.out
}

fn tokenizers(state: &PodState) -> Vec<Tokenizer<'_>> {
    let mut out: Vec<Tokenizer> = Vec::new();
    for s in &state.series {
        let idx = match out.iter().position(|t| t.model == s.model()) {
            Some(idx) => idx,
            None => {
                out.push(Tokenizer {
                    model: s.model(),
                    prompt: 0.0,
                    generation: 0.0,
                    cached: 0.0,
                    requests: 0.0,
                    aborted: 0.0,
                    hist: EngineHistograms::default(),
                });
                out.len() - 1
            }
        };
        let t = &mut out[idx];
        t.prompt += s.prompt_tokens;
        t.generation += s.generation_tokens;
        t.cached += s.prefix_cache_hits;
        for reason in FinishReason::ALL {
            if reason == FinishReason::Abort {
                t.aborted += s.success(reason);
            } else {
                t.requests += s.success(reason);
            }
        }
        t.hist.merge(&s.engine_histograms);
    }
    out
}

fn render_scheduler(w: &mut Writer, state: &PodState) {
    let series = &state.series;
    if series.is_empty() {
        return;
    }
    let tp = state.tensor_parallel.max(1);
    let data_parallel = series.iter().any(|s| s.engine() != 0);
    let ranks: Vec<String> = (0..tp).map(|r| r.to_string()).collect();
    let dp_ranks: Vec<String> = series.iter().map(|s| s.engine().to_string()).collect();

    type GaugeOf = fn(&ModelMetrics) -> f64;
    let gauges: [(&str, &str, GaugeOf); 8] = [
        (
            "sglang:num_running_reqs",
            "The number of running requests.",
            |m| m.load.running,
        ),
        (
            "sglang:num_queue_reqs",
            "The number of requests in the waiting queue.",
            |m| m.load.waiting,
        ),
        (
            "sglang:num_grammar_queue_reqs",
            "The number of requests in the grammar waiting queue.",
            |_| 0.0,
        ),
        (
            "sglang:gen_throughput",
            "The generation throughput (token/s).",
            |m| m.load.running * TOKENS_PER_SECOND_PER_REQUEST,
        ),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", |m| {
            if m.prefix_cache_queries > 0.0 {
                m.prefix_cache_hits / m.prefix_cache_queries
            } else {
                0.0
            }
        }),
        ("sglang:token_usage", "The token usage.", |m| {
            m.load.kv_cache_usage
        }),
        (
            "sglang:num_used_tokens",
            "The number of used tokens.",
            |m| (m.load.kv_cache_usage * SGLANG_MAX_TOTAL_NUM_TOKENS).round(),
        ),
        (
            "sglang:max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            |_| SGLANG_MAX_TOTAL_NUM_TOKENS,
        ),
    ];
    for (name, help, get) in gauges {
        w.header(name, "", help, "gauge");
        for (i, s) in series.iter().enumerate() {
            for rank in &ranks {
                let mut labels: Vec<(&str, &str)> = Vec::with_capacity(5);
                if data_parallel {
                    labels.push(("dp_rank", &dp_ranks[i]));
                }
                labels.extend([
                    ("engine_type", ENGINE_TYPE),
                    ("model_name", s.model()),
                    ("pp_rank", "0"),
                    ("tp_rank", rank.as_str()),
                ]);
                w.sample(name, "", &labels, get(s));
            }
        }
    }

    // Default `multiprocess_mode='all'`: every scheduler process keeps its own sample, tagged
    // with its pid.
    let name = "sglang:num_retracted_reqs";
    w.header(name, "", "The number of retracted requests.", "gauge");
    for (i, s) in series.iter().enumerate() {
        for (r, rank) in ranks.iter().enumerate() {
            let pid = (SCHEDULER_PID_BASE as usize + s.engine() as usize * tp + r).to_string();
            let mut labels: Vec<(&str, &str)> = Vec::with_capacity(6);
            if data_parallel {
                labels.push(("dp_rank", &dp_ranks[i]));
            }
            labels.extend([
                ("engine_type", ENGINE_TYPE),
                ("model_name", s.model()),
                ("pid", pid.as_str()),
                ("pp_rank", "0"),
                ("tp_rank", rank.as_str()),
            ]);
            w.sample(name, "", &labels, 0.0);
        }
    }
}
