//! A trigger's metadata → a validated [`TriggerSpec`], and the sources it reads.

use std::time::Duration;

use super::broker::{BrokerTrigger, PROFILE_NAME, parse_metadata as parse_broker};
use super::defaults::{
    DEFAULT_MAX_SIGNAL_AGE_POLLS, DEFAULT_MIN_REPORTING_FRACTION, DEFAULT_POLL_INTERVAL,
};
use super::engine::{
    EngineInput, Needs, engine_input, prometheus_address, prometheus_declared, refuse_promql_keys,
};
use super::error::{MetadataError, MetadataErrors, conflict, invalid};
use super::gpu::{GpuInput, gpu_guard, gpu_input};
use super::keys;
use super::latency::{TtftSettings, latency_guard, ttft_settings};
use super::params::{FusionParams, Policy};
use super::policy::policy;
use super::values::{
    Metadata, ip_family, number, optional_non_negative, optional_positive, required_target,
    whole_seconds,
};
use crate::guard::credentials::valid_profile_name;
use crate::source::{Engine, SourceSpec};

const MAX_POLL_INTERVAL_SECS: u64 = 300;
const MAX_METRIC_NAME_LEN: usize = 63;

/// Whether a trigger's answers reach KEDA (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// GetMetrics and IsActive answer the decision (the default).
    #[default]
    Active,
    /// Everything is computed and explained, but GetMetrics answers 0 and
    /// IsActive false, so the ScaledObject's other triggers keep deciding.
    Shadow,
}

impl Mode {
    /// The metadata value (`active`, `shadow`), as `/explain` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Active => "active",
            Mode::Shadow => "shadow",
        }
    }
}

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
    /// Share of the discovered pods that must report (`minReportingFraction`),
    /// in (0, 1].
    pub min_reporting_fraction: f64,
    /// Whether the answers reach KEDA or only `/explain` and the self-metrics.
    pub mode: Mode,
}

impl TriggerSpec {
    /// Validate a trigger's metadata. Collects every problem, not just the first.
    pub fn from_metadata<'a, I>(metadata: I) -> Result<TriggerSpec, MetadataErrors>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut errors = Vec::new();
        let md = Metadata::fold(metadata, &mut errors);
        let broker = match parse_broker(&md) {
            Ok(broker) => broker,
            Err(broker_errors) => {
                errors.extend(broker_errors);
                None
            }
        };

        let target = required_target(&md, keys::TARGET_BACKLOG_PER_REPLICA, &mut errors);
        let running_per_replica = optional_positive(
            &md,
            keys::RUNNING_PER_REPLICA,
            "a number greater than 0, e.g. `32`",
            &mut errors,
        );
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
        let min_reporting_fraction = number(
            &md,
            keys::MIN_REPORTING_FRACTION,
            |v| v > 0.0 && v <= 1.0,
            "a fraction in (0, 1], e.g. `0.5` (`1`: every discovered pod must report)",
            &mut errors,
        );
        let min_reporting_fraction =
            min_reporting_fraction.unwrap_or(DEFAULT_MIN_REPORTING_FRACTION);
        let model_name = md.text(keys::MODEL_NAME).map(str::to_owned);
        let metric_name = metric_name(&md, model_name.as_deref(), &mut errors);
        let mode = mode(&md, &mut errors);
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

        ip_family(&md, &mut errors);
        let latency = latency_guard(&md, &mut errors);
        let ttft = ttft_settings(&md, &mut errors);
        let kv_cache_target = number(
            &md,
            keys::KV_CACHE_TARGET,
            |v| v > 0.0 && v <= 1.0,
            "a fraction in (0, 1], e.g. `0.8`",
            &mut errors,
        );
        // The summed KV query feeds only the KV guard: without its target nothing polls it.
        // (Without `prometheusAddress` it is refused as every PromQL key is.)
        if !md.has(keys::KV_CACHE_TARGET)
            && md.has(keys::KV_CACHE_QUERY)
            && prometheus_declared(&md)
        {
            errors.push(conflict(
                keys::KV_CACHE_QUERY,
                "has no effect without `kvCacheTarget`",
            ));
        }
        let policy = policy(&md, &mut errors);
        let needs = Needs {
            running: running_per_replica.is_some(),
            ttft: latency.is_some(),
            kv_cache: kv_cache_target.is_some(),
            finished: matches!(policy, Policy::Capacity(p) if !p.learn_drain_rate),
        };

        let prometheus = prometheus_address(&md, &mut errors);
        // Which sources the trigger has is read from the keys present, not
        // from whether their values parsed: a source with a wrong value
        // reports its own error and must not also count as missing (a
        // second error naming a key the user never meant to set).
        let declared = Declared::of(&md);
        auth_profile(&md, &declared, &mut errors);
        let has_engine = declared.scrape || declared.prometheus;
        // `capacity` reads per-pod counters: scraped, or on the PromQL path
        // per-pod queries (docs/decisions/0024). A broker-only trigger has
        // no pods to learn from.
        let per_pod = matches!(policy, Policy::Capacity(_)) && has_engine;
        if matches!(policy, Policy::Capacity(_)) && !has_engine {
            errors.push(conflict(
                keys::POLICY,
                "`capacity` needs per-pod counters: set `vllmTargets`, or `prometheusAddress` (per-pod PromQL queries)",
            ));
        }
        // Scraped pods are read one by one under either policy; PromQL only under `capacity`.
        if md.has(keys::MIN_REPORTING_FRACTION) && !(declared.scrape || per_pod) {
            errors.push(conflict(
                keys::MIN_REPORTING_FRACTION,
                "counts the pods read per pod (`vllmTargets`, or `prometheusAddress` with `policy: capacity`); the summed PromQL path and brokers have no per-pod answers",
            ));
        }
        let engine_input = if declared.scrape || prometheus.is_some() || !declared.any() {
            // Also with no source key at all: it reports the one missing.
            engine_input(
                &md,
                engine,
                model_name,
                prometheus.as_ref(),
                needs,
                ttft,
                per_pod,
                &mut errors,
            )
        } else if declared.prometheus {
            // `prometheusAddress` (or its alias) is present but wrong, and
            // said so: the signals it would read have no address to check.
            None
        } else {
            // A broker-only trigger (an async worker fed by a queue):
            // engine-signal keys have nothing to read.
            refuse_promql_keys(&md, &mut errors);
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
        // `namespace` scopes the PromQL queries and the GPUs of `dcgmTargets`; without either it
        // would do nothing, and a user who set it believes it narrows something.
        if let Some((sent, value)) = md.get(keys::NAMESPACE)
            && !declared.prometheus
            && !md.has(keys::DCGM_TARGETS)
        {
            errors.push(invalid(
                sent,
                value,
                "a namespace for the PromQL queries (`prometheusAddress`) or the GPUs of `dcgmTargets`; this trigger reads neither, so it would do nothing: drop it",
            ));
        }
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
                min_reporting_fraction,
                mode,
            }),
            _ => Err(MetadataErrors(errors)),
        }
    }

    /// Every source this trigger reads, each becoming one shared poller.
    pub fn sources(&self) -> Vec<SourceSpec> {
        let mut sources = Vec::new();
        match &self.engine {
            None => {}
            Some(EngineInput::Scrape(source)) => {
                // A per-pod PromQL source carries its own credentials
                // profile (authorized at registration from the engine source).
                sources.push(SourceSpec::Engine(source.clone()));
            }
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

/// The sources a trigger's keys ask for, whether or not their values are valid.
struct Declared {
    /// `vllmTargets` is present.
    scrape: bool,
    /// `prometheusAddress` or its alias `serverAddress` is present.
    prometheus: bool,
    /// A broker's selecting key (`queueURL`, `bootstrapServers`, `rabbitmqHost`) is present.
    broker: bool,
}

impl Declared {
    fn of(md: &Metadata<'_>) -> Declared {
        Declared {
            scrape: md.has(keys::VLLM_TARGETS),
            prometheus: prometheus_declared(md),
            broker: [
                keys::QUEUE_URL,
                keys::BOOTSTRAP_SERVERS,
                keys::RABBITMQ_HOST,
            ]
            .iter()
            .any(|k| md.has(k)),
        }
    }

    fn any(&self) -> bool {
        self.scrape || self.prometheus || self.broker
    }
}

/// `authProfile`, where no broker parses it: refused on a trigger whose
/// sources send no credentials (the scrape path: `vllmTargets`,
/// `dcgmTargets`), where it would silently do nothing, and on the PromQL
/// path held to the name rules the broker path checks. With a broker the
/// broker parser checks it; with no source key at all the missing source is
/// the error.
fn auth_profile(md: &Metadata<'_>, declared: &Declared, errors: &mut Vec<MetadataError>) {
    let Some((sent, value)) = md.get(keys::AUTH_PROFILE) else {
        return;
    };
    if declared.broker || !declared.any() {
        return;
    }
    if !declared.prometheus {
        errors.push(invalid(
            sent,
            value,
            "names the credentials of a source that reads with a profile, `prometheusAddress` (or `serverAddress`) or a broker (`queueURL`, `bootstrapServers`, `rabbitmqHost`), and this trigger has none: the scrape path (`vllmTargets`, `dcgmTargets`) sends no credentials",
        ));
    } else if !valid_profile_name(value) {
        errors.push(invalid(sent, value, PROFILE_NAME));
    }
}

fn mode(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Mode {
    match md.get(keys::MODE) {
        None => Mode::Active,
        Some((_, raw)) if raw.eq_ignore_ascii_case("active") => Mode::Active,
        Some((_, raw)) if raw.eq_ignore_ascii_case("shadow") => Mode::Shadow,
        Some((sent, raw)) => {
            // A trigger copied from KEDA's rabbitmq scaler brings its `mode`,
            // which means what `value` counts there; say so instead of only
            // listing ours.
            let allowed = if raw.eq_ignore_ascii_case("QueueLength") {
                "`active` or `shadow` (whether the answers reach KEDA); KEDA's rabbitmq `mode` has no key here: the RabbitMQ source counts the queue's messages, so drop `mode` and write `targetBacklogPerReplica` = `value` × `messageWeight`"
            } else if raw.eq_ignore_ascii_case("MessageRate") {
                "`active` or `shadow` (whether the answers reach KEDA); KEDA's rabbitmq `mode: MessageRate` has no equivalent here: the RabbitMQ source counts the queue's messages, not a rate"
            } else {
                "`active` or `shadow`"
            };
            errors.push(invalid(sent, raw, allowed));
            Mode::Active
        }
    }
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
mod echo_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod promql_tests;
#[cfg(test)]
mod redaction_tests;
#[cfg(test)]
mod source_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod value_tests;
