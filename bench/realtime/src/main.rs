//! The Scoreboard's orchestrator: starts the Discord imitation on 127.0.0.1, and for each run,
//! workload and client resets it, starts the client (the reference in-process, the others as
//! child processes reading `CLIENTS.md`'s workload file), collects the client's report and the
//! server's accounting, and prints one markdown table per workload.
//!
//! Run it through `bash bench/realtime/run.sh`, which installs the clients first; `--help`
//! lists the options.
// The benchmark measures real time: the clippy rule that keeps clocks out of the core does
// not apply here.
#![allow(clippy::disallowed_methods)]

mod http;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ratelane::sim::WindowKind;
use ratelane::{MILLISECOND, Nanos, SECOND};
use ratelane_realtime::limits::Limits;
use ratelane_realtime::schedule::{bound, chains, schedule};
use ratelane_realtime::score::{ClientReport, RunFigures, WorkloadRuns, table};
use ratelane_realtime::workload::{self, TOKEN, Workload, WorkloadFile};
use tokio::io::AsyncReadExt;

const HELP: &str = "\
ratelane-realtime: the real-time Scoreboard (run it through bench/realtime/run.sh)

Options:
  --runs N            runs of every workload and client (default 2)
  --workloads A,B     only these workloads (default: all)
  --clients A,B       only these clients (default: all; the reference always runs)
  --windows KIND      fixed (Discord's) or sliding per-route windows (default fixed)
  --rtt-ms MS         round trip the server adds, split evenly (default 20)
  --scale F           per-route windows as a fraction of Discord's (default 0.2)
  --global N          the bot's global limit per second (default 250)
  --margin-ms MS      the reference client's margin after each window it waits for (default 0:
                      its estimate of an arrival is never early, see http::reference)
  --python PATH       the interpreter of the Python clients (default bench/realtime/.venv/bin/python)
  --node PATH         node (default node)
  --out FILE          also write the tables to FILE
";

/// The clients besides the reference: name, and the command after the interpreter.
fn clients(python: &str, node: &str) -> Vec<(&'static str, Vec<String>)> {
    let py = |file: &str| {
        vec![
            python.to_string(),
            format!("bench/realtime/clients/py/{file}"),
        ]
    };
    let js = |file: &str, extra: &[&str]| {
        let mut v = vec![
            node.to_string(),
            format!("bench/realtime/clients/node/{file}"),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    vec![
        ("ratelane-py", py("ratelane_client.py")),
        (
            "ratelane-node (fetch)",
            js(
                "ratelane_client.mjs",
                &["--core", "napi", "--transport", "fetch"],
            ),
        ),
        (
            "ratelane-node (undici)",
            js(
                "ratelane_client.mjs",
                &["--core", "napi", "--transport", "undici"],
            ),
        ),
        (
            "ratelane-wasm (fetch)",
            js(
                "ratelane_client.mjs",
                &["--core", "wasm", "--transport", "fetch"],
            ),
        ),
        ("discord.js", js("discordjs_client.mjs", &[])),
        ("hikari", py("hikari_client.py")),
        ("discord.py", py("discordpy_client.py")),
    ]
}

#[derive(Debug)]
struct Options {
    runs: usize,
    workloads: Option<Vec<String>>,
    clients: Option<Vec<String>>,
    kind: WindowKind,
    rtt: Nanos,
    scale: f64,
    global: u32,
    margin: Nanos,
    python: String,
    node: String,
    out: Option<PathBuf>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        runs: 2,
        workloads: None,
        clients: None,
        kind: WindowKind::Fixed,
        rtt: 20 * MILLISECOND,
        scale: 0.2,
        global: 250,
        margin: 0,
        python: "bench/realtime/.venv/bin/python".into(),
        node: "node".into(),
        out: None,
    };
    let mut args = std::env::args().skip(1);
    let ms = |v: &str| -> Result<Nanos, String> {
        v.parse::<f64>()
            .map(|x| (x * MILLISECOND as f64) as Nanos)
            .map_err(|e| format!("{v}: {e}"))
    };
    let list = |v: String| v.split(',').map(str::to_string).collect::<Vec<_>>();
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            print!("{HELP}");
            std::process::exit(0);
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value (see --help)"))?;
        match flag.as_str() {
            "--runs" => o.runs = value.parse().map_err(|e| format!("--runs: {e}"))?,
            "--workloads" => o.workloads = Some(list(value)),
            "--clients" => o.clients = Some(list(value)),
            "--windows" => {
                o.kind = match value.as_str() {
                    "fixed" => WindowKind::Fixed,
                    "sliding" => WindowKind::Sliding,
                    other => return Err(format!("--windows: fixed or sliding, not {other:?}")),
                }
            }
            "--rtt-ms" => o.rtt = ms(&value)?,
            "--scale" => o.scale = value.parse().map_err(|e| format!("--scale: {e}"))?,
            "--global" => o.global = value.parse().map_err(|e| format!("--global: {e}"))?,
            "--margin-ms" => o.margin = ms(&value)?,
            "--python" => o.python = value,
            "--node" => o.node = value,
            "--out" => o.out = Some(value.into()),
            other => return Err(format!("unknown option {other} (see --help)")),
        }
    }
    Ok(o)
}

fn secs(ns: Nanos) -> f64 {
    ns as f64 / SECOND as f64
}

/// Runs one child client on `file` and reads its report.
async fn run_child(
    command: &[String],
    file: &Path,
    deadline_s: f64,
    log: &Path,
) -> Result<ClientReport, String> {
    let stderr = std::fs::File::create(log).map_err(|e| format!("log {}: {e}", log.display()))?;
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..2])
        .arg(file)
        .args(&command[2..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", command[0]))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let limit = Duration::from_secs_f64(deadline_s + 30.0);
    let mut text = String::new();
    let read = tokio::time::timeout(limit, stdout.read_to_string(&mut text)).await;
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    if read.is_err() || status.is_err() {
        let _ = child.kill().await;
        return Err(format!("killed after {:.0} s", limit.as_secs_f64()));
    }
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("no report (exit {:?}; see {})", status, log.display()))?;
    serde_json::from_str(line).map_err(|e| format!("bad report: {e}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let options = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ratelane-realtime: {e}");
            std::process::exit(2);
        }
    };
    let limits = Limits::discord(options.scale, options.global, options.rtt, options.kind);
    let (server, port) = match http::Server::start(limits.clone()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ratelane-realtime: cannot listen on 127.0.0.1: {e}");
            std::process::exit(1);
        }
    };
    let base_url = format!("http://127.0.0.1:{port}/api/v10");
    let workloads: Vec<Workload> = workload::all()
        .into_iter()
        .filter(|w| {
            options
                .workloads
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == w.name))
        })
        .collect();
    let clients: Vec<_> = clients(&options.python, &options.node)
        .into_iter()
        .filter(|(name, _)| {
            options
                .clients
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == name))
        })
        .collect();
    let dir = PathBuf::from("target/realtime");
    if let Err(e) = std::fs::create_dir_all(dir.join("logs")) {
        eprintln!("ratelane-realtime: cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    let mut results: Vec<WorkloadRuns> = vec![WorkloadRuns::default(); workloads.len()];
    for run in 1..=options.runs {
        for (w, workload) in workloads.iter().enumerate() {
            let b = bound(&limits, workload);
            let bound_s = secs(b.makespan);
            results[w].bound_s = bound_s;
            // Three times the bound, at least 8 s: every client that made progress in the runs
            // so far finished within it; what is left then counts as unfinished.
            let deadline_s = (bound_s * 3.0).max(8.0);
            let file = dir.join(format!("{}.json", workload.name));
            let spec = WorkloadFile {
                workload: workload.name,
                base_url: &base_url,
                token: TOKEN,
                global_limit: limits.global.limit,
                global_window_s: secs(limits.global.window),
                deadline_s,
                requests: &workload.requests,
            };
            let text = serde_json::to_string(&spec).expect("a workload serializes");
            if let Err(e) = std::fs::write(&file, text) {
                eprintln!("ratelane-realtime: cannot write {}: {e}", file.display());
                std::process::exit(1);
            }
            // The reference first, in-process.
            let plan = schedule(&limits, workload);
            let waits = chains(&limits, workload, &plan);
            server.reset();
            let report = http::reference(
                &base_url,
                workload,
                &plan,
                &waits,
                options.margin,
                limits.rtt(),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let reference = RunFigures::new(workload, bound_s, Ok(&report), server.tally());
            results[w].add("reference", reference.clone(), reference.clone());
            eprintln!(
                "run {run} {:<14} {:<24} utilisation {}",
                workload.name,
                "reference",
                reference
                    .utilisation
                    .map_or("–".into(), |u| format!("{u:.3}"))
            );
            for (name, command) in &clients {
                tokio::time::sleep(Duration::from_millis(50)).await;
                server.reset();
                let log = dir.join("logs").join(format!(
                    "{run}-{}-{}.log",
                    workload.name,
                    name.replace([' ', '(', ')'], "")
                ));
                let report = run_child(command, &file, deadline_s, &log).await;
                // Answers still in flight when the client exits are counted too.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = std::fs::write(log.with_extension("arrivals.csv"), server.arrivals_csv());
                let figures = RunFigures::new(
                    workload,
                    bound_s,
                    report.as_ref().map_err(Clone::clone),
                    server.tally(),
                );
                eprintln!(
                    "run {run} {:<14} {:<24} utilisation {} 429s {}/{}/{}/{} {}",
                    workload.name,
                    name,
                    figures
                        .utilisation
                        .map_or("–".into(), |u| format!("{u:.3}")),
                    figures.tally.global_429,
                    figures.tally.bucket_429,
                    figures.tally.sub_429,
                    figures.tally.shared_429,
                    figures.problem.as_deref().unwrap_or("")
                );
                results[w].add(name, figures, reference.clone());
            }
        }
    }
    let mut out = format!(
        "Limits: global {} per second (fixed window, on arrival); per-route windows at {} of Discord's, {}; round trip {} ms; {} run(s); reference margin {} ms.\n\n",
        limits.global.limit,
        options.scale,
        match options.kind {
            WindowKind::Fixed => "fixed",
            WindowKind::Sliding => "sliding",
        },
        secs(options.rtt) * 1000.0,
        options.runs,
        secs(options.margin) * 1000.0,
    );
    for (workload, runs) in workloads.iter().zip(&results) {
        out.push_str(&table(workload, runs));
        out.push('\n');
    }
    print!("{out}");
    if let Some(path) = &options.out
        && let Err(e) = std::fs::write(path, &out)
    {
        eprintln!("ratelane-realtime: cannot write {}: {e}", path.display());
    }
}
