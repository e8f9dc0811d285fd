//! The one strict number grammar for legacy (non-Structured-Field) headers:
//! `OWS 1*DIGIT [ "." 1*DIGIT ] OWS`. No sign, no exponent, no hex, no underscores,
//! no `inf`/`nan`, no leading `+`, no bare `.5` or `5.`.

use crate::types::{MILLISECOND, Nanos, SECOND};

use super::MAX_DURATION;

/// The largest whole number of seconds that fits in [`MAX_DURATION`].
pub(crate) const MAX_SECS: u64 = MAX_DURATION / SECOND;

/// A non-negative decimal read by [`parse_decimal`]. Never overflows: the integer part
/// saturates and only the first nine fractional digits are kept exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decimal {
    /// The integer part, saturated at `u64::MAX`.
    pub(crate) int: u64,
    /// The first nine fractional digits, as nanoseconds (`0..1_000_000_000`).
    pub(crate) frac_ns: u64,
    /// Whether a fractional digit after the ninth is non-zero (the value is a little more).
    pub(crate) frac_rest: bool,
}

/// Optional whitespace around a value: SP and HTAB only.
pub(crate) fn trim_ows(s: &str) -> &str {
    // By bytes: SP and HTAB are ASCII, so the first byte kept starts a char and the byte after
    // the last one kept is SP, HTAB or the end.
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let bytes = s.as_bytes();
    let start = bytes.iter().position(|b| !ows(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !ows(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// `s.split(sep)` for an ASCII `sep`, by bytes (a split point is then a char boundary):
/// cheaper than `str::split`'s searcher on values as short as headers' are.
pub(crate) fn split_ascii(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.bytes().position(|b| b == sep) {
            Some(i) => {
                rest = Some(&r[i + 1..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// Parses `OWS 1*DIGIT [ "." 1*DIGIT ] OWS`; anything else is `None`.
pub(crate) fn parse_decimal(s: &str) -> Option<Decimal> {
    let b = trim_ows(s).as_bytes();
    let mut i = 0;
    let mut int: u64 = 0;
    while let Some(&c) = b.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        int = int.saturating_mul(10).saturating_add(u64::from(c - b'0'));
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut frac_ns: u64 = 0;
    let mut frac_rest = false;
    if let Some(&c) = b.get(i) {
        if c != b'.' {
            return None;
        }
        i += 1;
        let mut n = 0usize;
        while let Some(&c) = b.get(i) {
            if !c.is_ascii_digit() {
                return None;
            }
            let d = u64::from(c - b'0');
            if n < 9 {
                frac_ns = frac_ns * 10 + d;
            } else if d != 0 {
                frac_rest = true;
            }
            n += 1;
            i += 1;
        }
        if n == 0 {
            return None;
        }
        for _ in n.min(9)..9 {
            frac_ns *= 10;
        }
    }
    Some(Decimal {
        int,
        frac_ns,
        frac_rest,
    })
}

impl Decimal {
    /// A count: rounded DOWN, saturated at `u32::MAX`.
    pub(crate) fn to_count(self) -> u32 {
        u32::try_from(self.int).unwrap_or(u32::MAX)
    }

    /// Whether the value is greater than zero.
    pub(crate) fn is_positive(self) -> bool {
        self.int > 0 || self.frac_ns > 0 || self.frac_rest
    }

    /// A wait in seconds, as [`Nanos`] rounded UP to the millisecond, clamped to
    /// [`MAX_DURATION`].
    pub(crate) fn to_wait(self) -> Nanos {
        if self.int >= MAX_SECS {
            return MAX_DURATION;
        }
        let ns = self.int * SECOND + self.frac_ns + u64::from(self.frac_rest);
        ceil_ms(ns).min(MAX_DURATION)
    }

    /// An absolute time in epoch seconds, as epoch milliseconds rounded UP (saturating).
    pub(crate) fn to_epoch_ms_ceil(self) -> u64 {
        let frac_ms = (self.frac_ns + u64::from(self.frac_rest)).div_ceil(MILLISECOND);
        self.int.saturating_mul(1000).saturating_add(frac_ms)
    }
}

/// Rounds nanoseconds UP to a whole millisecond (saturating).
pub(crate) fn ceil_ms(ns: Nanos) -> Nanos {
    ns.div_ceil(MILLISECOND).saturating_mul(MILLISECOND)
}

/// Whole seconds as a wait, clamped to [`MAX_DURATION`].
pub(crate) fn secs_to_wait(secs: u64) -> Nanos {
    secs.min(MAX_SECS) * SECOND
}

/// Milliseconds as a wait, clamped to [`MAX_DURATION`].
pub(crate) fn ms_to_wait(ms: u64) -> Nanos {
    ms.min(MAX_DURATION / MILLISECOND) * MILLISECOND
}

/// Float seconds (a parsed JSON body field) as a wait, rounded UP to the millisecond
/// after rounding to the nearest nanosecond (so `64.57` is 64 570 ms, not 64 571 ms).
/// Negative, NaN and infinite values are `None`; huge ones clamp to [`MAX_DURATION`].
pub(crate) fn f64_secs_to_wait(secs: f64) -> Option<Nanos> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    if secs >= MAX_SECS as f64 {
        return Some(MAX_DURATION);
    }
    // In range [0, 2.6e15): the cast is exact enough and cannot saturate.
    let ns = (secs * SECOND as f64).round() as u64;
    Some(ceil_ms(ns).min(MAX_DURATION))
}

/// Parses a duration as OpenAI writes its resets (Go's `time.Duration` text): one or more
/// `1*DIGIT [ "." 1*DIGIT ] unit` terms, units `h`, `m`, `s`, `ms`, `us`/`µs`/`μs`, `ns`, in
/// any order, summed (`6m0s`, `1.5s`, `20ms`, `1h2m3.5s`); or a bare decimal, read as
/// **seconds** (Azure's resets; the larger reading, so never an early one). Surrounding
/// SP/HTAB is ignored. Signs, exponents, spaces inside, empty terms, unknown units, `inf`,
/// `nan` and everything else are `None`. The result is rounded UP to the millisecond and at
/// most [`MAX_DURATION`].
pub(crate) fn parse_duration(s: &str) -> Option<Nanos> {
    let s = trim_ows(s);
    if let Some(d) = parse_decimal(s) {
        return Some(d.to_wait());
    }
    let b = s.as_bytes();
    if b.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    let mut i = 0;
    while i < b.len() {
        // The number: integer digits, then an optional fraction.
        let start = i;
        let mut int: u128 = 0;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            int = int.saturating_mul(10).saturating_add(u128::from(c - b'0'));
            i += 1;
        }
        if i == start {
            return None;
        }
        let (mut frac, mut scale, mut frac_rest) = (0u128, 1u128, false);
        if b.get(i) == Some(&b'.') {
            i += 1;
            let digits_at = i;
            while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
                if scale < 1_000_000_000_000_000_000 {
                    frac = frac * 10 + u128::from(c - b'0');
                    scale *= 10;
                } else if c != b'0' {
                    frac_rest = true;
                }
                i += 1;
            }
            if i == digits_at {
                return None;
            }
        }
        // The unit: the longest match at `i` (`ms` before `m`).
        let rest = &s[i..];
        let (unit, len): (u128, usize) = if rest.starts_with("ns") {
            (1, 2)
        } else if rest.starts_with("us") {
            (1_000, 2)
        } else if rest.starts_with('\u{b5}') || rest.starts_with('\u{3bc}') {
            // `µs` (micro sign) or `μs` (Greek mu): two bytes, then `s`.
            if rest.as_bytes().get(2) != Some(&b's') {
                return None;
            }
            (1_000, 3)
        } else if rest.starts_with("ms") {
            (1_000_000, 2)
        } else if rest.starts_with('s') {
            (u128::from(SECOND), 1)
        } else if rest.starts_with('m') {
            (60 * u128::from(SECOND), 1)
        } else if rest.starts_with('h') {
            (3600 * u128::from(SECOND), 1)
        } else {
            return None;
        };
        i += len;
        let frac_ns = (frac * unit).div_ceil(scale) + u128::from(frac_rest);
        total = total.saturating_add(int.saturating_mul(unit)).saturating_add(frac_ns);
    }
    let total = u64::try_from(total).unwrap_or(u64::MAX);
    Some(ceil_ms(total).min(MAX_DURATION))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-wise helpers give what `str::split` and `str::trim_matches` give, on values
    /// with multi-byte characters beside the separators and the whitespace.
    #[test]
    fn byte_helpers_match_the_str_methods() {
        let values = [
            "", ",", ";;", " ", "\t", " \t ", "a", " a ", "1, 2", "1,,2,", ",1", "é,ü ;x", " é ", "\té\t",
            "5;w=1, 7", "€", " ,€, ", "a\u{a0}", "\u{a0} ", "日本, 語",
        ];
        for v in values {
            for sep in [b',', b';'] {
                let ours: Vec<&str> = split_ascii(v, sep).collect();
                assert_eq!(ours, v.split(sep as char).collect::<Vec<_>>(), "{v:?} on {:?}", sep as char);
            }
            assert_eq!(trim_ows(v), v.trim_matches(|c| c == ' ' || c == '\t'), "{v:?}");
        }
    }

    #[test]
    fn grammar_accepts() {
        assert_eq!(
            parse_decimal("5"),
            Some(Decimal {
                int: 5,
                frac_ns: 0,
                frac_rest: false
            })
        );
        assert_eq!(parse_decimal(" 5 ").map(|d| d.int), Some(5));
        assert_eq!(
            parse_decimal("\t64.57").map(|d| (d.int, d.frac_ns)),
            Some((64, 570_000_000))
        );
        assert_eq!(parse_decimal("007").map(|d| d.int), Some(7));
        let d = parse_decimal("0.0000000001").unwrap();
        assert_eq!((d.int, d.frac_ns, d.frac_rest), (0, 0, true));
        assert_eq!(
            parse_decimal("99999999999999999999999999").map(|d| d.int),
            Some(u64::MAX)
        );
    }

    #[test]
    fn grammar_rejects() {
        for s in [
            "", " ", "-1", "+5", "1e3", "0x10", "1_000", "inf", "NaN", ".5", "5.", "1.2.3", "1 2",
            "5s", "١٢", "５", "1,000", "--1", "0.5e1",
        ] {
            assert_eq!(parse_decimal(s), None, "{s:?}");
        }
    }

    #[test]
    fn durations() {
        let d = parse_duration;
        assert_eq!(d("6m0s"), Some(360 * SECOND));
        assert_eq!(d("1.5s"), Some(1_500 * MILLISECOND));
        assert_eq!(d("20ms"), Some(20 * MILLISECOND));
        assert_eq!(d("1h2m3.5s"), Some(3_723_500 * MILLISECOND));
        assert_eq!(d("12ms"), Some(12 * MILLISECOND));
        assert_eq!(d("0s"), Some(0));
        assert_eq!(d("0"), Some(0));
        assert_eq!(d(" 7 "), Some(7 * SECOND));
        assert_eq!(d("2.25"), Some(2_250 * MILLISECOND));
        // Sub-millisecond values round up, never to zero.
        assert_eq!(d("1ns"), Some(MILLISECOND));
        assert_eq!(d("999\u{b5}s"), Some(MILLISECOND));
        assert_eq!(d("1\u{3bc}s"), Some(MILLISECOND));
        assert_eq!(d("1500us"), Some(2 * MILLISECOND));
        assert_eq!(d("0.0000000000000000000001s"), Some(MILLISECOND));
        // Any order, repeated units add up.
        assert_eq!(d("1s1s"), Some(2 * SECOND));
        assert_eq!(d("3s2m"), Some(123 * SECOND));
        // Huge values clamp.
        assert_eq!(d("99999999999999999999999h"), Some(MAX_DURATION));
        assert_eq!(d("999999h"), Some(MAX_DURATION));
        for bad in [
            "", " ", "s", "-1s", "+1s", "1.s", ".5s", "1e3s", "1 s", "1s ms", "1x", "1S", "1H",
            "NaN", "inf", "1.5.5s", "1sec", "1\u{b5}", "1\u{b5}x", "6m0s,", "1,5s", "0x10s", "1_0s",
        ] {
            assert_eq!(d(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn conversions() {
        let w = |s| parse_decimal(s).unwrap().to_wait();
        assert_eq!(w("64.57"), 64_570 * MILLISECOND);
        assert_eq!(w("0.0004"), MILLISECOND);
        assert_eq!(w("0.000"), 0);
        assert_eq!(w("1.0000000001"), 1_001 * MILLISECOND);
        assert_eq!(w("99999999999"), MAX_DURATION);
        assert_eq!(parse_decimal("5.7").unwrap().to_count(), 5);
        assert_eq!(parse_decimal("4294967296").unwrap().to_count(), u32::MAX);
        assert_eq!(
            parse_decimal("1470173023.123").unwrap().to_epoch_ms_ceil(),
            1_470_173_023_123
        );
        assert_eq!(
            parse_decimal("1470173023.1231").unwrap().to_epoch_ms_ceil(),
            1_470_173_023_124
        );
        assert_eq!(f64_secs_to_wait(64.57), Some(64_570 * MILLISECOND));
        assert_eq!(f64_secs_to_wait(0.0001), Some(MILLISECOND));
        assert_eq!(f64_secs_to_wait(-0.0), Some(0));
        assert_eq!(f64_secs_to_wait(-1.0), None);
        assert_eq!(f64_secs_to_wait(f64::NAN), None);
        assert_eq!(f64_secs_to_wait(f64::INFINITY), None);
        assert_eq!(f64_secs_to_wait(1e300), Some(MAX_DURATION));
    }
}
