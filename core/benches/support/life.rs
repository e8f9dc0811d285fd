//! The request life that `benches/client.rs` times and `examples/request_life.rs` counts the
//! instructions of (included by both with `#[path]`: a bench and an example share no crate).

use ratelane::{Limiter, Output, Request, Response};

/// A roomy bucket whose window ends 1 ms after each answer (the next life is 1 ms later, so
/// every life also crosses a window reset: the engine's full path).
pub const HEADERS: [(&str, &str); 4] = [
    ("X-RateLimit-Limit", "1000000"),
    ("X-RateLimit-Remaining", "999999"),
    ("X-RateLimit-Reset-After", "0.001"),
    ("X-RateLimit-Bucket", "bench"),
];

/// Polls until `wait_until` or `idle`; the last request sent, if any.
pub fn drain(l: &mut Limiter) -> Option<u64> {
    let mut sent = None;
    loop {
        match l.poll_output() {
            Output::Send(id) => sent = Some(id),
            Output::WaitUntil(_) | Output::Idle => return sent,
            _ => {}
        }
    }
}

/// One full life: enqueue at `now`, drain (Send), answer `trip` later, drain.
pub fn life(l: &mut Limiter, now: u64, path: &str, trip: u64) {
    l.enqueue(now, Request::new("POST", path)).expect("a valid request");
    let id = drain(l).expect("sent at once");
    l.handle_response(now + trip, id, &Response::new(200, &HEADERS)).expect("a known request");
    drain(l);
}
