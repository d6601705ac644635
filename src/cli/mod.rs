//! Command line: `serve`, `check`, `explain`, `demo`, `simulate`.
//!
//! Rule: the top layer; commands parse arguments, build what they need
//! from the layers below and print. May use every folder.
//!
//! | file | job |
//! |---|---|
//! | `args` | the clap definitions ([`Cli`], [`Command`]) |
//! | `run` | [`main`]: logging, the async runtime, dispatch to a command |
//! | `serve`, `explain`, [`check`], [`demo`], [`simulate`] | one command each |
//! | `explain_view` | `explain`'s text view of the `/explain` JSON |
//! | `logging` | the tracing subscriber ([`init_logging`]) |
//! | `stdout` | `out!`/`outln!`: printing that a closed pipe does not crash |

mod args;
pub mod check;
pub mod demo;
mod explain;
mod explain_view;
mod logging;
mod run;
mod serve;
pub mod simulate;
mod stdout;

pub use args::{Cli, Command, LogFormat};
pub use logging::init_logging;
pub use run::main;
