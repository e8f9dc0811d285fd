//! One server-side limit over the three algorithms, for hosts that pick the algorithm at run
//! time (the bindings): a [`Limit`], its keyed store [`LimitStore`], and its Redis script
//! (which one, its `ARGV`, the reading of its reply), so that a host needs no code per
//! algorithm.
//!
//! A call is an [`Op`]; a store answers it with an [`Answer`], a script with a
//! [`ScriptReply`]. An op the algorithm does not have (a `schedule` on a GCRA limit, a weight
//! on a leaky bucket) is [`Error::InvalidRequest`], and nothing is counted. Over each
//! algorithm, a [`LimitStore`] answers exactly like the typed store ([`GcraStore`](super::GcraStore),
//! [`LeakyBucketStore`](super::LeakyBucketStore), [`FixedWindowStore`](super::FixedWindowStore)),
//! end-of-clock errors included.
//!
//! ```
//! use ratelane::server::{Answer, Gcra, Limit, LimitStore, Op};
//! use ratelane::SECOND;
//!
//! let limit = Limit::from(Gcra::per_window(2, SECOND)?);
//! let mut store = LimitStore::new(limit, 1_000)?;
//! assert!(store.check("203.0.113.7", 0)?.allowed);
//! assert!(matches!(store.apply("203.0.113.7", 0, Op::CheckN(3))?, Answer::InsufficientCapacity(_)));
//! assert_eq!(store.apply("a", 0, Op::Schedule).unwrap_err().code(), "invalid_request");
//! // The Redis side: which script, and what to send.
//! assert_eq!(limit.script(), "gcra");
//! let argv = limit.argv(Op::Check, Some(5), 0)?.unwrap();
//! assert_eq!(argv.iter().map(ToString::to_string).collect::<Vec<_>>(), ["500000000", "2", "1", "5", "0"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Borrow;
use std::hash::Hash;

use super::script::{
    FixedWindowOp, ReplyError, ReplyItem, ScriptArg, ScriptReply, check_fixed_window, check_gcra,
    check_leaky_bucket, fixed_window_argv, gcra_argv, leaky_bucket_argv, parse_reply,
};
use super::store::{Algorithm, Store};
use super::{
    Decision, FixedWindow, FixedWindowState, Gcra, GcraState, InsufficientCapacity, LeakyBucket,
    LeakyBucketState, LegacyLimit, Scheduled,
};
use crate::error::Error;
use crate::types::Nanos;

/// A required duration parameter of [`Limit::from_params`].
fn param_ns(kind: &str, name: &'static str, param: &mut impl FnMut(&'static str) -> Option<u64>) -> Result<Nanos, Error> {
    param(name).ok_or_else(|| Error::InvalidConfig(format!("{kind}: {name} is required")))
}

/// A server-side limit: one of the three algorithms with its validated config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`Gcra`]: `check`, `check_n`.
    Gcra(Gcra),
    /// [`LeakyBucket`]: `check`, `check_scaled`.
    LeakyBucket(LeakyBucket),
    /// [`FixedWindow`]: `check`, `schedule`, `release`.
    FixedWindow(FixedWindow),
}

impl From<Gcra> for Limit {
    fn from(gcra: Gcra) -> Limit {
        Limit::Gcra(gcra)
    }
}

impl From<LeakyBucket> for Limit {
    fn from(bucket: LeakyBucket) -> Limit {
        Limit::LeakyBucket(bucket)
    }
}

impl From<FixedWindow> for Limit {
    fn from(window: FixedWindow) -> Limit {
        Limit::FixedWindow(window)
    }
}

/// One call on a key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// One request (every algorithm).
    Check,
    /// A request of weight `n`, `0` peeks (GCRA).
    CheckN(u32),
    /// One request with the bucket scaled by the subject's factor in `(0, 1]` (leaky bucket).
    CheckScaled(f64),
    /// Book a slot for a job (fixed window).
    Schedule,
    /// A delayed job was released or dropped (fixed window).
    Release,
}

impl Op {
    /// The op's name in messages: `check`, `check_n`, `check_scaled`, `schedule`, `release`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Check => "check",
            Op::CheckN(_) => "check_n",
            Op::CheckScaled(_) => "check_scaled",
            Op::Schedule => "schedule",
            Op::Release => "release",
        }
    }
}

/// What a [`LimitStore`] answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A check's decision.
    Decision(Decision),
    /// A GCRA weight above the burst: never admitted, nothing counted.
    InsufficientCapacity(InsufficientCapacity),
    /// A `schedule`'s booking.
    Scheduled(Scheduled),
    /// A `release`: whether a delayed job was waiting.
    Released(bool),
}

/// The state of one key of a [`LimitStore`]: the state of its limit's algorithm, or `Empty`
/// (the default, a key never seen).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LimitState {
    /// The empty state of any algorithm.
    #[default]
    Empty,
    /// A GCRA key.
    Gcra(GcraState),
    /// A leaky-bucket key.
    LeakyBucket(LeakyBucketState),
    /// A fixed-window key.
    FixedWindow(FixedWindowState),
}

/// `state` as a `$variant`, starting from the empty state when it holds another (the empty
/// one, since a store's limit never changes).
macro_rules! state_as {
    ($state:expr, $variant:ident) => {{
        let state: &mut LimitState = $state;
        if !matches!(state, LimitState::$variant(_)) {
            *state = LimitState::$variant(Default::default());
        }
        match state {
            LimitState::$variant(inner) => inner,
            _ => unreachable!("set just above"),
        }
    }};
}

/// An [`Op`] checked against its limit, ready to run on a key's state.
enum Call {
    Gcra(Gcra, u32),
    LeakyBucket(LeakyBucket),
    FixedWindow(FixedWindow, FixedWindowOp),
}

impl Call {
    fn run(self, state: &mut LimitState, now: Nanos) -> Result<Answer, Error> {
        Ok(match self {
            Call::Gcra(gcra, n) => match gcra.check_n(state_as!(state, Gcra), now, n)? {
                Ok(decision) => Answer::Decision(decision),
                Err(e) => Answer::InsufficientCapacity(e),
            },
            Call::LeakyBucket(bucket) => {
                Answer::Decision(bucket.check(state_as!(state, LeakyBucket), now))
            }
            Call::FixedWindow(window, op) => {
                let state = state_as!(state, FixedWindow);
                match op {
                    FixedWindowOp::Check => Answer::Decision(window.check(state, now)),
                    FixedWindowOp::Schedule => Answer::Scheduled(window.schedule(state, now)?),
                    FixedWindowOp::Release => Answer::Released(window.release(state)),
                }
            }
        })
    }
}

impl Limit {
    /// The algorithm's name, as in messages: `GCRA`, `leaky bucket`, `fixed window`.
    pub fn kind(&self) -> &'static str {
        match self {
            Limit::Gcra(_) => "GCRA",
            Limit::LeakyBucket(_) => "leaky bucket",
            Limit::FixedWindow(_) => "fixed window",
        }
    }

    /// The quota: the GCRA burst, the bucket size, the requests per fixed window.
    pub fn limit(&self) -> u32 {
        match self {
            Limit::Gcra(gcra) => gcra.burst(),
            Limit::LeakyBucket(bucket) => bucket.size(),
            Limit::FixedWindow(window) => window.quota(),
        }
    }

    /// The time a full quota takes to come back (a decision's `window`).
    pub fn window(&self) -> Nanos {
        match self {
            Limit::Gcra(gcra) => gcra.window(),
            Limit::LeakyBucket(bucket) => bucket.window(),
            Limit::FixedWindow(window) => window.window(),
        }
    }

    /// The limit `kind` names from its parameters, each looked up by name with `param`
    /// (`None`: not given), for a host that takes them by name: `gcra` (`interval_ns`,
    /// `burst`), `gcra_per_window` (`quota`, `window_ns`), `leaky_bucket` (`size`,
    /// `drip_rate_ns`, `drip_size` (default 1), `min_interval_ns` (optional)), `legacy`
    /// (`max`, `duration_ns`, `min_interval_ns`, each optional: [`LeakyBucket::from_legacy`])
    /// or `fixed_window` (`quota`, `window_ns`). A missing parameter, a count beyond 32 bits
    /// or an unknown kind is [`Error::InvalidConfig`], as is what the algorithm refuses.
    ///
    /// ```
    /// use ratelane::server::{Gcra, Limit};
    ///
    /// let params = [("interval_ns", 1_000), ("burst", 3)];
    /// let limit = Limit::from_params("gcra", |name| params.iter().find(|p| p.0 == name).map(|p| p.1))?;
    /// assert_eq!(limit, Limit::from(Gcra::new(1_000, 3)?));
    /// assert_eq!(Limit::from_params("gcra", |_| None).unwrap_err().code(), "invalid_config");
    /// # Ok::<(), ratelane::Error>(())
    /// ```
    pub fn from_params(kind: &str, mut param: impl FnMut(&'static str) -> Option<u64>) -> Result<Limit, Error> {
        let mut count = |name: &'static str| {
            let too_big = |_| Error::InvalidConfig(format!("{kind}: {name} must be at most {}", u32::MAX));
            param(name).map(|value| u32::try_from(value).map_err(too_big)).transpose()
        };
        let given = |name: &'static str, value: Option<u32>| {
            value.ok_or_else(|| Error::InvalidConfig(format!("{kind}: {name} is required")))
        };
        Ok(match kind {
            "gcra" => {
                let burst = given("burst", count("burst")?)?;
                let interval = param_ns(kind, "interval_ns", &mut param)?;
                Gcra::new(interval, burst)?.into()
            }
            "gcra_per_window" | "fixed_window" => {
                let quota = given("quota", count("quota")?)?;
                let window = param_ns(kind, "window_ns", &mut param)?;
                if kind == "fixed_window" { FixedWindow::new(quota, window)?.into() } else { Gcra::per_window(quota, window)?.into() }
            }
            "leaky_bucket" => {
                let (size, drip_size) = (given("size", count("size")?)?, count("drip_size")?.unwrap_or(1));
                let bucket = LeakyBucket::new(size, param_ns(kind, "drip_rate_ns", &mut param)?, drip_size)?;
                match param("min_interval_ns") {
                    Some(min_interval) => bucket.with_min_interval(min_interval)?.into(),
                    None => bucket.into(),
                }
            }
            "legacy" => {
                let max = count("max")?;
                let (duration, min_interval) = (param("duration_ns"), param("min_interval_ns"));
                LeakyBucket::from_legacy(LegacyLimit { max, duration, min_interval })?.into()
            }
            other => return Err(Error::InvalidConfig(format!("no server-side limit {other:?}"))),
        })
    }

    /// The config's parameters by name, durations in nanoseconds (`None`: not set), for a
    /// host to show: `interval_ns burst window_ns` (GCRA), `size drip_rate_ns drip_size
    /// min_interval_ns window_ns` (leaky bucket), `quota window_ns` (fixed window).
    pub fn params(&self) -> Vec<(&'static str, Option<u64>)> {
        match self {
            Limit::Gcra(gcra) => vec![
                ("interval_ns", Some(gcra.interval())),
                ("burst", Some(u64::from(gcra.burst()))),
                ("window_ns", Some(gcra.window())),
            ],
            Limit::LeakyBucket(bucket) => vec![
                ("size", Some(u64::from(bucket.size()))),
                ("drip_rate_ns", Some(bucket.drip_rate())),
                ("drip_size", Some(u64::from(bucket.drip_size()))),
                ("min_interval_ns", bucket.min_interval()),
                ("window_ns", Some(bucket.window())),
            ],
            Limit::FixedWindow(window) => vec![
                ("quota", Some(u64::from(window.quota()))),
                ("window_ns", Some(window.window())),
            ],
        }
    }

    /// `op` checked against this limit (and its instant, for GCRA), before any key is touched.
    fn call(&self, op: Op, now: Option<Nanos>) -> Result<Call, Error> {
        let call = match (*self, op) {
            (Limit::Gcra(gcra), Op::Check | Op::CheckN(_)) => {
                if let Some(now) = now {
                    gcra.require_instant(now)?;
                }
                Call::Gcra(gcra, if let Op::CheckN(n) = op { n } else { 1 })
            }
            (Limit::LeakyBucket(bucket), Op::Check) => Call::LeakyBucket(bucket),
            (Limit::LeakyBucket(bucket), Op::CheckScaled(factor)) => {
                Call::LeakyBucket(bucket.scaled(factor)?)
            }
            (Limit::FixedWindow(window), Op::Check) => Call::FixedWindow(window, FixedWindowOp::Check),
            (Limit::FixedWindow(window), Op::Schedule) => {
                Call::FixedWindow(window, FixedWindowOp::Schedule)
            }
            (Limit::FixedWindow(window), Op::Release) => {
                Call::FixedWindow(window, FixedWindowOp::Release)
            }
            _ => {
                return Err(Error::InvalidRequest(format!(
                    "{} is not an operation of a {} limit",
                    op.name(),
                    self.kind()
                )));
            }
        };
        Ok(call)
    }

    // ------------------------------------------------------------------------------ Redis

    /// The script that evaluates this limit, by its file's stem in `redis/scripts/`: `gcra`,
    /// `leaky_bucket` or `fixed_window`.
    pub fn script(&self) -> &'static str {
        match self {
            Limit::Gcra(_) => "gcra",
            Limit::LeakyBucket(_) => "leaky_bucket",
            Limit::FixedWindow(_) => "fixed_window",
        }
    }

    /// Whether [`script`](Self::script) evaluates this limit exactly ([`check_gcra`],
    /// [`check_leaky_bucket`], [`check_fixed_window`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a window longer than
    /// [`MAX_WINDOW`](super::script::MAX_WINDOW).
    pub fn check_script(&self) -> Result<(), Error> {
        match self {
            Limit::Gcra(gcra) => check_gcra(gcra),
            Limit::LeakyBucket(bucket) => check_leaky_bucket(bucket),
            Limit::FixedWindow(window) => check_fixed_window(window),
        }
    }

    /// The script's `ARGV` for `op` ([`gcra_argv`], [`leaky_bucket_argv`] with the scaled
    /// bucket, [`fixed_window_argv`]); `now` is the caller's clock, `None` for Redis's.
    /// Answers [`InsufficientCapacity`] instead for a GCRA weight above the burst.
    ///
    /// # Errors
    ///
    /// As the store refuses `op`: an op the algorithm does not have, a factor out of range, a
    /// GCRA `now` past [`Gcra::last_instant`]; nothing needs sending.
    pub fn argv(
        &self,
        op: Op,
        now: Option<Nanos>,
        min_ttl_ms: u64,
    ) -> Result<Result<Vec<ScriptArg>, InsufficientCapacity>, Error> {
        Ok(Ok(match self.call(op, now)? {
            Call::Gcra(gcra, n) => match gcra_argv(&gcra, n, now, min_ttl_ms)? {
                Ok(argv) => argv.to_vec(),
                Err(e) => return Ok(Err(e)),
            },
            Call::LeakyBucket(bucket) => leaky_bucket_argv(&bucket, now, min_ttl_ms).to_vec(),
            Call::FixedWindow(window, op) => fixed_window_argv(&window, op, now, min_ttl_ms).to_vec(),
        }))
    }

    /// Reads the reply of the call [`argv`](Self::argv) built for `op`: a decision (or
    /// `insufficient_capacity`) for a check, a booking for `schedule`, a release for `release`.
    ///
    /// # Errors
    ///
    /// [`ReplyError`] for a reply [`parse_reply`] refuses, or one of another kind.
    pub fn read_reply(&self, op: Op, items: &[ReplyItem<'_>]) -> Result<ScriptReply, ReplyError> {
        let reply = parse_reply(items)?;
        match (op, reply) {
            (Op::Schedule, ScriptReply::Scheduled(..))
            | (Op::Release, ScriptReply::Released(_))
            | (
                Op::Check | Op::CheckN(_) | Op::CheckScaled(_),
                ScriptReply::Decision(..) | ScriptReply::InsufficientCapacity(_),
            ) => Ok(reply),
            (Op::Schedule, _) => reply.into_scheduled().map(|_| reply),
            (Op::Release, _) => reply.into_released().map(|_| reply),
            _ => reply.into_decision().map(|_| reply),
        }
    }
}

impl Algorithm for Limit {
    type State = LimitState;

    fn is_idle(&self, state: &LimitState, now: Nanos) -> bool {
        match (self, state) {
            (Limit::Gcra(gcra), LimitState::Gcra(s)) => gcra.is_idle(s, now),
            (Limit::LeakyBucket(bucket), LimitState::LeakyBucket(s)) => bucket.is_idle(s, now),
            (Limit::FixedWindow(window), LimitState::FixedWindow(s)) => window.is_idle(s, now),
            // Empty (or, never in a store, another algorithm's state: read as empty).
            _ => true,
        }
    }
}

/// A [`Store`] over a [`Limit`]: the algorithm picked at run time, keyed by `String` unless
/// another key type is chosen.
pub type LimitStore<K = String> = Store<Limit, K>;

impl<K: Hash + Eq> Store<Limit, K> {
    /// Runs `op` for `key` at `now`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an op the limit's algorithm does not have, or a `now` the
    /// typed store refuses ([`Gcra::last_instant`], a fixed-window job released past the end
    /// of the clock); [`Error::InvalidConfig`] for a factor out of `(0, 1]`. Nothing is
    /// counted.
    pub fn apply<Q>(&mut self, key: &Q, now: Nanos, op: Op) -> Result<Answer, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let call = self.algorithm.call(op, Some(now))?;
        self.update(key, now, |_, state| call.run(state, now))
    }

    /// Checks one request for `key` at `now`.
    ///
    /// # Errors
    ///
    /// As [`apply`](Self::apply) with [`Op::Check`]: a GCRA `now` past its last instant.
    pub fn check<Q>(&mut self, key: &Q, now: Nanos) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.apply(key, now, Op::Check)? {
            Answer::Decision(decision) => Ok(decision),
            other => unreachable!("a check answers a decision, not {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::types::SECOND;

    fn gcra() -> Limit {
        Limit::from(Gcra::new(SECOND, 3).unwrap())
    }

    fn bucket() -> Limit {
        Limit::from(LeakyBucket::new(4, SECOND, 1).unwrap().with_min_interval(10).unwrap())
    }

    fn window() -> Limit {
        Limit::from(FixedWindow::new(2, SECOND).unwrap())
    }

    #[test]
    fn ops_outside_the_algorithm_are_refused_without_touching_the_store() {
        let cases = [
            (gcra(), Op::CheckScaled(0.5), "check_scaled is not an operation of a GCRA limit"),
            (gcra(), Op::Schedule, "schedule is not an operation of a GCRA limit"),
            (bucket(), Op::CheckN(1), "check_n is not an operation of a leaky bucket limit"),
            (bucket(), Op::Release, "release is not an operation of a leaky bucket limit"),
            (window(), Op::CheckN(2), "check_n is not an operation of a fixed window limit"),
        ];
        for (limit, op, message) in cases {
            let mut store = LimitStore::new(limit, 10).unwrap();
            let e = store.apply("k", 5, op).unwrap_err();
            assert_eq!((e.code(), e.to_string().contains(message)), ("invalid_request", true), "{e}");
            assert_eq!(limit.argv(op, None, 0).unwrap_err(), e);
            assert!(store.is_empty());
        }
        let e = LimitStore::new(bucket(), 10).unwrap().apply("k", 0, Op::CheckScaled(2.0));
        assert_eq!(e.unwrap_err().code(), "invalid_config");
    }

    #[test]
    fn the_end_of_the_clock_is_refused_as_the_typed_stores_do() {
        let mut store = LimitStore::new(gcra(), 10).unwrap();
        let e = store.check("k", u64::MAX).unwrap_err();
        assert_eq!(e.code(), "invalid_request");
        assert!(store.is_empty());
        let mut store = LimitStore::new(window(), 10).unwrap();
        let now = u64::MAX - 2 * SECOND;
        for _ in 0..6 {
            assert!(matches!(store.apply("k", now, Op::Schedule), Ok(Answer::Scheduled(_))));
        }
        let before = *store.state("k").unwrap();
        assert_eq!(store.apply("k", now, Op::Schedule).unwrap_err().code(), "invalid_request");
        assert_eq!(store.state("k"), Some(&before));
    }

    #[test]
    fn params_scripts_and_argv_follow_the_algorithm() {
        assert_eq!(gcra().params(), [
            ("interval_ns", Some(SECOND)),
            ("burst", Some(3)),
            ("window_ns", Some(3 * SECOND))
        ]);
        assert_eq!(bucket().params()[3], ("min_interval_ns", Some(10)));
        assert_eq!((window().limit(), window().window()), (2, SECOND));
        assert_eq!([gcra().script(), bucket().script(), window().script()], [
            "gcra",
            "leaky_bucket",
            "fixed_window"
        ]);
        let texts = |limit: Limit, op| -> Vec<String> {
            limit.argv(op, Some(7), 0).unwrap().unwrap().iter().map(ToString::to_string).collect()
        };
        assert_eq!(texts(gcra(), Op::CheckN(2)), ["1000000000", "3", "2", "7", "0"]);
        assert_eq!(texts(bucket(), Op::CheckScaled(0.5)), ["2", "1000000000", "1", "10", "7", "0"]);
        assert_eq!(texts(window(), Op::Release), ["release", "2", "1000000000", "7", "0"]);
        assert_eq!(
            gcra().argv(Op::CheckN(4), None, 0),
            Ok(Err(InsufficientCapacity { requested: 4, capacity: 3 }))
        );
        assert!(gcra().argv(Op::Check, Some(u64::MAX), 0).is_err());
        assert!(Limit::from(FixedWindow::new(1, u64::MAX / 4).unwrap()).check_script().is_err());
        assert!(window().check_script().is_ok());
    }

    #[test]
    fn from_params_reads_what_params_shows() {
        let with = |kind: &str, given: &[(&str, u64)]| {
            Limit::from_params(kind, |name| given.iter().find(|(n, _)| *n == name).map(|&(_, v)| v))
        };
        for (kind, limit) in [("gcra", gcra()), ("leaky_bucket", bucket()), ("fixed_window", window())] {
            let shown: Vec<(&str, u64)> = limit.params().into_iter().filter_map(|(n, v)| Some((n, v?))).collect();
            assert_eq!(with(kind, &shown), Ok(limit), "{kind}");
        }
        assert_eq!(with("gcra_per_window", &[("quota", 3), ("window_ns", 3 * SECOND)]), Ok(gcra()));
        assert_eq!(
            with("legacy", &[("max", 3), ("duration_ns", 10 * SECOND)]),
            LeakyBucket::from_legacy(LegacyLimit { max: Some(3), duration: Some(10 * SECOND), min_interval: None }).map(Limit::from)
        );
        let refused = |kind, given: &[(&str, u64)]| with(kind, given).unwrap_err().to_string();
        assert!(refused("gcra", &[("burst", 3)]).contains("gcra: interval_ns is required"));
        assert!(refused("gcra", &[("interval_ns", 1), ("burst", 1 << 32)]).contains("burst must be at most 4294967295"));
        assert!(refused("sliding_log", &[]).contains("no server-side limit \"sliding_log\""));
        assert_eq!(with("fixed_window", &[("quota", 0), ("window_ns", 1)]).unwrap_err().code(), "invalid_config");
    }

    #[test]
    fn replies_of_another_kind_than_the_op_are_errors() {
        let text = |s: &'static str| ReplyItem::Text(Cow::Borrowed(s));
        let released = [text("released"), ReplyItem::Int(1)];
        assert_eq!(window().read_reply(Op::Release, &released), Ok(ScriptReply::Released(true)));
        let e = window().read_reply(Op::Check, &released).unwrap_err();
        assert_eq!(e.message(), "expected a decision, got a release");
        let e = window().read_reply(Op::Schedule, &released).unwrap_err();
        assert_eq!(e.message(), "expected a booking, got a release");
        let refused = [text("insufficient_capacity"), ReplyItem::Int(4), ReplyItem::Int(3)];
        assert!(matches!(
            gcra().read_reply(Op::CheckN(4), &refused),
            Ok(ScriptReply::InsufficientCapacity(_))
        ));
        let e = window().read_reply(Op::Release, &refused).unwrap_err();
        assert_eq!(e.message(), "expected a release, got insufficient_capacity");
        assert!(gcra().read_reply(Op::Check, &[]).is_err());
    }
}
