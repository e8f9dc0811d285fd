//! The Python binding of ratelane: the native module `ratelane._core`.
//!
//! This crate only converts values; the rate-limit logic is the core's (`ratelane`). The
//! public Python API (`ratelane.Limiter`, the asyncio driver `ratelane.RateLimiter`, the
//! exceptions, the outputs but the three every request drains, the adapters) is pure Python
//! in `python/ratelane/`, beside the native module, and so are the checks of the arguments'
//! Python types (`ratelane._args`), which the native module calls only when its own reading
//! of an argument fails.
//!
//! The pyo3 module is behind the `python` feature, which maturin turns on (`pyproject.toml`),
//! so `cargo test --workspace` builds this crate without a Python interpreter. Every failure
//! and error code of the core has its exception class: `ratelane/__init__.py` checks it at
//! import against the codes this module exports (`FAIL_CODES`, `ERROR_CODES`).

#[cfg(feature = "python")]
mod python;
