//! Traces for `simulate --trace FILE`: a rate curve, or one row per request with its
//! arrival and token counts, in the formats public LLM traces are published in.
//!
//! The format is told from the content, not the file name: the first line that is not
//! blank or a `#` comment decides. `{` starts Mooncake JSONL (the FAST'25 traces:
//! `{"timestamp": ms, "input_length": N, "output_length": N, "hash_ids": [...]}`); a
//! header naming `TIMESTAMP`, `ContextTokens` and `GeneratedTokens` starts the Azure LLM
//! inference 2023/2024 CSV; two columns start the rate CSV `t_seconds,rate_per_second`
//! that `simulate` has always read (two numbers, or a header of any two names).
//!
//! A bad row is an error naming its line, never skipped: a replay that silently drops
//! rows measures a lighter load than the file holds. `--rate-scale` ([`replicate`])
//! multiplies a request-level trace's load without inventing request sizes.

mod summary;
#[cfg(test)]
mod tests;
mod timestamp;

pub use summary::{TraceSummary, duration_seconds, mean_rate, minute_rates, summarize};

use super::rng::Rng;

/// One request of a request-level trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRequest {
    /// Arrival, seconds from the trace's start.
    pub arrival_seconds: f64,
    /// Prompt length, tokens (prefill work).
    pub input_tokens: u32,
    /// Generated length, tokens (decode steps), at least 1.
    pub output_tokens: u32,
}

/// The formats [`parse_trace`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// `t_seconds,rate_per_second` rows: a rate curve, no requests.
    RateCsv,
    /// Mooncake's JSON lines, one request each, timestamps in milliseconds.
    MooncakeJsonl,
    /// The Azure LLM inference trace CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`.
    AzureCsv,
}

impl TraceFormat {
    /// Its name in messages and summaries.
    pub fn name(&self) -> &'static str {
        match self {
            TraceFormat::RateCsv => "rate-csv",
            TraceFormat::MooncakeJsonl => "mooncake-jsonl",
            TraceFormat::AzureCsv => "azure-csv",
        }
    }
}

/// A parsed trace.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedTrace {
    /// `(t_seconds, rate_per_second)` points in file order: times non-decreasing, rates
    /// finite and ≥ 0 (the rules of `Scenario::from_trace_csv`).
    Rates(Vec<(f64, f64)>),
    /// Requests sorted by arrival. The sort is stable: requests with the same timestamp
    /// keep their file order, so a replay is the same whatever sort a tool would pick.
    /// Times are from the trace's start: Mooncake's timestamps already are (kept as
    /// written); Azure's are made relative to the earliest row.
    Requests {
        /// Which format the file was in.
        format: TraceFormat,
        /// At least one request.
        requests: Vec<TraceRequest>,
        /// The timestamps' granularity, seconds: 1 ms for Mooncake, `10^-d` for an Azure
        /// file whose rows have up to `d` fractional digits. [`replicate`] spreads copies
        /// within it, so they stay inside the instant the file recorded.
        resolution_seconds: f64,
    },
}

impl ParsedTrace {
    /// Which format the file was in.
    pub fn format(&self) -> TraceFormat {
        match self {
            ParsedTrace::Rates(_) => TraceFormat::RateCsv,
            ParsedTrace::Requests { format, .. } => *format,
        }
    }
}

/// A trace refused: which line (1-based; 0 when the error is not about one line), the
/// line's text (cut to [`CONTENT_CHARS`] characters) and what was wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct TraceError {
    /// 1-based line number in the file; 0 for the whole trace or a replay setting.
    pub line: usize,
    /// The line as written (trimmed, cut to [`CONTENT_CHARS`] characters with `…`).
    pub content: String,
    /// What was wrong and what was expected.
    pub kind: TraceErrorKind,
}

/// How much of a bad line an error quotes: enough to recognise it, not a whole
/// Mooncake row with hundreds of hash ids.
pub const CONTENT_CHARS: usize = 80;

/// The largest token count a request may have: no served model takes a 10-million-token
/// context, so a bigger number is a corrupt row, not a request.
pub const MAX_TOKENS: u64 = 10_000_000;

/// What was wrong; each message says what was expected instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceErrorKind {
    /// Nothing but blank lines, comments or a header.
    #[error("the trace has no rows (only blank lines, `#` comments or a header)")]
    Empty,
    /// The first line fits none of the formats.
    #[error(
        "matches no trace format; expected one of: a rate CSV (`t_seconds,rate_per_second` \
         rows), Mooncake JSONL (`{{\"timestamp\": ms, \"input_length\": N, \"output_length\": N}}` \
         per line) or an Azure LLM inference CSV (header `TIMESTAMP,ContextTokens,GeneratedTokens`)"
    )]
    UnknownFormat,
    /// An Azure header without one of its three columns.
    #[error(
        "has no `{0}` column; an Azure LLM inference CSV's header names TIMESTAMP, \
         ContextTokens and GeneratedTokens"
    )]
    IncompleteAzureHeader(&'static str),
    /// A rate CSV row that is not two numbers.
    #[error("is not `t_seconds,rate_per_second` (two numbers)")]
    NotRatePoint,
    /// A rate CSV row with a negative or non-finite time or rate.
    #[error("time and rate must be finite and ≥ 0")]
    BadRatePoint,
    /// A rate CSV row earlier than the row before it.
    #[error("time goes backwards (the row before is at {previous} s); rows must be in time order")]
    TimeBackwards {
        /// The previous row's time, seconds.
        previous: f64,
    },
    /// A Mooncake line that is not a JSON object of the expected shape.
    #[error("is not a Mooncake JSON object ({0})")]
    NotJson(String),
    /// A required field is absent.
    #[error("has no `{0}`")]
    MissingField(&'static str),
    /// A token count that is not a whole number from 0 to [`MAX_TOKENS`].
    #[error(
        "has `{field}` {value}: {reason}; expected a whole number of tokens from 0 to 10000000"
    )]
    BadTokens {
        /// The field or column.
        field: &'static str,
        /// Its text as written.
        value: String,
        /// Negative, fractional, too big, or not a number.
        reason: &'static str,
    },
    /// A request that generates nothing: vLLM always generates at least one token
    /// (`max_tokens ≥ 1`), so such a row is not a served request.
    #[error("has `{0}` 0; every request generates at least one token")]
    ZeroOutput(&'static str),
    /// An unreadable or negative timestamp.
    #[error("has `{field}` {value}: {reason}")]
    BadTimestamp {
        /// The field or column.
        field: &'static str,
        /// Its text as written.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An Azure row with fewer columns than its header needs.
    #[error("has {found} columns; the header needs at least {needed}")]
    MissingColumns {
        /// Columns in the row.
        found: usize,
        /// Columns up to the last one read.
        needed: usize,
    },
    /// `--rate-scale` not finite and > 0.
    #[error("--rate-scale must be a finite number > 0, got {0}")]
    BadRateScale(f64),
    /// A replay resolution not finite and > 0.
    #[error("the trace resolution must be a finite number of seconds > 0, got {0}")]
    BadResolution(f64),
}

impl TraceError {
    fn at(line: usize, content: &str, kind: TraceErrorKind) -> TraceError {
        let mut cut: String = content.chars().take(CONTENT_CHARS).collect();
        if cut.len() < content.len() {
            cut.push('…');
        }
        TraceError {
            line,
            content: cut,
            kind,
        }
    }

    fn whole(kind: TraceErrorKind) -> TraceError {
        TraceError {
            line: 0,
            content: String::new(),
            kind,
        }
    }

    fn render(&self) -> String {
        if self.line == 0 {
            format!("trace: {}", self.kind)
        } else {
            format!("trace line {}: `{}` {}", self.line, self.content, self.kind)
        }
    }
}

/// The lines that hold data: 1-based number and trimmed text, blank lines and `#`
/// comments dropped (and a byte-order mark, which spreadsheet exports put first).
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// Reads a trace in any of the [`TraceFormat`]s, told from its content (module docs).
pub fn parse_trace(text: &str) -> Result<ParsedTrace, TraceError> {
    let mut lines = data_lines(text).peekable();
    let Some(&(number, first)) = lines.peek() else {
        return Err(TraceError::whole(TraceErrorKind::Empty));
    };
    if first.starts_with('{') {
        return mooncake(lines);
    }
    match azure_columns(first) {
        Ok(Some(columns)) => {
            lines.next();
            return azure(columns, lines);
        }
        Ok(None) => {}
        Err(missing) => {
            let kind = TraceErrorKind::IncompleteAzureHeader(missing);
            return Err(TraceError::at(number, first, kind));
        }
    }
    match split_csv(first).as_slice() {
        [t, rate] if t.parse::<f64>().is_ok() && rate.parse::<f64>().is_ok() => rates(lines),
        [_, _] => {
            // Two columns that are not numbers: the rate CSV's header. A bad row after it
            // is then named as a bad rate row, the likeliest intent of a two-column file.
            lines.next();
            rates(lines)
        }
        _ => Err(TraceError::at(number, first, TraceErrorKind::UnknownFormat)),
    }
}

fn split_csv(line: &str) -> Vec<&str> {
    line.split(',')
        .map(|field| field.trim().trim_matches('"').trim())
        .collect()
}

fn rates<'a>(lines: impl Iterator<Item = (usize, &'a str)>) -> Result<ParsedTrace, TraceError> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (number, line) in lines {
        let bad = |kind| Err(TraceError::at(number, line, kind));
        let parsed = match split_csv(line).as_slice() {
            [t, rate] => t.parse::<f64>().ok().zip(rate.parse::<f64>().ok()),
            _ => None,
        };
        let Some((t, rate)) = parsed else {
            return bad(TraceErrorKind::NotRatePoint);
        };
        if !t.is_finite() || t < 0.0 || !rate.is_finite() || rate < 0.0 {
            return bad(TraceErrorKind::BadRatePoint);
        }
        if let Some(&(previous, _)) = points.last().filter(|(last, _)| t < *last) {
            return bad(TraceErrorKind::TimeBackwards { previous });
        }
        points.push((t, rate));
    }
    if points.is_empty() {
        return Err(TraceError::whole(TraceErrorKind::Empty));
    }
    Ok(ParsedTrace::Rates(points))
}

/// A token count as written: JSON's number or a CSV field.
enum Written<'a> {
    Json(&'a serde_json::Value),
    Text(&'a str),
}

/// A token count from 0 to [`MAX_TOKENS`]; whole-valued decimals (`52.0`, as a
/// dataframe export writes a column with gaps) are whole numbers too.
fn tokens(field: &'static str, written: Written<'_>) -> Result<u32, TraceErrorKind> {
    let (value, number) = match written {
        Written::Json(v) => (v.to_string(), v.as_f64().filter(|_| v.is_number())),
        Written::Text(s) => (s.to_owned(), s.parse::<f64>().ok()),
    };
    let bad = |reason| TraceErrorKind::BadTokens {
        field,
        value: value.clone(),
        reason,
    };
    let number = number
        .filter(|n| n.is_finite())
        .ok_or_else(|| bad("not a number"))?;
    if number < 0.0 {
        return Err(bad("negative"));
    }
    if number.fract() != 0.0 {
        return Err(bad("not a whole number"));
    }
    if number > MAX_TOKENS as f64 {
        return Err(bad("over 10 million, not a real request"));
    }
    // Whole and within 0..=MAX_TOKENS, so the cast is exact.
    Ok(number as u32)
}

fn output_tokens(field: &'static str, written: Written<'_>) -> Result<u32, TraceErrorKind> {
    match tokens(field, written)? {
        0 => Err(TraceErrorKind::ZeroOutput(field)),
        n => Ok(n),
    }
}

/// One Mooncake line; other fields (`hash_ids`, …) are skipped unread.
#[derive(serde::Deserialize)]
struct MooncakeRow {
    timestamp: Option<serde_json::Value>,
    input_length: Option<serde_json::Value>,
    output_length: Option<serde_json::Value>,
}

/// Mooncake writes whole milliseconds.
const MOONCAKE_RESOLUTION_SECONDS: f64 = 1e-3;

fn mooncake<'a>(lines: impl Iterator<Item = (usize, &'a str)>) -> Result<ParsedTrace, TraceError> {
    let mut requests = Vec::new();
    for (number, line) in lines {
        let request = mooncake_row(line).map_err(|kind| TraceError::at(number, line, kind))?;
        requests.push(request);
    }
    Ok(ParsedTrace::Requests {
        format: TraceFormat::MooncakeJsonl,
        requests: sorted(requests),
        resolution_seconds: MOONCAKE_RESOLUTION_SECONDS,
    })
}

fn mooncake_row(line: &str) -> Result<TraceRequest, TraceErrorKind> {
    // serde would read a struct from a JSON array too; a Mooncake row is an object.
    if !line.starts_with('{') {
        return Err(TraceErrorKind::NotJson("not a JSON object".to_owned()));
    }
    let row: MooncakeRow = serde_json::from_str(line).map_err(|e| {
        // serde's "at line 1 column N" is about the JSON text, not the file: keep the column.
        TraceErrorKind::NotJson(e.to_string().replace("line 1 column", "column"))
    })?;
    let field =
        |value: Option<serde_json::Value>, name| value.ok_or(TraceErrorKind::MissingField(name));
    let timestamp = field(row.timestamp, "timestamp")?;
    let input = field(row.input_length, "input_length")?;
    let output = field(row.output_length, "output_length")?;
    let millis = timestamp.as_f64().filter(|ms| ms.is_finite() && *ms >= 0.0);
    let Some(millis) = millis.filter(|_| timestamp.is_number()) else {
        return Err(TraceErrorKind::BadTimestamp {
            field: "timestamp",
            value: timestamp.to_string(),
            reason: "expected milliseconds from the trace's start, a number ≥ 0",
        });
    };
    Ok(TraceRequest {
        arrival_seconds: millis / 1000.0,
        input_tokens: tokens("input_length", Written::Json(&input))?,
        output_tokens: output_tokens("output_length", Written::Json(&output))?,
    })
}

/// Where the Azure columns are: `[TIMESTAMP, ContextTokens, GeneratedTokens]`.
type AzureColumns = [usize; 3];

const AZURE_NAMES: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// The column of each Azure name in a header line (any case, any order, extra columns
/// allowed); `Ok(None)` when it is not an Azure header, the first missing name when it
/// names a token column (Azure's own names) but lacks another.
fn azure_columns(line: &str) -> Result<Option<AzureColumns>, &'static str> {
    let fields = split_csv(line);
    let find = |name: &str| fields.iter().position(|f| f.eq_ignore_ascii_case(name));
    let found = AZURE_NAMES.map(find);
    match found {
        [Some(at), Some(context), Some(generated)] => Ok(Some([at, context, generated])),
        // `TIMESTAMP` alone is any CSV's column; the token names are Azure's.
        [_, None, None] => Ok(None),
        _ => {
            let missing = AZURE_NAMES.iter().zip(found).find(|(_, at)| at.is_none());
            Err(missing.map_or(AZURE_NAMES[0], |(name, _)| name))
        }
    }
}

fn azure<'a>(
    columns: AzureColumns,
    lines: impl Iterator<Item = (usize, &'a str)>,
) -> Result<ParsedTrace, TraceError> {
    let needed = columns.iter().max().map_or(0, |last| last + 1);
    let mut rows: Vec<(i64, TraceRequest)> = Vec::new();
    let mut digits = 0;
    for (number, line) in lines {
        let bad = |kind| TraceError::at(number, line, kind);
        let fields = split_csv(line);
        if fields.len() < needed {
            return Err(bad(TraceErrorKind::MissingColumns {
                found: fields.len(),
                needed,
            }));
        }
        let [at, context, generated] = columns.map(|c| fields[c]);
        let stamp = timestamp::parse(at).map_err(|reason| {
            bad(TraceErrorKind::BadTimestamp {
                field: "TIMESTAMP",
                value: format!("`{at}`"),
                reason,
            })
        })?;
        digits = digits.max(stamp.fraction_digits);
        let request = TraceRequest {
            arrival_seconds: 0.0,
            input_tokens: tokens("ContextTokens", Written::Text(context)).map_err(bad)?,
            output_tokens: output_tokens("GeneratedTokens", Written::Text(generated))
                .map_err(bad)?,
        };
        rows.push((stamp.unix_nanos, request));
    }
    let Some(start) = rows.iter().map(|(nanos, _)| *nanos).min() else {
        return Err(TraceError::whole(TraceErrorKind::Empty));
    };
    // Differences in integer nanoseconds: an epoch-sized f64 would lose the 100 ns digits.
    let requests = rows
        .into_iter()
        .map(|(nanos, r)| TraceRequest {
            arrival_seconds: (nanos - start) as f64 * 1e-9,
            ..r
        })
        .collect();
    Ok(ParsedTrace::Requests {
        format: TraceFormat::AzureCsv,
        requests: sorted(requests),
        resolution_seconds: 10_f64.powi(-(digits as i32)),
    })
}

/// `requests` by arrival, ties in file order; an empty list is an empty trace's error
/// at the caller, so this only sorts.
fn sorted(mut requests: Vec<TraceRequest>) -> Vec<TraceRequest> {
    requests.sort_by(|a, b| a.arrival_seconds.total_cmp(&b.arrival_seconds));
    requests
}

/// The PCG stream of [`replicate`]'s draws, apart from the arrival streams of
/// `arrivals` (1 and 2) so a replay's extra copies do not shift any other draw.
const REPLICATE_STREAM: u64 = 7;

/// `requests` with their load multiplied by `rate_scale`: each request is replayed
/// ⌊X⌋ times plus once more with probability frac(X), its copies spread evenly within
/// the timestamp's resolution (copy `j` of `n` at `t + resolution·j/n`), so the copies
/// stay inside the instant the trace recorded and keep their request's sizes.
///
/// The extra copy is one uniform draw per request, in input order, from `seed`'s own
/// stream: the same seed gives the same replay, and a different seed varies only which
/// requests get the extra copy. `rate_scale` = 1 returns the input as it is. The output
/// is sorted by arrival (stably: copies of one request stay in order). `rate_scale` and
/// `resolution_seconds` must be finite and > 0.
pub fn replicate(
    requests: &[TraceRequest],
    rate_scale: f64,
    resolution_seconds: f64,
    seed: u64,
) -> Result<Vec<TraceRequest>, TraceError> {
    if !rate_scale.is_finite() || rate_scale <= 0.0 {
        return Err(TraceError::whole(TraceErrorKind::BadRateScale(rate_scale)));
    }
    if !resolution_seconds.is_finite() || resolution_seconds <= 0.0 {
        return Err(TraceError::whole(TraceErrorKind::BadResolution(
            resolution_seconds,
        )));
    }
    if rate_scale == 1.0 {
        return Ok(requests.to_vec());
    }
    let whole = rate_scale.floor();
    let fraction = rate_scale - whole;
    let mut rng = Rng::new(seed, REPLICATE_STREAM);
    let mut out = Vec::with_capacity((requests.len() as f64 * rate_scale.ceil()) as usize);
    for request in requests {
        // Drawn for every request, even when frac(X) = 0, so request i always takes
        // the i-th draw.
        let extra = rng.uniform() < fraction;
        let copies = whole as usize + usize::from(extra);
        for j in 0..copies {
            let offset = resolution_seconds * j as f64 / copies as f64;
            out.push(TraceRequest {
                arrival_seconds: request.arrival_seconds + offset,
                ..*request
            });
        }
    }
    Ok(sorted(out))
}
