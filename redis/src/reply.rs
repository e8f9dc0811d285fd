//! Reading the scripts' replies: each [`Value`] becomes a neutral
//! [`ReplyItem`](ratelane::server::script::ReplyItem) and the core's
//! [`parse_reply`](ratelane::server::script::parse_reply) reads them (the grammar lives there,
//! once for every host). Any other shape is [`Error::BadReply`], never a panic.

use std::borrow::Cow;

use ratelane::Nanos;
use ratelane::server::script::{self, ReplyError, ReplyItem, ScriptReply};
use ratelane::server::{Decision, Scheduled};
use redis::Value;

use crate::error::Error;

fn bad(e: ReplyError) -> Error {
    Error::BadReply(e.into_message())
}

/// One element of a reply array in the core's terms. An aggregate is described by its size,
/// never rendered (a reply nested ten thousand deep is not walked to be refused).
fn item(value: &Value) -> ReplyItem<'_> {
    match value {
        Value::Int(n) => ReplyItem::Int(*n),
        Value::BulkString(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => ReplyItem::Text(Cow::Borrowed(text)),
            Err(_) => ReplyItem::Other(Cow::Owned(format!("a string of {} bytes, not UTF-8", bytes.len()))),
        },
        Value::SimpleString(s) => ReplyItem::Text(Cow::Borrowed(s)),
        Value::Nil => ReplyItem::Nil,
        Value::Array(items) | Value::Set(items) => ReplyItem::nested(items.len()),
        other => ReplyItem::Other(Cow::Owned(describe(other))),
    }
}

/// What a reply is, for a message: its kind and size, without its contents (a string or an
/// array may be any size, or nested any depth).
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Nil => "nil".into(),
        Value::Int(n) => format!("the integer {n}"),
        Value::BulkString(bytes) => format!("a string of {} bytes", bytes.len()),
        Value::SimpleString(s) => format!("a status of {} bytes", s.len()),
        Value::Okay => "OK".into(),
        Value::Array(items) => format!("an array of {} elements", items.len()),
        Value::Set(items) => format!("a set of {} elements", items.len()),
        Value::Map(pairs) => format!("a map of {} entries", pairs.len()),
        Value::Attribute { .. } => "an attribute".into(),
        Value::Double(_) => "a double".into(),
        Value::Boolean(_) => "a boolean".into(),
        Value::VerbatimString { text, .. } => format!("a verbatim string of {} bytes", text.len()),
        Value::BigNumber(_) => "a big number".into(),
        Value::Push { data, .. } => format!("a push of {} elements", data.len()),
        Value::ServerError(_) => "an error".into(),
        _ => "a value of another kind".into(),
    }
}

/// Reads a reply array with one of the core's readers (`ratelane::server::script::parse_*`),
/// after checking its length (`ratelane::server::script::check_reply_len`): a reply longer
/// than any the scripts give is refused before its elements are read.
pub(crate) fn read<T>(
    value: &Value,
    reader: impl FnOnce(&[ReplyItem<'_>]) -> Result<T, ReplyError>,
) -> Result<T, Error> {
    let Value::Array(values) = value else {
        return Err(bad(ReplyError::not_an_array(&describe(value))));
    };
    script::check_reply_len(values.len()).map_err(bad)?;
    let items: Vec<ReplyItem<'_>> = values.iter().map(item).collect();
    reader(&items).map_err(bad)
}

/// Reads any of the limiter scripts' replies.
pub(crate) fn parse(value: &Value) -> Result<ScriptReply, Error> {
    read(value, script::parse_reply)
}

/// A reply that must be a decision.
pub(crate) fn decision(value: &Value) -> Result<Decision, Error> {
    parse(value)?.into_decision().map_err(bad)?.map_err(Error::InsufficientCapacity)
}

/// A reply that must be a booking, with the script's `now`.
pub(crate) fn scheduled(value: &Value) -> Result<(Scheduled, Nanos), Error> {
    parse(value)?.into_scheduled().map_err(bad)
}

/// A reply that must be a release.
pub(crate) fn released(value: &Value) -> Result<bool, Error> {
    parse(value)?.into_released().map_err(bad)
}

#[cfg(test)]
mod tests {
    //! The grammar's own tests are the core's (`ratelane::server::script`); these check the
    //! conversion of `redis::Value`s and the error mapping.

    use ratelane::server::InsufficientCapacity;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn bulk_and_simple_strings_and_integers_convert() {
        let mut items = vec![Value::SimpleString("decision".into())];
        items.extend([0, 3, 0, 100, 300, -1, 300].map(Value::Int));
        items.push(bulk("1732364823000000005"));
        let reply = parse(&Value::Array(items)).unwrap();
        let ScriptReply::Decision(decision, now) = reply else { panic!("{reply:?}") };
        assert_eq!(
            (decision.limit, decision.replenish_after, now),
            (3, None, 1_732_364_823_000_000_005)
        );
    }

    #[test]
    fn malformed_replies_are_bad_replies_not_panics() {
        let cases = [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![Value::BulkString(vec![0xff, 0xfe]), Value::Int(1)]),
            Value::Array(vec![bulk("released"), Value::Nil]),
            Value::Array(vec![bulk("released"), Value::Int(1), Value::Array(vec![])]),
            Value::Array(vec![bulk("released"), Value::Double(1.0)]),
        ];
        for value in cases {
            let result = parse(&value);
            assert!(
                matches!(result, Err(Error::BadReply(_))),
                "{value:?} gave {result:?} instead of a bad reply"
            );
            assert_eq!(result.unwrap_err().code(), "redis_bad_reply");
        }
        let Err(Error::BadReply(message)) = parse(&Value::Int(1)) else { unreachable!() };
        assert!(message.starts_with("expected an array, got "), "{message}");
    }

    /// An array nested `depth` deep, built without recursion.
    fn nested(depth: usize) -> Value {
        let mut value = Value::Int(1);
        for _ in 0..depth {
            value = Value::Array(vec![value]);
        }
        value
    }

    #[test]
    fn huge_and_deep_replies_are_refused_without_reading_them() {
        // A million elements: refused by its length, before a single element is read.
        let huge = Value::Array(vec![Value::Int(7); 1_000_000]);
        let Err(Error::BadReply(message)) = parse(&huge) else { panic!("a million elements read as a reply") };
        assert!(message.contains("at most 16 elements, got 1000000"), "{message}");
        // Ten thousand deep, as the reply or as one of its elements: described by its size,
        // never rendered (a `{:?}` walked every level).
        let deep = nested(10_000);
        let Err(Error::BadReply(message)) = parse(&deep) else { panic!() };
        assert!(message.len() < 200, "{message}");
        let reply = Value::Array(vec![bulk("released"), nested(10_000)]);
        let Err(Error::BadReply(message)) = parse(&reply) else { panic!() };
        assert!(message.contains("a nested array of 1 elements"), "{message}");
        assert!(message.len() < 200, "{message}");
        // A long string is quoted by its start.
        let long = Value::Array(vec![Value::BulkString(vec![b'x'; 1 << 20])]);
        let Err(Error::BadReply(message)) = parse(&long) else { panic!() };
        assert!(message.len() < 300, "{} bytes", message.len());
        // Forget the deep values iteratively (their drop would recurse 10,000 frames deep).
        for value in [deep, reply] {
            let mut stack = vec![value];
            while let Some(v) = stack.pop() {
                if let Value::Array(items) = v {
                    stack.extend(items);
                }
            }
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
