//! The driver in virtual time (tokio's paused clock): a burst against the simulator's Discord
//! (the one timer, re-armed as deadlines move), cancellation by dropping the future, `max_wait`,
//! `close`, and errors with the core's codes.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use ratelane::sim::{BucketSpec, RouteSpec, Server, ServerConfig};
use ratelane::{Config, MILLISECOND, Request, SECOND};
use ratelane_tokio::{Buffered, Error, RateLimiter};
use tokio::time::Instant;

/// The simulator's Discord: global 50 per second, messages 5 per second per channel.
fn discord() -> Arc<Mutex<Server>> {
    let config = ServerConfig::discord()
        .bucket("msg", BucketSpec::fixed(5, SECOND))
        .route("POST /channels/:id/messages", RouteSpec::bucket("msg"));
    Arc::new(Mutex::new(Server::new(config)))
}

/// A `send` that answers at once from `server`, at tokio's (virtual) time since `epoch`.
fn answer(server: &Mutex<Server>, epoch: Instant, path: &str) -> Buffered {
    let at = Instant::now().duration_since(epoch).as_nanos() as u64;
    let response = server.lock().unwrap().handle(at, 0, &Request::new("POST", path));
    Buffered { status: response.status, headers: response.headers, body: response.body_text.into_bytes() }
}

async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
}

#[tokio::test(start_paused = true)]
async fn a_burst_at_the_global_cap_in_virtual_time_takes_no_429() {
    let server = discord();
    let limiter = RateLimiter::new(Config::default()).unwrap();
    let epoch = limiter.epoch();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..300u64 {
        let (limiter, server) = (limiter.clone(), Arc::clone(&server));
        tasks.spawn(async move {
            let path = format!("/channels/{}/messages", 100_000_000_000_000_000 + i % 100);
            limiter
                .run("POST", &path, || {
                    let reply = answer(&server, epoch, &path);
                    async move { Ok::<_, std::io::Error>(reply) }
                })
                .await
                .map(|r| r.status)
        });
    }
    let statuses = tasks.join_all().await;
    assert!(statuses.iter().all(|s| matches!(s, Ok(200))), "{statuses:?}");
    let server = server.lock().unwrap();
    assert_eq!(server.count_429(), 0);
    assert_eq!(server.log().len(), 300);
    // 300 at 50 per second: at least 5 windows, and not much more.
    let took = Instant::now().duration_since(epoch);
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(8), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn dropping_a_request_the_limiter_let_go_gives_its_global_token_back() {
    let mut config = Config::default();
    config.global_limit = 1;
    let limiter = RateLimiter::new(config).unwrap();
    let sends = Arc::new(AtomicUsize::new(0));
    let send = |sends: Arc<AtomicUsize>| {
        move || {
            sends.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, std::io::Error>(Buffered { status: 200, ..Buffered::default() }) }
        }
    };
    // A takes this window's one token.
    limiter.run("GET", "/users/@me", send(Arc::clone(&sends))).await.unwrap();
    assert_eq!(sends.load(Ordering::SeqCst), 1);
    // B waits for the next window; the limiter lets it go there, but B's caller is gone
    // before it ran: its future is dropped without being polled again.
    let mut b = Box::pin(limiter.run("GET", "/gateway", send(Arc::clone(&sends))));
    assert!(poll_once(&mut b).await.is_pending());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(b);
    assert_eq!(sends.load(Ordering::SeqCst), 1, "B never ran its send");
    // C goes at once, on the token B gave back (else it would wait for another window).
    let before = Instant::now();
    limiter.run("GET", "/voice/regions", send(Arc::clone(&sends))).await.unwrap();
    assert_eq!(Instant::now(), before);
    assert_eq!((limiter.queued(), limiter.in_flight()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_queued_request_leaves_its_queue() {
    let mut config = Config::default();
    config.global_limit = 1;
    let limiter = RateLimiter::new(config).unwrap();
    let ok = || async { Ok::<_, std::io::Error>(Buffered { status: 200, ..Buffered::default() }) };
    limiter.run("GET", "/users/@me", ok).await.unwrap();
    let mut queued = Box::pin(limiter.run("GET", "/gateway", ok));
    assert!(poll_once(&mut queued).await.is_pending());
    assert_eq!(limiter.queued(), 1);
    drop(queued);
    assert_eq!(limiter.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn max_wait_close_and_codes() {
    let mut config = Config::default();
    config.global_limit = 1;
    config.max_wait = Some(500 * MILLISECOND);
    let limiter = RateLimiter::new(config).unwrap();
    let ok = || async { Ok::<_, std::io::Error>(Buffered { status: 200, ..Buffered::default() }) };
    limiter.run("GET", "/users/@me", ok).await.unwrap();
    // The next window is ~1 s away: above max_wait, refused at once with the prediction.
    let e = limiter.run("GET", "/gateway", ok).await.unwrap_err();
    assert_eq!(e.code(), "max_wait_exceeded");
    assert!(e.rejection().unwrap().predicted_wait().unwrap() > Duration::from_millis(500));
    // A request in flight when the limiter closes still takes its answer; close() waits for it.
    let slow = limiter.clone();
    let flying = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        slow.run("GET", "/voice/regions", || async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, std::io::Error>(Buffered { status: 200, ..Buffered::default() })
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(limiter.in_flight(), 1);
    limiter.close().await;
    assert_eq!(flying.await.unwrap().unwrap().status, 200);
    assert_eq!(limiter.in_flight(), 0);
    match limiter.run("GET", "/gateway", ok).await {
        Err(Error::Usage(e)) => assert_eq!(e.code(), "limiter_closed"),
        other => panic!("{other:?}"),
    }
    // A malformed path is the caller's error.
    let fresh = RateLimiter::new(Config::default()).unwrap();
    assert_eq!(fresh.run("GET", "", ok).await.unwrap_err().code(), "invalid_request");
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_fails_closed_and_a_transport_failure_is_classified() {
    let mut config = Config::default();
    config.global_limit = 1;
    let limiter = RateLimiter::new(config).unwrap();
    let ok = || async { Ok::<_, std::io::Error>(Buffered { status: 200, ..Buffered::default() }) };
    limiter.run("GET", "/users/@me", ok).await.unwrap();
    let waiting = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.run("GET", "/gateway", ok).await })
    };
    tokio::task::yield_now().await;
    limiter.close().await;
    assert_eq!(waiting.await.unwrap().unwrap_err().code(), "closed");

    // A POST whose connection was reset may have been processed: not re-sent, maybe_sent.
    let limiter = RateLimiter::new(Config::default()).unwrap();
    let attempts = AtomicUsize::new(0);
    let e = limiter
        .run("POST", "/channels/1/messages", || {
            attempts.fetch_add(1, Ordering::SeqCst);
            async { Err::<Buffered, _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset)) }
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), "maybe_sent");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert!(e.rejection().unwrap().source.is_some());
}
