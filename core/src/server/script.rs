//! The wire format of the server-side limiters' Redis scripts (`redis/scripts/gcra.lua`,
//! `leaky_bucket.lua`, `fixed_window.lua`; the contract is `redis/README.md`), sans-IO: the
//! `ARGV` of one call and the reading of its reply, written once for every host
//! (`ratelane-redis`, the Python and the Node bindings).
//!
//! A host checks a config once with [`check_gcra`], [`check_leaky_bucket`] or
//! [`check_fixed_window`] (windows up to [`MAX_WINDOW`]), builds each call's `ARGV` with
//! [`gcra_argv`], [`leaky_bucket_argv`] or [`fixed_window_argv`], runs the script itself, turns
//! the reply's array into [`ReplyItem`]s and reads them with [`parse_reply`]. Any other shape
//! is a [`ReplyError`] saying what was wrong, never a panic.
//!
//! The shared mode's store script (`redis/scripts/shared_store.lua`) has its wire format in
//! [`crate::shared::wire`], over the same [`ReplyItem`]s.

use std::borrow::Cow;
use std::fmt;

use crate::error::Error;
use crate::server::{Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, Scheduled};
use crate::types::Nanos;

/// The longest window the scripts evaluate exactly: 2^52 ns (about 52 days). Lua numbers are
/// doubles, exact for integers below 2^53, and the scripts add up to two windows.
pub const MAX_WINDOW: Nanos = 1 << 52;

/// Checks a configured window against [`MAX_WINDOW`].
fn require_window(what: &str, window: Nanos) -> Result<(), Error> {
    if window <= MAX_WINDOW {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "{what} ({window} ns) is longer than the Redis scripts evaluate exactly ({MAX_WINDOW} ns)"
        )))
    }
}

/// Whether `gcra.lua` evaluates `gcra` exactly.
///
/// # Errors
///
/// [`Error::InvalidConfig`] when `burst × interval` is longer than [`MAX_WINDOW`].
pub fn check_gcra(gcra: &Gcra) -> Result<(), Error> {
    require_window("burst × interval", gcra.window())
}

/// Whether `leaky_bucket.lua` evaluates `bucket` exactly.
///
/// # Errors
///
/// [`Error::InvalidConfig`] when the time a full bucket takes to drain, or the minimum
/// interval, is longer than [`MAX_WINDOW`].
pub fn check_leaky_bucket(bucket: &LeakyBucket) -> Result<(), Error> {
    require_window("the time a full bucket takes to drain", bucket.window())?;
    match bucket.min_interval() {
        Some(min_interval) => require_window("min_interval", min_interval),
        None => Ok(()),
    }
}

/// Whether `fixed_window.lua` evaluates `window` exactly.
///
/// # Errors
///
/// [`Error::InvalidConfig`] when the window is longer than [`MAX_WINDOW`].
pub fn check_fixed_window(window: &FixedWindow) -> Result<(), Error> {
    require_window("window", window.window())
}

/// `min_ttl_ms` as the scripts take it: values above [`MAX_WINDOW`] are clamped.
pub fn clamp_min_ttl_ms(ms: u64) -> u64 {
    ms.min(MAX_WINDOW)
}

/// One `ARGV` value. Its [`Display`](fmt::Display) is the text sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptArg {
    /// A decimal integer.
    Int(u64),
    /// A word (`fixed_window.lua`'s `op`).
    Text(&'static str),
    /// The empty string: "not given" (`now_ns`: the script reads Redis's clock).
    Empty,
}

impl fmt::Display for ScriptArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScriptArg::Int(n) => write!(f, "{n}"),
            ScriptArg::Text(s) => f.write_str(s),
            ScriptArg::Empty => Ok(()),
        }
    }
}

fn now_arg(now: Option<Nanos>) -> ScriptArg {
    now.map_or(ScriptArg::Empty, ScriptArg::Int)
}

/// `gcra.lua`'s `ARGV` for a request of weight `n` (`0` peeks): `interval_ns burst n now_ns
/// min_ttl_ms`. `now` is the caller's clock, `None` for Redis's; `min_ttl_ms` is clamped
/// ([`clamp_min_ttl_ms`]).
///
/// Answers [`InsufficientCapacity`] instead when `n` is larger than the burst: it can never be
/// admitted, and nothing needs sending.
///
/// # Errors
///
/// [`Error::InvalidRequest`] when `now` is later than [`Gcra::last_instant`], as
/// [`Gcra::check_n`] refuses it (the script refuses it too); nothing needs sending.
pub fn gcra_argv(
    gcra: &Gcra,
    n: u32,
    now: Option<Nanos>,
    min_ttl_ms: u64,
) -> Result<Result<[ScriptArg; 5], InsufficientCapacity>, Error> {
    if let Some(now) = now {
        gcra.require_instant(now)?;
    }
    let burst = gcra.burst();
    if n > burst {
        return Ok(Err(InsufficientCapacity { requested: n, capacity: burst }));
    }
    Ok(Ok([
        ScriptArg::Int(gcra.interval()),
        ScriptArg::Int(u64::from(burst)),
        ScriptArg::Int(u64::from(n)),
        now_arg(now),
        ScriptArg::Int(clamp_min_ttl_ms(min_ttl_ms)),
    ]))
}

/// `leaky_bucket.lua`'s `ARGV` for one check of `bucket` (already scaled by the subject's
/// factor, if any): `size drip_rate_ns drip_size min_interval_ns now_ns min_ttl_ms`.
pub fn leaky_bucket_argv(
    bucket: &LeakyBucket,
    now: Option<Nanos>,
    min_ttl_ms: u64,
) -> [ScriptArg; 6] {
    [
        ScriptArg::Int(u64::from(bucket.size())),
        ScriptArg::Int(bucket.drip_rate()),
        ScriptArg::Int(u64::from(bucket.drip_size())),
        ScriptArg::Int(bucket.min_interval().unwrap_or(0)),
        now_arg(now),
        ScriptArg::Int(clamp_min_ttl_ms(min_ttl_ms)),
    ]
}

/// What a `fixed_window.lua` call does (its `ARGV[1]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedWindowOp {
    /// `check`: admit (and count) if the current window has a free slot; a decision.
    Check,
    /// `schedule`: book a slot for a job; a booking.
    Schedule,
    /// `release`: a delayed job was released (or dropped); whether one was waiting.
    Release,
}

impl FixedWindowOp {
    /// The word sent.
    pub fn name(self) -> &'static str {
        match self {
            FixedWindowOp::Check => "check",
            FixedWindowOp::Schedule => "schedule",
            FixedWindowOp::Release => "release",
        }
    }

    /// The op named `name`, if any.
    pub fn from_name(name: &str) -> Option<FixedWindowOp> {
        match name {
            "check" => Some(FixedWindowOp::Check),
            "schedule" => Some(FixedWindowOp::Schedule),
            "release" => Some(FixedWindowOp::Release),
            _ => None,
        }
    }
}

/// `fixed_window.lua`'s `ARGV` for `op`: `op quota window_ns now_ns min_ttl_ms`.
pub fn fixed_window_argv(
    window: &FixedWindow,
    op: FixedWindowOp,
    now: Option<Nanos>,
    min_ttl_ms: u64,
) -> [ScriptArg; 5] {
    [
        ScriptArg::Text(op.name()),
        ScriptArg::Int(u64::from(window.quota())),
        ScriptArg::Int(window.window()),
        now_arg(now),
        ScriptArg::Int(clamp_min_ttl_ms(min_ttl_ms)),
    ]
}

/// The most elements a reply array of these scripts (or of the shared store's script,
/// [`crate::shared::wire`]) may hold: a decision is a tag and eight fields. A host checks a
/// reply's length with [`check_reply_len`] before it reads a single element, so a store
/// answering a million elements (a bug, or a hostile server) is refused at once, in the time
/// it takes to read a length.
pub const MAX_REPLY_LEN: usize = 16;

/// Whether a reply array of `len` elements may be read ([`MAX_REPLY_LEN`]); call it before
/// turning its elements into [`ReplyItem`]s.
///
/// # Errors
///
/// [`ReplyError`] for a longer reply.
pub fn check_reply_len(len: usize) -> Result<(), ReplyError> {
    if len <= MAX_REPLY_LEN {
        Ok(())
    } else {
        Err(ReplyError::new(format!("expected an array of at most {MAX_REPLY_LEN} elements, got {len}")))
    }
}

/// The most characters of a text an error message quotes.
const QUOTED: usize = 64;

/// One element of a script's reply array, in terms every host can give.
///
/// A host describes an element that is none of the scalars as [`ReplyItem::Other`] by its kind
/// and size only ([`ReplyItem::nested`] for an array), never by rendering it: a reply nested
/// ten thousand deep must not be walked to be refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyItem<'a> {
    /// A Redis integer (a Lua integer).
    Int(i64),
    /// A bulk or simple string, as UTF-8.
    Text(Cow<'a, str>),
    /// A nil (`false` in Lua, `None` / `null` in the hosts).
    Nil,
    /// Anything else, described for the error message.
    Other(Cow<'a, str>),
}

impl ReplyItem<'_> {
    /// An element that is itself an array (or a map, a set) of `len` elements, described
    /// without reading it.
    pub fn nested(len: usize) -> ReplyItem<'static> {
        ReplyItem::Other(Cow::Owned(format!("a nested array of {len} elements")))
    }
}

impl fmt::Display for ReplyItem<'_> {
    /// The item as an error message shows it (a long text by its first 64 characters).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyItem::Int(n) => write!(f, "{n}"),
            ReplyItem::Text(s) => match s.char_indices().nth(QUOTED) {
                Some((end, _)) => write!(f, "{:?}... ({} bytes)", &s[..end], s.len()),
                None => write!(f, "{s:?}"),
            },
            ReplyItem::Nil => f.write_str("nil"),
            ReplyItem::Other(what) => match what.char_indices().nth(QUOTED) {
                Some((end, _)) => write!(f, "{}...", &what[..end]),
                None => f.write_str(what),
            },
        }
    }
}

/// A script's reply that is not one the contract allows: the message says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyError {
    message: String,
}

impl ReplyError {
    pub(crate) fn new(message: String) -> ReplyError {
        ReplyError { message }
    }

    /// A reply that is not an array at all (the host checks this before it has items);
    /// `description` is the host's rendering of it (its first 64 characters are quoted).
    pub fn not_an_array(description: &str) -> ReplyError {
        let description = match description.char_indices().nth(QUOTED) {
            Some((end, _)) => format!("{}... ({} bytes)", &description[..end], description.len()),
            None => description.to_string(),
        };
        ReplyError::new(format!("expected an array, got {description}"))
    }

    /// What was wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message, owned.
    pub fn into_message(self) -> String {
        self.message
    }
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReplyError {}

/// What a script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptReply {
    /// `decision`: the decision and the script's `now`.
    Decision(Decision, Nanos),
    /// `insufficient_capacity` (`gcra.lua`, for a weight above the burst).
    InsufficientCapacity(InsufficientCapacity),
    /// `scheduled`: the booking and the script's `now`.
    Scheduled(Scheduled, Nanos),
    /// `released`: whether a delayed job was waiting.
    Released(bool),
}

impl ScriptReply {
    /// What kind of reply this is, for messages: `a decision`, `insufficient_capacity`,
    /// `a booking`, `a release`.
    pub fn kind(&self) -> &'static str {
        match self {
            ScriptReply::Decision(..) => "a decision",
            ScriptReply::InsufficientCapacity(_) => "insufficient_capacity",
            ScriptReply::Scheduled(..) => "a booking",
            ScriptReply::Released(_) => "a release",
        }
    }

    /// A check's reply: the decision, or `Ok(Err(..))` for `insufficient_capacity`.
    ///
    /// # Errors
    ///
    /// A booking or a release.
    pub fn into_decision(self) -> Result<Result<Decision, InsufficientCapacity>, ReplyError> {
        match self {
            ScriptReply::Decision(decision, _) => Ok(Ok(decision)),
            ScriptReply::InsufficientCapacity(e) => Ok(Err(e)),
            other => Err(other.unexpected("a decision")),
        }
    }

    /// A `schedule` reply: the booking and the script's `now`.
    ///
    /// # Errors
    ///
    /// Any other reply.
    pub fn into_scheduled(self) -> Result<(Scheduled, Nanos), ReplyError> {
        match self {
            ScriptReply::Scheduled(scheduled, now) => Ok((scheduled, now)),
            other => Err(other.unexpected("a booking")),
        }
    }

    /// A `release` reply: whether a delayed job was waiting.
    ///
    /// # Errors
    ///
    /// Any other reply.
    pub fn into_released(self) -> Result<bool, ReplyError> {
        match self {
            ScriptReply::Released(released) => Ok(released),
            other => Err(other.unexpected("a release")),
        }
    }

    fn unexpected(&self, expected: &str) -> ReplyError {
        ReplyError::new(format!("expected {expected}, got {}", self.kind()))
    }
}

/// A reply's fields after the tag, read one at a time.
struct Fields<'r, 'a> {
    tag: &'r str,
    items: std::slice::Iter<'r, ReplyItem<'a>>,
}

impl<'r, 'a> Fields<'r, 'a> {
    fn bad(&self, what: fmt::Arguments<'_>) -> ReplyError {
        ReplyError::new(format!("{}: {what}", self.tag))
    }

    fn next(&mut self, name: &str) -> Result<&'r ReplyItem<'a>, ReplyError> {
        match self.items.next() {
            Some(item) => Ok(item),
            None => Err(self.bad(format_args!("{name} missing"))),
        }
    }

    fn int(&mut self, name: &str) -> Result<i64, ReplyError> {
        match self.next(name)? {
            ReplyItem::Int(n) => Ok(*n),
            other => Err(self.bad(format_args!("{name} is not an integer: {other}"))),
        }
    }

    fn flag(&mut self, name: &str) -> Result<bool, ReplyError> {
        match self.int(name)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(self.bad(format_args!("{name} is {n}, not 0 or 1"))),
        }
    }

    fn u32(&mut self, name: &str) -> Result<u32, ReplyError> {
        let n = self.int(name)?;
        u32::try_from(n).map_err(|_| self.bad(format_args!("{name} = {n} is out of range")))
    }

    fn u64(&mut self, name: &str) -> Result<u64, ReplyError> {
        let n = self.int(name)?;
        u64::try_from(n).map_err(|_| self.bad(format_args!("{name} = {n} is negative")))
    }

    /// A duration, or `-1` for "none".
    fn optional_u64(&mut self, name: &str) -> Result<Option<u64>, ReplyError> {
        match self.int(name)? {
            -1 => Ok(None),
            n => u64::try_from(n)
                .map(Some)
                .map_err(|_| self.bad(format_args!("{name} = {n} is negative"))),
        }
    }

    /// A decimal string of nanoseconds (absolute times do not fit in a Lua number).
    fn decimal(&mut self, name: &str) -> Result<u64, ReplyError> {
        let item = self.next(name)?;
        match item {
            ReplyItem::Text(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                t.parse().ok()
            }
            _ => None,
        }
        .ok_or_else(|| self.bad(format_args!("{name} is not a decimal integer: {item}")))
    }

    fn end(mut self) -> Result<(), ReplyError> {
        match self.items.next() {
            None => Ok(()),
            Some(extra) => Err(self.bad(format_args!("unexpected extra field {extra}"))),
        }
    }
}

/// Reads any of the scripts' replies from the items of its array.
///
/// # Errors
///
/// [`ReplyError`] for any shape the contract does not allow: no tag first, an unknown tag, a
/// missing, extra or mistyped field, a value out of range.
pub fn parse_reply(items: &[ReplyItem<'_>]) -> Result<ScriptReply, ReplyError> {
    let (tag, rest) = match items.split_first() {
        Some((ReplyItem::Text(tag), rest)) => (tag.as_ref(), rest),
        Some((first, _)) => {
            return Err(ReplyError::new(format!("expected a tag first, got {first}")));
        }
        None => return Err(ReplyError::new("expected a tag first, got an empty array".into())),
    };
    let mut f = Fields { tag, items: rest.iter() };
    let reply = match tag {
        "decision" => {
            let decision = Decision {
                allowed: f.flag("allowed")?,
                limit: f.u32("limit")?,
                remaining: f.u32("remaining")?,
                reset_after: f.u64("reset_after_ns")?,
                clear_after: f.u64("clear_after_ns")?,
                replenish_after: f.optional_u64("replenish_after_ns")?,
                window: f.u64("window_ns")?,
            };
            ScriptReply::Decision(decision, f.decimal("now_ns")?)
        }
        "insufficient_capacity" => ScriptReply::InsufficientCapacity(InsufficientCapacity {
            requested: f.u32("requested")?,
            capacity: f.u32("capacity")?,
        }),
        "scheduled" => {
            let scheduled = Scheduled {
                run_now: f.flag("run_now")?,
                release_at: f.decimal("release_at_ns")?,
                waiting: f.u64("waiting")?,
            };
            ScriptReply::Scheduled(scheduled, f.decimal("now_ns")?)
        }
        "released" => ScriptReply::Released(f.flag("released")?),
        _ => return Err(ReplyError::new(format!("unknown tag {}", items[0]))),
    };
    f.end()?;
    Ok(reply)
}

/// Items as a message shows them: `["denied", 1, "nope"]`.
pub(crate) struct Items<'r, 'a>(pub(crate) &'r [ReplyItem<'a>]);

impl fmt::Display for Items<'_, '_> {
    /// At most [`MAX_REPLY_LEN`] items, then how many more.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, item) in self.0.iter().take(MAX_REPLY_LEN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{item}")?;
        }
        if self.0.len() > MAX_REPLY_LEN {
            write!(f, ", ... {} more", self.0.len() - MAX_REPLY_LEN)?;
        }
        f.write_str("]")
    }
}

pub(crate) fn is_tag(item: &ReplyItem<'_>, tag: &str) -> bool {
    matches!(item, ReplyItem::Text(t) if t == tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SECOND;

    fn text(s: &str) -> ReplyItem<'_> {
        ReplyItem::Text(Cow::Borrowed(s))
    }

    fn decision_reply(fields: [i64; 7], now: &str) -> Vec<ReplyItem<'_>> {
        let mut items = vec![text("decision")];
        items.extend(fields.iter().map(|&n| ReplyItem::Int(n)));
        items.push(text(now));
        items
    }

    #[test]
    fn a_reply_is_bounded_before_it_is_read() {
        assert!(check_reply_len(MAX_REPLY_LEN).is_ok());
        let e = check_reply_len(1_000_000).unwrap_err();
        assert_eq!(e.message(), "expected an array of at most 16 elements, got 1000000");
        // Messages quote a long text, an unknown tag or a host's rendering by its start.
        let long = "x".repeat(1 << 20);
        for message in [
            parse_reply(&[text(&long)]).unwrap_err().into_message(),
            parse_reply(&[text("released"), text(&long)]).unwrap_err().into_message(),
            ReplyError::not_an_array(&long).into_message(),
        ] {
            assert!(message.len() < 400, "{} bytes: {}", message.len(), &message[..100]);
        }
        assert!(ReplyItem::nested(3).to_string().contains("3 elements"));
    }

    #[test]
    fn a_decision_reads_every_field() {
        let items = decision_reply([0, 3, 0, 100, 300, -1, 300], "1732364823000000005");
        assert_eq!(
            parse_reply(&items).unwrap(),
            ScriptReply::Decision(
                Decision {
                    allowed: false,
                    limit: 3,
                    remaining: 0,
                    reset_after: 100,
                    clear_after: 300,
                    replenish_after: None,
                    window: 300,
                },
                1_732_364_823_000_000_005
            )
        );
    }

    #[test]
    fn bookings_and_releases_read_back() {
        let items =
            [text("scheduled"), ReplyItem::Int(0), text("250"), ReplyItem::Int(2), text("100")];
        assert_eq!(
            parse_reply(&items).unwrap().into_scheduled().unwrap(),
            (Scheduled { run_now: false, release_at: 250, waiting: 2 }, 100)
        );
        let items = [text("released"), ReplyItem::Int(1)];
        assert!(parse_reply(&items).unwrap().into_released().unwrap());
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        let other = || ReplyItem::Other(Cow::Borrowed("a list"));
        let cases: Vec<Vec<ReplyItem<'_>>> = vec![
            vec![],
            vec![ReplyItem::Int(1)],
            vec![ReplyItem::Nil],
            vec![other()],
            vec![text("nonsense")],
            vec![text("decision"), ReplyItem::Int(1)],
            decision_reply([2, 3, 0, 0, 0, 0, 0], "0"),
            decision_reply([1, -3, 0, 0, 0, 0, 0], "0"),
            decision_reply([1, 3, 0, -5, 0, 0, 0], "0"),
            decision_reply([1, 3, 0, 0, 0, -2, 0], "0"),
            decision_reply([1, 1 << 40, 0, 0, 0, 0, 0], "0"),
            decision_reply([1, 3, 0, 0, 0, 0, 0], ""),
            decision_reply([1, 3, 0, 0, 0, 0, 0], "-1"),
            decision_reply([1, 3, 0, 0, 0, 0, 0], "99999999999999999999999"),
            vec![text("released"), text("1")],
            vec![text("released"), ReplyItem::Int(1), ReplyItem::Int(1)],
            vec![text("released"), ReplyItem::Nil],
            vec![text("released"), other()],
            vec![text("scheduled"), ReplyItem::Int(1), ReplyItem::Int(5)],
        ];
        for items in cases {
            assert!(parse_reply(&items).is_err(), "{items:?} was accepted");
        }
    }

    #[test]
    fn messages_say_what_was_wrong() {
        let message = |items: &[ReplyItem<'_>]| parse_reply(items).unwrap_err().into_message();
        assert_eq!(message(&[]), "expected a tag first, got an empty array");
        assert_eq!(message(&[ReplyItem::Int(1)]), "expected a tag first, got 1");
        assert_eq!(message(&[text("nope")]), "unknown tag \"nope\"");
        assert_eq!(message(&[text("decision")]), "decision: allowed missing");
        assert_eq!(
            message(&decision_reply([1, 3, 0, 0, 0, 0, 0], "x")),
            "decision: now_ns is not a decimal integer: \"x\""
        );
        assert_eq!(
            message(&[text("released"), ReplyItem::Other(Cow::Borrowed("a list"))]),
            "released: released is not an integer: a list"
        );
        assert_eq!(
            message(&[text("released"), ReplyItem::Int(1), ReplyItem::Nil]),
            "released: unexpected extra field nil"
        );
        assert_eq!(ReplyError::not_an_array("Int(1)").to_string(), "expected an array, got Int(1)");
    }

    #[test]
    fn a_reply_of_the_wrong_kind_is_an_error() {
        let released = parse_reply(&[text("released"), ReplyItem::Int(1)]).unwrap();
        assert_eq!(
            released.into_decision().unwrap_err().message(),
            "expected a decision, got a release"
        );
        assert_eq!(
            released.into_scheduled().unwrap_err().message(),
            "expected a booking, got a release"
        );
        assert!(released.into_released().unwrap());
        let refused =
            parse_reply(&[text("insufficient_capacity"), ReplyItem::Int(6), ReplyItem::Int(5)])
                .unwrap();
        assert_eq!(
            refused.into_decision().unwrap(),
            Err(InsufficientCapacity { requested: 6, capacity: 5 })
        );
    }

    fn texts(args: &[ScriptArg]) -> Vec<String> {
        args.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn argv_follows_the_contract() {
        let gcra = Gcra::new(100, 3).unwrap();
        let argv = |n, now, min_ttl| gcra_argv(&gcra, n, now, min_ttl).unwrap().unwrap();
        assert_eq!(texts(&argv(1, None, 0)), ["100", "3", "1", "", "0"]);
        assert_eq!(texts(&argv(0, Some(7), 5)), ["100", "3", "0", "7", "5"]);
        assert_eq!(
            gcra_argv(&gcra, 4, None, 0),
            Ok(Err(InsufficientCapacity { requested: 4, capacity: 3 }))
        );
        // The last instant the core takes is sent; a later one is refused as the core does.
        let last = gcra.last_instant();
        assert_eq!(texts(&argv(1, Some(last), 0))[3], last.to_string());
        let refused = gcra_argv(&gcra, 4, Some(last + 1), 0).unwrap_err();
        assert_eq!(refused, gcra.check_n(&mut Default::default(), last + 1, 4).unwrap_err());
        let bucket = LeakyBucket::new(10, 50, 2).unwrap().with_min_interval(9).unwrap();
        assert_eq!(
            texts(&leaky_bucket_argv(&bucket, Some(1), u64::MAX)),
            ["10", "50", "2", "9", "1", &MAX_WINDOW.to_string()]
        );
        let bucket = LeakyBucket::new(10, 50, 1).unwrap();
        assert_eq!(texts(&leaky_bucket_argv(&bucket, None, 0)), ["10", "50", "1", "0", "", "0"]);
        let window = FixedWindow::new(3, 100).unwrap();
        for op in [FixedWindowOp::Check, FixedWindowOp::Schedule, FixedWindowOp::Release] {
            assert_eq!(FixedWindowOp::from_name(op.name()), Some(op));
            assert_eq!(
                texts(&fixed_window_argv(&window, op, None, 0)),
                [op.name(), "3", "100", "", "0"]
            );
        }
        assert_eq!(FixedWindowOp::from_name("Check"), None);
    }

    #[test]
    fn windows_above_max_window_are_refused() {
        assert!(check_gcra(&Gcra::new(MAX_WINDOW, 1).unwrap()).is_ok());
        let too_long = check_gcra(&Gcra::new(MAX_WINDOW / 2 + 1, 2).unwrap()).unwrap_err();
        assert!(too_long.to_string().contains("burst × interval"), "{too_long}");
        assert!(check_fixed_window(&FixedWindow::new(1, MAX_WINDOW + 1).unwrap()).is_err());
        assert!(check_leaky_bucket(&LeakyBucket::new(1, SECOND, 1).unwrap()).is_ok());
        let bucket = LeakyBucket::new(1, SECOND, 1).unwrap().with_min_interval(MAX_WINDOW + 1);
        assert!(check_leaky_bucket(&bucket.unwrap()).is_err());
    }
}
