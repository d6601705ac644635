//! A vLLM-shaped `/metrics` body for the benches (`parser`, `scrape`):
//! `models` models, each with the gauges, counters and TTFT / e2e / ITL
//! histograms vLLM serves, numbers formatted as vLLM's Python client writes
//! them. Deterministic (a fixed xorshift), no dependency.

use std::fmt::Write as _;

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
pub fn vllm_body(models: usize) -> String {
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
