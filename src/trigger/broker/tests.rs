//! Broker key parsing: KEDA's defaults, every mistake named, credentials never echoed.

use super::{BrokerTrigger, parse_metadata};
use crate::guard::credentials::Profiles;
use crate::source::broker::BrokerSource;
use crate::source::broker::kafka::OffsetResetPolicy;
use crate::source::broker::rabbitmq::Protocol;
use crate::trigger::keys;
use crate::trigger::values::Metadata;

fn parse(pairs: &[(&'static str, &'static str)]) -> Result<Option<BrokerTrigger>, String> {
    let mut unknown = Vec::new();
    let md = Metadata::fold(pairs.iter().copied(), &mut unknown);
    assert!(unknown.is_empty(), "{unknown:?}");
    parse_metadata(&md).map_err(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

fn ok(pairs: &[(&'static str, &'static str)]) -> BrokerTrigger {
    match parse(pairs) {
        Ok(Some(t)) => t,
        other => panic!("{pairs:?}: {other:?}"),
    }
}

fn err(pairs: &[(&'static str, &'static str)]) -> String {
    match parse(pairs) {
        Err(e) => e,
        Ok(t) => panic!("{pairs:?}: expected an error, got {t:?}"),
    }
}

#[test]
fn no_broker_keys_is_none() {
    assert_eq!(parse(&[]), Ok(None));
}

#[test]
fn sqs_defaults_follow_keda() {
    let t = ok(&[
        (
            "queueURL",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs",
        ),
        ("awsRegion", "eu-west-1"),
    ]);
    assert_eq!(t.message_weight, 1.0);
    let BrokerSource::Sqs(s) = &t.source else {
        panic!("{t:?}")
    };
    assert!(s.scale_on_in_flight);
    assert!(!s.scale_on_delayed);
    assert_eq!(s.queue_name(), "jobs");
    assert_eq!(t.source.label(), "sqs eu-west-1/jobs");
    let t = ok(&[
        ("queueURL", "jobs.fifo"),
        ("awsRegion", "us-east-1"),
        ("awsEndpoint", "http://127.0.0.1:5000"),
        ("scaleOnInFlight", "false"),
        ("scaleOnDelayed", "True"),
        ("messageWeight", "2.5"),
        ("authProfile", "team-a"),
    ]);
    assert_eq!(t.message_weight, 2.5);
    assert_eq!(t.source.auth_profile(), Some("team-a"));
    let BrokerSource::Sqs(s) = &t.source else {
        panic!("{t:?}")
    };
    assert!(!s.scale_on_in_flight && s.scale_on_delayed);
}

#[test]
fn kafka_defaults_follow_keda() {
    let t = ok(&[
        ("bootstrapServers", "b2:9092, b1:9092,b1:9092"),
        ("consumerGroup", "workers"),
    ]);
    let BrokerSource::Kafka(k) = &t.source else {
        panic!("{t:?}")
    };
    assert_eq!(k.bootstrap_servers, ["b1:9092", "b2:9092"]);
    assert_eq!(k.offset_reset_policy, OffsetResetPolicy::Latest);
    assert!(!k.allow_idle_consumers && !k.exclude_persistent_lag);
    assert!(!k.scale_to_zero_on_invalid_offset && !k.limit_to_partitions_with_lag);
    assert_eq!(t.source.label(), "kafka workers/*");
    let t = ok(&[
        ("bootstrapServers", "127.0.0.1:9092"),
        ("consumerGroup", "workers"),
        ("topic", "prompts"),
        ("offsetResetPolicy", "earliest"),
        ("limitToPartitionsWithLag", "true"),
        ("excludePersistentLag", "true"),
        ("scaleToZeroOnInvalidOffset", "1"),
    ]);
    assert_eq!(t.source.label(), "kafka workers/prompts");
}

#[test]
fn rabbitmq_vhost_and_protocol() {
    let t = ok(&[
        ("rabbitmqHost", "amqp://10.0.0.5:5672/prod"),
        ("queueName", "jobs"),
    ]);
    let BrokerSource::RabbitMq(r) = &t.source else {
        panic!("{t:?}")
    };
    assert_eq!((r.protocol, r.vhost.as_str()), (Protocol::Amqp, "prod"));
    assert_eq!(
        t.source.label(),
        "rabbitmq amqp://10.0.0.5:5672 vhost=prod queue=jobs"
    );
    for (host, vhost) in [
        ("amqp://h:5672", "/"),
        ("amqp://h:5672/", "/"),
        ("amqp://h:5672/%2F", "/"),
        ("http://h:15672/a%2Fb", "a/b"),
    ] {
        let t = ok(&[("rabbitmqHost", host), ("queueName", "q")]);
        let BrokerSource::RabbitMq(r) = &t.source else {
            panic!("{t:?}")
        };
        assert_eq!(r.vhost, vhost, "{host}");
    }
    let t = ok(&[
        ("rabbitmqHost", "http://h:15672/ignored"),
        ("vhostName", "other"),
        ("queueName", "q"),
        ("excludeUnacknowledged", "true"),
        ("protocol", "http"),
    ]);
    let BrokerSource::RabbitMq(r) = &t.source else {
        panic!("{t:?}")
    };
    assert_eq!(
        (r.protocol, r.vhost.as_str(), r.exclude_unacknowledged),
        (Protocol::Http, "other", true)
    );
}

/// Metadata pairs and the needles its error must contain.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

#[test]
fn mistakes_name_the_key_the_value_and_what_is_allowed() {
    let cases: &[Case] = &[
        (&[("queueURL", "jobs")], &["awsRegion", "required"]),
        (
            &[
                ("queueURL", "https://sqs.x.amazonaws.com/jobs"),
                ("awsRegion", "x"),
            ],
            &["queueURL", "ACCOUNT/NAME"],
        ),
        (
            &[
                ("queueURL", "jobs"),
                ("awsRegion", "x"),
                ("scaleOnInFlight", "yes"),
            ],
            &["scaleOnInFlight", "`yes`", "`true` or `false`"],
        ),
        (
            &[
                ("queueURL", "jobs"),
                ("awsRegion", "x"),
                ("awsEndpoint", "http://u:p@h:1"),
            ],
            &["awsEndpoint", "credentials"],
        ),
        (
            &[
                ("queueURL", "jobs"),
                ("awsRegion", "x"),
                ("messageWeight", "0"),
            ],
            &["messageWeight", "`0`", "greater than 0"],
        ),
        (
            &[("bootstrapServers", "b:9092")],
            &["consumerGroup", "required"],
        ),
        (
            &[("rabbitmqHost", "http://127.0.0.1:0"), ("queueName", "q")],
            &["rabbitmqHost", "`http://127.0.0.1:0`", "port 0"],
        ),
        (
            &[
                ("queueURL", "http://127.0.0.1:0/000000000000/jobs"),
                ("awsRegion", "eu-west-1"),
            ],
            &["queueURL", "port 0"],
        ),
        (
            &[
                ("queueURL", "jobs"),
                ("awsRegion", "eu-west-1"),
                ("awsEndpoint", "http://127.0.0.1:0"),
            ],
            &["awsEndpoint", "port 0"],
        ),
        (
            &[
                ("bootstrapServers", "PLAINTEXT://b:9092"),
                ("consumerGroup", "g"),
            ],
            &["bootstrapServers", "host:port"],
        ),
        (
            &[
                ("bootstrapServers", "b:9092"),
                ("consumerGroup", "g"),
                ("limitToPartitionsWithLag", "true"),
            ],
            &["limitToPartitionsWithLag", "needs `topic`"],
        ),
        (
            &[
                ("bootstrapServers", "b:9092"),
                ("consumerGroup", "g"),
                ("topic", "t"),
                ("limitToPartitionsWithLag", "true"),
                ("allowIdleConsumers", "true"),
            ],
            &["allowIdleConsumers", "limitToPartitionsWithLag"],
        ),
        (
            &[
                ("bootstrapServers", "b:9092"),
                ("consumerGroup", "g"),
                ("offsetResetPolicy", "newest"),
            ],
            &["offsetResetPolicy", "`latest` or `earliest`"],
        ),
        (
            &[
                ("bootstrapServers", "b:9092"),
                ("consumerGroup", "g"),
                ("topic", "a/b"),
            ],
            &["topic", "a/b"],
        ),
        (
            &[
                ("rabbitmqHost", "amqp://guest:guest@h:5672"),
                ("queueName", "q"),
            ],
            &["rabbitmqHost", "credentials", "authProfile"],
        ),
        (
            &[("rabbitmqHost", "amqp://h:5672")],
            &["queueName", "required"],
        ),
        (
            &[("rabbitmqHost", "redis://h:5672"), ("queueName", "q")],
            &["rabbitmqHost", "amqp"],
        ),
        (
            &[
                ("rabbitmqHost", "amqp://h:5672"),
                ("queueName", "q"),
                ("protocol", "http"),
            ],
            &["protocol", "amqp"],
        ),
        (
            &[
                ("rabbitmqHost", "amqp://h:5672"),
                ("queueName", "q"),
                ("excludeUnacknowledged", "true"),
            ],
            &["excludeUnacknowledged", "http"],
        ),
        (
            &[
                ("queueURL", "jobs"),
                ("awsRegion", "x"),
                ("bootstrapServers", "b:1"),
            ],
            &["bootstrapServers", "one broker per trigger"],
        ),
        (
            &[("queueURL", "jobs"), ("awsRegion", "x"), ("queueName", "q")],
            &["queueName", "RabbitMQ key", "SQS"],
        ),
        (
            &[("consumerGroup", "g")],
            &["consumerGroup", "set `bootstrapServers` too"],
        ),
        (
            &[("messageWeight", "2")],
            &["messageWeight", "broker source"],
        ),
        (
            &[
                ("queueURL", "jobs"),
                ("awsRegion", "x"),
                ("authProfile", "a b"),
            ],
            &["authProfile", "`a b`"],
        ),
    ];
    for (pairs, needles) in cases {
        let text = err(pairs);
        for needle in *needles {
            assert!(
                text.contains(needle),
                "{pairs:?}: {text:?} lacks {needle:?}"
            );
        }
    }
}

#[test]
fn urls_in_errors_lose_their_credentials() {
    let text = err(&[
        ("rabbitmqHost", "amqp://guest:Sup3rS3cret@h:5672"),
        ("queueName", "q"),
    ]);
    assert!(!text.contains("Sup3rS3cret"), "{text}");
    assert!(text.contains("amqp://[redacted]@h:5672"), "{text}");
}

#[test]
fn every_key_is_listed_once() {
    let mut all: Vec<&str> = keys::BROKER.to_vec();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), keys::BROKER.len());
    let grouped =
        keys::SQS.len() + keys::KAFKA.len() + keys::RABBITMQ.len() + keys::BROKER_COMMON.len();
    assert_eq!(grouped, keys::BROKER.len());
}

#[test]
fn authorize_checks_profile_namespace_and_section() {
    let profiles: Profiles = serde_yaml_ng::from_str(
        "mq: { namespaces: [a], rabbitmq: { username: { value: u }, password: { value: pass } } }",
    )
    .expect("parses");
    let t = ok(&[
        ("rabbitmqHost", "amqp://h:5672"),
        ("queueName", "q"),
        ("authProfile", "mq"),
    ]);
    assert!(t.source.authorize(&profiles, "a").is_ok());
    assert!(
        t.source
            .authorize(&profiles, "b")
            .expect_err("ns")
            .is_permission_denied()
    );
    let t = ok(&[("queueURL", "q"), ("awsRegion", "x"), ("authProfile", "mq")]);
    let e = t.source.authorize(&profiles, "a").expect_err("no aws");
    assert!(e.to_string().contains("`aws`"), "{e}");
    let t = ok(&[
        ("queueURL", "q"),
        ("awsRegion", "x"),
        ("authProfile", "nope"),
    ]);
    assert!(t.source.authorize(&profiles, "a").is_err());
    let t = ok(&[("queueURL", "q"), ("awsRegion", "x")]);
    assert!(t.source.authorize(&profiles, "a").is_ok());
}
