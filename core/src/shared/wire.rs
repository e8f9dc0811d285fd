//! The wire format of the shared store's Redis script (`redis/scripts/shared_store.lua`; the
//! contract is the script's header and `redis/README.md`), sans-IO: each call's `ARGV` and the
//! reading of its reply, written once (used by `ratelane-redis` and the Python binding; the
//! Node package's store still encodes in JS, where reading an object through napi costs
//! more than the encoding), as [`crate::server::script`] does for the server-side limiters'
//! scripts.
//!
//! A host builds one call's `ARGV` with [`call_args`] (one operation) or [`batch_args`]
//! (several, one round trip), runs the script with its namespace prefix as `KEYS[1]`, turns
//! each reply array into [`ReplyItem`]s and reads a reservation's answer with
//! [`parse_reserve_answer`], a record's with [`parse_record_answer`]. Any other shape is a
//! [`ReplyError`] saying what was wrong, never a panic.
//!
//! ```
//! use ratelane::server::script::ReplyItem;
//! use ratelane::shared::wire::{self, StoreOp, StoreSettings};
//! use ratelane::shared::{Reservation, ReservationAnswer, SharedConfig};
//!
//! let settings = StoreSettings::from(&SharedConfig::default());
//! let r = Reservation { id: 7, identity: "bot".into(), route: "GET /users/@me".into(), ..Reservation::default() };
//! let argv = wire::call_args(None, "process-1", &settings, StoreOp::Reserve(&r));
//! assert_eq!(&argv[..3], ["reserve", "", "process-1"]); // "" = Redis's clock
//! assert_eq!(argv[6], "7");
//!
//! let reply = [ReplyItem::Text("granted".into()), ReplyItem::Int(2)];
//! assert_eq!(
//!     wire::parse_reserve_answer(&reply)?,
//!     ReservationAnswer::Granted { processes: Some(2), leased: 0, store_time: None }
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::SharedConfig;
use crate::server::script::{Items, ReplyError, ReplyItem, is_tag};
use crate::types::{Nanos, Reservation, ReservationAnswer, SharedScope, SharedUpdate};

/// The store-wide settings every call passes (`ARGV[4..6]`): every process of one bot uses
/// the same ([`SharedConfig`]'s `lease`, `pioneer_poll` and `state_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSettings {
    /// [`SharedConfig::lease`].
    pub lease: Nanos,
    /// [`SharedConfig::pioneer_poll`].
    pub pioneer_poll: Nanos,
    /// [`SharedConfig::state_ttl`].
    pub state_ttl: Nanos,
}

impl From<&SharedConfig> for StoreSettings {
    fn from(config: &SharedConfig) -> StoreSettings {
        StoreSettings { lease: config.lease, pioneer_poll: config.pioneer_poll, state_ttl: config.state_ttl }
    }
}

/// One operation of the store contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp<'a> {
    /// The contract's `reserve` (the core's [`Output::Reserve`](crate::Output::Reserve)).
    Reserve(&'a Reservation),
    /// The contract's `record` (the core's [`Output::Share`](crate::Output::Share)).
    Record(&'a SharedUpdate),
}

impl StoreOp<'_> {
    /// The script's name of the operation (`ARGV[1]` of a single call).
    pub fn name(&self) -> &'static str {
        match self {
            StoreOp::Reserve(_) => "reserve",
            StoreOp::Record(_) => "record",
        }
    }

    /// The operation's own arguments: a single call's `ARGV[7]` and on.
    pub fn args(&self) -> Vec<String> {
        match self {
            StoreOp::Reserve(r) => reserve_args(r),
            StoreOp::Record(u) => record_args(u),
        }
    }
}

/// The `ARGV` of one call of `op`: the common part, then its own arguments. `now` is a virtual
/// clock for replays (tests), `None` for Redis's clock.
pub fn call_args(now: Option<Nanos>, client: &str, settings: &StoreSettings, op: StoreOp<'_>) -> Vec<String> {
    let mut args = common_args(op.name(), now, client, settings);
    args.extend(op.args());
    args
}

/// The `ARGV` of a `batch` call: the common part, then per operation its argument count (its
/// name included), its name and its own arguments. The script runs them in order in one atomic
/// call, each as its own call would, and answers one reply per operation (an operation it
/// refused for a bad argument answers `["error", message]` in its place).
pub fn batch_args(now: Option<Nanos>, client: &str, settings: &StoreSettings, ops: &[StoreOp<'_>]) -> Vec<String> {
    let mut args = common_args("batch", now, client, settings);
    for op in ops {
        let own = op.args();
        args.push((own.len() + 1).to_string());
        args.push(op.name().to_string());
        args.extend(own);
    }
    args
}

/// `ARGV[1..6]`: the op, the clock (`""` for Redis's), the calling process's name and the
/// store-wide settings.
fn common_args(op: &str, now: Option<Nanos>, client: &str, settings: &StoreSettings) -> Vec<String> {
    vec![
        op.to_string(),
        opt_num(now),
        client.to_string(),
        settings.lease.to_string(),
        settings.pioneer_poll.to_string(),
        settings.state_ttl.to_string(),
    ]
}

/// A reservation's own arguments (`ARGV[7..22]` of a `reserve` call).
pub fn reserve_args(r: &Reservation) -> Vec<String> {
    vec![
        r.id.to_string(),
        r.identity.clone(),
        r.route.clone(),
        r.major.clone(),
        opt_str(r.bucket.as_deref()),
        flag(r.counts_global),
        r.global_limit.to_string(),
        r.global_window.to_string(),
        r.margin.to_string(),
        r.invalid_limit.to_string(),
        r.invalid_window.to_string(),
        r.global_want.to_string(),
        opt_num(r.processes_since),
        flag(r.reporting),
        ages(&r.unrecorded),
        ages(&r.granted),
    ]
}

/// An update's own arguments (`ARGV[7]` and on of a `record` call: the variant, then its
/// fields).
pub fn record_args(update: &SharedUpdate) -> Vec<String> {
    let kind = update.kind().to_string();
    match update {
        SharedUpdate::Bucket { id, identity, route, major, bucket, unlimited, limit, remaining, reset_after, window } => {
            vec![
                kind,
                id.to_string(),
                identity.clone(),
                route.clone(),
                major.clone(),
                opt_str(bucket.as_deref()),
                flag(*unlimited),
                opt_num(*limit),
                opt_num(*remaining),
                opt_num(*reset_after),
                opt_num(*window),
            ]
        }
        SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => vec![
            kind,
            id.to_string(),
            identity.clone(),
            route.clone(),
            major.clone(),
            opt_str(bucket.as_deref()),
            flag(*reached),
            opt_num(*window),
        ],
        SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => vec![
            kind,
            scope.as_str().to_string(),
            identity.clone(),
            route.clone(),
            major.clone(),
            opt_str(bucket.as_deref()),
            retry_after.to_string(),
        ],
        SharedUpdate::Invalid { id, window } => vec![kind, id.to_string(), window.to_string()],
    }
}

/// An optional string argument: `""` when absent, `"=" value` when present (so that an empty
/// value stays distinct from none).
fn opt_str(s: Option<&str>) -> String {
    s.map_or_else(String::new, |s| format!("={s}"))
}

/// An optional number argument: `""` when absent.
fn opt_num<T: ToString>(n: Option<T>) -> String {
    n.map_or_else(String::new, |n| n.to_string())
}

/// Ages of a report after an outage: decimal nanoseconds separated by `,` (`""`: none).
fn ages(ages: &[Nanos]) -> String {
    ages.iter().map(Nanos::to_string).collect::<Vec<_>>().join(",")
}

fn flag(b: bool) -> String {
    if b { "1" } else { "0" }.to_string()
}

/// The script's answer to `reserve`: `["granted", processes, leased, now_us]` or `["denied",
/// retry_after_us, scope, processes]`, as the core's [`ReservationAnswer`]. The trailing
/// fields may be absent, as from a script of an earlier version: the answer then has
/// `processes: None`, `leased: 0`, `store_time: None`. A count above `u32::MAX` reads as
/// `u32::MAX`; a clock past `u64::MAX` nanoseconds as none.
///
/// # Errors
///
/// [`ReplyError`] for any other shape, a negative `retry_after_us`, count or clock, or an
/// unknown scope.
pub fn parse_reserve_answer(items: &[ReplyItem<'_>]) -> Result<ReservationAnswer, ReplyError> {
    let count = |item: Option<&ReplyItem<'_>>| -> Result<Option<u32>, ReplyError> {
        match item {
            None => Ok(None),
            Some(ReplyItem::Int(n)) if *n >= 0 => Ok(Some(u32::try_from(*n).unwrap_or(u32::MAX))),
            Some(other) => Err(ReplyError::new(format!("reserve: processes must be an integer >= 0, got {other}"))),
        }
    };
    match items {
        [tag, rest @ ..] if is_tag(tag, "granted") && rest.len() <= 3 => Ok(ReservationAnswer::Granted {
            processes: count(rest.first())?,
            leased: match rest.get(1) {
                None => 0,
                Some(ReplyItem::Int(n)) if *n >= 0 => u32::try_from(*n).unwrap_or(u32::MAX),
                Some(other) => {
                    return Err(ReplyError::new(format!("reserve: leased must be an integer >= 0, got {other}")));
                }
            },
            // The script's clock in microseconds (Redis's `TIME`, or the replay's).
            store_time: match rest.get(2) {
                None => None,
                Some(ReplyItem::Int(us)) if *us >= 0 => u64::try_from(*us).ok().and_then(|us| us.checked_mul(1_000)),
                Some(other) => {
                    return Err(ReplyError::new(format!("reserve: the store's time must be an integer >= 0, got {other}")));
                }
            },
        }),
        [tag, ReplyItem::Int(us), scope, rest @ ..] if is_tag(tag, "denied") && rest.len() <= 1 => {
            let processes = count(rest.first())?;
            let scope = match scope {
                ReplyItem::Text(name) => SharedScope::from_name(name),
                _ => None,
            }
            .ok_or_else(|| ReplyError::new(format!("denied: unknown scope {scope}")))?;
            let us = u64::try_from(*us).map_err(|_| ReplyError::new(format!("denied: retry_after {us} < 0")))?;
            Ok(ReservationAnswer::Denied { retry_after: us.saturating_mul(1000), scope, processes })
        }
        _ => Err(ReplyError::new(format!("reserve: unexpected reply {}", Items(items)))),
    }
}

/// The script's answer to `record`: `["recorded"]`.
///
/// # Errors
///
/// [`ReplyError`] for any other reply.
pub fn parse_record_answer(items: &[ReplyItem<'_>]) -> Result<(), ReplyError> {
    match items {
        [tag] if is_tag(tag, "recorded") => Ok(()),
        _ => Err(ReplyError::new(format!("record: expected [\"recorded\"], got {}", Items(items)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{MILLISECOND, SECOND};

    #[test]
    fn a_long_record_answer_is_quoted_by_its_start() {
        // The server's replies are checked the same way (server::script); the server side
        // may not name the client's shared mode, so this one is here.
        let message = parse_record_answer(&vec![ReplyItem::Int(1); 1000]).unwrap_err().into_message();
        assert!(message.len() < 400, "{} bytes: {}", message.len(), &message[..100]);
    }

    fn text(s: &str) -> ReplyItem<'_> {
        ReplyItem::Text(s.into())
    }

    const SETTINGS: StoreSettings = StoreSettings { lease: 5 * SECOND, pioneer_poll: 50 * MILLISECOND, state_ttl: 60 * SECOND };

    #[test]
    fn a_single_call_is_the_common_part_then_the_operation() {
        let r = Reservation {
            id: 3,
            identity: "bot".into(),
            route: "POST /channels/:id/messages".into(),
            major: "42".into(),
            bucket: Some(String::new()),
            counts_global: true,
            global_limit: 50,
            global_window: SECOND,
            margin: 20 * MILLISECOND,
            processes_since: Some(7),
            unrecorded: vec![1, 2],
            ..Reservation::default()
        };
        let args = call_args(Some(9), "p", &SETTINGS, StoreOp::Reserve(&r));
        let expected = [
            "reserve", "9", "p", "5000000000", "50000000", "60000000000", // common part
            "3", "bot", "POST /channels/:id/messages", "42", "=", "1", "50", "1000000000", "20000000", "0", "0", "1",
            "7", "0", "1,2", "",
        ];
        assert_eq!(args, expected);
        let hold = SharedUpdate::Hold {
            scope: SharedScope::Route,
            identity: "bot".into(),
            route: "r".into(),
            major: "m".into(),
            bucket: None,
            retry_after: 5,
        };
        assert_eq!(call_args(None, "p", &SETTINGS, StoreOp::Record(&hold))[..2], ["record", ""]);
        assert_eq!(record_args(&hold), ["hold", "route", "bot", "r", "m", "", "5"]);
        assert_eq!(record_args(&SharedUpdate::Invalid { id: 1, window: 2 }), ["invalid", "1", "2"]);
    }

    #[test]
    fn a_batch_counts_each_operations_arguments() {
        let r = Reservation::default();
        let u = SharedUpdate::Invalid { id: 4, window: 10 };
        let args = batch_args(None, "p", &SETTINGS, &[StoreOp::Reserve(&r), StoreOp::Record(&u)]);
        assert_eq!(args[0], "batch");
        // 16 arguments of the reservation, plus its name.
        assert_eq!(args[6..8], ["17", "reserve"]);
        assert_eq!(args[8..24], reserve_args(&r)[..]);
        assert_eq!(args[24..], ["4", "record", "invalid", "4", "10"]);
    }

    #[test]
    fn optional_strings_keep_empty_apart_from_absent() {
        assert_eq!(opt_str(None), "");
        assert_eq!(opt_str(Some("")), "=");
        assert_eq!(opt_str(Some("abc")), "=abc");
    }

    #[test]
    fn shared_store_answers_read_back_or_are_errors() {
        // Without the process count (a script of an earlier version), and with it.
        assert_eq!(parse_reserve_answer(&[text("granted")]).unwrap(), ReservationAnswer::GRANTED);
        assert_eq!(
            parse_reserve_answer(&[text("granted"), ReplyItem::Int(3)]).unwrap(),
            ReservationAnswer::Granted { processes: Some(3), leased: 0, store_time: None }
        );
        assert_eq!(
            parse_reserve_answer(&[text("granted"), ReplyItem::Int(3), ReplyItem::Int(7)]).unwrap(),
            ReservationAnswer::Granted { processes: Some(3), leased: 7, store_time: None }
        );
        assert_eq!(
            parse_reserve_answer(&[text("granted"), ReplyItem::Int(3), ReplyItem::Int(7), ReplyItem::Int(1_795_812_403_404_294)])
                .unwrap(),
            ReservationAnswer::Granted { processes: Some(3), leased: 7, store_time: Some(1_795_812_403_404_294_000) }
        );
        assert_eq!(
            parse_reserve_answer(&[text("granted"), ReplyItem::Int(1 << 40)]).unwrap(),
            ReservationAnswer::Granted { processes: Some(u32::MAX), leased: 0, store_time: None }
        );
        assert_eq!(
            parse_reserve_answer(&[text("denied"), ReplyItem::Int(50_000), text("pioneer")]).unwrap(),
            ReservationAnswer::Denied { retry_after: 50_000_000, scope: SharedScope::Pioneer, processes: None }
        );
        assert_eq!(
            parse_reserve_answer(&[text("denied"), ReplyItem::Int(1), text("edge"), ReplyItem::Int(0)]).unwrap(),
            ReservationAnswer::Denied { retry_after: 1000, scope: SharedScope::Edge, processes: Some(0) }
        );
        let bad: [&[ReplyItem<'_>]; 12] = [
            &[],
            &[ReplyItem::Nil],
            &[text("denied"), ReplyItem::Int(-1), text("bucket")],
            &[text("denied"), ReplyItem::Int(1), text("nope")],
            &[text("denied"), ReplyItem::Int(1), ReplyItem::Int(2)],
            &[text("granted"), text("1")],
            &[text("granted"), ReplyItem::Int(-1)],
            &[text("granted"), ReplyItem::Int(1), ReplyItem::Int(-1)],
            &[text("granted"), ReplyItem::Int(1), ReplyItem::Int(1), ReplyItem::Int(-1)],
            &[text("granted"), ReplyItem::Int(1), ReplyItem::Int(1), text("1")],
            &[text("granted"), ReplyItem::Int(1), ReplyItem::Int(1), ReplyItem::Int(1), ReplyItem::Int(1)],
            &[text("denied"), ReplyItem::Int(1), text("edge"), ReplyItem::Nil],
        ];
        for items in bad {
            assert!(parse_reserve_answer(items).is_err(), "{items:?} was accepted");
        }
        assert_eq!(
            parse_reserve_answer(&[text("granted"), ReplyItem::Int(1), ReplyItem::Int(1), ReplyItem::Int(1), ReplyItem::Int(1)])
                .unwrap_err()
                .message(),
            "reserve: unexpected reply [\"granted\", 1, 1, 1, 1]"
        );
        assert_eq!(
            parse_reserve_answer(&[text("granted"), ReplyItem::Int(-2)]).unwrap_err().message(),
            "reserve: processes must be an integer >= 0, got -2"
        );
        assert_eq!(
            parse_reserve_answer(&[text("denied"), ReplyItem::Int(1), text("nope")]).unwrap_err().message(),
            "denied: unknown scope \"nope\""
        );
        parse_record_answer(&[text("recorded")]).unwrap();
        assert_eq!(
            parse_record_answer(&[text("granted")]).unwrap_err().message(),
            "record: expected [\"recorded\"], got [\"granted\"]"
        );
    }
}
