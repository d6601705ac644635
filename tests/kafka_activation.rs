//! Kafka through the whole server against a real Kafka-protocol broker
//! (noida-db on 127.0.0.1): with `excludePersistentLag`, a group stuck on a
//! partition (its committed offset not moving, as at zero replicas where
//! nobody consumes) still activates the Deployment while the value KEDA
//! scales on leaves that lag out, as KEDA's kafka scaler does; and a group
//! that has committed nothing, with no `topic`, is a lost signal naming the
//! group, never a measured 0.

mod common;
#[path = "brokers/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

use std::time::Duration;

use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::source::broker::{BrokerContext, BrokerMemory};
use backlog_scaler::source::{FailureKind, PollOutcome};
use backlog_scaler::trigger::TriggerSpec;
use common::*;
use fixtures::Noida;
use tonic::Code;

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

    /// Produce `n` messages to partition 0.
    pub fn produce(bootstrap: &str, topic: &str, n: usize) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("producer");
        for i in 0..n {
            let payload = format!("prompt {i}");
            producer
                .send(
                    BaseRecord::<str, str>::to(topic)
                        .partition(0)
                        .payload(&payload),
                )
                .expect("enqueue");
        }
        producer.flush(Duration::from_secs(10)).expect("flush");
    }

    /// Commit `offset` on partition 0 for `group` without joining it.
    pub fn commit(bootstrap: &str, group: &str, topic: &str, offset: i64) {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(offset))
            .expect("offset");
        consumer.commit(&tpl, CommitMode::Sync).expect("commit");
    }
}

async fn value_and_active(
    client: &mut backlog_scaler::proto::external_scaler_client::ExternalScalerClient<
        tonic::transport::Channel,
    >,
    object: &backlog_scaler::proto::ScaledObjectRef,
) -> Option<(f64, bool)> {
    let value = client
        .get_metrics(metrics_request(object, ""))
        .await
        .ok()?
        .into_inner()
        .metric_values
        .first()?
        .metric_value_float;
    let active = client
        .is_active(object.clone())
        .await
        .ok()?
        .into_inner()
        .result;
    Some((value, active))
}

#[tokio::test]
async fn a_group_stuck_at_zero_replicas_activates_while_its_lag_is_not_scaled_on() {
    let noida = Noida::start();
    let bootstrap = noida.bootstrap();
    let topic = format!("prompts-{}", std::process::id());
    let group = "embedders";
    kafka::create_topic(&bootstrap, &topic, 1).await;
    kafka::produce(&bootstrap, &topic, 5);
    // Zero replicas: nobody consumes, so the committed offset never moves.
    kafka::commit(&bootstrap, group, &topic, 2);

    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let md = [
        ("bootstrapServers", bootstrap.as_str()),
        ("consumerGroup", group),
        ("topic", topic.as_str()),
        ("excludePersistentLag", "true"),
        ("targetBacklogPerReplica", "10"),
        ("pollIntervalSeconds", "1"),
        ("maxSignalAgeSeconds", "5"),
    ];
    let object = object("embedder", &md);
    client.get_metric_spec(object.clone()).await.expect("spec");

    // The first reading counts the lag (first sight, as KEDA); from the
    // second the offset has not moved: 0 for scaling, 3 for activation.
    let (value, active) = eventually(Duration::from_secs(10), || {
        let (mut client, object) = (client.clone(), object.clone());
        async move {
            value_and_active(&mut client, &object)
                .await
                .filter(|(value, _)| *value == 0.0)
        }
    })
    .await
    .expect("the persistent lag leaves the scaling value within a few polls");
    assert_eq!(value, 0.0, "persistent lag excluded from the value");
    assert!(
        active,
        "IsActive counts the lag with persistent lag (KEDA's totalLagWithPersistent)"
    );
    let (_, explain) = http_get(&format!("http://{}/explain", server.http_addr)).await;
    assert!(
        explain.contains("\"activationBrokerTerm\":3.0"),
        "{explain}"
    );
    assert!(explain.contains("\"lagWithPersistent\":3.0"), "{explain}");

    // New messages while still at zero: the value stays 0, activation grows.
    kafka::produce(&bootstrap, &topic, 4);
    let (value, active) = eventually(Duration::from_secs(10), || {
        let (mut client, object) = (client.clone(), object.clone());
        async move {
            let (_, explain) = http_get(&format!("http://{}/explain", server.http_addr)).await;
            if !explain.contains("\"activationBrokerTerm\":7.0") {
                return None;
            }
            value_and_active(&mut client, &object).await
        }
    })
    .await
    .expect("the new messages are read");
    assert_eq!((value, active), (0.0, true));

    // The consumer (now scaled up) catches up: no lag at all, inactive.
    kafka::commit(&bootstrap, group, &topic, 9);
    let idle = eventually(Duration::from_secs(10), || {
        let (mut client, object) = (client.clone(), object.clone());
        async move {
            value_and_active(&mut client, &object)
                .await
                .filter(|(_, active)| !active)
        }
    })
    .await
    .expect("no lag: inactive");
    assert_eq!(idle, (0.0, false));
    server.shutdown().await;
}

#[tokio::test]
async fn a_group_with_no_commits_and_no_topic_is_a_lost_signal_naming_it() {
    let noida = Noida::start();
    let bootstrap = noida.bootstrap();
    let topic = format!("other-{}", std::process::id());
    kafka::create_topic(&bootstrap, &topic, 1).await;
    kafka::produce(&bootstrap, &topic, 3);

    // The source itself: an error naming the group, counted as upstream_error.
    let md = [
        ("bootstrapServers", bootstrap.as_str()),
        ("consumerGroup", "never-committed"),
        ("targetBacklogPerReplica", "10"),
        ("pollIntervalSeconds", "1"),
        ("maxSignalAgeSeconds", "3"),
    ];
    let spec = TriggerSpec::from_metadata(md.iter().copied()).expect("valid");
    let broker = spec.broker.as_ref().expect("kafka");
    let ctx = BrokerContext::new(Default::default(), Duration::from_secs(3)).expect("context");
    let err = broker
        .source
        .read(&ctx, &mut BrokerMemory::default())
        .await
        .expect_err("nothing committed: not a measured 0");
    assert_eq!(err.kind(), FailureKind::Rejected, "{err}");
    assert_eq!(err.outcome(), PollOutcome::UpstreamError);
    let text = err.to_string();
    assert!(
        text.contains("consumer group `never-committed` has no committed offset on any topic")
            && text.contains("set `topic`"),
        "{text}"
    );

    // Through the server: UNAVAILABLE with that reason, never 0, and the
    // failed polls counted.
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let object = object("orphan", &md);
    let status = client
        .get_metrics(metrics_request(&object, ""))
        .await
        .expect_err("a lost signal");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("never-committed"),
        "{}",
        status.message()
    );
    let status = client.is_active(object.clone()).await.expect_err("lost");
    assert_eq!(status.code(), Code::Unavailable);
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("backlog_scaler_polls_total{")
                && l.contains("kafka never-committed/*")
                && l.contains("outcome=\"upstream_error\"")),
        "{metrics}"
    );

    // The same group once it has committed: a measured lag.
    kafka::commit(&bootstrap, "never-committed", &topic, 1);
    let value = eventually(Duration::from_secs(10), || {
        let (mut client, object) = (client.clone(), object.clone());
        async move { value_and_active(&mut client, &object).await }
    })
    .await
    .expect("a reading once the group committed");
    assert_eq!(value, (2.0, true));
    server.shutdown().await;
}
