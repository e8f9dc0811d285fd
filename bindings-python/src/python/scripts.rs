//! The server-side limiters' Redis scripts (`redis/scripts/gcra.lua`, `leaky_bucket.lua`,
//! `fixed_window.lua`) for `ratelane.redis`: each class holds the core's validated
//! configuration and builds one script call's `ARGV`; the `script_*` functions read the
//! scripts' replies back into the core's `Decision` / `Scheduled`, so the headers are rendered
//! by the core. The I/O (`EVALSHA`, `EVAL` on `NOSCRIPT`) is the Python module's.
//!
//! The layouts are the contract in `redis/README.md`, the same that `ratelane-redis`
//! (`redis/src/reply.rs`) reads; any other shape is `RedisBadReplyError`, never a panic.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use ratelane::Error;
use ratelane::server::{
    Decision as CoreDecision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit,
    Scheduled as CoreScheduled,
};

use super::{PyDecision, PyScheduled, arg_ns, arg_opt_ns, core_error, exception, invalid_argument, repr};

/// The texts of the scripts, embedded at build time. `bindings-python/<name>.lua` are symlinks
/// to the one source in `redis/scripts/` (as `shared_store.lua`): cargo and maturin's sdist
/// copy the files themselves, so an sdist is self-contained.
pub(super) const GCRA_LUA: &str = include_str!("../../gcra.lua");
pub(super) const LEAKY_BUCKET_LUA: &str = include_str!("../../leaky_bucket.lua");
pub(super) const FIXED_WINDOW_LUA: &str = include_str!("../../fixed_window.lua");

/// The longest window the scripts evaluate exactly, 2^52 ns (`ratelane_redis::MAX_WINDOW`):
/// Lua numbers are doubles and the scripts add up to two windows.
const MAX_WINDOW: u64 = 1 << 52;

/// `ratelane_redis`'s check of a configured window, with its message.
fn require_window(py: Python<'_>, what: &str, window: u64) -> PyResult<()> {
    if window <= MAX_WINDOW {
        return Ok(());
    }
    Err(core_error(
        py,
        Error::InvalidConfig(format!(
            "{what} ({window} ns) is longer than the Redis scripts evaluate exactly ({MAX_WINDOW} ns)"
        )),
    ))
}

/// `InsufficientCapacityError` with the core's message, `requested` and `capacity`.
pub(super) fn insufficient(py: Python<'_>, e: InsufficientCapacity) -> PyErr {
    let kwargs = PyDict::new(py);
    if let Err(err) = kwargs.set_item("requested", e.requested).and_then(|()| kwargs.set_item("capacity", e.capacity)) {
        return err;
    }
    exception(py, "InsufficientCapacityError", e.to_string(), Some(&kwargs))
}

/// `now_ns` as a script argument: empty for Redis's own clock.
fn now_arg(now_ns: Option<u64>) -> String {
    now_ns.map(|n| n.to_string()).unwrap_or_default()
}

/// `min_ttl_ms`, clamped to [`MAX_WINDOW`] as `ratelane_redis`'s `with_min_ttl_ms` does.
fn min_ttl_arg(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    obj.extract::<u64>().map(|ms| ms.min(MAX_WINDOW)).map_err(|_| {
        invalid_argument(obj.py(), format!("min_ttl_ms must be an int >= 0, got {}", repr(obj)))
    })
}

// ------------------------------------------------------------------------------ GCRA

/// `redis/scripts/gcra.lua` for one `Gcra` limit (`ratelane.redis.RedisGcra`).
#[pyclass(module = "ratelane._core", name = "GcraScript", frozen)]
#[derive(Debug)]
pub struct GcraScript {
    gcra: Gcra,
}

impl GcraScript {
    fn checked(py: Python<'_>, gcra: Result<Gcra, Error>) -> PyResult<Self> {
        let gcra = gcra.map_err(|e| core_error(py, e))?;
        require_window(py, "burst × interval", gcra.window())?;
        Ok(GcraScript { gcra })
    }
}

#[pymethods]
impl GcraScript {
    #[new]
    fn new(py: Python<'_>, #[pyo3(from_py_with = arg_ns)] interval_ns: u64, burst: u32) -> PyResult<Self> {
        Self::checked(py, Gcra::new(interval_ns, burst))
    }

    /// `quota` requests per `window_ns`, all allowed back to back.
    #[staticmethod]
    fn per_window(py: Python<'_>, quota: u32, #[pyo3(from_py_with = arg_ns)] window_ns: u64) -> PyResult<Self> {
        Self::checked(py, Gcra::per_window(quota, window_ns))
    }

    #[getter]
    fn interval_ns(&self) -> u64 {
        self.gcra.interval()
    }
    #[getter]
    fn burst(&self) -> u32 {
        self.gcra.burst()
    }
    #[getter]
    fn window_ns(&self) -> u64 {
        self.gcra.window()
    }

    /// `ARGV` for a request of weight `n` (`0` peeks). Raises `InsufficientCapacityError` when
    /// `n` exceeds the burst: the request can never be admitted, nothing needs sending.
    #[pyo3(signature = (n, now_ns = None, min_ttl_ms = 0))]
    fn argv(
        &self,
        py: Python<'_>,
        n: u32,
        #[pyo3(from_py_with = arg_opt_ns)] now_ns: Option<u64>,
        #[pyo3(from_py_with = min_ttl_arg)] min_ttl_ms: u64,
    ) -> PyResult<Vec<String>> {
        let burst = self.gcra.burst();
        if n > burst {
            return Err(insufficient(py, InsufficientCapacity { requested: n, capacity: burst }));
        }
        Ok(vec![
            self.gcra.interval().to_string(),
            burst.to_string(),
            n.to_string(),
            now_arg(now_ns),
            min_ttl_ms.to_string(),
        ])
    }

    fn __repr__(&self) -> String {
        format!("GcraScript(interval_ns={}, burst={})", self.gcra.interval(), self.gcra.burst())
    }
}

// ------------------------------------------------------------------------------ leaky bucket

/// `redis/scripts/leaky_bucket.lua` for one `LeakyBucket` (`ratelane.redis.RedisLeakyBucket`).
#[pyclass(module = "ratelane._core", name = "LeakyBucketScript", frozen)]
#[derive(Debug)]
pub struct LeakyBucketScript {
    bucket: LeakyBucket,
}

impl LeakyBucketScript {
    fn checked(py: Python<'_>, bucket: Result<LeakyBucket, Error>) -> PyResult<Self> {
        let bucket = bucket.map_err(|e| core_error(py, e))?;
        require_window(py, "the time a full bucket takes to drain", bucket.window())?;
        if let Some(min_interval) = bucket.min_interval() {
            require_window(py, "min_interval", min_interval)?;
        }
        Ok(LeakyBucketScript { bucket })
    }
}

#[pymethods]
impl LeakyBucketScript {
    #[new]
    #[pyo3(signature = (size, drip_rate_ns, drip_size = 1, *, min_interval_ns = None))]
    fn new(
        py: Python<'_>,
        size: u32,
        #[pyo3(from_py_with = arg_ns)] drip_rate_ns: u64,
        drip_size: u32,
        #[pyo3(from_py_with = arg_opt_ns)] min_interval_ns: Option<u64>,
    ) -> PyResult<Self> {
        let bucket = LeakyBucket::new(size, drip_rate_ns, drip_size).and_then(|b| match min_interval_ns {
            Some(m) => b.with_min_interval(m),
            None => Ok(b),
        });
        Self::checked(py, bucket)
    }

    /// From a legacy `{max, duration, min_interval}` limit (Misskey/Sharkey), translated by
    /// the core.
    #[staticmethod]
    #[pyo3(signature = (*, max = None, duration_ns = None, min_interval_ns = None))]
    fn from_legacy(
        py: Python<'_>,
        max: Option<u32>,
        #[pyo3(from_py_with = arg_opt_ns)] duration_ns: Option<u64>,
        #[pyo3(from_py_with = arg_opt_ns)] min_interval_ns: Option<u64>,
    ) -> PyResult<Self> {
        let limit = LegacyLimit { max, duration: duration_ns, min_interval: min_interval_ns };
        Self::checked(py, LeakyBucket::from_legacy(limit))
    }

    #[getter]
    fn size(&self) -> u32 {
        self.bucket.size()
    }
    #[getter]
    fn drip_rate_ns(&self) -> u64 {
        self.bucket.drip_rate()
    }
    #[getter]
    fn drip_size(&self) -> u32 {
        self.bucket.drip_size()
    }
    #[getter]
    fn min_interval_ns(&self) -> Option<u64> {
        self.bucket.min_interval()
    }
    #[getter]
    fn window_ns(&self) -> u64 {
        self.bucket.window()
    }

    /// `ARGV` for one check; with `factor` (in (0, 1]) the bucket is scaled by the core for
    /// this subject (`InvalidConfigError` otherwise, nothing sent).
    #[pyo3(signature = (factor = None, now_ns = None, min_ttl_ms = 0))]
    fn argv(
        &self,
        py: Python<'_>,
        factor: Option<f64>,
        #[pyo3(from_py_with = arg_opt_ns)] now_ns: Option<u64>,
        #[pyo3(from_py_with = min_ttl_arg)] min_ttl_ms: u64,
    ) -> PyResult<Vec<String>> {
        let bucket = match factor {
            None => self.bucket,
            Some(f) => self.bucket.scaled(f).map_err(|e| core_error(py, e))?,
        };
        Ok(vec![
            bucket.size().to_string(),
            bucket.drip_rate().to_string(),
            bucket.drip_size().to_string(),
            bucket.min_interval().unwrap_or(0).to_string(),
            now_arg(now_ns),
            min_ttl_ms.to_string(),
        ])
    }

    fn __repr__(&self) -> String {
        format!(
            "LeakyBucketScript(size={}, drip_rate_ns={}, drip_size={}, min_interval_ns={})",
            self.bucket.size(),
            self.bucket.drip_rate(),
            self.bucket.drip_size(),
            self.bucket.min_interval().map_or_else(|| "None".to_string(), |m| m.to_string())
        )
    }
}

// ------------------------------------------------------------------------------ fixed window

/// `redis/scripts/fixed_window.lua` for one `FixedWindow` (`ratelane.redis.RedisFixedWindow`).
#[pyclass(module = "ratelane._core", name = "FixedWindowScript", frozen)]
#[derive(Debug)]
pub struct FixedWindowScript {
    window: FixedWindow,
}

#[pymethods]
impl FixedWindowScript {
    #[new]
    fn new(py: Python<'_>, quota: u32, #[pyo3(from_py_with = arg_ns)] window_ns: u64) -> PyResult<Self> {
        let window = FixedWindow::new(quota, window_ns).map_err(|e| core_error(py, e))?;
        require_window(py, "window", window.window())?;
        Ok(FixedWindowScript { window })
    }

    #[getter]
    fn quota(&self) -> u32 {
        self.window.quota()
    }
    #[getter]
    fn window_ns(&self) -> u64 {
        self.window.window()
    }

    /// `ARGV` for `op`: `"check"`, `"schedule"` or `"release"`.
    #[pyo3(signature = (op, now_ns = None, min_ttl_ms = 0))]
    fn argv(
        &self,
        py: Python<'_>,
        op: &str,
        #[pyo3(from_py_with = arg_opt_ns)] now_ns: Option<u64>,
        #[pyo3(from_py_with = min_ttl_arg)] min_ttl_ms: u64,
    ) -> PyResult<Vec<String>> {
        if !matches!(op, "check" | "schedule" | "release") {
            return Err(invalid_argument(py, format!("op must be 'check', 'schedule' or 'release', got {op:?}")));
        }
        Ok(vec![
            op.to_string(),
            self.window.quota().to_string(),
            self.window.window().to_string(),
            now_arg(now_ns),
            min_ttl_ms.to_string(),
        ])
    }

    fn __repr__(&self) -> String {
        format!("FixedWindowScript(quota={}, window_ns={})", self.window.quota(), self.window.window())
    }
}

// ------------------------------------------------------------------------------ replies

/// What a script answered (as `ratelane_redis`'s `reply::Reply`).
enum Reply {
    Decision(CoreDecision),
    InsufficientCapacity(InsufficientCapacity),
    Scheduled(CoreScheduled, u64),
    Released(bool),
}

fn bad(py: Python<'_>, message: String) -> PyErr {
    exception(py, "RedisBadReplyError", message, None)
}

/// A string field as redis-py gives it: `bytes`, or `str` with `decode_responses=True`.
fn text(obj: &Bound<'_, PyAny>) -> Option<String> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes()).ok().map(str::to_owned);
    }
    obj.cast::<PyString>().ok().and_then(|s| s.to_cow().ok().map(|c| c.into_owned()))
}

/// A reply's fields after the tag, read one at a time.
struct Fields<'a, 'py> {
    py: Python<'py>,
    tag: &'a str,
    items: std::slice::Iter<'a, Bound<'py, PyAny>>,
}

impl<'py> Fields<'_, 'py> {
    fn next(&mut self, name: &str) -> PyResult<&Bound<'py, PyAny>> {
        match self.items.next() {
            Some(item) => Ok(item),
            None => Err(bad(self.py, format!("{}: {name} missing", self.tag))),
        }
    }

    fn int(&mut self, name: &str) -> PyResult<i64> {
        let (py, tag) = (self.py, self.tag);
        let item = self.next(name)?;
        // A Lua integer is a Redis integer; bool (an int subclass) is not one.
        if item.is_instance_of::<PyInt>()
            && !item.is_instance_of::<PyBool>()
            && let Ok(n) = item.extract::<i64>()
        {
            return Ok(n);
        }
        Err(bad(py, format!("{tag}: {name} is not an integer: {}", repr(item))))
    }

    fn flag(&mut self, name: &str) -> PyResult<bool> {
        match self.int(name)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(bad(self.py, format!("{}: {name} is {n}, not 0 or 1", self.tag))),
        }
    }

    fn u32(&mut self, name: &str) -> PyResult<u32> {
        let n = self.int(name)?;
        u32::try_from(n).map_err(|_| bad(self.py, format!("{}: {name} = {n} is out of range", self.tag)))
    }

    fn u64(&mut self, name: &str) -> PyResult<u64> {
        let n = self.int(name)?;
        u64::try_from(n).map_err(|_| bad(self.py, format!("{}: {name} = {n} is negative", self.tag)))
    }

    /// A duration, or `-1` for "none".
    fn optional_u64(&mut self, name: &str) -> PyResult<Option<u64>> {
        match self.int(name)? {
            -1 => Ok(None),
            n => u64::try_from(n)
                .map(Some)
                .map_err(|_| bad(self.py, format!("{}: {name} = {n} is negative", self.tag))),
        }
    }

    /// A decimal string of nanoseconds (absolute times do not fit in a Lua number).
    fn decimal(&mut self, name: &str) -> PyResult<u64> {
        let (py, tag) = (self.py, self.tag);
        let item = self.next(name)?;
        text(item)
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad(py, format!("{tag}: {name} is not a decimal integer: {}", repr(item))))
    }

    fn end(mut self) -> PyResult<()> {
        match self.items.next() {
            None => Ok(()),
            Some(extra) => Err(bad(self.py, format!("{}: unexpected extra field {}", self.tag, repr(extra)))),
        }
    }
}

/// Reads any of the scripts' replies.
fn parse(reply: &Bound<'_, PyAny>) -> PyResult<Reply> {
    let py = reply.py();
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = reply.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = reply.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(bad(py, format!("expected an array, got {}", repr(reply))));
    };
    let Some((first, rest)) = items.split_first() else {
        return Err(bad(py, "expected a tag first, got an empty array".to_string()));
    };
    let Some(tag) = text(first) else {
        return Err(bad(py, format!("expected a tag first, got {}", repr(first))));
    };
    let mut f = Fields { py, tag: &tag, items: rest.iter() };
    let parsed = match tag.as_str() {
        "decision" => {
            let decision = CoreDecision {
                allowed: f.flag("allowed")?,
                limit: f.u32("limit")?,
                remaining: f.u32("remaining")?,
                reset_after: f.u64("reset_after_ns")?,
                clear_after: f.u64("clear_after_ns")?,
                replenish_after: f.optional_u64("replenish_after_ns")?,
                window: f.u64("window_ns")?,
            };
            f.decimal("now_ns")?;
            Reply::Decision(decision)
        }
        "insufficient_capacity" => Reply::InsufficientCapacity(InsufficientCapacity {
            requested: f.u32("requested")?,
            capacity: f.u32("capacity")?,
        }),
        "scheduled" => {
            let scheduled = CoreScheduled {
                run_now: f.flag("run_now")?,
                release_at: f.decimal("release_at_ns")?,
                waiting: f.u64("waiting")?,
            };
            Reply::Scheduled(scheduled, f.decimal("now_ns")?)
        }
        "released" => Reply::Released(f.flag("released")?),
        other => return Err(bad(py, format!("unknown tag {other:?}"))),
    };
    f.end()?;
    Ok(parsed)
}

fn kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Decision(_) => "a decision",
        Reply::InsufficientCapacity(_) => "insufficient_capacity",
        Reply::Scheduled(..) => "a booking",
        Reply::Released(_) => "a release",
    }
}

/// A check's reply (`gcra.lua`, `leaky_bucket.lua`, `fixed_window.lua check`) as a `Decision`.
/// Raises `InsufficientCapacityError` for GCRA's `insufficient_capacity`, `RedisBadReplyError`
/// for anything else.
#[pyfunction]
pub fn script_decision(reply: &Bound<'_, PyAny>) -> PyResult<PyDecision> {
    let py = reply.py();
    match parse(reply)? {
        Reply::Decision(d) => Ok(PyDecision { inner: d }),
        Reply::InsufficientCapacity(e) => Err(insufficient(py, e)),
        other => Err(bad(py, format!("expected a decision, got {}", kind(&other)))),
    }
}

/// `fixed_window.lua schedule`'s reply as `(Scheduled, now_ns)`, `now_ns` being the clock the
/// script used (Redis's `TIME` in Unix nanoseconds, unless the call gave one).
#[pyfunction]
pub fn script_scheduled(reply: &Bound<'_, PyAny>) -> PyResult<(PyScheduled, u64)> {
    match parse(reply)? {
        Reply::Scheduled(s, now) => Ok((PyScheduled { inner: s }, now)),
        other => Err(bad(reply.py(), format!("expected a booking, got {}", kind(&other)))),
    }
}

/// `fixed_window.lua release`'s reply: whether a delayed job was waiting.
#[pyfunction]
pub fn script_released(reply: &Bound<'_, PyAny>) -> PyResult<bool> {
    match parse(reply)? {
        Reply::Released(released) => Ok(released),
        other => Err(bad(reply.py(), format!("expected a release, got {}", kind(&other)))),
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GcraScript>()?;
    m.add_class::<LeakyBucketScript>()?;
    m.add_class::<FixedWindowScript>()?;
    m.add_function(wrap_pyfunction!(script_decision, m)?)?;
    m.add_function(wrap_pyfunction!(script_scheduled, m)?)?;
    m.add_function(wrap_pyfunction!(script_released, m)?)?;
    m.add("GCRA_LUA", GCRA_LUA)?;
    m.add("LEAKY_BUCKET_LUA", LEAKY_BUCKET_LUA)?;
    m.add("FIXED_WINDOW_LUA", FIXED_WINDOW_LUA)?;
    Ok(())
}
