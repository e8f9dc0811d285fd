//! Turning a concrete path into a route key and a major parameter.
//!
//! Requests whose [`Route::key`] and [`Route::major`] are equal are assumed to share a
//! rate-limit bucket until the server names the bucket.
//!
//! # Secrets
//!
//! A major parameter may hold a credential: a webhook's token (whoever holds it can post as
//! the webhook) or an interaction's token. The engine never keeps such a token: the major
//! parameter holds [`secret_key`] of it instead (`{webhook_id}/{secret_key(token)}`), so no
//! store key or argument, observation, snapshot, metric or error message derived from it
//! carries the token. The hash is deterministic, so every process (and every binding) derives
//! the same major parameter for the same webhook, and two webhooks' tokens still make two
//! buckets. It is the rule the Python package's `identity_of` applies to a bot's
//! `Authorization` value (BLAKE2b with an 8-byte digest, in hex).

use std::borrow::Cow;

use blake2::digest::Digest;
use blake2::digest::consts::U8;

use crate::types::HeaderProfile;

/// Where a request belongs before its bucket is known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// `METHOD /template`, e.g. `POST /channels/:id/messages`. Requests with equal keys are
    /// assumed to share a bucket until the server says otherwise.
    pub key: String,
    /// The major parameter (channel id, guild id, `webhook_id/{secret_key(token)}`), or `""`.
    pub major: String,
    /// Whether the profile exempts this route from the global limit.
    pub global_exempt: bool,
}

/// The key a secret (a webhook or interaction token, a bot's `Authorization` value) is known
/// by wherever it would leave the process: BLAKE2b of its UTF-8 bytes with an 8-byte digest,
/// as 16 lowercase hex digits (Python: `hashlib.blake2b(secret.encode(), digest_size=8).hexdigest()`).
/// One way: the secret cannot be read back from it; deterministic: the same secret gives the
/// same key in every process. See the [module](self) documentation.
pub fn secret_key(secret: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = blake2::Blake2b::<U8>::digest(secret.as_bytes());
    let mut key = String::with_capacity(16);
    for byte in digest {
        key.push(char::from(HEX[usize::from(byte >> 4)]));
        key.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    key
}

/// A major parameter `major` given with the route template `template` (a request's own
/// [`crate::Request::major`]), with its secret hidden as the derived one is
/// ([`secret_key`]): under [`HeaderProfile::Discord`], for a template with a `:token`
/// segment, what follows the major's first `/` (`{webhook_id}/{token}`). Anything else is
/// returned as given.
pub(crate) fn hide_given_secret<'m>(profile: HeaderProfile, template: &str, major: &'m str) -> Cow<'m, str> {
    let secret_route = profile == HeaderProfile::Discord && template.split('/').any(|seg| seg == ":token");
    match major.split_once('/') {
        Some((id, token)) if secret_route && !token.is_empty() => Cow::Owned(format!("{id}/{}", secret_key(token))),
        _ => Cow::Borrowed(major),
    }
}

/// Derives the route of `method path` under `profile`.
///
/// Common to all profiles: the method is trimmed and ASCII-uppercased; a scheme and host
/// (`https://host`), a query string and a fragment are dropped; a path that does not start
/// with `/` gets one. Nothing is validated (the engine validates its input), and no input
/// panics.
///
/// [`HeaderProfile::Discord`] follows discord.js's `generateRouteData`:
///
/// - an optional `/api` and then an optional `/v{N}` prefix are stripped;
/// - the major parameter is `{id}/{secret_key(token)}` for `/webhooks/{id}/{token}...` (the
///   token itself is never kept: see the [module](self) documentation), the id for
///   `/channels/{id}...`, `/guilds/{id}...` and `/webhooks/{id}`, and `""` otherwise;
/// - in the key, every all-digit segment and every run of 17 to 20 digits inside a segment
///   becomes `:id`, the webhook token becomes `:token`, and everything after `/reactions/`
///   collapses to `/reactions/:reaction`;
/// - `POST /interactions/{id}/{token}/callback` and every `/webhooks/{id}/{token}...` route
///   are exempt from the global limit. An interaction callback's major parameter is
///   `{id}/{secret_key(token)}` (each interaction has its own limit, so callbacks for
///   different interactions never queue behind each other), and its token becomes `:token`.
///
/// Not done: discord.js gives `DELETE /channels/:id/messages/:id` a separate bucket when
/// the message is older than 14 days (its snowflake tells). That needs the current time,
/// which this function does not have (the core reads no clock); such deletes share the
/// normal delete route until the server's bucket header separates them.
///
/// Other profiles (every provider pack, and [`HeaderProfile::Auto`], which cannot know the
/// provider before its first answer): the key is `METHOD /template` with all-digit segments
/// and UUID-looking segments (8-4-4-4-12 hex digits, or 32 hex digits) replaced by `:id`; the
/// major parameter is `""` and nothing is exempt. (An LLM API limits per model, which is in
/// the body: give it as [`crate::Request::model`], see [`limits_per_model`], to keep models
/// apart.)
pub fn route_for(profile: HeaderProfile, method: &str, path: &str) -> Route {
    let mut key = String::with_capacity(method.len() + path.len() + 10);
    let (major, global_exempt) = route_into(profile, method, path, &mut key);
    key.shrink_to_fit();
    Route { key, major: major.into_owned(), global_exempt }
}

/// [`route_for`] writing the key into `key` (cleared first, its room reused) and giving the
/// major parameter and whether the route is exempt; the major parameter is borrowed from
/// `path` when it is a part of it. The limiter derives every request's route this way, so
/// that a request of a route it knows allocates nothing for it.
pub(crate) fn route_into<'p>(profile: HeaderProfile, method: &str, path: &'p str, key: &mut String) -> (Cow<'p, str>, bool) {
    // The key is written once, into one buffer: `METHOD`, a space, then `/segment` by segment.
    let method = method.trim();
    let path = clean_path(path);
    key.clear();
    key.push_str(method);
    key.make_ascii_uppercase();
    key.push(' ');
    match profile {
        HeaderProfile::Discord => discord(key, path),
        HeaderProfile::Ietf
        | HeaderProfile::GitHub
        | HeaderProfile::RetryAfterOnly
        | HeaderProfile::OpenAi
        | HeaderProfile::Anthropic
        | HeaderProfile::AzureOpenAi
        | HeaderProfile::Shopify
        | HeaderProfile::Auto => {
            for seg in Segments(Some(path)) {
                key.push('/');
                key.push_str(if is_digits(seg) || is_uuid(seg) { ":id" } else { seg });
            }
            (Cow::Borrowed(""), false)
        }
    }
}

/// Whether `profile`'s provider limits per model, so that a request's model
/// ([`crate::Request::model`]) is its major parameter: OpenAI, Azure OpenAI, Anthropic, and
/// [`HeaderProfile::Auto`] (which cannot tell the provider before the first answer).
pub fn limits_per_model(profile: HeaderProfile) -> bool {
    matches!(profile, HeaderProfile::OpenAi | HeaderProfile::AzureOpenAi | HeaderProfile::Anthropic | HeaderProfile::Auto)
}

/// The path without scheme, host, query and fragment, and without its leading `/`.
fn clean_path(path: &str) -> &str {
    let path = if has_special(path.as_bytes()) { strip_url(path) } else { path };
    path.strip_prefix('/').unwrap_or(path)
}

/// Whether `bytes` hold a `?`, `#` or `:` (which only a URL's parts, not a route's path, have),
/// eight bytes at a time: most paths have none, and this is read for every request.
fn has_special(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Whether a byte of `x` is zero (exact: the borrow can only misplace which one).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & (ONES << 7) != 0;
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    words.map(|w| <[u8; 8]>::try_from(w).map_or(0, u64::from_ne_bytes)).any(|w| {
        zero(w ^ (ONES * u64::from(b'?'))) || zero(w ^ (ONES * u64::from(b'#'))) || zero(w ^ (ONES * u64::from(b':')))
    }) || tail.iter().any(|b| matches!(b, b'?' | b'#' | b':'))
}

/// The path of a URL: without scheme and host (`https://host`), query and fragment.
fn strip_url(path: &str) -> &str {
    // Bytes, not chars: `?` and `#` are ASCII, so the index is a char boundary.
    let path = path.bytes().position(|b| b == b'?' || b == b'#').map_or(path, |end| &path[..end]);
    // (`://` is looked for only where a `:` is.)
    match path.contains(':').then(|| path.split_once("://")).flatten() {
        Some((_, rest)) => rest.find('/').map_or("", |i| rest.get(i..).unwrap_or("")),
        None => path,
    }
}

/// The first `/`-separated segment of `rest`, and what follows its `/` (`None`: it was the
/// last; `Some("")`: one empty segment follows).
#[inline]
fn first_segment(rest: &str) -> (&str, Option<&str>) {
    // `/` is ASCII: the byte index is a char boundary.
    match rest.as_bytes().iter().position(|&b| b == b'/') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    }
}

/// The `/`-separated segments of a path (`""` is one empty segment; `None`, none left).
#[derive(Clone, Copy)]
struct Segments<'a>(Option<&'a str>);

impl<'a> Iterator for Segments<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        let (seg, rest) = first_segment(self.0?);
        self.0 = rest;
        Some(seg)
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
    if !seg.bytes().any(|b| b.is_ascii_digit()) {
        // Most segments of a route's template (`messages`, `reactions`...).
        out.push_str(seg);
        return;
    }
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

/// The sub-limit class `profile` gives a request of route `route_key` whose JSON body has the
/// top-level keys `body_keys`, if any (see [`crate::Request::sub_limit`]).
///
/// [`HeaderProfile::Discord`]: editing a channel's (or thread's) `name` or `topic`,
/// `PATCH /channels/:id` with either key, is `"channel_name_topic"`: Discord limits those
/// edits per channel (2 per 10 minutes) apart from the route's bucket, which other edits of
/// the channel keep using. Other profiles know no sub-limits.
pub fn sub_limit_class(profile: HeaderProfile, route_key: &str, body_keys: &[String]) -> Option<&'static str> {
    match profile {
        HeaderProfile::Discord
            if route_key == "PATCH /channels/:id"
                && body_keys.iter().any(|k| k == "name" || k == "topic") =>
        {
            Some("channel_name_topic")
        }
        _ => None,
    }
}

fn discord<'p>(key: &mut String, path: &'p str) -> (Cow<'p, str>, bool) {
    // The optional `api` and `v{N}` prefixes, each looked at without splitting the path.
    let mut rest = Some(path);
    let prefix = |rest: Option<&'p str>, is: fn(&str) -> bool| match rest.map(first_segment) {
        Some((seg, after)) if is(seg) => after,
        _ => rest,
    };
    if path.starts_with("api") {
        rest = prefix(rest, |s| s == "api");
    }
    if rest.is_some_and(|r| r.starts_with('v')) {
        rest = prefix(rest, |s| s.strip_prefix('v').is_some_and(is_digits));
    }
    // The first five segments, each split once (a major parameter is in the first four;
    // an interaction callback has exactly four).
    let mut segments = Segments(rest);
    let mut head = [""; 5];
    let mut n = 0;
    while n < head.len() {
        match segments.next() {
            Some(seg) => head[n] = seg,
            None => break,
        }
        n += 1;
    }

    let mut major = Cow::Borrowed("");
    let mut global_exempt = false;
    // Index of a token segment (to become `:token`), if any; the id before a major parameter
    // is all digits (`:id`), known already.
    let mut token_at = usize::MAX;
    let mut id_at = usize::MAX;
    let webhook = n >= 3 && head[0] == "webhooks";
    let callback = n == 4 && head[0] == "interactions" && head[3] == "callback";
    if (webhook || callback) && !head[2].is_empty() && is_digits(head[1]) {
        let (id, token) = (head[1], head[2]);
        major = Cow::Owned(format!("{id}/{}", secret_key(token)));
        global_exempt = true;
        (id_at, token_at) = (1, 2);
    } else if n >= 2 && matches!(head[0], "channels" | "guilds" | "webhooks") && is_digits(head[1]) {
        major = Cow::Borrowed(head[1]);
        id_at = 1;
    }

    if n == 0 {
        key.push('/');
    }
    // The segments in order: the head read above, then the rest (each read once).
    let (mut at, mut seg) = (0, (n > 0).then(|| head[0]));
    while let Some(this) = seg {
        let next = if at + 1 < n { Some(head[at + 1]) } else { segments.next() };
        key.push('/');
        if token_at == at {
            key.push_str(":token");
        } else if id_at == at {
            key.push_str(":id");
        } else {
            push_template_segment(key, this);
        }
        if next.is_some() && this == "reactions" {
            key.push_str("/:reaction");
            break;
        }
        (at, seg) = (at + 1, next);
    }
    (major, global_exempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "872712139712913438";
    const M: &str = "872712150509047809";
    const G: &str = "103039963636301824";
    const TOKEN: &str = "VSOzAqY1OZFF5WJVtbIzFtmjGupk-84Hn0A_ZzToF_CHsPIeCk0Q9Uok_mjxR0dNtApI";
    /// `secret_key(TOKEN)`, as Python's `hashlib.blake2b(TOKEN.encode(), digest_size=8).hexdigest()`.
    const TOKEN_KEY: &str = "424b960664aa957e";

    fn d(method: &str, path: &str) -> (String, String, bool) {
        let r = route_for(HeaderProfile::Discord, method, path);
        (r.key, r.major, r.global_exempt)
    }

    fn check(method: &str, path: &str, key: &str, major: &str, exempt: bool) {
        assert_eq!(
            d(method, path),
            (key.to_owned(), major.to_owned(), exempt),
            "{method} {path}"
        );
    }

    #[test]
    fn discord_majors_and_prefixes() {
        check(
            "GET",
            &format!("/api/v9/guilds/{G}"),
            "GET /guilds/:id",
            G,
            false,
        );
        check(
            "get",
            &format!("/api/v10/channels/{C}"),
            "GET /channels/:id",
            C,
            false,
        );
        check(
            "GET",
            &format!("/api/v7/channels/{C}/pins"),
            "GET /channels/:id/pins",
            C,
            false,
        );
        check(
            "POST",
            &format!("/channels/{C}/messages"),
            "POST /channels/:id/messages",
            C,
            false,
        );
        check(
            "POST",
            &format!("/api/channels/{C}/messages"),
            "POST /channels/:id/messages",
            C,
            false,
        );
        check(
            "POST",
            &format!("/v10/channels/{C}/messages"),
            "POST /channels/:id/messages",
            C,
            false,
        );
        check(
            " patch ",
            &format!("/guilds/{G}/members/{M}"),
            "PATCH /guilds/:id/members/:id",
            G,
            false,
        );
        check(
            "GET",
            &format!("/api/v9/guilds/{G}/channels"),
            "GET /guilds/:id/channels",
            G,
            false,
        );
        check(
            "GET",
            "/api/v9/guilds/templates/abcDEF",
            "GET /guilds/templates/abcDEF",
            "",
            false,
        );
        check(
            "GET",
            &format!("/api/v9/invalid/{G}"),
            "GET /invalid/:id",
            "",
            false,
        );
        check(
            "GET",
            "/api/v9/invites/dyno",
            "GET /invites/dyno",
            "",
            false,
        );
        check(
            "GET",
            "/users/@me/guilds",
            "GET /users/@me/guilds",
            "",
            false,
        );
        check("GET", "/gateway/bot", "GET /gateway/bot", "", false);
    }

    #[test]
    fn discord_reactions() {
        let base = format!("/api/v10/channels/{C}/messages/{M}/reactions");
        let key_get = "GET /channels/:id/messages/:id/reactions/:reaction";
        check("GET", &format!("{base}/%F0%9F%98%8B"), key_get, C, false);
        check(
            "GET",
            &format!("{base}/PandaOhShit:863985751205085195"),
            key_get,
            C,
            false,
        );
        check(
            "PUT",
            &format!("{base}/PandaOhShit:863985751205085195/@me"),
            "PUT /channels/:id/messages/:id/reactions/:reaction",
            C,
            false,
        );
        check(
            "DELETE",
            &format!("{base}/x/{G}"),
            "DELETE /channels/:id/messages/:id/reactions/:reaction",
            C,
            false,
        );
        check(
            "DELETE",
            &base,
            "DELETE /channels/:id/messages/:id/reactions",
            C,
            false,
        );
    }

    #[test]
    fn discord_webhooks_and_interactions() {
        check(
            "GET",
            &format!("/api/v9/webhooks/{G}"),
            "GET /webhooks/:id",
            G,
            false,
        );
        check(
            "POST",
            &format!("/api/v9/webhooks/{G}/{TOKEN}"),
            "POST /webhooks/:id/:token",
            &format!("{G}/{TOKEN_KEY}"),
            true,
        );
        check(
            "POST",
            &format!("/api/webhooks/{G}/{TOKEN}?wait=true"),
            "POST /webhooks/:id/:token",
            &format!("{G}/{TOKEN_KEY}"),
            true,
        );
        check(
            "PATCH",
            &format!("/webhooks/{G}/{TOKEN}/messages/@original"),
            "PATCH /webhooks/:id/:token/messages/@original",
            &format!("{G}/{TOKEN_KEY}"),
            true,
        );
        check(
            "DELETE",
            &format!("/webhooks/{G}/{TOKEN}/messages/{M}"),
            "DELETE /webhooks/:id/:token/messages/:id",
            &format!("{G}/{TOKEN_KEY}"),
            true,
        );
        // A token made only of digits is still the token.
        check(
            "POST",
            &format!("/webhooks/{G}/12345"),
            "POST /webhooks/:id/:token",
            &format!("{G}/74584b93e0c0f6a1"),
            true,
        );
        check(
            "POST",
            &format!("/api/v10/interactions/{G}/aW50ZXJhY3Rpb246ODg3NTU5/callback"),
            "POST /interactions/:id/:token/callback",
            &format!("{G}/0081960826cf3bc3"),
            true,
        );
        check(
            "GET",
            "/interactions/abc/def/callback",
            "GET /interactions/abc/def/callback",
            "",
            false,
        );
    }

    #[test]
    fn secret_keys_are_pythons_blake2b_of_eight_bytes() {
        // From `hashlib.blake2b(s.encode(), digest_size=8).hexdigest()` (CPython 3.11).
        let known = [
            (TOKEN, TOKEN_KEY),
            ("12345", "74584b93e0c0f6a1"),
            ("aW50ZXJhY3Rpb246ODg3NTU5", "0081960826cf3bc3"),
            ("", "e4a6a0577479b2b4"),
            ("é✓", "6ea4c0dcef89a1e2"),
        ];
        for (secret, key) in known {
            assert_eq!(secret_key(secret), key, "{secret:?}");
        }
    }

    #[test]
    fn a_given_major_hides_its_token_too() {
        let given = |template: &str, major: &str| hide_given_secret(HeaderProfile::Discord, template, major).into_owned();
        assert_eq!(given("/webhooks/:id/:token", &format!("{G}/{TOKEN}")), format!("{G}/{TOKEN_KEY}"));
        assert_eq!(given("/interactions/:id/:token/callback", &format!("{G}/{TOKEN}")), format!("{G}/{TOKEN_KEY}"));
        // Not a secret's route, or no token in the major: as given.
        assert_eq!(given("/channels/:id/messages", "1/2"), "1/2");
        assert_eq!(given("/webhooks/:id/:token", G), G);
        assert_eq!(hide_given_secret(HeaderProfile::Ietf, "/webhooks/:id/:token", "1/x"), "1/x");
    }

    #[test]
    fn discord_bearer_and_odd_inputs() {
        check(
            "PUT",
            &format!("applications/{G}/guilds/{G}/commands/{G}/permissions"),
            "PUT /applications/:id/guilds/:id/commands/:id/permissions",
            "",
            false,
        );
        check(
            "GET",
            &format!("https://discord.com/api/v10/channels/{C}#frag"),
            "GET /channels/:id",
            C,
            false,
        );
        check("GET", "", "GET /", "", false);
        check("", "/", " /", "", false);
        check("GET", "/api", "GET /", "", false);
        check("GET", "/api/v", "GET /v", "", false);
        check(
            "GET",
            &format!("/emojis/name{G}x"),
            "GET /emojis/name:idx",
            "",
            false,
        );
        check("GET", "/stickers/1234", "GET /stickers/:id", "", false);
        check("GET", "/é/ü/日本/123", "GET /é/ü/日本/:id", "", false);
        check("GET", "//channels", "GET //channels", "", false);
    }

    #[test]
    fn sub_limit_classes() {
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let d = HeaderProfile::Discord;
        let patch = route_for(d, "patch", &format!("/api/v10/channels/{C}")).key;
        assert_eq!(sub_limit_class(d, &patch, &keys(&["name"])), Some("channel_name_topic"));
        assert_eq!(sub_limit_class(d, &patch, &keys(&["nsfw", "topic"])), Some("channel_name_topic"));
        assert_eq!(sub_limit_class(d, &patch, &keys(&["nsfw"])), None);
        assert_eq!(sub_limit_class(d, &patch, &[]), None);
        let guild = route_for(d, "PATCH", &format!("/guilds/{G}")).key;
        assert_eq!(sub_limit_class(d, &guild, &keys(&["name"])), None);
        assert_eq!(sub_limit_class(HeaderProfile::Ietf, "PATCH /channels/:id", &keys(&["name"])), None);
    }

    #[test]
    fn other_profiles() {
        for p in [
            HeaderProfile::GitHub,
            HeaderProfile::Ietf,
            HeaderProfile::RetryAfterOnly,
        ] {
            let r = route_for(p, "get", "/repos/o/r/issues/1347?per_page=100");
            assert_eq!(
                r,
                Route {
                    key: "GET /repos/o/r/issues/:id".into(),
                    major: String::new(),
                    global_exempt: false
                }
            );
            let r = route_for(
                p,
                "DELETE",
                "/api/v1/items/123e4567-e89b-12d3-a456-426614174000/x",
            );
            assert_eq!(r.key, "DELETE /api/v1/items/:id/x");
            let r = route_for(p, "GET", "/blobs/0123456789abcdef0123456789ABCDEF");
            assert_eq!(r.key, "GET /blobs/:id");
            let r = route_for(p, "GET", "/webhooks/1/tok");
            assert_eq!(
                (r.key.as_str(), r.major.as_str(), r.global_exempt),
                ("GET /webhooks/:id/tok", "", false)
            );
        }
    }
}
