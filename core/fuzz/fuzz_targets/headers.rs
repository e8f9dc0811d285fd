//! Fuzz `ratelane::headers::parse` (every profile) and `ratelane::route::route_for`.
//!
//! Input layout: byte 0 holds flags (bit 0: a wall clock is given, bit 1: a body
//! `retry_after` is given, bit 2: a body `global` is given, bit 3: its value, bit 4: a body
//! GraphQL cost is given, bit 5: a body `usage` of `total_tokens` is given, the same number as
//! `retry_after`); bytes 1..9 are the wall clock (u64 LE), bytes 9..17 the body
//! `retry_after` (f64 LE), bytes 17..19 the status (u16 LE), bytes 19..59 the cost's five
//! numbers (f64 LE: requested, actual, maximum, available, restore rate). The rest is text
//! (lossy UTF-8), one header per line as `Name: value` (a line without `:` is a name with an
//! empty value); a line that starts with `!` is a body error string instead.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelane::headers::{MAX_DIMENSIONS, MAX_DURATION, parse};
use ratelane::route::route_for;
use ratelane::{BodyHints, HeaderProfile, QueryCost, Response};

fn le_bytes<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = data.get(at + i).copied().unwrap_or(0);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let flags = data.first().copied().unwrap_or(0);
    let wall = u64::from_le_bytes(le_bytes(data, 1));
    let retry = f64::from_le_bytes(le_bytes(data, 9));
    let status = u16::from_le_bytes(le_bytes(data, 17));
    let f = |at: usize| Some(f64::from_le_bytes(le_bytes(data, at)));
    let cost = QueryCost { requested: f(19), actual: f(27), maximum_available: f(35), currently_available: f(43), restore_rate: f(51) };
    let text = String::from_utf8_lossy(data.get(59..).unwrap_or(&[]));
    let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let errors: Vec<String> = lines.iter().filter_map(|l| l.strip_prefix('!')).map(str::to_owned).collect();
    let headers: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| !l.starts_with('!'))
        .map(|l| match l.split_once(':') {
            Some((n, v)) => (n, v.trim_start()),
            None => (*l, ""),
        })
        .collect();

    let mut response = Response::new(status, &headers);
    response.wall_clock_ms = (flags & 1 != 0).then_some(wall);
    response.body = BodyHints {
        retry_after: (flags & 2 != 0).then_some(retry),
        global: (flags & 4 != 0).then_some(flags & 8 != 0),
        cost: (flags & 16 != 0).then_some(cost),
        errors,
        usage: (flags & 32 != 0).then(|| vec![("total_tokens".to_string(), retry)]).unwrap_or_default(),
    };

    for &profile in HeaderProfile::ALL {
        let info = parse(profile, &response);
        let dims = info.dimensions.iter().flat_map(|d| [d.reset_after, d.refill_interval]);
        for d in [info.reset_after, info.window, info.retry_after]
            .into_iter()
            .chain(dims)
            .flatten()
        {
            assert!(d <= MAX_DURATION, "{profile:?}: {info:?}");
        }
        assert!(info.dimensions.len() <= MAX_DIMENSIONS, "{profile:?}: {info:?}");
        assert!(info.throttled || status != 429, "{profile:?}: {info:?}");
        if let Some((method, path)) = headers.first() {
            let route = route_for(profile, method, path);
            assert!(route.key.contains(" /"));
        }
    }
});
