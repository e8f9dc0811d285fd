//! Fuzz `ratelane::headers::parse` (every profile) and `ratelane::route::route_for`.
//!
//! Input layout: byte 0 holds flags (bit 0: a wall clock is given, bit 1: a body
//! `retry_after` is given, bit 2: a body `global` is given, bit 3: its value); bytes 1..9
//! are the wall clock (u64 LE), bytes 9..17 the body `retry_after` (f64 LE), bytes 17..19
//! the status (u16 LE). The rest is text (lossy UTF-8), one header per line as
//! `Name: value` (a line without `:` is a name with an empty value).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelane::headers::{MAX_DURATION, parse};
use ratelane::route::route_for;
use ratelane::{BodyHints, HeaderProfile, Response};

const PROFILES: [HeaderProfile; 4] = [
    HeaderProfile::Discord,
    HeaderProfile::Ietf,
    HeaderProfile::GitHub,
    HeaderProfile::RetryAfterOnly,
];

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
    let text = String::from_utf8_lossy(data.get(19..).unwrap_or(&[]));
    let headers: Vec<(&str, &str)> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .map(|l| match l.split_once(':') {
            Some((n, v)) => (n, v.trim_start()),
            None => (l, ""),
        })
        .collect();

    let mut response = Response::new(status, &headers);
    response.wall_clock_ms = (flags & 1 != 0).then_some(wall);
    response.body = BodyHints {
        retry_after: (flags & 2 != 0).then_some(retry),
        global: (flags & 4 != 0).then_some(flags & 8 != 0),
    };

    for profile in PROFILES {
        let info = parse(profile, &response);
        for d in [info.reset_after, info.window, info.retry_after]
            .into_iter()
            .flatten()
        {
            assert!(d <= MAX_DURATION, "{profile:?}: {info:?}");
        }
        if let Some((method, path)) = headers.first() {
            let route = route_for(profile, method, path);
            assert!(route.key.contains(" /"));
        }
    }
});
