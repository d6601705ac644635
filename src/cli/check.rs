//! `backlog-scaler check`: validate a trigger's metadata, probe each source
//! once, and print what the scaler would report. Exits non-zero on any
//! problem, so it can gate a CI pipeline or a `kubectl apply`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use serde::Deserialize;
use serde_yaml_ng::Value;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::args::CheckInput;
use super::stdout::out;
use crate::api::explain::formula;
use crate::decide::freshness::{SignalReport, TriggerMemory, evaluate};
use crate::decide::signal_state::FailingPod;
use crate::guard::config::ScalerConfig;
use crate::guard::credentials::{Profiles, Section};
use crate::guard::outbound::OutboundPolicy;
use crate::runtime::backoff::SplitMix;
use crate::runtime::poller::{SignalState, Timed};
use crate::runtime::retry::read_with_retries;
use crate::source::{HttpScraper, SourceContext, SourceError, SourceMemory, SourceSpec};
use crate::trigger::TriggerSpec;

mod describe;

use describe::describe;

// `--from-keda`: its own files, declared here so the wiring stays in `check`.
#[path = "from_keda.rs"]
pub mod from_keda;

/// The HTTP client's cap on one request; each probe is bounded by the
/// trigger's poll timeout below it ([`crate::runtime::poller::read_timeout`]).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// One trigger's metadata found in the input file.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundTrigger {
    /// Where it came from, e.g. `triggers[0]`.
    pub origin: String,
    /// Its metadata, values as strings (as KEDA sends them).
    pub metadata: Vec<(String, String)>,
    /// The ScaledObject's `metadata.namespace`, when the file gives one
    /// (checked against a credential profile's `namespaces`).
    pub namespace: Option<String>,
}

/// Read the triggers from YAML text: a metadata map, or a ScaledObject (each
/// `external` / `external-push` trigger), or several documents of either.
pub fn find_triggers(text: &str) -> Result<Vec<FoundTrigger>, String> {
    let mut found = Vec::new();
    for (doc_index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|e| format!("not YAML: {e}"))?;
        let doc = if doc_index == 0 {
            String::new()
        } else {
            format!("document {doc_index} ")
        };
        match &value {
            Value::Null => {}
            Value::Mapping(map)
                if map.get("kind").and_then(Value::as_str) == Some("ScaledObject") =>
            {
                let namespace = value
                    .get("metadata")
                    .and_then(|m| m.get("namespace"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let triggers = value
                    .get("spec")
                    .and_then(|s| s.get("triggers"))
                    .and_then(Value::as_sequence)
                    .ok_or_else(|| format!("{doc}ScaledObject has no spec.triggers"))?;
                for (i, trigger) in triggers.iter().enumerate() {
                    let kind = trigger.get("type").and_then(Value::as_str).unwrap_or("");
                    if kind != "external" && kind != "external-push" {
                        continue;
                    }
                    let origin = format!("{doc}spec.triggers[{i}] ({kind})");
                    let metadata = trigger
                        .get("metadata")
                        .ok_or_else(|| format!("{origin} has no metadata"))?;
                    found.push(FoundTrigger {
                        metadata: string_map(metadata, &origin)?,
                        origin,
                        namespace: namespace.clone(),
                    });
                }
            }
            // Another Kubernetes object beside the ScaledObject (a Service,
            // a TriggerAuthentication): nothing to check.
            Value::Mapping(map)
                if map.get("apiVersion").is_some_and(Value::is_string)
                    && map.get("kind").is_some_and(Value::is_string) => {}
            Value::Mapping(_) => {
                let origin = format!("{doc}metadata").trim().to_owned();
                found.push(FoundTrigger {
                    metadata: string_map(&value, &origin)?,
                    origin,
                    namespace: None,
                });
            }
            _ => return Err(format!("{doc}is not a YAML map of metadata keys")),
        }
    }
    if found.is_empty() {
        return Err(
            "no trigger metadata found (expected a map, or a ScaledObject with external triggers)"
                .to_owned(),
        );
    }
    Ok(found)
}

/// KEDA's metadata is `map[string]string`; YAML scalars are read as the
/// string KEDA would forward.
fn string_map(value: &Value, origin: &str) -> Result<Vec<(String, String)>, String> {
    let map = value
        .as_mapping()
        .ok_or_else(|| format!("{origin} is not a map"))?;
    let mut pairs = Vec::with_capacity(map.len());
    for (key, value) in map {
        let key = key
            .as_str()
            .ok_or_else(|| format!("{origin}: a key is not a string"))?
            .to_owned();
        let value = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(format!(
                    "{origin}: key `{key}` must be a string, number or boolean (KEDA metadata is map[string]string)"
                ));
            }
        };
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// Check one trigger: validate, probe, fuse. Returns the report text, or the
/// report with problems. The probe goes through the same evaluation as the
/// server, so what it prints is what GetMetrics would answer (except the TTFT
/// quantile, which needs two readings a window apart).
pub async fn check_trigger(found: &FoundTrigger, ctx: &SourceContext) -> Result<String, String> {
    let mut out = String::new();
    let Some(spec) = check_static(found, &ctx.outbound, ctx.profiles(), &mut out) else {
        return Err(out);
    };
    probe_and_fuse(spec, ctx, out).await
}

/// `check --no-probe`: what the server checks when it registers a trigger
/// (metadata, outbound allowlist, credential profiles), with no network and
/// without reading any profile's secrets.
pub fn check_trigger_static(
    found: &FoundTrigger,
    outbound: &OutboundPolicy,
    profiles: &Profiles,
) -> Result<String, String> {
    let mut out = String::new();
    match check_static(found, outbound, profiles, &mut out) {
        Some(_) => {
            let _ = writeln!(out, "  not probed (--no-probe)");
            Ok(out)
        }
        None => Err(out),
    }
}

/// Validate the metadata, the outbound allowlist and the credential profiles
/// it names, writing the report to `out`; `None` when any of them fails.
fn check_static(
    found: &FoundTrigger,
    outbound: &OutboundPolicy,
    profiles: &Profiles,
    out: &mut String,
) -> Option<TriggerSpec> {
    let _ = writeln!(out, "{}:", found.origin);
    let spec = match TriggerSpec::from_metadata(
        found.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ) {
        Ok(spec) => spec,
        Err(errors) => {
            for error in &errors.0 {
                let _ = writeln!(out, "  invalid: {error}");
            }
            return None;
        }
    };
    let _ = writeln!(
        out,
        "  metadata ok: metric `{}`, target {} per replica, poll every {}s, max signal age {}s, mode {}",
        spec.metric_name,
        spec.fusion.target_per_replica,
        spec.poll_interval.as_secs(),
        spec.max_signal_age.as_secs(),
        spec.mode.as_str()
    );
    // The same static check the server makes at GetMetricSpec.
    let denied: Vec<_> = spec
        .sources()
        .iter()
        .flat_map(|source| source.check_outbound(outbound))
        .collect();
    if !denied.is_empty() {
        for d in &denied {
            let _ = writeln!(out, "  refused: {d}");
        }
        let _ = writeln!(out, "  would answer: PERMISSION_DENIED");
        return None;
    }
    // The profiles it names, as the server authorizes them at registration;
    // the namespace part only when the file says which namespace.
    let mut names: Vec<(String, Section)> = spec
        .sources()
        .into_iter()
        .filter_map(|s| match s {
            SourceSpec::Prometheus(q) => q.auth_profile.map(|n| (n, Section::Prometheus)),
            SourceSpec::Engine(e) => e
                .prometheus
                .and_then(|q| q.auth_profile)
                .map(|n| (n, Section::Prometheus)),
            _ => None,
        })
        .collect();
    if let Some(broker) = &spec.broker
        && let Some(name) = broker.source.auth_profile()
    {
        names.push((name.to_owned(), broker.source.profile_section()));
    }
    for (name, section) in names {
        let profile = match &found.namespace {
            Some(namespace) => profiles.resolve(&name, namespace),
            None => profiles.get(&name),
        };
        if let Err(e) = profile.and_then(|p| p.require(&name, section)) {
            let code = if e.is_permission_denied() {
                "PERMISSION_DENIED"
            } else {
                "INVALID_ARGUMENT"
            };
            let _ = writeln!(out, "  profile: {e}");
            let _ = writeln!(out, "  would answer: {code}");
            return None;
        }
    }
    Some(spec)
}

/// Probe each source once and fuse, as the server would: one poll each, read as the server's
/// first poll reads it (pod by pod, transient failures retried within the poll's deadline), so
/// a failing pod among answering ones is left out and the others extrapolated, as `serve`
/// answers. Any failure, even one the value survives, fails the check.
async fn probe_and_fuse(
    spec: TriggerSpec,
    ctx: &SourceContext,
    mut out: String,
) -> Result<String, String> {
    let mut reports = Vec::new();
    let mut failed = false;
    let mut pods_failed = false;
    // The server's bound on one poll of this trigger, so that a source too
    // slow for the server is too slow here (not the HTTP client's cap).
    let poll_timeout = crate::runtime::poller::read_timeout(spec.poll_interval);
    for source in spec.sources() {
        let started = Instant::now();
        let mut rng = SplitMix::for_source(&source.label());
        let attempted = tokio::time::timeout(
            poll_timeout,
            read_with_retries(
                &source,
                ctx,
                &mut SourceMemory::default(),
                started + poll_timeout,
                poll_timeout,
                &mut rng,
            ),
        )
        .await;
        let result = match attempted {
            Ok(attempted) => attempted.result,
            Err(_) => Err(SourceError::timeout(poll_timeout)),
        };
        let mut state = SignalState::default();
        match result {
            Ok((reading, failures)) => {
                let _ = writeln!(
                    out,
                    "  source {source}: ok in {} ms",
                    started.elapsed().as_millis()
                );
                describe(&mut out, &reading);
                for failure in failures {
                    pods_failed = true;
                    let _ = writeln!(
                        out,
                        "    {}  FAILED ({}): {}",
                        failure.target,
                        failure.error.outcome().as_str(),
                        failure.error
                    );
                    state.failing_pods.push(FailingPod {
                        target: failure.target,
                        last_good: None,
                        last_failure: Timed {
                            value: failure.error,
                            at: Instant::now(),
                            wall: SystemTime::now(),
                        },
                        consecutive_failures: 1,
                    });
                }
                state.last_good = Some(Timed {
                    value: reading,
                    at: Instant::now(),
                    wall: SystemTime::now(),
                });
            }
            Err(error) => {
                failed = true;
                let _ = writeln!(
                    out,
                    "  source {source}: FAILED ({}): {error}",
                    error.outcome().as_str()
                );
                state.consecutive_failures = 1;
                state.last_failure = Some(Timed {
                    value: error,
                    at: Instant::now(),
                    wall: SystemTime::now(),
                });
            }
        }
        reports.push(SignalReport {
            label: source.label(),
            source,
            state: Arc::new(state),
        });
    }
    let now = Instant::now();
    let evaluation = evaluate(
        &spec,
        reports,
        &mut TriggerMemory::default(),
        now,
        std::time::SystemTime::now(),
    );
    match evaluation.decision_at(now) {
        Ok(decision) if !failed => {
            let _ = writeln!(
                out,
                "  {}",
                formula(&spec.fusion, &decision.components, decision.backlog)
            );
            if spec.mode == crate::trigger::Mode::Shadow {
                let _ = writeln!(
                    out,
                    "  would answer: GetMetrics {}=0  IsActive=false  (shadow; it decides B = {}, active {}, desired replicas ceil(B/T) = {})",
                    spec.metric_name, decision.backlog, decision.active, decision.desired_replicas
                );
            } else {
                let _ = writeln!(
                    out,
                    "  would answer: GetMetrics {}={}  IsActive={}  (desired replicas ceil(B/T) = {})",
                    spec.metric_name, decision.backlog, decision.active, decision.desired_replicas
                );
            }
            if !evaluation.empty_names.is_empty() {
                let _ = writeln!(
                    out,
                    "  degraded: {} answered no addresses; the value counts only the targets that answered",
                    evaluation.empty_names.join(", ")
                );
            }
            if pods_failed {
                let _ = writeln!(
                    out,
                    "  degraded: the pods that FAILED above are left out and the others' values extrapolated to every discovered pod, as the server does while at least minReportingFraction of them report"
                );
            }
            if spec.fusion.latency.is_some() {
                let _ = writeln!(
                    out,
                    "  note: the TTFT quantile needs two readings a window apart; the server computes it, one probe cannot"
                );
            }
            // The value stands, but a pod or a name is lost: a problem to fix.
            if pods_failed || !evaluation.empty_names.is_empty() {
                Err(out)
            } else {
                Ok(out)
            }
        }
        // Shadow mode answers 0 for a lost signal too; the probe still
        // fails, since a trial without a signal shows nothing.
        Ok(_) if spec.mode == crate::trigger::Mode::Shadow => {
            let _ = writeln!(
                out,
                "  would answer: GetMetrics {}=0  IsActive=false  (shadow; the signal is lost)",
                spec.metric_name
            );
            Err(out)
        }
        Err(reason) if spec.mode == crate::trigger::Mode::Shadow => {
            let _ = writeln!(
                out,
                "  would answer: GetMetrics {}=0  IsActive=false  (shadow; the signal is lost: {reason})",
                spec.metric_name
            );
            Err(out)
        }
        Ok(_) => {
            let _ = writeln!(out, "  would answer: UNAVAILABLE (KEDA's fallback applies)");
            Err(out)
        }
        Err(reason) => {
            let _ = writeln!(
                out,
                "  would answer: UNAVAILABLE (KEDA's fallback applies): {reason}"
            );
            Err(out)
        }
    }
}

/// The `check` command. With `probe` false (`--no-probe`) it makes only the
/// static checks: no network, and no profile secret is read. `--from-keda`
/// migrates KEDA's built-in triggers instead ([`from_keda`]).
pub async fn run(input: &CheckInput, config: &ScalerConfig, probe: bool) -> ExitCode {
    let path = match (&input.metadata, &input.from_keda) {
        (_, Some(path)) => return from_keda::run(path, config),
        (Some(path), None) => path.as_path(),
        (None, None) => {
            eprintln!("backlog-scaler: check needs --metadata FILE or --from-keda FILE");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("backlog-scaler: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let triggers = match find_triggers(&text) {
        Ok(triggers) => triggers,
        Err(e) => {
            eprintln!("backlog-scaler: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let outbound = match config.outbound.policy() {
        Ok(policy) => std::sync::Arc::new(policy),
        Err(e) => {
            eprintln!("backlog-scaler: invalid outbound config: {e}");
            return ExitCode::from(2);
        }
    };
    if !probe {
        let mut ok = true;
        for trigger in &triggers {
            match check_trigger_static(trigger, &outbound, &config.profiles) {
                Ok(report) => out!("{report}"),
                Err(report) => {
                    ok = false;
                    out!("{report}");
                }
            }
        }
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let http = match HttpScraper::with_outbound(PROBE_TIMEOUT, config.max_response_bytes, outbound)
    {
        Ok(http) => http,
        Err(e) => {
            eprintln!("backlog-scaler: cannot build the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ctx = match SourceContext::from_config(config, http) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("backlog-scaler: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    for trigger in &triggers {
        match check_trigger(trigger, &ctx).await {
            Ok(report) => out!("{report}"),
            Err(report) => {
                ok = false;
                out!("{report}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_plain_map_with_yaml_scalars() {
        let found = find_triggers(
            "vllmTargets: http://a:1/metrics\ntargetBacklogPerReplica: 10\nenableTLS: false\n",
        )
        .expect("valid");
        assert_eq!(found.len(), 1);
        assert!(
            found[0]
                .metadata
                .contains(&("targetBacklogPerReplica".into(), "10".into()))
        );
        assert!(
            found[0]
                .metadata
                .contains(&("enableTLS".into(), "false".into()))
        );
    }

    #[test]
    fn reads_external_triggers_of_a_scaled_object() {
        let yaml = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: x}
spec:
  scaleTargetRef: {name: x}
  triggers:
    - type: cpu
      metadata: {value: "50"}
    - type: external-push
      metadata:
        scalerAddress: backlog-scaler.keda:9090
        vllmTargets: dns+http://vllm.default:8000/metrics
        targetBacklogPerReplica: "10"
"#;
        let found = find_triggers(yaml).expect("valid");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].origin, "spec.triggers[1] (external-push)");
    }

    #[test]
    fn skips_other_kubernetes_objects_and_keeps_the_namespace() {
        let yaml = r#"
apiVersion: v1
kind: Service
metadata: {name: vllm-headless, namespace: inference}
spec: {clusterIP: None}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: x, namespace: inference}
spec:
  scaleTargetRef: {name: x}
  triggers:
    - type: external
      metadata:
        vllmTargets: dns+http://vllm-headless.inference:8000/metrics
        targetBacklogPerReplica: "10"
"#;
        let found = find_triggers(yaml).expect("valid");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].origin, "document 1 spec.triggers[0] (external)");
        assert_eq!(found[0].namespace.as_deref(), Some("inference"));
        assert!(find_triggers("apiVersion: v1\nkind: Service\n").is_err());
    }

    #[test]
    fn rejects_non_scalar_values_and_empty_input() {
        assert!(
            find_triggers("vllmTargets: [a, b]\n")
                .expect_err("list")
                .contains("vllmTargets")
        );
        assert!(find_triggers("").is_err());
    }
}
