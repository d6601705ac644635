//! One engine reading: every pod's `/metrics` (fetched by
//! [`HttpScraper::scrape_all`](crate::source::http::HttpScraper::scrape_all)) parsed into what the fusion needs, per pod:
//! requests waiting (`W`) and running (`R`), KV cache usage, and the TTFT
//! histogram's cumulative buckets.
//!
//! One parser serves vLLM, SGLang, Triton and TGI: [`Engine::metrics`] maps
//! each signal to that server's own metric names, and `select.rs` picks
//! the series that count (vLLM's `reason="capacity"`, Triton TensorRT-LLM's
//! `request_type`, SGLang's one scheduler per data-parallel group and its
//! `priority=""` total). Per-pod readings are kept (not only sums), each with
//! the series it was read from ([`SeriesRead`]), so `/explain` can show where
//! a number came from, and so the TTFT window can take per-pod deltas.
//!
//! [`EngineSource::read`] is all-or-nothing (every discovered pod must
//! answer), as `check` probes a source; the pollers read pod by pod
//! (`EngineSource::read_pods`, in `fanout.rs`), and the decision holds a
//! failing pod's last good reading, then leaves it out while a quorum of the
//! pods reports (docs/decisions/0002).

use std::collections::BTreeMap;

use serde::Serialize;

mod buckets;

pub use buckets::Buckets;
use buckets::{OrderedBound, buckets_from, parse_le};

use super::names::{Engine, EngineMetrics, LabelledGauge};
use super::required::{Missing, RequiredSignals};
use super::select::{Combine, Selected, combine};
use crate::source::context::SourceContext;
use crate::source::error::SourceError;
use crate::source::http::ScrapeTarget;
use crate::source::prom_text::{self, Sample};
use crate::source::prometheus::PodQueries;

/// Identity of an engine source: which pods, which engine, which model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EngineSource {
    /// The server the pods run (`engine`).
    pub engine: Engine,
    /// Targets to scrape (`vllmTargets`).
    pub targets: Vec<ScrapeTarget>,
    /// Only series with this model label count (`modelName`).
    pub model_name: Option<String>,
    /// Read the pods through PromQL instead of scraping them (`policy:
    /// capacity` with `prometheusAddress`); `targets` then holds only the
    /// Prometheus address, for the outbound check.
    pub prometheus: Option<Box<PodQueries>>,
    /// Signals every pod must have, else it fails (part of the identity:
    /// triggers needing other signals judge the same body differently).
    pub requires: RequiredSignals,
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
    /// Generated tokens since the pod started, if exposed
    /// (`vllm:generation_tokens_total`, `sglang:generation_tokens_total`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_tokens_total: Option<f64>,
    /// Prompt tokens since the pod started, if exposed
    /// (`vllm:prompt_tokens_total`, `sglang:prompt_tokens_total`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_total: Option<f64>,
    /// Which series each signal was read from.
    #[serde(skip_serializing_if = "SeriesRead::is_empty")]
    pub read: SeriesRead,
}

impl PodReading {
    /// The first signal of `requires` this pod lacks, if any.
    pub fn lacks(&self, requires: RequiredSignals) -> Option<Missing> {
        requires.missing(RequiredSignals {
            running: self.running.is_some(),
            kv_cache: self.kv_cache_usage.is_some(),
            finished: self.finished_total.is_some(),
        })
    }
}

/// Which family and which of its series each signal of a pod came from, as
/// `/explain` shows it: e.g. `sglang:num_queue_reqs{priority=""} ×2 groups
/// (tp_rank 0,4)` or `vllm:num_requests_waiting_by_reason{reason="capacity"}
/// ×2 series`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeriesRead {
    /// Where `W` came from.
    pub waiting: String,
    /// Where `R` came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// Where the KV-cache usage came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<String>,
    /// Where the TTFT buckets came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft: Option<String>,
    /// Where the finished-request count came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_total: Option<String>,
}

impl SeriesRead {
    /// Nothing recorded (a reading built outside the parser, e.g. by the
    /// simulator).
    pub fn is_empty(&self) -> bool {
        self == &SeriesRead::default()
    }
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
    /// A short label: the engine, the first target and how many more;
    /// credential-shaped parts redacted (it reaches logs, `/explain` and
    /// the `source` label of self-metrics).
    pub fn label(&self) -> String {
        if let Some(q) = &self.prometheus {
            let mut label = format!("{} {}", self.engine, q.label());
            if let Some(model) = &self.model_name {
                label.push_str(&format!(" model={model}"));
            }
            return label;
        }
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
        crate::guard::redact::redact(&label)
    }

    /// Resolve targets, scrape all pods concurrently, parse each.
    pub async fn read(&self, ctx: &SourceContext) -> Result<EngineReading, SourceError> {
        if let Some(q) = &self.prometheus {
            let read = q.read_pods(self.engine, self.requires, ctx).await?;
            return match read.failed.into_iter().next() {
                Some(failure) => Err(failure.error),
                None => Ok(read.reading),
            };
        }
        let scraped = ctx.http.scrape_all(&self.targets, &self.label()).await?;
        let mut pods = Vec::with_capacity(scraped.bodies.len());
        let mut malformed_lines = 0;
        for (url, body) in scraped.bodies {
            let (pod, malformed) = self.parse_pod(url.as_str(), &body)?;
            pods.push(pod);
            malformed_lines += malformed;
        }
        Ok(EngineReading {
            engine: self.engine,
            pods,
            malformed_lines,
            empty_discovery: scraped.empty_names,
        })
    }

    /// Extract one pod's signals from its exposition text.
    pub fn parse_pod(&self, target: &str, body: &str) -> Result<(PodReading, usize), SourceError> {
        let names = self.engine.metrics();
        let ttft_bucket = names.ttft.map(|h| format!("{}_bucket", h.family));
        let mut found = Found::default();
        let mut finished = Counter::default();
        let mut generated = Counter::default();
        let mut prompt = Counter::default();
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
                match family {
                    Family::Plain(signal) => found.plain(signal).push(sample),
                    // One family can hold several signals (TensorRT-LLM's
                    // `request_type="waiting"` and `"scheduled"`).
                    Family::Labelled => {
                        for (signal, wanted) in preferred_gauges(&names) {
                            if same_name(wanted.family, sample.name)
                                && sample.label(wanted.label).as_deref() == Some(wanted.value)
                            {
                                found.preferred(signal).push(sample);
                            }
                        }
                    }
                    Family::Kv(index) => {
                        if let Some(series) = found.kv_names.get_mut(index) {
                            series.push(sample);
                        }
                    }
                    Family::Finished => finished.add(sample.name, sample.value),
                    Family::GenerationTokens => generated.add(sample.name, sample.value),
                    Family::PromptTokens => prompt.add(sample.name, sample.value),
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
        let parse_error = |reason: String| SourceError::parse(target, reason);
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
        let scheduler = names.scheduler.as_ref();
        let no_plain_kv = Vec::new();
        let read = |signal: Signal, how: Combine| -> Result<Option<Selected>, SourceError> {
            let (preferred, plain) = match signal {
                Signal::Waiting => (&found.waiting_preferred, &found.waiting),
                Signal::Running => (&found.running_preferred, &found.running),
                Signal::Kv => (&found.kv_preferred, &no_plain_kv),
            };
            let wanted = match signal {
                Signal::Waiting => names.waiting_preferred,
                Signal::Running => names.running_preferred,
                Signal::Kv => names.kv_cache_preferred,
            };
            if let Some(wanted) = wanted
                && let Some(selected) = combine(
                    preferred,
                    &format!("{}=\"{}\"", wanted.label, wanted.value),
                    scheduler,
                    how,
                )
                .map_err(parse_error)?
            {
                return Ok(Some(selected));
            }
            combine(plain, "", scheduler, how).map_err(parse_error)
        };
        let waiting = read(Signal::Waiting, Combine::Sum)?.ok_or_else(|| {
            let also = names
                .waiting_preferred
                .map(|p| format!(" or {}{{{}=\"{}\"}}", p.family, p.label, p.value))
                .unwrap_or_default();
            parse_error(format!(
                "no {}{also} sample{model_note}{malformed_note}",
                names.waiting
            ))
        })?;
        let running = read(Signal::Running, Combine::Sum)?;
        // The first KV name (newest) with series wins: both are exposed
        // during a migration, and the deprecated one is then ignored.
        let kv = match read(Signal::Kv, Combine::Mean)? {
            Some(kv) => Some(kv),
            None => match found.kv_names.iter().find(|s| !s.is_empty()) {
                Some(series) => {
                    combine(series, "", scheduler, Combine::Mean).map_err(parse_error)?
                }
                None => None,
            },
        };
        // Every engine reports KV-cache usage as a fraction (vLLM's `_perc` too): above 1 the
        // exporter is broken, and `kvCacheTarget` would scale on it.
        if let Some(kv) = kv.as_ref().filter(|kv| kv.value > 1.0) {
            return Err(parse_error(format!(
                "{} is {}, not a fraction from 0 to 1",
                kv.read, kv.value
            )));
        }
        let finished_total = finished.total().map_err(parse_error)?;
        if let Some(bad) = ttft_bad {
            return Err(parse_error(format!(
                "TTFT histogram has a bad bucket: {bad}"
            )));
        }
        let ttft = buckets_from(ttft).map_err(parse_error)?;
        let read = SeriesRead {
            waiting: waiting.read,
            running: running.as_ref().map(|r| r.read.clone()),
            kv_cache_usage: kv.as_ref().map(|k| k.read.clone()),
            ttft: ttft
                .as_ref()
                .and(names.ttft)
                .map(|h| format!("{}_bucket summed over every series", h.family)),
            finished_total: finished.read(),
        };
        let pod = PodReading {
            target: target.to_owned(),
            waiting: waiting.value,
            running: running.map(|r| r.value),
            kv_cache_usage: kv.map(|k| k.value),
            ttft,
            finished_total,
            // A bad token counter costs only the token unit (the
            // request unit decides then), not the pod's reading.
            generation_tokens_total: generated.total().ok().flatten(),
            prompt_tokens_total: prompt.total().ok().flatten(),
            read,
        };
        if let Some(missing) = pod.lacks(self.requires) {
            let families = missing.families(&names);
            return Err(parse_error(format!(
                "{missing}: no {families} sample{model_note}{malformed_note}"
            )));
        }
        Ok((pod, stats.malformed_lines))
    }
}

/// The gauges a signal can be read from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Signal {
    Waiting,
    Running,
    Kv,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Family {
    /// The engine's plain gauge of a signal.
    Plain(Signal),
    /// A labelled gauge read instead of a plain one when present.
    Labelled,
    /// Index into [`EngineMetrics::kv_cache`].
    Kv(usize),
    Finished,
    GenerationTokens,
    PromptTokens,
    TtftBucket,
}

/// The engine's labelled gauges, by the signal each replaces.
fn preferred_gauges(names: &EngineMetrics) -> impl Iterator<Item = (Signal, LabelledGauge)> {
    [
        (Signal::Waiting, names.waiting_preferred),
        (Signal::Running, names.running_preferred),
        (Signal::Kv, names.kv_cache_preferred),
    ]
    .into_iter()
    .filter_map(|(signal, p)| p.map(|p| (signal, p)))
}

/// The gauge samples of one pod, by signal, kept for [`combine`].
#[derive(Default)]
struct Found<'a> {
    waiting: Vec<Sample<'a>>,
    waiting_preferred: Vec<Sample<'a>>,
    running: Vec<Sample<'a>>,
    running_preferred: Vec<Sample<'a>>,
    kv_preferred: Vec<Sample<'a>>,
    /// One list per KV name, in [`EngineMetrics::kv_cache`] order.
    kv_names: [Vec<Sample<'a>>; 2],
}

impl<'a> Found<'a> {
    fn plain(&mut self, signal: Signal) -> &mut Vec<Sample<'a>> {
        match signal {
            Signal::Waiting => &mut self.waiting,
            Signal::Running => &mut self.running,
            // KV names are matched as `Family::Kv`.
            Signal::Kv => &mut self.kv_preferred,
        }
    }

    fn preferred(&mut self, signal: Signal) -> &mut Vec<Sample<'a>> {
        match signal {
            Signal::Waiting => &mut self.waiting_preferred,
            Signal::Running => &mut self.running_preferred,
            Signal::Kv => &mut self.kv_preferred,
        }
    }
}

/// Which family a sample name belongs to. `X:` and `X_` prefixes are both
/// accepted: prometheus_client's OpenMetrics escaping bug (client_python#1177)
/// rewrites `:` to `_` in sample names.
fn match_family(names: &EngineMetrics, ttft_bucket: Option<&str>, name: &str) -> Option<Family> {
    let is = |wanted: &str| same_name(wanted, name);
    if is(names.waiting) {
        return Some(Family::Plain(Signal::Waiting));
    }
    if names.running.is_some_and(is) {
        return Some(Family::Plain(Signal::Running));
    }
    if preferred_gauges(names).any(|(_, p)| is(p.family)) {
        return Some(Family::Labelled);
    }
    if names.finished.iter().any(|n| is(n)) {
        return Some(Family::Finished);
    }
    if names.generation_tokens.iter().any(|n| is(n)) {
        return Some(Family::GenerationTokens);
    }
    if names.prompt_tokens.iter().any(|n| is(n)) {
        return Some(Family::PromptTokens);
    }
    if let Some(index) = names.kv_cache.iter().position(|n| is(n)) {
        return Some(Family::Kv(index));
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

/// Finished-request counters of one pod: every series summed (outcomes,
/// `is_streaming`, priorities and data-parallel engines each count once).
#[derive(Default)]
struct Counter {
    sum: f64,
    series: usize,
    names: Vec<String>,
    bad: Option<(String, f64)>,
}

impl Counter {
    fn add(&mut self, name: &str, value: f64) {
        if value.is_finite() && value >= 0.0 {
            self.sum += value;
        } else if self.bad.is_none() {
            self.bad = Some((name.to_owned(), value));
        }
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
        self.series += 1;
    }

    fn total(&self) -> Result<Option<f64>, String> {
        match &self.bad {
            Some((name, bad)) => Err(format!("{name} has value {bad}, not a count")),
            None => Ok((self.series > 0).then_some(self.sum)),
        }
    }

    fn read(&self) -> Option<String> {
        (self.series > 0).then(|| format!("{} ×{} series", self.names.join(" + "), self.series))
    }
}

#[cfg(test)]
mod tests;
