//! The driver: [`RateLimiter`] runs the sans-IO core on tokio.

// The driver reads the clocks the core must not: the monotonic one for `now` (tokio's, so that
// tests can pause it) and the wall clock that comes with each answer.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;

use ratelane::shared::{Reservation, ReservationAnswer, SharedConfig, SharedUpdate};
use ratelane::{
    BodyHints, Config, Disposition, FailReason, Failure, HeaderProfile, Limiter, Nanos, Output, Request, RequestId,
    Response,
};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::error::{Error, Rejection};
use crate::reply::{Reply, TransportError};

/// Per-request options of [`RateLimiter::run_with`]; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// When set, `path` is a route template and this is its major parameter (channel id...).
    pub major: Option<String>,
    /// The key of the token the request is sent with: a hash or the bot id, never the token.
    /// Each identity has its own global limit and buckets.
    pub identity: Option<String>,
    /// Fail at once (`deadline_exceeded`) if the request could not be sent before this.
    pub deadline: Option<Instant>,
    /// The same as `deadline`, relative to the call.
    pub timeout: Option<Duration>,
    /// Fail at once with `deferred` (carrying the predicted send time) when the predicted wait
    /// is longer than this (default: the limiter's `defer_after`, else none).
    pub defer_after: Option<Duration>,
    /// Higher goes first when requests compete for the global limit (default 0).
    pub priority: i32,
    /// Whether re-sending is harmless (default: by method).
    pub idempotent: Option<bool>,
    /// Whether the route is exempt from the global limit (default: by route).
    pub global_exempt: Option<bool>,
    /// The request's sub-limit class (default: derived from `body_keys`).
    pub sub_limit: Option<String>,
    /// The top-level keys of the JSON body, from which the profile derives the sub-limit class.
    pub body_keys: Vec<String>,
    /// The estimated cost beyond one request, by dimension (`("tokens", 1200)`); its answer's
    /// JSON body is then always read, for the `usage` that settles it.
    pub costs: Vec<(String, u64)>,
    /// The LLM model the request is for (`ratelane::llm::read_request` reads it from an OpenAI
    /// or Anthropic body): under the `openai`, `azure_openai`, `anthropic` and `auto` profiles it
    /// keys the per-model budgets, unless `major` is given.
    pub model: Option<String>,
}

impl Options {
    /// The core's request for `method` and `path` enqueued at `now` (nanoseconds since
    /// `epoch`): the conversion [`RateLimiter::run_with`] makes.
    pub fn request(&self, method: &str, path: &str, epoch: Instant, now: Nanos) -> Request {
        let mut r = Request::new(method, path);
        r.major = self.major.clone();
        if let Some(identity) = &self.identity {
            r.identity = identity.clone();
        }
        let deadline = match (self.deadline, self.timeout) {
            (Some(d), _) => Some(nanos_between(epoch, d)),
            (None, Some(t)) => Some(now.saturating_add(duration_nanos(t))),
            (None, None) => None,
        };
        r.deadline = deadline;
        r.defer_after = self.defer_after.map(duration_nanos);
        r.priority = self.priority;
        r.idempotent = self.idempotent;
        r.global_exempt = self.global_exempt;
        r.sub_limit = self.sub_limit.clone();
        r.body_keys = self.body_keys.clone();
        r.costs = self.costs.clone();
        r.model = self.model.clone();
        r
    }
}

fn duration_nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn nanos_between(epoch: Instant, at: Instant) -> Nanos {
    duration_nanos(at.saturating_duration_since(epoch))
}

/// Sees what the core decides, for metrics and logs: every output drained (with the `now` of
/// the input it followed), every disposition, enqueue and cancellation. Called with the
/// driver's lock held: keep it short, and never call back into the limiter.
pub trait Observer: Send + Sync + 'static {
    /// Request `id` was enqueued.
    fn enqueued(&self, id: RequestId, now: Nanos) {
        let _ = (id, now);
    }
    /// The core emitted `output`.
    fn output(&self, output: &Output, now: Nanos) {
        let _ = (output, now);
    }
    /// An answer or a transport failure of request `id` was handled with `disposition`.
    fn disposition(&self, id: RequestId, disposition: Disposition, now: Nanos) {
        let _ = (id, disposition, now);
    }
    /// The caller gave up on request `id` (its future was dropped).
    fn cancelled(&self, id: RequestId, now: Nanos) {
        let _ = (id, now);
    }
}

/// The store of shared mode, as the driver uses it (implemented by
/// [`redis::RedisStore`](crate::redis::RedisStore) with the feature `redis`): it answers each
/// reservation once, and writes the updates in the order given.
pub trait SharedStore: Send + Sync + 'static {
    /// The core's shared-mode settings (`Config::shared`).
    fn settings(&self) -> SharedConfig;
    /// How long the driver waits for a reservation's answer before telling the core the store
    /// is unavailable.
    fn timeout(&self) -> Duration;
    /// Asks the store; the answer goes to `answer` (a store that cannot answer drops it).
    fn reserve(&self, reservation: Reservation, answer: oneshot::Sender<ReservationAnswer>);
    /// Writes an update, fire-and-forget, after everything asked or written before it.
    fn record(&self, update: SharedUpdate);
    /// Waits (bounded by the store) until what was recorded is written, then stops the store.
    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// Rate-limits HTTP requests on tokio with the ratelane engine. Cheap to clone (one limiter
/// behind an `Arc`); `Send + Sync`.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use ratelane::Config;
/// use ratelane_tokio::{Buffered, RateLimiter};
///
/// let limiter = RateLimiter::new(Config::default())?;
/// let answer = limiter
///     .run("POST", "/channels/123/messages", || async {
///         // Send it with any HTTP client (reqwest::Response is a `Reply` with the feature
///         // `reqwest`); hand back what came.
///         Ok::<_, std::io::Error>(Buffered { status: 200, headers: vec![], body: vec![] })
///     })
///     .await?;
/// println!("{}", answer.status);
/// limiter.close().await;
/// # Ok(()) }
/// ```
///
/// It does what the core's drain invariant asks: after every input it drains the outputs,
/// wakes the request whose turn it is (`Send`) or ends it (`Fail`), and keeps **one timer**
/// for the earliest `WaitUntil`, re-armed only when an earlier deadline comes up (a timer that
/// fires early is harmless: the core is asked, and names the next deadline). Time is tokio's
/// clock in nanoseconds since the limiter was made ([`RateLimiter::epoch`]), so a test with a
/// paused clock runs in virtual time. The timer is one task, started with the first request.
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("RateLimiter")
            .field("queued", &st.core.queued())
            .field("in_flight", &st.core.in_flight())
            .field("closed", &st.closed)
            .finish()
    }
}

/// Builds a [`RateLimiter`] with an observer or a shared store.
pub struct Builder {
    config: Config,
    observer: Option<Arc<dyn Observer>>,
    store: Option<Arc<dyn SharedStore>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Builder {
    /// Calls `observer` with every decision of the core (metrics: [`crate::metrics`]).
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Shared mode: the limits of each identity are shared with every process using `store`
    /// (Redis: [`crate::redis::RedisStore`]). Replaces `config.shared` with the store's settings.
    pub fn shared(mut self, store: Arc<dyn SharedStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The limiter.
    ///
    /// # Errors
    /// [`ratelane::Error::InvalidConfig`] for a setting out of range.
    pub fn build(self) -> Result<RateLimiter, ratelane::Error> {
        let mut config = self.config;
        if let Some(store) = &self.store {
            config.shared = Some(store.settings());
        }
        let profile = config.profile;
        let core = Limiter::new(config)?;
        Ok(RateLimiter {
            inner: Arc::new_cyclic(|me| Inner {
                me: me.clone(),
                state: Mutex::new(State {
                    core,
                    waiters: HashMap::new(),
                    timer_at: None,
                    timer_started: false,
                    closed: false,
                    asking: 0,
                    last_now: 0,
                }),
                epoch: Instant::now(),
                profile,
                rearm: Arc::new(Notify::new()),
                changed: Notify::new(),
                observer: self.observer,
                store: self.store,
            }),
        })
    }
}

struct Inner {
    me: Weak<Inner>,
    state: Mutex<State>,
    epoch: Instant,
    profile: HeaderProfile,
    /// Wakes the timer task: its deadline moved, or the limiter is gone.
    rearm: Arc<Notify>,
    /// Wakes `close`: a request left flight, or a reservation was answered.
    changed: Notify,
    observer: Option<Arc<dyn Observer>>,
    store: Option<Arc<dyn SharedStore>>,
}

struct State {
    core: Limiter,
    waiters: HashMap<RequestId, Waiter>,
    /// The armed timer's deadline.
    timer_at: Option<Nanos>,
    timer_started: bool,
    closed: bool,
    /// Shared mode: reservations asked and not answered.
    asking: usize,
    last_now: Nanos,
}

enum Phase {
    /// Queued, or in flight (its `send` is running): no `Send` since it last went out.
    Waiting,
    /// The core said `Send`: it may go now.
    Sendable,
    /// The core said `Fail`.
    Failed(FailReason),
}

struct Waiter {
    phase: Phase,
    waker: Option<Waker>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The timer task holds a weak reference: wake it so that it sees the limiter is gone.
        self.rearm.notify_one();
    }
}

impl RateLimiter {
    /// A limiter with `config` (`Config::default()` suits a Discord bot).
    ///
    /// # Errors
    /// [`ratelane::Error::InvalidConfig`] for a setting out of range.
    pub fn new(config: Config) -> Result<RateLimiter, ratelane::Error> {
        RateLimiter::builder(config).build()
    }

    /// A builder, for an [`Observer`] or shared mode.
    pub fn builder(config: Config) -> Builder {
        Builder { config, observer: None, store: None }
    }

    /// Sends one request through the limiter: waits until it may go, calls `send`, reports the
    /// answer, and returns it once the limiter is done with it. `send` is called again when
    /// the limiter retries (a 429; a 5xx or a transport failure of an idempotent request),
    /// bounded by `max_rate_limit_retries` / `max_error_retries`; an answer that is retried is
    /// dropped. `path` is the concrete path or URL (the route and major parameter are derived
    /// from it); a 429's JSON body is read for `retry_after` and `global` ([`Reply::read_hints`]).
    ///
    /// Dropping the returned future cancels the request: a queued one leaves its queue, one
    /// the limiter had just let go but that had not left gives its global token and bucket
    /// slot back, one in flight keeps what it took until its window resets (it may have
    /// reached the server).
    ///
    /// # Errors
    /// [`Error::Rejected`] with the core's reason (`max_wait_exceeded`, `deadline_exceeded`,
    /// `deferred`, `retries_exhausted`, `maybe_sent`, `network_error`, `unauthorized`,
    /// `closed`, `insufficient_capacity`); [`Error::Usage`] for a malformed method or path or a
    /// closed limiter; [`Error::Send`] for an error of `send` that is not a transport failure.
    pub async fn run<R, E, F, Fut>(&self, method: &str, path: &str, send: F) -> Result<R, Error<E>>
    where
        R: Reply,
        E: TransportError,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        self.run_with(method, path, &Options::default(), send).await
    }

    /// [`run`](Self::run) with per-request [`Options`] (identity, deadline, priority...).
    ///
    /// # Errors
    /// As for [`run`](Self::run).
    pub async fn run_with<R, E, F, Fut>(
        &self,
        method: &str,
        path: &str,
        options: &Options,
        mut send: F,
    ) -> Result<R, Error<E>>
    where
        R: Reply,
        E: TransportError,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        self.run_attempts(method, path, options, |_| send()).await
    }

    /// [`run_with`](Self::run_with), with `send` given each attempt's [`Attempt`]: the
    /// transport reports through it when the request was written to the network
    /// ([`Attempt::written`]; [`WrittenBody`](crate::WrittenBody) does it for a request body),
    /// so that the global window counts the request from when it left, not from when the
    /// limiter let it go (later, on a busy runtime or a new connection).
    ///
    /// # Errors
    /// As for [`run`](Self::run).
    pub async fn run_attempts<R, E, F, Fut>(
        &self,
        method: &str,
        path: &str,
        options: &Options,
        mut send: F,
    ) -> Result<R, Error<E>>
    where
        R: Reply,
        E: TransportError,
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        let inner = &*self.inner;
        let settles = !options.costs.is_empty();
        let id = inner.enqueue(method, path, options).map_err(Error::Usage)?;
        let ticket = Ticket { inner, id };
        loop {
            if let Err(reason) = inner.wait(id).await {
                return Err(Error::Rejected(Rejection { reason, source: None, epoch: inner.epoch }));
            }
            match send(Attempt { inner: inner.me.clone(), id }).await {
                Err(e) => {
                    let Some(kind) = e.failure() else {
                        return Err(Error::Send(e)); // the ticket cancels it
                    };
                    match inner.failed(id, kind) {
                        Disposition::Failed => {
                            let reason = inner.take_failure(id);
                            return Err(Error::Rejected(Rejection { reason, source: Some(e), epoch: inner.epoch }));
                        }
                        _ => continue,
                    }
                }
                Ok(reply) => {
                    let status = reply.status();
                    let (reply, hints) = if status == 429 || settles || inner.profile.reads_body(status) {
                        reply.read_hints().await
                    } else {
                        (reply, BodyHints::default())
                    };
                    let headers = reply.headers();
                    match inner.answered(id, status, &headers, hints).map_err(Error::Usage)? {
                        Disposition::Complete => {
                            std::mem::forget(ticket);
                            return Ok(reply);
                        }
                        Disposition::Retry => continue,
                        Disposition::Failed => {
                            let reason = inner.take_failure(id);
                            return Err(Error::Rejected(Rejection { reason, source: None, epoch: inner.epoch }));
                        }
                    }
                }
            }
        }
    }

    /// Closes the limiter: every queued request fails with `closed`, new ones with
    /// `limiter_closed`; requests in flight still take their answers (they are not re-sent).
    /// Waits until no request is in flight and, in shared mode, every reservation is answered,
    /// then writes what is left for the store and closes it. Idempotent.
    pub async fn close(&self) {
        let inner = &*self.inner;
        {
            let mut st = inner.lock();
            if !st.closed {
                st.closed = true;
                let now = inner.now(&mut st);
                st.core.close(now);
                inner.pump(&mut st, now);
            }
        }
        loop {
            let changed = inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let st = inner.lock();
                if st.core.in_flight() == 0 && st.asking == 0 {
                    break;
                }
            }
            changed.await;
        }
        if let Some(store) = &inner.store {
            store.close().await;
        }
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// Requests waiting to be sent (reserving ones excluded).
    pub fn queued(&self) -> usize {
        self.inner.lock().core.queued()
    }

    /// Shared mode: requests waiting for the store's answer.
    pub fn reserving(&self) -> usize {
        self.inner.lock().core.reserving()
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().core.in_flight()
    }

    /// Buckets (queues) held in memory.
    pub fn buckets(&self) -> usize {
        self.inner.lock().core.buckets()
    }

    /// The invalid-request budget used now (401, 403 and non-shared 429 answers in the window).
    pub fn invalid_requests(&self) -> u32 {
        let inner = &*self.inner;
        let mut st = inner.lock();
        let now = inner.now(&mut st);
        st.core.invalid_requests(now)
    }

    /// How long a request enqueued now would wait, as far as the limiter knows (zero when it
    /// could go at once; an unknown bucket is assumed open).
    ///
    /// # Errors
    /// [`ratelane::Error::InvalidRequest`] for a malformed method or path.
    pub fn predict(&self, method: &str, path: &str, options: &Options) -> Result<Duration, ratelane::Error> {
        let inner = &*self.inner;
        let mut st = inner.lock();
        let now = inner.now(&mut st);
        let request = options.request(method, path, inner.epoch, now);
        let at = st.core.predict(now, &request)?.send_at;
        Ok(Duration::from_nanos(at.saturating_sub(now)))
    }

    /// The instant the core's time 0 stands for (the times in [`FailReason`]s and [`Observer`]
    /// calls are nanoseconds since it).
    pub fn epoch(&self) -> Instant {
        self.inner.epoch
    }

    /// The header profile the limiter reads answers with.
    pub fn profile(&self) -> HeaderProfile {
        self.inner.profile
    }
}

/// One attempt of a request, given to the `send` of [`RateLimiter::run_attempts`].
#[derive(Debug, Clone)]
pub struct Attempt {
    inner: Weak<Inner>,
    id: RequestId,
}

impl Attempt {
    /// Reports that this attempt was just written to the network (call it when the request's
    /// bytes are handed to the socket: the first report of an attempt counts, a later one or
    /// one for a request already answered changes nothing).
    pub fn written(&self) {
        if let Some(inner) = self.inner.upgrade() {
            let mut st = inner.lock();
            let now = inner.now(&mut st);
            // An error: the id is unknown (never, for an attempt the driver made).
            let _ = st.core.handle_written(now, self.id);
        }
    }

    /// The request's id in the core.
    pub fn id(&self) -> RequestId {
        self.id
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").finish_non_exhaustive()
    }
}

/// Cancels its request in the limiter when dropped (the caller's future was dropped, or `send`
/// failed with an error that is not a transport failure).
struct Ticket<'a> {
    inner: &'a Inner,
    id: RequestId,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.inner.forget(self.id);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside the lock (an observer's) leaves the state as consistent as the core
        // keeps it: go on.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now(&self, st: &mut State) -> Nanos {
        let now = nanos_between(self.epoch, Instant::now()).max(st.last_now);
        st.last_now = now;
        now
    }

    fn enqueue(&self, method: &str, path: &str, options: &Options) -> Result<RequestId, ratelane::Error> {
        let mut st = self.lock();
        let now = self.now(&mut st);
        let request = options.request(method, path, self.epoch, now);
        let id = st.core.enqueue(now, request)?;
        st.waiters.insert(id, Waiter { phase: Phase::Waiting, waker: None });
        if let Some(o) = &self.observer {
            o.enqueued(id, now);
        }
        self.pump(&mut st, now);
        Ok(id)
    }

    /// Waits until the core says `Send` for `id` (Ok) or fails it (Err).
    async fn wait(&self, id: RequestId) -> Result<(), FailReason> {
        poll_fn(|cx| {
            let mut st = self.lock();
            let Some(w) = st.waiters.get_mut(&id) else {
                return Poll::Ready(Err(FailReason::Closed));
            };
            match std::mem::replace(&mut w.phase, Phase::Waiting) {
                Phase::Sendable => Poll::Ready(Ok(())),
                Phase::Failed(reason) => {
                    st.waiters.remove(&id);
                    Poll::Ready(Err(reason))
                }
                Phase::Waiting => {
                    w.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// The `Fail` the core emitted for `id` after a `Failed` disposition.
    fn take_failure(&self, id: RequestId) -> FailReason {
        match self.lock().waiters.remove(&id).map(|w| w.phase) {
            Some(Phase::Failed(reason)) => reason,
            // The core answered "failed" without a Fail output: not expected.
            _ => FailReason::Closed,
        }
    }

    fn answered(
        &self,
        id: RequestId,
        status: u16,
        headers: &[(String, String)],
        hints: BodyHints,
    ) -> Result<Disposition, ratelane::Error> {
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let response = Response { status, headers: &refs, body: hints, wall_clock_ms: Some(wall_clock_ms()) };
        let mut st = self.lock();
        let now = self.now(&mut st);
        let disposition = st.core.handle_response(now, id, &response)?;
        if let Some(o) = &self.observer {
            o.disposition(id, disposition, now);
        }
        if disposition == Disposition::Complete {
            st.waiters.remove(&id);
        }
        self.pump(&mut st, now);
        drop(st);
        self.changed.notify_waiters();
        Ok(disposition)
    }

    fn failed(&self, id: RequestId, kind: Failure) -> Disposition {
        let mut st = self.lock();
        let now = self.now(&mut st);
        let disposition = match st.core.handle_failure(now, id, kind) {
            Ok(d) => d,
            Err(_) => Disposition::Failed,
        };
        if let Some(o) = &self.observer {
            o.disposition(id, disposition, now);
        }
        self.pump(&mut st, now);
        drop(st);
        self.changed.notify_waiters();
        disposition
    }

    /// The caller gave up on `id`: cancel it in the core if it is still live there.
    fn forget(&self, id: RequestId) {
        let mut st = self.lock();
        let Some(waiter) = st.waiters.remove(&id) else {
            return;
        };
        let now = self.now(&mut st);
        match waiter.phase {
            Phase::Failed(_) => return,
            Phase::Sendable => {
                // The core said Send, but the request never left: "not sent" gives its global
                // token and bucket slot back (a plain cancel would keep them until the reset).
                let _ = st.core.handle_failure(now, id, Failure::NotSent);
                self.pump(&mut st, now);
            }
            Phase::Waiting => {}
        }
        if st.core.cancel(now, id).is_ok()
            && let Some(o) = &self.observer
        {
            o.cancelled(id, now);
        }
        self.pump(&mut st, now);
        drop(st);
        self.changed.notify_waiters();
    }

    /// Drains the core (the drain invariant) and acts on each output.
    fn pump(&self, st: &mut State, now: Nanos) {
        loop {
            let mut unanswered = Vec::new();
            loop {
                let output = st.core.poll_output();
                if let Some(o) = &self.observer {
                    o.output(&output, now);
                }
                match output {
                    Output::Send(id) => {
                        if let Some(w) = st.waiters.get_mut(&id) {
                            w.phase = Phase::Sendable;
                            if let Some(waker) = w.waker.take() {
                                waker.wake();
                            }
                        }
                    }
                    Output::Fail(id, reason) => {
                        if let Some(w) = st.waiters.get_mut(&id) {
                            w.phase = Phase::Failed(reason);
                            if let Some(waker) = w.waker.take() {
                                waker.wake();
                            }
                        }
                    }
                    Output::WaitUntil(t) => {
                        self.arm(st, t);
                        break;
                    }
                    Output::Idle => break,
                    Output::Observe(_) => {}
                    Output::Reserve(r) => {
                        if !self.reserve(st, r.clone()) {
                            unanswered.push(r.id);
                        }
                    }
                    Output::Share(update) => {
                        if let Some(store) = &self.store {
                            store.record(update);
                        }
                    }
                }
            }
            if unanswered.is_empty() {
                return;
            }
            // No runtime to wait for the store on: the store is unavailable to this call.
            for id in unanswered {
                let _ = st.core.handle_reservation(now, id, ReservationAnswer::Unavailable);
            }
        }
    }

    /// Asks the store for `r`; its answer (or `Unavailable` after the store's timeout) goes
    /// back to the core exactly once. False when there is no runtime to wait on.
    fn reserve(&self, st: &mut State, r: Reservation) -> bool {
        let (Some(store), Ok(runtime)) = (&self.store, tokio::runtime::Handle::try_current()) else {
            return false;
        };
        let Some(me) = self.weak() else {
            return false;
        };
        let id = r.id;
        let (tx, rx) = oneshot::channel();
        let timeout = store.timeout();
        store.reserve(r, tx);
        st.asking += 1;
        runtime.spawn(async move {
            let answer = match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(answer)) => answer,
                _ => ReservationAnswer::Unavailable,
            };
            if let Some(inner) = me.upgrade() {
                inner.reservation_answered(id, answer);
            }
        });
        true
    }

    fn reservation_answered(&self, id: RequestId, answer: ReservationAnswer) {
        let mut st = self.lock();
        st.asking -= 1;
        let now = self.now(&mut st);
        // An error: the request ended meanwhile in a way the core no longer tracks.
        let _ = st.core.handle_reservation(now, id, answer);
        self.pump(&mut st, now);
        drop(st);
        self.changed.notify_waiters();
    }

    /// A weak reference to this limiter, for the tasks it spawns (they never keep it alive).
    fn weak(&self) -> Option<Weak<Inner>> {
        Some(self.me.clone())
    }

    fn arm(&self, st: &mut State, at: Nanos) {
        if let Some(current) = st.timer_at
            && at >= current
        {
            return; // the armed timer fires first; the core then names the next deadline
        }
        st.timer_at = Some(at);
        if !st.timer_started
            && let (Ok(runtime), Some(me)) = (tokio::runtime::Handle::try_current(), self.weak())
        {
            st.timer_started = true;
            runtime.spawn(timer(me, Arc::clone(&self.rearm)));
        }
        self.rearm.notify_one();
    }

    fn on_timer(&self, deadline: Nanos) {
        let mut st = self.lock();
        if st.timer_at != Some(deadline) {
            return; // re-armed meanwhile
        }
        st.timer_at = None;
        // Never tell the core a time before the deadline it asked for.
        let now = self.now(&mut st).max(deadline);
        st.core.handle_timeout(now);
        self.pump(&mut st, now);
    }
}

/// The one timer: sleeps until the armed deadline, re-reading it when it moves.
async fn timer(me: Weak<Inner>, rearm: Arc<Notify>) {
    loop {
        let notified = rearm.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (epoch, deadline) = {
            let Some(inner) = me.upgrade() else { return };
            let at = inner.lock().timer_at;
            (inner.epoch, at)
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(epoch + Duration::from_nanos(at)) => {
                        let Some(inner) = me.upgrade() else { return };
                        inner.on_timer(at);
                    }
                    () = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}

fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
