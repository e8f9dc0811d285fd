//! Shared mode through Redis (feature `redis`): [`RedisStore`], the driver's side of
//! `ratelane-redis`'s store (`redis/scripts/shared_store.lua`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ratelane::shared::{Reservation, ReservationAnswer, SharedConfig, SharedUpdate};
use ratelane_redis::StoreOp;
use ratelane_redis::StoreReply;
use redis::aio::MultiplexedConnection;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::driver::SharedStore;

/// The most operations one script call carries.
const BATCH: usize = 64;
/// Updates queued beyond this are dropped (counted in [`RedisStore::dropped`]).
const MAX_QUEUED: usize = 10_000;

enum Op {
    Reserve(Reservation, oneshot::Sender<ReservationAnswer>),
    Record(SharedUpdate),
    Flush(oneshot::Sender<()>),
}

/// The shared-mode store in Redis for [`RateLimiter`](crate::RateLimiter)'s
/// [`Builder::shared`](crate::Builder::shared): every process (or proxy) of one bot gives the
/// same `prefix` and settings, and shares each identity's limits (the global limit exactly,
/// the buckets, the invalid-request budget).
///
/// One task per store sends the calls **in order on one connection**, each batch of what is
/// queued as one `EVALSHA` ([`ratelane_redis::RedisStore::batch_async`]). A call that fails
/// (Redis down, too slow) answers its reservations `Unavailable` (the core then follows
/// `on_unavailable`); the connection is opened again for the next batch. No retries inside.
pub struct RedisStore {
    queue: mpsc::UnboundedSender<Op>,
    queued: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    settings: SharedConfig,
    timeout: Duration,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("settings", &self.settings).field("timeout", &self.timeout).finish()
    }
}

/// Settings of a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// Every key starts with it: the same for all processes of one bot, with a Redis Cluster
    /// hash tag (`"{ratelane:mybot}:"`).
    pub prefix: String,
    /// This process's name in the store (default: random).
    pub client: Option<String>,
    /// How long to wait for a reservation's answer (default 250 ms).
    pub timeout: Duration,
    /// The core's shared-mode settings (`on_unavailable`, `lease`...: the same in every process).
    pub shared: SharedConfig,
}

impl Default for RedisSettings {
    fn default() -> Self {
        RedisSettings {
            prefix: "{ratelane}:".into(),
            client: None,
            timeout: Duration::from_millis(250),
            shared: SharedConfig::default(),
        }
    }
}

impl RedisStore {
    /// A store on the Redis at `url` (`redis://host:port/db`). Connects lazily, in the
    /// background: a Redis that is down at start is an outage like any other. Must be called
    /// within a tokio runtime.
    ///
    /// # Errors
    /// A malformed URL, an empty prefix or client name (`invalid_config`).
    pub fn open(url: &str, settings: RedisSettings) -> Result<RedisStore, ratelane_redis::Error> {
        let client = redis::Client::open(url).map_err(|e| ratelane_redis::Error::InvalidConfig(e.to_string()))?;
        let store = ratelane_redis::RedisStore::new(settings.prefix.clone(), &settings.shared)?;
        let name = settings.client.clone().unwrap_or_else(random_name);
        if name.is_empty() {
            return Err(ratelane_redis::Error::InvalidConfig("the client name must not be empty".into()));
        }
        let (queue, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let worker = Worker {
            client,
            store,
            name,
            connection: Arc::new(Mutex::new(None)),
            timeout: settings.timeout,
            queued: Arc::clone(&queued),
            dropped: Arc::clone(&dropped),
        };
        tokio::spawn(worker.run(rx));
        Ok(RedisStore { queue, queued, dropped, settings: settings.shared, timeout: settings.timeout })
    }

    /// Updates lost because Redis could not take them (down, or an error reply), or because
    /// too many were queued.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl SharedStore for RedisStore {
    fn settings(&self) -> SharedConfig {
        self.settings.clone()
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn reserve(&self, reservation: Reservation, answer: oneshot::Sender<ReservationAnswer>) {
        self.queued.fetch_add(1, Ordering::Relaxed);
        let _ = self.queue.send(Op::Reserve(reservation, answer));
    }

    fn record(&self, update: SharedUpdate) {
        if self.queued.load(Ordering::Relaxed) >= MAX_QUEUED as u64 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.queue.send(Op::Record(update)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            if self.queue.send(Op::Flush(tx)).is_ok() {
                // Bounded: four reservation timeouts, as the other drivers' flush.
                let _ = tokio::time::timeout(4 * self.timeout, rx).await;
            }
        })
    }
}

struct Worker {
    client: redis::Client,
    store: ratelane_redis::RedisStore,
    name: String,
    connection: Arc<Mutex<Option<MultiplexedConnection>>>,
    timeout: Duration,
    queued: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

impl Worker {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Op>) {
        let mut batch: Vec<Op> = Vec::with_capacity(BATCH);
        while rx.recv_many(&mut batch, BATCH).await > 0 {
            let mut flushes = Vec::new();
            let mut ops: Vec<Op> = Vec::with_capacity(batch.len());
            for op in batch.drain(..) {
                match op {
                    Op::Flush(done) => flushes.push(done),
                    // The driver gave up on it (timed out): do not take a grant nobody uses.
                    Op::Reserve(_, ref answer) if answer.is_closed() => {
                        self.queued.fetch_sub(1, Ordering::Relaxed);
                    }
                    op => ops.push(op),
                }
            }
            if !ops.is_empty() {
                self.queued.fetch_sub(ops.len() as u64, Ordering::Relaxed);
                self.send(ops).await;
            }
            for done in flushes {
                let _ = done.send(());
            }
        }
    }

    async fn send(&self, ops: Vec<Op>) {
        let store_ops: Vec<StoreOp<'_>> = ops
            .iter()
            .map(|op| match op {
                Op::Reserve(r, _) => StoreOp::Reserve(r),
                Op::Record(u) => StoreOp::Record(u),
                Op::Flush(_) => unreachable!("flushes are taken out of the batch"),
            })
            .collect();
        // Bounded, so that a Redis that hangs cannot stall the queue behind it.
        let limit = (2 * self.timeout).max(Duration::from_secs(1));
        let replies = tokio::time::timeout(limit, self.call(&store_ops)).await;
        let replies = match replies {
            Ok(Ok(replies)) if replies.len() == ops.len() => replies,
            other => {
                if !matches!(other, Ok(Ok(_))) {
                    // The connection may be broken: open a new one for the next batch.
                    *self.connection.lock().await = None;
                }
                for op in ops {
                    match op {
                        Op::Reserve(_, answer) => {
                            let _ = answer.send(ReservationAnswer::Unavailable);
                        }
                        _ => {
                            self.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                return;
            }
        };
        for (op, reply) in ops.into_iter().zip(replies) {
            match (op, reply) {
                (Op::Reserve(_, answer), Ok(StoreReply::Answer(a))) => {
                    let _ = answer.send(a);
                }
                (Op::Reserve(_, answer), _) => {
                    let _ = answer.send(ReservationAnswer::Unavailable);
                }
                (_, Ok(_)) => {}
                (_, Err(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    async fn call(
        &self,
        ops: &[StoreOp<'_>],
    ) -> Result<Vec<Result<StoreReply, ratelane_redis::Error>>, ratelane_redis::Error> {
        let mut slot = self.connection.lock().await;
        if slot.is_none() {
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(self.timeout))
                .set_response_timeout(Some((2 * self.timeout).max(Duration::from_secs(1))));
            let connection = self
                .client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(ratelane_redis::Error::Connection)?;
            *slot = Some(connection);
        }
        let Some(connection) = slot.as_mut() else {
            return Err(ratelane_redis::Error::BadReply("no connection".into()));
        };
        self.store.batch_async(connection, &self.name, ops).await
    }
}

/// A process name unlikely to repeat: the process id, the time and a random hash seed.
fn random_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    format!("rs-{}-{:016x}", std::process::id(), hasher.finish())
}
