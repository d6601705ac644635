//! Throughput of `source::prom_text` on a vLLM-shaped `/metrics` body, against
//! `prom_text_format_parser` and a values-only line-split baseline.
//!
//! Run with `cargo bench --bench parser`. `PARSER_BENCH_MODELS` (default 60) sets the number
//! of models in the body and `PARSER_BENCH_SECS` (default 2.5) the measuring time per case.
//! Timing is best-of and median over single full-body iterations after a warm-up; std only,
//! so the numbers do not depend on a benchmark framework's statistics.

use std::hint::black_box;
use std::time::{Duration, Instant};

use backlog_scaler::source::prom_text;

/// Deterministic values without a dependency.
#[path = "common/vllm_body.rs"]
mod vllm_body;
use vllm_body::vllm_body;

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
