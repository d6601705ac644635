//! Where the scaler may go and with what: the outbound allowlist checked
//! after DNS, the credential profiles of the scaler's own config, the
//! `--config` file that carries both, and the redactor every output that
//! names a target goes through.
//!
//! Rule: operator policy only, never trigger metadata; the bottom layer,
//! it imports nothing from the crate.

pub mod config;
pub mod credentials;
pub mod outbound;
pub mod redact;
