//! One classic histogram, stored the way prometheus_client stores it.

/// A classic histogram as prometheus_client stores it: one non-cumulative count per bound plus
/// the `+Inf` overflow; the cumulative `_bucket` values are summed at render time.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending, finite).
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// The finite upper bounds (`+Inf` is implied).
    pub fn bounds(&self) -> &'static [f64] {
        self.bounds
    }

    /// Non-cumulative counts, one per bound and a last one for `+Inf`.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// `_sum`: the total of all observed values.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// `_count`: the number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Like prometheus_client's `observe`: the first bucket whose bound is `>= v` (`le`).
    pub fn observe(&mut self, v: f64) {
        self.observe_n(v, 1);
    }

    /// `n` observations of the same value at once (vLLM observes ITL once per output token).
    pub fn observe_n(&mut self, v: f64, n: u64) {
        if n == 0 {
            return;
        }
        let idx = self.bounds.partition_point(|b| *b < v);
        self.counts[idx] += n;
        self.sum += v * n as f64;
    }

    /// Add another histogram's observations into this one. Bounds are assumed equal (both
    /// come from the same constant); extra buckets of a longer `other` go to `+Inf`.
    pub(crate) fn merge(&mut self, other: &Histogram) {
        let last = self.counts.len() - 1;
        for (i, c) in other.counts.iter().enumerate() {
            self.counts[i.min(last)] += c;
        }
        self.sum += other.sum;
    }

    /// Overwrite the state directly, for tests that want exact bucket values. `counts` must have
    /// one entry per bound plus one for `+Inf`; a wrong length is padded or truncated.
    pub fn set(&mut self, counts: &[u64], sum: f64) {
        self.counts = counts.to_vec();
        self.counts.resize(self.bounds.len() + 1, 0);
        self.sum = sum;
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;
    use crate::fake::buckets::TTFT_BUCKETS;

    #[test]
    fn histogram_uses_le_semantics() {
        let mut h = Histogram::new(&TTFT_BUCKETS);
        h.observe(0.1); // exactly on a bound: that bucket
        h.observe(0.1000001);
        h.observe(5000.0); // beyond the last bound: +Inf
        assert_eq!(h.counts()[7], 1);
        assert_eq!(h.counts()[8], 1);
        assert_eq!(h.counts()[22], 1);
        assert_eq!(h.count(), 3);
    }
}
