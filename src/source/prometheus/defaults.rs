//! Default queries: the engine's metric names and the trigger's label
//! filters, as the scrape path reads them, summed (the `backlog` path) or
//! per pod (the `capacity` path, [`super::pods`]).

use crate::source::dcgm::{DCGM_POD_LABELS, GPU_UTIL, GR_ENGINE_ACTIVE};
use crate::source::engine::names::{Engine, LabelledGauge};

/// Default queries, built from the engine's metric names and the trigger's
/// label filters. Every one is overridable in metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultQueries {
    /// Label matchers, `model_name="m",namespace="ns"` (no braces).
    pub selector: String,
    /// The engine whose names to use.
    pub engine: Engine,
}

impl DefaultQueries {
    /// Build the matcher list from the model and namespace filters.
    pub fn new(engine: Engine, model: Option<&str>, namespace: Option<&str>) -> DefaultQueries {
        let names = engine.metrics();
        let mut matchers = Vec::new();
        if let (Some(label), Some(model)) = (names.model_label, model) {
            matchers.push(format!("{label}={}", promql_string(model)));
        }
        if let Some(ns) = namespace {
            matchers.push(format!("namespace={}", promql_string(ns)));
        }
        DefaultQueries {
            selector: matchers.join(","),
            engine,
        }
    }

    fn sel(&self, metric: &str, extra: &str) -> String {
        let matchers: Vec<&str> = [self.selector.as_str(), extra]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect();
        format!("{metric}{{{}}}", matchers.join(","))
    }

    /// One pod's value of a scheduler gauge: SGLang's ranks of one
    /// data-parallel group report the same queue, so their series collapse
    /// to one (`max without` the rank labels; the values are equal).
    fn per_group(&self, metric: &str, extra: &str) -> String {
        let series = self.sel(metric, extra);
        match self.engine.metrics().scheduler {
            Some(s) => {
                let ranks: Vec<&str> = s.ranks.iter().chain(s.rank_attached).copied().collect();
                format!("max without ({}) ({series})", ranks.join(", "))
            }
            None => series,
        }
    }

    /// `sum` of a gauge as the scrape path reads it: with SGLang's priority
    /// scheduling the `priority=""` total, else the breakdown summed; never
    /// both.
    fn summed(&self, metric: &str) -> String {
        self.summed_as("sum", metric)
    }

    /// [`summed`](Self::summed) with another aggregation (`sum by (…) `).
    fn summed_as(&self, agg: &str, metric: &str) -> String {
        match self.engine.metrics().scheduler {
            Some(s) => format!(
                "{agg}({}) or {agg}({})",
                self.per_group(metric, &format!("{}=\"\"", s.priority)),
                self.per_group(metric, &format!("{}!=\"\"", s.priority))
            ),
            None => format!("{agg}({})", self.sel(metric, "")),
        }
    }

    fn labelled(&self, gauge: LabelledGauge) -> String {
        self.sel(
            gauge.family,
            &format!("{}={}", gauge.label, promql_string(gauge.value)),
        )
    }

    /// Per pod: `W` of each pod as the scrape path reads it (the preferred
    /// gauge where the pod has it, else the plain one), keyed by
    /// `namespace` and `pod_label`. `or` works per series: one pod on an
    /// older server falls back on its own.
    pub fn pod_waiting(&self, pod_label: &str) -> String {
        let names = self.engine.metrics();
        let agg = pod_sum(pod_label, "");
        let plain = self.summed_as(&agg, names.waiting);
        match names.waiting_preferred {
            Some(p) => format!("{agg}({}) or {plain}", self.labelled(p)),
            None => plain,
        }
    }

    /// Per pod: `R`, if the engine has a running gauge (Triton's
    /// TensorRT-LLM `scheduled` requests where exposed).
    pub fn pod_running(&self, pod_label: &str) -> Option<String> {
        let names = self.engine.metrics();
        let agg = pod_sum(pod_label, "");
        let plain = names.running.map(|m| self.summed_as(&agg, m));
        match (names.running_preferred, plain) {
            (Some(p), Some(plain)) => Some(format!("{agg}({}) or {plain}", self.labelled(p))),
            (Some(p), None) => Some(format!("{agg}({})", self.labelled(p))),
            (None, plain) => plain,
        }
    }

    /// Per pod: the finished-requests counters' raw values (not `rate()`:
    /// the capacity policy takes its own deltas per pod, with its restart
    /// handling), summed over their series as the scrape path sums them.
    pub fn pod_finished(&self, pod_label: &str) -> String {
        self.pod_counter(self.engine.metrics().finished, pod_label)
    }

    /// Per pod: the generated-tokens counters' raw values, as
    /// [`pod_finished`](Self::pod_finished) reads the finished ones; `None`
    /// for an engine without them (Triton, TGI: μ stays in requests).
    pub fn pod_generation_tokens(&self, pod_label: &str) -> Option<String> {
        let names = self.engine.metrics().generation_tokens;
        (!names.is_empty()).then(|| self.pod_counter(names, pod_label))
    }

    /// Per pod: the prompt-tokens counters' raw values, as
    /// [`pod_generation_tokens`](Self::pod_generation_tokens).
    pub fn pod_prompt_tokens(&self, pod_label: &str) -> Option<String> {
        let names = self.engine.metrics().prompt_tokens;
        (!names.is_empty()).then(|| self.pod_counter(names, pod_label))
    }

    /// `sum by (namespace, POD)` of counters' raw values: one name
    /// directly, several by a `__name__` regex (so a pod with either name
    /// is summed over what it has).
    fn pod_counter(&self, names: &[&str], pod_label: &str) -> String {
        let agg = pod_sum(pod_label, "");
        match names {
            [one] => format!("{agg}({})", self.sel(one, "")),
            several => {
                let alternatives = several
                    .iter()
                    .map(|n| regex_escape(n))
                    .collect::<Vec<_>>()
                    .join("|");
                let name = format!("__name__=~{}", promql_string(&alternatives));
                format!("{agg}({})", self.sel("", &name))
            }
        }
    }

    /// Per pod: mean KV usage over the pod's series (the preferred gauge,
    /// else the newest name the pod has).
    pub fn pod_kv_cache(&self, pod_label: &str) -> Option<String> {
        let names = self.engine.metrics();
        let agg = format!("avg by (namespace, {pod_label}) ");
        let mut alternatives: Vec<String> = Vec::new();
        if let Some(p) = names.kv_cache_preferred {
            alternatives.push(format!("{agg}({})", self.labelled(p)));
        }
        if !names.kv_cache.is_empty() {
            let plain: Vec<String> = names
                .kv_cache
                .iter()
                .map(|n| self.per_group(n, ""))
                .collect();
            alternatives.push(format!("{agg}({})", plain.join(" or ")));
        }
        (!alternatives.is_empty()).then(|| alternatives.join(" or "))
    }

    /// Per pod: the TTFT histogram's cumulative buckets (raw counts; the
    /// TTFT window takes per-pod deltas as it does for scraped pods).
    pub fn pod_ttft(&self, pod_label: &str) -> Option<String> {
        let h = self.engine.metrics().ttft?;
        Some(format!(
            "{}({})",
            pod_sum(pod_label, ", le"),
            self.sel(&format!("{}_bucket", h.family), "")
        ))
    }

    /// `W`: the sum of the waiting gauge, or of the labelled gauge that
    /// replaces it when Prometheus has it (vLLM's `reason="capacity"`,
    /// Triton TensorRT-LLM's `request_type="waiting"`).
    pub fn waiting(&self) -> String {
        let names = self.engine.metrics();
        let plain = self.summed(names.waiting);
        match names.waiting_preferred {
            Some(p) => format!(
                "sum({}) or {plain}",
                self.sel(p.family, &format!("{}={}", p.label, promql_string(p.value)))
            ),
            None => plain,
        }
    }

    /// `R`: the sum of the running gauge, if every server of the engine has
    /// one.
    pub fn running(&self) -> Option<String> {
        self.engine.metrics().running.map(|m| self.summed(m))
    }

    /// Pods reporting: `count` of the waiting gauge with the labels that
    /// split one pod's gauge (vLLM's `engine`, SGLang's ranks, groups and
    /// priorities) aggregated away, so `n` counts pods.
    pub fn replicas(&self) -> String {
        let names = self.engine.metrics();
        let mut split: Vec<&str> = names.split_labels.to_vec();
        if let Some(s) = names.scheduler {
            split.extend(s.ranks.iter().chain(s.rank_attached));
            split.push(s.priority);
        }
        let series = self.sel(names.waiting, "");
        if split.is_empty() {
            format!("count({series})")
        } else {
            format!("count(max without ({}) ({series}))", split.join(", "))
        }
    }

    /// Mean KV usage, any of the engine's names (the newest wins where a
    /// pod has both).
    pub fn kv_cache(&self) -> Option<String> {
        let names = self.engine.metrics().kv_cache;
        if names.is_empty() {
            return None;
        }
        let alternatives: Vec<String> = names.iter().map(|n| self.per_group(n, "")).collect();
        Some(format!("avg({})", alternatives.join(" or ")))
    }

    /// TTFT quantile over the window, in seconds.
    pub fn ttft(&self, quantile: f64, window_seconds: u64) -> Option<String> {
        let h = self.engine.metrics().ttft?;
        let q = format!(
            "histogram_quantile({quantile}, sum by (le) (rate({}[{window_seconds}s])))",
            self.sel(&format!("{}_bucket", h.family), "")
        );
        Some(if h.to_seconds == 1.0 {
            q
        } else {
            format!("({q}) * {}", h.to_seconds)
        })
    }

    /// Mean GPU utilisation (percent) over the workload's GPUs, read as the
    /// scrape path reads it: a MIG instance's `DCGM_FI_PROF_GR_ENGINE_ACTIVE`
    /// × 100 (it has no usable `DCGM_FI_DEV_GPU_UTIL`), else
    /// `DCGM_FI_DEV_GPU_UTIL`, else `DCGM_FI_PROF_GR_ENGINE_ACTIVE` × 100; the
    /// pod labels as dcgm-exporter writes them (`pod`/`namespace`), with
    /// `--use-old-namespace` (`pod_name`/`pod_namespace`) or as Prometheus
    /// stores them under `honorLabels: false`
    /// (`exported_pod`/`exported_namespace`). `or` keeps the first of these
    /// per GPU (same labels apart from the metric name).
    pub fn gpu_util(namespace: Option<&str>, pod_regex: Option<&str>) -> String {
        let forms: &[(&str, &str)] = if namespace.is_none() && pod_regex.is_none() {
            &[("namespace", "pod")]
        } else {
            &DCGM_POD_LABELS
        };
        let selectors: Vec<String> = forms
            .iter()
            .map(|(ns_label, pod_label)| {
                let mut matchers = Vec::new();
                if let Some(ns) = namespace {
                    matchers.push(format!("{ns_label}={}", promql_string(ns)));
                }
                if let Some(re) = pod_regex {
                    matchers.push(format!("{pod_label}=~{}", promql_string(re)));
                }
                matchers.join(",")
            })
            .collect();
        let with = |sel: &str, extra: &str| -> String {
            [sel, extra]
                .into_iter()
                .filter(|m| !m.is_empty())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut terms = Vec::new();
        for s in &selectors {
            terms.push(format!(
                "({GR_ENGINE_ACTIVE}{{{}}} * 100)",
                with(s, "GPU_I_ID!=\"\"")
            ));
        }
        for s in &selectors {
            terms.push(format!("{GPU_UTIL}{{{s}}}"));
        }
        for s in &selectors {
            terms.push(format!("({GR_ENGINE_ACTIVE}{{{s}}} * 100)"));
        }
        format!("avg({})", terms.join(" or "))
    }
}

/// `sum by (namespace, POD…) `: per-pod series keep the namespace (two
/// namespaces may each have a pod of the same name).
fn pod_sum(pod_label: &str, more: &str) -> String {
    format!("sum by (namespace, {pod_label}{more}) ")
}

/// A metric name as a literal inside a PromQL (RE2) regex.
fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// A PromQL double-quoted string literal.
pub fn promql_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
