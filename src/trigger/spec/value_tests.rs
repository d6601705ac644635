//! How single values are read: every boolean as Go's `strconv.ParseBool`
//! (what KEDA's own scalers use, so copied values keep working),
//! enum-like values in any case, and the words of the errors.

use super::*;
use crate::source::broker::BrokerSource;

fn parse(pairs: &[(&str, &str)]) -> Result<TriggerSpec, MetadataErrors> {
    TriggerSpec::from_metadata(pairs.iter().copied())
}

fn error_text(pairs: &[(&str, &str)]) -> String {
    match parse(pairs) {
        Ok(spec) => panic!("{pairs:?}: expected an error, got {spec:?}"),
        Err(e) => e.to_string(),
    }
}

const T: (&str, &str) = ("targetBacklogPerReplica", "10");
const SCRAPE: (&str, &str) = ("vllmTargets", "http://a:1/metrics");
const SQS: &[(&str, &str)] = &[T, ("queueURL", "jobs"), ("awsRegion", "eu-west-1")];
const KAFKA: &[(&str, &str)] = &[
    T,
    ("bootstrapServers", "127.0.0.1:1"),
    ("consumerGroup", "g"),
    ("topic", "t"),
];
const RABBIT_HTTP: &[(&str, &str)] = &[
    T,
    ("rabbitmqHost", "http://127.0.0.1:15672"),
    ("queueName", "q"),
];
const CAPACITY: &[(&str, &str)] = &[SCRAPE, T, ("drainRatePerReplica", "2")];

/// Every boolean key, with the keys it needs to be read.
const BOOLEANS: &[(&str, &[(&str, &str)])] = &[
    ("learnDrainRate", CAPACITY),
    ("scaleOnInFlight", SQS),
    ("scaleOnDelayed", SQS),
    ("scaleToZeroOnInvalidOffset", KAFKA),
    ("allowIdleConsumers", KAFKA),
    ("excludePersistentLag", KAFKA),
    ("limitToPartitionsWithLag", KAFKA),
    ("excludeUnacknowledged", RABBIT_HTTP),
];

/// The value a boolean key was read as.
fn flag(spec: &TriggerSpec, key: &str) -> bool {
    if key == keys::LEARN_DRAIN_RATE {
        let Policy::Capacity(p) = spec.fusion.policy else {
            panic!("capacity")
        };
        return p.learn_drain_rate;
    }
    let Some(broker) = &spec.broker else {
        panic!("{key}: no broker")
    };
    match (&broker.source, key) {
        (BrokerSource::Sqs(s), keys::SCALE_ON_IN_FLIGHT) => s.scale_on_in_flight,
        (BrokerSource::Sqs(s), keys::SCALE_ON_DELAYED) => s.scale_on_delayed,
        (BrokerSource::Kafka(k), keys::SCALE_TO_ZERO_ON_INVALID_OFFSET) => {
            k.scale_to_zero_on_invalid_offset
        }
        (BrokerSource::Kafka(k), keys::ALLOW_IDLE_CONSUMERS) => k.allow_idle_consumers,
        (BrokerSource::Kafka(k), keys::EXCLUDE_PERSISTENT_LAG) => k.exclude_persistent_lag,
        (BrokerSource::Kafka(k), keys::LIMIT_TO_PARTITIONS_WITH_LAG) => {
            k.limit_to_partitions_with_lag
        }
        (BrokerSource::RabbitMq(r), keys::EXCLUDE_UNACKNOWLEDGED) => r.exclude_unacknowledged,
        (source, key) => panic!("{key} is not a flag of {source:?}"),
    }
}

#[test]
fn every_boolean_key_reads_exactly_what_go_parse_bool_reads() {
    let truths = ["1", "t", "T", "TRUE", "true", "True"];
    let falsehoods = ["0", "f", "F", "FALSE", "false", "False"];
    for (key, context) in BOOLEANS {
        for (values, expected) in [(truths, true), (falsehoods, false)] {
            for value in values {
                let mut pairs = context.to_vec();
                pairs.push((key, value));
                let spec = parse(&pairs).unwrap_or_else(|e| panic!("{key}: {value}: {e}"));
                assert_eq!(flag(&spec, key), expected, "{key}: {value}");
            }
        }
        for value in ["TrUe", "fAlSe", "yes", "no", "on", "2", ""] {
            let mut pairs = context.to_vec();
            pairs.push((key, value));
            let text = error_text(&pairs);
            let expected = format!(
                "metadata key `{key}` has value `{value}`: `true` or `false` (as Go's strconv.ParseBool reads them, like KEDA: also `1`, `t`, `T`, `TRUE`, `True`, `0`, `f`, `F`, `FALSE`, `False`)"
            );
            assert!(text.contains(&expected), "{key}: {value}: {text}");
        }
    }
}

#[test]
fn enum_like_values_are_read_in_any_case() {
    let dns = ("vllmTargets", "dns+http://vllm.ns:8000/metrics");
    /// Context, key, value as sent, the same value in lower case.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str, &'a str);
    let cases: &[Case] = &[
        (&[dns, T], "ipFamily", "IPV6", "ipv6"),
        (&[dns, T], "ipFamily", "Auto", "auto"),
        (KAFKA, "offsetResetPolicy", "Earliest", "earliest"),
        (KAFKA, "offsetResetPolicy", "LATEST", "latest"),
        (RABBIT_HTTP, "protocol", "HTTP", "http"),
        (RABBIT_HTTP, "protocol", "Auto", "auto"),
        (&[SCRAPE, T], "engine", "VLLM", "vllm"),
        (&[SCRAPE, T], "policy", "Backlog", "backlog"),
        (&[SCRAPE, T], "mode", "Shadow", "shadow"),
    ];
    for (context, key, sent, lower) in cases {
        let with = |value| {
            let mut pairs = context.to_vec();
            pairs.push((key, value));
            parse(&pairs).unwrap_or_else(|e| panic!("{key}: {value}: {e}"))
        };
        assert_eq!(with(sent), with(lower), "{key}: {sent}");
    }
    // The error still lists the spellings the docs use.
    let text = error_text(&[dns, T, ("ipFamily", "dual")]);
    assert!(
        text.contains("metadata key `ipFamily` has value `dual`: `auto`, `ipv4` or `ipv6`"),
        "{text}"
    );
}

#[test]
fn errors_say_what_this_key_allows() {
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: &[Case] = &[
        (
            &[SCRAPE, T, ("ttftSloSeconds", "-1")],
            &["`ttftSloSeconds` has value `-1`: a number of seconds greater than 0, e.g. `2`"],
            &["`32`"],
        ),
        (
            &[SCRAPE, T, ("drainRatePerReplica", "0")],
            &[
                "`drainRatePerReplica` has value `0`: a number of requests per second greater than 0, e.g. `2.5`",
            ],
            &["`32`"],
        ),
        (
            &[SCRAPE, T, ("runningPerReplica", "0")],
            &["`runningPerReplica` has value `0`: a number greater than 0, e.g. `32`"],
            &[],
        ),
        (
            &[SCRAPE, T, ("ttftSloSeconds", "2"), ("ttftQuantile", "1")],
            &["`ttftQuantile` has value `1`: a number between 0 and 1, both excluded, e.g. `0.95`"],
            &[],
        ),
        (
            &[SCRAPE, T, ("podLabel", "kubernetes_pod_name")],
            &[
                "metadata key `podLabel` has value `kubernetes_pod_name`",
                "needs `prometheusAddress`",
            ],
            &["PromQL query"],
        ),
        (
            &[SCRAPE, T, ("waitingQuery", "sum(w)")],
            &[
                "metadata key `waitingQuery` has value `sum(w)`",
                "needs `prometheusAddress`",
            ],
            &[],
        ),
        (
            &[SCRAPE, T, ("messageWeight", "0")],
            &[
                "metadata key `messageWeight` has value `0`: a number greater than 0",
                "metadata key `messageWeight` has value `0`: applies to a broker source",
            ],
            &[],
        ),
    ];
    for (pairs, wanted, unwanted) in cases {
        let text = error_text(pairs);
        for needle in *wanted {
            assert!(text.contains(needle), "{pairs:?}: {text} lacks {needle:?}");
        }
        for needle in *unwanted {
            assert!(!text.contains(needle), "{pairs:?}: {text} has {needle:?}");
        }
    }
    // A valid weight without a broker is only out of place.
    assert_eq!(
        error_text(&[SCRAPE, T, ("messageWeight", "2")]),
        "metadata key `messageWeight` has value `2`: applies to a broker source: set `queueURL`, `bootstrapServers` or `rabbitmqHost`"
    );
}

#[test]
fn keys_of_kedas_rabbitmq_scaler_point_to_ours() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "host",
            "amqp://127.0.0.1:5672",
            &["unknown metadata key `host` (did you mean `rabbitmqHost`?)"],
        ),
        (
            "hostFromEnv",
            "amqp://127.0.0.1:5672",
            &["unknown metadata key `hostFromEnv` (did you mean `rabbitmqHost`?)"],
        ),
        (
            "mode",
            "QueueLength",
            &[
                "metadata key `mode` has value `QueueLength`: `active` or `shadow`",
                "KEDA's rabbitmq",
                "`targetBacklogPerReplica`",
            ],
        ),
        (
            "mode",
            "MessageRate",
            &["`active` or `shadow`", "KEDA's rabbitmq", "no equivalent"],
        ),
    ];
    for (key, value, needles) in cases {
        let mut pairs = RABBIT_HTTP.to_vec();
        pairs.push((key, value));
        let text = error_text(&pairs);
        for needle in *needles {
            assert!(text.contains(needle), "{key}: {text} lacks {needle:?}");
        }
    }
    let text = error_text(&[SCRAPE, T, ("mode", "bogus")]);
    assert_eq!(
        text,
        "metadata key `mode` has value `bogus`: `active` or `shadow`"
    );
}

/// Numbers too small or too large to mean anything are refused, naming the key, the value and
/// the sizes allowed: a divisor of `1e-320` or a factor of `1e300` made `B` infinite, which
/// KEDA reads as 0. `T` below 0.001 reaches KEDA's HPA as a target of 0.
#[test]
fn numbers_of_no_meaningful_size_are_refused() {
    /// The other keys, the key, its value, and a word of the allowed sizes.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str, &'a str);
    let cases: &[Case] = &[
        (&[SCRAPE], "targetBacklogPerReplica", "1e-320", "from 0.001"),
        (&[SCRAPE], "targetBacklogPerReplica", "0.0005", "from 0.001"),
        (
            &[SCRAPE],
            "targetBacklogPerReplica",
            "1e300",
            "to 1000000000",
        ),
        (&[SCRAPE, T], "runningPerReplica", "1e-320", "0.000001"),
        (&[SCRAPE, T], "runningPerReplica", "2e9", "1000000000"),
        (&[SCRAPE, T], "drainRatePerReplica", "1e-9", "0.000001"),
        (&[SCRAPE, T], "activationBacklog", "1e300", "1000000000"),
        (SQS, "messageWeight", "1e-100", "0.000001"),
    ];
    // A key that refuses 0 does not offer it in the sizes either.
    let text = error_text(&[SCRAPE, T, ("runningPerReplica", "0.0000009")]);
    assert!(
        text.contains("and from 0.000001 to 1000000000 in size") && !text.contains("and 0 or"),
        "{text}"
    );
    let text = error_text(&[SCRAPE, ("targetBacklogPerReplica", "1000000000.5")]);
    assert!(
        !text.contains("in size"),
        "the target's range is said once: {text}"
    );
    let text = error_text(&[SCRAPE, T, ("activationBacklog", "1e-9")]);
    assert!(text.contains("and 0 or from 0.000001"), "{text}");
    for (base, key, value, allowed) in cases {
        let mut pairs: Vec<(&str, &str)> = base.to_vec();
        if *key == "targetBacklogPerReplica" {
            pairs.retain(|(k, _)| *k != "targetBacklogPerReplica");
        }
        pairs.push((key, value));
        let text = error_text(&pairs);
        assert!(
            text.contains(&format!("`{key}`")) && text.contains(value) && text.contains(allowed),
            "{key}={value}: {text}"
        );
    }
    // The edges themselves, and 0 where a key allows it, still parse.
    for (key, value) in [
        ("targetBacklogPerReplica", "0.001"),
        ("targetBacklogPerReplica", "1000000000"),
        ("runningPerReplica", "0.000001"),
        ("activationBacklog", "0"),
    ] {
        let mut pairs = vec![SCRAPE];
        if key != "targetBacklogPerReplica" {
            pairs.push(T);
        }
        pairs.push((key, value));
        assert!(parse(&pairs).is_ok(), "{key}={value}: {:?}", parse(&pairs));
    }
}
