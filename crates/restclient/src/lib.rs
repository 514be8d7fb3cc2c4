//! How rollwright's components build their `kube` clients, as client-go's `rest` package builds
//! upstream's: where the cluster's configuration comes from ([`config`]: a kubeconfig, or the
//! ServiceAccount mounted in a pod, as `rest.InClusterConfig`), the client-side rate limit every
//! request waits on ([`flowcontrol`], [`throttle`]: `flowcontrol.NewTokenBucketRateLimiter`) and
//! the rest client's Prometheus metrics ([`metrics`]: `rest_client_*`).
//!
//! The controllers, the scheduler and the simulated kubelets run against a real cluster as
//! upstream's do only if they also pace themselves as upstream's do: kube-controller-manager
//! sends at most 20 requests a second (burst 30) per controller by default, and at hundreds of
//! pods that, not readiness, sets a rollout's pace.

#![warn(missing_docs)]

pub mod config;
pub mod flowcontrol;
pub mod metrics;
pub mod throttle;

pub use config::{ConfigError, InCluster, Source};
pub use flowcontrol::{Limit, RateLimiter};
pub use throttle::ThrottleLayer;

/// A client for `config` whose every request (clones included) waits on one limiter of `limit`
/// (`None`: no limit) and is counted in [`metrics`], as a client-go clientset built from a
/// `rest.Config` with that QPS and burst.
pub fn client(config: kube::Config, limit: Option<Limit>) -> Result<kube::Client, kube::Error> {
    let layer = ThrottleLayer::new(
        limit.map(RateLimiter::new),
        metrics::host(&config.cluster_url),
    );
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

/// A client with a limiter of its own (of `limit`; `None`: none) that sends through `base`, sharing
/// its connections and credentials: as kube-controller-manager gives each controller a clientset
/// (and so a limiter) of its own on one configuration, without a connection pool each. `host`
/// labels its metrics. `base` itself should be unlimited and uncounted.
pub fn limited(base: &kube::Client, limit: Option<Limit>, host: &str) -> kube::Client {
    let layer = ThrottleLayer::new(limit.map(RateLimiter::new), host);
    kube::client::ClientBuilder::new(
        tower::Layer::layer(
            &layer,
            Through {
                client: base.clone(),
                latency: std::time::Duration::ZERO,
            },
        ),
        base.default_namespace(),
    )
    .build()
}

/// A client that sends each request through `base` after waiting `latency` on tokio's clock: a
/// control plane whose every request takes that much longer than `base`'s. `whatif` rehearses a
/// cluster slower than its own embedded control plane this way; on its accelerated clock the
/// wait costs simulated time, not real time. A watch waits once, when it starts.
pub fn delayed(base: &kube::Client, latency: std::time::Duration) -> kube::Client {
    kube::client::ClientBuilder::new(
        Through {
            client: base.clone(),
            latency,
        },
        base.default_namespace(),
    )
    .build()
}

/// A client as the service another client's stack ends in, each request sent after `latency`
/// (none but for [`delayed`]).
#[derive(Clone)]
struct Through {
    client: kube::Client,
    latency: std::time::Duration,
}

impl tower::Service<http::Request<kube::client::Body>> for Through {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, kube::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), kube::Error>> {
        // `send` waits for the inner client's readiness itself.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let (client, latency) = (self.client.clone(), self.latency);
        Box::pin(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            client.send(request).await
        })
    }
}
