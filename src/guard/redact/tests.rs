//! The redactor on its own: each credential shape, and what it must leave alone.

use super::redact;

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
        // A credential in a fragment (OAuth's implicit flow writes it there).
        (
            "http://h:1/metrics#access_token=T0KEN",
            "http://h:1/metrics#access_token=[redacted]",
        ),
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
    // A password may hold `,`, so a schemeless list loses what precedes
    // the `@` back to the start of the word.
    assert_eq!(redact("b0:9092,admin:S3CRET@b1:9092"), "[redacted]@b1:9092");
    // Not credential-shaped: no scheme, no `user:` before the `@`.
    for raw in [
        "sum(x) @ 1700000000",
        "sum(x) @1700000000",
        "someone@example.com",
        "mail someone@example.com: failed",
        "u@a:1",
        "error: u@a:1",
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

/// Every way a URL's userinfo can be introduced: real schemes, the slash
/// and backslash runs WHATWG parsers accept after a special scheme (`http:/\`,
/// `http:///`, `http:\\`), a network-path reference, no scheme at all.
#[test]
fn userinfo_is_redacted_whatever_precedes_it() {
    for (raw, expected) in [
        (
            "http:/\\u:S3CRET@127.0.0.1:1/metrics",
            "http:/\\[redacted]@127.0.0.1:1/metrics",
        ),
        (
            "http:///u:S3CRET@127.0.0.1:1/metrics",
            "http:///[redacted]@127.0.0.1:1/metrics",
        ),
        ("http:\\\\u:S3CRET@h", "http:\\\\[redacted]@h"),
        ("http:\\u:S3CRET@h", "http:\\[redacted]@h"),
        ("dns+http:/\\u:S3CRET@h:1", "dns+http:/\\[redacted]@h:1"),
        ("HTTP://U:S3CRET@H", "HTTP://[redacted]@H"),
        // JSON text escapes `/` as `\/`.
        ("http:\\/\\/u:S3CRET@h", "http:\\/\\/[redacted]@h"),
        ("//u:S3CRET@h", "//[redacted]@h"),
        ("\\\\u:S3CRET@h", "\\\\[redacted]@h"),
        ("//S3CRET@h", "//[redacted]@h"),
        ("u:S3CRET@h/x", "[redacted]@h/x"),
        // WHATWG reads `http:u:p@h` as `http://u:p@h`.
        ("http:u:S3CRET@h", "[redacted]@h"),
        ("url (http:/\\u:S3CRET@h/m)", "url (http:/\\[redacted]@h/m)"),
        ("x=http:///u:S3CRET@h", "x=http:///[redacted]@h"),
        // A path with `@` is indistinguishable from a password with `/`.
        ("http://h:1/a@b", "http://[redacted]@b"),
    ] {
        assert_eq!(redact(raw), expected, "{raw:?}");
    }
}

/// A password may hold any character a URL uses as a separator (unencoded,
/// as people paste them): the whole run up to the last `@` is hidden.
#[test]
fn a_password_holding_separators_is_hidden_whole() {
    for (raw, expected) in [
        ("http://u:S3/CRET@h", "http://[redacted]@h"),
        ("http://u:S3/CRET@h/metrics", "http://[redacted]@h/metrics"),
        ("http://u:S3CRET@h@i", "http://[redacted]@i"),
        ("http://u:S3\\CRET@h", "http://[redacted]@h"),
        ("http://u:S3?CRET@h", "http://[redacted]@h"),
        ("http://u:S3#CRET@h", "http://[redacted]@h"),
        ("http://u:S3://CRET@h", "http://[redacted]@h"),
        ("u:S3/CRET@h:9092", "[redacted]@h:9092"),
        ("u:S3@CRET@h:9092", "[redacted]@h:9092"),
        // URL parsers delete tabs and newlines wherever they are.
        ("http://u:S3\tCRET@h", "http://[redacted]@h"),
        ("http://u:S3\r\nCRET@h", "http://[redacted]@h"),
        ("u:S3\nCRET@h", "[redacted]@h"),
        // A space splits the text; the word before it opened a userinfo.
        ("http://u:S3 CRET@h/m", "http://[redacted]@h/m"),
        ("u:S3 CRET@h:9092", "[redacted]@h:9092"),
        // Percent-encoded `@` and `:`.
        ("http://u:S3%40CRET@h", "http://[redacted]@h"),
        ("http://u%3AS3CRET@h", "http://[redacted]@h"),
        ("u%3AS3CRET%40h", "[redacted]%40h"),
        (
            "http://p/?to=http%3A%2F%2Fu%3AS3CRET%40h",
            "http://[redacted]%40h",
        ),
    ] {
        assert_eq!(redact(raw), expected, "{raw:?}");
    }
}

/// The cross product of how a userinfo starts and what its password holds:
/// no piece of the password survives, whatever the combination.
#[test]
fn no_piece_of_a_password_survives_any_combination() {
    let prefixes = [
        "",
        "http://",
        "HTTP://",
        "http:/\\",
        "http:\\\\",
        "http:///",
        "http:",
        "dns+http://",
        "//",
        "\\\\",
        "x=http://",
        "(http://",
        "b0:9092,",
        "http://a:1/metrics,http://",
    ];
    let passwords = [
        "S3CRET",
        "S3/CRET",
        "S3:CRET",
        "S3@CRET",
        "S3\\CRET",
        "S3?CRET",
        "S3#CRET",
        "S3,CRET",
        "S3\tCRET",
        "S3\nCRET",
        "S3 CRET",
        "S3%40CRET",
        "S3%3ACRET",
        "S3%2FCRET",
    ];
    for prefix in prefixes {
        for password in passwords {
            for suffix in ["@h", "@h:1/metrics", "@h@i", "%40h"] {
                let raw = format!("{prefix}admin:{password}{suffix}");
                let once = redact(&raw);
                for piece in ["S3", "CRET", "admin"] {
                    assert!(!once.contains(piece), "{raw:?} → {once:?}");
                }
                assert_eq!(redact(&once), once, "{raw:?}");
            }
        }
    }
}

/// A URL cut before its `@` (a list split at a comma inside a password):
/// what stands where the port should is not a port, so it is hidden.
#[test]
fn a_port_that_is_not_a_number_is_hidden() {
    for (raw, expected) in [
        ("http://u:S3CRET", "http://u:[redacted]"),
        ("http:/\\u:S3CRET", "http:/\\u:[redacted]"),
        // The rest of the word goes too: the password may go on past `/`.
        ("http://u:S3CRET/metrics", "http://u:[redacted]"),
        (
            "value `http://u:S3CRET`: no",
            "value `http://u:[redacted] no",
        ),
        (
            "http://u:S3CRET,http://b:1",
            "http://u:[redacted],http://b:1",
        ),
    ] {
        assert_eq!(redact(raw), expected, "{raw:?}");
    }
    for raw in [
        "http://h:8000/metrics",
        "http://h:/metrics",
        "http://[::1]:8000/metrics",
        "http://[fd00::7]/metrics",
        "dns+http://vllm.ns:8000/metrics,http://a:1",
        // Placeholders in help text.
        "expected http(s)://HOST:PORT/PATH or dns+http://NAME:PORT/PATH",
        "(http://h:9090) `http://h:9090`",
        "prometheus http://prom:9090 sum(x) @ 1700000000",
        "GET http://prom:9090\nnext: line",
        "vllm:waiting",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
}

/// `Bearer` and `Basic` percent- or form-encoded inside a URL (a header
/// pasted into a target's path): the credential after them is hidden too.
#[test]
fn encoded_authorization_schemes_are_redacted() {
    for (raw, expected) in [
        (
            "http://127.0.0.1:1/metrics%20Bearer%20S3CRET",
            "http://127.0.0.1:1/metrics%20Bearer%20[redacted]",
        ),
        (
            "http://h/m%20bearer%20%20S3CRET%20x",
            "http://h/m%20bearer%20%20[redacted]%20x",
        ),
        (
            "http://h/m?h=Basic%20S3CRET&x=1",
            "http://h/m?h=Basic%20[redacted]&x=1",
        ),
        (
            "http://h/m?h=Bearer+S3CRET+x",
            "http://h/m?h=Bearer+[redacted]",
        ),
        (
            "http://h/m%0ABearer%09S3CRET",
            "http://h/m%0ABearer%09[redacted]",
        ),
        (
            "Authorization%3A%20BEARER%20S3CRET",
            "Authorization%3A%20BEARER%20[redacted]",
        ),
        // The joined forms (`Bearer:x`, `Bearer=x`), encoded.
        (
            "http://h/m?h=Bearer%3AS3CRET",
            "http://h/m?h=Bearer%3A[redacted]",
        ),
        (
            "http://h/m?h=bearer%3dS3CRET&x=1",
            "http://h/m?h=bearer%3d[redacted]&x=1",
        ),
    ] {
        assert_eq!(redact(raw), expected, "{raw:?}");
        assert_eq!(redact(expected), expected, "{raw:?}");
    }
    for raw in [
        "http://h/basically%20fine",
        "http://h/Bearers%20of%20news",
        "http://h/m%20Bearer",
        "http://h/m%20Bearer%20",
    ] {
        assert_eq!(redact(raw), raw, "{raw:?}");
    }
}

/// Text before a URL that is not part of it keeps its colons and quotes.
#[test]
fn text_before_a_quoted_url_is_kept() {
    for (raw, expected) in [
        (
            r#"{"url":"http://u:S3CRET@h/","a":"b"}"#,
            r#"{"url":"http://[redacted]@h/","a":"b"}"#,
        ),
        ("x:(http://u:S3CRET@h)", "x:(http://[redacted]@h)"),
        // A colon before a scheme that follows no quote or bracket may be
        // a password's: all of it goes.
        ("u:S3/x:/CRET@h", "[redacted]@h"),
        // `%3A` is a colon where a host cannot hold one.
        ("http://u%3AS3CRET", "http://u%3A[redacted]"),
        ("http://u%3AS3 CRET@h", "http://[redacted]@h"),
    ] {
        assert_eq!(redact(raw), expected, "{raw:?}");
    }
}

/// Text made of the pieces the rules look at, in every order a fixed
/// generator picks: redacting it never panics (slices stay on char
/// boundaries) and redacting the result changes nothing, even where one
/// rule's marker changes what another rule reads (found this way).
#[test]
fn odd_text_is_redacted_to_a_fixed_point() {
    const PIECES: &[&str] = &[
        "h",
        "u",
        "3",
        ":",
        "/",
        "\\",
        "@",
        "%40",
        "%3A",
        "%20",
        "%09",
        ",",
        " ",
        "\t",
        "\n",
        "http",
        "http://",
        "dns+",
        "?",
        "#",
        "=",
        "&",
        ";",
        "token",
        "Bearer",
        "Basic",
        "+",
        "\"",
        "'",
        "`",
        "(",
        ")",
        "[",
        "]",
        "{",
        "<",
        "é",
        "ü",
        "PORT",
        "1",
        "[redacted]",
        "X-Api-Key:",
        "Authorization:",
    ];
    // Shapes the generator below found with a wider alphabet and more
    // texts than a unit test can afford.
    for raw in [
        "&1:]1)-[redacted]\\ :@",
        "&\\%20%Authorization:http://X-Api-Key:h: (3+%40~",
        "http?:Bearer+http://%09+ [redacted]#token[,%40",
        "http://éBasic%09>%09X-Api-Key:-",
        ")&Authorization:Bearer%09:?h'=< ,X-Api-Key:",
    ] {
        let once = redact(raw);
        assert_eq!(redact(&once), once, "{raw:?}");
    }
    // A linear congruential generator: the same texts on every run.
    let mut state: u64 = 0x5eed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(state >> 33).unwrap_or_default()
    };
    for _ in 0..20_000 {
        let len = next() % 16;
        let raw: String = (0..len).map(|_| PIECES[next() % PIECES.len()]).collect();
        let once = redact(&raw);
        assert_eq!(redact(&once), once, "{raw:?}");
    }
}
