//! SGLang's exposition: prometheus_client in multiprocess mode (`PROMETHEUS_MULTIPROC_DIR` is
//! always set), classic text.
//!
//! Rules reproduced (signals.md §0, §3, §8; checked against the bytes SGLang 0.5.23's own
//! `SchedulerMetricsCollector` and `TokenizerMetricsCollector` write through prometheus_client
//! 0.26): values and `le` through `floatToGoString` (`7.0`, `8.128902e+06`, `le="1.0"`); labels
//! sorted with `le` sorted in; no `_created`, no `python_*` / `process_*`; histogram samples in
//! `MultiProcessCollector` order (0.26): child by child its `_sum`, buckets and `_count`; a
//! family appears only once it has a child (so the tokenizer-side families are absent until the
//! first request).
//!
//! Tokenizer side: `engine_type`, `model_name` (plus `priority=""` with priority scheduling), and
//! `is_streaming` on the TTFT and e2e histograms and the prompt/generation/request counters (not
//! on the ITL histogram, cached tokens or aborts). Scheduler side (`multiprocess_mode=
//! "mostrecent"` gauges): `engine_type`, `model_name`, `moe_ep_rank`, `pp_rank`, `tp_rank`, plus
//! `dp_rank` when the state has more than one data-parallel engine and `priority` with priority
//! scheduling ([`SglangOptions`]); only each group's attention-TP rank 0 logs unless every
//! scheduler does; with DP attention `tp_rank` is global; with priority scheduling the queue
//! gauges repeat as a per-priority breakdown after the `priority=""` total. The mode-less
//! `sglang:num_retracted_reqs` also carries the scheduler's `pid`. Family order is arbitrary in
//! multiprocess mode; the fake uses a fixed one (tokenizer histograms, scheduler gauges, tokenizer
//! counters).

use super::histogram::Histogram;
use super::options::SglangOptions;
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
    let options = &state.sglang;
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
        let streamed = name != "sglang:inter_token_latency_seconds";
        for t in &active {
            let h = get(&t.hist);
            let base = tokenizer_labels(options, t.model, streamed);
            w.sample(name, "_sum", &base, h.sum());
            let mut acc = 0.0;
            for (le, count) in bound_labels(h.bounds())
                .iter()
                .map(String::as_str)
                .chain(["+Inf"])
                .zip(h.counts())
            {
                acc += *count as f64;
                let mut labels = base.clone();
                labels.push(("le", le));
                labels.sort_unstable_by_key(|(k, _)| *k);
                w.sample(name, "_bucket", &labels, acc);
            }
            w.sample(name, "_count", &base, acc);
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
        // `observe_one_finished_request` adds `is_streaming` to the token and request counters.
        let streamed = !by_source && name != "sglang:num_aborted_requests";
        for t in children {
            let mut labels = tokenizer_labels(options, t.model, streamed);
            if by_source {
                labels.push(("cache_source", "device"));
                labels.sort_unstable_by_key(|(k, _)| *k);
            }
            w.sample(name, "_total", &labels, get(t));
        }
    }
    w.out
}

/// A tokenizer-side label set, sorted: `engine_type`, `model_name`, `is_streaming` where the
/// family has it, `priority=""` with priority scheduling.
fn tokenizer_labels<'a>(
    options: &SglangOptions,
    model: &'a str,
    streamed: bool,
) -> Vec<(&'static str, &'a str)> {
    let mut labels = vec![("engine_type", ENGINE_TYPE), ("model_name", model)];
    if streamed {
        labels.push((
            "is_streaming",
            if options.streaming { "true" } else { "false" },
        ));
    }
    if options.priority_scheduling {
        labels.push(("priority", ""));
    }
    labels.sort_unstable_by_key(|(k, _)| *k);
    labels
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

/// One scheduler process that logs: its data-parallel group's series and its ranks.
struct Scheduler<'a> {
    series: &'a ModelMetrics,
    dp_rank: Option<String>,
    tp_rank: String,
    moe_ep_rank: String,
    pid: String,
}

impl Scheduler<'_> {
    /// The collector's `labels`, sorted, with `pid` for a mode-less gauge and `priority` set to
    /// `priority` (`Some("")` is the total's).
    fn labels<'s>(&'s self, priority: Option<&'s str>, pid: bool) -> Vec<(&'static str, &'s str)> {
        let mut labels = vec![
            ("engine_type", ENGINE_TYPE),
            ("model_name", self.series.model()),
            ("moe_ep_rank", self.moe_ep_rank.as_str()),
            ("pp_rank", "0"),
            ("tp_rank", self.tp_rank.as_str()),
        ];
        if let Some(dp) = &self.dp_rank {
            labels.push(("dp_rank", dp.as_str()));
        }
        if let Some(p) = priority {
            labels.push(("priority", p));
        }
        if pid {
            labels.push(("pid", self.pid.as_str()));
        }
        labels.sort_unstable_by_key(|(k, _)| *k);
        labels
    }
}

/// Every scheduler process that logs, in data-parallel engine then rank order.
fn schedulers(state: &PodState) -> Vec<Scheduler<'_>> {
    let options = &state.sglang;
    let tp = state.tensor_parallel.max(1);
    let data_parallel = state.series.iter().any(|s| s.engine() != 0);
    let groups = state
        .series
        .iter()
        .map(|s| s.engine() as usize + 1)
        .max()
        .unwrap_or(1);
    let world = if options.dp_attention {
        tp * groups
    } else {
        tp
    };
    let ep = options.expert_parallel.max(1);
    let per_ep = (world / ep).max(1);
    let logging = if options.metrics_for_all_schedulers {
        tp
    } else {
        1
    };
    let mut out = Vec::new();
    for s in &state.series {
        let engine = s.engine() as usize;
        for local in 0..logging {
            let tp_rank = if options.dp_attention {
                engine * tp + local
            } else {
                local
            };
            out.push(Scheduler {
                series: s,
                dp_rank: data_parallel.then(|| engine.to_string()),
                tp_rank: tp_rank.to_string(),
                moe_ep_rank: (tp_rank / per_ep).to_string(),
                pid: (SCHEDULER_PID_BASE as usize + engine * tp + local).to_string(),
            });
        }
    }
    out
}

fn render_scheduler(w: &mut Writer, state: &PodState) {
    if state.series.is_empty() {
        return;
    }
    let options = &state.sglang;
    let schedulers = schedulers(state);
    let total = options.priority_scheduling.then_some("");

    type GaugeOf = fn(&ModelMetrics) -> f64;
    type ShareOf = fn(&super::options::PriorityLoad) -> f64;
    // (name, help, value, per-priority share when the gauge is a queue count).
    let gauges: [(&str, &str, GaugeOf, Option<ShareOf>); 8] = [
        (
            "sglang:num_running_reqs",
            "The number of running requests.",
            |m| m.load.running,
            Some(|p| p.running),
        ),
        (
            "sglang:num_queue_reqs",
            "The number of requests in the waiting queue.",
            |m| m.load.waiting,
            Some(|p| p.waiting),
        ),
        (
            "sglang:num_grammar_queue_reqs",
            "The number of requests in the grammar waiting queue.",
            |_| 0.0,
            None,
        ),
        (
            "sglang:gen_throughput",
            "The generation throughput (token/s).",
            |m| m.load.running * TOKENS_PER_SECOND_PER_REQUEST,
            None,
        ),
        (
            "sglang:cache_hit_rate",
            "The prefix cache hit rate.",
            |m| {
                if m.prefix_cache_queries > 0.0 {
                    m.prefix_cache_hits / m.prefix_cache_queries
                } else {
                    0.0
                }
            },
            None,
        ),
        (
            "sglang:token_usage",
            "The token usage.",
            |m| m.load.kv_cache_usage,
            None,
        ),
        (
            "sglang:num_used_tokens",
            "The number of used tokens.",
            |m| (m.load.kv_cache_usage * SGLANG_MAX_TOTAL_NUM_TOKENS).round(),
            None,
        ),
        (
            "sglang:max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            |_| SGLANG_MAX_TOTAL_NUM_TOKENS,
            None,
        ),
    ];
    for (name, help, get, share) in gauges {
        w.header(name, "", help, "gauge");
        for sched in &schedulers {
            w.sample(name, "", &sched.labels(total, false), get(sched.series));
            // `_log_gauge_queue_count`: the breakdown right after the total, per process.
            if let (true, Some(share)) = (options.priority_scheduling, share) {
                for p in &sched.series.priority_breakdown {
                    let priority = p.priority.to_string();
                    w.sample(name, "", &sched.labels(Some(&priority), false), share(p));
                }
            }
        }
    }

    // Default `multiprocess_mode='all'`: every scheduler process keeps its own sample, tagged
    // with its pid.
    let name = "sglang:num_retracted_reqs";
    w.header(name, "", "The number of retracted requests.", "gauge");
    for sched in &schedulers {
        w.sample(name, "", &sched.labels(total, true), 0.0);
    }
}
