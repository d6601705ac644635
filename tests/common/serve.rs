//! The real binary's `serve` on free loopback ports (`127.0.0.1:0`, the
//! addresses read back from its JSON "serving" log line), every line it
//! logs collected; killed and reaped on drop, a failed start included.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use tonic::transport::Channel;

use super::http_get;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

/// A running `backlog-scaler serve`.
pub struct Serve {
    pub child: Child,
    /// `host:port` of the gRPC listener.
    pub grpc: String,
    /// `host:port` of the admin HTTP listener.
    pub http: String,
    log: Arc<Mutex<String>>,
}

impl Serve {
    /// At log level `info`, no config file.
    pub fn start() -> Serve {
        Serve::start_with("info", &[])
    }

    /// At `level` (an `--log-level` filter), with `extra` arguments after
    /// `serve` (e.g. `--config FILE`).
    pub fn start_with(level: &str, extra: &[&OsStr]) -> Serve {
        Serve::start_configured(level, extra, |_| {})
    }

    /// Like [`Serve::start_with`], with `configure` applied to the command
    /// before it runs (its environment, say).
    pub fn start_configured(
        level: &str,
        extra: &[&OsStr],
        configure: impl FnOnce(&mut Command),
    ) -> Serve {
        let mut command = Command::new(BIN);
        configure(&mut command);
        let child = command
            .args(["--log-format", "json", "--log-level", level, "serve"])
            .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        // Owned from here, so a failed start still kills and reaps it.
        let mut serve = Serve {
            child,
            grpc: String::new(),
            http: String::new(),
            log: Arc::default(),
        };
        let streams = [
            serve
                .child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            serve
                .child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let log = serve.log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut log = log.lock().expect("log");
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = serve.log();
            if let Some(line) = text.lines().find(|l| l.contains("backlog-scaler serving")) {
                let json: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
                serve.grpc = json["grpc_addr"].as_str().expect("grpc_addr").to_owned();
                serve.http = json["http_addr"].as_str().expect("http_addr").to_owned();
                return serve;
            }
            assert!(Instant::now() < deadline, "did not start:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything logged so far, one line per record.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// Log lines containing every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> usize {
        self.log()
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    /// SIGTERM, as the kubelet sends it.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
    }

    pub async fn client(&self) -> ExternalScalerClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.grpc))
            .expect("uri")
            .connect()
            .await
            .expect("connects");
        ExternalScalerClient::new(channel)
    }

    /// The first trigger of `/explain?name=NAME`.
    pub async fn explain(&self, name: &str) -> serde_json::Value {
        let (_, body) = http_get(&format!("http://{}/explain?name={name}", self.http)).await;
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        json["triggers"][0].clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
