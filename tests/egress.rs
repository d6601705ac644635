//! The outbound allowlist holds for every connection, broker clients
//! included, driven as KEDA drives the scaler (GetMetricSpec, then
//! GetMetrics over gRPC).
//!
//! For each source kind: a counting TCP listener on 127.0.0.1 stands in
//! for the upstream, named `localhost` in the metadata, under a policy that
//! admits the name but has no CIDR containing its address. The trigger
//! registers (the name is allowed), no connection is ever accepted, and
//! GetMetrics answers UNAVAILABLE naming the address and the rule. With
//! `127.0.0.0/8` allowed, the same source works against the real upstream
//! (noida-db for Kafka, RabbitMQ, moto, Prometheus). The vLLM scrape path
//! is covered the same way in `tests/allowlist.rs`.

mod common;
#[path = "brokers/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog_scaler::api::server::RunningServer;
use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::ScaledObjectRef;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::prometheus::PrometheusServer;
use common::*;
use tokio::net::{TcpListener, TcpStream};
use tonic::Code;
use tonic::transport::Channel;

/// Admits the name `localhost` but no network holding 127.0.0.1.
const NAME_ONLY: &[&str] = &["localhost", "10.0.0.0/8"];
/// Admits the name and its loopback address.
const LOOPBACK: &[&str] = &["localhost", "127.0.0.0/8"];
/// The rule every connect-time refusal here names.
const NO_CIDR: &str = "no CIDR in the outbound allowlist contains this address";

const SQS_SECRET: &str = "egress-sqs-secret-J3w9";

/// Accepts and counts TCP connections on 127.0.0.1; accepted sockets are
/// held open and never answered. With `forward_to`, a counting proxy.
struct Counter {
    port: u16,
    accepted: Arc<AtomicU64>,
}

impl Counter {
    async fn start() -> Counter {
        Counter::start_forwarding(None).await
    }

    async fn start_forwarding(forward_to: Option<std::net::SocketAddr>) -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                match forward_to {
                    None => held.push(stream),
                    Some(upstream) => {
                        tokio::spawn(async move {
                            if let Ok(mut up) = TcpStream::connect(upstream).await {
                                let _ = tokio::io::copy_bidirectional(&mut stream, &mut up).await;
                            }
                        });
                    }
                }
            }
        });
        Counter { port, accepted }
    }

    fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A scaler config with `outbound.allow: allow` and the SQS profile.
fn config(allow: &[&str]) -> ScalerConfig {
    let mut yaml = String::from("outbound:\n  allow:\n");
    for entry in allow {
        yaml.push_str(&format!("    - \"{entry}\"\n"));
    }
    yaml.push_str(&format!(
        "profiles:\n  sqs:\n    aws:\n      accessKeyId: {{value: test}}\n      secretAccessKey: {{value: {SQS_SECRET}}}\n"
    ));
    ScalerConfig::parse(&yaml).expect("config")
}

fn trigger(name: &str, pairs: &[(&str, &str)]) -> ScaledObjectRef {
    let mut all = vec![
        ("targetBacklogPerReplica", "10"),
        ("pollIntervalSeconds", "1"),
    ];
    all.extend_from_slice(pairs);
    object(name, &all)
}

async fn explain(server: &RunningServer) -> String {
    http_get(&format!("http://{}/explain", server.http_addr))
        .await
        .1
}

/// Registration succeeds (the name is admitted), then GetMetrics answers
/// UNAVAILABLE naming a refused address and `rule`, and several polls later
/// not one connection reached `counter`. Returns the message.
async fn refused_at_connect_time(
    server: &RunningServer,
    object: &ScaledObjectRef,
    counter: &Counter,
    rule: &str,
) -> String {
    let mut grpc = client(server).await;
    grpc.get_metric_spec(object.clone())
        .await
        .unwrap_or_else(|s| {
            panic!(
                "{}: the name is admitted at registration: {s:?}",
                object.name
            )
        });
    let status = refusal(&grpc, object).await;
    assert_eq!(
        status.code(),
        Code::Unavailable,
        "{}: {status:?}",
        object.name
    );
    let message = status.message().to_owned();
    assert!(message.contains(rule), "{}: {message}", object.name);
    // More polls (one a second) happen; none gets through.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        counter.accepted(),
        0,
        "{}: connections reached the refused address",
        object.name
    );
    let status = grpc
        .get_metrics(metrics_request(object, ""))
        .await
        .expect_err("still refused");
    assert_eq!(status.code(), Code::Unavailable);
    // A counted poll error, with the reason in /explain.
    let (_, metrics) = http_get(&format!("http://{}/metrics", server.http_addr)).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("backlog_scaler_polls_total")
                && l.contains("outcome=\"upstream_error\"")
                && !l.ends_with(" 0")),
        "{metrics}"
    );
    assert!(explain(server).await.contains("refused"), "explain");
    message
}

/// GetMetrics until it answers an error that says "refused".
async fn refusal(grpc: &ExternalScalerClient<Channel>, object: &ScaledObjectRef) -> tonic::Status {
    eventually(Duration::from_secs(20), || {
        let mut grpc = grpc.clone();
        let object = object.clone();
        async move {
            match grpc.get_metrics(metrics_request(&object, "")).await {
                Err(status) if status.message().contains("refused") => Some(status),
                _ => None,
            }
        }
    })
    .await
    .unwrap_or_else(|| panic!("{}: no refusal reported", object.name))
}

/// Registration succeeds and GetMetrics settles on `expected`.
async fn works(server: &RunningServer, object: &ScaledObjectRef, expected: f64) {
    let mut grpc = client(server).await;
    grpc.get_metric_spec(object.clone())
        .await
        .unwrap_or_else(|s| panic!("{}: {s:?}", object.name));
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match grpc.get_metrics(metrics_request(object, "")).await {
            Ok(answer) => {
                let value = answer.into_inner().metric_values[0].metric_value_float;
                if value == expected {
                    return;
                }
                last = Some(Ok(value));
            }
            Err(status) => last = Some(Err(status.message().to_owned())),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "{}: expected {expected}, last answer {last:?}\n{}",
        object.name,
        explain(server).await
    );
}

/// The address part every refusal of `localhost` names.
fn assert_names_localhost(message: &str) {
    assert!(message.contains("(resolved from localhost)"), "{message}");
}

// ------------------------------------------------------------------ Kafka

mod kafka {
    use std::time::Duration;

    use rdkafka::ClientConfig;
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    /// A topic with one partition holding `n` messages.
    pub async fn topic_with(bootstrap: &str, topic: &str, n: usize) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("admin client");
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
            )
            .await
            .expect("create_topics");
        for r in results {
            r.expect("topic created");
        }
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("producer");
        for i in 0..n {
            let payload = format!("prompt-{i}");
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
}

fn kafka_trigger(name: &str, bootstrap: &str, topic: &str) -> ScaledObjectRef {
    trigger(
        name,
        &[
            ("bootstrapServers", bootstrap),
            ("consumerGroup", "egress-workers"),
            ("topic", topic),
            // No commits: the lag is the high watermark.
            ("offsetResetPolicy", "earliest"),
        ],
    )
}

#[tokio::test]
async fn kafka_bootstrap_address_outside_every_cidr_is_never_dialled() {
    let counter = Counter::start().await;
    let server = start_server(config(NAME_ONLY)).await;
    let object = kafka_trigger(
        "kafka-refused",
        &format!("localhost:{}", counter.port),
        "prompts",
    );
    let message = refused_at_connect_time(&server, &object, &counter, NO_CIDR).await;
    assert_names_localhost(&message);
    assert!(
        message.contains(&format!("bootstrap server `localhost:{}`", counter.port)),
        "{message}"
    );
    // An IP literal outside every CIDR is knowable at registration.
    let literal = kafka_trigger(
        "kafka-literal",
        &format!("127.0.0.1:{}", counter.port),
        "prompts",
    );
    let status = client(&server)
        .await
        .get_metric_spec(literal)
        .await
        .expect_err("refused at registration");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("127.0.0.1"), "{status:?}");
    assert_eq!(counter.accepted(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn kafka_through_an_allowed_address_works() {
    let noida = fixtures::Noida::start();
    kafka::topic_with(&noida.bootstrap(), "egress-allowed", 3).await;
    let server = start_server(config(LOOPBACK)).await;
    let object = kafka_trigger(
        "kafka-allowed",
        &format!("localhost:{}", noida.port),
        "egress-allowed",
    );
    works(&server, &object, 3.0).await;
    server.shutdown().await;
}

/// noida-db bound to (and so advertising) 127.0.0.3; its binary is found
/// the way `fixtures::Noida` finds it.
struct AdvertisingNoida {
    port: u16,
    _group: fixtures::Group,
    _dir: tempfile::TempDir,
}

impl AdvertisingNoida {
    fn start(host: &str) -> AdvertisingNoida {
        let out = Command::new("python3")
            .args([
                "-c",
                "import noida_db,os;print(os.path.dirname(noida_db.__file__))",
            ])
            .output()
            .expect("python3 runs");
        assert!(out.status.success(), "noida-db is not installed");
        let binary =
            std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("noida-db");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = fixtures::free_port();
        let group = fixtures::Group::start(
            Command::new(binary)
                .args(["start", "--only", "kafka", "--host", host])
                .args(["--kafka-port", &port.to_string()])
                .arg("--data-dir")
                .arg(dir.path().join("data")),
            &dir.path().join("noida.log"),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((host, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "noida-db did not listen on {host}:{port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        AdvertisingNoida {
            port,
            _group: group,
            _dir: dir,
        }
    }
}

#[tokio::test]
async fn kafka_advertised_broker_outside_every_cidr_is_refused() {
    // The broker listens on (and advertises) 127.0.0.3; the trigger reaches
    // its bootstrap through a counting proxy on 127.0.0.1. Only 127.0.0.1
    // is allowed: bootstrap passes, the advertised broker does not. Without
    // the check the reading would succeed, by dialling 127.0.0.3 directly.
    let noida = AdvertisingNoida::start("127.0.0.3");
    let broker: std::net::SocketAddr = format!("127.0.0.3:{}", noida.port).parse().expect("addr");
    kafka::topic_with(&broker.to_string(), "egress-advertised", 2).await;
    let proxy = Counter::start_forwarding(Some(broker)).await;
    let bootstrap = format!("127.0.0.1:{}", proxy.port);

    let server = start_server(config(&["127.0.0.1/32"])).await;
    let object = kafka_trigger("kafka-advertised", &bootstrap, "egress-advertised");
    let mut grpc = client(&server).await;
    grpc.get_metric_spec(object.clone())
        .await
        .expect("the bootstrap address is allowed");
    let status = refusal(&grpc, &object).await;
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let message = status.message();
    assert!(
        message.contains(&format!("broker 1 advertised as `{broker}`")),
        "{message}"
    );
    assert!(message.contains(NO_CIDR), "{message}");
    assert!(proxy.accepted() >= 1, "the bootstrap server was asked");
    server.shutdown().await;

    // With the broker's network allowed, the same trigger reads the lag.
    let server = start_server(config(&["127.0.0.0/8"])).await;
    works(&server, &object, 2.0).await;
    server.shutdown().await;
}

// --------------------------------------------------------------- RabbitMQ

/// A queue holding `n` ready messages on the shared RabbitMQ.
async fn rabbit_queue_with(queue: &str, n: usize) {
    use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Connection, ConnectionProperties};
    let rabbit = fixtures::rabbit();
    let conn = Connection::connect(
        &format!("amqp://guest:guest@127.0.0.1:{}/%2f", rabbit.amqp_port),
        ConnectionProperties::default(),
    )
    .await
    .expect("amqp connects");
    let channel = conn.create_channel().await.expect("channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    channel
        .queue_declare(
            queue.into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("declare");
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
    let _ = conn.close(200, "done".into()).await;
}

fn rabbit_trigger(name: &str, host: &str, queue: &str) -> ScaledObjectRef {
    trigger(name, &[("rabbitmqHost", host), ("queueName", queue)])
}

#[tokio::test]
async fn rabbitmq_amqp_and_http_addresses_outside_every_cidr_are_never_dialled() {
    let server = start_server(config(NAME_ONLY)).await;
    for (name, scheme) in [("amqp-refused", "amqp"), ("http-refused", "http")] {
        let counter = Counter::start().await;
        let host = format!("{scheme}://localhost:{}", counter.port);
        let object = rabbit_trigger(name, &host, "jobs");
        let message = refused_at_connect_time(&server, &object, &counter, NO_CIDR).await;
        assert_names_localhost(&message);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn rabbitmq_amqp_and_http_through_an_allowed_address_work() {
    let rabbit = fixtures::rabbit();
    rabbit_queue_with("egress-jobs", 4).await;
    let server = start_server(config(LOOPBACK)).await;
    for (name, host) in [
        (
            "amqp-allowed",
            format!("amqp://localhost:{}", rabbit.amqp_port),
        ),
        (
            "http-allowed",
            format!("http://localhost:{}", rabbit.http_port),
        ),
    ] {
        works(&server, &rabbit_trigger(name, &host, "egress-jobs"), 4.0).await;
    }
    server.shutdown().await;
}

// -------------------------------------------------------------------- SQS

fn sqs_trigger(name: &str, endpoint: &str, profile: Option<&str>) -> ScaledObjectRef {
    let queue = format!("{endpoint}/123456789012/egress-jobs");
    let mut pairs = vec![
        ("queueURL", queue.as_str()),
        ("awsRegion", "us-east-1"),
        ("awsEndpoint", endpoint),
    ];
    if let Some(profile) = profile {
        pairs.push(("authProfile", profile));
    }
    trigger(name, &pairs)
}

#[tokio::test]
async fn sqs_endpoint_address_outside_every_cidr_is_never_dialled() {
    let counter = Counter::start().await;
    let server = start_server(config(NAME_ONLY)).await;
    let endpoint = format!("http://localhost:{}", counter.port);
    let object = sqs_trigger("sqs-refused", &endpoint, Some("sqs"));
    let message = refused_at_connect_time(&server, &object, &counter, NO_CIDR).await;
    assert_names_localhost(&message);
    server.shutdown().await;
}

#[tokio::test]
async fn sqs_through_an_allowed_address_works() {
    use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    let moto = fixtures::moto();
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(moto.endpoint())
            .credentials_provider(Credentials::new("test", SQS_SECRET, None, None, "test"))
            .build(),
    );
    let url = sqs
        .create_queue()
        .queue_name("egress-jobs")
        .send()
        .await
        .expect("create_queue")
        .queue_url()
        .expect("url")
        .to_owned();
    for i in 0..5 {
        sqs.send_message()
            .queue_url(&url)
            .message_body(format!("job-{i}"))
            .send()
            .await
            .expect("send");
    }
    let server = start_server(config(LOOPBACK)).await;
    let endpoint = format!("http://localhost:{}", moto.port);
    works(
        &server,
        &sqs_trigger("sqs-allowed", &endpoint, Some("sqs")),
        5.0,
    )
    .await;
    server.shutdown().await;
}

/// The binary serving on free loopback ports with an empty environment (no
/// AWS credentials, no home directory with a profile), so the default AWS
/// credential chain ends at the instance metadata service.
fn bare(config: &str) -> (Serve, tempfile::TempDir) {
    let home = tempfile::tempdir().expect("tempdir");
    let path = home.path().join("scaler.yaml");
    std::fs::write(&path, config).expect("config");
    let serve = Serve::start_configured(
        "info",
        &[std::ffi::OsStr::new("--config"), path.as_os_str()],
        |command| {
            command.env_clear().env("HOME", home.path());
        },
    );
    (serve, home)
}

#[tokio::test]
async fn sqs_default_credentials_never_reach_the_instance_metadata_service() {
    // The endpoint itself is allowed; the credential chain finds nothing in
    // the (empty) environment and would ask 169.254.169.254 next.
    let counter = Counter::start().await;
    let (server, _home) = bare("outbound:\n  allow: [\"127.0.0.0/8\"]\n");
    let mut grpc = server.client().await;
    let endpoint = format!("http://127.0.0.1:{}", counter.port);
    let object = sqs_trigger("sqs-imds", &endpoint, None);
    grpc.get_metric_spec(object.clone())
        .await
        .expect("registered");
    let status = refusal(&grpc, &object).await;
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let message = status.message();
    assert!(message.contains("169.254.169.254"), "{message}");
    assert!(
        message.contains("set `outbound.allowLinkLocal: true`"),
        "says how to allow it: {message}"
    );
    // Without credentials nothing is signed, so nothing is sent either.
    assert_eq!(counter.accepted(), 0);
    // The child's stderr is read on its own thread: the line can land a moment after the
    // status (it did, once, with two builds running beside the test).
    let logged = eventually(Duration::from_secs(10), || async {
        server.log().contains("169.254.169.254").then_some(())
    })
    .await;
    assert!(logged.is_some(), "{}", server.log());
}

// ----------------------------------------------------------------- PromQL

#[tokio::test]
async fn promql_address_outside_every_cidr_is_never_dialled() {
    let counter = Counter::start().await;
    let server = start_server(config(NAME_ONLY)).await;
    let address = format!("http://localhost:{}", counter.port);
    let object = trigger(
        "promql-refused",
        &[("prometheusAddress", &address), ("modelName", MODEL)],
    );
    let message = refused_at_connect_time(&server, &object, &counter, NO_CIDR).await;
    assert_names_localhost(&message);
    server.shutdown().await;
}

#[tokio::test]
async fn promql_through_an_allowed_address_works() {
    let pods = pods(&[(3.0, 0.0)]).await;
    let prometheus = PrometheusServer::start(&[pods[0].addr()], Duration::from_secs(1)).await;
    prometheus
        .wait_for_targets_up(1, Duration::from_secs(15))
        .await;
    let server = start_server(config(LOOPBACK)).await;
    let address = format!("http://localhost:{}", prometheus.addr().port());
    let object = trigger(
        "promql-allowed",
        &[("prometheusAddress", &address), ("modelName", MODEL)],
    );
    works(&server, &object, 3.0).await;
    server.shutdown().await;
}
