//! The listener machinery every fake server (engine pod, dcgm-exporter) shares: an axum router served on a loopback port
//! that can be stopped (connections refused) and restarted on the same address.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Router;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long `restart` keeps retrying a bind that fails with "address in use".
const REBIND_FOR: Duration = Duration::from_secs(5);
/// How long `stop` waits for open connections to drain before cutting them.
const DRAIN_FOR: Duration = Duration::from_secs(2);

struct Running {
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// One router on one loopback address.
pub(crate) struct Endpoint {
    router: Router,
    addr: SocketAddr,
    running: Option<Running>,
    /// Named in the log line if the server task fails.
    what: &'static str,
}

impl Endpoint {
    /// Bind 127.0.0.1:0 (a free port) and serve `router`. Needs a Tokio runtime.
    pub(crate) fn start(router: Router, what: &'static str) -> io::Result<Endpoint> {
        let listener = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let addr = listener.local_addr()?;
        let running = Some(serve(listener, router.clone(), what));
        Ok(Endpoint {
            router,
            addr,
            running,
            what,
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Close the listening socket; in-flight requests get up to two seconds to finish and idle
    /// keep-alive connections are closed.
    pub(crate) async fn stop(&mut self) {
        if let Some(Running { shutdown, mut task }) = self.running.take() {
            let _ = shutdown.send(());
            // axum drops the listener as soon as it sees the signal, then waits for connections.
            if tokio::time::timeout(DRAIN_FOR, &mut task).await.is_err() {
                task.abort();
                let _ = task.await;
            }
        }
    }

    /// Listen again on the same port (a stop plus a start when running).
    pub(crate) async fn restart(&mut self) -> io::Result<()> {
        self.stop().await;
        let deadline = tokio::time::Instant::now() + REBIND_FOR;
        let listener = loop {
            match bind(self.addr) {
                Ok(listener) => break listener,
                Err(e)
                    if e.kind() == io::ErrorKind::AddrInUse
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.running = Some(serve(listener, self.router.clone(), self.what));
        Ok(())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(Running { shutdown, task }) = self.running.take() {
            // Graceful: the server task closes the listener and exits on its own.
            let _ = shutdown.send(());
            drop(task);
        }
    }
}

/// SO_REUSEADDR lets `restart` take the port back while old connections sit in TIME_WAIT.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn serve(listener: TcpListener, router: Router, what: &'static str) -> Running {
    let (shutdown, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let server = axum::serve(listener, router).with_graceful_shutdown(async move {
            // A dropped sender also means shut down.
            let _ = rx.await;
        });
        if let Err(e) = server.await {
            tracing::warn!(error = %e, server = what, "fake exporter server failed");
        }
    });
    Running { shutdown, task }
}
