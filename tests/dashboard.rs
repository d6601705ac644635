//! The Grafana dashboard, `dashboards/backlog-scaler.json`, proven on real data:
//! the real scaler binary (`serve` on free loopback ports) polls fake vLLM
//! pods, triggers are registered and asked over gRPC as KEDA would, a real
//! Prometheus (Debian's, 1 s scrape, `honor_labels` as the chart's monitors
//! set it) scrapes the scaler's admin `/metrics`, and every panel's every
//! query, with the dashboard's variables resolved through their own
//! `label_values` queries, must return data through `/api/v1/query`.
//!
//! `chat` runs the `capacity` policy with a prior `μ` (`drainRatePerReplica`)
//! and a load step, so `μ`, `λ̂` and `λ_peak` have values; `noisy` runs
//! `backlog`, which has no capacity series.
//!
//! Targets on kube-state-metrics series (`kube_…`) cannot have data here; they
//! are allowed only in panels whose description says "Needs
//! kube-state-metrics", and are listed and skipped.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use backlog_scaler::proto::ScaledObjectRef;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::prometheus::{PromSample, PrometheusServer};
use common::{MODEL, Serve, metrics_request, object, pods, targets};
use serde_json::Value;
use tonic::transport::Channel;

const DASHBOARD: &str = include_str!("../dashboards/backlog-scaler.json");
const KSM_MARK: &str = "Needs kube-state-metrics";

/// A dashboard target: the panel's title and description, and its query.
struct Target {
    panel: String,
    description: String,
    expr: String,
}

fn dashboard() -> Value {
    serde_json::from_str(DASHBOARD).expect("the dashboard is JSON")
}

fn panel_targets(dashboard: &Value) -> Vec<Target> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        for target in panel["targets"].as_array().expect("targets") {
            out.push(Target {
                panel: panel["title"].as_str().expect("title").to_owned(),
                description: panel["description"].as_str().unwrap_or_default().to_owned(),
                expr: target["expr"].as_str().expect("expr").to_owned(),
            });
        }
    }
    out
}

/// `label_values(EXPR, LABEL)` → (EXPR, LABEL).
fn label_values(query: &str) -> (String, String) {
    let inner = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not a label_values query: {query}"));
    let (expr, label) = inner.rsplit_once(',').expect("label_values(expr, label)");
    (expr.trim().to_owned(), label.trim().to_owned())
}

/// Replace `$name` and `${name}` by their values.
fn substitute(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    // Longest names first, so `$trigger` never eats part of a longer name.
    let mut names: Vec<&String> = values.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        out = out
            .replace(&format!("${{{name}}}"), &values[name])
            .replace(&format!("${name}"), &values[name]);
    }
    out
}

/// Grafana's value for a multi-value variable under `=~`: `(a|b)`, each
/// escaped as a regex inside a PromQL string.
fn multi_value(values: &BTreeSet<String>) -> String {
    let escaped: Vec<String> = values
        .iter()
        .map(|v| {
            v.chars()
                .flat_map(|c| {
                    if r"\.+*?()|[]{}^$".contains(c) {
                        vec!['\\', '\\', c]
                    } else {
                        vec![c]
                    }
                })
                .collect()
        })
        .collect();
    format!("({})", escaped.join("|"))
}

#[test]
fn the_dashboard_is_a_grafana_model_on_a_datasource_variable() {
    let d = dashboard();
    assert_eq!(d["uid"], "backlog-scaler");
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let vars = d["templating"]["list"].as_array().expect("templating");
    let by_name: BTreeMap<&str, &Value> = vars
        .iter()
        .map(|v| (v["name"].as_str().expect("name"), v))
        .collect();
    assert_eq!(by_name["datasource"]["type"], "datasource");
    assert_eq!(by_name["datasource"]["query"], "prometheus");
    for name in ["namespace", "scaledobject", "trigger"] {
        assert_eq!(by_name[name]["type"], "query", "{name}");
        assert_eq!(
            by_name[name]["datasource"]["uid"], "${datasource}",
            "{name}"
        );
    }
    let mut ids = BTreeSet::new();
    for panel in d["panels"].as_array().expect("panels") {
        assert!(
            ids.insert(panel["id"].as_u64().expect("id")),
            "duplicate id"
        );
        for key in ["h", "w", "x", "y"] {
            assert!(panel["gridPos"][key].is_u64(), "{panel}");
        }
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", panel["title"]);
        let mut refs = BTreeSet::new();
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}");
            assert!(refs.insert(target["refId"].as_str().expect("refId")));
        }
    }
    // A trigger's series are selected by all three variables.
    for t in panel_targets(&d) {
        if t.expr.contains("backlog_scaler_backlog{") || t.expr.contains("_desired_replicas{") {
            for var in ["$namespace", "$scaledobject", "$trigger"] {
                assert!(t.expr.contains(var), "{}: {}", t.panel, t.expr);
            }
        }
    }
}

/// One round of what KEDA does for each trigger: spec, metrics, active.
async fn ask(client: &mut ExternalScalerClient<Channel>, objects: &[ScaledObjectRef]) {
    for object in objects {
        // Answers may be errors (UNAVAILABLE, INVALID_ARGUMENT): they are
        // what the error panels count.
        let _ = client.get_metric_spec(object.clone()).await;
        let _ = client.get_metrics(metrics_request(object, "")).await;
        let _ = client.is_active(object.clone()).await;
    }
}

async fn run(prometheus: &PrometheusServer, expr: &str) -> Result<Vec<PromSample>, String> {
    let answer = prometheus.query(expr).await;
    if answer["status"] != "success" {
        return Err(format!("PromQL error: {answer}"));
    }
    let result = &answer["data"]["result"];
    match answer["data"]["resultType"].as_str() {
        Some("vector") if result.as_array().is_some_and(|r| !r.is_empty()) => {
            Ok(prometheus.query_vector(expr).await)
        }
        Some("scalar") => Ok(prometheus.query_vector(expr).await),
        _ => Err(format!("no data: {answer}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_query_returns_data_from_a_real_prometheus() {
    let d = dashboard();
    // Three pods for `chat`; the third fails once it has been read, so the
    // trigger holds its last reading (degraded, a degraded pod, upstream
    // errors) while two of three still report.
    let chat_pods = pods(&[(12.0, 30.0), (8.0, 28.0), (20.0, 32.0)]).await;
    // One pod whose exposition carries a line no parser accepts.
    let noisy = pods(&[(3.0, 5.0)]).await;
    // (A wanted family, so the parser reads the line rather than skipping it.)
    noisy[0].set_body_override(Some(format!(
        "{}vllm:num_requests_waiting{{model_name=\"unterminated 1\n",
        noisy[0].render()
    )));
    // A pod that is never there: its trigger answers UNAVAILABLE.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };

    let scaler = Serve::start();
    let prometheus = PrometheusServer::start_with_labels(
        &[(scaler.http.parse().expect("the admin address"), vec![])],
        Duration::from_secs(1),
    )
    .await;
    let common = |extra: &[(&'static str, String)]| -> Vec<(&'static str, String)> {
        let mut md = vec![
            ("modelName", MODEL.to_owned()),
            ("targetBacklogPerReplica", "10".to_owned()),
            ("pollIntervalSeconds", "1".to_owned()),
        ];
        md.extend_from_slice(extra);
        md
    };
    let build = |name: &str, md: Vec<(&'static str, String)>| {
        let md: Vec<(&str, &str)> = md.iter().map(|(k, v)| (*k, v.as_str())).collect();
        object(name, &md)
    };
    let objects = vec![
        build(
            "chat",
            common(&[
                ("vllmTargets", targets(&chat_pods)),
                ("policy", "capacity".to_owned()),
                ("drainRatePerReplica", "2".to_owned()),
            ]),
        ),
        build(
            "chat-shadow",
            common(&[
                ("vllmTargets", targets(&chat_pods[..2])),
                ("mode", "shadow".to_owned()),
            ]),
        ),
        build(
            "noisy",
            common(&[
                ("vllmTargets", targets(&noisy)),
                ("policy", "backlog".to_owned()),
            ]),
        ),
        build(
            "gone",
            common(&[("vllmTargets", format!("http://{gone}/metrics"))]),
        ),
        // Bad metadata: INVALID_ARGUMENT, as KEDA would be answered.
        build(
            "typo",
            common(&[
                ("vllmTargets", targets(&noisy)),
                ("targetBacklogPerReplica", "ten".to_owned()),
            ]),
        ),
    ];
    let mut client = scaler.client().await;
    ask(&mut client, &objects).await;
    // An open activity stream, as KEDA holds one per ScaledObject: timed
    // once, when it opens.
    let stream = client
        .stream_is_active(objects[0].clone())
        .await
        .expect("the stream opens");
    // KEDA asks every few seconds; keep asking while the data builds up.
    let asking = {
        let mut client = scaler.client().await;
        let objects = objects.clone();
        tokio::spawn(async move {
            loop {
                ask(&mut client, &objects).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    prometheus
        .wait_for_series("backlog_scaler_backlog", Duration::from_secs(30))
        .await;
    // A load step while every pod answers: 28 requests arrive on one pod
    // within a poll, so `λ̂` and the peak it holds rise above 0.
    common::set(&chat_pods[0], 40.0, 30.0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    chat_pods[2].set_status_override(Some(500));

    // The variables, each through its own label_values query.
    let mut values: BTreeMap<String, String> =
        BTreeMap::from([("__rate_interval".to_owned(), "1m".to_owned())]);
    let deadline = Instant::now() + Duration::from_secs(45);
    for var in d["templating"]["list"].as_array().expect("templating") {
        if var["type"] != "query" {
            continue;
        }
        let name = var["name"].as_str().expect("name").to_owned();
        let (expr, label) = label_values(var["query"]["query"].as_str().expect("query"));
        let expr = substitute(&expr, &values);
        let found: BTreeSet<String> = loop {
            let found: BTreeSet<String> = prometheus
                .query_vector(&expr)
                .await
                .iter()
                .filter_map(|s| s.label(&label).map(str::to_owned))
                .collect();
            if !found.is_empty() || Instant::now() > deadline {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(
            !found.is_empty(),
            "variable {name}: {expr} has no `{label}` values"
        );
        values.insert(name, multi_value(&found));
    }
    assert_eq!(values["namespace"], "(default)");
    for name in ["chat", "chat-shadow", "gone", "noisy"] {
        assert!(values["scaledobject"].contains(name), "{values:?}");
    }

    // Every target returns data (series appear as polls, failures and
    // rates accumulate: retry until a deadline).
    let mut skipped = Vec::new();
    let mut pending: Vec<(String, String)> = Vec::new();
    for t in panel_targets(&d) {
        if t.expr.contains("kube_") {
            assert!(
                t.description.contains(KSM_MARK),
                "panel `{}` queries kube-state-metrics without saying so: {}",
                t.panel,
                t.expr
            );
            skipped.push(format!("{}: {}", t.panel, t.expr));
            continue;
        }
        let expr = substitute(&t.expr, &values);
        assert!(
            !expr.contains('$'),
            "unresolved variable in `{}`: {expr}",
            t.panel
        );
        pending.push((t.panel, expr));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut failures = Vec::new();
    loop {
        failures.clear();
        for (panel, expr) in &pending {
            if let Err(why) = run(&prometheus, expr).await {
                failures.push(format!("{panel}: {expr}\n  {why}"));
            }
        }
        if failures.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    asking.abort();
    assert!(
        failures.is_empty(),
        "panel queries without data:\n{}\n\nscaler log:\n{}\nprometheus log:\n{}",
        failures.join("\n"),
        scaler.log(),
        prometheus.log()
    );
    assert!(pending.len() >= 20, "{}", pending.len());
    eprintln!(
        "dashboard: {} queries returned data; skipped (need kube-state-metrics):\n  {}",
        pending.len(),
        skipped.join("\n  ")
    );
    assert_eq!(skipped.len(), 3, "{skipped:?}");

    // The data is what the fakes made: the held pod, the malformed line,
    // the refused metadata, the lost signal.
    let held = prometheus
        .query_vector(r#"backlog_scaler_trigger_degraded_pods{name="chat"}"#)
        .await;
    assert!(
        held.iter()
            .any(|s| s.value >= 1.0 && s.label("reason") == Some("http_status")),
        "{held:?}"
    );
    let unavailable = prometheus
        .query_vector(r#"backlog_scaler_trigger_available{name="gone"}"#)
        .await;
    assert_eq!(
        unavailable.first().map(|s| s.value),
        Some(0.0),
        "{unavailable:?}"
    );
    let shadow = prometheus
        .query_vector(r#"backlog_scaler_shadow_desired_replicas{name="chat-shadow"}"#)
        .await;
    assert!(shadow.first().is_some_and(|s| s.value >= 1.0), "{shadow:?}");
    // The capacity series: `chat`'s prior μ (not confident, so floored at
    // the backlog formula) and the arrivals of the load step; none for the
    // backlog trigger nor for the one that answers UNAVAILABLE.
    let mu = prometheus
        .query_vector(r#"backlog_scaler_capacity_drain_rate{name="chat"}"#)
        .await;
    assert!(
        mu.len() == 1 && mu[0].value == 2.0 && mu[0].label("source") == Some("prior"),
        "{mu:?}"
    );
    let peak = prometheus
        .query_vector(r#"backlog_scaler_capacity_arrival_rate{name="chat",kind="peak"}"#)
        .await;
    assert!(peak.first().is_some_and(|s| s.value > 0.0), "{peak:?}");
    let floor = prometheus
        .query_vector(r#"backlog_scaler_capacity_backlog_floor{name="chat"}"#)
        .await;
    assert_eq!(floor.first().map(|s| s.value), Some(1.0), "{floor:?}");
    for name in ["noisy", "gone"] {
        let none = prometheus
            .query_vector(&format!(
                r#"{{__name__=~"backlog_scaler_capacity_.*", name="{name}"}}"#
            ))
            .await;
        assert!(none.is_empty(), "{name}: {none:?}");
    }
    let latency = prometheus
        .query_vector("sum by (method) (backlog_scaler_grpc_request_duration_seconds_count)")
        .await;
    for method in ["GetMetricSpec", "GetMetrics", "IsActive"] {
        assert!(
            latency
                .iter()
                .any(|s| s.label("method") == Some(method) && s.value >= 1.0),
            "{method}: {latency:?}"
        );
    }
    let streams: Vec<f64> = latency
        .iter()
        .filter(|s| s.label("method") == Some("StreamIsActive"))
        .map(|s| s.value)
        .collect();
    assert_eq!(streams, [1.0], "one stream opened: {latency:?}");
    drop(stream);
    let invalid = prometheus
        .query_vector(r#"backlog_scaler_grpc_requests_total{code="INVALID_ARGUMENT"}"#)
        .await;
    assert!(!invalid.is_empty(), "{invalid:?}");
    let malformed = prometheus
        .query_vector("backlog_scaler_malformed_lines_total")
        .await;
    assert!(
        malformed.first().is_some_and(|s| s.value >= 1.0),
        "{malformed:?}"
    );

    // Every self-metric family the scaler exposes is on the dashboard.
    let exposition = reqwest::get(format!("http://{}/metrics", scaler.http))
        .await
        .expect("admin")
        .text()
        .await
        .expect("body");
    let all_exprs: String = panel_targets(&d)
        .iter()
        .map(|t| t.expr.clone() + "\n")
        .collect();
    let families: Vec<&str> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(families.len() >= 15, "{families:?}");
    for family in families {
        assert!(
            all_exprs.contains(family),
            "self-metric {family} is on no panel"
        );
    }
    drop(noisy);
    drop(chat_pods);
}
