use super::*;

const YAML: &str = r#"
team-a:
  namespaces: [team-a, staging]
  rabbitmq:
    username: { value: scaler }
    password: { value: "hunter2-very-secret" }
  kafka:
    sasl:
      mechanism: SCRAM-SHA-512
      username: { value: kuser }
      password: { value: "kafka-pass-very-secret" }
    tls: {}
open:
  aws:
    accessKeyId: { value: AKIDEXAMPLE }
    secretAccessKey: { value: "aws-secret-very-secret" }
"#;

fn profiles() -> Profiles {
    let p: Profiles = serde_yaml_ng::from_str(YAML).expect("parses");
    p.validate().expect("valid");
    p
}

#[test]
fn parses_resolves_and_checks_namespaces() {
    let p = profiles();
    assert_eq!(p.names().collect::<Vec<_>>(), ["open", "team-a"]);
    assert!(p.resolve("team-a", "team-a").is_ok());
    let err = p.resolve("team-a", "other").expect_err("denied");
    assert!(err.is_permission_denied(), "{err}");
    assert_eq!(
        err.to_string(),
        "namespace `other` may not use credential profile `team-a`"
    );
    assert!(p.resolve("open", "anything").is_ok());
    let err = p.resolve("nope", "x").expect_err("unknown");
    assert!(!err.is_permission_denied());
    assert!(
        err.to_string().contains("configured: open, team-a"),
        "{err}"
    );
    let team_a = p.resolve("team-a", "staging").expect("ok");
    assert!(team_a.require("team-a", Section::Kafka).is_ok());
    let err = team_a.require("team-a", Section::Aws).expect_err("no aws");
    assert_eq!(
        err.to_string(),
        "credential profile `team-a` has no `aws` section"
    );
}

/// The name comes from trigger metadata, so the error reads like the other
/// metadata errors (key, value, what is allowed) and echoes the value
/// redacted: someone may paste a credential where the profile name goes.
#[test]
fn an_unknown_profile_names_its_key_and_hides_credentials() {
    const NAMING: &str = "a profile name is 1 to 63 letters, digits, `.`, `_` or `-`";
    let some = profiles();
    let none = Profiles::default();
    for (profiles, name, expected) in [
        (
            &some,
            "nope",
            "metadata key `authProfile` has value `nope`: no credential profile by that name in the scaler config (configured: open, team-a)".to_owned(),
        ),
        (
            &none,
            "nope",
            "metadata key `authProfile` has value `nope`: no credential profile by that name in the scaler config (none are configured)".to_owned(),
        ),
        (
            &some,
            "Bearer S3CRET",
            format!("metadata key `authProfile` has value `Bearer [redacted]`: no credential profile by that name in the scaler config ({NAMING}; configured: open, team-a)"),
        ),
        (
            &none,
            "http://u:S3CRET@h",
            format!("metadata key `authProfile` has value `http://[redacted]@h`: no credential profile by that name in the scaler config ({NAMING}; none are configured)"),
        ),
        (
            &some,
            "token=S3CRET",
            format!("metadata key `authProfile` has value `token=[redacted]`: no credential profile by that name in the scaler config ({NAMING}; configured: open, team-a)"),
        ),
    ] {
        let err = profiles.resolve(name, "ns").expect_err(name);
        assert_eq!(err.to_string(), expected);
        assert!(!format!("{err:?}").contains("S3CRET"), "{err:?}");
        let err = profiles.get(name).expect_err(name);
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn an_invalid_profile_name_in_the_config_is_redacted() {
    let err = serde_yaml_ng::from_str::<Profiles>("'Bearer S3CRET': { }")
        .expect("parses")
        .validate()
        .expect_err("bad name")
        .to_string();
    assert_eq!(
        err,
        "credential profile `Bearer [redacted]`: a profile name is 1 to 63 letters, digits, `.`, `_` or `-`"
    );
}

#[test]
fn secrets_never_show_in_debug() {
    let p = profiles();
    p.check_secrets().expect("readable");
    let team_a = p.get("team-a").expect("exists");
    let creds = team_a
        .rabbitmq
        .as_ref()
        .expect("section")
        .credentials("team-a")
        .expect("reads");
    let settings = team_a
        .kafka
        .as_ref()
        .expect("section")
        .client_settings("team-a")
        .expect("reads");
    let aws = p.get("open").expect("exists").aws.as_ref().expect("aws");
    let keys = aws.keys("open").expect("reads").expect("static");
    let debug = format!("{p:?} {creds:?} {settings:?} {keys:?} {:?}", p.clone());
    for secret in [
        "hunter2-very-secret",
        "kafka-pass-very-secret",
        "aws-secret-very-secret",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
    }
    assert_eq!(creds.password.expose(), "hunter2-very-secret");
    assert!(
        settings
            .settings
            .iter()
            .any(|(k, v)| *k == "security.protocol" && v.expose() == "SASL_SSL")
    );
    assert_eq!(
        settings.scrub("auth failed for kafka-pass-very-secret"),
        "auth failed for [redacted]"
    );
}

#[test]
fn env_and_file_sources() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("password");
    std::fs::write(&path, "from-a-file\n").expect("write");
    let file = SecretRef::File(path.clone());
    assert_eq!(file.read().expect("reads").expose(), "from-a-file");
    // PATH is set in every test environment; no set_var needed.
    assert!(SecretRef::Env("PATH".into()).read().is_ok());
    let err = SecretRef::Env("BACKLOG_SCALER_SURELY_UNSET_VARIABLE".into())
        .read()
        .expect_err("unset");
    assert!(
        err.contains("BACKLOG_SCALER_SURELY_UNSET_VARIABLE"),
        "{err}"
    );
    let err = SecretRef::File(dir.path().join("missing"))
        .read()
        .expect_err("missing");
    assert!(err.contains("missing"), "{err}");
    std::fs::write(&path, "").expect("write");
    assert!(file.read().expect_err("empty").contains("empty"));
}

#[test]
fn bad_profiles_are_refused() {
    for (yaml, needle) in [
        ("a: { colour: blue }", "colour"),
        (
            "a: { rabbitmq: { username: { value: u }, password: { value: p, env: X } } }",
            "exactly one",
        ),
        ("a: { namespaces: [] }", "omit it"),
        ("a: { aws: { accessKeyId: { value: x } } }", "both"),
        ("a: { aws: {} }", "profileName"),
        (
            "a: { aws: { profileName: p, accessKeyId: { value: x }, secretAccessKey: { value: y } } }",
            "not both",
        ),
        (
            "a: { kafka: { tls: { cert: { file: /c } } } }",
            "`cert` and `key`",
        ),
        (
            "a: { kafka: { sasl: { mechanism: GSSAPI, username: { value: u }, password: { value: p } } } }",
            "GSSAPI",
        ),
        ("'bad name': { }", "profile name"),
    ] {
        let err = serde_yaml_ng::from_str::<Profiles>(yaml)
            .map_err(|e| e.to_string())
            .and_then(|p| p.validate().map_err(|e| e.to_string()))
            .expect_err(yaml);
        assert!(err.contains(needle), "{yaml}: {err}");
    }
}

#[test]
fn short_passwords_are_refused_when_read() {
    let profile = RabbitMqProfile {
        username: SecretRef::Value(Secret::new("u")),
        password: SecretRef::Value(Secret::new("pw")),
    };
    let err = profile.credentials("x").expect_err("short");
    assert!(err.to_string().contains("shorter than 4"), "{err}");
    assert!(!err.to_string().contains("pw\""), "{err}");
}

fn prometheus_section(token: &std::path::Path, tenant: &std::path::Path) -> PrometheusProfile {
    PrometheusProfile {
        bearer_token: Some(SecretRef::File(token.to_path_buf())),
        basic_auth: None,
        headers: [(
            "X-Scope-OrgID".to_owned(),
            SecretRef::File(tenant.to_path_buf()),
        )]
        .into(),
    }
}

#[test]
fn prometheus_files_are_read_again_when_they_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (token, tenant) = (dir.path().join("token"), dir.path().join("tenant"));
    std::fs::write(&token, "token-one\n").expect("write");
    std::fs::write(&tenant, "tenant-a").expect("write");
    let section = prometheus_section(&token, &tenant);
    assert_eq!(section.files(), [token.as_path(), tenant.as_path()]);
    let auth = PrometheusAuth::load("prom", &section).expect("loads");
    let bearer = |auth: &PrometheusAuth| auth.current().expect("reads").bearer_token.clone();
    assert_eq!(bearer(&auth).as_deref(), Some("token-one"));
    // Unchanged files: the same credentials, not read again.
    let first = auth.current().expect("reads");
    assert!(std::sync::Arc::ptr_eq(
        &first,
        &auth.current().expect("reads")
    ));

    // Rewritten in place with another length.
    std::fs::write(&token, "token-number-two\n").expect("write");
    assert_eq!(bearer(&auth).as_deref(), Some("token-number-two"));
    // A header file is watched too.
    std::fs::write(&tenant, "tenant-bb").expect("write");
    assert_eq!(
        auth.current().expect("reads").headers,
        [("X-Scope-OrgID".to_owned(), "tenant-bb".to_owned())]
    );

    // Gone: an error naming the file, never the old token; back: read again.
    std::fs::remove_file(&token).expect("remove");
    let err = auth.current().expect_err("missing file").to_string();
    assert!(
        err.contains("prometheus.bearerToken") && err.contains("token"),
        "{err}"
    );
    assert!(!err.contains("token-number-two"), "{err}");
    std::fs::write(&token, "token-three").expect("write");
    assert_eq!(bearer(&auth).as_deref(), Some("token-three"));
    assert!(!format!("{auth:?}").contains("token-three"));
}

#[cfg(unix)]
#[test]
fn a_kubernetes_style_symlink_swap_is_seen_even_with_the_same_length() {
    // The kubelet writes a Secret or projected token into a new timestamped
    // directory and repoints `..data`; `token` links to `..data/token`.
    let dir = tempfile::tempdir().expect("tempdir");
    let write_version = |name: &str, value: &str| {
        let version = dir.path().join(name);
        std::fs::create_dir(&version).expect("mkdir");
        std::fs::write(version.join("token"), value).expect("write");
        std::fs::write(version.join("tenant"), "tenant-a").expect("write");
    };
    let point_data_at = |name: &str| {
        let next = dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(name, &next).expect("symlink");
        std::fs::rename(&next, dir.path().join("..data")).expect("swap");
    };
    write_version("..v1", "aaaa-1111");
    point_data_at("..v1");
    for file in ["token", "tenant"] {
        std::os::unix::fs::symlink(format!("..data/{file}"), dir.path().join(file))
            .expect("symlink");
    }
    let section = prometheus_section(&dir.path().join("token"), &dir.path().join("tenant"));
    let auth = PrometheusAuth::load("prom", &section).expect("loads");
    assert_eq!(
        auth.current().expect("reads").bearer_token.as_deref(),
        Some("aaaa-1111")
    );
    write_version("..v2", "bbbb-2222");
    point_data_at("..v2");
    assert_eq!(
        auth.current().expect("reads").bearer_token.as_deref(),
        Some("bbbb-2222")
    );
}
