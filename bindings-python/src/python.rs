//! The pyo3 classes of `ratelane._core`: the sans-IO `Limiter`, its output classes and the
//! simulator. Conversions only; errors become the classes of `ratelane._errors`.
//!
//! Hot-path choices (measured in `bench/`): no JSON on `enqueue`/`handle_response`/`drain`;
//! outputs are small frozen classes; `Idle` is one shared instance; dispositions are interned
//! strings; headers are borrowed from the Python strings where the stable ABI allows it.


use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyMapping, PyString, PyTuple};

use ratelane::sim::{self, Fate};
use ratelane::{
    BodyHints, Disposition, Error, FailReason, Failure, Observation, Output, Request, Response,
};

use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};

use crate::{error_class_name, fail_class_name, observation_class_name, update_class_name};

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

/// The exception a request that ended with `reason` raises in the driver.
fn fail_exception<'py>(py: Python<'py>, id: u64, reason: &FailReason) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("request_id", id)?;
    match reason {
        FailReason::DeadlineExceeded { predicted_send_at } => {
            kwargs.set_item("predicted_send_at_ns", *predicted_send_at)?
        }
        FailReason::MaxWaitExceeded { predicted_wait } => {
            kwargs.set_item("predicted_wait_ns", *predicted_wait)?
        }
        FailReason::Deferred { retry_at } => kwargs.set_item("retry_at_ns", *retry_at)?,
        FailReason::RetriesExhausted { attempts } | FailReason::NetworkError { attempts } => {
            kwargs.set_item("attempts", *attempts)?
        }
        FailReason::InsufficientCapacity { dimension, cost, limit } => {
            kwargs.set_item("dimension", dimension)?;
            kwargs.set_item("cost", *cost)?;
            kwargs.set_item("limit", *limit)?;
        }
        FailReason::MaybeSent | FailReason::Unauthorized | FailReason::Closed => {}
    }
    exception_value(py, fail_class_name(reason), reason.to_string(), Some(&kwargs))
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

fn arg_ns(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    obj.extract::<u64>().map_err(|_| {
        invalid_argument(
            obj.py(),
            format!("a time or duration must be an int of nanoseconds >= 0, got {}", repr(obj)),
        )
    })
}

fn arg_opt_ns(obj: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    if obj.is_none() { Ok(None) } else { arg_ns(obj).map(Some) }
}

/// A count the store gave (`processes`): `None`, or an int >= 0; one above `u32::MAX` reads
/// as `u32::MAX` (the core tolerates any count).
fn arg_opt_count(obj: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.extract::<u64>() {
        Ok(n) => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
        Err(_) => Err(invalid_argument(obj.py(), format!("processes must be an int >= 0 or None, got {}", repr(obj)))),
    }
}

/// `leased` of an answer: `None`, or an int >= 0 (one above `u32::MAX` reads as `u32::MAX`).
fn arg_opt_leased(obj: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.extract::<u64>() {
        Ok(n) => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
        Err(_) => Err(invalid_argument(obj.py(), format!("leased must be an int >= 0 or None, got {}", repr(obj)))),
    }
}

fn arg_id(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    obj.extract::<u64>().map_err(|_| {
        invalid_argument(obj.py(), format!("a request id must be an int >= 0, got {}", repr(obj)))
    })
}

fn arg_ticket(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    obj.extract::<usize>().map_err(|_| {
        invalid_argument(obj.py(), format!("a ticket must be an int >= 0, got {}", repr(obj)))
    })
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
    obj.extract::<i32>().map_err(|_| {
        invalid_argument(obj.py(), format!("priority must be a 32-bit int, got {}", repr(obj)))
    })
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
    if obj.is_none() { Ok(None) } else { arg_str(obj).map(Some) }
}

/// `body_keys`: `None`, or an iterable of `str` (a dict gives its keys, so the JSON body itself
/// may be passed).
fn arg_body_keys(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let wrong = || {
        invalid_argument(obj.py(), format!("body_keys must be an iterable of str (or the JSON body's dict), got {}", repr(obj)))
    };
    if obj.is_instance_of::<PyString>() {
        return Err(wrong());
    }
    let mut keys = Vec::new();
    for key in obj.try_iter().map_err(|_| wrong())? {
        let key = key?;
        keys.push(key.extract::<String>().map_err(|_| wrong())?);
    }
    Ok(Some(keys))
}

fn arg_opt_bool(obj: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    if obj.is_none() {
        return Ok(None);
    }
    obj.extract::<bool>().map(Some).map_err(|_| {
        invalid_argument(obj.py(), format!("expected a bool or None, got {}", repr(obj)))
    })
}

fn arg_opt_f64(obj: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if obj.is_none() {
        return Ok(None);
    }
    obj.extract::<f64>().map(Some).map_err(|_| {
        invalid_argument(obj.py(), format!("retry_after must be a number of seconds or None, got {}", repr(obj)))
    })
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

/// `tokens` of the simulated server's `handle`: `None`, or an int >= 0.
fn arg_opt_tokens(obj: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.extract::<u64>() {
        Ok(n) if !obj.is_instance_of::<PyBool>() => Ok(Some(n)),
        _ => Err(invalid_argument(obj.py(), format!("tokens must be an int >= 0 or None, got {}", repr(obj)))),
    }
}

/// `errors`: `None`, or an iterable of `str` (not a `str` itself).
fn arg_errors(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let wrong = || invalid_argument(obj.py(), format!("errors must be an iterable of str, got {}", repr(obj)));
    if obj.is_instance_of::<PyString>() {
        return Err(wrong());
    }
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| wrong())? {
        out.push(item?.extract::<String>().map_err(|_| wrong())?);
    }
    Ok(Some(out))
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

/// `Send(id)`: send request `id` now.
#[pyclass(module = "ratelane", frozen, eq)]
#[derive(Debug, PartialEq)]
pub struct Send {
    /// The request id.
    #[pyo3(get)]
    id: u64,
}

#[pymethods]
impl Send {
    #[new]
    fn new(id: u64) -> Self {
        Send { id }
    }
    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("id",)
    }
    fn __repr__(&self) -> String {
        format!("Send(id={})", self.id)
    }
}

/// `Fail(id, ...)`: request `id` ended without being answered.
#[pyclass(module = "ratelane", frozen, eq)]
#[derive(Debug, PartialEq)]
pub struct Fail {
    #[pyo3(get)]
    id: u64,
    reason: FailReason,
}

#[pymethods]
impl Fail {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("id", "code")
    }
    /// The stable failure code (`deadline_exceeded`, `max_wait_exceeded`, ...).
    #[getter]
    fn code(&self) -> &'static str {
        self.reason.code()
    }
    /// The core's description of the failure.
    #[getter]
    fn message(&self) -> String {
        self.reason.to_string()
    }
    /// `deadline_exceeded`: when the core predicted the request could be sent, if it could.
    #[getter]
    fn predicted_send_at_ns(&self) -> Option<u64> {
        match self.reason {
            FailReason::DeadlineExceeded { predicted_send_at } => predicted_send_at,
            _ => None,
        }
    }
    /// `max_wait_exceeded`: the predicted wait.
    #[getter]
    fn predicted_wait_ns(&self) -> Option<u64> {
        match self.reason {
            FailReason::MaxWaitExceeded { predicted_wait } => Some(predicted_wait),
            _ => None,
        }
    }
    /// `deferred`: the predicted send time (monotonic ns), when to enqueue the request again.
    #[getter]
    fn retry_at_ns(&self) -> Option<u64> {
        match self.reason {
            FailReason::Deferred { retry_at } => Some(retry_at),
            _ => None,
        }
    }
    /// `insufficient_capacity`: the dimension whose whole limit the estimate exceeds.
    #[getter]
    fn dimension(&self) -> Option<&str> {
        match &self.reason {
            FailReason::InsufficientCapacity { dimension, .. } => Some(dimension),
            _ => None,
        }
    }
    /// `insufficient_capacity`: the request's estimated cost in that dimension.
    #[getter]
    fn cost(&self) -> Option<u64> {
        match self.reason {
            FailReason::InsufficientCapacity { cost, .. } => Some(cost),
            _ => None,
        }
    }
    /// `insufficient_capacity`: the dimension's limit, as the server reported it.
    #[getter]
    fn limit(&self) -> Option<u64> {
        match self.reason {
            FailReason::InsufficientCapacity { limit, .. } => Some(limit),
            _ => None,
        }
    }
    /// `retries_exhausted`, `network_error`: how many times the request was tried.
    #[getter]
    fn attempts(&self) -> Option<u32> {
        match self.reason {
            FailReason::RetriesExhausted { attempts } | FailReason::NetworkError { attempts } => {
                Some(attempts)
            }
            _ => None,
        }
    }
    /// The `ratelane.RateLimitError` subclass instance for this failure (not raised).
    fn exception<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        fail_exception(py, self.id, &self.reason)
    }
    fn __repr__(&self) -> String {
        format!("Fail(id={}, code={:?})", self.id, self.reason.code())
    }
}

/// `RateLimited(id, scope, retry_after_ns)`: a 429 was received (an observation).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct RateLimited {
    id: u64,
    scope: &'static str,
    retry_after_ns: u64,
}

#[pymethods]
impl RateLimited {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str) {
        ("id", "scope", "retry_after_ns")
    }
    fn __repr__(&self) -> String {
        format!(
            "RateLimited(id={}, scope={:?}, retry_after_ns={})",
            self.id, self.scope, self.retry_after_ns
        )
    }
}

/// `BucketLearned(route, bucket)`: a route was mapped to a bucket (an observation).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct BucketLearned {
    route: String,
    bucket: String,
}

#[pymethods]
impl BucketLearned {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("route", "bucket")
    }
    fn __repr__(&self) -> String {
        format!("BucketLearned(route={:?}, bucket={:?})", self.route, self.bucket)
    }
}

/// `InvalidRequestWarning(count, limit)`: the invalid-request count crossed the warning level.
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct InvalidRequestWarning {
    count: u32,
    limit: u32,
}

#[pymethods]
impl InvalidRequestWarning {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("count", "limit")
    }
    fn __repr__(&self) -> String {
        format!("InvalidRequestWarning(count={}, limit={})", self.count, self.limit)
    }
}

/// `WaitUntil(at_ns)`: drained; call `handle_timeout` at `at_ns` (earlier is harmless).
#[pyclass(module = "ratelane", frozen, eq)]
#[derive(Debug, PartialEq)]
pub struct WaitUntil {
    #[pyo3(get)]
    at_ns: u64,
}

#[pymethods]
impl WaitUntil {
    #[new]
    fn new(at_ns: u64) -> Self {
        WaitUntil { at_ns }
    }
    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("at_ns",)
    }
    fn __repr__(&self) -> String {
        format!("WaitUntil(at_ns={})", self.at_ns)
    }
}

/// `Idle()`: drained, and nothing waits on time. One shared instance.
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

// ------------------------------------------------------------------------------ shared mode

/// `Reserve(id, ...)`: shared mode; ask the store whether request `id` may be sent, then
/// answer with `Limiter.handle_reservation` (`ratelane::shared::Reservation`).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct Reserve {
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
}

#[pymethods]
impl Reserve {
    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("id",)
    }
    fn __repr__(&self) -> String {
        format!(
            "Reserve(id={}, identity={:?}, route={:?}, major={:?}, bucket={})",
            self.id,
            self.identity,
            self.route,
            self.major,
            py_opt_str(self.bucket.as_deref())
        )
    }
}

fn py_opt_str(s: Option<&str>) -> String {
    s.map_or_else(|| "None".to_string(), |s| format!("{s:?}"))
}

/// `ShareBucket(id, ...)`: shared mode; a response's report on its bucket, for the store
/// (`SharedUpdate::Bucket`). Write it fire-and-forget, in order.
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct ShareBucket {
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
}

#[pymethods]
impl ShareBucket {
    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("id",)
    }
    fn __repr__(&self) -> String {
        format!(
            "ShareBucket(id={}, route={:?}, major={:?}, bucket={}, remaining={:?})",
            self.id,
            self.route,
            self.major,
            py_opt_str(self.bucket.as_deref()),
            self.remaining
        )
    }
}

/// `ShareRelease(id, ...)`: shared mode; a granted request will not be answered
/// (`SharedUpdate::Release`).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct ShareRelease {
    id: u64,
    identity: String,
    route: String,
    major: String,
    bucket: Option<String>,
    reached: bool,
    window_ns: Option<u64>,
}

#[pymethods]
impl ShareRelease {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("id", "reached")
    }
    fn __repr__(&self) -> String {
        format!(
            "ShareRelease(id={}, route={:?}, major={:?}, reached={})",
            self.id,
            self.route,
            self.major,
            if self.reached { "True" } else { "False" }
        )
    }
}

/// `ShareHold(scope, ...)`: shared mode; everyone must hold `scope` for `retry_after_ns`
/// (`SharedUpdate::Hold`).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct ShareHold {
    scope: &'static str,
    identity: String,
    route: String,
    major: String,
    bucket: Option<String>,
    retry_after_ns: u64,
}

#[pymethods]
impl ShareHold {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("scope", "retry_after_ns")
    }
    fn __repr__(&self) -> String {
        format!(
            "ShareHold(scope={:?}, route={:?}, major={:?}, retry_after_ns={})",
            self.scope, self.route, self.major, self.retry_after_ns
        )
    }
}

/// `ShareInvalid(id, window_ns)`: shared mode; request `id` got an invalid response
/// (`SharedUpdate::Invalid`).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct ShareInvalid {
    id: u64,
    window_ns: u64,
}

#[pymethods]
impl ShareInvalid {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("id", "window_ns")
    }
    fn __repr__(&self) -> String {
        format!("ShareInvalid(id={}, window_ns={})", self.id, self.window_ns)
    }
}

/// `StoreUnavailable(id, retry_at_ns)`: shared mode; the store could not answer request
/// `id`'s reservation; it is asked again from `retry_at_ns` (an observation).
#[pyclass(module = "ratelane", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct StoreUnavailable {
    id: u64,
    retry_at_ns: u64,
}

#[pymethods]
impl StoreUnavailable {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("id", "retry_at_ns")
    }
    fn __repr__(&self) -> String {
        format!("StoreUnavailable(id={}, retry_at_ns={})", self.id, self.retry_at_ns)
    }
}

/// `StoreRecovered()`: shared mode; the store answers again (an observation).
#[pyclass(module = "ratelane", frozen, eq)]
#[derive(Debug, PartialEq)]
pub struct StoreRecovered;

#[pymethods]
impl StoreRecovered {
    #[new]
    fn new() -> Self {
        StoreRecovered
    }
    fn __repr__(&self) -> &'static str {
        "StoreRecovered()"
    }
}

fn reserve_object(py: Python<'_>, r: Reservation) -> PyResult<Py<PyAny>> {
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
    Ok(Py::new(
        py,
        Reserve {
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
        },
    )?
    .into_any())
}

fn share_object(py: Python<'_>, update: SharedUpdate) -> PyResult<Py<PyAny>> {
    debug_assert!(!update_class_name(&update).is_empty());
    Ok(match update {
        SharedUpdate::Bucket {
            id,
            identity,
            route,
            major,
            bucket,
            unlimited,
            limit,
            remaining,
            reset_after,
            window,
        } => Py::new(
            py,
            ShareBucket {
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
            },
        )?
        .into_any(),
        SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => Py::new(
            py,
            ShareRelease { id, identity, route, major, bucket, reached, window_ns: window },
        )?
        .into_any(),
        SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => Py::new(
            py,
            ShareHold { scope: scope.as_str(), identity, route, major, bucket, retry_after_ns: retry_after },
        )?
        .into_any(),
        SharedUpdate::Invalid { id, window } => {
            Py::new(py, ShareInvalid { id, window_ns: window })?.into_any()
        }
    })
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
    Ok(match output {
        Output::Send(id) => Py::new(py, Send { id })?.into_any(),
        Output::Fail(id, reason) => Py::new(py, Fail { id, reason })?.into_any(),
        Output::Observe(observation) => {
            debug_assert!(!observation_class_name(&observation).is_empty());
            match observation {
                Observation::RateLimited { id, scope, retry_after } => Py::new(
                    py,
                    RateLimited { id, scope: scope.as_str(), retry_after_ns: retry_after },
                )?
                .into_any(),
                Observation::BucketLearned { route, bucket } => {
                    Py::new(py, BucketLearned { route, bucket })?.into_any()
                }
                Observation::InvalidRequestWarning { count, limit } => {
                    Py::new(py, InvalidRequestWarning { count, limit })?.into_any()
                }
                Observation::StoreUnavailable { id, retry_at } => {
                    Py::new(py, StoreUnavailable { id, retry_at_ns: retry_at })?.into_any()
                }
                Observation::StoreRecovered => Py::new(py, StoreRecovered)?.into_any(),
            }
        }
        Output::Reserve(reservation) => reserve_object(py, reservation)?,
        Output::Share(update) => share_object(py, update)?,
        Output::WaitUntil(at_ns) => Py::new(py, WaitUntil { at_ns })?.into_any(),
        Output::Idle => idle(py).clone_ref(py).into_any(),
    })
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
        #[pyo3(from_py_with = arg_opt_count)] processes: Option<u32>,
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
    m.add_class::<Send>()?;
    m.add_class::<Fail>()?;
    m.add_class::<RateLimited>()?;
    m.add_class::<BucketLearned>()?;
    m.add_class::<InvalidRequestWarning>()?;
    m.add_class::<Reserve>()?;
    m.add_class::<ShareBucket>()?;
    m.add_class::<ShareRelease>()?;
    m.add_class::<ShareHold>()?;
    m.add_class::<ShareInvalid>()?;
    m.add_class::<StoreUnavailable>()?;
    m.add_class::<StoreRecovered>()?;
    m.add_class::<WaitUntil>()?;
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
