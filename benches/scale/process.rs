//! The scaler under test as a child process, and what `/proc` says of it:
//! the bench's numbers are the server's alone.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// A field of `/proc/<pid>/status` in kB, as MB.
pub fn status_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15 (1-based).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

/// A running `backlog-scaler serve`, killed and reaped on drop.
pub struct Server {
    pub child: Child,
    pub grpc: SocketAddr,
    _config: tempfile::NamedTempFile,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the release binary with a `--config` admitting `max_triggers`, on free loopback
/// ports, under `SCALE_SERVER_WRAPPER` if set.
pub fn start_server(max_triggers: usize) -> Server {
    let mut config = tempfile::NamedTempFile::new().expect("a temp file");
    writeln!(config, "maxTriggers: {max_triggers}").expect("write the config");
    let grpc = free_port();
    let http = free_port();
    let binary = env!("CARGO_BIN_EXE_backlog-scaler");
    let wrapper = std::env::var("SCALE_SERVER_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(binary);
            command
        }
        None => Command::new(binary),
    };
    let child = command
        .args(["--log-level", "warn", "serve", "--grpc-addr"])
        .arg(grpc.to_string())
        .arg("--http-addr")
        .arg(http.to_string())
        .arg("--config")
        .arg(config.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the scaler binary starts");
    Server {
        child,
        grpc,
        _config: config,
    }
}
