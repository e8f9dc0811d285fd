//! Shared mode: several processes (or machines) that use one token share its limits through a
//! store such as Redis.
//!
//! A bot large enough to run several processes shares one token, and with it the token's global
//! limit (Discord: 50 requests per second), its buckets and its invalid-request budget. Each
//! [`Limiter`](crate::Limiter) only sees its own requests, so N processes would together send up
//! to N times what one may. Shared mode closes that gap while keeping the core sans-IO: **the core
//! emits what it needs to reserve or record, and the driver does the store I/O.**
//!
//! # How the core behaves in shared mode
//!
//! Turn it on with [`Config::shared`](crate::Config::shared) (`Some(SharedConfig::default())`).
//! With it off nothing changes: no output below is ever emitted.
//!
//! * Where the core would emit [`Output::Send`](crate::Output::Send), it first checks its own
//!   limits exactly as before, takes the request's local bucket slot and global token, and emits
//!   [`Output::Reserve`](crate::Output::Reserve) with a [`Reservation`]. The request is now
//!   *reserving*: it holds its local slot (as if in flight) until the driver answers with
//!   [`Limiter::handle_reservation`](crate::Limiter::handle_reservation). Reservations are
//!   pipelined: a queue may have several out at once.
//!   * [`ReservationAnswer::Granted`]: the core emits `Output::Send(id)` during that call; the
//!     send time (for the local windows) is the time of the answer. Two exceptions: a request
//!     whose deadline passed meanwhile fails with `deadline_exceeded` (or `max_wait_exceeded`, or `deferred`),
//!     and one that would overtake an earlier request of its queue (denied and back in line, or
//!     reserving again) goes back behind it. In both cases the grant is returned to the store
//!     with [`SharedUpdate::Release`] (`reached: false`), so FIFO per bucket holds.
//!   * [`ReservationAnswer::Denied`]: the request gives back its local slot and global token (it
//!     was never sent; no retry is counted) and goes back to its place in its queue, and what the
//!     store said is exhausted is held until `retry_after` (at least 1 ms; see [`SharedScope`]
//!     for what each scope holds). It is reserved again afterwards. Deadlines and `max_wait` keep
//!     working: a request whose predicted wait now exceeds its deadline fails at once with the
//!     prediction, and one whose deadline passes while it waits fails then.
//!   * [`ReservationAnswer::Unavailable`] (the store is down, or did not answer in time): the
//!     request goes back to its queue (it was never sent; no retry is counted). With
//!     [`OnUnavailable::FailOpen`] it is then sent without a reservation as soon as this
//!     process's **share** of the limits allows: while the store is down, the global limit and
//!     each bucket's limit are divided by the number of live processes the store last reported
//!     (`processes` in its answers; 1 until it says, and at least 1 per window), so that K
//!     processes together stay within the limits instead of each using all of them; and
//!     against the global limit only from one global window after the outage began (see
//!     "Through an outage"). With [`OnUnavailable::FailClosed`] it waits (and its probes keep to
//!     the share too). Either way the store is
//!     marked down: for [`SharedConfig::retry_base`] (doubling per failed probe, up to
//!     [`SharedConfig::retry_max`]) no reservation is made (fail-open sends directly, fail-closed
//!     holds every request); then one reservation probes the store while the others keep waiting
//!     (fail-closed) or keep going on local limits (fail-open; but not the requests queued behind
//!     the probe in its own queue, which wait for its answer). The first `Granted` or `Denied`
//!     ends the outage. Store health is counted **per outage step, not per reservation**: the
//!     reservations that were already outstanding when the store was marked down (or when the
//!     failed probe was emitted) fail for the same cause, so their `Unavailable` answers are
//!     one failure, not one each: with N reservations out when the store goes away the first
//!     probe still comes `retry_base` later, then `2 x retry_base` after a failed probe, and so
//!     on. [`Observation::StoreUnavailable`](crate::Observation::StoreUnavailable) is emitted
//!     once per step, and [`Observation::StoreRecovered`](crate::Observation::StoreRecovered)
//!     once at the end. A fail-closed hold always comes with a `WaitUntil`, so nothing hangs.
//!     What the store may have missed meanwhile (the sends made without it, the grants a
//!     restarted store lost) it is told when it answers again, and the processes keep to their
//!     shares until all of them are back: see "Through an outage".
//! * After a response to a request sent in shared mode, the core emits
//!   [`Output::Share`](crate::Output::Share) with a [`SharedUpdate::Bucket`] report (whatever the
//!   status), plus a [`SharedUpdate::Hold`] for a 429 (scope global, bucket for `shared` and
//!   bucket 429s, route for a sub-limit, edge for a header-less one) and a
//!   [`SharedUpdate::Invalid`] for an invalid response (401, 403, non-shared 429). A transport
//!   failure or a cancellation in flight emits a [`SharedUpdate::Release`] (`reached` unless the
//!   failure is [`Failure::NotSent`](crate::Failure::NotSent)). The driver writes them to the
//!   store fire-and-forget, **in the order emitted and on the same connection as the
//!   reservations**, so that a report lands before the next reservation that depends on it.
//! * [`Limiter::cancel`](crate::Limiter::cancel) of a reserving request ends it at once (it was
//!   never sent; its local slot is given back). [`Limiter::close`](crate::Limiter::close) fails
//!   reserving requests with `closed` together with the queued ones, and so do the other paths
//!   that fail queued requests (a 401 for their token). Their reservations are still outstanding
//!   at the store: the driver answers them as usual, `handle_reservation` **ignores** such a late
//!   answer (returns `Ok(())` without any outcome), and for a `Granted` one it emits a
//!   [`SharedUpdate::Release`] so the store takes the grant back. An answer for an id the limiter
//!   never issued, or that ended otherwise, is
//!   [`Error::UnknownRequest`](crate::Error::UnknownRequest); for a request that is not reserving
//!   (queued, in flight, answered twice), [`Error::InvalidState`](crate::Error::InvalidState).
//!
//! The driver must answer every `Reserve` exactly once; if the store does not answer within the
//! driver's own timeout, it answers [`ReservationAnswer::Unavailable`] (and drops the late
//! answer). A request stays reserving until then: its deadline is checked when the answer comes.
//!
//! # Leases (the global budget)
//!
//! With [`SharedConfig::global_lease`] (the default) a process does not ask the store's global
//! window once per request. When one of its requests needs a global token and it has none,
//! that request's reservation asks for `global_want` tokens: one per head of the identity's
//! queues that is ready or waits for the global budget, at most what its own window has room
//! for and its share of the limit (`global_limit` divided by the live processes the store last
//! counted, rounded up). The store grants as many as its window has room for, counts them all
//! now, lists the ones beyond the request's own as this client's, and answers `leased`
//! ([`ReservationAnswer::Granted::leased`]). Until that answer, the identity's other requests
//! wait for it instead of each asking: this is what keeps K processes from putting K x
//! `global_limit` reservations to the store per window, and a herd of denials at each slide.
//!
//! Each leased token then lets one reservation of that process go with `global_want: 0`: the
//! store checks the bucket, holds and budgets as usual, skips the window check, and **moves
//! the token to now** (its score becomes this grant's time). So a spent token counts exactly
//! like a grant of that moment, and the window needs no widening: the lease changes who may
//! take the window's room, not when a request counts. A process keeps its tokens for half a
//! global window after its latest lease (what is left of a current lease, and the tokens that
//! come back from reservations denied for another reason, join the next); a token the store
//! no longer counts (it left the window unspent) is not found, and that reservation is
//! checked against the window like any other. A reservation
//! that asks for tokens and is denied for the window (scope `global`) while the process's
//! lease is current holds only the requests that have no token to spend: the others go on
//! spending theirs, including tokens that come back from reservations denied for other
//! reasons. (A pause of the whole identity left such tokens unspent until they lapsed, counted
//! by the store to the end of its window: in a simulation of 4 processes on 100 new channels
//! with runtime delays, a global window sent 133 of its 250.) A token never
//! spent (its requests cancelled, or denied by their buckets) keeps its place until its window
//! ends: K and the lease size decide that waste (at most K x (B - 1) tokens per window), never
//! safety.
//!
//! **Worst case at the server.** Let `s` be the store time at which a request's token was
//! counted (its grant, or the grant that spent its leased token) and `a` its arrival at the
//! server, `d = a - s` (the answer's way back to the process, the process's own delay, the
//! request's way out). The store admits at most `global_limit` tokens per `global_window` `W +
//! m` of its own clock (`W` the limit's window, `m` the margin the process passes); a server
//! window `[x, x + W)` holds the requests with `s` in `(x - d_max, x + W - d_min]`, a span of
//! `W + (d_max - d_min)`. So the overshoot is **0** whenever `d_max - d_min <= m`, whatever
//! the number of processes K, the lease size B and the processes' clock skew (the store counts
//! on its own clock and every process passes durations only); beyond that spread, the
//! overshoot in a window is at most the number of tokens counted within `d_max - d_min - m`
//! before its start. The margin a process passes covers the spread of its HTTP round trips
//! (timed from the transport's report that a request left) and the spread of the delay from
//! the store's count to the process's handling of the grant: the store says its clock in each
//! grant ([`ReservationAnswer::Granted::store_time`]), and the difference to the process's
//! clock is that delay up to a constant (a store that does not say: the spread of the
//! reservations' round trips, which also holds the wait before the store counted, and is
//! larger). Not covered: the runtime's delay between a `Send` and the transport's report,
//! which is part of `d`: where the runtime writes unevenly, `d_max - d_min` can exceed `m` (in
//! the simulator, with writes delayed by 0-100 ms and the store 0-20 ms away, 1 global 429 in
//! 40 runs of 4 processes on 100 channels before the store said its clock, and 0 after only
//! because the changed margins moved that run; see `BENCHMARKS.md`). The Discord global limit is tested at 0 overshoot
//! (`random_workloads_of_up_to_eight_processes_keep_every_invariant`: up to 8 processes, store
//! round trips up to 90 ms, with leases on, writes without delay).
//!
//! What the processes send together is at most what one process alone would allow, with the
//! exceptions below: the store decides with every process's grants, and each process still
//! applies its own limits. Not shared, by design: priorities (the store serves reservations in
//! arrival order), the latency margin (each process passes its own) and requests in flight at
//! other processes, which the shared invalid-request budget does not count (the local budget
//! does; keep `invalid_request_stop_at` a margin below the limit, as the defaults do). While the
//! store is down, fail-open processes keep their share of the limits (the limit divided by the
//! live processes the store last counted, at least 1), for the global limit from the outage's
//! second window on: exact for the global limit and for buckets whose limit is at least the
//! process count, as long as the count is current (a process that started during the outage,
//! or that no other process saw reserve within the last `lease`, is not counted); see "Through
//! an outage" for the whole bound. A request that meets a 429 anyway is retried like any other
//! (within `max_rate_limit_retries` and its deadline) and ends in exactly one outcome.
//!
//! # Through an outage
//!
//! **The first window.** When the store goes away it may just have granted the current global
//! window, and not evenly: one process may hold 28 of 50 and another none, which its share of
//! 25 would then add to (53 at the server; the simulation finds such splits at the global cap
//! with evenly spread demand, since leases go to whoever asks first). So a fail-open process
//! sends nothing against the global limit without a reservation until one global window
//! (`global_window + global_margin_max`, the longest a reservation passes) after the outage
//! began for it: by then every grant the store made before it has left every window. Its
//! probes still go (the store, if back, decides them), and the hold ends with the outage; a
//! process alone (the store counted 1) does not hold, since its own window has all its grants.
//! After that first window, the processes' shares add up to at most the limit. A fail-closed
//! process sends nothing without the store; its probes keep to its share.
//!
//! **After an outage.** When the store answers again it may lack two things: the sends the
//! fail-open processes made without a reservation (it never saw them), and, if it lost its
//! state (Redis restarted without persistence comes back **empty**), the grants it had made,
//! sends still in the server's global window. Granting a whole window then would overshoot the
//! server's window by as much (the benchmark's 79-168 global 429s at K = 4 before this). So:
//!
//! * **Each process tells the store what it sent.** From the moment the store is marked down
//!   (and with every send made without a reservation), each identity's next reservation carries
//!   how long ago this process made its sends of the identity's global budget within the
//!   longest global window (`global_window + global_margin_max`): [`Reservation::unrecorded`]
//!   for those made without a reservation, [`Reservation::granted`] for those the store granted.
//!   Durations only: the store stamps them on its own clock (now less the age, so one that
//!   arrives late counts a little longer, never shorter). The store counts every `unrecorded`
//!   one, and the `granted` ones only when it does not know the process (it is not among its
//!   live processes, `procs`: a store that lost its state; one that knows the process has its
//!   grants already). It replaces the process's earlier report with each new one, so a report
//!   sent again (its answer lost, or carried by two reservations) counts once. The report stops
//!   once the store has answered (granted or denied) a reservation that carried it, unless a
//!   send without a reservation followed it (a fail-open process keeps sending while its probe
//!   is out). It goes in the reservation itself: no extra round trip, one script call.
//! * **Each process keeps to its share until every process is back.** Until then another
//!   process may still be sending without the store, on its share; so after the outage a
//!   process keeps running on its share of the limits (the limit divided by the processes the
//!   store counted before the outage), its reservations going to the store as usual. While it
//!   does, its reservations carry [`Reservation::processes_since`] (the time since its outage
//!   began) and the store's answer counts only the processes that reserved within that time,
//!   not `reporting` (a process still reporting marks its reservations
//!   [`Reservation::reporting`], and the store does not refresh it among the live processes
//!   until it has nothing left to report). When that count reaches the one before the outage,
//!   every process has reported what it sent: the whole limits apply again. A process that
//!   sends nothing (idle, or done) is never counted back, so the share also ends at a time:
//!   fail-open, when a process still sending without the store must have probed it and what it
//!   sent has left the window: its probe pause doubles from `retry_base`, so it is at most the
//!   time since the store was last seen up plus `retry_base` (and at most `retry_max`), plus
//!   twice the driver's timeout (taken as the longest this process waited for an `Unavailable`
//!   in this outage: one store, one setting), plus one global window, after the outage ended
//!   (about 3 s after a 1 s outage); fail-closed, one global window after the outage began
//!   (nobody sent without the store; only the grants a restarted store lost can still be in
//!   the window).
//!
//! **The bound.** With the process count current (every process got the store's count before
//! the outage, and none joined during it), and every process seeing the outage (one of its
//! reservations failed) before the store answers it again, the processes together put at most
//! `global_limit` in any server window through the outage, under either policy, whether the
//! store comes back with its state or empty: in the outage's first window only grants the
//! store made; then shares that add up to the limit; when the store answers again, its window
//! holds every send it granted or was told about (on its own clock), and until every process
//! is back each keeps to its share. When the whole limits apply again, the bound of "Leases"
//! holds. The simulation checks it (`tests/store_restart.rs`: K = 4 and 8 through a restart
//! that empties the store, and random outages and restarts of 2 to 8 processes under load).
//!
//! Not covered: a process that did **not** see the outage (none of its reservations failed:
//! it was idle while the store was down, or the store was back within the driver's timeout and
//! answered it before its failed reservation timed out) does not know that the others may be
//! sending without the store, nor that a store restarted empty lost its grants; neither does
//! the store. What it is granted before its next failed reservation may take room the
//! others' unreported sends hold, and its grants a restarted store lost are not counted while
//! they are still in the window (at most its own sends of one window). Run Redis with
//! persistence (AOF) or a replica if that matters. The buckets: a bucket's state
//! lost with a restart is learned again through one pioneer, and its `remaining` is the
//! server's own count; only requests in flight at that moment are not in it.
//!
//! # The store contract
//!
//! [`MemoryStore`] is the reference model: a pure in-memory implementation of exactly what the
//! Redis script does. Its behaviour is the specification; this section describes it key by key so
//! a Lua script can be written from it, and `tests/vectors/store_*.json` replay it operation by
//! operation (answers and live key counts). Two operations, each one atomic script call (one
//! round trip):
//!
//! * `reserve(now, client, reservation) -> answer`, called for each [`Output::Reserve`](crate::Output::Reserve);
//! * `record(now, client, update)`, called for each [`Output::Share`](crate::Output::Share), fire-and-forget.
//!
//! `now` is the **store's** clock (Redis `TIME`), never the core's: every process has its own
//! monotonic epoch, so the core only ever passes durations. `client` is a string unique to the
//! process (the driver picks it at start-up, e.g. a random UUID); a grant's *member* is
//! `client ":" id`, which identifies it among all processes.
//!
//! The store-wide settings come from [`SharedConfig`] (every process of one bot uses the same):
//! `lease` (how long a pioneer lock and an unanswered grant last), `pioneer_poll` (how long a
//! request denied by another process's pioneer waits before asking again) and `state_ttl` (how
//! long idle state is kept).
//!
//! ## Keys
//!
//! Every key starts with the driver's prefix `P`, which should contain a Redis Cluster hash tag
//! (e.g. `{ratelane:mybot}:`) so that all keys of one namespace live in one slot. Variable parts
//! are length-prefixed so no identity, route or major parameter can collide with another:
//! `enc(s) = len(s) ":" s` (byte length in decimal). Times are store times; the model uses
//! nanoseconds, a Lua script uses microseconds from `TIME` (divide the `_ns` arguments by 1000,
//! rounding up, and multiply `retry_after` by 1000). A sorted set whose last member is removed
//! is no key (as in Redis).
//!
//! | key | type | content | expires |
//! |---|---|---|---|
//! | `P "procs"` | sorted set | one member per process that reserved within the last `lease`, not `reporting` (member: `client`, score: the time of its latest such `reserve`) | `lease` after the last add |
//! | `P "edge"` | string | time until which every request is held (a Cloudflare-style ban) | at that time |
//! | `P "inv"` | sorted set | one member per invalid response (score: its time) | `window` after the last add |
//! | `P "g|" enc(identity)` | sorted set | one member per global grant, `member ":" now` (score: grant time), and per send a process reported after an outage, `client "!u" k` (unrecorded) or `client "!g" k` (granted), k from 1 (score: now less its age) | `global_window` after the last grant or report |
//! | `P "gp|" enc(identity)` | string | time until which the identity's global limit is paused | at that time |
//! | `P "gl|" enc(identity) enc(client)` | sorted set | the `g` members leased to `client` and not yet spent (score: lease time) | `global_window` after the last lease |
//! | `P "r|" enc(identity) enc(route)` | string | the route's bucket hash; `""`: the route has no bucket | `state_ttl` after the last write |
//! | `P "b|" enc(identity) enc(hash) enc(major)` | hash | `limit`, `remaining` (countdown of grants in this window), `reported` (lowest `remaining` reported in this window; absent after a roll), `reset_at`, `window`, `window_start`, `provisional` (0/1), `margin`, `untimed` (1: a report of this window gave `remaining` without `reset_after`; absent after a roll) | `state_ttl` after `reset_at` (re-armed on every write) |
//! | `P "bw|" enc(identity) enc(hash)` | string | the longest `window` of the hash's `b` keys, in ns | `state_ttl` after the last bucket report of the hash |
//! | `P "bp|" enc(identity) enc(hash) enc(major)` | sorted set | unanswered grants: member, score = when it stops counting (a live grant: grant time + `lease`; a *ghost*: see below) | at its highest score |
//! | `P "lr|" enc(identity) enc(route) enc(major)` | string | pioneer lock of a route without bucket state (its bucket unknown, or known without state): the holder's member | `lease` after it was taken |
//! | `P "lb|" enc(identity) enc(hash) enc(major)` | string | pioneer lock of a bucket without state | `lease` after it was taken |
//! | `P "hr|" enc(identity) enc(route) enc(major)` | string | hold of a route and major parameter (a sub-limit) until | at that time |
//! | `P "hb|" enc(identity) enc(hash) enc(major)` | string | hold of a bucket (a shared-resource 429) until | at that time |
//!
//! The bucket hash of a reservation is read from the `r|` key, so `b|`, `bp|`, `lb|` and `hb|`
//! keys are discovered inside the script: it cannot declare every key it touches in `KEYS`. With
//! the hash tag they are all in one slot, which Redis Cluster accepts in practice; a deployment
//! that enforces declared keys strictly has to pass the reservation's `bucket` and give up the
//! cross-process route learning. This is a known limitation.
//!
//! **Rolling a bucket window** (`roll`): if the `b` key exists and now >= `reset_at` (or the
//! roll is forced, step 2 of `record` below): drop `bp` members with score <= now; then
//! `window_start = now`, `remaining = max(limit - card(bp), 0)` (unanswered grants may land in
//! the new window: they are *carried*), `reported` and `untimed` deleted, `reset_at = now +
//! window + margin`, `provisional = 1`. (A later report replaces a provisional `reset_at`.)
//!
//! **Available** in a bucket: `reported - card(bp)` (at least 0) if `reported` is set, else
//! `remaining`. (The lowest report is the server's latest state; what it did not count is still
//! unanswered, or came back with a lower report. This is the engine's own rule.)
//!
//! ## `reserve`
//!
//! First, **live processes** (always): `known` = whether `client` is a `procs` member with
//! score > now - `lease`; drop `procs` members with score <= now - `lease`; unless the
//! reservation is `reporting`, add (or move) `client` with score now and expire the key
//! `lease` later; `processes` = the cardinality of `procs` (0 if it does not exist), or with
//! `processes_since` the number of members with score >= now - `processes_since`, given with
//! every answer. Then, also always, the **report** (if `global_limit > 0`): if `unrecorded` is
//! not empty, remove from `g` the members named `client "!u"` followed by digits only, then add
//! `client "!u" k` with score max(now - age, 0) for the k-th age (k from 1); the same for
//! `granted` (`"!g"`) if not `known`; after either, expire `g` at the later of its expiry and
//! now + `global_window` (the ages are rounded down to whole microseconds in the script, so the
//! stamps err later). Then the checks run in this order; the first that
//! fails answers `Denied { retry_after, scope, processes }` **and changes nothing** but a
//! bucket roll (a pure function of time, kept) and `procs`. If none fails, the grant is
//! committed (step 7) and the answer is `Granted { processes, leased, store_time }` (`store_time`:
//! the store's `now`).
//!
//! 1. **edge**: `edge` > now: denied until then, scope `edge`.
//! 2. **invalid** (if `invalid_limit > 0`): drop `inv` members with score <= now -
//!    `invalid_window`; if `n` remain and `n >= invalid_limit`: denied until the score of the
//!    member at rank `n - invalid_limit` (0-based, ascending) + `invalid_window`, scope `invalid`.
//! 3. **global** (if `counts_global`): `gp` > now: denied until then, scope `global`. Then, if
//!    `global_want` is 0 and `global_limit > 0`, the **spent token** is the lowest `gl` member
//!    (score, then name) whose `g` score is > now - `global_window`; `gl` members before it
//!    that are not are removed. With a spent token, the window check below is skipped. Else if
//!    `global_limit > 0`: drop `g` members with score <= now - 2 x `global_window`; of those with
//!    score > now - `global_window` (this reservation's window: processes pass slightly
//!    different margins), if there are `n >= global_limit`: denied until the score of the one at
//!    rank `n - global_limit` among them + `global_window`, scope `global`. The window's *room*
//!    is `global_limit - n` (`global_limit` without a `g` key).
//! 4. **route hold**: `hr` > now: denied until then, scope `route`.
//! 5. **bucket**: the hash is the `r` value if the key exists, else the reservation's `bucket`.
//!    * `""`: the route has no bucket; go to step 7.
//!    * a hash `h`: `hb` > now: denied until then, scope `bucket`. Then, if the `b` key exists:
//!      if now >= `reset_at`, set `margin` to the reservation's `margin` and roll; drop `bp`
//!      members with score <= now; if *available* is 0: denied until `reset_at`, scope
//!      `bucket`; otherwise the grant takes one (step 7). If the `b` key does not exist: the
//!      pioneer locks `lb` and `lr` (step 6), both, so that there is one pioneer per route and
//!      major also while one process knows the route's bucket and another does not.
//!    * no hash: the pioneer lock `lr` (step 6).
//! 6. **pioneer lock**: for each lock of step 5 (`lb` first): if it exists and its value is not
//!    this member, denied for min(`pioneer_poll`, that lock's remaining time), scope `pioneer`.
//!    Otherwise the grant takes (or refreshes) them.
//! 7. **commit**: with a spent token: remove it from `gl`, set its `g` score to now, expire
//!    `g` `global_window` later. Else if `counts_global` and `global_limit > 0`: `k` =
//!    min(max(`global_want`, 1), room) tokens: add `member ":" now` and, for the lease,
//!    `member "+" i ":" now` for i in 1..k-1 (all with score now) to `g`, expire the key
//!    `global_window` later, add the lease's members to `gl` (score now) and expire it
//!    `global_window` later; answer `leased = k - 1` (0 otherwise). If step 5 found bucket state,
//!    `remaining -= 1` (not below 0), add this member to `bp` with score now + `lease` (replacing its previous
//!    score), expire `bp` at its highest score, re-arm the `b` expiry; if step 6 applies, set the
//!    lock(s) to this member, expiring `lease` later.
//!
//! ## `record`
//!
//! In all updates, `hash` is the update's `bucket`, else the `r` value if it is not `""`. A
//! *live* `bp` entry of this member is one named `member` with a score > now; its grant time is
//! its score - `lease`.
//!
//! * [`SharedUpdate::Bucket`] (a response arrived):
//!   1. if the update names a `bucket`, set `r` to it; else if `unlimited`, set `r` to `""`
//!      (either way expiring `state_ttl` later);
//!   2. with `hash`: roll the bucket if due, **before** anything else: this request reached the
//!      server, maybe in the window that follows, so it still counts as carried. The roll is
//!      forced when the answer shows the window over at the server (a **later window**): the
//!      update has `remaining` and `reset_after`, the `b` key is neither `provisional` nor
//!      `untimed`, the member has a live entry in `bp` (its grant time: score - `lease`), and
//!      grant time + `reset_after` > `reset_at` + 2 ms. The request left after its grant, so its
//!      window ends at least `reset_after` after the grant; later than every end this window was
//!      told (each rounded to the millisecond), it arrived after all their requests: in a later
//!      window of a fixed window, with the oldest counted request expired in a sliding one. Its
//!      report is then the first of the new window, not a carried one (step 7);
//!   3. delete the `lr` lock (and with `hash` the `lb` lock) if its value is this member --
//!      except, for an update without `limit`, `remaining` and `reset_after`, an `lb` lock when
//!      the `b` key does not exist and the update has a `window`: that pioneer may have been
//!      counted, so the lock stays as a ghost, its value set to `member "~"` (no grant matches
//!      it) and its expiry brought forward to at most now + 2 x `window`;
//!   4. without `limit`, `remaining` and `reset_after` (a 5xx, say): if `hash` and the `b` key
//!      exist, the `b` key's `window` is first raised to the hash's window (the `bw` key), and
//!      the member's live entry becomes a **ghost**: removed, and added back as
//!      `member "~" grant time` with score grant time + `window` + `margin` if that is later
//!      than now, extending the key's expiry to it (the server may have counted the request, and a
//!      sliding window keeps counting it past the known reset). Without them the live entry
//!      stays as it is. Stop;
//!   5. otherwise remove the member's live entry, remembering its grant time; without `hash`,
//!      stop;
//!   6. if the `b` key does not exist, create it: `limit` = the update's limit, else remaining +
//!      1, else 1 (at least 1); `reported` = the update's remaining (absent without one;
//!      `untimed = 1` if it has one but no `reset_after`); `remaining` = the update's remaining (else `limit - 1`) minus `card(bp)`, at least 0;
//!      `window` = max(the update's `window`, `reset_after`, the `bw` key), or 1 s if
//!      all are absent; `reset_at` = now + `reset_after` (`provisional = 0`), or now + `window`
//!      (`provisional = 1`); `window_start = now`; `margin = 0`. Then step 8, and stop;
//!   7. otherwise take the update's `limit` (at least 1) and `window = max(window, update
//!      window, bw)`. The report is **stale** if the grant time from step 5 is < `window_start`
//!      (unless step 2 found a later window), or if now + `reset_after` <= `window_start`: it
//!      describes an earlier window and changes nothing more. Otherwise: with the update's
//!      remaining, `reported` = the smaller of it and `reported` (or it, if absent), and
//!      `untimed = 1` if the update has no `reset_after`; with `reset_after`: `window = max(window, reset_after)`, and `reset_at` =
//!      now + `reset_after` if `provisional` (then `provisional = 0`), else the larger of the two;
//!   8. re-arm the `b` key's expiry: `state_ttl` after `reset_at`; set the `bw` key to the
//!      larger of its value and the `b` key's `window`, expiring `state_ttl` later. A hash
//!      has one window for all its majors: a bucket first seen under one major through an
//!      answer late in its window (a first-contact 429) would otherwise keep a window far
//!      shorter than the one its other majors reported, and a ghost of it stop counting
//!      while the server still counts its request;
//!   9. if the grant time from step 5 is < `window_start` and step 2 found no later window (a
//!      grant carried into this window by the roll: it may have been counted in this window,
//!      after its lowest report or before any), add it back as a ghost, `member "~" grant
//!      time`, with score grant time plus `window` plus `margin` if that is later than now,
//!      extending the `bp` key's expiry to it (as in step 4).
//! * [`SharedUpdate::Release`] (a granted request will not be answered): if `reached` (it may
//!   have reached the server): roll the bucket if due, delete the locks held by this member
//!   (with the ghost-lock exception of step 3 above), and turn its live entry into a ghost (as
//!   in step 4). If not `reached` (it never left):
//!   delete the locks held by this member, remove its live entry, and give the grant back: remove
//!   this member's newest `g` member (`member ":" *`), and if the entry's grant time >=
//!   `window_start` and now < `reset_at`, `remaining = min(remaining + 1, limit)`.
//! * [`SharedUpdate::Hold`]: until = now + `retry_after`; set the key of its scope to the larger
//!   of its value and until, expiring then: `edge` → `edge`; `global` → `gp`; `route` → `hr`;
//!   `bucket` → `hb` (without `hash`: `hr`). Other scopes are ignored.
//! * [`SharedUpdate::Invalid`]: add a member to `inv` (score now, e.g. `now ":" client ":"
//!   id`) and expire the key `window` later.
//!
//! A key that expired is simply absent: every rule above then takes the conservative path (a
//! pioneer lock for a bucket without state), so expiry only ever costs throughput.
//!
//! # Example: two processes share a bucket through a store
//!
//! ```
//! use ratelane::shared::{MemoryStore, ReservationAnswer, SharedConfig};
//! use ratelane::{Config, Limiter, Output, Request, Response};
//!
//! let mut config = Config::default();
//! config.shared = Some(SharedConfig::default());
//! let mut store = MemoryStore::new(config.shared.as_ref().unwrap());
//! let mut a = Limiter::new(config.clone()).unwrap();
//! let mut b = Limiter::new(config).unwrap();
//! let msg = || Request::new("POST", "/channels/100000000000000001/messages");
//!
//! // Both processes want to send to the same channel; neither knows its bucket yet.
//! let ida = a.enqueue(0, msg()).unwrap();
//! let idb = b.enqueue(0, msg()).unwrap();
//! let Output::Reserve(ra) = a.poll_output() else { panic!() };
//! let Output::Reserve(rb) = b.poll_output() else { panic!() };
//! // The store lets one pioneer through and holds the other.
//! let granted = store.reserve(0, "process-a", &ra);
//! assert_eq!(granted, ReservationAnswer::Granted { processes: Some(1), leased: 0, store_time: Some(0) });
//! let denied = store.reserve(0, "process-b", &rb);
//! // Two processes have asked the store within the lease: each answer says so.
//! assert!(matches!(denied, ReservationAnswer::Denied { processes: Some(2), .. }));
//! a.handle_reservation(1, ida, granted).unwrap();
//! assert_eq!(a.poll_output(), Output::Send(ida));
//! b.handle_reservation(1, idb, denied).unwrap(); // b waits and asks again later
//! ```

mod store;
pub mod wire;

pub use store::MemoryStore;

/// A store a program calls in-process, one operation at a time: [`MemoryStore`], or an adapter
/// over a real store. The simulator ([`Simulation::with_store`](crate::sim::Simulation::with_store))
/// takes any, so the same multi-process scenarios run against the model and, in the Redis
/// crate's tests, against Redis. `now` is the store's clock (see the contract above). `Send +
/// Sync` so that a simulation stays both (the bindings wrap it in their classes).
pub trait SharedStore: std::fmt::Debug + Send + Sync {
    /// The contract's `reserve`.
    fn reserve(&mut self, now: Nanos, client: &str, reservation: &Reservation) -> ReservationAnswer;
    /// The contract's `record`.
    fn record(&mut self, now: Nanos, client: &str, update: &SharedUpdate);
    /// Forgets everything, as a store restarted without persistence does (the simulator's
    /// [`StoreLink::restart`](crate::sim::StoreLink::restart)).
    fn clear(&mut self);
}

impl SharedStore for MemoryStore {
    fn reserve(&mut self, now: Nanos, client: &str, reservation: &Reservation) -> ReservationAnswer {
        MemoryStore::reserve(self, now, client, reservation)
    }
    fn record(&mut self, now: Nanos, client: &str, update: &SharedUpdate) {
        MemoryStore::record(self, now, client, update)
    }
    fn clear(&mut self) {
        MemoryStore::clear(self)
    }
}

pub use crate::types::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};
use crate::types::{MILLISECOND, Nanos, SECOND};

/// What a limiter in shared mode does when the store cannot answer
/// ([`ReservationAnswer::Unavailable`]). Either way, when the store answers again it is told
/// what it may have missed, and the process keeps to its share until every process is back
/// (see [`crate::shared`], "Through an outage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum OnUnavailable {
    /// Send without a reservation, on this process's share of the limits: the global limit
    /// and each bucket's limit divided by the live processes the store counted in its last
    /// answer ([`ReservationAnswer::processes`]), at least 1 per window; against the global
    /// limit only from one global window after the outage began (the store's last grants have
    /// left it by then). N processes together then stay within the limits while the store is
    /// down (when no limit is below N and the count is current).
    #[default]
    FailOpen,
    /// Hold every request until the store answers again (deadlines and `max_wait` still apply).
    FailClosed,
}

impl OnUnavailable {
    /// The stable lowercase name (`fail_open`, `fail_closed`).
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnavailable::FailOpen => "fail_open",
            OnUnavailable::FailClosed => "fail_closed",
        }
    }
}

/// Settings of shared mode ([`Config::shared`](crate::Config::shared)). Every process sharing
/// one store should use the same values; the store reads `lease`, `pioneer_poll` and
/// `state_ttl` too ([`MemoryStore::new`]).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SharedConfig {
    /// What to do while the store cannot answer.
    pub on_unavailable: OnUnavailable,
    /// After an `Unavailable` answer, no reservation is made for this long; doubles with each
    /// failed probe. The answers to reservations that were already outstanding when the store
    /// was marked down are the same failure: they neither double nor extend the pause.
    #[cfg_attr(feature = "serde", serde(rename = "retry_base_ns"))]
    pub retry_base: Nanos,
    /// The longest such pause.
    #[cfg_attr(feature = "serde", serde(rename = "retry_max_ns"))]
    pub retry_max: Nanos,
    /// How long the store keeps a pioneer lock and counts a grant that was never answered
    /// (a process that crashed mid-request stops holding anything after this).
    #[cfg_attr(feature = "serde", serde(rename = "lease_ns"))]
    pub lease: Nanos,
    /// How long a request waits before asking again when another process's pioneer is
    /// learning its bucket.
    #[cfg_attr(feature = "serde", serde(rename = "pioneer_poll_ns"))]
    pub pioneer_poll: Nanos,
    /// How long the store keeps idle state (route mappings, bucket windows after their reset).
    #[cfg_attr(feature = "serde", serde(rename = "state_ttl_ns"))]
    pub state_ttl: Nanos,
    /// Lease the global budget: when this process has no global token, one reservation asks
    /// the store for as many as its ready requests need (at most its share of the limit: the
    /// limit divided by the live processes), and the process spends them on its next
    /// reservations, which skip the store's window check; its other requests wait for that
    /// answer instead of each asking (see [`crate::shared`], "Leases"). `false`: every
    /// reservation asks the window for its own token.
    #[cfg_attr(feature = "serde", serde(default = "yes"))]
    pub global_lease: bool,
}

#[cfg(feature = "serde")]
fn yes() -> bool {
    true
}

impl Default for SharedConfig {
    fn default() -> Self {
        SharedConfig {
            on_unavailable: OnUnavailable::FailOpen,
            retry_base: 100 * MILLISECOND,
            retry_max: 5 * SECOND,
            lease: 30 * SECOND,
            pioneer_poll: 50 * MILLISECOND,
            state_ttl: 600 * SECOND,
            global_lease: true,
        }
    }
}

impl SharedConfig {
    /// The defaults with `on_unavailable` set.
    pub fn with_policy(on_unavailable: OnUnavailable) -> Self {
        SharedConfig { on_unavailable, ..SharedConfig::default() }
    }

    /// Checks every value; [`Config::validate`](crate::Config::validate) calls this.
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if self.retry_base == 0 || self.retry_max < self.retry_base {
            return Err("shared.retry_base must be > 0 and shared.retry_max >= shared.retry_base");
        }
        if self.lease == 0 {
            return Err("shared.lease must be > 0");
        }
        if self.pioneer_poll == 0 || self.pioneer_poll > self.lease {
            return Err("shared.pioneer_poll must be in 1..=shared.lease");
        }
        if self.state_ttl == 0 {
            return Err("shared.state_ttl must be > 0");
        }
        Ok(())
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;
    use serde_json::json;

    /// The serde forms are the ones the vector files use (tests/vectors/README.md), so a
    /// binding can pass them through.
    #[test]
    fn serde_forms_match_the_vector_files() {
        let r = Reservation {
            id: 7,
            identity: "bot".into(),
            route: "GET /guilds/:id".into(),
            major: "1".into(),
            bucket: None,
            counts_global: true,
            global_limit: 50,
            global_want: 3,
            global_window: 1_125_000_000,
            margin: 125_000_000,
            invalid_limit: 9000,
            invalid_window: 600_000_000_000,
            ..Reservation::default()
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"id": 7, "identity": "bot", "route": "GET /guilds/:id", "major": "1", "bucket": null,
                   "counts_global": true, "global_limit": 50, "global_want": 3, "global_window_ns": 1_125_000_000u64,
                   "margin_ns": 125_000_000, "invalid_limit": 9000, "invalid_window_ns": 600_000_000_000u64})
        );
        // After an outage: the count of processes back, and what the store may not count.
        let report = Reservation {
            processes_since: Some(2_000_000_000),
            reporting: true,
            unrecorded: vec![5, 900_000_000],
            granted: vec![1_000_000_000],
            ..r.clone()
        };
        let mut form = serde_json::to_value(&r).unwrap();
        for (k, v) in [
            ("processes_since_ns", json!(2_000_000_000u64)),
            ("reporting", json!(true)),
            ("unrecorded_ns", json!([5, 900_000_000])),
            ("granted_ns", json!([1_000_000_000])),
        ] {
            form[k] = v;
        }
        assert_eq!(serde_json::to_value(&report).unwrap(), form);
        assert_eq!(serde_json::from_value::<Reservation>(form).unwrap(), report);
        let denied = ReservationAnswer::Denied { retry_after: 5, scope: SharedScope::Pioneer, processes: None };
        assert_eq!(
            serde_json::to_value(denied).unwrap(),
            json!({"answer": "denied", "retry_after_ns": 5, "scope": "pioneer"})
        );
        let denied = ReservationAnswer::Denied { retry_after: 5, scope: SharedScope::Pioneer, processes: Some(3) };
        assert_eq!(
            serde_json::to_value(denied).unwrap(),
            json!({"answer": "denied", "retry_after_ns": 5, "scope": "pioneer", "processes": 3})
        );
        assert_eq!(serde_json::to_value(ReservationAnswer::GRANTED).unwrap(), json!({"answer": "granted"}));
        let granted = ReservationAnswer::Granted { processes: Some(2), leased: 0, store_time: None };
        assert_eq!(serde_json::to_value(granted).unwrap(), json!({"answer": "granted", "processes": 2}));
        let granted = ReservationAnswer::Granted { processes: Some(2), leased: 4, store_time: None };
        assert_eq!(serde_json::to_value(granted).unwrap(), json!({"answer": "granted", "processes": 2, "leased": 4}));
        let granted = ReservationAnswer::Granted { processes: Some(2), leased: 4, store_time: Some(7_000) };
        let form = json!({"answer": "granted", "processes": 2, "leased": 4, "store_time_ns": 7_000});
        assert_eq!(serde_json::to_value(granted).unwrap(), form);
        assert_eq!(serde_json::from_value::<ReservationAnswer>(form).unwrap(), granted);
        let mut old = serde_json::to_value(&r).unwrap();
        old.as_object_mut().unwrap().remove("global_want");
        assert_eq!(serde_json::from_value::<Reservation>(old).unwrap().global_want, 1, "absent: one token");
        let back: ReservationAnswer = serde_json::from_value(json!({"answer": "granted"})).unwrap();
        assert_eq!(back, ReservationAnswer::GRANTED);
        let hold = SharedUpdate::Hold {
            scope: SharedScope::Route,
            identity: "bot".into(),
            route: "PATCH /channels/:id".into(),
            major: "9".into(),
            bucket: Some("rename".into()),
            retry_after: 3,
        };
        assert_eq!(
            serde_json::to_value(&hold).unwrap(),
            json!({"share": "hold", "scope": "route", "identity": "bot", "route": "PATCH /channels/:id",
                   "major": "9", "bucket": "rename", "retry_after_ns": 3})
        );
        let back: SharedUpdate = serde_json::from_value(serde_json::to_value(&hold).unwrap()).unwrap();
        assert_eq!(back, hold);
        assert_eq!(
            serde_json::to_value(SharedUpdate::Invalid { id: 1, window: 2 }).unwrap(),
            json!({"share": "invalid", "id": 1, "window_ns": 2})
        );
        assert_eq!(serde_json::to_value(OnUnavailable::FailClosed).unwrap(), json!("fail_closed"));
    }
}
