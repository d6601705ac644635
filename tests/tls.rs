//! TLS and mTLS on the gRPC listener, with certificates generated here
//! (rcgen) and written to files as a mounted Secret would be, and rotated in
//! place while a StreamIsActive stream stays open.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use backlog_scaler::api::server::{RunningServer, ServerOptions};
use backlog_scaler::api::tls::TlsOptions;
use backlog_scaler::guard::config::ScalerConfig;
use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::*;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_stream::StreamExt;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A test CA that signs server and client certificates.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A leaf certificate and its key, as PEM, plus the DER to compare with.
struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA cert");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self, common_name: &str, serial: u64, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    fn server(&self, common_name: &str, serial: u64) -> Leaf {
        self.leaf(common_name, serial, ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn client(&self, common_name: &str) -> Leaf {
        self.leaf(common_name, 7, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// The files of a mounted TLS Secret.
struct SecretDir {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

impl SecretDir {
    fn new(server: &Leaf, client_ca: &Ca) -> SecretDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = SecretDir {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            ca: dir.path().join("ca.crt"),
            _dir: dir,
        };
        secret.write(server);
        std::fs::write(&secret.ca, &client_ca.pem).expect("write CA");
        secret
    }

    /// Overwrite the certificate and key in place.
    fn write(&self, leaf: &Leaf) {
        std::fs::write(&self.cert, &leaf.cert_pem).expect("write cert");
        std::fs::write(&self.key, &leaf.key_pem).expect("write key");
    }

    fn options(&self) -> TlsOptions {
        TlsOptions::new(&self.cert, &self.key).with_reload_interval(Duration::from_millis(100))
    }
}

async fn start_tls(tls: TlsOptions) -> RunningServer {
    let mut options = ServerOptions::new(
        "127.0.0.1:0".parse().expect("addr"),
        "127.0.0.1:0".parse().expect("addr"),
        ScalerConfig::default(),
    );
    options.tls = Some(tls);
    RunningServer::start(options).await.expect("server starts")
}

fn tls_config(ca: &Ca, identity: Option<&Leaf>) -> ClientTlsConfig {
    let mut config = ClientTlsConfig::new()
        .domain_name("localhost")
        .ca_certificate(Certificate::from_pem(&ca.pem));
    if let Some(leaf) = identity {
        config = config.identity(Identity::from_pem(&leaf.cert_pem, &leaf.key_pem));
    }
    config
}

/// A fresh connection (one Channel is one HTTP/2 connection).
async fn tls_client(
    addr: SocketAddr,
    config: ClientTlsConfig,
) -> Result<ExternalScalerClient<Channel>, tonic::transport::Error> {
    let channel = Channel::from_shared(format!("https://{addr}"))
        .expect("uri")
        .tls_config(config)?
        .connect()
        .await?;
    Ok(ExternalScalerClient::new(channel))
}

fn spec_object(targets: &str) -> backlog_scaler::proto::ScaledObjectRef {
    object(
        "tls",
        &[
            ("vllmTargets", targets),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
        ],
    )
}

/// Connect (or fail to), then call GetMetricSpec: with TLS 1.3 a refused
/// client certificate may only surface on the first call.
async fn get_spec(addr: SocketAddr, config: ClientTlsConfig, targets: &str) -> Result<f64, String> {
    let mut client = tls_client(addr, config)
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let spec = client
        .get_metric_spec(spec_object(targets))
        .await
        .map_err(|e| format!("call: {e:?}"))?;
    Ok(spec.into_inner().metric_specs[0].target_size_float)
}

/// The leaf certificate the server presents to a new handshake.
async fn presented_certificate(addr: SocketAddr, trusted: &[&Ca]) -> CertificateDer<'static> {
    let mut roots = RootCertStore::empty();
    for ca in trusted {
        for cert in CertificateDer::pem_slice_iter(ca.pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("root");
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("tcp");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("handshake");
    let (_, session) = tls.get_ref();
    assert_eq!(session.alpn_protocol(), Some(&b"h2"[..]), "h2 negotiated");
    session.peer_certificates().expect("server certificate")[0].clone()
}

use tokio_rustls::rustls::pki_types::pem::PemObject;

#[tokio::test]
async fn tls_client_trusting_the_ca_gets_metric_spec() {
    let ca = Ca::new("backlog-scaler test CA");
    let server_leaf = ca.server("backlog-scaler", 1);
    let secret = SecretDir::new(&server_leaf, &ca);
    let server = start_tls(secret.options()).await;
    let pods = pods(&[(1.0, 0.0)]).await;
    let targets = targets(&pods);

    let target = get_spec(server.grpc_addr, tls_config(&ca, None), &targets)
        .await
        .expect("served over TLS");
    assert_eq!(target, 10.0);
    assert_eq!(
        presented_certificate(server.grpc_addr, &[&ca]).await,
        server_leaf.der
    );

    // A client trusting another CA refuses the server.
    let other = Ca::new("another CA");
    get_spec(server.grpc_addr, tls_config(&other, None), &targets)
        .await
        .expect_err("untrusted server certificate");
    // A plaintext client gets nowhere.
    let plaintext = Channel::from_shared(format!("http://{}", server.grpc_addr))
        .expect("uri")
        .connect()
        .await;
    if let Ok(channel) = plaintext {
        ExternalScalerClient::new(channel)
            .get_metric_spec(spec_object(&targets))
            .await
            .expect_err("plaintext refused");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn mtls_serves_only_clients_with_a_certificate_from_the_client_ca() {
    let ca = Ca::new("backlog-scaler test CA");
    let keda_ca = Ca::new("KEDA client CA");
    let secret = SecretDir::new(&ca.server("backlog-scaler", 1), &keda_ca);
    let server = start_tls(secret.options().with_client_ca(&secret.ca)).await;
    let pods = pods(&[(1.0, 0.0)]).await;
    let targets = targets(&pods);

    let err = get_spec(server.grpc_addr, tls_config(&ca, None), &targets)
        .await
        .expect_err("no client certificate");
    assert!(err.contains("CertificateRequired"), "{err}");
    let stranger = Ca::new("some other CA").client("keda-operator");
    let err = get_spec(server.grpc_addr, tls_config(&ca, Some(&stranger)), &targets)
        .await
        .expect_err("client certificate from another CA");
    assert!(err.contains("UnknownCA"), "{err}");
    let keda = keda_ca.client("keda-operator");
    let target = get_spec(server.grpc_addr, tls_config(&ca, Some(&keda)), &targets)
        .await
        .expect("good client certificate");
    assert_eq!(target, 10.0);
    server.shutdown().await;
}

#[tokio::test]
async fn rotated_certificate_serves_new_connections_while_an_open_stream_continues() {
    let ca = Ca::new("backlog-scaler test CA");
    let first = ca.server("backlog-scaler v1", 1);
    let secret = SecretDir::new(&first, &ca);
    let server = start_tls(secret.options()).await;
    // Idle pod: the trigger starts inactive, so the stream gets nothing yet.
    let pods = pods(&[(0.0, 0.0)]).await;
    let targets = targets(&pods);
    let object = spec_object(&targets);

    let mut streaming = tls_client(server.grpc_addr, tls_config(&ca, None))
        .await
        .expect("first connection");
    let mut stream = streaming
        .stream_is_active(object.clone())
        .await
        .expect("stream opens")
        .into_inner();
    // Wait until the trigger has a reading (inactive), through the same connection.
    let ready = eventually(Duration::from_secs(10), || {
        let mut c = streaming.clone();
        let o = object.clone();
        async move { c.is_active(o).await.ok().map(|r| r.into_inner().result) }
    })
    .await;
    assert_eq!(ready, Some(false));

    // Rotate: a new key and certificate, from a new CA, written in place.
    let new_ca = Ca::new("rotated CA");
    let second = new_ca.server("backlog-scaler v2", 2);
    secret.write(&second);
    let rotated = eventually(Duration::from_secs(10), || {
        let addr = server.grpc_addr;
        let (ca, new_ca) = (&ca, &new_ca);
        let want = second.der.clone();
        async move { (presented_certificate(addr, &[ca, new_ca]).await == want).then_some(()) }
    })
    .await;
    assert!(
        rotated.is_some(),
        "new handshakes present the new certificate"
    );
    get_spec(server.grpc_addr, tls_config(&new_ca, None), &targets)
        .await
        .expect("a new connection trusting the new CA is served");
    get_spec(server.grpc_addr, tls_config(&ca, None), &targets)
        .await
        .expect_err("the old CA no longer verifies new connections");

    // The stream opened before the rotation still delivers an activation.
    set(&pods[0], 5.0, 0.0);
    let pushed = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("activation pushed on the old connection")
        .expect("stream still open")
        .expect("ok message");
    assert!(pushed.result);
    // And the old connection still serves unary calls.
    assert!(
        streaming
            .is_active(object.clone())
            .await
            .expect("old connection alive")
            .into_inner()
            .result
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_rotation_keeps_the_previous_certificate() {
    let ca = Ca::new("backlog-scaler test CA");
    let first = ca.server("backlog-scaler v1", 1);
    let secret = SecretDir::new(&first, &ca);
    let server = start_tls(secret.options()).await;

    // A key that does not match the certificate (a half-done rotation).
    let other = ca.server("backlog-scaler v2", 2);
    std::fs::write(&secret.key, &other.key_pem).expect("write key");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        presented_certificate(server.grpc_addr, &[&ca]).await,
        first.der,
        "still the previous certificate"
    );
    // Completing the rotation is picked up.
    std::fs::write(&secret.cert, &other.cert_pem).expect("write cert");
    let rotated = eventually(Duration::from_secs(10), || {
        let addr = server.grpc_addr;
        let ca = &ca;
        let want = other.der.clone();
        async move { (presented_certificate(addr, &[ca]).await == want).then_some(()) }
    })
    .await;
    assert!(rotated.is_some());
    server.shutdown().await;
}

#[tokio::test]
async fn unreadable_certificate_files_stop_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = ServerOptions::new(
        "127.0.0.1:0".parse().expect("addr"),
        "127.0.0.1:0".parse().expect("addr"),
        ScalerConfig::default(),
    );
    options.tls = Some(TlsOptions::new(
        dir.path().join("missing.crt"),
        Path::new("/nonexistent/tls.key"),
    ));
    let err = RunningServer::start(options).await.expect_err("no cert");
    assert!(err.to_string().contains("missing.crt"), "{err}");
}
