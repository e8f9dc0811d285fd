//! The shared store's script (`redis/scripts/shared_store.lua`) for `ratelane.redis.RedisStore`:
//! each call's `ARGV` and the reading of a reservation's answer are the core's
//! (`ratelane::shared::wire`), as for `ratelane-redis`. This module only reads the Python
//! objects (the `Reserve` / `Share*` outputs, or any object with their attributes) into the
//! core's values, and a reply's Python values into the core's `ReplyItem`s. The I/O (queue,
//! pipeline, `NOSCRIPT`) is the Python module's.

use pyo3::prelude::*;

use ratelane::server::script::ReplyItem;
use ratelane::shared::wire::{self, StoreOp, StoreSettings};
use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};

use super::server::{bad, elements, item};
use super::{PyOutput, invalid_argument, repr};

/// One operation of the store contract, read from its Python object once, when it is queued.
#[pyclass(module = "ratelane._core", name = "StoreOp", frozen)]
#[derive(Debug)]
pub struct PyStoreOp {
    op: Op,
}

#[derive(Debug)]
enum Op {
    Reserve(Reservation),
    Record(SharedUpdate),
}

impl Op {
    fn as_store_op(&self) -> StoreOp<'_> {
        match self {
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
        self.op.as_store_op().name()
    }

    /// The operation's own arguments (a single call's `ARGV[7]` and on).
    #[getter]
    fn args(&self) -> Vec<String> {
        self.op.as_store_op().args()
    }

    fn __repr__(&self) -> String {
        format!("StoreOp({:?}, {:?})", self.name(), self.args())
    }
}

/// A required attribute of `obj`.
fn attr<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    let value = obj.getattr(name)?;
    value.extract::<T>().map_err(|_| {
        invalid_argument(obj.py(), format!("{name} of a shared-mode operation cannot be {}", repr(&value)))
    })
}

/// An attribute an object of an earlier version may lack: `default` then.
fn attr_or<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, name: &str, default: T) -> PyResult<T> {
    match obj.getattr(name) {
        Ok(value) => value.extract::<T>().map_err(|_| {
            invalid_argument(obj.py(), format!("{name} of a shared-mode operation cannot be {}", repr(&value)))
        }),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(obj.py()) => Ok(default),
        Err(e) => Err(e),
    }
}

fn reservation(r: &Bound<'_, PyAny>) -> PyResult<Reservation> {
    Ok(Reservation {
        id: attr(r, "id")?,
        identity: attr(r, "identity")?,
        route: attr(r, "route")?,
        major: attr(r, "major")?,
        bucket: attr(r, "bucket")?,
        counts_global: attr(r, "counts_global")?,
        global_limit: attr(r, "global_limit")?,
        global_window: attr(r, "global_window_ns")?,
        margin: attr(r, "margin_ns")?,
        invalid_limit: attr(r, "invalid_limit")?,
        invalid_window: attr(r, "invalid_window_ns")?,
        // Absent from a reservation object of an earlier version: one token, no outage.
        global_want: attr_or(r, "global_want", 1)?,
        processes_since: attr_or(r, "processes_since_ns", None)?,
        reporting: attr_or(r, "reporting", false)?,
        unrecorded: attr_or(r, "unrecorded_ns", Vec::new())?,
        granted: attr_or(r, "granted_ns", Vec::new())?,
    })
}

fn update(u: &Bound<'_, PyAny>, kind: &str) -> PyResult<Option<SharedUpdate>> {
    Ok(Some(match kind {
        "ShareBucket" => SharedUpdate::Bucket {
            id: attr(u, "id")?,
            identity: attr(u, "identity")?,
            route: attr(u, "route")?,
            major: attr(u, "major")?,
            bucket: attr(u, "bucket")?,
            unlimited: attr(u, "unlimited")?,
            limit: attr(u, "limit")?,
            remaining: attr(u, "remaining")?,
            reset_after: attr(u, "reset_after_ns")?,
            window: attr(u, "window_ns")?,
        },
        "ShareRelease" => SharedUpdate::Release {
            id: attr(u, "id")?,
            identity: attr(u, "identity")?,
            route: attr(u, "route")?,
            major: attr(u, "major")?,
            bucket: attr(u, "bucket")?,
            reached: attr(u, "reached")?,
            window: attr(u, "window_ns")?,
        },
        "ShareHold" => {
            let name: String = attr(u, "scope")?;
            let Some(scope) = SharedScope::from_name(&name) else {
                return Err(invalid_argument(u.py(), format!("ShareHold: unknown scope {name:?}")));
            };
            SharedUpdate::Hold {
                scope,
                identity: attr(u, "identity")?,
                route: attr(u, "route")?,
                major: attr(u, "major")?,
                bucket: attr(u, "bucket")?,
                retry_after: attr(u, "retry_after_ns")?,
            }
        }
        "ShareInvalid" => SharedUpdate::Invalid { id: attr(u, "id")?, window: attr(u, "window_ns")? },
        _ => return Ok(None),
    }))
}

/// The store operation of a `Reserve` output (`"reserve"`) or a `ShareBucket`,
/// `ShareRelease`, `ShareHold` or `ShareInvalid` one (`"record"`, by class name, so that any
/// object with those attributes works). Raises `TypeError` for anything else.
#[pyfunction]
pub fn store_op(obj: &Bound<'_, PyAny>) -> PyResult<PyStoreOp> {
    // The driver's own outputs, read without a lookup per attribute.
    if let Ok(output) = obj.cast::<PyOutput>() {
        match output.get() {
            PyOutput::Reserve {
                id,
                identity,
                route,
                major,
                bucket,
                counts_global,
                global_limit,
                global_want,
                global_window_ns,
                margin_ns,
                invalid_limit,
                invalid_window_ns,
                processes_since_ns,
                reporting,
                unrecorded_ns,
                granted_ns,
            } => {
                let op = Op::Reserve(Reservation {
                    id: *id,
                    identity: identity.clone(),
                    route: route.clone(),
                    major: major.clone(),
                    bucket: bucket.clone(),
                    counts_global: *counts_global,
                    global_limit: *global_limit,
                    global_want: *global_want,
                    global_window: *global_window_ns,
                    margin: *margin_ns,
                    invalid_limit: *invalid_limit,
                    invalid_window: *invalid_window_ns,
                    processes_since: *processes_since_ns,
                    reporting: *reporting,
                    unrecorded: unrecorded_ns.clone(),
                    granted: granted_ns.clone(),
                });
                return Ok(PyStoreOp { op });
            }
            PyOutput::ShareBucket {
                id,
                identity,
                route,
                major,
                bucket,
                unlimited,
                limit,
                remaining,
                reset_after_ns,
                window_ns,
            } => {
                let op = Op::Record(SharedUpdate::Bucket {
                    id: *id,
                    identity: identity.clone(),
                    route: route.clone(),
                    major: major.clone(),
                    bucket: bucket.clone(),
                    unlimited: *unlimited,
                    limit: *limit,
                    remaining: *remaining,
                    reset_after: *reset_after_ns,
                    window: *window_ns,
                });
                return Ok(PyStoreOp { op });
            }
            // The others by their attributes, as any object's.
            _ => {}
        }
    }
    let class = obj.get_type().name()?;
    let kind = class.to_cow()?;
    if let Some(u) = update(obj, &kind)? {
        return Ok(PyStoreOp { op: Op::Record(u) });
    }
    if !obj.hasattr("counts_global")? {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!("not a shared-mode operation: {}", repr(obj))));
    }
    Ok(PyStoreOp { op: Op::Reserve(reservation(obj)?) })
}

/// The `ARGV` of one script call for `ops` in order: a single call's for one, a `batch`
/// call's for several (one round trip; each runs as its own call would). `client` is this
/// process's name in the store; the durations are the core's validated `SharedConfig`.
#[pyfunction]
pub fn store_argv(
    client: &str,
    lease_ns: u64,
    pioneer_poll_ns: u64,
    state_ttl_ns: u64,
    ops: Vec<PyRef<'_, PyStoreOp>>,
) -> Vec<String> {
    let settings = StoreSettings { lease: lease_ns, pioneer_poll: pioneer_poll_ns, state_ttl: state_ttl_ns };
    match ops.as_slice() {
        [one] => wire::call_args(None, client, &settings, one.op.as_store_op()),
        _ => {
            let ops: Vec<StoreOp<'_>> = ops.iter().map(|op| op.op.as_store_op()).collect();
            wire::batch_args(None, client, &settings, &ops)
        }
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
    let py = reply.py();
    let objects = elements(reply)?;
    let items: Vec<ReplyItem<'_>> = objects.iter().map(item).collect();
    let leased_given = objects.len() > 2;
    Ok(match wire::parse_reserve_answer(&items).map_err(|e| bad(py, e))? {
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
    m.add_class::<PyStoreOp>()?;
    m.add_function(wrap_pyfunction!(store_op, m)?)?;
    m.add_function(wrap_pyfunction!(store_argv, m)?)?;
    m.add_function(wrap_pyfunction!(store_answer, m)?)?;
    Ok(())
}
