//! Property-based fuzzing of `headers::parse` (and the helpers it is built on): arbitrary
//! header names (the known ones in any case, plus random), arbitrary values (random bytes
//! decoded lossily, numbers with junk, huge digit runs, Structured-Field-ish syntax, HTTP
//! dates), arbitrary body hints and wall clocks. `parse` must never panic, and every
//! duration it returns must be at most `MAX_DURATION` (30 days).

use proptest::prelude::*;
use ratelane::headers::{MAX_DURATION, httpdate, parse, parse_retry_after, sf};
use ratelane::route::route_for;
use ratelane::{BodyHints, HeaderProfile, MILLISECOND, RateLimitInfo, Response, SECOND};

const PROFILES: [HeaderProfile; 4] = [
    HeaderProfile::Discord,
    HeaderProfile::Ietf,
    HeaderProfile::GitHub,
    HeaderProfile::RetryAfterOnly,
];

const KNOWN: &[&str] = &[
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "X-RateLimit-Reset-After",
    "X-RateLimit-Bucket",
    "X-RateLimit-Global",
    "X-RateLimit-Scope",
    "x-ratelimit-used",
    "x-ratelimit-resource",
    "Retry-After",
    "RateLimit",
    "RateLimit-Policy",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "Date",
    "Age",
];

/// A string of up to `max` characters drawn from `set` (much cheaper than a regex strategy).
fn chars(set: &'static str, max: usize) -> impl Strategy<Value = String> {
    let set: Vec<char> = set.chars().collect();
    prop::collection::vec(prop::sample::select(set), 0..=max).prop_map(|v| v.into_iter().collect())
}

/// Any characters at all (including controls and non-ASCII).
fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..=max).prop_map(|v| v.into_iter().collect())
}

/// `len` pseudo-random decimal digits from `seed` (xorshift).
fn digits(len: usize, mut seed: u64) -> String {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'0' + (seed % 10) as u8)
        })
        .collect()
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (prop::sample::select(KNOWN), any::<u64>()).prop_map(|(n, mask)| {
            // Random per-character case.
            n.chars()
                .enumerate()
                .map(|(i, c)| if mask >> (i % 64) & 1 == 1 { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
                .collect()
        }),
        1 => chars("ABCXYZabcxyz-", 24),
        1 => any_text(12),
    ]
}

fn sf_param() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "r", "t", "q", "w", "pk", "qu", "R", "Q", "*x", "a-b", "1a", "_", "",
    ]);
    let value = prop_oneof![
        (-2i64..1_000_000).prop_map(|i| i.to_string()),
        (14usize..18, any::<u64>()).prop_map(|(n, seed)| digits(n, seed)),
        (any::<bool>(), 1usize..14, 0usize..5, any::<u64>()).prop_map(|(neg, i, f, seed)| format!(
            "{}{}.{}",
            if neg { "-" } else { "" },
            digits(i, seed),
            digits(f, !seed)
        )),
        chars("ab \"~", 8).prop_map(|s| format!("\"{s}\"")),
        chars("ABab09+/=!", 12).prop_map(|s| format!(":{s}:")),
        prop::sample::select(vec![
            "?0",
            "?1",
            "?x",
            "@12",
            "@-1",
            "@1.5",
            "%\"a%c3%bc\"",
            "%\"%FF\"",
            "tok/en:x",
            "*"
        ])
        .prop_map(str::to_owned),
    ];
    (key, prop::option::of(value)).prop_map(|(k, v)| match v {
        Some(v) => format!(";{k}={v}"),
        None => format!(";{k}"),
    })
}

fn sf_member() -> impl Strategy<Value = String> {
    let bare = prop_oneof![
        chars("az09 -", 10).prop_map(|s| format!("\"{s}\"")),
        chars("az09", 6).prop_map(|s| format!("p{s}")),
        (0i64..10_000).prop_map(|i| i.to_string()),
        chars("az09 \"", 12).prop_map(|s| format!("({s})")),
    ];
    let eq = prop::sample::select(vec!["", "", "=", "=1", "=\"x\""]);
    let tail = prop::sample::select(vec!["", "", " ", ";"]);
    (bare, eq, prop::collection::vec(sf_param(), 0..5), tail)
        .prop_map(|(b, e, ps, tail)| format!("{b}{e}{}{tail}", ps.concat()))
}

fn http_date() -> impl Strategy<Value = String> {
    let days = prop::sample::select(vec!["Mon", "Tue", "Sun", "Xyz", "Monday", "Sunday"]);
    let months = prop::sample::select(vec!["Jan", "Feb", "Nov", "Dec", "nov", "Foo"]);
    (
        days,
        0u32..40,
        months,
        0u32..10_000,
        0u32..30,
        0u32..70,
        0u32..70,
        0u8..4,
    )
        .prop_map(|(d, day, m, y, hh, mm, ss, fmt)| match fmt {
            0 => format!("{d}, {day:02} {m} {y:04} {hh:02}:{mm:02}:{ss:02} GMT"),
            1 => format!(
                "{d}, {day:02}-{m}-{:02} {hh:02}:{mm:02}:{ss:02} GMT",
                y % 100
            ),
            2 => format!("{d} {m} {day:>2} {hh:02}:{mm:02}:{ss:02} {y:04}"),
            _ => format!("{d}, {day} {m} {y} {hh}:{mm}:{ss} GMT"),
        })
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..48).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        2 => (any::<u64>(), chars(" .eE+_xX,;-", 3), any::<u32>()).prop_map(|(a, j, b)| format!("{a}{j}{b}")),
        1 => (15usize..400, any::<u64>()).prop_map(|(n, seed)| digits(n, seed)),
        2 => (any::<u64>(), prop::option::of(0usize..21), any::<u64>(), prop::sample::select(vec!["", " ", "\t"]))
            .prop_map(|(i, f, seed, ws)| match f {
                Some(f) => format!("{ws}{i}.{}{ws}", digits(f, seed)),
                None => format!("{ws}{i}{ws}"),
            }),
        1 => prop::sample::select(vec![
            "", "-1", "NaN", "inf", "-inf", "Infinity", "1e309", "1e3", "0x10", "+5", "1_000", "true", "TRUE", "1",
            "user", "global", "shared", "bot", "120, 120", "991, 98",
        ])
        .prop_map(str::to_owned),
        3 => prop::collection::vec(sf_member(), 0..6).prop_map(|m| m.join(", ")),
        1 => chars("\"az09;=,:()?@%*. -", 80),
        2 => http_date(),
        1 => any_text(24),
    ]
}

fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((name(), value()), 0..12)
}

fn body() -> impl Strategy<Value = BodyHints> {
    let f = prop_oneof![
        any::<f64>(),
        -10.0f64..1e7,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MAX),
        Just(-0.0f64),
        Just(f64::MIN_POSITIVE),
    ];
    (prop::option::of(f), prop::option::of(any::<bool>())).prop_map(|(retry_after, global)| {
        BodyHints {
            retry_after,
            global,
        }
    })
}

fn wall_clock() -> impl Strategy<Value = Option<u64>> {
    prop::option::of(prop_oneof![
        any::<u64>(),
        0u64..4_102_444_800_000,
        Just(u64::MAX),
        Just(0)
    ])
}

fn check_bounds(info: &RateLimitInfo) {
    for d in [info.reset_after, info.window, info.retry_after]
        .into_iter()
        .flatten()
    {
        assert!(
            d <= MAX_DURATION,
            "duration {d} above MAX_DURATION in {info:?}"
        );
    }
    if let Some(b) = &info.bucket {
        assert!(
            !b.is_empty() && b.len() <= 128 && !b.chars().any(char::is_control),
            "bucket {b:?}"
        );
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn parse_is_total_and_bounded(h in headers(), b in body(), wall in wall_clock(), status in any::<u16>()) {
        let pairs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let mut r = Response::new(status, &pairs);
        r.body = b;
        r.wall_clock_ms = wall;
        for p in PROFILES {
            let info = parse(p, &r);
            check_bounds(&info);
            if p == HeaderProfile::RetryAfterOnly {
                prop_assert!(!info.has_rate_limit_headers);
            }
            // Deterministic.
            prop_assert_eq!(&info, &parse(p, &r));
        }
    }

    #[test]
    fn helpers_are_total(s in value(), wall in wall_clock(), now in any::<i64>()) {
        if let Some(w) = parse_retry_after(&s, wall) {
            prop_assert!(w <= MAX_DURATION);
        }
        let _ = httpdate::parse_http_date(&s, Some(now));
        let _ = httpdate::parse_http_date(&s, None);
        let _ = sf::parse_list(&s);
        let _ = sf::parse_dictionary(&s);
        let _ = sf::parse_item(&s);
    }

    #[test]
    fn route_for_is_total(method in any_text(8), path in prop_oneof![any_text(40), chars("/az09@:%-?#.é", 80)]) {
        for p in PROFILES {
            let r = route_for(p, &method, &path);
            prop_assert!(r.key.starts_with(&method.trim().to_ascii_uppercase()));
            prop_assert!(r.key.contains(" /"));
        }
    }

    // Round trips: what a well-behaved server sends comes back exactly.

    #[test]
    fn discord_legacy_numbers_round_trip(n in any::<u64>(), secs in 0u64..4_000_000, frac in 0u32..1000, dup in 0u64..u64::MAX) {
        let remaining = n.to_string();
        let dup_s = dup.to_string();
        let reset = format!("{secs}.{frac:03}");
        let h = [
            ("X-RateLimit-Remaining", remaining.as_str()),
            ("x-ratelimit-remaining", dup_s.as_str()),
            ("X-RateLimit-Reset-After", reset.as_str()),
        ];
        let info = parse(HeaderProfile::Discord, &Response::new(200, &h));
        prop_assert_eq!(info.remaining, Some(u32::try_from(n.min(dup)).unwrap_or(u32::MAX)));
        let want = (secs * SECOND + u64::from(frac) * MILLISECOND).min(MAX_DURATION);
        prop_assert_eq!(info.reset_after, Some(want));
    }

    #[test]
    fn ietf_items_round_trip(items in prop::collection::vec((0u64..1_000_000_000_000, prop::option::of(0u64..10_000_000)), 1..10)) {
        let field: Vec<String> = items
            .iter()
            .enumerate()
            .map(|(i, (r, t))| match t {
                Some(t) => format!("\"p{i}\";r={r};t={t}"),
                None => format!("p{i}; r={r}"),
            })
            .collect();
        let field = field.join(", ");
        let info = parse(HeaderProfile::Ietf, &Response::new(200, &[("RateLimit", field.as_str())]));
        let min_r = items.iter().map(|(r, _)| *r).min().unwrap_or(0);
        prop_assert_eq!(info.remaining, Some(u32::try_from(min_r).unwrap_or(u32::MAX)));
        let best_t = items.iter().filter(|(r, _)| *r == min_r).map(|(_, t)| *t).max().flatten();
        prop_assert_eq!(info.reset_after, best_t.map(|t| (t * SECOND).min(MAX_DURATION)));
    }

    #[test]
    fn retry_after_dates_round_trip(now_s in 0u64..4_000_000_000, delta in 0u64..100_000) {
        // Format now + delta as IMF-fixdate by hand and read it back.
        let t = now_s + delta;
        let s = imf_fixdate(t);
        prop_assert_eq!(httpdate::parse_http_date(&s, None), i64::try_from(t).ok());
        prop_assert_eq!(parse_retry_after(&s, Some(now_s * 1000)), Some(delta * SECOND));
    }
}

/// IMF-fixdate of Unix second `t`.
fn imf_fixdate(t: u64) -> String {
    httpdate::format_imf_fixdate(t)
}
