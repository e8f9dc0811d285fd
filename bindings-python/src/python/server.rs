//! The server-side limiters (`ratelane::server`): one native `Limit` (GCRA, leaky bucket or
//! fixed window, with its Redis script's `ARGV` and the reading of its reply) and one native
//! `Store` over it, plus the `Decision` and `Scheduled` they answer with. The user-facing
//! classes (`ratelane.server.GcraStore`..., `ratelane.redis.RedisGcra`...) are Python over
//! these two; the I/O (`EVALSHA`, `EVAL` on `NOSCRIPT`) is `ratelane.redis`'s.
//!
//! The layouts (the contract in `redis/README.md`) are the core's, `ratelane::server::script`,
//! as for `ratelane-redis` and the Node binding: this module only turns Python values into
//! the core's `ReplyItem`s; any other shape is `RedisBadReplyError`, never a panic.

use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};
use std::borrow::Cow;

use ratelane::server::script::{ReplyError, ReplyItem, ScriptReply};
use ratelane::server::{Answer, Decision as CoreDecision, InsufficientCapacity, Limit, LimitStore, Op};

use super::{
    borrowed_text, checked, core_error, exception, factor as arg_factor, max_keys as arg_max_keys, ns as arg_ns,
    opt_ns as arg_opt_ns, weight as arg_weight,
};

/// The texts of the scripts, embedded at build time. `bindings-python/<name>.lua` are symlinks
/// to the one source in `redis/scripts/` (as `shared_store.lua`): cargo and maturin's sdist
/// copy the files themselves, so an sdist is self-contained.
const SCRIPTS: [(&str, &str); 3] = [
    ("GCRA_LUA", include_str!("../../gcra.lua")),
    ("LEAKY_BUCKET_LUA", include_str!("../../leaky_bucket.lua")),
    ("FIXED_WINDOW_LUA", include_str!("../../fixed_window.lua")),
];

/// `InsufficientCapacityError` with the core's message, `requested` and `capacity`.
fn insufficient(py: Python<'_>, e: InsufficientCapacity) -> PyErr {
    let kwargs = PyDict::new(py);
    if let Err(err) = kwargs.set_item("requested", e.requested).and_then(|()| kwargs.set_item("capacity", e.capacity)) {
        return err;
    }
    exception(py, "InsufficientCapacityError", e.to_string(), Some(&kwargs))
}

/// `min_ttl_ms` (the core clamps it to `MAX_WINDOW`, as `ratelane_redis`'s `with_min_ttl_ms`).
fn min_ttl_arg(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    checked(obj, "min_ttl_ms")
}

// ------------------------------------------------------------------------------ answers

/// What a server-side check decided for one key (`ratelane::server::Decision`; durations in
/// ns from the check's `now`).
#[pyclass(module = "ratelane.server", name = "Decision", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct PyDecision {
    /// True when the request was admitted (and counted).
    allowed: bool,
    /// The policy's quota.
    limit: u32,
    /// Requests that could be admitted right now after this decision.
    remaining: u32,
    /// Until the next request is allowed (never zero when blocked).
    reset_after_ns: u64,
    /// Until the key is back to empty.
    clear_after_ns: u64,
    /// Until `remaining` next grows, or None when nothing is used.
    replenish_after_ns: Option<u64>,
    /// The time a full quota takes to come back.
    window_ns: u64,
}

impl From<CoreDecision> for PyDecision {
    fn from(d: CoreDecision) -> Self {
        let (reset_after_ns, clear_after_ns, replenish_after_ns, window_ns) = (d.reset_after, d.clear_after, d.replenish_after, d.window);
        PyDecision { allowed: d.allowed, limit: d.limit, remaining: d.remaining, reset_after_ns, clear_after_ns, replenish_after_ns, window_ns }
    }
}

impl PyDecision {
    fn core(&self) -> CoreDecision {
        let (reset_after, clear_after, replenish_after, window) = (self.reset_after_ns, self.clear_after_ns, self.replenish_after_ns, self.window_ns);
        CoreDecision { allowed: self.allowed, limit: self.limit, remaining: self.remaining, reset_after, clear_after, replenish_after, window }
    }
}

#[pymethods]
impl PyDecision {
    /// `Retry-After` in whole seconds (rounded up, at least 1) when blocked, else None.
    #[getter]
    fn retry_after_s(&self) -> Option<u64> {
        self.core().retry_after_secs()
    }
    /// `X-RateLimit-Remaining`, `X-RateLimit-Clear` and, when blocked, `X-RateLimit-Reset`
    /// and `Retry-After`, as `(name, value)` pairs.
    fn x_ratelimit_headers(&self) -> Vec<(&'static str, String)> {
        self.core().x_ratelimit_headers()
    }
    /// The IETF `RateLimit-Policy` and `RateLimit` fields for `policy` (and `Retry-After` when
    /// blocked), as `(name, value)` pairs.
    fn ietf_headers(&self, policy: &str) -> Vec<(&'static str, String)> {
        self.core().ietf_headers(policy)
    }
    fn __repr__(&self) -> String {
        let allowed = if self.allowed { "True" } else { "False" };
        format!("Decision(allowed={allowed}, limit={}, remaining={}, reset_after_ns={})", self.limit, self.remaining, self.reset_after_ns)
    }
}

/// When a scheduled job may start (`ratelane::server::Scheduled`).
#[pyclass(module = "ratelane.server", name = "Scheduled", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct PyScheduled {
    /// True when the job runs now; it needs no release.
    run_now: bool,
    /// When to start (and release) the job.
    release_at_ns: u64,
    /// The group's delayed jobs not released yet.
    waiting: u64,
}

#[pymethods]
impl PyScheduled {
    fn __repr__(&self) -> String {
        let run_now = if self.run_now { "True" } else { "False" };
        format!("Scheduled(run_now={run_now}, release_at_ns={}, waiting={})", self.release_at_ns, self.waiting)
    }
}

/// A store's or a script's answer as Python values: `Decision`, `Scheduled` (with the
/// script's `now_ns` for a script: `(Scheduled, now_ns)`), `bool`; InsufficientCapacityError.
fn answer(py: Python<'_>, answer: Answer, now: Option<u64>) -> PyResult<Py<PyAny>> {
    Ok(match answer {
        Answer::Decision(d) => PyDecision::from(d).into_pyobject(py)?.into_any().unbind(),
        Answer::InsufficientCapacity(e) => return Err(insufficient(py, e)),
        Answer::Scheduled(s) => {
            let scheduled = PyScheduled { run_now: s.run_now, release_at_ns: s.release_at, waiting: s.waiting };
            match now {
                None => scheduled.into_pyobject(py)?.into_any().unbind(),
                Some(now) => (scheduled, now).into_pyobject(py)?.into_any().unbind(),
            }
        }
        Answer::Released(released) => PyBool::new(py, released).to_owned().into_any().unbind(),
    })
}

/// The core's op named `name` (`check`, `check_n`, `check_scaled`, `schedule`, `release`),
/// with its weight or factor.
fn op(py: Python<'_>, name: &str, n: Option<u32>, factor: Option<f64>) -> PyResult<Op> {
    Ok(match (name, n, factor) {
        ("check", None, None) => Op::Check,
        ("check_n", Some(n), None) => Op::CheckN(n),
        ("check_scaled", None, Some(factor)) => Op::CheckScaled(factor),
        ("schedule", None, None) => Op::Schedule,
        ("release", None, None) => Op::Release,
        _ => return Err(exception(py, "InvalidArgumentError", format!("no op {name:?} with n={n:?}, factor={factor:?}"), None)),
    })
}

// ------------------------------------------------------------------------------ limit

/// A server-side limit (`ratelane::server::Limit`): the core's validated config of one
/// algorithm, and its Redis script.
#[pyclass(module = "ratelane._core", name = "Limit", frozen)]
#[derive(Debug)]
pub struct PyLimit {
    inner: Limit,
}

#[pymethods]
impl PyLimit {
    /// The limit `kind` names (`gcra`, `gcra_per_window`, `leaky_bucket`, `legacy`,
    /// `fixed_window`) from its parameters by name, ints (`None`: not given); the core's
    /// `Limit::from_params` lists them.
    #[new]
    #[pyo3(signature = (kind, **params))]
    fn new(py: Python<'_>, kind: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut given = Vec::new();
        for (name, value) in params.into_iter().flatten() {
            if !value.is_none() {
                given.push((name.extract::<String>()?, checked::<u64>(&value, "param")?, false));
            }
        }
        let read = Limit::from_params(kind, |name| {
            given.iter_mut().find(|(n, ..)| n == name).map(|(_, value, read)| {
                *read = true;
                *value
            })
        });
        let inner = read.map_err(core_error)?;
        match given.iter().find(|(.., read)| !read) {
            Some((name, ..)) => Err(exception(py, "InvalidArgumentError", format!("a {kind} limit has no parameter {name:?}"), None)),
            None => Ok(PyLimit { inner }),
        }
    }

    /// The config's parameters by name (`interval_ns`, `burst`, `window_ns`...).
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.inner.params().into_py_dict(py)
    }
    /// The name of the script's text in this module: `GCRA_LUA`, `LEAKY_BUCKET_LUA`...
    #[getter]
    fn script(&self) -> String {
        format!("{}_LUA", self.inner.script().to_uppercase())
    }
    /// Raises InvalidConfigError when the script cannot evaluate this limit exactly.
    fn check_script(&self) -> PyResult<()> {
        self.inner.check_script().map_err(core_error)
    }

    /// The script's `ARGV` for op `name`. Raises `InsufficientCapacityError` when `n` exceeds
    /// the burst, and what the store would raise (`InvalidRequestError`, `InvalidConfigError`):
    /// nothing needs sending.
    #[pyo3(signature = (name, now_ns = None, min_ttl_ms = 0, *, n = None, factor = None))]
    fn argv(
        &self,
        py: Python<'_>,
        name: &str,
        #[pyo3(from_py_with = arg_opt_ns)] now_ns: Option<u64>,
        #[pyo3(from_py_with = min_ttl_arg)] min_ttl_ms: u64,
        #[pyo3(from_py_with = arg_weight)] n: Option<u32>,
        #[pyo3(from_py_with = arg_factor)] factor: Option<f64>,
    ) -> PyResult<Vec<String>> {
        let argv = self.inner.argv(op(py, name, n, factor)?, now_ns, min_ttl_ms).map_err(core_error)?;
        Ok(argv.map_err(|e| insufficient(py, e))?.iter().map(ToString::to_string).collect())
    }

    /// The script's reply (a list or tuple) to op `name`: a `Decision` for a check,
    /// `(Scheduled, now_ns)` for `schedule` (`now_ns`: the clock the script used), a `bool`
    /// for `release`. Raises `RedisBadReplyError` for any other shape.
    fn read_reply(&self, py: Python<'_>, name: &str, reply: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let objects = elements(reply)?;
        let items: Vec<ReplyItem<'_>> = objects.iter().map(item).collect();
        // The reply's kind does not depend on the op's weight or factor.
        let op = match name {
            "check_n" | "check_scaled" => Op::Check,
            name => op(py, name, None, None)?,
        };
        match self.inner.read_reply(op, &items).map_err(|e| bad(py, e))? {
            ScriptReply::Decision(d, _) => answer(py, Answer::Decision(d), None),
            ScriptReply::InsufficientCapacity(e) => Err(insufficient(py, e)),
            ScriptReply::Scheduled(s, now) => answer(py, Answer::Scheduled(s), Some(now)),
            ScriptReply::Released(released) => answer(py, Answer::Released(released), None),
        }
    }

    fn __repr__(&self) -> String {
        format!("Limit({:?})", self.inner)
    }
}

// ------------------------------------------------------------------------------ store

/// A keyed store over a `Limit` (`ratelane::server::LimitStore`), the base of
/// `ratelane.server.GcraStore`, `LeakyBucketStore` and `FixedWindowStore`.
#[pyclass(module = "ratelane._core", name = "Store", subclass)]
#[derive(Debug)]
pub struct PyStore {
    inner: LimitStore,
}

impl PyStore {
    fn apply(&mut self, py: Python<'_>, key: &str, now_ns: u64, op: Op) -> PyResult<Py<PyAny>> {
        answer(py, self.inner.apply(key, now_ns, op).map_err(core_error)?, None)
    }
}

#[pymethods]
impl PyStore {
    #[new]
    #[pyo3(signature = (limit, max_keys = 100_000))]
    fn new(limit: &PyLimit, #[pyo3(from_py_with = arg_max_keys)] max_keys: usize) -> PyResult<Self> {
        Ok(PyStore { inner: LimitStore::new(limit.inner, max_keys).map_err(core_error)? })
    }

    /// Checks one request for `key` at `now_ns`, and counts it if admitted.
    fn check(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, #[pyo3(from_py_with = arg_ns)] now_ns: u64) -> PyResult<Py<PyAny>> {
        self.apply(py, borrowed_text(key)?, now_ns, Op::Check)
    }
    /// Runs op `name` for `key` at `now_ns`: `check_n` (weight `n`, GCRA), `check_scaled`
    /// (the bucket scaled by `factor` in (0, 1], leaky bucket), `schedule` (books a slot for
    /// one job of group `key`) or `release` (one delayed job of `key` was released; fixed window).
    #[pyo3(signature = (name, key, now_ns, *, n = None, factor = None))]
    fn _apply(
        &mut self,
        py: Python<'_>,
        name: &str,
        key: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_weight)] n: Option<u32>,
        #[pyo3(from_py_with = arg_factor)] factor: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        self.apply(py, borrowed_text(key)?, now_ns, op(py, name, n, factor)?)
    }

    /// Whether the store holds a state for `key`. A check that leaves a key empty drops it;
    /// a state that empties later, with time, is dropped lazily (when met again or swept).
    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.state(borrowed_text(key)?).is_some())
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
    /// New keys answered without being stored because the store was full of live keys.
    #[getter]
    fn untracked(&self) -> u64 {
        self.inner.untracked()
    }
    #[getter]
    fn max_keys(&self) -> usize {
        self.inner.max_keys()
    }
}

// ------------------------------------------------------------------------------ replies

pub(super) fn bad(py: Python<'_>, e: ReplyError) -> PyErr {
    exception(py, "RedisBadReplyError", e.into_message(), None)
}

/// One element of a reply as redis-py gives it, in the core's terms: `int` (not `bool`) is a
/// Redis integer, `bytes` (or `str` with `decode_responses=True`) a string, `None` a nil.
/// Anything else is described by its type and size, never by its `repr` (a reply nested ten
/// thousand deep raised `RecursionError` there).
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
    if let Ok(list) = obj.cast::<PyList>() {
        return ReplyItem::nested(list.len());
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return ReplyItem::nested(tuple.len());
    }
    ReplyItem::Other(Cow::Owned(describe(obj)))
}

/// What a value is, for a message: its type, and its length where it has one, never its
/// `repr` (which may be any size, recurse any depth, or fail).
fn describe(obj: &Bound<'_, PyAny>) -> String {
    let kind = obj.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string());
    let sized = obj.cast::<PyBytes>().is_ok() || obj.cast::<PyString>().is_ok() || obj.cast::<PyDict>().is_ok();
    match obj.len() {
        Ok(len) if sized => format!("a {kind} of length {len}"),
        _ if obj.is_instance_of::<PyInt>() => format!("a {kind} beyond 64 bits"),
        _ => format!("a {kind}"),
    }
}

/// The elements of a reply (a list or tuple) after its length is checked
/// (`ratelane::server::script::check_reply_len`: a million elements are refused before one is
/// read); `RedisBadReplyError` for anything else.
pub(super) fn elements<'py>(reply: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let checked = |len: usize| ratelane::server::script::check_reply_len(len).map_err(|e| bad(reply.py(), e));
    if let Ok(list) = reply.cast::<PyList>() {
        checked(list.len())?;
        Ok(list.iter().collect())
    } else if let Ok(tuple) = reply.cast::<PyTuple>() {
        checked(tuple.len())?;
        Ok(tuple.iter().collect())
    } else {
        Err(bad(reply.py(), ReplyError::not_an_array(&describe(reply))))
    }
}


pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDecision>()?;
    m.add_class::<PyScheduled>()?;
    m.add_class::<PyLimit>()?;
    m.add_class::<PyStore>()?;
    for (name, text) in SCRIPTS {
        m.add(name, text)?;
    }
    Ok(())
}
