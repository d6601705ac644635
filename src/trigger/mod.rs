//! Trigger metadata → a validated [`TriggerSpec`].
//!
//! KEDA forwards every key of a ScaledObject trigger's `metadata` as
//! `scalerMetadata`, its own keys included. [`keys`] is the user reference
//! for those keys. Validation does no I/O, so `GetMetricSpec` can depend on
//! it alone and never fails because a source is down; every problem is
//! reported at once, each naming the key, the value and what is allowed.

pub mod keys;
mod values;

use std::fmt;
use std::time::Duration;

use reqwest::Url;

use crate::decide::capacity::CapacityParams;
use crate::decide::fusion::{FusionParams, GpuGuard, LatencyGuard, Policy};
use crate::source::broker::{self, BrokerTrigger};
use crate::source::dcgm::PodSelector;
use crate::source::prometheus::DefaultQueries;
use crate::source::{DcgmSource, Engine, EngineSource, PromQuery, SourceSpec};
pub use values::Metadata;
use values::{
    invalid, number, optional_non_negative, optional_positive, required_positive, targets,
    whole_seconds,
};

/// Default poll interval (`pollIntervalSeconds`).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// `maxSignalAgeSeconds` defaults to this many poll intervals: one failed
/// poll is noise, three in a row is a lost signal.
pub const DEFAULT_MAX_SIGNAL_AGE_POLLS: u32 = 3;
/// Default `ttftWindowSeconds`.
pub const DEFAULT_TTFT_WINDOW: Duration = Duration::from_secs(60);
/// Default `ttftQuantile`.
pub const DEFAULT_TTFT_QUANTILE: f64 = 0.95;
/// Default `ttftTolerance`.
pub const DEFAULT_TTFT_TOLERANCE: f64 = 0.1;
/// Default `gpuBusyPercent`.
pub const DEFAULT_GPU_BUSY_PERCENT: f64 = 90.0;
const MAX_POLL_INTERVAL_SECS: u64 = 300;
const MAX_METRIC_NAME_LEN: usize = 63;

/// A trigger's metadata, validated and typed.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerSpec {
    /// Name returned by GetMetricSpec and matched (case-insensitively) by GetMetrics.
    pub metric_name: String,
    /// Parameters of the fusion formula.
    pub fusion: FusionParams,
    /// Where `W`, `R`, `n`, TTFT and KV come from; `None` for a broker-only
    /// trigger.
    pub engine: Option<EngineInput>,
    /// The broker whose backlog `Q` joins as `w·Q`, if any.
    pub broker: Option<BrokerTrigger>,
    /// Where `U` comes from, if the GPU guard is configured.
    pub gpu: Option<GpuInput>,
    /// TTFT quantile settings (used when the latency guard is on).
    pub ttft: TtftSettings,
    /// Background poll interval of this trigger's sources.
    pub poll_interval: Duration,
    /// Age after which a held reading no longer counts.
    pub max_signal_age: Duration,
}

/// How engine signals are read.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineInput {
    /// Scrape the pods directly (`vllmTargets`).
    Scrape(EngineSource),
    /// PromQL (`prometheusAddress`).
    Prometheus(Box<PromSignals>),
}

/// One query per engine signal.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSignals {
    /// `W` (summed).
    pub waiting: PromQuery,
    /// `R` (summed), when `runningPerReplica` is set.
    pub running: Option<PromQuery>,
    /// TTFT quantile, when `ttftSloSeconds` is set.
    pub ttft: Option<PromQuery>,
    /// Mean KV usage, when `kvCacheTarget` is set.
    pub kv_cache: Option<PromQuery>,
    /// `n`, replicas up.
    pub replicas: PromQuery,
}

/// How `U` is read.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuInput {
    /// Scrape dcgm-exporter (`dcgmTargets`).
    Scrape(DcgmSource),
    /// PromQL (`gpuUtilQuery` or the default from `podSelectorRegex`).
    Prometheus(PromQuery),
}

/// TTFT quantile settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftSettings {
    /// `ttftWindowSeconds`.
    pub window: Duration,
    /// `ttftQuantile`.
    pub quantile: f64,
}

/// One problem with one metadata key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetadataError {
    /// A required key is absent.
    #[error("metadata key `{key}` is required: {allowed}")]
    Missing {
        /// The key.
        key: &'static str,
        /// What a valid value looks like.
        allowed: &'static str,
    },
    /// A key's value is not allowed.
    #[error("metadata key `{key}` has value `{value}`: {allowed}")]
    Invalid {
        /// The key, as sent (a `…FromEnv` key keeps its suffix).
        key: String,
        /// The offending value.
        value: String,
        /// What is allowed instead.
        allowed: String,
    },
    /// A key that is neither KEDA's nor ours.
    #[error("unknown metadata key `{key}`{}", nearest.map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default())]
    Unknown {
        /// The key as sent.
        key: String,
        /// The closest valid key, when one is close.
        nearest: Option<&'static str>,
    },
    /// Keys that do not work together.
    #[error("metadata key `{key}` {problem}")]
    Conflict {
        /// The key.
        key: &'static str,
        /// What is wrong with it here.
        problem: String,
    },
}

/// Every problem found in one trigger's metadata (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataErrors(pub Vec<MetadataError>);

impl fmt::Display for MetadataErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MetadataErrors {}

fn conflict(key: &'static str, problem: impl Into<String>) -> MetadataError {
    MetadataError::Conflict {
        key,
        problem: problem.into(),
    }
}

impl TriggerSpec {
    /// Validate a trigger's metadata. Collects every problem, not just the first.
    pub fn from_metadata<'a, I>(metadata: I) -> Result<TriggerSpec, MetadataErrors>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut errors = Vec::new();
        let md = Metadata::fold(metadata, broker::keys::ALL, &mut errors);
        let broker = match broker::parse_metadata(&|key| md.get(key)) {
            Ok(broker) => broker,
            Err(broker_errors) => {
                errors.extend(broker_errors);
                None
            }
        };

        let target = required_positive(&md, keys::TARGET_BACKLOG_PER_REPLICA, &mut errors);
        let running_per_replica = optional_positive(&md, keys::RUNNING_PER_REPLICA, &mut errors);
        let activation_backlog =
            optional_non_negative(&md, keys::ACTIVATION_BACKLOG, &mut errors).unwrap_or(0.0);
        let poll_interval = whole_seconds(
            &md,
            keys::POLL_INTERVAL_SECONDS,
            1,
            MAX_POLL_INTERVAL_SECS,
            &mut errors,
        )
        .unwrap_or(DEFAULT_POLL_INTERVAL);
        let max_signal_age = whole_seconds(
            &md,
            keys::MAX_SIGNAL_AGE_SECONDS,
            poll_interval.as_secs(),
            3600,
            &mut errors,
        )
        .unwrap_or(poll_interval * DEFAULT_MAX_SIGNAL_AGE_POLLS);
        let model_name = md.text(keys::MODEL_NAME).map(str::to_owned);
        let metric_name = metric_name(&md, model_name.as_deref(), &mut errors);
        let engine = match md.get(keys::ENGINE) {
            None => Engine::Vllm,
            Some((sent, raw)) => Engine::parse(raw).unwrap_or_else(|| {
                errors.push(invalid(
                    sent,
                    raw,
                    "one of `vllm`, `sglang`, `triton`, `tgi`",
                ));
                Engine::Vllm
            }),
        };

        let latency = latency_guard(&md, &mut errors);
        let ttft = TtftSettings {
            window: whole_seconds(&md, keys::TTFT_WINDOW_SECONDS, 10, 900, &mut errors)
                .unwrap_or(DEFAULT_TTFT_WINDOW),
            quantile: number(
                &md,
                keys::TTFT_QUANTILE,
                |q| q > 0.0 && q < 1.0,
                "a number between 0 and 1, e.g. `0.95`",
                &mut errors,
            )
            .unwrap_or(DEFAULT_TTFT_QUANTILE),
        };
        let kv_cache_target = number(
            &md,
            keys::KV_CACHE_TARGET,
            |v| v > 0.0 && v <= 1.0,
            "a fraction in (0, 1], e.g. `0.8`",
            &mut errors,
        );
        let needs = Needs {
            running: running_per_replica.is_some(),
            ttft: latency.is_some(),
            kv_cache: kv_cache_target.is_some(),
        };

        let policy = policy(&md, &mut errors);
        if matches!(policy, Policy::Capacity(_)) && !md.has(keys::VLLM_TARGETS) {
            errors.push(conflict(
                keys::POLICY,
                "`capacity` needs per-pod counters: set `vllmTargets` (the PromQL path gives sums only)",
            ));
        }
        let prometheus = prometheus_address(&md, &mut errors);
        let has_engine = md.has(keys::VLLM_TARGETS) || prometheus.is_some();
        let engine_input = if has_engine || broker.is_none() {
            engine_input(
                &md,
                engine,
                model_name,
                prometheus.as_ref(),
                needs,
                ttft,
                &mut errors,
            )
        } else {
            // A broker-only trigger (an async worker fed by a queue):
            // engine-signal keys have nothing to read.
            for key in [
                keys::RUNNING_PER_REPLICA,
                keys::TTFT_SLO_SECONDS,
                keys::KV_CACHE_TARGET,
                keys::ENGINE,
                keys::MODEL_NAME,
            ] {
                if md.has(key) {
                    errors.push(conflict(
                        key,
                        "needs engine signals: set `vllmTargets` or `prometheusAddress`",
                    ));
                }
            }
            None
        };
        let gpu = gpu_input(&md, prometheus.as_ref(), &mut errors);
        let gpu_guard = gpu_guard(&md, gpu.is_some(), &mut errors);

        match (target, engine_input.is_some() || broker.is_some()) {
            (Some(target), true) if errors.is_empty() => Ok(TriggerSpec {
                metric_name,
                fusion: FusionParams {
                    target_per_replica: target,
                    running_per_replica,
                    activation_backlog,
                    latency,
                    kv_cache_target,
                    gpu: gpu_guard,
                    policy,
                },
                engine: engine_input,
                broker,
                gpu,
                ttft,
                poll_interval,
                max_signal_age,
            }),
            _ => Err(MetadataErrors(errors)),
        }
    }

    /// Every source this trigger reads, each becoming one shared poller.
    pub fn sources(&self) -> Vec<SourceSpec> {
        let mut sources = Vec::new();
        match &self.engine {
            None => {}
            Some(EngineInput::Scrape(source)) => sources.push(SourceSpec::Engine(source.clone())),
            Some(EngineInput::Prometheus(q)) => {
                for query in [
                    Some(&q.waiting),
                    q.running.as_ref(),
                    q.ttft.as_ref(),
                    q.kv_cache.as_ref(),
                    Some(&q.replicas),
                ]
                .into_iter()
                .flatten()
                {
                    sources.push(SourceSpec::Prometheus(query.clone()));
                }
            }
        }
        if let Some(broker) = &self.broker {
            sources.push(SourceSpec::Broker(broker.source.clone()));
        }
        match &self.gpu {
            Some(GpuInput::Scrape(source)) => sources.push(SourceSpec::Dcgm(source.clone())),
            Some(GpuInput::Prometheus(query)) => {
                sources.push(SourceSpec::Prometheus(query.clone()))
            }
            None => {}
        }
        let mut unique = Vec::with_capacity(sources.len());
        for source in sources {
            if !unique.contains(&source) {
                unique.push(source);
            }
        }
        unique
    }
}

/// Which optional engine signals the trigger uses.
#[derive(Debug, Clone, Copy)]
struct Needs {
    running: bool,
    ttft: bool,
    kv_cache: bool,
}

fn policy(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Policy {
    let capacity_keys = [
        keys::DRAIN_RATE_PER_REPLICA,
        keys::ARRIVAL_SMOOTHING_SECONDS,
        keys::PEAK_HOLD_SECONDS,
        keys::HEADROOM,
        keys::DRAIN_HORIZON_SECONDS,
        keys::LEARN_DRAIN_RATE,
    ];
    // Default: `capacity` when a drain rate is given (the simulator shows it
    // no worse than `backlog` in every scenario: docs/decisions/0010), and
    // `backlog` otherwise, since `capacity` cannot run without μ.
    let capacity = match md.get(keys::POLICY) {
        None => md.has(keys::DRAIN_RATE_PER_REPLICA),
        Some((_, raw)) if raw.eq_ignore_ascii_case("backlog") => false,
        Some((_, raw)) if raw.eq_ignore_ascii_case("capacity") => true,
        Some((sent, raw)) => {
            errors.push(invalid(sent, raw, "`backlog` or `capacity`"));
            return Policy::Backlog;
        }
    };
    if !capacity {
        for key in capacity_keys {
            if md.has(key) {
                errors.push(conflict(key, "only applies to `policy: capacity`"));
            }
        }
        return Policy::Backlog;
    }
    let seconds = |key: &'static str, default: f64, errors: &mut Vec<MetadataError>| {
        number(
            md,
            key,
            |v| v > 0.0 && v <= 86_400.0,
            "a number of seconds in (0, 86400]",
            errors,
        )
        .unwrap_or(default)
    };
    let learn = match md.get(keys::LEARN_DRAIN_RATE) {
        None => false,
        Some((_, raw)) if raw.eq_ignore_ascii_case("true") => true,
        Some((_, raw)) if raw.eq_ignore_ascii_case("false") => false,
        Some((sent, raw)) => {
            errors.push(invalid(sent, raw, "`true` or `false`"));
            false
        }
    };
    let drain = required_positive(md, keys::DRAIN_RATE_PER_REPLICA, errors);
    let params = CapacityParams {
        drain_rate_per_replica: drain.unwrap_or(1.0),
        arrival_smoothing_seconds: seconds(keys::ARRIVAL_SMOOTHING_SECONDS, 15.0, errors),
        peak_hold_seconds: seconds(keys::PEAK_HOLD_SECONDS, 600.0, errors),
        headroom: number(
            md,
            keys::HEADROOM,
            |v| (0.0..=10.0).contains(&v),
            "a fraction from 0 to 10, e.g. `0.2`",
            errors,
        )
        .unwrap_or(0.2),
        drain_horizon_seconds: seconds(keys::DRAIN_HORIZON_SECONDS, 30.0, errors),
        learn_drain_rate: learn,
    };
    Policy::Capacity(params)
}

fn latency_guard(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Option<LatencyGuard> {
    let slo = optional_positive(md, keys::TTFT_SLO_SECONDS, errors);
    let tolerance =
        optional_non_negative(md, keys::TTFT_TOLERANCE, errors).unwrap_or(DEFAULT_TTFT_TOLERANCE);
    if slo.is_none() {
        for key in [
            keys::TTFT_TOLERANCE,
            keys::TTFT_WINDOW_SECONDS,
            keys::TTFT_QUANTILE,
            keys::TTFT_QUERY,
        ] {
            if md.has(key) {
                errors.push(conflict(key, "has no effect without `ttftSloSeconds`"));
            }
        }
    }
    slo.map(|slo_seconds| LatencyGuard {
        slo_seconds,
        tolerance,
    })
}

fn prometheus_address(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Option<Url> {
    let (sent, raw) = match (
        md.get(keys::PROMETHEUS_ADDRESS),
        md.get(keys::SERVER_ADDRESS),
    ) {
        (Some(_), Some(_)) => {
            errors.push(conflict(
                keys::SERVER_ADDRESS,
                "is an alias of `prometheusAddress`; set only one",
            ));
            return None;
        }
        (Some(v), None) | (None, Some(v)) => v,
        (None, None) => return None,
    };
    let valid = Url::parse(raw)
        .ok()
        .filter(|u| {
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
        })
        .filter(|u| u.username().is_empty() && u.password().is_none())
        .filter(|_| {
            !raw.split_once("://")
                .is_some_and(|(_, rest)| rest.starts_with('/'))
        });
    if valid.is_none() {
        errors.push(invalid(
            sent,
            raw,
            "an http(s)://HOST:PORT URL of a Prometheus API, without credentials",
        ));
    }
    valid
}

fn engine_input(
    md: &Metadata<'_>,
    engine: Engine,
    model_name: Option<String>,
    prometheus: Option<&Url>,
    needs: Needs,
    ttft: TtftSettings,
    errors: &mut Vec<MetadataError>,
) -> Option<EngineInput> {
    let names = engine.metrics();
    if model_name.is_some() && names.model_label.is_none() {
        errors.push(conflict(
            keys::MODEL_NAME,
            format!("cannot filter engine `{engine}`: its metrics carry no model label"),
        ));
    }
    let query_keys = [
        keys::WAITING_QUERY,
        keys::RUNNING_QUERY,
        keys::TTFT_QUERY,
        keys::KV_CACHE_QUERY,
        keys::REPLICAS_QUERY,
    ];
    let scrape = md.has(keys::VLLM_TARGETS);
    match (scrape, prometheus) {
        (true, Some(_))
            if query_keys.iter().any(|k| md.has(k))
                || !md.has(keys::POD_SELECTOR_REGEX) && !md.has(keys::GPU_UTIL_QUERY) =>
        {
            errors.push(conflict(
                keys::VLLM_TARGETS,
                "and `prometheusAddress` both read the engine signals; set one (prometheusAddress may accompany vllmTargets only for the GPU signal)",
            ));
            None
        }
        (true, _) => {
            for key in query_keys {
                if md.has(key) {
                    errors.push(conflict(
                        key,
                        "needs `prometheusAddress` (it is a PromQL query)",
                    ));
                }
            }
            let unsupported = |key: &'static str, what: &str| {
                conflict(
                    key,
                    format!(
                        "needs {what}, which engine `{engine}` does not expose; use `prometheusAddress` with a query"
                    ),
                )
            };
            if needs.running && names.running.is_none() {
                errors.push(unsupported(
                    keys::RUNNING_PER_REPLICA,
                    "a running-requests gauge",
                ));
            }
            if needs.ttft && names.ttft.is_none() {
                errors.push(unsupported(keys::TTFT_SLO_SECONDS, "a TTFT histogram"));
            }
            if needs.kv_cache && names.kv_cache.is_empty() {
                errors.push(unsupported(keys::KV_CACHE_TARGET, "a KV-cache usage gauge"));
            }
            let targets = targets(md, keys::VLLM_TARGETS, errors)?;
            Some(EngineInput::Scrape(EngineSource {
                engine,
                targets,
                model_name,
            }))
        }
        (false, Some(address)) => {
            let defaults =
                DefaultQueries::new(engine, model_name.as_deref(), md.text(keys::NAMESPACE));
            let auth_profile = md.text(keys::AUTH_PROFILE).map(str::to_owned);
            let query = |key: &'static str,
                         default: Option<String>,
                         needed: bool,
                         errors: &mut Vec<MetadataError>|
             -> Option<PromQuery> {
                let text = match md.get(key) {
                    Some((sent, raw)) if raw.is_empty() => {
                        errors.push(invalid(sent, raw, "a PromQL expression"));
                        return None;
                    }
                    Some((_, raw)) => Some(raw.to_owned()),
                    None => default,
                };
                if !needed {
                    return None;
                }
                match text {
                    Some(query) => Some(PromQuery {
                        address: address.clone(),
                        query,
                        auth_profile: auth_profile.clone(),
                    }),
                    None => {
                        errors.push(conflict(
                            key,
                            format!("is needed: engine `{engine}` has no default for it"),
                        ));
                        None
                    }
                }
            };
            let waiting = query(keys::WAITING_QUERY, Some(defaults.waiting()), true, errors);
            let running = query(
                keys::RUNNING_QUERY,
                defaults.running(),
                needs.running,
                errors,
            );
            let ttft_query = query(
                keys::TTFT_QUERY,
                defaults.ttft(ttft.quantile, ttft.window.as_secs()),
                needs.ttft,
                errors,
            );
            let kv_cache = query(
                keys::KV_CACHE_QUERY,
                defaults.kv_cache(),
                needs.kv_cache,
                errors,
            );
            let replicas = query(
                keys::REPLICAS_QUERY,
                Some(defaults.replicas()),
                true,
                errors,
            );
            Some(EngineInput::Prometheus(Box::new(PromSignals {
                waiting: waiting?,
                running,
                ttft: ttft_query,
                kv_cache,
                replicas: replicas?,
            })))
        }
        (false, None) => {
            errors.push(MetadataError::Missing {
                key: keys::VLLM_TARGETS,
                allowed: "a comma-separated list of http(s):// metrics URLs or dns+http://SERVICE:PORT/metrics entries (or set `prometheusAddress` to read the signals with PromQL, or a broker: `queueURL`, `bootstrapServers`, `rabbitmqHost`)",
            });
            None
        }
    }
}

fn gpu_input(
    md: &Metadata<'_>,
    prometheus: Option<&Url>,
    errors: &mut Vec<MetadataError>,
) -> Option<GpuInput> {
    let selector = match md.get(keys::POD_SELECTOR_REGEX) {
        Some((sent, raw)) => {
            match PodSelector::new(raw) {
                Ok(selector) if !raw.is_empty() => Some(selector),
                Ok(_) => {
                    errors.push(invalid(sent, raw, "a regular expression matching the workload's pod names, e.g. `llama-8b-.*`"));
                    None
                }
                Err(e) => {
                    errors.push(invalid(
                        sent,
                        raw,
                        format!("a valid regular expression ({e})"),
                    ));
                    None
                }
            }
        }
        None => None,
    };
    let namespace = md.text(keys::NAMESPACE);
    if md.has(keys::DCGM_TARGETS) {
        if md.has(keys::GPU_UTIL_QUERY) {
            errors.push(conflict(
                keys::GPU_UTIL_QUERY,
                "and `dcgmTargets` both read GPU utilisation; set one",
            ));
        }
        let targets = targets(md, keys::DCGM_TARGETS, errors)?;
        let Some(pods) = selector else {
            if !md.has(keys::POD_SELECTOR_REGEX) {
                errors.push(conflict(
                    keys::DCGM_TARGETS,
                    "needs `podSelectorRegex`: dcgm-exporter reports every GPU of a node, and only the scaled workload's may count",
                ));
            }
            return None;
        };
        return Some(GpuInput::Scrape(DcgmSource {
            targets,
            namespace: namespace.map(str::to_owned),
            pods: Some(pods),
        }));
    }
    let query = match md.get(keys::GPU_UTIL_QUERY) {
        Some((_, raw)) if !raw.is_empty() => raw.to_owned(),
        Some((sent, raw)) => {
            errors.push(invalid(sent, raw, "a PromQL expression"));
            return None;
        }
        None if prometheus.is_some() && selector.is_some() => {
            DefaultQueries::gpu_util(namespace, md.text(keys::POD_SELECTOR_REGEX))
        }
        None => return None,
    };
    let Some(address) = prometheus else {
        errors.push(conflict(
            keys::GPU_UTIL_QUERY,
            "needs `prometheusAddress` (it is a PromQL query)",
        ));
        return None;
    };
    Some(GpuInput::Prometheus(PromQuery {
        address: address.clone(),
        query,
        auth_profile: md.text(keys::AUTH_PROFILE).map(str::to_owned),
    }))
}

fn gpu_guard(
    md: &Metadata<'_>,
    configured: bool,
    errors: &mut Vec<MetadataError>,
) -> Option<GpuGuard> {
    let busy = number(
        md,
        keys::GPU_BUSY_PERCENT,
        |v| v > 0.0 && v <= 100.0,
        "a percentage in (0, 100], e.g. `90`",
        errors,
    );
    let idle = number(
        md,
        keys::GPU_IDLE_PERCENT,
        |v| (0.0..100.0).contains(&v),
        "a percentage in [0, 100), e.g. `10`",
        errors,
    );
    if !configured {
        for key in [keys::GPU_BUSY_PERCENT, keys::GPU_IDLE_PERCENT] {
            if md.has(key) {
                errors.push(conflict(key, "needs a GPU signal: `dcgmTargets`, `gpuUtilQuery`, or `prometheusAddress` with `podSelectorRegex`"));
            }
        }
        return None;
    }
    let busy = busy.unwrap_or(DEFAULT_GPU_BUSY_PERCENT);
    if let Some(idle) = idle
        && idle >= busy
    {
        errors.push(conflict(
            keys::GPU_IDLE_PERCENT,
            format!("({idle}) must be below `gpuBusyPercent` ({busy})"),
        ));
    }
    Some(GpuGuard {
        busy_percent: Some(busy),
        idle_percent: idle,
    })
}

fn metric_name(
    md: &Metadata<'_>,
    model_name: Option<&str>,
    errors: &mut Vec<MetadataError>,
) -> String {
    if let Some((sent_key, raw)) = md.get(keys::METRIC_NAME) {
        let valid = !raw.is_empty()
            && raw.len() <= MAX_METRIC_NAME_LEN
            && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if valid {
            return raw.to_owned();
        }
        errors.push(invalid(
            sent_key,
            raw,
            format!("1 to {MAX_METRIC_NAME_LEN} letters, digits or `-`"),
        ));
    }
    match model_name {
        Some(model) => {
            let mut name = String::from("backlog-");
            let mut last_dash = true;
            for c in model.chars() {
                // KEDA does not normalize external metric names, and `/ . : % ( )`
                // break the HPA's external metric path, so reduce to [a-z0-9-].
                if c.is_ascii_alphanumeric() {
                    name.push(c.to_ascii_lowercase());
                    last_dash = false;
                } else if !last_dash {
                    name.push('-');
                    last_dash = true;
                }
            }
            let mut name: String = name.chars().take(MAX_METRIC_NAME_LEN).collect();
            while name.ends_with('-') {
                name.pop();
            }
            name
        }
        None => "backlog".to_owned(),
    }
}

#[cfg(test)]
mod tests;
