//! One fake engine pod: an axum server on 127.0.0.1 answering `GET /metrics` like vLLM's API
//! server (or SGLang, Triton, TGI: [`FakeVllmPod::set_engine`]), with switches for the failure
//! modes a scraper must survive (bad bodies, error statuses, a pod that goes away and comes back
//! on the same address).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::engine::{EngineKind, engine_content_type, render_engine_metrics};
use super::http::Endpoint;
use super::state::{ModelLoad, PodState};

#[derive(Default)]
struct Shared {
    state: Mutex<PodState>,
    engine: Mutex<EngineKind>,
    body_override: Mutex<Option<String>>,
    status_override: Mutex<Option<u16>>,
    scrapes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not take every later scrape down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fake engine pod: an HTTP server on loopback serving GET /metrics (and 404 elsewhere).
///
/// It speaks vLLM by default; [`set_engine`](Self::set_engine) makes the same state render as
/// SGLang, Triton or TGI (body and `Content-Type`).
pub struct FakeVllmPod {
    shared: Arc<Shared>,
    endpoint: Endpoint,
}

impl FakeVllmPod {
    /// Bind 127.0.0.1:0 (a free port) and serve.
    pub async fn start() -> io::Result<FakeVllmPod> {
        Self::start_with_state(PodState::default()).await
    }

    /// Like [`start`](Self::start) with a prepared state (e.g. a pinned start time for
    /// byte-exact expectations).
    pub async fn start_with_state(state: PodState) -> io::Result<FakeVllmPod> {
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            ..Shared::default()
        });
        let router = Router::new()
            .route("/metrics", get(metrics))
            .fallback(not_found)
            .with_state(shared.clone());
        let endpoint = Endpoint::start(router, "fake engine pod")?;
        Ok(FakeVllmPod { shared, endpoint })
    }

    /// The bound address (kept across [`stop`](Self::stop) / [`restart`](Self::restart)).
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr()
    }

    /// `"http://127.0.0.1:PORT/metrics"`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addr())
    }

    /// Serve `kind`'s exposition of the same state from the next scrape on (default
    /// [`EngineKind::Vllm`]).
    pub fn set_engine(&self, kind: EngineKind) {
        *lock(&self.shared.engine) = kind;
    }

    /// The engine currently served.
    pub fn engine(&self) -> EngineKind {
        *lock(&self.shared.engine)
    }

    /// [`PodState::set_load`] under the lock.
    pub fn set_load(&self, model: &str, load: ModelLoad) {
        lock(&self.shared.state).set_load(model, load);
    }

    /// Change the state under its lock; the next scrape sees every change made in `f` at once.
    pub fn update(&self, f: impl FnOnce(&mut PodState)) {
        f(&mut lock(&self.shared.state));
    }

    /// A copy of the current state.
    pub fn state(&self) -> PodState {
        lock(&self.shared.state).clone()
    }

    /// The body a scrape would get right now (ignoring overrides), for the current engine.
    pub fn render(&self) -> String {
        let kind = self.engine();
        render_engine_metrics(kind, &lock(&self.shared.state))
    }

    /// Serve this exact body instead of the rendered one (malformed-data tests); None restores.
    pub fn set_body_override(&self, body: Option<String>) {
        *lock(&self.shared.body_override) = body;
    }

    /// Respond with this HTTP status instead (e.g. 500); None restores.
    ///
    /// The body is the override body if one is set, else the status' reason phrase, as uvicorn
    /// sends for an unhandled error.
    pub fn set_status_override(&self, status: Option<u16>) {
        *lock(&self.shared.status_override) = status;
    }

    /// `GET /metrics` requests answered so far (whatever the status), to check scrape caching.
    pub fn scrapes(&self) -> u64 {
        self.shared.scrapes.load(Ordering::Relaxed)
    }

    /// Whether the pod is listening (false between `stop` and `restart`).
    pub fn is_running(&self) -> bool {
        self.endpoint.is_running()
    }

    /// Stop listening (connections refused) but keep state.
    ///
    /// Returns once the listening socket is closed; in-flight requests get up to two seconds to
    /// finish and idle keep-alive connections are closed.
    pub async fn stop(&mut self) {
        self.endpoint.stop().await;
    }

    /// Listen again on the same port with the same state.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.endpoint.restart().await
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    shared.scrapes.fetch_add(1, Ordering::Relaxed);
    let status = *lock(&shared.status_override);
    let body = lock(&shared.body_override).clone();
    let kind = *lock(&shared.engine);
    match status {
        Some(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = body.unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_owned());
            let plain = [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )];
            (status, plain, body).into_response()
        }
        None => {
            let state = lock(&shared.state);
            let content_type = [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(engine_content_type(kind, &state)),
            )];
            let body = body.unwrap_or_else(|| render_engine_metrics(kind, &state));
            drop(state);
            (StatusCode::OK, content_type, body).into_response()
        }
    }
}

/// FastAPI's answer for an unknown route.
async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        r#"{"detail":"Not Found"}"#,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Reply {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    /// A bare HTTP/1.1 GET, so the test depends on nothing but the socket.
    async fn http_get(addr: SocketAddr, path: &str) -> io::Result<Reply> {
        let mut stream = TcpStream::connect(addr).await?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let text = String::from_utf8(raw).expect("utf-8 response");
        let (head, body) = text.split_once("\r\n\r\n").expect("header/body separator");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().expect("status line");
        let status = status_line
            .split(' ')
            .nth(1)
            .expect("status code")
            .parse()
            .expect("numeric status");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect::<Vec<_>>();
        let reply = Reply {
            status,
            headers,
            body: body.to_owned(),
        };
        if let Some(len) = reply.header("content-length") {
            assert_eq!(
                len.parse::<usize>().expect("content-length"),
                reply.body.len()
            );
        }
        Ok(reply)
    }

    fn load(waiting: f64, running: f64) -> ModelLoad {
        ModelLoad {
            waiting,
            running,
            kv_cache_usage: 0.25,
        }
    }

    #[tokio::test]
    async fn serves_metrics_stops_restarts_and_overrides() {
        let mut pod = FakeVllmPod::start().await.expect("start");
        let addr = pod.addr();
        assert!(addr.ip().is_loopback() && addr.port() != 0);
        assert_eq!(
            pod.metrics_url(),
            format!("http://127.0.0.1:{}/metrics", addr.port())
        );

        pod.set_load("m", load(7.0, 32.0));
        let reply = http_get(addr, "/metrics").await.expect("scrape");
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        assert!(
            reply
                .body
                .contains("vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 7.0\n")
        );
        assert!(
            reply
                .body
                .contains("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 32.0\n")
        );
        assert_eq!(reply.body, pod.render());

        let other = http_get(addr, "/health").await.expect("404 path");
        assert_eq!(other.status, 404);
        assert_eq!(other.body, r#"{"detail":"Not Found"}"#);

        pod.set_status_override(Some(500));
        let failed = http_get(addr, "/metrics").await.expect("500 scrape");
        assert_eq!(failed.status, 500);
        assert_eq!(failed.body, "Internal Server Error");
        pod.set_status_override(None);

        pod.set_body_override(Some(
            "vllm:num_requests_waiting{model_name=\"m\" 1\n".to_owned(),
        ));
        let garbled = http_get(addr, "/metrics").await.expect("override scrape");
        assert_eq!(garbled.status, 200);
        assert_eq!(
            garbled.body,
            "vllm:num_requests_waiting{model_name=\"m\" 1\n"
        );
        pod.set_body_override(None);
        assert!(
            http_get(addr, "/metrics")
                .await
                .expect("restored")
                .body
                .contains(" 7.0\n")
        );
        assert_eq!(pod.scrapes(), 4);

        pod.stop().await;
        assert!(!pod.is_running());
        let refused = TcpStream::connect(addr)
            .await
            .expect_err("stopped pod must refuse");
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);

        // State changes while down are visible after the restart.
        pod.update(|s| s.record_request("m", 0.05, 1.2, 100, 20));
        pod.restart().await.expect("restart");
        assert_eq!(pod.addr(), addr);
        let back = http_get(addr, "/metrics")
            .await
            .expect("scrape after restart");
        assert_eq!(back.status, 200);
        assert!(
            back.body
                .contains("vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 7.0\n")
        );
        assert!(back.body.contains(
            "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} 1.0\n"
        ));

        // Restarting a running pod is a stop plus a start.
        pod.restart().await.expect("second restart");
        assert_eq!(
            http_get(addr, "/metrics").await.expect("scrape").status,
            200
        );
    }

    #[tokio::test]
    async fn drop_releases_the_port() {
        let pod = FakeVllmPod::start().await.expect("start");
        let addr = pod.addr();
        drop(pod);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            match TcpStream::connect(addr).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                _ if tokio::time::Instant::now() > deadline => panic!("port still open after drop"),
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
}
