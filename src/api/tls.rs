//! TLS (and mTLS) on the gRPC listener, with certificates re-read when their
//! files change.
//!
//! Kubernetes rotates a mounted Secret by swapping a symlink, so the files are
//! polled (content, every [`DEFAULT_RELOAD_INTERVAL`]) rather than watched
//! with inotify, which misses that swap. A change builds a new
//! [`rustls::ServerConfig`]; the accept loop takes the current one for each
//! new handshake, so new connections get the new certificate while
//! established ones (and their open StreamIsActive streams) carry on
//! untouched. A change that does not load (a half-written file, a key that
//! does not match the certificate mid-rotation) keeps the old configuration
//! and logs a warning; the next change is tried again.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// How often the certificate files are checked for changes.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);
/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; connections beyond are closed at once.
const MAX_PENDING_HANDSHAKES: usize = 256;

/// TLS settings of the gRPC listener (`serve --tls-cert/--tls-key/--client-ca`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file with the server certificate chain (leaf first).
    pub cert: PathBuf,
    /// PEM file with the private key of the leaf (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM file with the CA certificates that client certificates must chain
    /// to. When set, every client must present a valid certificate (mTLS).
    pub client_ca: Option<PathBuf>,
    /// How often the files are checked for changes.
    pub reload_interval: Duration,
}

impl TlsOptions {
    /// Server TLS from a certificate and key file, without client
    /// certificates, checked for changes every [`DEFAULT_RELOAD_INTERVAL`].
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> TlsOptions {
        TlsOptions {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }

    /// Require client certificates signed by the CAs in `ca` (mTLS).
    pub fn with_client_ca(mut self, ca: impl Into<PathBuf>) -> TlsOptions {
        self.client_ca = Some(ca.into());
        self
    }

    /// Check the files for changes this often.
    pub fn with_reload_interval(mut self, interval: Duration) -> TlsOptions {
        self.reload_interval = interval;
        self
    }
}

/// Why the TLS configuration could not be (re)loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the TLS {what} file {path}: {source}")]
    Read {
        /// Which file: `certificate`, `key` or `client CA`.
        what: &'static str,
        /// Its path.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A file has no usable PEM content.
    #[error("the TLS {what} file {path} is not usable: {reason}")]
    Pem {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the combination (e.g. the key does not match the
    /// certificate).
    #[error("invalid TLS configuration: {0}")]
    Config(String),
}

/// The bytes of the files, to notice changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// The server's TLS configuration, replaced when the files change.
#[derive(Debug)]
pub struct ReloadingTlsConfig {
    options: TlsOptions,
    current: RwLock<Arc<ServerConfig>>,
    /// What the files held at the last load attempt, good or bad.
    seen: Mutex<Material>,
}

/// What one check of the files did.
#[derive(Debug)]
pub enum ReloadOutcome {
    /// The files are as they were.
    Unchanged,
    /// New files were loaded; new handshakes use them.
    Reloaded,
    /// The files changed but do not load; the previous configuration stays.
    Failed(TlsError),
}

impl ReloadingTlsConfig {
    /// Load the files; an error if they do not make a valid configuration.
    pub fn load(options: TlsOptions) -> Result<ReloadingTlsConfig, TlsError> {
        let material = read_material(&options)?;
        let config = build_config(&options, &material)?;
        Ok(ReloadingTlsConfig {
            options,
            current: RwLock::new(Arc::new(config)),
            seen: Mutex::new(material),
        })
    }

    /// The options it was loaded with.
    pub fn options(&self) -> &TlsOptions {
        &self.options
    }

    /// The configuration for the next handshake.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-read the files; rebuild if they changed. Logs what it did.
    pub fn reload_if_changed(&self) -> ReloadOutcome {
        let material = match read_material(&self.options) {
            Ok(material) => material,
            // A file missing for a moment during a swap: try again next tick.
            Err(error) => return ReloadOutcome::Failed(error),
        };
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if *seen == material {
                return ReloadOutcome::Unchanged;
            }
            *seen = material.clone();
        }
        match build_config(&self.options, &material) {
            Ok(config) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
                ReloadOutcome::Reloaded
            }
            Err(error) => ReloadOutcome::Failed(error),
        }
    }

    /// Check the files every `reload_interval` until `shutdown`.
    pub async fn run_reloader(self: Arc<Self>, shutdown: CancellationToken) {
        let mut ticker = tokio::time::interval(self.options.reload_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            let cert = self.options.cert.display().to_string();
            match self.reload_if_changed() {
                ReloadOutcome::Unchanged => {}
                ReloadOutcome::Reloaded => {
                    last_error = None;
                    tracing::info!(cert = %cert, "TLS certificate reloaded; new connections use it, open ones continue");
                }
                ReloadOutcome::Failed(error) => {
                    // Warn once per distinct problem, not every tick.
                    let text = error.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(
                            cert = %cert,
                            key = %self.options.key.display(),
                            error = %text,
                            "TLS files changed but do not load; still serving the previous certificate"
                        );
                        last_error = Some(text);
                    }
                }
            }
        }
    }
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.display().to_string(),
        source,
    })
}

fn read_material(options: &TlsOptions) -> Result<Material, TlsError> {
    Ok(Material {
        cert: read_file("certificate", &options.cert)?,
        key: read_file("key", &options.key)?,
        client_ca: options
            .client_ca
            .as_deref()
            .map(|path| read_file("client CA", path))
            .transpose()?,
    })
}

fn certificates(
    what: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::Pem {
        what,
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_reason(&e)))?;
    if certs.is_empty() {
        return Err(bad("no `BEGIN CERTIFICATE` block".to_owned()));
    }
    Ok(certs)
}

/// A PEM error in words: the parser's own text shows the marker it missed
/// as a list of byte values (a half-written file during a rotation).
fn pem_reason(error: &pem::Error) -> String {
    match error {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "no `-----END {}-----` line (a truncated or half-written file?)",
            String::from_utf8_lossy(end_marker).trim()
        ),
        pem::Error::IllegalSectionStart { line } => format!(
            "a malformed `-----BEGIN` line: `{}`",
            String::from_utf8_lossy(line).trim()
        ),
        pem::Error::NoItemsFound => "no PEM block of the expected kind".to_owned(),
        other => other.to_string(),
    }
}

fn build_config(options: &TlsOptions, material: &Material) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = certificates("certificate", &options.cert, &material.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&material.key).map_err(|e| TlsError::Pem {
        what: "key",
        path: options.key.display().to_string(),
        reason: pem_reason(&e),
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match (&options.client_ca, &material.client_ca) {
        (Some(path), Some(pem)) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("client CA", path, pem)? {
                roots.add(cert).map_err(|e| TlsError::Pem {
                    what: "client CA",
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    // gRPC is HTTP/2 only; gRPC clients (grpc-go in KEDA among them) insist
    // on negotiating it.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Accept TCP connections on `listener` and hand out those whose TLS
/// handshake (with the configuration current at accept time) succeeds.
/// Handshakes run concurrently, so a slow client delays no one. Ends when
/// `shutdown` fires or the receiver is dropped.
pub fn incoming(
    listener: TcpListener,
    tls: Arc<ReloadingTlsConfig>,
    shutdown: CancellationToken,
) -> ReceiverStream<Result<TlsStream<TcpStream>, io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, tls, tx, shutdown));
    ReceiverStream::new(rx)
}

async fn accept_loop(
    listener: TcpListener,
    tls: Arc<ReloadingTlsConfig>,
    tx: mpsc::Sender<Result<TlsStream<TcpStream>, io::Error>>,
    shutdown: CancellationToken,
) {
    let pending = Arc::new(Semaphore::new(MAX_PENDING_HANDSHAKES));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // E.g. out of file descriptors: back off instead of spinning;
                // never end the server over it.
                tracing::warn!(%error, "gRPC accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "too many TLS handshakes in progress; connection closed");
            continue;
        };
        let acceptor = TlsAcceptor::from(tls.current());
        let tx = tx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            handshake(acceptor, stream, peer, tx).await;
        });
    }
}

async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    tx: mpsc::Sender<Result<TlsStream<TcpStream>, io::Error>>,
) {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let _ = tx.send(Ok(tls)).await;
        }
        // Debug, not warn: TCP probes and port scans fail here all day. A
        // refused client certificate shows up here too.
        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_garbage_files_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        let err = ReloadingTlsConfig::load(TlsOptions::new(&cert, &key)).expect_err("missing");
        assert!(err.to_string().contains("certificate file"), "{err}");
        std::fs::write(&cert, "not pem").expect("write");
        std::fs::write(&key, "not pem").expect("write");
        let err = ReloadingTlsConfig::load(TlsOptions::new(&cert, &key)).expect_err("garbage");
        assert!(err.to_string().contains("BEGIN CERTIFICATE"), "{err}");
        // Half-written, as a rotation can leave it: the marker in words.
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nMIIB\n").expect("write");
        let err = ReloadingTlsConfig::load(TlsOptions::new(&cert, &key)).expect_err("truncated");
        assert!(
            err.to_string()
                .contains("no `-----END CERTIFICATE-----` line"),
            "{err}"
        );
    }
}
