//! The simulator (`ratelane::sim`): the model of Discord's server and the simulation of a
//! limiter, that server and a network in virtual time. `ratelane.sim` is Python over these.

use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict};

use ratelane::sim::{self, Fate};

use super::limiter::{limiter, request};
use super::{core_error, exception, mistake, normalized, ns, opt_normalized, text, ticket};

/// `tokens` of `Server.handle`: `None`, or an int >= 0 (not a `bool`).
fn tokens(obj: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    opt_normalized(obj, "tokens")
}

fn server(text: Option<&str>) -> PyResult<sim::Server> {
    // The core's parser checks everything `Server::new` asserts (known buckets, non-zero
    // windows), so a bad configuration is an InvalidConfigError, never a panic.
    let config = ratelane::json::server_config_from_json(text.unwrap_or("{}")).map_err(core_error)?;
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
    fn new(server_config_json: Option<&str>) -> PyResult<Self> {
        Ok(SimServer { inner: server(server_config_json)?, next_tag: 0 })
    }

    /// The server's answer to a request arriving at `now_ns`, as a dict (`status`, `headers`,
    /// `retry_after`, `global_`, `usage`, `body_text`); `tokens`: what it costs of the token
    /// budget (`Server::handle_costing`), else the budget's `cost`. The request's options are
    /// `Limiter.enqueue`'s (the model reads `major`, `identity`, `global_exempt`, `body_keys`).
    #[pyo3(signature = (now_ns, method, path, *, tokens = None, **options))]
    fn handle<'py>(
        &mut self,
        py: Python<'py>,
        #[pyo3(from_py_with = ns)] now_ns: u64,
        #[pyo3(from_py_with = text)] method: String,
        #[pyo3(from_py_with = text)] path: String,
        #[pyo3(from_py_with = tokens)] tokens: Option<u64>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let r = request(method, path, options, "handle")?;
        self.next_tag += 1;
        let answer = self.inner.handle_costing(now_ns, self.next_tag, &r, tokens);
        let dict = PyDict::new(py);
        dict.set_item("status", answer.status)?;
        dict.set_item("headers", answer.headers)?;
        dict.set_item("retry_after", answer.body.retry_after)?;
        dict.set_item("global_", answer.body.global)?;
        dict.set_item("usage", answer.body.usage.into_py_dict(py)?)?;
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
    fn new(config_json: Option<&str>, server_config_json: Option<&str>, sim_config_json: Option<&str>) -> PyResult<Self> {
        let (limiter, server) = (limiter(config_json)?, server(server_config_json)?);
        let net = ratelane::json::sim_config_from_json(sim_config_json.unwrap_or("{}")).map_err(core_error)?;
        Ok(Simulation { inner: sim::Simulation::new(limiter, server, net), scheduled: 0 })
    }

    /// Schedules a request to be enqueued at `at_ns` (options: `Limiter.enqueue`'s); returns
    /// its ticket.
    #[pyo3(signature = (at_ns, method, path, **options), text_signature = "($self, at_ns, method, path, *, major=None, \
        identity=None, deadline_ns=None, defer_after_ns=None, priority=0, idempotent=None, global_exempt=None, \
        sub_limit=None, body_keys=None, costs=None, model=None)")]
    fn enqueue_at(
        &mut self,
        #[pyo3(from_py_with = ns)] at_ns: u64,
        #[pyo3(from_py_with = text)] method: String,
        #[pyo3(from_py_with = text)] path: String,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<usize> {
        let r = request(method, path, options, "enqueue_at")?;
        self.scheduled += 1;
        Ok(self.inner.enqueue_at(at_ns, r).0)
    }

    fn cancel_at(&mut self, py: Python<'_>, #[pyo3(from_py_with = ns)] at_ns: u64, #[pyo3(from_py_with = ticket)] ticket: usize) -> PyResult<()> {
        self.inner.cancel_at(at_ns, self.ticket(py, ticket)?);
        Ok(())
    }

    fn close_at(&mut self, #[pyo3(from_py_with = ns)] at_ns: u64) {
        self.inner.close_at(at_ns)
    }

    /// Decides the network's fate for send number `attempt` (0 first) of `ticket`:
    /// `"deliver"`, `"not_sent"`, `"maybe_sent_arrived"` or `"maybe_sent_lost"`.
    fn script_send(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = ticket)] ticket: usize,
        #[pyo3(from_py_with = ticket)] attempt: usize,
        fate: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ticket = self.ticket(py, ticket)?;
        let Some(fate) = Fate::from_name(&normalized::<String>(fate, "fate")?) else { return Err(mistake(fate, "fate")) };
        self.inner.script_send(ticket, attempt, fate);
        Ok(())
    }

    /// Runs until everything ended (or a limit); returns the report as JSON text.
    fn run(&mut self, py: Python<'_>) -> PyResult<String> {
        self.run_until(py, u64::MAX)
    }

    /// Runs until virtual time `until_ns`; returns the report as JSON text.
    fn run_until(&mut self, py: Python<'_>, #[pyo3(from_py_with = ns)] until_ns: u64) -> PyResult<String> {
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
    fn ticket(&self, py: Python<'_>, ticket: usize) -> PyResult<sim::Ticket> {
        if ticket < self.scheduled {
            Ok(sim::Ticket(ticket))
        } else {
            Err(exception(py, "InvalidArgumentError", format!("unknown ticket {ticket}"), None))
        }
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SimServer>()?;
    m.add_class::<Simulation>()
}
