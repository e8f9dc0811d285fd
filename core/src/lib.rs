//! ratelane: a sans-IO rate-limit engine.
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod headers;
pub mod limiter;
pub mod route;
pub mod server;
pub mod sim;
pub mod types;

pub use config::Config;
pub use error::Error;
pub use limiter::{Limiter, Prediction};
pub use types::*;
