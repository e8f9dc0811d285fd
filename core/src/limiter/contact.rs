//! First contact: what a request of an unknown route risks on its major parameter.
//!
//! A route's bucket is learned from its first answer (`X-RateLimit-Bucket`), and Discord's
//! real limit is the bucket and the major parameter (a channel, a guild, a webhook). Until a
//! route's first answer, it may turn out to share the bucket of any other route of the same
//! identity and major parameter: the engine knows every bucket learned on that major
//! parameter, but not which of them (if any) the unknown route will count against. So:
//!
//! - **A probe** (the first request of an unknown route, its queue's pioneer) goes only when
//!   every learned bucket of its identity and major parameter has a free slot, as if the probe
//!   were in flight in each of them (a bucket spent until its reset holds the probe until then:
//!   it may be the one the probe counts against).
//! - **While a probe is in flight** it counts as in flight in every learned bucket of its
//!   identity and major parameter (a charge it may not turn out to take), so that no bucket
//!   pipelines into the slot the probe may have taken. Its answer names its bucket; the
//!   charge on the others goes. A learned bucket not known on this major parameter yet (a new
//!   channel of a learned route) sends its own pioneer only once the probes are answered.
//! - **Several probes** of different unknown routes on one major parameter may be in flight
//!   together: each charges the learned buckets, and they count against each other's gates.
//!   Two unknown routes that share a bucket with fewer slots than the probes sent into it at
//!   once (two reaction routes on a 1-per-window bucket, all unknown) still meet a 429: what
//!   [`Config::route_groups`](crate::Config::route_groups) is for (the reaction routes are the
//!   Discord profile's default).
//!
//! What the first answers teach is the route's bucket, for every major parameter: a route
//! learned on one channel is not unknown on the next (its requests wait in the bucket's queue
//! of that channel, which learns its own window with one pioneer).
//!
//! The cost: a probe's round trip on the learned buckets of its major parameter (one slot each,
//! given back with its answer), and a probe that waits for a spent bucket's reset. At first
//! contact, when everything is unknown, nothing waits: the probes of all routes go at once.

use super::{HashMap, Qid};

/// The identities' major parameters with a probe in flight, or queues that wait on one.
#[derive(Debug, Default)]
pub(super) struct Contacts {
    /// By the hash of (identity, major parameter) ([`routes::contact_key`]; two that collide
    /// share one entry, which only charges more).
    pub(super) majors: HashMap<u64, Contact>,
}

#[derive(Debug, Default)]
pub(super) struct Contact {
    /// Requests of unknown routes in flight.
    pub(super) probes: u32,
    /// Queues of this major parameter whose gate counted the probes (learned buckets charged
    /// by them, probes that waited for the learned buckets): evaluated again when a probe is
    /// sent or answered, or any of them sends or is answered. May name a queue that went away.
    pub(super) members: Vec<Qid>,
}

impl Contacts {
    /// Whether no major parameter has a probe in flight or a queue waiting on one: the
    /// common case, checked first on the hot paths.
    pub(super) fn is_empty(&self) -> bool {
        self.majors.is_empty()
    }
}
