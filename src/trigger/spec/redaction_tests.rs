//! No error about metadata repeats a credential: every URL-bearing key,
//! given a value that is wrong AND carries a secret, is refused with the key
//! named and the secret replaced by `[redacted]`.

use super::TriggerSpec;

const SECRET: &str = "S3CRET";

/// Values wrong for every URL-bearing key, each hiding `SECRET`.
const WRONG_EVERYWHERE: &[&str] = &[
    "http://admin:S3CRET@10.0.0.1/metrics",
    "ftp://admin:S3CRET@10.0.0.1/metrics",
    "ftp://h:1/metrics?token=S3CRET",
    "dns+http://admin:S3CRET@vllm.ns:8000/metrics",
    "dns+http://10.0.0.1:1/metrics?X-Amz-Signature=S3CRET",
    "Bearer S3CRET",
];

/// Each URL-bearing key with the other keys it needs to be read at all.
fn contexts() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    let target = ("targetBacklogPerReplica", "10");
    vec![
        ("vllmTargets", vec![target]),
        (
            "dcgmTargets",
            vec![
                target,
                ("vllmTargets", "http://a:1/metrics"),
                ("podSelectorRegex", "llama-.*"),
            ],
        ),
        ("prometheusAddress", vec![target]),
        ("serverAddress", vec![target]),
        (
            "awsEndpoint",
            vec![target, ("queueURL", "jobs"), ("awsRegion", "eu-west-1")],
        ),
        ("queueURL", vec![target, ("awsRegion", "eu-west-1")]),
        ("rabbitmqHost", vec![target, ("queueName", "q")]),
        ("bootstrapServers", vec![target, ("consumerGroup", "g")]),
    ]
}

/// The errors' Display and Debug, asserting the metadata was refused.
fn refused(pairs: &[(&str, &str)]) -> (String, String) {
    match TriggerSpec::from_metadata(pairs.iter().copied()) {
        Ok(spec) => panic!("{pairs:?}: expected an error, got {spec:?}"),
        Err(errors) => (errors.to_string(), format!("{errors:?}")),
    }
}

fn assert_redacted(key: &str, pairs: &[(&str, &str)]) {
    let (text, debug) = refused(pairs);
    assert!(!text.contains(SECRET), "{pairs:?}: {text}");
    assert!(!debug.contains(SECRET), "{pairs:?}: {debug}");
    assert!(text.contains(&format!("`{key}`")), "{pairs:?}: {text}");
    assert!(text.contains("[redacted]"), "{pairs:?}: {text}");
}

#[test]
fn no_url_bearing_key_echoes_a_credential() {
    for (key, context) in contexts() {
        for value in WRONG_EVERYWHERE {
            let mut pairs = context.clone();
            pairs.push((key, value));
            assert_redacted(key, &pairs);
        }
    }
}

#[test]
fn lists_and_query_strings_are_redacted_where_the_key_refuses_them() {
    let list = "http://ok:1/metrics,http://admin:S3CRET@10.0.0.1/metrics";
    let query = "http://h:1/metrics?token=S3CRET";
    for (key, context) in contexts() {
        let mut values = Vec::new();
        if matches!(key, "vllmTargets" | "dcgmTargets" | "bootstrapServers") {
            values.push(list);
        }
        // The engine keys accept a query string; these do not.
        if matches!(
            key,
            "awsEndpoint" | "queueURL" | "rabbitmqHost" | "bootstrapServers"
        ) {
            values.push(query);
        }
        for value in values {
            let mut pairs = context.clone();
            pairs.push((key, value));
            assert_redacted(key, &pairs);
        }
    }
}

#[test]
fn a_from_env_key_is_named_as_sent_and_still_redacted() {
    assert_redacted(
        "vllmTargetsFromEnv",
        &[
            ("targetBacklogPerReplica", "10"),
            ("vllmTargetsFromEnv", "http://admin:S3CRET@10.0.0.1/metrics"),
        ],
    );
}

#[test]
fn the_broker_format_is_kept() {
    let (text, _) = refused(&[
        ("targetBacklogPerReplica", "10"),
        ("rabbitmqHost", "amqp://guest:S3CRET@h:5672"),
        ("queueName", "q"),
    ]);
    assert!(text.contains("`amqp://[redacted]@h:5672`"), "{text}");
}

#[test]
fn unknown_keys_are_redacted_as_values_are() {
    for key in [
        "Bearer KEYSECRET1",
        "http://u:KEYSECRET2@h/",
        "token=KEYSECRET3",
        "vllmTargets?token=KEYSECRET4",
    ] {
        let (text, debug) = refused(&[
            ("vllmTargets", "http://a:1/metrics"),
            ("targetBacklogPerReplica", "10"),
            (key, "1"),
        ]);
        for shown in [&text, &debug] {
            assert!(!shown.contains("KEYSECRET"), "{key}: {shown}");
        }
        assert!(text.starts_with("unknown metadata key `"), "{key}: {text}");
        assert!(text.contains("[redacted]"), "{key}: {text}");
    }
}
