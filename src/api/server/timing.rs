//! The duration of each KEDA call, observed around the generated
//! `ExternalScalerServer` so the handlers stay as they are.
//!
//! The span runs from the request reaching the service (the router has read
//! its headers) until the response headers are ready: the request message
//! decoded, the handler answered (from the decision cache; a trigger's first
//! call may wait for its first reading, up to the cold-start budget), the
//! response about to be sent. For `StreamIsActive` that is the stream being
//! opened, once per stream, as `backlog_scaler_grpc_requests_total` counts
//! it. Recording is a histogram observation, no I/O. A call the client
//! cancels first is neither counted nor timed.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tonic::codegen::{Service, http};
use tonic::server::NamedService;

use crate::runtime::telemetry::Telemetry;

/// A gRPC service whose calls to KEDA's methods are timed.
#[derive(Debug, Clone)]
pub(super) struct Timed<S> {
    inner: S,
    telemetry: Arc<Telemetry>,
}

impl<S> Timed<S> {
    pub(super) fn new(inner: S, telemetry: Arc<Telemetry>) -> Timed<S> {
        Timed { inner, telemetry }
    }
}

impl<S: NamedService> NamedService for Timed<S> {
    const NAME: &'static str = S::NAME;
}

/// The method label for a request path `/<service>/<method>`: one of
/// [`Telemetry::grpc_methods`], or `None` for anything else (the generated
/// server answers UNIMPLEMENTED, and the call is not timed).
fn method_of(service: &str, path: &str) -> Option<&'static str> {
    let name = path
        .strip_prefix('/')?
        .strip_prefix(service)?
        .strip_prefix('/')?;
    Telemetry::grpc_methods()
        .iter()
        .copied()
        .find(|m| *m == name)
}

type Answer<R> = Pin<Box<dyn Future<Output = Result<R, Infallible>> + Send>>;

impl<S, B> Service<http::Request<B>> for Timed<S>
where
    S: Service<http::Request<B>, Error = Infallible> + NamedService,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = Infallible;
    type Future = Answer<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = method_of(S::NAME, request.uri().path());
        let started = Instant::now();
        let answer = self.inner.call(request);
        let telemetry = method.map(|_| self.telemetry.clone());
        Box::pin(async move {
            let response = answer.await;
            if let (Some(method), Some(telemetry)) = (method, telemetry) {
                telemetry.record_grpc_duration(method, started.elapsed());
            }
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Stands for the generated server: answers after `delay`.
    #[derive(Clone)]
    struct Slow {
        delay: Duration,
    }

    impl NamedService for Slow {
        const NAME: &'static str = "externalscaler.ExternalScaler";
    }

    impl Service<http::Request<()>> for Slow {
        type Response = http::Response<()>;
        type Error = Infallible;
        type Future = Answer<http::Response<()>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let delay = self.delay;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(http::Response::new(()))
            })
        }
    }

    fn request(path: &str) -> http::Request<()> {
        http::Request::builder()
            .uri(path)
            .body(())
            .expect("request")
    }

    /// The sum and count of the `method` series, if it has one.
    fn observed(telemetry: &Telemetry, method: &str) -> Option<(f64, u64)> {
        let text = telemetry.encode();
        let value = |suffix: &str| {
            let prefix = format!(
                "backlog_scaler_grpc_request_duration_seconds_{suffix}{{method=\"{method}\"}} "
            );
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .map(|v| v.parse::<f64>().expect("a number"))
        };
        Some((value("sum")?, value("count")? as u64))
    }

    #[test]
    fn only_kedas_methods_of_this_service_are_named() {
        let service = "externalscaler.ExternalScaler";
        for method in Telemetry::grpc_methods() {
            let path = format!("/{service}/{method}");
            assert_eq!(method_of(service, &path), Some(*method));
        }
        for path in [
            "/externalscaler.ExternalScaler/Other",
            "/grpc.health.v1.Health/Check",
            "/externalscaler.ExternalScalerX/IsActive",
            "externalscaler.ExternalScaler/IsActive",
            "/externalscaler.ExternalScaler/IsActive/x",
        ] {
            assert_eq!(method_of(service, path), None, "{path}");
        }
    }

    #[tokio::test]
    async fn each_call_is_observed_once_with_its_duration() {
        let telemetry = Arc::new(Telemetry::new());
        let mut timed = Timed::new(
            Slow {
                delay: Duration::from_millis(30),
            },
            telemetry.clone(),
        );
        assert_eq!(observed(&telemetry, "GetMetrics"), None);
        for _ in 0..2 {
            timed
                .call(request("/externalscaler.ExternalScaler/GetMetrics"))
                .await
                .expect("answer");
        }
        let (sum, count) = observed(&telemetry, "GetMetrics").expect("observed");
        assert_eq!(count, 2);
        assert!((0.06..2.0).contains(&sum), "{sum}");
        // An unknown method is answered but not timed.
        timed
            .call(request("/externalscaler.ExternalScaler/Other"))
            .await
            .expect("answer");
        assert_eq!(observed(&telemetry, "Other"), None);
        assert_eq!(observed(&telemetry, "IsActive"), None);
    }

    #[tokio::test]
    async fn a_call_dropped_before_it_answers_is_not_observed() {
        let telemetry = Arc::new(Telemetry::new());
        let mut timed = Timed::new(
            Slow {
                delay: Duration::from_secs(5),
            },
            telemetry.clone(),
        );
        let answer = timed.call(request("/externalscaler.ExternalScaler/IsActive"));
        assert!(
            tokio::time::timeout(Duration::from_millis(20), answer)
                .await
                .is_err()
        );
        assert_eq!(observed(&telemetry, "IsActive"), None);
    }
}
