//! Hugging Face TGI's exposition: metrics-exporter-prometheus 0.15 behind the router's
//! `/metrics` route.
//!
//! Rules reproduced (signals.md §0, §4): no model label and no colon in names; counters are
//! `u64` (`42`) and written without `_total`; gauges and sums are `f64` written with Rust's
//! `Display` (`7`, `0.5`, `57.213`, never an exponent); histograms write buckets (cumulative
//! `u64`), `_sum`, `_count`; `le` bounds use `Display` too (`0.00015000000000000001`); HELP only
//! for described metrics (`tgi_request_failure` and `tgi_batch_max_total_tokens` have none);
//! counters, then gauges, then histograms (fixed order within each group here, a HashMap's in
//! TGI); **a blank line after every family**. A counter or histogram appears only once it has
//! been touched, i.e. after the first request; the gauges are always there.
//!
//! TGI serves one model, so every series of the state is summed (gauges, counters) or merged
//! (histograms). What maps to what: `tgi_queue_size` = waiting, `tgi_batch_current_size` =
//! running, `tgi_batch_current_max_tokens` = KV usage × [`TGI_MAX_BATCH_TOTAL_TOKENS`] (the
//! largest usage of any series), `tgi_request_count` = all finished requests,
//! `tgi_request_success` = those not aborted and not failed, `tgi_request_failure{err="dropped"}` =
//! aborted (client gone while queued), `{err="generation"}` = errors. Histograms: see
//! [`EngineHistograms`].

use std::fmt::Write as _;

use super::histogram::Histogram;
use super::state::{EngineHistograms, FinishReason, PodState};
use super::writer::push_label_value;

/// `tgi_batch_max_total_tokens` of the fake (what warm-up found room for).
pub const TGI_MAX_BATCH_TOTAL_TOKENS: f64 = 262_144.0;

struct Writer {
    out: String,
}

impl Writer {
    fn family(&mut self, name: &str, help: Option<&str>, kind: &str) {
        if let Some(help) = help {
            let _ = writeln!(self.out, "# HELP {name} {help}");
        }
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn end_family(&mut self) {
        self.out.push('\n');
    }

    fn sample(
        &mut self,
        name: &str,
        suffix: &str,
        label: Option<(&str, &str)>,
        value: impl std::fmt::Display,
    ) {
        self.out.push_str(name);
        if !suffix.is_empty() {
            self.out.push('_');
            self.out.push_str(suffix);
        }
        if let Some((k, v)) = label {
            self.out.push('{');
            self.out.push_str(k);
            self.out.push_str("=\"");
            push_label_value(&mut self.out, v);
            self.out.push_str("\"}");
        }
        let _ = writeln!(self.out, " {value}");
    }

    fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.family(name, Some(help), "histogram");
        let mut acc = 0u64;
        for (bound, n) in h.bounds().iter().zip(h.counts()) {
            acc += n;
            let le = bound.to_string();
            self.sample(name, "bucket", Some(("le", &le)), acc);
        }
        self.sample(name, "bucket", Some(("le", "+Inf")), h.count());
        self.sample(name, "sum", None, h.sum());
        self.sample(name, "count", None, h.count());
        self.end_family();
    }
}

/// Render TGI's `/metrics` body for `state`.
pub(crate) fn render(state: &PodState) -> String {
    let mut w = Writer {
        out: String::with_capacity(16 * 1024),
    };
    let (mut waiting, mut running, mut kv) = (0.0f64, 0.0f64, 0.0f64);
    let (mut ok, mut dropped, mut failed) = (0.0f64, 0.0f64, 0.0f64);
    let mut hist = EngineHistograms::default();
    for s in &state.series {
        waiting += s.load.waiting;
        running += s.load.running;
        kv = kv.max(s.load.kv_cache_usage);
        for reason in FinishReason::ALL {
            match reason {
                FinishReason::Abort => dropped += s.success(reason),
                FinishReason::Error => failed += s.success(reason),
                _ => ok += s.success(reason),
            }
        }
        hist.merge(&s.engine_histograms);
    }
    let count = |v: f64| v.max(0.0).round() as u64;

    // Counters.
    let total = count(ok + dropped + failed);
    if total > 0 {
        w.family(
            "tgi_request_count",
            Some("Total number of requests"),
            "counter",
        );
        w.sample("tgi_request_count", "", None, total);
        w.end_family();
    }
    if count(ok) > 0 {
        w.family(
            "tgi_request_success",
            Some("Number of successful requests"),
            "counter",
        );
        w.sample("tgi_request_success", "", None, count(ok));
        w.end_family();
    }
    if count(dropped) + count(failed) > 0 {
        w.family("tgi_request_failure", None, "counter");
        for (err, v) in [("dropped", dropped), ("generation", failed)] {
            if count(v) > 0 {
                w.sample("tgi_request_failure", "", Some(("err", err)), count(v));
            }
        }
        w.end_family();
    }

    // Gauges (f64).
    for (name, help, v) in [
        ("tgi_queue_size", Some("Current queue size"), waiting),
        (
            "tgi_batch_current_size",
            Some("Current batch size"),
            running,
        ),
        (
            "tgi_batch_current_max_tokens",
            Some("Maximum tokens for the current batch"),
            (kv * TGI_MAX_BATCH_TOTAL_TOKENS).round(),
        ),
        (
            "tgi_batch_max_total_tokens",
            None,
            TGI_MAX_BATCH_TOTAL_TOKENS,
        ),
    ] {
        w.family(name, help, "gauge");
        w.sample(name, "", None, v);
        w.end_family();
    }

    // Histograms, once observed.
    type HistogramOf = fn(&EngineHistograms) -> &Histogram;
    let histograms: [(&str, &str, HistogramOf); 7] = [
        (
            "tgi_request_duration",
            "Total time spent processing the request",
            |h| &h.tgi_request_duration,
        ),
        (
            "tgi_request_validation_duration",
            "Time spent validating the request",
            |h| &h.tgi_validation_duration,
        ),
        (
            "tgi_request_queue_duration",
            "Time spent in the queue per request",
            |h| &h.tgi_queue_duration,
        ),
        (
            "tgi_request_inference_duration",
            "Request inference duration",
            |h| &h.tgi_inference_duration,
        ),
        (
            "tgi_request_mean_time_per_token_duration",
            "Mean time per token per request",
            |h| &h.tgi_mean_time_per_token,
        ),
        (
            "tgi_request_input_length",
            "Input token length per request",
            |h| &h.tgi_input_length,
        ),
        (
            "tgi_request_generated_tokens",
            "Generated tokens per request",
            |h| &h.tgi_generated_tokens,
        ),
    ];
    for (name, help, get) in histograms {
        let h = get(&hist);
        if h.count() > 0 {
            w.histogram(name, help, h);
        }
    }
    w.out
}
