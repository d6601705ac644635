//! HTTP reading, for the pod-scrape sources (engine, dcgm) and Prometheus:
//! target syntax, DNS discovery, the fan-out over every pod, and one
//! bounded GET, with each failure classified ([`FailureKind`]) where it
//! happens.
//!
//! Fan-out and GET live together so that one pod-scrape reading is one
//! call here ([`HttpScraper::scrape_all`]) followed by the source's parser.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use tokio::task::JoinSet;

use super::error::{FailureKind, SourceError};
use crate::guard::credentials::RequestAuth;
use crate::guard::outbound::{OutboundDenied, OutboundPolicy, PolicyResolver, ResolveError};
use crate::guard::redact::redact;

pub use crate::guard::config::DEFAULT_MAX_RESPONSE_BYTES;
pub use family::IpFamily;

mod family;

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
        /// Which address family counts as the pods (`ipFamily`).
        family: IpFamily,
    },
}

/// The longest target URL accepted.
pub const MAX_TARGET_BYTES: usize = 2048;

impl ScrapeTarget {
    /// Parse one list entry. The error says what is allowed.
    pub fn parse(entry: &str) -> Result<ScrapeTarget, String> {
        // Every target is shown in labels, logs and `/explain`: a 100 KB one
        // would make each of them 100 KB. No metrics URL is near this long.
        if entry.len() > MAX_TARGET_BYTES {
            return Err(format!(
                "a URL of at most {MAX_TARGET_BYTES} bytes (this one has {}); {EXPECTED}",
                entry.len()
            ));
        }
        // URL parsers percent-encode a space and delete tabs and newlines,
        // so `http://h/metrics Bearer abc` would be accepted and its tail
        // scraped and shown as path (`%20Bearer%20abc`). A target is one
        // URL: whitespace or a control character anywhere is refused.
        if let Some(found) = entry.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "not a URL: {} is not allowed in one (percent-encode it, e.g. a space in a path as `%20`); {EXPECTED}",
                describe(found)
            ));
        }
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
        let mut url = Url::parse(rest).map_err(|e| format!("not a URL ({e}); {EXPECTED}"))?;
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
        // Port 0 is "any port" to a listener and no port to connect to.
        if url.port() == Some(0) {
            return Err(
                "port 0 is no port to connect to; write the port the pods serve on".to_owned(),
            );
        }
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
            family: IpFamily::Auto,
        })
    }

    /// The same target reading `family` of its name's addresses (a static
    /// URL is unchanged: it is one pod whatever its address).
    pub fn with_family(self, family: IpFamily) -> ScrapeTarget {
        match self {
            ScrapeTarget::Dns {
                template,
                host,
                port,
                ..
            } => ScrapeTarget::Dns {
                template,
                host,
                port,
                family,
            },
            target => target,
        }
    }

    /// The URLs to scrape now. A DNS name with a definite "no such name" or
    /// "no addresses" answer (what a headless Service with no ready pods
    /// returns) resolves to an empty list; whether that is zero pods or a
    /// lost signal is the trigger's call (zero pods only with a broker
    /// source: docs/decisions/0008). A resolver failure (a timeout, SERVFAIL,
    /// no resolver) is an error. Of a name's addresses, one family counts
    /// ([`IpFamily::select`]): a dual-stack pod has one A and one AAAA record
    /// and is one pod. A name with addresses, none of the family `ipFamily`
    /// asks for, is an error: zero pods would be a guess.
    pub async fn resolve(&self) -> Result<Vec<Url>, SourceError> {
        match self {
            ScrapeTarget::Static(url) => Ok(vec![url.clone()]),
            ScrapeTarget::Dns {
                template,
                host,
                port,
                family,
            } => {
                let addrs: Vec<IpAddr> = match tokio::net::lookup_host((host.as_str(), *port)).await
                {
                    Ok(addrs) => addrs.map(|a: SocketAddr| a.ip()).collect(),
                    Err(e) if is_no_such_name(&e) => Vec::new(),
                    Err(e) => {
                        return Err(SourceError::new(
                            FailureKind::Dns {
                                no_such_name: false,
                            },
                            self.to_string(),
                            format!("DNS lookup of `{host}` failed: {e}"),
                        ));
                    }
                };
                let chosen = family.select(&addrs).map_err(|missing| {
                    SourceError::new(
                        FailureKind::Config,
                        self.to_string(),
                        format!(
                            "`{host}` has no {missing} address (it resolves to {}) and ipFamily is `{}`",
                            join_addrs(&addrs),
                            family.as_str()
                        ),
                    )
                })?;
                let mut urls = Vec::with_capacity(chosen.len());
                for ip in chosen {
                    let mut url = template.clone();
                    // Cannot fail for an http(s) URL and an IP address, but
                    // stay total rather than assume it.
                    if url.set_ip_host(ip).is_ok() {
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

/// What a target entry looks like, for the reasons that refuse one.
const EXPECTED: &str = "expected http(s)://HOST:PORT/PATH or dns+http://NAME:PORT/PATH";

/// A character a target may not hold, named for a message: the invisible
/// ones by their code point, since the echoed value cannot show them.
fn describe(c: char) -> String {
    match c {
        ' ' => "a space".to_owned(),
        '\t' => "a tab".to_owned(),
        '\n' | '\r' => "a line break".to_owned(),
        c if c.is_whitespace() => format!("whitespace (U+{:04X})", u32::from(c)),
        c => format!("a control character (U+{:04X})", u32::from(c)),
    }
}

/// `a, b, c` (at most 4, then `…`), for messages.
fn join_addrs(addrs: &[IpAddr]) -> String {
    let mut text: Vec<String> = addrs.iter().take(4).map(IpAddr::to_string).collect();
    if addrs.len() > 4 {
        text.push("…".to_owned());
    }
    text.join(", ")
}

/// True for getaddrinfo's definite negative answers: `EAI_NONAME` (NXDOMAIN)
/// and `EAI_NODATA` (the name exists with no A/AAAA records). std exposes
/// them only through their `gai_strerror` text; `EAI_AGAIN` ("Temporary
/// failure in name resolution": SERVFAIL, timeouts) stays an error.
pub fn is_no_such_name(error: &std::io::Error) -> bool {
    names_no_such_name(&error.to_string())
}

/// [`is_no_such_name`] on the error's text, for resolvers that hand it on
/// as text only (the outbound policy's, librdkafka's, hyper's).
pub(crate) fn names_no_such_name(text: &str) -> bool {
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
        let denied = |d: OutboundDenied| SourceError::denied(self.to_string(), &d);
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

/// The target as logs, errors, labels and `/explain` show it: the URL with
/// credential-shaped parts redacted (a token in its query string), since
/// every output names targets through this Display.
impl fmt::Display for ScrapeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScrapeTarget::Static(url) => f.write_str(&redact(url.as_str())),
            ScrapeTarget::Dns { template, .. } => write!(f, "dns+{}", redact(template.as_str())),
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
        let failed = |error: &reqwest::Error| {
            SourceError::new(
                classify_reqwest(error),
                url.as_str(),
                describe_reqwest_error(error),
            )
        };
        // An IP-literal URL (a dns+ discovered pod among them) never reaches
        // the resolver: check the address here.
        if let Some(ip) = url_ip(url)
            && let Err(denied) = self.outbound.check_addr(ip)
        {
            return Err(SourceError::denied(url.as_str(), &denied));
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
        let mut response = request.send().await.map_err(|e| failed(&e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(SourceError::http_status(
                url.as_str(),
                status.as_u16(),
                format!("HTTP status {status}"),
            ));
        }
        let too_big =
            |detail: String| SourceError::new(FailureKind::Rejected, url.as_str(), detail);
        if let Some(len) = response.content_length()
            && len > self.max_response_bytes as u64
        {
            return Err(too_big(format!(
                "response of {len} bytes exceeds the {} byte cap",
                self.max_response_bytes
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| failed(&e))? {
            if body.len() + chunk.len() > self.max_response_bytes {
                return Err(too_big(format!(
                    "response exceeds the {} byte cap",
                    self.max_response_bytes
                )));
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|e| {
            SourceError::parse(
                url.as_str(),
                format!(
                    "response is not UTF-8 text (invalid byte at {})",
                    e.utf8_error().valid_up_to()
                ),
            )
        })
    }

    /// One pod-scrape reading: resolve every target (`dns+` addresses
    /// checked against the outbound policy here, so a refusal names the DNS
    /// name it came from), then GET every URL concurrently. The first
    /// failure fails the whole reading; `label` names the reading when a
    /// scrape task itself fails.
    pub async fn scrape_all(
        &self,
        targets: &[ScrapeTarget],
        label: &str,
    ) -> Result<Scraped, SourceError> {
        let mut urls = Vec::new();
        let mut empty_names = Vec::new();
        for target in targets {
            let found = target.resolve_checked(&self.outbound).await?;
            if found.is_empty() {
                empty_names.push(target.to_string());
            }
            urls.extend(found);
        }
        urls.sort();
        urls.dedup();
        let mut scrapes = JoinSet::new();
        for url in urls {
            let http = self.clone();
            scrapes.spawn(async move {
                let body = http.get_text(&url).await;
                // From here the URL only names the pod (readings,
                // `/explain`, errors): keep it redacted.
                (redact(url.as_str()), body)
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
                    first_error.get_or_insert(SourceError::new(
                        FailureKind::Internal,
                        label,
                        format!("scrape task failed: {join_error}"),
                    ));
                }
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
        bodies.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Scraped {
            bodies,
            empty_names,
        })
    }
}

/// What one scrape of every target got.
#[derive(Debug, Default)]
pub struct Scraped {
    /// Each URL scraped, as readings and errors name the pod (credential-
    /// shaped parts redacted), and its body; sorted by URL.
    pub bodies: Vec<(String, String)>,
    /// `dns+` targets whose name has no addresses (NXDOMAIN or no records).
    pub empty_names: Vec<String>,
}

/// The address of an IP-literal URL.
fn url_ip(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The kind of a failed request: a refusal or a failed name lookup (see
/// [`resolution_failure`]), else [`FailureKind::Unreachable`]: whatever kept
/// an answer from arriving.
pub(crate) fn classify_reqwest(error: &reqwest::Error) -> FailureKind {
    if let Some(status) = error.status() {
        return FailureKind::of_status(status.as_u16());
    }
    resolution_failure(error).unwrap_or(FailureKind::Unreachable)
}

/// The kind of a connection failure that happened at name resolution, or
/// `None`. The outbound policy's resolver hands its refusal or lookup
/// failure on as an error's cause; hyper's own resolver (the broker HTTP
/// client, the AWS SDK) says "dns error" around getaddrinfo's text.
pub(crate) fn resolution_failure(error: &(dyn std::error::Error + 'static)) -> Option<FailureKind> {
    let (mut dns, mut no_such_name) = (false, false);
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(resolve) = cause.downcast_ref::<ResolveError>() {
            return Some(match resolve {
                ResolveError::Denied(_) => FailureKind::Denied,
                ResolveError::Lookup { reason, .. } => FailureKind::Dns {
                    no_such_name: reason == "no addresses" || names_no_such_name(reason),
                },
            });
        }
        let text = cause.to_string();
        dns |= text == "dns error" || text.contains("failed to lookup address information");
        no_such_name |= names_no_such_name(&text);
        next = cause.source();
    }
    dns.then_some(FailureKind::Dns { no_such_name })
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
mod tests;
