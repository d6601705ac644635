//! One ScaledObject: sort its triggers into fused, kept and not carried,
//! resolve `T`, `messageWeight` and `A`, and write the YAML with its
//! explanations; then check the result as the server would.

use std::fmt::Write as _;

use serde_yaml_ng::{Mapping, Value};

use super::brokers::{self, BrokerPart};
use super::engine::{self, EnginePart};
use super::model::{FromKedaError, Key, Migration, Old, number_text};
use super::profile;
use crate::guard::credentials::Section;
use crate::guard::redact::redact;
use crate::trigger::keys;

/// Where `scalerAddress` points until the user says otherwise: the Service
/// that `k8s/` and the Helm chart create.
const SCALER_ADDRESS: &str = "backlog-scaler.keda.svc.cluster.local:9090";

/// Line of each item of the first `triggers:` list in `doc` (which starts at
/// line `start`); a heuristic for error messages, not a YAML parser.
fn trigger_lines(doc: &str, start: usize) -> Vec<usize> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = doc.lines().collect();
    let Some(at) = lines
        .iter()
        .position(|l| l.trim_start().starts_with("triggers:"))
    else {
        return Vec::new();
    };
    let mut items = Vec::new();
    let mut item_indent = None;
    for (i, line) in lines.iter().enumerate().skip(at + 1) {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let is_item = t == "-" || t.starts_with("- ");
        let level = *item_indent.get_or_insert(indent(line));
        if indent(line) < level || (indent(line) == level && !is_item) {
            break;
        }
        if is_item && indent(line) == level {
            items.push(start + i);
        }
    }
    items
}

fn string_map(value: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let map = value.as_mapping().ok_or("is not a map")?;
    let mut out = Vec::new();
    for (k, v) in map {
        let key = k
            .as_str()
            .ok_or("has a key that is not a string")?
            .to_owned();
        let v = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(format!(
                    "key `{key}` is not a string (KEDA metadata is map[string]string)"
                ));
            }
        };
        out.push((key, v));
    }
    Ok(out)
}

fn redact_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(redact(s)),
        Value::Sequence(items) => Value::Sequence(items.iter().map(redact_value).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Migrate one ScaledObject document.
pub fn migrate(
    file: &str,
    start: usize,
    doc: &str,
    value: &Value,
    auths: &[&Value],
) -> Result<Migration, FromKedaError> {
    let text_at = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let name = text_at(value.get("metadata").and_then(|m| m.get("name")))
        .unwrap_or_else(|| "(unnamed)".to_owned());
    let namespace = text_at(value.get("metadata").and_then(|m| m.get("namespace")));
    let bad = |line: usize, field: String, problem: &str| FromKedaError::BadField {
        file: file.to_owned(),
        line,
        name: name.clone(),
        field,
        problem: problem.to_owned(),
    };
    let spec = value
        .get("spec")
        .ok_or_else(|| bad(start, "spec".into(), "is missing"))?;
    let triggers = spec
        .get("triggers")
        .ok_or_else(|| bad(start, "spec.triggers".into(), "is missing"))?
        .as_sequence()
        .ok_or_else(|| bad(start, "spec.triggers".into(), "is not a list"))?;
    if triggers.is_empty() {
        return Err(bad(
            start,
            "spec.triggers".into(),
            "is empty: no trigger to carry over",
        ));
    }
    let lines = trigger_lines(doc, start);
    let mut olds = Vec::new();
    for (i, t) in triggers.iter().enumerate() {
        let line = lines.get(i).copied().unwrap_or(start);
        let kind = text_at(t.get("type"))
            .ok_or_else(|| bad(line, format!("spec.triggers[{i}].type"), "is missing"))?;
        let metadata = string_map(t.get("metadata"))
            .map_err(|p| bad(line, format!("spec.triggers[{i}].metadata"), &p))?;
        let auth_ref = t.get("authenticationRef").and_then(|a| {
            let kind = text_at(a.get("kind")).unwrap_or_else(|| "TriggerAuthentication".into());
            text_at(a.get("name")).map(|n| (kind, n))
        });
        olds.push(Old {
            origin: format!("spec.triggers[{i}] ({kind})"),
            metric_type: text_at(t.get("metricType")).unwrap_or_else(|| "AverageValue".into()),
            kind,
            metadata,
            auth_ref,
            raw: t.clone(),
            line,
        });
    }
    let sorted = sort(&olds);
    if sorted.fused.is_empty() {
        return Err(FromKedaError::NothingToCarry {
            file: file.to_owned(),
            line: start,
            name,
            reasons: sorted
                .cannot
                .iter()
                .map(|c| format!("  - {c}"))
                .collect::<Vec<_>>()
                .join("\n"),
        });
    }
    let min_replicas = spec
        .get("minReplicaCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Ok(write(
        file,
        start,
        &name,
        namespace,
        spec,
        min_replicas,
        sorted,
        auths,
    ))
}

/// The triggers, sorted.
struct Sorted<'a> {
    engine: EnginePart,
    broker: Option<(BrokerPart, &'a Old)>,
    fused: Vec<&'a Old>,
    kept: Vec<&'a Old>,
    cannot: Vec<String>,
}

fn sort(olds: &[Old]) -> Sorted<'_> {
    let mut s = Sorted {
        engine: EnginePart::default(),
        broker: None,
        fused: Vec::new(),
        kept: Vec::new(),
        cannot: Vec::new(),
    };
    let kept = "kept as its own trigger: the HPA takes the max of it and B/T";
    for old in olds {
        let result = match old.kind.as_str() {
            "prometheus" => engine::classify(old).and_then(|sig| s.engine.add(sig)),
            "aws-sqs-queue" | "kafka" | "rabbitmq" => match &s.broker {
                Some((b, _)) => Err(format!(
                    "one trigger reads one broker and {} is fused (write a second external trigger with its own `metricName` for this one)",
                    b.origin
                )),
                None => brokers::classify(old).map(|b| s.broker = Some((b, old))),
            },
            "cpu" | "memory" => Err(format!(
                "a resource metric the HPA reads from metrics-server, not a value KEDA asks a scaler for; on GPU inference pods {} says little about load (consider dropping it once the fused trigger is trusted)",
                old.kind
            )),
            "external" | "external-push" => {
                Err("already an external trigger (check it with `check --metadata`)".to_owned())
            }
            other => Err(format!("type `{other}` is not a signal this scaler reads")),
        };
        match result {
            Ok(()) => s.fused.push(old),
            Err(why) => {
                s.cannot.push(format!("{}: {why}; {kept}", old.origin));
                s.kept.push(old);
            }
        }
    }
    s
}

/// What a fused prometheus trigger's other keys become.
fn prometheus_notes(old: &Old, headers: &mut Vec<String>, cannot: &mut Vec<String>) {
    for (k, v) in &old.metadata {
        let note = match k.as_str() {
            "serverAddress" | "query" | "threshold" | "activationThreshold" | "ignoreNullValues" => continue,
            "metricName" => format!("`metricName: {v}` (deprecated in KEDA) is dropped: the fused metric is `backlog` (`backlog-<modelName>`), or `metricName` here"),
            "namespace" => format!("`namespace: {v}` is the tenant KEDA passes to a namespaced Prometheus API (Thanos, prom-label-proxy), not a label filter, which this scaler's `namespace` is: not carried; give the tenant in the profile's headers"),
            "customHeaders" => {
                headers.extend(v.split(',').filter_map(|h| h.split_once('=')).map(|(n, _)| n.trim().to_owned()));
                "`customHeaders` go to the profile's `prometheus.headers` (below)".to_owned()
            }
            "authModes" => format!("`authModes: {v}`: the profile's `prometheus` section carries the credentials (below)"),
            "unsafeSsl" => "`unsafeSsl` is, on an external trigger, KEDA's own key for dialling the scaler: not carried; the scaler verifies Prometheus's certificate".to_owned(),
            other => format!("`{other}` is not read by this scaler's PromQL path"),
        };
        cannot.push(format!("{}: {note}", old.origin));
    }
}

#[allow(clippy::too_many_arguments)]
fn write(
    file: &str,
    start: usize,
    name: &str,
    namespace: Option<String>,
    spec: &Value,
    min_replicas: u64,
    mut s: Sorted<'_>,
    auths: &[&Value],
) -> Migration {
    let mut headers = Vec::new();
    let prometheus: Vec<&Old> = s
        .fused
        .iter()
        .copied()
        .filter(|o| o.kind == "prometheus")
        .collect();
    for old in &prometheus {
        prometheus_notes(old, &mut headers, &mut s.cannot);
    }
    if let Some(old) = prometheus.first() {
        let set = prometheus.iter().find_map(|o| {
            o.get("ignoreNullValues")
                .map(|v| format!(" ({} set it to `{v}`)", o.origin))
        });
        s.cannot.push(format!(
            "{}: KEDA read an empty Prometheus answer as 0 (ignoreNullValues, default true){}; here an empty answer is a lost signal (held, then UNAVAILABLE so the ScaledObject's fallback applies) unless replicasQuery answers an explicit 0",
            old.origin,
            set.unwrap_or_default()
        ));
    }
    let e = &s.engine;
    let broker = s.broker.as_ref().map(|(b, _)| b);
    let (target, target_why) = if let Some(w) = &e.waiting {
        (
            w.threshold,
            format!(
                "T = {}'s threshold {} (waiting requests per replica, {}): W alone asks ceil(W/T) replicas, as before",
                w.origin,
                number_text(w.threshold),
                w.metric_type
            ),
        )
    } else if let Some(b) = broker {
        (
            b.per_replica,
            format!(
                "T = {}'s {} (messages per replica) × messageWeight 1: the queue alone asks ceil(Q/T) replicas, as before",
                b.origin, b.per_replica_from
            ),
        )
    } else if let Some(r) = &e.running {
        (
            r.threshold,
            format!(
                "no trigger read waiting requests, which now count too: T = C = {}, so a waiting request weighs what a running one does; lower it to scale sooner on queued work",
                number_text(r.threshold)
            ),
        )
    } else {
        (10.0, "no trigger gives a per-replica target in requests: 10 is a starting point; tune it with a load test (README, Operator's guide)".to_owned())
    };
    let weight = match broker {
        Some(b) if e.waiting.is_some() || e.running.is_some() => target / b.per_replica,
        _ => 1.0,
    };
    let mut acts: Vec<(f64, String)> = Vec::new();
    if let Some(w) = &e.waiting {
        acts.push((
            w.activation,
            format!(
                "{} activationThreshold {} (W)",
                w.origin,
                number_text(w.activation)
            ),
        ));
    }
    if let Some(r) = &e.running {
        acts.push((
            target * r.activation / r.threshold,
            format!(
                "{} activationThreshold {} running = T·{}/C",
                r.origin,
                number_text(r.activation),
                number_text(r.activation)
            ),
        ));
    }
    if let Some(b) = broker {
        acts.push((
            weight * b.activation,
            format!(
                "{} {} × messageWeight {}",
                b.origin,
                b.activation_from,
                number_text(weight)
            ),
        ));
    }
    for sig in [&e.kv_cache, &e.ttft]
        .into_iter()
        .flatten()
        .filter(|sig| sig.activation > 0.0)
    {
        s.cannot.push(format!("{}: activationThreshold {} has no equivalent: at zero replicas there is no KV cache or latency to read; not carried", sig.origin, number_text(sig.activation)));
    }
    let activation = acts.iter().map(|(a, _)| *a).fold(f64::INFINITY, f64::min);
    let activation = if activation.is_finite() {
        activation
    } else {
        0.0
    };

    let mut out = vec![Key::new(keys::SCALER_ADDRESS, SCALER_ADDRESS, "placeholder: the Service `kubectl apply -k k8s` and the Helm chart create; write your scaler's host:port".to_owned())];
    out.extend(e.keys(target));
    if let Some(b) = broker {
        out.extend(b.keys.iter().cloned());
        s.cannot.extend(b.not_carried.iter().cloned());
    }
    if weight != 1.0 {
        let b = broker
            .map(|b| (b.origin.clone(), b.per_replica))
            .unwrap_or_default();
        out.push(Key::new(keys::MESSAGE_WEIGHT, &number_text(weight), format!(
            "w = T / {}'s per-replica target = {} / {}: the broker term w·Q asks ceil(Q/{}) replicas on its own, as before, and adds to the engines' work instead of competing in the HPA's max (if a message is a batch of k requests, set w = k and retune T)",
            b.0, number_text(target), number_text(b.1), number_text(b.1)
        )));
    }
    out.push(Key::new(
        keys::TARGET_BACKLOG_PER_REPLICA,
        &number_text(target),
        target_why,
    ));
    let act_why = if acts.is_empty() {
        "no trigger with an activation in requests: 0, active while B > 0".to_owned()
    } else {
        format!(
            "A = min({}) = {}: KEDA was active when any trigger was; B adds those terms, so the smallest keeps every old wake-up (activation only acts between 0 and 1 replica{})",
            acts.iter()
                .map(|(_, w)| w.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            number_text(activation),
            if min_replicas > 0 {
                format!("; minReplicaCount is {min_replicas}, so it is unused")
            } else {
                String::new()
            }
        )
    };
    out.push(Key::new(
        keys::ACTIVATION_BACKLOG,
        &number_text(activation),
        act_why,
    ));

    // Credentials: one profile for the trigger (one `authProfile` key).
    let mut sections: Vec<(Section, Option<String>)> = Vec::new();
    let prom_ref = prometheus
        .iter()
        .find_map(|o| o.auth_ref.as_ref().map(|r| r.1.clone()));
    if prom_ref.is_some()
        || !headers.is_empty()
        || prometheus.iter().any(|o| o.get("authModes").is_some())
    {
        sections.push((Section::Prometheus, prom_ref));
    }
    if let Some((b, old)) = &s.broker {
        let stripped = b.keys.iter().any(|k| k.why.contains("credentials in it"));
        let env_creds = old
            .metadata
            .iter()
            .any(|(k, _)| k.starts_with("username") || k.starts_with("password"));
        let auth = old.auth_ref.as_ref().map(|r| r.1.clone());
        if auth.is_some() || stripped || env_creds {
            sections.push((b.section, auth));
        } else if b.section == Section::Aws {
            s.cannot.push(format!("{}: no authenticationRef: the scaler reads SQS with its own AWS identity (IRSA on its service account, or the default chain); its role needs sqs:GetQueueAttributes (and sqs:GetQueueUrl for a bare queue name)", b.origin));
        }
    }
    // One `authProfile` serves the broker and the PromQL queries, and the
    // server requires a `prometheus` section of it then (empty is enough).
    if !sections.is_empty()
        && !prometheus.is_empty()
        && !sections.iter().any(|(s, _)| *s == Section::Prometheus)
    {
        sections.insert(0, (Section::Prometheus, None));
    }
    let profile_name = sections
        .iter()
        .find_map(|(_, r)| r.clone())
        .unwrap_or_else(|| name.to_owned());
    let profile_text = if sections.is_empty() {
        None
    } else {
        out.push(Key::new(keys::AUTH_PROFILE, &profile_name, "the profile below in the scaler's --config: KEDA does not forward a TriggerAuthentication to an external scaler (kedacore/keda#2571), so the credentials move to the scaler".to_owned()));
        let (lines, notes) = profile::skeleton(
            &profile_name,
            namespace.as_deref(),
            &sections,
            &headers,
            auths,
        );
        s.cannot.extend(notes);
        Some(lines)
    };
    if spec
        .get("advanced")
        .and_then(|a| a.get("scalingModifiers"))
        .is_some()
    {
        s.cannot.push("spec.advanced.scalingModifiers: its formula names the old triggers, which the fused trigger replaces: remove it or rewrite it over the triggers that remain".to_owned());
    }
    if !prometheus.is_empty() && min_replicas == 0 {
        s.cannot.push(format!(
            "minReplicaCount 0 on the PromQL path: with no pod up the default replicasQuery is empty, which is a lost signal, not zero; to scale from zero set `replicasQuery: kube_deployment_status_replicas_available{{namespace=\"{}\",deployment=\"{}\"}}` (kube-state-metrics), which answers an explicit 0",
            namespace.as_deref().unwrap_or("default"),
            text_of(spec.get("scaleTargetRef").and_then(|r| r.get("name")))
        ));
    }
    match spec.get("fallback") {
        Some(_) => s.cannot.push("spec.fallback: kept; it now applies to the fused trigger whenever the scaler answers UNAVAILABLE (a signal lost longer than maxSignalAgeSeconds)".to_owned()),
        None => s.cannot.push("no spec.fallback: consider one; the fused trigger answers UNAVAILABLE rather than 0 when its signal is lost, and KEDA applies the fallback then".to_owned()),
    }

    let kind = if min_replicas == 0 {
        "external-push"
    } else {
        "external"
    };
    let mut metadata_map = Mapping::new();
    let mut metadata = Vec::new();
    for k in &out {
        if let Some(key) = &k.key {
            metadata_map.insert(Value::String(key.clone()), Value::String(redact(&k.value)));
            metadata.push((
                key.clone(),
                k.check_value.clone().unwrap_or_else(|| k.value.clone()),
            ));
        }
    }
    let mut fused = Mapping::new();
    fused.insert("type".into(), kind.into());
    fused.insert("metadata".into(), Value::Mapping(metadata_map));
    let mut list = vec![Value::Mapping(fused)];
    list.extend(s.kept.iter().map(|o| redact_value(&o.raw)));
    let mut root = Mapping::new();
    root.insert("triggers".into(), Value::Sequence(list));

    let ns = namespace.clone().unwrap_or_else(|| "default".to_owned());
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# {file}:{start}: ScaledObject {ns}/{name}: {} trigger(s) fused into one, {} kept as they are",
        s.fused.len(),
        s.kept.len()
    );
    let _ = writeln!(text, "# Replace spec.triggers with:");
    text.push_str(&serde_yaml_ng::to_string(&Value::Mapping(root)).unwrap_or_default());
    let _ = writeln!(text, "# Where each value comes from:");
    let _ = writeln!(
        text,
        "#   type {kind}: {}",
        if kind == "external-push" {
            "minReplicaCount is 0, so the scaler's push of IsActive wakes the Deployment without waiting for KEDA's next poll"
        } else {
            "polled every pollingInterval (external-push would also push activation, useful with minReplicaCount 0)"
        }
    );
    let _ = writeln!(
        text,
        "#   metricType unset: AverageValue, so the HPA asks ceil(B/T) replicas (B is the fused backlog)"
    );
    for k in &out {
        match &k.key {
            Some(key) => {
                let _ = writeln!(text, "#   {key}: {}", redact(&k.why));
            }
            None => {
                let _ = writeln!(text, "#   ({})", redact(&k.why));
            }
        }
    }
    let _ = writeln!(text, "# Cannot carry over, or carried differently:");
    for c in &s.cannot {
        let _ = writeln!(text, "#   - {}", redact(c));
    }
    if let Some(lines) = profile_text {
        let _ = writeln!(
            text,
            "# Credentials: add to the scaler's --config (mount each Secret named there into the scaler):"
        );
        for l in lines {
            let _ = writeln!(text, "#   {l}");
        }
    }
    Migration {
        name: format!("{ns}/{name}"),
        namespace,
        text,
        metadata,
    }
}

fn text_of(v: Option<&Value>) -> String {
    v.and_then(Value::as_str)
        .unwrap_or("<scaleTargetRef.name>")
        .to_owned()
}
