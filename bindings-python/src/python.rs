//! The pyo3 classes of `ratelane._core`: the sans-IO `Limiter`, its output classes and the
//! simulator. Conversions only; errors become the classes of `ratelane._errors`.
//!
//! Hot-path choices (measured in `bench/`): no JSON on `enqueue`/`handle_response`/`drain`;
//! outputs are small frozen classes; `Idle` is one shared instance; dispositions are interned
//! strings; headers are borrowed from the Python strings where the stable ABI allows it.


use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyMapping, PyString, PyTuple, PyType};

use ratelane::sim::{self, Fate};
use ratelane::{
    BodyHints, Disposition, Error, FailReason, Failure, Observation, Output, Request, Response,
};

use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};

use crate::error_class_name;

mod server;
mod store;

// ------------------------------------------------------------------------------ errors

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || py.import("ratelane._errors").map(Bound::unbind))
        .map(|m| m.bind(py))
}

/// An instance of `ratelane._errors.<class>(message, **kwargs)`.
fn exception_value<'py>(
    py: Python<'py>,
    class: &str,
    message: String,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    errors_module(py)?.getattr(class)?.call((message,), kwargs)
}

fn exception(py: Python<'_>, class: &str, message: String, kwargs: Option<&Bound<'_, PyDict>>) -> PyErr {
    match exception_value(py, class, message, kwargs) {
        Ok(value) => PyErr::from_value(value),
        Err(e) => e,
    }
}

/// A caller error of the core, as its `ratelane` exception class.
fn core_error(py: Python<'_>, error: Error) -> PyErr {
    let kwargs = PyDict::new(py);
    let id = match &error {
        Error::UnknownRequest(id) | Error::InvalidState { id, .. } => Some(*id),
        Error::InvalidConfig(_)
        | Error::InvalidRequest(_)
        | Error::Closed
        | Error::Busy { .. }
        | Error::SnapshotForeign(_)
        | Error::SnapshotVersion { .. }
        | Error::SnapshotMalformed(_) => None,
    };
    if let Some(id) = id
        && let Err(e) = kwargs.set_item("request_id", id)
    {
        return e;
    }
    exception(py, error_class_name(&error), error.to_string(), Some(&kwargs))
}

/// A wrong Python type or value caught by the binding itself (code `invalid_argument`).
fn invalid_argument(py: Python<'_>, message: String) -> PyErr {
    exception(py, "InvalidArgumentError", message, None)
}

fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "<object>".to_string())
}

// ------------------------------------------------------------------------------ strings

/// Borrowing a Python `str`'s UTF-8 text without copying it.
///
/// `PyUnicode_AsUTF8AndSize` joined the limited API in Python 3.10, so pyo3 hides it from an
/// `abi3-py39` build, which then copies every string through a new `bytes` object (a third
/// of the binding's cost per header, measured). The function itself has been exported by
/// every CPython since 3.3, 3.9 included, with the same signature and meaning, so this
/// module declares it and uses it; the wheel still imports and runs on 3.9 (the test script
/// checks it there).
#[allow(unsafe_code)]
mod utf8 {
    use std::os::raw::c_char;

    use pyo3::prelude::*;
    use pyo3::types::PyString;
    use pyo3::{PyErr, ffi};

    unsafe extern "C" {
        fn PyUnicode_AsUTF8AndSize(unicode: *mut ffi::PyObject, size: *mut ffi::Py_ssize_t) -> *const c_char;
    }

    /// The text of `s`, borrowed from it.
    pub fn text<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `s` is a live `str` (the `Bound` holds a reference) and the thread is
        // attached to the interpreter (a `Bound` proves it). CPython returns a buffer it owns,
        // caches in the object and never changes, or NULL with an exception set.
        let data = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
        if data.is_null() {
            return Err(PyErr::fetch(s.py()));
        }
        let len = usize::try_from(size).unwrap_or(0);
        // SAFETY: `data` points to `len` bytes that live as long as `s`, which the returned
        // slice borrows; CPython guarantees they are UTF-8 (a string with lone surrogates
        // gives NULL above instead).
        Ok(unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast::<u8>(), len)) })
    }
}

// ------------------------------------------------------------------------------ arguments

/// What `obj.extract()` reads, else an `InvalidArgumentError` "`what`, got <repr>".
fn extract_or<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<T> {
    obj.extract::<T>().map_err(|_| invalid_argument(obj.py(), format!("{what}, got {}", repr(obj))))
}

/// `None`, or what `arg` reads.
fn opt<'py, T>(obj: &Bound<'py, PyAny>, arg: fn(&Bound<'py, PyAny>) -> PyResult<T>) -> PyResult<Option<T>> {
    if obj.is_none() { Ok(None) } else { arg(obj).map(Some) }
}

fn arg_ns(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    extract_or(obj, "a time or duration must be an int of nanoseconds >= 0")
}

fn arg_opt_ns(obj: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    opt(obj, arg_ns)
}

/// A count the store gave (`processes`, `leased`): `None`, or an int >= 0; one above
/// `u32::MAX` reads as `u32::MAX` (the core tolerates any count).
fn arg_opt_count(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<u32>> {
    let n = if obj.is_none() { None } else { Some(extract_or::<u64>(obj, what)?) };
    Ok(n.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
}

fn arg_opt_processes(obj: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
    arg_opt_count(obj, "processes must be an int >= 0 or None")
}

fn arg_opt_leased(obj: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
    arg_opt_count(obj, "leased must be an int >= 0 or None")
}

fn arg_id(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    extract_or(obj, "a request id must be an int >= 0")
}

fn arg_ticket(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    extract_or(obj, "a ticket must be an int >= 0")
}

fn arg_status(obj: &Bound<'_, PyAny>) -> PyResult<u16> {
    match obj.extract::<u16>() {
        Ok(s) if (100..=999).contains(&s) => Ok(s),
        _ => Err(invalid_argument(
            obj.py(),
            format!("status must be an int HTTP status in 100..=999, got {}", repr(obj)),
        )),
    }
}

fn arg_priority(obj: &Bound<'_, PyAny>) -> PyResult<i32> {
    extract_or(obj, "priority must be a 32-bit int")
}

fn arg_str(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => utf8::text(s).map(str::to_owned).map_err(|e| {
            invalid_argument(obj.py(), format!("{}: {}", repr(obj), e.value(obj.py())))
        }),
        Err(_) => Err(invalid_argument(obj.py(), format!("expected a str, got {}", repr(obj)))),
    }
}

fn arg_opt_str(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    opt(obj, arg_str)
}

/// `None`, or an iterable of `str` that is not a `str` itself; else "`what`, got <repr>".
fn arg_strs(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<String>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let wrong = || invalid_argument(obj.py(), format!("{what}, got {}", repr(obj)));
    if obj.is_instance_of::<PyString>() {
        return Err(wrong());
    }
    let items = obj.try_iter().map_err(|_| wrong())?;
    items.map(|item| item?.extract::<String>().map_err(|_| wrong())).collect::<PyResult<_>>().map(Some)
}

/// `body_keys`: `None`, or an iterable of `str` (a dict gives its keys, so the JSON body itself
/// may be passed).
fn arg_body_keys(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    arg_strs(obj, "body_keys must be an iterable of str (or the JSON body's dict)")
}

/// `errors`: `None`, or an iterable of `str` (not a `str` itself).
fn arg_errors(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    arg_strs(obj, "errors must be an iterable of str")
}

fn arg_opt_bool(obj: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    opt(obj, |obj| extract_or(obj, "expected a bool or None"))
}

fn arg_opt_f64(obj: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    opt(obj, |obj| extract_or(obj, "retry_after must be a number of seconds or None"))
}

/// `cost`: `None`, or a mapping of `requested`, `actual`, `maximum_available`,
/// `currently_available`, `restore_rate` (each a number or `None`; others refused).
fn arg_cost(obj: &Bound<'_, PyAny>) -> PyResult<Option<ratelane::QueryCost>> {
    if obj.is_none() {
        return Ok(None);
    }
    let py = obj.py();
    let wrong = || invalid_argument(py, format!("cost must be a mapping of numbers (or None), got {}", repr(obj)));
    let dict = obj.cast::<PyDict>().map_err(|_| wrong())?;
    let mut cost = ratelane::QueryCost::default();
    for (key, value) in dict.iter() {
        let key: String = key.extract().map_err(|_| wrong())?;
        let number = if value.is_none() {
            None
        } else if value.is_instance_of::<PyBool>() {
            return Err(wrong());
        } else {
            Some(value.extract::<f64>().map_err(|_| {
                invalid_argument(py, format!("cost[{key:?}] must be a number or None, got {}", repr(&value)))
            })?)
        };
        match key.as_str() {
            "requested" => cost.requested = number,
            "actual" => cost.actual = number,
            "maximum_available" => cost.maximum_available = number,
            "currently_available" => cost.currently_available = number,
            "restore_rate" => cost.restore_rate = number,
            _ => {
                return Err(invalid_argument(py, format!(
                    "unknown cost key {key:?}; expected requested, actual, maximum_available, currently_available, restore_rate"
                )));
            }
        }
    }
    Ok(Some(cost))
}

type Pairs<'py> = Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>;

/// The `(key, value)` pairs of a mapping: a `dict`, or any `collections.abc.Mapping`
/// (through its `items()`). `None`: not a mapping.
fn mapping_pairs<'py>(obj: &Bound<'py, PyAny>) -> Option<PyResult<Pairs<'py>>> {
    if let Ok(dict) = obj.cast::<PyDict>() {
        return Some(Ok(dict.iter().collect()));
    }
    let mapping = obj.cast::<PyMapping>().ok()?;
    let pairs = (|| {
        let mut out = Vec::new();
        for item in mapping.items()?.iter() {
            out.push(item.extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>()?);
        }
        Ok(out)
    })();
    Some(pairs)
}

/// `costs`: `None`, or a mapping of dimension name (`str`) to the request's estimated cost in
/// it (an `int` from 0 to 2**64 - 1; not a `bool`, not a `float`). Whether the names are
/// valid (`[a-z0-9_]`, not `requests`, at most 8) is the core's to say (`InvalidRequestError`).
fn arg_costs(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, u64)>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let py = obj.py();
    let pairs = mapping_pairs(obj).ok_or_else(|| {
        invalid_argument(py, format!("costs must be a mapping of dimension names to ints (or None), got {}", repr(obj)))
    })??;
    let mut costs = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        let name = match key.cast::<PyString>() {
            Ok(s) => utf8::text(s).map(str::to_owned).map_err(|e| {
                invalid_argument(py, format!("costs key {}: {}", repr(&key), e.value(py)))
            })?,
            Err(_) => {
                return Err(invalid_argument(py, format!("costs keys must be str (dimension names), got {}", repr(&key))));
            }
        };
        let amount = if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
            value.extract::<u64>().ok()
        } else {
            None
        };
        let Some(amount) = amount else {
            return Err(invalid_argument(
                py,
                format!("costs[{}] must be an int from 0 to 2**64 - 1, got {}", repr(&key), repr(&value)),
            ));
        };
        costs.push((name, amount));
    }
    Ok(Some(costs))
}

/// `usage`: `None`, or a mapping of `str` to a number: the numeric fields of the answer's
/// `usage` object (`ratelane::BodyHints::usage`). A key that is not a `str` or a value that is
/// not a number (a `bool` included) is the caller's mistake (`InvalidArgumentError`), as for
/// `cost`; but the numbers are the server's, passed as they are (the core reads only finite
/// ones >= 0; an int beyond a float passes as infinity), never an error. The first
/// `BodyHints::MAX_USAGE` are passed.
fn arg_usage(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, f64)>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let py = obj.py();
    let pairs = mapping_pairs(obj).ok_or_else(|| {
        invalid_argument(py, format!("usage must be a mapping of str to numbers (or None), got {}", repr(obj)))
    })??;
    let mut usage = Vec::new();
    for (key, value) in pairs {
        if usage.len() == BodyHints::MAX_USAGE {
            break;
        }
        let Ok(name) = key.cast::<PyString>() else {
            return Err(invalid_argument(py, format!("usage keys must be str, got {}", repr(&key))));
        };
        let name = utf8::text(name).map_err(|e| invalid_argument(py, format!("usage key {}: {}", repr(&key), e.value(py))))?;
        let number = if value.is_instance_of::<PyBool>() {
            None
        } else if value.is_instance_of::<PyInt>() {
            // An int too large for a float is beyond any budget: infinity, which the core skips.
            Some(value.extract::<f64>().unwrap_or(f64::INFINITY))
        } else {
            value.extract::<f64>().ok()
        };
        let Some(number) = number else {
            return Err(invalid_argument(py, format!("usage[{}] must be a number, got {}", repr(&key), repr(&value))));
        };
        usage.push((name.to_owned(), number));
    }
    Ok(Some(usage))
}

/// `tokens` of the simulated server's `handle`: `None`, or an int >= 0 (not a `bool`).
fn arg_opt_tokens(obj: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    const WHAT: &str = "tokens must be an int >= 0 or None";
    if obj.is_instance_of::<PyBool>() {
        return Err(invalid_argument(obj.py(), format!("{WHAT}, got {}", repr(obj))));
    }
    opt(obj, |obj| extract_or(obj, WHAT))
}

fn header_text<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    utf8::text(s).map_err(|e| {
        invalid_argument(s.py(), format!("header {}: {}", repr(s.as_any()), e.value(s.py())))
    })
}

type HeaderItems<'py> = Vec<(Bound<'py, PyString>, Bound<'py, PyString>)>;

fn header_str<'py>(obj: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    obj.cast_into::<PyString>().map_err(|e| {
        let obj = e.into_inner();
        invalid_argument(obj.py(), format!("header names and values must be str, got {}", repr(&obj)))
    })
}

fn header_pair<'py>(item: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyString>, Bound<'py, PyString>)> {
    if let Ok(t) = item.cast::<PyTuple>()
        && t.len() == 2
    {
        return Ok((header_str(t.get_item(0)?)?, header_str(t.get_item(1)?)?));
    }
    if let Ok(l) = item.cast::<PyList>()
        && l.len() == 2
    {
        return Ok((header_str(l.get_item(0)?)?, header_str(l.get_item(1)?)?));
    }
    let (name, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item.extract().map_err(|_| {
        invalid_argument(item.py(), format!("a header must be a (name, value) pair, got {}", repr(item)))
    })?;
    Ok((header_str(name)?, header_str(value)?))
}

/// Headers as a list or tuple of `(name, value)` pairs, a dict, or any iterable of pairs.
/// The `str` objects are kept so their text can be borrowed without a copy.
fn arg_headers<'py>(obj: &Bound<'py, PyAny>) -> PyResult<HeaderItems<'py>> {
    let mut out = Vec::new();
    if let Ok(list) = obj.cast::<PyList>() {
        out.reserve(list.len());
        for item in list.iter() {
            out.push(header_pair(&item)?);
        }
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        out.reserve(tuple.len());
        for item in tuple.iter() {
            out.push(header_pair(&item)?);
        }
    } else if let Ok(dict) = obj.cast::<PyDict>() {
        out.reserve(dict.len());
        for (name, value) in dict.iter() {
            out.push((header_str(name)?, header_str(value)?));
        }
    } else {
        let iter = obj.try_iter().map_err(|_| {
            invalid_argument(
                obj.py(),
                format!("headers must be an iterable of (name, value) pairs, got {}", repr(obj)),
            )
        })?;
        for item in iter {
            out.push(header_pair(&item?)?);
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn request(
    method: String,
    path: String,
    major: Option<String>,
    identity: Option<String>,
    deadline_ns: Option<u64>,
    defer_after_ns: Option<u64>,
    priority: i32,
    idempotent: Option<bool>,
    global_exempt: Option<bool>,
    sub_limit: Option<String>,
    body_keys: Option<Vec<String>>,
    costs: Option<Vec<(String, u64)>>,
) -> Request {
    Request {
        method,
        path,
        major,
        identity: identity.unwrap_or_default(),
        deadline: deadline_ns,
        defer_after: defer_after_ns,
        priority,
        idempotent,
        global_exempt,
        sub_limit,
        body_keys: body_keys.unwrap_or_default(),
        costs: costs.unwrap_or_default(),
    }
}

// ------------------------------------------------------------------------------ outputs

/// The outputs of `Limiter.poll_output` / `drain`, but `Idle`: one Python class per variant
/// (`ratelane.Send` is `Output.Send`), each a subclass of `Output`. pyo3 derives every class's
/// constructor, field getters, `__match_args__` (the fields in order: the first ones are what
/// a `match` pattern reads) and `==`; `__repr__` below reads the same fields. Times and
/// durations are nanoseconds, as everywhere in `ratelane._core`.
#[pyclass(module = "ratelane", name = "Output", eq)]
#[derive(Debug, PartialEq)]
pub enum PyOutput {
    /// `Send(id)`: send request `id` now.
    Send { id: u64 },
    /// `Fail(id, code)`: request `id` ended without being answered; `exception()` builds its
    /// `ratelane.RateLimitError`. The fields after `message` are the reason's (else `None`).
    Fail {
        id: u64,
        /// The stable failure code (`deadline_exceeded`, `max_wait_exceeded`, ...).
        code: String,
        /// The core's description of the failure.
        message: String,
        /// `deadline_exceeded`: when the core predicted the request could be sent, if it could.
        predicted_send_at_ns: Option<u64>,
        /// `max_wait_exceeded`: the predicted wait.
        predicted_wait_ns: Option<u64>,
        /// `deferred`: the predicted send time (monotonic ns), when to enqueue the request again.
        retry_at_ns: Option<u64>,
        /// `retries_exhausted`, `network_error`: how many times the request was tried.
        attempts: Option<u32>,
        /// `insufficient_capacity`: the dimension whose whole limit the estimate exceeds.
        dimension: Option<String>,
        /// `insufficient_capacity`: the request's estimated cost in that dimension.
        cost: Option<u64>,
        /// `insufficient_capacity`: the dimension's limit, as the server reported it.
        limit: Option<u64>,
    },
    /// `RateLimited(id, scope, retry_after_ns)`: a 429 was received (an observation).
    RateLimited { id: u64, scope: String, retry_after_ns: u64 },
    /// `BucketLearned(route, bucket)`: a route was mapped to a bucket (an observation).
    BucketLearned { route: String, bucket: String },
    /// `InvalidRequestWarning(count, limit)`: the invalid-request count crossed the warning level.
    InvalidRequestWarning { count: u32, limit: u32 },
    /// `WaitUntil(at_ns)`: drained; call `handle_timeout` at `at_ns` (earlier is harmless).
    WaitUntil { at_ns: u64 },
    /// `Reserve(id, ...)`: shared mode; ask the store whether request `id` may be sent, then
    /// answer with `Limiter.handle_reservation` (`ratelane::shared::Reservation`).
    Reserve {
        id: u64,
        identity: String,
        route: String,
        major: String,
        bucket: Option<String>,
        counts_global: bool,
        global_limit: u32,
        global_want: u32,
        global_window_ns: u64,
        margin_ns: u64,
        invalid_limit: u32,
        invalid_window_ns: u64,
        /// After a store outage: count the processes back within this long (else None).
        processes_since_ns: Option<u64>,
        /// After a store outage: this process still has sends to report.
        reporting: bool,
        /// After a store outage: ages of the sends made without a reservation.
        unrecorded_ns: Vec<u64>,
        /// After a store outage: ages of the sends the store granted.
        granted_ns: Vec<u64>,
    },
    /// `ShareBucket(id, ...)`: shared mode; a response's report on its bucket, for the store
    /// (`SharedUpdate::Bucket`). Write it fire-and-forget, in order.
    ShareBucket {
        id: u64,
        identity: String,
        route: String,
        major: String,
        bucket: Option<String>,
        unlimited: bool,
        limit: Option<u32>,
        remaining: Option<u32>,
        reset_after_ns: Option<u64>,
        window_ns: Option<u64>,
    },
    /// `ShareRelease(id, reached, ...)`: shared mode; a granted request will not be answered
    /// (`SharedUpdate::Release`).
    ShareRelease {
        id: u64,
        reached: bool,
        identity: String,
        route: String,
        major: String,
        bucket: Option<String>,
        window_ns: Option<u64>,
    },
    /// `ShareHold(scope, retry_after_ns, ...)`: shared mode; everyone must hold `scope` for
    /// `retry_after_ns` (`SharedUpdate::Hold`).
    ShareHold {
        scope: String,
        retry_after_ns: u64,
        identity: String,
        route: String,
        major: String,
        bucket: Option<String>,
    },
    /// `ShareInvalid(id, window_ns)`: shared mode; request `id` got an invalid response
    /// (`SharedUpdate::Invalid`).
    ShareInvalid { id: u64, window_ns: u64 },
    /// `StoreUnavailable(id, retry_at_ns)`: shared mode; the store could not answer request
    /// `id`'s reservation; it is asked again from `retry_at_ns` (an observation).
    StoreUnavailable { id: u64, retry_at_ns: u64 },
    /// `StoreRecovered()`: shared mode; the store answers again (an observation).
    StoreRecovered {},
}

#[pymethods]
impl PyOutput {
    /// `Name(field=value, ...)` over the class's `__match_args__`: every field, in order.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let slf = slf.as_any();
        let class = slf.get_type();
        let fields: Vec<String> = class.getattr(intern!(slf.py(), "__match_args__"))?.extract()?;
        let fields = fields
            .iter()
            .map(|name| Ok(format!("{name}={}", slf.getattr(name)?.repr()?)))
            .collect::<PyResult<Vec<String>>>()?;
        Ok(format!("{}({})", class.name()?, fields.join(", ")))
    }

    /// `Fail`: the `ratelane.RateLimitError` subclass instance for this failure (not raised):
    /// `FAIL_CLASSES[code]` with the reason's fields that are set.
    fn exception<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let PyOutput::Fail { id, code, message, .. } = slf.get() else {
            return Err(PyTypeError::new_err("only a Fail output has an exception"));
        };
        let kwargs = PyDict::new(py);
        kwargs.set_item("request_id", id)?;
        let reason = ["predicted_send_at_ns", "predicted_wait_ns", "retry_at_ns", "attempts", "dimension", "cost", "limit"];
        for name in reason {
            let value = slf.as_any().getattr(name)?;
            if !value.is_none() {
                kwargs.set_item(name, value)?;
            }
        }
        let class = errors_module(py)?.getattr("FAIL_CLASSES")?.get_item(code)?;
        class.call((message,), Some(&kwargs))
    }
}

impl PyOutput {
    fn fail(id: u64, reason: FailReason) -> Self {
        let (mut send_at, mut wait, mut retry_at, mut attempts) = (None, None, None, None);
        let (mut dimension, mut cost, mut limit) = (None, None, None);
        match &reason {
            FailReason::DeadlineExceeded { predicted_send_at } => send_at = *predicted_send_at,
            FailReason::MaxWaitExceeded { predicted_wait } => wait = Some(*predicted_wait),
            FailReason::Deferred { retry_at: at } => retry_at = Some(*at),
            FailReason::RetriesExhausted { attempts: n } | FailReason::NetworkError { attempts: n } => attempts = Some(*n),
            FailReason::InsufficientCapacity { dimension: d, cost: c, limit: l } => {
                (dimension, cost, limit) = (Some(d.clone()), Some(*c), Some(*l));
            }
            FailReason::MaybeSent | FailReason::Unauthorized | FailReason::Closed => {}
        }
        PyOutput::Fail {
            id,
            code: reason.code().to_owned(),
            message: reason.to_string(),
            predicted_send_at_ns: send_at,
            predicted_wait_ns: wait,
            retry_at_ns: retry_at,
            attempts,
            dimension,
            cost,
            limit,
        }
    }

    fn observe(observation: Observation) -> Self {
        match observation {
            Observation::RateLimited { id, scope, retry_after } => {
                PyOutput::RateLimited { id, scope: scope.as_str().to_owned(), retry_after_ns: retry_after }
            }
            Observation::BucketLearned { route, bucket } => PyOutput::BucketLearned { route, bucket },
            Observation::InvalidRequestWarning { count, limit } => PyOutput::InvalidRequestWarning { count, limit },
            Observation::StoreUnavailable { id, retry_at } => PyOutput::StoreUnavailable { id, retry_at_ns: retry_at },
            Observation::StoreRecovered => PyOutput::StoreRecovered {},
        }
    }

    fn reserve(r: Reservation) -> Self {
        let Reservation {
            id,
            identity,
            route,
            major,
            bucket,
            counts_global,
            global_limit,
            global_want,
            global_window,
            margin,
            invalid_limit,
            invalid_window,
            processes_since,
            reporting,
            unrecorded,
            granted,
        } = r;
        PyOutput::Reserve {
            id,
            identity,
            route,
            major,
            bucket,
            counts_global,
            global_limit,
            global_want,
            global_window_ns: global_window,
            margin_ns: margin,
            invalid_limit,
            invalid_window_ns: invalid_window,
            processes_since_ns: processes_since,
            reporting,
            unrecorded_ns: unrecorded,
            granted_ns: granted,
        }
    }

    fn share(update: SharedUpdate) -> Self {
        match update {
            SharedUpdate::Bucket { id, identity, route, major, bucket, unlimited, limit, remaining, reset_after, window } => {
                PyOutput::ShareBucket {
                    id,
                    identity,
                    route,
                    major,
                    bucket,
                    unlimited,
                    limit,
                    remaining,
                    reset_after_ns: reset_after,
                    window_ns: window,
                }
            }
            SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => {
                PyOutput::ShareRelease { id, reached, identity, route, major, bucket, window_ns: window }
            }
            SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => PyOutput::ShareHold {
                scope: scope.as_str().to_owned(),
                retry_after_ns: retry_after,
                identity,
                route,
                major,
                bucket,
            },
            SharedUpdate::Invalid { id, window } => PyOutput::ShareInvalid { id, window_ns: window },
        }
    }
}

/// `Idle()`: drained, and nothing waits on time. One shared instance (which a complex enum's
/// variant cannot be: pyo3 gives each call of its class a new object).
#[pyclass(module = "ratelane", frozen, eq)]
#[derive(Debug, PartialEq)]
pub struct Idle;

#[pymethods]
impl Idle {
    #[new]
    fn new(py: Python<'_>) -> Py<Idle> {
        idle(py).clone_ref(py)
    }
    fn __repr__(&self) -> &'static str {
        "Idle()"
    }
}

static IDLE: PyOnceLock<Py<Idle>> = PyOnceLock::new();

fn idle(py: Python<'_>) -> &Py<Idle> {
    IDLE.get_or_init(py, || Py::new(py, Idle).expect("allocating the Idle output"))
}

/// `answer` of `Limiter.handle_reservation`: `"granted"`, `"unavailable"`, or `"denied"` with
/// `retry_after_ns` and `scope`; `processes` (the store's live-process count) with `"granted"`
/// or `"denied"`; `leased` (global tokens leased beyond the request's own) and `store_time_ns`
/// (the store's clock when it granted) with `"granted"`.
fn reservation_answer(
    py: Python<'_>,
    answer: &Bound<'_, PyAny>,
    retry_after_ns: Option<u64>,
    scope: Option<&Bound<'_, PyAny>>,
    processes: Option<u32>,
    leased: Option<u32>,
    store_time_ns: Option<u64>,
) -> PyResult<ReservationAnswer> {
    let text = answer.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok());
    let extra = retry_after_ns.is_some() || scope.is_some_and(|s| !s.is_none());
    match text {
        Some("granted") | Some("unavailable") if extra => Err(invalid_argument(
            py,
            "retry_after_ns and scope are for a 'denied' answer only".to_string(),
        )),
        Some("unavailable") if processes.is_some() => Err(invalid_argument(
            py,
            "processes is for a 'granted' or 'denied' answer only".to_string(),
        )),
        Some("unavailable") | Some("denied") if leased.is_some() => {
            Err(invalid_argument(py, "leased is for a 'granted' answer only".to_string()))
        }
        Some("unavailable") | Some("denied") if store_time_ns.is_some() => {
            Err(invalid_argument(py, "store_time_ns is for a 'granted' answer only".to_string()))
        }
        Some("granted") => {
            Ok(ReservationAnswer::Granted { processes, leased: leased.unwrap_or(0), store_time: store_time_ns })
        }
        Some("unavailable") => Ok(ReservationAnswer::Unavailable),
        Some("denied") => {
            let Some(retry_after) = retry_after_ns else {
                return Err(invalid_argument(py, "a 'denied' answer needs retry_after_ns".to_string()));
            };
            let name = scope.and_then(|s| s.cast::<PyString>().ok()).and_then(|s| utf8::text(s).ok());
            match name.and_then(SharedScope::from_name) {
                Some(scope) => Ok(ReservationAnswer::Denied { retry_after, scope, processes }),
                None => Err(invalid_argument(
                    py,
                    format!(
                        "scope must be 'edge', 'invalid', 'global', 'route', 'bucket' or 'pioneer', got {}",
                        scope.map_or_else(|| "None".to_string(), repr)
                    ),
                )),
            }
        }
        _ => Err(invalid_argument(
            py,
            format!("answer must be 'granted', 'denied' or 'unavailable', got {}", repr(answer)),
        )),
    }
}

fn output_object(py: Python<'_>, output: Output) -> PyResult<Py<PyAny>> {
    let output = match output {
        Output::Send(id) => PyOutput::Send { id },
        Output::Fail(id, reason) => PyOutput::fail(id, reason),
        Output::Observe(observation) => PyOutput::observe(observation),
        Output::Reserve(reservation) => PyOutput::reserve(reservation),
        Output::Share(update) => PyOutput::share(update),
        Output::WaitUntil(at_ns) => PyOutput::WaitUntil { at_ns },
        Output::Idle => return Ok(idle(py).clone_ref(py).into_any()),
    };
    Ok(output.into_pyobject(py)?.into_any().unbind())
}

fn disposition<'py>(py: Python<'py>, d: Disposition) -> &'py Bound<'py, PyString> {
    match d {
        Disposition::Complete => intern!(py, "complete"),
        Disposition::Retry => intern!(py, "retry"),
        Disposition::Failed => intern!(py, "failed"),
    }
}

// ------------------------------------------------------------------------------ Limiter

/// The sans-IO rate limiter, one to one with `ratelane::Limiter`. Times are integer
/// nanoseconds from an epoch of the caller's choice (`time.monotonic_ns()`).
#[pyclass(module = "ratelane", subclass)]
#[derive(Debug)]
pub struct Limiter {
    inner: ratelane::Limiter,
}

#[pymethods]
impl Limiter {
    #[new]
    #[pyo3(signature = (config_json = None))]
    fn new(py: Python<'_>, config_json: Option<&str>) -> PyResult<Self> {
        let config = ratelane::json::config_from_json(config_json.unwrap_or("{}"))
            .map_err(|e| core_error(py, e))?;
        let inner = ratelane::Limiter::new(config).map_err(|e| core_error(py, e))?;
        Ok(Limiter { inner })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (now_ns, method, path, *, major = None, identity = None, deadline_ns = None,
                        defer_after_ns = None, priority = 0, idempotent = None, global_exempt = None, sub_limit = None,
                        body_keys = None, costs = None))]
    fn enqueue(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_str)] method: String,
        #[pyo3(from_py_with = arg_str)] path: String,
        #[pyo3(from_py_with = arg_opt_str)] major: Option<String>,
        #[pyo3(from_py_with = arg_opt_str)] identity: Option<String>,
        #[pyo3(from_py_with = arg_opt_ns)] deadline_ns: Option<u64>,
        #[pyo3(from_py_with = arg_opt_ns)] defer_after_ns: Option<u64>,
        #[pyo3(from_py_with = arg_priority)] priority: i32,
        #[pyo3(from_py_with = arg_opt_bool)] idempotent: Option<bool>,
        #[pyo3(from_py_with = arg_opt_bool)] global_exempt: Option<bool>,
        #[pyo3(from_py_with = arg_opt_str)] sub_limit: Option<String>,
        #[pyo3(from_py_with = arg_body_keys)] body_keys: Option<Vec<String>>,
        #[pyo3(from_py_with = arg_costs)] costs: Option<Vec<(String, u64)>>,
    ) -> PyResult<u64> {
        let r = request(method, path, major, identity, deadline_ns, defer_after_ns, priority, idempotent, global_exempt, sub_limit, body_keys, costs);
        self.inner.enqueue(now_ns, r).map_err(|e| core_error(py, e))
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (now_ns, id, status, headers = None, *, retry_after = None, global_ = None,
                        wall_clock_ms = None, cost = None, errors = None, usage = None))]
    fn handle_response<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_id)] id: u64,
        #[pyo3(from_py_with = arg_status)] status: u16,
        headers: Option<&Bound<'py, PyAny>>,
        #[pyo3(from_py_with = arg_opt_f64)] retry_after: Option<f64>,
        #[pyo3(from_py_with = arg_opt_bool)] global_: Option<bool>,
        #[pyo3(from_py_with = arg_opt_ns)] wall_clock_ms: Option<u64>,
        #[pyo3(from_py_with = arg_cost)] cost: Option<ratelane::QueryCost>,
        #[pyo3(from_py_with = arg_errors)] errors: Option<Vec<String>>,
        #[pyo3(from_py_with = arg_usage)] usage: Option<Vec<(String, f64)>>,
    ) -> PyResult<Bound<'py, PyString>> {
        let owned = match headers {
            Some(h) if !h.is_none() => arg_headers(h)?,
            _ => Vec::new(),
        };
        let pairs = owned
            .iter()
            .map(|(n, v)| Ok((header_text(n)?, header_text(v)?)))
            .collect::<PyResult<Vec<(&str, &str)>>>()?;
        let response = Response {
            status,
            headers: &pairs,
            body: BodyHints {
                retry_after,
                global: global_,
                cost,
                errors: errors.unwrap_or_default(),
                usage: usage.unwrap_or_default(),
            },
            wall_clock_ms,
        };
        let d = self.inner.handle_response(now_ns, id, &response).map_err(|e| core_error(py, e))?;
        Ok(disposition(py, d).clone())
    }

    /// Whether the profile reads the body of an answer with this status
    /// (`HeaderProfile::reads_body`).
    fn reads_body(&self, status: i64) -> bool {
        u16::try_from(status).is_ok_and(|s| self.inner.config().profile.reads_body(s))
    }

    fn handle_failure<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_id)] id: u64,
        failure: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyString>> {
        let text = failure.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok());
        let failure = match text {
            Some("not_sent") => Failure::NotSent,
            Some("maybe_sent") => Failure::MaybeSent,
            _ => {
                return Err(invalid_argument(
                    py,
                    format!("failure must be 'not_sent' or 'maybe_sent', got {}", repr(failure)),
                ));
            }
        };
        let d = self.inner.handle_failure(now_ns, id, failure).map_err(|e| core_error(py, e))?;
        Ok(disposition(py, d).clone())
    }

    fn handle_written(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_id)] id: u64,
    ) -> PyResult<()> {
        self.inner.handle_written(now_ns, id).map_err(|e| core_error(py, e))
    }

    fn cancel(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_id)] id: u64,
    ) -> PyResult<()> {
        self.inner.cancel(now_ns, id).map_err(|e| core_error(py, e))
    }

    fn handle_timeout(&mut self, #[pyo3(from_py_with = arg_ns)] now_ns: u64) {
        self.inner.handle_timeout(now_ns)
    }

    /// Shared mode: the store's answer to request `id`'s `Reserve`.
    #[pyo3(signature = (now_ns, id, answer, *, retry_after_ns = None, scope = None, processes = None, leased = None, store_time_ns = None))]
    #[allow(clippy::too_many_arguments)]
    fn handle_reservation(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_id)] id: u64,
        answer: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = arg_opt_ns)] retry_after_ns: Option<u64>,
        scope: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg_opt_processes)] processes: Option<u32>,
        #[pyo3(from_py_with = arg_opt_leased)] leased: Option<u32>,
        #[pyo3(from_py_with = arg_opt_ns)] store_time_ns: Option<u64>,
    ) -> PyResult<()> {
        let answer = reservation_answer(py, answer, retry_after_ns, scope, processes, leased, store_time_ns)?;
        self.inner.handle_reservation(now_ns, id, answer).map_err(|e| core_error(py, e))
    }

    fn close(&mut self, #[pyo3(from_py_with = arg_ns)] now_ns: u64) {
        self.inner.close(now_ns)
    }

    fn poll_output(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        output_object(py, self.inner.poll_output())
    }

    /// Every output up to and including the first `WaitUntil` or `Idle`.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        loop {
            let output = self.inner.poll_output();
            let last = matches!(output, Output::WaitUntil(_) | Output::Idle);
            list.append(output_object(py, output)?)?;
            if last {
                return Ok(list);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (now_ns, method, path, *, major = None, identity = None, deadline_ns = None,
                        defer_after_ns = None, priority = 0, idempotent = None, global_exempt = None, sub_limit = None,
                        body_keys = None, costs = None))]
    fn predict(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_str)] method: String,
        #[pyo3(from_py_with = arg_str)] path: String,
        #[pyo3(from_py_with = arg_opt_str)] major: Option<String>,
        #[pyo3(from_py_with = arg_opt_str)] identity: Option<String>,
        #[pyo3(from_py_with = arg_opt_ns)] deadline_ns: Option<u64>,
        #[pyo3(from_py_with = arg_opt_ns)] defer_after_ns: Option<u64>,
        #[pyo3(from_py_with = arg_priority)] priority: i32,
        #[pyo3(from_py_with = arg_opt_bool)] idempotent: Option<bool>,
        #[pyo3(from_py_with = arg_opt_bool)] global_exempt: Option<bool>,
        #[pyo3(from_py_with = arg_opt_str)] sub_limit: Option<String>,
        #[pyo3(from_py_with = arg_body_keys)] body_keys: Option<Vec<String>>,
        #[pyo3(from_py_with = arg_costs)] costs: Option<Vec<(String, u64)>>,
    ) -> PyResult<u64> {
        let r = request(method, path, major, identity, deadline_ns, defer_after_ns, priority, idempotent, global_exempt, sub_limit, body_keys, costs);
        self.inner.predict(now_ns, &r).map(|p| p.send_at).map_err(|e| core_error(py, e))
    }

    #[getter]
    fn queued(&self) -> usize {
        self.inner.queued()
    }

    #[getter]
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    /// Shared mode: requests waiting for their reservation's answer.
    #[getter]
    fn reserving(&self) -> usize {
        self.inner.reserving()
    }

    /// The invalid-request budget used at `now_ns`: the 401/403/non-shared 429 answers counted
    /// within the window. A read: changes nothing.
    fn invalid_requests(&self, #[pyo3(from_py_with = arg_ns)] now_ns: u64) -> u32 {
        self.inner.invalid_requests(now_ns)
    }

    #[getter]
    fn buckets(&self) -> usize {
        self.inner.buckets()
    }

    #[getter]
    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Every setting, in the JSON form the constructor reads.
    fn config_json(&self) -> String {
        ratelane::json::config_to_json(self.inner.config())
    }

    /// What the limiter learned, as the core's snapshot JSON text (`ratelane::snapshot`).
    fn snapshot(
        &self,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_ns)] wall_clock_ms: u64,
    ) -> String {
        self.inner.snapshot(now_ns, wall_clock_ms).to_json()
    }

    /// Restores a snapshot's JSON text: the core reads and checks it, then restores it.
    fn restore(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_ns)] wall_clock_ms: u64,
        #[pyo3(from_py_with = arg_str)] snapshot: String,
    ) -> PyResult<()> {
        ratelane::snapshot::Snapshot::from_json(&snapshot)
            .and_then(|s| self.inner.restore(now_ns, wall_clock_ms, &s))
            .map_err(|e| core_error(py, e))
    }
}

// ------------------------------------------------------------------------------ simulator

fn server_from_json(py: Python<'_>, text: Option<&str>) -> PyResult<sim::Server> {
    // The core's parser checks everything `Server::new` asserts (known buckets, non-zero
    // windows), so a bad configuration is an InvalidConfigError, never a panic.
    let config = ratelane::json::server_config_from_json(text.unwrap_or("{}"))
        .map_err(|e| core_error(py, e))?;
    Ok(sim::Server::new(config))
}

/// The simulator's model of Discord's server (`ratelane::sim::Server`).
#[pyclass(module = "ratelane.sim", name = "Server")]
#[derive(Debug)]
pub struct SimServer {
    inner: sim::Server,
    next_tag: u64,
}

#[pymethods]
impl SimServer {
    #[new]
    #[pyo3(signature = (server_config_json = None))]
    fn new(py: Python<'_>, server_config_json: Option<&str>) -> PyResult<Self> {
        Ok(SimServer { inner: server_from_json(py, server_config_json)?, next_tag: 0 })
    }

    /// The server's answer to a request arriving at `now_ns`; `tokens`: what it costs of the
    /// token budget (`Server::handle_costing`), else the budget's `cost`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (now_ns, method, path, *, major = None, identity = None, global_exempt = None,
                        body_keys = None, tokens = None))]
    fn handle<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = arg_ns)] now_ns: u64,
        #[pyo3(from_py_with = arg_str)] method: String,
        #[pyo3(from_py_with = arg_str)] path: String,
        #[pyo3(from_py_with = arg_opt_str)] major: Option<String>,
        #[pyo3(from_py_with = arg_opt_str)] identity: Option<String>,
        #[pyo3(from_py_with = arg_opt_bool)] global_exempt: Option<bool>,
        #[pyo3(from_py_with = arg_body_keys)] body_keys: Option<Vec<String>>,
        #[pyo3(from_py_with = arg_opt_tokens)] tokens: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let r = request(method, path, major, identity, None, None, 0, None, global_exempt, None, body_keys, None);
        self.next_tag += 1;
        let answer = self.inner.handle_costing(now_ns, self.next_tag, &r, tokens);
        let dict = PyDict::new(py);
        dict.set_item("status", answer.status)?;
        dict.set_item("headers", answer.headers)?;
        dict.set_item("retry_after", answer.body.retry_after)?;
        dict.set_item("global_", answer.body.global)?;
        let usage = PyDict::new(py);
        for (name, value) in &answer.body.usage {
            usage.set_item(name, *value)?;
        }
        dict.set_item("usage", usage)?;
        dict.set_item("body_text", answer.body_text)?;
        Ok(dict)
    }

    /// How many answers were 429s.
    fn count_429(&self) -> usize {
        self.inner.count_429()
    }
}

/// A limiter, a simulated server and a network in virtual time (`ratelane::sim::Simulation`).
#[pyclass(module = "ratelane.sim", name = "Simulation")]
#[derive(Debug)]
pub struct Simulation {
    inner: sim::Simulation,
    scheduled: usize,
}

#[pymethods]
impl Simulation {
    #[new]
    #[pyo3(signature = (config_json = None, server_config_json = None, sim_config_json = None))]
    fn new(
        py: Python<'_>,
        config_json: Option<&str>,
        server_config_json: Option<&str>,
        sim_config_json: Option<&str>,
    ) -> PyResult<Self> {
        let config = ratelane::json::config_from_json(config_json.unwrap_or("{}"))
            .map_err(|e| core_error(py, e))?;
        let limiter = ratelane::Limiter::new(config).map_err(|e| core_error(py, e))?;
        let server = server_from_json(py, server_config_json)?;
        let net = ratelane::json::sim_config_from_json(sim_config_json.unwrap_or("{}"))
            .map_err(|e| core_error(py, e))?;
        Ok(Simulation { inner: sim::Simulation::new(limiter, server, net), scheduled: 0 })
    }

    /// Schedules a request to be enqueued at `at_ns`; returns its ticket.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (at_ns, method, path, *, major = None, identity = None, deadline_ns = None,
                        defer_after_ns = None, priority = 0, idempotent = None, global_exempt = None, sub_limit = None,
                        body_keys = None, costs = None))]
    fn enqueue_at(
        &mut self,
        #[pyo3(from_py_with = arg_ns)] at_ns: u64,
        #[pyo3(from_py_with = arg_str)] method: String,
        #[pyo3(from_py_with = arg_str)] path: String,
        #[pyo3(from_py_with = arg_opt_str)] major: Option<String>,
        #[pyo3(from_py_with = arg_opt_str)] identity: Option<String>,
        #[pyo3(from_py_with = arg_opt_ns)] deadline_ns: Option<u64>,
        #[pyo3(from_py_with = arg_opt_ns)] defer_after_ns: Option<u64>,
        #[pyo3(from_py_with = arg_priority)] priority: i32,
        #[pyo3(from_py_with = arg_opt_bool)] idempotent: Option<bool>,
        #[pyo3(from_py_with = arg_opt_bool)] global_exempt: Option<bool>,
        #[pyo3(from_py_with = arg_opt_str)] sub_limit: Option<String>,
        #[pyo3(from_py_with = arg_body_keys)] body_keys: Option<Vec<String>>,
        #[pyo3(from_py_with = arg_costs)] costs: Option<Vec<(String, u64)>>,
    ) -> usize {
        let r = request(method, path, major, identity, deadline_ns, defer_after_ns, priority, idempotent, global_exempt, sub_limit, body_keys, costs);
        self.scheduled += 1;
        self.inner.enqueue_at(at_ns, r).0
    }

    fn cancel_at(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ns)] at_ns: u64,
        #[pyo3(from_py_with = arg_ticket)] ticket: usize,
    ) -> PyResult<()> {
        self.check_ticket(py, ticket)?;
        self.inner.cancel_at(at_ns, sim::Ticket(ticket));
        Ok(())
    }

    fn close_at(&mut self, #[pyo3(from_py_with = arg_ns)] at_ns: u64) {
        self.inner.close_at(at_ns)
    }

    /// Decides the network's fate for send number `attempt` (0 first) of `ticket`:
    /// `"deliver"`, `"not_sent"`, `"maybe_sent_arrived"` or `"maybe_sent_lost"`.
    fn script_send(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg_ticket)] ticket: usize,
        #[pyo3(from_py_with = arg_ticket)] attempt: usize,
        fate: &str,
    ) -> PyResult<()> {
        self.check_ticket(py, ticket)?;
        let fate = match fate {
            "deliver" => Fate::Deliver,
            "not_sent" => Fate::NotSent,
            "maybe_sent_arrived" => Fate::MaybeSent { arrives: true },
            "maybe_sent_lost" => Fate::MaybeSent { arrives: false },
            other => {
                return Err(invalid_argument(
                    py,
                    format!(
                        "fate must be 'deliver', 'not_sent', 'maybe_sent_arrived' or \
                         'maybe_sent_lost', got {other:?}"
                    ),
                ));
            }
        };
        self.inner.script_send(sim::Ticket(ticket), attempt, fate);
        Ok(())
    }

    /// Runs until everything ended (or a limit); returns the report as JSON text.
    fn run(&mut self, py: Python<'_>) -> PyResult<String> {
        self.run_until(py, u64::MAX)
    }

    /// Runs until virtual time `until_ns`; returns the report as JSON text.
    fn run_until(&mut self, py: Python<'_>, #[pyo3(from_py_with = arg_ns)] until_ns: u64) -> PyResult<String> {
        match self.inner.run_until(until_ns) {
            Ok(report) => Ok(ratelane::json::report_to_json(&report)),
            Err(e) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("at_ns", e.at)?;
                kwargs.set_item("trace", e.trace.clone())?;
                Err(exception(py, "SimulationContractError", e.to_string(), Some(&kwargs)))
            }
        }
    }

    /// The current virtual time.
    #[getter]
    fn now_ns(&self) -> u64 {
        self.inner.now()
    }
}

impl Simulation {
    fn check_ticket(&self, py: Python<'_>, ticket: usize) -> PyResult<()> {
        if ticket < self.scheduled {
            Ok(())
        } else {
            Err(invalid_argument(py, format!("unknown ticket {ticket}")))
        }
    }
}


// ------------------------------------------------------------------------------ module

#[pymodule(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Limiter>()?;
    m.add_class::<PyOutput>()?;
    // Each variant's class under its own name as well (`Send` is `Output.Send`).
    let output = m.py().get_type::<PyOutput>();
    for name in output.dir()? {
        let value = output.getattr(name.cast::<PyString>()?)?;
        if let Ok(class) = value.cast::<PyType>()
            && class.is_subclass(&output)?
            && !class.is(&output)
        {
            m.add(name.cast_into::<PyString>()?, class)?;
        }
    }
    m.add_class::<Idle>()?;
    m.add_class::<SimServer>()?;
    m.add_class::<Simulation>()?;
    m.add("FAIL_CODES", FailReason::ALL_CODES.to_vec())?;
    m.add("ERROR_CODES", Error::ALL_CODES.to_vec())?;
    m.add("PROFILES", ratelane::HeaderProfile::NAMES.to_vec())?;
    m.add("CORE_VERSION", env!("CARGO_PKG_VERSION"))?;
    // The shared store's script for `ratelane.redis`, embedded at build time so that the
    // installed package carries it. `bindings-python/shared_store.lua` is a symlink to the one
    // source, redis/scripts/shared_store.lua (cargo and maturin's sdist copy the file itself).
    m.add("SHARED_STORE_LUA", include_str!("../shared_store.lua"))?;
    // The server-side limit and store, and their scripts, the same way (`server.rs`).
    server::register(m)?;
    // The shared store's arguments and answers, the core's wire format (`store.rs`).
    store::register(m)?;
    if m.py().version_info() < (3, 9) {
        return Err(PyRuntimeError::new_err("ratelane needs CPython 3.9 or newer"));
    }
    Ok(())
}
