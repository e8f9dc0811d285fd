//! The pure parts of the shared-mode runs (`--processes`): the split of a workload over K
//! processes, the merge of their K reports on one clock, and the store's cost as Redis and the
//! clients report it. No process, Redis or clock here.

use std::collections::BTreeSet;

use ratelane::sim::WindowKind;
use ratelane::{MILLISECOND, SECOND};
use ratelane_realtime::imitation::Tally;
use ratelane_realtime::limits::Limits;
use ratelane_realtime::schedule::bound;
use ratelane_realtime::score::{ClientReport, LoopLag, Outcome, RunFigures};
use ratelane_realtime::shared::{
    Lang, ProcessNote, ScriptCost, StoreStats, merge, mix_langs, per_process, quantile,
    script_cost, shared_table, split,
};
use ratelane_realtime::workload;

#[test]
fn split_is_round_robin_disjoint_and_complete() {
    let w = workload::global_cap();
    for k in [1, 2, 3, 4, 8] {
        let parts = split(&w.requests, k);
        assert_eq!(parts.len(), k);
        // Request i goes to process i mod k, in the workload's order.
        for (p, part) in parts.iter().enumerate() {
            let expected: Vec<u64> = w
                .requests
                .iter()
                .enumerate()
                .filter(|(i, _)| i % k == p)
                .map(|(_, r)| r.rid)
                .collect();
            assert_eq!(part.iter().map(|r| r.rid).collect::<Vec<_>>(), expected);
        }
        // Disjoint and complete: every rid exactly once.
        let all: Vec<u64> = parts.iter().flatten().map(|r| r.rid).collect();
        let set: BTreeSet<u64> = all.iter().copied().collect();
        assert_eq!(all.len(), w.requests.len());
        assert_eq!(set, w.requests.iter().map(|r| r.rid).collect());
        // Balanced: sizes differ by at most one.
        let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
    }
    // Every process of K = 4 gets messages to the one channel of one_channel: the bucket is
    // really shared.
    let one = workload::one_channel();
    assert!(split(&one.requests, 4).iter().all(|p| p.len() == 15));
    // K = 0 is treated as one process, not a panic.
    assert_eq!(split(&one.requests, 0).len(), 1);
}

#[test]
fn mixes_are_all_python_all_node_or_half_and_half() {
    assert_eq!(mix_langs("py", 3).unwrap(), vec![Lang::Py; 3]);
    assert_eq!(mix_langs("node", 2).unwrap(), vec![Lang::Node; 2]);
    for k in [2, 4, 8] {
        let l = mix_langs("mixed", k).unwrap();
        assert_eq!(l.iter().filter(|x| **x == Lang::Py).count(), k / 2);
        assert_eq!(l.iter().filter(|x| **x == Lang::Node).count(), k / 2);
    }
    assert_eq!(mix_langs("mixed", 1).unwrap(), vec![Lang::Py]);
    assert!(mix_langs("rust", 2).is_err());
}

fn outcome(rid: u64, t: Option<f64>, error: Option<&str>) -> Outcome {
    Outcome {
        rid,
        t,
        status: t.map(|_| 200),
        error: error.map(str::to_string),
    }
}

fn report(t0: Option<f64>, results: Vec<Outcome>, store: Option<StoreStats>) -> ClientReport {
    ClientReport {
        client: "x".into(),
        library: "lib".into(),
        setup_s: 0.5,
        t0_unix_s: t0,
        results,
        store,
        loop_lag_ms: None,
    }
}

#[test]
fn merge_puts_the_reports_on_the_earliest_clock_and_sums_the_store() {
    let a = report(
        Some(1000.25),
        vec![outcome(0, Some(1.0), None), outcome(2, Some(2.0), None)],
        Some(StoreStats {
            reserve_ms: vec![1.0, 2.0],
            answers: [("granted".to_string(), 2)].into(),
            observed: Default::default(),
        }),
    );
    let b = report(
        Some(1000.0),
        vec![
            outcome(1, Some(1.5), None),
            outcome(3, None, Some("unfinished")),
        ],
        Some(StoreStats {
            reserve_ms: vec![3.0],
            answers: [("granted".to_string(), 1), ("denied:global".to_string(), 4)].into(),
            observed: [("StoreUnavailable".to_string(), 1)].into(),
        }),
    );
    let m = merge("K=2", &[a, b]);
    assert_eq!(m.client, "K=2");
    assert_eq!(m.t0_unix_s, Some(1000.0));
    let t = |rid: u64| m.results.iter().find(|o| o.rid == rid).unwrap().t;
    // a started 0.25 s after b: its times move by 0.25 s; b's stay.
    assert_eq!(t(0), Some(1.25));
    assert_eq!(t(2), Some(2.25));
    assert_eq!(t(1), Some(1.5));
    assert_eq!(t(3), None);
    let s = m.store.clone().unwrap();
    assert_eq!(s.reserve_ms, vec![1.0, 2.0, 3.0]);
    assert_eq!(s.answers["granted"], 3);
    assert_eq!(s.answers["denied:global"], 4);
    assert_eq!(s.observed["StoreUnavailable"], 1);

    // The figures of the merged report: the last outcome on the common clock, the lost one.
    let w = workload::Workload {
        name: "w",
        title: "w",
        requests: workload::deep_queue().requests[..4].to_vec(),
    };
    let f = RunFigures::new(&w, 1.0, Ok(&m), Default::default());
    assert_eq!((f.failed, f.lost), (0, 1));
    assert_eq!(f.makespan, Some(2.25));
    assert_eq!(f.utilisation, None);

    // Reports without a start time are taken as started together; no store, no store figures.
    let m = merge(
        "K=2",
        &[
            report(None, vec![outcome(0, Some(1.0), None)], None),
            report(None, vec![outcome(1, Some(3.0), None)], None),
        ],
    );
    assert_eq!(m.t0_unix_s, None);
    assert_eq!(
        m.results.iter().map(|o| o.t).collect::<Vec<_>>(),
        vec![Some(1.0), Some(3.0)]
    );
    assert!(m.store.is_none());
}

#[test]
fn quantiles_by_nearest_rank() {
    assert_eq!(quantile(&[], 0.5), None);
    let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
    assert_eq!(quantile(&v, 0.5), Some(50.0));
    assert_eq!(quantile(&v, 0.99), Some(99.0));
    assert_eq!(quantile(&v, 1.0), Some(100.0));
    assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
}

#[test]
fn script_cost_counts_evalsha_and_eval_only() {
    let info = "# Commandstats\r\n\
        cmdstat_evalsha:calls=120,usec=3600,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_eval:calls=2,usec=100,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_script|load:calls=2,usec=40,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_ping:calls=5,usec=5,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n";
    let c = script_cost(info);
    assert_eq!(
        c,
        ScriptCost {
            calls: 122,
            usec: 3700
        }
    );
    assert_eq!(script_cost(""), ScriptCost::default());
    assert_eq!(
        c.plus(c),
        ScriptCost {
            calls: 244,
            usec: 7400
        }
    );
}

#[test]
fn one_channel_is_bound_by_its_bucket() {
    // 60 messages, 5 per (scaled) second: 12 windows, 11 s between the first and last arrival.
    let limits = Limits::discord(0.2, 250, 20 * MILLISECOND, WindowKind::Fixed);
    let w = workload::one_channel();
    assert_eq!(w.requests.len(), 60);
    assert_eq!(bound(&limits, &w).makespan, 11 * SECOND + 20 * MILLISECOND);
    // In the default Scoreboard (issue 41: a deep queue on a sliding window).
    assert!(workload::all().iter().any(|x| x.name == "one_channel"));
}

#[test]
fn the_table_reports_the_share_of_one_process_and_the_store() {
    let w = workload::one_channel();
    let results: Vec<Outcome> = w
        .requests
        .iter()
        .map(|r| outcome(r.rid, Some(2.0), None))
        .collect();
    let r = report(
        Some(0.0),
        results,
        Some(StoreStats {
            reserve_ms: vec![1.0; 120],
            answers: [
                ("granted".to_string(), 60),
                ("denied:bucket".to_string(), 60),
            ]
            .into(),
            observed: Default::default(),
        }),
    );
    let f = RunFigures::new(&w, 1.0, Ok(&r), Default::default());
    let row = ratelane_realtime::shared::SharedRow {
        label: "K=2 py".into(),
        run: 1,
        k: 2,
        figures: f,
        one_process: Some(0.25),
        reference: Some(1.0),
        script: Some(ScriptCost {
            calls: 150,
            usec: 6000,
        }),
        store: r.store.clone(),
        processes: vec![
            ProcessNote {
                lag_max_ms: Some(12.4),
                refused: 0,
            },
            ProcessNote {
                lag_max_ms: None,
                refused: 3,
            },
        ],
    };
    let text = shared_table(&w, 1.0, &[row]);
    // utilisation 0.5, twice one process's; 2.5 script calls and 100 µs per request; 2
    // reservations per request; the denials by scope.
    assert!(
        text.contains("| 1 | K=2 py | 0.50 | 2.00 | 1.00 | 0 / 0 / 0 / 0 | 0 / 0 | 0 | 2.50 | 100 | 2.00 | 1.0 / 1.0 | bucket: 60 | 0 answers, 0 pauses | 12/0 · –/3 |"),
        "{text}"
    );
}

#[test]
fn per_process_notes_count_refused_arrivals_of_each_part_and_the_worst_lag() {
    let w = workload::one_channel();
    let parts = split(&w.requests[..6], 2);
    // rid 0 (process 0) arrived three times, accepted once; rid 1 (process 1) twice, once;
    // rid 2 (process 0) once, accepted.
    let mut tally = Tally::default();
    tally.per_rid.insert(w.requests[0].rid, (3, 1));
    tally.per_rid.insert(w.requests[1].rid, (2, 1));
    tally.per_rid.insert(w.requests[2].rid, (1, 1));
    let mut a = report(Some(0.0), Vec::new(), None);
    a.loop_lag_ms = Some(LoopLag {
        p99: 2.0,
        max: 40.0,
    });
    let notes = per_process(&parts, &[Some(&a), None], &tally);
    assert_eq!(
        notes,
        vec![
            ProcessNote {
                lag_max_ms: Some(40.0),
                refused: 2
            },
            ProcessNote {
                lag_max_ms: None,
                refused: 1
            },
        ]
    );
    // The merged report keeps the worst lag of any process.
    let mut b = report(Some(0.0), Vec::new(), None);
    b.loop_lag_ms = Some(LoopLag { p99: 5.0, max: 9.0 });
    let m = merge("K=2", &[a, b]);
    assert_eq!(
        m.loop_lag_ms,
        Some(LoopLag {
            p99: 5.0,
            max: 40.0
        })
    );
}
