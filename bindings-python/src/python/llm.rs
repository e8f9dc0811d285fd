//! `read_llm_request`: the model and estimated tokens of an OpenAI or Anthropic request body
//! (`ratelane::llm::read_request`), for a request's `model` and `costs`.

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use super::exception;

/// What `read_llm_request` read: the body's `model` (or `None`) and its estimated `tokens`
/// (the prompt's characters / 4, rounded up, plus the completion budget it asks for).
#[pyclass(module = "ratelane", name = "LlmRequest", frozen, eq, get_all)]
#[derive(Debug, PartialEq)]
pub struct PyLlmRequest {
    model: Option<String>,
    tokens: u64,
}

#[pymethods]
impl PyLlmRequest {
    #[new]
    #[pyo3(signature = (model, tokens))]
    fn new(model: Option<String>, tokens: u64) -> Self {
        PyLlmRequest { model, tokens }
    }

    fn __repr__(&self) -> String {
        match &self.model {
            Some(m) => format!("LlmRequest(model={m:?}, tokens={})", self.tokens),
            None => format!("LlmRequest(model=None, tokens={})", self.tokens),
        }
    }
}

/// The model and estimated tokens of an OpenAI (chat completions, completions, responses,
/// embeddings) or Anthropic (messages) request body, `bytes` or `str`; `None` for a body that
/// is not such JSON.
#[pyfunction]
fn read_llm_request(body: &Bound<'_, PyAny>) -> PyResult<Option<PyLlmRequest>> {
    let read = |bytes: &[u8]| ratelane::llm::read_request(bytes).map(|r| PyLlmRequest { model: r.model, tokens: r.tokens });
    if let Ok(b) = body.cast::<PyBytes>() {
        return Ok(read(b.as_bytes()));
    }
    if let Ok(s) = body.cast::<PyString>() {
        return Ok(read(super::utf8::text(s)?.as_bytes()));
    }
    if let Ok(b) = body.cast::<PyByteArray>() {
        return Ok(read(&b.to_vec()));
    }
    let kind = body.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    Err(exception(body.py(), "InvalidArgumentError", format!("body must be bytes or str, got {kind}"), None))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLlmRequest>()?;
    m.add_function(wrap_pyfunction!(read_llm_request, m)?)
}
