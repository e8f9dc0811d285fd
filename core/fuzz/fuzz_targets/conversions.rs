//! Fuzz the JS cores' argument conversions (`ratelane_js_common`, shared by the napi and wasm
//! bindings) from raw bytes: numbers read as f64 (any bit pattern: NaN payloads, subnormals,
//! -0, infinities) or picked from the edges, through every conversion alone and then driving a
//! shared-mode limiter as the bindings do; see
//! `bindings-js-common/tests/support/conversions_check.rs`, shared with the proptest fuzzer
//! `bindings-js-common/tests/fuzz_conversions.rs` that runs in the test command.
//!
//! Input: steps of 34 bytes: `[kind, x, 4 numbers of 8 bytes]` (a number whose first byte is
//! below 0x40 is the edge `EDGES[its second byte]`, else the f64 of its 8 bytes LE); `x` picks
//! a path or a reservation kind; a text step's string is the next 8 bytes (lossy UTF-8).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../bindings-js-common/tests/support/conversions_check.rs"]
mod support;

use support::conversions_check::{EDGES, Step, drive, number};

fn num(b: &[u8]) -> f64 {
    if b[0] < 0x40 {
        EDGES[usize::from(b[1]) % EDGES.len()]
    } else {
        f64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
    }
}

fuzz_target!(|data: &[u8]| {
    let mut steps = Vec::new();
    for chunk in data.chunks_exact(34) {
        let (kind, x) = (chunk[0], chunk[1]);
        let n = [num(&chunk[2..10]), num(&chunk[10..18]), num(&chunk[18..26]), num(&chunk[26..34])];
        for v in n {
            number(v);
        }
        let text = String::from_utf8_lossy(&chunk[26..34]).into_owned();
        steps.push(match kind % 6 {
            0 => Step::Enqueue { path: x, numbers: n, text },
            1 => Step::Respond { id: n[0], status: n[1], retry_after: n[2] },
            2 => Step::Reserve { id: n[0], kind: x, numbers: n, scope: text },
            3 => Step::Cancel { id: n[0] },
            4 => Step::Status { status: n[0] },
            _ => Step::Advance { ms: n[0] },
        });
    }
    drive(&steps);
});
