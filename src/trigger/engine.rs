//! Where the engine signals `W`, `R`, `n`, TTFT and KV come from: a direct
//! scrape (`vllmTargets`) or PromQL (`prometheusAddress`).

use reqwest::Url;

use super::error::{MetadataError, Redacted, conflict, invalid};
use super::keys;
use super::latency::TtftSettings;
use super::values::{Metadata, targets};
use crate::source::http::ScrapeTarget;
use crate::source::prometheus::{Answer, DefaultQueries, PodQueries};
use crate::source::{Engine, EngineSource, PromQuery, RequiredSignals};

/// How engine signals are read.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineInput {
    /// Per pod: scraped directly (`vllmTargets`), or with `policy:
    /// capacity` read through per-pod PromQL queries
    /// ([`EngineSource::prometheus`]); the decision reads both alike.
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

/// Which optional engine signals the trigger uses.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    /// `runningPerReplica` is set.
    pub running: bool,
    /// The latency guard is on.
    pub ttft: bool,
    /// `kvCacheTarget` is set.
    pub kv_cache: bool,
    /// `policy: capacity` with `learnDrainRate: false`: every pod's
    /// finished-requests counter.
    pub finished: bool,
}

impl Needs {
    /// What every pod of an engine source must expose for these needs. Not
    /// the TTFT histogram: a pod without one is "no samples" for the
    /// latency guard, not a failed pod.
    fn of_pods(self) -> RequiredSignals {
        RequiredSignals {
            running: self.running,
            kv_cache: self.kv_cache,
            finished: self.finished,
        }
    }
}

/// True when `prometheusAddress` or its alias `serverAddress` is present,
/// valid or not (a wrong one is reported by [`prometheus_address`]).
pub fn prometheus_declared(md: &Metadata<'_>) -> bool {
    md.has(keys::PROMETHEUS_ADDRESS) || md.has(keys::SERVER_ADDRESS)
}

/// `prometheusAddress` (or its alias `serverAddress`), validated.
pub fn prometheus_address(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Option<Url> {
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
        .filter(|u| u.port() != Some(0))
        .filter(|_| {
            !raw.split_once("://")
                .is_some_and(|(_, rest)| rest.starts_with('/'))
        })
        // The URL parser percent-encodes a space, so `… Bearer x` would be
        // accepted and shown encoded; refused as the scrape targets are.
        .filter(|_| !raw.chars().any(|c| c.is_whitespace() || c.is_control()));
    if valid.is_none() {
        errors.push(invalid(
            sent,
            raw,
            "an http(s)://HOST:PORT URL of a Prometheus API (a port other than 0), without credentials or spaces",
        ));
    }
    valid
}

/// The summed PromQL keys of `policy: backlog`, and what `policy:
/// capacity` reads instead.
pub const SUMMED_QUERIES: [(&str, &str); 5] = [
    (keys::WAITING_QUERY, "`podWaitingQuery`"),
    (keys::RUNNING_QUERY, "`podRunningQuery`"),
    (keys::KV_CACHE_QUERY, "`podKvCacheQuery`"),
    (keys::TTFT_QUERY, "the TTFT buckets per pod (no override)"),
    (
        keys::REPLICAS_QUERY,
        "the pods its answers name (no override)",
    ),
];

/// The per-pod PromQL keys of `policy: capacity`.
pub const POD_QUERY_KEYS: [&str; 7] = [
    keys::POD_LABEL,
    keys::POD_WAITING_QUERY,
    keys::POD_RUNNING_QUERY,
    keys::POD_FINISHED_QUERY,
    keys::POD_GENERATION_TOKENS_QUERY,
    keys::POD_PROMPT_TOKENS_QUERY,
    keys::POD_KV_CACHE_QUERY,
];

/// The engine input the keys select, each needed query built (from its key
/// or the engine's default). `per_pod`: the policy needs per-pod counters
/// (`capacity`), so the PromQL path asks per-pod vectors.
#[allow(clippy::too_many_arguments)]
pub fn engine_input(
    md: &Metadata<'_>,
    engine: Engine,
    model_name: Option<String>,
    prometheus: Option<&Url>,
    needs: Needs,
    ttft: TtftSettings,
    per_pod: bool,
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
        // The GPU signal is scraped too: the address would serve nothing.
        (true, Some(_)) if md.has(keys::DCGM_TARGETS) => {
            errors.push(conflict(
                keys::PROMETHEUS_ADDRESS,
                "is read by nothing: `vllmTargets` scrapes the engine signals and `dcgmTargets` the GPU's; remove it (and an `authProfile` for it)",
            ));
            None
        }
        (true, _) => {
            refuse_promql_keys(md, errors);
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
                prometheus: None,
                requires: needs.of_pods(),
            }))
        }
        (false, Some(address)) if per_pod => {
            pod_queries(md, engine, model_name, address, needs, errors)
        }
        (false, Some(address)) => {
            for key in POD_QUERY_KEYS {
                if md.has(key) {
                    errors.push(conflict(
                        key,
                        "only applies to `policy: capacity` on the PromQL path (`policy: backlog` reads summed queries)",
                    ));
                }
            }
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
                        // The answer each signal reads (docs/decisions/0006).
                        answer: match key {
                            keys::WAITING_QUERY | keys::RUNNING_QUERY => Answer::Summed(key),
                            keys::REPLICAS_QUERY => Answer::Count(key),
                            keys::TTFT_QUERY => Answer::Quantile(key),
                            keys::KV_CACHE_QUERY => Answer::Fraction(key),
                            _ => Answer::Value(key),
                        },
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

/// `policy: capacity` on the PromQL path: the per-pod queries (each from
/// its key or the engine's default), read as one engine source whose pods
/// the decision treats exactly as scraped ones (docs/decisions/0024).
fn pod_queries(
    md: &Metadata<'_>,
    engine: Engine,
    model_name: Option<String>,
    address: &Url,
    needs: Needs,
    errors: &mut Vec<MetadataError>,
) -> Option<EngineInput> {
    for (key, instead) in SUMMED_QUERIES {
        if md.has(key) {
            errors.push(conflict(
                key,
                format!(
                    "is a summed query of `policy: backlog`; `policy: capacity` reads PromQL per pod: use {instead}, or set `policy: backlog`"
                ),
            ));
        }
    }
    let pod_label = match md.get(keys::POD_LABEL) {
        None => "pod".to_owned(),
        Some((_, raw)) if is_label_name(raw) && !matches!(raw, "namespace" | "le") => {
            raw.to_owned()
        }
        Some((sent, raw)) => {
            errors.push(invalid(
                sent,
                raw,
                "a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not `namespace` or `le`) naming the pod in the answers, e.g. `pod` or `kubernetes_pod_name`",
            ));
            return None;
        }
    };
    let defaults = DefaultQueries::new(engine, model_name.as_deref(), md.text(keys::NAMESPACE));
    let text = |key: &'static str, default: Option<String>, errors: &mut Vec<MetadataError>| {
        match md.get(key) {
            Some((sent, raw)) if raw.trim().is_empty() => {
                errors.push(invalid(
                    sent,
                    raw,
                    format!(
                        "a PromQL expression returning one series per pod, each with its `{}` label",
                        Redacted::new(&pod_label)
                    ),
                ));
                None
            }
            Some((_, raw)) => Some(raw.to_owned()),
            None => default,
        }
    };
    let waiting = text(
        keys::POD_WAITING_QUERY,
        Some(defaults.pod_waiting(&pod_label)),
        errors,
    );
    let running = text(
        keys::POD_RUNNING_QUERY,
        defaults.pod_running(&pod_label),
        errors,
    );
    let finished = text(
        keys::POD_FINISHED_QUERY,
        Some(defaults.pod_finished(&pod_label)),
        errors,
    );
    let generation_tokens = text(
        keys::POD_GENERATION_TOKENS_QUERY,
        defaults.pod_generation_tokens(&pod_label),
        errors,
    );
    let prompt_tokens = text(
        keys::POD_PROMPT_TOKENS_QUERY,
        defaults.pod_prompt_tokens(&pod_label),
        errors,
    );
    let kv_cache = text(
        keys::POD_KV_CACHE_QUERY,
        defaults.pod_kv_cache(&pod_label),
        errors,
    );
    let unsupported = |key: &'static str, what: &str, instead: &str| {
        conflict(
            key,
            format!(
                "needs {what}, which engine `{engine}` does not expose; set {instead} or `policy: backlog` with a summed query"
            ),
        )
    };
    if needs.running && running.is_none() {
        errors.push(unsupported(
            keys::RUNNING_PER_REPLICA,
            "a running-requests gauge",
            "`podRunningQuery`",
        ));
    }
    if needs.kv_cache && kv_cache.is_none() {
        errors.push(unsupported(
            keys::KV_CACHE_TARGET,
            "a KV-cache usage gauge",
            "`podKvCacheQuery`",
        ));
    }
    let ttft = if needs.ttft {
        let buckets = defaults.pod_ttft(&pod_label);
        if buckets.is_none() {
            errors.push(conflict(
                keys::TTFT_SLO_SECONDS,
                format!(
                    "needs a TTFT histogram, which engine `{engine}` does not expose; set `policy: backlog` with `ttftQuery`"
                ),
            ));
        }
        buckets
    } else {
        None
    };
    let queries = PodQueries {
        address: address.clone(),
        auth_profile: md.text(keys::AUTH_PROFILE).map(str::to_owned),
        pod_label,
        waiting: waiting?,
        running,
        finished: finished?,
        generation_tokens,
        prompt_tokens,
        kv_cache,
        ttft,
    };
    Some(EngineInput::Scrape(EngineSource {
        engine,
        // Only for the outbound check and the label: the reads go through
        // `prometheus`.
        targets: vec![ScrapeTarget::Static(address.clone())],
        model_name,
        prometheus: Some(Box::new(queries)),
        requires: needs.of_pods(),
    }))
}

/// Each engine PromQL key present, on a trigger without `prometheusAddress`
/// (it scrapes `vllmTargets`, or reads only a broker): refused, as nothing
/// would read it.
pub fn refuse_promql_keys(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) {
    let summed = SUMMED_QUERIES.iter().map(|(key, _)| *key);
    for key in summed.chain(POD_QUERY_KEYS) {
        if let Some((sent, value)) = md.get(key) {
            errors.push(invalid(sent, value, needs_prometheus(key)));
        }
    }
}

/// Why a PromQL key does nothing without `prometheusAddress`.
pub fn needs_prometheus(key: &str) -> &'static str {
    if key == keys::POD_LABEL {
        "names the pod's label in the per-pod PromQL answers, which needs `prometheusAddress` (with `policy: capacity`)"
    } else {
        "a PromQL query, which needs `prometheusAddress`"
    }
}

/// A Prometheus label name.
fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
