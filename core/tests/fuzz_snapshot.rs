//! A proptest fuzzer for snapshots (issue 44): a valid snapshot whose JSON leaves are replaced
//! by values at every edge (0, -1, 2^53, `u64::MAX`, 1e300, long strings, wrong types, nested
//! arrays), whose keys are removed or added, and whose text has bytes changed, cut or inserted.
//! Every document is refused with a snapshot code or restores into a limiter that keeps every
//! wait within the one bound on waits from outside (a pause ten years ahead once made
//! `predict` answer ten years): see `support/snapshot_check.rs`, which the cargo-fuzz target
//! `snapshot` (core/fuzz) runs for longer. `PROPTEST_CASES` overrides the case count.

mod support {
    include!("support/snapshot_check.rs");
}

use proptest::prelude::*;
use support::snapshot_check::{EDGE_VALUES, Edit, WALL, check, mutate};

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (any::<usize>(), 0..EDGE_VALUES).prop_map(|(pick, value)| Edit::Leaf { pick, value }),
        1 => any::<usize>().prop_map(|pick| Edit::Remove { pick }),
        1 => Just(Edit::Add),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::Byte { at, byte }),
        1 => any::<usize>().prop_map(|at| Edit::Cut { at }),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::Insert { at, byte }),
    ]
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(512), ..ProptestConfig::default() })]

    #[test]
    fn mutated_snapshots_are_refused_or_keep_every_wait_bounded(
        edits in proptest::collection::vec(edit(), 1..4),
        now in prop_oneof![Just(0u64), 0u64..1_000_000_000_000],
        wall in prop_oneof![Just(WALL), WALL - 86_400_000..WALL + 86_400_000, Just(0u64), Just(u64::MAX)],
    ) {
        check(&mutate(&edits), now, wall);
    }
}

/// The defects the fuzzer is there to find, as fixed cases: a pause ten years ahead, at the
/// end of the clock, a window as long as the clock.
#[test]
fn the_known_cases_restore_within_the_bound() {
    for (pick_pointer, value) in [("/host_pause/until_ms", 13), ("/global_pauses/0/until_ms", 8), ("/windows/0/window_ns", 8)] {
        let ptrs = support::snapshot_check::pointers(&support::snapshot_check::base());
        let pick = ptrs.iter().position(|p| p == pick_pointer).unwrap();
        assert!(check(&mutate(&[Edit::Leaf { pick, value }]), 0, WALL), "{pick_pointer} restores");
    }
    assert!(check(&mutate(&[]), 5, WALL), "the base snapshot restores");
}
