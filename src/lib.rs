//! backlog-scaler: a KEDA external scaler for GPU inference.
//!
//! KEDA calls it over gRPC (`externalscaler.proto`); for each ScaledObject
//! trigger it answers with ONE backlog-equivalent metric fused from the
//! signals that predict GPU saturation. See `ARCHITECTURE.md` in the design
//! notes and the README for the formula and the metadata reference.
//!
//! # Layout
//!
//! Data flows bottom to top:
//!
//! | module | job |
//! |---|---|
//! | [`source`] | take ONE reading of an upstream (vLLM pod scrape; [`source::prom_text`] parses the exposition text; [`source::outbound`] bounds where sources may connect) |
//! | [`poller`] | one background task per distinct source: timing, timeouts, retry, last good reading |
//! | [`fusion`] | the pure formula: signals → [`fusion::Decision`] |
//! | [`capacity`] | the `capacity` policy's arrival-rate estimator (pure, shared with the simulator) |
//! | [`cache`] | the latest evaluation per trigger, staleness, cold start, idle drop |
//! | [`trigger`] | trigger metadata → validated [`trigger::TriggerSpec`] (the metadata reference) |
//! | [`service`] | the `externalscaler.ExternalScaler` gRPC service (reads the cache only) |
//! | [`error`] | gRPC-facing errors and their single mapping to `tonic::Status` |
//! | [`admin`] | admin HTTP: `/metrics`, `/healthz`, `/readyz`, `/explain` |
//! | [`explain`] | the JSON that explains each number |
//! | [`telemetry`] | self-metrics |
//! | [`config`] | the scaler-side `--config` file |
//! | [`server`] | binds listeners and runs everything |
//! | [`tls`] | TLS/mTLS on the gRPC listener, certificates reloaded on change |
//! | [`cli`] | the `serve`, `check`, `explain`, `demo` commands |
//! | [`check`] | `check`: validate metadata and probe its sources once |
//! | [`demo`] | `demo`: a simulated vLLM fleet plus the server, with a live view |
//! | [`exporter`] | fake vLLM pods emitting vLLM's exact exposition text (demo, tests, benches) |
//! | [`sim`] | `simulate`: pods under KEDA + the HPA, each policy deciding through the server's own code |
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod cli;
pub mod decide;
pub mod fake;
pub mod guard;
pub mod runtime;
pub mod sim;
pub mod source;
pub mod trigger;

/// Code generated from `proto/externalscaler.proto`.
#[allow(missing_docs)]
pub mod proto {
    tonic::include_proto!("externalscaler");

    /// Encoded descriptors, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("externalscaler_descriptor");
}
