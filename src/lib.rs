//! backlog-scaler: a KEDA external scaler for GPU inference.
//!
//! KEDA calls it over gRPC (`externalscaler.proto`); for each ScaledObject
//! trigger it answers with ONE backlog-equivalent metric fused from the
//! signals that predict GPU saturation. See `ARCHITECTURE.md` in the design
//! notes and the README for the formula and the metadata reference.
//!
//! # Layers
//!
//! Folders are layers. Each may import only the layers below it (further down
//! this table), never one above, and no two files import each other, directly
//! or in a circle; `tests/layout.rs` reads `src/` and fails on either.
//! `docs/architecture.md` draws the data flow through these folders.
//!
//! | folder | job | may import |
//! |---|---|---|
//! | [`cli`] | commands: `serve`, `check`, `explain`, `demo`, `simulate` | everything |
//! | [`api`] | gRPC service, admin HTTP, `/explain`, TLS listener, server wiring, the one error → `tonic::Status` map; reads the decision cache only, no I/O on the warm path | runtime, decide, trigger, source, guard, [`proto`] |
//! | [`runtime`] | pollers, decision cache, self-metrics, shutdown: owns tasks, time and state | decide, trigger, source, guard |
//! | [`decide`] | pure decision code: freshness, fusion, capacity, TTFT window; readings and time in, a `Decision` out | trigger, source, guard |
//! | [`trigger`] | the metadata language → a validated [`trigger::TriggerSpec`]: one key registry, one redacting error | source, guard |
//! | [`source`] | readers: one reading of one upstream, from a typed target; no metadata, no retries, no sleeps | guard |
//! | [`guard`] | where the scaler may connect and with what: outbound allowlist, credential profiles, `--config`, and the one credential redactor every output uses | nothing |
//! | [`sim`] | `simulate`: pods under KEDA and the HPA, each policy deciding through [`decide`] | decide, trigger, source, fake |
//! | [`fake`] | fake engine pods and dcgm-exporter emitting the real components' exact bytes (tests, demo, benches) | nothing |
//!
//! `trigger` sits above `source` because it builds the sources' typed
//! targets; `source` never sees metadata. `decide` sits above `trigger`
//! because it decides with a trigger's parameters (`trigger::params`).
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
