//! Scaler-side configuration: the optional YAML file given with `--config`.
//!
//! Settings that belong to the operator of the scaler rather than to a
//! ScaledObject author live here (credentials and connection bounds will join
//! them), never in trigger metadata.

use std::path::Path;

use serde::Deserialize;

use super::credentials::Profiles;
use super::outbound::OutboundConfig;

/// Default cap on a scraped body (`maxResponseBytes`). A vLLM pod with a few
/// models exposes well under 1 MiB; the cap stops a misdirected target from
/// exhausting memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

/// Default cap on registered triggers (`maxTriggers`): the design capacity of
/// one scaler, 100,000 triggers within 1 GB RSS (issue 14, item 7). That is
/// the target the scale benchmark will verify; it does not exist yet, so the
/// number is the goal, not a measurement. The cap exists so that a runaway
/// generator of ScaledObjects meets a clear refusal instead of an OOM kill
/// that would take every other trigger down with it.
pub const DEFAULT_MAX_TRIGGERS: usize = 100_000;

/// The `--config` file. Every field is optional.
///
/// ```yaml
/// coldStartBudgetMillis: 2000
/// idleTimeoutSeconds: 600
/// maxResponseBytes: 10485760
/// maxTriggers: 100000
/// outbound:
///   allow: ["*.svc.cluster.local", "10.0.0.0/8"]
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScalerConfig {
    /// How long the first GetMetrics/IsActive of a new trigger waits for the
    /// first reading before answering UNAVAILABLE. Keep it under KEDA's 3 s
    /// deadline for GetMetricSpec + GetMetrics + IsActive. Default 2000.
    #[serde(default = "default_cold_start_budget_millis")]
    pub cold_start_budget_millis: u64,
    /// Drop a trigger (and its pollers) when no call has touched it for this
    /// long and no StreamIsActive holds it. Default 600.
    #[serde(default = "default_idle_timeout_seconds")]
    pub idle_timeout_seconds: u64,
    /// Largest upstream response body accepted, in bytes. Default 10 MiB.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Most triggers the scaler registers at once; a new one past it is
    /// refused with RESOURCE_EXHAUSTED (registered ones keep working, and a
    /// trigger dropped after `idleTimeoutSeconds` makes room). At least 1.
    /// Default [`DEFAULT_MAX_TRIGGERS`] (100000), the design capacity the
    /// scale benchmark will verify.
    #[serde(default = "default_max_triggers")]
    pub max_triggers: usize,
    /// Where sources may connect: `allow` (host patterns and CIDRs) and
    /// `allowLinkLocal`. Default: no allowlist (any target but link-local and
    /// cloud metadata addresses; the server warns at start-up). See
    /// [`OutboundConfig`] for the rules.
    #[serde(default)]
    pub outbound: OutboundConfig,
    /// Named credential profiles, referenced by `authProfile` in trigger
    /// metadata: `aws`, `kafka`, `rabbitmq` and `prometheus` sections, each
    /// secret as `{value: …}`, `{env: VAR}` or `{file: /path}` (a mounted
    /// Secret), and an optional `namespaces` list of who may use it. See
    /// [`crate::guard::credentials`]. Default: none.
    #[serde(default)]
    pub profiles: Profiles,
}

const fn default_cold_start_budget_millis() -> u64 {
    2000
}
const fn default_idle_timeout_seconds() -> u64 {
    600
}
const fn default_max_response_bytes() -> usize {
    DEFAULT_MAX_RESPONSE_BYTES
}
const fn default_max_triggers() -> usize {
    DEFAULT_MAX_TRIGGERS
}

impl Default for ScalerConfig {
    fn default() -> Self {
        ScalerConfig {
            cold_start_budget_millis: default_cold_start_budget_millis(),
            idle_timeout_seconds: default_idle_timeout_seconds(),
            max_response_bytes: default_max_response_bytes(),
            max_triggers: default_max_triggers(),
            outbound: OutboundConfig::default(),
            profiles: Profiles::default(),
        }
    }
}

/// Why the config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("invalid config file {path}: {message}")]
    Invalid {
        /// The path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl ScalerConfig {
    /// Load and validate a config file.
    pub fn load(path: &Path) -> Result<ScalerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|message| ConfigError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parse and validate config text.
    pub fn parse(text: &str) -> Result<ScalerConfig, String> {
        // An empty file is a valid, all-defaults config.
        if text.trim().is_empty() {
            return Ok(ScalerConfig::default());
        }
        let config: ScalerConfig = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        if config.cold_start_budget_millis > 10_000 {
            return Err(format!(
                "coldStartBudgetMillis is {}; at most 10000 (KEDA gives up after 3000)",
                config.cold_start_budget_millis
            ));
        }
        if config.idle_timeout_seconds == 0 {
            return Err("idleTimeoutSeconds must be at least 1".to_owned());
        }
        if config.max_response_bytes < 1024 {
            return Err(format!(
                "maxResponseBytes is {}; at least 1024",
                config.max_response_bytes
            ));
        }
        if config.max_triggers == 0 {
            return Err("maxTriggers must be at least 1".to_owned());
        }
        config.outbound.policy()?;
        config.profiles.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(
            ScalerConfig::parse("").expect("empty ok"),
            ScalerConfig::default()
        );
        let c = ScalerConfig::parse("idleTimeoutSeconds: 60\ncoldStartBudgetMillis: 500\n")
            .expect("valid");
        assert_eq!(
            (c.idle_timeout_seconds, c.cold_start_budget_millis),
            (60, 500)
        );
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused() {
        let err = ScalerConfig::parse("idleTimeout: 5\n").expect_err("unknown");
        assert!(err.contains("idleTimeout"), "{err}");
        let err = ScalerConfig::parse("coldStartBudgetMillis: 60000\n").expect_err("too long");
        assert!(err.contains("coldStartBudgetMillis"), "{err}");
    }

    #[test]
    fn max_triggers_defaults_to_the_design_capacity_and_must_be_positive() {
        assert_eq!(ScalerConfig::default().max_triggers, 100_000);
        assert_eq!(
            ScalerConfig::parse("idleTimeoutSeconds: 60\n")
                .expect("valid")
                .max_triggers,
            DEFAULT_MAX_TRIGGERS
        );
        assert_eq!(
            ScalerConfig::parse("maxTriggers: 2\n")
                .expect("valid")
                .max_triggers,
            2
        );
        let err = ScalerConfig::parse("maxTriggers: 0\n").expect_err("zero");
        assert!(err.contains("maxTriggers must be at least 1"), "{err}");
        let err = ScalerConfig::parse("maxTriggers: -1\n").expect_err("negative");
        assert!(err.contains("maxTriggers"), "{err}");
    }

    #[test]
    fn outbound_allowlist_is_parsed_and_validated() {
        let c = ScalerConfig::parse(
            "outbound:\n  allow: [\"*.svc.cluster.local\", 10.0.0.0/8, 127.0.0.1/32]\n  allowLinkLocal: true\n",
        )
        .expect("valid");
        let policy = c.outbound.policy().expect("compiles");
        assert!(policy.is_restricted());
        policy
            .check_host("vllm.inference.svc.cluster.local")
            .expect("allowed");
        assert!(
            !ScalerConfig::default()
                .outbound
                .policy()
                .expect("default")
                .is_restricted()
        );
        let err = ScalerConfig::parse("outbound:\n  allow: [10.0.0.0/99]\n").expect_err("bad CIDR");
        assert!(err.contains("10.0.0.0/99"), "{err}");
        let err = ScalerConfig::parse("outbound:\n  alow: []\n").expect_err("unknown");
        assert!(err.contains("alow"), "{err}");
    }
}

#[cfg(test)]
mod readme_tests {
    use super::ScalerConfig;

    /// Every `yaml` block of the README that starts with `profiles:` or
    /// `outbound:` is a valid `--config` file: the docs cannot drift.
    #[test]
    fn readme_config_examples_parse() {
        let readme = include_str!("../../README.md");
        let mut checked = 0;
        for block in readme.split("```yaml\n").skip(1) {
            let Some((yaml, _)) = block.split_once("```") else {
                continue;
            };
            if yaml.starts_with("profiles:") || yaml.starts_with("outbound:") {
                if let Err(e) = ScalerConfig::parse(yaml) {
                    panic!("README config example does not parse: {e}\n{yaml}");
                }
                checked += 1;
            }
        }
        assert!(checked >= 1, "no config example found in the README");
    }
}
