//! The server-side limiters' half of the native surface both JS cores export (`ServerLimit`,
//! `ServerStore`, the header renderer), on plain Rust values. `js/server_objects.js` checks the
//! JS types (a number, a string, an options object with known keys) and throws
//! `invalid_argument` itself; what is left to check here is range (a count in the u32 range, a
//! time a JS number carries exactly), and what the core refuses is its own error.
//!
//! Answers cross as numbers, one shape for both cores: a decision `[allowed, limit,
//! remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS]`, a booking
//! `[runNow, releaseAtNs, waiting]`, a release `[released]`; booleans are 0 / 1 and an absent
//! value is `NaN` (`js/server_objects.js`, `fromFields`, reads them back).

use ratelane::server::{Answer, Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Limit, Op};

use crate::{Result, whole};

/// Why a limit could not be made: a JS value out of range (`invalid_argument`), or the core's
/// refusal of the config (`invalid_config`).
#[derive(Debug)]
pub enum Refusal {
    /// The message of an `invalid_argument` error.
    Argument(String),
    /// The core's error, with its code.
    Core(ratelane::Error),
}

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal::Argument(message)
    }
}

/// A count (`burst`, `quota`, `size`, `n`...): an integer in the u32 range. Zero passes, so
/// that the core's own `invalid_config` message reports it.
pub fn count(value: f64, what: &str) -> Result<u32> {
    if value.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&value) {
        Ok(value as u32)
    } else {
        Err(format!("{what} must be an integer in 0..=4294967295, got {}", crate::shown(value)))
    }
}

/// A limit by the name of the JS factory that makes it, from its numbers in the factory's
/// order (`None`: not given):
///
/// | kind            | numbers                                        |
/// |-----------------|------------------------------------------------|
/// | `gcra`          | `intervalNs`, `burst`                          |
/// | `gcraPerWindow` | `quota`, `windowNs`                            |
/// | `leakyBucket`   | `size`, `dripRateNs`, `dripSize`, `minIntervalNs` |
/// | `legacy`        | `max`, `durationNs`, `minIntervalNs`           |
/// | `fixedWindow`   | `quota`, `windowNs`                            |
pub fn limit(kind: &str, numbers: [Option<f64>; 4]) -> std::result::Result<Limit, Refusal> {
    let [a, b, c, d] = numbers;
    let given = |value: Option<f64>, what: &str| value.ok_or_else(|| format!("{what} must be a number"));
    let count_of = |value, what| count(given(value, what)?, what);
    let ns_of = |value, what| whole(given(value, what)?, what);
    let config = match kind {
        "gcra" => Gcra::new(ns_of(a, "intervalNs")?, count_of(b, "burst")?).map(Limit::from),
        "gcraPerWindow" => Gcra::per_window(count_of(a, "quota")?, ns_of(b, "windowNs")?).map(Limit::from),
        "leakyBucket" => {
            let (size, drip_rate) = (count_of(a, "size")?, ns_of(b, "dripRateNs")?);
            let drip_size = c.map(|v| count(v, "dripSize")).transpose()?.unwrap_or(1);
            let min_interval = d.map(|v| whole(v, "minIntervalNs")).transpose()?;
            LeakyBucket::new(size, drip_rate, drip_size)
                .and_then(|bucket| min_interval.map_or(Ok(bucket), |m| bucket.with_min_interval(m)))
                .map(Limit::from)
        }
        "legacy" => LeakyBucket::from_legacy(LegacyLimit {
            max: a.map(|v| count(v, "max")).transpose()?,
            duration: b.map(|v| whole(v, "durationNs")).transpose()?,
            min_interval: c.map(|v| whole(v, "minIntervalNs")).transpose()?,
        })
        .map(Limit::from),
        "fixedWindow" => FixedWindow::new(count_of(a, "quota")?, ns_of(b, "windowNs")?).map(Limit::from),
        other => return Err(Refusal::Argument(format!("no limit {other:?}"))),
    };
    config.map_err(Refusal::Core)
}

/// The core's op named `name`, with its weight (`check_n`) or factor (`check_scaled`).
pub fn op(name: &str, arg: Option<f64>) -> Result<Op> {
    Ok(match (name, arg) {
        ("check", _) => Op::Check,
        ("check_n", Some(n)) => Op::CheckN(count(n, "n")?),
        ("check_scaled", Some(factor)) => Op::CheckScaled(factor),
        ("check_n", None) => return Err("n must be a number".to_string()),
        ("check_scaled", None) => return Err("factor must be a number".to_string()),
        ("schedule", _) => Op::Schedule,
        ("release", _) => Op::Release,
        _ => return Err(format!("no op {name:?}")),
    })
}

/// `NaN` for an absent value.
fn or_nan(value: Option<u64>) -> f64 {
    value.map_or(f64::NAN, |v| v as f64)
}

fn flag(value: bool) -> f64 {
    if value { 1.0 } else { 0.0 }
}

/// A decision as it crosses (see the module's documentation).
pub fn decision_numbers(d: &Decision) -> Vec<f64> {
    vec![
        flag(d.allowed),
        f64::from(d.limit),
        f64::from(d.remaining),
        d.reset_after as f64,
        d.clear_after as f64,
        or_nan(d.replenish_after),
        d.window as f64,
        or_nan(d.retry_after_secs()),
    ]
}

/// A store's answer as it crosses; `InsufficientCapacity` is the error each core throws as its
/// `insufficient_capacity`.
pub fn answer_numbers(answer: Answer) -> std::result::Result<Vec<f64>, InsufficientCapacity> {
    Ok(match answer {
        Answer::Decision(d) => decision_numbers(&d),
        Answer::InsufficientCapacity(e) => return Err(e),
        Answer::Scheduled(s) => vec![flag(s.run_now), s.release_at as f64, s.waiting as f64],
        Answer::Released(released) => vec![flag(released)],
    })
}

/// A decision's headers, from its first seven numbers as they cross (`allowed` 0 or 1,
/// `replenishAfterNs` `NaN` when absent): `X-RateLimit-*` without a policy, the IETF ones
/// for `policy`; as one string, name and value on alternate lines (the core's names and values
/// never hold a line break).
pub fn headers(policy: Option<&str>, fields: &[f64]) -> Result<String> {
    let &[allowed, limit, remaining, reset_after, clear_after, replenish_after, window] = fields else {
        return Err("a decision is seven numbers".to_string());
    };
    let decision = Decision {
        allowed: allowed != 0.0,
        limit: count(limit, "decision.limit")?,
        remaining: count(remaining, "decision.remaining")?,
        reset_after: whole(reset_after, "decision.resetAfterNs")?,
        clear_after: whole(clear_after, "decision.clearAfterNs")?,
        replenish_after: (!replenish_after.is_nan())
            .then(|| whole(replenish_after, "decision.replenishAfterNs"))
            .transpose()?,
        window: whole(window, "decision.windowNs")?,
    };
    let pairs = match policy {
        None => decision.x_ratelimit_headers(),
        Some(policy) => decision.ietf_headers(policy),
    };
    let mut out = String::with_capacity(96);
    for (name, value) in pairs {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(name);
        out.push('\n');
        out.push_str(&value);
    }
    Ok(out)
}

/// `nowNs` given to a Redis script as decimal text (the JS module passes a `BigInt` so): at
/// most 20 digits, within u64.
pub fn now_text(text: &str) -> Result<u64> {
    if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = text.parse::<u64>()
    {
        return Ok(n);
    }
    Err(format!("nowNs must be an integer in 0..2^64, got {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_by_name() {
        let gcra = limit("gcra", [Some(1e9), Some(3.0), None, None]).unwrap();
        assert_eq!(gcra.script(), "gcra");
        assert!(matches!(limit("gcra", [Some(1e9), Some(2.5), None, None]), Err(Refusal::Argument(m)) if m.starts_with("burst must be an integer")));
        assert!(matches!(limit("gcra", [Some(0.0), Some(2.0), None, None]), Err(Refusal::Core(e)) if e.code() == "invalid_config"));
        assert!(matches!(limit("legacy", [Some(5.0), None, None, None]), Err(Refusal::Core(_))));
        let bucket = limit("leakyBucket", [Some(3.0), Some(1e9), Some(2.0), Some(5.0)]).unwrap();
        assert_eq!(bucket.script(), "leaky_bucket");
        assert!(matches!(limit("nope", [None; 4]), Err(Refusal::Argument(_))));
    }

    #[test]
    fn ops_and_answers() {
        assert_eq!(op("check_n", Some(2.0)), Ok(Op::CheckN(2)));
        assert!(op("check_n", Some(-1.0)).is_err());
        assert!(op("check_scaled", None).unwrap_err().contains("factor"));
        assert!(op("delete", None).is_err());
        assert_eq!(answer_numbers(Answer::Released(true)), Ok(vec![1.0]));
        assert_eq!(now_text("18446744073709551615"), Ok(u64::MAX));
        assert!(now_text("18446744073709551616").is_err());
        assert!(now_text("-1").is_err());
    }

    #[test]
    fn headers_from_numbers() {
        let blocked = [0.0, 1.0, 0.0, 10e9, 10e9, f64::NAN, 10e9];
        assert_eq!(
            headers(None, &blocked).unwrap(),
            "X-RateLimit-Remaining\n0\nX-RateLimit-Clear\n10\nX-RateLimit-Reset\n10\nRetry-After\n10"
        );
        assert!(headers(Some("p"), &blocked).unwrap().starts_with("RateLimit-Policy\n\"p\";q=1;w=10\n"));
        assert!(headers(None, &[0.0, 1.5, 0.0, 0.0, 0.0, f64::NAN, 0.0]).unwrap_err().starts_with("decision.limit"));
        assert!(headers(None, &[0.0; 3]).is_err());
    }
}
