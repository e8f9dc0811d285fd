// What a snapshot fuzzer checks, shared by the proptest fuzzer (core/tests/fuzz_snapshot.rs, in
// the test command) and the cargo-fuzz target (core/fuzz/fuzz_targets/snapshot.rs, longer
// runs): a document made from a valid snapshot by mutating its bytes or its JSON leaves.
//
// Every document is refused with a snapshot code (or `limiter_busy` / `limiter_closed`, never
// here), or restores; a restored limiter keeps the engine's promises: no panic, every wait it
// asks for and every prediction within the one bound on waits from outside
// (`Config::bound_wait`, plus the invalid-request window it may have to wait out and one global
// window), a request enqueued after the restore is sent within that bound and answered, and
// the restored limiter's own snapshot reads back.
#[allow(dead_code)]
pub mod snapshot_check {
    use ratelane::snapshot::Snapshot;
    use ratelane::{Config, Limiter, MILLISECOND, Nanos, Output, Request, Response, SECOND};
    use serde_json::{Value, json};

    /// The wall clock of the base snapshot.
    pub const WALL: u64 = 1_700_000_000_000;

    /// A snapshot with every field populated.
    pub fn base() -> Value {
        json!({
            "format": "ratelane.snapshot",
            "version": 1,
            "taken_at_ms": WALL,
            "profile": "discord",
            "routes": [
                {"route": "POST /channels/:id/messages", "bucket": "msgs"},
                {"route": "DELETE /channels/:id/messages/:id", "bucket": "msgs"},
                {"route": "POST /webhooks/:id/:token", "bucket": "wh"}
            ],
            "windows": [{"bucket": "msgs", "window_ns": 5_000_000_000u64}, {"bucket": "wh", "window_ns": 2_000_000_000u64}],
            "global_pauses": [{"identity": "", "until_ms": WALL + 30_000}, {"identity": "bot2", "until_ms": WALL + 5_000}],
            "host_pause": {"until_ms": WALL + 60_000, "strikes": 2},
            "invalid_requests_ms": [WALL - 500_000, WALL - 1_000, WALL]
        })
    }

    /// Values at every edge a leaf may be replaced with.
    pub fn edge_value(i: usize) -> Value {
        let long = "x".repeat(9_000);
        let values = [
            json!(0),
            json!(1),
            json!(-1),
            json!(u32::MAX),
            json!(u64::from(u32::MAX) + 1),
            json!(9_007_199_254_740_991u64),
            json!(9_007_199_254_740_992u64),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e300),
            json!(-0.0),
            json!(1.5),
            json!(WALL + 315_360_000_000),
            json!(WALL - 1),
            json!(""),
            json!(long),
            json!("GET /channels/:id"),
            json!("nonsense"),
            json!("discord"),
            json!("github"),
            json!("\u{0000}\u{ffff}"),
            json!(true),
            json!(null),
            json!([]),
            json!({}),
            json!([[[[[[[[1]]]]]]]]),
            json!({"until_ms": u64::MAX, "strikes": u32::MAX}),
            json!({"bucket": "b", "window_ns": u64::MAX}),
            json!({"identity": "", "until_ms": u64::MAX}),
        ];
        values[i % values.len()].clone()
    }

    /// How many edge values there are.
    pub const EDGE_VALUES: usize = 30;

    /// Every leaf's (and every container's) JSON pointer, in document order.
    pub fn pointers(value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), value)];
        while let Some((at, v)) = stack.pop() {
            match v {
                Value::Object(map) => {
                    for (k, child) in map {
                        stack.push((format!("{at}/{k}"), child));
                    }
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate() {
                        stack.push((format!("{at}/{i}"), child));
                    }
                }
                _ => {}
            }
            if !at.is_empty() {
                out.push(at);
            }
        }
        out.sort();
        out
    }

    /// One edit of a document.
    #[derive(Debug, Clone)]
    pub enum Edit {
        /// Replace the value at the `pick`th pointer with edge value `value`.
        Leaf { pick: usize, value: usize },
        /// Remove the `pick`th top-level key.
        Remove { pick: usize },
        /// Add an unknown key.
        Add,
        /// Set byte `at` of the text to `byte`.
        Byte { at: usize, byte: u8 },
        /// Cut the text at `at`.
        Cut { at: usize },
        /// Insert `byte` at `at`.
        Insert { at: usize, byte: u8 },
    }

    /// `base()` with `edits` applied in order (JSON edits on the value, byte edits on its text).
    pub fn mutate(edits: &[Edit]) -> Vec<u8> {
        let mut value = base();
        let mut text: Option<Vec<u8>> = None;
        for edit in edits {
            match (edit, &mut text) {
                (Edit::Leaf { pick, value: v }, None) => {
                    let ptrs = pointers(&value);
                    if ptrs.is_empty() {
                        continue; // every key was removed
                    }
                    let ptr = &ptrs[pick % ptrs.len()];
                    if let Some(slot) = value.pointer_mut(ptr) {
                        *slot = edge_value(*v);
                    }
                }
                (Edit::Remove { pick }, None) => {
                    if let Value::Object(map) = &mut value {
                        let keys: Vec<String> = map.keys().cloned().collect();
                        if !keys.is_empty() {
                            map.remove(&keys[pick % keys.len()]);
                        }
                    }
                }
                (Edit::Add, None) => {
                    value["something_new"] = json!(1);
                }
                (Edit::Byte { .. } | Edit::Cut { .. } | Edit::Insert { .. }, t) => {
                    let bytes = t.get_or_insert_with(|| value.to_string().into_bytes());
                    if bytes.is_empty() {
                        continue;
                    }
                    match edit {
                        Edit::Byte { at, byte } => {
                            let at = at % bytes.len();
                            bytes[at] = *byte;
                        }
                        Edit::Cut { at } => bytes.truncate(at % bytes.len()),
                        Edit::Insert { at, byte } => {
                            let at = at % (bytes.len() + 1);
                            bytes.insert(at, *byte);
                        }
                        _ => unreachable!(),
                    }
                }
                // A JSON edit after the text was cut into: applies to nothing.
                (_, Some(_)) => {}
            }
        }
        text.unwrap_or_else(|| value.to_string().into_bytes())
    }

    const SNAPSHOT_CODES: [&str; 3] = ["snapshot_foreign", "snapshot_version", "snapshot_malformed"];

    /// Reads `bytes` as a snapshot and restores it into a fresh limiter at `now` (monotonic)
    /// and `wall` (ms), then checks the promises above. Returns whether it restored.
    pub fn check(bytes: &[u8], now: Nanos, wall: u64) -> bool {
        let text = String::from_utf8_lossy(bytes);
        let snapshot = match Snapshot::from_json(&text) {
            Ok(s) => s,
            Err(e) => {
                assert!(SNAPSHOT_CODES.contains(&e.code()), "{e:?} for {text:.200}");
                return false;
            }
        };
        let config = Config::default();
        let bound = config.bound_wait(Nanos::MAX).max(config.invalid_request_window) + config.global_window + SECOND;
        let mut l = Limiter::new(config).unwrap();
        match l.restore(now, wall, &snapshot) {
            Ok(()) => {}
            Err(e) => {
                assert!(SNAPSHOT_CODES.contains(&e.code()), "restore: {e:?}");
                return false;
            }
        }
        let latest = now.saturating_add(bound);
        let wake = drain(&mut l, latest);
        assert!(wake.is_none_or(|t| t <= latest), "a restored wait of {:?} ns", wake.map(|t| t - now));
        let r = || Request::new("POST", "/channels/100000000000000001/messages");
        let predicted = l.predict(now, &r()).unwrap().send_at;
        assert!(predicted <= latest, "predict answers {} ns after the restore", predicted - now);
        let id = l.enqueue(now, r()).unwrap();
        let mut t = now;
        let mut sent = false;
        for _ in 0..1_000 {
            match drain_sent(&mut l, id, latest) {
                (true, _) => {
                    sent = true;
                    break;
                }
                (false, Some(w)) => {
                    t = t.max(w);
                    l.handle_timeout(t);
                }
                (false, None) => panic!("the request waits for nothing"),
            }
        }
        assert!(sent, "the request was never sent");
        assert!(t <= latest, "the request went {} ns after the restore", t - now);
        let answer = l.handle_response(t + MILLISECOND, id, &Response::new(200, &[])).unwrap();
        assert_eq!(answer, ratelane::Disposition::Complete);
        // What the restored limiter knows reads back.
        let again = l.snapshot(t + MILLISECOND, wall.saturating_add(1)).to_json();
        Snapshot::from_json(&again).unwrap_or_else(|e| panic!("its own snapshot does not read back: {e}: {again:.300}"));
        true
    }

    /// Drains; every wake-up within `latest`. Returns the last wake-up.
    fn drain(l: &mut Limiter, latest: Nanos) -> Option<Nanos> {
        for _ in 0..100_000 {
            match l.poll_output() {
                Output::WaitUntil(t) => {
                    assert!(t <= latest, "WaitUntil({t}) past {latest}");
                    return Some(t);
                }
                Output::Idle => return None,
                Output::Observe(_) => {}
                other => panic!("{other:?} with no request"),
            }
        }
        panic!("outputs never drained")
    }

    /// Drains, noting whether `id` was sent; returns the wake-up (within `latest`).
    fn drain_sent(l: &mut Limiter, id: u64, latest: Nanos) -> (bool, Option<Nanos>) {
        let mut sent = false;
        for _ in 0..100_000 {
            match l.poll_output() {
                Output::Send(s) => {
                    assert_eq!(s, id);
                    sent = true;
                }
                Output::Fail(f, reason) => panic!("request {f} failed: {reason}"),
                Output::WaitUntil(t) => {
                    assert!(sent || t <= latest, "WaitUntil({t}) past {latest}");
                    return (sent, Some(t));
                }
                Output::Idle => return (sent, None),
                Output::Observe(_) => {}
                other => panic!("{other:?}"),
            }
        }
        panic!("outputs never drained")
    }
}
