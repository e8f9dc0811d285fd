//! The server-side limiters' Redis scripts (`redis/scripts/gcra.lua`, `leaky_bucket.lua`,
//! `fixed_window.lua`) for `ratelane.redis`: each class holds the core's validated
//! configuration and builds one script call's `ARGV`; the `script_*` functions read the
//! scripts' replies back into the core's `Decision` / `Scheduled`, so the headers are rendered
//! by the core. The I/O (`EVALSHA`, `EVAL` on `NOSCRIPT`) is the Python module's.
//!
//! The layouts (the contract in `redis/README.md`) are the core's, `ratelane::server::script`,
//! as for `ratelane-redis` and the Node binding: this module only turns Python values into
//! the core's `ReplyItem`s; any other shape is `RedisBadReplyError`, never a panic.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};
use std::borrow::Cow;

use ratelane::Error;
use ratelane::server::script::{
    self, FixedWindowOp, ReplyError, ReplyItem, ScriptArg, ScriptReply, check_fixed_window, check_gcra,
    check_leaky_bucket, fixed_window_argv, gcra_argv, leaky_bucket_argv,
};
use ratelane::server::{FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit};

use super::{PyDecision, PyScheduled, arg_ns, arg_opt_ns, core_error, exception, invalid_argument, repr};

/// The texts of the scripts, embedded at build time. `bindings-python/<name>.lua` are symlinks
/// to the one source in `redis/scripts/` (as `shared_store.lua`): cargo and maturin's sdist
/// copy the files themselves, so an sdist is self-contained.
pub(super) const GCRA_LUA: &str = include_str!("../../gcra.lua");
pub(super) const LEAKY_BUCKET_LUA: &str = include_str!("../../leaky_bucket.lua");
pub(super) const FIXED_WINDOW_LUA: &str = include_str!("../../fixed_window.lua");

/// `InsufficientCapacityError` with the core's message, `requested` and `capacity`.
pub(super) fn insufficient(py: Python<'_>, e: InsufficientCapacity) -> PyErr {
    let kwargs = PyDict::new(py);
    if let Err(err) = kwargs.set_item("requested", e.requested).and_then(|()| kwargs.set_item("capacity", e.capacity)) {
        return err;
    }
    exception(py, "InsufficientCapacityError", e.to_string(), Some(&kwargs))
}

/// `ARGV` as the strings redis-py sends.
fn strings(args: &[ScriptArg]) -> Vec<String> {
    args.iter().map(ToString::to_string).collect()
}

/// `min_ttl_ms` (the core clamps it to `MAX_WINDOW`, as `ratelane_redis`'s `with_min_ttl_ms`).
fn min_ttl_arg(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    obj.extract::<u64>().map_err(|_| {
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
        check_gcra(&gcra).map_err(|e| core_error(py, e))?;
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
    /// `n` exceeds the burst: the request can never be admitted, nothing needs sending; and
    /// `InvalidRequestError` when `now_ns` is later than the limit's last instant
    /// (`2**64 - 1 - window_ns`), as `GcraStore.check` does.
    #[pyo3(signature = (n, now_ns = None, min_ttl_ms = 0))]
    fn argv(
        &self,
        py: Python<'_>,
        n: u32,
        #[pyo3(from_py_with = arg_opt_ns)] now_ns: Option<u64>,
        #[pyo3(from_py_with = min_ttl_arg)] min_ttl_ms: u64,
    ) -> PyResult<Vec<String>> {
        let argv = gcra_argv(&self.gcra, n, now_ns, min_ttl_ms)
            .map_err(|e| core_error(py, e))?
            .map_err(|e| insufficient(py, e))?;
        Ok(strings(&argv))
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
        check_leaky_bucket(&bucket).map_err(|e| core_error(py, e))?;
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
        Ok(strings(&leaky_bucket_argv(&bucket, now_ns, min_ttl_ms)))
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
        check_fixed_window(&window).map_err(|e| core_error(py, e))?;
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
        let Some(op) = FixedWindowOp::from_name(op) else {
            return Err(invalid_argument(py, format!("op must be 'check', 'schedule' or 'release', got {op:?}")));
        };
        Ok(strings(&fixed_window_argv(&self.window, op, now_ns, min_ttl_ms)))
    }

    fn __repr__(&self) -> String {
        format!("FixedWindowScript(quota={}, window_ns={})", self.window.quota(), self.window.window())
    }
}

// ------------------------------------------------------------------------------ replies

pub(super) fn bad(py: Python<'_>, e: ReplyError) -> PyErr {
    exception(py, "RedisBadReplyError", e.into_message(), None)
}

/// One element of a reply as redis-py gives it, in the core's terms: `int` (not `bool`) is a
/// Redis integer, `bytes` (or `str` with `decode_responses=True`) a string, `None` a nil.
pub(super) fn item<'a>(obj: &'a Bound<'_, PyAny>) -> ReplyItem<'a> {
    if obj.is_none() {
        return ReplyItem::Nil;
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        if let Ok(text) = std::str::from_utf8(b.as_bytes()) {
            return ReplyItem::Text(Cow::Borrowed(text));
        }
    } else if let Ok(s) = obj.cast::<PyString>() {
        if let Ok(text) = s.to_cow() {
            return ReplyItem::Text(text);
        }
    } else if obj.is_instance_of::<PyInt>()
        && !obj.is_instance_of::<PyBool>()
        && let Ok(n) = obj.extract::<i64>()
    {
        return ReplyItem::Int(n);
    }
    ReplyItem::Other(Cow::Owned(repr(obj)))
}

/// The elements of a reply (a list or tuple); `RedisBadReplyError` for anything else.
pub(super) fn elements<'py>(reply: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(list) = reply.cast::<PyList>() {
        Ok(list.iter().collect())
    } else if let Ok(tuple) = reply.cast::<PyTuple>() {
        Ok(tuple.iter().collect())
    } else {
        Err(bad(reply.py(), ReplyError::not_an_array(&repr(reply))))
    }
}

/// Reads any of the scripts' replies (a list or tuple) with the core's grammar.
fn parse(reply: &Bound<'_, PyAny>) -> PyResult<ScriptReply> {
    let objects = elements(reply)?;
    let items: Vec<ReplyItem<'_>> = objects.iter().map(item).collect();
    script::parse_reply(&items).map_err(|e| bad(reply.py(), e))
}

/// A check's reply (`gcra.lua`, `leaky_bucket.lua`, `fixed_window.lua check`) as a `Decision`.
/// Raises `InsufficientCapacityError` for GCRA's `insufficient_capacity`, `RedisBadReplyError`
/// for anything else.
#[pyfunction]
pub fn script_decision(reply: &Bound<'_, PyAny>) -> PyResult<PyDecision> {
    let py = reply.py();
    match parse(reply)?.into_decision().map_err(|e| bad(py, e))? {
        Ok(d) => Ok(PyDecision { inner: d }),
        Err(e) => Err(insufficient(py, e)),
    }
}

/// `fixed_window.lua schedule`'s reply as `(Scheduled, now_ns)`, `now_ns` being the clock the
/// script used (Redis's `TIME` in Unix nanoseconds, unless the call gave one).
#[pyfunction]
pub fn script_scheduled(reply: &Bound<'_, PyAny>) -> PyResult<(PyScheduled, u64)> {
    let (s, now) = parse(reply)?.into_scheduled().map_err(|e| bad(reply.py(), e))?;
    Ok((PyScheduled { inner: s }, now))
}

/// `fixed_window.lua release`'s reply: whether a delayed job was waiting.
#[pyfunction]
pub fn script_released(reply: &Bound<'_, PyAny>) -> PyResult<bool> {
    parse(reply)?.into_released().map_err(|e| bad(reply.py(), e))
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
