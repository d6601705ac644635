//! Where `U` (GPU utilisation) comes from and the GPU guard's thresholds.

use reqwest::Url;

use super::defaults::DEFAULT_GPU_BUSY_PERCENT;
use super::engine::{needs_prometheus, prometheus_declared};
use super::error::{MetadataError, conflict, invalid};
use super::keys;
use super::params::GpuGuard;
use super::values::{Metadata, number, targets};
use crate::source::dcgm::PodSelector;
use crate::source::prometheus::{Answer, DefaultQueries};
use crate::source::{DcgmSource, PromQuery};

/// How `U` is read.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuInput {
    /// Scrape dcgm-exporter (`dcgmTargets`).
    Scrape(DcgmSource),
    /// PromQL (`gpuUtilQuery` or the default from `podSelectorRegex`).
    Prometheus(PromQuery),
}

/// `U` from `dcgmTargets` (needs `podSelectorRegex`), `gpuUtilQuery`, or
/// the default query when `prometheusAddress` and `podSelectorRegex` are set.
pub fn gpu_input(
    md: &Metadata<'_>,
    prometheus: Option<&Url>,
    errors: &mut Vec<MetadataError>,
) -> Option<GpuInput> {
    let selector = match md.get(keys::POD_SELECTOR_REGEX) {
        Some((sent, raw)) => {
            match PodSelector::new(raw) {
                Ok(selector) if !raw.is_empty() => Some(selector),
                Ok(_) => {
                    errors.push(invalid(sent, raw, "a regular expression matching the workload's pod names, e.g. `llama-8b-.*`"));
                    None
                }
                Err(e) => {
                    errors.push(invalid(
                        sent,
                        raw,
                        format!("a valid regular expression ({})", regex_reason(&e)),
                    ));
                    None
                }
            }
        }
        None => None,
    };
    let namespace = md.text(keys::NAMESPACE);
    if md.has(keys::DCGM_TARGETS) {
        if md.has(keys::GPU_UTIL_QUERY) {
            errors.push(conflict(
                keys::GPU_UTIL_QUERY,
                "and `dcgmTargets` both read GPU utilisation; set one",
            ));
        }
        let targets = targets(md, keys::DCGM_TARGETS, errors)?;
        let Some(pods) = selector else {
            if !md.has(keys::POD_SELECTOR_REGEX) {
                errors.push(conflict(
                    keys::DCGM_TARGETS,
                    "needs `podSelectorRegex`: dcgm-exporter reports every GPU of a node, and only the scaled workload's may count",
                ));
            }
            return None;
        };
        return Some(GpuInput::Scrape(DcgmSource {
            targets,
            namespace: namespace.map(str::to_owned),
            pods: Some(pods),
        }));
    }
    let query = match md.get(keys::GPU_UTIL_QUERY) {
        Some((_, raw)) if !raw.is_empty() => raw.to_owned(),
        Some((sent, raw)) => {
            errors.push(invalid(sent, raw, "a PromQL expression"));
            return None;
        }
        None if prometheus.is_some() && selector.is_some() => {
            DefaultQueries::gpu_util(namespace, md.text(keys::POD_SELECTOR_REGEX))
        }
        None => return None,
    };
    let Some(address) = prometheus else {
        // A present but wrong address has its own error already.
        if prometheus_declared(md) {
            return None;
        }
        if let Some((sent, raw)) = md.get(keys::GPU_UTIL_QUERY) {
            errors.push(invalid(sent, raw, needs_prometheus(keys::GPU_UTIL_QUERY)));
        }
        return None;
    };
    Some(GpuInput::Prometheus(PromQuery {
        address: address.clone(),
        query,
        auth_profile: md.text(keys::AUTH_PROFILE).map(str::to_owned),
        answer: Answer::Value(keys::GPU_UTIL_QUERY),
    }))
}

/// Why a pattern is not a regular expression, without the pattern: the
/// regex crate's syntax error quotes it whole, unredacted and uncut, and
/// the error already echoes the value (redacted, cut).
fn regex_reason(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix("error: "))
            .unwrap_or("a syntax error")
            .to_owned(),
        other => other.to_string(),
    }
}

/// The guard's thresholds when a GPU signal is `configured`; without one,
/// a threshold key is a conflict.
pub fn gpu_guard(
    md: &Metadata<'_>,
    configured: bool,
    errors: &mut Vec<MetadataError>,
) -> Option<GpuGuard> {
    let busy = number(
        md,
        keys::GPU_BUSY_PERCENT,
        |v| v > 0.0 && v <= 100.0,
        "a percentage in (0, 100], e.g. `90`",
        errors,
    );
    let idle = number(
        md,
        keys::GPU_IDLE_PERCENT,
        |v| (0.0..100.0).contains(&v),
        "a percentage in [0, 100), e.g. `10`",
        errors,
    );
    if !configured {
        for key in [keys::GPU_BUSY_PERCENT, keys::GPU_IDLE_PERCENT] {
            if md.has(key) {
                errors.push(conflict(key, "needs a GPU signal: `dcgmTargets`, `gpuUtilQuery`, or `prometheusAddress` with `podSelectorRegex`"));
            }
        }
        return None;
    }
    let busy = busy.unwrap_or(DEFAULT_GPU_BUSY_PERCENT);
    if let Some(idle) = idle
        && idle >= busy
    {
        errors.push(conflict(
            keys::GPU_IDLE_PERCENT,
            format!("({idle}) must be below `gpuBusyPercent` ({busy})"),
        ));
    }
    Some(GpuGuard {
        busy_percent: Some(busy),
        idle_percent: idle,
    })
}
