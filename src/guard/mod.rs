//! Where the scaler may go and with what: the outbound allowlist checked
//! after DNS, the credential profiles of the scaler's own config, and the
//! `--config` file that carries both.
//!
//! Rule: operator policy only, never trigger metadata; the bottom layer,
//! it imports nothing from the crate.

pub mod config;
pub mod credentials;
pub mod outbound;
