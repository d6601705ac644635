//! The outbound policy inside the AWS SDK's HTTP client.
//!
//! aws-config hands the HTTP client of its loader to the SQS client **and**
//! to the credential providers it builds (STS for web identity, the
//! container and instance metadata endpoints), so one client enforcing the
//! policy covers every connection an SQS reading makes. The SDK's default
//! client resolves names itself (getaddrinfo) and honours `HTTPS_PROXY`;
//! this one resolves through the policy and uses no proxy, as the HTTP
//! scraper does.

use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use aws_smithy_http_client::{Builder, tls};
use aws_smithy_runtime_api::client::dns::{DnsFuture, ResolveDns, ResolveDnsError};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use reqwest::Url;

use super::{OutboundDenied, OutboundPolicy, ResolveError};

/// The last connection the policy refused, shared between an SDK client and
/// the reading that uses it: the credential provider chain turns a refused
/// metadata endpoint into "no credentials", and the reading puts the
/// refusal back into its error.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<Option<OutboundDenied>>>);

impl Refusals {
    fn record(&self, denied: &OutboundDenied) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(denied.clone());
    }

    /// The last refusal since the previous `take`, if any.
    pub fn take(&self) -> Option<OutboundDenied> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// An AWS SDK HTTP client (rustls with aws-lc, as the SDK's default) that
/// enforces `policy` on every connection: names go through a resolver that
/// checks the name and keeps only allowed addresses; IP-literal URLs, which
/// the connector reaches without a resolver (the instance metadata service
/// `169.254.169.254`, the container credentials endpoint, an `awsEndpoint`
/// written as an address), are checked before the request. Every refusal is
/// also recorded in `refusals`.
pub fn http_client(policy: Arc<OutboundPolicy>, refusals: Refusals) -> SharedHttpClient {
    let resolver = PolicyDns {
        policy: policy.clone(),
        refusals: refusals.clone(),
    };
    let inner = Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .build_with_resolver(resolver);
    SharedHttpClient::new(PolicyClient {
        inner,
        policy,
        refusals,
    })
}

/// The policy as the SDK connector's DNS resolver.
#[derive(Debug, Clone)]
struct PolicyDns {
    policy: Arc<OutboundPolicy>,
    refusals: Refusals,
}

impl ResolveDns for PolicyDns {
    fn resolve_dns<'a>(&'a self, name: &'a str) -> DnsFuture<'a> {
        DnsFuture::new(async move {
            // The connector puts the URL's port on every address.
            match self.policy.resolve(name, 0).await {
                Ok(addrs) => Ok(addrs.into_iter().map(|a| a.ip()).collect()),
                Err(error) => {
                    if let ResolveError::Denied(denied) = &error {
                        self.refusals.record(denied);
                    }
                    Err(ResolveDnsError::new(error))
                }
            }
        })
    }
}

/// Wraps the SDK's client: each connector it hands out checks IP literals.
struct PolicyClient {
    inner: SharedHttpClient,
    policy: Arc<OutboundPolicy>,
    refusals: Refusals,
}

impl fmt::Debug for PolicyClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyClient")
            .field("policy", &self.policy.summary())
            .finish_non_exhaustive()
    }
}

impl HttpClient for PolicyClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(PolicyConnector {
            inner: self.inner.http_connector(settings, components),
            policy: self.policy.clone(),
            refusals: self.refusals.clone(),
        })
    }

    fn connector_metadata(
        &self,
    ) -> Option<aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata> {
        self.inner.connector_metadata()
    }
}

#[derive(Debug)]
struct PolicyConnector {
    inner: SharedHttpConnector,
    policy: Arc<OutboundPolicy>,
    refusals: Refusals,
}

impl HttpConnector for PolicyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        if let Some(ip) = ip_literal(request.uri())
            && let Err(denied) = self.policy.check_addr(ip)
        {
            self.refusals.record(&denied);
            return HttpConnectorFuture::ready(Err(ConnectorError::other(
                Box::new(ResolveError::Denied(denied)),
                None,
            )));
        }
        self.inner.call(request)
    }
}

/// The address of a URL written with an IP host.
fn ip_literal(uri: &str) -> Option<IpAddr> {
    let url = Url::parse(uri).ok()?;
    url.host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_are_found_in_request_uris() {
        assert_eq!(
            ip_literal("http://169.254.169.254/latest/api/token"),
            Some(IpAddr::from([169, 254, 169, 254]))
        );
        assert_eq!(
            ip_literal("http://[fd00:ec2::254]/latest/api/token"),
            "fd00:ec2::254".parse().ok()
        );
        assert_eq!(ip_literal("https://sqs.us-east-1.amazonaws.com/"), None);
    }
}
