//! The pyo3 module `ratelane._core`: the sans-IO `Limiter` and its native outputs
//! (`limiter.rs`), the simulator (`sim.rs`), the server-side limits (`server.rs`) and the
//! shared store's encoding (`store.rs`). Conversions only; errors become the classes of
//! `ratelane._errors`.
//!
//! Arguments are read with pyo3's own conversions, and only when one fails (or for the shapes
//! only Python reads: any mapping, any iterable of pairs) does `ratelane._args` name the
//! mistake or give the value in the shape read here. Hot-path choices (measured in `bench/`):
//! no JSON on `enqueue`/`handle_response`/`drain`; headers borrowed from the Python strings.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};

use ratelane::{Error, FailReason};

mod limiter;
mod llm;
mod server;
mod sim;
mod store;

// ------------------------------------------------------------------------------ errors

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static ARGS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The Python module `name`, imported once.
fn module<'py>(py: Python<'py>, cell: &'static PyOnceLock<Py<PyModule>>, name: &str) -> PyResult<&'py Bound<'py, PyModule>> {
    cell.get_or_try_init(py, || py.import(name).map(Bound::unbind)).map(|m| m.bind(py))
}

/// The exception to raise: the instance made, or the error making it raised.
fn raised(made: PyResult<Bound<'_, PyAny>>) -> PyErr {
    match made {
        Ok(value) => PyErr::from_value(value),
        Err(e) => e,
    }
}

/// `ratelane._errors.<class>(message, **kwargs)`, to raise.
fn exception(py: Python<'_>, class: &str, message: String, kwargs: Option<&Bound<'_, PyDict>>) -> PyErr {
    raised(module(py, &ERRORS, "ratelane._errors").and_then(|m| m.getattr(class)?.call((message,), kwargs)))
}

/// A caller error of the core, as its class in `ERROR_CLASSES` (with `request_id` if it has one).
/// (Attaches to the interpreter itself, so that a method needs no `py` only to raise.)
fn core_error(error: Error) -> PyErr {
    let id = match &error {
        Error::UnknownRequest(id) | Error::InvalidState { id, .. } => Some(*id),
        _ => None,
    };
    Python::attach(|py| {
        raised((|| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("request_id", id)?;
            let class = module(py, &ERRORS, "ratelane._errors")?.getattr("ERROR_CLASSES")?.get_item(error.code())?;
            class.call((error.to_string(),), Some(&kwargs))
        })())
    })
}

// ------------------------------------------------------------------------------ arguments

/// What `ratelane._args.<check>(obj)` gives (it raises `InvalidArgumentError` for a mistake).
fn normalized<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, check: &str) -> PyResult<T> {
    let args = module(obj.py(), &ARGS, "ratelane._args")?;
    args.call_method1(check, (obj,))?.extract::<T>().map_err(Into::into)
}

/// The `InvalidArgumentError` `ratelane._args.<check>` raises for `obj` (one it lets pass is
/// refused all the same: this module could not read it).
fn mistake(obj: &Bound<'_, PyAny>, check: &str) -> PyErr {
    match normalized::<Bound<'_, PyAny>>(obj, check) {
        Err(e) => e,
        Ok(_) => exception(obj.py(), "InvalidArgumentError", format!("{check}: cannot read {obj:?}"), None),
    }
}

/// `obj` read by pyo3 as a `T`, else what `ratelane._args.<check>` says of it.
fn checked<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, check: &str) -> PyResult<T> {
    obj.extract::<T>().or_else(|_| normalized(obj, check))
}

/// `None`, or what `ratelane._args.<check>` gives for `obj` (the shapes only Python reads).
fn opt_normalized<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, check: &str) -> PyResult<Option<T>> {
    if obj.is_none() { Ok(None) } else { normalized(obj, check).map(Some) }
}

/// The arguments pyo3 reads by itself, each checked by the `ratelane._args` function of its
/// name when it cannot.
macro_rules! checks {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        fn $name(obj: &Bound<'_, PyAny>) -> PyResult<$t> {
            checked(obj, stringify!($name))
        }
    )*};
}
checks!(ns: u64, opt_ns: Option<u64>, request_id: u64, ticket: usize, priority: i32, opt_bool: Option<bool>,
        body_keys: Option<Vec<String>>, retry_after: Option<f64>, errors: Option<Vec<String>>,
        weight: Option<u32>, factor: Option<f64>, max_keys: usize);

fn costs(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, u64)>>> {
    opt_normalized(obj, "costs")
}
/// A response's status, as the core checks it (`ratelane::Response::STATUSES`); anything else
/// (NaN, `'200'`, `None`, 42) is the `InvalidArgumentError` of `ratelane._args.status`.
fn status(obj: &Bound<'_, PyAny>) -> PyResult<u16> {
    match obj.extract::<u16>() {
        Ok(s) if ratelane::Response::STATUSES.contains(&s) => Ok(s),
        _ => normalized(obj, "status"),
    }
}
/// The numeric fields of an answer's `usage` object: the first `BodyHints::MAX_USAGE`.
fn usage(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, f64)>>> {
    let usage: Option<Vec<(String, f64)>> = opt_normalized(obj, "usage")?;
    Ok(usage.map(|u| u.into_iter().take(ratelane::BodyHints::MAX_USAGE).collect()))
}
/// Shopify's `extensions.cost`, as `ratelane._args.cost` orders its five numbers.
fn cost(obj: &Bound<'_, PyAny>) -> PyResult<Option<ratelane::QueryCost>> {
    let numbers: Option<[Option<f64>; 5]> = opt_normalized(obj, "cost")?;
    Ok(numbers.map(|[requested, actual, maximum_available, currently_available, restore_rate]| {
        ratelane::QueryCost { requested, actual, maximum_available, currently_available, restore_rate }
    }))
}

/// A `str`'s text, borrowed from it where the ABI allows (`utf8`), copied once into the core's.
fn text(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    match obj.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok()) {
        Some(text) => Ok(text.to_owned()),
        None => normalized(obj, "text"),
    }
}
/// A `str`'s text borrowed from it (a server-side key: no copy per check), else the
/// `InvalidArgumentError` of `ratelane._args.text` (a lone surrogate has no UTF-8).
fn borrowed_text<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<&'a str> {
    match obj.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok()) {
        Some(text) => Ok(text),
        None => Err(mistake(obj, "text")),
    }
}
fn opt_text(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if obj.is_none() { Ok(None) } else { text(obj).map(Some) }
}

type Header<'py> = (Bound<'py, PyString>, Bound<'py, PyString>);

/// Headers: a dict or a list of `(name, value)` tuples of `str` read here (the driver's and
/// the usual shapes), anything else (a mapping, an iterable of pairs) by `ratelane._args`.
fn headers<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Vec<Header<'py>>>> {
    let pair = |name: Bound<'py, PyAny>, value: Bound<'py, PyAny>| Some((name.cast_into().ok()?, value.cast_into().ok()?));
    let read = if let Ok(dict) = obj.cast::<PyDict>() {
        dict.iter().map(|(name, value)| pair(name, value)).collect()
    } else if let Ok(list) = obj.cast::<PyList>() {
        list.iter().map(|item| item.extract::<Header<'py>>().ok()).collect()
    } else {
        None
    };
    match read {
        Some(headers) => Ok(Some(headers)),
        None => normalized(obj, "headers").map(Some),
    }
}

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

// ------------------------------------------------------------------------------ module

#[pymodule(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    if m.py().version_info() < (3, 9) {
        return Err(PyRuntimeError::new_err("ratelane needs CPython 3.9 or newer"));
    }
    limiter::register(m)?;
    llm::register(m)?;
    sim::register(m)?;
    m.add("FAIL_CODES", FailReason::ALL_CODES.to_vec())?;
    m.add("ERROR_CODES", Error::ALL_CODES.to_vec())?;
    m.add("PROFILES", ratelane::HeaderProfile::NAMES.to_vec())?;
    let statuses = ratelane::Response::STATUSES;
    m.add("STATUSES", (*statuses.start(), *statuses.end()))?;
    m.add("CORE_VERSION", env!("CARGO_PKG_VERSION"))?;
    // The server-side limit and store, and their scripts (`server.rs`).
    server::register(m)?;
    // The shared store's script, arguments and answers, the core's wire format (`store.rs`).
    store::register(m)
}
