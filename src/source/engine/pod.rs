//! The engine source: scrape every inference pod's `/metrics` and keep, per
//! pod, what the fusion needs: requests waiting (`W`) and running (`R`), KV
//! cache usage, and the TTFT histogram's cumulative buckets.
//!
//! One source serves vLLM, SGLang, Triton and TGI: [`Engine`] maps each
//! signal to that server's own metric names (shared/reference/signals.md).
//! Per-pod readings are kept (not only sums) so `/explain` can show where a
//! number came from, and so the TTFT window can take per-pod deltas.
//!
//! A reading is all-or-nothing: every discovered pod must answer. Summing the
//! pods that did answer would under-count a busy fleet exactly when pods are
//! struggling; the poller holds the last complete reading instead
//! (docs/decisions/0002).

use std::collections::BTreeMap;
use std::fmt;

use reqwest::Url;
use serde::Serialize;
use tokio::task::JoinSet;

use super::http::ScrapeTarget;
use super::{SourceContext, SourceError, prom_text};

/// Which inference server the pods run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// vLLM (V1 and V0 metric names).
    #[default]
    Vllm,
    /// SGLang (`--enable-metrics`).
    Sglang,
    /// NVIDIA Triton Inference Server (metrics port 8002).
    Triton,
    /// Hugging Face text-generation-inference.
    Tgi,
}

/// A histogram family and the factor that turns its bounds into seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramName {
    /// Family name; samples are `<name>_bucket`.
    pub family: &'static str,
    /// Multiply `le` by this to get seconds (Triton reports milliseconds).
    pub to_seconds: f64,
}

/// Where each signal lives in one engine's exposition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineMetrics {
    /// Gauge of requests waiting (`W`).
    pub waiting: &'static str,
    /// Gauge of requests running (`R`), if the engine has one.
    pub running: Option<&'static str>,
    /// KV-cache usage gauges as a 0–1 fraction, newest name first.
    pub kv_cache: &'static [&'static str],
    /// Time-to-first-token histogram, if the engine has one.
    pub ttft: Option<HistogramName>,
    /// Label carrying the served model's name, if any.
    pub model_label: Option<&'static str>,
    /// Counters of finished requests (all outcomes), summed: `F` of the
    /// capacity policy.
    pub finished: &'static [&'static str],
    /// Labels whose series repeat one value per rank (SGLang reports every
    /// scheduler gauge once per tensor- and pipeline-parallel rank): only
    /// rank "0" is read, so TP=4 does not count the queue four times.
    pub rank_labels: &'static [&'static str],
}

impl Engine {
    /// Parse a metadata value.
    pub fn parse(value: &str) -> Option<Engine> {
        match value.to_ascii_lowercase().as_str() {
            "vllm" => Some(Engine::Vllm),
            "sglang" => Some(Engine::Sglang),
            "triton" => Some(Engine::Triton),
            "tgi" => Some(Engine::Tgi),
            _ => None,
        }
    }

    /// The engine's metric names.
    pub fn metrics(self) -> EngineMetrics {
        match self {
            Engine::Vllm => EngineMetrics {
                waiting: "vllm:num_requests_waiting",
                running: Some("vllm:num_requests_running"),
                // Renamed in 0.9.2; older servers only have the second.
                kv_cache: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
                ttft: Some(HistogramName {
                    family: "vllm:time_to_first_token_seconds",
                    to_seconds: 1.0,
                }),
                model_label: Some("model_name"),
                finished: &["vllm:request_success_total"],
                rank_labels: &[],
            },
            Engine::Sglang => EngineMetrics {
                waiting: "sglang:num_queue_reqs",
                running: Some("sglang:num_running_reqs"),
                kv_cache: &["sglang:token_usage"],
                ttft: Some(HistogramName {
                    family: "sglang:time_to_first_token_seconds",
                    to_seconds: 1.0,
                }),
                model_label: Some("model_name"),
                finished: &["sglang:num_requests_total"],
                rank_labels: &["tp_rank", "pp_rank"],
            },
            Engine::Triton => EngineMetrics {
                waiting: "nv_inference_pending_request_count",
                running: None,
                kv_cache: &[],
                ttft: Some(HistogramName {
                    family: "nv_inference_first_response_histogram_ms",
                    to_seconds: 0.001,
                }),
                model_label: Some("model"),
                finished: &[
                    "nv_inference_request_success",
                    "nv_inference_request_failure",
                ],
                rank_labels: &[],
            },
            Engine::Tgi => EngineMetrics {
                waiting: "tgi_queue_size",
                running: Some("tgi_batch_current_size"),
                kv_cache: &[],
                ttft: None,
                model_label: None,
                finished: &["tgi_request_success", "tgi_request_failure"],
                rank_labels: &[],
            },
        }
    }

    /// The metadata spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Triton => "triton",
            Engine::Tgi => "tgi",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identity of an engine source: which pods, which engine, which model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EngineSource {
    /// The server the pods run (`engine`).
    pub engine: Engine,
    /// Targets to scrape (`vllmTargets`).
    pub targets: Vec<ScrapeTarget>,
    /// Only series with this model label count (`modelName`).
    pub model_name: Option<String>,
}

/// Cumulative bucket counts of one histogram on one pod, bounds in seconds,
/// ascending, the last one `+Inf`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Buckets {
    /// Upper bounds in seconds (`le`), ascending; the last is `+Inf`.
    #[serde(serialize_with = "serialize_bounds")]
    pub bounds: Vec<f64>,
    /// Cumulative counts per bound.
    pub counts: Vec<f64>,
}

fn serialize_bounds<S: serde::Serializer>(bounds: &[f64], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(bounds.len()))?;
    for b in bounds {
        if b.is_finite() {
            seq.serialize_element(b)?;
        } else {
            seq.serialize_element("+Inf")?;
        }
    }
    seq.end()
}

impl Buckets {
    /// Total observations (the `+Inf` bucket).
    pub fn total(&self) -> f64 {
        self.counts.last().copied().unwrap_or(0.0)
    }
}

/// One pod's signals.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReading {
    /// The URL scraped.
    pub target: String,
    /// Requests waiting, summed over the pod's engines / data-parallel ranks.
    pub waiting: f64,
    /// Requests running, if the engine reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    /// KV-cache usage 0–1 (mean over the pod's engines), if reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<f64>,
    /// TTFT histogram, if the engine has one and it has series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Buckets>,
    /// Finished requests since the pod started (all outcomes), if exposed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_total: Option<f64>,
}

/// One reading of every pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineReading {
    /// The engine the pods run.
    pub engine: Engine,
    /// One entry per pod, sorted by target.
    pub pods: Vec<PodReading>,
    /// Lines skipped as malformed, over all pods.
    pub malformed_lines: usize,
    /// `dns+` targets whose name answered "no addresses": zero pods if the
    /// trigger also reads a broker, a lost signal otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub empty_discovery: Vec<String>,
}

impl EngineReading {
    /// `W`, summed over pods.
    pub fn waiting(&self) -> f64 {
        self.pods.iter().map(|p| p.waiting).sum()
    }

    /// `R`, summed over pods; `None` if any pod lacks it.
    pub fn running(&self) -> Option<f64> {
        self.pods.iter().map(|p| p.running).sum()
    }

    /// Mean KV-cache usage over pods; `None` if any pod lacks it or there
    /// are no pods.
    pub fn kv_cache_usage(&self) -> Option<f64> {
        if self.pods.is_empty() {
            return None;
        }
        let total: Option<f64> = self.pods.iter().map(|p| p.kv_cache_usage).sum();
        total.map(|t| t / self.pods.len() as f64)
    }
}

impl EngineSource {
    /// A short label: the engine, the first target and how many more.
    pub fn label(&self) -> String {
        let first = self
            .targets
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut label = format!("{} {first}", self.engine);
        if self.targets.len() > 1 {
            label.push_str(&format!(" +{}", self.targets.len() - 1));
        }
        if let Some(model) = &self.model_name {
            label.push_str(&format!(" model={model}"));
        }
        label
    }

    /// Resolve targets, scrape all pods concurrently, parse each.
    pub async fn read(&self, ctx: &SourceContext) -> Result<EngineReading, SourceError> {
        let discovered = resolve_all(&self.targets, ctx).await?;
        let bodies = scrape_all(ctx, discovered.urls, &self.label()).await?;
        let mut pods = Vec::with_capacity(bodies.len());
        let mut malformed_lines = 0;
        for (url, body) in bodies {
            let (pod, malformed) = self.parse_pod(url.as_str(), &body)?;
            pods.push(pod);
            malformed_lines += malformed;
        }
        Ok(EngineReading {
            engine: self.engine,
            pods,
            malformed_lines,
            empty_discovery: discovered.empty_names,
        })
    }

    /// Extract one pod's signals from its exposition text.
    pub fn parse_pod(&self, target: &str, body: &str) -> Result<(PodReading, usize), SourceError> {
        let names = self.engine.metrics();
        let ttft_bucket = names.ttft.map(|h| format!("{}_bucket", h.family));
        let mut waiting = Gauge::default();
        let mut running = Gauge::default();
        let mut finished = Gauge::default();
        let mut kv = Gauge::default();
        let mut kv_name_used: Option<&'static str> = None;
        let mut ttft: BTreeMap<OrderedBound, f64> = BTreeMap::new();
        let mut ttft_bad = None;
        let stats = prom_text::parse(
            body,
            |name| match_family(&names, ttft_bucket.as_deref(), name).is_some(),
            |sample| {
                let Some(family) = match_family(&names, ttft_bucket.as_deref(), sample.name) else {
                    return;
                };
                if let (Some(label), Some(model)) = (names.model_label, &self.model_name)
                    && sample.label(label).as_deref() != Some(model.as_str())
                {
                    return;
                }
                if names
                    .rank_labels
                    .iter()
                    .any(|l| sample.label(l).is_some_and(|rank| rank != "0"))
                {
                    return;
                }
                match family {
                    Family::Waiting => waiting.add(sample.value),
                    Family::Running => running.add(sample.value),
                    Family::Finished => finished.add(sample.value),
                    Family::Kv(name) => {
                        // Prefer the newest name; ignore the deprecated one
                        // when both are exposed during a migration.
                        match kv_name_used {
                            Some(used) if used != name => {
                                if names.kv_cache.iter().position(|n| *n == name)
                                    < names.kv_cache.iter().position(|n| *n == used)
                                {
                                    kv = Gauge::default();
                                    kv_name_used = Some(name);
                                    kv.add(sample.value);
                                }
                            }
                            _ => {
                                kv_name_used = Some(name);
                                kv.add(sample.value);
                            }
                        }
                    }
                    Family::TtftBucket => {
                        let Some(le) = sample.label("le") else {
                            return;
                        };
                        let scale = names.ttft.map_or(1.0, |h| h.to_seconds);
                        match parse_le(&le) {
                            Some(bound) if sample.value.is_finite() && sample.value >= 0.0 => {
                                let key = OrderedBound(if bound.is_finite() {
                                    bound * scale
                                } else {
                                    bound
                                });
                                *ttft.entry(key).or_insert(0.0) += sample.value;
                            }
                            _ => {
                                ttft_bad
                                    .get_or_insert(format!("le=\"{le}\" value {}", sample.value));
                            }
                        }
                    }
                }
            },
        );
        let parse_error = |reason: String| SourceError::Parse {
            target: target.to_owned(),
            reason,
        };
        let model_note = match (names.model_label, &self.model_name) {
            (Some(label), Some(m)) => format!(" with {label}=\"{m}\""),
            _ => String::new(),
        };
        let mut malformed_note = String::new();
        if stats.malformed_lines > 0
            && let Some(first) = &stats.first_error
        {
            malformed_note = format!(
                " ({} malformed lines, first at {first})",
                stats.malformed_lines
            );
        }
        let waiting = waiting
            .total(names.waiting)
            .map_err(parse_error)?
            .ok_or_else(|| {
                parse_error(format!(
                    "no {} sample{model_note}{malformed_note}",
                    names.waiting
                ))
            })?;
        let running = match names.running {
            Some(name) => running.total(name).map_err(parse_error)?,
            None => None,
        };
        let finished_total = finished
            .total(names.finished.first().copied().unwrap_or("finished"))
            .map_err(parse_error)?;
        let kv_cache_usage = match kv_name_used {
            Some(name) => kv.mean(name).map_err(parse_error)?,
            None => None,
        };
        if let Some(bad) = ttft_bad {
            return Err(parse_error(format!(
                "TTFT histogram has a bad bucket: {bad}"
            )));
        }
        let ttft = buckets_from(ttft).map_err(parse_error)?;
        Ok((
            PodReading {
                target: target.to_owned(),
                waiting,
                running,
                kv_cache_usage,
                ttft,
                finished_total,
            },
            stats.malformed_lines,
        ))
    }
}

/// Resolve every target to the URLs to scrape now, deduplicated. `dns+`
/// addresses are checked against the outbound allowlist here, so a refusal
/// names the DNS name it came from.
pub async fn resolve_all(
    targets: &[ScrapeTarget],
    ctx: &SourceContext,
) -> Result<Discovered, SourceError> {
    let mut discovered = Discovered::default();
    for target in targets {
        let urls = target.resolve_checked(&ctx.outbound).await?;
        if urls.is_empty() {
            discovered.empty_names.push(target.to_string());
        }
        discovered.urls.extend(urls);
    }
    discovered.urls.sort();
    discovered.urls.dedup();
    Ok(discovered)
}

/// What target resolution found.
#[derive(Debug, Default)]
pub struct Discovered {
    /// The URLs to scrape.
    pub urls: Vec<Url>,
    /// `dns+` targets whose name has no addresses (NXDOMAIN or no records).
    pub empty_names: Vec<String>,
}

/// GET every URL concurrently; the first failure fails the whole reading.
pub async fn scrape_all(
    ctx: &SourceContext,
    urls: Vec<Url>,
    label: &str,
) -> Result<Vec<(Url, String)>, SourceError> {
    let mut scrapes = JoinSet::new();
    for url in urls {
        let http = ctx.http.clone();
        scrapes.spawn(async move {
            let body = http.get_text(&url).await;
            (url, body)
        });
    }
    let mut bodies = Vec::new();
    let mut first_error = None;
    while let Some(joined) = scrapes.join_next().await {
        match joined {
            Ok((url, Ok(body))) => bodies.push((url, body)),
            Ok((_, Err(error))) => {
                first_error.get_or_insert(error);
            }
            Err(join_error) => {
                first_error.get_or_insert(SourceError::Upstream {
                    target: label.to_owned(),
                    reason: format!("scrape task failed: {join_error}"),
                });
            }
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    bodies.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(bodies)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Family {
    Waiting,
    Running,
    Finished,
    Kv(&'static str),
    TtftBucket,
}

/// Which family a sample name belongs to. `X:` and `X_` prefixes are both
/// accepted: prometheus_client's OpenMetrics escaping bug (client_python#1177)
/// rewrites `:` to `_` in sample names.
fn match_family(names: &EngineMetrics, ttft_bucket: Option<&str>, name: &str) -> Option<Family> {
    let is = |wanted: &str| same_name(wanted, name);
    if is(names.waiting) {
        return Some(Family::Waiting);
    }
    if names.running.is_some_and(is) {
        return Some(Family::Running);
    }
    if names.finished.iter().any(|n| is(n)) {
        return Some(Family::Finished);
    }
    if let Some(kv) = names.kv_cache.iter().find(|n| is(n)) {
        return Some(Family::Kv(kv));
    }
    if ttft_bucket.is_some_and(is) {
        return Some(Family::TtftBucket);
    }
    None
}

fn same_name(wanted: &str, name: &str) -> bool {
    if wanted.len() != name.len() {
        return false;
    }
    wanted
        .bytes()
        .zip(name.bytes())
        .all(|(w, n)| w == n || (w == b':' && n == b'_'))
}

fn parse_le(le: &str) -> Option<f64> {
    match le.trim() {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        other => other.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// An `f64` bound that sorts (bounds are never NaN: [`parse_le`] refuses it).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedBound(f64);

impl Eq for OrderedBound {}

impl PartialOrd for OrderedBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

fn buckets_from(map: BTreeMap<OrderedBound, f64>) -> Result<Option<Buckets>, String> {
    if map.is_empty() {
        return Ok(None);
    }
    let (bounds, counts): (Vec<f64>, Vec<f64>) = map.into_iter().map(|(b, c)| (b.0, c)).unzip();
    if bounds.last().is_none_or(|b| b.is_finite()) {
        return Err("TTFT histogram has no +Inf bucket".to_owned());
    }
    Ok(Some(Buckets { bounds, counts }))
}

/// Values of one gauge on one pod (several engines or data-parallel ranks).
#[derive(Default)]
struct Gauge {
    sum: f64,
    series: usize,
    bad: Option<f64>,
}

impl Gauge {
    fn add(&mut self, value: f64) {
        if value.is_finite() && value >= 0.0 {
            self.sum += value;
        } else {
            self.bad.get_or_insert(value);
        }
        self.series += 1;
    }

    fn check(&self, name: &str) -> Result<(), String> {
        match self.bad {
            Some(bad) => Err(format!("{name} has value {bad}, not a count or fraction")),
            None => Ok(()),
        }
    }

    fn total(&self, name: &str) -> Result<Option<f64>, String> {
        self.check(name)?;
        Ok((self.series > 0).then_some(self.sum))
    }

    fn mean(&self, name: &str) -> Result<Option<f64>, String> {
        self.check(name)?;
        Ok((self.series > 0).then(|| self.sum / self.series as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 3.0
vllm:num_requests_running{engine="1",model_name="a"} 4.0
vllm:num_requests_running{engine="0",model_name="b"} 30.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="a"} 1.0
vllm:num_requests_waiting{engine="1",model_name="a"} 2.0
vllm:num_requests_waiting{engine="0",model_name="b"} 10.0
vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.7
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="a"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="a"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="a"} 6.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="a"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="a"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="a"} 1.0
"#;

    fn source(engine: Engine, model: Option<&str>) -> EngineSource {
        EngineSource {
            engine,
            targets: vec![],
            model_name: model.map(str::to_owned),
        }
    }

    #[test]
    fn sums_engines_and_filters_models() {
        let (pod, malformed) = source(Engine::Vllm, Some("a"))
            .parse_pod("t", BODY)
            .expect("parses");
        assert_eq!((pod.waiting, pod.running, malformed), (3.0, Some(7.0), 0));
        assert!((pod.kv_cache_usage.expect("kv") - 0.6).abs() < 1e-12);
        let ttft = pod.ttft.expect("ttft");
        assert_eq!(ttft.bounds, vec![0.5, 1.0, f64::INFINITY]);
        assert_eq!(ttft.counts, vec![3.0, 6.0, 7.0]);
        let (pod, _) = source(Engine::Vllm, None)
            .parse_pod("t", BODY)
            .expect("parses");
        assert_eq!((pod.waiting, pod.running), (13.0, Some(37.0)));
    }

    #[test]
    fn missing_model_or_gauge_is_a_parse_error_not_zero() {
        let err = source(Engine::Vllm, Some("c"))
            .parse_pod("t", BODY)
            .expect_err("no model c");
        assert!(err.to_string().contains("model_name=\"c\""), "{err}");
        let err = source(Engine::Vllm, None)
            .parse_pod("t", "<html>oops</html>")
            .expect_err("garbage");
        assert!(matches!(err, SourceError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("malformed"), "{err}");
    }

    #[test]
    fn nan_or_negative_gauges_are_errors() {
        let body = "vllm:num_requests_waiting{model_name=\"a\"} NaN\nvllm:num_requests_running{model_name=\"a\"} 1.0\n";
        let err = source(Engine::Vllm, None)
            .parse_pod("t", body)
            .expect_err("NaN");
        assert!(err.to_string().contains("NaN"), "{err}");
    }

    #[test]
    fn underscore_spelling_and_old_kv_name_are_accepted() {
        let body = "vllm_num_requests_waiting{model_name=\"a\"} 2.0\nvllm_num_requests_running{model_name=\"a\"} 1.0\nvllm:gpu_cache_usage_perc{model_name=\"a\"} 0.25\n# EOF\n";
        let (pod, _) = source(Engine::Vllm, None)
            .parse_pod("t", body)
            .expect("parses");
        assert_eq!(
            (pod.waiting, pod.running, pod.kv_cache_usage),
            (2.0, Some(1.0), Some(0.25))
        );
        assert_eq!(pod.ttft, None);
    }

    #[test]
    fn new_kv_name_wins_over_the_deprecated_one() {
        let body = "vllm:num_requests_waiting 0.0\nvllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.3\n";
        let (pod, _) = source(Engine::Vllm, None)
            .parse_pod("t", body)
            .expect("parses");
        assert_eq!(pod.kv_cache_usage, Some(0.3));
    }

    #[test]
    fn sglang_reads_rank_zero_only() {
        let body = r#"sglang:num_queue_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"} 4.0
sglang:num_queue_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"} 4.0
sglang:num_running_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"} 7.0
sglang:num_running_reqs{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"} 7.0
sglang:token_usage{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"} 0.4
sglang:time_to_first_token_seconds_sum{engine_type="unified",model_name="q"} 0.15
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.1",model_name="q"} 0.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.2",model_name="q"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="+Inf",model_name="q"} 1.0
"#;
        let (pod, _) = source(Engine::Sglang, Some("q"))
            .parse_pod("t", body)
            .expect("parses");
        assert_eq!(
            (pod.waiting, pod.running, pod.kv_cache_usage),
            (4.0, Some(7.0), Some(0.4))
        );
        assert_eq!(pod.ttft.expect("ttft").counts, vec![0.0, 1.0, 1.0]);
    }

    #[test]
    fn triton_histogram_is_converted_to_seconds() {
        let body = r#"nv_inference_pending_request_count{model="simple",version="1"} 3
nv_inference_first_response_histogram_ms_count{model="simple",version="1"} 37
nv_inference_first_response_histogram_ms_sum{model="simple",version="1"} 10771
nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="100"} 8
nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="500"} 30
nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="+Inf"} 37
"#;
        let (pod, _) = source(Engine::Triton, Some("simple"))
            .parse_pod("t", body)
            .expect("parses");
        assert_eq!((pod.waiting, pod.running), (3.0, None));
        assert_eq!(
            pod.ttft.expect("ttft").bounds,
            vec![0.1, 0.5, f64::INFINITY]
        );
    }

    #[test]
    fn tgi_has_no_model_label() {
        let body = "# TYPE tgi_queue_size gauge\ntgi_queue_size 5\n\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 12\n\n";
        let (pod, _) = source(Engine::Tgi, Some("ignored"))
            .parse_pod("t", body)
            .expect("parses");
        assert_eq!((pod.waiting, pod.running), (5.0, Some(12.0)));
    }

    #[test]
    fn histogram_without_inf_is_an_error() {
        let body = "vllm:num_requests_waiting 0.0\nvllm:time_to_first_token_seconds_bucket{le=\"1.0\"} 2.0\n";
        let err = source(Engine::Vllm, None)
            .parse_pod("t", body)
            .expect_err("no +Inf");
        assert!(err.to_string().contains("+Inf"), "{err}");
    }

    #[test]
    fn malformed_lines_are_counted_and_skipped() {
        let body = format!("{BODY}vllm:num_requests_waiting{{model_name=\"a\" 5\ngarbage line\n");
        let (pod, malformed) = source(Engine::Vllm, Some("a"))
            .parse_pod("t", &body)
            .expect("parses");
        assert_eq!(pod.waiting, 3.0);
        assert!(malformed >= 1);
    }
}
