//! The Prometheus source: one PromQL instant query per source.
//!
//! Each query is its own source (and poller), keyed by server, query text and
//! credentials profile, so a thousand ScaledObjects sharing a query cost one
//! upstream query per interval. The source only reports the series it got;
//! how an empty or multi-series result is read (summed, an error, or zero
//! only when the replica count says no pods are up) is the evaluation's job,
//! because it depends on which signal the query feeds.
//!
//! | file | job |
//! |---|---|
//! | this one | one query, its response parsed |
//! | [`defaults`] | the default queries from the engine's metric names |
//! | [`pods`] | the per-pod queries of the `capacity` policy, read into the same [`EngineReading`](crate::source::EngineReading) a scrape gives |

use std::collections::BTreeMap;
use std::fmt;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::context::SourceContext;
use super::error::{FailureKind, SourceError};
use crate::guard::redact::redact;

mod defaults;
mod pod_queries;
pub mod pods;
#[cfg(test)]
mod tests;

pub use defaults::{DefaultQueries, promql_string};
pub use pod_queries::PodQueries;

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
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// One series of a result with its labels as a map (the per-pod reading
/// needs the pod label's value, not only the text `/explain` shows).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels (none for a scalar).
    pub metric: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
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
        let body = self.fetch(ctx).await?;
        self.parse_response(&body)
    }

    /// Run the instant query once, its samples with their label maps.
    pub async fn read_samples(&self, ctx: &SourceContext) -> Result<Vec<Sample>, SourceError> {
        let body = self.fetch(ctx).await?;
        self.parse_samples(&body)
    }

    async fn fetch(&self, ctx: &SourceContext) -> Result<String, SourceError> {
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
        Ok(body)
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
        let series = self
            .parse_samples(body)?
            .into_iter()
            .map(|s| {
                let labels = s
                    .metric
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect::<Vec<_>>()
                    .join(",");
                SeriesValue {
                    labels: format!("{{{labels}}}"),
                    value: s.value,
                }
            })
            .collect();
        Ok(QueryReading {
            query: self.query.clone(),
            series,
        })
    }

    /// Parse an `/api/v1/query` response body into its samples: a vector's
    /// series, or a scalar as one series without labels. (The timestamp of
    /// an instant query's sample is the evaluation time, not when the value
    /// was scraped, so it is not kept.)
    pub fn parse_samples(&self, body: &str) -> Result<Vec<Sample>, SourceError> {
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
        match data.result_type.as_str() {
            "vector" => {
                let samples: Vec<VectorSample> = serde_json::from_value(data.result)
                    .map_err(|e| parse_error(format!("bad vector result: {e}")))?;
                samples
                    .into_iter()
                    .map(|s| {
                        let value = parse_value(&s.value.1).ok_or_else(|| {
                            parse_error(format!("value `{}` is not a number", s.value.1))
                        })?;
                        Ok(Sample {
                            metric: s.metric,
                            value,
                        })
                    })
                    .collect()
            }
            "scalar" => {
                let (_, raw): (f64, String) = serde_json::from_value(data.result)
                    .map_err(|e| parse_error(format!("bad scalar result: {e}")))?;
                let value = parse_value(&raw)
                    .ok_or_else(|| parse_error(format!("value `{raw}` is not a number")))?;
                Ok(vec![Sample {
                    metric: BTreeMap::new(),
                    value,
                }])
            }
            other => Err(parse_error(format!(
                "result type `{other}`; the query must return an instant vector or a scalar"
            ))),
        }
    }
}
