//! [`Limiter::snapshot`] and [`Limiter::restore`]: what a limiter learned, out and back in.
//! The format and its rules are in [`crate::snapshot`].

use super::*;
use crate::snapshot::{GlobalPause, HostPause, LearnedBudget, LearnedMargin, LearnedRoute, LearnedWindow, Snapshot};

/// Nanoseconds per millisecond.
const MS: Nanos = MILLISECOND;

impl Limiter {
    /// What this limiter has learned, with its instants on the wall clock: `now` is the
    /// limiter's monotonic time and `wall_clock_ms` the wall clock at that moment (ms since the
    /// Unix epoch). A getter: it changes nothing, and there is nothing to drain. See
    /// [`crate::snapshot`] for what is kept and how a new process restores it.
    pub fn snapshot(&self, now: Nanos, wall_clock_ms: u64) -> Snapshot {
        let now = now.max(self.now);
        // Round a remaining hold up, and an age down: a round trip never shortens a hold.
        let wall_at = |t: Nanos| wall_clock_ms.saturating_add((t - now).div_ceil(MS));
        let mut s = Snapshot::empty(self.config.profile, wall_clock_ms);
        s.routes = self
            .routes
            .learned()
            .map(|(route, bucket)| LearnedRoute { route: route.to_string(), bucket: bucket.to_string() })
            .collect();
        let mut windows: Vec<LearnedWindow> = self
            .routes
            .hash_periods()
            .map(|(bucket, window_ns)| LearnedWindow { bucket: bucket.to_string(), window_ns })
            .collect();
        windows.sort_unstable_by(|a, b| a.bucket.cmp(&b.bucket));
        s.windows = windows;
        let mut pauses: Vec<GlobalPause> = self
            .identities
            .iter()
            .filter(|ident| ident.paused_until() > now)
            .map(|ident| GlobalPause { identity: ident.name().to_string(), until_ms: wall_at(ident.paused_until()) })
            .collect();
        pauses.sort_unstable_by(|a, b| a.identity.cmp(&b.identity));
        s.global_pauses = pauses;
        if self.edge.until() > now {
            s.host_pause = Some(HostPause { until_ms: wall_at(self.edge.until()), strikes: self.edge.strikes() });
        }
        // An invalid response's age is the window less the time until it leaves it.
        let window = self.config.invalid_request_window;
        s.invalid_requests_ms = self
            .invalid
            .ends_after(now)
            .map(|end| wall_clock_ms.saturating_sub(window.saturating_sub(end - now) / MS))
            .collect();
        let mut margins: Vec<LearnedMargin> = self
            .margins
            .iter()
            .map(|(dimension, ratio)| {
                let (recent, samples) = ratio.kept();
                LearnedMargin { dimension: dimension.to_string(), recent, samples }
            })
            .collect();
        margins.sort_unstable_by(|a, b| a.dimension.cmp(&b.dimension));
        s.margins = margins;
        for q in self.queues.iter().flatten() {
            for b in q.rare.budgets() {
                let kept = b.keep(now);
                let (learned, bucket) = match q.key.bucket() {
                    BucketId::Route(name) => (false, name.to_string()),
                    BucketId::Hash(name) => (true, name.to_string()),
                };
                s.budgets.push(LearnedBudget {
                    identity: self.identities[q.key.identity].name().to_string(),
                    bucket,
                    learned,
                    major: q.key.major.to_string(),
                    dimension: b.name().to_string(),
                    limit: kept.limit,
                    period_ns: kept.period,
                    left: kept.left,
                });
            }
        }
        s.budgets.sort_unstable_by(|a, b| {
            (&a.identity, &a.bucket, a.learned, &a.major, &a.dimension).cmp(&(&b.identity, &b.bucket, b.learned, &b.major, &b.dimension))
        });
        s
    }

    /// Imports what `snapshot` says a limiter learned (usually this program's previous run):
    /// `now` is this limiter's monotonic time and `wall_clock_ms` the wall clock at that moment
    /// (ms since the Unix epoch). An input: drain [`Limiter::poll_output`] afterwards.
    ///
    /// The limiter must hold no request (restore before the first [`Limiter::enqueue`], or
    /// when everything has ended). What it learned itself is kept and is newer: a route it
    /// already maps keeps its bucket; windows, pauses and the invalid-request count are
    /// merged, the longer or later winning; a cost margin or budget it has is kept, the
    /// snapshot's fill the rest (a budget when its queue opens). Pauses over by
    /// `wall_clock_ms` and invalid responses older than the window are dropped. No observation is emitted for restored
    /// routes, except an [`Observation::InvalidRequestWarning`] when the restored count
    /// crosses its threshold.
    ///
    /// # Errors
    /// [`Error::Closed`] after [`Limiter::close`]; [`Error::Busy`] while it holds requests;
    /// [`Error::SnapshotForeign`] for a snapshot of another header profile (or format),
    /// [`Error::SnapshotVersion`] and [`Error::SnapshotMalformed`] as
    /// [`Snapshot::validate`] says. On error nothing changed.
    pub fn restore(&mut self, now: Nanos, wall_clock_ms: u64, snapshot: &Snapshot) -> Result<(), Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        if !self.requests.is_empty() {
            return Err(Error::Busy { requests: self.requests.len() });
        }
        snapshot.validate()?;
        if snapshot.profile != self.config.profile {
            return Err(Error::SnapshotForeign(format!(
                "it was taken by a limiter of profile {:?}, this one is {:?}",
                snapshot.profile, self.config.profile
            )));
        }
        let now = self.advance(now);
        // A wall clock that went back since the snapshot: read as no time passed.
        let wall = wall_clock_ms.max(snapshot.taken_at_ms);
        // A pause or window from the document is a wait from outside like a server's: within
        // the one bound (`Config::bound_wait`), so a pause ten years ahead holds for
        // `max_server_wait` at most.
        let config = &self.config;
        let mono_until = |until_ms: u64| -> Option<Nanos> {
            let left = until_ms.checked_sub(wall).filter(|&ms| ms > 0)?;
            Some(now.saturating_add(config.bound_wait(left.saturating_mul(MS))))
        };

        for r in &snapshot.routes {
            if !self.routes.knows(&r.route) {
                self.routes.remember(r.route.clone(), r.bucket.as_str().into(), self.config.max_routes);
            }
        }
        for w in &snapshot.windows {
            let window_ns = self.config.bound_wait(w.window_ns);
            self.routes.lengthen_hash_period(&w.bucket, window_ns, self.config.max_routes);
        }
        for p in &snapshot.global_pauses {
            if let Some(until) = mono_until(p.until_ms) {
                let iid = self.identities.intern(&p.identity);
                self.identities[iid].pause(until);
            }
        }
        if let Some(h) = &snapshot.host_pause
            && let Some(until) = mono_until(h.until_ms)
        {
            self.edge.restore(until, h.strikes);
        }
        for m in &snapshot.margins {
            self.margins.restore(&m.dimension, Ratio::restored(&m.recent, m.samples));
        }
        // Budgets wait for their queue (made by its next request); one this limiter already
        // has is newer and kept.
        let elapsed = wall.saturating_sub(snapshot.taken_at_ms).saturating_mul(MS);
        let share = self.cost_share();
        for b in &snapshot.budgets {
            let kept = costs::Kept { limit: b.limit, period: b.period_ns, left: b.left };
            let budget = costs::Budget::restored(&b.dimension, kept, elapsed, now, share);
            let key = (b.identity.clone(), b.bucket.clone(), b.learned, b.major.clone());
            let known = self.restored_budgets.iter().any(|(k, old)| *k == key && old.name() == budget.name());
            if !known && self.restored_budgets.len() < self.config.max_routes {
                self.restored_budgets.push((key, budget));
            }
        }
        if self.config.invalid_request_limit > 0 {
            let window = self.config.invalid_request_window;
            let restored = snapshot.invalid_requests_ms.iter().filter_map(|&t| {
                let age = wall.saturating_sub(t).saturating_mul(MS);
                (age < window).then(|| now.saturating_add(window - age))
            });
            self.invalid.restore(restored);
            self.expire_invalid(now);
            self.warn_invalid_budget();
        }
        self.pump(now);
        Ok(())
    }
}
