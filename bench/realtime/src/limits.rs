//! Discord's REST limits as the imitation enforces them (`../shared/research/protocols.md` §1),
//! with every window scaled by one factor so that a run takes seconds.

use ratelane::sim::{BucketSpec, RouteSpec, ServerConfig, WindowKind};
use ratelane::{MILLISECOND, Nanos, SECOND};

/// Messages to a channel.
pub const ROUTE_MESSAGE: &str = "POST /channels/:id/messages";
/// A channel edit that changes neither `name` nor `topic`.
pub const ROUTE_EDIT: &str = "PATCH /channels/:id";
/// A channel edit that changes `name` or `topic`: the same bucket as [`ROUTE_EDIT`] (the
/// client sees one route and one hash), plus the hidden sub-limit. The imitation gives such
/// requests this key; a client cannot see it.
pub const ROUTE_RENAME: &str = "PATCH /channels/:id (name or topic)";
/// Pinning a message: the bot's bucket, and a lower per-resource (`shared`) limit.
pub const ROUTE_PIN: &str = "PUT /channels/:id/pins/:id";
/// Adding a reaction.
pub const ROUTE_REACT_PUT: &str = "PUT /channels/:id/messages/:id/reactions/:reaction";
/// Removing a reaction.
pub const ROUTE_REACT_DELETE: &str = "DELETE /channels/:id/messages/:id/reactions/:reaction";
/// Listing who reacted.
pub const ROUTE_REACT_GET: &str = "GET /channels/:id/messages/:id/reactions/:reaction";
/// Editing a message: the same bucket as [`ROUTE_MESSAGE_DELETE`] (a hash the two routes
/// share, which a client learns only from their answers).
pub const ROUTE_MESSAGE_EDIT: &str = "PATCH /channels/:id/messages/:id";
/// Deleting a message.
pub const ROUTE_MESSAGE_DELETE: &str = "DELETE /channels/:id/messages/:id";
/// Reading a channel's messages: the same bucket as [`ROUTE_MESSAGE_GET`].
pub const ROUTE_HISTORY: &str = "GET /channels/:id/messages";
/// Reading one message.
pub const ROUTE_MESSAGE_GET: &str = "GET /channels/:id/messages/:id";
/// Removing every reaction of a message: the reaction routes' bucket.
pub const ROUTE_REACT_DELETE_ALL: &str = "DELETE /channels/:id/messages/:id/reactions";
/// Showing the bot as typing in a channel.
pub const ROUTE_TYPING: &str = "POST /channels/:id/typing";
/// A route without rate-limit headers (only the global limit applies).
pub const ROUTE_PLAIN: &str = "GET /voice/regions";
/// An interaction callback: no auth, no headers, exempt from the global limit.
pub const ROUTE_INTERACTION: &str = "POST /interactions/:id/:token/callback";
/// The bot's own user (what libraries call to log in). Exempt from the global limit here so
/// that a library's log-in before the timed part does not count against the workload.
pub const ROUTE_ME: &str = "GET /users/@me";

/// The bucket hashes the imitation reports.
pub const HASH_MESSAGE: &str = "80c17d2f203122d936070c88c8d10f33";
/// Channel edits (renames included).
pub const HASH_EDIT: &str = "b2b6e2a4d8a3c51e0f9d4f7d3e2c1a10";
/// Pins.
pub const HASH_PIN: &str = "4f1b7c2e9a8d6b5c3e2f1a0d9c8b7a61";
/// The three reaction routes share this one.
pub const HASH_REACTION: &str = "e3b0c44298fc1c149afbf4c8996fb924";
/// Message edits and deletes.
pub const HASH_MESSAGE_EDIT: &str = "5e8d2a1c0b9f4e7d6c3b2a1908f7e6d5";
/// Reading messages (a channel's, or one).
pub const HASH_HISTORY: &str = "9a7c5e3b1d2f4a6c8e0b2d4f6a8c0e2b";
/// Typing.
pub const HASH_TYPING: &str = "c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6";

/// Every limit the imitation enforces, and the latency it adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Added between a request's arrival on the socket and the moment the server counts it.
    pub latency_request: Nanos,
    /// Added between the server's decision and the response being written.
    pub latency_response: Nanos,
    /// The bot's global limit (per token, counted on arrival, fixed window).
    pub global: BucketSpec,
    /// Messages per channel.
    pub message: BucketSpec,
    /// Channel edits per channel.
    pub edit: BucketSpec,
    /// The hidden sub-limit of renames (name or topic edits) per channel.
    pub rename: BucketSpec,
    /// Pins per channel (the bot's bucket).
    pub pin: BucketSpec,
    /// Pins per channel for everyone (the `shared` scope), below [`Limits::pin`].
    pub pin_shared: BucketSpec,
    /// Reactions per channel (one hash for add, remove and list).
    pub reaction: BucketSpec,
    /// Message edits and deletes per channel (one hash for both).
    pub message_edit: BucketSpec,
    /// Message reads per channel (one hash for a channel's and one message).
    pub history: BucketSpec,
    /// Typing per channel.
    pub typing: BucketSpec,
    /// Invalid requests (401, 403, non-shared 429) per `invalid_window` before a ban.
    pub invalid_limit: u32,
    /// The invalid-request counter's window.
    pub invalid_window: Nanos,
    /// How long a ban lasts (Cloudflare-style HTML 429s on every request).
    pub ban: Nanos,
}

fn scaled(limit: u32, seconds: f64, scale: f64, kind: WindowKind) -> BucketSpec {
    let window = (seconds * scale * SECOND as f64).round() as Nanos;
    BucketSpec {
        limit,
        window,
        kind,
    }
}

impl Limits {
    /// Discord's limits with every per-route window multiplied by `scale` and the windows of
    /// per-route limits of `kind` (Discord's are fixed; sliding is the option):
    /// messages 5 per 5 s, channel edits 5 per 5 s, renames 2 per 15 s (Discord's is 2 per
    /// 10 min; shortened so a run takes seconds, and still far longer than anything else),
    /// pins 5 per 5 s with a shared limit of 3 per 5 s, reactions 1 per 0.25 s (all four
    /// reaction routes on one hash), message edits and deletes 5 per 5 s (one hash), message
    /// reads 5 per 5 s (one hash for a channel's and one message), typing 5 per 5 s, invalid
    /// requests 10,000 per 10 min then a one-hour ban.
    /// The global limit is `global` per second, fixed, not scaled (a large bot's raised limit).
    /// The round trip `rtt` is split evenly between request and response.
    pub fn discord(scale: f64, global: u32, rtt: Nanos, kind: WindowKind) -> Self {
        Limits {
            latency_request: rtt / 2,
            latency_response: rtt - rtt / 2,
            global: BucketSpec::fixed(global, SECOND),
            message: scaled(5, 5.0, scale, kind),
            edit: scaled(5, 5.0, scale, kind),
            rename: scaled(2, 15.0, scale, kind),
            pin: scaled(5, 5.0, scale, kind),
            pin_shared: scaled(3, 5.0, scale, kind),
            reaction: scaled(1, 0.25, scale, kind),
            message_edit: scaled(5, 5.0, scale, kind),
            history: scaled(5, 5.0, scale, kind),
            typing: scaled(5, 5.0, scale, kind),
            invalid_limit: 10_000,
            invalid_window: scaled(1, 600.0, scale, kind).window,
            ban: scaled(1, 3600.0, scale, kind).window,
        }
    }

    /// The Scoreboard's default: windows at a fifth, global 250 per second, 20 ms round trip,
    /// fixed windows.
    pub fn scoreboard() -> Self {
        Limits::discord(0.2, 250, 20 * MILLISECOND, WindowKind::Fixed)
    }

    /// The server model's configuration. Its `wall_epoch_ms` is `wall_epoch_ms` (the real
    /// server passes the wall clock at its start, so `X-RateLimit-Reset` is true).
    pub fn server_config(&self, wall_epoch_ms: u64) -> ServerConfig {
        let mut config = ServerConfig::discord()
            .global(Some(self.global))
            .invalid_requests(self.invalid_limit, self.invalid_window, self.ban)
            .bucket(HASH_MESSAGE, self.message)
            .bucket(HASH_EDIT, self.edit)
            .bucket(HASH_PIN, self.pin)
            .bucket(HASH_REACTION, self.reaction)
            .bucket(HASH_MESSAGE_EDIT, self.message_edit)
            .bucket(HASH_HISTORY, self.history)
            .bucket(HASH_TYPING, self.typing)
            .route(ROUTE_MESSAGE, RouteSpec::bucket(HASH_MESSAGE))
            .route(ROUTE_EDIT, RouteSpec::bucket(HASH_EDIT))
            .route(
                ROUTE_RENAME,
                RouteSpec::bucket(HASH_EDIT).with_sub_limit(self.rename),
            )
            .route(
                ROUTE_PIN,
                RouteSpec::bucket(HASH_PIN).with_shared_limit(self.pin_shared),
            )
            .route(ROUTE_REACT_PUT, RouteSpec::bucket(HASH_REACTION))
            .route(ROUTE_REACT_DELETE, RouteSpec::bucket(HASH_REACTION))
            .route(ROUTE_REACT_GET, RouteSpec::bucket(HASH_REACTION))
            .route(ROUTE_REACT_DELETE_ALL, RouteSpec::bucket(HASH_REACTION))
            .route(ROUTE_MESSAGE_EDIT, RouteSpec::bucket(HASH_MESSAGE_EDIT))
            .route(ROUTE_MESSAGE_DELETE, RouteSpec::bucket(HASH_MESSAGE_EDIT))
            .route(ROUTE_HISTORY, RouteSpec::bucket(HASH_HISTORY))
            .route(ROUTE_MESSAGE_GET, RouteSpec::bucket(HASH_HISTORY))
            .route(ROUTE_TYPING, RouteSpec::bucket(HASH_TYPING))
            .route(ROUTE_PLAIN, RouteSpec::unlimited())
            .route(ROUTE_INTERACTION, RouteSpec::unlimited().exempt())
            .route(ROUTE_ME, RouteSpec::unlimited().exempt());
        config.wall_epoch_ms = wall_epoch_ms;
        config
    }

    /// The round trip the imitation adds.
    pub fn rtt(&self) -> Nanos {
        self.latency_request + self.latency_response
    }
}
