//! The route derivation (`ratelane::route::route_for`) against a model: the plain
//! implementation it replaced (segment iterators, one adapter chain), kept here verbatim as
//! the reference. `route_for` is written for speed (every request derives its route); any
//! method and path, of every profile, must give the model's key, major parameter and
//! exemption. `PROPTEST_CASES` overrides the case count.

use std::borrow::Cow;

use proptest::prelude::*;
use ratelane::HeaderProfile;
use ratelane::route::route_for;

fn model_route<'p>(profile: HeaderProfile, method: &str, path: &'p str, key: &mut String) -> (Cow<'p, str>, bool) {
    // The key is written once, into one buffer: `METHOD`, a space, then `/segment` by segment.
    let method = method.trim();
    let path = clean_path(path);
    key.clear();
    key.push_str(method);
    key.make_ascii_uppercase();
    key.push(' ');
    match profile {
        HeaderProfile::Discord => discord(key, path),
        // (Outside the crate the enum is non-exhaustive: every other profile.)
        _ => {
            for seg in Segments(Some(path)) {
                key.push('/');
                key.push_str(if is_digits(seg) || is_uuid(seg) { ":id" } else { seg });
            }
            (Cow::Borrowed(""), false)
        }
    }
}

/// The path without scheme, host, query and fragment, and without its leading `/`.
fn clean_path(path: &str) -> &str {
    // Bytes, not chars: `?` and `#` are ASCII, so the index is a char boundary.
    let path = path.bytes().position(|b| b == b'?' || b == b'#').map_or(path, |end| &path[..end]);
    // (`://` is looked for only where a `:` is.)
    let path = match path.contains(':').then(|| path.split_once("://")).flatten() {
        Some((_, rest)) => rest.find('/').map_or("", |i| rest.get(i..).unwrap_or("")),
        None => path,
    };
    path.strip_prefix('/').unwrap_or(path)
}

/// The `/`-separated segments of a path (`""` is one empty segment; `None`, none left).
#[derive(Clone, Copy)]
struct Segments<'a>(Option<&'a str>);

impl<'a> Iterator for Segments<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.0?;
        // `/` is ASCII: the byte index is a char boundary.
        match rest.bytes().position(|b| b == b'/') {
            Some(i) => {
                self.0 = Some(&rest[i + 1..]);
                Some(&rest[..i])
            }
            None => {
                self.0 = None;
                Some(rest)
            }
        }
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    match b.len() {
        32 => b.iter().all(u8::is_ascii_hexdigit),
        36 => b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        }),
        _ => false,
    }
}

/// Appends `seg` to `out` with an all-digit segment, or any run of 17..=20 digits in it (a
/// snowflake), as `:id`.
fn push_template_segment(out: &mut String, seg: &str) {
    if is_digits(seg) {
        out.push_str(":id");
        return;
    }
    let mut rest = seg;
    while !rest.is_empty() {
        let run = rest.bytes().take_while(u8::is_ascii_digit).count();
        if run > 0 {
            // ASCII digits: `run` is a char boundary.
            let (digits, tail) = rest.split_at(run);
            out.push_str(if (17..=20).contains(&run) {
                ":id"
            } else {
                digits
            });
            rest = tail;
        } else {
            // An ASCII digit's byte index is a char boundary.
            let next = rest.bytes().position(|b| b.is_ascii_digit()).unwrap_or(rest.len());
            let (text, tail) = rest.split_at(next);
            out.push_str(text);
            rest = tail;
        }
    }
}

fn discord<'p>(key: &mut String, path: &'p str) -> (Cow<'p, str>, bool) {
    let mut segments = Segments(Some(path));
    let mut skip = |prefix: fn(&str) -> bool| {
        let mut next = segments;
        if next.next().is_some_and(prefix) {
            segments = next;
        }
    };
    skip(|s| s == "api");
    skip(|s| s.strip_prefix('v').is_some_and(is_digits));
    let mut rest = segments;
    let head = [rest.next(), rest.next(), rest.next(), rest.next(), rest.next()];

    let mut major = Cow::Borrowed("");
    let mut global_exempt = false;
    // Index of a token segment (to become `:token`), if any; the id before a major parameter
    // is all digits (`:id`), known already.
    let mut token_at: Option<usize> = None;
    let mut id_at: Option<usize> = None;
    match head {
        [Some("webhooks"), Some(id), Some(token), ..]
        | [Some("interactions"), Some(id), Some(token), Some("callback"), None]
            if is_digits(id) && !token.is_empty() =>
        {
            major = Cow::Owned(format!("{id}/{}", ratelane::route::secret_key(token)));
            global_exempt = true;
            (id_at, token_at) = (Some(1), Some(2));
        }
        [Some("channels" | "guilds" | "webhooks"), Some(id), ..] if is_digits(id) => {
            major = Cow::Borrowed(id);
            id_at = Some(1);
        }
        _ => {}
    }

    if head[0].is_none() {
        key.push('/');
    }
    // The segments in order: the head read above, then the rest (each read once).
    let mut segs = head.into_iter().map_while(|s| s).chain(rest).enumerate().peekable();
    while let Some((i, seg)) = segs.next() {
        key.push('/');
        if token_at == Some(i) {
            key.push_str(":token");
        } else if id_at == Some(i) {
            key.push_str(":id");
        } else {
            push_template_segment(key, seg);
        }
        if seg == "reactions" && segs.peek().is_some() {
            key.push_str("/:reaction");
            break;
        }
    }
    (major, global_exempt)
}


/// Path pieces that steer every branch: the prefixes, the major-parameter routes, ids of
/// every length around a snowflake's, tokens, UUIDs, reactions, empty segments, non-ASCII.
const PIECES: &[&str] = &[
    "api", "v10", "v", "v9x", "channels", "guilds", "webhooks", "interactions", "callback", "reactions",
    "messages", "@me", "", "1", "12345", "12345678901234567", "872712139712913438", "12345678901234567890",
    "123456789012345678901", "name872712139712913438x", "a1b22c333", "tok-EN_9", "é", "日本",
    "123e4567-e89b-12d3-a456-426614174000", "0123456789abcdef0123456789ABCDEF", "x:y", "?", "#", "://",
];

fn paths() -> impl Strategy<Value = String> {
    // A segment is one to three pieces run together (`name` + an id...).
    let segment = prop::collection::vec(prop::sample::select(PIECES), 1..=3).prop_map(|p| p.concat());
    let pieces = prop::collection::vec(prop_oneof![3 => prop::sample::select(PIECES).prop_map(str::to_owned), 1 => segment], 0..8);
    let lead = prop::sample::select(&["", "/", "//", "https://discord.com/", "http://h", "/api/"][..]);
    let tail = prop::sample::select(&["", "/", "?a=1/2", "#f", "?x#y"][..]);
    (lead, pieces, tail).prop_map(|(lead, pieces, tail)| format!("{lead}{}{tail}", pieces.join("/")))
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(2000)))]

    #[test]
    fn route_for_gives_the_models_route(
        method in prop::sample::select(&["GET", "post", " Put ", "", "dElEtE\t", "é"][..]),
        path in prop_oneof![paths(), "\\PC{0,40}", "[/a-z0-9:?#.é]{0,60}"],
    ) {
        for &profile in HeaderProfile::ALL {
            let mut key = String::new();
            let (major, exempt) = model_route(profile, method, &path, &mut key);
            let route = route_for(profile, method, &path);
            prop_assert_eq!((&route.key, route.major.as_str(), route.global_exempt), (&key, &*major, exempt), "{:?} {:?} {:?}", profile, method, path);
        }
    }
}
