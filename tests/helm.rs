//! The Helm chart, `charts/backlog-scaler`, with a real helm v4
//! (`.ci/install-helm`):
//!
//! - `helm lint --strict` with the defaults and with `ci/all-on-values.yaml`
//!   (every switch on, KEDA's chart convention);
//! - `helm template` of both, each object validated offline by
//!   `tests/manifests/validate.py`: built-in kinds strictly against
//!   Kubernetes 1.37 (PyPI's `kubernetes-validate` 1.37.0), KEDA's kinds
//!   against `k8s/crds-for-tests/`, and the Prometheus Operator's and
//!   cert-manager's kinds against the hand-written schemas in
//!   `tests/common/chart-crds/` (no kind is skipped);
//! - the defaults render the kustomize base's Deployment, Service, PDB,
//!   NetworkPolicy and config, field by field;
//! - the rendered `--config` passes the real binary's `check --no-probe`, and
//!   `serve` starts with the all-on config and its Secret;
//! - the alerts are valid rules (`promtool check rules`) that fire when they
//!   should (`promtool test rules`);
//! - the values table in the chart's README is `values.yaml`, key by key;
//! - the chart's dashboard is byte-identical to `dashboards/backlog-scaler.json`.
//!
//! Without helm the tests print why and pass, unless `CI` is set: CI
//! installs helm, so there a missing helm fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_yaml_ng::{Mapping, Value};

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");
const CHART: &str = "charts/backlog-scaler";
const ALL_ON: &str = "charts/backlog-scaler/ci/all-on-values.yaml";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn file(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Whether helm is there. Absent: outside CI the test says why and passes;
/// under CI it fails, since `.ci/install-deps` installs helm.
fn have_helm(test: &str) -> bool {
    let found = Command::new("helm")
        .arg("version")
        .arg("--short")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "helm is not installed and CI is set: run `bash .ci/install-helm`"
        );
        eprintln!("SKIPPED {test}: helm is not installed (`bash .ci/install-helm` installs it)");
    }
    found
}

fn helm(args: &[&str]) -> Output {
    Command::new("helm")
        .args(args)
        .current_dir(root())
        .output()
        .expect("helm runs")
}

/// `helm template backlog-scaler CHART --namespace keda EXTRA...`, as YAML text.
fn template(extra: &[&str]) -> String {
    let mut args = vec!["template", "backlog-scaler", CHART, "--namespace", "keda"];
    args.extend_from_slice(extra);
    let output = helm(&args);
    assert!(
        output.status.success(),
        "helm {args:?} failed:\n{}",
        text(&output)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind}/{name}");
    found[0]
}

fn only<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}");
    found[0]
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v:?}"))
}

fn seq<'a>(v: &'a Value, what: &str) -> &'a Vec<Value> {
    v.as_sequence()
        .unwrap_or_else(|| panic!("{what} is not a list: {v:?}"))
}

fn container(deployment: &Value) -> &Value {
    let containers = seq(
        &deployment["spec"]["template"]["spec"]["containers"],
        "containers",
    );
    assert_eq!(containers.len(), 1);
    &containers[0]
}

fn kustomize(dir: &Path) -> String {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl runs (`bash .ci/install-deps`)");
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8(output.stdout).expect("utf-8")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The base, optionally with the TLS component on (as its README says).
fn base(tls: bool) -> Vec<Value> {
    if !tls {
        return documents(&kustomize(&root().join("k8s")));
    }
    let copy = tempfile::tempdir().expect("tmp");
    copy_dir(&root().join("k8s"), copy.path());
    let path = copy.path().join("kustomization.yaml");
    let original = std::fs::read_to_string(&path).expect("read");
    let commented = "# components:\n#   - tls\n";
    assert!(original.contains(commented));
    std::fs::write(&path, original.replace(commented, "components:\n  - tls\n")).expect("write");
    documents(&kustomize(copy.path()))
}

/// A mapping without some keys.
fn without(v: &Value, keys: &[&str]) -> Value {
    let mut map = v.as_mapping().expect("mapping").clone();
    for key in keys {
        map.remove(*key);
    }
    Value::Mapping(map)
}

/// A list of named objects as name → object.
fn by_name(v: &Value, what: &str) -> BTreeMap<String, Value> {
    seq(v, what)
        .iter()
        .map(|item| (str_of(&item["name"], "name").to_owned(), item.clone()))
        .collect()
}

fn config_of(docs: &[Value], configmap: &str) -> String {
    str_of(
        &find(docs, "ConfigMap", configmap)["data"]["config.yaml"],
        "config.yaml",
    )
    .to_owned()
}

#[test]
fn chart_lints_strictly_with_defaults_and_with_every_switch_on() {
    if !have_helm("chart_lints_strictly_with_defaults_and_with_every_switch_on") {
        return;
    }
    let version = helm(&["version", "--short"]);
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with("v4."),
        "helm v4 expected: {}",
        text(&version)
    );
    for extra in [&[][..], &["-f", ALL_ON][..]] {
        let mut args = vec!["lint", "--strict", CHART];
        args.extend_from_slice(extra);
        let output = helm(&args);
        let out = text(&output);
        assert!(output.status.success(), "helm {args:?}:\n{out}");
        assert!(
            out.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{out}"
        );
    }
    // Not vacuous: lint refuses a chart whose template does not render.
    let broken = tempfile::tempdir().expect("tmp");
    copy_dir(&root().join(CHART), broken.path());
    std::fs::write(
        broken.path().join("templates/broken.yaml"),
        "{{ .Values.nope.deeper }}\n",
    )
    .expect("write");
    let output = helm(&["lint", "--strict", broken.path().to_str().expect("utf-8")]);
    assert!(!output.status.success(), "{}", text(&output));
}

#[test]
fn app_version_is_the_crate_version() {
    let chart: Value =
        serde_yaml_ng::from_str(&file("charts/backlog-scaler/Chart.yaml")).expect("YAML");
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
}

/// Run validate.py over files, with KEDA's CRDs and the chart's kinds; `(ok, output)`.
fn validate(files: &[PathBuf]) -> (bool, String) {
    let crds = tempfile::tempdir().expect("tmp");
    for dir in ["k8s/crds-for-tests", "tests/common/chart-crds"] {
        for entry in std::fs::read_dir(root().join(dir)).expect(dir) {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                std::fs::copy(&path, crds.path().join(path.file_name().expect("name")))
                    .expect("copy");
            }
        }
    }
    let mut args: Vec<String> = vec![
        "tests/manifests/validate.py".into(),
        "--crds".into(),
        crds.path().to_str().expect("utf-8").into(),
    ];
    args.extend(files.iter().map(|f| f.to_str().expect("utf-8").to_owned()));
    let output = Command::new("python3")
        .args(&args)
        .current_dir(root())
        .output()
        .expect("python3 runs (`bash .ci/install-deps` installs kubernetes-validate)");
    let out = text(&output);
    assert_ne!(
        output.status.code(),
        Some(2),
        "validator could not run:\n{out}"
    );
    (output.status.success(), out)
}

#[test]
fn every_rendered_object_validates_strictly_against_kubernetes_1_37() {
    if !have_helm("every_rendered_object_validates_strictly_against_kubernetes_1_37") {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let defaults = dir.path().join("defaults.yaml");
    let all_on = dir.path().join("all-on.yaml");
    let default_text = template(&[]);
    let all_on_text = template(&["-f", ALL_ON]);
    std::fs::write(&defaults, &default_text).expect("write");
    std::fs::write(&all_on, &all_on_text).expect("write");

    let kinds = |yaml: &str| -> BTreeMap<String, usize> {
        let mut count = BTreeMap::new();
        for doc in documents(yaml) {
            *count
                .entry(str_of(&doc["kind"], "kind").to_owned())
                .or_default() += 1;
        }
        count
    };
    let expected_defaults = BTreeMap::from(
        [
            ("ConfigMap", 1),
            ("Deployment", 1),
            ("NetworkPolicy", 1),
            ("PodDisruptionBudget", 1),
            ("Service", 1),
            ("ServiceAccount", 1),
        ]
        .map(|(k, n)| (k.to_owned(), n)),
    );
    assert_eq!(kinds(&default_text), expected_defaults);
    // Every switch renders its objects: the dashboard ConfigMap, the CA
    // Certificate + the scaler's + KEDA's client one, the self-signed and CA
    // Issuers, both monitors, the rules, and the Secret from extraObjects.
    let expected_all_on = BTreeMap::from(
        [
            ("Certificate", 3),
            ("ConfigMap", 2),
            ("Deployment", 1),
            ("Issuer", 2),
            ("NetworkPolicy", 1),
            ("PodDisruptionBudget", 1),
            ("PodMonitor", 1),
            ("PrometheusRule", 1),
            ("Secret", 1),
            ("Service", 1),
            ("ServiceAccount", 1),
            ("ServiceMonitor", 1),
        ]
        .map(|(k, n)| (k.to_owned(), n)),
    );
    assert_eq!(kinds(&all_on_text), expected_all_on);

    let (ok, out) = validate(&[defaults, all_on]);
    assert!(ok, "the chart's objects do not validate:\n{out}");
    let count = |needle: &str| out.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("FAIL"), 0, "{out}");
    assert!(
        out.contains("validate.py: kubernetes-validate 1.37.0"),
        "{out}"
    );
    assert!(out.contains("validate.py: 22 passed, 0 failed"), "{out}");
    assert_eq!(
        count("Deployment/backlog-scaler (Kubernetes 1.37 strict)"),
        2,
        "{out}"
    );
    for (what, n) in [
        ("(Kubernetes 1.37 strict)", 14),
        ("(CRD cert-manager.io_certificates.yaml)", 3),
        ("(CRD cert-manager.io_issuers.yaml)", 2),
        (
            "ServiceMonitor/backlog-scaler (CRD monitoring.coreos.com_servicemonitors.yaml)",
            1,
        ),
        (
            "PodMonitor/backlog-scaler (CRD monitoring.coreos.com_podmonitors.yaml)",
            1,
        ),
        (
            "PrometheusRule/backlog-scaler (CRD monitoring.coreos.com_prometheusrules.yaml)",
            1,
        ),
    ] {
        assert_eq!(count(what), n, "{what}:\n{out}");
    }
}

#[test]
fn the_chart_kind_schemas_refuse_what_upstream_would() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: typo}
spec:
  selector: {matchLabels: {a: b}}
  endpoints: [{port: http, honorLabel: true}]
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: nofor}
spec:
  groups: [{name: g, rules: [{alert: A, expr: up == 0, for: 5 minutes}]}]
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: usage}
spec:
  secretName: s
  usages: [server-auth]
  issuerRef: {name: i}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca}
spec:
  ca: {secret: kedaorg-ca}
"#,
    )
    .expect("write");
    let (ok, out) = validate(&[bad]);
    assert!(!ok, "{out}");
    for expected in [
        "ServiceMonitor/typo (CRD monitoring.coreos.com_servicemonitors.yaml): spec/endpoints/0: Additional properties are not allowed ('honorLabel'",
        "PrometheusRule/nofor (CRD monitoring.coreos.com_prometheusrules.yaml): spec/groups/0/rules/0/for: '5 minutes' does not match",
        "Certificate/usage (CRD cert-manager.io_certificates.yaml): spec/usages/0: 'server-auth' is not one of",
        "Issuer/ca (CRD cert-manager.io_issuers.yaml): spec/ca",
        "validate.py: 0 passed, 4 failed",
    ] {
        assert!(out.contains(expected), "expected `{expected}` in:\n{out}");
    }
}

#[test]
fn chart_defaults_agree_with_the_kustomize_base() {
    if !have_helm("chart_defaults_agree_with_the_kustomize_base") {
        return;
    }
    let chart = documents(&template(&[]));
    let base = base(false);

    let (cd, bd) = (
        find(&chart, "Deployment", "backlog-scaler"),
        find(&base, "Deployment", "backlog-scaler"),
    );
    for field in ["replicas", "revisionHistoryLimit", "strategy"] {
        assert_eq!(cd["spec"][field], bd["spec"][field], "spec.{field}");
    }
    let (cp, bp) = (
        &cd["spec"]["template"]["spec"],
        &bd["spec"]["template"]["spec"],
    );
    for field in [
        "serviceAccountName",
        "automountServiceAccountToken",
        "enableServiceLinks",
        "terminationGracePeriodSeconds",
        "securityContext",
        "nodeSelector",
        "tolerations",
        "affinity",
        "priorityClassName",
    ] {
        assert_eq!(cp[field], bp[field], "pod spec.{field}");
    }
    // The same spread, each constraint selecting that Deployment's own pods.
    for (pod, deployment) in [(cp, cd), (bp, bd)] {
        for constraint in seq(&pod["topologySpreadConstraints"], "spread") {
            assert_eq!(
                constraint["labelSelector"]["matchLabels"],
                deployment["spec"]["selector"]["matchLabels"]
            );
        }
    }
    let spread = |pod: &Value| -> Vec<Value> {
        seq(&pod["topologySpreadConstraints"], "spread")
            .iter()
            .map(|c| without(c, &["labelSelector"]))
            .collect()
    };
    assert_eq!(spread(cp), spread(bp), "topologySpreadConstraints");
    assert_eq!(
        cd["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"],
        bd["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
    );

    let (cc, bc) = (container(cd), container(bd));
    for field in [
        "name",
        "image",
        "imagePullPolicy",
        "args",
        "env",
        "ports",
        "startupProbe",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "securityContext",
    ] {
        assert!(!bc[field].is_null(), "the base sets {field}");
        assert_eq!(cc[field], bc[field], "container.{field}");
    }
    // Mounts and volumes: the same, except that the chart mounts no broker
    // Secret until `brokerCredentials.existingSecret` names one, and that
    // the base's ConfigMap name carries kustomize's content hash.
    let mut base_mounts = by_name(&bc["volumeMounts"], "mounts");
    assert!(base_mounts.remove("broker-credentials").is_some());
    assert_eq!(by_name(&cc["volumeMounts"], "mounts"), base_mounts);
    let mut base_volumes = by_name(&bp["volumes"], "volumes");
    assert!(base_volumes.remove("broker-credentials").is_some());
    let mut chart_volumes = by_name(&cp["volumes"], "volumes");
    let (chart_config, base_config) = (
        chart_volumes.remove("config").expect("config volume"),
        base_volumes.remove("config").expect("config volume"),
    );
    assert_eq!(chart_volumes, base_volumes, "volumes");
    assert_eq!(chart_config["configMap"]["name"], "backlog-scaler-config");
    assert!(
        str_of(&base_config["configMap"]["name"], "name").starts_with("backlog-scaler-config-")
    );
    // With a broker Secret named, its mount is the base's.
    let with_secret = documents(&template(&[
        "--set",
        "brokerCredentials.existingSecret=backlog-scaler-broker-credentials",
    ]));
    let wd = find(&with_secret, "Deployment", "backlog-scaler");
    assert_eq!(
        by_name(&container(wd)["volumeMounts"], "mounts")["broker-credentials"],
        by_name(&bc["volumeMounts"], "mounts")["broker-credentials"]
    );
    assert_eq!(
        by_name(&wd["spec"]["template"]["spec"]["volumes"], "volumes")["broker-credentials"],
        by_name(&bp["volumes"], "volumes")["broker-credentials"]
    );

    // The Service, PDB, NetworkPolicy and ServiceAccount, selectors aside.
    let (cs, bs) = (
        find(&chart, "Service", "backlog-scaler"),
        find(&base, "Service", "backlog-scaler"),
    );
    assert_eq!(
        without(&cs["spec"], &["selector"]),
        without(&bs["spec"], &["selector"])
    );
    assert_eq!(
        cs["spec"]["selector"],
        cd["spec"]["selector"]["matchLabels"]
    );
    let (cb, bb) = (
        find(&chart, "PodDisruptionBudget", "backlog-scaler"),
        find(&base, "PodDisruptionBudget", "backlog-scaler"),
    );
    assert_eq!(
        without(&cb["spec"], &["selector"]),
        without(&bb["spec"], &["selector"])
    );
    assert_eq!(cb["spec"]["selector"], cd["spec"]["selector"]);
    let (cn, bn) = (
        find(&chart, "NetworkPolicy", "backlog-scaler"),
        find(&base, "NetworkPolicy", "backlog-scaler"),
    );
    assert_eq!(
        without(&cn["spec"], &["podSelector"]),
        without(&bn["spec"], &["podSelector"])
    );
    assert_eq!(cn["spec"]["podSelector"], cd["spec"]["selector"]);
    assert_eq!(
        find(&chart, "ServiceAccount", "backlog-scaler")["automountServiceAccountToken"],
        find(&base, "ServiceAccount", "backlog-scaler")["automountServiceAccountToken"]
    );
    for doc in &chart {
        assert_eq!(doc["metadata"]["namespace"], "keda", "{doc:?}");
        for label in [
            "app.kubernetes.io/name",
            "app.kubernetes.io/component",
            "app.kubernetes.io/part-of",
        ] {
            assert_eq!(
                doc["metadata"]["labels"][label], bd["metadata"]["labels"][label],
                "{label} on {:?}",
                doc["metadata"]["name"]
            );
        }
    }

    // The config: the base's, without its example profiles.
    let chart_config: Value =
        serde_yaml_ng::from_str(&config_of(&chart, "backlog-scaler-config")).expect("YAML");
    let base_config: Value =
        serde_yaml_ng::from_str(&file("k8s/scaler-config.yaml")).expect("YAML");
    assert_eq!(
        without(&chart_config, &["profiles"]),
        without(&base_config, &["profiles"])
    );
    assert_eq!(chart_config["profiles"], Value::Mapping(Mapping::new()));
}

#[test]
fn chart_tls_agrees_with_the_kustomize_tls_component() {
    if !have_helm("chart_tls_agrees_with_the_kustomize_tls_component") {
        return;
    }
    let chart = documents(&template(&[
        "--set",
        "certificates.enabled=true",
        "--set",
        "certificates.secretName=backlog-scaler-tls",
    ]));
    let base = base(true);
    let (cd, bd) = (
        find(&chart, "Deployment", "backlog-scaler"),
        find(&base, "Deployment", "backlog-scaler"),
    );
    let (cc, bc) = (container(cd), container(bd));
    // The component's patch puts its variables first; order does not matter.
    assert_eq!(by_name(&cc["env"], "env"), by_name(&bc["env"], "env"));
    for field in ["startupProbe", "livenessProbe", "readinessProbe", "args"] {
        assert_eq!(cc[field], bc[field], "container.{field}");
    }
    assert!(cc["startupProbe"]["grpc"].is_null());
    assert_eq!(
        by_name(&cc["volumeMounts"], "mounts")["tls"],
        by_name(&bc["volumeMounts"], "mounts")["tls"]
    );
    assert_eq!(
        by_name(&cd["spec"]["template"]["spec"]["volumes"], "volumes")["tls"],
        by_name(&bd["spec"]["template"]["spec"]["volumes"], "volumes")["tls"]
    );
    // Without client authentication, no --client-ca.
    let one_way = documents(&template(&[
        "--set",
        "certificates.enabled=true",
        "--set",
        "certificates.requireClientCert=false",
    ]));
    let env: BTreeSet<String> = seq(&container(only(&one_way, "Deployment"))["env"], "env")
        .iter()
        .map(|e| str_of(&e["name"], "name").to_owned())
        .collect();
    assert!(env.contains("BACKLOG_SCALER_TLS_CERT"));
    assert!(!env.contains("BACKLOG_SCALER_CLIENT_CA"));
}

#[test]
fn cert_manager_issues_both_ends_from_the_keda_ca() {
    if !have_helm("cert_manager_issues_both_ends_from_the_keda_ca") {
        return;
    }
    // Default: reuse KEDA's own CA, kedaorg-ca; no self-signed CA here.
    let reuse = documents(&template(&[
        "--set",
        "certificates.certManager.enabled=true",
    ]));
    let issuers: Vec<&Value> = reuse.iter().filter(|d| d["kind"] == "Issuer").collect();
    assert_eq!(issuers.len(), 1, "{issuers:?}");
    assert_eq!(issuers[0]["spec"]["ca"]["secretName"], "kedaorg-ca");
    let issuer_name = &issuers[0]["metadata"]["name"];
    let server = find(&reuse, "Certificate", "backlog-scaler-tls");
    let client = find(&reuse, "Certificate", "backlog-scaler-client");
    for cert in [server, client] {
        assert_eq!(&cert["spec"]["issuerRef"]["name"], issuer_name);
        assert_eq!(cert["spec"]["issuerRef"]["kind"], "Issuer");
    }
    let names: Vec<&str> = seq(&server["spec"]["dnsNames"], "dnsNames")
        .iter()
        .map(|n| str_of(n, "name"))
        .collect();
    assert!(
        names.contains(&"backlog-scaler.keda.svc.cluster.local"),
        "{names:?}"
    );
    assert_eq!(server["spec"]["usages"][0], "server auth");
    assert_eq!(client["spec"]["usages"][0], "client auth");
    // The scaler serves the Secret the Certificate fills, and trusts its ca.crt.
    let deployment = only(&reuse, "Deployment");
    let volumes = by_name(
        &deployment["spec"]["template"]["spec"]["volumes"],
        "volumes",
    );
    assert_eq!(
        volumes["tls"]["secret"]["secretName"],
        server["spec"]["secretName"]
    );
    let env: BTreeMap<String, String> = seq(&container(deployment)["env"], "env")
        .iter()
        .map(|e| {
            (
                str_of(&e["name"], "name").to_owned(),
                str_of(&e["value"], "value").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        env["BACKLOG_SCALER_CLIENT_CA"],
        "/var/run/secrets/backlog-scaler/tls/ca.crt"
    );

    // generateCA: a self-signed Issuer signs the CA Certificate into caSecretName.
    let generate = documents(&template(&["-f", ALL_ON]));
    let ca = find(&generate, "Certificate", "backlog-scaler-ca");
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(ca["spec"]["secretName"], "backlog-scaler-ca");
    let selfsigned = find(
        &generate,
        "Issuer",
        str_of(&ca["spec"]["issuerRef"]["name"], "name"),
    );
    assert!(selfsigned["spec"]["selfSigned"].is_mapping());
    assert_eq!(
        find(&generate, "Issuer", "backlog-scaler-ca-issuer")["spec"]["ca"]["secretName"],
        "backlog-scaler-ca"
    );
}

#[test]
fn all_on_values_reach_the_objects_they_name() {
    if !have_helm("all_on_values_reach_the_objects_they_name") {
        return;
    }
    let docs = documents(&template(&["-f", ALL_ON]));
    let deployment = only(&docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(pod["serviceAccountName"], "scaler");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    assert!(pod["affinity"]["nodeAffinity"].is_mapping());
    assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred");
    // A constraint with its own labelSelector keeps it.
    assert_eq!(
        pod["topologySpreadConstraints"][1]["labelSelector"]["matchLabels"],
        serde_yaml_ng::from_str::<Value>("app.kubernetes.io/name: backlog-scaler").expect("YAML")
    );
    let c = container(deployment);
    assert_eq!(
        c["image"],
        "registry.example.com/platform/backlog-scaler:0.1.0-test"
    );
    assert_eq!(c["startupProbe"]["httpGet"]["path"], "/healthz");
    let mounts = by_name(&c["volumeMounts"], "mounts");
    assert!(mounts.contains_key("scratch") && mounts.contains_key("broker-credentials"));
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert!(str_of(&annotations["checksum/config"], "checksum").len() == 64);
    // The chart's own objects carry additionalLabels/Annotations; the
    // extraObjects (the Secret) are rendered as given.
    for doc in docs.iter().filter(|d| d["kind"] != "Secret") {
        let name = &doc["metadata"]["name"];
        assert_eq!(doc["metadata"]["labels"]["team"], "platform", "{name:?}");
        assert_eq!(
            doc["metadata"]["annotations"]["example.com/owner"], "platform",
            "{name:?}"
        );
    }
    // Monitors select the Service's pods and keep the trigger labels.
    let service = only(&docs, "Service");
    let monitor = only(&docs, "ServiceMonitor");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        service["spec"]["selector"]
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true);
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "http");
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let pod_monitor = only(&docs, "PodMonitor");
    assert_eq!(
        pod_monitor["spec"]["podMetricsEndpoints"][0]["port"],
        "http"
    );
    let rules = only(&docs, "PrometheusRule");
    let alerts: Vec<&str> = seq(&rules["spec"]["groups"][0]["rules"], "rules")
        .iter()
        .map(|r| str_of(&r["alert"], "alert"))
        .collect();
    assert_eq!(
        alerts,
        [
            "BacklogScalerTriggerUnavailable",
            "BacklogScalerTriggerDegraded",
            "BacklogScalerPodsLeftOut",
            "BacklogScalerPollErrors",
            "BacklogScalerNearMaxTriggers"
        ]
    );
    let secret = only(&docs, "Secret");
    assert_eq!(
        secret["metadata"]["namespace"], "keda",
        "extraObjects are templated"
    );
}

#[test]
fn the_dashboard_in_the_chart_is_the_repository_dashboard() {
    let ours = std::fs::read(root().join("dashboards/backlog-scaler.json")).expect("read");
    let chart = std::fs::read(root().join("charts/backlog-scaler/dashboards/backlog-scaler.json"))
        .expect("read");
    assert!(
        ours == chart,
        "charts/backlog-scaler/dashboards/backlog-scaler.json differs from dashboards/backlog-scaler.json: copy it over"
    );
    if !have_helm("the_dashboard_in_the_chart_is_the_repository_dashboard") {
        return;
    }
    let docs = documents(&template(&["--set", "dashboard.enabled=true"]));
    let configmap = find(&docs, "ConfigMap", "backlog-scaler-dashboard");
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(configmap["metadata"]["namespace"], "keda");
    assert_eq!(
        configmap["data"]["backlog-scaler.json"]
            .as_str()
            .map(str::as_bytes),
        Some(&ours[..]),
        "the ConfigMap carries the file byte for byte"
    );
    let all_on = documents(&template(&["-f", ALL_ON]));
    let configmap = find(&all_on, "ConfigMap", "backlog-scaler-dashboard");
    assert_eq!(configmap["metadata"]["namespace"], "monitoring");
    assert_eq!(
        configmap["metadata"]["annotations"]["grafana_folder"],
        "KEDA"
    );
}

fn check(config: &Path, metadata: &Path) -> Output {
    Command::new(BIN)
        .arg("check")
        .arg("--no-probe")
        .arg("--config")
        .arg(config)
        .arg("--metadata")
        .arg(metadata)
        .current_dir(root())
        .output()
        .expect("binary runs")
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("k8s/examples"))
        .expect("k8s/examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    files
}

#[test]
fn the_rendered_config_passes_the_scalers_own_check() {
    if !have_helm("the_rendered_config_passes_the_scalers_own_check") {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    // All on: the base's profiles, so every example trigger is accepted.
    let all_on = dir.path().join("all-on.yaml");
    std::fs::write(
        &all_on,
        config_of(
            &documents(&template(&["-f", ALL_ON])),
            "backlog-scaler-config",
        ),
    )
    .expect("write");
    let mut accepted = 0;
    for example in examples() {
        let output = check(&all_on, &example);
        let out = text(&output);
        assert!(output.status.success(), "{}:\n{out}", example.display());
        accepted += out.matches("metadata ok").count();
    }
    assert!(accepted >= 4, "{accepted}");

    // Defaults: no profiles, so a trigger naming one is refused, by name.
    let defaults = dir.path().join("defaults.yaml");
    std::fs::write(
        &defaults,
        config_of(&documents(&template(&[])), "backlog-scaler-config"),
    )
    .expect("write");
    let output = check(
        &defaults,
        &root().join("k8s/examples/interactive-vllm.yaml"),
    );
    assert!(output.status.success(), "{}", text(&output));
    let output = check(
        &defaults,
        &root().join("k8s/examples/batch-embedder-sqs.yaml"),
    );
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("sqs-batch"), "{}", text(&output));

    // A key the scaler does not know, set through the values, is refused.
    let typo = dir.path().join("typo.yaml");
    std::fs::write(
        &typo,
        config_of(
            &documents(&template(&["--set", "config.idleTimeout=5"])),
            "backlog-scaler-config",
        ),
    )
    .expect("write");
    let output = check(&typo, &root().join("k8s/examples/interactive-vllm.yaml"));
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("idleTimeout"), "{}", text(&output));
}

/// Every `{file: PATH}` and `{env: VAR}` in a YAML value.
fn references(value: &Value, files: &mut Vec<String>, envs: &mut Vec<String>) {
    match value {
        Value::Mapping(map) => {
            for (k, v) in map {
                match k.as_str() {
                    Some("file") => files.push(str_of(v, "file").to_owned()),
                    Some("env") => envs.push(str_of(v, "env").to_owned()),
                    _ => references(v, files, envs),
                }
            }
        }
        Value::Sequence(items) => items.iter().for_each(|v| references(v, files, envs)),
        _ => {}
    }
}

/// The all-on pod, as the scaler would find it: the Secret's keys and the
/// projected token as files in a temporary directory, the `extraEnv`
/// variables set, the config's paths pointing there.
struct AllOnPod {
    dir: tempfile::TempDir,
    config: PathBuf,
    env: Vec<(String, String)>,
}

fn all_on_pod() -> AllOnPod {
    let docs = documents(&template(&["-f", ALL_ON]));
    let deployment = only(&docs, "Deployment");
    let c = container(deployment);
    let secret = only(&docs, "Secret");
    let secret_name = str_of(&secret["metadata"]["name"], "name");
    let data = secret["stringData"].as_mapping().expect("stringData");
    let mounts = by_name(&c["volumeMounts"], "mounts");
    let volumes = by_name(
        &deployment["spec"]["template"]["spec"]["volumes"],
        "volumes",
    );
    assert_eq!(
        volumes["broker-credentials"]["secret"]["secretName"],
        secret_name
    );
    let brokers = str_of(&mounts["broker-credentials"]["mountPath"], "mountPath");
    let token_dir = str_of(&mounts["prometheus-token"]["mountPath"], "mountPath");
    let token_path = str_of(
        &volumes["prometheus-token"]["projected"]["sources"][0]["serviceAccountToken"]["path"],
        "path",
    );

    let config_text = config_of(&docs, "backlog-scaler-config");
    let (mut files, mut envs) = (Vec::new(), Vec::new());
    references(
        &serde_yaml_ng::from_str::<Value>(&config_text).expect("YAML"),
        &mut files,
        &mut envs,
    );
    // Each file a profile reads is a key of the mounted Secret, or the token.
    for f in &files {
        if let Some(key) = f.strip_prefix(&format!("{brokers}/")) {
            assert!(data.contains_key(key), "{f}: no key `{key}` in the Secret");
        } else {
            assert_eq!(
                f,
                &format!("{token_dir}/{token_path}"),
                "{f} is mounted nowhere"
            );
        }
    }
    let dir = tempfile::tempdir().expect("tmp");
    let here_brokers = dir.path().join("brokers");
    let here_token = dir.path().join("prometheus");
    std::fs::create_dir_all(&here_brokers).expect("mkdir");
    std::fs::create_dir_all(&here_token).expect("mkdir");
    for (key, value) in data {
        std::fs::write(
            here_brokers.join(str_of(key, "key")),
            str_of(value, "value"),
        )
        .expect("write");
    }
    std::fs::write(here_token.join(token_path), "a-projected-token").expect("write");
    // Each variable a profile reads is set from the Secret by extraEnv.
    let env_list = seq(&c["env"], "env");
    let mut env = Vec::new();
    for var in &envs {
        let entry = env_list
            .iter()
            .find(|e| e["name"] == var.as_str())
            .unwrap_or_else(|| panic!("{var} is read by a profile but not in the container's env"));
        let from = &entry["valueFrom"]["secretKeyRef"];
        assert_eq!(from["name"], secret_name);
        let value = &data[str_of(&from["key"], "key")];
        env.push((var.clone(), str_of(value, "value").to_owned()));
    }
    assert!(!envs.is_empty() && files.len() >= 5, "{files:?} {envs:?}");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        config_text
            .replace(brokers, here_brokers.to_str().expect("utf-8"))
            .replace(token_dir, here_token.to_str().expect("utf-8")),
    )
    .expect("write");
    AllOnPod { dir, config, env }
}

#[tokio::test]
async fn serve_starts_with_the_all_on_config_and_its_secret() {
    if !have_helm("serve_starts_with_the_all_on_config_and_its_secret") {
        return;
    }
    let pod = all_on_pod();
    let serve = |with_env: bool| {
        let mut command = Command::new(BIN);
        command
            .args(["--log-format", "json", "serve"])
            .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .arg("--config")
            .arg(&pod.config)
            .env_remove("RABBITMQ_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if with_env {
            command.envs(pod.env.iter().map(|(k, v)| (k, v)));
        }
        command.spawn().expect("the binary starts")
    };

    // Without the extraEnv variable the scaler refuses to start, naming it.
    let output = serve(false).wait_with_output().expect("exits");
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("RABBITMQ_PASSWORD"),
        "{}",
        text(&output)
    );

    let mut child = serve(true);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut http = None;
    let mut seen = String::new();
    while http.is_none() && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("backlog-scaler serving") {
                let json: serde_json::Value = serde_json::from_str(&line).expect("JSON log line");
                http = json["http_addr"].as_str().map(str::to_owned);
            }
        }
    }
    let Some(http) = http else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("serve did not start:\n{seen}");
    };
    let ready = reqwest::get(format!("http://{http}/readyz")).await;
    let _ = child.kill();
    let _ = child.wait();
    let ready = ready.expect("admin answers");
    assert!(ready.status().is_success(), "{}", ready.status());
    drop(pod.dir);
}

/// The chart's PrometheusRule groups, as a Prometheus rule file.
fn rule_file(docs: &[Value], keep_annotations: bool) -> String {
    let mut spec = only(docs, "PrometheusRule")["spec"].clone();
    if !keep_annotations {
        for group in spec["groups"].as_sequence_mut().expect("groups") {
            for rule in group["rules"].as_sequence_mut().expect("rules") {
                rule.as_mapping_mut().expect("rule").remove("annotations");
            }
        }
    }
    serde_yaml_ng::to_string(&spec).expect("YAML")
}

fn promtool(args: &[&str], dir: &Path) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs (Debian's prometheus package, `bash .ci/install-deps`)")
}

#[test]
fn the_alerts_are_valid_rules_that_fire_when_they_should() {
    if !have_helm("the_alerts_are_valid_rules_that_fire_when_they_should") {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let docs = documents(&template(&[
        "--set",
        "prometheus.operator.prometheusRules.enabled=true",
    ]));
    std::fs::write(dir.path().join("rules.yaml"), rule_file(&docs, true)).expect("write");
    let output = promtool(&["check", "rules", "rules.yaml"], dir.path());
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("SUCCESS: 4 rules found"),
        "{}",
        text(&output)
    );

    // promtool compares annotations exactly; the expressions, `for` and
    // labels are what is tested here.
    std::fs::write(dir.path().join("bare.yaml"), rule_file(&docs, false)).expect("write");
    let t = r#"{namespace="inference", name="llama-8b", metric="s0-backlog"#;
    let tests = format!(
        r#"rule_files: [bare.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # Unavailable on the serving replica from the start; the other replica
      # saw the trigger answer (a failover) until minute 8.
      - series: 'backlog_scaler_trigger_available{t}", instance="a"}}'
        values: '0x20'
      - series: 'backlog_scaler_trigger_available{t}", instance="b"}}'
        values: '1x8 0x12'
      - series: 'backlog_scaler_trigger_degraded{t}", instance="a"}}'
        values: '0x2 1x20'
      # One pod left out from minute 4 (timeouts), a second one from 6 to 9 only.
      - series: 'backlog_scaler_trigger_degraded_pods{t}", state="left_out", reason="timeout", instance="a"}}'
        values: '_x4 1x16'
      - series: 'backlog_scaler_trigger_degraded_pods{t}", state="held", reason="http_status", instance="a"}}'
        values: '2x20'
      - series: 'backlog_scaler_trigger_degraded_pods{{namespace="batch", name="embedder", metric="e", state="left_out", reason="dns", instance="a"}}'
        values: '_x6 1x3'
      - series: 'backlog_scaler_polls_total{{source="http://10.1.2.3:8000/metrics", outcome="ok"}}'
        values: '0+1x30'
      - series: 'backlog_scaler_polls_total{{source="http://10.1.2.3:8000/metrics", outcome="upstream_error"}}'
        values: '0+3x30'
      - series: 'backlog_scaler_polls_total{{source="http://10.1.2.4:8000/metrics", outcome="ok"}}'
        values: '0+4x30'
      - series: 'backlog_scaler_polls_total{{source="http://10.1.2.4:8000/metrics", outcome="timeout"}}'
        values: '0+1x30'
    alert_rule_test:
      - eval_time: 10m
        alertname: BacklogScalerTriggerUnavailable
        exp_alerts: []
      - eval_time: 15m
        alertname: BacklogScalerTriggerUnavailable
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: inference, name: llama-8b, metric: s0-backlog}}
      - eval_time: 11m
        alertname: BacklogScalerTriggerDegraded
        exp_alerts: []
      - eval_time: 14m
        alertname: BacklogScalerTriggerDegraded
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: inference, name: llama-8b, metric: s0-backlog}}
      - eval_time: 13m
        alertname: BacklogScalerPodsLeftOut
        exp_alerts: []
      - eval_time: 16m
        alertname: BacklogScalerPodsLeftOut
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: inference, name: llama-8b, metric: s0-backlog}}
      - eval_time: 5m
        alertname: BacklogScalerPollErrors
        exp_alerts: []
      - eval_time: 20m
        alertname: BacklogScalerPollErrors
        exp_alerts:
          - exp_labels: {{severity: warning, source: "http://10.1.2.3:8000/metrics"}}
"#
    );
    std::fs::write(dir.path().join("tests.yaml"), tests).expect("write");
    let output = promtool(&["test", "rules", "tests.yaml"], dir.path());
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("SUCCESS"), "{}", text(&output));
}

/// A row of the values table: key → (type, default as YAML).
fn values_table() -> BTreeMap<String, (String, Value)> {
    let readme = file("charts/backlog-scaler/README.md");
    let table = readme
        .split_once("| Key | Type | Default | Description |\n|---|---|---|---|\n")
        .expect("the values table")
        .1;
    let mut rows = BTreeMap::new();
    for line in table.lines().take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert!(cells.len() >= 4, "{line}");
        let key = cells[0].trim_matches('`').to_owned();
        let default = cells[2]
            .strip_prefix('`')
            .and_then(|d| d.strip_suffix('`'))
            .unwrap_or_else(|| panic!("{key}: default not in backticks"));
        let default: Value =
            serde_yaml_ng::from_str(default).unwrap_or_else(|e| panic!("{key}: {e}: {default}"));
        let duplicate = rows.insert(key.clone(), (cells[1].to_owned(), default));
        assert!(duplicate.is_none(), "{key} twice");
    }
    rows
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Mapping(_) => "object",
        Value::Sequence(_) => "list",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        _ => "null",
    }
}

/// Check the values at `path`: a row covers it (it and all below), or it is
/// a non-empty mapping whose children are each covered.
fn cover(
    path: &str,
    v: &Value,
    rows: &BTreeMap<String, (String, Value)>,
    used: &mut BTreeSet<String>,
) {
    if let Some((ty, default)) = rows.get(path) {
        assert_eq!(ty, type_name(v), "{path}: type");
        assert_eq!(
            default, v,
            "{path}: default in the table differs from values.yaml"
        );
        used.insert(path.to_owned());
        return;
    }
    match v.as_mapping() {
        Some(map) if !map.is_empty() => {
            for (k, child) in map {
                let k = str_of(k, "key");
                let child_path = if path.is_empty() {
                    k.to_owned()
                } else {
                    format!("{path}.{k}")
                };
                cover(&child_path, child, rows, used);
            }
        }
        _ => panic!("`{path}` is in values.yaml but not in the README's values table"),
    }
}

#[test]
fn the_values_table_is_values_yaml() {
    let values: Value =
        serde_yaml_ng::from_str(&file("charts/backlog-scaler/values.yaml")).expect("YAML");
    let rows = values_table();
    let mut used = BTreeSet::new();
    cover("", &values, &rows, &mut used);
    let extra: Vec<&String> = rows.keys().filter(|k| !used.contains(*k)).collect();
    assert!(
        extra.is_empty(),
        "in the table but not in values.yaml: {extra:?}"
    );
    assert!(rows.len() >= 90, "{}", rows.len());
    // Every switch the issue names has its row.
    for key in [
        "certificates.certManager.enabled",
        "certificates.certManager.generateCA",
        "certificates.certManager.caSecretName",
        "prometheus.operator.serviceMonitor.enabled",
        "prometheus.operator.podMonitor.enabled",
        "prometheus.operator.prometheusRules.enabled",
        "dashboard.enabled",
        "extraObjects",
    ] {
        assert!(rows.contains_key(key), "{key}");
    }
    assert_eq!(
        rows["certificates.certManager.caSecretName"].1,
        "kedaorg-ca"
    );
}

#[test]
fn names_follow_the_release_and_every_reference_resolves() {
    if !have_helm("names_follow_the_release_and_every_reference_resolves") {
        return;
    }
    let output = helm(&[
        "template",
        "scaler",
        CHART,
        "--namespace",
        "platform",
        "--set",
        "certificates.certManager.enabled=true",
        "--set",
        "dashboard.enabled=true",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let docs = documents(&String::from_utf8(output.stdout).expect("utf-8"));
    let deployment = find(&docs, "Deployment", "scaler-backlog-scaler");
    let pod = &deployment["spec"]["template"]["spec"];
    find(
        &docs,
        "ServiceAccount",
        str_of(&pod["serviceAccountName"], "serviceAccountName"),
    );
    let volumes = by_name(&pod["volumes"], "volumes");
    find(
        &docs,
        "ConfigMap",
        str_of(&volumes["config"]["configMap"]["name"], "configmap"),
    );
    let tls = find(&docs, "Certificate", "scaler-backlog-scaler-tls");
    assert_eq!(
        tls["spec"]["secretName"],
        volumes["tls"]["secret"]["secretName"]
    );
    let service = find(&docs, "Service", "scaler-backlog-scaler");
    let dns: Vec<&str> = seq(&tls["spec"]["dnsNames"], "dnsNames")
        .iter()
        .map(|n| str_of(n, "name"))
        .collect();
    assert!(
        dns.contains(&"scaler-backlog-scaler.platform.svc.cluster.local"),
        "{dns:?}"
    );
    // The Service, PDB, policy and spread all select exactly these pods.
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .expect("labels");
    let selects = |selector: &Value| {
        let selector = selector.as_mapping().expect("matchLabels");
        assert!(!selector.is_empty());
        for (k, v) in selector {
            assert_eq!(pod_labels.get(k), Some(v), "{k:?}");
        }
    };
    selects(&service["spec"]["selector"]);
    selects(&only(&docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]);
    selects(&only(&docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]);
    for constraint in seq(&pod["topologySpreadConstraints"], "spread") {
        selects(&constraint["labelSelector"]["matchLabels"]);
    }
    assert_eq!(
        pod_labels.get("app.kubernetes.io/instance"),
        Some(&Value::from("scaler"))
    );
    for doc in &docs {
        assert_eq!(doc["metadata"]["namespace"], "platform", "{doc:?}");
    }
}
