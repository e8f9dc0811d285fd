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

impl Contact {
    fn join(&mut self, qid: Qid) {
        if !self.members.contains(&qid) {
            self.members.push(qid);
        }
    }
}

impl Contacts {
    /// Whether no major parameter has a probe in flight or a queue waiting on one: the
    /// common case, checked first on the hot paths.
    pub(super) fn is_empty(&self) -> bool {
        self.majors.is_empty()
    }

    /// The probes in flight on the major parameter `key` ([`super::routes::contact_key`]);
    /// queue `qid` joins the queues evaluated again when that changes, if an entry exists.
    pub(super) fn probes_on(&mut self, key: u64, qid: Qid) -> u32 {
        let Some(contact) = self.majors.get_mut(&key) else { return 0 };
        contact.join(qid);
        contact.probes
    }

    /// Like [`Contacts::probes_on`], the entry made if there is none (a probe waits on it).
    pub(super) fn join(&mut self, key: u64, qid: Qid) -> u32 {
        let contact = self.majors.entry(key).or_default();
        contact.join(qid);
        contact.probes
    }

    /// A queue of the major parameter `key` sends (`probe`: an unknown route's first
    /// request, which counts in flight there from now): the members to evaluate again, taken
    /// out (give them back with [`Contacts::rejoin`]); `None` without an entry (and no probe).
    pub(super) fn sent(&mut self, key: u64, probe: bool) -> Option<Vec<Qid>> {
        let contact = match self.majors.get_mut(&key) {
            Some(contact) => contact,
            None if probe => self.majors.entry(key).or_default(),
            None => return None,
        };
        if probe {
            contact.probes += 1;
        }
        Some(std::mem::take(&mut contact.members))
    }

    /// A request of the major parameter `key` left flight (`probe`: it was a probe): the
    /// members to evaluate again, taken out; with no probe left the entry goes (a queue that
    /// still waits joins again). `None` without an entry.
    pub(super) fn done(&mut self, key: u64, probe: bool) -> Option<Vec<Qid>> {
        let contact = self.majors.get_mut(&key)?;
        if probe {
            contact.probes = contact.probes.saturating_sub(1);
        }
        let members = std::mem::take(&mut contact.members);
        if contact.probes == 0 {
            self.majors.remove(&key);
        }
        Some(members)
    }

    /// The members taken out by [`Contacts::sent`] or [`Contacts::done`] stay members of
    /// `key`'s entry, if it still exists.
    pub(super) fn rejoin(&mut self, key: u64, members: Vec<Qid>) {
        if let Some(contact) = self.majors.get_mut(&key) {
            contact.members = members;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Contacts;

    #[test]
    fn a_probe_counts_on_its_major_parameter_until_it_is_answered() {
        let mut c = Contacts::default();
        assert_eq!(c.probes_on(7, 1), 0, "no entry: nothing in flight, and no member joins");
        assert!(c.is_empty());
        assert_eq!(c.sent(7, false), None, "a learned bucket's send makes no entry");
        assert_eq!(c.sent(7, true), Some(vec![]));
        assert_eq!(c.probes_on(7, 1), 1);
        assert_eq!(c.probes_on(8, 1), 0, "another major parameter");
        let members = c.done(7, true).expect("an entry");
        assert_eq!(members, [1], "the queue that counted the probe is evaluated again");
        assert!(c.is_empty(), "no probe left: the entry goes");
        c.rejoin(7, members);
        assert!(c.is_empty(), "nothing to rejoin");
    }

    #[test]
    fn a_waiting_probe_joins_and_members_are_kept_once() {
        let mut c = Contacts::default();
        assert_eq!(c.join(3, 10), 0);
        assert_eq!(c.join(3, 10), 0);
        assert_eq!(c.sent(3, true), Some(vec![10]), "joined once");
        c.rejoin(3, vec![10, 11]);
        assert_eq!(c.sent(3, true), Some(vec![10, 11]));
        assert_eq!(c.probes_on(3, 12), 2);
        assert_eq!(c.done(3, true), Some(vec![12]));
        assert!(!c.is_empty(), "one probe still out");
        assert_eq!(c.done(3, false), Some(vec![]), "a learned bucket's answer takes no probe");
        assert_eq!(c.done(3, true), Some(vec![]));
        assert!(c.is_empty());
    }
}
