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

use super::*;

/// The identities' major parameters with a probe in flight, or queues that wait on one.
#[derive(Debug, Default)]
pub(super) struct Contacts {
    /// By the hash of (identity, major parameter) ([`routes::contact_key`]; two that collide
    /// share one entry, which only charges more).
    majors: HashMap<u64, Contact>,
}

#[derive(Debug, Default)]
struct Contact {
    /// Requests of unknown routes in flight.
    probes: u32,
    /// Queues of this major parameter whose gate counted the probes (learned buckets charged
    /// by them, probes that waited for the learned buckets): evaluated again when a probe is
    /// sent or answered, or any of them sends or is answered. May name a queue that went away.
    members: Vec<Qid>,
}

impl Contacts {
    /// Whether no major parameter has a probe in flight or a queue waiting on one: the
    /// common case, checked first on the hot paths.
    pub(super) fn is_empty(&self) -> bool {
        self.majors.is_empty()
    }
}

impl Limiter {
    /// Whether queue `qid`'s next send is a probe: its route's bucket is unknown.
    pub(super) fn is_probe(&self, qid: Qid) -> bool {
        let q = self.queue(qid);
        matches!(q.key.bucket(), BucketId::Route(_)) && !q.bucket.is_known()
    }

    fn contact_key_of(&self, qid: Qid) -> u64 {
        let key = &self.queue(qid).key;
        routes::contact_key(key.identity, &key.major)
    }

    /// The probes in flight on queue `qid`'s identity and major parameter; `qid` joins the
    /// queues evaluated again when that changes.
    fn probes_on(&mut self, qid: Qid) -> u32 {
        let key = self.contact_key_of(qid);
        let Some(contact) = self.contacts.majors.get_mut(&key) else { return 0 };
        if !contact.members.contains(&qid) {
            contact.members.push(qid);
        }
        contact.probes
    }

    /// The charge the probes in flight put on queue `qid`, a learned bucket (0 for an unknown
    /// route's queue, or when no probe is out).
    pub(super) fn probe_charge(&mut self, qid: Qid) -> u32 {
        if self.contacts.is_empty() || matches!(self.queue(qid).key.bucket(), BucketId::Route(_)) {
            return 0;
        }
        self.probes_on(qid)
    }

    /// The gate a probe of queue `qid` (an unknown route's, nothing in flight) passes beside
    /// its own: every learned bucket of its identity and major parameter has a free slot with
    /// the probes already in flight and this one counted in it. `Until` the latest reset of a
    /// spent one; `UntilResponse` while one waits for an answer (a learned bucket's pioneer on
    /// this major parameter, say).
    pub(super) fn probe_gate(&mut self, now: Nanos, qid: Qid) -> Gate {
        let (iid, major) = {
            let key = &self.queue(qid).key;
            (key.identity, key.major.clone())
        };
        // A member of its major parameter's entry (made if there is none): another queue's
        // send there, a probe's above all, evaluates it again before it goes.
        let key = routes::contact_key(iid, &major);
        let contact = self.contacts.majors.entry(key).or_default();
        if !contact.members.contains(&qid) {
            contact.members.push(qid);
        }
        let probes = contact.probes;
        let (lead, share) = (self.trips.lead(), self.outage_share());
        let mut until = None;
        let mut waits = false;
        let others: Vec<Qid> = self.routes.hashes.iter().filter_map(|hash| self.learned_queue(iid, hash, &major)).collect();
        for other in others {
            // Brought up to now first, as its own evaluation would (a window over is rolled).
            let q = self.queue_mut(other);
            let in_flight = q.in_flight.len();
            q.bucket.refresh(now, lead, in_flight);
            // The bucket's own slots: a shared-scope limit learned below them is its resource's
            // (a channel's pins), which another route sharing the bucket does not count against.
            let gate = q.bucket.own_gate(in_flight + probes as usize, now, lead, share);
            match gate {
                Gate::Open => {}
                Gate::Until(t) => until = Some(until.map_or(t, |u: Nanos| u.max(t))),
                Gate::UntilResponse => waits = true,
            }
        }
        if waits {
            Gate::UntilResponse
        } else {
            until.map_or(Gate::Open, Gate::Until)
        }
    }

    /// Queue `qid` sends now (`probe`: an unknown route's first request): the probe counts in
    /// flight on its major parameter, and the other queues there are evaluated again (one that
    /// was ready may no longer have room).
    pub(super) fn contact_sent(&mut self, qid: Qid, probe: bool) {
        if !probe && self.contacts.is_empty() {
            return;
        }
        let key = self.contact_key_of(qid);
        let contact = match self.contacts.majors.get_mut(&key) {
            Some(contact) => contact,
            None if probe => self.contacts.majors.entry(key).or_default(),
            None => return,
        };
        if probe {
            contact.probes += 1;
        }
        let members = std::mem::take(&mut contact.members);
        self.touch(qid, members, key);
        if probe {
            // Every learned bucket of the major parameter now carries the probe's charge,
            // the ones already ready to send included.
            let (iid, major) = {
                let key = &self.queue(qid).key;
                (key.identity, key.major.clone())
            };
            let learned: Vec<Qid> =
                self.routes.hashes.iter().filter_map(|hash| self.learned_queue(iid, hash, &major)).collect();
            for other in learned {
                self.clear_slot(other);
                self.mark_dirty(other);
            }
        }
    }

    /// A request of queue `qid` left flight (answered, failed, cancelled; `probe`: it was
    /// sent as a probe): its charge goes, and the queues of its major parameter are evaluated
    /// again. Call before the answer moves the request to another queue.
    pub(super) fn contact_done(&mut self, qid: Qid, probe: bool) {
        if self.contacts.is_empty() {
            return;
        }
        let key = self.contact_key_of(qid);
        let Some(contact) = self.contacts.majors.get_mut(&key) else { return };
        if probe {
            contact.probes = contact.probes.saturating_sub(1);
        }
        let members = std::mem::take(&mut contact.members);
        if contact.probes == 0 {
            // Nothing charges the buckets any more: a queue that still waits registers again.
            self.contacts.majors.remove(&key);
        }
        self.touch(qid, members, key);
    }

    /// Evaluates `members` (but `qid`) again, taking them out of `ready` first; they stay the
    /// members of `key`'s entry, if it still exists.
    fn touch(&mut self, qid: Qid, members: Vec<Qid>, key: u64) {
        for &m in &members {
            if m != qid && self.queues.get(m).is_some_and(Option::is_some) {
                self.clear_slot(m);
                self.mark_dirty(m);
            }
        }
        if let Some(contact) = self.contacts.majors.get_mut(&key) {
            contact.members = members;
        }
    }
}
