//! A trigger copied from one of KEDA's built-in scalers (type changed to
//! `external`, `scalerAddress` added) keeps that scaler's keys. Each either
//! means the same here (an alias: the same `TriggerSpec` as our key) or is
//! refused with `INVALID_ARGUMENT` naming the key, the value and what to
//! write instead: never "unknown key", never read as something else.

mod common;

use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::trigger::TriggerSpec;
use common::*;
use tonic::Code;

const KAFKA: &[(&str, &str)] = &[
    ("scalerAddress", "backlog-scaler.keda:9090"),
    ("bootstrapServers", "127.0.0.1:9"),
    ("consumerGroup", "workers"),
    ("topic", "prompts"),
    ("messageWeight", "2"),
];

fn with<'a>(base: &[(&'a str, &'a str)], extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut md = base.to_vec();
    md.extend_from_slice(extra);
    md
}

fn spec(md: &[(&str, &str)]) -> TriggerSpec {
    TriggerSpec::from_metadata(md.iter().copied()).unwrap_or_else(|e| panic!("{md:?}: {e}"))
}

#[test]
fn keda_names_with_the_same_meaning_are_aliases() {
    // (KEDA's key, ours, a value): the same TriggerSpec either way.
    let cases = [
        ("threshold", "targetBacklogPerReplica", "7.5"),
        ("thresholdFromEnv", "targetBacklogPerReplica", "7.5"),
        ("activationThreshold", "activationBacklog", "3"),
    ];
    for (keda, ours, value) in cases {
        let base = [
            ("serverAddress", "http://prometheus.monitoring:9090"),
            ("targetBacklogPerReplica", "10"),
        ];
        let base: Vec<_> = base.into_iter().filter(|(k, _)| *k != ours).collect();
        let aliased = spec(&with(&base, &[(keda, value)]));
        let canonical = spec(&with(&base, &[(ours, value)]));
        assert_eq!(aliased, canonical, "{keda} ≡ {ours}");
    }
    let t = spec(&with(KAFKA, &[("threshold", "4")]));
    assert_eq!(t.fusion.target_per_replica, 4.0);
    let a = spec(&with(
        KAFKA,
        &[
            ("targetBacklogPerReplica", "4"),
            ("activationThreshold", "1.5"),
        ],
    ));
    assert_eq!(a.fusion.activation_backlog, 1.5);
}

#[test]
fn an_alias_keeps_our_rules_and_conflicts_with_our_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("threshold", "0")],
            "metadata key `threshold` has value `0`: a number from 0.001",
        ),
        (
            &[
                ("targetBacklogPerReplica", "4"),
                ("activationThreshold", "-1"),
            ],
            "metadata key `activationThreshold` has value `-1`: a number ≥ 0",
        ),
        (
            &[("threshold", "4"), ("targetBacklogPerReplica", "4")],
            "metadata key `threshold` is an alias of `targetBacklogPerReplica`; set only one",
        ),
        (
            &[
                ("targetBacklogPerReplica", "4"),
                ("activationThreshold", "1"),
                ("activationBacklog", "1"),
            ],
            "metadata key `activationThreshold` is an alias of `activationBacklog`; set only one",
        ),
    ];
    for (extra, needle) in cases {
        let err = TriggerSpec::from_metadata(with(KAFKA, extra)).expect_err("invalid");
        assert!(err.to_string().contains(needle), "{extra:?}: {err}");
    }
}

/// (copied KEDA key, its value, what the message must say instead). The
/// base is a Kafka trigger with `messageWeight: 2`: message counts double.
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "lagThreshold",
        "10",
        "in KEDA's kafka scaler this is the lag target per replica, in messages (default 10); here one replica absorbs `targetBacklogPerReplica` requests and each message counts `messageWeight` requests, so write `targetBacklogPerReplica: \"20\"` instead (10 messages × messageWeight 2)",
    ),
    (
        "activationLagThreshold",
        "5",
        "in KEDA's kafka scaler this is the activation threshold, in messages of lag; here the trigger is active when `B > activationBacklog`, and `B` counts each message as `messageWeight` requests, so write `activationBacklog: \"10\"` instead (5 messages × messageWeight 2)",
    ),
    (
        "queueLength",
        "5",
        "in KEDA's aws-sqs-queue scaler this is the target per replica, in messages (default 5; rabbitmq's deprecated name for `value`); here one replica absorbs `targetBacklogPerReplica` requests and each message counts `messageWeight` requests, so write `targetBacklogPerReplica: \"10\"` instead (5 messages × messageWeight 2)",
    ),
    (
        "activationQueueLength",
        "0",
        "in KEDA's aws-sqs-queue scaler this is the activation threshold, in messages; here the trigger is active when `B > activationBacklog`, and `B` counts each message as `messageWeight` requests, so write `activationBacklog: \"0\"` instead (0 messages × messageWeight 2)",
    ),
    (
        "value",
        "20",
        "in KEDA's rabbitmq scaler this is the per-replica target of its `mode` (messages under `QueueLength`); here one replica absorbs `targetBacklogPerReplica` requests and each message counts `messageWeight` requests, so write `targetBacklogPerReplica: \"40\"` instead (20 messages × messageWeight 2); KEDA's rate modes have no equivalent here",
    ),
    (
        "activationValue",
        "1.5",
        "in KEDA's rabbitmq scaler this is the activation threshold of its `mode` (messages under `QueueLength`); here the trigger is active when `B > activationBacklog`, and `B` counts each message as `messageWeight` requests, so write `activationBacklog: \"3\"` instead (1.5 messages × messageWeight 2)",
    ),
    (
        "query",
        "sum(vllm:num_requests_waiting)",
        "in KEDA's prometheus scaler this is the metric itself (one series; an empty answer reads 0 by default); here the query for requests waiting is `waitingQuery`, which sums its series and reads an empty answer as a lost signal unless `replicasQuery` answers 0: write `waitingQuery` instead (with `prometheusAddress`)",
    ),
];

#[tokio::test]
async fn keda_names_with_another_meaning_are_refused_with_the_replacement() {
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    for (key, value, instead) in REFUSED {
        let md = with(KAFKA, &[("targetBacklogPerReplica", "20"), (key, value)]);
        let status = client
            .get_metric_spec(object("copied", &md))
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{key}: {status:?}");
        let expected = format!("metadata key `{key}` has value `{value}`: {instead}");
        assert!(
            status.message().contains(&expected),
            "{key}:\n{}\nlacks\n{expected}",
            status.message()
        );
        assert!(!status.message().contains("unknown metadata key"), "{key}");
    }
    // Without messageWeight a message is one request; the `FromEnv`
    // spelling is named as sent; a value that is no number gets the rule.
    let md = [
        ("bootstrapServers", "127.0.0.1:9"),
        ("consumerGroup", "workers"),
        ("targetBacklogPerReplica", "10"),
        ("lagThresholdFromEnv", "15"),
        ("activationLagThreshold", "many"),
    ];
    let status = client
        .get_metric_spec(object("copied-env", &md))
        .await
        .expect_err("refused");
    let message = status.message();
    assert!(
        message.contains("metadata key `lagThresholdFromEnv` has value `15`")
            && message.contains(
                "write `targetBacklogPerReplica: \"15\"` instead (15 messages × messageWeight 1)"
            ),
        "{message}"
    );
    assert!(
        message.contains("metadata key `activationLagThreshold` has value `many`")
            && message.contains("write `activationBacklog` instead (the number × messageWeight)"),
        "{message}"
    );
    // A whole copied kafka trigger: every KEDA key answered at once.
    let copied = [
        ("scalerAddress", "backlog-scaler.keda:9090"),
        ("bootstrapServers", "127.0.0.1:9"),
        ("consumerGroup", "workers"),
        ("topic", "prompts"),
        ("lagThreshold", "10"),
        ("activationLagThreshold", "0"),
        ("offsetResetPolicy", "earliest"),
    ];
    let status = client
        .get_metric_spec(object("copied-whole", &copied))
        .await
        .expect_err("refused");
    let message = status.message();
    for needle in [
        "metadata key `lagThreshold` has value `10`",
        "metadata key `activationLagThreshold` has value `0`",
        "metadata key `targetBacklogPerReplica` is required",
    ] {
        assert!(message.contains(needle), "{message} lacks {needle}");
    }
    server.shutdown().await;
}
