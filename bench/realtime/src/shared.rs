//! Shared mode with K processes (`--processes`): how a workload is split over the K client
//! processes, how their K reports become one, what Redis and the clients say the store cost,
//! and the table of those runs. The processes and Redis themselves are in the binary
//! (`src/main.rs`).
//!
//! **Split**: request `i` of the workload (in submission order) goes to process `i mod K`. So
//! every process submits a slice of every part of the workload in the workload's own order, and
//! every bucket with at least K requests is used by every process: the case shared mode exists
//! for (contiguous blocks would give each process its own channels in `many_channels`, and
//! there only the global limit would be shared).
//!
//! **Merge**: the K reports go on one clock through each report's `t0_unix_s` (the wall clock
//! at that process's zero): the earliest start is the merged zero, so the merged makespan runs
//! from the first process's first submission to the last outcome of any process.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

use crate::imitation::Tally;
use crate::score::{ClientReport, LoopLag, Outcome, RunFigures};
use crate::workload::{Req, Workload};

/// The language of one client process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// `clients/py/ratelane_client.py` (asyncio driver, aiohttp, `ratelane.redis.RedisStore`).
    Py,
    /// `clients/node/ratelane_client.mjs --core napi --transport undici` (Promise driver,
    /// `ratelane/redis`'s `RedisStore`).
    Node,
}

/// The K processes of a mix: `py` (all Python), `node` (all Node), `mixed` (alternating,
/// Python first: half and half for an even K).
pub fn mix_langs(mix: &str, k: usize) -> Result<Vec<Lang>, String> {
    match mix {
        "py" => Ok(vec![Lang::Py; k]),
        "node" => Ok(vec![Lang::Node; k]),
        "mixed" => Ok((0..k)
            .map(|i| if i % 2 == 0 { Lang::Py } else { Lang::Node })
            .collect()),
        other => Err(format!("a mix is py, node or mixed, not {other:?}")),
    }
}

/// The workload's requests for each of `k` processes: request `i` to process `i mod k`
/// (module documentation).
pub fn split(requests: &[Req], k: usize) -> Vec<Vec<Req>> {
    let k = k.max(1);
    let mut parts = vec![Vec::new(); k];
    for (i, r) in requests.iter().enumerate() {
        parts[i % k].push(r.clone());
    }
    parts
}

/// What a client measured of the store (the report's `store`, CLIENTS.md).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StoreStats {
    /// Each reservation: ms from the driver's call of the store's `reserve` to its answer.
    #[serde(default)]
    pub reserve_ms: Vec<f64>,
    /// The answers: `granted`, `denied:<scope>`, `unavailable`, `error`, `timeout`.
    #[serde(default)]
    pub answers: BTreeMap<String, usize>,
    /// Store observations of the driver (`StoreUnavailable`, `StoreRecovered`).
    #[serde(default)]
    pub observed: BTreeMap<String, usize>,
}

impl StoreStats {
    /// Adds another process's figures to these.
    pub fn absorb(&mut self, other: &StoreStats) {
        self.reserve_ms.extend_from_slice(&other.reserve_ms);
        for (k, v) in &other.answers {
            *self.answers.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.observed {
            *self.observed.entry(k.clone()).or_default() += v;
        }
    }
}

/// The K reports as one (module documentation): every outcome on the earliest process's clock,
/// the largest set-up time, the store figures summed. A report without `t0_unix_s` counts
/// as started at the earliest start.
pub fn merge(name: &str, reports: &[ClientReport]) -> ClientReport {
    let t0 = reports
        .iter()
        .filter_map(|r| r.t0_unix_s)
        .fold(f64::INFINITY, f64::min);
    let mut results = Vec::new();
    let mut store: Option<StoreStats> = None;
    for r in reports {
        let offset = match r.t0_unix_s {
            Some(t) if t0.is_finite() => t - t0,
            _ => 0.0,
        };
        results.extend(r.results.iter().map(|o| Outcome {
            t: o.t.map(|t| t + offset),
            ..o.clone()
        }));
        if let Some(s) = &r.store {
            store.get_or_insert_with(StoreStats::default).absorb(s);
        }
    }
    ClientReport {
        client: name.to_string(),
        library: reports
            .iter()
            .map(|r| r.library.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(" / "),
        setup_s: reports.iter().map(|r| r.setup_s).fold(0.0, f64::max),
        t0_unix_s: t0.is_finite().then_some(t0),
        results,
        store,
        loop_lag_ms: reports
            .iter()
            .filter_map(|r| r.loop_lag_ms)
            .reduce(|a, b| LoopLag {
                p99: a.p99.max(b.p99),
                max: a.max.max(b.max),
            }),
    }
}

/// One process of a shared run, for the table's per-process column.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessNote {
    /// Its event loop's largest lag (ms), if it reported.
    pub lag_max_ms: Option<f64>,
    /// Arrivals of its requests the server refused (429s of any scope).
    pub refused: u32,
}

/// Per process: the largest event-loop lag it reported and how many arrivals of its part of
/// the workload (`parts[i]`) the server refused.
pub fn per_process(
    parts: &[Vec<Req>],
    reports: &[Option<&ClientReport>],
    tally: &Tally,
) -> Vec<ProcessNote> {
    parts
        .iter()
        .zip(reports)
        .map(|(part, report)| ProcessNote {
            lag_max_ms: report.and_then(|r| r.loop_lag_ms).map(|l| l.max),
            refused: part
                .iter()
                .filter_map(|r| tally.per_rid.get(&r.rid))
                .map(|&(arrived, ok)| arrived.saturating_sub(ok))
                .sum(),
        })
        .collect()
}

/// The `q`-quantile (0..=1) of `values` by nearest rank; `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

/// Script calls in Redis (`EVALSHA` and `EVAL`) and the microseconds Redis spent in them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptCost {
    /// Calls.
    pub calls: u64,
    /// Microseconds in Redis.
    pub usec: u64,
}

impl ScriptCost {
    /// The sum of two readings (before and after a restart).
    pub fn plus(self, other: ScriptCost) -> ScriptCost {
        ScriptCost {
            calls: self.calls + other.calls,
            usec: self.usec + other.usec,
        }
    }
}

/// The script calls in the text of `INFO commandstats`
/// (`cmdstat_evalsha:calls=12,usec=345,...`).
pub fn script_cost(info: &str) -> ScriptCost {
    let mut cost = ScriptCost::default();
    for line in info.lines() {
        let Some((name, fields)) = line.trim().split_once(':') else {
            continue;
        };
        if name != "cmdstat_evalsha" && name != "cmdstat_eval" {
            continue;
        }
        for field in fields.split(',') {
            match field.split_once('=') {
                Some(("calls", v)) => cost.calls += v.parse::<u64>().unwrap_or(0),
                Some(("usec", v)) => cost.usec += v.parse::<u64>().unwrap_or(0),
                _ => {}
            }
        }
    }
    cost
}

/// One row of the shared-mode table: one (workload, K, mix[, outage policy]) run.
#[derive(Debug, Clone)]
pub struct SharedRow {
    /// `K=4 mixed`, `1 process py (not shared)`, `reference`...
    pub label: String,
    /// The run (1-based).
    pub run: usize,
    /// Processes.
    pub k: usize,
    /// The merged figures.
    pub figures: RunFigures,
    /// The utilisation of one process of this mix, not shared, in the same run.
    pub one_process: Option<f64>,
    /// The reference client's utilisation in the same run.
    pub reference: Option<f64>,
    /// Script calls and Redis time during the run (`None`: not shared).
    pub script: Option<ScriptCost>,
    /// What the clients measured of the store.
    pub store: Option<StoreStats>,
    /// Per process (shared runs).
    pub processes: Vec<ProcessNote>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |x| format!("{x:.digits$}"))
}

/// The shared-mode table of one workload: one line per run and row, in order.
pub fn shared_table(workload: &Workload, bound_s: f64, rows: &[SharedRow]) -> String {
    let mut out = String::new();
    let n = workload.requests.len() as f64;
    let _ = writeln!(
        out,
        "**{}** (`{}`, {} requests; bound {:.3} s)\n",
        workload.title,
        workload.name,
        workload.requests.len(),
        bound_s
    );
    out.push_str("| run | processes | utilisation | share of one process | reference | 429 global / user / sub-limit / shared | failed / unfinished | duplicates | script calls per request | Redis µs per request | reservations per request | reservation p50 / p99 ms | denials (scope: n) | store unavailable | per process: loop lag max ms / refused |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let f = &r.figures;
        let mark = if f.failed > 0 { "*" } else { "" };
        let share = match (f.utilisation, r.one_process) {
            (Some(u), Some(one)) if one > 0.0 => Some(u / one),
            _ => None,
        };
        let (reservations, p50, p99, denials, unavailable) = match &r.store {
            Some(s) => {
                let total: usize = s.answers.values().sum();
                let denials: Vec<String> = s
                    .answers
                    .iter()
                    .filter_map(|(k, v)| Some(format!("{}: {v}", k.strip_prefix("denied:")?)))
                    .collect();
                let unavailable = ["unavailable", "error", "timeout"]
                    .iter()
                    .filter_map(|k| s.answers.get(*k))
                    .sum::<usize>();
                (
                    format!("{:.2}", total as f64 / n),
                    opt(quantile(&s.reserve_ms, 0.5), 1),
                    opt(quantile(&s.reserve_ms, 0.99), 1),
                    if denials.is_empty() {
                        "–".into()
                    } else {
                        denials.join(", ")
                    },
                    format!(
                        "{unavailable} answers, {} pauses",
                        s.observed.get("StoreUnavailable").copied().unwrap_or(0)
                    ),
                )
            }
            None => ("–".into(), "–".into(), "–".into(), "–".into(), "–".into()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {}{mark} | {}{mark} | {} | {} / {} / {} / {} | {} / {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |{}",
            r.run,
            r.label,
            opt(f.utilisation, 2),
            opt(share, 2),
            opt(r.reference, 2),
            f.tally.global_429,
            f.tally.bucket_429,
            f.tally.sub_429,
            f.tally.shared_429,
            f.failed,
            f.lost,
            f.tally.duplicates(),
            r.script
                .map_or("–".into(), |c| format!("{:.2}", c.calls as f64 / n)),
            r.script
                .map_or("–".into(), |c| format!("{:.0}", c.usec as f64 / n)),
            reservations,
            p50,
            p99,
            denials,
            unavailable,
            if r.processes.is_empty() {
                "–".to_string()
            } else {
                r.processes
                    .iter()
                    .map(|p| format!("{}/{}", opt(p.lag_max_ms, 0), p.refused))
                    .collect::<Vec<_>>()
                    .join(" · ")
            },
            match (&f.problem, f.errors.is_empty()) {
                (Some(p), _) => format!(" <!-- {p} -->"),
                (None, false) => format!(
                    " <!-- {} -->",
                    f.errors
                        .iter()
                        .map(|(e, n)| format!("{e}: {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => String::new(),
            }
        );
    }
    out
}
