//! The Prometheus source: one PromQL instant query per source.
//!
//! Each query is its own source (and poller), keyed by server, query text and
//! credentials profile, so a thousand ScaledObjects sharing a query cost one
//! upstream query per interval. The source only reports the series it got;
//! how an empty or multi-series result is read (summed, an error, or zero
//! only when the replica count says no pods are up) is the evaluation's job,
//! because it depends on which signal the query feeds.

use std::fmt;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::context::SourceContext;
use super::dcgm::{DCGM_POD_LABELS, GPU_UTIL, GR_ENGINE_ACTIVE};
use super::engine::names::Engine;
use super::error::{FailureKind, SourceError};
use crate::guard::redact::redact;

/// Identity of one PromQL query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PromQuery {
    /// Base URL of the Prometheus API (`prometheusAddress` / `serverAddress`).
    pub address: Url,
    /// The PromQL expression.
    pub query: String,
    /// Scaler-side credentials profile for this server (`authProfile`).
    pub auth_profile: Option<String>,
}

/// One series of a query result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeriesValue {
    /// The series' labels, `{a="b",…}`, for explanations.
    pub labels: String,
    /// Its value (may be NaN, e.g. `histogram_quantile` over no requests).
    #[serde(serialize_with = "serialize_value")]
    pub value: f64,
}

fn serialize_value<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_str(&v.to_string())
    }
}

/// The result of one query.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryReading {
    /// The query, for explanations.
    pub query: String,
    /// Every series returned (an empty vector is a valid answer).
    pub series: Vec<SeriesValue>,
}

impl fmt::Display for PromQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[derive(Deserialize)]
struct ApiResponse {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiData {
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: std::collections::BTreeMap<String, String>,
    value: (f64, String),
}

fn parse_value(raw: &str) -> Option<f64> {
    match raw {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

impl PromQuery {
    /// A short label: server and query, credential-shaped parts redacted
    /// (`prometheusAddress` may carry an `access_token` parameter).
    pub fn label(&self) -> String {
        redact(&format!("prometheus {} {}", self.address, self.query))
    }

    /// Run the instant query once.
    pub async fn read(&self, ctx: &SourceContext) -> Result<QueryReading, SourceError> {
        let mut url = self.address.clone();
        let path = format!("{}/api/v1/query", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.query_pairs_mut().append_pair("query", &self.query);
        // The profile's credentials as their files hold them now (a rotated
        // token is sent from the first query after it was written).
        let auth = ctx
            .prometheus_auth(self.auth_profile.as_deref())
            .map_err(|e| SourceError::new(FailureKind::Config, self.label(), e.to_string()))?;
        let body = ctx
            .http
            .get_text_with(&url, auth.as_deref())
            .await
            .map_err(|e| self.name_query(e))?;
        self.parse_response(&body)
    }

    /// Errors name the query, since several queries share one server.
    fn name_query(&self, error: SourceError) -> SourceError {
        match error.target() {
            Some(_) => SourceError::new(error.kind(), self.label(), error.detail()),
            None => error,
        }
    }

    /// Parse an `/api/v1/query` response body.
    pub fn parse_response(&self, body: &str) -> Result<QueryReading, SourceError> {
        let parse_error = |reason: String| SourceError::parse(self.label(), reason);
        let response: ApiResponse = serde_json::from_str(body)
            .map_err(|e| parse_error(format!("not a Prometheus API response: {e}")))?;
        if response.status != "success" {
            // Prometheus sends its errors with a 4xx/5xx status, which the
            // GET already reports; this is a 200 that says "error".
            return Err(SourceError::new(
                FailureKind::Rejected,
                self.label(),
                format!(
                    "query failed: {} {}",
                    response.error_type.unwrap_or_default(),
                    response.error.unwrap_or_default()
                ),
            ));
        }
        let data = response
            .data
            .ok_or_else(|| parse_error("response has no data".to_owned()))?;
        let series = match data.result_type.as_str() {
            "vector" => {
                let samples: Vec<VectorSample> = serde_json::from_value(data.result)
                    .map_err(|e| parse_error(format!("bad vector result: {e}")))?;
                samples
                    .into_iter()
                    .map(|s| {
                        let value = parse_value(&s.value.1).ok_or_else(|| {
                            parse_error(format!("value `{}` is not a number", s.value.1))
                        })?;
                        let labels = s
                            .metric
                            .iter()
                            .map(|(k, v)| format!("{k}={v:?}"))
                            .collect::<Vec<_>>()
                            .join(",");
                        Ok(SeriesValue {
                            labels: format!("{{{labels}}}"),
                            value,
                        })
                    })
                    .collect::<Result<Vec<_>, SourceError>>()?
            }
            "scalar" => {
                let (_, raw): (f64, String) = serde_json::from_value(data.result)
                    .map_err(|e| parse_error(format!("bad scalar result: {e}")))?;
                let value = parse_value(&raw)
                    .ok_or_else(|| parse_error(format!("value `{raw}` is not a number")))?;
                vec![SeriesValue {
                    labels: "{}".to_owned(),
                    value,
                }]
            }
            other => {
                return Err(parse_error(format!(
                    "result type `{other}`; the query must return an instant vector or a scalar"
                )));
            }
        };
        Ok(QueryReading {
            query: self.query.clone(),
            series,
        })
    }
}

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
        match self.engine.metrics().scheduler {
            Some(s) => format!(
                "sum({}) or sum({})",
                self.per_group(metric, &format!("{}=\"\"", s.priority)),
                self.per_group(metric, &format!("{}!=\"\"", s.priority))
            ),
            None => format!("sum({})", self.sel(metric, "")),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn query() -> PromQuery {
        PromQuery {
            address: Url::parse("http://127.0.0.1:9090").expect("url"),
            query: "sum(x)".into(),
            auth_profile: None,
        }
    }

    #[test]
    fn parses_vectors_scalars_and_special_values() {
        let r = query()
            .parse_response(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1.5,"3"]},{"metric":{},"value":[1.5,"NaN"]}]}}"#)
            .expect("vector");
        assert_eq!(r.series.len(), 2);
        assert_eq!(r.series[0].value, 3.0);
        assert_eq!(r.series[0].labels, "{pod=\"a\"}");
        assert!(r.series[1].value.is_nan());
        let r = query()
            .parse_response(
                r#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"+Inf"]}}"#,
            )
            .expect("scalar");
        assert_eq!(r.series[0].value, f64::INFINITY);
        let r = query()
            .parse_response(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
            .expect("empty");
        assert!(r.series.is_empty());
    }

    #[test]
    fn errors_name_the_query() {
        let err = query()
            .parse_response(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#)
            .expect_err("error");
        assert!(
            err.to_string().contains("sum(x)") && err.to_string().contains("parse error"),
            "{err}"
        );
        let err = query().parse_response("<html>").expect_err("garbage");
        assert!(err.to_string().contains("sum(x)"), "{err}");
        let err = query()
            .parse_response(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
            .expect_err("matrix");
        assert!(err.to_string().contains("instant vector"), "{err}");
    }

    #[test]
    fn default_queries_use_engine_names_and_filters() {
        let q = DefaultQueries::new(Engine::Vllm, Some("m\"x"), Some("inference"));
        // vLLM 0.33: requests waiting for capacity, else (older) the total.
        assert_eq!(
            q.waiting(),
            r#"sum(vllm:num_requests_waiting_by_reason{model_name="m\"x",namespace="inference",reason="capacity"}) or sum(vllm:num_requests_waiting{model_name="m\"x",namespace="inference"})"#
        );
        assert_eq!(
            q.ttft(0.95, 60).expect("vllm has ttft"),
            r#"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{model_name="m\"x",namespace="inference"}[60s])))"#
        );
        assert!(
            q.kv_cache()
                .expect("kv")
                .contains(" or vllm:gpu_cache_usage_perc{")
        );
        // Data-parallel engines of one pod are one replica.
        assert_eq!(
            q.replicas(),
            r#"count(max without (engine) (vllm:num_requests_waiting{model_name="m\"x",namespace="inference"}))"#
        );
        let t = DefaultQueries::new(Engine::Triton, None, None);
        assert!(t.ttft(0.5, 30).expect("triton").ends_with("* 0.001"));
        assert_eq!(t.running(), None);
        assert_eq!(
            t.waiting(),
            r#"sum(nv_trt_llm_request_metrics{request_type="waiting"}) or sum(nv_inference_pending_request_count{})"#
        );
        let s = DefaultQueries::new(Engine::Sglang, None, None);
        // One scheduler per data-parallel group; the priority="" total, else
        // the breakdown (never both).
        assert_eq!(
            s.waiting(),
            r#"sum(max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:num_queue_reqs{priority=""})) or sum(max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:num_queue_reqs{priority!=""}))"#
        );
        assert_eq!(
            s.replicas(),
            r#"count(max without (dp_rank, pp_rank, tp_rank, moe_ep_rank, pid, priority) (sglang:num_queue_reqs{}))"#
        );
        assert_eq!(
            s.kv_cache().expect("kv"),
            r#"avg(max without (pp_rank, tp_rank, moe_ep_rank, pid) (sglang:token_usage{}))"#
        );
        let gpu = DefaultQueries::gpu_util(Some("inference"), Some("vllm-.*"));
        assert!(gpu.starts_with(
            r#"avg((DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="inference",pod=~"vllm-.*",GPU_I_ID!=""} * 100) or (DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod_namespace="inference",pod_name=~"vllm-.*",GPU_I_ID!=""} * 100) or "#
        ), "{gpu}");
        for part in [
            r#" or DCGM_FI_DEV_GPU_UTIL{namespace="inference",pod=~"vllm-.*"} or "#,
            r#" or DCGM_FI_DEV_GPU_UTIL{exported_namespace="inference",exported_pod=~"vllm-.*"} or "#,
            r#" or (DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod_namespace="inference",pod_name=~"vllm-.*"} * 100) or "#,
        ] {
            assert!(gpu.contains(part), "{part} in {gpu}");
        }
        assert_eq!(gpu.matches(" or ").count(), 8, "3 label forms × 3 fields");
    }
}
