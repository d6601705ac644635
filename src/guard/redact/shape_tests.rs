//! Shapes the first rules let through: a token as the whole userinfo of a
//! schemeless entry, a list cut inside a password, and parameters or
//! headers written without the usual spaces. `tests.rs` holds the rest.

use super::{entry_to_echo, redact};

/// Each `(raw, expected)` pair, and redacting the expected text again
/// changes nothing.
fn check(table: &[(&str, &str)]) {
    for (raw, expected) in table {
        assert_eq!(redact(raw), *expected, "{raw:?}");
        assert_eq!(redact(expected), *expected, "{raw:?} twice");
    }
}

#[test]
fn a_token_alone_before_a_host_is_redacted() {
    check(&[
        (
            "ghp_abc123def456@10.0.0.5:8000/metrics",
            "[redacted]@10.0.0.5:8000/metrics",
        ),
        ("TOKEN@kafka:9092", "[redacted]@kafka:9092"),
        ("error: TOKEN@kafka:9092", "error: [redacted]@kafka:9092"),
        ("(ghp_abc123def456@h/x)", "([redacted]@h/x)"),
        ("url=TOKEN@h:1", "url=[redacted]@h:1"),
        ("dXNlcjpwYXNz==@h:1", "[redacted]@h:1"),
        ("TOKEN%40kafka:9092", "[redacted]%40kafka:9092"),
        ("abc.def-ghi_jkl@h:1", "[redacted]@h:1"),
        ("j42@example.com: failed", "[redacted]@example.com: failed"),
        // Short and lowercase, but a credential's name: hidden anyway.
        ("token@kafka:9092", "[redacted]@kafka:9092"),
        ("secret@kafka:9092", "[redacted]@kafka:9092"),
        // Eight letters or more is long enough to be a token.
        ("postgres@db:5432", "[redacted]@db:5432"),
        ("u1@h:1", "[redacted]@h:1"),
        ("Alice@h:1", "[redacted]@h:1"),
        // A space in a password still joins the word that opened it.
        ("u:S3 CRET@h:9092", "[redacted]@h:9092"),
        ("u:S3 TOKEN42@h:9092", "[redacted]@h:9092"),
        ("http://u:S3 CRET@h/m", "http://[redacted]@h/m"),
        ("error: u:S3 alice@h:1", "error: [redacted]@h:1"),
    ]);
    // A plain user name (one to seven lowercase letters, not a credential's
    // name), an address without a host, a PromQL `@` timestamp or function.
    for raw in [
        "u@a:1",
        "error: u@a:1",
        "alice@kafka:9092",
        "someone@example.com",
        "mail someone@example.com: failed",
        "sum(x)@1700000000",
        "http_requests_total@1700000000",
        "http_requests_total@1700000000.5",
        "http_requests_total@start()",
        "http_requests_total @ 1700000000",
        "TOKEN@",
        "TOKEN@:9092",
        "[redacted]@h:1",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
}

/// An `@` inside PromQL, a quoted label value or a regex is no userinfo, even where a `:`
/// (every vLLM metric name has one) stands before it: what follows the host is not how a URL
/// or a `host:port` list goes on. An outside audit found these shown as `[redacted]@…`, which
/// also broke the paste-ready YAML of `check --from-keda`.
#[test]
fn an_at_inside_promql_or_a_quoted_value_is_kept() {
    for raw in [
        "sum(vllm:num_requests_waiting{model_name=\"m\"}@1700000000)",
        "sum(vllm:num_requests_waiting@1700000000)",
        "avg(vllm:kv_cache_usage_perc{model_name=\"m\"}@start())",
        "sum(vllm:num_requests_waiting{owner=\"alice@example.com\"})",
        "foo{team=\"alice.smith@example.com\"}",
        "foo{team=\"ml-platform@example.com\",ns=\"x\"}",
        "sum(vllm:num_requests_running{model_name=\"Qwen/Qwen2-7B@main\"})",
        "sum(vllm:num_requests_waiting{model_name=\"org/Model@rev,tag\",namespace=\"inference\"})",
        "sum(z{p=\"data-science@corp.io/ml\"})",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
    // Quoted with a port, or unquoted whatever follows, it is a userinfo. (A regex with an
    // `@` after its `(?:` reads as one too: no pod name holds an `@`.)
    check(&[
        (
            "{\"brokers\":\"u:p@kafka:9092\"}",
            "{\"brokers\":\"[redacted]@kafka:9092\"}",
        ),
        ("\"TOKEN@kafka:9092\"", "\"[redacted]@kafka:9092\""),
        ("u:p@kafka", "[redacted]@kafka"),
        ("u:p@kafka/x", "[redacted]@kafka/x"),
        ("^(?:vllm@.*|[a-z]+@gpu)$", "[redacted]@gpu)$"),
    ]);
}

/// A schemeless `user:password@` is hidden whatever follows the `@`: a templated or mistyped
/// host or port (`${PORT}`, `$(HOST)`, `abc`) is no reason to show the password. An outside
/// audit found these shown once the rule above asked for a host and a port.
#[test]
fn a_password_before_any_host_is_redacted() {
    check(&[
        ("u:SEKRIT@kafka:${PORT}", "[redacted]@kafka:${PORT}"),
        (
            "u:SEKRIT@kafka:$(KAFKA_PORT)",
            "[redacted]@kafka:$(KAFKA_PORT)",
        ),
        ("u:SEKRIT@kafka:abc", "[redacted]@kafka:abc"),
        ("kafka:9092,u:SEKRIT@k2:abc", "[redacted]@k2:abc"),
        (
            "u:SEKRIT@$(KAFKA_HOST):9092",
            "[redacted]@$(KAFKA_HOST):9092",
        ),
        ("u:SEKRIT@${HOST}:9092", "[redacted]@${HOST}:9092"),
        ("u:SEKRIT@{{host}}:9092", "[redacted]@{{host}}:9092"),
        ("u:SEKRIT@:9092", "[redacted]@:9092"),
        ("u:SEKRIT@", "[redacted]@"),
        ("u:SEKRIT@kafka|9092", "[redacted]@kafka|9092"),
        ("u:SEKRIT@/x", "[redacted]@/x"),
        (
            "u:SEKRIT@$(HOST):8000/metrics",
            "[redacted]@$(HOST):8000/metrics",
        ),
        ("u:SEKRIT@x(", "[redacted]@x("),
        ("Jane.Doe@10.0.0.1:9100", "[redacted]@10.0.0.1:9100"),
    ]);
}

#[test]
fn a_list_cut_inside_a_password_is_echoed_whole() {
    for (list, entry, echoed) in [
        ("u:pa,ss@h", "u:pa", "u:pa,ss@h"),
        ("u:pa,ss@h:9092", "u:pa", "u:pa,ss@h:9092"),
        (
            "http://u:pa,ss@h:1/metrics",
            "http://u:pa",
            "http://u:pa,ss@h:1/metrics",
        ),
        // Cut where no credential is: the entry alone says which one.
        (
            "http://a:1/metrics,http://b:1/metrics",
            "http://b:1/metrics",
            "http://b:1/metrics",
        ),
        (
            "http://a:1/metrics, ftp://b:1/metrics",
            "ftp://b:1/metrics",
            "ftp://b:1/metrics",
        ),
    ] {
        assert_eq!(entry_to_echo(list, entry, ','), echoed, "{list:?}");
    }
    for (list, entry) in [("u:pa,ss@h", "u:pa"), ("x,u:pa,ss,tt@h:1", "u:pa")] {
        let shown = redact(entry_to_echo(list, entry, ','));
        for piece in ["pa", "ss", "tt"] {
            assert!(!shown.contains(piece), "{list:?} → {shown:?}");
        }
    }
}

#[test]
fn credentials_without_the_usual_spaces_are_redacted() {
    check(&[
        ("http://h/m?token =S3CRET", "http://h/m?token =[redacted]"),
        ("token = S3CRET", "token = [redacted]"),
        ("password =\"S3CRET\"", "password =\"[redacted]\""),
        ("Authorization:S3CRET", "Authorization:[redacted]"),
        ("authorization:S3CRET rest", "authorization:[redacted] rest"),
        ("x-auth-token:S3CRET", "x-auth-token:[redacted]"),
        ("bearer:S3CRET", "bearer:[redacted]"),
        ("Bearer=S3CRET", "Bearer=[redacted]"),
        ("Basic=dXNlcjpTM0NSRVQ=", "Basic=[redacted]"),
        ("Bearer: S3CRET", "Bearer: [redacted]"),
        (
            "Authorization:Bearer S3CRET",
            "Authorization:Bearer [redacted]",
        ),
        (
            r#"{"Authorization":"S3CRET","x":1}"#,
            r#"{"Authorization":"[redacted]","x":1}"#,
        ),
        ("header=bearer:S3CRET&x=1", "header=bearer:[redacted]&x=1"),
        // A value runs past `)`, as a password may hold one.
        ("(x|token=S3CRET)", "(x|token=[redacted]"),
    ]);
    for raw in [
        "vllm:num_requests_waiting",
        "ExpiredToken:The security token included in the request is expired",
        "Content-Type:text/plain",
        "Bearers:x",
        "basically:fine",
        "token =",
        "a == b",
        "http://h:1/metrics",
        "a|b",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
}

/// Short or generic parameter names that carry a credential.
#[test]
fn more_credential_parameter_names_are_redacted() {
    for name in [
        "pw",
        "jwt",
        "sas",
        "cookie",
        "session",
        "sessionid",
        "passphrase",
        "PW",
    ] {
        let raw = format!("http://h:1/m?{name}=S3CR3T&x=1");
        let shown = redact(&raw);
        assert_eq!(
            shown,
            format!("http://h:1/m?{name}=[redacted]&x=1"),
            "{raw}"
        );
    }
    // Names that only contain them are not credentials.
    for raw in ["http://h:1/m?sessions_total=3", "http://h:1/m?pwr=3"] {
        assert_eq!(redact(raw), raw, "{raw}");
    }
}

/// A quote inside a password opens no quoted string: the whole userinfo is hidden. A re-check
/// found the part before the quote shown (`u:pa"[redacted]@…`) and `u:s3cret"@…` shown whole.
/// A label value after `, ` (a space after the comma) is still a quoted value, not the second
/// half of a password with a space.
#[test]
fn a_quote_in_a_password_opens_no_string() {
    check(&[
        ("u:pa\"ss@kafka:9092", "[redacted]@kafka:9092"),
        ("u:pa'ss@rabbit:5672", "[redacted]@rabbit:5672"),
        ("u:secret\"@kafka:9092", "[redacted]@kafka:9092"),
        ("u:s3cret'@kafka:9092", "[redacted]@kafka:9092"),
        ("u:pa\"ss@kafka", "[redacted]@kafka"),
        ("u:pa'ss@kafka:${PORT}", "[redacted]@kafka:${PORT}"),
        ("app:Zx9\"qL%40kafka:9092", "[redacted]%40kafka:9092"),
        ("s3cr3t@abc@kafka:9092", "[redacted]@kafka:9092"),
        ("tok\"en%40127.0.0.1:19092", "[redacted]%40127.0.0.1:19092"),
    ]);
    for raw in [
        "sum(vllm:num_requests_waiting{model_name=\"x\", team=\"ml-platform@example.com\"})",
        "sum by (pod) (vllm:num_requests_waiting{namespace=\"llm\", owner=\"ops@corp.io\"})",
        "{model_name=`Qwen/Qwen2-7B@main`}",
        "{note=\"it's\",team='ml-platform@example.com'}",
        "{a=\"x\\\"y\",team=\"ml-platform@example.com\"}",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
}

/// A password holding several spaces (a passphrase) is hidden whole: the join reached back one
/// word only, and a re-check found `http://u:[redacted] horse battery@…` and
/// `admin:my [redacted]@…`.
#[test]
fn a_passphrase_is_hidden_whole() {
    check(&[
        (
            "admin:correct horse battery@kafka:9092",
            "[redacted]@kafka:9092",
        ),
        (
            "http://u:correct horse battery@vllm:8000/metrics",
            "http://[redacted]@vllm:8000/metrics",
        ),
        (
            "amqp://u:pa ss wd@rabbit:5672/",
            "amqp://[redacted]@rabbit:5672/",
        ),
        ("admin:my pass:word@kafka:9092", "[redacted]@kafka:9092"),
        (
            "value `admin:correct horse battery staple@kafka:9092`: no",
            "value [redacted]@kafka:9092`: no",
        ),
    ]);
    // Words with their own punctuation stop the search: an error's text is not a password.
    for raw in [
        "error: connect to broker failed: u@h:1",
        "at 12:30:45 alice@kafka:9092 failed",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
}
