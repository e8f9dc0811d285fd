//! What the proxy's tests share: the project's Discord imitation over HTTP (the real-time
//! Scoreboard's own server, `bench/realtime/src/http.rs`, included as it is), a proxy started
//! in this process, and proxies started as processes of the built binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ratelane::MILLISECOND;
use ratelane::sim::WindowKind;
use ratelane_proxy::{Settings, bind, serve};
use ratelane_realtime::imitation::Tally;
use ratelane_realtime::limits::Limits;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

// The imitation's HTTP server, as the Scoreboard runs it (its `reference` client is unused here).
#[allow(clippy::disallowed_methods, unused_imports)]
#[path = "../../../bench/realtime/src/http.rs"]
mod http;

pub use ratelane_realtime::workload::TOKEN;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held for a whole test: the tests of one binary run one at a time, so that one test's burst
/// does not starve another's of the machine's two cores (the global window at the server is a
/// matter of when requests really leave).
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// The imitation: Discord's limits with per-route windows at a fifth (messages 5 per second
/// per channel), `global` requests per second per token, a 20 ms round trip, fixed windows.
pub struct Imitation {
    server: Arc<http::Server>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Imitation {
    pub async fn start(global: u32) -> Imitation {
        Imitation::start_with(Limits::discord(0.2, global, 20 * MILLISECOND, WindowKind::Fixed)).await
    }

    /// The imitation enforcing `limits`.
    pub async fn start_with(limits: Limits) -> Imitation {
        let (server, port) = http::Server::start(limits).await.expect("the imitation binds 127.0.0.1");
        Imitation { server, base: format!("http://127.0.0.1:{port}") }
    }

    /// What reached the server so far.
    pub fn tally(&self) -> Tally {
        self.server.tally()
    }
}

/// A proxy in this process: its address, and what stops it.
pub struct Proxy {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    pub async fn start(settings: Settings) -> Proxy {
        let (listener, addr) = bind("127.0.0.1:0".parse().unwrap()).await.expect("a free port");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(listener, settings, async {
                let _ = stopped.await;
            })
            .await
            .expect("the proxy runs");
        });
        Proxy { addr, stop: Some(stop), task: Some(task) }
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Asks it to shut down (what is in flight is answered first).
    pub fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits until it has stopped (bounded).
    pub async fn stopped(&mut self) {
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("the proxy stops within its grace")
                .expect("the proxy's task ends cleanly");
        }
    }
}

/// Settings for a proxy in front of `upstream`.
pub fn settings(upstream: &str) -> Settings {
    Settings { upstream: upstream.to_string(), ..Settings::default() }
}

/// A proxy started as a process of the built binary (`ratelane-proxy`), killed when dropped.
pub struct ProxyProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ProxyProcess {
    pub fn start(args: &[&str]) -> ProxyProcess {
        let Some(binary) = option_env!("CARGO_BIN_EXE_ratelane-proxy") else {
            panic!("the binary's path is known to the integration tests of ratelane-proxy only");
        };
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ratelane-proxy starts");
        let stdout = child.stdout.take().expect("its stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("its first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        ProxyProcess { child, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL: no shutdown, no goodbye.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `n` distinct channel ids (snowflakes).
pub fn channel(n: u64) -> String {
    (100_000_000_000_000_001u64 + n).to_string()
}

/// A message to channel `c` tagged with `rid` (the imitation counts each `rid`'s arrivals).
pub fn message_path(c: u64, rid: u64) -> String {
    format!("/api/v10/channels/{}/messages?rid={rid}", channel(c))
}

/// A plain reqwest client (the process's TLS provider installed first).
pub fn http_client() -> reqwest::Client {
    ratelane_proxy::install_tls_provider();
    reqwest::Client::new()
}
