//! The deployment artefacts: `k8s/` (kustomize base, TLS component,
//! monitoring, examples), the `Dockerfile` and the CI build script.
//!
//! - `kubectl kustomize` (kubectl's built-in kustomize) renders the base, the
//!   base with the TLS component, and the monitoring kustomization.
//! - `tests/manifests/validate.py` validates every rendered object and every
//!   example offline: built-in kinds against the Kubernetes OpenAPI schemas
//!   bundled in PyPI's `kubernetes-validate` (strict), ScaledObject and
//!   TriggerAuthentication against KEDA's CRDs vendored in
//!   `k8s/crds-for-tests/` (strict, with the CRD's CEL rule).
//! - The real binary, `backlog-scaler check --no-probe --config
//!   k8s/scaler-config.yaml`, checks every example trigger's metadata against
//!   the base's allowlist and credential profiles.
//! - The config, the Secret, the Deployment and the Dockerfile are checked to
//!   agree with each other, and the config with its Secret starts a server.
//!
//! Tools come from `.ci/install-deps`; a missing one fails with what to run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_yaml_ng::Value;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

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

fn run(program: &str, args: &[&str], what: &str) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `{program}` ({e}): {what}; `bash .ci/install-deps` installs it")
        })
}

/// `kubectl kustomize DIR`, as YAML text.
fn kustomize(dir: &Path) -> String {
    let dir = dir.to_str().expect("utf-8 path");
    let output = run(
        "kubectl",
        &["kustomize", dir],
        "the manifest tests render k8s/ with kubectl's built-in kustomize (v5)",
    );
    assert!(
        output.status.success(),
        "kubectl kustomize {dir} failed:\n{}",
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

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}");
    found[0]
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v:?}"))
}

fn file(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("k8s/examples"))
        .expect("k8s/examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "examples: {files:?}");
    files
}

/// The base with `components: [tls]` uncommented, as the kustomization's
/// comment tells an operator to do (rendered from a copy of `k8s/`).
fn render_with_tls() -> String {
    let copy = tempfile::tempdir().expect("tmp");
    copy_dir(&root().join("k8s"), copy.path());
    let kustomization = copy.path().join("kustomization.yaml");
    let original = std::fs::read_to_string(&kustomization).expect("read");
    let commented = "# components:\n#   - tls\n";
    assert!(
        original.contains(commented),
        "k8s/kustomization.yaml should carry `{commented}` for the README's instructions"
    );
    std::fs::write(
        &kustomization,
        original.replace(commented, "components:\n  - tls\n"),
    )
    .expect("write");
    kustomize(copy.path())
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

fn container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

#[test]
fn base_renders_with_the_hardening_and_wiring_the_readme_promises() {
    let docs = documents(&kustomize(&root().join("k8s")));
    let kinds: BTreeSet<&str> = docs.iter().map(|d| str_of(&d["kind"], "kind")).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ConfigMap",
            "Deployment",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "ServiceAccount"
        ])
    );
    for doc in &docs {
        assert_eq!(doc["metadata"]["namespace"], "keda", "{doc:?}");
    }

    let deployment = find(&docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert!(pod["topologySpreadConstraints"].as_sequence().is_some());
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let c = container(deployment);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    for key in ["requests", "limits"] {
        assert!(c["resources"][key]["cpu"].is_string(), "{key}");
        assert!(c["resources"][key]["memory"].is_string(), "{key}");
    }
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "http");
    assert_eq!(c["startupProbe"]["grpc"]["port"], 9090);
    assert_eq!(c["startupProbe"]["grpc"]["service"], "");
    let env: BTreeMap<&str, &str> = c["env"]
        .as_sequence()
        .expect("env")
        .iter()
        .map(|e| (str_of(&e["name"], "name"), str_of(&e["value"], "value")))
        .collect();
    assert_eq!(env.get("BACKLOG_SCALER_LOG_FORMAT"), Some(&"json"));

    // --config names the file the generated ConfigMap is mounted as.
    assert_eq!(c["args"][0], "--config=/etc/backlog-scaler/config.yaml");
    let configmap = find(&docs, "ConfigMap");
    let configmap_name = str_of(&configmap["metadata"]["name"], "name");
    assert!(
        configmap["data"]["config.yaml"].is_string(),
        "ConfigMap key config.yaml"
    );
    let volumes = pod["volumes"].as_sequence().expect("volumes");
    let config_volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"] == configmap_name)
        .expect("the Deployment mounts the generated ConfigMap (hash suffix)");
    let mount = c["volumeMounts"]
        .as_sequence()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == config_volume["name"])
        .expect("mounted");
    assert_eq!(mount["mountPath"], "/etc/backlog-scaler");

    let service = find(&docs, "Service");
    let ports: BTreeMap<&str, u64> = service["spec"]["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(|p| {
            (
                str_of(&p["name"], "name"),
                p["port"].as_u64().expect("port"),
            )
        })
        .collect();
    assert_eq!(ports, BTreeMap::from([("grpc", 9090), ("http", 8080)]));
    assert_eq!(
        find(&docs, "PodDisruptionBudget")["spec"]["minAvailable"],
        1
    );

    // gRPC is admitted from KEDA's pods only.
    let policy = find(&docs, "NetworkPolicy");
    let grpc_rule = policy["spec"]["ingress"]
        .as_sequence()
        .expect("ingress")
        .iter()
        .find(|r| r["ports"][0]["port"] == "grpc")
        .expect("a grpc rule");
    let selector = &grpc_rule["from"][0]["podSelector"]["matchExpressions"][0];
    assert_eq!(selector["key"], "app");
    let values: Vec<&str> = selector["values"]
        .as_sequence()
        .expect("values")
        .iter()
        .map(|v| str_of(v, "value"))
        .collect();
    assert!(values.contains(&"keda-operator"), "{values:?}");
    assert!(
        values.contains(&"keda-operator-metrics-apiserver"),
        "{values:?}"
    );
}

#[test]
fn tls_component_serves_mtls_and_probes_over_http() {
    let docs = documents(&render_with_tls());
    let deployment = find(&docs, "Deployment");
    let c = container(deployment);
    let startup = &c["startupProbe"];
    assert!(
        startup["grpc"].is_null(),
        "kubelet's gRPC probe has no client certificate"
    );
    assert_eq!(startup["httpGet"]["path"], "/healthz");
    let env: BTreeSet<&str> = c["env"]
        .as_sequence()
        .expect("env")
        .iter()
        .map(|e| str_of(&e["name"], "name"))
        .collect();
    for var in [
        "BACKLOG_SCALER_TLS_CERT",
        "BACKLOG_SCALER_TLS_KEY",
        "BACKLOG_SCALER_CLIENT_CA",
    ] {
        assert!(env.contains(var), "{var}");
    }
    assert!(
        deployment["spec"]["template"]["spec"]["volumes"]
            .as_sequence()
            .expect("volumes")
            .iter()
            .any(|v| v["secret"]["secretName"] == "backlog-scaler-tls")
    );
}

/// Run the validator; `(success, output)`.
fn validate(files: &[PathBuf]) -> (bool, String) {
    let crds = root().join("k8s/crds-for-tests");
    let mut args: Vec<String> = vec![
        "tests/manifests/validate.py".into(),
        "--crds".into(),
        crds.to_str().expect("utf-8").into(),
    ];
    args.extend(files.iter().map(|f| f.to_str().expect("utf-8").to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(
        "python3",
        &args,
        "tests/manifests/validate.py needs Python 3 with kubernetes-validate",
    );
    let out = text(&output);
    assert_ne!(
        output.status.code(),
        Some(2),
        "the validator could not run:\n{out}"
    );
    (output.status.success(), out)
}

#[test]
fn every_manifest_validates_against_kubernetes_and_keda_schemas() {
    let rendered = tempfile::tempdir().expect("tmp");
    let mut files = Vec::new();
    for (name, yaml) in [
        ("base.yaml", kustomize(&root().join("k8s"))),
        ("base-tls.yaml", render_with_tls()),
        ("monitoring.yaml", kustomize(&root().join("k8s/monitoring"))),
    ] {
        let path = rendered.path().join(name);
        std::fs::write(&path, yaml).expect("write");
        files.push(path);
    }
    files.extend(examples());
    let (ok, out) = validate(&files);
    assert!(ok, "manifests do not validate:\n{out}");
    let count = |needle: &str| out.lines().filter(|l| l.contains(needle)).count();
    // Not vacuous: each kind was seen and checked against its own schema.
    assert_eq!(count("FAIL"), 0, "{out}");
    assert_eq!(
        count("Deployment/backlog-scaler (Kubernetes 1.37 strict)"),
        2,
        "{out}"
    );
    assert_eq!(
        count("NetworkPolicy/backlog-scaler (Kubernetes"),
        2,
        "{out}"
    );
    assert_eq!(count("ServiceMonitor/backlog-scaler"), 1, "{out}");
    assert!(count("(CRD keda.sh_scaledobjects.yaml)") >= 4, "{out}");
    assert_eq!(
        count("TriggerAuthentication/backlog-scaler-tls (CRD keda.sh_triggerauthentications.yaml)"),
        1,
        "{out}"
    );
    assert!(
        out.contains("validate.py: kubernetes-validate 1.37.0"),
        "{out}"
    );
}

#[test]
fn the_validator_rejects_what_an_api_server_would() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: typo}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: x, image: x, imagePullPolcy: Always}]
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: unquoted}
spec:
  scaleTargetRef: {name: x}
  triggers: [{type: external, metadata: {targetBacklogPerReplica: 10}}]
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: minmax}
spec:
  scaleTargetRef: {name: x}
  minReplicaCount: 5
  maxReplicaCount: 2
  fallbak: {failureThreshold: 3, replicas: 1}
  triggers: [{type: external, metadata: {a: "1"}}]
---
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {name: extra}
spec:
  secretTargetRef: [{parameter: caCert, name: s, key: ca.crt, path: x}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: unknown}
"#,
    )
    .expect("write");
    let (ok, out) = validate(&[bad]);
    assert!(!ok, "{out}");
    for expected in [
        "Deployment/typo (Kubernetes 1.37 strict): spec/template/spec/containers/0: Additional properties are not allowed ('imagePullPolcy'",
        "ScaledObject/unquoted (CRD keda.sh_scaledobjects.yaml): spec/triggers/0/metadata/targetBacklogPerReplica: 10 is not of type 'string'",
        "ScaledObject/minmax (CRD keda.sh_scaledobjects.yaml): spec: Additional properties are not allowed ('fallbak'",
        "TriggerAuthentication/extra (CRD keda.sh_triggerauthentications.yaml): spec/secretTargetRef/0: Additional properties are not allowed ('path'",
        "Widget/unknown (-): Couldn't find schema for kind Widget",
        "validate.py: 0 passed, 5 failed",
    ] {
        assert!(out.contains(expected), "expected `{expected}` in:\n{out}");
    }
    // The CRD's CEL rule, once the object is otherwise valid.
    let minmax = dir.path().join("minmax.yaml");
    std::fs::write(
        &minmax,
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: minmax}\nspec:\n  scaleTargetRef: {name: x}\n  minReplicaCount: 5\n  maxReplicaCount: 2\n  triggers: [{type: external, metadata: {a: \"1\"}}]\n",
    )
    .expect("write");
    let (ok, out) = validate(&[minmax]);
    assert!(
        !ok && out.contains("minReplicaCount must be less than or equal to maxReplicaCount"),
        "{out}"
    );
}

#[test]
fn keda_crds_are_vendored_and_match_the_shared_reference() {
    let vendored = root().join("k8s/crds-for-tests");
    let names = [
        "keda.sh_scaledobjects.yaml",
        "keda.sh_triggerauthentications.yaml",
    ];
    for name in names {
        assert!(
            vendored.join(name).is_file(),
            "k8s/crds-for-tests/{name} is missing: copy it from shared/reference/keda-crds/ (see k8s/crds-for-tests/README.md)"
        );
    }
    // CI lays a copy of shared/ beside the clone; a developer's checkout may not.
    let shared = root().join("../shared/reference/keda-crds");
    if shared.is_dir() {
        for name in names {
            let ours = std::fs::read(vendored.join(name)).expect("read");
            let reference = std::fs::read(shared.join(name))
                .unwrap_or_else(|e| panic!("{}: {e}", shared.join(name).display()));
            assert!(
                ours == reference,
                "k8s/crds-for-tests/{name} differs from ../shared/reference/keda-crds/{name}: copy the new one in and rerun"
            );
        }
    }
}

fn check(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(root())
        .output()
        .expect("binary runs")
}

#[test]
fn every_example_trigger_uses_only_metadata_the_scaler_accepts() {
    let mut triggers = 0;
    for example in examples() {
        let path = example.to_str().expect("utf-8");
        let output = check(&[
            "check",
            "--no-probe",
            "--config",
            "k8s/scaler-config.yaml",
            "--metadata",
            path,
        ]);
        let out = text(&output);
        assert!(output.status.success(), "{path}:\n{out}");
        let here = out.matches("metadata ok").count();
        assert!(here >= 1, "{path} has no external trigger:\n{out}");
        assert!(out.contains("not probed (--no-probe)"), "{out}");
        triggers += here;
    }
    assert!(triggers >= 4, "{triggers}");
}

#[test]
fn check_no_probe_refuses_typos_and_foreign_namespaces() {
    let dir = tempfile::tempdir().expect("tmp");
    let original = file("k8s/examples/batch-embedder-sqs.yaml");
    for (name, from, to, expected) in [
        (
            "typo",
            "targetBacklogPerReplica:",
            "targetBacklogPerReplic:",
            "targetBacklogPerReplica",
        ),
        (
            "namespace",
            "  name: embedder\n  namespace: batch\n",
            "  name: embedder\n  namespace: inference\n",
            "PERMISSION_DENIED",
        ),
        (
            "allowlist",
            "https://sqs.eu-west-1.amazonaws.com/",
            "https://queue.example.net/",
            "queue.example.net",
        ),
    ] {
        assert!(original.contains(from), "{from}");
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, original.replacen(from, to, 1)).expect("write");
        let output = check(&[
            "check",
            "--no-probe",
            "--config",
            "k8s/scaler-config.yaml",
            "--metadata",
            path.to_str().expect("utf-8"),
        ]);
        let out = text(&output);
        assert!(!output.status.success(), "{name}:\n{out}");
        assert!(
            out.contains(expected),
            "{name}: expected `{expected}`:\n{out}"
        );
    }
}

/// Every `{file: PATH}` in a YAML value.
fn secret_files(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Mapping(map) => {
            for (k, v) in map {
                if k == "file" {
                    out.push(str_of(v, "file").to_owned());
                } else {
                    secret_files(v, out);
                }
            }
        }
        Value::Sequence(items) => items.iter().for_each(|v| secret_files(v, out)),
        _ => {}
    }
}

#[test]
fn config_profiles_read_exactly_the_mounted_secret_keys() {
    let docs = documents(&kustomize(&root().join("k8s")));
    let secret = find(&docs, "Secret");
    let secret_name = str_of(&secret["metadata"]["name"], "name");
    let keys: BTreeSet<String> = secret["stringData"]
        .as_mapping()
        .expect("stringData")
        .keys()
        .map(|k| str_of(k, "key").to_owned())
        .collect();
    let deployment = find(&docs, "Deployment");
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .find(|v| v["secret"]["secretName"] == secret_name)
        .expect("the Secret is mounted");
    let mount_path = str_of(
        &container(deployment)["volumeMounts"]
            .as_sequence()
            .expect("mounts")
            .iter()
            .find(|m| m["name"] == volume["name"])
            .expect("mount")["mountPath"],
        "mountPath",
    );
    let config_text = str_of(
        &find(&docs, "ConfigMap")["data"]["config.yaml"],
        "config.yaml",
    );
    assert_eq!(config_text, file("k8s/scaler-config.yaml"));
    let mut files = Vec::new();
    secret_files(
        &serde_yaml_ng::from_str::<Value>(config_text).expect("YAML"),
        &mut files,
    );
    let used: BTreeSet<String> = files
        .iter()
        .map(|f| {
            let key = f
                .strip_prefix(&format!("{mount_path}/"))
                .unwrap_or_else(|| panic!("{f} is not under the Secret's mount {mount_path}"));
            assert!(keys.contains(key), "{f}: no key `{key}` in the Secret");
            key.to_owned()
        })
        .collect();
    assert_eq!(used, keys, "every Secret key is read by a profile");
}

#[tokio::test]
async fn base_config_with_its_secret_starts_a_scaler() {
    // The ConfigMap's config, its Secret's files in a temporary directory in
    // place of the mount: what the pod would start with.
    let docs = documents(&kustomize(&root().join("k8s")));
    let dir = tempfile::tempdir().expect("tmp");
    let secret = find(&docs, "Secret");
    for (key, value) in secret["stringData"].as_mapping().expect("stringData") {
        std::fs::write(dir.path().join(str_of(key, "key")), str_of(value, "value")).expect("write");
    }
    let config_text = str_of(
        &find(&docs, "ConfigMap")["data"]["config.yaml"],
        "config.yaml",
    )
    .replace(
        "/var/run/secrets/backlog-scaler/brokers",
        dir.path().to_str().expect("utf-8"),
    );
    let config = backlog_scaler::guard::config::ScalerConfig::parse(&config_text)
        .expect("the base config parses");
    let server = backlog_scaler::api::server::RunningServer::start(
        backlog_scaler::api::server::ServerOptions::new(
            "127.0.0.1:0".parse().expect("addr"),
            "127.0.0.1:0".parse().expect("addr"),
            config,
        ),
    )
    .await
    .expect("the scaler starts with the base config and Secret");
    let ready = reqwest::get(format!("http://{}/readyz", server.http_addr))
        .await
        .expect("admin answers");
    assert!(ready.status().is_success());
    server.shutdown_token().cancel();
    server.wait().await;
}

#[test]
fn dockerfile_agrees_with_the_deployment_and_ci() {
    let output = run(
        "python3",
        &["tests/manifests/validate.py", "--dockerfile", "Dockerfile"],
        "tests/manifests/validate.py needs Python 3 with the `dockerfile` package",
    );
    assert!(output.status.success(), "{}", text(&output));
    let instructions: Vec<serde_json::Value> =
        serde_json::from_slice(&output.stdout).expect("JSON");
    let values = |cmd: &str| -> Vec<Vec<String>> {
        instructions
            .iter()
            .filter(|i| i["cmd"] == cmd)
            .map(|i| {
                i["value"]
                    .as_array()
                    .expect("value")
                    .iter()
                    .map(|v| v.as_str().expect("str").to_owned())
                    .collect()
            })
            .collect()
    };
    // Multi-stage: a Debian (bookworm) Rust builder, a distroless runtime.
    let from = values("FROM");
    assert_eq!(from.len(), 2, "{from:?}");
    let args = file("Dockerfile");
    assert!(args.contains("ARG RUST_IMAGE=rust:") && args.contains("-bookworm"));
    assert!(args.contains("ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12"));
    // The build step is the CI script, and CI runs it.
    let runs = values("RUN").concat().join("\n");
    assert!(runs.contains("bash .ci/build-release"), "{runs}");
    assert!(file(".ci/build-release").contains("\ncargo build --release --locked\n"));
    assert!(file(".ci/run").contains("\nbash .ci/build-release\n"));
    // What the Deployment assumes of the image.
    assert_eq!(values("USER"), vec![vec!["65532:65532".to_owned()]]);
    assert_eq!(
        values("EXPOSE"),
        vec![vec!["9090".to_owned(), "8080".to_owned()]]
    );
    assert_eq!(
        values("ENTRYPOINT"),
        vec![vec![
            "/usr/local/bin/backlog-scaler".to_owned(),
            "serve".to_owned()
        ]]
    );
    let docs = documents(&kustomize(&root().join("k8s")));
    let deployment = find(&docs, "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"],
        65532
    );
    let ports: Vec<u64> = container(deployment)["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(|p| p["containerPort"].as_u64().expect("port"))
        .collect();
    assert_eq!(ports, vec![9090, 8080]);

    // The runtime image gets only the shared libraries the builder stage
    // allows; this binary (same crate, same features) must need no other.
    let ldd = run(
        "ldd",
        &[BIN],
        "ldd (Debian's libc-bin) lists the binary's libraries",
    );
    assert!(ldd.status.success(), "{}", text(&ldd));
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let escaped = name.replace('.', "\\.");
        assert!(
            runs.contains(&format!("|{escaped}|"))
                || runs.contains(&format!("({escaped}|"))
                || runs.contains(&format!("|{escaped})")),
            "the binary needs {name}, which the Dockerfile's library check does not allow (and distroless may lack)"
        );
    }
}
