//! The metadata map and the parsing of single values, each error naming
//! the key as sent, the value (redacted) and what is allowed. Engine and
//! broker parsing read metadata only through [`Metadata`].

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::{MAX_UNKNOWN_LISTED, MetadataError, Redacted, conflict, invalid};
use super::keda_names::refusal;
use super::keys;
use crate::guard::redact::entry_to_echo;
use crate::source::ScrapeTarget;
use crate::source::http::IpFamily;

/// The metadata map with `xFromEnv` keys folded onto `x`, remembering the
/// spelling each value arrived under so errors name the key the user wrote.
#[derive(Debug, Default)]
pub struct Metadata<'a> {
    values: BTreeMap<&'static str, (&'a str, &'a str)>,
}

impl<'a> Metadata<'a> {
    /// Fold `metadata`, reporting keys that are neither in [`keys::ALL`] nor
    /// KEDA's own ([`keys::KEDAS`]). A KEDA scaler's name that means the same
    /// here ([`keys::KEDA_ALIASES`]) is folded onto our key (both set is a
    /// conflict); one that means something else ([`keys::KEDA_REFUSED`]) is
    /// refused with what to write instead.
    pub fn fold<I>(metadata: I, errors: &mut Vec<MetadataError>) -> Metadata<'a>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut folded = Metadata::default();
        let mut aliased = Vec::new();
        let mut refused = Vec::new();
        let mut suggested = 0;
        let mut unknown = 0;
        for (sent_key, value) in metadata {
            // KEDA resolves `xFromEnv` from the workload's env and keeps the key name.
            let key = sent_key.strip_suffix("FromEnv").unwrap_or(sent_key);
            if keys::KEDAS.contains(&key) {
                continue;
            }
            if let Some(&(alias, known)) = keys::KEDA_ALIASES.iter().find(|(a, _)| *a == key) {
                aliased.push((alias, known, sent_key, value.trim()));
                continue;
            }
            if let Some(&refused_key) = keys::KEDA_REFUSED.iter().find(|k| **k == key) {
                refused.push((refused_key, sent_key, value.trim()));
                continue;
            }
            match keys::ALL.iter().find(|k| **k == key) {
                Some(known) => {
                    folded.values.insert(known, (sent_key, value.trim()));
                }
                None if unknown >= MAX_UNKNOWN_LISTED => unknown += 1,
                None => {
                    unknown += 1;
                    // A suggestion compares the key with every valid one: bounded,
                    // so a map of thousands of junk keys costs no seconds of CPU
                    // per GetMetricSpec (found by fuzzing, decision 0017).
                    let renamed = keys::KEDA_RENAMED
                        .iter()
                        .find(|(keda, _)| *keda == key)
                        .map(|(_, ours)| *ours);
                    let nearest = if renamed.is_some() {
                        renamed
                    } else if suggested < MAX_SUGGESTIONS {
                        suggested += 1;
                        nearest_key(key)
                    } else {
                        None
                    };
                    errors.push(MetadataError::Unknown {
                        key: Redacted::new(sent_key),
                        nearest,
                    });
                }
            }
        }
        if unknown > MAX_UNKNOWN_LISTED {
            errors.push(MetadataError::MoreUnknown {
                count: unknown - MAX_UNKNOWN_LISTED,
            });
        }
        // After the loop: metadata arrives as a map, in no order.
        for (alias, known, sent_key, value) in aliased {
            if folded.values.contains_key(known) {
                errors.push(conflict(
                    alias,
                    format!("is an alias of `{known}`; set only one"),
                ));
            } else {
                folded.values.insert(known, (sent_key, value));
            }
        }
        // Refusals convert messages to requests with the trigger's own weight.
        let weight = folded
            .text(keys::MESSAGE_WEIGHT)
            .and_then(|w| w.parse::<f64>().ok())
            .filter(|w| w.is_finite() && *w > 0.0)
            .unwrap_or(1.0);
        for (key, sent_key, value) in refused {
            errors.push(refusal(sent_key, key, value, weight));
        }
        folded
    }

    /// `(key as sent, trimmed value)` of a key, if present.
    pub fn get(&self, key: &'static str) -> Option<(&'a str, &'a str)> {
        self.values.get(key).copied()
    }

    /// The value of a key if present and non-empty.
    pub fn text(&self, key: &'static str) -> Option<&'a str> {
        self.get(key).map(|(_, v)| v).filter(|v| !v.is_empty())
    }

    /// True when the key was sent.
    pub fn has(&self, key: &'static str) -> bool {
        self.values.contains_key(key)
    }

    /// `(key as sent, value)` of a present, non-empty key; an empty one is
    /// reported as invalid.
    pub fn non_empty(
        &self,
        key: &'static str,
        errors: &mut Vec<MetadataError>,
    ) -> Option<(&'a str, &'a str)> {
        let (sent, value) = self.get(key)?;
        if value.is_empty() {
            errors.push(invalid(sent, value, "a non-empty value"));
            return None;
        }
        Some((sent, value))
    }

    /// Like [`Metadata::non_empty`], and an absent key is reported as missing.
    pub fn required(
        &self,
        key: &'static str,
        allowed: &'static str,
        errors: &mut Vec<MetadataError>,
    ) -> Option<(&'a str, &'a str)> {
        if self.get(key).is_none() {
            errors.push(MetadataError::Missing { key, allowed });
            return None;
        }
        self.non_empty(key, errors)
    }

    /// A boolean as KEDA reads its own (Go's `strconv.ParseBool`: `true`,
    /// `True`, `TRUE`, `t`, `T`, `1` and the same for false, nothing else,
    /// so a value copied from a KEDA scaler means the same here); `default`
    /// when absent or invalid. Every boolean key is read with this.
    pub fn bool(&self, key: &'static str, default: bool, errors: &mut Vec<MetadataError>) -> bool {
        let Some((sent, value)) = self.get(key) else {
            return default;
        };
        match value {
            "true" | "True" | "TRUE" | "t" | "T" | "1" => true,
            "false" | "False" | "FALSE" | "f" | "F" | "0" => false,
            _ => {
                errors.push(invalid(sent, value, BOOLEANS));
                default
            }
        }
    }
}

/// What a boolean key allows ([`Metadata::bool`]).
const BOOLEANS: &str = "`true` or `false` (as Go's strconv.ParseBool reads them, like KEDA: also `1`, `t`, `T`, `TRUE`, `True`, `0`, `f`, `F`, `FALSE`, `False`)";

/// `ipFamily`'s value in any case, as the other enum-like keys (`engine`,
/// `policy`, `mode`) are read.
fn family(raw: &str) -> Option<IpFamily> {
    IpFamily::parse(&raw.to_ascii_lowercase())
}

/// Unknown keys that get a "did you mean" (a person fixes a few typos at a
/// time; the rest are still each reported, without a suggestion).
pub(crate) const MAX_SUGGESTIONS: usize = 16;

fn nearest_key(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let chars = lower.chars().count();
    // Candidates in the order they were tried before the broker keys joined
    // the registry (engine side, KEDA's, brokers): the first of equally near
    // keys wins, so the order is part of the message.
    let broker_only = |k: &&&str| keys::BROKER.contains(k) && **k != keys::AUTH_PROFILE;
    let engine_side = keys::ALL.iter().filter(|k| !broker_only(k));
    engine_side
        .chain(keys::KEDAS)
        .chain(keys::BROKER)
        .map(|k| {
            let valid = k.to_ascii_lowercase();
            // A truncated key (`targetBacklog`) is as likely as a typo.
            let distance =
                if lower.len() >= 4 && (valid.starts_with(&lower) || lower.starts_with(&valid)) {
                    1
                } else if chars.abs_diff(valid.len()) > near_enough(k) {
                    // The distance is at least the length difference: too far to
                    // suggest, and a 100 KB key took 7 s to compare (fuzzing).
                    usize::MAX
                } else {
                    strsim::damerau_levenshtein(&lower, &valid)
                };
            (*k, distance)
        })
        .filter(|(k, distance)| *distance <= near_enough(k))
        .min_by_key(|(_, distance)| *distance)
        .map(|(k, _)| k)
}

/// The largest edit distance at which `valid` is still suggested.
fn near_enough(valid: &str) -> usize {
    (valid.len() / 3).max(2)
}

/// The sizes a number in metadata may have, 0 aside: no key means anything outside, and
/// beyond them the arithmetic stops being arithmetic. A divisor of `1e-320`
/// (`runningPerReplica`, `drainRatePerReplica`) or a factor of `1e300` turns `B` into
/// infinity, which no metric value can carry; `1e-320` itself prints as 300 digits.
pub const NUMBER_SIZES: std::ops::RangeInclusive<f64> = 1e-6..=1e9;

/// What [`NUMBER_SIZES`] adds to a key's allowed text when a value breaks only it (the
/// first where the key allows 0).
const SIZES_ALLOWED: [&str; 2] = [
    "and 0 or from 0.000001 to 1000000000 in size",
    "and from 0.000001 to 1000000000 in size",
];

/// A finite number satisfying `valid` and [`NUMBER_SIZES`], if the key is present.
pub fn number(
    md: &Metadata<'_>,
    key: &'static str,
    valid: impl Fn(f64) -> bool,
    allowed: &str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    let (sent_key, raw) = md.get(key)?;
    match raw.parse::<f64>() {
        Ok(v) if v.is_finite() && valid(v) => {
            if v == 0.0 || NUMBER_SIZES.contains(&v.abs()) {
                Some(v)
            } else {
                let sizes = SIZES_ALLOWED[usize::from(!valid(0.0))];
                errors.push(invalid(sent_key, raw, format!("{allowed}; {sizes}")));
                None
            }
        }
        _ => {
            errors.push(invalid(sent_key, raw, allowed));
            None
        }
    }
}

/// The smallest `targetBacklogPerReplica`: KEDA turns a float target into a Kubernetes
/// quantity with three decimals (`%.3f`), so anything smaller reaches the HPA as a target of 0.
pub const MIN_TARGET: f64 = 0.001;

/// The required target `T`: a number from [`MIN_TARGET`] to the top of [`NUMBER_SIZES`].
pub fn required_target(
    md: &Metadata<'_>,
    key: &'static str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    const ALLOWED: &str =
        "a number from 0.001 (the precision of KEDA's metric target) to 1000000000, e.g. `10`";
    if md.get(key).is_none() {
        errors.push(MetadataError::Missing {
            key,
            allowed: ALLOWED,
        });
        return None;
    }
    // Both bounds in `valid`, so that the allowed text says them once.
    number(
        md,
        key,
        |v| v >= MIN_TARGET && v <= *NUMBER_SIZES.end(),
        ALLOWED,
        errors,
    )
}

/// An optional number > 0; `allowed` says so in the key's own unit, with
/// an example that fits the key.
pub fn optional_positive(
    md: &Metadata<'_>,
    key: &'static str,
    allowed: &str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    number(md, key, |v| v > 0.0, allowed, errors)
}

/// An optional number ≥ 0.
pub fn optional_non_negative(
    md: &Metadata<'_>,
    key: &'static str,
    errors: &mut Vec<MetadataError>,
) -> Option<f64> {
    number(
        md,
        key,
        |v| v >= 0.0,
        "a number ≥ 0, e.g. `0` or `2.5`",
        errors,
    )
}

/// An optional whole number of seconds in `min..=max`.
pub fn whole_seconds(
    md: &Metadata<'_>,
    key: &'static str,
    min: u64,
    max: u64,
    errors: &mut Vec<MetadataError>,
) -> Option<Duration> {
    let (sent_key, raw) = md.get(key)?;
    match raw.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Some(Duration::from_secs(v)),
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

/// A comma-separated list of scrape targets; `None` (with an error) when
/// present but invalid or empty.
pub fn targets(
    md: &Metadata<'_>,
    key: &'static str,
    errors: &mut Vec<MetadataError>,
) -> Option<Vec<ScrapeTarget>> {
    let (sent_key, raw) = md.get(key)?;
    // `ipFamily` itself is checked once, in `ip_family`.
    let family = md
        .text(keys::IP_FAMILY)
        .and_then(family)
        .unwrap_or_default();
    let mut targets = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match ScrapeTarget::parse(entry) {
            Ok(target) => {
                let target = target.with_family(family);
                if !targets.contains(&target) {
                    targets.push(target);
                }
            }
            Err(reason) => {
                // A comma inside a password cuts it: quote the whole list then.
                errors.push(invalid(sent_key, entry_to_echo(raw, entry, ','), reason));
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

/// `ipFamily`, validated: one of its values, and only with a `dns+` entry in
/// `vllmTargets` or `dcgmTargets` (elsewhere it would do nothing).
pub fn ip_family(md: &Metadata<'_>, errors: &mut Vec<MetadataError>) {
    let Some((sent_key, raw)) = md.get(keys::IP_FAMILY) else {
        return;
    };
    if family(raw).is_none() {
        errors.push(invalid(sent_key, raw, "`auto`, `ipv4` or `ipv6`"));
        return;
    }
    let has_dns = [keys::VLLM_TARGETS, keys::DCGM_TARGETS].iter().any(|k| {
        md.text(k)
            .is_some_and(|list| list.split(',').any(|e| e.trim().starts_with("dns+")))
    });
    if !has_dns {
        errors.push(invalid(
            sent_key,
            raw,
            "applies to `dns+` entries of `vllmTargets` or `dcgmTargets`; there is none",
        ));
    }
}
