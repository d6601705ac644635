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
        ("http://10.0.0.7:0/metrics", "port 0"),
        ("dns+http://vllm.ml:0/metrics", "port 0"),
    ] {
        let err = ScrapeTarget::parse(entry).expect_err(entry);
        assert!(err.contains(needle), "{entry}: {err}");
    }
}

/// Every target is shown in labels, logs and `/explain`: one longer than
/// any metrics URL is refused, and the longest allowed is accepted.
#[test]
fn a_target_longer_than_the_limit_is_refused() {
    let long = format!("http://h:1/{}", "a".repeat(MAX_TARGET_BYTES));
    let err = ScrapeTarget::parse(&long).expect_err("too long");
    assert!(err.contains("at most 2048 bytes"), "{err}");
    let longest = format!("http://h:1/{}", "a".repeat(MAX_TARGET_BYTES - 11));
    assert_eq!(longest.len(), MAX_TARGET_BYTES);
    assert!(ScrapeTarget::parse(&longest).is_ok());
}

/// URL parsers percent-encode a space and delete tabs and newlines, so a
/// header pasted after a target (`… Bearer abc`) would be scraped, and
/// shown, as part of the path: whitespace and control characters are
/// refused wherever they stand, and the reason names what was found.
#[test]
fn whitespace_and_control_characters_are_refused() {
    for (entry, found) in [
        ("http://127.0.0.1:1/metrics Bearer S3CRET", "a space"),
        ("http://127.0.0.1:1/met rics", "a space"),
        ("http://127.0.0.1:1/metrics\tx", "a tab"),
        ("http://127.0.0.1:1/me\ntrics", "a line break"),
        ("http://127.0.0.1:1/me\rtrics", "a line break"),
        ("http://127.0.0.1:1/metrics\u{a0}", "whitespace"),
        ("http://127.0.0.1:1/metrics\u{7f}", "a control character"),
        ("http://127.0.0.1:1/metrics\u{0}", "a control character"),
        (
            "dns+http://vllm.ns:8000/metrics\u{1b}[31m",
            "a control character",
        ),
        ("http://127.0.0.1:1/metrics\u{2028}", "whitespace"),
    ] {
        let err = ScrapeTarget::parse(entry).expect_err(entry);
        assert!(err.contains(found), "{entry:?}: {err}");
        assert!(err.contains("%20"), "{entry:?}: {err}");
        assert!(!err.contains("S3CRET"), "{entry:?}: {err}");
    }
    // Percent-encoded, they are ordinary path bytes.
    let t = ScrapeTarget::parse("http://127.0.0.1:1/a%20b").expect("valid");
    assert_eq!(t.to_string(), "http://127.0.0.1:1/a%20b");
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

#[test]
fn only_definite_negative_answers_mean_no_such_name() {
    let gai =
        |text: &str| std::io::Error::other(format!("failed to lookup address information: {text}"));
    assert!(is_no_such_name(&gai("Name or service not known")));
    assert!(is_no_such_name(&gai("No address associated with hostname")));
    assert!(!is_no_such_name(&gai(
        "Temporary failure in name resolution"
    )));
    assert!(!is_no_such_name(&gai("System error")));
}

/// An HTTP server on 127.0.0.1 answering every request with `response`.
async fn answering(response: &'static [u8]) -> Url {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            let _ = stream.write_all(response).await;
            let _ = stream.shutdown().await;
        }
    });
    Url::parse(&format!("http://{addr}/metrics")).expect("url")
}

fn scraper(policy: OutboundPolicy, cap: usize) -> HttpScraper {
    HttpScraper::with_outbound(Duration::from_secs(5), cap, Arc::new(policy)).expect("client")
}

#[tokio::test]
async fn answers_are_classified_by_status_and_body() {
    use crate::source::error::PollOutcome;
    let http = scraper(OutboundPolicy::allow_all(), 64);
    for (response, kind, text) in [
        (
            &b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"[..],
            FailureKind::Status(503),
            "HTTP status 503 Service Unavailable",
        ),
        (
            b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n",
            FailureKind::Status(429),
            "HTTP status 429 Too Many Requests",
        ),
        (
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            FailureKind::Status(404),
            "HTTP status 404 Not Found",
        ),
        (
            b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n",
            FailureKind::Auth,
            "HTTP status 401 Unauthorized",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n\xff\xfe",
            FailureKind::Parse,
            "response is not UTF-8 text (invalid byte at 0)",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n",
            FailureKind::Rejected,
            "response of 100 bytes exceeds the 64 byte cap",
        ),
    ] {
        let url = answering(response).await;
        let err = http.get_text(&url).await.expect_err(text);
        assert_eq!(err.kind(), kind, "{err}");
        assert_eq!(err.to_string(), format!("{url}: {text}"));
        let transient = matches!(kind, FailureKind::Status(503 | 429));
        assert_eq!(err.is_transient(), transient, "{err}");
        let outcome = match kind {
            FailureKind::Parse => PollOutcome::ParseError,
            _ => PollOutcome::UpstreamError,
        };
        assert_eq!(err.outcome(), outcome, "{err}");
    }
}

#[tokio::test]
async fn connection_policy_and_dns_failures_are_classified() {
    // A port nobody listens on: connection refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = listener.local_addr().expect("address");
    drop(listener);
    let url = Url::parse(&format!("http://{closed}/metrics")).expect("url");
    let err = scraper(OutboundPolicy::allow_all(), 1024)
        .get_text(&url)
        .await
        .expect_err("nobody listens");
    assert_eq!(err.kind(), FailureKind::Unreachable, "{err}");
    assert!(err.is_transient());
    assert!(
        err.to_string()
            .starts_with(&format!("{url}: connect failed")),
        "{err}"
    );

    // Refused by the policy: an IP literal before the request, a name in
    // the resolver (its refusal travels through reqwest as the cause).
    let entries = vec!["localhost".to_owned(), "10.0.0.0/8".to_owned()];
    let strict = scraper(
        OutboundPolicy::new(Some(&entries), false).expect("valid"),
        1024,
    );
    for url in ["http://127.0.0.1:9/metrics", "http://localhost:9/metrics"] {
        let url = Url::parse(url).expect("url");
        let err = strict.get_text(&url).await.expect_err("refused");
        assert_eq!(err.kind(), FailureKind::Denied, "{err}");
        assert!(!err.is_transient());
        assert!(err.to_string().contains("refused"), "{err}");
    }
    let target = ScrapeTarget::parse("dns+http://evil.example:80/").expect("valid");
    let err = strict
        .scrape_all(&[target], "engine")
        .await
        .expect_err("name refused");
    assert_eq!(err.kind(), FailureKind::Denied, "{err}");
}

#[test]
fn resolver_texts_are_read_for_dns_failures() {
    let io =
        std::io::Error::other("failed to lookup address information: Name or service not known");
    assert_eq!(
        resolution_failure(&io),
        Some(FailureKind::Dns { no_such_name: true })
    );
    let io = std::io::Error::other(
        "failed to lookup address information: Temporary failure in name resolution",
    );
    assert_eq!(
        resolution_failure(&io),
        Some(FailureKind::Dns {
            no_such_name: false
        })
    );
    let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert_eq!(resolution_failure(&io), None);
}

#[test]
fn one_address_family_per_name() {
    let v4a: IpAddr = "10.0.0.7".parse().expect("ip");
    let v4b: IpAddr = "10.0.0.8".parse().expect("ip");
    let v6a: IpAddr = "fd00::7".parse().expect("ip");
    let v6b: IpAddr = "fd00::8".parse().expect("ip");
    // A dual-stack headless Service: an A and an AAAA record per pod.
    let dual = [v6a, v4a, v6b, v4b, v4a];
    assert_eq!(
        IpFamily::Auto.select(&dual),
        Ok(vec![v4a, v4b]),
        "two pods, not four"
    );
    assert_eq!(IpFamily::Ipv4.select(&dual), Ok(vec![v4a, v4b]));
    assert_eq!(IpFamily::Ipv6.select(&dual), Ok(vec![v6a, v6b]));
    // IPv6-only: auto falls back to AAAA; ipv4 asked for is an error.
    assert_eq!(IpFamily::Auto.select(&[v6b, v6a]), Ok(vec![v6a, v6b]));
    assert_eq!(IpFamily::Ipv4.select(&[v6a]), Err("IPv4"));
    assert_eq!(IpFamily::Ipv6.select(&[v4a]), Err("IPv6"));
    // No addresses at all stays "no addresses", whatever the family.
    for family in [IpFamily::Auto, IpFamily::Ipv4, IpFamily::Ipv6] {
        assert_eq!(family.select(&[]), Ok(vec![]));
        assert_eq!(IpFamily::parse(family.as_str()), Some(family));
    }
    assert_eq!(IpFamily::parse("dual"), None);
}

#[test]
fn the_family_rides_on_dns_targets_only() {
    let dns = ScrapeTarget::parse("dns+http://vllm.ns.svc:8000/metrics").expect("valid");
    assert!(matches!(
        dns,
        ScrapeTarget::Dns {
            family: IpFamily::Auto,
            ..
        }
    ));
    let v6 = dns.clone().with_family(IpFamily::Ipv6);
    assert!(matches!(
        v6,
        ScrapeTarget::Dns {
            family: IpFamily::Ipv6,
            ..
        }
    ));
    assert_ne!(v6, dns, "the family is part of the source's identity");
    assert_eq!(v6.to_string(), dns.to_string());
    let fixed = ScrapeTarget::parse("http://10.0.0.7:8000").expect("valid");
    assert_eq!(fixed.clone().with_family(IpFamily::Ipv6), fixed);
}
