//! The drivers' instruments in Prometheus text (feature `prometheus`): the same names, units
//! and attributes as the Python (`ratelane.otel`) and JavaScript OpenTelemetry instruments,
//! spelled as OpenTelemetry's Prometheus exporter spells them (dots become `_`, the unit is
//! a suffix, counters end in `_total`):
//!
//! | Prometheus name | type | what, and its labels |
//! | --- | --- | --- |
//! | `ratelane_requests_total` | counter | the core's decisions, by `ratelane_outcome`: `sent` (each `Send`), `answered`, `retried`, `failed` (with `error_type`, the stable code), `cancelled` |
//! | `ratelane_wait_duration_seconds` | histogram | time in the limiter before each send (from the enqueue, or from the answer the core retries) |
//! | `ratelane_queue_depth` | gauge | waiting to be sent: queued + reserving |
//! | `ratelane_requests_in_flight` | gauge | sent and not yet answered |
//! | `ratelane_rate_limited_total` | counter | 429 answers, by `ratelane_scope`: `bucket`, `global`, `shared`, `sub_limit`, `edge` |
//! | `ratelane_invalid_requests_used` | gauge | the invalid-request budget used (401, 403, non-shared 429 in the window) |
//! | `ratelane_store_unavailable_total` | counter | shared mode: the store did not answer (one per outage step) |
//! | `ratelane_store_recovered_total` | counter | shared mode: the store answered again |
//!
//! ```no_run
//! # fn demo() -> Result<(), ratelane::Error> {
//! use std::sync::Arc;
//! use ratelane_tokio::{RateLimiter, metrics::Metrics};
//!
//! let metrics = Arc::new(Metrics::new());
//! let limiter = RateLimiter::builder(ratelane::Config::default()).observer(metrics.clone()).build()?;
//! // On each scrape:
//! let text = metrics.render(&limiter);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use ratelane::{Disposition, Nanos, Observation, Output, RequestId};

use crate::driver::{Observer, RateLimiter};

/// Bucket boundaries (seconds) of `ratelane_wait_duration_seconds`: the other drivers' advice,
/// from "sent at once" to the minutes a global pause or an invalid-request stop can hold a
/// request.
pub const WAIT_BOUNDARIES: [f64; 15] =
    [0.0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

type Labels = Vec<(&'static str, &'static str)>;

/// The instruments of one limiter, and its registry. Give it to
/// [`Builder::observer`](crate::Builder::observer); render on each scrape.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    wait: Histogram,
    rate_limited: Family<Labels, Counter>,
    queue_depth: Gauge,
    in_flight: Gauge,
    invalid_used: Gauge,
    store_unavailable: Counter,
    store_recovered: Counter,
    /// Request id -> when it last became ready to wait (its enqueue, or a retried answer).
    since: Mutex<HashMap<RequestId, Nanos>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// The instruments, registered in a registry of their own.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        let wait = Histogram::new(WAIT_BOUNDARIES);
        let rate_limited = Family::<Labels, Counter>::default();
        let (queue_depth, in_flight, invalid_used) = (Gauge::default(), Gauge::default(), Gauge::default());
        let (store_unavailable, store_recovered) = (Counter::default(), Counter::default());
        registry.register(
            "ratelane_requests",
            "The core's decisions per request, by ratelane_outcome (sent, answered, retried, failed with error_type, cancelled)",
            requests.clone(),
        );
        registry.register_with_unit(
            "ratelane_wait_duration",
            "Time a request waited in the limiter before each send",
            Unit::Seconds,
            wait.clone(),
        );
        registry.register("ratelane_queue_depth", "Requests waiting to be sent (queued, or waiting for a reservation)", queue_depth.clone());
        registry.register("ratelane_requests_in_flight", "Requests sent and not yet answered", in_flight.clone());
        registry.register("ratelane_rate_limited", "429 answers, by ratelane_scope", rate_limited.clone());
        registry.register(
            "ratelane_invalid_requests_used",
            "The invalid-request budget used: 401, 403 and non-shared 429 answers within the window",
            invalid_used.clone(),
        );
        registry.register(
            "ratelane_store_unavailable",
            "Shared mode: reservations the store did not answer (one per outage step)",
            store_unavailable.clone(),
        );
        registry.register("ratelane_store_recovered", "Shared mode: the store answered again", store_recovered.clone());
        Metrics {
            registry,
            requests,
            wait,
            rate_limited,
            queue_depth,
            in_flight,
            invalid_used,
            store_unavailable,
            store_recovered,
            since: Mutex::new(HashMap::new()),
        }
    }

    /// The registry, to register more instruments beside these.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Reads the gauges from `limiter` and renders every instrument as Prometheus text
    /// (OpenMetrics, `# EOF` at the end: serve it as `application/openmetrics-text;
    /// version=1.0.0; charset=utf-8`).
    pub fn render(&self, limiter: &RateLimiter) -> String {
        self.queue_depth.set(gauge(limiter.queued() + limiter.reserving()));
        self.in_flight.set(gauge(limiter.in_flight()));
        self.invalid_used.set(i64::from(limiter.invalid_requests()));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    fn count(&self, labels: Labels) {
        self.requests.get_or_create(&labels).inc();
    }

    fn since(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Nanos>> {
        self.since.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Observer for Metrics {
    fn enqueued(&self, id: RequestId, now: Nanos) {
        self.since().insert(id, now);
    }

    fn output(&self, output: &Output, now: Nanos) {
        match output {
            Output::Send(id) => {
                self.count(vec![("ratelane_outcome", "sent")]);
                if let Some(since) = self.since().remove(id) {
                    self.wait.observe(now.saturating_sub(since) as f64 / 1e9);
                }
            }
            Output::Fail(id, reason) => {
                self.since().remove(id);
                self.count(vec![("ratelane_outcome", "failed"), ("error_type", reason.code())]);
            }
            Output::Observe(Observation::RateLimited { scope, .. }) => {
                self.rate_limited.get_or_create(&vec![("ratelane_scope", scope.as_str())]).inc();
            }
            Output::Observe(Observation::StoreUnavailable { .. }) => {
                self.store_unavailable.inc();
            }
            Output::Observe(Observation::StoreRecovered) => {
                self.store_recovered.inc();
            }
            _ => {}
        }
    }

    fn disposition(&self, id: RequestId, disposition: Disposition, now: Nanos) {
        match disposition {
            Disposition::Complete => {
                self.since().remove(&id);
                self.count(vec![("ratelane_outcome", "answered")]);
            }
            Disposition::Retry => {
                self.since().insert(id, now);
                self.count(vec![("ratelane_outcome", "retried")]);
            }
            Disposition::Failed => {} // its Fail output is counted when drained
        }
    }

    fn cancelled(&self, id: RequestId, _now: Nanos) {
        self.since().remove(&id);
        self.count(vec![("ratelane_outcome", "cancelled")]);
    }
}
