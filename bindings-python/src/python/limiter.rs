//! The sans-IO `Limiter`, one to one with `ratelane::Limiter`, and the outputs every request
//! life drains (`Send`, `WaitUntil`, `Idle`), native. The rarer outputs are Python classes
//! (`ratelane._outputs`) built from the core's serde form of the output.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::exceptions::PyTypeError;
use pyo3::types::{PyDict, PyList, PyString};
use pythonize::{depythonize, pythonize};

use ratelane::shared::ReservationAnswer;
use ratelane::{BodyHints, Disposition, Failure, Output, QueryCost, Request, Response};

use super::store;
use super::{
    body_keys, core_error, cost, costs, errors, headers, mistake, module, ns, opt_bool, opt_ns, opt_text, priority,
    request_id, retry_after, status, text, usage, utf8,
};

/// `Send(id)`: send request `id` now. `WaitUntil(at_ns)`: drained; call `handle_timeout` at
/// `at_ns` (earlier is harmless). One class per variant (`ratelane.Send` is `Output.Send`),
/// whose constructor, fields, `__match_args__` and `==` pyo3 derives.
#[pyclass(module = "ratelane", name = "Output", eq)]
#[derive(Debug, PartialEq)]
pub enum PyOutput {
    Send { id: u64 },
    WaitUntil { at_ns: u64 },
}

#[pymethods]
impl PyOutput {
    fn __repr__(&self) -> String {
        match self {
            PyOutput::Send { id } => format!("Send(id={id})"),
            PyOutput::WaitUntil { at_ns } => format!("WaitUntil(at_ns={at_ns})"),
        }
    }

    /// Only a `Fail` output has an exception.
    fn exception(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err("only a Fail output has an exception"))
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
static OUTPUTS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn idle(py: Python<'_>) -> &Py<Idle> {
    IDLE.get_or_init(py, || Py::new(py, Idle).expect("allocating the Idle output"))
}

fn output_object(py: Python<'_>, output: Output) -> PyResult<Py<PyAny>> {
    let native = match output {
        Output::Send(id) => PyOutput::Send { id },
        Output::WaitUntil(at_ns) => PyOutput::WaitUntil { at_ns },
        Output::Idle => return Ok(idle(py).clone_ref(py).into_any()),
        rarer => {
            let outputs = module(py, &OUTPUTS, "ratelane._outputs")?;
            // Shared mode's: its store operation, whose fields Python reads when first asked.
            if let Some(op) = store::PyStoreOp::of(&rarer) {
                let id = if let Output::Reserve(r) = &rarer { Some(r.id) } else { None };
                return Ok(outputs.call_method1(intern!(py, "from_op"), (op, id))?.unbind());
            }
            let message = if let Output::Fail(_, reason) = &rarer { Some(reason.to_string()) } else { None };
            return Ok(outputs.call_method1(intern!(py, "from_core"), (pythonize(py, &rarer)?, message))?.unbind());
        }
    };
    Ok(native.into_pyobject(py)?.into_any().unbind())
}

fn disposition<'py>(py: Python<'py>, d: Disposition) -> &'py Bound<'py, PyString> {
    match d {
        Disposition::Complete => intern!(py, "complete"),
        Disposition::Retry => intern!(py, "retry"),
        Disposition::Failed => intern!(py, "failed"),
    }
}

/// The request of `method` and `path` with the keyword options of `enqueue`, `predict` and
/// `Simulation.enqueue_at` (`major`, `identity`, `deadline_ns`...): `_core.pyi` lists them.
pub(super) fn request(method: String, path: String, options: Option<&Bound<'_, PyDict>>, call: &str) -> PyResult<Request> {
    let mut r = Request::new(method, path);
    for (name, value) in options.into_iter().flatten() {
        match name.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok()).unwrap_or_default() {
            "major" => r.major = opt_text(&value)?,
            "identity" => r.identity = opt_text(&value)?.unwrap_or_default(),
            "deadline_ns" => r.deadline = opt_ns(&value)?,
            "defer_after_ns" => r.defer_after = opt_ns(&value)?,
            "priority" => r.priority = priority(&value)?,
            "idempotent" => r.idempotent = opt_bool(&value)?,
            "global_exempt" => r.global_exempt = opt_bool(&value)?,
            "sub_limit" => r.sub_limit = opt_text(&value)?,
            "body_keys" => r.body_keys = body_keys(&value)?.unwrap_or_default(),
            "costs" => r.costs = costs(&value)?.unwrap_or_default(),
            "model" => r.model = opt_text(&value)?,
            _ => return Err(PyTypeError::new_err(format!("{call}() got an unexpected keyword argument '{name}'"))),
        }
    }
    Ok(r)
}

pub(super) fn limiter(config_json: Option<&str>) -> PyResult<ratelane::Limiter> {
    let config = ratelane::json::config_from_json(config_json.unwrap_or("{}")).map_err(core_error)?;
    ratelane::Limiter::new(config).map_err(core_error)
}

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
    fn new(config_json: Option<&str>) -> PyResult<Self> {
        Ok(Limiter { inner: limiter(config_json)? })
    }

    #[pyo3(signature = (now_ns, method, path, **options), text_signature = "($self, now_ns, method, path, *, major=None, \
        identity=None, deadline_ns=None, defer_after_ns=None, priority=0, idempotent=None, global_exempt=None, \
        sub_limit=None, body_keys=None, costs=None, model=None)")]
    fn enqueue(
        &mut self,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = text)] method: String,
        #[pyo3(from_py_with = text)] path: String,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u64> {
        let r = request(method, path, options, "enqueue")?;
        self.inner.enqueue(now_ns, r).map_err(core_error)
    }

    /// `cost`: Shopify's `extensions.cost` (a dict of `requested`, `actual`,
    /// `maximum_available`, `currently_available`, `restore_rate`); `errors`: the body's error
    /// strings; `usage`: the numeric fields of its `usage` object.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (now_ns, id, status, headers = None, *, retry_after = None, global_ = None,
                        wall_clock_ms = None, cost = None, errors = None, usage = None))]
    fn handle_response<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = request_id)] id: u64,
        #[pyo3(from_py_with = status)] status: u16,
        #[pyo3(from_py_with = headers)] headers: Option<Vec<(Bound<'py, PyString>, Bound<'py, PyString>)>>,
        #[pyo3(from_py_with = retry_after)] retry_after: Option<f64>,
        #[pyo3(from_py_with = opt_bool)] global_: Option<bool>,
        #[pyo3(from_py_with = opt_ns)] wall_clock_ms: Option<u64>,
        #[pyo3(from_py_with = cost)] cost: Option<QueryCost>,
        #[pyo3(from_py_with = errors)] errors: Option<Vec<String>>,
        #[pyo3(from_py_with = usage)] usage: Option<Vec<(String, f64)>>,
    ) -> PyResult<Bound<'py, PyString>> {
        let headers = headers.unwrap_or_default();
        let Some(pairs) = headers.iter().map(|(n, v)| Some((utf8::text(n).ok()?, utf8::text(v).ok()?))).collect::<Option<Vec<_>>>() else {
            return Err(mistake(PyList::new(py, &headers)?.as_any(), "headers"));
        };
        let (errors, usage) = (errors.unwrap_or_default(), usage.unwrap_or_default());
        let response = Response { status, headers: &pairs, body: BodyHints { retry_after, global: global_, cost, errors, usage }, wall_clock_ms };
        let d = self.inner.handle_response(now_ns, id, &response).map_err(core_error)?;
        Ok(disposition(py, d).clone())
    }

    /// Whether the profile reads the body of an answer with this status
    /// (`HeaderProfile::reads_body`). Raises `InvalidArgumentError` for a status the core does
    /// not take (an int in `_core.STATUSES`), so the driver checks `send`'s status with it.
    fn reads_body(&self, #[pyo3(from_py_with = status)] status: u16) -> bool {
        self.inner.config().profile.reads_body(status)
    }

    /// `failure`: `"not_sent"` or `"maybe_sent"`.
    fn handle_failure<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = request_id)] id: u64,
        failure: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyString>> {
        let named = failure.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok()).and_then(Failure::from_name);
        let Some(failure) = named else { return Err(mistake(failure, "failure")) };
        let d = self.inner.handle_failure(now_ns, id, failure).map_err(core_error)?;
        Ok(disposition(py, d).clone())
    }

    fn handle_written(&mut self, #[pyo3(from_py_with = ns)] now_ns: u64, #[pyo3(from_py_with = request_id)] id: u64) -> PyResult<()> {
        self.inner.handle_written(now_ns, id).map_err(core_error)
    }

    fn cancel(&mut self, #[pyo3(from_py_with = ns)] now_ns: u64, #[pyo3(from_py_with = request_id)] id: u64) -> PyResult<()> {
        self.inner.cancel(now_ns, id).map_err(core_error)
    }

    fn handle_timeout(&mut self, #[pyo3(from_py_with = ns)] now_ns: u64) {
        self.inner.handle_timeout(now_ns)
    }

    /// Shared mode: the store's answer to request `id`'s `Reserve`: `"granted"` (with the
    /// store's live-process count `processes`, the global tokens `leased` beyond the request's
    /// own and the store's clock `store_time_ns`), `"unavailable"`, or `"denied"` with
    /// `retry_after_ns`, `scope` (and `processes`). `ratelane._args.reservation` checks them.
    #[pyo3(signature = (now_ns, id, answer, *, retry_after_ns = None, scope = None, processes = None, leased = None, store_time_ns = None))]
    #[allow(clippy::too_many_arguments)]
    fn handle_reservation<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = request_id)] id: u64,
        answer: Bound<'py, PyAny>,
        retry_after_ns: Option<Bound<'py, PyAny>>,
        scope: Option<Bound<'py, PyAny>>,
        processes: Option<Bound<'py, PyAny>>,
        leased: Option<Bound<'py, PyAny>>,
        store_time_ns: Option<Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        // The common answer read here: a grant with its counts (a count beyond 32 bits reads as
        // the largest: the core tolerates any count).
        let int = |obj: &Option<Bound<'py, PyAny>>| obj.as_ref().map_or(Some(None), |o| o.extract::<u64>().ok().map(Some));
        let count = |obj| int(obj).map(|n| n.map(|n| u32::try_from(n).unwrap_or(u32::MAX)));
        let granted = answer.cast::<PyString>().ok().and_then(|s| utf8::text(s).ok()) == Some("granted");
        let read = match (granted && retry_after_ns.is_none() && scope.is_none(), count(&processes), count(&leased), int(&store_time_ns)) {
            (true, Some(processes), Some(leased), Some(store_time)) => {
                ReservationAnswer::Granted { processes, leased: leased.unwrap_or(0), store_time }
            }
            _ => {
                let args = module(py, &super::ARGS, "ratelane._args")?;
                depythonize(&args.call_method1("reservation", (answer, retry_after_ns, scope, processes, leased, store_time_ns))?)?
            }
        };
        self.inner.handle_reservation(now_ns, id, read).map_err(core_error)
    }

    fn close(&mut self, #[pyo3(from_py_with = ns)] now_ns: u64) {
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

    /// When the request could be sent (monotonic ns), were it enqueued now. A read.
    #[pyo3(signature = (now_ns, method, path, **options), text_signature = "($self, now_ns, method, path, *, major=None, \
        identity=None, deadline_ns=None, defer_after_ns=None, priority=0, idempotent=None, global_exempt=None, \
        sub_limit=None, body_keys=None, costs=None, model=None)")]
    fn predict(
        &self,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = text)] method: String,
        #[pyo3(from_py_with = text)] path: String,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u64> {
        let r = request(method, path, options, "predict")?;
        self.inner.predict(now_ns, &r).map(|p| p.send_at).map_err(core_error)
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
    fn invalid_requests(&self, #[pyo3(from_py_with = ns)] now_ns: u64) -> u32 {
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
    fn snapshot(&self, #[pyo3(from_py_with = ns)] now_ns: u64, #[pyo3(from_py_with = ns)] wall_clock_ms: u64) -> String {
        self.inner.snapshot(now_ns, wall_clock_ms).to_json()
    }

    /// Restores a snapshot's JSON text: the core reads and checks it, then restores it.
    fn restore(
        &mut self,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = ns)] wall_clock_ms: u64,
        #[pyo3(from_py_with = text)] snapshot: String,
    ) -> PyResult<()> {
        ratelane::snapshot::Snapshot::from_json(&snapshot)
            .and_then(|s| self.inner.restore(now_ns, wall_clock_ms, &s))
            .map_err(core_error)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Limiter>()?;
    m.add_class::<PyOutput>()?;
    let output = m.py().get_type::<PyOutput>();
    m.add("Send", output.getattr("Send")?)?;
    m.add("WaitUntil", output.getattr("WaitUntil")?)?;
    m.add_class::<Idle>()
}
