//! What a limiter has learned, exported and imported: [`Snapshot`].
//!
//! A bot that restarts forgets which routes share a bucket, that Discord paused it, and how
//! much of the invalid-request budget it spent; its first requests then probe buckets one
//! route at a time, meet 429s its predecessor already met, or walk into a Cloudflare ban.
//! [`Limiter::snapshot`](crate::Limiter::snapshot) exports that knowledge and
//! [`Limiter::restore`](crate::Limiter::restore) imports it into a new limiter:
//!
//! ```
//! use ratelane::{Config, Limiter};
//! use ratelane::snapshot::Snapshot;
//!
//! # fn main() -> Result<(), ratelane::Error> {
//! let old = Limiter::new(Config::default())?;
//! // ... the bot runs; at shutdown (or every few minutes):
//! let text = old.snapshot(5_000_000_000, 1_700_000_005_000).to_json();
//! // ... store `text`; after the restart:
//! let mut new = Limiter::new(Config::default())?;
//! new.restore(0, 1_700_000_060_000, &Snapshot::from_json(&text)?)?;
//! # Ok(()) }
//! ```
//!
//! # What is kept
//!
//! * `routes`: route key -> bucket id, oldest learned first (the restoring limiter keeps the
//!   newest `max_routes`). Routes that share a bucket share one queue and one pioneer from
//!   the first request after the restart.
//! * `windows`: bucket id -> the longest window length learned for it.
//! * `global_pauses`: per identity, the end of a global 429's pause.
//! * `host_pause`: the end of a host-wide hold (a 429 with no rate-limit headers: Cloudflare)
//!   and how many such 429s came in a row (the next hold doubles from there).
//! * `invalid_requests_ms`: when the invalid responses (401, 403, non-shared 429) still in the
//!   invalid-request window came back.
//! * `margins` (version 2): per cost dimension, the recent ratios of actual to estimated cost
//!   (at most 64, oldest first) and how many settled all told: a restarted worker charges its
//!   estimates at the margin it had learned, not at the prior's doubled one.
//! * `budgets` (version 2): per queue (identity, bucket or route, major parameter) and cost
//!   dimension, the limit, the refill period once learned (`period_ns`, continuous budgets),
//!   and what was left at the snapshot less what was in flight (`left`, continuous budgets):
//!   restored, it is what was left plus what refilled since, capped at the limit. A window's
//!   count is not kept (stale within the window; the first answer tells).
//!
//! Not kept: queued and in-flight requests (they belong to the process that made them),
//! per-bucket request counts (stale within a window; a bucket's first request after a restart
//! is a single pioneer), latency statistics, a route's old bucket id after a rename (it only
//! redirects requests to a queue of the old bucket, which a new process does not have), and a
//! token found unauthorized (a restart is how a token gets replaced).
//!
//! # Time
//!
//! Monotonic clocks do not survive a restart, so every instant is converted to wall-clock
//! milliseconds since the Unix epoch with the `wall_clock_ms` given to
//! [`Limiter::snapshot`](crate::Limiter::snapshot) (`taken_at_ms`), and back with the one given
//! to [`Limiter::restore`](crate::Limiter::restore). Pauses are rounded up to the millisecond
//! and invalid responses made no older than they are, so a round trip never shortens a hold.
//! Pauses already over at restore time are dropped, as are invalid responses older than the
//! window. A wall clock that went back between the two (a restore "before" `taken_at_ms`) is
//! read as `taken_at_ms`: no time passed. A pause or a window length longer than the restoring
//! limiter's [`Config::max_server_wait`](crate::Config::max_server_wait) is clamped to it, as
//! every wait from outside the engine is ([`Config::bound_wait`](crate::Config::bound_wait)):
//! a document written by a clock years ahead, or corrupted, holds a limiter for an hour (the
//! default) at most.
//!
//! # Format
//!
//! A JSON object (feature `json`: [`Snapshot::to_json`], [`Snapshot::from_json`]; the bindings
//! pass this text):
//!
//! ```json
//! {
//!   "format": "ratelane.snapshot",
//!   "version": 2,
//!   "taken_at_ms": 1700000005000,
//!   "profile": "discord",
//!   "routes": [{"route": "PUT /channels/:id/messages/:id/reactions/:reaction", "bucket": "b0a2"}],
//!   "windows": [{"bucket": "b0a2", "window_ns": 250000000}],
//!   "global_pauses": [{"identity": "", "until_ms": 1700000012000}],
//!   "host_pause": null,
//!   "invalid_requests_ms": [1700000004000],
//!   "margins": [{"dimension": "tokens", "recent": [1.0, 1.25], "samples": 40}],
//!   "budgets": [{"identity": "", "bucket": "POST /v1/chat/completions", "learned": false,
//!                "major": "gpt-4o", "dimension": "tokens", "limit": 30000,
//!                "period_ns": 60000000000, "left": 1200}]
//! }
//! ```
//!
//! `format` names the document; `version` is [`SNAPSHOT_VERSION`], raised whenever a field
//! changes meaning or a new one appears. Version 1 documents (without `margins` and
//! `budgets`) are still read. A reader refuses a document with another `format`
//! ([`Error::SnapshotForeign`], also for a snapshot of another header profile), a newer
//! `version` ([`Error::SnapshotVersion`]) or malformed content ([`Error::SnapshotMalformed`]:
//! unknown or missing keys, wrong types, values out of range).

use crate::error::Error;
use crate::types::HeaderProfile;

/// The value of every snapshot's `format` key.
pub const SNAPSHOT_FORMAT: &str = "ratelane.snapshot";

/// The format version this build writes, and the newest it reads (2: `margins` and
/// `budgets`).
pub const SNAPSHOT_VERSION: u32 = 2;

/// The most entries a list of a snapshot may hold.
const MAX_ENTRIES: usize = 1_000_000;

/// What a limiter has learned (see the [module](self) documentation). Made by
/// [`Limiter::snapshot`](crate::Limiter::snapshot) or [`Snapshot::from_json`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct Snapshot {
    /// Always [`SNAPSHOT_FORMAT`].
    pub format: String,
    /// The format version ([`SNAPSHOT_VERSION`] when written by this build).
    pub version: u32,
    /// The wall clock when it was taken, in ms since the Unix epoch.
    pub taken_at_ms: u64,
    /// The header profile of the limiter it was taken from (route keys depend on it).
    pub profile: HeaderProfile,
    /// Route -> bucket id, oldest learned first.
    pub routes: Vec<LearnedRoute>,
    /// Bucket id -> the longest window length learned, sorted by bucket id.
    pub windows: Vec<LearnedWindow>,
    /// Global pauses still running when it was taken, sorted by identity.
    pub global_pauses: Vec<GlobalPause>,
    /// The host-wide hold, if one was running.
    pub host_pause: Option<HostPause>,
    /// Wall-clock times (ms) of the invalid responses within the invalid-request window,
    /// oldest first.
    pub invalid_requests_ms: Vec<u64>,
    /// The learned cost margins, sorted by dimension (version 2; empty in version 1).
    #[cfg_attr(feature = "serde", serde(default))]
    pub margins: Vec<LearnedMargin>,
    /// The cost budgets per queue and dimension (version 2; empty in version 1).
    #[cfg_attr(feature = "serde", serde(default))]
    pub budgets: Vec<LearnedBudget>,
}

/// A cost dimension's recent ratios of actual to estimated cost, from which the margin its
/// estimates are charged at is drawn.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct LearnedMargin {
    /// The dimension (`tokens`, `points`...).
    pub dimension: String,
    /// The recent ratios, oldest first (at most 64 are used), each finite and >= 0.
    pub recent: Vec<f64>,
    /// How many ratios settled all told (the prior falls with them).
    pub samples: u32,
}

/// A queue's cost budget in one dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct LearnedBudget {
    /// The identity (token key) of its queue.
    pub identity: String,
    /// Its queue's bucket id, or route key when no bucket was learned.
    pub bucket: String,
    /// Whether `bucket` is a learned bucket id (else a route key).
    pub learned: bool,
    /// Its queue's major parameter (the model, under the LLM profiles).
    pub major: String,
    /// The dimension (`tokens`, `requests`, `points`...).
    pub dimension: String,
    /// Its limit, as last reported.
    pub limit: Option<u64>,
    /// The refill period, once learned: the budget refills continuously.
    pub period_ns: Option<u64>,
    /// What was left at the snapshot, less what was in flight (a continuous budget's).
    pub left: Option<u64>,
}

/// A route and the bucket the server named for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct LearnedRoute {
    /// `METHOD /template`.
    pub route: String,
    /// The bucket id.
    pub bucket: String,
}

/// A bucket's window length.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct LearnedWindow {
    /// The bucket id.
    pub bucket: String,
    /// The longest window length learned for it, in nanoseconds.
    pub window_ns: u64,
}

/// An identity's global pause.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct GlobalPause {
    /// The identity (token key) it applies to.
    pub identity: String,
    /// When it ends, wall clock in ms since the Unix epoch.
    pub until_ms: u64,
}

/// The host-wide hold after header-less 429s.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct HostPause {
    /// When it ends, wall clock in ms since the Unix epoch.
    pub until_ms: u64,
    /// Such 429s in a row so far.
    pub strikes: u32,
}

impl Snapshot {
    /// An empty snapshot of this build's format.
    pub(crate) fn empty(profile: HeaderProfile, taken_at_ms: u64) -> Self {
        Snapshot {
            format: SNAPSHOT_FORMAT.to_string(),
            version: SNAPSHOT_VERSION,
            taken_at_ms,
            profile,
            routes: Vec::new(),
            windows: Vec::new(),
            global_pauses: Vec::new(),
            host_pause: None,
            invalid_requests_ms: Vec::new(),
            margins: Vec::new(),
            budgets: Vec::new(),
        }
    }

    /// Checks the format, the version and every value; [`Limiter::restore`](crate::Limiter::restore)
    /// calls this.
    ///
    /// # Errors
    /// [`Error::SnapshotForeign`], [`Error::SnapshotVersion`] or [`Error::SnapshotMalformed`].
    pub fn validate(&self) -> Result<(), Error> {
        check_header(&self.format, u64::from(self.version))?;
        let bad = |m: String| Err(Error::SnapshotMalformed(m));
        let lists = [
            ("routes", self.routes.len()),
            ("windows", self.windows.len()),
            ("global_pauses", self.global_pauses.len()),
            ("invalid_requests_ms", self.invalid_requests_ms.len()),
            ("margins", self.margins.len()),
            ("budgets", self.budgets.len()),
        ];
        for (name, len) in lists {
            if len > MAX_ENTRIES {
                return bad(format!("{name} holds {len} entries, more than {MAX_ENTRIES}"));
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            let shaped = r.route.len() <= 8192 + 33
                && r.route.split_once(' ').is_some_and(|(m, p)| !m.is_empty() && p.starts_with('/'));
            if !shaped {
                return bad(format!("routes[{i}].route {:?} is not \"METHOD /template\"", r.route));
            }
            if r.bucket.is_empty() || r.bucket.len() > 1024 {
                return bad(format!("routes[{i}].bucket must be 1 to 1024 bytes"));
            }
        }
        for (i, w) in self.windows.iter().enumerate() {
            if w.bucket.is_empty() || w.bucket.len() > 1024 {
                return bad(format!("windows[{i}].bucket must be 1 to 1024 bytes"));
            }
            if w.window_ns == 0 {
                return bad(format!("windows[{i}].window_ns must be > 0"));
            }
        }
        for (i, p) in self.global_pauses.iter().enumerate() {
            if p.identity.len() > 1024 {
                return bad(format!("global_pauses[{i}].identity is longer than 1024 bytes"));
            }
        }
        let dimension = |d: &str| crate::headers::valid_cost_name(d) || d == "requests";
        for (i, m) in self.margins.iter().enumerate() {
            if !dimension(&m.dimension) {
                return bad(format!("margins[{i}].dimension {:?} is not a cost dimension's name", m.dimension));
            }
            if m.recent.len() > 1024 || m.recent.iter().any(|r| !r.is_finite() || *r < 0.0) {
                return bad(format!("margins[{i}].recent must hold at most 1024 finite numbers >= 0"));
            }
        }
        for (i, b) in self.budgets.iter().enumerate() {
            if !dimension(&b.dimension) {
                return bad(format!("budgets[{i}].dimension {:?} is not a cost dimension's name", b.dimension));
            }
            if b.identity.len() > 1024 || b.bucket.is_empty() || b.bucket.len() > 8192 + 33 || b.major.len() > 8192 {
                return bad(format!("budgets[{i}]: identity, bucket or major out of range"));
            }
            if b.period_ns == Some(0) || b.limit == Some(0) {
                return bad(format!("budgets[{i}]: limit and period_ns must be > 0"));
            }
        }
        let mut previous = 0;
        for (i, &t) in self.invalid_requests_ms.iter().enumerate() {
            if t < previous || t > self.taken_at_ms {
                return bad(format!(
                    "invalid_requests_ms[{i}] must be in order and not after taken_at_ms"
                ));
            }
            previous = t;
        }
        Ok(())
    }
}

/// The `format` and `version` checks, in that order: a document of another format is foreign
/// whatever its version.
fn check_header(format: &str, version: u64) -> Result<(), Error> {
    if format != SNAPSHOT_FORMAT {
        return Err(Error::SnapshotForeign(format!(
            "its format is {format:?}, not {SNAPSHOT_FORMAT:?}"
        )));
    }
    if version == 0 {
        return Err(Error::SnapshotMalformed("version must be >= 1".to_string()));
    }
    if version > u64::from(SNAPSHOT_VERSION) {
        return Err(Error::SnapshotVersion { found: version, supported: SNAPSHOT_VERSION });
    }
    Ok(())
}

#[cfg(feature = "json")]
impl Snapshot {
    /// The snapshot as JSON text (the form shown in the [module](self) documentation).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot always serializes")
    }

    /// Reads a snapshot from JSON text and [validates](Snapshot::validate) it.
    ///
    /// # Errors
    /// [`Error::SnapshotForeign`] for text that is not JSON, not an object, or an object whose
    /// `format` is missing or not [`SNAPSHOT_FORMAT`]; [`Error::SnapshotVersion`] for a newer
    /// `version`; [`Error::SnapshotMalformed`] for a missing or non-integer `version`, unknown
    /// or missing keys, wrong types and values out of range (the message names the key).
    pub fn from_json(text: &str) -> Result<Snapshot, Error> {
        use serde_json::Value;
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::SnapshotForeign(format!("not JSON ({e})")))?;
        let Value::Object(map) = &value else {
            return Err(Error::SnapshotForeign("expected a JSON object".to_string()));
        };
        let format = match map.get("format") {
            Some(Value::String(f)) => f.as_str(),
            Some(_) => return Err(Error::SnapshotForeign("its format is not a string".to_string())),
            None => return Err(Error::SnapshotForeign("it has no format key".to_string())),
        };
        let version = match map.get("version") {
            Some(v) => v.as_u64().ok_or_else(|| {
                Error::SnapshotMalformed(format!("version must be a positive integer, got {v}"))
            })?,
            None if format == SNAPSHOT_FORMAT => {
                return Err(Error::SnapshotMalformed("missing key \"version\"".to_string()));
            }
            None => 0,
        };
        check_header(format, version)?;
        let snapshot: Snapshot =
            serde_json::from_value(value).map_err(|e| Error::SnapshotMalformed(e.to_string()))?;
        snapshot.validate()?;
        Ok(snapshot)
    }
}

#[cfg(all(test, feature = "json"))]
mod tests {
    use super::*;

    fn doc() -> serde_json::Value {
        serde_json::json!({
            "format": "ratelane.snapshot",
            "version": 1,
            "taken_at_ms": 1_700_000_005_000u64,
            "profile": "discord",
            "routes": [{"route": "PUT /channels/:id/messages/:id/reactions/:reaction", "bucket": "b0a2"}],
            "windows": [{"bucket": "b0a2", "window_ns": 250_000_000}],
            "global_pauses": [{"identity": "", "until_ms": 1_700_000_012_000u64}],
            "host_pause": {"until_ms": 1_700_000_020_000u64, "strikes": 2},
            "invalid_requests_ms": [1_700_000_004_000u64]
        })
    }

    fn code(text: &str) -> &'static str {
        Snapshot::from_json(text).unwrap_err().code()
    }

    #[test]
    fn the_documented_form_round_trips() {
        let mut d = doc();
        d["version"] = 2.into();
        d["margins"] = serde_json::json!([{"dimension": "tokens", "recent": [1.0, 1.25], "samples": 40}]);
        d["budgets"] = serde_json::json!([{"identity": "", "bucket": "POST /v1/chat/completions", "learned": false,
            "major": "gpt-4o", "dimension": "tokens", "limit": 30000, "period_ns": 60_000_000_000u64, "left": 1200}]);
        let s = Snapshot::from_json(&d.to_string()).unwrap();
        assert_eq!(s.routes[0].bucket, "b0a2");
        assert_eq!(s.host_pause, Some(HostPause { until_ms: 1_700_000_020_000, strikes: 2 }));
        assert_eq!(s.margins[0].recent, vec![1.0, 1.25]);
        let back: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(back, d);
        // A version 1 document (no margins, no budgets) is still read.
        let old = Snapshot::from_json(&doc().to_string()).unwrap();
        assert!(old.margins.is_empty() && old.budgets.is_empty());
    }

    #[test]
    fn foreign_documents() {
        assert_eq!(code("not json"), "snapshot_foreign");
        assert_eq!(code("[1, 2]"), "snapshot_foreign");
        assert_eq!(code(r#"{"routes": []}"#), "snapshot_foreign");
        assert_eq!(code(r#"{"format": "other.snapshot", "version": 1}"#), "snapshot_foreign");
        assert_eq!(code(r#"{"format": 7, "version": 1}"#), "snapshot_foreign");
        // Another format is foreign whatever its version says.
        assert_eq!(code(r#"{"format": "other", "version": 99}"#), "snapshot_foreign");
    }

    #[test]
    fn newer_versions() {
        let mut d = doc();
        d["version"] = 3.into();
        d["something_new"] = true.into();
        let e = Snapshot::from_json(&d.to_string()).unwrap_err();
        assert_eq!(e, Error::SnapshotVersion { found: 3, supported: 2 });
        assert!(e.to_string().contains("newer"), "{e}");
    }

    #[test]
    fn malformed_content() {
        use serde_json::json;
        // (JSON pointer, new value) pairs; `null` at a top-level key removes it.
        let cases = [
            ("/version", json!(0)),
            ("/version", json!("1")),
            ("/version", json!(-1)),
            ("/version", json!(null)),
            ("/routes", json!(null)),
            ("/unknown", json!(1)),
            ("/profile", json!("klingon")),
            ("/routes/0/route", json!("nonsense")),
            ("/routes/0/bucket", json!("")),
            ("/windows/0/window_ns", json!(0)),
            ("/windows/0/window_ns", json!(-5)),
            ("/global_pauses/0/until_ms", json!("soon")),
            ("/invalid_requests_ms", json!([1_800_000_000_000u64])),
            ("/invalid_requests_ms", json!([5, 4])),
            ("/host_pause", json!({"until_ms": 1})),
            ("/margins", json!([{"dimension": "Tokens", "recent": [], "samples": 0}])),
            ("/margins", json!([{"dimension": "tokens", "recent": [-1.0], "samples": 1}])),
            ("/budgets", json!([{"identity": "", "bucket": "", "learned": false, "major": "", "dimension": "tokens",
                "limit": null, "period_ns": null, "left": null}])),
            ("/budgets", json!([{"identity": "", "bucket": "POST /x", "learned": false, "major": "", "dimension": "tokens",
                "limit": 10, "period_ns": 0, "left": null}])),
        ];
        for (pointer, value) in cases {
            let mut d = doc();
            let key = &pointer[1..];
            if value.is_null() && !key.contains('/') {
                d.as_object_mut().unwrap().remove(key);
            } else if let Some(slot) = d.pointer_mut(pointer) {
                *slot = value;
            } else {
                d[key] = value;
            }
            assert_eq!(code(&d.to_string()), "snapshot_malformed", "{pointer}: {d}");
        }
    }
}
