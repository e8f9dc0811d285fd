//! The latency estimators of the limiter: how the server's clock runs against this process's
//! ([`Uplinks`]: each answer's lead before a window end, and the spread the global margin
//! absorbs), the way back of answers ([`Downlinks`]), and the last samples of a latency
//! ([`Recent`]) the round trips' and the store's margins are taken from.

use std::collections::VecDeque;

use crate::types::{MILLISECOND, Nanos};

/// The server's clock against this process's, where the answers tell it (Discord's
/// `X-RateLimit-Reset` less `X-RateLimit-Reset-After`, to the millisecond): each sample is the
/// server's clock at its answer less the monotonic instant the request left, that is the
/// request's uplink (and the server's time to stamp its answer) up to one constant. Their
/// spread is the bunching the global margin must absorb; each one tells how late its own
/// answer was read, which times the next window ([`Uplinks::lead`]). Both take the server to
/// count a request when it stamps its answer's headers.
#[derive(Debug, Default)]
pub(super) struct Uplinks {
    /// The last [`Uplinks::KEEP`] samples, oldest first, each with its round trip (from when
    /// the request left).
    samples: VecDeque<(i64, Nanos)>,
    /// The offsets of `samples` in ascending order, and of those sent alone: a spread reads
    /// its quantile at an index. Selecting it from a copy of up to 256 offsets at each answer
    /// cost about 4 µs an answer while the uplinks look unsteady (the bound is then
    /// recomputed at every sample), on every Discord answer, which has `X-RateLimit-Reset`.
    sorted: Vec<i64>,
    sorted_alone: Vec<i64>,
    seen: u64,
    /// Whether each of `samples` was sent alone (to keep `sorted_alone` as samples leave).
    alone_flags: VecDeque<bool>,
    /// The fastest sample and the allowance for the next request's uplink, once the samples
    /// can bound it (see [`Uplinks::lead`]).
    bound: Option<(i64, Nanos)>,
    /// The fastest and slowest sample ever seen.
    extremes: Option<(i64, i64)>,
    /// How many samples the bound's spread was taken from.
    bound_samples: usize,
}

impl Uplinks {
    const KEEP: usize = 256;
    /// Samples before an answer lead: a few are not a distribution.
    const LEAD_MIN: usize = 8;
    /// ... of which sent alone: see [`Uplinks::lead`].
    const LEAD_MIN_ALONE: u32 = 2;
    /// Samples in the fastest three quarters that can vouch for a steady uplink when the nine
    /// tenths cannot (see [`Uplinks::take`]): where the allowance's weight reaches 1x.
    const DENSE: usize = 32;
    /// Two readings of the server's clock differ by up to this from the truth between them
    /// (each is two headers rounded to the millisecond).
    pub(super) const READING: Nanos = 2 * MILLISECOND;

    /// Takes a sample; whether it falls outside all samples seen before.
    pub(super) fn push(&mut self, offset: i64, round_trip: Nanos, alone: bool) -> bool {
        let widens = widen(&mut self.extremes, offset);
        self.take(offset, round_trip, alone);
        widens
    }

    fn take(&mut self, offset: i64, round_trip: Nanos, alone: bool) {
        self.samples.push_back((offset, round_trip));
        self.alone_flags.push_back(alone);
        insert_sorted(&mut self.sorted, offset);
        if alone {
            insert_sorted(&mut self.sorted_alone, offset);
        }
        if self.samples.len() > Self::KEEP
            && let Some((old, _)) = self.samples.pop_front()
        {
            remove_sorted(&mut self.sorted, old);
            if self.alone_flags.pop_front() == Some(true) {
                remove_sorted(&mut self.sorted_alone, old);
            }
        }
        self.seen = self.seen.wrapping_add(1);
        let n = self.samples.len();
        if n < Self::LEAD_MIN || self.sorted_alone.len() < Self::LEAD_MIN_ALONE as usize {
            self.bound = None;
            return;
        }
        // The bound moves slowly: recomputed at every sample while it counts few, then every
        // 16th (the fastest round trip is a scan of up to 256); a new fastest sample is taken
        // at once.
        if self.bound.is_some() && self.bound_samples >= 32 && !self.seen.is_multiple_of(16) {
            if let Some((lo, _)) = &mut self.bound {
                *lo = (*lo).min(offset);
            }
            return;
        }
        let lo = self.sorted.first().copied().unwrap_or(0);
        let fastest_trip = self.samples.iter().map(|&(_, trip)| trip).min().unwrap_or(0);
        // Only on a steady uplink: the spread of the fastest nine tenths within a tenth of the
        // fastest round trip. The fastest sample bounds the next uplink only as well as the
        // samples show the distribution: a few samples bunched at its top (uplinks of 1 to 13
        // ms, thirteen samples all between 8 and 13: found with a fresh seed, kept in the
        // regression file) say nothing of the uplinks far below them, and a request timed from
        // them arrives early.
        let steady = |(spread, _): (Nanos, usize)| spread.saturating_mul(10) <= fastest_trip;
        let nine_tenths = spread_at(&self.sorted, lo, 9, 10);
        let mut spread = nine_tenths;
        // The request a lead times is sent after a wait, alone: where all samples look
        // unsteady, the samples of requests sent alone may still show a steady uplink once
        // there are enough of them, and then they decide (a burst's uplinks are spread by the
        // client's own writes: one of 71 requests kept the Python and fetch drivers without a
        // lead for the whole of the Scoreboard's `mixed`). The fastest of all samples stays
        // the reference, the more cautious one.
        if !steady(spread) && self.sorted_alone.len() >= Self::LEAD_MIN {
            spread = spread_at(&self.sorted_alone, lo, 9, 10);
        }
        // A slow cluster at the top (the first burst, queued at a server or a client still
        // busy starting: 6 of the Node driver's first 46 samples on the Scoreboard's `mixed`,
        // 5-6 ms above the 40 others, which lay within 1.2 ms) leaves the nine tenths unsteady
        // while the uplinks at the bottom are well known. Then the fastest three quarters
        // decide, if they are at least [`Uplinks::DENSE`] samples and steady; the allowance
        // still takes the nine tenths' spread, the cautious one.
        if !steady(spread) {
            let (dense, counted) = spread_at(&self.sorted, lo, 3, 4);
            if counted * 3 / 4 < Self::DENSE || !steady((dense, counted)) {
                self.bound = None;
                return;
            }
            spread = nine_tenths;
        }
        let (spread, counted) = spread;
        self.bound_samples = counted;
        // The next request's uplink may be faster than the fastest seen; by how much, the
        // spread of the fastest nine tenths tells, the less surely the fewer they are: 4x that
        // spread at 8 samples, 2x at 16, 1x at 32, 0.5x from 64 on (counting the samples the
        // spread was taken from).
        let weighted = spread.saturating_mul(32) / counted.min(64) as u64;
        self.bound = Some((lo, Self::READING.saturating_add(weighted)));
    }

    /// The fastest and the slowest sample, once 16 are in (for the global margin).
    pub(super) fn range(&self) -> Option<(i64, i64)> {
        if self.sorted.len() < 16 {
            return None;
        }
        Some((*self.sorted.first()?, *self.sorted.last()?))
    }

    /// How much before the window end it reports (its arrival plus its reset-after) the
    /// answer with sample `offset`, read `round_trip` after its request left, lets the next
    /// request go: that round trip less its uplink's excess over the fastest is the time from
    /// the server's answer until it was read, plus the fastest uplink; less the allowance for
    /// the next request's uplink. 0 until [`Uplinks::LEAD_MIN`] samples are in, of which
    /// [`Uplinks::LEAD_MIN_ALONE`] from requests sent alone (the trips of a burst share
    /// delays, connections opening, the server's accept queue, that make all its uplinks look
    /// alike and slow, and a request sent later on a quiet link is faster than all of them),
    /// and 0 while the uplinks are unsteady (see [`Uplinks::push`]).
    pub(super) fn lead(&self, offset: i64, round_trip: Nanos) -> Nanos {
        match self.bound {
            Some((lo, allowance)) => {
                let excess = u64::try_from(offset.saturating_sub(lo)).unwrap_or(0);
                round_trip.saturating_sub(excess).saturating_sub(allowance)
            }
            None => 0,
        }
    }
}

/// When the requests answered reached the server, from the server's clock in each answer
/// (Discord's `X-RateLimit-Reset` less `X-RateLimit-Reset-After`, as for [`Uplinks`]).
///
/// A sample is the server's clock at an answer less this process's monotonic instant the
/// answer was handled: the server's clock less this one's (a constant `C`) less the answer's
/// way back (its downlink and the time until it was read). The way back is never negative, so
/// `C` is at least every sample, and the largest of the recent samples is a lower bound on `C`
/// that the fastest way back tightens. A request the server stamped at `S` (its clock) then
/// reached it at `S - C` at the latest on this clock: no later than the largest sample allows,
/// whatever its uplink was (a request written long after it was let go, on a busy runtime,
/// included). See [`Downlinks::arrived_by`].
#[derive(Debug, Default)]
pub(super) struct Downlinks {
    samples: SlidingMax,
}

impl Downlinks {
    /// Takes the sample of an answer stamped by the server at `server` (ns on its clock) and
    /// handled at `now`; returns the latest instant on this process's clock at which the
    /// answered request can have reached the server: `now` less how much longer this answer's
    /// way back was than the fastest recent one, plus the two readings' error (each sample is
    /// two headers to the millisecond), and never after `now`.
    pub(super) fn arrived_by(&mut self, server: i64, now: Nanos) -> Nanos {
        let Ok(at) = i64::try_from(now) else { return now };
        let sample = server.saturating_sub(at);
        let largest = self.samples.push(sample);
        let later = u64::try_from(largest.saturating_sub(sample)).unwrap_or(u64::MAX);
        now.saturating_sub(later).saturating_add(2 * Uplinks::READING).min(now)
    }
}

/// The largest of the last [`SlidingMax::KEEP`] samples, kept as they come and go.
#[derive(Debug, Default)]
struct SlidingMax {
    /// The samples that may still be the largest of the last `KEEP`, with their sequence
    /// number: strictly decreasing, the largest first.
    max: VecDeque<(u64, i64)>,
    seen: u64,
}

impl SlidingMax {
    const KEEP: u64 = 256;

    /// Takes `sample`; returns the largest of the last `KEEP`, this one included.
    fn push(&mut self, sample: i64) -> i64 {
        self.seen = self.seen.wrapping_add(1);
        while self.max.back().is_some_and(|&(_, s)| s <= sample) {
            self.max.pop_back();
        }
        self.max.push_back((self.seen, sample));
        while self.max.front().is_some_and(|&(n, _)| self.seen.wrapping_sub(n) >= Self::KEEP) {
            self.max.pop_front();
        }
        self.max.front().map_or(sample, |&(_, s)| s)
    }

}

/// How far the fastest `num / den` of `sorted` (ascending) reach above `lo`, and how many
/// offsets that counted.
fn spread_at(sorted: &[i64], lo: i64, num: usize, den: usize) -> (Nanos, usize) {
    let n = sorted.len();
    match n.checked_sub(1) {
        Some(last) => (sorted[last * num / den].abs_diff(lo), n),
        None => (0, 0),
    }
}

/// Inserts `x` into ascending `sorted`.
fn insert_sorted(sorted: &mut Vec<i64>, x: i64) {
    let at = sorted.partition_point(|&y| y < x);
    sorted.insert(at, x);
}

/// Removes one `x` from ascending `sorted`.
fn remove_sorted(sorted: &mut Vec<i64>, x: i64) {
    if let Ok(at) = sorted.binary_search(&x) {
        sorted.remove(at);
    }
}

/// The last [`Recent::KEEP`] samples of a latency, for estimates recomputed every 16th sample
/// (they move slowly, and a scan is up to 256 long) and at once when a sample falls outside all
/// seen before: a global margin from 16 bunched round trips held for 16 more let a request 0.2
/// ms inside a global window when a slower and a faster one followed (a random seed, in
/// `properties.proptest-regressions`).
#[derive(Debug, Default)]
pub(super) struct Recent<T> {
    items: VecDeque<T>,
    seen: u64,
    /// The fastest and slowest latency ever seen.
    extremes: Option<(Nanos, Nanos)>,
}

impl<T> Recent<T> {
    pub(super) const KEEP: usize = 256;

    /// Takes `item`, whose latency is `latency`; whether the estimates are due: 16 samples are
    /// in, and this is the 16th since the last, or `latency` (or, as the caller says, another
    /// measure: `widened`) falls outside all seen before.
    pub(super) fn push(&mut self, item: T, latency: Nanos, widened: bool) -> bool {
        let widens = widen(&mut self.extremes, latency) | widened;
        self.items.push_back(item);
        if self.items.len() > Self::KEEP {
            self.items.pop_front();
        }
        self.seen = self.seen.wrapping_add(1);
        self.items.len() >= 16 && (widens || self.seen.is_multiple_of(16))
    }

    pub(super) fn iter(&self) -> std::collections::vec_deque::Iter<'_, T> {
        self.items.iter()
    }
}

impl<T: Copy + Into<i128>> Recent<T> {
    /// 1.5x the spread of the items (a sample's range underestimates the true range), for a
    /// margin passed to the store.
    pub(super) fn spread_margin(&self) -> Nanos {
        let (lo, hi) = self.items.iter().fold((i128::MAX, i128::MIN), |(lo, hi), &t| {
            let t: i128 = t.into();
            (lo.min(t), hi.max(t))
        });
        if lo > hi {
            return 0;
        }
        spread_margin(lo, hi)
    }
}

/// The margin a sample ranging from `lo` to `hi` asks for: 1.5x its spread (a sample's range
/// underestimates the true range). The one spread estimator of the global margin, of the
/// uplinks' allowance and of the margin passed to the store.
pub(super) fn spread_margin<T: Into<i128>>(lo: T, hi: T) -> Nanos {
    let spread = u64::try_from(hi.into() - lo.into()).unwrap_or(u64::MAX);
    spread.saturating_add(spread / 2)
}

/// Widens `extremes` to take `sample`; whether it had to (a sample outside all before).
pub(super) fn widen<T: Ord + Copy>(extremes: &mut Option<(T, T)>, sample: T) -> bool {
    match extremes {
        Some((lo, hi)) if (*lo..=*hi).contains(&sample) => false,
        Some((lo, hi)) => {
            (*lo, *hi) = ((*lo).min(sample), (*hi).max(sample));
            true
        }
        None => {
            *extremes = Some((sample, sample));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Uplinks, spread_at};
    use crate::types::Nanos;

    /// The spread as it was read before the offsets were kept sorted: a selection from a copy
    /// of the samples' offsets (only those sent alone, with `alone`).
    fn selected(u: &Uplinks, alone: bool, lo: i64, num: usize, den: usize) -> (Nanos, usize) {
        let mut offsets: Vec<i64> = (u.samples.iter().zip(&u.alone_flags))
            .filter(|&(_, &was_alone)| was_alone || !alone)
            .map(|(&(offset, _), _)| offset)
            .collect();
        let n = offsets.len();
        if n == 0 {
            return (0, 0);
        }
        (offsets.select_nth_unstable((n - 1) * num / den).1.abs_diff(lo), n)
    }

    proptest! {
        /// The sorted offsets hold exactly the samples' (those sent alone apart) as samples
        /// come and leave the last 256, so that every spread, the fastest and the range read
        /// from them equal the selections from the samples themselves; offsets from a narrow
        /// range repeat, and one of several equal offsets leaves.
        #[test]
        fn sorted_offsets_read_as_the_samples(
            pushes in prop::collection::vec(
                (prop_oneof![-40i64..40, any::<i64>()], 0..50_000_000u64, any::<bool>()),
                1..700,
            ),
        ) {
            let mut u = Uplinks::default();
            for (offset, trip, alone) in pushes {
                u.push(offset, trip, alone);
                let mut all: Vec<i64> = u.samples.iter().map(|&(o, _)| o).collect();
                all.sort_unstable();
                prop_assert_eq!(&u.sorted, &all);
                let lo = all[0];
                for (alone, num, den) in [(false, 9, 10), (true, 9, 10), (false, 3, 4)] {
                    let sorted = if alone { &u.sorted_alone } else { &u.sorted };
                    prop_assert_eq!(spread_at(sorted, lo, num, den), selected(&u, alone, lo, num, den));
                }
                let range = (u.samples.len() >= 16).then(|| (all[0], all[all.len() - 1]));
                prop_assert_eq!(u.range(), range);
            }
        }
    }
}
