//! `backlog-scaler check --from-keda`: the real binary on the example
//! ScaledObjects (k8s/examples/from-keda/), the printed trigger read back
//! and handed to `check --no-probe` with the printed profile as `--config`,
//! to a started server over gRPC, and (for the seed article's three
//! prometheus triggers) through a real Prometheus scraping fake vLLM pods,
//! where GetMetrics must answer the fused formula. Bad inputs exit 2 naming
//! the file, line and field.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use backlog_scaler::guard::config::ScalerConfig;
use common::prometheus::PrometheusServer;
use common::*;
use serde_yaml_ng::Value;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("k8s/examples/from-keda")
        .join(name)
}

/// Run `check --from-keda FILE [extra…]`: exit code, stdout, stderr.
fn from_keda(file: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("check")
        .arg("--from-keda")
        .arg(file)
        .args(extra)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn from_keda_text(text: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("so.yaml");
    std::fs::write(&file, text).expect("write");
    from_keda(&file, &[])
}

/// Every document of the output: its `triggers` list.
fn printed_triggers(stdout: &str) -> Vec<Vec<Value>> {
    stdout
        .split("\n---\n")
        .map(|doc| {
            let v: Value = serde_yaml_ng::from_str(doc).unwrap_or_else(|e| panic!("{e}\n{doc}"));
            v.get("triggers")
                .and_then(Value::as_sequence)
                .cloned()
                .unwrap_or_else(|| panic!("no triggers:\n{doc}"))
        })
        .collect()
}

/// The fused trigger's metadata, in order.
fn metadata(trigger: &Value) -> Vec<(String, String)> {
    trigger
        .get("metadata")
        .and_then(Value::as_mapping)
        .expect("metadata")
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().expect("key").to_owned(),
                v.as_str().expect("string value").to_owned(),
            )
        })
        .collect()
}

fn value<'a>(md: &'a [(String, String)], key: &str) -> Option<&'a str> {
    md.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The `profiles:` skeleton printed after `# Credentials:`, made a config:
/// comment markers off, each `{file: …}` a test value (the Secret is not
/// mounted here), Kafka's mechanism chosen.
fn profile_config(stdout: &str) -> String {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in stdout.lines() {
        if line.starts_with("# Credentials:") {
            inside = true;
            continue;
        }
        if inside {
            match line.strip_prefix("#   ") {
                Some(l) => lines.push(l.split("   # ").next().unwrap_or(l).to_owned()),
                None => break,
            }
        }
    }
    let text = lines.join("\n");
    let files = regex::Regex::new(r"\{file: [^}]*\}").expect("regex");
    files
        .replace_all(&text, "{value: test-secret}")
        .replace("PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512", "SCRAM-SHA-512")
}

/// `check --no-probe --metadata` on a ScaledObject around `triggers`, with
/// `config` as `--config`.
fn check_no_probe(triggers: &[Value], namespace: &str, config: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("dir");
    let so = serde_yaml_ng::to_string(&serde_yaml_ng::from_str::<Value>(&format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {{name: x, namespace: {namespace}}}\nspec: {{scaleTargetRef: {{name: x}}, triggers: {}}}\n",
        serde_json::to_string(triggers).expect("json")
    ))
    .expect("so"))
    .expect("yaml");
    std::fs::write(dir.path().join("so.yaml"), so).expect("write");
    std::fs::write(dir.path().join("config.yaml"), config).expect("write");
    let out = Command::new(BIN)
        .args(["check", "--no-probe", "--metadata"])
        .arg(dir.path().join("so.yaml"))
        .arg("--config")
        .arg(dir.path().join("config.yaml"))
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Run one example; its fused trigger's metadata, the whole output, and the
/// output's triggers.
fn migrate_example(name: &str) -> (Vec<(String, String)>, String, Vec<Value>) {
    let (code, stdout, stderr) = from_keda(&example(name), &[]);
    assert_eq!(code, 0, "{name}: {stderr}\n{stdout}");
    assert!(
        stdout.contains("# Checked: the server's metadata parser accepts it"),
        "{stdout}"
    );
    let triggers = printed_triggers(&stdout).remove(0);
    let md = metadata(&triggers[0]);
    (md, stdout, triggers)
}

fn expect(md: &[(String, String)], pairs: &[(&str, &str)]) {
    for (k, v) in pairs {
        assert_eq!(value(md, k), Some(*v), "{k} in {md:?}");
    }
}

#[test]
fn seed_article_three_prometheus_triggers_fuse_into_one() {
    let (md, stdout, triggers) = migrate_example("seed-three-prometheus.yaml");
    assert_eq!(triggers.len(), 1, "nothing kept");
    assert_eq!(
        triggers[0].get("type").and_then(Value::as_str),
        Some("external")
    );
    expect(
        &md,
        &[
            (
                "prometheusAddress",
                "http://prometheus-operated.monitoring.svc:9090",
            ),
            ("modelName", "meta-llama/Llama-3.1-8B-Instruct"),
            ("namespace", "inference"),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("ttftSloSeconds", "2"),
            ("ttftQuantile", "0.95"),
            ("ttftWindowSeconds", "60"),
            ("activationBacklog", "0"),
        ],
    );
    assert!(
        value(&md, "waitingQuery").is_none(),
        "the defaults read the same gauges"
    );
    // Every key printed is explained on its own line.
    for (key, _) in &md {
        assert!(
            stdout.contains(&format!("#   {key}: ")),
            "{key} unexplained:\n{stdout}"
        );
    }
    assert!(stdout.contains("ignoreNullValues"), "{stdout}");
    assert!(stdout.contains("metric `backlog-meta-llama-llama-3-1-8b-instruct`"));
    let (code, out) = check_no_probe(&triggers, "inference", "");
    assert_eq!(code, 0, "{out}");
}

/// A TTFT window outside ttftWindowSeconds' range is carried as the nearest
/// allowed one, not as the old query in `ttftQuery`: that key is a summed
/// query and would make the trigger `backlog` while the note says `capacity`.
#[test]
fn a_ttft_window_out_of_range_keeps_the_default_policy() {
    let (code, stdout, stderr) = from_keda_text(
        "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: x, namespace: ns}
spec:
  scaleTargetRef: {name: x}
  minReplicaCount: 1
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prom:9090
        query: sum(vllm:num_requests_waiting)
        threshold: \"10\"
    - type: prometheus
      metricType: Value
      metadata:
        serverAddress: http://prom:9090
        query: histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[2h])))
        threshold: \"2\"
",
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let triggers = printed_triggers(&stdout).remove(0);
    let md = metadata(&triggers[0]);
    assert_eq!(value(&md, "ttftWindowSeconds"), Some("900"), "{stdout}");
    assert_eq!(value(&md, "ttftQuery"), None, "{stdout}");
    assert!(stdout.contains("the default `capacity`"), "{stdout}");
    assert!(stdout.contains("7200 s rate window"), "{stdout}");
    let (code, out) = check_no_probe(&triggers, "ns", "");
    assert_eq!(code, 0, "{out}");
}

#[test]
fn production_stack_default_trigger_keeps_its_model_label() {
    let (md, stdout, _) = migrate_example("production-stack.yaml");
    expect(&md, &[("targetBacklogPerReplica", "5")]);
    // `model` is production-stack's label, not vLLM's `model_name`: the
    // queries are written out with it, `n` counted with it too.
    let waiting = value(&md, "waitingQuery").expect("waitingQuery");
    assert!(
        waiting.contains(r#"vllm:num_requests_waiting{model="llama3"}"#),
        "{waiting}"
    );
    assert!(
        waiting.starts_with("sum("),
        "several pods' series are summed: {waiting}"
    );
    let replicas = value(&md, "replicasQuery").expect("replicasQuery");
    assert!(replicas.starts_with("count(") && replicas.contains(r#"model="llama3""#));
    assert!(value(&md, "modelName").is_none());
    assert!(
        stdout.contains("`metricName: vllm:num_requests_waiting` (deprecated in KEDA) is dropped")
    );
}

#[test]
fn sqs_queue_and_cpu_keep_cpu_and_move_the_keys_to_a_profile() {
    let (md, stdout, triggers) = migrate_example("sqs-cpu.yaml");
    assert_eq!(
        triggers[0].get("type").and_then(Value::as_str),
        Some("external-push")
    );
    expect(
        &md,
        &[
            (
                "queueURL",
                "https://sqs.eu-west-1.amazonaws.com/123456789012/summarize-jobs",
            ),
            ("awsRegion", "eu-west-1"),
            ("scaleOnInFlight", "true"),
            ("targetBacklogPerReplica", "5"),
            ("activationBacklog", "1"),
            ("authProfile", "sqs-keys"),
        ],
    );
    assert!(
        value(&md, "queueLength").is_none(),
        "refused here, converted into T"
    );
    assert_eq!(triggers.len(), 2);
    assert_eq!(triggers[1].get("type").and_then(Value::as_str), Some("cpu"));
    assert!(
        stdout.contains(
            "spec.triggers[1] (cpu): a resource metric the HPA reads from metrics-server"
        )
    );
    assert!(stdout.contains("`identityOwner` is KEDA's identity for AWS"));
    let config = profile_config(&stdout);
    assert!(
        config.contains("accessKeyId: {value: test-secret}"),
        "{config}"
    );
    let (code, out) = check_no_probe(&triggers, "batch", &config);
    assert_eq!(code, 0, "{config}\n{out}");
    // The profile admits the ScaledObject's namespace only.
    let (code, out) = check_no_probe(&triggers, "other", &config);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("PERMISSION_DENIED"), "{out}");
}

#[test]
fn kafka_keeps_keda_names_and_converts_the_lag_target() {
    let (md, stdout, triggers) = migrate_example("kafka.yaml");
    expect(
        &md,
        &[
            (
                "bootstrapServers",
                "kafka-0.kafka.messaging.svc:9093,kafka-1.kafka.messaging.svc:9093",
            ),
            ("consumerGroup", "embedder"),
            ("topic", "embed-requests"),
            ("offsetResetPolicy", "earliest"),
            ("allowIdleConsumers", "false"),
            ("targetBacklogPerReplica", "50"),
            ("activationBacklog", "5"),
            ("authProfile", "kafka-scram"),
        ],
    );
    assert!(value(&md, "lagThreshold").is_none() && value(&md, "version").is_none());
    assert!(stdout.contains("`version` is not needed"));
    let config = profile_config(&stdout);
    assert!(config.contains("mechanism: SCRAM-SHA-512"), "{config}");
    let (code, out) = check_no_probe(&triggers, "batch", &config);
    assert_eq!(code, 0, "{config}\n{out}");
}

#[test]
fn rabbitmq_with_vllm_queue_weights_messages_into_requests() {
    let (md, stdout, triggers) = migrate_example("rabbitmq.yaml");
    // T from vLLM's waiting trigger (8); the queue's 20 messages per
    // replica become w = 8/20, so w·Q/T = Q/20 replicas as before.
    expect(
        &md,
        &[
            (
                "rabbitmqHost",
                "amqp://rabbitmq.messaging.svc.cluster.local:5672/chat",
            ),
            ("queueName", "completions"),
            ("protocol", "amqp"),
            ("modelName", "Qwen/Qwen2.5-7B-Instruct"),
            ("targetBacklogPerReplica", "8"),
            ("messageWeight", "0.4"),
            ("activationBacklog", "0.8"),
            ("authProfile", "rabbit-creds"),
        ],
    );
    assert!(value(&md, "value").is_none() && value(&md, "mode").is_none());
    assert!(stdout.contains("spec.fallback: kept"));
    let config = profile_config(&stdout);
    let (code, out) = check_no_probe(&triggers, "chat", &config);
    assert_eq!(code, 0, "{config}\n{out}");
}

#[test]
fn mixed_object_says_what_it_cannot_carry_over() {
    let (md, stdout, triggers) = migrate_example("mixed.yaml");
    expect(
        &md,
        &[("targetBacklogPerReplica", "6"), ("kvCacheTarget", "0.85")],
    );
    assert!(
        value(&md, "waitingQuery")
            .expect("w")
            .contains(r#"job="mistral-7b""#)
    );
    assert!(
        value(&md, "namespace").is_none(),
        "KEDA's tenant `namespace` is not a label filter"
    );
    let kept: Vec<&str> = triggers[1..]
        .iter()
        .filter_map(|t| t.get("type").and_then(Value::as_str))
        .collect();
    assert_eq!(kept, ["prometheus", "rabbitmq", "cron", "memory"]);
    for line in [
        "spec.triggers[2] (prometheus): query `sum(rate(vllm:num_incoming_requests_total",
        "spec.triggers[3] (rabbitmq): `mode: MessageRate` scales on a rate",
        "spec.triggers[4] (cron): type `cron` is not a signal this scaler reads",
        "spec.triggers[0] (prometheus): `namespace: serving` is the tenant",
        "spec.advanced.scalingModifiers: its formula names the old triggers",
        "set `replicasQuery: kube_deployment_status_replicas_available{namespace=\"serving\",deployment=\"mistral-7b\"}`",
        "(spec.triggers[0] (prometheus) set it to `false`)",
    ] {
        assert!(stdout.contains(line), "missing {line:?}:\n{stdout}");
    }
    let config = profile_config(&stdout);
    assert!(config.contains("X-Scope-OrgID"), "{config}");
    let (code, out) = check_no_probe(&triggers, "serving", &config);
    assert_eq!(code, 0, "{config}\n{out}");
}

#[test]
fn credentials_are_never_printed() {
    let (code, stdout, stderr) = from_keda_text(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: leaky, namespace: q}
spec:
  scaleTargetRef: {name: leaky}
  triggers:
    - type: rabbitmq
      metadata:
        host: amqp://worker:s3cretpass@127.0.0.1:1/jobs
        queueName: jobs
        mode: QueueLength
        value: "10"
    - type: prometheus
      metadata:
        serverAddress: http://127.0.0.1:1/?token=t0psecret
        query: sum(vllm:num_requests_running)
        threshold: "16"
        customHeaders: Authorization=Bearer h3adersecret
"#,
    );
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    for secret in ["s3cretpass", "t0psecret", "h3adersecret"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret}:\n{stdout}"
        );
    }
    let md = metadata(&printed_triggers(&stdout)[0][0]);
    assert_eq!(value(&md, "rabbitmqHost"), Some("amqp://127.0.0.1:1/jobs"));
    assert_eq!(value(&md, "authProfile"), Some("leaky"));
    assert!(
        stdout.contains("the credentials in it were left out"),
        "{stdout}"
    );
    // The token in the kept serverAddress is shown `[redacted]`: the output says to put it back.
    assert!(
        stdout.contains("# Note: [redacted] stands for a credential of the input"),
        "{stdout}"
    );
}

#[test]
fn bad_inputs_exit_2_naming_file_line_and_field() {
    type Case<'a> = (&'a str, &'a [&'a str]);
    let cases: &[Case] = &[
        (
            "kind: ScaledObject\nspec:\n  triggers: [1, 2\n",
            &["so.yaml:4", "not YAML"],
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
            &["no ScaledObject", "line 1: kind Deployment"],
        ),
        (
            "apiVersion: v1\nkind: Service\n---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: s}\nspec:\n  triggers: []\n",
            &[
                "so.yaml:4",
                "ScaledObject `s`",
                "`spec.triggers`",
                "is empty",
            ],
        ),
        (
            "kind: ScaledObject\nmetadata: {name: s}\nspec: {scaleTargetRef: {name: s}}\n",
            &["so.yaml:1", "`spec.triggers` is missing"],
        ),
        (
            "kind: ScaledObject\nmetadata: {name: s}\nspec:\n  triggers:\n    - type: cpu\n      metadata: {value: \"50\"}\n    - type: prometheus\n      metadata: {serverAddress: \"http://p:9090\", query: \"sum(http_requests_total)\", threshold: \"5\"}\n",
            &[
                "nothing to carry over",
                "spec.triggers[0] (cpu)",
                "spec.triggers[1] (prometheus): query `sum(http_requests_total)` reads `http_requests_total`, not a signal this scaler fuses",
            ],
        ),
        (
            "kind: ScaledObject\nmetadata: {name: s}\nspec:\n  triggers:\n    - type: kafka\n      metadata: {bootstrapServers: [a, b]}\n",
            &[
                "so.yaml:5",
                "`spec.triggers[0].metadata`",
                "bootstrapServers",
            ],
        ),
    ];
    for (text, wanted) in cases {
        let (code, stdout, stderr) = from_keda_text(text);
        assert_eq!(code, 2, "{text}\n{stdout}{stderr}");
        for w in *wanted {
            assert!(stderr.contains(w), "{w:?} not in {stderr:?}");
        }
    }
    let (code, _, stderr) = from_keda(Path::new("/nonexistent/so.yaml"), &[]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read /nonexistent/so.yaml"),
        "{stderr}"
    );
}

/// Broker triggers on loopback (nothing listens: only GetMetricSpec, which
/// never depends on the sources), one ScaledObject per broker in one file:
/// each printed trigger is registered by a started server.
#[tokio::test]
async fn every_broker_trigger_is_registered_by_the_server() {
    let text = r#"
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {name: aws-keys, namespace: q}
spec:
  secretTargetRef:
    - {parameter: awsAccessKeyID, name: aws, key: id}
    - {parameter: awsSecretAccessKey, name: aws, key: secret}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: sqs-jobs, namespace: q}
spec:
  scaleTargetRef: {name: sqs-jobs}
  triggers:
    - type: aws-sqs-queue
      authenticationRef: {name: aws-keys}
      metadata: {queueURL: "http://127.0.0.1:1/000000000000/jobs", awsRegion: eu-west-1, awsEndpoint: "http://127.0.0.1:1", queueLength: "4"}
    - type: prometheus
      metadata:
        serverAddress: http://127.0.0.1:1
        query: sum(vllm:num_requests_waiting{model_name="m"})
        threshold: "12"
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: kafka-jobs, namespace: q}
spec:
  scaleTargetRef: {name: kafka-jobs}
  triggers:
    - type: kafka
      metadata: {bootstrapServers: "127.0.0.1:1", consumerGroup: g, topic: t, lagThreshold: "7"}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: rabbit-jobs, namespace: q}
spec:
  scaleTargetRef: {name: rabbit-jobs}
  triggers:
    - type: rabbitmq
      metadata: {host: "amqp://u:p@127.0.0.1:1/", queueName: jobs, mode: QueueLength, value: "3"}
"#;
    let (code, stdout, stderr) = from_keda_text(text);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let docs = printed_triggers(&stdout);
    assert_eq!(docs.len(), 3, "one document per ScaledObject");
    // The server's --config is the printed profile skeletons, filled in.
    let profiles: String = stdout
        .split("\n---\n")
        .map(profile_config)
        .filter(|c| !c.is_empty())
        .map(|c| c.trim_start_matches("profiles:\n").to_owned() + "\n")
        .collect();
    assert!(
        profiles.contains("aws-keys:") && profiles.contains("rabbit-jobs:"),
        "{profiles}"
    );
    let config = ScalerConfig::parse(&format!("profiles:\n{profiles}"))
        .unwrap_or_else(|e| panic!("{e}\n{profiles}"));
    let server = start_server(config).await;
    let mut client = client(&server).await;
    // (targetSizeFloat, a key the trigger must carry)
    let expected = [
        (12.0, ("messageWeight", "3")),
        (7.0, ("topic", "t")),
        (3.0, ("queueName", "jobs")),
    ];
    for (triggers, (target, (key, want))) in docs.iter().zip(expected) {
        let md = metadata(&triggers[0]);
        assert_eq!(value(&md, key), Some(want), "{md:?}");
        let pairs: Vec<(&str, &str)> = md.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut object = object("jobs", &pairs);
        object.namespace = "q".to_owned();
        let spec = client
            .get_metric_spec(object)
            .await
            .unwrap_or_else(|e| panic!("{md:?}: {e}"))
            .into_inner();
        assert_eq!(spec.metric_specs.len(), 1);
        assert_eq!(spec.metric_specs[0].target_size_float, target, "{md:?}");
    }
    server.shutdown().await;
}

/// The seed article's ScaledObject pointed at a real Prometheus scraping
/// fake vLLM pods: the fused trigger, registered by the server, answers
/// B = W + T·R/C (the old triggers' HPA would have taken the max instead).
#[tokio::test]
async fn seed_trigger_through_real_prometheus_answers_the_fused_value() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let addrs: Vec<_> = pods.iter().map(|p| p.addr()).collect();
    let prometheus = PrometheusServer::start(&addrs, Duration::from_secs(1)).await;
    prometheus
        .wait_for_value(
            "sum(vllm:num_requests_running)",
            Duration::from_secs(20),
            |v| v == 94.0,
        )
        .await;
    let so = std::fs::read_to_string(example("seed-three-prometheus.yaml"))
        .expect("example")
        .replace(
            "http://prometheus-operated.monitoring.svc:9090",
            &prometheus.url(),
        )
        .replace(r#"namespace="inference""#, r#"namespace="default""#);
    let (code, stdout, stderr) = from_keda_text(&so);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let md = metadata(&printed_triggers(&stdout)[0][0]);
    assert_eq!(value(&md, "namespace"), Some("default"));
    let pairs: Vec<(&str, &str)> = md.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let object = object("llama-8b", &pairs);
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let spec = client
        .get_metric_spec(object.clone())
        .await
        .expect("spec")
        .into_inner();
    let metric = spec.metric_specs[0].clone();
    assert_eq!(
        metric.metric_name,
        "backlog-meta-llama-llama-3-1-8b-instruct"
    );
    assert_eq!(metric.target_size_float, 10.0);
    // W = 45, R = 94, T = 10, C = 32: B = 45 + 10·94/32 = 74.375.
    let fused = eventually(Duration::from_secs(20), || {
        let mut client = client.clone();
        let request = metrics_request(&object, &metric.metric_name);
        async move {
            let v = client.get_metrics(request).await.ok()?.into_inner();
            let value = v.metric_values.first()?.metric_value_float;
            (value == 74.375).then_some(value)
        }
    })
    .await;
    assert_eq!(fused, Some(74.375), "the fused value never came");
    server.shutdown().await;
}
