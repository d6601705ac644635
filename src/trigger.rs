//! Trigger metadata → a validated [`TriggerSpec`].
//!
//! KEDA forwards every key of a ScaledObject trigger's `metadata` as
//! `scalerMetadata`, its own keys included. This module is the user reference
//! for those keys: each constant in [`keys`] documents one. Validation does no
//! I/O, so `GetMetricSpec` can depend on it alone and never fails because a
//! source is down.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::fusion::FusionParams;
use crate::source::{ScrapeTarget, SourceSpec, VllmSource};

/// Every metadata key backlog-scaler reads, with its meaning, type and default.
pub mod keys {
    /// Comma-separated list of engine pod metrics URLs to scrape directly, e.g.
    /// `http://10.0.0.7:8000/metrics`. An entry `dns+http://NAME:PORT/PATH` is
    /// resolved on every poll and each address is scraped: point it at a
    /// headless Service to follow every ready pod. A URL without a path gets
    /// `/metrics`. Required (it is the demand signal).
    pub const VLLM_TARGETS: &str = "vllmTargets";
    /// Only count series whose `model_name` label equals this value. Default:
    /// every model the pods serve.
    pub const MODEL_NAME: &str = "modelName";
    /// `T`: the backlog one replica should absorb, in requests. Required, a
    /// number > 0. KEDA's HPA computes `desiredReplicas = ceil(B / T)`.
    pub const TARGET_BACKLOG_PER_REPLICA: &str = "targetBacklogPerReplica";
    /// `C`: requests one replica runs at full batch (vLLM `--max-num-seqs`).
    /// When set, running requests join the backlog as `T·R/C`, so a full pod
    /// counts as one replica's worth of work. A number > 0. Default: unset
    /// (only waiting requests count).
    pub const RUNNING_PER_REPLICA: &str = "runningPerReplica";
    /// `A`: the trigger is active (KEDA scales from zero) when `B > A`,
    /// strictly, as KEDA's own activation thresholds. A number ≥ 0. Default 0.
    pub const ACTIVATION_BACKLOG: &str = "activationBacklog";
    /// How often the sources are read, in seconds, in the background. An
    /// integer from 1 to 300. Default 5.
    pub const POLL_INTERVAL_SECONDS: &str = "pollIntervalSeconds";
    /// How old the last good reading may be before the trigger answers
    /// `UNAVAILABLE` (so KEDA's `fallback` applies) instead of a value. Until
    /// then a failing source holds its last good value, flagged degraded.
    /// Seconds, at least `pollIntervalSeconds`. Default 3 × `pollIntervalSeconds`.
    pub const MAX_SIGNAL_AGE_SECONDS: &str = "maxSignalAgeSeconds";
    /// The metric name returned by `GetMetricSpec`. Letters, digits and `-`,
    /// at most 63 characters. Default `backlog`, or `backlog-<modelName>` with
    /// the model name reduced to those characters. Set it when two triggers of
    /// one ScaledObject point at this scaler: KEDA refuses duplicate names.
    pub const METRIC_NAME: &str = "metricName";

    /// KEDA's own key: the scaler's `host:port`. Accepted and ignored.
    pub const SCALER_ADDRESS: &str = "scalerAddress";
    /// KEDA's own key: dial the scaler with TLS. Accepted and ignored here.
    pub const ENABLE_TLS: &str = "enableTLS";
    /// KEDA's own key: skip TLS verification on KEDA's side. Accepted and ignored.
    pub const UNSAFE_SSL: &str = "unsafeSsl";

    /// Keys that configure backlog-scaler.
    pub const OURS: &[&str] = &[
        VLLM_TARGETS,
        MODEL_NAME,
        TARGET_BACKLOG_PER_REPLICA,
        RUNNING_PER_REPLICA,
        ACTIVATION_BACKLOG,
        POLL_INTERVAL_SECONDS,
        MAX_SIGNAL_AGE_SECONDS,
        METRIC_NAME,
    ];
    /// Keys KEDA itself reads and forwards with the rest.
    pub const KEDAS: &[&str] = &[SCALER_ADDRESS, ENABLE_TLS, UNSAFE_SSL];
}

/// Default poll interval (`pollIntervalSeconds`).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// `maxSignalAgeSeconds` defaults to this many poll intervals: one failed
/// poll is noise, three in a row is a lost signal.
pub const DEFAULT_MAX_SIGNAL_AGE_POLLS: u32 = 3;
const MAX_POLL_INTERVAL_SECS: u64 = 300;
const MAX_METRIC_NAME_LEN: usize = 63;

/// A trigger's metadata, validated and typed.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerSpec {
    /// Name returned by GetMetricSpec and matched (case-insensitively) by GetMetrics.
    pub metric_name: String,
    /// Parameters of the fusion formula.
    pub fusion: FusionParams,
    /// The sources this trigger reads; each becomes one shared poller.
    pub sources: Vec<SourceSpec>,
    /// Background poll interval of this trigger's sources.
    pub poll_interval: Duration,
    /// Age after which a held reading no longer counts.
    pub max_signal_age: Duration,
}

/// One problem with one metadata key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetadataError {
    /// A required key is absent.
    #[error("metadata key `{key}` is required: {allowed}")]
    Missing {
        /// The key.
        key: &'static str,
        /// What a valid value looks like.
        allowed: &'static str,
    },
    /// A key's value is not allowed.
    #[error("metadata key `{key}` has value `{value}`: {allowed}")]
    Invalid {
        /// The key, as sent (a `…FromEnv` key keeps its suffix).
        key: String,
        /// The offending value.
        value: String,
        /// What is allowed instead.
        allowed: String,
    },
    /// A key that is neither KEDA's nor ours.
    #[error("unknown metadata key `{key}`{}", nearest.map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default())]
    Unknown {
        /// The key as sent.
        key: String,
        /// The closest valid key, when one is close.
        nearest: Option<&'static str>,
    },
}

/// Every problem found in one trigger's metadata (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataErrors(pub Vec<MetadataError>);

impl fmt::Display for MetadataErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MetadataErrors {}

/// The metadata map with `xFromEnv` keys folded onto `x`, remembering the
/// spelling each value arrived under so errors name the key the user wrote.
struct Metadata<'a> {
    values: BTreeMap<&'a str, (&'a str, &'a str)>,
}

impl<'a> Metadata<'a> {
    fn get(&self, key: &'static str) -> Option<(&'a str, &'a str)> {
        self.values.get(key).copied()
    }
}

impl TriggerSpec {
    /// Validate a trigger's metadata. Collects every problem, not just the first.
    pub fn from_metadata<'a, I>(metadata: I) -> Result<TriggerSpec, MetadataErrors>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut errors = Vec::new();
        let mut folded = Metadata {
            values: BTreeMap::new(),
        };
        for (sent_key, value) in metadata {
            // KEDA resolves `xFromEnv` from the workload's env and keeps the key name.
            let key = sent_key.strip_suffix("FromEnv").unwrap_or(sent_key);
            if keys::KEDAS.contains(&key) {
                continue;
            }
            match keys::OURS.iter().find(|k| **k == key) {
                Some(known) => {
                    folded.values.insert(known, (sent_key, value.trim()));
                }
                None => errors.push(MetadataError::Unknown {
                    key: sent_key.to_owned(),
                    nearest: nearest_key(key),
                }),
            }
        }

        let target = required_positive(&folded, keys::TARGET_BACKLOG_PER_REPLICA, &mut errors);
        let running_per_replica =
            optional_positive(&folded, keys::RUNNING_PER_REPLICA, &mut errors);
        let activation_backlog =
            optional_non_negative(&folded, keys::ACTIVATION_BACKLOG, &mut errors).unwrap_or(0.0);
        let poll_interval = poll_interval(&folded, &mut errors);
        let max_signal_age = max_signal_age(&folded, poll_interval, &mut errors);
        let model_name = folded
            .get(keys::MODEL_NAME)
            .map(|(_, v)| v.to_owned())
            .filter(|v| !v.is_empty());
        let metric_name = metric_name(&folded, model_name.as_deref(), &mut errors);
        let targets = vllm_targets(&folded, &mut errors);

        match (target, targets) {
            (Some(target), Some(targets)) if errors.is_empty() => Ok(TriggerSpec {
                metric_name,
                fusion: FusionParams {
                    target_per_replica: target,
                    running_per_replica,
                    activation_backlog,
                },
                sources: vec![SourceSpec::Vllm(VllmSource {
                    targets,
                    model_name,
                })],
                poll_interval,
                max_signal_age,
            }),
            _ => Err(MetadataErrors(errors)),
        }
    }
}

fn nearest_key(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    keys::OURS
        .iter()
        .chain(keys::KEDAS)
        .map(|k| {
            let valid = k.to_ascii_lowercase();
            // A truncated key (`targetBacklog`) is as likely as a typo.
            let distance =
                if lower.len() >= 4 && (valid.starts_with(&lower) || lower.starts_with(&valid)) {
                    1
                } else {
                    strsim::damerau_levenshtein(&lower, &valid)
                };
            (*k, distance)
        })
        .filter(|(k, distance)| *distance <= (k.len() / 3).max(2))
        .min_by_key(|(_, distance)| *distance)
        .map(|(k, _)| k)
}

fn invalid(sent_key: &str, value: &str, allowed: impl Into<String>) -> MetadataError {
    MetadataError::Invalid {
        key: sent_key.to_owned(),
        value: value.to_owned(),
        allowed: allowed.into(),
    }
}

fn parse_number(
    md: &Metadata<'_>,
    key: &'static str,
    valid: impl Fn(f64) -> bool,
    allowed: &str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    let (sent_key, raw) = md.get(key)?;
    match raw.parse::<f64>() {
        Ok(v) if v.is_finite() && valid(v) => Some(v),
        _ => {
            errors.push(invalid(sent_key, raw, allowed));
            None
        }
    }
}

fn required_positive(
    md: &Metadata<'_>,
    key: &'static str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    const ALLOWED: &str = "a number greater than 0, e.g. `10`";
    if md.get(key).is_none() {
        errors.push(MetadataError::Missing {
            key,
            allowed: ALLOWED,
        });
        return None;
    }
    parse_number(md, key, |v| v > 0.0, ALLOWED, errors)
}

fn optional_positive(
    md: &Metadata<'_>,
    key: &'static str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    parse_number(
        md,
        key,
        |v| v > 0.0,
        "a number greater than 0, e.g. `32`",
        errors,
    )
}

fn optional_non_negative(
    md: &Metadata<'_>,
    key: &'static str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    parse_number(
        md,
        key,
        |v| v >= 0.0,
        "a number ≥ 0, e.g. `0` or `2.5`",
        errors,
    )
}

fn whole_seconds(
    md: &Metadata<'_>,
    key: &'static str,
    min: u64,
    max: u64,
    errors: &mut Vec<MetadataError>,
) -> Option<u64> {
    let (sent_key, raw) = md.get(key)?;
    match raw.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Some(v),
        _ => {
            errors.push(invalid(
                sent_key,
                raw,
                format!("a whole number of seconds from {min} to {max}"),
            ));
            None
        }
    }
}

fn poll_interval(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Duration {
    whole_seconds(
        md,
        keys::POLL_INTERVAL_SECONDS,
        1,
        MAX_POLL_INTERVAL_SECS,
        errors,
    )
    .map(Duration::from_secs)
    .unwrap_or(DEFAULT_POLL_INTERVAL)
}

fn max_signal_age(
    md: &Metadata<'_>,
    poll_interval: Duration,
    errors: &mut Vec<MetadataError>,
) -> Duration {
    let min = poll_interval.as_secs();
    whole_seconds(md, keys::MAX_SIGNAL_AGE_SECONDS, min, 3600, errors)
        .map(Duration::from_secs)
        .unwrap_or(poll_interval * DEFAULT_MAX_SIGNAL_AGE_POLLS)
}

fn metric_name(
    md: &Metadata<'_>,
    model_name: Option<&str>,
    errors: &mut Vec<MetadataError>,
) -> String {
    if let Some((sent_key, raw)) = md.get(keys::METRIC_NAME) {
        let valid = !raw.is_empty()
            && raw.len() <= MAX_METRIC_NAME_LEN
            && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if valid {
            return raw.to_owned();
        }
        errors.push(invalid(
            sent_key,
            raw,
            format!("1 to {MAX_METRIC_NAME_LEN} letters, digits or `-`"),
        ));
    }
    match model_name {
        Some(model) => {
            let mut name = String::from("backlog-");
            let mut last_dash = true;
            for c in model.chars() {
                // KEDA does not normalize external metric names, and `/ . : % ( )`
                // break the HPA's external metric path, so reduce to [a-z0-9-].
                if c.is_ascii_alphanumeric() {
                    name.push(c.to_ascii_lowercase());
                    last_dash = false;
                } else if !last_dash {
                    name.push('-');
                    last_dash = true;
                }
            }
            let mut name: String = name.chars().take(MAX_METRIC_NAME_LEN).collect();
            while name.ends_with('-') {
                name.pop();
            }
            name
        }
        None => "backlog".to_owned(),
    }
}

fn vllm_targets(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) -> Option<Vec<ScrapeTarget>> {
    let Some((sent_key, raw)) = md.get(keys::VLLM_TARGETS) else {
        errors.push(MetadataError::Missing {
            key: keys::VLLM_TARGETS,
            allowed: "a comma-separated list of http(s):// metrics URLs or dns+http://SERVICE:PORT/metrics entries",
        });
        return None;
    };
    let mut targets = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match ScrapeTarget::parse(entry) {
            Ok(target) => {
                if !targets.contains(&target) {
                    targets.push(target);
                }
            }
            Err(reason) => {
                errors.push(invalid(sent_key, entry, reason));
                return None;
            }
        }
    }
    if targets.is_empty() {
        errors.push(invalid(
            sent_key,
            raw,
            "at least one http(s):// or dns+http:// URL",
        ));
        return None;
    }
    Some(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<TriggerSpec, MetadataErrors> {
        TriggerSpec::from_metadata(pairs.iter().copied())
    }

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("vllmTargets", "http://127.0.0.1:8000/metrics"),
            ("targetBacklogPerReplica", "10"),
        ]
    }

    fn error_text(pairs: &[(&str, &str)]) -> String {
        match parse(pairs) {
            Ok(spec) => panic!("expected an error, got {spec:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn minimal_metadata_gets_defaults() {
        let spec = parse(&base()).expect("valid");
        assert_eq!(spec.metric_name, "backlog");
        assert_eq!(spec.fusion.target_per_replica, 10.0);
        assert_eq!(spec.fusion.running_per_replica, None);
        assert_eq!(spec.fusion.activation_backlog, 0.0);
        assert_eq!(spec.poll_interval, Duration::from_secs(5));
        assert_eq!(spec.max_signal_age, Duration::from_secs(15));
    }

    #[test]
    fn keda_keys_and_from_env_are_accepted() {
        let mut md = base();
        md.extend([
            ("scalerAddress", "backlog-scaler.keda:9090"),
            ("enableTLS", "false"),
            ("unsafeSsl", "false"),
            ("modelNameFromEnv", "meta-llama/Llama-3.1-8B-Instruct"),
        ]);
        let spec = parse(&md).expect("valid");
        assert_eq!(spec.metric_name, "backlog-meta-llama-llama-3-1-8b-instruct");
        let SourceSpec::Vllm(source) = &spec.sources[0];
        assert_eq!(
            source.model_name.as_deref(),
            Some("meta-llama/Llama-3.1-8B-Instruct")
        );
    }

    #[test]
    fn metric_names_carry_no_forbidden_characters() {
        let mut md = base();
        md.push(("modelName", "Qwen/Qwen2.5:7B (50%)"));
        let name = parse(&md).expect("valid").metric_name;
        assert!(!name.contains(['/', '.', ':', '%', '(', ')']), "{name}");
        assert_eq!(name, "backlog-qwen-qwen2-5-7b-50");
    }

    #[test]
    fn bad_values_name_the_key_the_value_and_what_is_allowed() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case] = &[
            (
                &[("vllmTargets", "http://a:1/metrics")],
                &["targetBacklogPerReplica", "required", "greater than 0"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "-1"),
                ],
                &["targetBacklogPerReplica", "`-1`", "greater than 0"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "abc"),
                ],
                &["targetBacklogPerReplica", "`abc`"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "NaN"),
                ],
                &["targetBacklogPerReplica", "`NaN`"],
            ),
            (
                &[
                    ("vllmTargets", "http:///metrics"),
                    ("targetBacklogPerReplica", "10"),
                ],
                &["vllmTargets", "http:///metrics", "host"],
            ),
            (
                &[
                    ("vllmTargets", "ftp://a/metrics"),
                    ("targetBacklogPerReplica", "10"),
                ],
                &["vllmTargets", "ftp://a/metrics", "http"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "10"),
                    ("pollIntervalSeconds", "0"),
                ],
                &["pollIntervalSeconds", "`0`", "1 to 300"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "10"),
                    ("pollIntervalSeconds", "10"),
                    ("maxSignalAgeSeconds", "5"),
                ],
                &["maxSignalAgeSeconds", "`5`", "10 to 3600"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "10"),
                    ("activationBacklog", "-3"),
                ],
                &["activationBacklog", "`-3`", "≥ 0"],
            ),
            (
                &[
                    ("vllmTargets", "http://a:1/metrics"),
                    ("targetBacklogPerReplica", "10"),
                    ("metricName", "vllm:waiting"),
                ],
                &["metricName", "`vllm:waiting`", "letters, digits or `-`"],
            ),
            (
                &[("targetBacklogPerReplica", "10")],
                &["vllmTargets", "required"],
            ),
        ];
        for (md, needles) in cases {
            let text = error_text(md);
            for needle in *needles {
                assert!(text.contains(needle), "{text:?} lacks {needle:?}");
            }
        }
    }

    #[test]
    fn unknown_keys_suggest_the_nearest_valid_key() {
        let mut md = base();
        md.push(("targetBacklogPerReplcia", "10"));
        let text = error_text(&md);
        assert!(
            text.contains("unknown metadata key `targetBacklogPerReplcia` (did you mean `targetBacklogPerReplica`?)"),
            "{text}"
        );
        let mut md = base();
        md.push(("queueLength", "5"));
        assert_eq!(error_text(&md), "unknown metadata key `queueLength`");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = error_text(&[("targetBacklogPerReplica", "0"), ("colour", "blue")]);
        assert!(text.contains("colour"), "{text}");
        assert!(text.contains("`0`"), "{text}");
        assert!(text.contains("vllmTargets"), "{text}");
    }

    #[test]
    fn targets_are_parsed_deduplicated_and_defaulted() {
        let mut md = base();
        md[0] = (
            "vllmTargets",
            " http://a:8000 , http://a:8000/metrics,dns+http://vllm-headless.ns:8000/metrics ",
        );
        let spec = parse(&md).expect("valid");
        let SourceSpec::Vllm(source) = &spec.sources[0];
        assert_eq!(source.targets.len(), 2);
    }
}
