//! The binary as a user runs it: `demo`, `check`, `serve`'s flags.

mod common;

use std::io::Write;
use std::process::{Command, Output};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("binary runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn demo_runs_and_shows_the_numbers_move() {
    let output = run(&[
        "demo",
        "--duration",
        "6",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("grpcurl -plaintext"), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| {
            l.trim_start()
                .split('s')
                .next()
                .is_some_and(|n| n.trim().parse::<u64>().is_ok())
        })
        .filter(|l| l.contains("true") || l.contains("false"))
        .collect();
    assert!(rows.len() >= 3, "expected live rows:\n{out}");
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|l| l.split_whitespace().nth(3).and_then(|v| v.parse().ok()))
        .collect();
    assert!(
        values.iter().any(|v| *v > 0.0),
        "the backlog should be non-zero:\n{out}"
    );
}

/// Plain logs carry no colour escape codes when stderr is not a terminal (a
/// pod's log, a file, a pipe: here a pipe).
#[test]
fn plain_logs_to_a_pipe_have_no_escape_codes() {
    let output = run(&[
        "--log-level",
        "info",
        "--log-format",
        "plain",
        "demo",
        "--duration",
        "1",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}", text(&output));
    assert!(log.contains(" INFO "), "an info line: {log}");
    assert!(!log.contains('\u{1b}'), "escape codes in: {log:?}");
}

#[tokio::test]
async fn check_probes_sources_and_reports_the_value() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let mut file = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(
        file,
        "scalerAddress: backlog-scaler.keda:9090\nvllmTargets: {}\nmodelName: {MODEL}\ntargetBacklogPerReplica: 10\nrunningPerReplica: 32\n",
        targets(&pods)
    )
    .expect("write");
    let path = file.path().to_str().expect("utf8").to_owned();
    let output = tokio::task::spawn_blocking(move || run(&["check", "--metadata", &path]))
        .await
        .expect("join");
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("= 74.375"), "{out}");
    assert!(out.contains("IsActive=true"), "{out}");
    assert_eq!(out.matches("waiting=").count(), 3, "{out}");
}

/// One pod of three unreachable: `check` answers what `serve` answers (the pod left out, the
/// others extrapolated to the three discovered, `degraded`) and still fails the check.
#[tokio::test]
async fn check_leaves_a_failing_pod_out_as_the_server_does() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0)]).await;
    let mut file = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(
        file,
        "vllmTargets: {},http://127.0.0.1:1/metrics\nmodelName: {MODEL}\ntargetBacklogPerReplica: 10\nrunningPerReplica: 32\npolicy: backlog\n",
        targets(&pods)
    )
    .expect("write");
    let path = file.path().to_str().expect("utf8").to_owned();
    let output = tokio::task::spawn_blocking(move || run(&["check", "--metadata", &path]))
        .await
        .expect("join");
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains("http://127.0.0.1:1/metrics  FAILED (upstream_error)"),
        "{out}"
    );
    // (10 + 20 + 10·64/32) for two pods, × 3/2 for the one left out.
    assert!(out.contains("=75  IsActive=true"), "{out}");
    assert!(
        out.contains("degraded: the pods that FAILED above are left out"),
        "{out}"
    );
}

#[test]
fn check_fails_on_bad_metadata_and_on_an_unreachable_source() {
    let mut bad = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(
        bad,
        "vllmTargets: http://127.0.0.1:1/metrics\ntargetBacklogPerReplica: -1\n"
    )
    .expect("write");
    let output = run(&["check", "--metadata", bad.path().to_str().expect("utf8")]);
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(
        out.contains("targetBacklogPerReplica") && out.contains("`-1`"),
        "{out}"
    );

    let mut down = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(
        down,
        "vllmTargets: http://127.0.0.1:1/metrics\ntargetBacklogPerReplica: 10\n"
    )
    .expect("write");
    let output = run(&["check", "--metadata", down.path().to_str().expect("utf8")]);
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(
        out.contains("FAILED (upstream_error)") && out.contains("UNAVAILABLE"),
        "{out}"
    );
}

/// A pod too slow for the server's poll (90 % of 80 % of `pollIntervalSeconds`) is
/// too slow for `check`: it fails as the server would, not after its own 10 s.
#[tokio::test]
async fn check_times_out_a_source_at_the_servers_poll_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    // Accepts and never answers.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let mut file = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(
        file,
        "vllmTargets: http://{addr}/metrics\ntargetBacklogPerReplica: 10\npolicy: backlog\npollIntervalSeconds: 2\n"
    )
    .expect("write");
    let path = file.path().to_str().expect("utf8").to_owned();
    let started = std::time::Instant::now();
    let output = tokio::task::spawn_blocking(move || run(&["check", "--metadata", &path]))
        .await
        .expect("join");
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(out.contains("FAILED (timeout)"), "{out}");
    // 90 % of the poll timeout (80 % of 2 s), 1.44 s: the server's per-pod bound, in the
    // words the server logs.
    assert!(
        out.contains("no answer within 1.4 s"),
        "the server's per-pod timeout: {out}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{out}"
    );
}

#[test]
fn serve_rejects_a_bad_config_file_and_flag() {
    let mut config = tempfile::NamedTempFile::new().expect("tmp");
    writeln!(config, "idleTimeout: 5").expect("write");
    let output = run(&[
        "serve",
        "--config",
        config.path().to_str().expect("utf8"),
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    assert!(!output.status.success());
    assert!(text(&output).contains("idleTimeout"), "{}", text(&output));
    let output = run(&["serve", "--grpc-addr", "not-an-address"]);
    assert!(!output.status.success());
    assert!(text(&output).contains("--grpc-addr"), "{}", text(&output));
}

/// `simulate`'s HPA scale-down window and warm start reach the run (the header says them
/// and the replica-hours move), and a value that is no duration is refused naming the flag.
/// `column` of the first data row of the CSV file at `path`, as a number.
fn first_row_value(path: &std::path::Path, column: &str) -> f64 {
    let csv = std::fs::read_to_string(path).expect("a CSV file");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let index = header
        .iter()
        .position(|h| *h == column)
        .unwrap_or_else(|| panic!("a {column} column in {}", path.display()));
    lines
        .next()
        .and_then(|row| row.split(',').nth(index))
        .expect("a first row")
        .parse()
        .expect("a number")
}

#[test]
fn simulate_starts_the_default_from_a_prior_and_reports_its_learned_mu() {
    // `--prior-factor F` gives `default` a `drainRatePerReplica` of F times the pod model's μ:
    // with no warm start, that prior is its μ at the first point. The learned-μ table judges
    // the polls from 15 minutes on (20-minute run: 900–1200 s, every 5 s).
    let dir = tempfile::tempdir().expect("tempdir");
    let simulate = |factor: Option<&str>| {
        let out = dir.path().join(format!("p{}", factor.unwrap_or("none")));
        let mut args = vec![
            "simulate".to_owned(),
            "--scenario=ramp".to_owned(),
            "--policy=default".to_owned(),
            "--seeds=1".to_owned(),
            "--duration-minutes=20".to_owned(),
            "--warmup-seconds=0".to_owned(),
            format!("--out={}", out.to_str().expect("utf8")),
        ];
        if let Some(f) = factor {
            args.push(format!("--prior-factor={f}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(&args);
        let shown = text(&output);
        assert!(output.status.success(), "{shown}");
        assert!(
            shown.contains("`default`'s learned μ against the pod model's"),
            "{shown}"
        );
        let table = std::fs::read_to_string(out.join("mu.md")).expect("mu.md");
        let row = table.lines().nth(2).unwrap_or_default();
        assert!(row.starts_with("| ramp | 61 | "), "{table}");
        first_row_value(&out.join("timeseries-ramp.csv"), "drain_rate")
    };
    let (none, one, two) = (simulate(None), simulate(Some("1")), simulate(Some("2")));
    assert_eq!(
        none, 0.0,
        "no prior, no warm start: nothing known at the first point"
    );
    assert!(
        one > 7.0 && one < 8.0,
        "the model's μ (7.44) as the prior: {one}"
    );
    assert!((two / one - 2.0).abs() < 1e-3, "twice it: {two} vs {one}");
    for bad in ["0", "-1", "nan"] {
        let output = run(&[
            "simulate",
            &format!("--prior-factor={bad}"),
            "--out",
            dir.path().to_str().expect("utf8"),
        ]);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(
            text(&output).contains("--prior-factor must be a number > 0"),
            "{}",
            text(&output)
        );
    }
}

/// `--rate-scale` multiplies a trace's load; a built-in shape would ignore it, so it is refused
/// rather than run unscaled, and a trace takes it.
#[test]
fn simulate_refuses_a_rate_scale_it_would_ignore() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf8");
    let output = run(&[
        "simulate",
        "--scenario",
        "spike",
        "--rate-scale",
        "2",
        "--out",
        out,
    ]);
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("--rate-scale 2 multiplies a trace's load")
            && shown.contains("`--scenario spike` is a built-in shape"),
        "{shown}"
    );
    let output = run(&[
        "simulate",
        "--scenario",
        "chat",
        "--policy",
        "fixed",
        "--seeds",
        "1",
        "--duration-minutes",
        "2",
        "--rate-scale",
        "2",
        "--out",
        out,
    ]);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn simulate_takes_the_scale_down_window_and_the_warm_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let simulate = |window: &str, warmup: &str| {
        let out = dir.path().join(format!("w{window}-{warmup}"));
        let output = run(&[
            "simulate",
            "--scenario",
            "spike",
            "--policy",
            "default",
            "--seeds",
            "1",
            "--duration-minutes",
            "12",
            &format!("--scale-down-window-seconds={window}"),
            &format!("--warmup-seconds={warmup}"),
            "--out",
            out.to_str().expect("utf8"),
        ]);
        let shown = text(&output);
        assert!(output.status.success(), "{shown}");
        assert!(
            shown.contains(&format!(
                "HPA scale-down window {window} s, {warmup} s warm start"
            )),
            "{shown}"
        );
        // Replica-hours, and the μ the trigger used at the first point of the run: learned
        // during a warm start, nothing yet from a cold one.
        (
            first_row_value(&out.join("summary.csv"), "replica_hours"),
            first_row_value(&out.join("timeseries-spike.csv"), "drain_rate"),
        )
    };
    let cold = simulate("300", "0");
    assert_ne!(cold.0, simulate("0", "0").0, "the window is used");
    let warm = simulate("300", "600");
    assert!(
        cold.1 == 0.0 && warm.1 > 0.0,
        "the warm start is used: μ at the first point {} cold, {} warm",
        cold.1,
        warm.1
    );
    for bad in ["--warmup-seconds=-1", "--scale-down-window-seconds=inf"] {
        let output = run(&["simulate", bad, "--out", dir.path().to_str().expect("utf8")]);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        let flag = bad.split('=').next().expect("flag");
        assert!(
            text(&output).contains(&format!("{flag} must be a number ≥ 0")),
            "{}",
            text(&output)
        );
    }
}

/// `simulate … | head` closes stdout early: the command ends quietly (no panic, exit 0) and
/// still writes its files; a stdout that fails otherwise (a full disk) is an error.
#[test]
fn a_closed_stdout_is_not_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf8");
    let args = [
        "simulate",
        "--scenario",
        "step",
        "--policy",
        "default",
        "--seeds",
        "1",
        "--duration-minutes",
        "10",
        "--out",
        out,
    ];
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    // The reader goes away before the first line: every write meets a closed pipe.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("simulate ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        dir.path().join("summary.md").exists(),
        "files still written"
    );

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let output = Command::new(BIN)
        .args(args)
        .stdout(full)
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output: No space left on device"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // `check --from-keda` writes its migration in one piece: the same rule.
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/k8s/examples/from-keda/kafka.yaml"
    );
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let output = Command::new(BIN)
        .args(["check", "--from-keda", example])
        .stdout(full)
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
}

/// `demo | head`: once nobody reads the live view, the demo stops as Ctrl-C would.
#[test]
fn demo_ends_when_its_reader_goes_away() {
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    drop(child.stdout.take());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("demo kept running with nobody reading its output");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
