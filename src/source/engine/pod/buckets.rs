//! A pod's TTFT histogram: its cumulative buckets, read from the `_bucket` series by `le`.

use std::collections::BTreeMap;

use serde::Serialize;

/// Cumulative bucket counts of one histogram on one pod, bounds in seconds,
/// ascending, the last one `+Inf`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Buckets {
    /// Upper bounds in seconds (`le`), ascending; the last is `+Inf`.
    #[serde(serialize_with = "serialize_bounds")]
    pub bounds: Vec<f64>,
    /// Cumulative counts per bound.
    pub counts: Vec<f64>,
}

fn serialize_bounds<S: serde::Serializer>(bounds: &[f64], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(bounds.len()))?;
    for b in bounds {
        if b.is_finite() {
            seq.serialize_element(b)?;
        } else {
            seq.serialize_element("+Inf")?;
        }
    }
    seq.end()
}

impl Buckets {
    /// Total observations (the `+Inf` bucket).
    pub fn total(&self) -> f64 {
        self.counts.last().copied().unwrap_or(0.0)
    }
}

pub(super) fn parse_le(le: &str) -> Option<f64> {
    match le.trim() {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        other => other.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// An `f64` bound that sorts (bounds are never NaN: [`parse_le`] refuses it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OrderedBound(pub(super) f64);

impl Eq for OrderedBound {}

impl PartialOrd for OrderedBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

pub(super) fn buckets_from(map: BTreeMap<OrderedBound, f64>) -> Result<Option<Buckets>, String> {
    if map.is_empty() {
        return Ok(None);
    }
    let (bounds, counts): (Vec<f64>, Vec<f64>) = map.into_iter().map(|(b, c)| (b.0, c)).unzip();
    if bounds.last().is_none_or(|b| b.is_finite()) {
        return Err("TTFT histogram has no +Inf bucket".to_owned());
    }
    Ok(Some(Buckets { bounds, counts }))
}
