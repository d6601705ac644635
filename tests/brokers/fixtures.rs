//! Real brokers for tests/brokers.rs, started on 127.0.0.1 with free ports
//! in temp dirs, and stopped by process-group id:
//!
//! - every server runs in its own process group; `Drop` kills the group;
//! - a watchdog `sh` holds the read end of a pipe whose write end only this
//!   test process holds: when the process exits in any way (including a
//!   panic abort or SIGKILL), the pipe closes and the watchdog kills the
//!   group. Servers shared through a `static` (RabbitMQ, moto) are never
//!   dropped, so the watchdog is what stops them.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn wait_for_port(port: u16, within: Duration, what: &str, log: &Path) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(log).unwrap_or_default();
    panic!("{what} did not listen on 127.0.0.1:{port} within {within:?}; log:\n{log}");
}

/// Processes in one process group, killed together.
pub struct Group {
    pgid: u32,
    children: Vec<Child>,
    watchdog: Option<(Child, ChildStdin)>,
}

impl Group {
    /// Start `command` as the leader of a new process group.
    pub fn start(command: &mut Command, log: &Path) -> Group {
        let child = spawn_logged(command.process_group(0), log);
        let pgid = child.id();
        let mut watchdog = Command::new("sh")
            .arg("-c")
            // dash's `kill` builtin takes no `--`: `-PGID` after the signal.
            .arg("read _ ; kill -KILL -\"$1\" 2>/dev/null")
            .arg("sh")
            .arg(pgid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("watchdog starts");
        let stdin = watchdog.stdin.take().expect("watchdog stdin");
        Group {
            pgid,
            children: vec![child],
            watchdog: Some((watchdog, stdin)),
        }
    }

    /// Start `command` in this group.
    pub fn add(&mut self, command: &mut Command, log: &Path) {
        let child = spawn_logged(command.process_group(self.pgid as i32), log);
        self.children.push(child);
    }

    /// Kill every process of the group now.
    pub fn kill(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.pgid)])
            .stderr(Stdio::null())
            .status();
        for child in &mut self.children {
            let _ = child.wait();
        }
        if let Some((mut watchdog, mut stdin)) = self.watchdog.take() {
            let _ = stdin.write_all(b"\n");
            drop(stdin);
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn_logged(command: &mut Command, log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"))
}

// ---------------------------------------------------------------- RabbitMQ

/// A private RabbitMQ node with the management plugin.
pub struct Rabbit {
    /// AMQP port.
    pub amqp_port: u16,
    /// Management HTTP port.
    pub http_port: u16,
    _dir: TempDir,
    _group: Mutex<Group>,
}

static RABBIT: OnceLock<Rabbit> = OnceLock::new();

/// The test binary's RabbitMQ, started on first use (about 5 s).
pub fn rabbit() -> &'static Rabbit {
    RABBIT.get_or_init(start_rabbit)
}

const RABBIT_SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";

fn start_rabbit() -> Rabbit {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let (amqp_port, http_port, dist_port, epmd_port) =
        (free_port(), free_port(), free_port(), free_port());
    std::fs::write(
        path.join("rabbitmq.conf"),
        format!(
            "listeners.tcp.default = 127.0.0.1:{amqp_port}\n\
             management.tcp.ip = 127.0.0.1\n\
             management.tcp.port = {http_port}\n\
             collect_statistics_interval = 1000\n\
             log.console = false\n"
        ),
    )
    .expect("config");
    std::fs::write(path.join("enabled_plugins"), "[rabbitmq_management].\n").expect("plugins");
    std::fs::write(path.join("rabbitmq-env.conf"), "").expect("env file");
    // Our own epmd, bound to loopback on a free port, in the node's group.
    let mut group = Group::start(
        Command::new("epmd").args(["-port", &epmd_port.to_string(), "-address", "127.0.0.1"]),
        &path.join("epmd.log"),
    );
    wait_for_port(
        epmd_port,
        Duration::from_secs(10),
        "epmd",
        &path.join("epmd.log"),
    );
    let p = |s: &str| path.join(s).display().to_string();
    group.add(
        Command::new(RABBIT_SERVER)
            .current_dir(path)
            .env("HOME", path)
            .env("RABBITMQ_CONF_ENV_FILE", p("rabbitmq-env.conf"))
            .env("RABBITMQ_CONFIG_FILE", p("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", p("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", p("enabled_plugins"))
            .env("RABBITMQ_BASE", p(""))
            .env("RABBITMQ_MNESIA_BASE", p("mnesia"))
            .env("RABBITMQ_LOG_BASE", p("log"))
            .env("RABBITMQ_LOGS", p("log/rabbit.log"))
            .env(
                "RABBITMQ_NODENAME",
                format!("backlog-test-{}@localhost", std::process::id()),
            )
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env("ERL_EPMD_PORT", epmd_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            ),
        &path.join("server.log"),
    );
    // Ready when the management API answers (it starts after AMQP).
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if http_ok(http_port, "/api/overview") {
            break;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(path.join("server.log")).unwrap_or_default();
            let rlog = std::fs::read_to_string(path.join("log/rabbit.log")).unwrap_or_default();
            panic!("RabbitMQ did not start:\n{log}\n{rlog}");
        }
        thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "RabbitMQ ready in {:?} (amqp {amqp_port}, http {http_port})",
        started.elapsed()
    );
    Rabbit {
        amqp_port,
        http_port,
        _dir: dir,
        _group: Mutex::new(group),
    }
}

/// A blocking GET with guest credentials: true on HTTP 200.
fn http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    // guest:guest
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

// -------------------------------------------------------------------- moto

/// An SQS API server (moto).
pub struct Moto {
    /// Its port.
    pub port: u16,
    group: Group,
    _dir: TempDir,
}

impl Moto {
    /// Start a moto server on a free port.
    pub fn start() -> Moto {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let log = dir.path().join("moto.log");
        let group = Group::start(
            Command::new("python3")
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .current_dir(dir.path()),
            &log,
        );
        wait_for_port(port, Duration::from_secs(30), "moto_server", &log);
        Moto {
            port,
            group,
            _dir: dir,
        }
    }

    /// Kill it.
    pub fn kill(&mut self) {
        self.group.kill();
    }

    /// Its endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

static MOTO: OnceLock<Moto> = OnceLock::new();

/// The test binary's shared moto server.
pub fn moto() -> &'static Moto {
    MOTO.get_or_init(Moto::start)
}

// ------------------------------------------------------------------- noida

/// A noida-db Kafka-protocol broker, its binary run directly.
pub struct Noida {
    /// Its Kafka port.
    pub port: u16,
    group: Group,
    _dir: TempDir,
}

fn noida_binary() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import noida_db,os;print(os.path.dirname(noida_db.__file__))",
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "noida-db is not installed (bash .ci/install-deps): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("noida-db")
}

impl Noida {
    /// Start a broker on a free port with a fresh data dir.
    pub fn start() -> Noida {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let log = dir.path().join("noida.log");
        let group = Group::start(
            Command::new(noida_binary())
                .args(["start", "--only", "kafka", "--host", "127.0.0.1"])
                .args(["--kafka-port", &port.to_string()])
                .arg("--data-dir")
                .arg(dir.path().join("data")),
            &log,
        );
        wait_for_port(port, Duration::from_secs(10), "noida-db", &log);
        Noida {
            port,
            group,
            _dir: dir,
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kill it.
    pub fn kill(&mut self) {
        self.group.kill();
    }
}

// ------------------------------------------------------------------- proxy

/// A loopback TCP proxy; `stop` closes the listener and every connection,
/// which is what the scaler sees when a broker goes away.
pub struct Proxy {
    /// The port to connect to.
    pub port: u16,
    stopped: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// Forward a free port to `127.0.0.1:target`.
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stopped = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (stop, all) = (stopped.clone(), streams.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else {
                            continue;
                        };
                        let mut all = all.lock().expect("lock");
                        for (mut from, mut to) in [
                            (
                                client.try_clone().expect("clone"),
                                upstream.try_clone().expect("clone"),
                            ),
                            (
                                upstream.try_clone().expect("clone"),
                                client.try_clone().expect("clone"),
                            ),
                        ] {
                            thread::spawn(move || {
                                let _ = std::io::copy(&mut from, &mut to);
                                let _ = to.shutdown(Shutdown::Both);
                            });
                        }
                        all.push(client);
                        all.push(upstream);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
            // The listener drops here: new connections are refused.
        });
        Proxy {
            port,
            stopped,
            streams,
        }
    }

    /// Refuse new connections and cut the open ones.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for stream in self.streams.lock().expect("lock").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Let the accept loop see the flag and drop its listener.
        thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

// -------------------------------------------------------------------- logs

/// Everything traced by the test binary (every level; lapin capped by the
/// scaler's own LOG_FILTER_CAPS, as in production).
pub fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer: Arc<Mutex<Vec<u8>>> = Arc::default();
        let mut filter = tracing_subscriber::EnvFilter::new("trace");
        for cap in backlog_scaler::source::broker::LOG_FILTER_CAPS {
            filter = filter.add_directive(cap.parse().expect("directive"));
        }
        let writer = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || LogWriter(writer.clone()))
            .try_init();
        buffer
    })
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
