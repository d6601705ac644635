//! Throughput of `source::prom_text` on a vLLM-shaped `/metrics` body, against
//! `prom_text_format_parser` and a values-only line-split baseline.
//!
//! Run with `cargo bench --bench parser`. `PARSER_BENCH_MODELS` (default 60) sets the number
//! of models in the body and `PARSER_BENCH_SECS` (default 2.5) the measuring time per case.
//! Timing is best-of and median over single full-body iterations after a warm-up; std only,
//! so the numbers do not depend on a benchmark framework's statistics.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use backlog_scaler::source::prom_text;

/// Deterministic values without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> f64 {
        (self.next() % n) as f64
    }
}

/// Python `repr(float)` as `prometheus_client.utils.floatToGoString` rewrites it, which is
/// what vLLM serves: `3.0`, `0.001`, `1.234567e+06`, `1.7563046412320957e+09`.
fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let s = format!("{v:?}");
    match (s.find('.'), s.get(..1), s.split_once('.')) {
        (Some(dot), Some(first), Some((int, frac))) if v > 0.0 && dot > 6 && !s.contains('e') => {
            let mantissa = format!("{first}.{}{frac}", int.get(1..).unwrap_or_default());
            let mantissa = mantissa.trim_end_matches(['0', '.']);
            format!("{mantissa}e+0{}", dot - 1)
        }
        _ => s,
    }
}

const TTFT: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const E2E: [f64; 22] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0, 15360.0,
];
const ITL: [f64; 22] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 320.0, 640.0,
];

/// A vLLM `/metrics` body in `client_python`'s layout: one HELP/TYPE block per family with
/// every model's series in it, counters exposed as `_total`, `_created` split out into
/// their own gauge family, labels sorted (so `le` sits between `engine` and `model_name`).
fn vllm_body(models: usize) -> String {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut out = String::with_capacity(models * 9 * 1024);
    let model = |m: usize| format!("llama-3-8b-{m:02}");
    let family = |out: &mut String, name: &str, kind: &str| {
        let _ = writeln!(
            out,
            "# HELP {name} vLLM metric {name}.\n# TYPE {name} {kind}"
        );
    };

    for (gauge, max) in [
        ("vllm:num_requests_running", 256),
        ("vllm:num_requests_waiting", 1024),
        ("vllm:kv_cache_usage_perc", 0),
    ] {
        family(&mut out, gauge, "gauge");
        for m in 0..models {
            let v = if max == 0 {
                rng.below(10_000) / 10_000.0
            } else {
                rng.below(max)
            };
            let _ = writeln!(
                out,
                "{gauge}{{engine=\"0\",model_name=\"{}\"}} {}",
                model(m),
                go_float(v)
            );
        }
    }

    let counters: [(&str, &[&str]); 4] = [
        ("vllm:num_preemptions", &[""]),
        ("vllm:prompt_tokens", &[""]),
        ("vllm:generation_tokens", &[""]),
        ("vllm:request_success", &["length", "stop", "abort"]),
    ];
    for (counter, reasons) in counters {
        let label = |m: usize, reason: &str| {
            if reason.is_empty() {
                format!("engine=\"0\",model_name=\"{}\"", model(m))
            } else {
                format!(
                    "engine=\"0\",finished_reason=\"{reason}\",model_name=\"{}\"",
                    model(m)
                )
            }
        };
        family(&mut out, &format!("{counter}_total"), "counter");
        for m in 0..models {
            for reason in reasons {
                let v = rng.below(90_000_000) + 1.0;
                let _ = writeln!(
                    out,
                    "{counter}_total{{{}}} {}",
                    label(m, reason),
                    go_float(v)
                );
            }
        }
        family(&mut out, &format!("{counter}_created"), "gauge");
        for m in 0..models {
            for reason in reasons {
                let created = 1_756_304_641.232_095_7 + m as f64 * 0.25;
                let _ = writeln!(
                    out,
                    "{counter}_created{{{}}} {}",
                    label(m, reason),
                    go_float(created)
                );
            }
        }
    }

    for (hist, bounds) in [
        ("vllm:time_to_first_token_seconds", &TTFT),
        ("vllm:e2e_request_latency_seconds", &E2E),
        ("vllm:inter_token_latency_seconds", &ITL),
    ] {
        family(&mut out, hist, "histogram");
        for m in 0..models {
            let mut cumulative = 0.0;
            for le in bounds {
                cumulative += rng.below(400);
                let _ = writeln!(
                    out,
                    "{hist}_bucket{{engine=\"0\",le=\"{}\",model_name=\"{}\"}} {}",
                    go_float(*le),
                    model(m),
                    go_float(cumulative)
                );
            }
            cumulative += rng.below(3);
            let _ = writeln!(
                out,
                "{hist}_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{}\"}} {}",
                model(m),
                go_float(cumulative)
            );
            let _ = writeln!(
                out,
                "{hist}_count{{engine=\"0\",model_name=\"{}\"}} {}",
                model(m),
                go_float(cumulative)
            );
            let sum = cumulative * 0.173 + rng.below(1 << 20) / 1024.0;
            let _ = writeln!(
                out,
                "{hist}_sum{{engine=\"0\",model_name=\"{}\"}} {}",
                model(m),
                go_float(sum)
            );
        }
        family(&mut out, &format!("{hist}_created"), "gauge");
        for m in 0..models {
            let _ = writeln!(
                out,
                "{hist}_created{{engine=\"0\",model_name=\"{}\"}} {}",
                model(m),
                go_float(1_756_304_641.5 + m as f64)
            );
        }
    }
    out
}

const TRIGGER_FAMILIES: [&str; 4] = [
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds_bucket",
];

struct Measured {
    best: Duration,
    median: Duration,
    iterations: usize,
    samples: usize,
}

/// Runs `f` (one full pass over the body, returning the samples it produced) repeatedly and
/// keeps per-iteration times; best-of shows what the code can do, median what it usually does
/// on a shared 2-core machine.
fn measure(budget: Duration, mut f: impl FnMut() -> usize) -> Measured {
    let warm_up = Instant::now();
    while warm_up.elapsed() < budget / 8 {
        black_box(f());
    }
    let mut times = Vec::new();
    let mut samples = 0;
    let start = Instant::now();
    while start.elapsed() < budget || times.len() < 20 {
        let t = Instant::now();
        samples = black_box(f());
        times.push(t.elapsed());
    }
    times.sort_unstable();
    Measured {
        best: times.first().copied().unwrap_or_default(),
        median: times.get(times.len() / 2).copied().unwrap_or_default(),
        iterations: times.len(),
        samples,
    }
}

fn report(case: &str, body_len: usize, m: &Measured) {
    let mbps = |d: Duration| body_len as f64 / d.as_secs_f64() / 1e6;
    let ns_per_sample = |d: Duration| d.as_nanos() as f64 / m.samples.max(1) as f64;
    println!(
        "{case:<44} {:>8} {:>9.0} {:>9.0} {:>9.1} {:>9.1} {:>8.1} {:>7}",
        m.samples,
        mbps(m.best),
        mbps(m.median),
        ns_per_sample(m.best),
        ns_per_sample(m.median),
        m.median.as_secs_f64() * 1e6,
        m.iterations,
    );
}

fn main() {
    let models = std::env::var("PARSER_BENCH_MODELS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60usize);
    let secs = std::env::var("PARSER_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.5f64);
    let budget = Duration::from_secs_f64(secs);
    let body = vllm_body(models);
    let sample_lines = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();

    let (_, check) = prom_text::parse_all(&body);
    assert_eq!(
        check.malformed_lines, 0,
        "generator produced bad text: {check:?}"
    );
    assert_eq!(check.samples, sample_lines);

    println!(
        "body: {models} models, {} bytes ({:.1} KB), {} lines, {sample_lines} sample lines",
        body.len(),
        body.len() as f64 / 1024.0,
        body.lines().count()
    );
    println!(
        "{:<44} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}",
        "case", "samples", "MB/s best", "MB/s med", "ns/s best", "ns/s med", "us med", "iters"
    );

    type Case<'b> = (&'static str, Box<dyn FnMut() -> usize + 'b>);
    let cases: Vec<Case<'_>> = vec![
        (
            "prom_text full parse, every label read",
            Box::new(|| {
                let mut acc = 0usize;
                let mut sum = 0.0;
                let stats = prom_text::parse(
                    black_box(&body),
                    |_| true,
                    |s| {
                        sum += s.value;
                        for (k, v) in s.labels() {
                            acc += k.len() + v.len();
                        }
                    },
                );
                black_box((acc, sum));
                stats.samples
            }),
        ),
        (
            "prom_text full parse, labels not read",
            Box::new(|| {
                let mut sum = 0.0;
                let stats = prom_text::parse(black_box(&body), |_| true, |s| sum += s.value);
                black_box(sum);
                stats.samples
            }),
        ),
        (
            "prom_text trigger families only (4), labels",
            Box::new(|| {
                let mut acc = 0usize;
                let mut sum = 0.0;
                let stats = prom_text::parse(
                    black_box(&body),
                    |name| TRIGGER_FAMILIES.contains(&name),
                    |s| {
                        sum += s.value;
                        // What a trigger reads: which model, and which bucket.
                        for (k, v) in s.labels() {
                            if k == "model_name" || k == "le" {
                                acc += v.len();
                            }
                        }
                    },
                );
                black_box((acc, sum));
                stats.samples
            }),
        ),
        (
            "prom_text_format_parser 0.1 full parse",
            Box::new(|| {
                let (metrics, err) = prom_text_format_parser::parse_scrape(black_box(&body));
                black_box(&err);
                metrics.iter().map(|m| m.samples.len()).sum()
            }),
        ),
        (
            "baseline: lines() + rsplit + f64 parse",
            Box::new(|| {
                let mut n = 0usize;
                let mut sum = 0.0;
                for line in black_box(&body).lines() {
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    if let Some(v) = line
                        .rsplit_once(' ')
                        .and_then(|(_, v)| v.parse::<f64>().ok())
                    {
                        sum += v;
                        n += 1;
                    }
                }
                black_box(sum);
                n
            }),
        ),
    ];

    // `cargo bench --bench parser -- trigger` runs only cases whose name contains "trigger".
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mut medians = Vec::new();
    for (case, mut run) in cases {
        if !filters.is_empty() && !filters.iter().any(|f| case.contains(f.as_str())) {
            continue;
        }
        let m = measure(budget, &mut run);
        report(case, body.len(), &m);
        medians.push((case, m.median));
    }

    let median_of = |prefix: &str| {
        medians
            .iter()
            .find(|(case, _)| case.starts_with(prefix))
            .map(|(_, d)| d.as_secs_f64())
    };
    if let Some(reference) = median_of("prom_text_format_parser") {
        for (case, median) in &medians {
            if case.starts_with("prom_text ") {
                println!(
                    "median speedup vs prom_text_format_parser: {:.1}x  ({case})",
                    reference / median.as_secs_f64()
                );
            }
        }
    }
}
