//! The redactor on its own: each credential shape, and what it must leave alone.

use super::{redact, redact_userinfo};

#[test]
fn userinfo_of_any_scheme_is_redacted() {
    for (raw, expected) in [
        (
            "http://admin:S3CRET@10.0.0.1/metrics",
            "http://[redacted]@10.0.0.1/metrics",
        ),
        (
            "ftp://admin:S3CRET@10.0.0.1/metrics",
            "ftp://[redacted]@10.0.0.1/metrics",
        ),
        (
            "dns+http://admin:S3CRET@vllm.ns:8000/metrics",
            "dns+http://[redacted]@vllm.ns:8000/metrics",
        ),
        ("amqps://u:p@mq:5671", "amqps://[redacted]@mq:5671"),
        ("redis://:S3CRET@r:6379", "redis://[redacted]@r:6379"),
        ("http://token@h", "http://[redacted]@h"),
        // A password holding `@`, `,` or `?`-free punctuation stays hidden whole.
        ("amqp://u:pa@ss@h:5672/v", "amqp://[redacted]@h:5672/v"),
        ("http://u:a,b@h:1/m", "http://[redacted]@h:1/m"),
    ] {
        assert_eq!(redact(raw), expected, "{raw}");
    }
}

#[test]
fn every_url_of_a_list_loses_its_userinfo() {
    assert_eq!(
        redact("http://a:1/metrics,http://admin:S3CRET@b:1/metrics, dns+http://u:S3CRET@c:1"),
        "http://a:1/metrics,http://[redacted]@b:1/metrics, dns+http://[redacted]@c:1"
    );
    assert_eq!(
        redact("http://u:S3CRET@a:1,http://v:S3CRET@b:1"),
        "http://[redacted]@a:1,http://[redacted]@b:1"
    );
    assert_eq!(
        redact("http://a:1,http://u:S3CRET@b:1"),
        "http://a:1,http://[redacted]@b:1"
    );
}

#[test]
fn bare_user_password_entries_are_redacted() {
    assert_eq!(
        redact("b0:9092,admin:S3CRET@b1:9092"),
        "b0:9092,[redacted]@b1:9092"
    );
    // Not credential-shaped: no `user:` before the `@`.
    for raw in [
        "sum(x) @ 1700000000",
        "someone@example.com",
        "u@a:1",
        "http://h:1/a@b",
    ] {
        assert_eq!(redact(raw), raw);
    }
}

#[test]
fn credential_parameters_are_redacted_by_name() {
    for (raw, expected) in [
        (
            "http://h:1/metrics?token=S3CRET",
            "http://h:1/metrics?token=[redacted]",
        ),
        (
            "https://s3.x/b?X-Amz-Credential=AK%2F1&X-Amz-Signature=S3CRET&x=1",
            "https://s3.x/b?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&x=1",
        ),
        (
            "http://h/m?format=text&ACCESS_TOKEN=S3CRET#top",
            "http://h/m?format=text&ACCESS_TOKEN=[redacted]#top",
        ),
        ("http://h/m?sig=S3CRET", "http://h/m?sig=[redacted]"),
        ("http://h/m?apiKey=S3CRET", "http://h/m?apiKey=[redacted]"),
        ("http://h/m?pwd=S3CRET;a=b", "http://h/m?pwd=[redacted];a=b"),
        ("http://h/m?%74oken=S3CRET", "http://h/m?%74oken=[redacted]"),
        ("password=S3CRET", "password=[redacted]"),
        ("a=1, client_secret=S3CRET", "a=1, client_secret=[redacted]"),
        (
            "http://h/m?private_token=S3CRET",
            "http://h/m?private_token=[redacted]",
        ),
    ] {
        assert_eq!(redact(raw), expected, "{raw}");
    }
    for raw in [
        "http://h/m?format=text&match[]=up",
        "http://h/m?token=",
        "sum(rate(x{job=\"a\"}[5m]))",
        "a==b",
    ] {
        assert_eq!(redact(raw), raw);
    }
}

#[test]
fn authorization_header_values_are_redacted() {
    for (raw, expected) in [
        ("Bearer S3CRET", "Bearer [redacted]"),
        ("bearer  S3CRET", "bearer  [redacted]"),
        (
            "Authorization: Basic dXNlcjpTM0NSRVQ=",
            "Authorization: Basic [redacted]",
        ),
        ("header=BEARER S3CRET x", "header=BEARER [redacted] x"),
    ] {
        assert_eq!(redact(raw), expected, "{raw}");
    }
    for raw in ["Bearer", "Bearers of news", "basically fine"] {
        assert_eq!(redact(raw), raw);
    }
}

#[test]
fn plain_values_pass_through() {
    for raw in [
        "",
        "jobs",
        "10",
        "llama-8b-.*",
        "vllm:waiting",
        "http:///metrics",
        "ftp://a/metrics",
        "PLAINTEXT://b:9092",
        "a b",
        "Qwen/Qwen2.5:7B (50%)",
        "ünïcödé=ß&token",
    ] {
        assert_eq!(redact(raw), raw);
    }
}

#[test]
fn userinfo_alone_keeps_the_broker_format() {
    assert_eq!(
        redact_userinfo("amqp://user:pa@ss@h:5672/v?x=@"),
        "amqp://[redacted]@h:5672/v?x=@"
    );
    assert_eq!(redact_userinfo("http://h:1/a@b"), "http://h:1/a@b");
    assert_eq!(redact_userinfo("jobs"), "jobs");
}

#[test]
fn quoted_values_lose_only_what_is_inside_the_quotes() {
    for (raw, expected) in [
        (
            "sum(x{job=\"a\",token=\"S3CRET\"})",
            "sum(x{job=\"a\",token=\"[redacted]\"})",
        ),
        ("x{api_key=~\"S3CRET.*\"}", "x{api_key=~\"[redacted]\"}"),
        ("x{secret!=\"S3CRET\"}", "x{secret!=\"[redacted]\"}"),
        ("password='S3 CRET' rest", "password='[redacted]' rest"),
        // A log line in JSON: the value's quotes are escaped.
        (
            r#"{"error":"query x{token=\"S3CRET\"} failed"}"#,
            r#"{"error":"query x{token=\"[redacted]\"} failed"}"#,
        ),
        // An unclosed quote hides the rest.
        ("token=\"S3CRET and more", "token=\"[redacted]"),
    ] {
        assert_eq!(redact(raw), expected, "{raw}");
    }
}

#[test]
fn parameters_inside_quotes_and_json_end_at_the_quote() {
    for (raw, expected) in [
        (
            r#"{"url":"http://h:1/m?token=S3CRET","next":1}"#,
            r#"{"url":"http://h:1/m?token=[redacted]","next":1}"#,
        ),
        ("value `token=S3CRET`: no", "value `token=[redacted]`: no"),
        ("\"password=S3CRET\"", "\"password=[redacted]\""),
        (
            "error sending request for url (http://h:1/m?sig=S3CRET)",
            "error sending request for url (http://h:1/m?sig=[redacted]",
        ),
    ] {
        assert_eq!(redact(raw), expected, "{raw}");
    }
}

#[test]
fn header_like_credentials_are_redacted() {
    for (raw, expected) in [
        ("X-Api-Key: S3CRET", "X-Api-Key: [redacted]"),
        (
            "headers: x-auth-token: S3CRET, y",
            "headers: x-auth-token: [redacted] y",
        ),
        (
            "Authorization: Bearer S3CRET",
            "Authorization: Bearer [redacted]",
        ),
        (
            "Proxy-Authorization: S3CRET",
            "Proxy-Authorization: [redacted]",
        ),
    ] {
        assert_eq!(redact(raw), expected, "{raw}");
    }
    for raw in [
        "connect failed: connection refused",
        "Content-Type: text/plain",
        "a:: b",
        // An error code is not a header: its explanation stays.
        "ExpiredToken: The security token included in the request is expired",
        "SASL authentication failed: bad mechanism",
    ] {
        assert_eq!(redact(raw), raw);
    }
}

#[test]
fn redacting_twice_changes_nothing() {
    for raw in [
        "http://admin:S3CRET@10.0.0.1/metrics?token=S3CRET&x=1",
        "sum(x{token=\"S3CRET\"}) Bearer S3CRET",
        "X-Api-Key: S3CRET; password=S3CRET",
        "b0:9092,admin:S3CRET@b1:9092",
        "(http://h:1/m?sig=S3CRET)",
    ] {
        let once = redact(raw);
        assert!(!once.contains("S3CRET"), "{raw} → {once}");
        assert_eq!(redact(&once), once, "{raw}");
    }
}
