//! Reading the scripts' replies into the core's types. Any other shape is
//! [`Error::BadReply`], never a panic.

use ratelane::Nanos;
use ratelane::server::{Decision, InsufficientCapacity, Scheduled};
use redis::Value;

use crate::error::Error;

/// What a script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `decision`: the decision and the script's `now`.
    Decision(Decision, Nanos),
    /// `insufficient_capacity`.
    InsufficientCapacity(InsufficientCapacity),
    /// `scheduled`: the booking and the script's `now`.
    Scheduled(Scheduled, Nanos),
    /// `released`.
    Released(bool),
}

fn bad(what: impl Into<String>) -> Error {
    Error::BadReply(what.into())
}

/// A reply's fields after the tag, read one at a time.
struct Fields<'a> {
    tag: &'a str,
    items: std::slice::Iter<'a, Value>,
}

impl<'a> Fields<'a> {
    fn next(&mut self, name: &str) -> Result<&'a Value, Error> {
        self.items.next().ok_or_else(|| bad(format!("{}: {name} missing", self.tag)))
    }

    fn int(&mut self, name: &str) -> Result<i64, Error> {
        match self.next(name)? {
            Value::Int(n) => Ok(*n),
            other => Err(bad(format!("{}: {name} is not an integer: {other:?}", self.tag))),
        }
    }

    fn flag(&mut self, name: &str) -> Result<bool, Error> {
        match self.int(name)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(bad(format!("{}: {name} is {n}, not 0 or 1", self.tag))),
        }
    }

    fn u32(&mut self, name: &str) -> Result<u32, Error> {
        let n = self.int(name)?;
        u32::try_from(n).map_err(|_| bad(format!("{}: {name} = {n} is out of range", self.tag)))
    }

    fn u64(&mut self, name: &str) -> Result<u64, Error> {
        let n = self.int(name)?;
        u64::try_from(n).map_err(|_| bad(format!("{}: {name} = {n} is negative", self.tag)))
    }

    /// A duration or `-1` for "none".
    fn optional_u64(&mut self, name: &str) -> Result<Option<u64>, Error> {
        match self.int(name)? {
            -1 => Ok(None),
            n => u64::try_from(n)
                .map(Some)
                .map_err(|_| bad(format!("{}: {name} = {n} is negative", self.tag))),
        }
    }

    /// A decimal string of nanoseconds (absolute times do not fit in a Lua number).
    fn decimal(&mut self, name: &str) -> Result<u64, Error> {
        let tag = self.tag;
        let text = match self.next(name)? {
            Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
            Value::SimpleString(s) => Some(s.as_str()),
            _ => None,
        };
        text.filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad(format!("{tag}: {name} is not a decimal integer")))
    }

    fn end(mut self) -> Result<(), Error> {
        match self.items.next() {
            None => Ok(()),
            Some(extra) => Err(bad(format!("{}: unexpected extra field {extra:?}", self.tag))),
        }
    }
}

/// Reads any of the scripts' replies.
pub(crate) fn parse(value: &Value) -> Result<Reply, Error> {
    let Value::Array(items) = value else {
        return Err(bad(format!("expected an array, got {value:?}")));
    };
    let (tag, rest) = match items.split_first() {
        Some((Value::BulkString(tag), rest)) => (std::str::from_utf8(tag).unwrap_or(""), rest),
        Some((Value::SimpleString(tag), rest)) => (tag.as_str(), rest),
        _ => return Err(bad(format!("expected a tag first, got {items:?}"))),
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
            Reply::Decision(decision, f.decimal("now_ns")?)
        }
        "insufficient_capacity" => Reply::InsufficientCapacity(InsufficientCapacity {
            requested: f.u32("requested")?,
            capacity: f.u32("capacity")?,
        }),
        "scheduled" => {
            let scheduled = Scheduled {
                run_now: f.flag("run_now")?,
                release_at: f.decimal("release_at_ns")?,
                waiting: f.u64("waiting")?,
            };
            Reply::Scheduled(scheduled, f.decimal("now_ns")?)
        }
        "released" => Reply::Released(f.flag("released")?),
        other => return Err(bad(format!("unknown tag {other:?}"))),
    };
    f.end()?;
    Ok(reply)
}

/// A reply that must be a decision.
pub(crate) fn decision(value: &Value) -> Result<Decision, Error> {
    match parse(value)? {
        Reply::Decision(decision, _) => Ok(decision),
        Reply::InsufficientCapacity(e) => Err(Error::InsufficientCapacity(e)),
        other => Err(bad(format!("expected a decision, got {other:?}"))),
    }
}

/// A reply that must be a booking, with the script's `now`.
pub(crate) fn scheduled(value: &Value) -> Result<(Scheduled, Nanos), Error> {
    match parse(value)? {
        Reply::Scheduled(scheduled, now) => Ok((scheduled, now)),
        other => Err(bad(format!("expected a booking, got {other:?}"))),
    }
}

/// A reply that must be a release.
pub(crate) fn released(value: &Value) -> Result<bool, Error> {
    match parse(value)? {
        Reply::Released(released) => Ok(released),
        other => Err(bad(format!("expected a release, got {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn decision_reply(fields: [i64; 7], now: &str) -> Value {
        let mut items = vec![bulk("decision")];
        items.extend(fields.iter().map(|&n| Value::Int(n)));
        items.push(bulk(now));
        Value::Array(items)
    }

    #[test]
    fn a_decision_reads_every_field() {
        let value = decision_reply([0, 3, 0, 100, 300, -1, 300], "1732364823000000005");
        assert_eq!(
            parse(&value).unwrap(),
            Reply::Decision(
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
    fn malformed_replies_are_errors_not_panics() {
        let cases = [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![bulk("nonsense")]),
            Value::Array(vec![bulk("decision"), Value::Int(1)]),
            decision_reply([2, 3, 0, 0, 0, 0, 0], "0"),
            decision_reply([1, -3, 0, 0, 0, 0, 0], "0"),
            decision_reply([1, 3, 0, -5, 0, 0, 0], "0"),
            decision_reply([1, 3, 0, 0, 0, -2, 0], "0"),
            decision_reply([1, 1 << 40, 0, 0, 0, 0, 0], "0"),
            decision_reply([1, 3, 0, 0, 0, 0, 0], ""),
            decision_reply([1, 3, 0, 0, 0, 0, 0], "-1"),
            decision_reply([1, 3, 0, 0, 0, 0, 0], "99999999999999999999999"),
            Value::Array(vec![bulk("released"), bulk("1")]),
            Value::Array(vec![bulk("released"), Value::Int(1), Value::Int(1)]),
            Value::Array(vec![bulk("scheduled"), Value::Int(1), Value::Int(5)]),
        ];
        for value in cases {
            let result = parse(&value);
            assert!(
                matches!(result, Err(Error::BadReply(_))),
                "{value:?} gave {result:?} instead of a bad reply"
            );
            assert_eq!(result.unwrap_err().code(), "redis_bad_reply");
        }
    }

    #[test]
    fn a_reply_of_the_wrong_kind_is_a_bad_reply() {
        let value = Value::Array(vec![bulk("released"), Value::Int(1)]);
        assert!(matches!(decision(&value), Err(Error::BadReply(_))));
        assert!(matches!(scheduled(&value), Err(Error::BadReply(_))));
        assert!(released(&value).unwrap());
        let value = Value::Array(vec![bulk("insufficient_capacity"), Value::Int(6), Value::Int(5)]);
        assert!(matches!(
            decision(&value),
            Err(Error::InsufficientCapacity(InsufficientCapacity { requested: 6, capacity: 5 }))
        ));
    }
}
