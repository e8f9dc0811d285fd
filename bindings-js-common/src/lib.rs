//! What the two JS cores of ratelane share (`bindings-node`, napi-rs; `bindings-wasm`,
//! wasm-bindgen): the checks and conversions of the positional native surface of
//! `js/CONTRACT.md`, on plain Rust values. Each core reads its JS arguments into these
//! (numbers as `f64`, absent as `None`) and maps an `Err` to its `invalid_argument` error;
//! the object API users see is JavaScript (`js/driver.js`), written once over that surface.

use ratelane::shared::{ReservationAnswer, SharedScope};

pub mod server;
use ratelane::{BodyHints, Disposition, Failure, Output, QueryCost, Request, Response};

/// A check that failed: the message of an `invalid_argument` error.
pub type Result<T> = std::result::Result<T, String>;

/// The largest integer a JS number holds exactly.
pub const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A JS number as a message shows it: short, whatever its size (`1e300`, not 301 digits).
pub fn shown(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e21 { format!("{value}") } else { format!("{value:?}") }
}

/// A non-negative integer (nanoseconds, ids, tickets) from a JS number: finite, `>= 0`,
/// `<= Number.MAX_SAFE_INTEGER`; a fractional part is dropped.
pub fn whole(value: f64, what: &str) -> Result<u64> {
    if value.is_finite() && (0.0..=MAX_SAFE).contains(&value) {
        Ok(value as u64)
    } else {
        Err(format!("{what} must be a finite number in 0..=Number.MAX_SAFE_INTEGER, got {}", shown(value)))
    }
}

/// A status code, as the core checks it ([`Response::status_of`]: an integer in
/// [`Response::STATUSES`]).
pub fn status(value: f64) -> Result<u16> {
    Response::status_of(value).ok_or_else(|| {
        let (low, high) = (Response::STATUSES.start(), Response::STATUSES.end());
        format!("response.status must be an integer in {low}..={high}, got {}", shown(value))
    })
}

/// A request id (an id the core issued): a whole number in `0..=Number.MAX_SAFE_INTEGER`. A
/// fraction, a negative number, NaN or an infinity is refused, never truncated into another
/// request's id (`cancel(now, 1.5)` acted on request 1).
pub fn id(value: f64, what: &str) -> Result<u64> {
    if value.is_finite() && value.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&value) {
        Ok(value as u64)
    } else {
        Err(format!("{what} must be a whole number in 0..=Number.MAX_SAFE_INTEGER, got {}", shown(value)))
    }
}

/// `enqueue`'s and `predict`'s arguments after the time: a `RequestSpec` (`js/CONTRACT.md`)
/// field by field, in the contract's order. Costs come as two lists, names
/// and whole numbers, in the object's key order; the model last.
#[derive(Debug, Default)]
pub struct RequestParts {
    pub method: String,
    pub path: String,
    pub identity: Option<String>,
    pub major: Option<String>,
    pub deadline_ns: Option<f64>,
    pub defer_after_ns: Option<f64>,
    pub priority: Option<f64>,
    pub idempotent: Option<bool>,
    pub global_exempt: Option<bool>,
    pub sub_limit: Option<String>,
    pub body_keys: Option<Vec<String>>,
    pub cost_names: Option<Vec<String>>,
    pub cost_values: Option<Vec<f64>>,
    pub model: Option<String>,
}

impl RequestParts {
    /// The core's [`Request`], or the first field a JS value does not fit.
    pub fn request(self) -> Result<Request> {
        let mut request = Request::new(self.method, self.path);
        request.major = self.major;
        if let Some(identity) = self.identity {
            request.identity = identity;
        }
        request.deadline = self.deadline_ns.map(|v| whole(v, "request.deadlineNs")).transpose()?;
        request.defer_after = self.defer_after_ns.map(|v| whole(v, "request.deferAfterNs")).transpose()?;
        if let Some(priority) = self.priority {
            if priority.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&priority) {
                return Err(format!("request.priority must be an integer in the i32 range, got {}", shown(priority)));
            }
            request.priority = priority as i32;
        }
        request.idempotent = self.idempotent;
        request.global_exempt = self.global_exempt;
        request.sub_limit = self.sub_limit;
        request.body_keys = self.body_keys.unwrap_or_default();
        request.model = self.model;
        let names = self.cost_names.unwrap_or_default();
        let values = self.cost_values.unwrap_or_default();
        if names.len() != values.len() {
            return Err("request.costs: as many names as amounts".to_string());
        }
        request.costs = names.into_iter().zip(values).map(|(name, amount)| {
            if amount.is_finite() && amount.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&amount) {
                Ok((name, amount as u64))
            } else {
                Err(format!(
                    "request.costs.{name} must be a whole number in 0..=Number.MAX_SAFE_INTEGER (the estimated cost), got {}",
                    shown(amount)
                ))
            }
        }).collect::<Result<_>>()?;
        Ok(request)
    }
}

/// Header pairs from one string, names and values on alternate lines, `""` for none. `None`
/// when the lines do not pair up.
pub fn header_lines(text: &str) -> Option<Vec<(&str, &str)>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    // By bytes: `str::split`'s searcher costs more than the scan on lines this short.
    let mut rest = Some(text);
    let mut line = move || {
        let r = rest?;
        let (line, next) = match r.bytes().position(|b| b == b'\n') {
            Some(i) => (&r[..i], Some(&r[i + 1..])),
            None => (r, None),
        };
        rest = next;
        Some(line)
    };
    let mut pairs = Vec::with_capacity(8);
    while let Some(name) = line() {
        pairs.push((name, line()?));
    }
    Some(pairs)
}

/// Header pairs from a flat list, `[name, value, name, value, ...]` (headers whose text holds a
/// line break). `None` when the list does not pair up.
pub fn header_list(list: &[String]) -> Option<Vec<(&str, &str)>> {
    let chunks = list.chunks_exact(2);
    if !chunks.remainder().is_empty() {
        return None;
    }
    Some(chunks.map(|pair| (pair[0].as_str(), pair[1].as_str())).collect())
}

/// `handleResponse`'s body hints: `cost` the five numbers of `BodyHints.cost` in the
/// contract's order (`requested`, `actual`, `maximumAvailable`, `currentlyAvailable`,
/// `restoreRate`), `usage` two lists (at most [`BodyHints::MAX_USAGE`] entries are read).
pub fn body(
    retry_after: Option<f64>,
    global: Option<bool>,
    cost: Option<&[Option<f64>]>,
    errors: Option<Vec<String>>,
    usage_names: Option<Vec<String>>,
    usage_values: Option<Vec<f64>>,
) -> Result<BodyHints> {
    let cost = match cost {
        None => None,
        Some(&[requested, actual, maximum_available, currently_available, restore_rate]) => {
            Some(QueryCost { requested, actual, maximum_available, currently_available, restore_rate })
        }
        Some(_) => return Err("response.body.cost: five numbers".to_string()),
    };
    let usage = usage_names.unwrap_or_default().into_iter().zip(usage_values.unwrap_or_default());
    Ok(BodyHints {
        retry_after,
        global,
        cost,
        errors: errors.unwrap_or_default(),
        usage: usage.take(BodyHints::MAX_USAGE).collect(),
    })
}

/// `'not_sent'` or `'maybe_sent'`.
pub fn failure(name: &str) -> Result<Failure> {
    Failure::from_name(name).ok_or_else(|| "failure must be 'not_sent' or 'maybe_sent'".to_string())
}

/// How a disposition reads in JS.
pub fn disposition_name(d: Disposition) -> &'static str {
    match d {
        Disposition::Complete => "complete",
        Disposition::Retry => "retry",
        Disposition::Failed => "failed",
    }
}

/// An optional count of an answer (`processes`, `leased`): a whole number >= 0 (above
/// `u32::MAX` it reads as `u32::MAX`: the core tolerates any count).
fn count(value: Option<f64>, name: &str) -> Result<Option<u32>> {
    value.map(|n| whole(n, &format!("answer.{name}")).map(|n| u32::try_from(n).unwrap_or(u32::MAX))).transpose()
}

/// `handleReservation`'s answer, a `ReservationAnswer` of the contract field by field.
pub fn answer(
    kind: &str,
    processes: Option<f64>,
    leased: Option<f64>,
    store_time_us: Option<f64>,
    retry_after_ns: Option<f64>,
    scope: Option<&str>,
) -> Result<ReservationAnswer> {
    let processes = count(processes, "processes")?;
    match kind {
        // The store's clock in microseconds (exact in a JS number, where Unix nanoseconds are not).
        "granted" => Ok(ReservationAnswer::Granted {
            processes,
            leased: count(leased, "leased")?.unwrap_or(0),
            store_time: store_time_us.map(|us| whole(us, "answer.storeTimeUs").map(|us| us.saturating_mul(1_000))).transpose()?,
        }),
        "unavailable" => Ok(ReservationAnswer::Unavailable),
        "denied" => {
            let retry = retry_after_ns.ok_or("answer.retryAfterNs (a number) is required")?;
            let retry_after = whole(retry, "answer.retryAfterNs")?;
            let scope = scope.ok_or("answer.scope (a string) is required")?;
            let scope = SharedScope::from_name(scope).ok_or_else(|| {
                format!("answer.scope must be 'edge', 'invalid', 'global', 'route', 'bucket' or 'pioneer', got {scope:?}")
            })?;
            Ok(ReservationAnswer::Denied { retry_after, scope, processes })
        }
        other => Err(format!("answer.answer must be 'granted', 'denied' or 'unavailable', got {other:?}")),
    }
}

/// `drain`'s kind for an output only [`held_json`] carries.
pub const HELD: f64 = 3.0;

/// An output as `drain`'s `(kind, value)` pair, or `None` when it is held for `held()`:
/// `send` is 0 with the id, `wait_until` 1 with the time, `idle` 2 with 0.
pub fn pack(output: &Output) -> Option<(f64, f64)> {
    match output {
        Output::Send(id) => Some((0.0, *id as f64)),
        Output::WaitUntil(at) => Some((1.0, *at as f64)),
        Output::Idle => Some((2.0, 0.0)),
        Output::Fail(..) | Output::Observe(_) | Output::Reserve(_) | Output::Share(_) => None,
    }
}

/// `drain`'s pairs written into `out`: the held output first, then the core's (`poll`), until
/// the first pair of kind 1, 2 or 3, after the first pair with `one` (`pollOutput`), or when
/// `out` has no room for another pair (the last pair written is then a `send`: drain again).
/// An output the pairs do not carry is kept in `held` and written as kind 3. Returns how many
/// numbers it wrote (0 when `out` holds fewer than two).
pub fn fill(out: &mut [f64], one: bool, held: &mut Option<Output>, mut poll: impl FnMut() -> Output) -> usize {
    let mut n = 0;
    while let Some(pair) = out.get_mut(n..n + 2) {
        let output = held.take().unwrap_or_else(&mut poll);
        let (kind, value) = pack(&output).unwrap_or_else(|| {
            *held = Some(output);
            (HELD, 0.0)
        });
        pair.copy_from_slice(&[kind, value]);
        n += 2;
        if one || kind != 0.0 {
            break;
        }
    }
    n
}

/// `drain`'s pairs as a list (see [`fill`]), ending with its first pair of kind 1, 2 or 3, or
/// after the first pair with `one`.
pub fn drain_packed(one: bool, held: &mut Option<Output>, mut poll: impl FnMut() -> Output) -> Vec<f64> {
    let mut packed = Vec::new();
    let mut chunk = [0.0; 8];
    loop {
        let n = fill(&mut chunk, one, held, &mut poll);
        packed.extend_from_slice(&chunk[..n]);
        if one || chunk[n - 2] != 0.0 {
            return packed;
        }
    }
}

/// A held output as JSON text: `{"output": <the core's serde form>, "message": <a failure's
/// Display text>}` (`js/driver.js`, `outputObject`, turns it into the contract's object).
pub fn held_json(output: &Output) -> String {
    #[derive(serde::Serialize)]
    struct Held<'a> {
        output: &'a Output,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    }
    let message = match output {
        Output::Fail(_, reason) => Some(reason.to_string()),
        _ => None,
    };
    // Serializing the core's own types into a String cannot fail (no map with non-string keys).
    serde_json::to_string(&Held { output, message }).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelane::{FailReason, Observation};

    #[test]
    fn header_lines_pair_up() {
        assert_eq!(header_lines(""), Some(vec![]));
        assert_eq!(header_lines("a\n1\nb\n"), Some(vec![("a", "1"), ("b", "")]));
        assert_eq!(header_lines("\n"), Some(vec![("", "")]));
        assert_eq!(header_lines("a\n1\nb"), None);
        // As `str::split` paired them, on every shape of line breaks.
        for text in ["x\n\n\ny", "\n\n", "a\nb\nc\nd", "é\n✓\n\n", "a\n1\nb\n2\n"] {
            let mut lines = text.split('\n');
            let mut pairs = Vec::new();
            let split = loop {
                match lines.next() {
                    None => break Some(pairs),
                    Some(name) => match lines.next() {
                        Some(value) => pairs.push((name, value)),
                        None => break None,
                    },
                }
            };
            assert_eq!(header_lines(text), split, "{text:?}");
        }
        assert_eq!(header_list(&["a\nb".into(), "1".into()]), Some(vec![("a\nb", "1")]));
        assert_eq!(header_list(&["a".into()]), None);
    }

    #[test]
    fn packed_kinds() {
        assert_eq!(pack(&Output::Send(7)), Some((0.0, 7.0)));
        assert_eq!(pack(&Output::WaitUntil(9)), Some((1.0, 9.0)));
        assert_eq!(pack(&Output::Idle), Some((2.0, 0.0)));
        assert_eq!(pack(&Output::Fail(1, FailReason::Closed)), None);
    }

    #[test]
    fn held_outputs_are_the_core_serde_form() {
        let fail = held_json(&Output::Fail(4, FailReason::Deferred { retry_at: 11 }));
        assert!(fail.starts_with(r#"{"output":{"fail":[4,{"code":"deferred","retry_at":11}]},"message":"#), "{fail}");
        let observed = held_json(&Output::Observe(Observation::StoreRecovered));
        assert_eq!(observed, r#"{"output":{"observe":{"type":"store_recovered"}}}"#);
    }

    #[test]
    fn costs_must_be_whole() {
        let parts = |amount| RequestParts {
            method: "GET".into(),
            path: "/x".into(),
            cost_names: Some(vec!["tokens".into()]),
            cost_values: Some(vec![amount]),
            ..RequestParts::default()
        };
        assert_eq!(parts(5.0).request().map(|r| r.costs), Ok(vec![("tokens".to_string(), 5)]));
        assert!(parts(1.5).request().unwrap_err().contains("request.costs.tokens must be a whole number"));
        assert!(parts(-1.0).request().is_err());
    }
}
