//! What every reading shares: the HTTP client, the outbound policy, and
//! the scaler-side credentials (Prometheus profiles, broker clients).

use std::collections::HashMap;
use std::sync::Arc;

use super::broker::context::{BrokerContext, BrokerContextError, DEFAULT_REQUEST_TIMEOUT};
use super::http::HttpScraper;
use crate::guard::credentials::{self, ProfileError, PrometheusAuth, RequestAuth};
use crate::guard::outbound::OutboundPolicy;

/// What sources share: HTTP client, limits and scaler-side credentials.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// Scrapes HTTP endpoints with timeouts and a body cap.
    pub http: HttpScraper,
    /// Credentials for Prometheus servers, by profile name; each re-read
    /// when one of its files changes.
    pub prometheus_auth: Arc<HashMap<String, PrometheusAuth>>,
    /// Where sources may connect (the `outbound` config); the same policy
    /// `http` and `brokers` enforce on every connection they open.
    pub outbound: Arc<OutboundPolicy>,
    /// Broker clients and credential profiles.
    pub brokers: BrokerContext,
}

impl SourceContext {
    /// A context with no credentials.
    pub fn new(http: HttpScraper) -> Result<SourceContext, BrokerContextError> {
        Self::with_profiles(
            http,
            Arc::new(credentials::Profiles::default()),
            HashMap::new(),
        )
    }

    /// A context with credential profiles (Prometheus credentials read).
    pub fn with_profiles(
        http: HttpScraper,
        profiles: Arc<credentials::Profiles>,
        prometheus_auth: HashMap<String, PrometheusAuth>,
    ) -> Result<SourceContext, BrokerContextError> {
        let outbound = http.outbound().clone();
        Ok(SourceContext {
            brokers: BrokerContext::with_outbound(
                profiles,
                DEFAULT_REQUEST_TIMEOUT,
                outbound.clone(),
            )?,
            outbound,
            http,
            prometheus_auth: Arc::new(prometheus_auth),
        })
    }

    /// The context a scaler config implies: every profile's secrets are
    /// read once now (a missing environment variable or file fails here, at
    /// start-up, not at the first poll); Prometheus credentials are read
    /// again whenever one of their files changes.
    pub fn from_config(
        config: &crate::guard::config::ScalerConfig,
        http: HttpScraper,
    ) -> Result<SourceContext, String> {
        config.profiles.check_secrets().map_err(|e| e.to_string())?;
        let prometheus_auth = config
            .profiles
            .prometheus_auth()
            .map_err(|e| e.to_string())?;
        Self::with_profiles(http, Arc::new(config.profiles.clone()), prometheus_auth)
            .map_err(|e| e.to_string())
    }

    /// The credential profiles.
    pub fn profiles(&self) -> &credentials::Profiles {
        &self.brokers.profiles
    }

    /// The current credentials of a profile, if it has Prometheus ones:
    /// re-read when one of their files changed since the last request (one
    /// `stat` per file otherwise). An error names the unreadable file.
    pub fn prometheus_auth(
        &self,
        profile: Option<&str>,
    ) -> Result<Option<Arc<RequestAuth>>, ProfileError> {
        profile
            .and_then(|p| self.prometheus_auth.get(p))
            .map(PrometheusAuth::current)
            .transpose()
    }
}
