//! prometheus_client's classic text writer, which vLLM and SGLang (both Python) share, and the
//! label-value escaper every fake engine's writer shares.

use super::format::{format_float, write_float};
use super::histogram::Histogram;

/// One exposition body being written, family by family.
pub(super) struct Writer {
    pub(super) out: String,
}

/// Append a label value escaped as the text format requires (`\\`, `\"`,
/// `\n`); every client library the fixtures imitate escapes the same three.
pub(super) fn push_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl Writer {
    pub(super) fn header(&mut self, name: &str, suffix: &str, help: &str, kind: &str) {
        self.out.push_str("# HELP ");
        self.out.push_str(name);
        self.out.push_str(suffix);
        self.out.push(' ');
        for c in help.chars() {
            match c {
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                c => self.out.push(c),
            }
        }
        self.out.push_str("\n# TYPE ");
        self.out.push_str(name);
        self.out.push_str(suffix);
        self.out.push(' ');
        self.out.push_str(kind);
        self.out.push('\n');
    }

    /// One sample line; `labels` must already be sorted by name, as `sorted(labels.items())` is.
    pub(super) fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], value: f64) {
        debug_assert!(
            labels.windows(2).all(|w| w[0].0 < w[1].0),
            "unsorted labels {labels:?}"
        );
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                push_label_value(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        write_float(&mut self.out, value);
        self.out.push('\n');
    }

    /// Buckets, `_count`, `_sum` of one histogram child; `before` holds the labels sorting
    /// before `le` and `after` those sorting after it.
    pub(super) fn histogram(
        &mut self,
        name: &str,
        h: &Histogram,
        les: &[String],
        before: &[(&str, &str)],
        after: &[(&str, &str)],
    ) {
        let mut labels: Vec<(&str, &str)> = Vec::with_capacity(before.len() + after.len() + 1);
        let mut acc = 0.0;
        for (le, count) in les
            .iter()
            .map(String::as_str)
            .chain(["+Inf"])
            .zip(h.counts())
        {
            acc += *count as f64;
            labels.clear();
            labels.extend_from_slice(before);
            labels.push(("le", le));
            labels.extend_from_slice(after);
            self.sample(name, "_bucket", &labels, acc);
        }
        labels.clear();
        labels.extend_from_slice(before);
        labels.extend_from_slice(after);
        self.sample(name, "_count", &labels, acc);
        self.sample(name, "_sum", &labels, h.sum());
    }
}

/// The `le` label of each bound, spelled as Python's `floatToGoString` spells it.
pub(super) fn bound_labels(bounds: &[f64]) -> Vec<String> {
    bounds.iter().map(|b| format_float(*b)).collect()
}
