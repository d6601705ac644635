//! `backlog-scaler explain` as a user runs it against a running scaler:
//! the readable view (`--text`), the JSON (`--json`, and the default when
//! stdout is not a terminal), on an ok, a degraded and an unavailable trigger.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use backlog_scaler::guard::config::ScalerConfig;
use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

async fn explain(admin_url: &str, flags: &[&str]) -> (bool, String, String) {
    let mut args = vec![
        "explain".to_owned(),
        "--admin-url".to_owned(),
        admin_url.to_owned(),
        "--namespace".to_owned(),
        "default".to_owned(),
        "--name".to_owned(),
        "llama".to_owned(),
    ];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    let output: Output =
        tokio::task::spawn_blocking(move || Command::new(BIN).args(&args).output())
            .await
            .expect("join")
            .expect("binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Run `explain --text` until its output contains `needle`.
async fn text_until(admin_url: &str, needle: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, out, _) = explain(admin_url, &["--text"]).await;
        if out.contains(needle) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{needle:?} never shown; last output:\n{out}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn explain_prints_a_readable_view_or_the_json() {
    let mut pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let mut client = client(&server).await;
    let targets = targets(&pods);
    let llama = object(
        "llama",
        &[
            ("vllmTargets", targets.as_str()),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("pollIntervalSeconds", "1"),
            ("maxSignalAgeSeconds", "4"),
        ],
    );
    client
        .get_metrics(metrics_request(&llama, "backlog"))
        .await
        .expect("value");
    let admin = format!("http://{}", server.http_addr);

    // The readable view.
    let (ok, out, err) = explain(&admin, &["--text"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("default/llama  (metric backlog)\n  state:      ok\n"),
        "{out}"
    );
    assert!(
        out.contains("formula:    D = W + T·R/C = 45 + 10·94/32 = 74.375; max → D; B = 74.375\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "decision:   B = D = 74.375 → desired ceil(74.375/10) = 8 replicas; active (B > A=0)\n"
        ),
        "{out}"
    );
    assert!(out.contains("W (waiting)                45\n"), "{out}");
    assert!(
        out.contains("T·R/C (running term)       29.375  (10·94/32)\n"),
        "{out}"
    );
    assert!(out.contains("n (replicas reporting)     3\n"), "{out}");
    assert!(
        out.contains("3 pods (vllm) in the last good reading\n"),
        "{out}"
    );
    assert!(!out.contains("failing"), "{out}");
    for pod in &pods {
        assert!(out.contains(&format!("{}  W=", pod.metrics_url())), "{out}");
    }
    assert!(!out.trim_start().starts_with('{'), "{out}");

    // `--json`, and no flag with stdout a pipe (a script): today's JSON.
    for flags in [&["--json"][..], &[][..]] {
        let (ok, out, err) = explain(&admin, flags).await;
        assert!(ok, "{flags:?}: {out}{err}");
        let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(json["triggers"][0]["value"], 74.375, "{flags:?}");
        assert_eq!(json["triggers"][0]["desiredReplicas"], 8, "{flags:?}");
    }
    let (ok, _, err) = explain(&admin, &["--json", "--text"]).await;
    assert!(!ok, "both formats at once are refused");
    assert!(err.contains("cannot be used with"), "{err}");

    // One pod fails: the last good value is held (degraded), the source
    // shows its error; past maxSignalAgeSeconds the trigger is unavailable.
    pods[1].set_status_override(Some(500));
    let degraded = text_until(&admin, "state:      degraded: ").await;
    assert!(degraded.contains("failed poll"), "{degraded}");
    assert!(degraded.contains("last error: "), "{degraded}");
    assert!(
        degraded.contains("decision:   B = D = 74.375"),
        "{degraded}"
    );
    let failing = format!(
        "{}  W=20 R=32 kv=0.5  ← failing (see last error)\n",
        pods[1].metrics_url()
    );
    assert!(degraded.contains(&failing), "{degraded}");
    assert_eq!(degraded.matches("← failing").count(), 1, "{degraded}");
    let lost = text_until(&admin, "state:      unavailable: ").await;
    assert!(!lost.contains("decision:"), "{lost}");
    assert!(lost.contains("last error: "), "{lost}");
    pods[1].stop().await;
}
