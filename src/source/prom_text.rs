//! Streaming parser for the Prometheus text exposition format (classic 0.0.4 and
//! OpenMetrics 1.0 as `prometheus_client` / `client_python` write it).
//!
//! The scaler scrapes vLLM `/metrics` on every KEDA poll and only needs a handful of
//! families out of a body that is hundreds of KB with many models loaded, so the parser is
//! built around two ideas:
//!
//! * the caller decides per sample name (`wants`) before anything else on the line is
//!   looked at, and a rejected line costs a name scan plus a `memchr` to the next newline;
//! * nothing is allocated: a [`Sample`] borrows its name and its raw label text from the
//!   body, and labels are only split and unescaped when the caller iterates them.
//!
//! It is hand-written rather than taken from crates.io because, when this was decided
//! (see `docs/decisions/0001-own-prometheus-text-parser.md`), `prometheus-parse` silently
//! dropped every name containing `:` (all of vLLM's `vllm:*`), `openmetrics-parser` is LGPL
//! and rejects vLLM output, and `prom_text_format_parser` is correct but allocates per
//! label and runs several times slower than the scrape budget wants.
//!
//! Bad input is never fatal: a line that cannot be parsed is counted in
//! [`ParseStats::malformed_lines`] and parsing continues with the next line. A scrape
//! target that serves an HTML error page or a truncated body therefore yields whatever
//! samples were readable plus a diagnostic, not a panic or an aborted scrape.
//!
//! Deliberate simplifications, none of which matter for the exporters we scrape:
//! `# HELP`/`# TYPE`/`# UNIT` are skipped rather than checked against the samples (callers
//! match on full sample names such as `..._bucket`); label names may contain `:` like
//! metric names; an integer timestamp is always read as classic milliseconds, a
//! fractional one as OpenMetrics seconds; OpenMetrics exemplars (`# {..} v`) are ignored;
//! Prometheus 3 quoted names (`{"my.metric","label.name"="v"}`) are accepted unless the
//! quoted name itself contains an escape, which would need an owned name.

use std::borrow::Cow;

use memchr::memchr;

/// One sample line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<'a> {
    /// Full sample name, e.g. `vllm:time_to_first_token_seconds_bucket`.
    pub name: &'a str,
    /// Label text between `{` and `}` (exclusive), validated but not split; `""` when
    /// there are no labels. For the quoted-name form `{"name",a="b"}` it is the text after
    /// the name's comma.
    raw_labels: &'a str,
    /// Sample value; `NaN` and `±Inf` are kept as such.
    pub value: f64,
    /// Timestamp in milliseconds since the epoch, if the line had one (OpenMetrics seconds
    /// are converted).
    pub timestamp_ms: Option<i64>,
}

impl<'a> Sample<'a> {
    /// Iterates the labels in the order they appear, escapes resolved.
    pub fn labels(&self) -> Labels<'a> {
        Labels {
            rest: self.raw_labels,
        }
    }

    /// The first label called `name`.
    pub fn label(&self, name: &str) -> Option<Cow<'a, str>> {
        // Compare names before unescaping so that only the hit can pay for `Cow::Owned`.
        let mut rest = self.raw_labels;
        while let Some((label, next)) = next_label(rest) {
            if label.name == name {
                return Some(label.value());
            }
            rest = next;
        }
        None
    }

    /// The unparsed label text; cheap to hash or compare when grouping series (for example
    /// histogram buckets of one series share everything but `le`).
    pub fn raw_labels(&self) -> &'a str {
        self.raw_labels
    }
}

/// Iterator over a sample's labels as `(name, value)`, see [`Sample::labels`].
#[derive(Debug, Clone)]
pub struct Labels<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Labels<'a> {
    type Item = (&'a str, Cow<'a, str>);

    fn next(&mut self) -> Option<Self::Item> {
        match next_label(self.rest) {
            Some((label, rest)) => {
                self.rest = rest;
                Some((label.name, label.value()))
            }
            None => {
                // Fuse, so a caller polling past the end never rescans.
                self.rest = "";
                None
            }
        }
    }
}

/// Counters describing one [`parse`] run.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ParseStats {
    /// Samples handed to the callback.
    pub samples: usize,
    /// Sample lines skipped because `wants` returned false.
    pub skipped: usize,
    /// Lines that could not be parsed (never fatal).
    pub malformed_lines: usize,
    /// The first malformed line, for logging.
    pub first_error: Option<LineError>,
    /// OpenMetrics `# EOF` seen (parsing stops there).
    pub saw_eof: bool,
}

/// Why a line was counted as malformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong, e.g. `"unterminated label set"`.
    pub reason: &'static str,
}

/// Parse `body`, calling `wants(sample_name)` before labels/values are parsed (return
/// false to skip the line cheaply), then `on_sample` for every accepted, well-formed
/// sample. Never panics on any input.
///
/// A line whose name is rejected by `wants` is counted as skipped even if the rest of it is
/// garbage: not looking at the rest is the point of the fast path.
pub fn parse<'a, W, S>(body: &'a str, mut wants: W, mut on_sample: S) -> ParseStats
where
    W: FnMut(&str) -> bool,
    S: FnMut(Sample<'a>),
{
    let mut stats = ParseStats::default();
    let bytes = body.as_bytes();
    let mut start = 0usize;
    let mut line_no = 0usize;
    let mut prev_name = "";
    while start < bytes.len() {
        let end = match memchr(b'\n', bytes.get(start..).unwrap_or_default()) {
            Some(offset) => start + offset,
            None => bytes.len(),
        };
        line_no += 1;
        // `start` and `end` sit next to `\n` bytes or at the ends of the body, so they are
        // always char boundaries; `get` just keeps this path free of panicking indexing.
        let line = body.get(start..end).unwrap_or_default();
        start = end + 1;
        match parse_line(line, &mut prev_name, &mut wants) {
            Line::Blank | Line::Comment => {}
            Line::Eof => {
                stats.saw_eof = true;
                break;
            }
            Line::Skipped => stats.skipped += 1,
            Line::Sample(sample) => {
                stats.samples += 1;
                on_sample(sample);
            }
            Line::Malformed(reason) => {
                stats.malformed_lines += 1;
                if stats.first_error.is_none() {
                    stats.first_error = Some(LineError {
                        line: line_no,
                        reason,
                    });
                }
            }
        }
    }
    stats
}

/// Parses every sample in `body` into a vector. Convenient for tests and one-off tools;
/// the scrape path should use [`parse`] with a `wants` filter.
pub fn parse_all(body: &str) -> (Vec<Sample<'_>>, ParseStats) {
    // Sample lines in real bodies are rarely shorter than ~40 bytes; this avoids most
    // regrowth without over-reserving much for comment-heavy bodies.
    let mut samples = Vec::with_capacity(body.len() / 64);
    let stats = parse(body, |_| true, |s| samples.push(s));
    (samples, stats)
}

enum Line<'a> {
    Blank,
    Comment,
    Eof,
    Skipped,
    Sample(Sample<'a>),
    Malformed(&'static str),
}

const START: u8 = 1;
const CONT: u8 = 2;

/// Byte classes for metric and label names, `[a-zA-Z_:][a-zA-Z0-9_:]*`. A table keeps the
/// name scan (the only per-line work on the skip path) to one load and test per byte.
static NAME_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            table[i] = START | CONT;
        } else if c.is_ascii_digit() {
            table[i] = CONT;
        }
        i += 1;
    }
    table
};

#[inline]
fn is_name_start(c: u8) -> bool {
    NAME_CLASS[usize::from(c)] & START != 0
}

#[inline]
fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

#[inline]
fn skip_blank(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if !is_blank(c) {
            break;
        }
        i += 1;
    }
    i
}

#[inline]
fn is_name_char(c: u8) -> bool {
    NAME_CLASS[usize::from(c)] & CONT != 0
}

/// End of the name whose first byte (already checked) is at `i - 1`.
#[inline]
fn scan_name(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if !is_name_char(c) {
            break;
        }
        i += 1;
    }
    i
}

/// End of a whitespace-delimited token starting at `i`.
#[inline]
fn token_end(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if is_blank(c) {
            break;
        }
        i += 1;
    }
    i
}

/// `i` is just after an opening `"`; returns the index just past the closing `"` and whether
/// a backslash occurred. A backslash always consumes the next byte, so `\"` never closes the
/// string; UTF-8 continuation bytes are never `"` or `\`, so scanning bytes is safe for any
/// text. A plain loop beats `memchr2` here because label values are mostly a few bytes long,
/// and reporting escapes lets the label iterator skip a second scan in `unescape`.
#[inline]
fn scan_quoted(b: &[u8], mut i: usize) -> Result<(usize, bool), &'static str> {
    let mut escaped = false;
    loop {
        match b.get(i) {
            None => return Err("unterminated quoted string"),
            Some(b'"') => return Ok((i + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                i += 2;
            }
            Some(_) => i += 1,
        }
    }
}

/// One `name="value"` pair as found in the text.
struct RawLabel<'a> {
    name: &'a str,
    /// Still escaped.
    value: &'a str,
    /// `value` contains a backslash and needs [`unescape`].
    escaped: bool,
    /// Index just past the value's closing quote.
    end: usize,
}

impl<'a> RawLabel<'a> {
    fn value(&self) -> Cow<'a, str> {
        if self.escaped {
            unescape(self.value)
        } else {
            Cow::Borrowed(self.value)
        }
    }
}

/// The `name="value"` pair starting at byte `i` of `s` (no leading blanks). Shared by
/// validation and iteration so both always agree on what a label is. Forced inline: as
/// a call, returning the struct through memory cost more than the scan itself.
#[inline(always)]
fn scan_label(s: &str, i: usize) -> Result<RawLabel<'_>, &'static str> {
    let b = s.as_bytes();
    let (name, after_name) = match b.get(i) {
        Some(b'"') => {
            // Prometheus 3 quoted UTF-8 label name, e.g. `"service.name"="x"`. Names with
            // escapes would need an owned name; nothing emits them, so they are rejected.
            let (end, escaped) = scan_quoted(b, i + 1)?;
            let name = s.get(i + 1..end - 1).unwrap_or_default();
            if name.is_empty() || escaped {
                return Err("unsupported quoted label name");
            }
            (name, end)
        }
        Some(&c) if is_name_start(c) => {
            let end = scan_name(b, i + 1);
            (s.get(i..end).unwrap_or_default(), end)
        }
        _ => return Err("invalid label name"),
    };
    let i = skip_blank(b, after_name);
    if b.get(i) != Some(&b'=') {
        return Err("expected '=' after label name");
    }
    let i = skip_blank(b, i + 1);
    if b.get(i) != Some(&b'"') {
        return Err("expected '\"' before label value");
    }
    let (end, escaped) = scan_quoted(b, i + 1)?;
    Ok(RawLabel {
        name,
        value: s.get(i + 1..end - 1).unwrap_or_default(),
        escaped,
        end,
    })
}

/// Validates a label set whose `{` is just before `i`; returns the index of the closing `}`.
fn scan_label_set(s: &str, mut i: usize) -> Result<usize, &'static str> {
    let b = s.as_bytes();
    loop {
        i = skip_blank(b, i);
        match b.get(i) {
            None => return Err("unterminated label set"),
            // Also accepts `{}` and a trailing comma.
            Some(b'}') => return Ok(i),
            Some(_) => {}
        }
        i = skip_blank(b, scan_label(s, i)?.end);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => return Ok(i),
            None => return Err("unterminated label set"),
            Some(_) => return Err("expected ',' or '}' after label value"),
        }
    }
}

/// The next label in already-validated raw label text, and the text after it.
#[inline]
fn next_label(s: &str) -> Option<(RawLabel<'_>, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if !(is_blank(c) || c == b',') {
            break;
        }
        i += 1;
    }
    if i >= b.len() {
        return None;
    }
    let label = scan_label(s, i).ok()?;
    let rest = s.get(label.end..)?;
    Some((label, rest))
}

/// Resolves `\\`, `\"` and `\n`; any other escape is kept verbatim, as Prometheus does.
fn unescape(raw: &str) -> Cow<'_, str> {
    if memchr(b'\\', raw.as_bytes()).is_none() {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('n') => out.push('\n'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// Exact powers of ten for the decimal fast path.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Go's `ParseFloat` forms. Rust's parser already accepts `NaN`, `Inf`, `+Inf`, `-Inf` and
/// `Infinity` case-insensitively, so no special-casing is needed; the fast path only exists
/// because nearly every value in a real body is a short plain decimal like `812.0`.
#[inline]
fn parse_value(token: &str) -> Option<f64> {
    match fast_decimal(token.as_bytes()) {
        Some(v) => Some(v),
        None => token.parse::<f64>().ok(),
    }
}

/// `[+-]?digits[.digits]` with at most 15 digits, else `None` (the caller falls back to
/// `str::parse`). This is Clinger's fast path: the digits as an integer (< 2^53) and the
/// power of ten (<= 1e15) are both exact in an f64, so the single IEEE division is correctly
/// rounded and gives bit-for-bit the same result as `str::parse`.
#[inline]
fn fast_decimal(b: &[u8]) -> Option<f64> {
    let (negative, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, b),
    };
    if digits.len() > 16 {
        return None;
    }
    let mut mantissa = 0u64;
    let mut n_digits = 0usize;
    let mut dot_at = None;
    for (at, &c) in digits.iter().enumerate() {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(c - b'0');
                n_digits += 1;
            }
            b'.' if dot_at.is_none() => dot_at = Some(at),
            _ => return None,
        }
    }
    if n_digits == 0 || n_digits > 15 {
        return None;
    }
    let frac_digits = dot_at.map_or(0, |at| digits.len() - at - 1);
    let value = mantissa as f64 / *POW10.get(frac_digits)?;
    Some(if negative { -value } else { value })
}

/// Classic text: integer milliseconds. OpenMetrics: (possibly fractional) seconds.
fn parse_timestamp(token: &str) -> Option<i64> {
    if let Ok(ms) = token.parse::<i64>() {
        return Some(ms);
    }
    let seconds = token.parse::<f64>().ok()?;
    let ms = (seconds * 1000.0).round();
    // i64::MAX is not exactly representable; stay strictly inside so `as` never saturates.
    if ms.is_finite() && ms.abs() < 9.2e18 {
        Some(ms as i64)
    } else {
        None
    }
}

fn parse_line<'a, W>(line: &'a str, prev_name: &mut &'a str, wants: &mut W) -> Line<'a>
where
    W: FnMut(&str) -> bool,
{
    let b = line.as_bytes();
    let mut end = b.len();
    while let Some(&c) = b.get(end.wrapping_sub(1)) {
        if !(is_blank(c) || c == b'\r') {
            break;
        }
        end -= 1;
    }
    let start = skip_blank(b, 0);
    if start >= end {
        return Line::Blank;
    }
    let Some(line) = line.get(start..end) else {
        return Line::Malformed("invalid line");
    };
    let b = line.as_bytes();

    let (name, labels_at) = match b.first() {
        Some(b'#') => {
            return if line == "# EOF" {
                Line::Eof
            } else {
                Line::Comment
            };
        }
        Some(b'{') => {
            // Prometheus 3 quoted name: `{"name",a="b"} 1` or `{"name"} 1`.
            let i = skip_blank(b, 1);
            if b.get(i) != Some(&b'"') {
                return Line::Malformed("missing metric name");
            }
            let (name_end, escaped) = match scan_quoted(b, i + 1) {
                Ok(found) => found,
                Err(reason) => return Line::Malformed(reason),
            };
            let name = line.get(i + 1..name_end - 1).unwrap_or_default();
            if name.is_empty() || escaped {
                return Line::Malformed("unsupported quoted metric name");
            }
            let i = skip_blank(b, name_end);
            match b.get(i) {
                // Label parsing below starts after this byte; a `}` here means no labels
                // and is picked up by `scan_label_set` as an empty set.
                Some(b',') => (name, Some(i + 1)),
                Some(b'}') => (name, Some(i)),
                _ => return Line::Malformed("expected ',' or '}' after quoted metric name"),
            }
        }
        Some(&c) if is_name_start(c) => {
            // Consecutive lines usually share a name (23 lines per histogram series), and one
            // `memcmp` is several times cheaper than classifying every byte again.
            let name_end = if !prev_name.is_empty()
                && b.starts_with(prev_name.as_bytes())
                && b.get(prev_name.len()).is_none_or(|&c| !is_name_char(c))
            {
                prev_name.len()
            } else {
                scan_name(b, 1)
            };
            let name = line.get(..name_end).unwrap_or_default();
            *prev_name = name;
            let i = skip_blank(b, name_end);
            match b.get(name_end) {
                None => return Line::Malformed("missing value"),
                Some(&c) if c == b'{' || is_blank(c) => {}
                Some(_) => return Line::Malformed("invalid character in metric name"),
            }
            if b.get(i) == Some(&b'{') {
                (name, Some(i + 1))
            } else {
                (name, None)
            }
        }
        _ => return Line::Malformed("invalid metric name"),
    };

    if !wants(name) {
        return Line::Skipped;
    }

    let (raw_labels, i) = match labels_at {
        Some(at) => match scan_label_set(line, at) {
            Ok(close) => (line.get(at..close).unwrap_or_default(), close + 1),
            Err(reason) => return Line::Malformed(reason),
        },
        None => ("", name.len()),
    };

    let i = skip_blank(b, i);
    let value_end = token_end(b, i);
    if value_end == i {
        return Line::Malformed("missing value");
    }
    let Some(value) = line.get(i..value_end).and_then(parse_value) else {
        return Line::Malformed("invalid value");
    };

    let i = skip_blank(b, value_end);
    let timestamp_ms = match b.get(i) {
        // `#` starts an OpenMetrics exemplar, which the scaler has no use for.
        None | Some(b'#') => None,
        Some(_) => {
            let ts_end = token_end(b, i);
            let Some(ts) = line.get(i..ts_end).and_then(parse_timestamp) else {
                return Line::Malformed("invalid timestamp");
            };
            match b.get(skip_blank(b, ts_end)) {
                None | Some(b'#') => {}
                Some(_) => return Line::Malformed("unexpected content after timestamp"),
            }
            Some(ts)
        }
    };

    Line::Sample(Sample {
        name,
        raw_labels,
        value,
        timestamp_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    const VLLM_SNIPPET: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 812.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 812.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.5
vllm:prompt_tokens_total{engine="0",model_name="m"} 1.234567e+06
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7563046412320957e+09
"#;

    fn labels_of(s: &Sample<'_>) -> Vec<(String, String)> {
        s.labels()
            .map(|(k, v)| (k.to_owned(), v.into_owned()))
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn one(line: &str) -> (Vec<Sample<'_>>, ParseStats) {
        parse_all(line)
    }

    fn assert_malformed(line: &str) {
        let (samples, stats) = one(line);
        assert!(samples.is_empty(), "{line:?} gave {samples:?}");
        assert_eq!(stats.malformed_lines, 1, "{line:?}: {stats:?}");
        assert_eq!(
            stats.first_error.as_ref().map(|e| e.line),
            Some(1),
            "{line:?}"
        );
    }

    /// Python `float.__repr__` as `prometheus_client.utils.floatToGoString` post-processes
    /// it: large values get Go's `e+0N` exponent form.
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
        match s.find('.') {
            Some(dot) if v > 0.0 && dot > 6 && !s.contains('e') => {
                let mantissa = format!("{}.{}{}", &s[..1], &s[1..dot], &s[dot + 1..]);
                let mantissa = mantissa.trim_end_matches(['0', '.']);
                format!("{mantissa}e+0{}", dot - 1)
            }
            _ => s,
        }
    }

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
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const TTFT: [f64; 22] = [
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    ];
    const E2E: [f64; 21] = [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0,
    ];

    /// A vLLM-shaped body (client_python layout: counters as `_total` families, `_created`
    /// split into their own gauge family, labels sorted so `le` sits between `engine` and
    /// `model_name`).
    fn vllm_body(models: usize) -> String {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let mut out = String::new();
        let model = |m: usize| format!("org-{m:02}/model-{m:02}");
        for gauge in ["vllm:num_requests_running", "vllm:num_requests_waiting"] {
            let _ = writeln!(
                out,
                "# HELP {gauge} Number of requests.\n# TYPE {gauge} gauge"
            );
            for m in 0..models {
                let v = rng.below(64) as f64;
                let _ = writeln!(
                    out,
                    "{gauge}{{engine=\"0\",model_name=\"{}\"}} {}",
                    model(m),
                    go_float(v)
                );
            }
        }
        for counter in ["vllm:prompt_tokens", "vllm:generation_tokens"] {
            let _ = writeln!(
                out,
                "# HELP {counter}_total Tokens.\n# TYPE {counter}_total counter"
            );
            for m in 0..models {
                let v = (rng.below(50_000_000) as f64) + 1.0;
                let _ = writeln!(
                    out,
                    "{counter}_total{{engine=\"0\",model_name=\"{}\"}} {}",
                    model(m),
                    go_float(v)
                );
            }
            let _ = writeln!(
                out,
                "# HELP {counter}_created Tokens.\n# TYPE {counter}_created gauge"
            );
            for m in 0..models {
                let _ = writeln!(
                    out,
                    "{counter}_created{{engine=\"0\",model_name=\"{}\"}} {}",
                    model(m),
                    go_float(1_756_304_641.232_095_7 + m as f64)
                );
            }
        }
        for (hist, bounds) in [
            ("vllm:time_to_first_token_seconds", &TTFT[..]),
            ("vllm:e2e_request_latency_seconds", &E2E[..]),
        ] {
            let _ = writeln!(out, "# HELP {hist} Latency.\n# TYPE {hist} histogram");
            for m in 0..models {
                let mut cum = 0.0;
                for le in bounds {
                    cum += rng.below(40) as f64;
                    let _ = writeln!(
                        out,
                        "{hist}_bucket{{engine=\"0\",le=\"{}\",model_name=\"{}\"}} {}",
                        go_float(*le),
                        model(m),
                        go_float(cum)
                    );
                }
                let _ = writeln!(
                    out,
                    "{hist}_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{}\"}} {}",
                    model(m),
                    go_float(cum)
                );
                let _ = writeln!(
                    out,
                    "{hist}_count{{engine=\"0\",model_name=\"{}\"}} {}",
                    model(m),
                    go_float(cum)
                );
                let sum = cum * 0.137 + rng.below(1000) as f64 / 1024.0;
                let _ = writeln!(
                    out,
                    "{hist}_sum{{engine=\"0\",model_name=\"{}\"}} {}",
                    model(m),
                    go_float(sum)
                );
            }
            let _ = writeln!(
                out,
                "# HELP {hist}_created Latency.\n# TYPE {hist}_created gauge"
            );
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

    #[test]
    fn parses_vllm_snippet() {
        let (samples, stats) = parse_all(VLLM_SNIPPET);
        assert_eq!(
            stats,
            ParseStats {
                samples: 7,
                ..ParseStats::default()
            }
        );
        let names: Vec<_> = samples.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "vllm:num_requests_running",
                "vllm:time_to_first_token_seconds_bucket",
                "vllm:time_to_first_token_seconds_bucket",
                "vllm:time_to_first_token_seconds_count",
                "vllm:time_to_first_token_seconds_sum",
                "vllm:prompt_tokens_total",
                "vllm:prompt_tokens_created",
            ]
        );
        let values: Vec<_> = samples.iter().map(|s| s.value).collect();
        assert_eq!(
            values,
            [
                3.0,
                0.0,
                812.0,
                812.0,
                120.5,
                1_234_567.0,
                1_756_304_641.232_095_7
            ]
        );
        assert!(samples.iter().all(|s| s.timestamp_ms.is_none()));
        assert_eq!(
            labels_of(&samples[2]),
            pairs(&[
                ("engine", "0"),
                ("le", "+Inf"),
                ("model_name", "meta-llama/Llama-3.1-8B-Instruct")
            ])
        );
        assert_eq!(samples[2].label("le").as_deref(), Some("+Inf"));
        assert_eq!(
            samples[0].label("model_name").as_deref(),
            Some("meta-llama/Llama-3.1-8B-Instruct")
        );
        assert_eq!(samples[0].label("le"), None);
        assert!(matches!(
            samples[0].label("engine"),
            Some(Cow::Borrowed("0"))
        ));
    }

    #[test]
    fn parses_vllm_info_and_process_families() {
        let body = r#"# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.75630464123e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="27153",prefix_caching_hash_algo="builtin",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 1.7563046412320957e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1234.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
"#;
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        assert_eq!(s.len(), 6);
        assert_eq!(s[1].name, "process_start_time_seconds");
        assert_eq!(s[1].raw_labels(), "");
        assert_eq!(s[2].labels().count(), 13);
        assert_eq!(s[2].label("num_gpu_blocks").as_deref(), Some("27153"));
        assert_eq!(
            s[2].label("swap_space_bytes").as_deref(),
            Some("4294967296")
        );
        assert_eq!(s[3].label("running_lora_adapters").as_deref(), Some(""));
        assert_eq!(s[3].label("waiting_lora_adapters").as_deref(), Some(""));
        let stops: f64 = s
            .iter()
            .filter(|s| s.name == "vllm:request_success_total")
            .map(|s| s.value)
            .sum();
        assert_eq!(stops, 1239.0);
    }

    #[test]
    fn wants_filters_before_parsing_and_sees_full_names() {
        let mut asked = Vec::new();
        let mut got = Vec::new();
        let stats = parse(
            VLLM_SNIPPET,
            |name| {
                asked.push(name.to_owned());
                name == "vllm:time_to_first_token_seconds_bucket"
            },
            |s| got.push((s.name, s.label("le").map(Cow::into_owned))),
        );
        assert_eq!(asked.len(), 7, "comments must not reach wants: {asked:?}");
        assert!(asked.contains(&"vllm:prompt_tokens_created".to_owned()));
        assert_eq!(stats.samples, 2);
        assert_eq!(stats.skipped, 5);
        assert_eq!(stats.malformed_lines, 0);
        assert_eq!(got[1].1.as_deref(), Some("+Inf"));
    }

    #[test]
    fn skipped_lines_are_not_validated() {
        let body = "skip_me{broken 1\nkeep 2\n";
        let stats = parse(body, |n| n == "keep", |_| {});
        assert_eq!(
            (stats.samples, stats.skipped, stats.malformed_lines),
            (1, 1, 0)
        );
    }

    #[test]
    fn histogram_with_inf_bucket_sum_count_created() {
        let body = "\
# TYPE rpc_seconds histogram
rpc_seconds_bucket{le=\"0.05\"} 24054
rpc_seconds_bucket{le=\"1\"} 133988
rpc_seconds_bucket{le=\"+Inf\"} 144320
rpc_seconds_sum 53423
rpc_seconds_count 144320
rpc_seconds_created 1.7e9
";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.samples, 6);
        assert_eq!(s[2].label("le").as_deref(), Some("+Inf"));
        assert_eq!(s[2].value, 144_320.0);
        assert_eq!(s[3].name, "rpc_seconds_sum");
        assert_eq!(s[3].labels().count(), 0);
        assert_eq!(s[3].raw_labels(), "");
        assert_eq!(s[5].value, 1.7e9);
        let le: f64 = s[2].label("le").and_then(|v| v.parse().ok()).unwrap_or(0.0);
        assert_eq!(le, f64::INFINITY);
    }

    #[test]
    fn special_and_go_float_values() {
        let body = "\
a 3.0
a 1e+06
a 1.7563046412320957e+09
a -0.5
a +1
a .5
a 1.
a 1E-3
a NaN
a nan
a +Inf
a -Inf
a Inf
a +inf
a Infinity
";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        let v: Vec<f64> = s.iter().map(|s| s.value).collect();
        assert_eq!(
            &v[..8],
            &[
                3.0,
                1e6,
                1_756_304_641.232_095_7,
                -0.5,
                1.0,
                0.5,
                1.0,
                0.001
            ]
        );
        assert!(v[8].is_nan() && v[9].is_nan());
        assert_eq!(
            &v[10..],
            &[
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::INFINITY,
                f64::INFINITY,
                f64::INFINITY
            ]
        );
        for bad in [
            "a 0x10", "a 1,0", "a 1_0", "a --1", "a 1e", "a e5", "a -", "a Infx", "a 1.0.0",
        ] {
            assert_malformed(bad);
        }
    }

    #[test]
    fn fast_decimal_path_matches_str_parse_bit_for_bit() {
        let mut rng = XorShift(0x1234_5678_9ABC_DEF1);
        let fixed = [
            "0",
            "0.0",
            "-0.0",
            "+0.0",
            "812.0",
            "120.5",
            "0.1",
            "0.3",
            "2560.0",
            "1.",
            ".5",
            "-.5",
            "999999999999999",
            "99999999999999.9",
            "0.000000000000001",
            "1234567890123456",
            "0.1234567890123456",
            "9007199254740993",
            "00000000000000000001",
        ];
        let mut cases: Vec<String> = fixed.iter().map(|s| (*s).to_owned()).collect();
        for _ in 0..200_000 {
            let digits = 1 + rng.below(18);
            let mut t = String::new();
            match rng.below(4) {
                0 => t.push('-'),
                1 => t.push('+'),
                _ => {}
            }
            let dot = rng.below(digits + 1);
            for d in 0..digits {
                if d == dot {
                    t.push('.');
                }
                t.push(char::from(b'0' + rng.below(10) as u8));
            }
            cases.push(t);
        }
        for t in &cases {
            let want = t.parse::<f64>().ok().map(f64::to_bits);
            assert_eq!(parse_value(t).map(f64::to_bits), want, "{t}");
            if let Some(fast) = fast_decimal(t.as_bytes()) {
                assert_eq!(Some(fast.to_bits()), want, "fast path on {t}");
            }
        }
        assert!(
            fast_decimal(b"812.0").is_some(),
            "fast path must cover the common case"
        );
        assert_eq!(fast_decimal(b"1e5"), None);
        assert_eq!(fast_decimal(b"."), None);
        assert_eq!(fast_decimal(b"-"), None);
        assert_eq!(fast_decimal(b"1.2.3"), None);
    }

    #[test]
    fn repeated_name_shortcut_does_not_leak_between_lines() {
        let body = "a 1\nab 2\na{x=\"1\"} 3\na:b 4\na\ta 5\na-b 6\na 7\n";
        let (s, stats) = parse_all(body);
        let names: Vec<_> = s.iter().map(|s| s.name).collect();
        assert_eq!(names, ["a", "ab", "a", "a:b", "a"]);
        assert_eq!(stats.malformed_lines, 2, "`a\\ta 5` and `a-b 6`: {stats:?}");
        assert_eq!(stats.first_error.map(|e| e.line), Some(5));
    }

    #[test]
    fn timestamps() {
        let body = "\
a 1 1395066363000
a 1 -3982045
a 1 1.5e9
a 1 1520879607.789
a{x=\"y\"} 2 0
";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        let ts: Vec<_> = s.iter().map(|s| s.timestamp_ms).collect();
        assert_eq!(
            ts,
            [
                Some(1_395_066_363_000),
                Some(-3_982_045),
                Some(1_500_000_000_000),
                Some(1_520_879_607_789),
                Some(0)
            ]
        );
        for bad in [
            "a 1 x",
            "a 1 NaN",
            "a 1 +Inf",
            "a 1 1e300",
            "a 1 12 13",
            "a 1 12abc",
            "a 1 99999999999999999999999",
        ] {
            assert_malformed(bad);
        }
    }

    #[test]
    fn openmetrics_eof_total_unit_and_exemplars() {
        let body = "\
# TYPE vllm:prompt_tokens counter
# UNIT vllm:prompt_tokens tokens
# HELP vllm:prompt_tokens Prompt tokens.
vllm:prompt_tokens_total{model_name=\"m\"} 17.0
vllm:prompt_tokens_created{model_name=\"m\"} 1.520430e9
# TYPE foo histogram
foo_bucket{le=\"0.1\"} 8 # {trace_id=\"KOO5S4vxi0o\"} 0.67
foo_bucket{le=\"+Inf\"} 9 1520879607.789 # {trace_id=\"oHg5SJYRHA0\"} 9.8 1520879602.120
# EOF
after_eof 1
garbage after eof {{{
";
        let (s, stats) = parse_all(body);
        assert!(stats.saw_eof);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        assert_eq!(stats.samples, 4);
        assert_eq!(s[0].name, "vllm:prompt_tokens_total");
        assert_eq!(s[1].value, 1.52043e9);
        assert_eq!(s[2].value, 8.0);
        assert_eq!(s[2].timestamp_ms, None);
        assert_eq!(s[3].timestamp_ms, Some(1_520_879_607_789));
        // Not EOF: only the exact marker ends the body.
        let (_, stats) = parse_all("# EOFX\n#EOF\n# eof\na 1\n");
        assert!(!stats.saw_eof);
        assert_eq!(stats.samples, 1);
        let (_, stats) = parse_all("a 1\r\n# EOF\r\n");
        assert!(stats.saw_eof);
    }

    #[test]
    fn escapes_in_label_values() {
        let body = r#"msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9
odd{a="x\qy",b="tab\t",c="end\\",d="}{,=\"",e="ünïcødé ✓"} 1
"#;
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        assert_eq!(
            labels_of(&s[0]),
            pairs(&[
                ("path", r"C:\DIR\FILE.TXT"),
                ("error", "Cannot find file:\n\"FILE.TXT\"")
            ])
        );
        assert_eq!(
            labels_of(&s[1]),
            pairs(&[
                ("a", r"x\qy"),
                ("b", r"tab\t"),
                ("c", r"end\"),
                ("d", "}{,=\""),
                ("e", "ünïcødé ✓")
            ])
        );
        assert!(matches!(s[1].label("e"), Some(Cow::Borrowed(_))));
        assert!(matches!(s[1].label("c"), Some(Cow::Owned(_))));
    }

    #[test]
    fn label_syntax_variants() {
        let body = "\
a{} 1
b{x=\"1\",} 2
c { x = \"1\" , y=\"2\" , } 3
d\t{x=\"1\"}\t4
e{x=\"1\"}5
f{x=\"\"} 6
g{x=\"1\",x=\"2\"} 7
";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        assert_eq!(s.len(), 7);
        assert_eq!(s[0].labels().count(), 0);
        assert_eq!(labels_of(&s[1]), pairs(&[("x", "1")]));
        assert_eq!(labels_of(&s[2]), pairs(&[("x", "1"), ("y", "2")]));
        assert_eq!(s[3].value, 4.0);
        assert_eq!(s[4].value, 5.0);
        assert_eq!(s[5].label("x").as_deref(), Some(""));
        assert_eq!(s[6].label("x").as_deref(), Some("1"), "first label wins");
        let mut it = s[6].labels();
        assert_eq!(it.by_ref().count(), 2);
        assert_eq!(it.next(), None, "fused");
    }

    #[test]
    fn names_with_colons_and_underscores() {
        let body = "vllm:a:b 1\n:weird: 2\n_x_ 3\na9:_ 4\n";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0);
        let names: Vec<_> = s.iter().map(|s| s.name).collect();
        assert_eq!(names, ["vllm:a:b", ":weird:", "_x_", "a9:_"]);
    }

    #[test]
    fn quoted_utf8_names() {
        let body = "\
{\"my.metric\",a=\"b\"} 1
{\"vllm:x\"} 2
{ \"sp ace\" , \"label.name\"=\"v\" , } 3
plain{\"service.name\"=\"svc\",x=\"y\"} 4
";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        assert_eq!(s[0].name, "my.metric");
        assert_eq!(labels_of(&s[0]), pairs(&[("a", "b")]));
        assert_eq!(s[1].name, "vllm:x");
        assert_eq!(s[1].labels().count(), 0);
        assert_eq!(s[2].name, "sp ace");
        assert_eq!(labels_of(&s[2]), pairs(&[("label.name", "v")]));
        assert_eq!(
            labels_of(&s[3]),
            pairs(&[("service.name", "svc"), ("x", "y")])
        );
        let mut asked = Vec::new();
        parse(
            body,
            |n| {
                asked.push(n.to_owned());
                false
            },
            |_| {},
        );
        assert_eq!(asked, ["my.metric", "vllm:x", "sp ace", "plain"]);
        for bad in [
            r#"{"a\"b"} 1"#,
            r#"{""} 1"#,
            r#"{a="b"} 1"#,
            r#"{"name"="v"} 1"#,
            r#"{"name" 1"#,
            r#"{"name} 1"#,
            r#"x{"a\"b"="v"} 1"#,
        ] {
            assert_malformed(bad);
        }
    }

    #[test]
    fn multiprocess_pid_labels() {
        let body = "\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\",pid=\"4711\"} 2.0
vllm:num_requests_running{engine=\"0\",model_name=\"m\",pid=\"4712\"} 1.0
";
        let mut total = 0.0;
        let mut pids = Vec::new();
        parse(
            body,
            |n| n == "vllm:num_requests_running",
            |s| {
                total += s.value;
                pids.extend(s.label("pid").map(Cow::into_owned));
            },
        );
        assert_eq!(total, 3.0);
        assert_eq!(pids, ["4711", "4712"]);
    }

    #[test]
    fn crlf_blank_lines_whitespace_and_no_final_newline() {
        let body = "# HELP a x\r\n\r\na{b=\"c\"} 1\r\n   \r\n\t a 2 \t\r\n\n\na 3 1000\r\na 4";
        let (s, stats) = parse_all(body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        let v: Vec<_> = s.iter().map(|s| s.value).collect();
        assert_eq!(v, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s[0].label("b").as_deref(), Some("c"));
        assert_eq!(s[2].timestamp_ms, Some(1000));
        assert_eq!(parse_all("").1, ParseStats::default());
        assert_eq!(parse_all("\n\n\r\n").1, ParseStats::default());
    }

    #[test]
    fn malformed_lines_are_counted_with_line_numbers() {
        for bad in [
            "1abc 1",
            "-a 1",
            "a-b 1",
            "a",
            "a ",
            "a{",
            "a{b=\"c\" 1",
            "a{b=\"c 1",
            "a{b=\"c\"",
            "a{b} 1",
            "a{b=c} 1",
            "a{=\"c\"} 1",
            "a{,} 1",
            "a{b=\"c\",,} 1",
            "a{b=\"c\" d=\"e\"} 1",
            "a{1b=\"c\"} 1",
            "a{b=\"c\"}",
            "a{b=\"c\"} ",
            "a{b=\"c\"} x",
            "a{b=\"c\"}} 1",
            "a{b=\"c\\\"} 1",
            "a 1 2 3",
            "a 1\r2",
            "<html><body>502 Bad Gateway</body></html>",
            "\u{0}\u{1}\u{2}",
            "ünïcødé 1",
            "{",
            "}",
            "\"",
        ] {
            assert_malformed(bad);
        }
        let body = "ok 1\n\n# c\nbad{\nok 2\nalso bad\n";
        let (s, stats) = parse_all(body);
        assert_eq!(s.len(), 2);
        assert_eq!(stats.malformed_lines, 2);
        assert_eq!(
            stats.first_error,
            Some(LineError {
                line: 4,
                reason: "unterminated label set"
            })
        );
        assert_eq!(
            stats.first_error.map(|e| e.to_string()).as_deref(),
            Some("line 4: unterminated label set")
        );
    }

    #[test]
    fn html_error_page_yields_no_samples() {
        let body = "<!DOCTYPE html>\n<html>\n<head><title>503</title></head>\n\n<body>oops</body>\n</html>\n";
        let (s, stats) = parse_all(body);
        assert!(s.is_empty());
        assert_eq!(stats.malformed_lines, 5);
    }

    #[test]
    fn labels_iterator_is_robust_on_unvalidated_text() {
        // `raw_labels` is private and always validated, but the iterator must not panic
        // or loop even if that invariant were ever broken.
        for raw in [
            "",
            ",",
            "a",
            "a=",
            "a=\"",
            "a=\"x\\",
            "a=\"x\"b=\"y\"",
            "\"",
            "=\"x\"",
        ] {
            let s = Sample {
                name: "x",
                raw_labels: raw,
                value: 0.0,
                timestamp_ms: None,
            };
            assert!(s.labels().count() <= 2, "{raw:?}");
            let _ = s.label("a");
        }
    }

    /// Checks every invariant that must hold for any input, touching every label.
    fn check_invariants(body: &str, rng: &mut XorShift) {
        let lines = body.split('\n').count();
        let mut delivered = 0usize;
        let mut wanted = 0usize;
        let seed = rng.next();
        let mut local = XorShift(seed | 1);
        let stats = parse(
            body,
            |name| {
                assert!(!name.is_empty());
                let keep = !local.next().is_multiple_of(4);
                wanted += usize::from(keep);
                keep
            },
            |s| {
                delivered += 1;
                assert!(body.contains(s.name));
                assert!(s.raw_labels.len() <= body.len());
                let n = s.labels().count();
                assert!(n <= s.raw_labels.len());
                for (k, v) in s.labels() {
                    assert!(v.len() <= s.raw_labels.len());
                    assert!(s.label(k).is_some());
                }
            },
        );
        assert_eq!(delivered, stats.samples);
        assert!(stats.samples <= wanted);
        assert!(
            stats.samples + stats.skipped + stats.malformed_lines <= lines,
            "{stats:?} lines={lines}"
        );
        assert_eq!(stats.first_error.is_some(), stats.malformed_lines > 0);
        if let Some(e) = &stats.first_error {
            assert!(e.line >= 1 && e.line <= lines, "{e:?} lines={lines}");
        }
        let (all, full) = parse_all(body);
        assert_eq!(all.len(), full.samples);
        assert_eq!(full.skipped, 0);
        assert_eq!(full.saw_eof, stats.saw_eof);
    }

    #[test]
    fn garbage_never_panics_and_stats_stay_consistent() {
        let mut rng = XorShift(0xDEAD_BEEF_CAFE_F00D);
        let snippet = format!(
            "{VLLM_SNIPPET}a{{x=\"\\\\\\\"\\n\",\"q.n\"=\"v\",}} -Inf 1.5e9 # {{t=\"1\"}} 1\n{{\"n.m\"}} 1\n# EOF\n"
        );
        // Truncation at every byte of a small body (char boundaries only: the API takes &str).
        for cut in 0..=snippet.len() {
            if let Some(prefix) = snippet.get(..cut) {
                check_invariants(prefix, &mut rng);
            }
        }
        let bases = [snippet.clone(), vllm_body(2)];
        let alphabet = b"{}\",=\\ \t\r\n#+-.eE0123456789aZ:_\x00\xff";
        for round in 0..3000 {
            let base = &bases[round % bases.len()];
            let mut bytes = base.as_bytes().to_vec();
            for _ in 0..1 + rng.below(8) {
                if bytes.is_empty() {
                    break;
                }
                let at = rng.below(bytes.len());
                let pick = if rng.next().is_multiple_of(2) {
                    alphabet[rng.below(alphabet.len())]
                } else {
                    rng.next() as u8
                };
                match rng.below(4) {
                    0 => bytes[at] = pick,
                    1 => bytes.insert(at, pick),
                    2 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            check_invariants(&text, &mut rng);
        }
        // Pure noise, including long lines and no newlines at all.
        for len in [1usize, 7, 100, 4096, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            check_invariants(&String::from_utf8_lossy(&bytes), &mut rng);
            let structural: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            check_invariants(&String::from_utf8_lossy(&structural), &mut rng);
        }
    }

    #[test]
    fn pathological_inputs_stay_linear() {
        // Many backslashes / quotes / braces on one line must not go quadratic or recurse.
        let long = format!("a{{b=\"{}\"}} 1\n", "\\\\".repeat(200_000));
        let (s, stats) = parse_all(&long);
        assert_eq!(stats.samples, 1);
        assert_eq!(s[0].label("b").map(|v| v.len()), Some(200_000));
        let braces = "{".repeat(300_000);
        assert_eq!(parse_all(&braces).1.malformed_lines, 1);
        let labels: String = (0..20_000).map(|i| format!("l{i}=\"v\",")).collect();
        let body = format!("a{{{labels}}} 1");
        let (s, _) = parse_all(&body);
        assert_eq!(s.first().map_or(0, |s| s.labels().count()), 20_000);
    }

    #[test]
    fn generated_body_has_expected_shape() {
        let body = vllm_body(3);
        let (s, stats) = parse_all(&body);
        assert_eq!(stats.malformed_lines, 0, "{stats:?}");
        // per model: 2 gauges, 2 counters (_total, _created), 2 histograms (buckets, +Inf, _count, _sum, _created)
        let per_model = 2 + 4 + (22 + 3 + 1) + (21 + 3 + 1);
        assert_eq!(s.len(), 3 * per_model);
        let created = s
            .iter()
            .find(|s| s.name == "vllm:prompt_tokens_created")
            .map(|s| s.value);
        assert_eq!(created, Some(1_756_304_641.232_095_7));
    }

    /// Cross-check against `prom_text_format_parser` (a winnow-based, allocation-heavy but
    /// spec-faithful parser) on a realistic body.
    #[test]
    fn agrees_with_prom_text_format_parser() {
        use prom_text_format_parser::{Type, ValueType};

        let body = vllm_body(7);
        let (ours, stats) = parse_all(&body);
        assert_eq!(stats.malformed_lines, 0);

        let (metrics, err) = prom_text_format_parser::parse_scrape(&body);
        // It reports `# TYPE x counter` followed by `x_total` as a metric error but still
        // returns the samples, so only a line-level parse error is fatal here.
        assert!(
            !matches!(
                err,
                Some(prom_text_format_parser::ScrapeParseError::Parse(_))
            ),
            "{err:?}"
        );
        let mut theirs = Vec::new();
        for m in &metrics {
            for s in &m.samples {
                let suffix = match (m.kind, s.value.value_type) {
                    (Type::Histogram, ValueType::Sample) => "_bucket",
                    (Type::Histogram | Type::Summary, ValueType::Sum) => "_sum",
                    (Type::Histogram | Type::Summary, ValueType::Count) => "_count",
                    _ => "",
                };
                let labels: Vec<(String, String)> = s
                    .labels
                    .iter()
                    .map(|l| (l.key.clone(), l.value.clone()))
                    .collect();
                let value: f64 = s.value.value.parse().unwrap_or(f64::NAN);
                theirs.push((
                    format!("{}{suffix}", m.name),
                    labels,
                    value,
                    s.value.timestamp,
                ));
            }
        }
        assert_eq!(ours.len(), theirs.len());
        let vllm = ours.iter().filter(|s| s.name.starts_with("vllm:")).count();
        assert_eq!(vllm, ours.len());
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.name, t.0);
            assert_eq!(labels_of(o), t.1, "{}", o.name);
            assert_eq!(o.value.to_bits(), t.2.to_bits(), "{}", o.name);
            assert_eq!(o.timestamp_ms, t.3);
        }
    }
}
