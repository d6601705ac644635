//! The real Prometheus server (Debian's `prometheus` 2.42, `/usr/bin/prometheus`) scraping
//! fake exporters on loopback, for tests of the PromQL signal path.
//!
//! `PrometheusServer::start` writes a one-job config into a temp dir (`honor_labels: true`,
//! `metrics_path: /metrics`, one `static_configs` entry per target carrying that target's
//! labels), starts the binary on a free 127.0.0.1 port with its TSDB in the same temp dir, and
//! returns once `/-/ready` answers 200. Drop kills the process and waits for it.
//!
//! Stored labels: every series gets `job="fake-pods"` and `instance="127.0.0.1:PORT"`, plus the
//! target's labels (`start` gives target `i` `namespace="default"`, `pod="pod-<i>"`). With
//! `honor_labels: true` an exporter's own `namespace`/`pod` labels (dcgm-exporter's) win over the
//! target's, and a series without them gets the target's, so register a dcgm-exporter target
//! with no labels (`start_with_labels(&[(addr, vec![])], ..)`) or its unassigned GPUs would look
//! assigned.
//!
//! `rate()` needs two samples inside its range: allow a couple of scrape intervals after the
//! first change before expecting data (`wait_for_value` polls).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// Where Debian's package puts the server.
pub const PROMETHEUS_BIN: &str = "/usr/bin/prometheus";
/// The one scrape job's name (the `job` label of every series).
pub const JOB: &str = "fake-pods";
/// How long `start` waits for `/-/ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// One sample of an instant-query result.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    /// The series labels, `__name__` included when the result keeps it.
    pub labels: BTreeMap<String, String>,
    /// The value (`NaN` and `±Inf` parsed).
    pub value: f64,
}

impl PromSample {
    /// One label's value.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

/// A running Prometheus; killed on drop.
pub struct PrometheusServer {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
    client: reqwest::Client,
}

impl PrometheusServer {
    /// Scrape `targets` every `scrape_interval`; target `i` gets `namespace="default"`,
    /// `pod="pod-<i>"`.
    pub async fn start(targets: &[SocketAddr], scrape_interval: Duration) -> PrometheusServer {
        let labelled: Vec<(SocketAddr, Vec<(String, String)>)> = targets
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                (
                    *addr,
                    vec![
                        ("namespace".to_owned(), "default".to_owned()),
                        ("pod".to_owned(), format!("pod-{i}")),
                    ],
                )
            })
            .collect();
        Self::start_with_labels(&labelled, scrape_interval).await
    }

    /// Scrape each target with its own extra labels (may be empty).
    pub async fn start_with_labels(
        targets: &[(SocketAddr, Vec<(String, String)>)],
        scrape_interval: Duration,
    ) -> PrometheusServer {
        assert!(
            Path::new(PROMETHEUS_BIN).exists(),
            "{PROMETHEUS_BIN} is missing: run `bash .ci/install-deps`"
        );
        let dir = tempfile::Builder::new()
            .prefix("prometheus-test-")
            .tempdir()
            .expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, config_yaml(targets, scrape_interval)).expect("write config");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("http client");

        // A free port can be taken between probing and Prometheus binding it: retry.
        let mut failures = String::new();
        for attempt in 0..3 {
            let addr = free_port();
            let log_path = dir.path().join(format!("prometheus-{attempt}.log"));
            let log = File::create(&log_path).expect("log file");
            let mut child = Command::new(PROMETHEUS_BIN)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join(format!("data-{attempt}")).display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=warn")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log fd"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {PROMETHEUS_BIN}: {e}"));
            match wait_ready(&mut child, &client, addr).await {
                Ok(()) => {
                    return PrometheusServer {
                        child,
                        addr,
                        dir,
                        client,
                    };
                }
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = writeln!(
                        failures,
                        "attempt {attempt} on {addr}: {why}\n{}",
                        std::fs::read_to_string(&log_path).unwrap_or_default()
                    );
                }
            }
        }
        panic!("prometheus did not start:\n{failures}");
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listen address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's log so far (warnings and errors), for assertion messages.
    pub fn log(&self) -> String {
        let mut out = String::new();
        for attempt in 0..3 {
            if let Ok(s) =
                std::fs::read_to_string(self.dir.path().join(format!("prometheus-{attempt}.log")))
            {
                out.push_str(&s);
            }
        }
        out
    }

    /// Instant query (`/api/v1/query`): the whole JSON answer, errors included
    /// (`{"status":"error","errorType":..,"error":..}`).
    pub async fn query(&self, promql: &str) -> Value {
        let response = self
            .client
            .get(format!("{}/api/v1/query", self.url()))
            .query(&[("query", promql)])
            .send()
            .await
            .unwrap_or_else(|e| panic!("query {promql}: {e}"));
        let text = response.text().await.expect("query body");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("query {promql}: {e}: {text}"))
    }

    /// Instant query whose result is a vector (or scalar), as samples; panics on a PromQL error.
    pub async fn query_vector(&self, promql: &str) -> Vec<PromSample> {
        let answer = self.query(promql).await;
        samples(&answer).unwrap_or_else(|why| panic!("query {promql}: {why}: {answer}"))
    }

    /// Poll `promql` every 200 ms until it returns at least one sample; panics after `timeout`
    /// with the last answer and the server log.
    pub async fn wait_for_series(&self, promql: &str, timeout: Duration) -> Vec<PromSample> {
        let deadline = Instant::now() + timeout;
        loop {
            let result = self.query_vector(promql).await;
            if !result.is_empty() {
                return result;
            }
            if Instant::now() > deadline {
                panic!(
                    "no series for {promql} after {timeout:?}\nlog:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Poll `promql` until its first sample satisfies `accept`; returns that value. Panics after
    /// `timeout` with the last result.
    pub async fn wait_for_value(
        &self,
        promql: &str,
        timeout: Duration,
        accept: impl Fn(f64) -> bool,
    ) -> f64 {
        let deadline = Instant::now() + timeout;
        loop {
            let result = self.query_vector(promql).await;
            if let Some(v) = result.first().map(|s| s.value)
                && accept(v)
            {
                return v;
            }
            if Instant::now() > deadline {
                panic!(
                    "{promql} never gave an accepted value within {timeout:?}; last: {result:?}\nlog:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until every configured target reports `up == 1`.
    pub async fn wait_for_targets_up(&self, targets: usize, timeout: Duration) {
        let query = format!("sum(up{{job=\"{JOB}\"}})");
        self.wait_for_value(&query, timeout, |v| v == targets as f64)
            .await;
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Poll `/-/ready` until 200, failing early if the process exits.
async fn wait_ready(
    child: &mut Child,
    client: &reqwest::Client,
    addr: SocketAddr,
) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let url = format!("http://{addr}/-/ready");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("prometheus exited with {status}"));
        }
        if let Ok(response) = client.get(&url).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("not ready after {READY_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("probe a free port");
    listener.local_addr().expect("probe address")
}

/// The config file: one job, one static target group per target (YAML flow style, with
/// JSON-quoted strings).
fn config_yaml(targets: &[(SocketAddr, Vec<(String, String)>)], every: Duration) -> String {
    let every = format!("{}ms", every.as_millis().max(1));
    let quote = |s: &str| serde_json::to_string(s).expect("json string");
    let mut yaml = format!(
        "global:\n  scrape_interval: {every}\n  scrape_timeout: {every}\n  evaluation_interval: {every}\n\
         scrape_configs:\n  - job_name: {job}\n    honor_labels: true\n    metrics_path: /metrics\n    scheme: http\n    static_configs:\n",
        job = quote(JOB)
    );
    for (addr, labels) in targets {
        let _ = writeln!(yaml, "      - targets: [{}]", quote(&addr.to_string()));
        if !labels.is_empty() {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{}: {}", quote(k), quote(v)))
                .collect();
            let _ = writeln!(yaml, "        labels: {{{}}}", labels.join(", "));
        }
    }
    yaml
}

/// The samples of a successful vector or scalar answer.
fn samples(answer: &Value) -> Result<Vec<PromSample>, String> {
    if answer["status"] != "success" {
        return Err("query failed".to_owned());
    }
    let data = &answer["data"];
    let value_of = |pair: &Value| -> Result<f64, String> {
        let text = pair[1].as_str().ok_or("value is not a string")?;
        parse_value(text).ok_or_else(|| format!("bad value {text}"))
    };
    match data["resultType"].as_str() {
        Some("vector") => data["result"]
            .as_array()
            .ok_or("result is not an array")?
            .iter()
            .map(|s| {
                let labels = s["metric"]
                    .as_object()
                    .ok_or("metric is not an object")?
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect();
                Ok(PromSample {
                    labels,
                    value: value_of(&s["value"])?,
                })
            })
            .collect(),
        Some("scalar") => Ok(vec![PromSample {
            labels: BTreeMap::new(),
            value: value_of(&data["result"])?,
        }]),
        other => Err(format!("unexpected result type {other:?}")),
    }
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}
