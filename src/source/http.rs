//! HTTP scraping shared by the pod-scrape sources: target syntax, DNS
//! discovery, and one bounded GET.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::Url;

use super::SourceError;

/// Default cap on a scraped body. A vLLM pod with a few models exposes well
/// under 1 MiB; the cap stops a misdirected target from exhausting memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

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

    /// The URLs to scrape now. A DNS name that resolves to nothing is an error:
    /// an answer of "no pods" is indistinguishable here from a broken resolver,
    /// and reading it as zero work would scale a busy fleet down.
    pub async fn resolve(&self) -> Result<Vec<Url>, SourceError> {
        match self {
            ScrapeTarget::Static(url) => Ok(vec![url.clone()]),
            ScrapeTarget::Dns {
                template,
                host,
                port,
            } => {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), *port))
                    .await
                    .map_err(|e| SourceError::Upstream {
                        target: self.to_string(),
                        reason: format!("DNS lookup of `{host}` failed: {e}"),
                    })?
                    .collect();
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
                if urls.is_empty() {
                    return Err(SourceError::Upstream {
                        target: self.to_string(),
                        reason: format!("DNS name `{host}` has no addresses"),
                    });
                }
                Ok(urls)
            }
        }
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
}

impl HttpScraper {
    /// Build the client. `timeout` bounds connect plus the whole response.
    pub fn new(
        timeout: Duration,
        max_response_bytes: usize,
    ) -> Result<HttpScraper, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A scrape target that redirects is misconfigured; following it
            // would let a target send the scaler anywhere.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("backlog-scaler/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(HttpScraper {
            client,
            max_response_bytes,
        })
    }

    /// GET `url` and return its body as text, or an error naming the URL.
    pub async fn get_text(&self, url: &Url) -> Result<String, SourceError> {
        let upstream = |reason: String| SourceError::Upstream {
            target: url.to_string(),
            reason,
        };
        let mut response = self
            .client
            .get(url.clone())
            // vLLM ignores Accept; engines that negotiate then answer classic
            // text, which avoids client_python's OpenMetrics name-escaping bug.
            .header("accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
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

/// reqwest's Display hides the cause ("error sending request"); the chain
/// has the part an operator needs ("Connection refused").
fn describe_reqwest_error(error: &reqwest::Error) -> String {
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
}
