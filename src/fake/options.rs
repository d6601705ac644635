//! How a fake engine pod is configured beyond its load: the server flags and releases whose
//! expositions differ (signals.md §3, §8).

/// The SGLang server flags that change its scheduler gauges (0.5.23,
/// `SchedulerMetricsCollectorContext.init_new`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SglangOptions {
    /// `--enable-priority-scheduling`: every scheduler label set gains `priority=""`; the queue
    /// gauges (`sglang:num_queue_reqs`, `sglang:num_running_reqs`) are written twice, the total
    /// under `priority=""` and the breakdown of
    /// [`ModelMetrics::priority_breakdown`](super::ModelMetrics::priority_breakdown) under
    /// `priority="<n>"`; tokenizer-side series keep `priority=""` (the fake's requests carry none).
    pub priority_scheduling: bool,
    /// `--enable-dp-attention`: the state's data-parallel engines are attention-DP groups of one
    /// TP world of `tensor_parallel × groups` GPUs, so `tp_rank` is global (group `d`'s ranks are
    /// `d·tensor_parallel …`); without it each data-parallel engine has its own TP world and
    /// `tp_rank` restarts at 0. `dp_rank` is written whenever there is more than one engine.
    pub dp_attention: bool,
    /// `--enable-metrics-for-all-schedulers`: every TP rank logs. By default only each group's
    /// attention-TP rank 0 does.
    pub metrics_for_all_schedulers: bool,
    /// `--ep-size` (0 or 1: no expert parallelism): `moe_ep_rank = tp_rank / (tp_size / ep)`.
    pub expert_parallel: usize,
    /// The fake's requests were streamed: `is_streaming="true"` (else `"false"`) on the TTFT and
    /// e2e histograms and the prompt/generation/request counters.
    pub streaming: bool,
}

/// One priority's share of a queue under SGLang's priority scheduling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriorityLoad {
    /// The request priority (`priority="<n>"`).
    pub priority: i64,
    /// Its requests in `sglang:num_queue_reqs`.
    pub waiting: f64,
    /// Its requests in `sglang:num_running_reqs`.
    pub running: f64,
}
