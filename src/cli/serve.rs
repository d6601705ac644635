//! `serve`: the gRPC scaler and the admin HTTP server until a shutdown signal.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::api::server::{RunningServer, ServerOptions};
use crate::api::tls::TlsOptions;

/// The TLS options the flags ask for (clap enforces that cert and key come
/// together and that a client CA comes with them).
pub(super) fn tls_options(
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

/// Run the server until SIGTERM or Ctrl-C, then drain.
pub(super) async fn serve(options: ServerOptions) -> ExitCode {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser as _;

    use super::tls_options;
    use crate::cli::args::{Cli, Command};

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
}
