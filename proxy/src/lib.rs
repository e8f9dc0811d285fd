//! # ratelane-proxy
//!
//! A Discord REST proxy on [`ratelane_tokio`]: bots in any language send their REST calls to
//! it instead of `https://discord.com` (discord.js `rest.api`, discordeno `proxy.baseUrl`,
//! twilight `ClientBuilder::proxy`, serenity `HttpBuilder::proxy`, JDA's base URL), and one
//! proxy owns every token's rate limits. Several proxies on one Redis share one budget per
//! token ([`Settings::redis`]).
//!
//! What it does with a request (the whole contract is in `docs/proxy.md`):
//!
//! * its limiter identity is a hash of its `Authorization` header (SHA-256, truncated; the token
//!   is never stored or logged), so one proxy serves many tokens, each with its own global
//!   limit, buckets and invalid-request budget; a request without one is limited under the
//!   identity `""`;
//! * it waits in the limiter, then goes upstream with its method, path, query, headers and body
//!   unchanged (a body up to [`Settings::buffer_limit`] is held so that the limiter can send it
//!   again after a 429; a larger one streams through and is sent at most once);
//! * the upstream answer comes back unchanged, streamed: status, headers (Discord's
//!   `X-RateLimit-*` included) and body;
//! * a request the limiter refuses is answered as Discord would answer it: a 429 with a JSON
//!   `retry_after` and the `Retry-After` header (`X-Ratelane-Refused` names the reason), or
//!   Discord's own last 429 when the limiter ran out of retries; a 503 with a JSON body while
//!   the proxy shuts down; a 502 when the upstream failed after the request may have been
//!   processed (it is never sent twice unless it is idempotent);
//! * `GET /metrics` (Prometheus text, the drivers' instruments) and `GET /healthz`.
//!
//! [`serve`] runs it on a listener until a shutdown signal, then answers what is in flight.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use ratelane::{BodyHints, Config, FailReason, Failure};
use ratelane_tokio::metrics::Metrics;
use ratelane_tokio::middleware::headers_of;
use ratelane_tokio::redis::{RedisSettings, RedisStore};
use ratelane_tokio::{Error, Options, RateLimiter, Reply, TransportError, WrittenBody, body_hints};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

/// The body of every answer the proxy sends: the upstream's, streamed, or its own.
pub type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where requests go: scheme, host and port, no path (`https://discord.com`).
    pub upstream: String,
    /// The limiter's settings (`Config::default()`: Discord, 50 requests per second per token).
    pub config: Config,
    /// Shared mode: the Redis URL and the store's settings. Every proxy of one fleet gives the
    /// same URL, prefix and settings.
    pub redis: Option<(String, RedisSettings)>,
    /// Request bodies up to this many bytes are held so that they can be sent again after a
    /// 429; larger ones are streamed and sent at most once.
    pub buffer_limit: usize,
    /// How long one upstream attempt may take (connect to the answer's headers).
    pub upstream_timeout: Duration,
    /// How long a shutdown waits for the requests in flight.
    pub grace: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        let mut config = Config::default();
        config.max_wait = Some(30 * ratelane::SECOND);
        Settings {
            upstream: "https://discord.com".into(),
            config,
            redis: None,
            buffer_limit: 1 << 20,
            upstream_timeout: Duration::from_secs(30),
            grace: Duration::from_secs(30),
        }
    }
}

/// The proxy's state: its limiter, instruments and upstream client.
struct App {
    limiter: RateLimiter,
    metrics: Arc<Metrics>,
    client: reqwest::Client,
    upstream: String,
    closing: AtomicBool,
    buffer_limit: usize,
}

/// The limiter identity of an `Authorization` header value: `t:` and the first 16 bytes of its
/// SHA-256, in hex. The same in every proxy, so a fleet shares one budget per token; the token
/// itself never leaves the request.
pub fn token_identity(authorization: &[u8]) -> String {
    let digest = Sha256::digest(authorization);
    let mut out = String::with_capacity(34);
    out.push_str("t:");
    for byte in &digest[..16] {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Runs the proxy on `listener` until `shutdown` completes, then stops accepting, answers
/// what is queued with a 503 (`closed`), lets the requests in flight finish (at most
/// `settings.grace`), writes what is left for Redis, and returns.
///
/// # Errors
/// An invalid limiter configuration, or a Redis URL that cannot be parsed.
pub async fn serve(
    listener: TcpListener,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let app = Arc::new(app(&settings)?);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let app = Arc::clone(&app);
                let service = service_fn(move |req| {
                    let app = Arc::clone(&app);
                    async move { Ok::<_, Infallible>(handle(&app, req).await) }
                });
                let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    app.closing.store(true, Ordering::SeqCst);
    // Queued requests fail with `closed` (their clients get the 503); the requests in flight
    // take their answers; idle connections are closed.
    let drained = async {
        tokio::join!(app.limiter.close(), graceful.shutdown());
    };
    let _ = tokio::time::timeout(settings.grace, drained).await;
    Ok(())
}

/// Installs ring as the process's TLS provider (reqwest is built without a default one), once;
/// call it before building a `reqwest::Client` yourself in a process that runs a proxy. (ring,
/// not aws-lc-rs: it builds in a fraction of the time; rustls 0.23.48 deprecates it only for
/// lacking post-quantum key exchange.)
pub fn install_tls_provider() {
    #[allow(deprecated)]
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn app(settings: &Settings) -> Result<App, Box<dyn std::error::Error + Send + Sync>> {
    install_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(settings.upstream_timeout)
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let metrics = Arc::new(Metrics::new());
    let mut builder = RateLimiter::builder(settings.config.clone()).observer(metrics.clone());
    if let Some((url, redis)) = &settings.redis {
        builder = builder.shared(Arc::new(RedisStore::open(url, redis.clone())?));
    }
    Ok(App {
        limiter: builder.build()?,
        metrics,
        client,
        upstream: settings.upstream.trim_end_matches('/').to_string(),
        closing: AtomicBool::new(false),
        buffer_limit: settings.buffer_limit,
    })
}

async fn handle(app: &App, req: Request<Incoming>) -> Response<Body> {
    if req.method() == Method::GET {
        match req.uri().path() {
            "/healthz" => {
                return if app.closing.load(Ordering::SeqCst) {
                    json(StatusCode::SERVICE_UNAVAILABLE, &[], r#"{"status": "closing"}"#.into())
                } else {
                    json(StatusCode::OK, &[], r#"{"status": "ok"}"#.into())
                };
            }
            "/metrics" => {
                let text = app.metrics.render(&app.limiter);
                let mut response = Response::new(full(text.into()));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
                );
                return response;
            }
            _ => {}
        }
    }
    if app.closing.load(Ordering::SeqCst) {
        return closing();
    }
    forward(app, req).await
}

/// Headers that belong to one connection, not to the request or answer (RFC 9110 §7.6.1), and
/// `Host`, which the upstream URL sets.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "te" | "trailer" | "upgrade"
            | "proxy-authorization" | "proxy-authenticate" | "host"
    )
}

fn forwarded_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !hop_by_hop(name) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The request's body as the attempts use it.
enum Outgoing {
    /// Held whole: every attempt sends it.
    Held(Bytes),
    /// Streamed: the first attempt takes it.
    Stream(Option<Incoming>),
}

async fn forward(app: &App, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let identity = parts.headers.get(header::AUTHORIZATION).map(|v| token_identity(v.as_bytes()));
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let url = format!("{}{}", app.upstream, target);
    let headers = forwarded_headers(&parts.headers);
    let length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut outgoing = if length.is_some_and(|n| n > app.buffer_limit as u64) {
        Outgoing::Stream(Some(body))
    } else {
        match Limited::new(body, app.buffer_limit).collect().await {
            Ok(collected) => Outgoing::Held(collected.to_bytes()),
            Err(_) => {
                let body = format!(r#"{{"message": "ratelane-proxy: request body unreadable or over {} bytes", "code": 0}}"#, app.buffer_limit);
                return json(StatusCode::PAYLOAD_TOO_LARGE, &[], body);
            }
        }
    };
    let options = Options { identity, ..Options::default() };
    let last_429: Arc<Mutex<Option<Saved>>> = Arc::new(Mutex::new(None));
    let method = parts.method.clone();
    let result = app
        .limiter
        .run_attempts(method.as_str(), &target, &options, |attempt| {
            // The body reports the attempt written when the client starts sending it (after
            // the request's headers): the global window then counts from that moment.
            let body = match &mut outgoing {
                Outgoing::Held(bytes) => Some(reqwest::Body::wrap(WrittenBody::new(Full::new(bytes.clone()), attempt))),
                Outgoing::Stream(stream) => stream.take().map(|s| reqwest::Body::wrap(WrittenBody::new(s, attempt))),
            };
            let request =
                body.map(|body| app.client.request(method.clone(), url.as_str()).headers(headers.clone()).body(body));
            let saved = Arc::clone(&last_429);
            async move {
                let Some(request) = request else {
                    return Err(SendError::NotReplayable);
                };
                match request.send().await {
                    Ok(response) => Ok(Upstream { response, saved }),
                    Err(e) => Err(SendError::Upstream(e)),
                }
            }
        })
        .await;
    match result {
        Ok(upstream) => answer(upstream.response),
        Err(error) => refusal(&error, take(&last_429)),
    }
}

fn take(saved: &Mutex<Option<Saved>>) -> Option<Saved> {
    saved.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The upstream answer, streamed back with its status and headers (hop-by-hop ones aside).
fn answer(response: reqwest::Response) -> Response<Body> {
    let response: http_response::Response<reqwest::Body> = response.into();
    let (parts, body) = response.into_parts();
    let mut out = Response::new(body.map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>).boxed());
    *out.status_mut() = parts.status;
    *out.headers_mut() = forwarded_headers(&parts.headers);
    out
}

// `http` is hyper's; named apart so that the conversion above reads as what it is.
use hyper::http as http_response;

/// Discord's last 429 of a request, kept whole to hand back when the limiter gives up.
#[derive(Debug, Clone)]
struct Saved {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// An upstream answer as the limiter reads it; a 429 is also kept in `saved`.
struct Upstream {
    response: reqwest::Response,
    saved: Arc<Mutex<Option<Saved>>>,
}

impl Reply for Upstream {
    fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    fn headers(&self) -> Vec<(String, String)> {
        headers_of(self.response.headers())
    }

    async fn read_hints(self) -> (Self, BodyHints) {
        let Upstream { response, saved } = self;
        let response: http_response::Response<reqwest::Body> = response.into();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        let hints = body_hints(&bytes);
        if parts.status == StatusCode::TOO_MANY_REQUESTS {
            let copy = Saved { status: parts.status, headers: parts.headers.clone(), body: bytes.clone() };
            *saved.lock().unwrap_or_else(|p| p.into_inner()) = Some(copy);
        }
        let response = reqwest::Response::from(http_response::Response::from_parts(parts, bytes));
        (Upstream { response, saved }, hints)
    }
}

#[derive(Debug)]
enum SendError {
    Upstream(reqwest::Error),
    /// The limiter wants a streamed body sent again.
    NotReplayable,
}

impl TransportError for SendError {
    fn failure(&self) -> Option<Failure> {
        match self {
            SendError::Upstream(e) => e.failure(),
            SendError::NotReplayable => None,
        }
    }
}

/// The answer to a request the limiter refused or could not complete.
fn refusal(error: &Error<SendError>, last_429: Option<Saved>) -> Response<Body> {
    let code = error.code();
    let refused = [("x-ratelane-refused", code)];
    match error {
        Error::Rejected(r) => match &r.reason {
            FailReason::Closed => closing(),
            FailReason::MaxWaitExceeded { predicted_wait } => too_many(*predicted_wait, code),
            FailReason::Deferred { .. } | FailReason::DeadlineExceeded { .. } | FailReason::InsufficientCapacity { .. } => {
                too_many(0, code)
            }
            FailReason::RetriesExhausted { .. } => match last_429 {
                Some(saved) => discord_429(saved, code),
                None => too_many(0, code),
            },
            FailReason::Unauthorized => {
                json(StatusCode::UNAUTHORIZED, &refused, r#"{"message": "401: Unauthorized", "code": 0}"#.into())
            }
            FailReason::MaybeSent | FailReason::NetworkError { .. } => {
                let message = format!("ratelane-proxy: the upstream failed ({})", r.reason);
                json(StatusCode::BAD_GATEWAY, &refused, message_body(&message, code))
            }
        },
        Error::Usage(e) if e.code() == "limiter_closed" => closing(),
        Error::Usage(e) => json(StatusCode::BAD_REQUEST, &refused, message_body(&e.to_string(), code)),
        Error::Send(SendError::NotReplayable) => match last_429 {
            Some(saved) => discord_429(saved, "not_replayable"),
            None => too_many(0, "not_replayable"),
        },
        Error::Send(SendError::Upstream(e)) => {
            json(StatusCode::BAD_GATEWAY, &refused, message_body(&format!("ratelane-proxy: upstream error: {e}"), code))
        }
    }
}

fn message_body(message: &str, code: &str) -> String {
    serde_json::json!({ "message": message, "code": 0, "ratelane": code }).to_string()
}

/// Discord's own 429, as it came, marked with the reason the proxy gave up.
fn discord_429(saved: Saved, code: &str) -> Response<Body> {
    let mut response = Response::new(full(saved.body));
    *response.status_mut() = saved.status;
    *response.headers_mut() = forwarded_headers(&saved.headers);
    if let Ok(value) = HeaderValue::from_str(code) {
        response.headers_mut().insert("x-ratelane-refused", value);
    }
    response
}

/// A 429 as Discord writes one: `retry_after` in seconds (float) in the JSON body, the
/// `Retry-After` header rounded up, scope `user`, and `X-Ratelane-Refused` with the reason.
fn too_many(wait: ratelane::Nanos, code: &str) -> Response<Body> {
    let seconds = wait as f64 / 1e9;
    let body = serde_json::json!({
        "message": "You are being rate limited.",
        "retry_after": (seconds * 1000.0).ceil() / 1000.0,
        "global": false,
        "ratelane": code,
    })
    .to_string();
    let retry_after = format!("{}", seconds.ceil().max(1.0) as u64);
    json(
        StatusCode::TOO_MANY_REQUESTS,
        &[("retry-after", retry_after.as_str()), ("x-ratelimit-scope", "user"), ("x-ratelane-refused", code)],
        body,
    )
}

/// The answer while the proxy shuts down.
fn closing() -> Response<Body> {
    let body = r#"{"message": "ratelane-proxy is shutting down: send the request again (to another proxy)", "code": 0, "ratelane": "closed"}"#;
    json(StatusCode::SERVICE_UNAVAILABLE, &[("retry-after", "1"), ("x-ratelane-refused", "closed")], body.into())
}

fn json(status: StatusCode, headers: &[(&str, &str)], body: String) -> Response<Body> {
    let mut response = Response::new(full(body.into()));
    *response.status_mut() = status;
    let map = response.headers_mut();
    map.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(*name), HeaderValue::from_str(value)) {
            map.insert(name, value);
        }
    }
    response
}

fn full(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// Binds `addr` (port 0: a free one) and returns the listener and the address it took.
///
/// # Errors
/// The bind failed.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}
