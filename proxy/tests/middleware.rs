//! A Rust client, reqwest through ratelane-tokio's middleware, against the Discord imitation: a
//! burst at the global cap completes with no 429 at all.

mod support;

use ratelane::Config;
use ratelane_tokio::RateLimiter;
use ratelane_tokio::middleware::RateLimitMiddleware;
use support::{Imitation, TOKEN, message_path};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_burst_at_the_global_cap_takes_no_429() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let limiter = RateLimiter::new(Config::default()).expect("the default config");
    let client = reqwest_middleware::ClientBuilder::new(support::http_client())
        .with(RateLimitMiddleware::new(limiter.clone()))
        .build();
    // 150 messages over 75 channels: the global limit (50 per second) binds, each channel's
    // bucket (5 per second) does not.
    let mut tasks = tokio::task::JoinSet::new();
    for rid in 0..150u64 {
        let client = client.clone();
        let url = format!("{}{}", imitation.base, message_path(rid % 75, rid));
        tasks.spawn(async move {
            let answer = client
                .post(url)
                .header("authorization", format!("Bot {TOKEN}"))
                .header("content-type", "application/json")
                .body(r#"{"content": "hello"}"#)
                .send()
                .await
                .expect("every request is answered");
            answer.status().as_u16()
        });
    }
    let statuses: Vec<u16> = tasks.join_all().await;
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let tally = imitation.tally();
    assert_eq!(tally.arrivals, 150);
    assert_eq!((tally.global_429, tally.bucket_429, tally.sub_429), (0, 0, 0), "{tally:?}");
    assert_eq!(tally.duplicates(), 0);
    limiter.close().await;
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_a_middleware_error_with_the_cores_code() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut config = Config::default();
    config.global_limit = 2;
    config.max_wait = Some(200 * ratelane::MILLISECOND);
    let limiter = RateLimiter::new(config).expect("a valid config");
    let client = reqwest_middleware::ClientBuilder::new(support::http_client())
        .with(RateLimitMiddleware::new(limiter.clone()))
        .build();
    let mut tasks = tokio::task::JoinSet::new();
    for rid in 0..6u64 {
        let client = client.clone();
        let url = format!("{}{}", imitation.base, message_path(rid, rid));
        tasks.spawn(async move { client.post(url).header("authorization", format!("Bot {TOKEN}")).send().await });
    }
    let mut refused = 0;
    for result in tasks.join_all().await {
        match result {
            Ok(answer) => assert_eq!(answer.status(), 200),
            Err(reqwest_middleware::Error::Middleware(e)) => {
                let e = e.downcast_ref::<ratelane_tokio::middleware::MiddlewareError>().expect("ratelane's error");
                assert_eq!(e.code(), "max_wait_exceeded");
                assert!(e.rejection().and_then(|r| r.predicted_wait()).is_some_and(|w| w.as_millis() > 200));
                refused += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    // Two per second: two go at once, the rest would wait past 200 ms.
    assert_eq!(refused, 4);
    assert_eq!(imitation.tally().global_429, 0);
    limiter.close().await;
}
