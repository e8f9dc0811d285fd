//! Fuzz snapshots: a valid snapshot mutated by edits decoded from the input (its JSON leaves
//! replaced by values at every edge, keys removed or added, bytes changed, cut or inserted),
//! or, with the first byte odd, the input itself as the document. Every document must be
//! refused with a snapshot code or restore into a limiter that keeps every wait, prediction
//! and send within the one bound on waits from outside; see
//! `core/tests/support/snapshot_check.rs`, shared with the proptest fuzzer
//! `core/tests/fuzz_snapshot.rs` that runs in the test command.
//!
//! Input layout: byte 0: bit 0 raw mode; bytes 1..9 `now` (ns, u64 LE, reduced below 10^12);
//! bytes 9..17 the wall clock (ms, u64 LE; 0 means the snapshot's own); then edits of 6 bytes:
//! `[kind, a, b, c, d, e]` (kind % 6: leaf a..d / value e, remove a, add, byte a..d = e, cut
//! a..d, insert a..d e).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/snapshot_check.rs"]
mod support;

use support::snapshot_check::{Edit, WALL, check, mutate};

fn le_u64(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    for (i, x) in b.iter_mut().enumerate() {
        *x = data.get(at + i).copied().unwrap_or(0);
    }
    u64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let mode = data.first().copied().unwrap_or(0);
    let now = le_u64(data, 1) % 1_000_000_000_000;
    let wall = match le_u64(data, 9) {
        0 => WALL,
        w => w,
    };
    let rest = data.get(17..).unwrap_or(&[]);
    if mode & 1 == 1 {
        check(rest, now, wall);
        return;
    }
    let edits: Vec<Edit> = rest
        .chunks_exact(6)
        .map(|op| {
            let at = usize::from(u16::from_le_bytes([op[1], op[2]])) | usize::from(u16::from_le_bytes([op[3], op[4]])) << 16;
            match op[0] % 6 {
                0 => Edit::Leaf { pick: at, value: usize::from(op[5]) },
                1 => Edit::Remove { pick: at },
                2 => Edit::Add,
                3 => Edit::Byte { at, byte: op[5] },
                4 => Edit::Cut { at },
                _ => Edit::Insert { at, byte: op[5] },
            }
        })
        .collect();
    check(&mutate(&edits), now, wall);
});
