//! Wiring: binds the gRPC and admin listeners and runs every task until
//! shutdown. Used by `serve`, `demo` and the integration tests.
//!
//! The gRPC listener speaks TLS (optionally mTLS) when [`ServerOptions::tls`]
//! is set, with certificates reloaded from disk ([`crate::api::tls`]); the admin
//! listener is always plaintext HTTP, so bind it to an address only the
//! kubelet and Prometheus reach (or `127.0.0.1`).
//!
//! # Shutdown
//!
//! When the shutdown token fires (SIGTERM, in `serve`), in this order:
//!
//! 1. `/readyz` answers 503 and gRPC health `NOT_SERVING`; new triggers are
//!    refused with `UNAVAILABLE`; registered ones keep answering GetMetrics,
//!    IsActive and their streams.
//! 2. After [`DEFAULT_DRAIN_DELAY`] (5 s): open StreamIsActive streams end
//!    with OK, the gRPC server stops accepting and lets in-flight calls
//!    finish (each is bounded by the cold-start budget, 2 s by default),
//!    at most [`GRPC_DRAIN_CAP`] (10 s); the admin server stops.
//! 3. Every trigger is dropped, which stops the pollers; the process exits 0.
//!
//! The delay is there for the endpoint to leave the Service before the
//! streams end: kube-proxy stops sending new connections to a terminating
//! pod within a second or two of its deletion, and a readiness probe every
//! 2 s with `failureThreshold: 2` sees the 503 within 4 s even when the pod
//! is not being deleted; KEDA reconnects 2 s after a stream ends, then to
//! the other replica. Exit comes at most 5 + 10 s after SIGTERM, well inside
//! k8s/deployment.yaml's `terminationGracePeriodSeconds: 30`.
//!
//! KEDA's calls are timed around the service ([`timing`]) into
//! `backlog_scaler_grpc_request_duration_seconds`.

mod timing;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;

use crate::api::admin::{self, AdminState};
use crate::api::service::ScalerService;
use crate::api::tls::{ReloadingTlsConfig, TlsError, TlsOptions};
use crate::guard::config::ScalerConfig;
use crate::proto::external_scaler_server::ExternalScalerServer;
use crate::runtime::cache::{CacheSettings, DecisionCache};
use crate::runtime::poller::PollerRegistry;
use crate::runtime::telemetry::Telemetry;
use crate::source::{HttpScraper, SourceContext};

/// Where to listen and how to behave.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// gRPC listen address (port 0 picks a free port).
    pub grpc_addr: SocketAddr,
    /// Admin HTTP listen address (port 0 picks a free port).
    pub http_addr: SocketAddr,
    /// Scaler-side configuration.
    pub config: ScalerConfig,
    /// TLS for the gRPC listener; `None` serves plaintext h2c.
    pub tls: Option<TlsOptions>,
}

impl ServerOptions {
    /// Plaintext gRPC on `grpc_addr`, admin HTTP on `http_addr`.
    pub fn new(grpc_addr: SocketAddr, http_addr: SocketAddr, config: ScalerConfig) -> Self {
        ServerOptions {
            grpc_addr,
            http_addr,
            config,
            tls: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The scaler config cannot be used (e.g. a profile's secret is missing).
    #[error("{0}")]
    Config(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} for {what}: {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[from] reqwest::Error),
    /// Reflection descriptors could not be loaded.
    #[error("cannot build gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The TLS certificate, key or client CA could not be loaded.
    #[error("cannot start TLS on the gRPC listener: {0}")]
    Tls(#[from] TlsError),
    /// The outbound allowlist is invalid.
    #[error("invalid outbound config: {0}")]
    Outbound(String),
}

/// A running server.
#[derive(Debug)]
pub struct RunningServer {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound admin address.
    pub http_addr: SocketAddr,
    /// The decision cache (for tests and the demo).
    pub cache: Arc<DecisionCache>,
    /// Fired to ask for shutdown (the token `serve` cancels on SIGTERM).
    shutdown: CancellationToken,
    /// Fired after the drain delay: streams end, listeners stop.
    stop: CancellationToken,
    drain_delay: Duration,
    ready: Arc<AtomicBool>,
    health: tonic_health::server::HealthReporter,
    grpc: JoinHandle<Result<(), tonic::transport::Error>>,
    http: JoinHandle<std::io::Result<()>>,
}

/// Upper bound on one HTTP request; pollers cut readings shorter.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// From the shutdown signal to the end of the streams: readiness is false
/// and new triggers are refused meanwhile (see the module docs for the
/// arithmetic with the Deployment's probes and grace period).
pub const DEFAULT_DRAIN_DELAY: Duration = Duration::from_secs(5);

/// How long in-flight gRPC calls may take to finish once the streams have
/// ended; past it the server is stopped regardless. Far above the 2 s
/// cold-start budget that bounds a call.
pub const GRPC_DRAIN_CAP: Duration = Duration::from_secs(10);

impl RunningServer {
    /// Bind both listeners and start serving.
    pub async fn start(options: ServerOptions) -> Result<RunningServer, StartError> {
        let telemetry = Arc::new(Telemetry::new());
        let outbound = Arc::new(
            options
                .config
                .outbound
                .policy()
                .map_err(StartError::Outbound)?,
        );
        if outbound.is_restricted() {
            tracing::info!(outbound = %outbound.summary(), "outbound allowlist in force");
        } else {
            tracing::warn!(
                "no outbound allowlist configured: any ScaledObject can make the scaler connect to any host except link-local and cloud metadata addresses; set `outbound.allow` in --config"
            );
        }
        let tls = options
            .tls
            .clone()
            .map(ReloadingTlsConfig::load)
            .transpose()?
            .map(Arc::new);
        let ctx = SourceContext::from_config(
            &options.config,
            HttpScraper::with_outbound(HTTP_TIMEOUT, options.config.max_response_bytes, outbound)?,
        )
        .map_err(StartError::Config)?;
        let pollers = PollerRegistry::new(ctx, telemetry.clone());
        let cache = Arc::new(DecisionCache::new(
            pollers,
            telemetry.clone(),
            CacheSettings::from_config(&options.config),
        ));
        let shutdown = CancellationToken::new();
        let stop = CancellationToken::new();
        let ready = Arc::new(AtomicBool::new(false));

        let grpc_listener = bind("gRPC", options.grpc_addr).await?;
        let http_listener = bind("admin HTTP", options.http_addr).await?;
        let grpc_addr = local_addr("gRPC", options.grpc_addr, &grpc_listener)?;
        let http_addr = local_addr("admin HTTP", options.http_addr, &http_listener)?;

        let (health_reporter, health_service) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<ExternalScalerServer<ScalerService>>()
            .await;
        // Both reflection versions are served (grpcurl before 1.8.7 speaks
        // only v1alpha), and each lists every service, the other version's
        // too: by default a builder adds only its own descriptor.
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(
                    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
                )
                .include_reflection_service(false)
        };
        let reflection_v1alpha = reflection().build_v1alpha()?;
        let reflection_v1 = reflection().build_v1()?;
        let scaler = ScalerService::new(cache.clone(), telemetry.clone(), stop.clone());

        let grpc_shutdown = stop.clone();
        let health = health_reporter.clone();
        let grpc_tls = tls.clone();
        let grpc_telemetry = telemetry.clone();
        let grpc = tokio::spawn(async move {
            let router = tonic::transport::Server::builder()
                .add_service(timing::Timed::new(
                    ExternalScalerServer::new(scaler),
                    grpc_telemetry,
                ))
                .add_service(health_service)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha);
            let result = match grpc_tls {
                // Our own accept loop rather than tonic's ServerTlsConfig,
                // which cannot swap certificates on a running server.
                Some(tls) => {
                    let incoming =
                        crate::api::tls::incoming(grpc_listener, tls, grpc_shutdown.clone());
                    router
                        .serve_with_incoming_shutdown(incoming, grpc_shutdown.cancelled_owned())
                        .await
                }
                None => {
                    router
                        .serve_with_incoming_shutdown(
                            // Nagle + delayed ACK stalls small gRPC responses
                            // by ~40 ms; tonic ignores Server::tcp_nodelay
                            // for a custom incoming, so set it here.
                            TcpIncoming::from(grpc_listener).with_nodelay(Some(true)),
                            grpc_shutdown.cancelled_owned(),
                        )
                        .await
                }
            };
            // Keep the reporter alive for the server's lifetime.
            drop(health_reporter);
            result
        });

        let router = admin::router(AdminState {
            cache: cache.clone(),
            telemetry,
            ready: ready.clone(),
        });
        let http_shutdown = stop.clone();
        let http = tokio::spawn(async move {
            axum::serve(http_listener, router)
                .with_graceful_shutdown(http_shutdown.cancelled_owned())
                .await
        });
        tokio::spawn(cache.clone().run_janitor(stop.clone()));
        let grpc_security = match &tls {
            Some(tls) => {
                tokio::spawn(tls.clone().run_reloader(stop.clone()));
                if tls.options().client_ca.is_some() {
                    "mTLS (client certificates required)"
                } else {
                    "TLS"
                }
            }
            None => "plaintext",
        };
        ready.store(true, Ordering::Relaxed);
        tracing::info!(%grpc_addr, grpc = grpc_security, %http_addr, admin = "plaintext HTTP", "backlog-scaler serving");
        Ok(RunningServer {
            grpc_addr,
            http_addr,
            cache,
            shutdown,
            stop,
            drain_delay: DEFAULT_DRAIN_DELAY,
            ready,
            health,
            grpc,
            http,
        })
    }

    /// Drain for `delay` after the shutdown token fires instead of
    /// [`DEFAULT_DRAIN_DELAY`] (`Duration::ZERO`: end the streams at once,
    /// for a process no Service routes to, such as `demo`).
    pub fn with_drain_delay(mut self, delay: Duration) -> RunningServer {
        self.drain_delay = delay;
        self
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stop now, without the drain delay: end open streams with OK, let
    /// in-flight calls finish, and wait for both servers (tests, embedding).
    pub async fn shutdown(mut self) {
        self.drain_delay = Duration::ZERO;
        self.shutdown.cancel();
        self.wait().await;
    }

    /// Wait until the shutdown token is cancelled, then shut down in the
    /// order of the module docs and return once both servers and every
    /// poller have stopped.
    pub async fn wait(self) {
        self.shutdown.cancelled().await;
        self.ready.store(false, Ordering::Relaxed);
        self.health
            .set_not_serving::<ExternalScalerServer<ScalerService>>()
            .await;
        // The server as a whole too: a Kubernetes `grpc:` probe without a
        // `service` asks for "".
        self.health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        self.cache.start_draining();
        if !self.drain_delay.is_zero() {
            tracing::info!(
                drain_s = self.drain_delay.as_secs_f64(),
                "not ready; new triggers refused; streams end after the drain delay"
            );
            tokio::time::sleep(self.drain_delay).await;
        }
        self.stop.cancel();
        let mut grpc = self.grpc;
        match tokio::time::timeout(GRPC_DRAIN_CAP, &mut grpc).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::error!(error = %e, "gRPC server failed"),
            Ok(Err(e)) => tracing::error!(error = %e, "gRPC server task failed"),
            Err(_) => {
                tracing::warn!(
                    cap_s = GRPC_DRAIN_CAP.as_secs(),
                    "in-flight gRPC calls did not finish in time; stopping regardless"
                );
                grpc.abort();
            }
        }
        match self.http.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "admin server failed"),
            Err(e) => tracing::error!(error = %e, "admin server task failed"),
        }
        let triggers = self.cache.close();
        tracing::info!(triggers, "backlog-scaler stopped; pollers stopped");
    }
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

fn local_addr(
    what: &'static str,
    addr: SocketAddr,
    listener: &TcpListener,
) -> Result<SocketAddr, StartError> {
    listener
        .local_addr()
        .map_err(|source| StartError::Bind { what, addr, source })
}
