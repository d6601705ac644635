//! Standard output that a closed pipe does not crash.
//!
//! `println!` panics when stdout is gone (`simulate … | head` closes it after ten lines), and
//! `#![forbid(unsafe_code)]` rules out restoring the default SIGPIPE action. So every command
//! prints through [`out!`](crate::cli::stdout) / [`outln!`](crate::cli::stdout), which stop
//! writing once stdout is closed, and the command goes on: `simulate` still writes its files.
//! A broken pipe is the reader's choice and ends quietly; any other write error (a full disk
//! behind `>`) is reported once on stderr and makes the command exit non-zero ([`exit_code`]).

use std::fmt;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

const OPEN: u8 = 0;
const PIPE_CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(OPEN);

/// Write `args` to stdout; after the first failure, write nothing more.
pub fn write(args: fmt::Arguments<'_>) {
    if STATE.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        record(&e);
    }
}

fn record(e: &io::Error) {
    let state = if e.kind() == io::ErrorKind::BrokenPipe {
        PIPE_CLOSED
    } else {
        FAILED
    };
    if STATE.swap(state, Ordering::Relaxed) == OPEN && state == FAILED {
        // Writing to stderr may fail too; nothing is left to tell then.
        let _ = writeln!(
            io::stderr(),
            "backlog-scaler: cannot write to standard output: {e}"
        );
    }
}

/// Whether stdout stopped taking output (a reader that went away, or an error): a live view
/// has nobody left to show anything to.
pub fn closed() -> bool {
    STATE.load(Ordering::Relaxed) != OPEN
}

/// The command's exit code, unless stdout failed with anything but a closed pipe.
pub fn exit_code(code: ExitCode) -> ExitCode {
    if STATE.load(Ordering::Relaxed) == FAILED {
        ExitCode::FAILURE
    } else {
        code
    }
}

/// `print!` that a closed stdout does not crash (see the module doc).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::stdout::write(format_args!($($arg)*))
    };
}

/// `println!` that a closed stdout does not crash (see the module doc).
macro_rules! outln {
    () => {
        $crate::cli::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};
