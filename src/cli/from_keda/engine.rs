//! KEDA `prometheus` triggers whose query reads a vLLM gauge or the TTFT
//! histogram: which term of the fused trigger each becomes, and the engine
//! keys (`prometheusAddress`, the filter or queries, `runningPerReplica`,
//! `kvCacheTarget`, the latency guard).

use super::model::{Key, Old, number_text, strip_userinfo};
use super::promql::{Aggregation, Matcher, Shape, recognise};
use crate::source::Engine;
use crate::source::prometheus::DefaultQueries;
use crate::trigger::keys;

/// Which term a trigger becomes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Role {
    /// `W`, requests waiting.
    Waiting,
    /// `R`, requests running.
    Running,
    /// Mean KV-cache usage.
    KvCache,
    /// The TTFT quantile `L`.
    Ttft {
        /// Which quantile.
        quantile: f64,
        /// Its window, seconds.
        window_seconds: u64,
    },
}

/// One prometheus trigger, understood.
#[derive(Debug, Clone)]
pub struct Signal {
    /// The term.
    pub role: Role,
    /// Where it was, e.g. `spec.triggers[0] (prometheus)`.
    pub origin: String,
    /// KEDA's `threshold`.
    pub threshold: f64,
    /// KEDA's `activationThreshold` (default 0).
    pub activation: f64,
    /// The label matchers of its series (vLLM's `reason="capacity"` left out).
    pub filter: Vec<Matcher>,
    /// The query as written.
    pub query: String,
    /// `AverageValue` or `Value`.
    pub metric_type: String,
    /// `serverAddress`, credentials left out.
    pub address: String,
}

/// What the prometheus triggers that were understood become.
#[derive(Debug, Default)]
pub struct EnginePart {
    /// One per term; a second trigger for a term is not carried.
    pub waiting: Option<Signal>,
    /// `R`.
    pub running: Option<Signal>,
    /// KV usage.
    pub kv_cache: Option<Signal>,
    /// TTFT.
    pub ttft: Option<Signal>,
}

/// Understand one prometheus trigger, or say why it cannot be carried over.
pub fn classify(old: &Old) -> Result<Signal, String> {
    let query = old
        .get("query")
        .ok_or("has no `query`: nothing to read".to_owned())?;
    let address = old
        .get("serverAddress")
        .ok_or("has no `serverAddress`".to_owned())?;
    let threshold = positive(old, "threshold")?;
    let activation = match old.get("activationThreshold") {
        None => 0.0,
        Some(raw) => raw
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or(format!("`activationThreshold: {raw}` is not a number ≥ 0"))?,
    };
    let metric_type = old.metric_type.clone();
    let names = Engine::Vllm.metrics();
    let shape = recognise(query).ok_or_else(|| {
        if query.contains("vllm") {
            format!(
                "query `{query}` reads vLLM but is not a shape this tool interprets (an aggregated `vllm:num_requests_waiting`, `…_running` or KV gauge, or a `histogram_quantile` of the TTFT buckets)"
            )
        } else {
            format!("query `{query}` reads no vLLM signal this scaler fuses")
        }
    })?;
    let shape_of = |role: &str| format!("{role} with metricType {metric_type}");
    let (role, filter) = match shape {
        Shape::Gauge(aggregation, selector) => {
            let mut filter = selector.matchers.clone();
            let role = if selector.is(names.waiting) {
                Role::Waiting
            } else if let Some(preferred) = names.waiting_preferred
                && selector.is(preferred.family)
            {
                let before = filter.len();
                filter.retain(|m| {
                    !(m.label == preferred.label && m.op == "=" && m.value == preferred.value)
                });
                if before == filter.len() {
                    return Err(format!(
                        "query `{query}` reads `{}` without `{}=\"{}\"`: other reasons (LoRA budget, KV transfer) are not work more replicas serve",
                        preferred.family, preferred.label, preferred.value
                    ));
                }
                Role::Waiting
            } else if names.running.is_some_and(|r| selector.is(r)) {
                Role::Running
            } else if names.kv_cache.iter().any(|k| selector.is(k)) {
                Role::KvCache
            } else {
                return Err(format!(
                    "query `{query}` reads `{}`, not a signal this scaler fuses",
                    selector.metric
                ));
            };
            // Which aggregation, with which metricType, asks for the same
            // replicas as one per-replica target: sum/AverageValue divides
            // by T; avg/Value multiplies the current count by avg/T, the same.
            let per_replica = matches!(
                (aggregation, metric_type.as_str()),
                (Aggregation::Sum | Aggregation::None, "AverageValue")
                    | (Aggregation::Avg, "Value")
            );
            if !per_replica {
                return Err(format!(
                    "query `{query}` as {}: only a sum with AverageValue or an average with Value is a per-replica target this scaler can carry",
                    shape_of("this aggregation")
                ));
            }
            (role, filter)
        }
        Shape::Quantile {
            quantile,
            buckets,
            window_seconds,
        } => {
            let family = names.ttft.map(|h| format!("{}_bucket", h.family));
            if !family.as_deref().is_some_and(|f| buckets.is(f)) {
                return Err(format!(
                    "query `{query}` is a quantile of `{}`, not of vLLM's TTFT histogram",
                    buckets.metric
                ));
            }
            (
                Role::Ttft {
                    quantile,
                    window_seconds,
                },
                buckets.matchers,
            )
        }
    };
    Ok(Signal {
        role,
        origin: old.origin.clone(),
        threshold,
        activation,
        filter,
        query: query.to_owned(),
        metric_type,
        address: strip_userinfo(address).0,
    })
}

fn positive(old: &Old, key: &str) -> Result<f64, String> {
    let raw = old.get(key).ok_or(format!("has no `{key}`"))?;
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or(format!("`{key}: {raw}` is not a number > 0"))
}

impl EnginePart {
    /// Every signal carried, in term order.
    pub fn signals(&self) -> Vec<&Signal> {
        [&self.waiting, &self.running, &self.kv_cache, &self.ttft]
            .into_iter()
            .flatten()
            .collect()
    }

    /// Take `signal` into its term; `Err` when the term is taken or the
    /// trigger reads another Prometheus.
    pub fn add(&mut self, signal: Signal) -> Result<(), String> {
        if let Some(first) = self.signals().first()
            && first.address != signal.address
        {
            return Err(format!(
                "reads Prometheus `{}`, and {} reads `{}`: one trigger reads one Prometheus",
                signal.address, first.origin, first.address
            ));
        }
        let slot = match signal.role {
            Role::Waiting => &mut self.waiting,
            Role::Running => &mut self.running,
            Role::KvCache => &mut self.kv_cache,
            Role::Ttft { .. } => &mut self.ttft,
        };
        if let Some(taken) = slot {
            return Err(format!(
                "reads the same signal as {}, already carried",
                taken.origin
            ));
        }
        *slot = Some(signal);
        Ok(())
    }

    /// The engine keys, given the fused trigger's `T`.
    pub fn keys(&self, target: f64) -> Vec<Key> {
        let signals = self.signals();
        let Some(first) = signals.first() else {
            return Vec::new();
        };
        let mut out = vec![Key::new(
            keys::PROMETHEUS_ADDRESS,
            &first.address,
            format!(
                "{}: its serverAddress; every signal is read from the same Prometheus with instant queries",
                first.origin
            ),
        )];
        // The filter every default query gets, when the triggers agree on
        // one that the keys can say (`modelName`, `namespace`); otherwise
        // each query is written out with its trigger's own matchers.
        let simple = |f: &[Matcher]| {
            f.iter()
                .all(|m| m.op == "=" && (m.label == "model_name" || m.label == "namespace"))
        };
        let same = signals.iter().all(|s| s.filter == first.filter);
        let base = self.waiting.as_ref().unwrap_or(first);
        if same && simple(&first.filter) {
            for m in &first.filter {
                let key = if m.label == "model_name" {
                    keys::MODEL_NAME
                } else {
                    keys::NAMESPACE
                };
                out.push(Key::new(
                    key,
                    &m.value,
                    format!(
                        "the `{}` matcher of {}'s query; every default query filters on it{}",
                        m.promql(),
                        first.origin,
                        if key == keys::MODEL_NAME {
                            " (and it names the metric `backlog-<model>`)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            let defaults = DefaultQueries::new(
                Engine::Vllm,
                first
                    .filter
                    .iter()
                    .find(|m| m.label == "model_name")
                    .map(|m| m.value.as_str()),
                first
                    .filter
                    .iter()
                    .find(|m| m.label == "namespace")
                    .map(|m| m.value.as_str()),
            );
            // No summed query key is written, so the trigger gets the
            // default `capacity` policy, read per pod (docs/decisions/0024).
            if let Some(w) = &self.waiting {
                out.push(Key::explained(format!(
                    "W: {}'s `{}` is read per pod by the default podWaitingQuery `{}` (from vLLM 0.33, requests waiting for capacity only)",
                    w.origin,
                    w.query,
                    defaults.pod_waiting("pod")
                )));
            }
            out.push(Key::explained(format!(
                "policy: the default `capacity` (no summed query key is set): the arrival rate from each pod's finished counter `{}` and its gauges, μ learned from them; the engine series need a `pod` label (a PodMonitor or the usual kubernetes_sd relabelling writes it; set `podLabel` if yours differs, or `policy: backlog` for the summed queries)",
                defaults.pod_finished("pod")
            )));
        } else {
            let queries = |s: &Signal| DefaultQueries {
                selector: s
                    .filter
                    .iter()
                    .map(Matcher::promql)
                    .collect::<Vec<_>>()
                    .join(","),
                engine: Engine::Vllm,
            };
            let why = |s: &Signal| {
                format!(
                    "{}'s query `{}`, with its matchers, summed as the scaler sums (the triggers' filters differ or go beyond modelName/namespace)",
                    s.origin, s.query
                )
            };
            out.push(Key::new(
                keys::WAITING_QUERY,
                &queries(base).waiting(),
                match &self.waiting {
                    Some(w) => why(w),
                    None => format!(
                        "W is always read; with {}'s matchers (no trigger read it before)",
                        base.origin
                    ),
                },
            ));
            if let Some(r) = &self.running
                && let Some(q) = queries(r).running()
            {
                out.push(Key::new(keys::RUNNING_QUERY, &q, why(r)));
            }
            if let Some(kv) = &self.kv_cache
                && let Some(q) = queries(kv).kv_cache()
            {
                out.push(Key::new(keys::KV_CACHE_QUERY, &q, why(kv)));
            }
            if let Some(t) = &self.ttft {
                out.push(Key::new(
                    keys::TTFT_QUERY,
                    &t.query,
                    format!("{}'s query as written: one series, seconds", t.origin),
                ));
            }
            out.push(Key::new(
                keys::REPLICAS_QUERY,
                &queries(base).replicas(),
                format!(
                    "n, the pods reporting, counted with {}'s matchers (the latency, KV and GPU terms scale with n)",
                    base.origin
                ),
            ));
        }
        if let Some(r) = &self.running {
            out.push(Key::new(
                keys::RUNNING_PER_REPLICA,
                &number_text(r.threshold),
                format!(
                    "C = {}'s threshold {} (running requests per replica, {}): running work joins B as T·R/C, so R alone asks ceil(R/C) replicas as before, and waiting and running now add up instead of the HPA taking the larger",
                    r.origin,
                    number_text(r.threshold),
                    r.metric_type
                ),
            ));
        }
        if let Some(kv) = &self.kv_cache {
            out.push(Key::new(
                keys::KV_CACHE_TARGET,
                &number_text(kv.threshold),
                format!(
                    "{}'s threshold {}: D_kv = T·n·kv/kvCacheTarget asks n·kv/{} replicas, what its {} target asked",
                    kv.origin,
                    number_text(kv.threshold),
                    number_text(kv.threshold),
                    kv.metric_type
                ),
            ));
        }
        if let Some(t) = &self.ttft {
            self.ttft_keys(t, target, same && simple(&first.filter), &mut out);
        }
        out
    }

    fn ttft_keys(&self, t: &Signal, target: f64, defaults: bool, out: &mut Vec<Key>) {
        let Role::Ttft {
            quantile,
            window_seconds,
        } = t.role
        else {
            return;
        };
        let old_rule = if t.metric_type == "Value" {
            format!(
                "the old Value target asked ceil(n·L/{}) replicas whenever it fired",
                number_text(t.threshold)
            )
        } else {
            format!(
                "the old AverageValue target asked ceil(L/{}) replicas, a count without a per-replica meaning",
                number_text(t.threshold)
            )
        };
        out.push(Key::new(
            keys::TTFT_SLO_SECONDS,
            &number_text(t.threshold),
            format!(
                "S = {}'s threshold {} s on the TTFT p{}: the latency guard T·n·min(L/S, 2) joins B while work waits and L > S·(1 + ttftTolerance) (T = {}); {old_rule}; the guard is gated on waiting work and clamped at 2× so a stale window cannot multiply a scale-up",
                t.origin,
                number_text(t.threshold),
                number_text(quantile * 100.0),
                number_text(target)
            ),
        ));
        out.push(Key::new(
            keys::TTFT_TOLERANCE,
            "0.1",
            "the band above S in which the guard stays silent; 0.1 is the HPA's own default tolerance, so the old trigger was as quiet within 10 %".to_owned(),
        ));
        if defaults {
            // The default ttftQuery over the nearest window the key allows:
            // writing the old query as `ttftQuery` would set a summed query
            // key and make the trigger `policy: backlog`, not the default
            // `capacity` this migration says it gets.
            let window = window_seconds.clamp(10, 900);
            out.push(Key::new(
                keys::TTFT_QUANTILE,
                &number_text(quantile),
                format!("the quantile of {}'s histogram_quantile", t.origin),
            ));
            out.push(Key::new(
                keys::TTFT_WINDOW_SECONDS,
                &window.to_string(),
                if window == window_seconds {
                    format!(
                        "the rate window of {}'s query, in seconds; the default ttftQuery reads the same buckets over it",
                        t.origin
                    )
                } else {
                    format!(
                        "{}'s query has a {window_seconds} s rate window, outside ttftWindowSeconds' 10–900: the nearest, {window} s, is used (the guard reads the recent latency; a window of hours says little about now)",
                        t.origin
                    )
                },
            ));
        }
    }
}
