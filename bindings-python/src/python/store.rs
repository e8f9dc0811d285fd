//! The shared store's script (`redis/scripts/shared_store.lua`) for `ratelane.redis.RedisStore`:
//! each call's `ARGV` and the reading of a reservation's answer are the core's
//! (`ratelane::shared::wire`), as for `ratelane-redis`. A drained output carries its
//! operation; any other object's crosses in the core's serde form (`ratelane._outputs.core_form`
//! makes it from the attributes). A reply's Python values become the core's `ReplyItem`s. The I/O (queue, pipeline, `NOSCRIPT`) is the Python module's.

use pyo3::prelude::*;
use pythonize::{depythonize, pythonize};

use ratelane::server::script::ReplyItem;
use ratelane::shared::wire::{self, StoreOp};
use ratelane::Output;
use ratelane::shared::{Reservation, ReservationAnswer, SharedUpdate};

use super::exception;
use super::server::{bad, elements, item};

/// One operation of the store contract, read once, when it is queued.
#[pyclass(module = "ratelane._core", name = "StoreOp", frozen)]
#[derive(Debug)]
pub struct PyStoreOp(Op);

#[derive(Debug)]
enum Op {
    Reserve(Reservation),
    Record(SharedUpdate),
}

impl PyStoreOp {
    /// A `Reserve` or `Share` output's operation, encoded when the output is drained (the
    /// driver queues it for the store as it is; `ratelane.redis.store_op`).
    pub(super) fn of(output: &Output) -> Option<Self> {
        match output {
            Output::Reserve(r) => Some(PyStoreOp(Op::Reserve(r.clone()))),
            Output::Share(u) => Some(PyStoreOp(Op::Record(u.clone()))),
            _ => None,
        }
    }

    fn op(&self) -> StoreOp<'_> {
        match &self.0 {
            Op::Reserve(r) => StoreOp::Reserve(r),
            Op::Record(u) => StoreOp::Record(u),
        }
    }
}

#[pymethods]
impl PyStoreOp {
    /// `"reserve"` or `"record"`.
    #[getter]
    fn name(&self) -> &'static str {
        self.op().name()
    }

    /// The operation's own arguments (a single call's `ARGV[7]` and on).
    #[getter]
    fn args(&self) -> Vec<String> {
        self.op().args()
    }

    /// `"reserve"`, or the update's kind: `"bucket"`, `"release"`, `"hold"`, `"invalid"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match &self.0 {
            Op::Reserve(_) => "reserve",
            Op::Record(update) => update.kind(),
        }
    }

    /// The operation's fields in the core's serde form (a dict; an update's has `share`).
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match &self.0 {
            Op::Reserve(r) => pythonize(py, r)?,
            Op::Record(u) => pythonize(py, u)?,
        })
    }

    fn __repr__(&self) -> String {
        format!("StoreOp({:?}, {:?})", self.name(), self.args())
    }
}

/// The operation `name` (`"reserve"`: a `Reservation`; `"record"`: a `SharedUpdate`, tagged
/// `share`) from the core's serde fields.
#[pyfunction]
pub fn store_op(name: &str, fields: &Bound<'_, PyAny>) -> PyResult<PyStoreOp> {
    let read = match name {
        "reserve" => depythonize(fields).map(Op::Reserve),
        _ => depythonize(fields).map(Op::Record),
    };
    read.map(PyStoreOp).map_err(|e| exception(fields.py(), "InvalidArgumentError", format!("a shared-mode {name} cannot be {fields:?}: {e}"), None))
}

/// The `ARGV` of one script call for `ops` in order: a single call's for one, a `batch`
/// call's for several (one round trip; each runs as its own call would). `client` is this
/// process's name in the store; the durations are the core's validated `SharedConfig`.
#[pyfunction]
pub fn store_argv(client: &str, lease_ns: u64, pioneer_poll_ns: u64, state_ttl_ns: u64, ops: Vec<PyRef<'_, PyStoreOp>>) -> Vec<String> {
    let settings = wire::StoreSettings { lease: lease_ns, pioneer_poll: pioneer_poll_ns, state_ttl: state_ttl_ns };
    match ops.as_slice() {
        [one] => wire::call_args(None, client, &settings, one.op()),
        _ => wire::batch_args(None, client, &settings, &ops.iter().map(|op| op.op()).collect::<Vec<_>>()),
    }
}

/// The script's reply to a reservation as `(answer, retry_after_ns, scope, processes, leased,
/// store_time_ns)` for `Limiter.handle_reservation` (`None` where the reply has no such field,
/// as from a script of an earlier version). Raises `RedisBadReplyError` for any other reply.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn store_answer(
    reply: &Bound<'_, PyAny>,
) -> PyResult<(&'static str, Option<u64>, Option<&'static str>, Option<u32>, Option<u32>, Option<u64>)> {
    let objects = elements(reply)?;
    let items: Vec<ReplyItem<'_>> = objects.iter().map(item).collect();
    let leased_given = objects.len() > 2;
    Ok(match wire::parse_reserve_answer(&items).map_err(|e| bad(reply.py(), e))? {
        ReservationAnswer::Granted { processes, leased, store_time } => {
            ("granted", None, None, processes, leased_given.then_some(leased), store_time)
        }
        ReservationAnswer::Denied { retry_after, scope, processes } => {
            ("denied", Some(retry_after), Some(scope.as_str()), processes, None, None)
        }
        // The script never answers this; the core reads no such reply.
        ReservationAnswer::Unavailable => ("unavailable", None, None, None, None, None),
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The script, embedded at build time so that the installed package carries it.
    // `bindings-python/shared_store.lua` is a symlink to the one source,
    // redis/scripts/shared_store.lua (cargo and maturin's sdist copy the file itself).
    m.add("SHARED_STORE_LUA", include_str!("../../shared_store.lua"))?;
    m.add_class::<PyStoreOp>()?;
    m.add_function(wrap_pyfunction!(store_op, m)?)?;
    m.add_function(wrap_pyfunction!(store_argv, m)?)?;
    m.add_function(wrap_pyfunction!(store_answer, m)?)
}
