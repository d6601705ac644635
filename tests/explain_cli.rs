//! `backlog-scaler explain` as a user runs it against a running scaler:
//! the readable view (`--text`), the JSON (`--json`, and the default when
//! stdout is not a terminal), on an ok trigger, one with a failing pod held
//! and then left out (degraded), and one below the reporting quorum
//! (unavailable).

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

    // One pod of three fails: its last good reading is held (degraded, the
    // value unchanged); past maxSignalAgeSeconds it is left out and the two
    // that answer stand in for it (2 of 3 ≥ minReportingFraction 0.5). The
    // source's poll still succeeds, so it shows no error of its own.
    pods[1].set_status_override(Some(500));
    let failing = pods[1].metrics_url();
    let held = text_until(&admin, "    held      ").await;
    assert!(
        held.contains("state:      degraded: 1 of 3 pods failing (1 held: "),
        "{held}"
    );
    assert!(held.contains("decision:   B = D = 74.375"), "{held}");
    assert!(
        held.contains(
            "  pods:       3 of 3 discovered pods report (minReportingFraction 0.5)
"
        ),
        "{held}"
    );
    assert!(
        held.contains(&format!("    held      {failing}  (http_status, ")),
        "{held}"
    );
    assert!(held.contains("HTTP status 500"), "{held}");
    assert!(!held.contains("last error: "), "{held}");
    assert!(
        held.contains("2 pods (vllm) in the last good reading\n"),
        "{held}"
    );
    assert!(!held.contains(&format!("        {failing}  W=")), "{held}");

    let left_out = text_until(&admin, "    left out  ").await;
    assert!(
        left_out.contains("state:      degraded: 1 of 3 pods failing (1 left out: the 2 reporting pods' values are extrapolated to 3): "),
        "{left_out}"
    );
    assert!(
        left_out.contains(
            "  pods:       2 of 3 discovered pods report (minReportingFraction 0.5); the sums are scaled by 3/2 = 1.5\n"
        ),
        "{left_out}"
    );
    assert!(
        left_out.contains(&format!("    left out  {failing}  (http_status, ")),
        "{left_out}"
    );
    // (10 + 15) × 1.5 waiting, (32 + 30) × 1.5 running, n the 3 discovered.
    assert!(
        left_out.contains(
            "formula:    D = W + T·R/C = 37.5 + 10·93/32 = 66.5625; max → D; B = 66.5625\n"
        ),
        "{left_out}"
    );
    assert!(
        left_out.contains(
            "decision:   B = D = 66.5625 → desired ceil(66.5625/10) = 7 replicas; active (B > A=0)\n"
        ),
        "{left_out}"
    );
    assert!(
        left_out.contains("n (replicas reporting)     3\n"),
        "{left_out}"
    );

    // A second pod fails: held, it still counts (2 of 3); left out too, 1
    // of 3 is below the quorum and the trigger is unavailable, naming both.
    pods[2].set_status_override(Some(500));
    let lost = text_until(&admin, "state:      unavailable: ").await;
    assert!(!lost.contains("decision:"), "{lost}");
    assert!(
        lost.contains("1 of 3 discovered pods report, below minReportingFraction=0.5; left out: "),
        "{lost}"
    );
    assert!(
        lost.contains(
            "  pods:       1 of 3 discovered pods report (minReportingFraction 0.5); below it: UNAVAILABLE\n"
        ),
        "{lost}"
    );
    for pod in [&pods[1], &pods[2]] {
        let url = pod.metrics_url();
        assert!(
            lost.contains(&format!("    left out  {url}  (http_status, ")),
            "{lost}"
        );
        assert!(
            lost.contains(&format!("left out: {url}")) || lost.contains(&format!("; {url}")),
            "{lost}"
        );
    }
    pods[2].stop().await;
    pods[1].stop().await;
}
