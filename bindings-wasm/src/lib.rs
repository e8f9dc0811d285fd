//! Placeholder for the wasm binding of ratelane. It builds and re-exports nothing
//! of its own yet; the binding's issue replaces this crate's contents.
//! It exists so the workspace layout of DESIGN.md is in place from the start.
