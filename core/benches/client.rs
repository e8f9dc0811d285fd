//! Client-engine benchmarks: the cost of one request life (enqueue, send, response) with 1, 10k
//! and 1M learned buckets, beside governor's keyed check at 10k keys in the same run; the cost of a 429 storm; the cost of an answer at the global cap
//! with 400 and 4,000 channels waiting for the global budget; memory per idle bucket and per
//! queued request (counted by a wrapping global allocator).
//!
//! Run: `cargo bench -p ratelane --bench client -- --warm-up-time 1 --measurement-time 3`
#![allow(unsafe_code)] // the counting allocator below; nothing else

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use ratelane::{Config, Limiter, MILLISECOND, Output, Request, Response, SECOND};

#[path = "support/life.rs"]
mod life;
use life::{drain, life};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn config() -> Config {
    let mut c = Config::default();
    // Benchmarks measure the engine, not the global limit's waiting.
    c.global_limit = 0;
    c.invalid_request_limit = 0;
    c.bucket_idle_ttl = 24 * 3600 * SECOND;
    c
}

fn path(i: usize) -> String {
    format!("/channels/{}/messages", 100_000_000_000_000_000u64 + i as u64)
}

/// A limiter that has learned `n` buckets (one per channel), all at one instant.
fn warmed(n: usize) -> (Limiter, Vec<String>) {
    warmed_every(n, 0)
}

/// A limiter that has learned `n` buckets, one every `step` nanoseconds after the first.
fn warmed_every(n: usize, step: u64) -> (Limiter, Vec<String>) {
    let mut l = Limiter::new(config()).unwrap();
    let paths: Vec<String> = (0..n).map(path).collect();
    for (i, p) in (0u64..).zip(&paths) {
        life(&mut l, MILLISECOND + i * step, p, 0);
    }
    (l, paths)
}

fn request_life(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_life");
    group.throughput(Throughput::Elements(1));
    for n in [1usize, 10_000, 1_000_000] {
        let (mut l, paths) = warmed(n);
        let mut i = 0usize;
        let mut now = SECOND;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                i = (i + 7919) % paths.len();
                // 1 ms apart: the previous answer's window has ended.
                now += MILLISECOND;
                life(black_box(&mut l), now, &paths[i], 0);
            })
        });
    }
    // The bound of the issue: a request life at 10k buckets against governor's keyed check
    // (as most users run it: `RateLimiter::keyed`, its default clock) on 10k keys, each always
    // admitted, in this same group so that both run under the same machine load.
    let n = 10_000;
    let keys: Vec<String> = (0..n).map(path).collect();
    let quota = Quota::with_period(std::time::Duration::from_millis(1))
        .expect("non-zero")
        .allow_burst(std::num::NonZeroU32::new(1_000_000_000).expect("non-zero"));
    let limiter = RateLimiter::keyed(quota);
    let mut i = 0usize;
    group.bench_with_input(BenchmarkId::new("governor_keyed_check", n), &n, |b, _| {
        b.iter(|| {
            i = (i + 7919) % n;
            black_box(limiter.check_key(&keys[i]).is_ok())
        })
    });
    group.finish();
}

fn storm_429(c: &mut Criterion) {
    // 1000 requests in one bucket; every answer is a user-scope 429 that is retried, then the
    // bucket opens. Measures the cost per 429 handled.
    let mut group = c.benchmark_group("storm_429");
    group.throughput(Throughput::Elements(1000));
    let r429 = [
        ("Retry-After", "1"),
        ("X-RateLimit-Limit", "1000"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "1"),
        ("X-RateLimit-Bucket", "storm"),
        ("X-RateLimit-Scope", "user"),
    ];
    group.bench_function("1000_requests", |b| {
        b.iter(|| {
            let mut l = Limiter::new(config()).unwrap();
            let mut now = 0;
            // Learn the bucket with room for all.
            l.enqueue(now, Request::new("GET", "/guilds/1")).unwrap();
            let first = drain(&mut l).unwrap();
            let open = [
                ("X-RateLimit-Limit", "1000"),
                ("X-RateLimit-Remaining", "999"),
                ("X-RateLimit-Reset-After", "10"),
                ("X-RateLimit-Bucket", "storm"),
            ];
            l.handle_response(now, first, &Response::new(200, &open)).unwrap();
            drain(&mut l);
            let mut sent = Vec::with_capacity(1000);
            for _ in 0..1000 {
                l.enqueue(now, Request::new("GET", "/guilds/1")).unwrap();
                if let Some(id) = drain(&mut l) {
                    sent.push(id);
                }
            }
            now += 50 * MILLISECOND;
            for id in sent {
                black_box(l.handle_response(now, id, &Response::new(429, &r429)).unwrap());
            }
            drain(&mut l);
            black_box(l.queued());
        })
    });
    group.finish();
}

fn global_cap_answer(c: &mut Criterion) {
    // A bot at its global limit (250 per second): 250 messages in flight, one per channel,
    // and `n` more channels' messages waiting for the global budget. Times the 250 answers
    // (each with its channel's bucket headers and the drain after it): what each answer costs
    // while that many queues wait.
    let mut group = c.benchmark_group("global_cap_answer");
    group.throughput(Throughput::Elements(250));
    for waiting in [400usize, 4_000] {
        let setup = || {
            let mut config = config();
            config.global_limit = 250;
            let mut l = Limiter::new(config).unwrap();
            for i in 0..250 + waiting {
                l.enqueue(SECOND, Request::new("POST", path(i))).expect("a valid request");
            }
            let mut sent = Vec::with_capacity(250);
            loop {
                match l.poll_output() {
                    Output::Send(id) => sent.push(id),
                    Output::WaitUntil(_) | Output::Idle => break,
                    _ => {}
                }
            }
            assert_eq!(sent.len(), 250, "the global limit lets 250 go");
            (l, sent)
        };
        group.bench_with_input(BenchmarkId::from_parameter(waiting), &waiting, |b, _| {
            b.iter_batched(
                setup,
                |(mut l, sent)| {
                    let mut now = SECOND + 20 * MILLISECOND;
                    for (i, id) in sent.into_iter().enumerate() {
                        now += 100_000;
                        let bucket = format!("b{i}");
                        let headers = [
                            ("X-RateLimit-Limit", "5"),
                            ("X-RateLimit-Remaining", "4"),
                            ("X-RateLimit-Reset-After", "1.000"),
                            ("X-RateLimit-Bucket", bucket.as_str()),
                        ];
                        l.handle_response(now, id, &Response::new(200, &headers)).expect("a known request");
                        drain(&mut l);
                    }
                    l
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn memory(_: &mut Criterion) {
    // Bytes held per idle learned bucket, and per queued request.
    let n = 100_000;
    let per_bucket = |step: u64| {
        let before = LIVE.load(Ordering::Relaxed);
        let (l, paths) = warmed_every(n, step);
        let paths_bytes: isize = paths.iter().map(|p| p.capacity() as isize).sum::<isize>()
            + (paths.capacity() * std::mem::size_of::<String>()) as isize;
        let after = LIVE.load(Ordering::Relaxed);
        drop(l);
        (after - before - paths_bytes) as f64 / n as f64
    };
    // All learned at one instant, so the identity's log of the global window's sends holds
    // every one of them when measured; and learned one per millisecond, as over 100 s, so
    // that the log holds only the last window's (as for a bot that learned them over time).
    let at_once = per_bucket(0);
    let over_time = per_bucket(MILLISECOND);

    let mut l = Limiter::new(config()).unwrap();
    // One bucket, exhausted, so everything queues.
    l.enqueue(0, Request::new("POST", "/channels/1/messages")).unwrap();
    let id = drain(&mut l).unwrap();
    let full = [
        ("X-RateLimit-Limit", "5"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "3600"),
        ("X-RateLimit-Bucket", "q"),
    ];
    l.handle_response(0, id, &Response::new(200, &full)).unwrap();
    drain(&mut l);
    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..n {
        l.enqueue(MILLISECOND, Request::new("POST", "/channels/1/messages")).unwrap();
    }
    drain(&mut l);
    let after = LIVE.load(Ordering::Relaxed);
    let per_request = (after - before) as f64 / n as f64;
    println!("memory/idle_bucket: {at_once:.0} bytes per learned idle bucket ({n} buckets, learned at one instant)");
    println!("memory/idle_bucket_over_time: {over_time:.0} bytes per learned idle bucket ({n} buckets, one per ms)");
    println!("memory/queued_request: {per_request:.0} bytes per queued request ({n} queued)");
}

criterion_group!(benches, request_life, storm_429, global_cap_answer, memory);
criterion_main!(benches);
