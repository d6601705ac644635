//! Which sources a trigger declares decides the source-level errors: a
//! present-but-invalid source reports only its own problems (never "is
//! required" or a policy's need for another source), and `authProfile` is
//! refused where no declared source sends credentials.

use super::TriggerSpec;

/// Metadata, needles its errors must contain, needles they must not, and
/// how many errors it gives.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
    &'static [&'static str],
    usize,
);

const T: (&str, &str) = ("targetBacklogPerReplica", "10");
const KAFKA: [(&str, &str); 2] = [("bootstrapServers", "127.0.0.1:1"), ("consumerGroup", "g")];

/// What a spurious source-level error says.
const REQUIRED: &str = "`vllmTargets` is required";
const PER_POD: &str = "needs per-pod counters";
const NEEDS_PROM: &str = "needs `prometheusAddress`";

fn errors(pairs: &[(&str, &str)]) -> Vec<String> {
    match TriggerSpec::from_metadata(pairs.iter().copied()) {
        Ok(spec) => panic!("{pairs:?}: expected an error, got {spec:?}"),
        Err(errors) => errors.0.iter().map(ToString::to_string).collect(),
    }
}

fn check(cases: &[Case]) {
    for (pairs, wanted, unwanted, count) in cases {
        let errors = errors(pairs);
        let text = errors.join("; ");
        for needle in *wanted {
            assert!(text.contains(needle), "{pairs:?}: {text} lacks {needle:?}");
        }
        for needle in *unwanted {
            assert!(!text.contains(needle), "{pairs:?}: {text} has {needle:?}");
        }
        assert_eq!(errors.len(), *count, "{pairs:?}: {text}");
    }
}

#[test]
fn an_invalid_source_reports_only_its_own_errors() {
    check(&[
        (
            &[KAFKA[0], KAFKA[1], T, ("allowIdleConsumers", "yes")],
            &["allowIdleConsumers", "`yes`"],
            &[REQUIRED, PER_POD],
            1,
        ),
        (
            &[("rabbitmqHost", "amqp://127.0.0.1:5672"), T],
            &["`queueName` is required"],
            &[REQUIRED, PER_POD],
            1,
        ),
        (
            &[("queueURL", "jobs"), T],
            &["`awsRegion` is required"],
            &[REQUIRED, PER_POD],
            1,
        ),
        (
            &[("prometheusAddress", "http:///x"), T],
            &["prometheusAddress", "`http:///x`"],
            &[REQUIRED, PER_POD],
            1,
        ),
        (
            &[("prometheusAddress", "http://p:9090/ Bearer s3cret"), T],
            &["prometheusAddress", "without credentials or spaces"],
            &[REQUIRED, PER_POD, "s3cret"],
            1,
        ),
        (
            &[("prometheusAddress", "http://p:0"), T],
            &["prometheusAddress", "`http://p:0`", "a port other than 0"],
            &[REQUIRED, PER_POD],
            1,
        ),
        (
            &[("serverAddress", "http://u:pw@p:9090"), T],
            &["serverAddress", "without credentials"],
            &[REQUIRED, PER_POD, "pw@"],
            1,
        ),
        (
            &[
                ("serverAddress", "http://p:9090"),
                ("prometheusAddress", "http://p:9090"),
                T,
            ],
            &["serverAddress", "alias"],
            &[REQUIRED, PER_POD],
            1,
        ),
        // The PromQL keys have their address; it is only invalid.
        (
            &[
                ("prometheusAddress", "ftp://p:9090"),
                ("gpuUtilQuery", "avg(x)"),
                ("minReportingFraction", "0.5"),
                T,
            ],
            &["prometheusAddress"],
            &[REQUIRED, PER_POD, NEEDS_PROM, "minReportingFraction"],
            1,
        ),
        (
            &[("vllmTargets", "ftp://a:1/metrics"), T],
            &["vllmTargets", "`ftp://a:1/metrics`"],
            &[REQUIRED, PER_POD],
            1,
        ),
    ]);
}

#[test]
fn source_level_errors_still_come_when_no_source_key_is_present() {
    check(&[
        (&[T], &[REQUIRED], &[PER_POD], 1),
        (
            &[T, ("policy", "capacity")],
            &[REQUIRED, "`policy` `capacity` needs per-pod counters"],
            &[],
            2,
        ),
        // A broker alone has no pods: the policy's need is real.
        (
            &[KAFKA[0], KAFKA[1], T, ("policy", "capacity")],
            &[PER_POD],
            &[REQUIRED],
            1,
        ),
    ]);
}

#[test]
fn auth_profile_is_refused_where_no_source_uses_it() {
    const REFUSED: [&str; 5] = [
        "metadata key `authProfile` has value `prom-creds`",
        "`prometheusAddress`",
        "`bootstrapServers`",
        "`rabbitmqHost`",
        "sends no credentials",
    ];
    check(&[
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                T,
                ("authProfile", "prom-creds"),
            ],
            &REFUSED,
            &[],
            1,
        ),
        (
            &[
                ("vllmTargets", "http://a:1/metrics"),
                ("dcgmTargets", "http://d:9400/metrics"),
                ("podSelectorRegex", "llama-.*"),
                T,
                ("authProfile", "prom-creds"),
            ],
            &REFUSED,
            &[],
            1,
        ),
        // No source at all: "is required" already says what to set.
        (&[T, ("authProfile", "prom-creds")], &[REQUIRED], &[], 1),
        // The PromQL path checks the name as a broker does (an empty one
        // was read as "no profile").
        (
            &[
                ("prometheusAddress", "http://p:9090"),
                T,
                ("authProfile", ""),
            ],
            &["metadata key `authProfile` has value ``: the name of a profile"],
            &[],
            1,
        ),
    ]);
    // Sources that read with a profile keep it.
    let accepted: &[&[(&str, &str)]] = &[
        &[
            ("prometheusAddress", "http://p:9090"),
            T,
            ("authProfile", "prom-creds"),
        ],
        &[KAFKA[0], KAFKA[1], T, ("authProfile", "prom-creds")],
        // The GPU query reads Prometheus with it.
        &[
            ("vllmTargets", "http://a:1/metrics"),
            ("prometheusAddress", "http://p:9090"),
            ("podSelectorRegex", "llama-.*"),
            T,
            ("authProfile", "prom-creds"),
        ],
    ];
    for pairs in accepted {
        let spec = TriggerSpec::from_metadata(pairs.iter().copied())
            .unwrap_or_else(|e| panic!("{pairs:?}: {e}"));
        assert!(
            format!("{:?}", spec.sources()).contains("\"prom-creds\""),
            "{pairs:?}: the profile reaches no source"
        );
    }
}

#[test]
fn promql_keys_on_a_broker_only_trigger_are_refused() {
    // They were accepted and read by nothing.
    for key in [
        "waitingQuery",
        "runningQuery",
        "kvCacheQuery",
        "replicasQuery",
        "podWaitingQuery",
        "podRunningQuery",
        "podFinishedQuery",
        "podGenerationTokensQuery",
        "podPromptTokensQuery",
        "podKvCacheQuery",
        "podLabel",
    ] {
        let errors = errors(&[KAFKA[0], KAFKA[1], T, (key, "x")]);
        let text = errors.join("; ");
        assert!(
            text.starts_with(&format!("metadata key `{key}` has value `x`: "))
                && text.contains("needs `prometheusAddress`"),
            "{key}: {text}"
        );
        assert_eq!(errors.len(), 1, "{key}: {text}");
    }
}

#[test]
fn a_prometheus_address_nothing_reads_is_refused() {
    // vllmTargets scrapes the engine and dcgmTargets the GPUs: the address
    // (and a profile for it) was accepted and read by nothing.
    check(&[(
        &[
            ("vllmTargets", "http://a:1/metrics"),
            ("prometheusAddress", "http://p:9090"),
            ("dcgmTargets", "http://d:9400/metrics"),
            ("podSelectorRegex", "llama-.*"),
            T,
            ("authProfile", "prom-creds"),
        ],
        &["metadata key `prometheusAddress` is read by nothing"],
        &[],
        1,
    )]);
}

/// `namespace` scopes PromQL and the GPUs of `dcgmTargets`: on a trigger that reads neither it
/// would do nothing, so it is refused with its value; where it scopes something it is kept.
#[test]
fn a_namespace_nothing_reads_is_refused() {
    for pairs in [
        &[
            ("vllmTargets", "http://a:1/metrics"),
            ("namespace", "ml"),
            T,
        ][..],
        &[KAFKA[0], KAFKA[1], ("topic", "t"), ("namespace", "ml"), T][..],
    ] {
        let errors = errors(pairs);
        assert!(
            errors.len() == 1
                && errors[0].contains("`namespace` has value `ml`")
                && errors[0].contains("this trigger reads neither"),
            "{pairs:?}: {errors:?}"
        );
    }
    for pairs in [
        &[
            ("prometheusAddress", "http://p:9090"),
            ("namespace", "ml"),
            T,
        ][..],
        &[
            ("vllmTargets", "http://a:1/metrics"),
            ("dcgmTargets", "http://d:9400/metrics"),
            ("podSelectorRegex", "llama-.*"),
            ("namespace", "ml"),
            T,
        ][..],
    ] {
        assert!(
            TriggerSpec::from_metadata(pairs.iter().copied()).is_ok(),
            "{pairs:?}"
        );
    }
}
