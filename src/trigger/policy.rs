//! `policy` and the `capacity` policy's keys → [`Policy`].

use super::defaults::{
    DEFAULT_ARRIVAL_SMOOTHING_SECONDS, DEFAULT_DRAIN_HORIZON_SECONDS, DEFAULT_HEADROOM,
    DEFAULT_PEAK_HOLD_SECONDS,
};
use super::engine::SUMMED_QUERIES;
use super::error::{MetadataError, conflict, invalid};
use super::keys;
use super::params::{CapacityParams, Policy};
use super::values::{Metadata, number, optional_positive};

/// The policy; with `capacity`, its parameters (defaulted); with `backlog`,
/// any capacity key is a conflict.
pub fn policy(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Policy {
    // Default: `capacity` for a trigger that reads engine pods, with or
    // without μ (learned from the pods' counters, the backlog formula as
    // its floor until confident: docs/decisions/0022): scraped, or through
    // Prometheus with per-pod queries (0024), unless a summed query key
    // says the user wrote the sums `backlog` reads; and when a drain rate
    // is given. `backlog` otherwise (a broker-only trigger).
    let promql = md.has(keys::PROMETHEUS_ADDRESS) || md.has(keys::SERVER_ADDRESS);
    let summed = SUMMED_QUERIES.iter().any(|(key, _)| md.has(key));
    let capacity = match md.get(keys::POLICY) {
        None => {
            md.has(keys::VLLM_TARGETS) || promql && !summed || md.has(keys::DRAIN_RATE_PER_REPLICA)
        }
        Some((_, raw)) if raw.eq_ignore_ascii_case("backlog") => false,
        Some((_, raw)) if raw.eq_ignore_ascii_case("capacity") => true,
        Some((sent, raw)) => {
            errors.push(invalid(sent, raw, "`backlog` or `capacity`"));
            return Policy::Backlog;
        }
    };
    if !capacity {
        // Every key of the group but `policy` itself.
        for key in keys::CAPACITY_POLICY
            .iter()
            .copied()
            .filter(|k| *k != keys::POLICY)
        {
            if md.has(key) {
                errors.push(conflict(key, "only applies to `policy: capacity`"));
            }
        }
        return Policy::Backlog;
    }
    let seconds = |key: &'static str, default: f64, errors: &mut Vec<MetadataError>| {
        number(
            md,
            key,
            |v| v > 0.0 && v <= 86_400.0,
            "a number of seconds in (0, 86400]",
            errors,
        )
        .unwrap_or(default)
    };
    let learn = md.bool(keys::LEARN_DRAIN_RATE, true, errors);
    let drain = optional_positive(
        md,
        keys::DRAIN_RATE_PER_REPLICA,
        "a number of requests per second greater than 0, e.g. `2.5`",
        errors,
    );
    if !learn && drain.is_none() && !md.has(keys::DRAIN_RATE_PER_REPLICA) {
        errors.push(conflict(
            keys::LEARN_DRAIN_RATE,
            "`false` fixes μ at `drainRatePerReplica`: set it, or let μ be learned",
        ));
    }
    let params = CapacityParams {
        drain_rate_per_replica: drain,
        arrival_smoothing_seconds: seconds(
            keys::ARRIVAL_SMOOTHING_SECONDS,
            DEFAULT_ARRIVAL_SMOOTHING_SECONDS,
            errors,
        ),
        peak_hold_seconds: seconds(keys::PEAK_HOLD_SECONDS, DEFAULT_PEAK_HOLD_SECONDS, errors),
        headroom: number(
            md,
            keys::HEADROOM,
            |v| (0.0..=10.0).contains(&v),
            "a fraction from 0 to 10, e.g. `0.2`",
            errors,
        )
        .unwrap_or(DEFAULT_HEADROOM),
        drain_horizon_seconds: seconds(
            keys::DRAIN_HORIZON_SECONDS,
            DEFAULT_DRAIN_HORIZON_SECONDS,
            errors,
        ),
        learn_drain_rate: learn,
    };
    Policy::Capacity(params)
}
