//! A proptest fuzzer for the JS cores' argument conversions (issue 44): numbers at every edge
//! (NaN, +-Infinity, fractions, negatives, 2^53 and beyond) through every conversion alone,
//! then driving a shared-mode limiter as the napi and wasm cores do: a conversion refuses with
//! a short message or gives the very number JS meant (a fractional id was once truncated into
//! another request's), and every request still ends exactly once. The cargo-fuzz target
//! `conversions` (core/fuzz) runs the same checks from raw bytes, for longer.
//! `PROPTEST_CASES` overrides the case count.

mod support {
    include!("support/conversions_check.rs");
}

use proptest::prelude::*;
use support::conversions_check::{EDGES, Step, drive, number};

fn js_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => prop::sample::select(EDGES.to_vec()),
        2 => (0u32..2_000).prop_map(f64::from),
        1 => (0u32..1_000).prop_map(|n| f64::from(n) + 0.5),
        1 => any::<f64>(),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let text = prop_oneof![Just(String::new()), "[a-zA-Z0-9_/-]{0,24}", "\\PC{0,12}"];
    prop_oneof![
        3 => (any::<u8>(), [js_number(), js_number(), js_number(), js_number()], text.clone())
            .prop_map(|(path, numbers, text)| Step::Enqueue { path, numbers, text }),
        3 => (js_number(), js_number(), js_number()).prop_map(|(id, status, retry_after)| Step::Respond { id, status, retry_after }),
        3 => (js_number(), any::<u8>(), [js_number(), js_number(), js_number(), js_number()], prop_oneof![
            Just("global".to_string()), Just("route".to_string()), Just("bucket".to_string()), text.clone()
        ])
            .prop_map(|(id, kind, numbers, scope)| Step::Reserve { id, kind, numbers, scope }),
        1 => js_number().prop_map(|id| Step::Cancel { id }),
        1 => js_number().prop_map(|status| Step::Status { status }),
        2 => js_number().prop_map(|ms| Step::Advance { ms }),
    ]
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn every_number_converts_exactly_or_is_refused(v in any::<f64>()) {
        number(v);
    }

    #[test]
    fn converted_arguments_drive_the_core_and_every_request_ends_once(steps in proptest::collection::vec(step(), 1..80)) {
        drive(&steps);
    }
}

#[test]
fn every_edge_number_converts_exactly_or_is_refused() {
    for v in EDGES {
        number(v);
        number(-v);
    }
}
