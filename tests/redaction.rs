//! No credential is ever echoed (README "What is logged"): every URL-bearing metadata key,
//! given values with a credential-shaped part, through every output channel.
//!
//! The values: valid ones the scaler uses as written (a `token` in a `vllmTargets` query
//! string, an `access_token` in `prometheusAddress`, an `X-Amz-Signature` in `queueURL`),
//! pointing at real components on 127.0.0.1 (fake engine pods and dcgm-exporter, a real
//! Prometheus, moto), at a closed loopback port, or at a listener that hangs up (so every
//! error path speaks too); targets the outbound allowlist refuses; and invalid values
//! (`user:password@`, a query where none is allowed). The channels: every gRPC status
//! message (GetMetricSpec, GetMetrics, IsActive), the server's JSON log (the binary run with
//! `--log-level trace`: every crate's events, the client libraries' request traces
//! included), `/explain`, `/metrics`, and `backlog-scaler check` on a YAML file holding the
//! same triggers.
//!
//! `S3CRET` (nor the credential profile's secret) must appear in none; and each channel must
//! still name each target it speaks of, redacted (so the test cannot pass by printing nothing).

mod common;
#[path = "brokers/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use backlog_scaler::fake::{FakeDcgmExporter, FakeVllmPod};
use backlog_scaler::guard::redact::redact;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use backlog_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use common::prometheus::PrometheusServer;
use common::{MODEL, Serve, set};
use tonic::Code;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");
const SECRET: &str = "S3CRET";
const REDACTED: &str = "[redacted]";
const NAMESPACE: &str = "inference";
const POD: &str = "llama-8b-0";
const QUEUE: &str = "redaction-jobs";
/// Lets the scaler connect to loopback only, so a 10.x target is refused at registration.
const CONFIG: &str = r#"
coldStartBudgetMillis: 1500
outbound:
  allow: ["127.0.0.0/8", "::1/128", "localhost"]
profiles:
  sqs-test:
    aws:
      accessKeyId: { value: test }
      secretAccessKey: { value: "sqs-secret-X7kq2" }
"#;
/// The profile's secret, which no channel may show either.
const PROFILE_SECRET: &str = "sqs-secret-X7kq2";

/// What the scaler does with a case's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Registered and read: GetMetrics answers a value.
    Reads,
    /// Registered; the source fails every poll: GetMetrics answers UNAVAILABLE.
    Fails,
    /// The outbound allowlist refuses a target: PERMISSION_DENIED.
    Refused,
    /// The metadata is invalid: INVALID_ARGUMENT.
    Invalid,
}

/// One trigger of the table.
#[derive(Debug, Clone)]
struct Case {
    /// The ScaledObject's name.
    name: String,
    /// The URL-bearing key under test.
    key: &'static str,
    metadata: Vec<(String, String)>,
    outcome: Outcome,
    /// Text every channel that speaks of this trigger must contain (a redacted target, or the
    /// key and the redacted value); it holds `[redacted]` unless the target shows no URL.
    marker: String,
}

/// What the components of the table listen on.
struct Places {
    pod: String,
    dcgm: String,
    prometheus: String,
    moto: String,
    closed: String,
    hangup: String,
}

/// A loopback listener that accepts each connection and closes it unanswered: the request
/// fails after connecting, so reqwest's error text (which holds the whole URL) is the detail.
fn hang_up_listener() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    addr.to_string()
}

/// A loopback address nothing listens on (connections are refused).
fn closed_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    addr.to_string()
}

fn case(
    name: &str,
    key: &'static str,
    outcome: Outcome,
    marker: impl Into<String>,
    pairs: &[(&str, &str)],
) -> Case {
    let mut metadata: Vec<(String, String)> = vec![
        ("targetBacklogPerReplica".into(), "10".into()),
        ("pollIntervalSeconds".into(), "1".into()),
    ];
    metadata.extend(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    Case {
        name: name.to_owned(),
        key,
        metadata,
        outcome,
        marker: marker.into(),
    }
}

/// An invalid value of `key`: the marker is the key and the value, redacted, as the
/// INVALID_ARGUMENT message quotes it.
fn invalid(name: &str, key: &'static str, value: &str, context: &[(&str, &str)]) -> Case {
    let shown = redact(value);
    assert!(
        shown.contains(REDACTED) && !shown.contains(SECRET),
        "{shown}"
    );
    let mut pairs = context.to_vec();
    pairs.push((key, value));
    case(
        name,
        key,
        Outcome::Invalid,
        format!("`{key}` has value `{shown}`"),
        &pairs,
    )
}

fn table(at: &Places) -> Vec<Case> {
    use Outcome::*;
    let Places {
        pod,
        dcgm,
        prometheus,
        moto,
        closed,
        hangup,
    } = at;
    let pod_url = format!("http://{pod}/metrics");
    let gpu = [
        ("namespace", NAMESPACE),
        ("podSelectorRegex", "llama-8b-.*"),
    ];
    let vllm_ok = [("vllmTargets", pod_url.as_str())];
    let sqs = [("awsRegion", "us-east-1"), ("authProfile", "sqs-test")];
    let moto_endpoint = format!("http://{moto}");
    let closed_endpoint = format!("http://{closed}");
    let label_sqs = format!("sqs us-east-1/{QUEUE}");

    let mut cases = vec![
        // vllmTargets: a token in the query string, scraped as written.
        case(
            "vllm-reads",
            "vllmTargets",
            Reads,
            format!("http://{pod}/metrics?token={REDACTED}"),
            &[(
                "vllmTargets",
                &format!("http://{pod}/metrics?token={SECRET}"),
            )],
        ),
        case(
            "vllm-fails",
            "vllmTargets",
            Fails,
            format!("http://{closed}/metrics?access_token={REDACTED}"),
            &[(
                "vllmTargets",
                &format!("http://{closed}/metrics?access_token={SECRET}"),
            )],
        ),
        // Connected, then hung up on: the detail is reqwest's text, URL and all.
        case(
            "vllm-hangup",
            "vllmTargets",
            Fails,
            format!("http://{hangup}/metrics?private_token={REDACTED}"),
            &[(
                "vllmTargets",
                &format!("http://{hangup}/metrics?private_token={SECRET}"),
            )],
        ),
        // A dns+ name: `localhost` resolves here; its port is closed.
        case(
            "vllm-dns-fails",
            "vllmTargets",
            Fails,
            format!(
                "dns+http://localhost:{}/metrics?sig={REDACTED}",
                port(closed)
            ),
            &[(
                "vllmTargets",
                &format!("dns+http://localhost:{}/metrics?sig={SECRET}", port(closed)),
            )],
        ),
        case(
            "vllm-refused",
            "vllmTargets",
            Refused,
            "`10.0.0.1`",
            &[(
                "vllmTargets",
                &format!("http://10.0.0.1:8000/metrics?token={SECRET}"),
            )],
        ),
        // dcgmTargets, beside an engine source that reads.
        case(
            "dcgm-reads",
            "dcgmTargets",
            Reads,
            format!("http://{dcgm}/metrics?token={REDACTED}"),
            &[
                vllm_ok[0],
                gpu[0],
                gpu[1],
                (
                    "dcgmTargets",
                    &format!("http://{dcgm}/metrics?token={SECRET}"),
                ),
            ],
        ),
        case(
            "dcgm-fails",
            "dcgmTargets",
            Fails,
            format!("http://{closed}/metrics?X-Amz-Signature={REDACTED}"),
            &[
                vllm_ok[0],
                gpu[0],
                gpu[1],
                (
                    "dcgmTargets",
                    &format!("http://{closed}/metrics?X-Amz-Signature={SECRET}"),
                ),
            ],
        ),
        case(
            "dcgm-refused",
            "dcgmTargets",
            Refused,
            "`10.0.0.2`",
            &[
                vllm_ok[0],
                gpu[0],
                gpu[1],
                (
                    "dcgmTargets",
                    &format!("http://10.0.0.2:9400/metrics?token={SECRET}"),
                ),
            ],
        ),
        // prometheusAddress and its alias serverAddress: an access token in the query.
        case(
            "prom-reads",
            "prometheusAddress",
            Reads,
            format!("http://{prometheus}/?access_token={REDACTED}"),
            &[
                ("modelName", MODEL),
                (
                    "prometheusAddress",
                    &format!("http://{prometheus}/?access_token={SECRET}"),
                ),
            ],
        ),
        case(
            "prom-fails",
            "serverAddress",
            Fails,
            format!("http://{closed}/?access_token={REDACTED}"),
            &[(
                "serverAddress",
                &format!("http://{closed}/?access_token={SECRET}"),
            )],
        ),
        case(
            "prom-hangup",
            "prometheusAddress",
            Fails,
            format!("http://{hangup}/?access_token={REDACTED}"),
            &[(
                "prometheusAddress",
                &format!("http://{hangup}/?access_token={SECRET}"),
            )],
        ),
        case(
            "prom-refused",
            "prometheusAddress",
            Refused,
            "`10.0.0.3`",
            &[(
                "prometheusAddress",
                &format!("http://10.0.0.3:9090/?access_token={SECRET}"),
            )],
        ),
        // queueURL: a pre-signed-looking URL; the SQS label names region and queue only. moto
        // (like SQS) looks the queue up by the whole URL and answers QueueDoesNotExist: a
        // real broker's error on the way out.
        case(
            "sqs-rejected",
            "queueURL",
            Fails,
            label_sqs.clone(),
            &[
                sqs[0],
                sqs[1],
                ("awsEndpoint", &moto_endpoint),
                (
                    "queueURL",
                    &format!(
                        "{moto_endpoint}/123456789012/{QUEUE}?X-Amz-Signature={SECRET}&X-Amz-Credential={SECRET}"
                    ),
                ),
            ],
        ),
        case(
            "sqs-fails",
            "queueURL",
            Fails,
            label_sqs,
            &[
                sqs[0],
                sqs[1],
                ("awsEndpoint", &closed_endpoint),
                (
                    "queueURL",
                    &format!("{closed_endpoint}/123456789012/{QUEUE}?X-Amz-Signature={SECRET}"),
                ),
            ],
        ),
        case(
            "sqs-refused",
            "queueURL",
            Refused,
            "`10.0.0.4`",
            &[
                sqs[0],
                (
                    "queueURL",
                    &format!("http://10.0.0.4/123456789012/{QUEUE}?X-Amz-Signature={SECRET}"),
                ),
            ],
        ),
    ];

    // Invalid values of every URL-bearing key.
    let target = |i: usize| format!("127.0.0.1:{}", 1 + i);
    let userinfo =
        |scheme: &str, i: usize| format!("{scheme}://admin:{SECRET}@{}/metrics", target(i));
    for (i, (key, context)) in [
        ("vllmTargets", vec![]),
        ("dcgmTargets", vec![vllm_ok[0], gpu[0], gpu[1]]),
        ("prometheusAddress", vec![]),
        ("serverAddress", vec![]),
    ]
    .into_iter()
    .enumerate()
    {
        for (j, value) in [
            userinfo("http", i),
            userinfo("ftp", i),
            format!("dns+http://admin:{SECRET}@localhost:{}/metrics", 1 + i),
            format!("ftp://{}/metrics?token={SECRET}", target(i)),
        ]
        .into_iter()
        .enumerate()
        {
            // Each key refuses each: credentials in the URL, or a scheme other than http(s).
            cases.push(invalid(
                &format!("invalid-{key}-{j}").to_lowercase(),
                key,
                &value,
                &context,
            ));
        }
    }
    let broker = [
        (
            "awsEndpoint",
            format!("http://AKIA:{SECRET}@127.0.0.1:5000"),
            vec![sqs[0], ("queueURL", QUEUE)],
        ),
        (
            "awsEndpoint",
            format!("http://127.0.0.1:5000/?X-Amz-Signature={SECRET}"),
            vec![sqs[0], ("queueURL", QUEUE)],
        ),
        (
            "queueURL",
            format!("http://AKIA:{SECRET}@127.0.0.1:5000/123456789012/{QUEUE}"),
            vec![sqs[0]],
        ),
        (
            "rabbitmqHost",
            format!("amqp://guest:{SECRET}@127.0.0.1:5672/"),
            vec![("queueName", "q")],
        ),
        (
            "rabbitmqHost",
            format!("http://127.0.0.1:15672/?password={SECRET}"),
            vec![("queueName", "q")],
        ),
        (
            "bootstrapServers",
            format!("127.0.0.1:9092,admin:{SECRET}@127.0.0.1:9093"),
            vec![("consumerGroup", "g")],
        ),
    ];
    for (j, (key, value, context)) in broker.iter().enumerate() {
        cases.push(invalid(
            &format!("invalid-{key}-{j}").to_lowercase(),
            key,
            value,
            context,
        ));
    }
    cases
}

fn port(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(_, p)| p)
}

fn object(case: &Case) -> ScaledObjectRef {
    ScaledObjectRef {
        name: case.name.clone(),
        namespace: NAMESPACE.to_owned(),
        scaler_metadata: case.metadata.iter().cloned().collect(),
    }
}

/// Every status message of GetMetricSpec, GetMetrics and IsActive for `case`, after asserting
/// each call answered as the outcome says. A case that reads is retried until GetMetrics
/// answers a value (Prometheus needs a scrape or two first).
async fn grpc_messages(client: &mut ExternalScalerClient<Channel>, case: &Case) -> Vec<String> {
    let object = object(case);
    let request = GetMetricsRequest {
        scaled_object_ref: Some(object.clone()),
        metric_name: String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spec = client.get_metric_spec(object.clone()).await.map(|_| ());
        let metrics = client.get_metrics(request.clone()).await.map(|_| ());
        let active = client.is_active(object.clone()).await.map(|_| ());
        let codes = [&spec, &metrics, &active].map(|r| r.as_ref().err().map(tonic::Status::code));
        let expected = match case.outcome {
            Outcome::Reads => [None, None, None],
            Outcome::Fails => [None, Some(Code::Unavailable), Some(Code::Unavailable)],
            Outcome::Refused => [Some(Code::PermissionDenied); 3],
            Outcome::Invalid => [Some(Code::InvalidArgument); 3],
        };
        let messages: Vec<String> = [spec, metrics, active]
            .into_iter()
            .filter_map(|r| r.err().map(|s| s.message().to_owned()))
            .collect();
        if codes == expected {
            return messages;
        }
        assert!(
            Instant::now() < deadline,
            "{}: expected {expected:?}, got {codes:?}: {messages:?}",
            case.name
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn get(url: &str) -> String {
    let response = reqwest::get(url).await.expect("admin reachable");
    assert!(response.status().is_success(), "{url}");
    response.text().await.expect("body")
}

fn run_check(metadata: &std::path::Path, config: &std::path::Path) -> Output {
    Command::new(BIN)
        .args(["--log-format", "json", "--log-level", "trace", "check"])
        .arg("--metadata")
        .arg(metadata)
        .arg("--config")
        .arg(config)
        .output()
        .expect("check runs")
}

/// The YAML of every case, one document each (`check` reads each as a trigger).
fn yaml(cases: &[Case]) -> String {
    let mut text = String::new();
    for case in cases {
        text.push_str("---\n");
        for (key, value) in &case.metadata {
            text.push_str(&format!(
                "{key}: {}\n",
                serde_json::Value::from(value.as_str())
            ));
        }
    }
    text
}

/// `text`, what `channel` said, names the case's target as its marker says.
fn assert_names(channel: &str, text: &str, case: &Case) {
    assert!(
        text.contains(&case.marker),
        "{channel} does not name {} (`{}`) of {} redacted as `{}`:\n{text}",
        case.key,
        case.outcome_text(),
        case.name,
        case.marker
    );
}

impl Case {
    fn outcome_text(&self) -> &'static str {
        match self.outcome {
            Outcome::Reads => "reads",
            Outcome::Fails => "fails",
            Outcome::Refused => "refused",
            Outcome::Invalid => "invalid",
        }
    }
}

fn assert_no_secret(channel: &str, text: &str) {
    for secret in [SECRET, PROFILE_SECRET] {
        assert_absent(channel, text, secret);
    }
}

fn assert_absent(channel: &str, text: &str, secret: &str) {
    if let Some(at) = text.find(secret) {
        let start = text[..at]
            .char_indices()
            .rev()
            .nth(300)
            .map_or(0, |(i, _)| i);
        let end = (at + 200).min(text.len());
        let end = (end..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        panic!("{channel} echoes the credential:\n…{}…", &text[start..end]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_url_bearing_key_echoes_a_credential_on_any_channel() {
    // The real components the valid values point at.
    let pod = FakeVllmPod::start().await.expect("pod starts");
    set(&pod, 12.0, 20.0);
    let dcgm = FakeDcgmExporter::start().await.expect("dcgm starts");
    dcgm.set_gpu(0, 40, Some((NAMESPACE, POD, "vllm")));
    let prometheus = PrometheusServer::start(&[pod.addr()], Duration::from_secs(1)).await;
    prometheus
        .wait_for_targets_up(1, Duration::from_secs(20))
        .await;
    let moto = tokio::task::spawn_blocking(fixtures::moto)
        .await
        .expect("moto");
    let moto_endpoint = moto.endpoint();
    aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url(&moto_endpoint)
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .build(),
    )
    .create_queue()
    .queue_name(QUEUE)
    .send()
    .await
    .expect("create_queue");
    let places = Places {
        pod: pod.addr().to_string(),
        dcgm: dcgm.addr().to_string(),
        prometheus: prometheus.addr().to_string(),
        moto: moto_endpoint.trim_start_matches("http://").to_owned(),
        closed: closed_address(),
        hangup: hang_up_listener(),
    };
    let cases = table(&places);
    let names: BTreeMap<&str, &Case> = cases.iter().map(|c| (c.name.as_str(), c)).collect();
    assert_eq!(names.len(), cases.len(), "case names are unique");

    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("scaler.yaml");
    std::fs::write(&config, CONFIG).expect("config");
    let server = Serve::start_with("trace", &[OsStr::new("--config"), config.as_os_str()]);
    let channel = Channel::from_shared(format!("http://{}", server.grpc))
        .expect("uri")
        .connect()
        .await
        .expect("connects");
    let mut client = ExternalScalerClient::new(channel);

    // gRPC: every call's status message, per case.
    let mut grpc = BTreeMap::new();
    for case in &cases {
        grpc.insert(case.name.clone(), grpc_messages(&mut client, case).await);
    }
    // A few more polls, so each failing source has logged its failure.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let explain = get(&format!("http://{}/explain", server.http)).await;
    let metrics = get(&format!("http://{}/metrics", server.http)).await;

    // `check` on the same triggers, with the same config.
    let file = dir.path().join("triggers.yaml");
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(yaml(&cases).as_bytes()))
        .expect("write");
    let (file_arg, config_arg) = (file.clone(), config.clone());
    let check = tokio::task::spawn_blocking(move || run_check(&file_arg, &config_arg))
        .await
        .expect("join");
    let check = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let log = server.log();
    drop(server);

    // Not one channel repeats the credential.
    for (name, messages) in &grpc {
        for message in messages {
            assert_no_secret(&format!("gRPC ({name})"), message);
        }
    }
    assert_no_secret("the server log", &log);
    assert_no_secret("/explain", &explain);
    assert_no_secret("/metrics", &metrics);
    assert_no_secret("check", &check);

    // …and each still names what it speaks of, redacted.
    let explain_json: serde_json::Value = serde_json::from_str(&explain).expect("JSON");
    let explained: BTreeMap<String, String> = explain_json["triggers"]
        .as_array()
        .expect("triggers")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_owned(),
                t.to_string(),
            )
        })
        .collect();
    for case in &cases {
        let messages = grpc[&case.name].join("\n");
        match case.outcome {
            Outcome::Reads => assert!(messages.is_empty(), "{}: {messages}", case.name),
            _ => assert_names("gRPC", &messages, case),
        }
        match case.outcome {
            Outcome::Reads | Outcome::Fails => {
                let explained = explained
                    .get(&case.name)
                    .unwrap_or_else(|| panic!("{} not in /explain: {explain}", case.name));
                assert_names("/explain", explained, case);
                let series: String = metrics
                    .lines()
                    .filter(|l| l.starts_with("backlog_scaler_polls_total{"))
                    .collect::<Vec<_>>()
                    .join("\n");
                assert_names("/metrics", &series, case);
                let started: String = log
                    .lines()
                    .filter(|l| l.contains("poller started"))
                    .collect::<Vec<_>>()
                    .join("\n");
                assert_names("the server log", &started, case);
            }
            Outcome::Refused => {
                assert!(!explained.contains_key(&case.name), "{}", case.name);
                let refused: String = log
                    .lines()
                    .filter(|l| l.contains("refused outbound target"))
                    .collect::<Vec<_>>()
                    .join("\n");
                assert_names("the server log", &refused, case);
            }
            Outcome::Invalid => {
                assert!(!explained.contains_key(&case.name), "{}", case.name);
                let rejected: String = log
                    .lines()
                    .filter(|l| l.contains("rejected request"))
                    .collect::<Vec<_>>()
                    .join("\n");
                assert_names("the server log", &rejected, case);
            }
        }
        assert_names("check", &check, case);
    }
    // A failing source's error, not only its label, reaches the log and /explain, and
    // names the target redacted (a reqwest error's text holds the URL).
    let failures: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.contains("source read failed"))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for case in cases.iter().filter(|c| c.outcome == Outcome::Fails) {
        // The part of the marker an error's target keeps (a dns+ name is scraped by address).
        let needle = case
            .marker
            .split_once('?')
            .map_or(case.marker.as_str(), |(_, q)| q);
        let logged = failures.iter().any(|f| {
            f["source"]
                .as_str()
                .is_some_and(|s| s.contains(&case.marker))
                && f["error"].as_str().is_some_and(|e| e.contains(needle))
        });
        assert!(
            logged,
            "no `source read failed` error naming {needle} for {}:\n{log}",
            case.name
        );
        let errors: Vec<&str> = explain_json["triggers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["name"] == case.name.as_str())
            .flat_map(|t| t["sources"].as_array().into_iter().flatten())
            .filter_map(|s| s["lastError"].as_str())
            .collect();
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "/explain has no lastError naming {needle} for {}: {errors:?}",
            case.name
        );
    }
    // The hang-up cases fail after connecting: reqwest's "error sending request for url (…)".
    assert!(
        failures.iter().any(|f| f["error"]
            .as_str()
            .is_some_and(|e| e.contains("for url (") && e.contains("private_token=[redacted]"))),
        "no reqwest error text with its URL among the failures:\n{log}"
    );
    drop((pod, dcgm, prometheus));
}

#[test]
fn the_table_covers_every_url_bearing_key_and_outcome() {
    let places = Places {
        pod: "127.0.0.1:1".into(),
        dcgm: "127.0.0.1:2".into(),
        prometheus: "127.0.0.1:3".into(),
        moto: "127.0.0.1:4".into(),
        closed: "127.0.0.1:5".into(),
        hangup: "127.0.0.1:6".into(),
    };
    let cases = table(&places);
    for key in [
        "vllmTargets",
        "dcgmTargets",
        "prometheusAddress",
        "serverAddress",
        "awsEndpoint",
        "queueURL",
        "rabbitmqHost",
        "bootstrapServers",
    ] {
        let outcomes: Vec<Outcome> = cases
            .iter()
            .filter(|c| c.key == key)
            .map(|c| c.outcome)
            .collect();
        assert!(outcomes.contains(&Outcome::Invalid), "{key}");
        for case in cases.iter().filter(|c| c.key == key) {
            let value = case
                .metadata
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default();
            assert!(value.contains(SECRET), "{}: {value}", case.name);
        }
    }
    // Keys that accept a credential-shaped part in a valid value are used with one: read
    // (where the upstream accepts it), failed and refused.
    for (key, outcomes) in [
        (
            "vllmTargets",
            &[Outcome::Reads, Outcome::Fails, Outcome::Refused][..],
        ),
        (
            "dcgmTargets",
            &[Outcome::Reads, Outcome::Fails, Outcome::Refused],
        ),
        (
            "prometheusAddress",
            &[Outcome::Reads, Outcome::Fails, Outcome::Refused],
        ),
        ("serverAddress", &[Outcome::Fails]),
        ("queueURL", &[Outcome::Fails, Outcome::Refused]),
    ] {
        for outcome in outcomes {
            assert!(
                cases.iter().any(|c| c.key == key && c.outcome == *outcome),
                "{key} {outcome:?}"
            );
        }
    }
}
