//! `ratelane-proxy`: a Discord REST proxy on ratelane. `--help` lists the flags; each has an
//! environment variable (`RATELANE_PROXY_*`). See `docs/proxy.md`.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use ratelane::shared::{OnUnavailable, SharedConfig};
use ratelane_proxy::{Settings, bind, serve};
use ratelane_tokio::redis::RedisSettings;

/// A Discord REST proxy: point your bots' REST base URL at it; it owns every token's rate
/// limits (shared with the other proxies on the same Redis).
#[derive(Debug, Parser)]
#[command(name = "ratelane-proxy", version)]
struct Args {
    /// Address to listen on (port 0: a free port, printed at start).
    #[arg(long, env = "RATELANE_PROXY_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Where requests go: scheme, host and port (http:// for a local test server).
    #[arg(long, env = "RATELANE_PROXY_UPSTREAM", default_value = "https://discord.com")]
    upstream: String,
    /// Shared mode: a Redis URL (redis://host:port/db) shared by every proxy of the fleet.
    #[arg(long, env = "RATELANE_PROXY_REDIS")]
    redis: Option<String>,
    /// Shared mode: the key prefix, the same for the whole fleet (with a Redis Cluster hash tag).
    #[arg(long, env = "RATELANE_PROXY_REDIS_PREFIX", default_value = "{ratelane:proxy}:")]
    redis_prefix: String,
    /// Shared mode: milliseconds to wait for Redis's answer before treating it as unavailable.
    #[arg(long, env = "RATELANE_PROXY_REDIS_TIMEOUT_MS", default_value_t = 250)]
    redis_timeout_ms: u64,
    /// Shared mode: while Redis does not answer, send on this proxy's share of the limits
    /// (fail-open) or wait for Redis (fail-closed).
    #[arg(long, env = "RATELANE_PROXY_ON_UNAVAILABLE", value_enum, default_value_t = Policy::FailOpen)]
    on_unavailable: Policy,
    /// Shared mode: seconds the store holds what a proxy took and never gave back (a pioneer
    /// lock, a grant whose answer never came): how long a proxy that dies mid-request holds
    /// anything. Every proxy of the fleet gives the same.
    #[arg(long, env = "RATELANE_PROXY_REDIS_LEASE", default_value_t = 30.0)]
    redis_lease: f64,
    /// Requests per second per token (Discord's global limit; larger bots have a higher one).
    #[arg(long, env = "RATELANE_PROXY_GLOBAL_LIMIT", default_value_t = 50)]
    global_limit: u32,
    /// Seconds a request may wait in the proxy; a longer predicted wait is answered at once
    /// with a 429 (0: no limit).
    #[arg(long, env = "RATELANE_PROXY_MAX_WAIT", default_value_t = 30.0)]
    max_wait: f64,
    /// Request bodies up to this many bytes are held, so the proxy can send them again after a
    /// 429; larger ones stream through and are sent once.
    #[arg(long, env = "RATELANE_PROXY_BUFFER_LIMIT", default_value_t = 1 << 20)]
    buffer_limit: usize,
    /// Seconds one upstream attempt may take.
    #[arg(long, env = "RATELANE_PROXY_UPSTREAM_TIMEOUT", default_value_t = 30.0)]
    upstream_timeout: f64,
    /// Seconds a shutdown (SIGTERM, SIGINT) waits for the requests in flight.
    #[arg(long, env = "RATELANE_PROXY_GRACE", default_value_t = 30.0)]
    grace: f64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Policy {
    FailOpen,
    FailClosed,
}

fn seconds(name: &str, value: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value).map_err(|_| format!("--{name}: a number of seconds >= 0, not {value}"))
}

fn settings(args: &Args) -> Result<Settings, String> {
    let mut settings = Settings { upstream: args.upstream.clone(), buffer_limit: args.buffer_limit, ..Settings::default() };
    settings.config.global_limit = args.global_limit;
    let max_wait = seconds("max-wait", args.max_wait)?;
    settings.config.max_wait = (!max_wait.is_zero()).then_some(max_wait.as_nanos() as u64);
    settings.upstream_timeout = seconds("upstream-timeout", args.upstream_timeout)?;
    settings.grace = seconds("grace", args.grace)?;
    if let Some(url) = &args.redis {
        let mut shared = SharedConfig::default();
        shared.lease = seconds("redis-lease", args.redis_lease)?.as_nanos() as u64;
        shared.on_unavailable = match args.on_unavailable {
            Policy::FailOpen => OnUnavailable::FailOpen,
            Policy::FailClosed => OnUnavailable::FailClosed,
        };
        let redis = RedisSettings {
            prefix: args.redis_prefix.clone(),
            client: None,
            timeout: Duration::from_millis(args.redis_timeout_ms.max(1)),
            shared,
        };
        settings.redis = Some((url.clone(), redis));
    }
    if !settings.upstream.starts_with("http://") && !settings.upstream.starts_with("https://") {
        return Err(format!("--upstream: an http:// or https:// URL, not {:?}", settings.upstream));
    }
    Ok(settings)
}

/// Completes on SIGTERM or SIGINT.
async fn signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let settings = match settings(&args) {
        Ok(s) => s,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "ratelane-proxy: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    let (listener, addr) = match bind(args.listen).await {
        Ok(bound) => bound,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "ratelane-proxy: cannot listen on {}: {e}", args.listen);
            return std::process::ExitCode::from(1);
        }
    };
    let shared = args.redis.as_deref().map_or("no (one proxy)".to_string(), |_| format!("Redis, prefix {}", args.redis_prefix));
    // Written so that a closed stdout (a log pipe gone) never stops the proxy.
    let _ = writeln!(std::io::stdout(), "ratelane-proxy listening on http://{addr} (upstream {}, shared: {shared})", settings.upstream);
    match serve(listener, settings, signal()).await {
        Ok(()) => {
            let _ = writeln!(std::io::stdout(), "ratelane-proxy stopped");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "ratelane-proxy: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
