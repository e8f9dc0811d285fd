//! HTTP-date (RFC 9110 §5.6.7): IMF-fixdate and the two obsolete formats a recipient
//! MUST accept, RFC 850 and asctime. Case-sensitive, as the RFC says. Also RFC 3339
//! timestamps ([`parse_rfc3339_ms`]), which Anthropic uses for its resets.

/// Parses an HTTP-date in any of the three RFC 9110 formats, returning Unix seconds
/// (negative before 1970). Surrounding SP/HTAB is ignored; anything else that does not
/// match a format exactly is `None`.
///
/// - IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
/// - RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`. Its two-digit year is read with the RFC's
///   50-year rule against `now_unix_secs` (a year that would be more than 50 years in the
///   future is taken as the most recent past year with those digits). Without a reference
///   the year is 19yy for yy >= 70 and 20yy otherwise.
/// - asctime: `Sun Nov  6 08:49:37 1994` (day space-padded or two digits)
///
/// The day name must be a valid name but is not checked against the date. Seconds may be
/// `60` (a leap second).
pub fn parse_http_date(s: &str, now_unix_secs: Option<i64>) -> Option<i64> {
    let s = super::num::trim_ows(s);
    if !s.is_ascii() {
        return None;
    }
    let b = s.as_bytes();
    imf_fixdate(b)
        .or_else(|| rfc850(b, now_unix_secs))
        .or_else(|| asctime(b))
}

/// Parses an RFC 3339 `date-time` (§5.6), returning Unix **milliseconds**, a fraction of a
/// millisecond rounded UP (a reset read late is safe, one read early is not):
/// `2025-08-21T12:40:59Z`, `2025-08-21t12:40:59.250+02:00`. Surrounding SP/HTAB is ignored.
///
/// Strict: a four-digit year, two-digit fields, `T` or `t` between date and time, an offset
/// `Z`/`z` or `±HH:MM` (hours up to 23, minutes up to 59), 1 to 9 fraction digits after a
/// `.`, seconds up to `60` (a leap second, read as the next second). Anything else (a space
/// for `T`, no offset, `24:00:00`, day 31 of a 30-day month, a sign on the year) is `None`.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let s = super::num::trim_ows(s);
    if !s.is_ascii() {
        return None;
    }
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let y = i64::from(digits(&b[0..4])?);
    let m = digits(&b[5..7])?;
    let d = digits(&b[8..10])?;
    let tod = time_of_day(&b[11..19])?;
    let mut rest = &b[19..];
    let mut frac_ms: i64 = 0;
    if let [b'.', tail @ ..] = rest {
        let n = tail.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        let frac = i64::from(digits(&tail[..n])?);
        let scale = 10i64.pow(u32::try_from(n).ok()?);
        // Milliseconds, rounded up.
        frac_ms = (frac * 1000 + scale - 1) / scale;
        rest = &tail[n..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, mm) = (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?);
            if h > 23 || mm > 59 {
                return None;
            }
            let secs = i64::from(h) * 3600 + i64::from(mm) * 60;
            if *sign == b'+' { secs } else { -secs }
        }
        _ => return None,
    };
    // The local time less its offset is UTC.
    let t = to_unix(y, m, d, tod)? - offset;
    Some(t * 1000 + frac_ms)
}

const DAY_NAMES: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
const DAY_NAMES_LONG: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];
const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 {
        return None;
    }
    let mut v = 0u32;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
    }
    Some(v)
}

fn month(b: &[u8]) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| *m == b)
        .and_then(|i| u32::try_from(i + 1).ok())
}

/// `HH:MM:SS` → seconds of the day.
fn time_of_day(b: &[u8]) -> Option<i64> {
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, s) = (digits(&b[0..2])?, digits(&b[3..5])?, digits(&b[6..8])?);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(s))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The Gregorian year containing Unix second `t`.
fn year_of(t: i64) -> i64 {
    let z = t.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400;
    if m <= 2 { y + 1 } else { y }
}

fn to_unix(y: i64, m: u32, d: u32, tod: i64) -> Option<i64> {
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + tod)
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(b: &[u8]) -> Option<i64> {
    if b.len() != 29 || &b[3..5] != b", " || b[7] != b' ' || b[11] != b' ' || b[16] != b' ' {
        return None;
    }
    if !DAY_NAMES.contains(&&b[0..3]) || &b[25..] != b" GMT" {
        return None;
    }
    let d = digits(&b[5..7])?;
    let m = month(&b[8..11])?;
    let y = i64::from(digits(&b[12..16])?);
    to_unix(y, m, d, time_of_day(&b[17..25])?)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(b: &[u8], now: Option<i64>) -> Option<i64> {
    let comma = b.iter().position(|&c| c == b',')?;
    if !DAY_NAMES_LONG.contains(&&b[..comma]) {
        return None;
    }
    let r = &b[comma..];
    // ", 06-Nov-94 08:49:37 GMT"
    if r.len() != 24 || &r[..2] != b", " || r[4] != b'-' || r[8] != b'-' || r[11] != b' ' {
        return None;
    }
    if &r[20..] != b" GMT" {
        return None;
    }
    let d = digits(&r[2..4])?;
    let m = month(&r[5..8])?;
    let yy = i64::from(digits(&r[9..11])?);
    let tod = time_of_day(&r[12..20])?;
    let y = match now {
        Some(now) => {
            let now_year = year_of(now);
            let y = now_year - now_year.rem_euclid(100) + yy;
            if y > now_year + 50 { y - 100 } else { y }
        }
        None if yy >= 70 => 1900 + yy,
        None => 2000 + yy,
    };
    to_unix(y, m, d, tod)
}

/// `Sun Nov  6 08:49:37 1994`
fn asctime(b: &[u8]) -> Option<i64> {
    if b.len() != 24 || b[3] != b' ' || b[7] != b' ' || b[10] != b' ' || b[19] != b' ' {
        return None;
    }
    if !DAY_NAMES.contains(&&b[0..3]) {
        return None;
    }
    let m = month(&b[4..7])?;
    let d = if b[8] == b' ' {
        digits(&b[9..10])?
    } else {
        digits(&b[8..10])?
    };
    let tod = time_of_day(&b[11..19])?;
    let y = i64::from(digits(&b[20..24])?);
    to_unix(y, m, d, tod)
}

/// Formats Unix second `t` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form
/// RFC 9110 requires senders to generate (for `Date`, and for anyone who must send an HTTP date).
pub fn format_imf_fixdate(t: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = t / 86_400;
    let sod = t % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// The Gregorian (year, month, day) of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: u64) -> (i64, i64, i64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Formats Unix millisecond `ms` as an RFC 3339 UTC time with milliseconds
/// (`2025-08-21T12:40:59.250Z`), the form [`parse_rfc3339_ms`] reads back exactly.
pub fn format_rfc3339_ms(ms: u64) -> String {
    let t = ms / 1000;
    let (y, m, d) = civil_from_days(t / 86_400);
    let sod = t % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_and_reads_back() {
        assert_eq!(format_rfc3339_ms(1_755_780_059_250), "2025-08-21T12:40:59.250Z");
        for ms in [0, 1, 951_782_400_999, 1_755_780_059_250, 4_102_444_800_000] {
            assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)), Some(ms as i64));
        }
    }

    const T: i64 = 784_111_777; // 1994-11-06T08:49:37Z

    #[test]
    fn three_formats() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", None),
            Some(T)
        );
        assert_eq!(
            parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", None),
            Some(T)
        );
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994", None), Some(T));
        assert_eq!(parse_http_date("Sun Nov 06 08:49:37 1994", None), Some(T));
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", None),
            Some(0)
        );
        assert_eq!(
            parse_http_date("Fri, 31 Dec 1999 23:59:59 GMT", None),
            Some(946_684_799)
        );
        assert_eq!(
            parse_http_date("Wed, 31 Dec 1969 23:59:59 GMT", None),
            Some(-1)
        );
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT", None),
            Some(951_782_400)
        );
    }

    #[test]
    fn rejects() {
        for s in [
            "",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Mon, 29 Feb 1900 00:00:00 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Sun, 06 Nov 1994 08:49:37 GMTé",
            "Sun, 06-Nov-94 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",
            "1994-11-06T08:49:37Z",
            "120",
        ] {
            assert_eq!(parse_http_date(s, None), None, "{s:?}");
        }
    }

    #[test]
    fn fifty_year_rule() {
        let now_2026 = parse_http_date("Mon, 01 Jun 2026 00:00:00 GMT", None).unwrap();
        let y = |s| parse_http_date(s, Some(now_2026)).map(year_of);
        assert_eq!(y("Sunday, 06-Nov-94 08:49:37 GMT"), Some(1994));
        assert_eq!(y("Monday, 01-Jan-76 00:00:00 GMT"), Some(2076));
        assert_eq!(y("Wednesday, 01-Jan-77 00:00:00 GMT"), Some(1977));
        assert_eq!(y("Saturday, 01-Jan-30 00:00:00 GMT"), Some(2030));
        assert_eq!(y("Sunday, 01-Jan-00 00:00:00 GMT"), Some(2000));
        let now_2099 = parse_http_date("Thu, 31 Dec 2099 00:00:00 GMT", None).unwrap();
        let y = |s| parse_http_date(s, Some(now_2099)).map(year_of);
        assert_eq!(y("Friday, 01-Jan-49 00:00:00 GMT"), Some(2049));
        assert_eq!(y("Thursday, 01-Jan-99 00:00:00 GMT"), Some(2099));
        assert_eq!(y("Friday, 01-Jan-50 00:00:00 GMT"), Some(2050));
    }

    #[test]
    fn year_of_roundtrip() {
        for (y, m, d) in [
            (1970, 1, 1),
            (1969, 12, 31),
            (2000, 2, 29),
            (2400, 3, 1),
            (1600, 1, 1),
        ] {
            assert_eq!(year_of(days_from_civil(y, m, d) * 86_400 + 86_399), y);
        }
    }
}
