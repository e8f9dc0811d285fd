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
mod multi;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ratelane::sim::WindowKind;
use ratelane::{MILLISECOND, Nanos, SECOND};
use ratelane_realtime::limits::Limits;
use ratelane_realtime::schedule::{bound, chains, schedule};
use ratelane_realtime::score::{ClientReport, RunFigures, WorkloadRuns, table};
use ratelane_realtime::shared::{
    Lang, ProcessNote, SharedRow, merge, mix_langs, per_process, shared_table, split,
};
use ratelane_realtime::workload::{self, ReferencePlan, TOKEN, Workload, WorkloadFile};
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
  --warm N            ratelane's clients open N connections in their set-up (log-ins, outside
                      the accounting), as a bot that has been running has them; the reference
                      opens its first burst's before it starts. Default 0 (cold, as a new bot)
  --precise           ratelane's clients also pass each JSON body's keys (body_keys / bodyKeys),
                      the precise path for a hidden sub-limit (default: run(method, path, send),
                      nothing else, as the README shows)
  --margin-ms MS      the reference client's margin after each window it waits for (default 0:
                      its estimate of an arrival is never early, see http::reference)
  --python PATH       the interpreter of the Python clients (default bench/realtime/.venv/bin/python)
  --node PATH         node (default node)
  --out FILE          also write the tables to FILE

Shared mode, K processes on one token and one Redis (bench/realtime/README.md, \"Shared mode\"):
  --processes K,K     run K ratelane processes per workload in shared mode instead of the
                      clients above, for each K given (e.g. 2,4,8; 1 is one process, shared).
                      Each run also runs the reference and one process not shared per language
                      (the baseline of \"share of one process\"). Default workloads: global_cap,
                      many_channels, one_channel, interactions
  --mix A,B           py (all Python), node (all Node: napi core, undici), mixed (alternating,
                      half and half) (default py,node,mixed)
  --on-unavailable P  the stores' policy when Redis does not answer: fail_open, fail_closed,
                      or both as fail_open,fail_closed (one row each) (default fail_open)
  --outage-at-ms MS   kill Redis (SIGKILL) MS after the start and start it again, empty, on the
                      same port --outage-ms later (default: no outage)
  --outage-ms MS      how long Redis is down (default 1000)
  --redis-server PATH redis-server (default redis-server; run.sh installs it)
  --redis-cli PATH    redis-cli (default redis-cli)
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
        ("reference-py", py("reference_client.py")),
        ("reference-py (answers)", {
            let mut v = py("reference_client.py");
            v.extend(["--arrival".to_string(), "answer".to_string()]);
            v
        }),
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
        ("discord.js + ratelane", js("discordjs_ratelane_client.mjs", &[])),
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
    warm: usize,
    precise: bool,
    python: String,
    node: String,
    out: Option<PathBuf>,
    processes: Option<Vec<usize>>,
    mixes: Vec<String>,
    policies: Vec<String>,
    outage_at: Option<Nanos>,
    outage_len: Nanos,
    redis_server: String,
    redis_cli: String,
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
        warm: 0,
        precise: false,
        python: "bench/realtime/.venv/bin/python".into(),
        node: "node".into(),
        out: None,
        processes: None,
        mixes: vec!["py".into(), "node".into(), "mixed".into()],
        policies: vec!["fail_open".into()],
        outage_at: None,
        outage_len: 1000 * MILLISECOND,
        redis_server: "redis-server".into(),
        redis_cli: "redis-cli".into(),
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
        if flag == "--precise" {
            o.precise = true;
            continue;
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
            "--warm" => o.warm = value.parse().map_err(|e| format!("--warm: {e}"))?,
            "--python" => o.python = value,
            "--node" => o.node = value,
            "--out" => o.out = Some(value.into()),
            "--processes" => {
                let ks = list(value)
                    .iter()
                    .map(|k| match k.parse::<usize>() {
                        Ok(k) if (1..=64).contains(&k) => Ok(k),
                        _ => Err(format!(
                            "--processes: a number of processes 1..=64, not {k:?}"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                o.processes = Some(ks);
            }
            "--mix" => {
                let mixes = list(value);
                for m in &mixes {
                    mix_langs(m, 1).map_err(|e| format!("--mix: {e}"))?;
                }
                o.mixes = mixes;
            }
            "--on-unavailable" => {
                let policies = list(value);
                if let Some(p) = policies
                    .iter()
                    .find(|p| *p != "fail_open" && *p != "fail_closed")
                {
                    return Err(format!(
                        "--on-unavailable: fail_open or fail_closed, not {p:?}"
                    ));
                }
                o.policies = policies;
            }
            "--outage-at-ms" => o.outage_at = Some(ms(&value)?),
            "--outage-ms" => o.outage_len = ms(&value)?,
            "--redis-server" => o.redis_server = value,
            "--redis-cli" => o.redis_cli = value,
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
    let chosen = match (&options.workloads, &options.processes) {
        (Some(names), _) => Some(names.clone()),
        (None, Some(_)) => Some(
            ["global_cap", "many_channels", "one_channel", "interactions"]
                .map(String::from)
                .to_vec(),
        ),
        (None, None) => None,
    };
    let mut workloads: Vec<Workload> = workload::all();
    if let Some(names) = &chosen {
        if let Some(n) = names
            .iter()
            .find(|n| !workloads.iter().any(|w| w.name == *n))
        {
            eprintln!("ratelane-realtime: no workload named {n}");
            std::process::exit(2);
        }
        // In the order named.
        workloads = names
            .iter()
            .filter_map(|n| workloads.iter().find(|w| w.name == *n).cloned())
            .collect();
    }
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
    if let Some(ks) = options.processes.clone() {
        run_shared(&options, &ks, &limits, &server, &base_url, &workloads, &dir).await;
        return;
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
            let plan = schedule(&limits, workload);
            let waits = chains(&limits, workload, &plan);
            let spec = WorkloadFile {
                workload: workload.name,
                base_url: &base_url,
                token: TOKEN,
                global_limit: limits.global.limit,
                global_window_s: secs(limits.global.window),
                deadline_s,
                requests: &workload.requests,
                warm_connections: options.warm,
                precise: options.precise,
                reference: Some(ReferencePlan { plan_ns: &plan, waits: &waits, rtt_ns: limits.rtt() }),
            };
            let text = serde_json::to_string(&spec).expect("a workload serializes");
            if let Err(e) = std::fs::write(&file, text) {
                eprintln!("ratelane-realtime: cannot write {}: {e}", file.display());
                std::process::exit(1);
            }
            // The reference first, in-process.
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
        "Limits: global {} per second (fixed window, on arrival); per-route windows at {} of Discord's, {}; round trip {} ms; {} run(s); reference margin {} ms{}{}.\n\n",
        limits.global.limit,
        options.scale,
        match options.kind {
            WindowKind::Fixed => "fixed",
            WindowKind::Sliding => "sliding",
            WindowKind::Refill => "refilling",
        },
        secs(options.rtt) * 1000.0,
        options.runs,
        secs(options.margin) * 1000.0,
        if options.warm > 0 {
            format!(
                "; ratelane's clients open {} connections in their set-up (the peers' do not)",
                options.warm
            )
        } else {
            String::new()
        },
        if options.precise {
            "; ratelane's clients pass each JSON body's keys (--precise)"
        } else {
            ""
        },
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

/// A process's workload file in shared mode: the usual file, the start barrier, and the store.
#[derive(serde::Serialize)]
struct ProcessFile<'a> {
    #[serde(flatten)]
    file: WorkloadFile<'a>,
    barrier: bool,
    shared: Option<SharedSpec<'a>>,
}

/// The `shared` of a process's workload file (CLIENTS.md).
#[derive(serde::Serialize)]
struct SharedSpec<'a> {
    redis_url: &'a str,
    prefix: &'a str,
    on_unavailable: &'a str,
    process: usize,
}

fn lang_command(options: &Options, lang: Lang) -> Vec<String> {
    match lang {
        Lang::Py => vec![
            options.python.clone(),
            "bench/realtime/clients/py/ratelane_client.py".into(),
        ],
        Lang::Node => [
            options.node.as_str(),
            "bench/realtime/clients/node/ratelane_client.mjs",
            "--core",
            "napi",
            "--transport",
            "undici",
        ]
        .map(String::from)
        .to_vec(),
    }
}

fn lang_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Py => "py",
        Lang::Node => "node",
    }
}

/// One group of processes on one workload: writes their files, runs them (with the outage
/// if any), and returns the merged figures with Redis's script cost.
#[allow(clippy::too_many_arguments)]
async fn shared_group(
    workload: &Workload,
    spec: &WorkloadFile<'_>,
    langs: &[Lang],
    shared: Option<(&str, &str)>,
    outage: Option<(multi::Outage, &mut multi::Redis)>,
    tag: &str,
    bound_s: f64,
    server: &http::Server,
    options: &Options,
    dir: &Path,
) -> Result<
    (
        RunFigures,
        Option<ratelane_realtime::shared::StoreStats>,
        ratelane_realtime::shared::ScriptCost,
        Vec<ProcessNote>,
    ),
    String,
> {
    let parts = split(&workload.requests, langs.len());
    let mut processes = Vec::new();
    for (i, (lang, part)) in langs.iter().zip(&parts).enumerate() {
        let file = dir.join(format!("{tag}-p{i}.json"));
        let pf = ProcessFile {
            file: WorkloadFile {
                requests: part,
                ..*spec
            },
            barrier: true,
            shared: shared.map(|(url, policy)| SharedSpec {
                redis_url: url,
                prefix: "{ratelane:bench}:",
                on_unavailable: policy,
                process: i,
            }),
        };
        let text = serde_json::to_string(&pf).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        processes.push(multi::Process {
            command: lang_command(options, *lang),
            file,
            log: dir
                .join("logs")
                .join(format!("{tag}-p{i}-{}.log", lang_name(*lang))),
        });
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Reset at the start signal: the arrivals' times count from it.
    let (reports, before_outage) =
        multi::run_group(&processes, spec.deadline_s, outage, || server.reset()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _ = std::fs::write(
        dir.join("logs").join(format!("{tag}.arrivals.csv")),
        server.arrivals_csv(),
    );
    let tally = server.tally();
    let by_process: Vec<Option<&ClientReport>> = reports.iter().map(|r| r.as_ref().ok()).collect();
    let notes = per_process(&parts, &by_process, &tally);
    let problems: Vec<String> = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("process {i}: {e}")))
        .collect();
    let ok: Vec<ClientReport> = reports.into_iter().filter_map(Result::ok).collect();
    let merged = merge(tag, &ok);
    let mut figures = RunFigures::new(workload, bound_s, Ok(&merged), tally);
    if !problems.is_empty() {
        figures.problem = Some(problems.join("; "));
    }
    Ok((figures, merged.store, before_outage, notes))
}

/// `--processes`: per run and workload, the reference, one process of each language not
/// shared, then each (K, mix, policy) in shared mode against one throwaway Redis.
async fn run_shared(
    options: &Options,
    ks: &[usize],
    limits: &Limits,
    server: &http::Server,
    base_url: &str,
    workloads: &[Workload],
    dir: &Path,
) {
    let mut redis = match multi::Redis::start(&options.redis_server, &options.redis_cli).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ratelane-realtime: {e}");
            std::process::exit(1);
        }
    };
    let url = redis.url();
    eprintln!("redis-server on {url}");
    let outage = options.outage_at.map(|at| multi::Outage {
        at: Duration::from_nanos(at),
        length: Duration::from_nanos(options.outage_len),
    });
    let need = |lang: Lang| {
        options
            .mixes
            .iter()
            .any(|m| mix_langs(m, 2).is_ok_and(|l| l.contains(&lang)))
    };
    let mut tables: Vec<(usize, f64, Vec<SharedRow>)> = workloads
        .iter()
        .enumerate()
        .map(|(i, _)| (i, 0.0, Vec::new()))
        .collect();
    for run in 1..=options.runs {
        for (w, workload) in workloads.iter().enumerate() {
            let b = bound(limits, workload);
            let bound_s = secs(b.makespan);
            tables[w].1 = bound_s;
            let extra = outage.map_or(0.0, |o| (o.at + o.length).as_secs_f64());
            let deadline_s = (bound_s * 3.0).max(8.0) + extra;
            let spec = WorkloadFile {
                workload: workload.name,
                base_url,
                token: TOKEN,
                global_limit: limits.global.limit,
                global_window_s: secs(limits.global.window),
                deadline_s,
                requests: &workload.requests,
                warm_connections: options.warm,
                precise: options.precise,
                reference: None,
            };
            let plan = schedule(limits, workload);
            let waits = chains(limits, workload, &plan);
            server.reset();
            let report = http::reference(
                base_url,
                workload,
                &plan,
                &waits,
                options.margin,
                limits.rtt(),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let reference = RunFigures::new(workload, bound_s, Ok(&report), server.tally());
            let ref_util = reference.utilisation;
            eprintln!(
                "run {run} {:<14} {:<28} utilisation {}",
                workload.name,
                "reference",
                ref_util.map_or("–".into(), |u| format!("{u:.3}"))
            );
            let mut rows = vec![SharedRow {
                label: "reference".into(),
                run,
                k: 0,
                figures: reference,
                one_process: None,
                reference: ref_util,
                script: None,
                store: None,
                processes: Vec::new(),
            }];
            // One process of each language, not shared: the baselines.
            let mut one = Vec::new();
            for lang in [Lang::Py, Lang::Node] {
                if !need(lang) {
                    continue;
                }
                let tag = format!("{run}-{}-alone-{}", workload.name, lang_name(lang));
                let result = shared_group(
                    workload,
                    &spec,
                    &[lang],
                    None,
                    None,
                    &tag,
                    bound_s,
                    server,
                    options,
                    dir,
                )
                .await;
                let (figures, _, _, notes) = match result {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("ratelane-realtime: {e}");
                        std::process::exit(1);
                    }
                };
                eprintln!(
                    "run {run} {:<14} {:<28} utilisation {} 429s {}/{}",
                    workload.name,
                    format!("1 process {} (not shared)", lang_name(lang)),
                    figures
                        .utilisation
                        .map_or("–".into(), |u| format!("{u:.3}")),
                    figures.tally.global_429,
                    figures.tally.bucket_429,
                );
                one.push((lang, figures.utilisation));
                rows.push(SharedRow {
                    label: format!("1 process {} (not shared)", lang_name(lang)),
                    run,
                    k: 1,
                    one_process: figures.utilisation,
                    figures,
                    reference: ref_util,
                    script: None,
                    store: None,
                    processes: notes,
                });
            }
            for &k in ks {
                for mix in &options.mixes {
                    let langs = mix_langs(mix, k).expect("checked when parsed");
                    // The baseline of a mix: the mean of its languages' single processes.
                    let base: Vec<f64> = one
                        .iter()
                        .filter(|(l, _)| langs.contains(l))
                        .filter_map(|(_, u)| *u)
                        .collect();
                    let one_process =
                        (!base.is_empty()).then(|| base.iter().sum::<f64>() / base.len() as f64);
                    for policy in &options.policies {
                        let label = format!(
                            "K={k} {mix}{}",
                            match (outage, options.policies.len()) {
                                (Some(o), _) => format!(
                                    ", {policy}, Redis down {:.0} ms at {:.0} ms",
                                    o.length.as_secs_f64() * 1000.0,
                                    o.at.as_secs_f64() * 1000.0
                                ),
                                (None, 1) => String::new(),
                                (None, _) => format!(", {policy}"),
                            }
                        );
                        let tag = format!(
                            "{run}-{}-k{k}-{mix}{}{}",
                            workload.name,
                            if options.policies.len() > 1 || outage.is_some() {
                                format!("-{policy}")
                            } else {
                                String::new()
                            },
                            if outage.is_some() { "-outage" } else { "" }
                        );
                        if let Err(e) = redis.reset().await {
                            eprintln!("ratelane-realtime: redis: {e}");
                        }
                        let result = shared_group(
                            workload,
                            &spec,
                            &langs,
                            Some((&url, policy)),
                            outage.map(|o| (o, &mut redis)),
                            &tag,
                            bound_s,
                            server,
                            options,
                            dir,
                        )
                        .await;
                        let (figures, store, script, notes) = match result {
                            Ok((f, s, before, n)) => {
                                (f, s, before.plus(redis.script_cost().await), n)
                            }
                            Err(e) => {
                                eprintln!("ratelane-realtime: {e}");
                                std::process::exit(1);
                            }
                        };
                        eprintln!(
                            "run {run} {:<14} {:<28} utilisation {} 429s {}/{}/{}/{} failed {} lost {} {}",
                            workload.name,
                            label,
                            figures
                                .utilisation
                                .map_or("–".into(), |u| format!("{u:.3}")),
                            figures.tally.global_429,
                            figures.tally.bucket_429,
                            figures.tally.sub_429,
                            figures.tally.shared_429,
                            figures.failed,
                            figures.lost,
                            figures.problem.as_deref().unwrap_or("")
                        );
                        rows.push(SharedRow {
                            label,
                            run,
                            k,
                            figures,
                            one_process,
                            reference: ref_util,
                            script: Some(script),
                            store,
                            processes: notes,
                        });
                    }
                }
            }
            tables[w].2.extend(rows);
        }
    }
    drop(redis);
    let mut out = format!(
        "Shared mode: K ratelane processes on one token and one Redis (redis-server on 127.0.0.1, no persistence, emptied between runs). Limits: global {} per second (fixed window, on arrival); per-route windows at {} of Discord's; round trip {} ms; {} run(s). Request i goes to process i mod K. \"share of one process\": utilisation over one process's not shared (same language; for mixed, the mean of the Python and Node ones) in the same run.\n\n",
        limits.global.limit,
        options.scale,
        secs(options.rtt) * 1000.0,
        options.runs,
    );
    for (w, bound_s, rows) in &tables {
        out.push_str(&shared_table(&workloads[*w], *bound_s, rows));
        out.push('\n');
    }
    print!("{out}");
    if let Some(path) = &options.out
        && let Err(e) = std::fs::write(path, &out)
    {
        eprintln!("ratelane-realtime: cannot write {}: {e}", path.display());
    }
}
