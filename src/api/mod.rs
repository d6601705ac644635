//! The scaler's faces: the `externalscaler.ExternalScaler` gRPC service,
//! the admin HTTP server (`/metrics`, `/healthz`, `/readyz`, `/explain`), the
//! TLS listener, the wiring that starts everything, and the one map from
//! errors to `tonic::Status`.
//!
//! Rule: handlers read the decision cache ([`crate::runtime`]) and never do
//! upstream I/O on the warm path. May use `runtime`, `decide`, `trigger`,
//! `source`, `guard` and the generated `proto`.

pub mod admin;
pub mod explain;
pub mod server;
pub mod service;
pub mod status;
pub mod tls;
pub mod ui;
