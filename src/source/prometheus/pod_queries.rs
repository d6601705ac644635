//! The identity of a per-pod PromQL engine source: plain data, apart from
//! the reading (in [`super::pods`]) so that the engine source can hold it
//! without the engine's reading types depending on each other in a circle.

use reqwest::Url;

/// The per-pod queries of one trigger (`policy: capacity` with
/// `prometheusAddress`). Part of an engine source's identity: triggers with
/// equal queries share one poller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodQueries {
    /// Base URL of the Prometheus API.
    pub address: Url,
    /// Scaler-side credentials profile (`authProfile`).
    pub auth_profile: Option<String>,
    /// The label naming the pod in every answer (`podLabel`).
    pub pod_label: String,
    /// `W` per pod (`podWaitingQuery`).
    pub waiting: String,
    /// `R` per pod (`podRunningQuery`), if the engine has it.
    pub running: Option<String>,
    /// Finished requests per pod, raw counter values (`podFinishedQuery`).
    pub finished: String,
    /// Generated tokens per pod, raw counter values
    /// (`podGenerationTokensQuery`), if the engine has the counter.
    pub generation_tokens: Option<String>,
    /// Prompt tokens per pod, raw counter values (`podPromptTokensQuery`).
    pub prompt_tokens: Option<String>,
    /// KV usage per pod (`podKvCacheQuery`), if the engine has it.
    pub kv_cache: Option<String>,
    /// TTFT buckets per pod and `le`, when the latency guard is on.
    pub ttft: Option<String>,
}
