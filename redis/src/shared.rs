//! The store of the core's shared mode in Redis: [`RedisStore`].

use ratelane::Nanos;
use ratelane::shared::wire::{self, StoreSettings, parse_record_answer, parse_reserve_answer};
pub use ratelane::shared::wire::StoreOp;
use ratelane::shared::{Reservation, ReservationAnswer, SharedConfig, SharedUpdate};
use redis::{ConnectionLike, Value};

use crate::error::Error;
use crate::reply;
use crate::script::{Arg, Call, SHARED_STORE};

/// The shared-mode store ([`ratelane::shared`]) in Redis: `scripts/shared_store.lua`, which
/// implements the store contract of the core's module documentation exactly (the reference
/// model is [`MemoryStore`](ratelane::shared::MemoryStore); both replay
/// `tests/vectors/store_*.json` with the same answers and key counts).
///
/// One [`reserve`](Self::reserve) or [`record`](Self::record) is one `EVALSHA`, one round
/// trip. Every key lives under `prefix`, which should carry a Redis Cluster hash tag (e.g.
/// `"{ratelane:mybot}:"`). The value holds only configuration; each call takes the connection
/// to use. A driver must send a process's calls **in order on one connection** (records are
/// fire-and-forget, but a report must land before the reservations that depend on it).
///
/// ```no_run
/// use ratelane::shared::{ReservationAnswer, SharedConfig};
/// use ratelane::{Config, Limiter, Output, Request};
/// use ratelane_redis::RedisStore;
///
/// let mut config = Config::default();
/// config.shared = Some(SharedConfig::default());
/// let store = RedisStore::new("{ratelane:mybot}:", config.shared.as_ref().unwrap())?;
/// let mut con = redis::Client::open("redis://127.0.0.1/")?.get_connection()?;
/// let client = "process-1"; // unique per process, e.g. a random UUID
///
/// let mut limiter = Limiter::new(config)?;
/// let id = limiter.enqueue(0, Request::new("GET", "/users/@me"))?;
/// if let Output::Reserve(r) = limiter.poll_output() {
///     // A driver answers Unavailable when the store fails or is too slow.
///     let answer = store.reserve(&mut con, client, &r).unwrap_or(ReservationAnswer::Unavailable);
///     limiter.handle_reservation(1, id, answer)?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisStore {
    prefix: String,
    settings: StoreSettings,
}

impl RedisStore {
    /// A store under `prefix` with the store-wide settings of `config` (`lease`,
    /// `pioneer_poll`, `state_ttl`; every process of one bot uses the same).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an empty prefix.
    pub fn new(prefix: impl Into<String>, config: &SharedConfig) -> Result<RedisStore, Error> {
        let prefix = prefix.into();
        if prefix.is_empty() {
            return Err(Error::InvalidConfig("the key prefix must not be empty".into()));
        }
        Ok(RedisStore { prefix, settings: StoreSettings::from(config) })
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Decides `reservation` of process `client` at Redis's clock.
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]); a driver answers the limiter
    /// [`ReservationAnswer::Unavailable`] then.
    pub fn reserve(
        &self,
        con: &mut dyn ConnectionLike,
        client: &str,
        reservation: &Reservation,
    ) -> Result<ReservationAnswer, Error> {
        self.reserve_call(None, client, reservation)?.run(con)
    }

    /// [`reserve`](Self::reserve) at `now` (nanoseconds of a virtual clock, for replays; keys
    /// then expire in that clock too, see the script's header).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn reserve_at(
        &self,
        con: &mut dyn ConnectionLike,
        now: Nanos,
        client: &str,
        reservation: &Reservation,
    ) -> Result<ReservationAnswer, Error> {
        self.reserve_call(Some(now), client, reservation)?.run(con)
    }

    /// Records `update` of process `client` at Redis's clock.
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]); the update is then lost (the store's state only ever
    /// errs on the conservative side without it, until its keys expire).
    pub fn record(&self, con: &mut dyn ConnectionLike, client: &str, update: &SharedUpdate) -> Result<(), Error> {
        self.record_call(None, client, update)?.run(con)
    }

    /// [`record`](Self::record) at `now` (a virtual clock, as [`reserve_at`](Self::reserve_at)).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn record_at(
        &self,
        con: &mut dyn ConnectionLike,
        now: Nanos,
        client: &str,
        update: &SharedUpdate,
    ) -> Result<(), Error> {
        self.record_call(Some(now), client, update)?.run(con)
    }

    /// The `ARGV` of a `reserve` call (`now`: `None` for Redis's clock), as the script's header
    /// and `redis/README.md` document them ([`ratelane::shared::wire`] writes them).
    pub fn reserve_args(&self, now: Option<Nanos>, client: &str, r: &Reservation) -> Vec<String> {
        wire::call_args(now, client, &self.settings, StoreOp::Reserve(r))
    }

    /// The `ARGV` of a `record` call.
    pub fn record_args(&self, now: Option<Nanos>, client: &str, update: &SharedUpdate) -> Vec<String> {
        wire::call_args(now, client, &self.settings, StoreOp::Record(update))
    }

    /// Runs `ops` in order in **one** script call (one `EVALSHA`, one round trip), each as its
    /// own [`reserve`](Self::reserve) or [`record`](Self::record) would: the same answers, the
    /// same state after. A driver sends what one drain of the core emitted as one batch, so a
    /// burst of reservations and reports costs one round trip instead of one each.
    ///
    /// The outer `Result` is the call (Redis failures); each item has its own: a
    /// [`StoreReply`], or [`Error::InvalidConfig`] for an item the script refused (a bad
    /// argument; nothing of that item is written, the others still run).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]): then no item has an answer (the driver answers every
    /// reservation of the batch `Unavailable`).
    pub fn batch(
        &self,
        con: &mut dyn ConnectionLike,
        client: &str,
        ops: &[StoreOp<'_>],
    ) -> Result<Vec<Result<StoreReply, Error>>, Error> {
        self.batch_call(None, client, ops)?.run(con)
    }

    /// [`batch`](Self::batch) at `now` (a virtual clock, as [`reserve_at`](Self::reserve_at)).
    ///
    /// # Errors
    ///
    /// As for [`batch`](Self::batch).
    pub fn batch_at(
        &self,
        con: &mut dyn ConnectionLike,
        now: Nanos,
        client: &str,
        ops: &[StoreOp<'_>],
    ) -> Result<Vec<Result<StoreReply, Error>>, Error> {
        self.batch_call(Some(now), client, ops)?.run(con)
    }

    /// [`batch`](Self::batch) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`batch`](Self::batch).
    #[cfg(feature = "aio")]
    pub async fn batch_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        client: &str,
        ops: &[StoreOp<'_>],
    ) -> Result<Vec<Result<StoreReply, Error>>, Error> {
        self.batch_call(None, client, ops)?.run_async(con).await
    }

    /// The `ARGV` of a `batch` call: the common part, then per item its argument count (op
    /// included), its op and its own arguments ([`wire::batch_args`]).
    pub fn batch_args(&self, now: Option<Nanos>, client: &str, ops: &[StoreOp<'_>]) -> Vec<String> {
        wire::batch_args(now, client, &self.settings, ops)
    }

    /// [`reserve`](Self::reserve) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`reserve`](Self::reserve).
    #[cfg(feature = "aio")]
    pub async fn reserve_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        client: &str,
        reservation: &Reservation,
    ) -> Result<ReservationAnswer, Error> {
        self.reserve_call(None, client, reservation)?.run_async(con).await
    }

    /// [`reserve_at`](Self::reserve_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`reserve`](Self::reserve).
    #[cfg(feature = "aio")]
    pub async fn reserve_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        now: Nanos,
        client: &str,
        reservation: &Reservation,
    ) -> Result<ReservationAnswer, Error> {
        self.reserve_call(Some(now), client, reservation)?.run_async(con).await
    }

    /// [`record`](Self::record) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`record`](Self::record).
    #[cfg(feature = "aio")]
    pub async fn record_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        client: &str,
        update: &SharedUpdate,
    ) -> Result<(), Error> {
        self.record_call(None, client, update)?.run_async(con).await
    }

    /// [`record_at`](Self::record_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`record`](Self::record).
    #[cfg(feature = "aio")]
    pub async fn record_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        now: Nanos,
        client: &str,
        update: &SharedUpdate,
    ) -> Result<(), Error> {
        self.record_call(Some(now), client, update)?.run_async(con).await
    }

    fn reserve_call(
        &self,
        now: Option<Nanos>,
        client: &str,
        r: &Reservation,
    ) -> Result<Call<'_, ReservationAnswer>, Error> {
        check_client(client)?;
        let args = self.reserve_args(now, client, r).into_iter().map(Arg::Owned).collect();
        Ok(Call::new(&SHARED_STORE, &self.prefix, args, parse_answer))
    }

    fn record_call(&self, now: Option<Nanos>, client: &str, update: &SharedUpdate) -> Result<Call<'_, ()>, Error> {
        check_client(client)?;
        let args = self.record_args(now, client, update).into_iter().map(Arg::Owned).collect();
        Ok(Call::new(&SHARED_STORE, &self.prefix, args, parse_recorded))
    }


    // The reader is a closure (it knows how many replies to expect): its type has no name.
    #[allow(clippy::type_complexity)]
    fn batch_call(
        &self,
        now: Option<Nanos>,
        client: &str,
        ops: &[StoreOp<'_>],
    ) -> Result<Call<'_, BatchReplies, impl FnOnce(&Value) -> Result<BatchReplies, Error>>, Error> {
        check_client(client)?;
        let args = self.batch_args(now, client, ops).into_iter().map(Arg::Owned).collect();
        let count = ops.len();
        Ok(Call::new(&SHARED_STORE, &self.prefix, args, move |value: &Value| parse_batch(value, count)))
    }
}

/// A batch's replies, one per operation.
type BatchReplies = Vec<Result<StoreReply, Error>>;

/// What one item of a [`RedisStore::batch`] answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreReply {
    /// A reservation's answer.
    Answer(ReservationAnswer),
    /// An update was recorded.
    Recorded,
}

/// A batch's reply: one array per item (`count` of them, checked before any is read), read
/// like a single call's; `["error", message]` for an item the script refused.
fn parse_batch(value: &Value, count: usize) -> Result<BatchReplies, Error> {
    let Value::Array(items) = value else {
        return Err(Error::BadReply(format!("batch: expected an array of replies, got {}", reply::describe(value))));
    };
    if items.len() != count {
        return Err(Error::BadReply(format!("batch: {count} operations, {} replies", items.len())));
    }
    Ok(items
        .iter()
        .map(|item| {
            if let Value::Array(parts) = item
                && let [Value::BulkString(tag), Value::BulkString(message)] = parts.as_slice()
                && tag.as_slice() == b"error"
            {
                return Err(Error::InvalidConfig(format!(
                    "the store refused an argument: {}",
                    String::from_utf8_lossy(message)
                )));
            }
            match parse_answer(item) {
                Ok(answer) => Ok(StoreReply::Answer(answer)),
                Err(_) => parse_recorded(item).map(|()| StoreReply::Recorded).map_err(|_| {
                    Error::BadReply(format!("batch: an item is neither an answer nor recorded: {}", reply::describe(item)))
                }),
            }
        })
        .collect())
}

/// `["recorded"]` (read by the core).
fn parse_recorded(value: &Value) -> Result<(), Error> {
    reply::read(value, parse_record_answer)
}

fn check_client(client: &str) -> Result<(), Error> {
    if client.is_empty() { Err(Error::InvalidConfig("the client name must not be empty".into())) } else { Ok(()) }
}

/// `["granted", processes]` or `["denied", retry_after_us, scope, processes]` as the core's
/// answer (read by the core).
fn parse_answer(value: &Value) -> Result<ReservationAnswer, Error> {
    reply::read(value, parse_reserve_answer)
}

#[cfg(test)]
mod tests {
    use ratelane::shared::SharedScope;

    use super::*;

    #[test]
    fn replies_parse_into_answers_or_bad_reply() {
        let s = |t: &str| Value::BulkString(t.as_bytes().to_vec());
        assert_eq!(
            parse_answer(&Value::Array(vec![s("granted"), Value::Int(2)])).unwrap(),
            ReservationAnswer::Granted { processes: Some(2), leased: 0, store_time: None }
        );
        assert_eq!(
            parse_answer(&Value::Array(vec![s("granted"), Value::Int(2), Value::Int(4)])).unwrap(),
            ReservationAnswer::Granted { processes: Some(2), leased: 4, store_time: None }
        );
        assert_eq!(
            parse_answer(&Value::Array(vec![s("granted"), Value::Int(2), Value::Int(4), Value::Int(1_500)])).unwrap(),
            ReservationAnswer::Granted { processes: Some(2), leased: 4, store_time: Some(1_500_000) }
        );
        assert_eq!(
            parse_answer(&Value::Array(vec![s("denied"), Value::Int(50_000), s("pioneer"), Value::Int(1)])).unwrap(),
            ReservationAnswer::Denied { retry_after: 50_000_000, scope: SharedScope::Pioneer, processes: Some(1) }
        );
        for bad in [
            Value::Nil,
            Value::Array(vec![]),
            Value::Array(vec![s("denied"), Value::Int(-1), s("bucket")]),
            Value::Array(vec![s("denied"), Value::Int(1), s("nope")]),
            Value::Array(vec![s("granted"), Value::Int(-1)]),
            Value::Array(vec![s("granted"), Value::Int(1), Value::Int(-1)]),
            Value::Array(vec![s("granted"), Value::Int(1), Value::Int(1), Value::Int(-1)]),
            Value::Array(vec![s("granted"), Value::Int(1), Value::Int(1), Value::Int(1), Value::Int(1)]),
        ] {
            assert_eq!(parse_answer(&bad).unwrap_err().code(), "redis_bad_reply", "{bad:?}");
        }
    }
}
