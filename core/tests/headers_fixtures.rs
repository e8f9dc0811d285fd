//! Fixtures for `headers::parse`: Discord's documented 429s, the hostile inputs of
//! research/protocols.md §7, the IETF draft's examples (-06 to -10) and oddities, GitHub's
//! primary and secondary limits, and `Retry-After` in every format.

use ratelane::headers::{MAX_DURATION, parse, parse_retry_after};
use ratelane::{
    BodyHints, HeaderProfile, MILLISECOND, Nanos, RateLimitInfo, Response, SECOND, Scope,
};

const MS: Nanos = MILLISECOND;
const S: Nanos = SECOND;

use HeaderProfile::{Discord, GitHub, Ietf, RetryAfterOnly};

fn parse_h(profile: HeaderProfile, headers: &[(&str, &str)]) -> RateLimitInfo {
    parse(profile, &Response::new(200, headers))
}

fn parse_full(
    profile: HeaderProfile,
    status: u16,
    headers: &[(&str, &str)],
    body: BodyHints,
    wall_clock_ms: Option<u64>,
) -> RateLimitInfo {
    let mut r = Response::new(status, headers);
    r.body = body;
    r.wall_clock_ms = wall_clock_ms;
    parse(profile, &r)
}

fn body(retry_after: Option<f64>, global: Option<bool>) -> BodyHints {
    BodyHints {
        retry_after,
        global,
    }
}

/// 2016-08-02T21:23:43Z, the second of Discord's example `X-RateLimit-Reset`.
const DISCORD_EXAMPLE_EPOCH_MS: u64 = 1_470_173_023_000;
/// 2026-06-01T00:00:00Z.
const JUNE_2026_MS: u64 = 1_780_272_000_000;

// =======================================================================================
// Discord's three documented 429s (protocols.md §1.2), verbatim.

#[test]
fn discord_doc_429_user() {
    let h = [
        ("Retry-After", "65"),
        ("X-RateLimit-Limit", "10"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "1470173023.123"),
        ("X-RateLimit-Reset-After", "64.57"),
        ("X-RateLimit-Bucket", "abcd1234"),
        ("X-RateLimit-Scope", "user"),
    ];
    let info = parse_full(Discord, 429, &h, body(Some(64.57), Some(false)), None);
    assert_eq!(
        info,
        RateLimitInfo {
            limit: Some(10),
            remaining: Some(0),
            reset_after: Some(64_570 * MS),
            window: None,
            bucket: Some("abcd1234".into()),
            retry_after: Some(65 * S),
            scope: Some(Scope::User),
            has_rate_limit_headers: true,
            server_time_ms: Some(1_470_172_958_553),
        }
    );
}

#[test]
fn discord_doc_429_shared() {
    let h = [
        ("Retry-After", "1337"),
        ("X-RateLimit-Limit", "10"),
        ("X-RateLimit-Remaining", "9"),
        ("X-RateLimit-Reset", "1470173023.123"),
        ("X-RateLimit-Reset-After", "64.57"),
        ("X-RateLimit-Bucket", "abcd1234"),
        ("X-RateLimit-Scope", "shared"),
    ];
    let info = parse_full(Discord, 429, &h, body(Some(1336.57), Some(false)), None);
    assert_eq!(
        info,
        RateLimitInfo {
            limit: Some(10),
            remaining: Some(9),
            reset_after: Some(64_570 * MS),
            window: None,
            bucket: Some("abcd1234".into()),
            retry_after: Some(1337 * S),
            scope: Some(Scope::Shared),
            has_rate_limit_headers: true,
            server_time_ms: Some(1_470_172_958_553),
        }
    );
}

#[test]
fn discord_doc_429_global() {
    let h = [
        ("Retry-After", "65"),
        ("X-RateLimit-Global", "true"),
        ("X-RateLimit-Scope", "global"),
    ];
    let info = parse_full(Discord, 429, &h, body(Some(64.57), Some(true)), None);
    assert_eq!(
        info,
        RateLimitInfo {
            retry_after: Some(65 * S),
            scope: Some(Scope::Global),
            has_rate_limit_headers: true,
            ..RateLimitInfo::default()
        }
    );
}

#[test]
fn discord_body_global_alone_means_global() {
    let info = parse_full(
        Discord,
        429,
        &[("Retry-After", "2")],
        body(Some(1.5), Some(true)),
        None,
    );
    assert_eq!(info.scope, Some(Scope::Global));
    assert!(!info.has_rate_limit_headers);
    assert_eq!(info.retry_after, Some(2 * S));
}

#[test]
fn discord_reset_used_only_without_reset_after() {
    let h = [
        ("X-RateLimit-Reset", "1470173023.123"),
        ("X-RateLimit-Reset-After", "5"),
    ];
    let info = parse_full(
        Discord,
        200,
        &h,
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS),
    );
    assert_eq!(info.reset_after, Some(5 * S));
    let h = [("X-RateLimit-Reset", "1470173023.123")];
    let info = parse_full(
        Discord,
        200,
        &h,
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS - 10_000),
    );
    assert_eq!(info.reset_after, Some(10_123 * MS));
    // Reset-After invalid: Reset is the fallback.
    let h = [
        ("X-RateLimit-Reset", "1470173023.123"),
        ("X-RateLimit-Reset-After", "soon"),
    ];
    let info = parse_full(
        Discord,
        200,
        &h,
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS),
    );
    assert_eq!(info.reset_after, Some(123 * MS));
}

// =======================================================================================
// Hostile inputs, protocols.md §7 (numbered as there).

#[test]
fn h01_no_rate_limit_headers() {
    for profile in [Discord, Ietf, GitHub, RetryAfterOnly] {
        let h = [
            ("Content-Type", "text/html"),
            ("Date", "Mon, 01 Jun 2026 00:00:00 GMT"),
            ("Age", "0"),
        ];
        assert_eq!(
            parse_h(profile, &h),
            RateLimitInfo::default(),
            "{profile:?}"
        );
        assert_eq!(
            parse_h(profile, &[]),
            RateLimitInfo::default(),
            "{profile:?}"
        );
    }
}

#[test]
fn h02_partial_sets_update_fields_independently() {
    let info = parse_h(Discord, &[("X-RateLimit-Limit", "5")]);
    assert_eq!(
        info,
        RateLimitInfo {
            limit: Some(5),
            has_rate_limit_headers: true,
            ..Default::default()
        }
    );
    // Remaining is never defaulted from Limit.
    assert_eq!(info.remaining, None);
    let info = parse_h(
        Discord,
        &[("Retry-After", "3"), ("X-RateLimit-Global", "true")],
    );
    assert_eq!(
        info,
        RateLimitInfo {
            retry_after: Some(3 * S),
            scope: Some(Scope::Global),
            has_rate_limit_headers: true,
            ..Default::default()
        }
    );
    let info = parse_h(
        Discord,
        &[("X-RateLimit-Bucket", "41f9cd5d28af77da04563bcb1d67fdfd")],
    );
    assert_eq!(
        info.bucket.as_deref(),
        Some("41f9cd5d28af77da04563bcb1d67fdfd")
    );
    assert_eq!(
        (info.limit, info.remaining, info.reset_after),
        (None, None, None)
    );
}

#[test]
fn h03_429_without_any_hint() {
    let info = parse_full(
        GitHub,
        429,
        &[("x-ratelimit-remaining", "12")],
        BodyHints::default(),
        None,
    );
    assert_eq!(info.retry_after, None);
    let info = parse_full(Discord, 429, &[], BodyHints::default(), None);
    assert_eq!(info, RateLimitInfo::default());
    // GitHub secondary limits: "The Retry-After header can sometimes be blank".
    let info = parse_h(GitHub, &[("retry-after", "")]);
    assert_eq!(info.retry_after, None);
}

#[test]
fn h04_non_numeric_values_are_ignored_alone() {
    let h = [
        ("X-RateLimit-Limit", "unknown"),
        ("X-RateLimit-Remaining", ""),
        ("Retry-After", "rand(30),add(30)"),
        ("X-RateLimit-Reset-After", "\u{FFFD}\u{FFFD}"), // a non-UTF-8 value, decoded lossily
        ("X-RateLimit-Bucket", "abcd1234"),
    ];
    let info = parse_h(Discord, &h);
    assert_eq!(
        (
            info.limit,
            info.remaining,
            info.reset_after,
            info.retry_after
        ),
        (None, None, None, None)
    );
    assert_eq!(info.bucket.as_deref(), Some("abcd1234"));
    assert!(info.has_rate_limit_headers);
}

#[test]
fn h05_decimals_where_integers_are_expected() {
    let info = parse_h(
        Discord,
        &[
            ("X-RateLimit-Remaining", "599.0"),
            ("X-RateLimit-Limit", "5.7"),
            ("Retry-After", "1.5"),
        ],
    );
    assert_eq!(info.remaining, Some(599));
    assert_eq!(info.limit, Some(5)); // counts round down
    assert_eq!(info.retry_after, Some(1_500 * MS)); // waits round up
    assert_eq!(parse_retry_after("1.0001", None), Some(1_001 * MS));
    // SF t=1.5 is a Decimal where -10 requires an Integer: that item is malformed.
    let info = parse_h(Ietf, &[("RateLimit", "\"default\";r=5;t=1.5")]);
    assert_eq!((info.remaining, info.reset_after), (None, None));
    assert!(info.has_rate_limit_headers);
}

#[test]
fn h06_tiny_fractions_round_up_not_to_zero() {
    let info = parse_h(Discord, &[("X-RateLimit-Reset-After", "0.001")]);
    assert_eq!(info.reset_after, Some(MS));
    let info = parse_h(Discord, &[("X-RateLimit-Reset-After", "0.0004")]);
    assert_eq!(info.reset_after, Some(MS));
    let info = parse_h(Discord, &[("X-RateLimit-Reset-After", "0.000")]);
    assert_eq!(info.reset_after, Some(0));
    let info = parse_full(Discord, 429, &[], body(Some(0.0004), None), None);
    assert_eq!(info.retry_after, Some(MS));
    // A zero Retry-After is returned as-is: the engine enforces the minimum.
    assert_eq!(
        parse_h(RetryAfterOnly, &[("Retry-After", "0")]).retry_after,
        Some(0)
    );
}

#[test]
fn h07_negative_values_are_invalid() {
    let info = parse_h(
        Discord,
        &[
            ("Retry-After", "-1"),
            ("X-RateLimit-Reset-After", "-5"),
            ("X-RateLimit-Remaining", "-1"),
        ],
    );
    assert_eq!(
        (info.retry_after, info.reset_after, info.remaining),
        (None, None, None)
    );
    let info = parse_full(Discord, 429, &[], body(Some(-1.0), None), None);
    assert_eq!(info.retry_after, None);
    let info = parse_h(Ietf, &[("RateLimit", "\"d\";r=-1;t=5")]);
    assert_eq!(info.remaining, None);
}

#[test]
fn h08_nan_inf_exponent_hex_sign_underscore() {
    for v in [
        "NaN",
        "nan",
        "Infinity",
        "-Infinity",
        "inf",
        "1e309",
        "1e3",
        "0x10",
        "+5",
        "1_000",
        "5s",
        "٥",
    ] {
        assert_eq!(parse_retry_after(v, None), None, "{v:?}");
        let info = parse_h(
            Discord,
            &[("X-RateLimit-Remaining", v), ("X-RateLimit-Reset-After", v)],
        );
        assert_eq!((info.remaining, info.reset_after), (None, None), "{v:?}");
    }
    // Padding is fine.
    assert_eq!(parse_retry_after(" 5 ", None), Some(5 * S));
    assert_eq!(
        parse_h(Discord, &[("X-RateLimit-Remaining", "\t5 ")]).remaining,
        Some(5)
    );
    for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(
            parse_full(Discord, 429, &[], body(Some(f), None), None).retry_after,
            None
        );
    }
}

#[test]
fn h09_huge_values_clamp_to_30_days() {
    assert_eq!(MAX_DURATION, 30 * 24 * 3600 * S);
    // The draft's DoS example is under 30 days and kept as-is (the engine clamps further).
    assert_eq!(parse_retry_after("1000000", None), Some(1_000_000 * S));
    // An epoch taken as a delta (crunchtools: "Retry after 1792152901 seconds").
    assert_eq!(parse_retry_after("1792152901", None), Some(MAX_DURATION));
    assert_eq!(
        parse_retry_after(&"9".repeat(400), None),
        Some(MAX_DURATION)
    );
    let info = parse_h(Discord, &[("X-RateLimit-Reset-After", "1792152901.5")]);
    assert_eq!(info.reset_after, Some(MAX_DURATION));
    // 13-digit epoch milliseconds where seconds are expected: far future, clamped.
    let info = parse_full(
        Discord,
        200,
        &[("X-RateLimit-Reset", "1470173023123")],
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS),
    );
    assert_eq!(info.reset_after, Some(MAX_DURATION));
    // A 16-digit SF Integer fails the whole field.
    let info = parse_h(
        Ietf,
        &[("RateLimit", "\"a\";r=1000000000000000;t=1, \"b\";r=5;t=1")],
    );
    assert_eq!(info.remaining, None);
    let info = parse_full(Discord, 429, &[], body(Some(1e300), None), None);
    assert_eq!(info.retry_after, Some(MAX_DURATION));
}

#[test]
fn h10_huge_remaining_saturates() {
    let info = parse_h(
        Ietf,
        &[(
            "RateLimit",
            "\"default\";r=300000000;t=60;pk=:QXBwLTk5OQ==:",
        )],
    );
    assert_eq!(info.remaining, Some(300_000_000));
    let info = parse_h(Ietf, &[("RateLimit", "\"default\";r=999999999999999;t=60")]);
    assert_eq!(info.remaining, Some(u32::MAX));
    let info = parse_h(
        Discord,
        &[("X-RateLimit-Remaining", "99999999999999999999999")],
    );
    assert_eq!(info.remaining, Some(u32::MAX));
}

#[test]
fn h11_duplicated_singletons_take_the_conservative_value() {
    let info = parse_h(GitHub, &[("x-ratelimit-remaining", "991, 98")]);
    assert_eq!(info.remaining, Some(98));
    let info = parse_h(
        Discord,
        &[
            ("X-RateLimit-Remaining", "4"),
            ("x-ratelimit-remaining", "2"),
            ("X-RateLimit-Limit", "10, 5"),
            ("X-RateLimit-Reset-After", "1.5"),
            ("X-RATELIMIT-RESET-AFTER", "3"),
        ],
    );
    assert_eq!(
        (info.limit, info.remaining, info.reset_after),
        (Some(5), Some(2), Some(3 * S))
    );
    let info = parse_h(
        RetryAfterOnly,
        &[("Retry-After", "120"), ("Retry-After", "60")],
    );
    assert_eq!(info.retry_after, Some(120 * S));
    assert_eq!(parse_retry_after("120, 120", None), Some(120 * S));
    assert_eq!(parse_retry_after("5, junk, 7", None), Some(7 * S));
}

#[test]
fn h12_header_name_variants() {
    // Case-insensitive names.
    let info = parse_h(Discord, &[("x-RATELIMIT-remaining", "3")]);
    assert_eq!(info.remaining, Some(3));
    // Other providers' spellings and window-suffixed names are not this profile's family.
    for name in [
        "X-Rate-Limit-Remaining",
        "x-ratelimit-remaining-minute",
        "RateLimit-Remaining",
        "X-RateLimit",
    ] {
        let info = parse_h(Discord, &[(name, "3")]);
        assert_eq!(info, RateLimitInfo::default(), "{name}");
    }
    let info = parse_h(Ietf, &[("X-RateLimit-Remaining", "3")]);
    assert_eq!(info, RateLimitInfo::default());
    let info = parse_h(
        GitHub,
        &[
            ("X-RateLimit-Reset-After", "3"),
            ("X-RateLimit-Bucket", "x"),
        ],
    );
    assert_eq!(info, RateLimitInfo::default());
}

#[test]
fn h13_ietf_syntax_variants() {
    // Token policy name.
    let info = parse_h(Ietf, &[("RateLimit", "default;r=1;t=2")]);
    assert_eq!(
        (info.remaining, info.reset_after, info.bucket.as_deref()),
        (Some(1), Some(2 * S), Some("default"))
    );
    // Uppercase key: the whole field is invalid.
    let info = parse_h(Ietf, &[("RateLimit", "\"default\";R=1;t=2")]);
    assert_eq!((info.remaining, info.reset_after), (None, None));
    // Unknown and vendor parameters are comments.
    let info = parse_h(
        Ietf,
        &[("RateLimit", "\"default\";r=1;t=2;acme-burst=5;x;z=\"?\"")],
    );
    assert_eq!(info.remaining, Some(1));
    // A pk that is not base64 fails the field.
    let info = parse_h(Ietf, &[("RateLimit", "\"default\";r=1;pk=:ab!c:")]);
    assert_eq!(info.remaining, None);
    // A pk of the wrong type makes that item malformed.
    let info = parse_h(Ietf, &[("RateLimit", "\"default\";r=1;pk=\"abc\"")]);
    assert_eq!(info.remaining, None);
    // A -07 Dictionary where a -10 List is expected: read as -07.
    let info = parse_h(Ietf, &[("RateLimit", "limit=100, remaining=50, reset=5")]);
    assert_eq!(
        (info.limit, info.remaining, info.reset_after),
        (Some(100), Some(50), Some(5 * S))
    );
}

#[test]
fn h14_bucket_hash_validation() {
    let b = |v: &str| parse_h(Discord, &[("X-RateLimit-Bucket", v)]).bucket;
    assert_eq!(b("  abcd1234 "), Some("abcd1234".into()));
    assert_eq!(b(""), None);
    assert_eq!(b("   "), None);
    assert_eq!(b(&"a".repeat(128)), Some("a".repeat(128)));
    assert_eq!(b(&"a".repeat(129)), None);
    assert_eq!(b("ab\u{0}cd"), None);
    assert_eq!(b("ab\ncd"), None);
    assert_eq!(b("ab\u{7f}cd"), None);
    // The first valid line wins; an empty line does not erase it.
    let info = parse_h(
        Discord,
        &[
            ("X-RateLimit-Bucket", ""),
            ("X-RateLimit-Bucket", "h1"),
            ("X-RateLimit-Bucket", "h2"),
        ],
    );
    assert_eq!(info.bucket.as_deref(), Some("h1"));
    assert!(parse_h(Discord, &[("X-RateLimit-Bucket", "")]).has_rate_limit_headers);
}

#[test]
fn h15_absolute_resets_need_a_clock() {
    let h = [("X-RateLimit-Reset", "1470173023.123")];
    // No wall clock and no Date: ignored.
    assert_eq!(parse_h(Discord, &h).reset_after, None);
    // The wall clock.
    let info = parse_full(
        Discord,
        200,
        &h,
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS - 2_000),
    );
    assert_eq!(info.reset_after, Some(2_123 * MS));
    // The Date header as "now".
    let hd = [
        ("X-RateLimit-Reset", "1470173023.123"),
        ("Date", "Tue, 02 Aug 2016 21:23:40 GMT"),
    ];
    assert_eq!(parse_h(Discord, &hd).reset_after, Some(3_123 * MS));
    // The wall clock wins over Date.
    let info = parse_full(
        Discord,
        200,
        &hd,
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS),
    );
    assert_eq!(info.reset_after, Some(123 * MS));
    // Several Date lines: the earliest (the longer, safer wait).
    let hd2 = [
        ("X-RateLimit-Reset", "1470173023"),
        ("Date", "Tue, 02 Aug 2016 21:23:40 GMT"),
        ("Date", "Tue, 02 Aug 2016 21:23:20 GMT"),
    ];
    assert_eq!(parse_h(Discord, &hd2).reset_after, Some(23 * S));
    // A reset in the past is 0.
    let info = parse_full(
        Discord,
        200,
        &h,
        BodyHints::default(),
        Some(DISCORD_EXAMPLE_EPOCH_MS + 60_000),
    );
    assert_eq!(info.reset_after, Some(0));
    // An invalid Date is no clock.
    assert_eq!(
        parse_h(Discord, &[h[0], ("Date", "yesterday")]).reset_after,
        None
    );
}

#[test]
fn h16_retry_after_dates_past_and_invalid() {
    let now = Some(JUNE_2026_MS);
    assert_eq!(
        parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT", now),
        Some(0)
    );
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:00:00 GMT", now),
        Some(0)
    );
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:00:01 GMT", now),
        Some(S)
    );
    assert_eq!(
        parse_retry_after("Mon, 32 Jun 2026 00:00:01 GMT", now),
        None
    );
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:00:01 UTC", now),
        None
    );
    assert_eq!(parse_retry_after("2026-06-01T00:00:01Z", now), None);
    // A date without any clock is no hint.
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:00:01 GMT", None),
        None
    );
}

#[test]
fn h17_retry_after_is_seconds_never_milliseconds() {
    // Discord v8+: a v6-style millisecond value is read as seconds (the profile decides).
    let info = parse_full(
        Discord,
        429,
        &[("Retry-After", "6457")],
        body(Some(6.457), None),
        None,
    );
    assert_eq!(info.retry_after, Some(6457 * S));
}

#[test]
fn h18_429_with_unparseable_body_is_classified_by_headers() {
    // The driver passes no body hints for an HTML 1015 page or `error code: 1015`.
    let h = [
        ("Content-Type", "application/json"),
        ("Server", "cloudflare"),
    ];
    let info = parse_full(Discord, 429, &h, BodyHints::default(), None);
    assert!(!info.has_rate_limit_headers);
    assert_eq!(info.retry_after, None);
    // Cloudflare sending Retry-After only: still an edge response.
    let info = parse_full(
        Discord,
        429,
        &[("Retry-After", "3600")],
        BodyHints::default(),
        None,
    );
    assert!(!info.has_rate_limit_headers);
    assert_eq!(info.retry_after, Some(3600 * S));
}

#[test]
fn h19_429_with_remaining_above_zero() {
    let h = [
        ("X-RateLimit-Remaining", "3"),
        ("X-RateLimit-Limit", "5"),
        ("Retry-After", "2"),
    ];
    let info = parse_full(Discord, 429, &h, body(Some(1.2), Some(false)), None);
    assert_eq!(info.remaining, Some(3));
    assert_eq!(info.retry_after, Some(2 * S));
    assert_eq!(info.scope, None);
}

#[test]
fn h20_retry_after_longer_than_reset_after_both_reported() {
    let h = [
        ("X-RateLimit-Reset-After", "64.57"),
        ("Retry-After", "1337"),
    ];
    let info = parse_h(Discord, &h);
    assert_eq!(
        (info.reset_after, info.retry_after),
        (Some(64_570 * MS), Some(1337 * S))
    );
    let h = [("RateLimit", "\"default\";r=0;t=10"), ("Retry-After", "30")];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (info.reset_after, info.retry_after),
        (Some(10 * S), Some(30 * S))
    );
}

#[test]
fn h21_status_does_not_change_parsing() {
    let h = [
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-limit", "60"),
        ("x-ratelimit-resource", "core"),
    ];
    let a = parse_full(GitHub, 403, &h, BodyHints::default(), None);
    let b = parse_full(GitHub, 200, &h, BodyHints::default(), None);
    let c = parse_full(GitHub, 503, &h, BodyHints::default(), None);
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_eq!(a.remaining, Some(0));
}

#[test]
fn h24_cached_responses_keep_only_retry_after() {
    let h = [
        ("Age", "12"),
        ("X-RateLimit-Limit", "10"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "5"),
        ("X-RateLimit-Bucket", "abc"),
        ("X-RateLimit-Scope", "shared"),
        ("Retry-After", "7"),
    ];
    let info = parse_h(Discord, &h);
    assert_eq!(
        info,
        RateLimitInfo {
            retry_after: Some(7 * S),
            scope: Some(Scope::Shared),
            has_rate_limit_headers: true,
            ..Default::default()
        }
    );
    let info = parse_h(Ietf, &[("age", "1"), ("RateLimit", "\"d\";r=1;t=1")]);
    assert_eq!((info.remaining, info.has_rate_limit_headers), (None, true));
    let info = parse_h(GitHub, &[("AGE", "3"), ("x-ratelimit-remaining", "1")]);
    assert_eq!(info.remaining, None);
    // Age 0, or an invalid Age, is not cached.
    assert_eq!(
        parse_h(Discord, &[("Age", "0"), ("X-RateLimit-Remaining", "1")]).remaining,
        Some(1)
    );
    assert_eq!(
        parse_h(Discord, &[("Age", "-3"), ("X-RateLimit-Remaining", "1")]).remaining,
        Some(1)
    );
}

#[test]
fn h25_fields_on_redirects_are_read() {
    let info = parse_full(
        Ietf,
        301,
        &[("RateLimit", "\"d\";r=0;t=2")],
        BodyHints::default(),
        None,
    );
    assert_eq!((info.remaining, info.reset_after), (Some(0), Some(2 * S)));
}

#[test]
fn h26_unknown_enum_values() {
    let scope = |v: &str| parse_h(Discord, &[("X-RateLimit-Scope", v)]).scope;
    assert_eq!(scope("bot"), Some(Scope::User));
    assert_eq!(scope(""), Some(Scope::User));
    assert_eq!(scope("USER"), Some(Scope::User));
    assert_eq!(scope("Shared"), Some(Scope::Shared));
    assert_eq!(scope(" global "), Some(Scope::Global));
    // Disagreeing lines: the strictest.
    let info = parse_h(
        Discord,
        &[
            ("X-RateLimit-Scope", "shared"),
            ("X-RateLimit-Scope", "user"),
        ],
    );
    assert_eq!(info.scope, Some(Scope::User));
    let global = |v: &str| parse_h(Discord, &[("X-RateLimit-Global", v)]).scope;
    assert_eq!(global("True"), Some(Scope::Global));
    assert_eq!(global("TRUE"), Some(Scope::Global));
    assert_eq!(global("1"), Some(Scope::Global));
    assert_eq!(global("false"), None);
    assert_eq!(global("yes"), None);
    // Global overrides a narrower scope.
    let info = parse_h(
        Discord,
        &[
            ("X-RateLimit-Scope", "shared"),
            ("X-RateLimit-Global", "true"),
        ],
    );
    assert_eq!(info.scope, Some(Scope::Global));
}

#[test]
fn h27_too_many_items_or_bytes_ignore_the_field() {
    let items: Vec<String> = (0..65).map(|i| format!("\"p{i}\";r={i}")).collect();
    let info = parse_h(Ietf, &[("RateLimit", &items.join(", "))]);
    assert_eq!(info.remaining, None);
    let info = parse_h(Ietf, &[("RateLimit", &items[..64].join(", "))]);
    assert_eq!(info.remaining, Some(0));
    // Over 4096 bytes in total, even across lines.
    let long = format!("\"{}\";r=1", "x".repeat(4100));
    assert_eq!(parse_h(Ietf, &[("RateLimit", &long)]).remaining, None);
    let half = format!("\"{}\";r=1", "x".repeat(2100));
    assert_eq!(parse_h(Ietf, &[("RateLimit", &half)]).remaining, Some(1));
    assert_eq!(
        parse_h(Ietf, &[("RateLimit", &half), ("RateLimit", &half)]).remaining,
        None
    );
    // Long legacy values are just invalid numbers or clamp.
    let junk = "1".repeat(100_000) + "x";
    assert_eq!(
        parse_h(Discord, &[("X-RateLimit-Remaining", &junk)]).remaining,
        None
    );
}

#[test]
fn h28_disagreeing_sources_take_the_max_wait() {
    let info = parse_full(
        Discord,
        429,
        &[("Retry-After", "65")],
        body(Some(64.57), None),
        None,
    );
    assert_eq!(info.retry_after, Some(65 * S));
    let info = parse_full(
        Discord,
        429,
        &[("Retry-After", "1")],
        body(Some(2.5), None),
        None,
    );
    assert_eq!(info.retry_after, Some(2_500 * MS));
    let info = parse_full(Discord, 429, &[], body(Some(64.57), None), None);
    assert_eq!(info.retry_after, Some(64_570 * MS));
    // Remaining 0 on a 2xx is still reported.
    assert_eq!(
        parse_full(
            Discord,
            200,
            &[("X-RateLimit-Remaining", "0")],
            BodyHints::default(),
            None
        )
        .remaining,
        Some(0)
    );
}

// =======================================================================================
// IETF drafts (protocols.md §2.1-2.3).

#[test]
fn ietf_10_single_policy() {
    let h = [
        ("RateLimit-Policy", "\"default\";q=100;w=10"),
        ("RateLimit", "\"default\";r=50;t=30"),
    ];
    assert_eq!(
        parse_h(Ietf, &h),
        RateLimitInfo {
            limit: Some(100),
            remaining: Some(50),
            reset_after: Some(30 * S),
            window: Some(10 * S),
            bucket: Some("default".into()),
            retry_after: None,
            scope: None,
            has_rate_limit_headers: true,
            server_time_ms: None,
        }
    );
}

#[test]
fn ietf_10_two_policies_most_restrictive_wins() {
    let h = [
        (
            "RateLimit-Policy",
            "\"permin\";q=50;w=60,\"perhr\";q=1000;w=3600",
        ),
        ("RateLimit", "\"permin\";r=10;t=20, \"perhr\";r=5;t=1000"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (
            info.limit,
            info.remaining,
            info.reset_after,
            info.window,
            info.bucket.as_deref()
        ),
        (
            Some(1000),
            Some(5),
            Some(1000 * S),
            Some(3600 * S),
            Some("perhr")
        )
    );
    // Tie on remaining: the longest reset.
    let h = [("RateLimit", "\"a\";r=0;t=5, \"b\";r=0;t=50, \"c\";r=0")];
    assert_eq!(parse_h(Ietf, &h).bucket.as_deref(), Some("b"));
}

#[test]
fn ietf_10_policies_split_over_lines() {
    let h = [
        ("RateLimit-Policy", "\"permin\";q=50;w=60"),
        ("RateLimit-Policy", "\"perhr\";q=1000;w=3600"),
        ("RateLimit", "\"permin\";r=1;t=20"),
        ("RateLimit", "\"perhr\";r=500;t=1000"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (info.limit, info.remaining, info.window),
        (Some(50), Some(1), Some(60 * S))
    );
}

#[test]
fn ietf_10_one_bad_line_poisons_its_siblings() {
    let h = [
        ("RateLimit", "\"permin\";r=1;t=20"),
        ("RateLimit", "\"perhr\";r=?x"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(info.remaining, None);
    assert!(info.has_rate_limit_headers);
    // An SF-valid item with a wrong type (`r` a Token) is dropped alone.
    let h = [
        ("RateLimit", "\"permin\";r=1;t=20"),
        ("RateLimit", "\"perhr\";r=oops"),
    ];
    assert_eq!(parse_h(Ietf, &h).remaining, Some(1));
}

#[test]
fn ietf_10_partition_keys() {
    let h = [
        (
            "RateLimit-Policy",
            "\"peruser\";q=100;w=60;pk=:cHsdsRa894==:",
        ),
        ("RateLimit", "\"peruser\";r=99;t=60;pk=:cHsdsRa894==:"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (info.limit, info.remaining, info.window),
        (Some(100), Some(99), Some(60 * S))
    );
    let h = [(
        "RateLimit-Policy",
        "\"peruser\";q=65535;qu=\"content-bytes\";w=10;pk=:sdfjLJUOUH==:",
    )];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (info.limit, info.window, info.bucket.as_deref()),
        (Some(65535), Some(10 * S), Some("peruser"))
    );
    // Same name, different partition keys: the matching pk is preferred.
    let h = [
        (
            "RateLimit-Policy",
            "\"u\";q=1;w=1;pk=:YQ==:, \"u\";q=2;w=2;pk=:Yg==:",
        ),
        ("RateLimit", "\"u\";r=0;pk=:Yg==:"),
    ];
    assert_eq!(parse_h(Ietf, &h).limit, Some(2));
}

#[test]
fn ietf_10_no_reset_parameter() {
    let info = parse_h(
        Ietf,
        &[("RateLimit", "\"default\";r=999;pk=:dHJpYWwxMjEzMjM=:")],
    );
    assert_eq!((info.remaining, info.reset_after), (Some(999), None));
}

#[test]
fn ietf_10_q_inside_ratelimit_is_ignored() {
    let info = parse_h(Ietf, &[("RateLimit", "\"sliding\";q=12;r=6;t=1")]);
    assert_eq!(
        (info.limit, info.remaining, info.reset_after),
        (None, Some(6), Some(S))
    );
}

#[test]
fn ietf_10_sixteen_digit_integer_fails_the_field() {
    let info = parse_h(
        Ietf,
        &[("RateLimit-Policy", "\"d\";q=1000000000000000;w=1")],
    );
    assert_eq!(info.limit, None);
    let info = parse_h(Ietf, &[("RateLimit-Policy", "\"d\";q=999999999999999;w=1")]);
    assert_eq!(info.limit, Some(u32::MAX));
}

#[test]
fn ietf_10_policy_semantics() {
    // q is required, w must be > 0, qu must be a String.
    for bad in [
        "\"d\";w=10",
        "\"d\";q=10;w=0",
        "\"d\";q=10;qu=requests",
        "\"d\";q=-1",
        "\"d\";q=1.5",
    ] {
        assert_eq!(
            parse_h(Ietf, &[("RateLimit-Policy", bad)]).limit,
            None,
            "{bad}"
        );
    }
    // A malformed item does not take its valid siblings down.
    let info = parse_h(Ietf, &[("RateLimit-Policy", "\"d\";w=10, \"e\";q=7;w=3")]);
    assert_eq!((info.limit, info.window), (Some(7), Some(3 * S)));
}

#[test]
fn ietf_policy_only_describes_the_slowest_policy() {
    let info = parse_h(
        Ietf,
        &[(
            "RateLimit-Policy",
            "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400",
        )],
    );
    assert_eq!(
        (
            info.limit,
            info.window,
            info.bucket.as_deref(),
            info.remaining
        ),
        (Some(1000), Some(86400 * S), Some("daily"), None)
    );
}

#[test]
fn ietf_10_express_rate_limit_draft_8() {
    let h = [
        (
            "RateLimit-Policy",
            "\"100-in-1min\"; q=100; w=60; pk=:ZTNiMGM0NDI5OGZj:",
        ),
        ("RateLimit", "\"100-in-1min\"; r=99; t=60"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (info.limit, info.remaining, info.reset_after, info.window),
        (Some(100), Some(99), Some(60 * S), Some(60 * S))
    );
}

#[test]
fn ietf_07_dictionary_and_policy() {
    let h = [
        ("RateLimit", "limit=100, remaining=50, reset=5"),
        ("RateLimit-Policy", "100;w=10"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (
            info.limit,
            info.remaining,
            info.reset_after,
            info.window,
            info.bucket
        ),
        (Some(100), Some(50), Some(5 * S), Some(10 * S), None)
    );
    // express-rate-limit draft-7.
    let h = [
        ("RateLimit", "limit=100, remaining=99, reset=60"),
        ("RateLimit-Policy", "100;w=60"),
    ];
    assert_eq!(parse_h(Ietf, &h).window, Some(60 * S));
    // A non-Integer member is ignored on its own.
    let info = parse_h(
        Ietf,
        &[("RateLimit", "limit=100, remaining=\"x\", reset=1.5")],
    );
    assert_eq!(
        (info.limit, info.remaining, info.reset_after),
        (Some(100), None, None)
    );
}

#[test]
fn ietf_06_legacy_fields_and_policy() {
    let h = [
        ("RateLimit-Limit", "10"),
        ("RateLimit-Remaining", "9"),
        ("RateLimit-Reset", "1"),
        ("RateLimit-Policy", "10;w=1, 50;w=60, 1000;w=3600"),
    ];
    let info = parse_h(Ietf, &h);
    assert_eq!(
        (info.limit, info.remaining, info.reset_after, info.window),
        (Some(10), Some(9), Some(S), Some(S))
    );
    // Early drafts put policies into RateLimit-Limit; parameters are ignored.
    let info = parse_h(
        Ietf,
        &[
            ("RateLimit-Limit", "10, 10;w=1, 50;w=60"),
            ("RateLimit-Reset", "7;x=1"),
        ],
    );
    assert_eq!((info.limit, info.reset_after), (Some(10), Some(7 * S)));
    // express-rate-limit draft-6 (before PR #553, Reset is omitted when 0).
    let info = parse_h(
        Ietf,
        &[
            ("RateLimit-Policy", "100;w=60"),
            ("RateLimit-Limit", "100"),
            ("RateLimit-Remaining", "0"),
        ],
    );
    assert_eq!(
        (info.limit, info.remaining, info.reset_after, info.window),
        (Some(100), Some(0), None, Some(60 * S))
    );
}

#[test]
fn ietf_retry_after_with_ratelimit() {
    let h = [
        ("RateLimit", "\"d\";r=0;t=5"),
        ("Retry-After", "Mon, 01 Jun 2026 00:01:00 GMT"),
    ];
    let info = parse_full(Ietf, 429, &h, BodyHints::default(), Some(JUNE_2026_MS));
    assert_eq!(
        (info.reset_after, info.retry_after),
        (Some(5 * S), Some(60 * S))
    );
}

// =======================================================================================
// GitHub (protocols.md §4).

#[test]
fn github_primary() {
    let h = [
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "4999"),
        ("x-ratelimit-used", "1"),
        ("x-ratelimit-reset", "1691591363"),
        ("x-ratelimit-resource", "core"),
    ];
    let info = parse_full(
        GitHub,
        200,
        &h,
        BodyHints::default(),
        Some(1_691_591_363_000 - 3_600_000),
    );
    assert_eq!(
        info,
        RateLimitInfo {
            limit: Some(5000),
            remaining: Some(4999),
            reset_after: Some(3600 * S),
            window: None,
            bucket: Some("core".into()),
            retry_after: None,
            scope: None,
            has_rate_limit_headers: true,
            server_time_ms: None,
        }
    );
}

#[test]
fn github_primary_exhausted_with_date_header() {
    let h = [
        ("x-ratelimit-limit", "60"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-used", "60"),
        ("x-ratelimit-reset", "1691591363"),
        ("x-ratelimit-resource", "core"),
        ("date", "Wed, 09 Aug 2023 14:28:23 GMT"),
    ];
    let info = parse_full(GitHub, 403, &h, BodyHints::default(), None);
    assert_eq!((info.remaining, info.reset_after), (Some(0), Some(60 * S)));
}

#[test]
fn github_secondary() {
    let h = [
        ("retry-after", "60"),
        ("x-ratelimit-remaining", "4000"),
        ("x-ratelimit-resource", "core"),
    ];
    let info = parse_full(GitHub, 403, &h, BodyHints::default(), None);
    assert_eq!(
        (info.retry_after, info.remaining),
        (Some(60 * S), Some(4000))
    );
}

#[test]
fn github_used_gives_remaining_when_missing() {
    let info = parse_h(
        GitHub,
        &[("x-ratelimit-limit", "5000"), ("x-ratelimit-used", "4990")],
    );
    assert_eq!(info.remaining, Some(10));
    let info = parse_h(GitHub, &[("x-ratelimit-used", "4990")]);
    assert_eq!((info.remaining, info.has_rate_limit_headers), (None, true));
}

#[test]
fn github_reset_without_clock_is_ignored() {
    let info = parse_h(GitHub, &[("x-ratelimit-reset", "1691591363")]);
    assert_eq!(
        (info.reset_after, info.has_rate_limit_headers),
        (None, true)
    );
}

// =======================================================================================
// Retry-After (protocols.md §3).

#[test]
fn retry_after_three_date_formats() {
    let now = Some(JUNE_2026_MS);
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:02:00 GMT", now),
        Some(120 * S)
    );
    assert_eq!(
        parse_retry_after("Monday, 01-Jun-26 00:02:00 GMT", now),
        Some(120 * S)
    );
    assert_eq!(
        parse_retry_after("Mon Jun  1 00:02:00 2026", now),
        Some(120 * S)
    );
    assert_eq!(
        parse_retry_after("Mon Jun 01 00:02:00 2026", now),
        Some(120 * S)
    );
    // Through parse, with the wall clock or the Date header.
    let h = [("Retry-After", "Mon, 01 Jun 2026 00:02:00 GMT")];
    assert_eq!(
        parse_full(RetryAfterOnly, 503, &h, BodyHints::default(), now).retry_after,
        Some(120 * S)
    );
    let h = [
        ("Retry-After", "Mon Jun  1 00:02:00 2026"),
        ("Date", "Mon, 01 Jun 2026 00:01:00 GMT"),
    ];
    assert_eq!(parse_h(RetryAfterOnly, &h).retry_after, Some(60 * S));
    // The wall clock has millisecond precision.
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:02:00 GMT", Some(JUNE_2026_MS + 500)),
        Some(119_500 * MS)
    );
}

#[test]
fn retry_after_past_dates_are_zero() {
    let now = Some(JUNE_2026_MS);
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
        Some(0)
    );
    assert_eq!(
        parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now),
        Some(0)
    );
    assert_eq!(parse_retry_after("Sun Nov  6 08:49:37 1994", now), Some(0));
    assert_eq!(
        parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now),
        Some(0)
    );
    assert_eq!(
        parse_retry_after("Mon, 01 Jan 0001 00:00:00 GMT", now),
        Some(0)
    );
}

#[test]
fn retry_after_two_digit_years() {
    // 2029-12-31T23:59:00Z: "30" is 2030, one minute ahead.
    let now = Some(1_893_456_000_000 - 60_000);
    assert_eq!(
        parse_retry_after("Tuesday, 01-Jan-30 00:00:00 GMT", now),
        Some(60 * S)
    );
    // From 2026, "94" would be 2094, more than 50 years ahead: it is 1994, in the past.
    assert_eq!(
        parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", Some(JUNE_2026_MS)),
        Some(0)
    );
    // "76" from 2026 is 2076, exactly 50 years: kept in the future, clamped to 30 days.
    assert_eq!(
        parse_retry_after("Monday, 01-Jun-76 00:00:00 GMT", Some(JUNE_2026_MS)),
        Some(MAX_DURATION)
    );
}

#[test]
fn retry_after_far_future_date_clamps() {
    assert_eq!(
        parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", Some(JUNE_2026_MS)),
        Some(MAX_DURATION)
    );
}

#[test]
fn retry_after_garbage() {
    for v in [
        "", " ", "-1", "NaN", "inf", "1e3", "0x10", "+5", "1_000", "soon", "5 s", ",", "１２",
    ] {
        assert_eq!(parse_retry_after(v, Some(JUNE_2026_MS)), None, "{v:?}");
    }
    assert_eq!(parse_retry_after("120", None), Some(120 * S));
    assert_eq!(parse_retry_after("0", None), Some(0));
    // An empty list element is skipped, like any unparsable part.
    assert_eq!(parse_retry_after("5,", None), Some(5 * S));
    // Mixed numbers and dates in one comma-joined value: the largest.
    assert_eq!(
        parse_retry_after("5, Mon, 01 Jun 2026 00:02:00 GMT", Some(JUNE_2026_MS)),
        Some(120 * S)
    );
    assert_eq!(
        parse_retry_after("Mon, 01 Jun 2026 00:02:00 GMT, 500", Some(JUNE_2026_MS)),
        Some(500 * S)
    );
}

#[test]
fn retry_after_only_ignores_other_headers() {
    let h = [
        ("X-RateLimit-Remaining", "0"),
        ("RateLimit", "\"d\";r=0;t=1"),
        ("Retry-After", "9"),
    ];
    assert_eq!(
        parse_h(RetryAfterOnly, &h),
        RateLimitInfo {
            retry_after: Some(9 * S),
            ..Default::default()
        }
    );
    let info = parse_full(RetryAfterOnly, 429, &[], body(Some(1.5), Some(true)), None);
    assert_eq!(
        info,
        RateLimitInfo {
            retry_after: Some(1_500 * MS),
            ..Default::default()
        }
    );
}

#[test]
fn discord_server_time_from_reset_and_reset_after() {
    // The documented pair: the server answered at Reset less Reset-After.
    let h = [("X-RateLimit-Reset", "1470173023.123"), ("X-RateLimit-Reset-After", "64.57")];
    assert_eq!(parse_h(Discord, &h).server_time_ms, Some(1_470_172_958_553));
    // Either one alone, two values of one, or a clock outside 2001..2286: unknown.
    for h in [
        vec![("X-RateLimit-Reset", "1470173023.123")],
        vec![("X-RateLimit-Reset-After", "64.57")],
        vec![("X-RateLimit-Reset", "1470173023.123, 1470173024"), ("X-RateLimit-Reset-After", "64.57")],
        vec![("X-RateLimit-Reset", "1470173023.123"), ("X-RateLimit-Reset-After", "1"), ("X-RateLimit-Reset-After", "2")],
        vec![("X-RateLimit-Reset", "5"), ("X-RateLimit-Reset-After", "1")],
        vec![("X-RateLimit-Reset", "99999999999999"), ("X-RateLimit-Reset-After", "1")],
        vec![("X-RateLimit-Reset", "1470173023"), ("X-RateLimit-Reset-After", "1470173024")],
        vec![("X-RateLimit-Reset", "nan"), ("X-RateLimit-Reset-After", "1")],
    ] {
        assert_eq!(parse_h(Discord, &h).server_time_ms, None, "{h:?}");
    }
    // Other profiles do not read it.
    let h = [("X-RateLimit-Reset", "1470173023.123"), ("X-RateLimit-Reset-After", "64.57")];
    assert_eq!(parse_h(HeaderProfile::Ietf, &h).server_time_ms, None);
}
