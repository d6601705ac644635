//! Graceful shutdown of the real binary (issue 14 item 4): on SIGTERM
//! `/readyz` goes 503 first, new triggers are refused while registered ones
//! keep answering, an in-flight call finishes, the open StreamIsActive
//! stream then ends with OK, and the process exits 0.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backlog_scaler::proto::external_scaler_client::ExternalScalerClient;
use common::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tonic::Code;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_backlog-scaler");

/// `serve` on free loopback ports, its log collected.
struct Serve {
    child: Child,
    grpc: String,
    http: String,
    log: Arc<Mutex<String>>,
}

impl Serve {
    fn start() -> Serve {
        let child = Command::new(BIN)
            .args(["--log-format", "json", "--log-level", "info", "serve"])
            .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
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

    fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
    }

    async fn client(&self) -> ExternalScalerClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.grpc))
            .expect("uri")
            .connect()
            .await
            .expect("connects");
        ExternalScalerClient::new(channel)
    }

    async fn readyz(&self) -> u16 {
        match reqwest::get(format!("http://{}/readyz", self.http)).await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A listener that accepts and never answers: a trigger on it is in its
/// cold start for the whole budget.
async fn silent_pod() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    format!("http://{addr}/metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_turns_readiness_off_then_ends_the_stream_ok_and_exits_zero() {
    let pods = pods(&[(30.0, 0.0)]).await;
    let targets = targets(&pods);
    let serve = Serve::start();
    let mut client = serve.client().await;
    assert_eq!(serve.readyz().await, 200);
    let busy = object(
        "busy",
        &[
            ("vllmTargets", targets.as_str()),
            ("targetBacklogPerReplica", "10"),
            ("pollIntervalSeconds", "1"),
        ],
    );
    client
        .get_metric_spec(busy.clone())
        .await
        .expect("registered");
    let mut stream = client
        .stream_is_active(busy.clone())
        .await
        .expect("stream opens")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("a push within 10 s")
        .expect("no error")
        .expect("a message");
    assert!(first.result, "W = 30 is active");

    // A call in flight at SIGTERM: a new trigger waiting out its cold start.
    let cold = object(
        "cold",
        &[
            ("vllmTargets", silent_pod().await.as_str()),
            ("targetBacklogPerReplica", "10"),
        ],
    );
    let in_flight = {
        let mut client = client.clone();
        let cold = cold.clone();
        tokio::spawn(async move { client.get_metrics(metrics_request(&cold, "")).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let terminated = Instant::now();
    serve.terminate();
    let stream_end = tokio::spawn(async move {
        let end = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    other => return other.map(|_| ()),
                }
            }
        })
        .await;
        (end, Instant::now())
    });

    // Readiness goes false first, while the stream is still open.
    let not_ready = eventually(Duration::from_secs(3), || async {
        (serve.readyz().await == 503).then(Instant::now)
    })
    .await
    .expect("/readyz answers 503 after SIGTERM");
    assert!(
        !stream_end.is_finished(),
        "the stream ended before readiness"
    );

    // Draining: the registered trigger still answers, a new one is refused
    // (retryable: KEDA's next call reaches the replica that stays).
    let value = client
        .get_metrics(metrics_request(&busy, ""))
        .await
        .expect("a registered trigger answers while draining");
    assert_eq!(value.into_inner().metric_values[0].metric_value_float, 30.0);
    let refused = client
        .get_metric_spec(object("late", &[("vllmTargets", targets.as_str())]))
        .await
        .expect_err("a new trigger is refused");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("shutting down"),
        "{}",
        refused.message()
    );

    // The in-flight call finished with its own answer, not a cut connection.
    let answered = in_flight.await.expect("task").expect_err("cold start");
    assert_eq!(answered.code(), Code::Unavailable, "{answered:?}");
    assert!(
        answered.message().contains("cold-start budget"),
        "{}",
        answered.message()
    );

    // Then the stream ends with OK, and the process exits 0.
    let (end, ended_at) = stream_end.await.expect("task");
    let end = end.expect("the stream ends within 20 s");
    assert!(end.is_ok(), "the stream ended with {end:?}");
    assert!(
        ended_at > not_ready,
        "readiness went false before the stream ended"
    );
    let mut serve = serve;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "still running:\n{}", serve.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", serve.log());
    let took = terminated.elapsed();
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "drain took {took:?}"
    );
    let log = serve.log();
    for line in [
        "not ready; new triggers refused",
        "\"poller stopped\"",
        "pollers stopped",
    ] {
        assert!(log.contains(line), "{line}:\n{log}");
    }
}
