//! Every metadata key backlog-scaler reads, engine and broker alike: the
//! user reference. Each constant's doc comment gives the meaning, type and
//! default; the README's metadata tables carry the same text, and
//! `tests/readme.rs` fails when a key here has no row there (or a row names a
//! key the registry does not have). Broker keys keep KEDA's names and defaults
//! where KEDA's built-in scaler has the concept. A key `xFromEnv` is read as
//! `x` (KEDA resolves it from the workload's environment).
//!
//! A boolean key reads exactly what Go's `strconv.ParseBool` reads, as
//! KEDA's own scalers do (so a value copied from one means the same): `1`,
//! `t`, `T`, `TRUE`, `true`, `True` and `0`, `f`, `F`, `FALSE`, `false`,
//! `False`. An enum-like key (`engine`, `policy`, `mode`, `ipFamily`,
//! `offsetResetPolicy`, `protocol`) is read in any case.

mod broker;
mod keda;

pub use broker::*;
pub use keda::*;

// --- Engine signals, direct scrape -------------------------------------------

/// Comma-separated list of engine pod metrics URLs to scrape directly, e.g.
/// `http://10.0.0.7:8000/metrics`. An entry `dns+http://NAME:PORT/PATH` is
/// resolved on every poll and each address of one family (`ipFamily`) is
/// scraped: point it at a headless Service to follow every ready pod. A URL without a path gets
/// `/metrics`. One of `vllmTargets` or `prometheusAddress` is required.
pub const VLLM_TARGETS: &str = "vllmTargets";
/// Inference server the pods run: `vllm` (default), `sglang`, `triton` or
/// `tgi`. Selects the metric names for waiting, running, TTFT and KV cache.
pub const ENGINE: &str = "engine";
/// Only count series whose model label (`model_name`; Triton: `model`)
/// equals this value. Default: every model. TGI has no model label.
pub const MODEL_NAME: &str = "modelName";
/// Which addresses of a `dns+` name (in `vllmTargets` and `dcgmTargets`)
/// are the pods: `auto` (default: IPv4 when the name has any A record,
/// else IPv6), `ipv4` or `ipv6`. One family per name, because a dual-stack
/// headless Service answers an A and an AAAA record for every pod. A name
/// whose addresses are all of the other family is a failed reading (never
/// zero pods). Needs a `dns+` target.
pub const IP_FAMILY: &str = "ipFamily";

// --- Engine signals, Prometheus ------------------------------------------------

/// Base URL of a Prometheus-compatible API (`http://prometheus.monitoring:9090`)
/// to read every signal with PromQL instead of scraping pods. KEDA's name
/// `serverAddress` is accepted as an alias.
pub const PROMETHEUS_ADDRESS: &str = "prometheusAddress";
/// Alias of `prometheusAddress` (the name KEDA's prometheus scaler uses).
pub const SERVER_ADDRESS: &str = "serverAddress";
/// Label filter `namespace="…"` added to every default PromQL query and, for
/// `dcgmTargets`, the namespace of the pods whose GPUs count. Default: none.
/// Refused on a trigger with neither (it would do nothing).
pub const NAMESPACE: &str = "namespace";
/// PromQL for `W`. Default `sum(<waiting gauge>{model, namespace})`. Several
/// series are summed.
pub const WAITING_QUERY: &str = "waitingQuery";
/// PromQL for `R`. Default `sum(<running gauge>{…})`. Several series are summed.
pub const RUNNING_QUERY: &str = "runningQuery";
/// PromQL for the TTFT quantile in seconds. Default
/// `histogram_quantile(ttftQuantile, sum by (le) (rate(<ttft>_bucket{…}[ttftWindowSeconds])))`.
/// Must return one series; NaN or no series means "no requests" (guard off).
pub const TTFT_QUERY: &str = "ttftQuery";
/// PromQL for mean KV-cache usage 0–1. Default `avg(<kv gauge>{…})`. One series, a
/// fraction 0–1. Needs `kvCacheTarget` (nothing else reads it).
pub const KV_CACHE_QUERY: &str = "kvCacheQuery";
/// PromQL for mean GPU utilisation %. Default
/// `avg(DCGM_FI_DEV_GPU_UTIL{namespace, pod=~podSelectorRegex})`. One series.
pub const GPU_UTIL_QUERY: &str = "gpuUtilQuery";
/// PromQL for `n`, the replicas up. Default `count(<waiting gauge>{…})`. One
/// series. An empty answer of another query counts as 0 only when this one
/// answers an explicit 0; otherwise the trigger is UNAVAILABLE (a lost
/// target is not zero work).
pub const REPLICAS_QUERY: &str = "replicasQuery";
/// With `policy: capacity` (the default) on the PromQL path: the label that
/// names the pod in the per-pod queries' answers. Default `pod` (what a
/// `PodMonitor` or the usual `kubernetes_sd` relabelling writes); every
/// default per-pod query groups `by (namespace, <podLabel>)`.
pub const POD_LABEL: &str = "podLabel";
/// `capacity` on the PromQL path: `W` per pod, one series per pod carrying
/// `podLabel`. Default `sum by (namespace, pod) (<waiting gauge>{…})`
/// (vLLM's `reason="capacity"` series where present, per pod). A pod missing
/// here while other queries name it is a failed pod (held, then left out),
/// never 0.
pub const POD_WAITING_QUERY: &str = "podWaitingQuery";
/// `capacity` on the PromQL path: `R` per pod. Default
/// `sum by (namespace, pod) (<running gauge>{…})`. A pod missing here is a
/// failed pod, never 0 running.
pub const POD_RUNNING_QUERY: &str = "podRunningQuery";
/// `capacity` on the PromQL path: the finished-requests counter per pod,
/// its raw value (not `rate()`: the policy takes its own per-pod deltas and
/// handles restarts). Default
/// `sum by (namespace, pod) (vllm:request_success_total{…})` (the engine's
/// finished counters). A pod missing here keeps λ̂ where it was and floors
/// `B` at the backlog formula (with `learnDrainRate: false` it is a failed
/// pod: held, then left out).
pub const POD_FINISHED_QUERY: &str = "podFinishedQuery";
/// `capacity` on the PromQL path: generated tokens per pod, the raw counter
/// as `podFinishedQuery`. Default `sum by (namespace, pod)
/// (vllm:generation_tokens_total{…})` (SGLang's `sglang:…`; none for Triton
/// and TGI). With `podPromptTokensQuery`, μ is learned in tokens (decision
/// 0027); a pod missing here, or the query failing, keeps μ in requests.
pub const POD_GENERATION_TOKENS_QUERY: &str = "podGenerationTokensQuery";
/// `capacity` on the PromQL path: prompt tokens per pod, as
/// `podGenerationTokensQuery`. Default `sum by (namespace, pod)
/// (vllm:prompt_tokens_total{…})` (SGLang's `sglang:…`).
pub const POD_PROMPT_TOKENS_QUERY: &str = "podPromptTokensQuery";
/// `capacity` on the PromQL path: KV-cache usage 0–1 per pod (bounds the
/// full batch the learned μ is extrapolated to). Default
/// `avg by (namespace, pod) (<kv gauge>{…})`.
pub const POD_KV_CACHE_QUERY: &str = "podKvCacheQuery";
/// Name of a credentials profile in the scaler-side `--config` (bearer
/// token, basic auth, headers for Prometheus). Credentials never come from
/// metadata. Only the PromQL and broker sources read with a profile: on a
/// trigger whose only sources are scraped (`vllmTargets`, `dcgmTargets`,
/// which send no credentials) it is refused.
///
/// With a broker source: name of a credential profile in the scaler's
/// `--config` (`profiles:`), used for the broker's credentials. The profile
/// may restrict which namespaces use it (others get `PERMISSION_DENIED`).
pub const AUTH_PROFILE: &str = "authProfile";

// --- Fusion ------------------------------------------------------------------

/// `T`: the backlog one replica should absorb, in requests. Required, a
/// number from 0.001 (KEDA hands the HPA quantities with three decimals) to
/// 1000000000. KEDA's HPA computes `desiredReplicas = ceil(B / T)`. KEDA's
/// `threshold` is an alias.
pub const TARGET_BACKLOG_PER_REPLICA: &str = "targetBacklogPerReplica";
/// `C`: requests one replica runs at full batch (vLLM `--max-num-seqs`).
/// When set, running requests join the backlog as `T·R/C`, so a full pod
/// counts as one replica's worth of work. A number > 0. Default: unset.
pub const RUNNING_PER_REPLICA: &str = "runningPerReplica";
/// `A`: the trigger is active (KEDA scales from zero) when `B > A`,
/// strictly, as KEDA's own activation thresholds. With Kafka, `B` counted
/// with the lag KEDA's IsActive counts (persistent lag included, before the
/// partition cap). A number ≥ 0. Default 0. KEDA's `activationThreshold`
/// is an alias.
pub const ACTIVATION_BACKLOG: &str = "activationBacklog";

// --- Policy ------------------------------------------------------------------

/// How demand `D` is computed: `capacity` (from the arrival rate with a
/// peak hold, `μ` learned from the pods' counters, scraped or read per pod
/// with PromQL) or `backlog` (`W + T·R/C`). Default: `capacity` for a
/// trigger with `vllmTargets` (docs/decisions/0022) or `prometheusAddress`
/// without a summed query key (`waitingQuery`, `runningQuery`,
/// `kvCacheQuery`, `ttftQuery`, `replicasQuery`: docs/decisions/0024);
/// `backlog` otherwise (those, and broker-only triggers).
pub const POLICY: &str = "policy";
/// `μ`: requests per second one replica finishes at a full batch (from a
/// load test). Optional: without it `μ` is learned from the pods' finished
/// counters and running gauges, and until the estimate is confident `B` is
/// never below the backlog formula. With it, `μ` starts there (the prior)
/// and is learned on, unless `learnDrainRate: false` fixes it. A number > 0.
pub const DRAIN_RATE_PER_REPLICA: &str = "drainRatePerReplica";
/// Time constant of the arrival-rate EWMA, seconds. Default 15. Shorter
/// follows a rise sooner and passes more of the rate's noise into the held
/// peak: 5 s buys `bursty` 1.4 SLO points for 4.4 % more replica-hours,
/// 30 s loses `chat` 2.9 points (docs/decisions/0031).
pub const ARRIVAL_SMOOTHING_SECONDS: &str = "arrivalSmoothingSeconds";
/// How long the peak arrival rate is held after a burst, seconds. Default
/// 600. A burst is `λ̂` rising by two pods' `μ`, 50 % and 12 standard
/// deviations of its own noise within 120 s (docs/decisions/0030); for
/// 30 minutes after one the hold keeps the pods the next burst needs (they
/// take a cold start to come back); after two or more within 30 minutes,
/// three times this, at most 1800 s (docs/decisions/0029). A load with no
/// burst in 30 minutes (a ramp, a diurnal curve) holds at most 60 s, which
/// saves replica-hours on `step`, `ramp` and `diurnal` at the same SLO
/// (docs/decisions/0025 has the numbers). Also how long an idle Deployment stays active
/// after its last request before KEDA's cooldown starts (the hold in force).
pub const PEAK_HOLD_SECONDS: &str = "peakHoldSeconds";
/// Spare capacity on top of the peak rate, as a fraction. Default 0.2.
pub const HEADROOM: &str = "headroom";
/// A pod's queue should drain within this many seconds; each pod's queue
/// adds at most one replica. Default 30.
pub const DRAIN_HORIZON_SECONDS: &str = "drainHorizonSeconds";
/// Learn `μ` online from the pods' counters (Little's law per pod,
/// extrapolated to a full batch along the fitted latency curve; shown in
/// `/explain` with its source, error and age). A boolean
/// (`strconv.ParseBool`'s spellings, as KEDA). Default true. `false` fixes `μ` at `drainRatePerReplica` (which it then
/// requires): no learning, no backlog floor, and a pod without a finished
/// counter makes the trigger unavailable.
pub const LEARN_DRAIN_RATE: &str = "learnDrainRate";

// --- Latency guard ---------------------------------------------------------------

/// `S`: the TTFT SLO in seconds. When set, the latency guard
/// `D_lat = T·n·min(L/S, 2)` joins the max while work is waiting and the
/// observed quantile `L` exceeds `S·(1 + ttftTolerance)`. A number > 0.
pub const TTFT_SLO_SECONDS: &str = "ttftSloSeconds";
/// Band above the SLO in which the guard stays silent, as a fraction of it.
/// A number ≥ 0. Default 0.1.
pub const TTFT_TOLERANCE: &str = "ttftTolerance";
/// Window of the TTFT quantile, seconds (per-pod bucket increases over it).
/// An integer from 10 to 900. Default 60.
pub const TTFT_WINDOW_SECONDS: &str = "ttftWindowSeconds";
/// Which TTFT quantile `L` is. A number in (0, 1). Default 0.95.
pub const TTFT_QUANTILE: &str = "ttftQuantile";

// --- KV cache ----------------------------------------------------------------

/// KV-cache usage (0–1] one replica should run at, e.g. `0.8`. When set,
/// `D_kv = T·n·kv/kvCacheTarget` joins the max (kv: mean over pods).
pub const KV_CACHE_TARGET: &str = "kvCacheTarget";

// --- GPU guard -----------------------------------------------------------------

/// Comma-separated dcgm-exporter URLs (same `dns+` discovery as
/// `vllmTargets`) to read `DCGM_FI_DEV_GPU_UTIL` from (on a MIG instance, or
/// any GPU without it, `DCGM_FI_PROF_GR_ENGINE_ACTIVE` × 100). Requires
/// `podSelectorRegex`.
pub const DCGM_TARGETS: &str = "dcgmTargets";
/// Regular expression the GPU's `pod` label must match in full, e.g.
/// `llama-8b-.*`. Selects the scaled workload's GPUs among a node's.
pub const POD_SELECTOR_REGEX: &str = "podSelectorRegex";
/// Busy hold: while utilisation is at or above this % and work is waiting,
/// `B` never drops below `T·n`. On by default when a GPU signal is
/// configured. A number in (0, 100]. Default 90.
pub const GPU_BUSY_PERCENT: &str = "gpuBusyPercent";
/// Idle veto (opt-in): while utilisation is at or below this % and work is
/// waiting, `B` is capped at `T·n` (more GPUs would not help). A number in
/// [0, 100). Default: off.
pub const GPU_IDLE_PERCENT: &str = "gpuIdlePercent";

// --- Timing and naming ---------------------------------------------------------

/// How often the sources are read, in seconds, in the background. An
/// integer from 1 to 300. Default 5.
pub const POLL_INTERVAL_SECONDS: &str = "pollIntervalSeconds";
/// How old the last good reading may be before the trigger answers
/// `UNAVAILABLE` (so KEDA's `fallback` applies) instead of a value. Until
/// then a failing source holds its last good value, flagged degraded.
/// Seconds, at least `pollIntervalSeconds`. Default 3 × `pollIntervalSeconds`.
pub const MAX_SIGNAL_AGE_SECONDS: &str = "maxSignalAgeSeconds";
/// The share of the discovered pods (`vllmTargets`) that must report for
/// the trigger to answer a value. A pod whose scrape fails keeps its last
/// good reading until `maxSignalAgeSeconds`, then is left out: the pods
/// that report are counted and their per-pod values extrapolated to the
/// discovered count, flagged degraded. Below this share the trigger answers
/// `UNAVAILABLE`. A number in (0, 1]; `1` needs every pod. Only with
/// `vllmTargets` or the per-pod PromQL path (`capacity` with
/// `prometheusAddress`, the pods its answers name). Default 0.5.
pub const MIN_REPORTING_FRACTION: &str = "minReportingFraction";
/// The metric name returned by `GetMetricSpec`. Letters, digits and `-`,
/// at most 63 characters. Default `backlog`, or `backlog-<modelName>` with
/// the model name reduced to those characters. Set it when two triggers of
/// one ScaledObject point at this scaler: KEDA refuses duplicate names.
pub const METRIC_NAME: &str = "metricName";
/// `active` (default) or `shadow`. In shadow mode everything is computed,
/// cached and shown in `/explain` and the self-metrics
/// (`backlog_scaler_shadow_desired_replicas`), but GetMetrics answers 0 and
/// IsActive false, even while the signal is lost (never `UNAVAILABLE`, which
/// would make KEDA apply the ScaledObject's `fallback`): next to the
/// ScaledObject's existing triggers, whose maximum the HPA takes, it changes
/// nothing. The way to trial the scaler before it decides.
pub const MODE: &str = "mode";

// --- Groups ------------------------------------------------------------------

/// Engine signals read by scraping the pods.
pub const SCRAPE: &[&str] = &[VLLM_TARGETS, ENGINE, MODEL_NAME];
/// How `dns+` targets (engine and dcgm) are discovered.
pub const DISCOVERY: &[&str] = &[IP_FAMILY];
/// Engine and GPU signals read with PromQL (`authProfile` is also a broker key).
pub const PROMETHEUS: &[&str] = &[
    PROMETHEUS_ADDRESS,
    SERVER_ADDRESS,
    NAMESPACE,
    WAITING_QUERY,
    RUNNING_QUERY,
    TTFT_QUERY,
    KV_CACHE_QUERY,
    GPU_UTIL_QUERY,
    REPLICAS_QUERY,
    POD_LABEL,
    POD_WAITING_QUERY,
    POD_RUNNING_QUERY,
    POD_FINISHED_QUERY,
    POD_GENERATION_TOKENS_QUERY,
    POD_PROMPT_TOKENS_QUERY,
    POD_KV_CACHE_QUERY,
    AUTH_PROFILE,
];
/// The fusion formula's `T`, `C` and `A`.
pub const FUSION: &[&str] = &[
    TARGET_BACKLOG_PER_REPLICA,
    RUNNING_PER_REPLICA,
    ACTIVATION_BACKLOG,
];
/// `policy` and the keys only `policy: capacity` reads.
pub const CAPACITY_POLICY: &[&str] = &[
    POLICY,
    DRAIN_RATE_PER_REPLICA,
    ARRIVAL_SMOOTHING_SECONDS,
    PEAK_HOLD_SECONDS,
    HEADROOM,
    DRAIN_HORIZON_SECONDS,
    LEARN_DRAIN_RATE,
];
/// The latency (TTFT) guard.
pub const LATENCY: &[&str] = &[
    TTFT_SLO_SECONDS,
    TTFT_TOLERANCE,
    TTFT_WINDOW_SECONDS,
    TTFT_QUANTILE,
];
/// The KV-cache term.
pub const KV_CACHE: &[&str] = &[KV_CACHE_TARGET];
/// The GPU guard and where `U` comes from.
pub const GPU: &[&str] = &[
    DCGM_TARGETS,
    POD_SELECTOR_REGEX,
    GPU_BUSY_PERCENT,
    GPU_IDLE_PERCENT,
];
/// Polling, signal age, the reporting quorum, the metric name and the mode.
pub const TIMING: &[&str] = &[
    POLL_INTERVAL_SECONDS,
    MAX_SIGNAL_AGE_SECONDS,
    MIN_REPORTING_FRACTION,
    METRIC_NAME,
    MODE,
];
/// Every key that configures backlog-scaler, each once: the engine side
/// first, then the broker-only keys (`authProfile` serves both and is listed
/// with the engine side).
pub const ALL: &[&str] = &concat::<
    { ENGINE_SIDE.len() + SQS.len() + KAFKA.len() + RABBITMQ.len() + 1 },
>(&[ENGINE_SIDE, SQS, KAFKA, RABBITMQ, &[MESSAGE_WEIGHT]]);
/// The engine side of [`ALL`], in the order errors and suggestions list it.
const ENGINE_SIDE: &[&str] = &[
    VLLM_TARGETS,
    ENGINE,
    MODEL_NAME,
    PROMETHEUS_ADDRESS,
    SERVER_ADDRESS,
    NAMESPACE,
    WAITING_QUERY,
    RUNNING_QUERY,
    TTFT_QUERY,
    KV_CACHE_QUERY,
    GPU_UTIL_QUERY,
    REPLICAS_QUERY,
    POD_LABEL,
    POD_WAITING_QUERY,
    POD_RUNNING_QUERY,
    POD_FINISHED_QUERY,
    POD_GENERATION_TOKENS_QUERY,
    POD_PROMPT_TOKENS_QUERY,
    POD_KV_CACHE_QUERY,
    AUTH_PROFILE,
    TARGET_BACKLOG_PER_REPLICA,
    RUNNING_PER_REPLICA,
    ACTIVATION_BACKLOG,
    POLICY,
    DRAIN_RATE_PER_REPLICA,
    ARRIVAL_SMOOTHING_SECONDS,
    PEAK_HOLD_SECONDS,
    HEADROOM,
    DRAIN_HORIZON_SECONDS,
    LEARN_DRAIN_RATE,
    TTFT_SLO_SECONDS,
    TTFT_TOLERANCE,
    TTFT_WINDOW_SECONDS,
    TTFT_QUANTILE,
    KV_CACHE_TARGET,
    DCGM_TARGETS,
    POD_SELECTOR_REGEX,
    GPU_BUSY_PERCENT,
    GPU_IDLE_PERCENT,
    POLL_INTERVAL_SECONDS,
    MAX_SIGNAL_AGE_SECONDS,
    MIN_REPORTING_FRACTION,
    METRIC_NAME,
    MODE,
    IP_FAMILY,
];
/// The keys of `parts`, in order, as one array of `N` (their total: a wrong
/// `N` fails the build). Lets [`ALL`] and [`BROKER`] be built from the groups
/// instead of repeating them.
const fn concat<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut at, mut part) = (0, 0);
    while part < parts.len() {
        let mut i = 0;
        while i < parts[part].len() {
            out[at] = parts[part][i];
            at += 1;
            i += 1;
        }
        part += 1;
    }
    assert!(at == N, "concat: N is not the total length of the parts");
    out
}

/// Every group, for checks that each key of [`ALL`] has its place.
pub const GROUPS: &[&[&str]] = &[
    SCRAPE,
    DISCOVERY,
    PROMETHEUS,
    FUSION,
    CAPACITY_POLICY,
    LATENCY,
    KV_CACHE,
    GPU,
    TIMING,
    SQS,
    KAFKA,
    RABBITMQ,
    BROKER_COMMON,
];

#[cfg(test)]
mod tests;
