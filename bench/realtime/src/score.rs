//! The clients' reports, one run's figures, and the Scoreboard's markdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

use crate::imitation::Tally;
use crate::workload::Workload;

/// One request's outcome as a client reports it (`CLIENTS.md`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Outcome {
    /// The request.
    pub rid: u64,
    /// Seconds from submission to the final outcome; `None`: never finished.
    pub t: Option<f64>,
    /// The final HTTP status, if any.
    pub status: Option<u16>,
    /// `None` on a 2xx; otherwise the library's error.
    pub error: Option<String>,
}

/// A client's report of one run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClientReport {
    /// The client's name.
    pub client: String,
    /// The library and its version.
    #[serde(default)]
    pub library: String,
    /// Seconds spent setting up before submission.
    #[serde(default)]
    pub setup_s: f64,
    /// The wall clock (Unix seconds) at the zero of `t` (clients started with a barrier).
    #[serde(default)]
    pub t0_unix_s: Option<f64>,
    /// One entry per request.
    pub results: Vec<Outcome>,
    /// Shared mode: what the client measured of the store.
    #[serde(default)]
    pub store: Option<crate::shared::StoreStats>,
    /// How late the client's event loop ran a 10 ms timer during the run.
    #[serde(default)]
    pub loop_lag_ms: Option<LoopLag>,
}

/// Event-loop lag in milliseconds (the report's `loop_lag_ms`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct LoopLag {
    /// 99th percentile.
    #[serde(default)]
    pub p99: f64,
    /// The largest.
    #[serde(default)]
    pub max: f64,
}

/// The figures of one client on one workload in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFigures {
    /// Bound / makespan (`None`: some request never finished or the client failed).
    pub utilisation: Option<f64>,
    /// Seconds from submission to the last outcome.
    pub makespan: Option<f64>,
    /// Mean seconds from submission to each request's outcome (finished requests).
    pub mean_completion: Option<f64>,
    /// Requests that ended in an error.
    pub failed: usize,
    /// Requests with no outcome: missing from the report, or `unfinished` at the deadline.
    pub lost: usize,
    /// The server's accounting.
    pub tally: Tally,
    /// What went wrong with the client itself, if anything.
    pub problem: Option<String>,
    /// The most common error, for the notes.
    pub errors: BTreeMap<String, usize>,
}

impl RunFigures {
    /// The figures of `report` (or of a client that produced none: `problem`) on `workload`,
    /// whose bound is `bound_s` seconds.
    pub fn new(
        workload: &Workload,
        bound_s: f64,
        report: Result<&ClientReport, String>,
        tally: Tally,
    ) -> Self {
        let mut figures = RunFigures {
            utilisation: None,
            makespan: None,
            mean_completion: None,
            failed: 0,
            lost: workload.requests.len(),
            tally,
            problem: None,
            errors: BTreeMap::new(),
        };
        let report = match report {
            Ok(r) => r,
            Err(problem) => {
                figures.problem = Some(problem);
                return figures;
            }
        };
        let by_rid: BTreeMap<u64, &Outcome> = report.results.iter().map(|o| (o.rid, o)).collect();
        let mut times = Vec::new();
        let mut lost = 0;
        let mut failed = 0;
        for req in &workload.requests {
            match by_rid.get(&req.rid) {
                Some(o) if o.t.is_some() && o.error.as_deref() != Some("unfinished") => {
                    times.push(o.t.unwrap_or(0.0));
                    if let Some(e) = &o.error {
                        failed += 1;
                        *figures.errors.entry(e.clone()).or_default() += 1;
                    }
                }
                _ => lost += 1,
            }
        }
        figures.lost = lost;
        figures.failed = failed;
        if !times.is_empty() {
            figures.mean_completion = Some(times.iter().sum::<f64>() / times.len() as f64);
            let makespan = times.iter().copied().fold(0.0, f64::max);
            figures.makespan = Some(makespan);
            if lost == 0 && makespan > 0.0 {
                figures.utilisation = Some(bound_s / makespan);
            }
        }
        figures
    }
}

/// The runs of one workload: the bound, and each client's figures run by run beside the
/// reference's of the same run.
#[derive(Debug, Clone, Default)]
pub struct WorkloadRuns {
    /// The bound in seconds.
    pub bound_s: f64,
    /// Per client, in the order first seen: per run, (its figures, the reference's figures
    /// of the same run).
    pub clients: Vec<(String, Vec<(RunFigures, RunFigures)>)>,
}

impl WorkloadRuns {
    /// Adds `client`'s figures of one run, beside the reference's of that run.
    pub fn add(&mut self, client: &str, figures: RunFigures, reference: RunFigures) {
        match self.clients.iter_mut().find(|(c, _)| c == client) {
            Some((_, runs)) => runs.push((figures, reference)),
            None => self
                .clients
                .push((client.to_string(), vec![(figures, reference)])),
        }
    }
}

fn range(values: &[f64], digits: usize) -> String {
    if values.is_empty() {
        return "–".into();
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if format!("{lo:.digits$}") == format!("{hi:.digits$}") {
        format!("{lo:.digits$}")
    } else {
        format!("{lo:.digits$}–{hi:.digits$}")
    }
}

fn count_range(values: impl Iterator<Item = usize>) -> String {
    let v: Vec<usize> = values.collect();
    let lo = v.iter().copied().min().unwrap_or(0);
    let hi = v.iter().copied().max().unwrap_or(0);
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

/// The Scoreboard table of one workload (min–max over the runs).
pub fn table(workload: &Workload, runs: &WorkloadRuns) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "**{}** (`{}`, {} requests; bound {:.3} s)\n",
        workload.title,
        workload.name,
        workload.requests.len(),
        runs.bound_s
    );
    out.push_str(
        "| client | utilisation | share of reference | reference | mean completion / reference's | 429 global / user / sub-limit / shared / ban | invalid | failed / unfinished | duplicates | peak in flight per bucket |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for (client, rr) in &runs.clients {
        let util: Vec<f64> = rr.iter().filter_map(|(f, _)| f.utilisation).collect();
        let reference: Vec<f64> = rr.iter().filter_map(|(_, r)| r.utilisation).collect();
        let share: Vec<f64> = rr
            .iter()
            .filter_map(|(f, r)| Some(f.utilisation? / r.utilisation?))
            .collect();
        let mean: Vec<f64> = rr
            .iter()
            .filter_map(|(f, r)| Some(f.mean_completion? / r.mean_completion?))
            .collect();
        let t = |g: fn(&Tally) -> usize| count_range(rr.iter().map(|(f, _)| g(&f.tally)));
        // A client that gave up on requests finishes early: its utilisation is marked, not
        // comparable (it can exceed 1).
        let mark = if rr.iter().any(|(f, _)| f.failed > 0) {
            "*"
        } else {
            ""
        };
        let problems: Vec<&str> = rr
            .iter()
            .filter_map(|(f, _)| f.problem.as_deref())
            .collect();
        let _ = writeln!(
            out,
            "| {client} | {}{mark} | {}{mark} | {} | {} | {} / {} / {} / {} / {} | {} | {} / {} | {} | {} |{}",
            range(&util, 2),
            range(&share, 2),
            range(&reference, 2),
            if mean.is_empty() {
                "–".into()
            } else {
                format!("{}x", range(&mean, 2))
            },
            t(|t| t.global_429),
            t(|t| t.bucket_429),
            t(|t| t.sub_429),
            t(|t| t.shared_429),
            t(|t| t.banned_429),
            t(|t| t.invalid),
            count_range(rr.iter().map(|(f, _)| f.failed)),
            count_range(rr.iter().map(|(f, _)| f.lost)),
            count_range(rr.iter().map(|(f, _)| f.tally.duplicates() as usize)),
            count_range(rr.iter().map(|(f, _)| f.tally.peak_in_flight() as usize)),
            if problems.is_empty() {
                String::new()
            } else {
                format!(" <!-- {} -->", problems.join("; "))
            }
        );
    }
    out
}
