//! CPU per pod scrape: the poller's own read path against fake vLLM pods on 127.0.0.1 over
//! keep-alive HTTP/1.1, for a ~60 KB and a ~500 KB body, and what asking for gzip would cost.
//!
//! Run with `nice -n 5 cargo bench --bench scrape` (release profile). ~30 s with the defaults.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `SCRAPE_SECS` | 3 | measuring time per case |
//! | `SCRAPE_PODS` | 4 | pods (URLs) in one reading |
//! | `SCRAPE_CONCURRENCY` | 2 | readings in flight at once |
//! | `SCRAPE_SMALL_MODELS` | 7 | models in the small body (~60 KB) |
//! | `SCRAPE_LARGE_MODELS` | 60 | models in the large body (~518 KB) |
//!
//! # What it measures
//!
//! The pods are served by a child process (this same binary re-run with `SCRAPE_BENCH_SERVE`),
//! so the CPU time of this process (`/proc/self/stat` utime + stime, all threads) is the
//! scaler side only; the server's is read from `/proc/<child>/stat` and shown apart.
//!
//! - `read_pods`: [`EngineSource::read_pods`], what the poller calls (`runtime/retry.rs`):
//!   resolve the static targets, the outbound check, one task per pod, `HttpScraper::get_text`
//!   (the scaler's keep-alive reqwest client, body cap, UTF-8 check) and `parse_pod` (the
//!   exposition parser plus the signal selection for `modelName`).
//! - `get_text`: the fetch alone (`HttpScraper::get_text`), no parse.
//! - `parse_pod`: the parse alone, in one thread, on the body in memory.
//! - `gzip fetch`: the crate's reqwest has no `gzip` feature, so the scaler cannot ask for gzip
//!   today. This case sends `Accept-Encoding: gzip` from a reqwest client built as the
//!   scaler's is and reads the compressed body (what the transfer would cost).
//! - `inflate`: decoding the gzip body, timed by Python's `zlib` (zlib 1.2/1.3, C) in a child
//!   process (`time.process_time`), since no gzip decoder is in the Rust dependency tree and
//!   the bench adds none. reqwest's `gzip` feature would decode with flate2's default
//!   miniz_oxide backend, not faster than zlib, so this is a lower bound.
//!
//! Keep-alive is checked, not assumed: the server counts the TCP connections it accepted.

use std::fmt::Write as _;
use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog_scaler::source::{Engine, EngineSource, HttpScraper, ScrapeTarget, SourceContext};

const SERVE_ENV: &str = "SCRAPE_BENCH_SERVE";

/// Deterministic values without a dependency.
#[path = "common/vllm_body.rs"]
mod vllm_body;
use vllm_body::vllm_body;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `gzip -6 -n` (the default level; no name or time stamp, so the bytes are the same on every
/// run and in both processes).
fn gzip(body: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .args(["-6", "-n", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip runs");
    let mut stdin = child.stdin.take().expect("gzip stdin");
    let input = body.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("gzip output");
    writer.join().expect("writer").expect("gzip stdin written");
    assert!(out.status.success(), "gzip failed");
    out.stdout
}

struct Bodies {
    small: String,
    large: String,
    small_gz: Vec<u8>,
    large_gz: Vec<u8>,
}

impl Bodies {
    fn new() -> Bodies {
        let small = vllm_body(env_or("SCRAPE_SMALL_MODELS", 7));
        let large = vllm_body(env_or("SCRAPE_LARGE_MODELS", 60));
        let small_gz = gzip(small.as_bytes());
        let large_gz = gzip(large.as_bytes());
        Bodies {
            small,
            large,
            small_gz,
            large_gz,
        }
    }
}

/// The fake pods: `/{small|large}/{identity|gzip}/{pod}/metrics`, and `/connections` (TCP
/// connections accepted so far). Prints its port, serves until its stdin closes.
fn serve() {
    let bodies = Bodies::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("server runtime");
    runtime.block_on(async move {
        use axum::body::Bytes;
        use axum::http::{StatusCode, Uri, header};
        use axum::response::{IntoResponse, Response};
        use axum::serve::ListenerExt as _;

        let small = Bytes::from(bodies.small.into_bytes());
        let large = Bytes::from(bodies.large.into_bytes());
        let small_gz = Bytes::from(bodies.small_gz);
        let large_gz = Bytes::from(bodies.large_gz);
        let accepted = Arc::new(AtomicU64::new(0));
        let counter = accepted.clone();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = tcp.local_addr().expect("addr").port();
        let listener = tcp.tap_io(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        println!("{port}");
        let handler = move |uri: Uri| {
            let pick = |path: &str| -> Option<(Bytes, bool)> {
                let mut parts = path.trim_start_matches('/').split('/');
                let size = parts.next()?;
                let encoding = parts.next()?;
                Some(match (size, encoding) {
                    ("small", "identity") => (small.clone(), false),
                    ("large", "identity") => (large.clone(), false),
                    ("small", "gzip") => (small_gz.clone(), true),
                    ("large", "gzip") => (large_gz.clone(), true),
                    _ => return None,
                })
            };
            let response: Response = if uri.path() == "/connections" {
                accepted.load(Ordering::Relaxed).to_string().into_response()
            } else {
                match pick(uri.path()) {
                    Some((body, true)) => (
                        [
                            (
                                header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            ),
                            (header::CONTENT_ENCODING, "gzip"),
                        ],
                        body,
                    )
                        .into_response(),
                    Some((body, false)) => (
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        body,
                    )
                        .into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            };
            async move { response }
        };
        let app = axum::Router::new().fallback(handler);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        // The parent closes our stdin (or dies): stop.
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            let _ = std::io::stdin().read_line(&mut sink);
        })
        .await;
    });
}

/// CPU seconds (user + system, every thread) of a process, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: &str, tick: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3, utime field 14, stime field 15.
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(14) + ticks(15)) / tick
}

fn clock_tick() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

struct Meter {
    tick: f64,
    server_pid: String,
}

struct Measured {
    scrapes: u64,
    wall: f64,
    cpu: f64,
    server_cpu: f64,
}

impl Measured {
    fn per_core(&self) -> f64 {
        self.scrapes as f64 / self.cpu
    }

    fn us_per_scrape(&self) -> f64 {
        self.cpu / self.scrapes as f64 * 1e6
    }
}

type Job = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = u64> + Send>> + Send + Sync>;

impl Meter {
    fn start(&self) -> (Instant, f64, f64) {
        (
            Instant::now(),
            cpu_seconds("self", self.tick),
            cpu_seconds(&self.server_pid, self.tick),
        )
    }

    fn stop(&self, start: (Instant, f64, f64), scrapes: u64) -> Measured {
        Measured {
            scrapes,
            wall: start.0.elapsed().as_secs_f64(),
            cpu: cpu_seconds("self", self.tick) - start.1,
            server_cpu: cpu_seconds(&self.server_pid, self.tick) - start.2,
        }
    }

    /// `concurrency` loops running `job` (which returns the pod scrapes it did) for `secs`.
    async fn run(&self, secs: f64, concurrency: usize, job: Job) -> Measured {
        // Warm-up: connections opened, buffers grown.
        for _ in 0..3 {
            job().await;
        }
        let start = self.start();
        let deadline = start.0 + Duration::from_secs_f64(secs);
        let mut loops = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let job = job.clone();
            loops.spawn(async move {
                let mut n = 0;
                while Instant::now() < deadline {
                    n += job().await;
                }
                n
            });
        }
        let mut scrapes = 0;
        while let Some(n) = loops.join_next().await {
            scrapes += n.expect("loop");
        }
        self.stop(start, scrapes)
    }
}

fn row(case: &str, wire: usize, m: &Measured) {
    println!(
        "{case:<34} {wire:>9} {:>8} {:>9.0} {:>7.2} {:>10.0} {:>9.1} {:>10.1}",
        m.scrapes,
        m.scrapes as f64 / m.wall,
        m.cpu,
        m.per_core(),
        m.us_per_scrape(),
        m.server_cpu / m.scrapes as f64 * 1e6,
    );
}

/// Python's zlib inflate of `gz`, CPU µs per body (None without python3).
fn inflate_us(gz: &[u8], expect_len: usize, secs: f64) -> Option<f64> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("body.gz");
    std::fs::write(&path, gz).ok()?;
    let script = format!(
        "import sys,time,zlib\n\
         d=open(sys.argv[1],'rb').read()\n\
         assert len(zlib.decompress(d,31))=={expect_len}\n\
         n=0;t0=time.process_time()\n\
         while time.process_time()-t0<{secs}:\n  zlib.decompress(d,31);n+=1\n\
         print((time.process_time()-t0)/n*1e6)\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .arg(&path)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

fn main() {
    if std::env::var_os(SERVE_ENV).is_some() {
        serve();
        return;
    }
    let secs: f64 = env_or("SCRAPE_SECS", 3.0);
    let pods: usize = env_or("SCRAPE_PODS", 4);
    let concurrency: usize = env_or("SCRAPE_CONCURRENCY", 2);
    let bodies = Bodies::new();

    let mut server = Command::new(std::env::current_exe().expect("own path"))
        .env(SERVE_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("server starts");
    let port: u16 = {
        use std::io::BufRead as _;
        let stdout = server.stdout.take().expect("server stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("port line");
        line.trim().parse().expect("port")
    };
    let meter = Meter {
        tick: clock_tick(),
        server_pid: server.id().to_string(),
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "machine: {cores} cores; client: tokio multi-thread, 2 workers; server: another process, 1 thread"
    );
    println!(
        "{pods} pods per reading, {concurrency} readings in flight, {secs} s per case, HTTP/1.1 keep-alive on 127.0.0.1"
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("client runtime");
    let base = format!("http://127.0.0.1:{port}");
    let scraper = HttpScraper::new(
        Duration::from_secs(5),
        backlog_scaler::source::http::DEFAULT_MAX_RESPONSE_BYTES,
    )
    .expect("client");
    let ctx = Arc::new(SourceContext::new(scraper.clone()).expect("context"));
    // Built as `HttpScraper::with_outbound` builds the scaler's (no resolver: IP literals).
    let raw = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent("backlog-scaler-bench")
        .build()
        .expect("raw client");

    let mut summary = Vec::new();
    println!(
        "{:<34} {:>9} {:>8} {:>9} {:>7} {:>10} {:>9} {:>10}",
        "case", "body B", "scrapes", "wall/s", "CPU s", "/s per core", "CPU us", "server us"
    );
    for (size, body, gz) in [
        ("small", &bodies.small, &bodies.small_gz),
        ("large", &bodies.large, &bodies.large_gz),
    ] {
        let kb = body.len() as f64 / 1024.0;
        let source = Arc::new(EngineSource {
            engine: Engine::Vllm,
            targets: (0..pods)
                .map(|p| {
                    ScrapeTarget::parse(&format!("{base}/{size}/identity/{p}/metrics"))
                        .expect("target")
                })
                .collect(),
            model_name: Some("llama-3-8b-00".to_owned()),
            prometheus: None,
            requires: Default::default(),
        });
        // The reading is right before it is timed.
        let check = runtime
            .block_on(source.read_pods(&ctx, Duration::from_secs(5)))
            .expect("reading");
        assert!(check.failed.is_empty(), "{:?}", check.failed);
        assert_eq!(check.reading.pods.len(), pods);
        assert!(check.reading.pods.iter().all(|p| p.ttft.is_some()));

        let connections = |runtime: &tokio::runtime::Runtime| -> u64 {
            runtime.block_on(async {
                raw.get(format!("{base}/connections"))
                    .send()
                    .await
                    .expect("connections")
                    .text()
                    .await
                    .expect("text")
                    .parse()
                    .expect("count")
            })
        };

        let before = connections(&runtime);
        let job: Job = {
            let (source, ctx) = (source.clone(), ctx.clone());
            Arc::new(move || {
                let (source, ctx) = (source.clone(), ctx.clone());
                Box::pin(async move {
                    let read = source
                        .read_pods(&ctx, Duration::from_secs(5))
                        .await
                        .expect("reading");
                    assert!(read.failed.is_empty());
                    read.reading.pods.len() as u64
                })
            })
        };
        let read = runtime.block_on(meter.run(secs, concurrency, job));
        let opened = connections(&runtime) - before;
        row(&format!("{size} {kb:.0} KB read_pods"), body.len(), &read);

        let url: reqwest::Url = format!("{base}/{size}/identity/0/metrics")
            .parse()
            .expect("url");
        let job: Job = {
            let (scraper, url) = (scraper.clone(), url.clone());
            Arc::new(move || {
                let (scraper, url) = (scraper.clone(), url.clone());
                Box::pin(async move {
                    let text = scraper.get_text(&url).await.expect("body");
                    std::hint::black_box(text.len());
                    1
                })
            })
        };
        let fetch = runtime.block_on(meter.run(secs, concurrency * pods, job));
        row(&format!("{size} {kb:.0} KB get_text"), body.len(), &fetch);

        let gz_url = format!("{base}/{size}/gzip/0/metrics");
        let gz_len = gz.len();
        let job: Job = {
            let (raw, gz_url) = (raw.clone(), gz_url.clone());
            Arc::new(move || {
                let (raw, gz_url) = (raw.clone(), gz_url.clone());
                Box::pin(async move {
                    let mut response = raw
                        .get(&gz_url)
                        .header("accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
                        .header("accept-encoding", "gzip")
                        .send()
                        .await
                        .expect("gzip response");
                    let mut bytes = Vec::new();
                    while let Some(chunk) = response.chunk().await.expect("chunk") {
                        bytes.extend_from_slice(&chunk);
                    }
                    assert_eq!(bytes.len(), gz_len);
                    1
                })
            })
        };
        let gz_fetch = runtime.block_on(meter.run(secs, concurrency * pods, job));
        row(&format!("{size} {kb:.0} KB gzip fetch"), gz_len, &gz_fetch);

        let start = meter.start();
        let mut parses = 0u64;
        while start.0.elapsed().as_secs_f64() < secs {
            let (pod, _) = source
                .parse_pod("http://127.0.0.1/metrics", std::hint::black_box(body))
                .expect("parse");
            std::hint::black_box(pod);
            parses += 1;
        }
        let parse = meter.stop(start, parses);
        row(&format!("{size} {kb:.0} KB parse_pod"), body.len(), &parse);

        let inflate = inflate_us(gz, body.len(), secs.min(2.0));
        match inflate {
            Some(us) => println!(
                "{:<34} {gz_len:>9} {:>8} {:>9} {:>7} {:>10.0} {us:>9.1}",
                format!("{size} {kb:.0} KB inflate (zlib)"),
                "-",
                "-",
                "-",
                1e6 / us
            ),
            None => println!("{size}: inflate not measured (no python3 with zlib)"),
        }
        let mut line = format!(
            "{size} {kb:.0} KB: read_pods {:.1} us/scrape ({:.0}/s per core, {} connections opened for {} scrapes)",
            read.us_per_scrape(),
            read.per_core(),
            opened,
            read.scrapes
        );
        if let Some(us) = inflate {
            let gz_total = gz_fetch.us_per_scrape() + us + parse.us_per_scrape();
            let id_total = fetch.us_per_scrape() + parse.us_per_scrape();
            let _ = write!(
                line,
                "; identity fetch+parse {id_total:.1} us vs gzip fetch+inflate+parse {gz_total:.1} us ({:+.0} %), wire {} -> {} B ({:.1}x smaller)",
                (gz_total / id_total - 1.0) * 100.0,
                body.len(),
                gz_len,
                body.len() as f64 / gz_len as f64
            );
        }
        summary.push(line);
    }
    for line in summary {
        println!("{line}");
    }
    drop(server.stdin.take());
    let _ = server.wait();
}
