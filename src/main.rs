//! The `backlog-scaler` binary: all behaviour lives in the library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    backlog_scaler::cli::main()
}
