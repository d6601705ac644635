//! The few PromQL shapes a KEDA `prometheus` trigger on vLLM is written in,
//! recognised exactly: an aggregated gauge (`sum(vllm:num_requests_waiting{…})`)
//! and a histogram quantile over a rate window. Anything else is not
//! interpreted: `--from-keda` says so instead of guessing what a query means.

use crate::source::prometheus::promql_string;

/// One label matcher, e.g. `model_name="llama"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// Label name.
    pub label: String,
    /// `=`, `!=`, `=~` or `!~`.
    pub op: String,
    /// The value, unescaped.
    pub value: String,
}

impl Matcher {
    /// The matcher as PromQL writes it.
    pub fn promql(&self) -> String {
        format!("{}{}{}", self.label, self.op, promql_string(&self.value))
    }
}

/// A series selector: a metric name and its matchers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Metric name as written (`:` or `_`).
    pub metric: String,
    /// Label matchers, in the order written.
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// Whether the metric is `name`, matching `:` and `_` alike (the
    /// OpenMetrics escaping of some clients rewrites one into the other).
    pub fn is(&self, name: &str) -> bool {
        self.metric.replace(':', "_") == name.replace(':', "_")
    }
}

/// How a gauge's series are aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// A bare selector: one series per pod (KEDA needs exactly one).
    None,
    /// `sum(…)`.
    Sum,
    /// `avg(…)`.
    Avg,
    /// `max(…)`, `min(…)` or `count(…)`: no per-replica meaning here.
    Other,
}

/// A recognised query.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `[agg](selector)` or a bare selector.
    Gauge(Aggregation, Selector),
    /// `histogram_quantile(q, sum by (le) (rate(selector[window])))`.
    Quantile {
        /// The quantile, in (0, 1).
        quantile: f64,
        /// The `_bucket` selector.
        buckets: Selector,
        /// The rate window, whole seconds.
        window_seconds: u64,
    },
}

/// Recognise `query`, or `None` when it is none of the shapes above.
pub fn recognise(query: &str) -> Option<Shape> {
    let mut p = Parser {
        s: query.as_bytes(),
        i: 0,
    };
    let shape = p.shape()?;
    p.ws();
    (p.i == p.s.len()).then_some(shape)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(token.as_bytes()) {
            self.i += token.len();
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() {
            let c = self.s[self.i];
            let ok = c.is_ascii_alphabetic()
                || c == b'_'
                || c == b':'
                || (self.i > start && c.is_ascii_digit());
            if !ok {
                break;
            }
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn peek_ident(&mut self) -> Option<String> {
        let at = self.i;
        let id = self.ident();
        self.i = at;
        id
    }

    fn shape(&mut self) -> Option<Shape> {
        let id = self.peek_ident()?;
        match id.as_str() {
            "histogram_quantile" => {
                self.ident();
                self.quantile()
            }
            "sum" | "avg" | "max" | "min" | "count" => {
                self.ident();
                let aggregation = match id.as_str() {
                    "sum" => Aggregation::Sum,
                    "avg" => Aggregation::Avg,
                    _ => Aggregation::Other,
                };
                if !self.eat("(") {
                    return None;
                }
                let selector = self.selector()?;
                self.eat(")").then_some(Shape::Gauge(aggregation, selector))
            }
            _ => Some(Shape::Gauge(Aggregation::None, self.selector()?)),
        }
    }

    /// After `histogram_quantile`: `(q, sum by (le) (rate(sel[w])))`, the
    /// `by (le)` before or after the sum's argument.
    fn quantile(&mut self) -> Option<Shape> {
        if !self.eat("(") {
            return None;
        }
        let quantile = self.number()?;
        if !self.eat(",") || self.ident()? != "sum" {
            return None;
        }
        let by_first = self.by_le()?;
        if !self.eat("(") {
            return None;
        }
        let function = self.ident()?;
        if !matches!(function.as_str(), "rate" | "irate" | "increase") || !self.eat("(") {
            return None;
        }
        let buckets = self.selector()?;
        if !self.eat("[") {
            return None;
        }
        let window_seconds = self.duration()?;
        if !self.eat("]") || !self.eat(")") || !self.eat(")") {
            return None;
        }
        if !by_first && !self.by_le()? {
            return None;
        }
        if !(self.eat(")") && quantile > 0.0 && quantile < 1.0) {
            return None;
        }
        Some(Shape::Quantile {
            quantile,
            buckets,
            window_seconds,
        })
    }

    /// `by (le)` if present (`Some(true)`), nothing (`Some(false)`), or
    /// another grouping (`None`: several series, not one quantile).
    fn by_le(&mut self) -> Option<bool> {
        let at = self.i;
        match self.ident().as_deref() {
            Some("by") => {
                let ok = self.eat("(") && self.ident()? == "le" && self.eat(")");
                ok.then_some(true)
            }
            Some(_) => None,
            None => {
                self.i = at;
                Some(false)
            }
        }
    }

    fn number(&mut self) -> Option<f64> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_digit() || self.s[self.i] == b'.') {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok()
    }

    /// A PromQL duration (`1m`, `90s`, `1m30s`) in whole seconds.
    fn duration(&mut self) -> Option<u64> {
        self.ws();
        let mut millis: u64 = 0;
        let mut any = false;
        loop {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            if self.i == start {
                break;
            }
            let n: u64 = std::str::from_utf8(&self.s[start..self.i])
                .ok()?
                .parse()
                .ok()?;
            let unit_ms: u64 = if self.s[self.i..].starts_with(b"ms") {
                self.i += 2;
                1
            } else {
                let unit = *self.s.get(self.i)?;
                self.i += 1;
                match unit {
                    b's' => 1_000,
                    b'm' => 60_000,
                    b'h' => 3_600_000,
                    b'd' => 86_400_000,
                    b'w' => 604_800_000,
                    _ => return None,
                }
            };
            millis = millis.checked_add(n.checked_mul(unit_ms)?)?;
            any = true;
        }
        (any && millis.is_multiple_of(1000)).then_some(millis / 1000)
    }

    fn selector(&mut self) -> Option<Selector> {
        let metric = self.ident()?;
        let mut matchers = Vec::new();
        if self.eat("{") {
            loop {
                if self.eat("}") {
                    break;
                }
                let label = self.ident()?;
                self.ws();
                let op = ["=~", "!~", "!=", "="]
                    .into_iter()
                    .find(|op| self.s[self.i..].starts_with(op.as_bytes()))?;
                self.i += op.len();
                let value = self.string()?;
                matchers.push(Matcher {
                    label,
                    op: op.to_owned(),
                    value,
                });
                if !self.eat(",") {
                    if !self.eat("}") {
                        return None;
                    }
                    break;
                }
            }
        }
        Some(Selector { metric, matchers })
    }

    fn string(&mut self) -> Option<String> {
        self.ws();
        let quote = *self.s.get(self.i)?;
        if quote != b'"' && quote != b'\'' {
            return None;
        }
        self.i += 1;
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                b'\\' => {
                    let next = *self.s.get(self.i)?;
                    self.i += 1;
                    out.push(match next {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                }
                c if c == quote => return String::from_utf8(out).ok(),
                c => out.push(c),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauge(q: &str) -> (Aggregation, Selector) {
        match recognise(q) {
            Some(Shape::Gauge(a, s)) => (a, s),
            other => panic!("{q}: {other:?}"),
        }
    }

    #[test]
    fn gauges_with_and_without_aggregation() {
        let (a, s) = gauge("sum(vllm:num_requests_waiting)");
        assert_eq!(a, Aggregation::Sum);
        assert!(s.is("vllm:num_requests_waiting") && s.matchers.is_empty());
        let (a, s) = gauge(r#" vllm_num_requests_waiting{model="llama3", namespace = 'x',} "#);
        assert_eq!(a, Aggregation::None);
        assert!(s.is("vllm:num_requests_waiting"));
        assert_eq!(s.matchers.len(), 2);
        assert_eq!(s.matchers[0].promql(), r#"model="llama3""#);
        let (a, s) = gauge(r#"avg(vllm:kv_cache_usage_perc{model_name=~"a\"b"})"#);
        assert_eq!(a, Aggregation::Avg);
        assert_eq!(s.matchers[0].value, "a\"b");
        assert_eq!(s.matchers[0].op, "=~");
        assert_eq!(gauge("max(x)").0, Aggregation::Other);
    }

    #[test]
    fn quantiles_with_by_le_either_side() {
        for q in [
            "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))",
            "histogram_quantile(0.95, sum(rate(vllm:time_to_first_token_seconds_bucket{a=\"b\"}[60s])) by (le))",
        ] {
            match recognise(q) {
                Some(Shape::Quantile {
                    quantile,
                    buckets,
                    window_seconds,
                }) => {
                    assert_eq!((quantile, window_seconds), (0.95, 60), "{q}");
                    assert!(buckets.is("vllm:time_to_first_token_seconds_bucket"));
                }
                other => panic!("{q}: {other:?}"),
            }
        }
        assert_eq!(
            recognise("histogram_quantile(0.9, sum(rate(x_bucket[1m30s])) by (le))"),
            Some(Shape::Quantile {
                quantile: 0.9,
                buckets: Selector {
                    metric: "x_bucket".into(),
                    matchers: vec![]
                },
                window_seconds: 90
            })
        );
    }

    #[test]
    fn anything_else_is_not_recognised() {
        for q in [
            "sum(rate(vllm:num_incoming_requests_total[1m]) > bool 0)",
            "sum(vllm:num_requests_waiting) / sum(vllm:num_requests_running)",
            "sum by (pod) (vllm:num_requests_waiting)",
            "histogram_quantile(0.95, sum by (le, model_name) (rate(x_bucket[1m])))",
            "histogram_quantile(0.95, sum by (le) (rate(x_bucket[500ms])))",
            "sum(vllm:num_requests_waiting{model=\"unterminated})",
            "",
        ] {
            assert_eq!(recognise(q), None, "{q}");
        }
    }
}
