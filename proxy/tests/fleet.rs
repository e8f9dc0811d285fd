//! Two proxies (processes of the built binary) on one Redis, sharing one budget per token:
//! at the global cap they take no global 429; when one is killed mid-burst, every request it
//! had accepted either completed or ended in an error its client saw, none was sent twice, and
//! the other carries on within the same budget.
//!
//! They need a Redis: `scripts/tests.d/50-proxy.sh` starts one, exports `RATELANE_REDIS_URL`
//! and runs them with `--include-ignored`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use support::{Imitation, ProxyProcess, TOKEN, http_client, message_path};

fn redis_url() -> String {
    std::env::var("RATELANE_REDIS_URL").expect("RATELANE_REDIS_URL (scripts/tests.d/50-proxy.sh sets it)")
}

/// Two proxies in front of `upstream` on one Redis, under a prefix of their own.
fn fleet(upstream: &str, name: &str) -> (ProxyProcess, ProxyProcess) {
    let prefix = format!("{{ratelane:test-{}-{name}}}:", std::process::id());
    let url = redis_url();
    let args = [
        "--upstream", upstream, "--redis", url.as_str(), "--redis-prefix", prefix.as_str(),
        // A proxy that dies holds what it took for 2 s, not 30.
        "--redis-lease", "2", "--max-wait", "60",
    ];
    (ProxyProcess::start(&args), ProxyProcess::start(&args))
}

/// What one request ended in, as its client saw it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Status(u16),
    Error,
}

/// Sends messages `rids` (over `channels` channels), each to the proxy `to(rid)` picks;
/// `answered[i]` counts the answers proxy `i` gave.
async fn burst(urls: [String; 2], rids: std::ops::Range<u64>, channels: u64, answered: Arc<[AtomicUsize; 2]>) -> Vec<(u64, usize, Seen)> {
    let client = http_client();
    let mut tasks = tokio::task::JoinSet::new();
    for rid in rids {
        let which = (rid % 2) as usize;
        let url = format!("{}{}", urls[which], message_path(rid % channels, rid));
        let (client, answered) = (client.clone(), Arc::clone(&answered));
        tasks.spawn(async move {
            let sent = client
                .post(url)
                .header("authorization", format!("Bot {TOKEN}"))
                .header("content-type", "application/json")
                .body(r#"{"content": "hi"}"#)
                .timeout(Duration::from_secs(60))
                .send()
                .await;
            let seen = match sent {
                Ok(answer) => match answer.bytes().await {
                    Ok(_) => Seen::Status(answer_status(&answered, which, 200)),
                    Err(_) => Seen::Error,
                },
                Err(_) => Seen::Error,
            };
            (rid, which, seen)
        });
    }
    let mut seen = tasks.join_all().await;
    seen.sort_by_key(|s| s.0);
    seen
}

fn answer_status(answered: &[AtomicUsize; 2], which: usize, status: u16) -> u16 {
    answered[which].fetch_add(1, Ordering::SeqCst);
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: run scripts/tests.d/50-proxy.sh"]
async fn two_proxies_at_the_global_cap_take_no_global_429() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let (a, b) = fleet(&imitation.base, "cap");
    let answered = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let seen = burst([a.url(), b.url()], 0..200, 100, answered).await;
    assert!(seen.iter().all(|s| s.2 == Seen::Status(200)), "{seen:?}");
    let tally = imitation.tally();
    assert_eq!(tally.arrivals, 200, "{tally:?}");
    assert_eq!((tally.global_429, tally.bucket_429), (0, 0), "{tally:?}");
    assert_eq!(tally.duplicates(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: run scripts/tests.d/50-proxy.sh"]
async fn one_of_two_proxies_killed_mid_burst_loses_nothing() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let (mut a, b) = fleet(&imitation.base, "kill");
    let answered = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let sending = tokio::spawn(burst([a.url(), b.url()], 0..200, 100, Arc::clone(&answered)));
    // Kill A (SIGKILL) once it has answered a few of its requests, mid-burst (bounded wait).
    for _ in 0..1000 {
        if answered[0].load(Ordering::SeqCst) >= 15 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.kill();
    let seen = tokio::time::timeout(Duration::from_secs(90), sending).await.expect("every request ends").expect("no panic");
    assert_eq!(seen.len(), 200, "every request has an outcome its client saw");
    let tally = imitation.tally();
    for (rid, which, outcome) in &seen {
        match outcome {
            // Answered: the server accepted it, once.
            Seen::Status(200) => assert!(tally.accepted(*rid), "rid {rid} answered 200 but not accepted"),
            Seen::Status(other) => panic!("rid {rid} via proxy {which}: status {other}"),
            // Only requests to the killed proxy may end in an error, which their client saw.
            Seen::Error => assert_eq!(*which, 0, "rid {rid}: the surviving proxy failed it"),
        }
    }
    let errors = seen.iter().filter(|s| s.2 == Seen::Error).count();
    assert!(errors > 0, "A was killed mid-burst: some of its requests end in an error");
    assert_eq!(tally.duplicates(), 0, "none sent twice");
    assert_eq!(tally.global_429, 0, "{tally:?}");
    // B carries on within the same budget: another burst through it alone.
    let more = burst([b.url(), b.url()], 1000..1100, 50, Arc::clone(&answered)).await;
    assert!(more.iter().all(|s| s.2 == Seen::Status(200)), "{more:?}");
    let tally = imitation.tally();
    assert_eq!(tally.global_429, 0, "{tally:?}");
    assert_eq!(tally.duplicates(), 0);
}
