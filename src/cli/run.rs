//! The binary's entry: parse the command line, start logging and the async runtime, dispatch.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

use super::args::{Cli, Command};
use super::explain::{ExplainFormat, explain};
use super::logging::init_logging;
use super::serve::{serve, tls_options};
use super::{check, demo, simulate};
use crate::api::server::ServerOptions;
use crate::guard::config::ScalerConfig;

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
    super::stdout::exit_code(runtime.block_on(run(cli.command)))
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
            check::run(&metadata, &config, !no_probe).await
        }
        Command::Explain {
            admin_url,
            namespace,
            name,
            json,
            text,
        } => {
            explain(
                &admin_url,
                namespace,
                name,
                ExplainFormat::choose(json, text),
            )
            .await
        }
        Command::Demo {
            grpc_addr,
            http_addr,
            pods,
            duration,
        } => {
            demo::run(
                grpc_addr,
                http_addr,
                usize::from(pods),
                duration.map(Duration::from_secs),
            )
            .await
        }
        Command::Simulate { args } => {
            // CPU-bound and threaded on its own: off the async workers.
            tokio::task::spawn_blocking(move || simulate::run(args))
                .await
                .unwrap_or(ExitCode::FAILURE)
        }
    }
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
