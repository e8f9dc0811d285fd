//! Shared mode with K processes (`--processes`): the throwaway Redis, and K client processes
//! started together behind a barrier. The pure parts (split, merge, cost) are in
//! `ratelane_realtime::shared`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ratelane_realtime::score::ClientReport;
use ratelane_realtime::shared::{ScriptCost, script_cost};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// A redis-server on 127.0.0.1 (a free port, no persistence, files in a directory of its
/// own), killed when this is dropped, and by a watchdog shell if the orchestrator dies
/// without dropping it (killed by a signal): it never outlives the orchestrator by more than
/// a second.
#[derive(Debug)]
pub struct Redis {
    server: String,
    cli: String,
    /// The port, the same across restarts.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl Redis {
    /// Starts one (a few attempts: a port found free can be taken before Redis binds it).
    pub async fn start(server: &str, cli: &str) -> Result<Redis, String> {
        let dir =
            std::env::temp_dir().join(format!("ratelane-realtime-redis-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port().map_err(|e| format!("no free port: {e}"))?;
            let mut redis = Redis {
                server: server.to_string(),
                cli: cli.to_string(),
                port,
                dir: dir.clone(),
                child: None,
            };
            match redis.spawn().await {
                Ok(()) => return Ok(redis),
                Err(e) => last = e,
            }
        }
        Err(format!("could not start {server}: {last}"))
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Starts the server on `self.port` (empty) and waits until it answers PING (5 s at most).
    pub async fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new(&self.server)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e} (run.sh installs it)", self.server))?;
        if let Some(pid) = child.id() {
            // The watchdog: ends when Redis ends; when the orchestrator is gone (killed by a
            // signal, no destructor ran), kills Redis and removes its directory.
            let _ = Command::new("sh")
                .arg("-c")
                .arg(
                    "while kill -0 \"$1\" 2>/dev/null && kill -0 \"$2\" 2>/dev/null; do sleep 1; done; \
                     if ! kill -0 \"$1\" 2>/dev/null; then kill \"$2\" 2>/dev/null; sleep 1; rm -rf \"$3\"; fi",
                )
                .arg("watchdog")
                .arg(std::process::id().to_string())
                .arg(pid.to_string())
                .arg(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
        }
        for _ in 0..100 {
            if self.cli(&["PING"]).await.is_ok_and(|s| s.trim() == "PONG") {
                self.child = Some(child);
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("redis-server exited: {status}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill().await;
        Err(format!("redis-server did not answer on port {}", self.port))
    }

    /// Kills the server at once (SIGKILL: what a crash looks like to the clients).
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// One `redis-cli` command; its output.
    pub async fn cli(&self, args: &[&str]) -> Result<String, String> {
        let out = tokio::time::timeout(
            Duration::from_secs(5),
            Command::new(&self.cli)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(args)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .map_err(|_| "redis-cli timed out".to_string())?
        .map_err(|e| format!("cannot run {}: {e}", self.cli))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Empties the server and zeroes its command statistics (between runs).
    pub async fn reset(&self) -> Result<(), String> {
        self.cli(&["FLUSHALL"]).await?;
        self.cli(&["CONFIG", "RESETSTAT"]).await?;
        Ok(())
    }

    /// The script calls since the last reset.
    pub async fn script_cost(&self) -> ScriptCost {
        self.cli(&["INFO", "commandstats"])
            .await
            .map(|s| script_cost(&s))
            .unwrap_or_default()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis outage during a run: stopped `at` after the start, started again `length` later.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// After the start signal.
    pub at: Duration,
    /// How long Redis is down.
    pub length: Duration,
}

/// One client process: its command (interpreter, script, extra arguments), workload file and log.
#[derive(Debug)]
pub struct Process {
    /// `[interpreter, script, args...]`.
    pub command: Vec<String>,
    /// Its part of the workload.
    pub file: PathBuf,
    /// Its stderr.
    pub log: PathBuf,
}

fn spawn(p: &Process) -> Result<Child, String> {
    let stderr =
        std::fs::File::create(&p.log).map_err(|e| format!("log {}: {e}", p.log.display()))?;
    Command::new(&p.command[0])
        .args(&p.command[1..2])
        .arg(&p.file)
        .args(&p.command[2..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", p.command[0]))
}

/// Starts every process, waits until each has said `ready` (set-up done; 60 s at most), calls
/// `on_start`, starts them together (a line on each one's stdin), runs the outage if any, and collects each
/// process's report (`deadline_s` + 30 s at most). The script calls Redis counted before the
/// outage killed it are returned (the restarted server counts from zero).
pub async fn run_group(
    processes: &[Process],
    deadline_s: f64,
    outage: Option<(Outage, &mut Redis)>,
    on_start: impl FnOnce(),
) -> (Vec<Result<ClientReport, String>>, ScriptCost) {
    let mut children = Vec::new();
    for p in processes {
        children.push(spawn(p));
    }
    // Set-up: read up to "ready" on each stdout.
    let mut ready = Vec::new();
    for (child, p) in children.into_iter().zip(processes) {
        let prepared = async {
            let mut child = child?;
            let stdout = child.stdout.take().ok_or("no stdout")?;
            let mut lines = BufReader::new(stdout).lines();
            let said = tokio::time::timeout(Duration::from_secs(60), async {
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.trim() == "ready" {
                        return true;
                    }
                }
                false
            })
            .await;
            if said != Ok(true) {
                let _ = child.kill().await;
                return Err(format!("never ready (see {})", p.log.display()));
            }
            Ok((child, lines))
        };
        ready.push(prepared.await);
    }
    // Go: every stdin in turn, back to back.
    on_start();
    for (child, _) in ready.iter_mut().flatten() {
        if let Some(stdin) = child.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n").await;
            let _ = stdin.flush().await;
        }
    }
    let started = Instant::now();
    let limit = Duration::from_secs_f64(deadline_s + 30.0);
    let mut tasks = Vec::new();
    for (r, p) in ready.into_iter().zip(processes) {
        let log = p.log.clone();
        tasks.push(tokio::spawn(async move {
            let (mut child, mut lines) = r?;
            let mut report = None;
            let read = tokio::time::timeout(limit, async {
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.trim_start().starts_with('{') {
                        report = Some(line);
                    }
                }
            })
            .await;
            let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            if read.is_err() || status.is_err() {
                let _ = child.kill().await;
                if report.is_none() {
                    return Err(format!("killed after {:.0} s", limit.as_secs_f64()));
                }
            }
            let line = report
                .ok_or_else(|| format!("no report (exit {status:?}; see {})", log_name(&log)))?;
            let _ = std::fs::write(log.with_extension("report.json"), &line);
            serde_json::from_str::<ClientReport>(&line).map_err(|e| format!("bad report: {e}"))
        }));
    }
    let mut before = ScriptCost::default();
    if let Some((outage, redis)) = outage {
        tokio::time::sleep_until((started + outage.at).into()).await;
        before = redis.script_cost().await;
        redis.kill().await;
        eprintln!(
            "  redis stopped at {:.3} s",
            started.elapsed().as_secs_f64()
        );
        tokio::time::sleep_until((started + outage.at + outage.length).into()).await;
        match redis.spawn().await {
            Ok(()) => eprintln!("  redis back at {:.3} s", started.elapsed().as_secs_f64()),
            Err(e) => eprintln!("  redis did not restart: {e}"),
        }
    }
    let mut reports = Vec::new();
    for t in tasks {
        reports.push(t.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
    }
    (reports, before)
}

fn log_name(path: &Path) -> String {
    path.display().to_string()
}
