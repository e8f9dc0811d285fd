//! Server-side limiters (`ratelane::server`): one [`ServerLimit`] (GCRA, leaky bucket or fixed
//! window) and one [`ServerStore`] over it, as the core's `Limit` and `LimitStore`, the same two
//! the napi package exports. The user-facing classes (`GcraStore`, `LeakyBucketStore`,
//! `FixedWindowStore`, `js/CONTRACT.md`) are written once in `js/server_objects.js` over these
//! two, which also checks the arguments' JS types; the package entries (entries/) build them
//! with `createServerObjects(wasm)`. Ranges, ops and answers are
//! `ratelane_js_common::server`'s, shared with the napi core.

use ratelane::server::{InsufficientCapacity, Limit, LimitStore};
use ratelane_js_common::server::{self as common, Refusal};
use ratelane_js_common::whole;
use wasm_bindgen::prelude::*;

use crate::{core_error, invalid_argument, js_error, set};

/// `maxKeys` when not given, as in the Python binding.
const DEFAULT_MAX_KEYS: usize = 100_000;

/// `insufficient_capacity`, with the weight asked for and the burst.
fn insufficient_capacity(e: InsufficientCapacity) -> JsValue {
    let error = js_error(InsufficientCapacity::CODE, &e.to_string());
    set(&error, "requested", e.requested);
    set(&error, "capacity", e.capacity);
    error
}

/// A decision's headers (`ratelane_js_common::server::headers`): `X-RateLimit-*` when
/// `policy` is `null`, else the IETF ones; for the decision objects' methods.
#[wasm_bindgen(js_name = renderHeaders, skip_typescript)]
pub fn render_headers(policy: Option<String>, fields: Vec<f64>) -> Result<String, JsValue> {
    common::headers(policy.as_deref(), &fields).map_err(|m| invalid_argument(&m))
}

/// A server-side limit (`ratelane::server::Limit`): the core's validated config of one
/// algorithm.
#[wasm_bindgen]
#[derive(Debug)]
pub struct ServerLimit {
    inner: Limit,
}

#[wasm_bindgen]
impl ServerLimit {
    /// The limit `kind` names (`gcra`, `gcraPerWindow`, `leakyBucket`, `legacy`,
    /// `fixedWindow`) from its numbers (`ratelane_js_common::server::limit`). Throws
    /// `invalid_config`, or `invalid_argument` for a number out of range.
    #[wasm_bindgen(constructor)]
    pub fn new(kind: String, a: Option<f64>, b: Option<f64>, c: Option<f64>, d: Option<f64>) -> Result<ServerLimit, JsValue> {
        match common::limit(&kind, [a, b, c, d]) {
            Ok(inner) => Ok(ServerLimit { inner }),
            Err(Refusal::Argument(message)) => Err(invalid_argument(&message)),
            Err(Refusal::Core(e)) => Err(core_error(e)),
        }
    }
}

/// A keyed store over a [`ServerLimit`] (`ratelane::server::LimitStore`).
#[wasm_bindgen]
#[derive(Debug)]
pub struct ServerStore {
    inner: LimitStore,
}

#[wasm_bindgen]
impl ServerStore {
    /// A store for `limit` keeping at most `maxKeys` keys (default 100000). Throws
    /// `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(limit: &ServerLimit, #[wasm_bindgen(js_name = maxKeys)] max_keys: Option<f64>) -> Result<ServerStore, JsValue> {
        let max_keys = match max_keys {
            Some(v) => usize::try_from(whole(v, "maxKeys").map_err(|m| invalid_argument(&m))?).unwrap_or(usize::MAX),
            None => DEFAULT_MAX_KEYS,
        };
        Ok(ServerStore { inner: LimitStore::new(limit.inner, max_keys).map_err(core_error)? })
    }

    /// Runs op `name` (`arg`: the weight of `check_n`, the factor of `check_scaled`) for `key`
    /// at `nowNs`: the answer's numbers (`ratelane_js_common::server`). Throws
    /// `insufficient_capacity` (with `requested` and `capacity`) for a weight above the burst,
    /// and the core's errors; nothing is counted then.
    pub fn apply(&mut self, name: String, key: String, #[wasm_bindgen(js_name = nowNs)] now_ns: f64, arg: Option<f64>) -> Result<Vec<f64>, JsValue> {
        let now = whole(now_ns, "nowNs").map_err(|m| invalid_argument(&m))?;
        let op = common::op(&name, arg).map_err(|m| invalid_argument(&m))?;
        let answer = self.inner.apply(key.as_str(), now, op).map_err(core_error)?;
        common::answer_numbers(answer).map_err(insufficient_capacity)
    }

    /// Keys currently stored.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[wasm_bindgen(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[wasm_bindgen(getter = maxKeys)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}
