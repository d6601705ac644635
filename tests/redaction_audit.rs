//! The outside audit's leaks, through the real binary: a URL whose userinfo does not follow
//! `scheme://` (`http:/\u:p@h`, `http:///u:p@h`), a password holding `/`, `,` or a tab (also a
//! bare `u:pa,ss@h`, which the split of a list cuts), a header pasted after a target
//! (`… Bearer abc`, or percent-encoded as `%20Bearer%20abc`), and a credential pasted as the
//! `authProfile` name. Each must reach no channel (the gRPC status of GetMetricSpec, GetMetrics
//! and IsActive, the JSON log at `trace`, `/explain`, `/metrics`, `check`) while each channel
//! that speaks of the trigger still names the key and the value, redacted. `tests/redaction.rs`
//! covers every URL-bearing key with real upstreams; this file pins the shapes the audit found.

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use backlog_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use common::Serve;
use tonic::Code;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");
/// The two halves of every password: a separator between them must not let either through.
const HALVES: [&str; 2] = ["K7q2vS3", "X9w4zCR"];

/// One trigger: its metadata, the gRPC code it gets, and what every channel that speaks of
/// it must show.
struct Case {
    name: &'static str,
    metadata: Vec<(&'static str, String)>,
    code: Code,
    marker: String,
}

fn case(name: &'static str, key: &'static str, value: String, code: Code, marker: &str) -> Case {
    Case {
        name,
        metadata: vec![
            ("targetBacklogPerReplica", "10".to_owned()),
            ("pollIntervalSeconds", "1".to_owned()),
            (key, value),
        ],
        code,
        marker: marker.to_owned(),
    }
}

fn table(closed: &str) -> Vec<Case> {
    let [a, b] = HALVES;
    let invalid = Code::InvalidArgument;
    vec![
        case(
            "slash-backslash",
            "vllmTargets",
            format!("http:/\\u:{a}{b}@127.0.0.1:1/metrics"),
            invalid,
            "`vllmTargets` has value `http:/\\[redacted]@127.0.0.1:1/metrics`: credentials",
        ),
        case(
            "three-slashes",
            "vllmTargets",
            format!("http:///u:{a}{b}@127.0.0.1:1/metrics"),
            invalid,
            "`vllmTargets` has value `http:///[redacted]@127.0.0.1:1/metrics`: the URL has no host",
        ),
        case(
            "slash-in-password",
            "vllmTargets",
            format!("http://u:{a}/{b}@127.0.0.1:1/metrics"),
            invalid,
            "`vllmTargets` has value `http://[redacted]@127.0.0.1:1/metrics`",
        ),
        // The list is split at the comma, which cuts the password: the error
        // quotes the whole list, redacted as one, rather than the entry `http://u:A`.
        case(
            "comma-in-password",
            "vllmTargets",
            format!("http://u:{a},{b}@127.0.0.1:1/metrics"),
            invalid,
            "`vllmTargets` has value `http://[redacted]@127.0.0.1:1/metrics`: not a URL",
        ),
        // Without a scheme the entry `u:A` alone looks like no credential.
        case(
            "comma-in-bare-password",
            "vllmTargets",
            format!("u:{a},{b}@127.0.0.1:1/metrics"),
            invalid,
            "`vllmTargets` has value `[redacted]@127.0.0.1:1/metrics`: the scheme must be http",
        ),
        case(
            "tab-in-password",
            "dcgmTargets",
            format!("http://u:{a}\t{b}@127.0.0.1:1/metrics"),
            invalid,
            "`dcgmTargets` has value `http://[redacted]@127.0.0.1:1/metrics`: not a URL: a tab",
        ),
        case(
            "header-after-target",
            "vllmTargets",
            format!("http://127.0.0.1:1/metrics Bearer {a}{b}"),
            invalid,
            "`vllmTargets` has value `http://127.0.0.1:1/metrics Bearer [redacted]`: not a URL: a space",
        ),
        case(
            "credential-as-profile",
            "authProfile",
            format!("Bearer {a}{b}"),
            invalid,
            // Not a profile name at all: refused by the metadata parser, redacted.
            "metadata key `authProfile` has value `Bearer [redacted]`: the name of a profile in the scaler config",
        ),
        // Percent-encoded, the header is a valid path: scraped, failing, and shown.
        case(
            "encoded-header",
            "vllmTargets",
            format!("http://{closed}/metrics%20Bearer%20{a}{b}"),
            Code::Unavailable,
            &format!("http://{closed}/metrics%20Bearer%20[redacted]"),
        ),
    ]
}

fn closed_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    addr.to_string()
}

fn object(case: &Case) -> ScaledObjectRef {
    let mut metadata: std::collections::HashMap<String, String> = case
        .metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    // `authProfile` is read on the PromQL path.
    if metadata.contains_key("authProfile") {
        metadata.insert("prometheusAddress".into(), "http://127.0.0.1:1".into());
    }
    if metadata.contains_key("dcgmTargets") {
        metadata.insert("vllmTargets".into(), "http://127.0.0.1:1/metrics".into());
        metadata.insert("podSelectorRegex".into(), "llama-.*".into());
        metadata.insert("namespace".into(), "default".into());
    }
    ScaledObjectRef {
        name: case.name.to_owned(),
        namespace: "default".to_owned(),
        scaler_metadata: metadata,
    }
}

/// The status messages of the three calls, once GetMetrics answers the case's code.
async fn grpc_messages(client: &mut ExternalScalerClient<Channel>, case: &Case) -> String {
    let object = object(case);
    let request = GetMetricsRequest {
        scaled_object_ref: Some(object.clone()),
        metric_name: String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let spec = client.get_metric_spec(object.clone()).await.err();
        let metrics = client.get_metrics(request.clone()).await.err();
        let active = client.is_active(object.clone()).await.err();
        if metrics.as_ref().map(tonic::Status::code) == Some(case.code) {
            return [spec, metrics, active]
                .into_iter()
                .flatten()
                .map(|s| s.message().to_owned())
                .collect::<Vec<_>>()
                .join("\n");
        }
        assert!(
            Instant::now() < deadline,
            "{}: expected {:?}, got {metrics:?}",
            case.name,
            case.code
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn assert_no_secret(channel: &str, text: &str) {
    for half in HALVES {
        if let Some(at) = text.find(half) {
            let start = (0..=at.saturating_sub(200))
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            panic!(
                "{channel} echoes a credential: …{}",
                &text[start..at + half.len()]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_shapes_reach_no_channel() {
    let cases = table(&closed_address());
    let server = Serve::start_with("trace", &[]);
    let mut client = server.client().await;
    let mut grpc = Vec::new();
    for case in &cases {
        grpc.push(grpc_messages(&mut client, case).await);
    }
    // A few polls, so the failing source has logged and counted its failures.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, explain) = common::http_get(&format!("http://{}/explain", server.http)).await;
    let (_, metrics) = common::http_get(&format!("http://{}/metrics", server.http)).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("triggers.yaml");
    let mut yaml = String::new();
    for case in &cases {
        yaml.push_str("---\n");
        for (key, value) in object(case).scaler_metadata {
            yaml.push_str(&format!("{key}: {}\n", serde_json::Value::from(value)));
        }
    }
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(yaml.as_bytes()))
        .expect("write");
    let check = Command::new(BIN)
        .args(["--log-format", "json", "--log-level", "trace", "check"])
        .arg("--metadata")
        .arg(&file)
        .output()
        .expect("check runs");
    let check = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let log = server.log();
    drop(server);

    for (case, messages) in cases.iter().zip(&grpc) {
        assert_no_secret(&format!("gRPC ({})", case.name), messages);
        assert!(
            messages.contains(&case.marker),
            "gRPC ({}) does not say `{}`:\n{messages}",
            case.name,
            case.marker
        );
        // `check` probes a valid trigger; the JSON log escapes `\`, `"` and tabs.
        let json_marker = serde_json::Value::from(case.marker.as_str()).to_string();
        let json_marker = json_marker.trim_matches('"');
        for (channel, text) in [("check", check.as_str()), ("the server log", &log)] {
            assert!(
                text.contains(&case.marker) || text.contains(json_marker),
                "{channel} does not say `{}` for {}:\n{text}",
                case.marker,
                case.name
            );
        }
    }
    for (channel, text) in [
        ("the server log", &log),
        ("/explain", &explain),
        ("/metrics", &metrics),
        ("check", &check),
    ] {
        assert_no_secret(channel, text);
    }
    // The registered one is shown, redacted, where sources are.
    let registered = cases
        .iter()
        .find(|c| c.code == Code::Unavailable)
        .expect("a registered case");
    for (channel, text) in [("/explain", &explain), ("/metrics", &metrics)] {
        assert!(
            text.contains(&registered.marker),
            "{channel} does not name `{}`:\n{text}",
            registered.marker
        );
    }
}
