//! The command line as clap sees it: every command and flag, their defaults and env variables.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::simulate::SimulateArgs;

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

/// The input of `check`: one of `--metadata` and `--from-keda`.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct CheckInput {
    /// YAML file: a trigger's metadata map, or a ScaledObject whose
    /// `external`/`external-push` triggers are all checked.
    #[arg(long, value_name = "FILE")]
    pub metadata: Option<PathBuf>,
    /// YAML file with ScaledObjects using KEDA's built-in triggers
    /// (prometheus on vLLM metrics, aws-sqs-queue, kafka, rabbitmq, cpu):
    /// print the one fused `external` trigger that replaces them, where each
    /// value comes from, and what cannot be carried over. Never probes.
    #[arg(long, value_name = "FILE")]
    pub from_keda: Option<PathBuf>,
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
        /// Admin HTTP listen address (`/metrics`, `/healthz`, `/readyz`, `/explain`, `/ui`).
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
        /// What to check: `--metadata FILE` or `--from-keda FILE`.
        #[command(flatten)]
        metadata: CheckInput,
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
        /// Print the JSON (the default when stdout is not a terminal).
        #[arg(long, conflicts_with = "text")]
        json: bool,
        /// Print the readable view (the default on a terminal).
        #[arg(long)]
        text: bool,
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
        /// Number of simulated engine pods ready at start, 1 to 64 (the fleet
        /// has 4 × that many slots, at most 64).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=64))]
        pods: u16,
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
        args: SimulateArgs,
    },
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
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
