//! HTTP scraping shared by the pod-scrape sources: target syntax, DNS
//! discovery, and one bounded GET.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use super::SourceError;
use crate::guard::credentials::RequestAuth;
use crate::guard::outbound::{OutboundDenied, OutboundPolicy, PolicyResolver};

pub use crate::guard::config::DEFAULT_MAX_RESPONSE_BYTES;

/// One entry of a targets list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ScrapeTarget {
    /// A fixed URL, scraped as is.
    Static(Url),
    /// `dns+http://NAME:PORT/PATH`: NAME is resolved on every poll and every
    /// address is scraped at PORT/PATH (a headless Service lists every pod).
    Dns {
        /// The URL with NAME still in it; the host is replaced per address.
        template: Url,
        /// The name to resolve.
        host: String,
        /// The port to scrape on each address.
        port: u16,
    },
}

impl ScrapeTarget {
    /// Parse one list entry. The error says what is allowed.
    pub fn parse(entry: &str) -> Result<ScrapeTarget, String> {
        let (dns, rest) = match entry.strip_prefix("dns+") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
        // WHATWG parsing reads `http:///metrics` as host `metrics`; a URL
        // whose authority is empty has no host, whatever a parser makes of it.
        if let Some((_, after_scheme)) = rest.split_once("://")
            && (after_scheme.is_empty() || after_scheme.starts_with(['/', '?', '#']))
        {
            return Err("the URL has no host".to_owned());
        }
        let mut url = Url::parse(rest).map_err(|e| {
            format!(
                "not a URL ({e}); expected http(s)://HOST:PORT/PATH or dns+http://NAME:PORT/PATH"
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("the scheme must be http or https (or dns+http, dns+https)".to_owned());
        }
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => return Err("the URL has no host".to_owned()),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "credentials do not belong in metadata; remove `user:password@`".to_owned(),
            );
        }
        // vLLM, SGLang and TGI all serve on /metrics; a bare host:port means that.
        if url.path().is_empty() || url.path() == "/" {
            url.set_path("/metrics");
        }
        url.set_fragment(None);
        if !dns {
            return Ok(ScrapeTarget::Static(url));
        }
        let port = url
            .port_or_known_default()
            .ok_or_else(|| "the URL has no port".to_owned())?;
        if host.parse::<IpAddr>().is_ok() || host.starts_with('[') {
            return Err("dns+ needs a DNS name, not an IP address".to_owned());
        }
        Ok(ScrapeTarget::Dns {
            template: url,
            host,
            port,
        })
    }

    /// The URLs to scrape now. A DNS name with a definite "no such name" or
    /// "no addresses" answer (what a headless Service with no ready pods
    /// returns) resolves to an empty list; whether that is zero pods or a
    /// lost signal is the trigger's call (zero pods only with a broker
    /// source: docs/decisions/0008). A resolver failure (a timeout, SERVFAIL,
    /// no resolver) is an error.
    pub async fn resolve(&self) -> Result<Vec<Url>, SourceError> {
        match self {
            ScrapeTarget::Static(url) => Ok(vec![url.clone()]),
            ScrapeTarget::Dns {
                template,
                host,
                port,
            } => {
                let addrs: Vec<SocketAddr> =
                    match tokio::net::lookup_host((host.as_str(), *port)).await {
                        Ok(addrs) => addrs.collect(),
                        Err(e) if is_no_such_name(&e) => Vec::new(),
                        Err(e) => {
                            return Err(SourceError::Upstream {
                                target: self.to_string(),
                                reason: format!("DNS lookup of `{host}` failed: {e}"),
                            });
                        }
                    };
                let mut urls = Vec::with_capacity(addrs.len());
                for addr in addrs {
                    let mut url = template.clone();
                    // Cannot fail for an http(s) URL and an IP address, but
                    // stay total rather than assume it.
                    if url.set_ip_host(addr.ip()).is_ok() {
                        urls.push(url);
                    }
                }
                urls.sort();
                urls.dedup();
                Ok(urls)
            }
        }
    }
}

/// True for getaddrinfo's definite negative answers: `EAI_NONAME` (NXDOMAIN)
/// and `EAI_NODATA` (the name exists with no A/AAAA records). std exposes
/// them only through their `gai_strerror` text; `EAI_AGAIN` ("Temporary
/// failure in name resolution": SERVFAIL, timeouts) stays an error.
pub fn is_no_such_name(error: &std::io::Error) -> bool {
    let text = error.to_string();
    [
        "Name or service not known",           // glibc EAI_NONAME
        "No address associated with hostname", // glibc EAI_NODATA
        "nodename nor servname provided",      // BSD / macOS EAI_NONAME
        "Name does not resolve",               // musl EAI_NONAME
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

impl ScrapeTarget {
    /// Check the host this target names against `policy` (a name against
    /// the host patterns, an IP literal against the CIDRs and the refused
    /// defaults). No DNS: resolved addresses are checked at connect time.
    pub fn check_outbound(&self, policy: &OutboundPolicy) -> Result<(), OutboundDenied> {
        match self {
            ScrapeTarget::Static(url) => policy.check_url(url),
            ScrapeTarget::Dns { host, .. } => policy.check_host(host),
        }
    }

    /// [`Self::resolve`], with the policy applied: the name must be admitted
    /// and every address it resolves to allowed. A refused address is an
    /// error, not dropped: each address is a pod, and a reading that
    /// silently misses pods would under-count.
    pub async fn resolve_checked(&self, policy: &OutboundPolicy) -> Result<Vec<Url>, SourceError> {
        let denied = |d: OutboundDenied| SourceError::Upstream {
            target: self.to_string(),
            reason: d.to_string(),
        };
        self.check_outbound(policy).map_err(denied)?;
        let urls = self.resolve().await?;
        if let ScrapeTarget::Dns { host, .. } = self {
            for url in &urls {
                if let Some(ip) = url_ip(url) {
                    policy
                        .check_addr(ip)
                        .map_err(|d| OutboundDenied {
                            target: format!("{ip} (resolved from {host})"),
                            rule: d.rule,
                        })
                        .map_err(denied)?;
                }
            }
        }
        Ok(urls)
    }
}

impl fmt::Display for ScrapeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScrapeTarget::Static(url) => write!(f, "{url}"),
            ScrapeTarget::Dns { template, .. } => write!(f, "dns+{template}"),
        }
    }
}

/// A shared HTTP client with a per-request timeout and a body cap.
#[derive(Debug, Clone)]
pub struct HttpScraper {
    client: reqwest::Client,
    max_response_bytes: usize,
    outbound: Arc<OutboundPolicy>,
}

impl HttpScraper {
    /// Build the client. `timeout` bounds connect plus the whole response.
    /// Only the refused default addresses are blocked (no allowlist); the
    /// server uses [`Self::with_outbound`].
    pub fn new(
        timeout: Duration,
        max_response_bytes: usize,
    ) -> Result<HttpScraper, reqwest::Error> {
        Self::with_outbound(
            timeout,
            max_response_bytes,
            Arc::new(OutboundPolicy::allow_all()),
        )
    }

    /// Build the client enforcing `outbound` on every connection: names go
    /// through a resolver that drops refused addresses, IP-literal URLs are
    /// checked before the request (they bypass the resolver).
    pub fn with_outbound(
        timeout: Duration,
        max_response_bytes: usize,
        outbound: Arc<OutboundPolicy>,
    ) -> Result<HttpScraper, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A scrape target that redirects is misconfigured; following it
            // would let a target send the scaler anywhere.
            .redirect(reqwest::redirect::Policy::none())
            // The policy is applied where addresses are resolved; a proxy
            // would resolve the target itself, out of our sight.
            .no_proxy()
            .dns_resolver(Arc::new(PolicyResolver::new(outbound.clone())))
            .user_agent(concat!("backlog-scaler/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(HttpScraper {
            client,
            max_response_bytes,
            outbound,
        })
    }

    /// The outbound policy this client enforces.
    pub fn outbound(&self) -> &Arc<OutboundPolicy> {
        &self.outbound
    }

    /// GET `url` and return its body as text, or an error naming the URL.
    pub async fn get_text(&self, url: &Url) -> Result<String, SourceError> {
        self.get_text_with(url, None).await
    }

    /// GET `url` with credentials from a scaler-side profile.
    pub async fn get_text_with(
        &self,
        url: &Url,
        auth: Option<&RequestAuth>,
    ) -> Result<String, SourceError> {
        let upstream = |reason: String| SourceError::Upstream {
            target: url.to_string(),
            reason,
        };
        // An IP-literal URL (a dns+ discovered pod among them) never reaches
        // the resolver: check the address here.
        if let Some(ip) = url_ip(url)
            && let Err(denied) = self.outbound.check_addr(ip)
        {
            return Err(upstream(denied.to_string()));
        }
        let mut request = self
            .client
            .get(url.clone())
            // vLLM ignores Accept; engines that negotiate then answer classic
            // text, which avoids client_python's OpenMetrics name-escaping bug.
            .header("accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1");
        if let Some(auth) = auth {
            request = auth.apply(request);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| upstream(describe_reqwest_error(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(upstream(format!("HTTP status {status}")));
        }
        if let Some(len) = response.content_length()
            && len > self.max_response_bytes as u64
        {
            return Err(upstream(format!(
                "response of {len} bytes exceeds the {} byte cap",
                self.max_response_bytes
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| upstream(describe_reqwest_error(&e)))?
        {
            if body.len() + chunk.len() > self.max_response_bytes {
                return Err(upstream(format!(
                    "response exceeds the {} byte cap",
                    self.max_response_bytes
                )));
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|e| SourceError::Parse {
            target: url.to_string(),
            reason: format!(
                "response is not UTF-8 text (invalid byte at {})",
                e.utf8_error().valid_up_to()
            ),
        })
    }
}

/// The address of an IP-literal URL.
fn url_ip(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// reqwest's Display hides the cause ("error sending request"); the chain
/// has the part an operator needs ("Connection refused").
pub(crate) fn describe_reqwest_error(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "connect failed".to_owned()
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_static_and_dns_targets() {
        let t = ScrapeTarget::parse("http://10.0.0.7:8000").expect("valid");
        assert_eq!(t.to_string(), "http://10.0.0.7:8000/metrics");
        let t = ScrapeTarget::parse("dns+http://vllm.ns.svc:8000/metrics").expect("valid");
        assert!(matches!(t, ScrapeTarget::Dns { port: 8000, .. }));
        assert_eq!(t.to_string(), "dns+http://vllm.ns.svc:8000/metrics");
    }

    #[test]
    fn rejects_what_cannot_be_scraped() {
        for (entry, needle) in [
            ("http:///metrics", "host"),
            ("ftp://a/metrics", "scheme"),
            ("not a url", "not a URL"),
            ("http://u:p@a/metrics", "credentials"),
            ("dns+http://10.0.0.1:80/metrics", "DNS name"),
        ] {
            let err = ScrapeTarget::parse(entry).expect_err(entry);
            assert!(err.contains(needle), "{entry}: {err}");
        }
    }

    #[tokio::test]
    async fn dns_targets_resolve_every_address() {
        let t = ScrapeTarget::parse("dns+http://localhost:8000/metrics").expect("valid");
        let urls = t.resolve().await.expect("localhost resolves");
        assert!(!urls.is_empty());
        for url in urls {
            assert!(
                url.host_str()
                    .is_some_and(|h| h.parse::<IpAddr>().is_ok() || h.starts_with('['))
            );
            assert_eq!(url.port(), Some(8000));
            assert_eq!(url.path(), "/metrics");
        }
    }

    #[tokio::test]
    async fn checked_resolution_applies_the_outbound_policy() {
        let entries = vec!["localhost".to_owned(), "10.0.0.0/8".to_owned()];
        let policy = OutboundPolicy::new(Some(&entries), false).expect("valid");
        let t = ScrapeTarget::parse("dns+http://localhost:8000/metrics").expect("valid");
        t.check_outbound(&policy).expect("the name is allowed");
        let err = t
            .resolve_checked(&policy)
            .await
            .expect_err("loopback refused");
        assert!(err.to_string().contains("resolved from localhost"), "{err}");
        let t = ScrapeTarget::parse("http://169.254.169.254/metrics").expect("valid");
        let err = t
            .check_outbound(&OutboundPolicy::allow_all())
            .expect_err("metadata");
        assert!(err.rule.contains("refused by default"), "{err}");
        let t = ScrapeTarget::parse("dns+http://evil.example:80/").expect("valid");
        let err = t
            .resolve_checked(&policy)
            .await
            .expect_err("name refused, no DNS");
        assert!(err.to_string().contains("no host pattern"), "{err}");
    }
}

#[cfg(test)]
mod resolution_tests {
    use super::is_no_such_name;

    #[test]
    fn only_definite_negative_answers_mean_no_such_name() {
        let gai = |text: &str| {
            std::io::Error::other(format!("failed to lookup address information: {text}"))
        };
        assert!(is_no_such_name(&gai("Name or service not known")));
        assert!(is_no_such_name(&gai("No address associated with hostname")));
        assert!(!is_no_such_name(&gai(
            "Temporary failure in name resolution"
        )));
        assert!(!is_no_such_name(&gai("System error")));
    }
}
