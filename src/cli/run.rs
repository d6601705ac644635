//! Command line: `serve`, `check`, `explain`, `demo`, `simulate`.
//!
//! Rule: the top layer; commands parse arguments, build what they need
//! from the layers below and print. May use every folder.

pub mod check;
pub mod demo;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::api::server::{RunningServer, ServerOptions};
use crate::api::tls::TlsOptions;
use crate::guard::config::ScalerConfig;

/// A KEDA external scaler that fuses GPU-inference signals into one
/// backlog-equivalent metric.
#[derive(Debug, Parser)]
#[command(name = "backlog-scaler", version, about)]
pub struct Cli {
    /// Log level or filter (`info`, `debug`, `backlog_scaler=debug,info`).
    /// Default: `info` for `serve`, `warn` for the other commands, whose
    /// output is for a person at a terminal.
    #[arg(long, global = true, env = "BACKLOG_SCALER_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log format.
    #[arg(long, global = true, env = "BACKLOG_SCALER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line (for log pipelines).
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gRPC scaler and the admin HTTP server.
    Serve {
        /// gRPC listen address (KEDA's `scalerAddress` points here).
        #[arg(long, env = "BACKLOG_SCALER_GRPC_ADDR", default_value = "0.0.0.0:9090")]
        grpc_addr: SocketAddr,
        /// Admin HTTP listen address (`/metrics`, `/healthz`, `/readyz`, `/explain`).
        /// Always plaintext: bind it to `127.0.0.1:8080` or a pod-only
        /// address when only the kubelet and Prometheus should reach it.
        #[arg(long, env = "BACKLOG_SCALER_HTTP_ADDR", default_value = "0.0.0.0:8080")]
        http_addr: SocketAddr,
        /// Scaler-side YAML config (optional).
        #[arg(long, env = "BACKLOG_SCALER_CONFIG")]
        config: Option<PathBuf>,
        /// Serve gRPC over TLS with this PEM certificate chain (leaf first).
        /// Needs `--tls-key`. Re-read when the file changes (a rotated
        /// Secret); new connections use the new certificate, open ones stay.
        #[arg(long, env = "BACKLOG_SCALER_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key of `--tls-cert` (PKCS#8, PKCS#1 or SEC1).
        #[arg(long, env = "BACKLOG_SCALER_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Require client certificates signed by a CA in this PEM file (mTLS:
        /// KEDA's `tlsClientCert`/`tlsClientKey`). Needs `--tls-cert`.
        #[arg(long, env = "BACKLOG_SCALER_CLIENT_CA", requires = "tls_cert")]
        client_ca: Option<PathBuf>,
    },
    /// Validate a trigger's metadata, probe each source once, print what the
    /// scaler would report; exit non-zero on any problem.
    Check {
        /// YAML file: a trigger's metadata map, or a ScaledObject whose
        /// `external`/`external-push` triggers are all checked.
        #[arg(long)]
        metadata: PathBuf,
        /// Scaler-side YAML config (optional).
        #[arg(long, env = "BACKLOG_SCALER_CONFIG")]
        config: Option<PathBuf>,
        /// Validate only (metadata, outbound allowlist, credential profile
        /// names and namespaces): no network, no secret read. For CI.
        #[arg(long)]
        no_probe: bool,
    },
    /// Ask a running scaler why it reports what it reports.
    Explain {
        /// The scaler's admin URL.
        #[arg(
            long,
            env = "BACKLOG_SCALER_ADMIN_URL",
            default_value = "http://127.0.0.1:8080"
        )]
        admin_url: String,
        /// Only this namespace.
        #[arg(long)]
        namespace: Option<String>,
        /// Only this ScaledObject.
        #[arg(long)]
        name: Option<String>,
    },
    /// Run a simulated vLLM fleet on loopback plus the scaler, and print a
    /// live view. No cluster and no config needed.
    Demo {
        /// gRPC listen address of the demo scaler.
        #[arg(long, default_value = "127.0.0.1:9090")]
        grpc_addr: SocketAddr,
        /// Admin HTTP listen address of the demo scaler.
        #[arg(long, default_value = "127.0.0.1:8080")]
        http_addr: SocketAddr,
        /// Number of simulated engine pods.
        #[arg(long, default_value_t = 3)]
        pods: usize,
        /// Stop after this many seconds (default: run until Ctrl-C).
        #[arg(long)]
        duration: Option<u64>,
    },
    /// Simulate a Deployment under KEDA and the HPA for each policy and
    /// traffic scenario, through the server's own decision code; print a
    /// comparison table and write CSV and an SVG chart.
    Simulate {
        /// The simulation's flags.
        #[command(flatten)]
        args: crate::sim::SimulateArgs,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Serve { .. } => "info",
        _ => "warn",
    };
    let level = cli.log_level.as_deref().unwrap_or(default_level);
    if let Err(message) = init_logging(level, cli.log_format) {
        eprintln!("backlog-scaler: {message}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("backlog-scaler: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli.command))
}

async fn run(command: Command) -> ExitCode {
    match command {
        Command::Serve {
            grpc_addr,
            http_addr,
            config,
            tls_cert,
            tls_key,
            client_ca,
        } => {
            let config = match load_config(config.as_deref()) {
                Ok(config) => config,
                Err(code) => return code,
            };
            let tls = tls_options(tls_cert, tls_key, client_ca);
            serve(ServerOptions {
                grpc_addr,
                http_addr,
                config,
                tls,
            })
            .await
        }
        Command::Check {
            metadata,
            config,
            no_probe,
        } => {
            let config = match load_config(config.as_deref()) {
                Ok(config) => config,
                Err(code) => return code,
            };
            crate::cli::check::run(&metadata, &config, !no_probe).await
        }
        Command::Explain {
            admin_url,
            namespace,
            name,
        } => explain(&admin_url, namespace, name).await,
        Command::Demo {
            grpc_addr,
            http_addr,
            pods,
            duration,
        } => {
            crate::cli::demo::run(
                grpc_addr,
                http_addr,
                pods,
                duration.map(Duration::from_secs),
            )
            .await
        }
        Command::Simulate { args } => {
            // CPU-bound and threaded on its own: off the async workers.
            tokio::task::spawn_blocking(move || crate::sim::run_cli(args))
                .await
                .unwrap_or(ExitCode::FAILURE)
        }
    }
}

/// The TLS options the flags ask for (clap enforces that cert and key come
/// together and that a client CA comes with them).
fn tls_options(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
) -> Option<TlsOptions> {
    let (cert, key) = (cert?, key?);
    let options = TlsOptions::new(cert, key);
    Some(match client_ca {
        Some(ca) => options.with_client_ca(ca),
        None => options,
    })
}

fn load_config(path: Option<&std::path::Path>) -> Result<ScalerConfig, ExitCode> {
    match path {
        None => Ok(ScalerConfig::default()),
        Some(path) => ScalerConfig::load(path).map_err(|e| {
            eprintln!("backlog-scaler: {e}");
            ExitCode::from(2)
        }),
    }
}

async fn serve(options: ServerOptions) -> ExitCode {
    let server = match RunningServer::start(options).await {
        Ok(server) => server,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    let token = server.shutdown_token();
    tokio::spawn(async move {
        crate::runtime::shutdown::shutdown_signal().await;
        tracing::info!("shutdown requested; ending streams and draining");
        token.cancel();
    });
    server.wait().await;
    ExitCode::SUCCESS
}

async fn explain(admin_url: &str, namespace: Option<String>, name: Option<String>) -> ExitCode {
    let mut query = Vec::new();
    if let Some(ns) = namespace {
        query.push(("namespace", ns));
    }
    if let Some(name) = name {
        query.push(("name", name));
    }
    let url = format!("{}/explain", admin_url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .get(&url)
        .query(&query)
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    let body = match response {
        Ok(r) if r.status().is_success() => r.text().await,
        Ok(r) => {
            eprintln!("backlog-scaler: {url} answered {}", r.status());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("backlog-scaler: cannot reach {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match body.map(|b| serde_json::from_str::<serde_json::Value>(&b)) {
        Ok(Ok(json)) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string())
            );
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("backlog-scaler: {url} did not return JSON: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("backlog-scaler: reading {url} failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Install the global tracing subscriber.
pub fn init_logging(level: &str, format: LogFormat) -> Result<(), String> {
    let mut filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| format!("invalid --log-level `{level}`: {e}"))?;
    // Whatever level is asked for: some client libraries log credentials at
    // their most verbose level (lapin traces the AMQP login frame).
    for cap in crate::source::broker::LOG_FILTER_CAPS {
        if let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| format!("cannot install the logger: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_ones() {
        let cli = Cli::try_parse_from(["backlog-scaler", "serve"]).expect("parses");
        match cli.command {
            Command::Serve {
                grpc_addr,
                http_addr,
                config,
                tls_cert,
                tls_key,
                client_ca,
            } => {
                assert_eq!(grpc_addr.to_string(), "0.0.0.0:9090");
                assert_eq!(http_addr.to_string(), "0.0.0.0:8080");
                assert!(config.is_none());
                assert!(tls_cert.is_none() && tls_key.is_none() && client_ca.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cli.log_format, LogFormat::Plain);
    }

    #[test]
    fn tls_flags_go_together() {
        let cli = Cli::try_parse_from([
            "backlog-scaler",
            "serve",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--client-ca",
            "ca.pem",
        ])
        .expect("parses");
        let Command::Serve {
            tls_cert,
            tls_key,
            client_ca,
            ..
        } = cli.command
        else {
            panic!("serve");
        };
        let tls = tls_options(tls_cert, tls_key, client_ca).expect("tls");
        assert_eq!(tls.cert, PathBuf::from("c.pem"));
        assert_eq!(tls.key, PathBuf::from("k.pem"));
        assert_eq!(tls.client_ca, Some(PathBuf::from("ca.pem")));
        for args in [
            &["backlog-scaler", "serve", "--tls-cert", "c.pem"][..],
            &["backlog-scaler", "serve", "--tls-key", "k.pem"][..],
            &["backlog-scaler", "serve", "--client-ca", "ca.pem"][..],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
