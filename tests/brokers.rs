//! Broker sources against real brokers started here on 127.0.0.1:
//! RabbitMQ (`rabbitmq-server` + management plugin, one node for the whole
//! binary), an SQS API server (moto), and Kafka-protocol brokers
//! (librdkafka's in-process MockCluster and the noida-db binary).
//! `bash .ci/install-deps` installs them.

#[path = "brokers/fixtures.rs"]
mod fixtures;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog_scaler::guard::credentials::Profiles;
use backlog_scaler::source::broker::{BrokerContext, BrokerMemory, BrokerReading, BrokerSource};
use backlog_scaler::source::{PollOutcome, SourceError};
use backlog_scaler::trigger::Metadata;
use backlog_scaler::trigger::broker::{BrokerTrigger, parse_metadata};
use fixtures::{Moto, Noida, Proxy, logs, moto, rabbit};

const TIMEOUT: Duration = Duration::from_secs(3);

/// The folded metadata of `pairs` (broker keys only: none is unknown).
fn metadata<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Metadata<'a> {
    let mut unknown = Vec::new();
    let md = Metadata::fold(pairs, &mut unknown);
    assert!(unknown.is_empty(), "{unknown:?}");
    md
}

fn trigger(pairs: &[(&'static str, &str)]) -> BrokerTrigger {
    match parse_metadata(&metadata(pairs.iter().copied())) {
        Ok(Some(trigger)) => trigger,
        other => panic!("{pairs:?}: {other:?}"),
    }
}

fn context(profiles_yaml: &str) -> BrokerContext {
    logs();
    let profiles: Profiles = if profiles_yaml.is_empty() {
        Profiles::default()
    } else {
        serde_yaml_ng::from_str(profiles_yaml).expect("profiles parse")
    };
    profiles.validate().expect("profiles valid");
    BrokerContext::new(Arc::new(profiles), TIMEOUT).expect("context")
}

async fn read(
    source: &BrokerSource,
    ctx: &BrokerContext,
    memory: &mut BrokerMemory,
) -> BrokerReading {
    match source.read(ctx, memory).await {
        Ok(reading) => reading,
        Err(e) => panic!("{}: {e}", source.label()),
    }
}

/// Read until `done` holds (management stats and SQS counts settle).
async fn read_until(
    source: &BrokerSource,
    ctx: &BrokerContext,
    memory: &mut BrokerMemory,
    done: impl Fn(&BrokerReading) -> bool,
) -> BrokerReading {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let result = source.read(ctx, memory).await;
        match &result {
            Ok(reading) if done(reading) => return reading.clone(),
            _ if Instant::now() > deadline => panic!("{}: last reading {result:?}", source.label()),
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

// ---------------------------------------------------------------- RabbitMQ

mod mq {
    use lapin::options::{
        BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    };
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

    /// A guest connection and channel (publisher confirms on).
    pub async fn channel(port: u16) -> (Connection, Channel) {
        let conn = Connection::connect(
            &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
            ConnectionProperties::default(),
        )
        .await
        .expect("amqp connects");
        let channel = conn.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        (conn, channel)
    }

    pub async fn declare(channel: &Channel, queue: &str) {
        channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("declare");
    }

    pub async fn publish(channel: &Channel, queue: &str, n: usize) {
        for _ in 0..n {
            channel
                .basic_publish(
                    "".into(),
                    queue.into(),
                    BasicPublishOptions::default(),
                    b"prompt",
                    BasicProperties::default(),
                )
                .await
                .expect("publish")
                .await
                .expect("confirmed");
        }
    }

    /// Take `n` messages and leave them unacknowledged (while `channel` lives).
    pub async fn take_unacked(channel: &Channel, queue: &str, n: usize) {
        for _ in 0..n {
            let got = channel
                .basic_get(queue.into(), BasicGetOptions { no_ack: false })
                .await
                .expect("basic.get");
            assert!(got.is_some(), "queue ran dry");
        }
    }
}

async fn create_rabbit_user(http_port: u16, user: &str, password: &str) {
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{http_port}/api");
    for (url, body) in [
        (
            format!("{base}/users/{user}"),
            serde_json::json!({"password": password, "tags": "monitoring"}),
        ),
        (
            format!("{base}/permissions/%2F/{user}"),
            serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"}),
        ),
    ] {
        let status = http
            .put(&url)
            .basic_auth("guest", Some("guest"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("management API")
            .status();
        assert!(status.is_success(), "{url}: {status}");
    }
}

#[tokio::test]
async fn rabbitmq_counts_ready_over_amqp_and_ready_plus_unacked_over_http() {
    let mq = rabbit();
    let ctx = context("");
    let queue = unique("jobs");
    let (_conn, channel) = mq::channel(mq.amqp_port).await;
    mq::declare(&channel, &queue).await;
    mq::publish(&channel, &queue, 10).await;
    mq::take_unacked(&channel, &queue, 3).await;

    let amqp = trigger(&[
        (
            "rabbitmqHost",
            &format!("amqp://127.0.0.1:{}", mq.amqp_port),
        ),
        ("queueName", &queue),
        ("messageWeight", "2"),
    ]);
    assert_eq!(amqp.message_weight, 2.0);
    let mut memory = BrokerMemory::default();
    let reading = read(&amqp.source, &ctx, &mut memory).await;
    assert_eq!(reading.messages, 7.0, "AMQP sees ready messages only");
    assert_eq!(reading.breakdown["ready"], 7.0);
    assert_eq!(reading.partitions, None);
    // The connection is kept: a second reading reuses it.
    assert_eq!(read(&amqp.source, &ctx, &mut memory).await.messages, 7.0);

    let http = trigger(&[
        (
            "rabbitmqHost",
            &format!("http://127.0.0.1:{}", mq.http_port),
        ),
        ("queueName", &queue),
    ]);
    let mut memory = BrokerMemory::default();
    let reading = read_until(&http.source, &ctx, &mut memory, |r| r.messages == 10.0).await;
    assert_eq!(reading.breakdown["ready"], 7.0);
    assert_eq!(reading.breakdown["unacked"], 3.0);

    let ready_only = trigger(&[
        (
            "rabbitmqHost",
            &format!("http://127.0.0.1:{}/%2F", mq.http_port),
        ),
        ("queueName", &queue),
        ("excludeUnacknowledged", "true"),
        ("protocol", "http"),
    ]);
    let reading = read(&ready_only.source, &ctx, &mut BrokerMemory::default()).await;
    assert_eq!(reading.messages, 7.0);
}

#[tokio::test]
async fn rabbitmq_missing_queue_is_an_error_not_zero() {
    let mq = rabbit();
    let ctx = context("");
    for host in [
        format!("amqp://127.0.0.1:{}", mq.amqp_port),
        format!("http://127.0.0.1:{}", mq.http_port),
    ] {
        let t = trigger(&[("rabbitmqHost", &host), ("queueName", "no-such-queue")]);
        let err = t
            .source
            .read(&ctx, &mut BrokerMemory::default())
            .await
            .expect_err("missing queue");
        assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");
        assert!(
            err.to_string().contains("NOT_FOUND") || err.to_string().contains("404"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn rabbitmq_that_goes_away_is_an_upstream_error() {
    let mq = rabbit();
    let ctx = context("");
    let queue = unique("away");
    let (_conn, channel) = mq::channel(mq.amqp_port).await;
    mq::declare(&channel, &queue).await;
    mq::publish(&channel, &queue, 2).await;
    let amqp_proxy = Proxy::start(mq.amqp_port);
    let http_proxy = Proxy::start(mq.http_port);
    let amqp = trigger(&[
        (
            "rabbitmqHost",
            &format!("amqp://127.0.0.1:{}", amqp_proxy.port),
        ),
        ("queueName", &queue),
    ]);
    let http = trigger(&[
        (
            "rabbitmqHost",
            &format!("http://127.0.0.1:{}", http_proxy.port),
        ),
        ("queueName", &queue),
    ]);
    let (mut amqp_memory, mut http_memory) = (BrokerMemory::default(), BrokerMemory::default());
    assert_eq!(
        read(&amqp.source, &ctx, &mut amqp_memory).await.messages,
        2.0
    );
    read_until(&http.source, &ctx, &mut http_memory, |r| r.messages == 2.0).await;

    amqp_proxy.stop();
    http_proxy.stop();
    for (t, memory) in [(&amqp, &mut amqp_memory), (&http, &mut http_memory)] {
        // The kept connection breaks, then reconnecting is refused: never a 0.
        for attempt in 0..2 {
            let err = t.source.read(&ctx, memory).await.expect_err("broker gone");
            assert_eq!(
                err.outcome(),
                PollOutcome::UpstreamError,
                "{} attempt {attempt}: {err}",
                t.source.label()
            );
        }
    }
}

// --------------------------------------------------------------------- SQS

mod sqs {
    use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    use aws_sdk_sqs::types::QueueAttributeName;

    pub fn client(endpoint: &str) -> aws_sdk_sqs::Client {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_sqs::Client::from_conf(config)
    }

    /// Create `name`, send `n` messages plus `delayed` with a 60 s delay,
    /// receive `in_flight` with a 30 s visibility timeout. Returns the URL.
    pub async fn fill(
        client: &aws_sdk_sqs::Client,
        name: &str,
        n: usize,
        delayed: usize,
        in_flight: i32,
    ) -> String {
        let url = client
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .expect("create_queue")
            .queue_url()
            .expect("url")
            .to_owned();
        for i in 0..n {
            client
                .send_message()
                .queue_url(&url)
                .message_body(format!("m{i}"))
                .send()
                .await
                .expect("send");
        }
        for i in 0..delayed {
            client
                .send_message()
                .queue_url(&url)
                .message_body(format!("d{i}"))
                .delay_seconds(60)
                .send()
                .await
                .expect("send delayed");
        }
        let mut received = 0;
        while received < in_flight {
            let got = client
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(in_flight - received)
                .visibility_timeout(30)
                .send()
                .await
                .expect("receive");
            received += got.messages().len() as i32;
        }
        let _ = QueueAttributeName::ApproximateNumberOfMessages;
        url
    }
}

const SQS_PROFILE: &str = r#"
sqs-test:
  aws:
    accessKeyId: { value: test }
    secretAccessKey: { value: "sqs-secret-X7kq2" }
"#;

#[tokio::test]
async fn sqs_counts_visible_in_flight_and_delayed_as_keda() {
    let moto = moto();
    let ctx = context(SQS_PROFILE);
    let name = unique("prompts");
    let url = sqs::fill(&sqs::client(&moto.endpoint()), &name, 10, 2, 4).await;
    let endpoint = moto.endpoint();
    let base = [
        ("awsRegion", "us-east-1"),
        ("awsEndpoint", endpoint.as_str()),
        ("authProfile", "sqs-test"),
    ];
    let with = |extra: &[(&'static str, &str)]| {
        let mut pairs: Vec<(&'static str, &str)> = base.to_vec();
        pairs.extend_from_slice(extra);
        trigger(&pairs).source
    };
    // Default: visible + in flight, as KEDA.
    let by_url = with(&[("queueURL", &url)]);
    let reading = read(&by_url, &ctx, &mut BrokerMemory::default()).await;
    assert_eq!(reading.messages, 10.0, "{reading:?}");
    assert_eq!(
        reading.breakdown,
        BTreeMap::from([
            ("visible".to_owned(), 6.0),
            ("inFlight".to_owned(), 4.0),
            ("delayed".to_owned(), 2.0)
        ])
    );
    // By short name (GetQueueUrl once, then kept).
    let by_name = with(&[("queueURL", &name)]);
    let mut memory = BrokerMemory::default();
    assert_eq!(read(&by_name, &ctx, &mut memory).await.messages, 10.0);
    assert_eq!(read(&by_name, &ctx, &mut memory).await.messages, 10.0);
    assert_eq!(
        read(
            &with(&[("queueURL", &url), ("scaleOnInFlight", "false")]),
            &ctx,
            &mut BrokerMemory::default()
        )
        .await
        .messages,
        6.0
    );
    assert_eq!(
        read(
            &with(&[("queueURL", &url), ("scaleOnDelayed", "true")]),
            &ctx,
            &mut BrokerMemory::default()
        )
        .await
        .messages,
        12.0
    );
    assert_eq!(
        read(
            &with(&[
                ("queueURL", &url),
                ("scaleOnInFlight", "false"),
                ("scaleOnDelayed", "true")
            ]),
            &ctx,
            &mut BrokerMemory::default()
        )
        .await
        .messages,
        8.0
    );
}

#[tokio::test]
async fn sqs_missing_queue_and_lost_server_are_errors() {
    let mut own = Moto::start();
    let ctx = context(SQS_PROFILE);
    let endpoint = own.endpoint();
    let missing = trigger(&[
        ("queueURL", "http://127.0.0.1:1/123456789012/nope"),
        ("awsRegion", "us-east-1"),
        ("awsEndpoint", &endpoint),
        ("authProfile", "sqs-test"),
    ]);
    let err = missing
        .source
        .read(&ctx, &mut BrokerMemory::default())
        .await
        .expect_err("no such queue");
    assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");

    let name = unique("gone");
    sqs::fill(&sqs::client(&endpoint), &name, 3, 0, 0).await;
    let t = trigger(&[
        ("queueURL", &name),
        ("awsRegion", "us-east-1"),
        ("awsEndpoint", &endpoint),
        ("authProfile", "sqs-test"),
    ]);
    let mut memory = BrokerMemory::default();
    assert_eq!(read(&t.source, &ctx, &mut memory).await.messages, 3.0);
    own.kill();
    for _ in 0..2 {
        let err = t
            .source
            .read(&ctx, &mut memory)
            .await
            .expect_err("server gone");
        assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");
    }
}

// ------------------------------------------------------------------- Kafka

mod kafka {
    use std::time::Duration;

    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("admin client");
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
            )
            .await
            .expect("create_topics");
        for r in results {
            r.expect("topic created");
        }
    }

    /// Produce `n` messages to each listed partition.
    pub fn produce(bootstrap: &str, topic: &str, per_partition: &[(i32, usize)]) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("producer");
        for &(partition, n) in per_partition {
            for i in 0..n {
                let payload = format!("p{partition}-{i}");
                producer
                    .send(
                        BaseRecord::<str, str>::to(topic)
                            .partition(partition)
                            .payload(&payload),
                    )
                    .expect("enqueue");
            }
        }
        producer.flush(Duration::from_secs(10)).expect("flush");
    }

    /// Commit offsets for `group` without joining it.
    pub fn commit(bootstrap: &str, group: &str, offsets: &[(&str, i32, i64)]) {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for &(topic, partition, offset) in offsets {
            tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
                .expect("offset");
        }
        consumer.commit(&tpl, CommitMode::Sync).expect("commit");
    }
}

/// The lag scenarios shared by both Kafka brokers: 3 partitions with 5
/// messages each; the group committed 2 on partition 0, 5 on partition 1,
/// nothing on partition 2. A second topic has messages but no commits.
/// `topic` has 3 partitions and `idle_topic` 1, created by the caller.
async fn kafka_lag_scenarios(bootstrap: &str, topic: &str, idle_topic: &str) {
    let ctx = context("");
    let (topic, idle_topic, group) = (topic.to_owned(), idle_topic.to_owned(), unique("workers"));
    kafka::produce(bootstrap, &topic, &[(0, 5), (1, 5), (2, 5)]);
    kafka::produce(bootstrap, &idle_topic, &[(0, 4)]);
    kafka::commit(bootstrap, &group, &[(&topic, 0, 2), (&topic, 1, 5)]);

    let with = |extra: &[(&'static str, &str)]| {
        let mut pairs: Vec<(&'static str, &str)> =
            vec![("bootstrapServers", bootstrap), ("consumerGroup", &group)];
        pairs.extend_from_slice(extra);
        trigger(&pairs).source
    };
    let fresh = || BrokerMemory::default();

    // latest (default): 3 + 0 + 1 (no commit on partition 2 counts 1).
    let latest = read(&with(&[("topic", &topic)]), &ctx, &mut fresh()).await;
    assert_eq!(latest.messages, 4.0, "{latest:?}");
    assert_eq!(latest.partitions, Some(3), "cap counts every partition");
    assert_eq!(latest.breakdown[&format!("{topic}/0")], 3.0);
    assert_eq!(latest.breakdown[&format!("{topic}/1")], 0.0);
    assert_eq!(latest.breakdown[&format!("{topic}/2")], 1.0);
    // earliest: partition 2 counts its high watermark.
    let earliest = read(
        &with(&[("topic", &topic), ("offsetResetPolicy", "earliest")]),
        &ctx,
        &mut fresh(),
    )
    .await;
    assert_eq!(earliest.messages, 8.0);
    let zero = read(
        &with(&[
            ("topic", &topic),
            ("offsetResetPolicy", "earliest"),
            ("scaleToZeroOnInvalidOffset", "true"),
        ]),
        &ctx,
        &mut fresh(),
    )
    .await;
    assert_eq!(zero.messages, 3.0);
    // The cap: none with idle consumers allowed; only lagging partitions with the limit.
    let idle = read(
        &with(&[("topic", &topic), ("allowIdleConsumers", "true")]),
        &ctx,
        &mut fresh(),
    )
    .await;
    assert_eq!((idle.messages, idle.partitions), (4.0, None));
    let limited = read(
        &with(&[("topic", &topic), ("limitToPartitionsWithLag", "true")]),
        &ctx,
        &mut fresh(),
    )
    .await;
    assert_eq!((limited.messages, limited.partitions), (4.0, Some(2)));
    // No topic: every topic the group committed on (not the idle one).
    let all = read(&with(&[]), &ctx, &mut fresh()).await;
    assert_eq!((all.messages, all.partitions), (4.0, Some(3)), "{all:?}");
    assert!(
        !all.breakdown.keys().any(|k| k.starts_with(&idle_topic)),
        "{all:?}"
    );

    // excludePersistentLag across readings: partition 0 stuck at 2.
    let persistent = with(&[("topic", &topic), ("excludePersistentLag", "true")]);
    let mut memory = fresh();
    let first = read(&persistent, &ctx, &mut memory).await;
    assert_eq!(first.messages, 4.0, "first sight counts");
    let second = read(&persistent, &ctx, &mut memory).await;
    assert_eq!(
        second.messages, 1.0,
        "stuck partition 0 excluded: {second:?}"
    );
    assert_eq!(second.breakdown["lagWithPersistent"], 4.0);
    kafka::commit(bootstrap, &group, &[(&topic, 0, 4)]);
    let third = read(&persistent, &ctx, &mut memory).await;
    assert_eq!(
        third.messages, 2.0,
        "partition 0 moved: counts again: {third:?}"
    );

    // A topic that does not exist is an error, not 0.
    let err = with(&[("topic", "no-such-topic")])
        .read(&ctx, &mut fresh())
        .await
        .expect_err("unknown topic");
    assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");
}

#[tokio::test]
async fn kafka_lag_on_librdkafka_mock_cluster() {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    let (topic, idle_topic) = (unique("prompts"), unique("other"));
    // The mock answers CreateTopics slowly or not at all; it has its own call.
    cluster.create_topic(&topic, 3, 1).expect("topic");
    cluster.create_topic(&idle_topic, 1, 1).expect("topic");
    kafka_lag_scenarios(&cluster.bootstrap_servers(), &topic, &idle_topic).await;
}

#[tokio::test]
async fn kafka_lag_on_noida_db() {
    let noida = Noida::start();
    let (topic, idle_topic) = (unique("prompts"), unique("other"));
    kafka::create_topic(&noida.bootstrap(), &topic, 3).await;
    kafka::create_topic(&noida.bootstrap(), &idle_topic, 1).await;
    kafka_lag_scenarios(&noida.bootstrap(), &topic, &idle_topic).await;
}

#[tokio::test]
async fn kafka_broker_that_goes_away_is_an_upstream_error() {
    let mut noida = Noida::start();
    let ctx = context("").with_request_timeout(Duration::from_secs(1));
    let topic = unique("gone");
    kafka::create_topic(&noida.bootstrap(), &topic, 1).await;
    kafka::produce(&noida.bootstrap(), &topic, &[(0, 3)]);
    let t = trigger(&[
        ("bootstrapServers", &noida.bootstrap()),
        ("consumerGroup", "g"),
        ("topic", &topic),
        ("offsetResetPolicy", "earliest"),
    ]);
    let mut memory = BrokerMemory::default();
    assert_eq!(read(&t.source, &ctx, &mut memory).await.messages, 3.0);
    noida.kill();
    for _ in 0..2 {
        let started = Instant::now();
        let err = t
            .source
            .read(&ctx, &mut memory)
            .await
            .expect_err("broker gone");
        assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "bounded by the request timeout"
        );
    }
}

#[tokio::test]
async fn kafka_reading_abandoned_by_the_poller_is_collected_by_the_next() {
    // A "broker" that accepts connections and never answers.
    let black_hole = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let bootstrap = format!(
        "127.0.0.1:{}",
        black_hole.local_addr().expect("addr").port()
    );
    let ctx = context("").with_request_timeout(Duration::from_millis(1500));
    let t = trigger(&[
        ("bootstrapServers", &bootstrap),
        ("consumerGroup", "g"),
        ("topic", "t"),
    ]);
    let mut memory = BrokerMemory::default();
    // The poller's own timeout fires first and drops the reading...
    let abandoned =
        tokio::time::timeout(Duration::from_millis(200), t.source.read(&ctx, &mut memory)).await;
    assert!(abandoned.is_err(), "still waiting on the broker");
    assert!(
        format!("{memory:?}").contains("in_flight: true"),
        "{memory:?}"
    );
    // ...and the next reading waits for that same request instead of starting another.
    let started = Instant::now();
    let err = t
        .source
        .read(&ctx, &mut memory)
        .await
        .expect_err("no answer");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "collected, not restarted"
    );
    assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");
    assert!(
        format!("{memory:?}").contains("in_flight: false"),
        "{memory:?}"
    );
    drop(black_hole);
}

// ------------------------------------------------------------- credentials

#[tokio::test]
async fn credentials_never_appear_in_errors_debug_or_logs() {
    let mq = rabbit();
    const PASSWORD: &str = "Zebra-Quasar-7731-secret";
    const WRONG: &str = "Wrong-Okapi-4410-secret";
    const KAFKA_PASSWORD: &str = "Kafka-Narwhal-5123-secret";
    let user = unique("scaler");
    create_rabbit_user(mq.http_port, &user, PASSWORD).await;
    let profiles = format!(
        r#"
good: {{ rabbitmq: {{ username: {{ value: {user} }}, password: {{ value: "{PASSWORD}" }} }} }}
bad: {{ rabbitmq: {{ username: {{ value: {user} }}, password: {{ value: "{WRONG}" }} }} }}
kafka-sasl:
  kafka:
    sasl: {{ mechanism: PLAIN, username: {{ value: k }}, password: {{ value: "{KAFKA_PASSWORD}" }} }}
"#
    );
    let ctx = context(&profiles);
    let queue = unique("secret");
    let (_conn, channel) = mq::channel(mq.amqp_port).await;
    mq::declare(&channel, &queue).await;
    mq::publish(&channel, &queue, 1).await;

    let mut texts: Vec<String> = vec![format!("{ctx:?}"), format!("{:?}", ctx.profiles)];
    for host in [
        format!("amqp://127.0.0.1:{}", mq.amqp_port),
        format!("http://127.0.0.1:{}", mq.http_port),
    ] {
        let good = trigger(&[
            ("rabbitmqHost", &host),
            ("queueName", &queue),
            ("authProfile", "good"),
        ]);
        let mut memory = BrokerMemory::default();
        let reading = if host.starts_with("http") {
            read_until(&good.source, &ctx, &mut memory, |r| r.messages == 1.0).await
        } else {
            read(&good.source, &ctx, &mut memory).await
        };
        assert_eq!(reading.messages, 1.0);
        texts.extend([
            format!("{good:?}"),
            format!("{memory:?}"),
            format!("{reading:?}"),
            good.source.label(),
        ]);
        let bad = trigger(&[
            ("rabbitmqHost", &host),
            ("queueName", &queue),
            ("authProfile", "bad"),
        ]);
        let mut memory = BrokerMemory::default();
        let err: SourceError = bad
            .source
            .read(&ctx, &mut memory)
            .await
            .expect_err("wrong password");
        assert_eq!(err.outcome(), PollOutcome::UpstreamError, "{err}");
        texts.extend([err.to_string(), format!("{err:?}"), format!("{memory:?}")]);
    }
    // Credentials in the URL are refused, and not echoed back.
    let map = BTreeMap::from([
        (
            "rabbitmqHost",
            format!("amqp://{user}:{PASSWORD}@127.0.0.1:{}", mq.amqp_port),
        ),
        ("queueName", queue.clone()),
    ]);
    let md = metadata(map.iter().map(|(k, v)| (*k, v.as_str())));
    let errors = parse_metadata(&md).expect_err("credentials in metadata");
    texts.push(format!("{errors:?}"));
    texts.extend(errors.iter().map(ToString::to_string));

    // Kafka SASL against a plaintext broker fails; the password stays hidden.
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    let kafka = trigger(&[
        ("bootstrapServers", &cluster.bootstrap_servers()),
        ("consumerGroup", "g"),
        ("topic", "t"),
        ("authProfile", "kafka-sasl"),
    ]);
    let ctx_fast = ctx.with_request_timeout(Duration::from_secs(1));
    let mut memory = BrokerMemory::default();
    let err = kafka
        .source
        .read(&ctx_fast, &mut memory)
        .await
        .expect_err("SASL vs plaintext");
    texts.extend([
        err.to_string(),
        format!("{err:?}"),
        format!("{kafka:?}"),
        format!("{memory:?}"),
    ]);
    drop(memory);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let logged = String::from_utf8_lossy(&logs().lock().expect("lock")).into_owned();
    assert!(!logged.is_empty(), "the capture subscriber is installed");
    assert_eq!(base64(b"guest:guest"), "Z3Vlc3Q6Z3Vlc3Q=");
    for secret in [PASSWORD, WRONG, KAFKA_PASSWORD] {
        // As text, as a Debug byte list (lapin prints the SASL PLAIN
        // response that way), and inside an HTTP basic-auth header.
        let renderings = [
            secret.to_owned(),
            secret
                .bytes()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            base64(format!("{user}:{secret}").as_bytes()),
        ];
        for rendering in &renderings {
            for text in &texts {
                assert!(
                    !text.contains(rendering),
                    "{secret} leaked as {rendering:?} in: {text}"
                );
            }
            assert!(
                !logged.contains(rendering),
                "{secret} leaked in the logs as {rendering:?}"
            );
        }
    }
    // The errors say what went wrong without it.
    assert!(
        texts
            .iter()
            .any(|t| t.contains("ACCESS_REFUSED") || t.contains("401")),
        "{texts:#?}"
    );
}

/// Standard base64 (what an HTTP basic-auth header carries).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
