//! The admin `/ui` page rendered by a real headless Chromium, and the demo
//! whose fleet follows the scaler (desired → pods ready after the cold start).
//!
//! Chromium is Debian's `chromium` (`.ci/install-deps`). Under `CI=1` a
//! missing browser fails the test; elsewhere the browser tests skip, saying
//! so. Each run prints the path of the screenshot it took.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backlog_scaler::guard::config::ScalerConfig;
use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");
const CHROMIUM: &str = "/usr/bin/chromium";
const WINDOW: (u32, u32) = (1280, 1000);

/// The browser, or `None` (after saying why) when it is absent outside CI.
fn chromium() -> Option<&'static str> {
    if Path::new(CHROMIUM).exists() {
        return Some(CHROMIUM);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("1"),
        "CI=1 but {CHROMIUM} is missing: run .ci/install-deps (Debian package `chromium`)"
    );
    eprintln!(
        "SKIPPED: {CHROMIUM} not found; install Debian's `chromium` (.ci/install-deps) to run the /ui browser tests"
    );
    None
}

/// One headless Chromium run against `url` with the profile `profile`,
/// killed if it takes longer than a minute. The flags keep it off the
/// network beyond the page itself (no updates, sync, QUIC or field trials).
fn browse(profile: &Path, args: &[String], url: &str) -> Output {
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-quic",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("chromium output")
}

/// The DOM after the page's script ran for `budget_ms` of virtual time.
fn dump_dom(profile: &Path, url: &str, budget_ms: u32) -> String {
    let out = browse(
        profile,
        &[
            format!("--virtual-time-budget={budget_ms}"),
            "--dump-dom".to_owned(),
        ],
        url,
    );
    assert!(
        out.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 DOM")
}

/// A PNG of the page in a `WINDOW`-sized window; checks the file and
/// returns its size in pixels.
fn screenshot(profile: &Path, url: &str, file: &Path) -> (u32, u32) {
    let out = browse(
        profile,
        &[
            "--virtual-time-budget=3000".to_owned(),
            format!("--window-size={},{}", WINDOW.0, WINDOW.1),
            format!("--screenshot={}", file.display()),
        ],
        url,
    );
    assert!(
        out.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(file).expect("screenshot written");
    assert!(
        png.len() > 10_000,
        "a near-empty screenshot: {} bytes",
        png.len()
    );
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    println!(
        "screenshot of /ui: {} ({} bytes)",
        file.display(),
        png.len()
    );
    (be(16), be(20))
}

/// Every value of `attr` in `dom` on elements that also carry `marker`.
fn attrs_after(dom: &str, marker: &str, attr: &str) -> Vec<String> {
    dom.match_indices(marker)
        .filter_map(|(at, _)| {
            let tag_end = dom[at..].find('>')? + at;
            let tag_start = dom[..at].rfind('<')?;
            let tag = &dom[tag_start..tag_end];
            let key = format!("{attr}=\"");
            let from = tag.find(&key)? + key.len();
            let len = tag[from..].find('"')?;
            Some(tag[from..from + len].to_owned())
        })
        .collect()
}

fn points(dom: &str, series: &str) -> usize {
    attrs_after(dom, &format!("data-series=\"{series}\""), "data-points")
        .first()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// What the page draws from: `/explain` with one pod set at a fixed load,
/// so B does not move between the browser's polls and the test's read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_draws_what_explain_says_in_headless_chromium() {
    let pods = pods(&[(10.0, 32.0), (20.0, 32.0), (15.0, 30.0)]).await;
    let server = start_server(ScalerConfig::default()).await;
    let base = format!("http://{}", server.http_addr);

    // The page and its assets: no third-party origin, strict CSP.
    for (path, kind) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
    ] {
        let response = reqwest::get(format!("{base}{path}")).await.expect("get");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("content-type"), kind, "{path}");
        let csp = header("content-security-policy");
        assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval") && !csp.contains('*'),
            "{csp}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff");
    }
    let (status, body) = http_get(&format!("{base}/ui/replicas")).await;
    assert_eq!(status, 200);
    assert_eq!(body, r#"{"replicas":[]}"#, "serve knows no ready pods");

    let Some(_) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let profile = dir.path().join("profile");
    let url = format!("{base}/ui");

    // No trigger yet: the page says so instead of drawing nothing.
    let empty = {
        let (profile, url) = (profile.clone(), url.clone());
        tokio::task::spawn_blocking(move || dump_dom(&profile, &url, 2000))
            .await
            .expect("join")
    };
    assert!(empty.contains("No triggers yet"), "{empty}");

    let mut client = client(&server).await;
    let object = object(
        "llama",
        &[
            ("vllmTargets", &targets(&pods)),
            ("modelName", MODEL),
            ("targetBacklogPerReplica", "10"),
            ("runningPerReplica", "32"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    let spec = client
        .get_metric_spec(object.clone())
        .await
        .expect("spec")
        .into_inner();
    let metric = spec.metric_specs[0].metric_name.clone();
    let value = client
        .get_metrics(metrics_request(&object, &metric))
        .await
        .expect("metrics")
        .into_inner()
        .metric_values[0]
        .metric_value_float;

    // Three browser runs a poll interval apart, one profile: the page keeps
    // its history in localStorage, so the last run draws three evaluations.
    let mut dom = String::new();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (profile, url) = (profile.clone(), url.clone());
        dom = tokio::task::spawn_blocking(move || dump_dom(&profile, &url, 2500))
            .await
            .expect("join");
    }
    let (_, explain) = http_get(&format!("{base}/explain")).await;
    let explain: serde_json::Value = serde_json::from_str(&explain).expect("json");
    let trigger = &explain["triggers"][0];
    let b = trigger["value"].as_f64().expect("B");
    assert_eq!(b, value, "fixed load, so B did not move");

    assert_eq!(
        attrs_after(&dom, "class=\"trigger\"", "data-trigger"),
        ["default/llama"],
        "{dom}"
    );
    assert!(dom.contains(&metric), "the metric name is shown");
    let drawn: Vec<f64> = attrs_after(&dom, "data-b=", "data-b")
        .iter()
        .map(|v| v.parse().expect("numeric B"))
        .collect();
    assert_eq!(drawn.len(), 1, "{dom}");
    assert!(
        (drawn[0] - b).abs() < 1e-9,
        "page B {} vs /explain {b}",
        drawn[0]
    );
    // The big number, rounded to 3 decimals as the page prints it.
    let shown = format!(">{}<", (b * 1000.0).round() / 1000.0);
    assert!(dom.contains(&shown), "{shown} not in the page");
    let formula = trigger["formula"].as_str().expect("formula");
    assert!(
        dom.contains(&formula.replace('>', "&gt;")),
        "formula text: {formula}"
    );
    // W = 45 and T·R/C = 10·94/32 in the terms table.
    assert!(dom.contains("data-term=\"W\">45<"), "{dom}");
    assert!(dom.contains("data-term=\"T·R/C\">29.375<"), "{dom}");

    // The charts: B and each measured term with a line of ≥ 3 points, the
    // desired replicas; no ready pods (serve does not know them).
    for series in ["b", "w", "r", "desired"] {
        assert!(points(&dom, series) >= 3, "series {series}: {dom}");
    }
    assert_eq!(points(&dom, "ready") + points(&dom, "hpa"), 0);
    for label in [
        "B (the value KEDA gets)",
        "W (waiting)",
        "T·R/C (running)",
        "desired = ceil(B/T)",
    ] {
        assert!(dom.contains(label), "legend {label}");
    }
    let desired = trigger["desiredReplicas"].as_u64().expect("desired");
    assert!(
        dom.contains(&format!("data-desired=\"{desired}\"")),
        "{dom}"
    );

    let file = dir.path().join("ui.png");
    let (profile2, url2, file2) = (profile.clone(), url.clone(), file.clone());
    let size = tokio::task::spawn_blocking(move || screenshot(&profile2, &url2, &file2))
        .await
        .expect("join");
    assert_eq!(size, WINDOW);
    // Kept for a person to look at when the test is run with --nocapture.
    let kept = std::env::temp_dir().join("backlog-scaler-ui-test.png");
    std::fs::copy(&file, &kept).expect("copy");
    println!("screenshot kept at {}", kept.display());
    server.shutdown().await;
}

/// One row of the demo's live view: (t, B, desired, ready, starting).
fn demo_row(line: &str) -> Option<(u64, f64, u64, u64, u64)> {
    let cols: Vec<&str> = line.split_whitespace().collect();
    let t = cols.first()?.strip_suffix('s')?.parse().ok()?;
    let b = cols.get(3)?.parse().ok()?;
    let desired = cols.get(4)?.parse().ok()?;
    let (ready, starting) = match cols.get(5)?.split_once('+') {
        Some((r, s)) => (r.parse().ok()?, s.parse().ok()?),
        None => (cols[5].parse().ok()?, 0),
    };
    matches!(cols.get(6), Some(&"true" | &"false")).then_some((t, b, desired, ready, starting))
}

/// The demo's fleet follows the scaler: the ramp makes the HPA ask for more
/// pods, they are ready only after the cold start, the view shows desired
/// against ready, and `/ui` draws both lines.
#[test]
fn demo_fleet_follows_the_decisions_and_ui_draws_desired_and_ready() {
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--duration",
            "32",
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("demo starts");
    let lines = Arc::new(Mutex::new(Vec::<(Instant, String)>::new()));
    let reader = {
        let lines = lines.clone();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().expect("lock").push((Instant::now(), line));
            }
        })
    };
    let admin = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found =
                lines.lock().expect("lock").iter().find_map(|(_, l)| {
                    l.split("admin http://").nth(1).map(|a| a.trim().to_owned())
                });
            if let Some(a) = found {
                break a;
            }
            assert!(Instant::now() < deadline, "no banner from the demo");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    let browser = chromium();
    let dir = tempfile::tempdir().expect("tmp");
    let profile = dir.path().join("profile");
    let url = format!("http://{admin}/ui");
    let mut dom = String::new();
    if browser.is_some() {
        // Sample the page through the ramp: history accumulates in the profile.
        std::thread::sleep(Duration::from_secs(10));
        for _ in 0..5 {
            dom = dump_dom(&profile, &url, 1500);
            std::thread::sleep(Duration::from_millis(1500));
        }
    }
    let status = child.wait().expect("demo exits");
    reader.join().expect("reader");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    let out: Vec<String> = lines
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, l)| l.clone())
        .collect();
    let text = out.join("\n");
    assert!(status.success(), "{text}\n{stderr}");
    assert!(
        text.contains("cold start") && text.contains(&format!("watch http://{admin}/ui")),
        "{text}"
    );

    let rows: Vec<(u64, f64, u64, u64, u64)> = out.iter().filter_map(|l| demo_row(l)).collect();
    assert!(rows.len() >= 25, "expected a row a second:\n{text}");
    for &(_, b, desired, ready, starting) in &rows {
        // The HPA's rule: never below ceil(B/T) (scale-down waits), never above max.
        assert!(
            desired >= ((b / 10.0).ceil() as u64).clamp(1, 12) && desired <= 12,
            "{text}"
        );
        assert!(
            ready + starting == desired,
            "pods follow desired at once:\n{text}"
        );
    }
    // The ramp scales the fleet up; new pods are not ready at once...
    let first_up = out
        .iter()
        .position(|l| l.contains("starting, ready in 5 s"))
        .unwrap_or_else(|| panic!("no scale-up:\n{text}"));
    let first_ready = out
        .iter()
        .position(|l| l.contains(" ready (") && l.contains(" of "))
        .unwrap_or_else(|| panic!("no pod became ready:\n{text}"));
    let t_of = |i: usize| demo_row(&out[i]).map(|r| r.0).expect("row");
    let cold = t_of(first_ready) - t_of(first_up);
    assert!((4..=7).contains(&cold), "cold start {cold} s:\n{text}");
    assert!(
        rows.iter().any(|r| r.2 > r.3),
        "desired ahead of ready:\n{text}"
    );
    // ...and later the fleet catches up with more pods ready than at the
    // quiet start (1, after the first scale-down).
    let max_ready = rows.iter().map(|r| r.3).max().unwrap_or(0);
    assert!(max_ready >= 2, "ready pods never grew:\n{text}");

    if browser.is_some() {
        assert_eq!(
            attrs_after(&dom, "class=\"trigger\"", "data-trigger"),
            ["default/demo"],
            "{dom}"
        );
        for series in ["b", "desired", "hpa", "ready"] {
            assert!(points(&dom, series) >= 3, "series {series}: {dom}");
        }
        assert!(
            dom.contains("ready pods") && dom.contains("data-ready=\""),
            "{dom}"
        );
    }
}
