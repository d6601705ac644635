//! The latency (TTFT) guard's keys: `ttftSloSeconds`, `ttftTolerance` and
//! the quantile settings the TTFT signal is read with.

use std::time::Duration;

use super::defaults::{DEFAULT_TTFT_QUANTILE, DEFAULT_TTFT_TOLERANCE, DEFAULT_TTFT_WINDOW};
use super::error::{MetadataError, conflict};
use super::keys;
use super::params::LatencyGuard;
use super::values::{Metadata, number, optional_non_negative, optional_positive, whole_seconds};

/// TTFT quantile settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftSettings {
    /// `ttftWindowSeconds`.
    pub window: Duration,
    /// `ttftQuantile`.
    pub quantile: f64,
}

/// The guard, when `ttftSloSeconds` is set; its other keys alone are a conflict.
pub fn latency_guard(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Option<LatencyGuard> {
    let slo = optional_positive(
        md,
        keys::TTFT_SLO_SECONDS,
        "a number of seconds greater than 0, e.g. `2`",
        errors,
    );
    let tolerance =
        optional_non_negative(md, keys::TTFT_TOLERANCE, errors).unwrap_or(DEFAULT_TTFT_TOLERANCE);
    if slo.is_none() {
        for key in [
            keys::TTFT_TOLERANCE,
            keys::TTFT_WINDOW_SECONDS,
            keys::TTFT_QUANTILE,
            keys::TTFT_QUERY,
        ] {
            if md.has(key) {
                errors.push(conflict(key, "has no effect without `ttftSloSeconds`"));
            }
        }
    }
    slo.map(|slo_seconds| LatencyGuard {
        slo_seconds,
        tolerance,
    })
}

/// `ttftWindowSeconds` and `ttftQuantile`, defaulted.
pub fn ttft_settings(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> TtftSettings {
    TtftSettings {
        window: whole_seconds(md, keys::TTFT_WINDOW_SECONDS, 10, 900, errors)
            .unwrap_or(DEFAULT_TTFT_WINDOW),
        quantile: number(
            md,
            keys::TTFT_QUANTILE,
            |q| q > 0.0 && q < 1.0,
            "a number between 0 and 1, both excluded, e.g. `0.95`",
            errors,
        )
        .unwrap_or(DEFAULT_TTFT_QUANTILE),
    }
}
