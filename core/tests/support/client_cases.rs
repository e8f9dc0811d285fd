// The client-engine scenarios behind tests/vectors/client_*.json (included by client_vectors.rs).
{
    let ch1 = "/channels/100000000000000001/messages";
    let ch2 = "/channels/100000000000000002/messages";
    let ch3 = "/channels/100000000000000003/messages";
    let h = |limit: u32, remaining: u32, reset_after: &str, bucket: &str| discord(limit, remaining, reset_after, bucket);
    let mut v = Vec::new();

    // 1. The pioneer rule and pipelining up to `remaining`.
    let a = h(5, 4, "5", "abcd");
    v.push(Case {
        file: "pioneer_pipeline",
        comment: "Unknown bucket: one pioneer goes, the rest wait for its headers; then the engine pipelines up to \
                  `remaining` (4), and the 6th request waits for the reset at 5 s after the pioneer's answer.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&a))
            .respond(200 * MS, 2, 200, &refs(&h(5, 3, "4.9", "abcd")))
            .respond(210 * MS, 3, 200, &refs(&h(5, 2, "4.89", "abcd")))
            .respond(220 * MS, 4, 200, &refs(&h(5, 1, "4.88", "abcd")))
            .respond(230 * MS, 5, 200, &refs(&h(5, 0, "4.87", "abcd")))
            .timeout(5_100 * MS - 1)
            .timeout(5_100 * MS)
            .respond(5_200 * MS, 6, 200, &refs(&h(5, 4, "5", "abcd"))),
    });

    // 2. Major parameters: different channels never wait on each other's pioneer.
    v.push(Case {
        file: "major_parameters",
        comment: "Requests to different channels are separate buckets: each gets its own pioneer at once; \
                  a second request to channel 1 waits for channel 1's pioneer only.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch2).enqueue(0, "POST", ch1).enqueue(0, "POST", ch3)
            .respond(50 * MS, 2, 200, &refs(&h(5, 4, "5", "abcd")))
            .respond(60 * MS, 1, 200, &refs(&h(5, 4, "5", "abcd"))),
    });

    // 3. A request that takes the bucket's last slot goes at once; only the next one waits.
    v.push(Case {
        file: "last_slot",
        comment: "With remaining 1 the next request is sent at once (it takes the last slot); the one after \
                  waits for the reset.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(2, 1, "2", "b1")))
            .enqueue(150 * MS, "POST", ch1)
            .enqueue(160 * MS, "POST", ch1)
            .respond(250 * MS, 2, 200, &refs(&h(2, 0, "1.85", "b1")))
            .timeout(2_100 * MS),
    });

    // 4. Two routes that share a bucket hash merge into one queue.
    let edit = "/channels/100000000000000001/messages/200000000000000001";
    v.push(Case {
        file: "shared_hash_routes",
        comment: "POST and PATCH on channel messages turn out to share bucket 'shared': once both are learned \
                  their requests queue together and never send more than the bucket allows.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "PATCH", edit)
            .respond(100 * MS, 1, 200, &refs(&h(3, 1, "3", "shared")))
            .respond(110 * MS, 2, 200, &refs(&h(3, 0, "2.99", "shared")))
            .enqueue(120 * MS, "POST", ch1).enqueue(120 * MS, "PATCH", edit)
            .timeout(3_200 * MS),
    });

    // 5. Global limit per identity, with exempt interaction routes.
    let mut c = discord_config();
    c.global_limit = 3;
    v.push(Case {
        file: "global_limit",
        comment: "global_limit 3 per second: five requests to five channels send three, the fourth and fifth \
                  wait for an answer (no transport reports when the three left), then for a window after the \
                  first answers (which bound when their requests arrived); an interaction callback is exempt \
                  and goes at once.",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000002/messages")
            .enqueue(0, "POST", "/channels/100000000000000003/messages")
            .enqueue(0, "POST", "/channels/100000000000000004/messages")
            .enqueue(0, "POST", "/channels/100000000000000005/messages")
            .enqueue(10 * MS, "POST", "/interactions/300000000000000001/aW50ZXJhY3Rpb24tdG9rZW4/callback")
            .respond(80 * MS, 1, 200, &[])
            .respond(90 * MS, 2, 200, &[])
            .respond(95 * MS, 3, 200, &[])
            .timeout(1_125 * MS)
            .timeout(1_200 * MS),
    });

    // 5b. The global window counts from when a request left, as the transport reports it.
    let mut c = discord_config();
    c.global_limit = 2;
    v.push(Case {
        file: "global_written_late",
        comment: "global_limit 2 per second; the transport reports (handle_written) that the first two requests \
                  left 150 ms and 60 ms after their Send (a busy runtime, connections being opened): the third \
                  waits until the earlier reported write leaves the window plus the margin (60 ms + 1 s + \
                  125 ms), not until the Send does (1.125 s); a second report, a report for an answered request and one \
                  for an unknown id change nothing (the last is an error).",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000002/messages")
            .enqueue(0, "POST", "/channels/100000000000000003/messages")
            .written(60 * MS, 2)
            .written(150 * MS, 1)
            .written(170 * MS, 1)
            .respond(180 * MS, 1, 200, &[])
            .respond(190 * MS, 2, 200, &[])
            .written(200 * MS, 2)
            .written(200 * MS, 9)
            .timeout(1_125 * MS)
            .timeout(1_185 * MS),
    });

    // 6. Priorities share the scarce global budget.
    let mut c = discord_config();
    c.global_limit = 1;
    v.push(Case {
        file: "priority",
        comment: "global_limit 1: while the budget is scarce the highest priority among eligible requests goes \
                  first (3, then 2, then 1), whatever the enqueue order; equal priorities keep FIFO.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .enqueue_with(1 * MS, json!({"method": "GET", "path": "/guilds/100000000000000002", "priority": 1}))
            .enqueue_with(2 * MS, json!({"method": "GET", "path": "/guilds/100000000000000003", "priority": 5}))
            .enqueue_with(3 * MS, json!({"method": "GET", "path": "/guilds/100000000000000004", "priority": 1}))
            .respond(50 * MS, 1, 200, &[])
            .timeout(1_125 * MS)
            .respond(1_200 * MS, 3, 200, &[])
            .timeout(2_250 * MS)
            .timeout(3_375 * MS),
    });

    // 6c. A window opened by a request whose answer reports nothing.
    v.push(Case {
        file: "provisional_window_after_a_silent_answer",
        comment: "Bucket 1 per 1 s, learned from request 1 (answered 20 ms after its send: the window is estimated \
                  at 1.02 s from a send). Request 2 opens the next window at 1.02 s; its answer is a 500 without \
                  headers, 60 ms after its send, so the window's end stays an estimate, and 2 may have reached the \
                  server as late as 1.08 s and opened the server's window then: request 3 waits until a window \
                  after that answer (2.08 s), not a window length after the send (2.04 s). (Found by a random \
                  property run: the request after such a 500 met a 429.)",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .respond(20 * MS, 1, 200, &refs(&h(1, 0, "1", "one")))
            .timeout(1_020 * MS)
            .respond(1_080 * MS, 2, 500, &[])
            .timeout(2_040 * MS)
            .timeout(2_080 * MS),
    });

    // 7. The three 429s of Discord's documentation.
    let user_429 = [
        ("Retry-After", "65"), ("X-RateLimit-Limit", "10"), ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "1470173023.123"), ("X-RateLimit-Reset-After", "64.57"),
        ("X-RateLimit-Bucket", "abcd1234"), ("X-RateLimit-Scope", "user"),
    ];
    let shared_429 = [
        ("Retry-After", "1337"), ("X-RateLimit-Limit", "10"), ("X-RateLimit-Remaining", "9"),
        ("X-RateLimit-Reset", "1470173023.123"), ("X-RateLimit-Reset-After", "64.57"),
        ("X-RateLimit-Bucket", "abcd1234"), ("X-RateLimit-Scope", "shared"),
    ];
    let global_429 = [("Retry-After", "65"), ("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")];
    v.push(Case {
        file: "discord_429_user",
        comment: "Discord's documented user-scope 429: the bucket is held for retry_after (body 64.57 s beats the \
                  header's ceiling only when larger; here the header's 65 s wins), the request is re-sent after it, \
                  and the 429 counts as an invalid request.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .respond_body(100 * MS, 1, 429, &user_429, json!({"retry_after": 64.57, "global": false}))
            .timeout(65_100 * MS),
    });
    v.push(Case {
        file: "discord_429_shared",
        comment: "Discord's documented shared-scope 429 (remaining 9, Retry-After 1337 s far beyond Reset-After): \
                  the resource is held for 1337 s, the bucket is not zeroed, and it does not count as invalid.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond_body(100 * MS, 1, 429, &shared_429, json!({"retry_after": 1336.57, "global": false}))
            .enqueue(200 * MS, "POST", ch2)
            .predict(300 * MS, "POST", ch1)
            .timeout(1_337_100 * MS),
    });
    v.push(Case {
        file: "discord_429_global",
        comment: "Discord's documented global 429: every non-exempt request of the token is paused for 65 s \
                  (no bucket state is touched); an exempt interaction callback still goes.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond_body(100 * MS, 1, 429, &global_429, json!({"retry_after": 64.57, "global": true}))
            .enqueue(200 * MS, "POST", ch2)
            .enqueue(300 * MS, "POST", "/interactions/300000000000000001/aW50ZXJhY3Rpb24tdG9rZW4/callback")
            .timeout(65_100 * MS),
    });

    // 8. Sub-limit: a 429 while remaining > 0 holds only that route + major parameter.
    let topic = "/channels/100000000000000001";
    v.push(Case {
        file: "sub_limit",
        comment: "A 429 without scope while the bucket still shows remaining 1 is a hidden sub-limit (channel \
                  rename): only PATCH on that channel is held for retry_after; a message to the same channel and a \
                  rename of another channel go on.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "PATCH", topic)
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "600", "rename")))
            .enqueue(200 * MS, "PATCH", topic)
            .respond(300 * MS, 2, 429, &[
                ("Retry-After", "300"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "3"),
                ("X-RateLimit-Reset-After", "599.8"), ("X-RateLimit-Bucket", "rename"),
            ])
            .enqueue(400 * MS, "PATCH", "/channels/100000000000000002")
            .enqueue(400 * MS, "POST", ch1)
            .timeout(300_300 * MS),
    });

    // 8b. A sub-limit class: only that kind of request on the route is held.
    let edit = |keys: &[&str]| json!({"method": "PATCH", "path": topic, "body_keys": keys});
    v.push(Case {
        file: "sub_limit_class",
        comment: "Requests carry a sub-limit class: the Discord profile derives `channel_name_topic` from a channel \
                  edit whose JSON body has `name` or `topic` (`body_keys`), or the caller sets `sub_limit`. The \
                  second rename's sub-limit 429 (remaining 3) holds only that class on the channel for retry_after: \
                  an edit of `nsfw` goes at once, a rename (by body or by explicit class) waits, and predict() says so.",
        config: discord_config(),
        script: Script::new()
            .enqueue_with(0, edit(&["name"]))
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "5", "edit")))
            .enqueue_with(200 * MS, edit(&["topic", "nsfw"]))
            .respond(300 * MS, 2, 429, &[
                ("Retry-After", "300"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "3"),
                ("X-RateLimit-Reset-After", "4.7"), ("X-RateLimit-Bucket", "edit"),
            ])
            .enqueue_with(400 * MS, edit(&["nsfw"]))
            .enqueue_with(400 * MS, json!({"method": "PATCH", "path": topic, "sub_limit": "channel_name_topic"}))
            .enqueue_with(400 * MS, edit(&["name"]))
            .predict_with(400 * MS, edit(&["topic"]))
            .predict_with(400 * MS, edit(&["position"]))
            .respond(500 * MS, 3, 200, &refs(&h(5, 2, "4.5", "edit")))
            .timeout(300_300 * MS),
    });

    // 9. Out-of-order responses never raise `remaining`.
    v.push(Case {
        file: "out_of_order",
        comment: "Pipelined responses arrive in reverse order (remaining 0 before remaining 2): the engine keeps the \
                  most conservative remaining and sends nothing more before the reset.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(4, 3, "4", "oo")))
            .enqueue(110 * MS, "POST", ch1).enqueue(110 * MS, "POST", ch1).enqueue(110 * MS, "POST", ch1)
            .enqueue(120 * MS, "POST", ch1)
            .respond(200 * MS, 4, 200, &refs(&h(4, 0, "3.8", "oo")))
            .respond(210 * MS, 3, 200, &refs(&h(4, 1, "3.81", "oo")))
            .respond(220 * MS, 2, 200, &refs(&h(4, 2, "3.82", "oo")))
            .timeout(4_100 * MS),
    });

    // 10. Invalid-request budget, enforced.
    let mut c = discord_config();
    c.invalid_request_limit = 10;
    c.invalid_request_stop_at = 3;
    c.invalid_request_warn_at = 2;
    c.invalid_request_window = 60 * S;
    v.push(Case {
        file: "invalid_request_budget",
        comment: "Budget of 10 invalid requests per 60 s, stopping at 3 (in flight counts as possibly invalid): \
                  after two 403s a warning is emitted; with a third 403 sending stops until the first ages out.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .respond(10 * MS, 1, 403, &[])
            .enqueue(20 * MS, "GET", "/guilds/100000000000000002")
            .respond(30 * MS, 2, 403, &[])
            .enqueue(40 * MS, "GET", "/guilds/100000000000000003")
            .respond(50 * MS, 3, 403, &[])
            .enqueue(60 * MS, "GET", "/guilds/100000000000000004")
            .timeout(60_010 * MS),
    });

    // 11. Deadlines and max_wait fail fast with the prediction.
    v.push(Case {
        file: "deadline",
        comment: "A request whose predicted send time (the bucket reset at ~5.1 s) is after its deadline (2 s) fails \
                  at once with the prediction; one with a later deadline waits; one whose deadline passes while a \
                  pioneer is out is still queued at its deadline (it could be sent at that instant) and fails 1 ns \
                  later; a request whose deadline is now goes at once.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(1, 0, "5", "d")))
            .enqueue_with(200 * MS, json!({"method": "POST", "path": ch1, "deadline_ns": 2 * S}))
            .enqueue_with(200 * MS, json!({"method": "POST", "path": ch1, "deadline_ns": 10 * S}))
            .enqueue(300 * MS, "POST", ch2)
            .enqueue_with(300 * MS, json!({"method": "POST", "path": ch2, "deadline_ns": 1 * S}))
            .timeout(1 * S)
            .timeout(1 * S + 1)
            .enqueue_with(1 * S + 1, json!({"method": "POST", "path": ch3, "deadline_ns": 1 * S + 1})),
    });
    let mut c = discord_config();
    c.max_wait = Some(3 * S);
    v.push(Case {
        file: "max_wait",
        comment: "max_wait 3 s: with the bucket exhausted for 5 s a new request fails at once with \
                  max_wait_exceeded and the predicted wait; after a later 429 extends the wait, queued requests whose \
                  wait now exceeds max_wait fail immediately.",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(1, 0, "5", "m")))
            .enqueue(200 * MS, "POST", ch1)
            .enqueue(300 * MS, "POST", ch2)
            .enqueue(300 * MS, "POST", ch2)
            .respond_body(400 * MS, 3, 429, &[("Retry-After", "10"), ("X-RateLimit-Limit", "1"),
                ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "10"), ("X-RateLimit-Bucket", "m2"),
                ("X-RateLimit-Scope", "user")], json!({"retry_after": 10.0})),
    });

    // 12. 5xx and transport failures.
    v.push(Case {
        file: "server_errors",
        comment: "A 500 on an idempotent GET is retried with exponential backoff and jitter (seeded), then delivered \
                  once retries are used up; a 500 on a POST is delivered at once (it reached the server).",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .enqueue(0, "POST", ch1)
            .respond(50 * MS, 1, 500, &[])
            .respond(60 * MS, 2, 500, &[])
            .timeout(1 * S)
            .respond(1_050 * MS, 1, 502, &[])
            .timeout(3 * S)
            .respond(3_050 * MS, 1, 503, &[])
            .timeout(8 * S)
            .respond(8_050 * MS, 1, 500, &[]),
    });
    v.push(Case {
        file: "network_failures",
        comment: "A POST that may have reached the server is not re-sent (maybe_sent); a GET is; a request that \
                  certainly was not sent gives back its global token and slot and is retried, until \
                  max_error_retries is used up. The GET ends in maybe_sent, not network_error: its first \
                  attempt may have reached the server (network_error_never_reached shows network_error).",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .fail(30 * MS, 1, "maybe_sent")
            .fail(30 * MS, 2, "maybe_sent")
            .timeout(1 * S)
            .fail(1_010 * MS, 2, "not_sent")
            .timeout(3 * S)
            .fail(3_010 * MS, 2, "not_sent")
            .timeout(8 * S)
            .fail(8_010 * MS, 2, "not_sent"),
    });
    v.push(Case {
        file: "absolute_url",
        comment: "A request may name its whole URL (scheme and host are dropped): it shares the route, major \
                  parameter and bucket of the same path, so it waits behind that path's pioneer.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", "https://discord.com/api/v10/channels/100000000000000001/messages")
            .enqueue(0, "POST", ch1)
            .respond(50 * MS, 1, 200, &refs(&h(5, 4, "5", "abcd"))),
    });
    v.push(Case {
        file: "network_error_never_reached",
        comment: "A GET whose every attempt certainly failed before reaching the server is retried until \
                  max_error_retries (3) is used up and ends in network_error, with the number of attempts.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .fail(30 * MS, 1, "not_sent")
            .timeout(1 * S)
            .fail(1_010 * MS, 1, "not_sent")
            .timeout(3 * S)
            .fail(3_010 * MS, 1, "not_sent")
            .timeout(8 * S)
            .fail(8_010 * MS, 1, "not_sent"),
    });
    let explicit_post = json!({"method": "POST", "path": ch2, "idempotent": true});
    v.push(Case {
        file: "idempotent_override",
        comment: "A POST the caller declares idempotent (it carries its own nonce) is re-sent after maybe_sent.",
        config: discord_config(),
        script: Script::new()
            .enqueue_with(0, explicit_post)
            .fail(30 * MS, 1, "maybe_sent")
            .timeout(1 * S),
    });

    // 13. Cancellation and close.
    v.push(Case {
        file: "cancel",
        comment: "Cancelling a queued request removes it (the next one moves up); cancelling the in-flight pioneer \
                  frees the pioneer slot so the next request probes the bucket.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .cancel(10 * MS, 2)
            .cancel(20 * MS, 1)
            .cancel(30 * MS, 2)
            .respond(100 * MS, 3, 200, &refs(&h(5, 4, "5", "c"))),
    });
    v.push(Case {
        file: "close",
        comment: "close() fails every queued request with `closed` in enqueue order; the in-flight one still takes its \
                  response; enqueue afterwards is an error with code limiter_closed.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .close(10 * MS)
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "5", "c")))
            .enqueue(200 * MS, "POST", ch1),
    });

    // 14. Cloudflare-style 429 without rate-limit headers.
    v.push(Case {
        file: "edge_ban",
        comment: "A 429 with no rate-limit headers (a Cloudflare HTML page) holds every request to the host for the \
                  edge backoff (60 s, doubling on repeats), counts as invalid, and is re-sent afterwards.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .respond(100 * MS, 1, 429, &[("Content-Type", "text/html")])
            .enqueue(200 * MS, "GET", "/guilds/100000000000000002")
            .timeout(60_100 * MS)
            .respond(60_200 * MS, 1, 429, &[("Content-Type", "text/html")])
            .respond(60_210 * MS, 2, 200, &[])
            .timeout(180_200 * MS),
    });

    // 15. A pioneer that gets a 5xx with no headers does not stall its queue.
    v.push(Case {
        file: "pioneer_5xx",
        comment: "The pioneer POST gets a 502 with no headers: it is delivered (not re-sent) and the next request \
                  becomes the pioneer at once instead of the queue waiting forever.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 502, &[])
            .respond(200 * MS, 2, 200, &refs(&h(5, 4, "5", "p"))),
    });

    // 16. The bucket hash changes between responses.
    v.push(Case {
        file: "hash_change",
        comment: "A route's X-RateLimit-Bucket changes from 'old' to 'new': the route is re-mapped (an observation is \
                  emitted) and its queued requests move to the new bucket.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(2, 1, "2", "old")))
            .enqueue(150 * MS, "POST", ch1).enqueue(150 * MS, "POST", ch1)
            .respond(250 * MS, 2, 200, &refs(&h(2, 1, "2", "new")))
            .respond(350 * MS, 3, 200, &refs(&h(2, 0, "1.9", "new")))
            .timeout(2_300 * MS),
    });

    // 17. Hostile headers: tolerated, never an error.
    let hostile: Vec<(&str, &[(&str, &str)])> = vec![
        ("negative", &[("X-RateLimit-Limit", "-5"), ("X-RateLimit-Remaining", "-1"), ("X-RateLimit-Reset-After", "-3")]),
        ("nan", &[("X-RateLimit-Limit", "NaN"), ("X-RateLimit-Remaining", "nan"), ("X-RateLimit-Reset-After", "inf")]),
        ("huge", &[("X-RateLimit-Limit", "99999999999999999999"), ("X-RateLimit-Remaining", "99999999999999999999"),
                   ("X-RateLimit-Reset-After", "1e309")]),
        ("garbage", &[("X-RateLimit-Limit", "ten"), ("X-RateLimit-Remaining", ""), ("X-RateLimit-Reset-After", "0x10"),
                      ("X-RateLimit-Bucket", "")]),
        ("duplicated", &[("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "4, 0"), ("X-RateLimit-Remaining", "3"),
                         ("X-RateLimit-Reset-After", "1.5"), ("x-ratelimit-reset-after", "2.5")]),
    ];
    let mut s = Script::new();
    let mut id = 0;
    for (i, (_, hs)) in hostile.iter().enumerate() {
        let path = format!("/channels/10000000000000001{i}/messages");
        s = s.enqueue(i as u64 * S, "POST", &path).enqueue(i as u64 * S, "POST", &path);
        id += 1;
        s = s.respond(i as u64 * S + 100 * MS, id, 200, hs);
        id += 1;
    }
    v.push(Case {
        file: "hostile_headers",
        comment: "Negative, NaN/inf, huge, non-numeric and duplicated rate-limit headers on five buckets: nothing \
                  panics or errors; malformed fields are ignored one by one, duplicates take the most conservative \
                  value (min remaining, max reset).",
        config: discord_config(),
        script: s.timeout(10 * S),
    });
    v.push(Case {
        file: "html_429_body",
        comment: "A 429 whose body is an HTML page but which carries Retry-After: 5 and no rate-limit headers: an \
                  edge hold of 5 s (the header wins over the 60 s default backoff).",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .respond(100 * MS, 1, 429, &[("Retry-After", "5"), ("Content-Type", "application/json")])
            .timeout(5_100 * MS),
    });
    v.push(Case {
        file: "tiny_retry_after",
        comment: "A 429 with Retry-After 0 and Reset-After 0.000 still waits the minimum post-429 delay (50 ms): \
                  never a hot retry loop.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .respond(100 * MS, 1, 429, &[("Retry-After", "0"), ("X-RateLimit-Limit", "1"),
                ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "0.000"), ("X-RateLimit-Bucket", "t")])
            .timeout(150 * MS),
    });

    // 18. Retries on 429 are bounded.
    let mut c = discord_config();
    c.max_rate_limit_retries = 2;
    let r429 = [("Retry-After", "1"), ("X-RateLimit-Limit", "1"), ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "1"), ("X-RateLimit-Bucket", "r"), ("X-RateLimit-Scope", "user")];
    v.push(Case {
        file: "retries_exhausted",
        comment: "max_rate_limit_retries 2: the third 429 in a row fails the request with retries_exhausted \
                  (attempts 3).",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .respond(100 * MS, 1, 429, &r429)
            .timeout(1_100 * MS)
            .respond(1_200 * MS, 1, 429, &r429)
            .timeout(2_200 * MS)
            .respond(2_300 * MS, 1, 429, &r429),
    });

    // 19. 401 stops the token.
    v.push(Case {
        file: "unauthorized",
        comment: "A 401 is delivered, counts as invalid, and fails the token's queued and future requests with \
                  `unauthorized`; another identity is unaffected.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET", "/users/@me")
            .enqueue(0, "GET", "/users/@me")
            .respond(100 * MS, 1, 401, &[])
            .enqueue(200 * MS, "GET", "/guilds/100000000000000001")
            .enqueue_with(200 * MS, json!({"method": "GET", "path": "/users/@me", "identity": "other-bot"})),
    });

    // 20. Caller errors carry stable codes.
    v.push(Case {
        file: "caller_errors",
        comment: "Misuse is an error with a stable code and changes nothing: a bad method, a relative path, an unknown \
                  id, a response for a request that was never sent.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "GET POST", "/users/@me")
            .enqueue(0, "GET", "users/@me")
            .respond(10 * MS, 42, 200, &[])
            .enqueue(20 * MS, "POST", ch1).enqueue(20 * MS, "POST", ch1)
            .respond(30 * MS, 2, 200, &[])
            .cancel(40 * MS, 42)
            .fail(50 * MS, 2, "not_sent"),
    });

    // 21. Header profiles for other APIs.
    let mut c = Config::for_profile(HeaderProfile::Ietf);
    c.jitter_seed = 7;
    v.push(Case {
        file: "ietf_ratelimit",
        comment: "IETF draft-10 headers: RateLimit-Policy \"default\";q=3;w=10 with RateLimit \"default\";r=1;t=8 \
                  pipelines one more request, then waits 8 s; the older RateLimit-Remaining/Reset form works too.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/v1/items").enqueue(0, "GET", "/v1/items").enqueue(0, "GET", "/v1/items")
            .respond(100 * MS, 1, 200, &[("RateLimit-Policy", "\"default\";q=3;w=10"), ("RateLimit", "\"default\";r=1;t=8")])
            .respond(200 * MS, 2, 200, &[("RateLimit-Policy", "\"default\";q=3;w=10"), ("RateLimit", "\"default\";r=0;t=8")])
            .timeout(8_200 * MS)
            .enqueue(8_300 * MS, "GET", "/v1/other")
            .respond(8_400 * MS, 4, 200, &[("RateLimit-Limit", "2"), ("RateLimit-Remaining", "0"), ("RateLimit-Reset", "3")])
            .enqueue(8_500 * MS, "GET", "/v1/other"),
    });
    let c = Config::for_profile(HeaderProfile::GitHub);
    v.push(Case {
        file: "github_epoch_reset",
        comment: "GitHub x-ratelimit-* with an epoch reset: remaining 0 and reset 30 s after the response's wall clock \
                  holds the resource 'core' for 30 s; the epoch is never mistaken for a delay.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/repos/octo/hello/issues")
            .enqueue(0, "GET", "/repos/octo/hello/issues")
            .respond_wall(100 * MS, 1, 200, &[("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-used", "5000"), ("x-ratelimit-reset", "1790000030"), ("x-ratelimit-resource", "core")],
                1_790_000_000_000)
            .timeout(30_200 * MS),
    });
    let c = Config::for_profile(HeaderProfile::GitHub);
    let ok = [("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "4000"), ("x-ratelimit-resource", "core")];
    let secondary = [("retry-after", "1")];
    v.push(Case {
        file: "github_secondary_learned",
        comment: "No global limit is configured (GitHub): six requests to six repositories go at once; four are \
                  answered, two refused by a secondary limit (403, retry-after 1): the token is held 1 s, and what \
                  the API admitted in that second, 4, becomes the token's limit per second for ten seconds after the \
                  hold: when the first second's sends have left the window (1.125 s: one global window plus the \
                  first window's margin), the two refused go, two of four new ones with them, the other two a \
                  window later.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/repos/octo/r1/issues").enqueue(0, "GET", "/repos/octo/r2/issues")
            .enqueue(0, "GET", "/repos/octo/r3/issues").enqueue(0, "GET", "/repos/octo/r4/issues")
            .enqueue(0, "GET", "/repos/octo/r5/issues").enqueue(0, "GET", "/repos/octo/r6/issues")
            .respond(100 * MS, 1, 200, &ok).respond(100 * MS, 2, 200, &ok)
            .respond(100 * MS, 3, 200, &ok).respond(100 * MS, 4, 200, &ok)
            .respond(100 * MS, 5, 403, &secondary).respond(100 * MS, 6, 403, &secondary)
            .enqueue(150 * MS, "GET", "/repos/octo/r1/issues").enqueue(150 * MS, "GET", "/repos/octo/r2/issues")
            .enqueue(150 * MS, "GET", "/repos/octo/r3/issues").enqueue(150 * MS, "GET", "/repos/octo/r4/issues")
            .timeout(1_100 * MS)
            .timeout(1_125 * MS)
            .respond(1_200 * MS, 5, 200, &ok).respond(1_200 * MS, 6, 200, &ok)
            .respond(1_200 * MS, 7, 200, &ok).respond(1_200 * MS, 8, 200, &ok)
            .timeout(2_250 * MS),
    });
    let c = Config::for_profile(HeaderProfile::RetryAfterOnly);
    v.push(Case {
        file: "retry_after_date",
        comment: "Retry-After as an HTTP date 20 s after the Date header holds the host 20 s; a date in the past \
                  still waits the minimum 50 ms.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/api/thing")
            .respond(100 * MS, 1, 429, &[("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Retry-After", "Sun, 06 Nov 1994 08:49:57 GMT")])
            .timeout(20_100 * MS)
            .respond(20_200 * MS, 1, 429, &[("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Retry-After", "Sun, 06 Nov 1994 08:40:00 GMT")])
            .timeout(20_250 * MS),
    });

    // 22. Prediction.
    v.push(Case {
        file: "predict",
        comment: "predict() for an unknown bucket is now; with the bucket exhausted it is the reset; with 7 queued \
                  behind a limit of 5 per 5 s the next one is two windows out.",
        config: discord_config(),
        script: Script::new()
            .predict(0, "POST", ch1)
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(5, 0, "5", "pr")))
            .predict(200 * MS, "POST", ch1)
            .enqueue(200 * MS, "POST", ch1).enqueue(200 * MS, "POST", ch1).enqueue(200 * MS, "POST", ch1)
            .enqueue(200 * MS, "POST", ch1).enqueue(200 * MS, "POST", ch1).enqueue(200 * MS, "POST", ch1)
            .enqueue(200 * MS, "POST", ch1)
            .predict(300 * MS, "POST", ch1),
    });

    // 23. Sliding windows.
    v.push(Case {
        file: "sliding_window",
        comment: "After a local reset the server reports fewer remaining than the engine sent since the reset: the \
                  window slides. From then on slots come back one by one, a window length after each send.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(2, 1, "2", "sl")))
            .enqueue(1_000 * MS, "POST", ch1)
            .respond(1_100 * MS, 2, 200, &refs(&h(2, 0, "1", "sl")))
            .enqueue(1_200 * MS, "POST", ch1).enqueue(1_200 * MS, "POST", ch1).enqueue(1_200 * MS, "POST", ch1)
            .timeout(2_100 * MS)
            .respond(2_200 * MS, 3, 200, &refs(&h(2, 0, "0.9", "sl")))
            .timeout(3_100 * MS)
            .respond(3_200 * MS, 4, 200, &refs(&h(2, 0, "1", "sl")))
            .timeout(4_300 * MS),
    });

    // 24. Eviction of idle buckets without a sweeper.
    let mut c = discord_config();
    c.bucket_idle_ttl = 10 * S;
    v.push(Case {
        file: "idle_eviction",
        comment: "bucket_idle_ttl 10 s: a bucket idle past its reset + ttl is forgotten on a later input (no timer is \
                  armed for it, so the limiter reports Idle); the route -> bucket mapping survives.",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "5", "ev")))
            .timeout(20 * S)
            .enqueue(20 * S, "POST", ch1),
    });

    // 25. A sub-limit counts in predictions: predict() and max_wait see the hold.
    let rename = "/channels/100000000000000001";
    let mut c = discord_config();
    c.max_wait = Some(10 * S);
    v.push(Case {
        file: "sub_limit_prediction",
        comment: "max_wait 10 s. Renames (body keys `name`: the class channel_name_topic). A hidden sub-limit \
                  429 (remaining 3) holds the channel's renames for 300 s while the bucket resets in 1 s: \
                  predict() for another rename says 300 s, not the bucket reset; the retried rename, whose wait \
                  now exceeds max_wait, fails at once with max_wait_exceeded, and a new rename fails on \
                  enqueue; a message to the same channel (another route) still goes.",
        config: c,
        script: Script::new()
            .enqueue_with(0, json!({"method": "PATCH", "path": rename, "body_keys": ["name"]}))
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "1", "rename")))
            .enqueue_with(200 * MS, json!({"method": "PATCH", "path": rename, "body_keys": ["name"]}))
            .respond(300 * MS, 2, 429, &[
                ("Retry-After", "300"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "3"),
                ("X-RateLimit-Reset-After", "0.8"), ("X-RateLimit-Bucket", "rename"),
            ])
            .predict_with(400 * MS, json!({"method": "PATCH", "path": rename, "body_keys": ["name"]}))
            .enqueue_with(500 * MS, json!({"method": "PATCH", "path": rename, "body_keys": ["name"]}))
            .enqueue(600 * MS, "POST", ch1),
    });
    v.push(Case {
        file: "sub_limit_without_class",
        comment: "Channel edits given no body (no sub-limit class): a hidden sub-limit 429 (remaining 3, \
                  Retry-After 300) holds the refused edit alone, to be retried after 300 s; the channel's next \
                  edit goes at once (it may be of another kind). When that one meets the sub-limit too, the \
                  route is held: the third edit waits for the sub-limit's end (300.4 s), and the first two are \
                  retried then.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "PATCH", rename)
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "1", "edits")))
            .enqueue(200 * MS, "PATCH", rename)
            .respond(300 * MS, 2, 429, &[
                ("Retry-After", "300"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "3"),
                ("X-RateLimit-Reset-After", "0.8"), ("X-RateLimit-Bucket", "edits"),
            ])
            .enqueue(350 * MS, "PATCH", rename)
            .respond(400 * MS, 3, 429, &[
                ("Retry-After", "300"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "2"),
                ("X-RateLimit-Reset-After", "0.7"), ("X-RateLimit-Bucket", "edits"),
            ])
            .enqueue(450 * MS, "PATCH", rename)
            .timeout(300_300 * MS)
            .timeout(300_400 * MS),
    });

    // 26. Shared mode (ratelane::shared): the driver asks a store before each send.
    let exempt = |path: &str| json!({"method": "POST", "path": path, "global_exempt": true});
    let shared = |policy: OnUnavailable| {
        let mut c = discord_config();
        c.shared = Some(SharedConfig::with_policy(policy));
        c
    };
    let b5 = h(5, 4, "5", "sh");
    v.push(Case {
        file: "shared_mode_reserve",
        comment: "Shared mode: where the engine would send, it emits `reserve` and the request holds its slot until the \
                  store answers. `granted` sends it; its response is shared as a `bucket` update. Pipelined requests are \
                  reserved together; one the store denies (scope bucket, another process took the slot) goes back to \
                  its place, gives back its global token, and is reserved again when the hold ends.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .granted(2 * MS, 1)
            .respond(100 * MS, 1, 200, &refs(&b5))
            .granted(102 * MS, 2)
            .denied(102 * MS, 3, 900 * MS, "bucket")
            .respond(200 * MS, 2, 200, &refs(&h(5, 2, "4.9", "sh")))
            .timeout(1_002 * MS)
            .granted(1_004 * MS, 3)
            .respond(1_100 * MS, 3, 200, &refs(&h(5, 1, "4", "sh"))),
    });
    v.push(Case {
        file: "shared_mode_denied_global",
        comment: "Shared mode: the store denies a reservation for the identity's global limit (other processes used \
                  it): every non-exempt request of that identity waits for retry_after, including one to another \
                  channel; an exempt interaction callback is still reserved (it does not count against the global limit).",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .denied(2 * MS, 1, 300 * MS, "global")
            .enqueue(10 * MS, "POST", ch2)
            .enqueue(20 * MS, "POST", "/interactions/300000000000000001/aW50ZXJhY3Rpb24tdG9rZW4/callback")
            .granted(22 * MS, 3)
            .timeout(302 * MS)
            .granted(304 * MS, 1)
            .granted(304 * MS, 2),
    });
    let mut c = shared(OnUnavailable::FailOpen);
    c.max_wait = Some(7_200 * S);
    v.push(Case {
        file: "shared_mode_denied_clamped",
        comment: "Shared mode: a store denying a reservation for ten days (a store's bug, or a hostile one) holds the \
                  identity for max_server_wait (1 h), the one bound on every wait from outside the engine: with \
                  max_wait 2 h the request is not failed, predict answers the bound, and the request is reserved \
                  again when the hold ends.",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .denied(2 * MS, 1, 864_000 * S, "global")
            .predict(3 * MS, "POST", ch2)
            .timeout(3_600 * S + 2 * MS)
            .granted(3_600 * S + 3 * MS, 1),
    });
    v.push(Case {
        file: "shared_mode_global_lease",
        comment: "Shared mode, global leases: while one reservation asks for the identity's global tokens, the \
                  identity's other requests wait for its answer instead of each asking; the next one asks for a \
                  lease for both waiting heads (global_want 2), and the store leases one token beyond its own: the \
                  other request then spends it (global_want 0: the store skips its window check and counts the \
                  token from that grant). Denied for another reason, it keeps its token and spends it again. A \
                  store leasing more than was asked is not believed.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue(0, "POST", ch2)
            .enqueue(0, "POST", ch3)
            .granted_processes(2 * MS, 1, 1)
            .granted_leased(4 * MS, 2, 5)
            .denied(6 * MS, 3, 10 * MS, "pioneer")
            .timeout(16 * MS)
            .granted(30 * MS, 3),
    });
    v.push(Case {
        file: "shared_mode_window_full_keeps_lease",
        comment: "Shared mode, global leases: the store's global window is full (a reservation asking for tokens is \
                  denied, scope global, for 900 ms) while this process holds a current lease whose one token is out \
                  with request 3. Only the requests without a token wait for the window: when 3 is denied for another \
                  reason (another process's pioneer), its token comes back and request 4 spends it at once (global_want \
                  0), instead of the whole identity pausing for 900 ms and the token lapsing unspent (the store still \
                  counts it to the end of its window). Request 3, with no token left, then waits for the window.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue(0, "POST", ch2)
            .enqueue(0, "POST", ch3)
            .granted(2 * MS, 1)
            .granted_leased(4 * MS, 2, 1)
            .enqueue(5 * MS, "POST", "/channels/100000000000000004/messages")
            .denied(6 * MS, 4, 900 * MS, "global")
            .denied(7 * MS, 3, 10 * MS, "pioneer")
            .granted(8 * MS, 4)
            .timeout(17 * MS)
            .timeout(906 * MS)
            .granted(908 * MS, 3),
    });
    v.push(Case {
        file: "shared_mode_lease_joins_the_next",
        comment: "Shared mode, global leases: a lease of two tokens (answer to 2) goes to requests 3 and 4. While both \
                  are out, 5 asks for tokens and gets none beyond its own, 6 asks again and gets one, which 7 spends. \
                  Then 3 is denied for another process's pioneer: its token is still counted by the store, and it comes \
                  back to the identity though a newer lease answered meanwhile (the tokens left of a current lease \
                  join the next one), so request 8 spends it (global_want 0) instead of asking the window again.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue(0, "POST", ch2)
            .enqueue(0, "POST", ch3)
            .enqueue(0, "POST", "/channels/100000000000000004/messages")
            .granted(2 * MS, 1)
            .granted_leased(4 * MS, 2, 2)
            .enqueue(5 * MS, "POST", "/channels/100000000000000005/messages")
            .enqueue(5 * MS, "POST", "/channels/100000000000000006/messages")
            .enqueue(5 * MS, "POST", "/channels/100000000000000007/messages")
            .granted(6 * MS, 5)
            .granted_leased(7 * MS, 6, 1)
            .denied(8 * MS, 3, 10 * MS, "pioneer")
            .enqueue(9 * MS, "POST", "/channels/100000000000000008/messages")
            .granted(10 * MS, 4)
            .granted(10 * MS, 7)
            .granted(10 * MS, 8)
            .timeout(18 * MS)
            .granted(20 * MS, 3),
    });
    // The store's clock in its grants: 18 reservations out at once (leases off), answered one
    // every 10 ms (round trips 10-180 ms: they waited in the store's queue), each counted by
    // the store 1 ms before the grant reached the core (its clock is another epoch's).
    let mut script = Script::new();
    for c in 10..28 {
        script = script.enqueue(0, "POST", &format!("/channels/1000000000000000{c}/messages"));
    }
    for i in 1..=18u64 {
        script = script.granted_at_store(i * 10 * MS, i, 1_700_000_000_000_000_000 + i * 10 * MS - MS);
    }
    let mut no_lease = shared(OnUnavailable::FailOpen);
    if let Some(sh) = no_lease.shared.as_mut() {
        sh.global_lease = false;
    }
    v.push(Case {
        file: "shared_mode_store_time",
        comment: "Shared mode: grants that say the store's clock. 18 reservations go out at once and are granted 10 to \
                  180 ms later, each 1 ms after the store counted it (the rest of each round trip was the wait before \
                  the store saw it, which moves the count and does not bunch arrivals). The margin passed with the \
                  19th reservation is the global margin (125 ms, half the cap, before 16 answers) plus 1.5x the \
                  spread of the store-to-core delays (0), not plus 1.5x the spread of the round trips (255 ms, \
                  capped at 250 ms in all), which is what grants without the store's clock give.",
        config: no_lease,
        script: script.enqueue(200 * MS, "POST", "/channels/100000000000000028/messages"),
    });
    v.push(Case {
        file: "shared_mode_pioneer",
        comment: "Shared mode: another process's pioneer is learning the bucket (denied, scope pioneer, for the poll \
                  interval): the queue waits and asks again; a request whose deadline falls before the hold ends fails \
                  at once with the prediction.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue_with(1 * MS, json!({"method": "POST", "path": ch1, "deadline_ns": 30 * MS}))
            .denied(2 * MS, 1, 50 * MS, "pioneer")
            .timeout(52 * MS)
            .granted(54 * MS, 1)
            .respond(150 * MS, 1, 200, &refs(&b5)),
    });
    v.push(Case {
        file: "shared_mode_fail_open",
        comment: "Shared mode, fail_open: the store is unavailable, so the request is sent at once under local limits \
                  (observation store_unavailable, next try after retry_base 100 ms); until then requests are sent \
                  without a reservation; after it one reservation probes the store while others still go directly; \
                  the probe's grant ends the outage (store_recovered) and reservations resume.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .unavailable(250 * MS, 1)
            .enqueue(260 * MS, "GET", "/guilds/100000000000000002")
            .enqueue(400 * MS, "GET", "/guilds/100000000000000003")
            .enqueue(410 * MS, "GET", "/guilds/100000000000000004")
            .granted(412 * MS, 3)
            .enqueue(420 * MS, "GET", "/guilds/100000000000000005"),
    });
    v.push(Case {
        file: "shared_mode_sub_limit_class",
        comment: "Shared mode: a request with a sub-limit class reserves and shares under the route key and its class \
                  (`PATCH /channels/:id #channel_name_topic`), so a sub-limit hold in the store holds that class in \
                  every process and not the route's other requests; a denial with scope route holds only the class here too.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue_with(0, json!({"method": "PATCH", "path": "/channels/100000000000000001", "body_keys": ["name"]}))
            .granted(2 * MS, 1)
            .respond(100 * MS, 1, 200, &refs(&h(5, 4, "5", "edit")))
            .enqueue_with(200 * MS, json!({"method": "PATCH", "path": "/channels/100000000000000001", "body_keys": ["name"]}))
            .denied(202 * MS, 2, 60_000 * MS, "route")
            .enqueue_with(300 * MS, json!({"method": "PATCH", "path": "/channels/100000000000000001", "body_keys": ["nsfw"]}))
            .granted(302 * MS, 3),
    });
    v.push(Case {
        file: "shared_mode_fail_closed",
        comment: "Shared mode, fail_closed: an unavailable store holds every request (with a WaitUntil: nothing hangs); \
                  the pause doubles per consecutive failure (100 ms, then 200 ms); after it one reservation probes the \
                  store and the others wait for its answer; a request whose deadline falls within the pause fails at \
                  once with the predicted send time; the grant ends the outage and the rest are reserved.",
        config: shared(OnUnavailable::FailClosed),
        script: Script::new()
            .enqueue(0, "GET", "/guilds/100000000000000001")
            .unavailable(250 * MS, 1)
            .enqueue(260 * MS, "GET", "/guilds/100000000000000002")
            .enqueue_with(270 * MS, json!({"method": "GET", "path": "/guilds/100000000000000003", "deadline_ns": 300 * MS}))
            .timeout(300 * MS)
            .timeout(350 * MS)
            .unavailable(600 * MS, 1)
            .timeout(800 * MS)
            .granted(802 * MS, 1),
    });
    let b6 = h(6, 5, "1", "sh");
    v.push(Case {
        file: "shared_mode_fail_open_share",
        comment: "Shared mode, fail_open: while the store is down a process runs on its share of the limits, the \
                  limit divided by the live processes the store counted in its last answer (`processes`: 3 here). \
                  The bucket allows 6 per window: of the five requests whose reservations fail together, this process \
                  sends one directly (its share is 2, and request 1 was the first); the others wait for the reset, \
                  then one probes the store, and its grant brings back the whole limit once the store counts the \
                  three processes back. (The requests are exempt from the global limit, whose share waits one \
                  window: shared_mode_outage_report.)",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .granted_processes(1 * MS, 1, 3)
            .respond(50 * MS, 1, 200, &refs(&b6))
            .enqueue_with(100 * MS, exempt(ch1)).enqueue_with(100 * MS, exempt(ch1)).enqueue_with(100 * MS, exempt(ch1))
            .enqueue_with(100 * MS, exempt(ch1)).enqueue_with(100 * MS, exempt(ch1))
            .unavailable(110 * MS, 2)
            .unavailable(110 * MS, 3)
            .unavailable(110 * MS, 4)
            .unavailable(110 * MS, 5)
            .unavailable(110 * MS, 6)
            .respond(150 * MS, 2, 200, &refs(&h(6, 4, "0.9", "sh")))
            .timeout(1_050 * MS)
            .granted_processes(1_052 * MS, 3, 3),
    });
    let guild = |i: u64| format!("/guilds/{}", 100_000_000_000_000_000u64 + i);
    v.push(Case {
        file: "shared_mode_outage_report",
        comment: "Shared mode, fail_open, three processes (the store's count): when the store goes away, nothing \
                  goes without it against the global limit for one global window (1.25 s: the window plus the \
                  largest margin), as the store may have granted that window to the other processes. Its probes \
                  meanwhile carry how long ago it sent what the store granted (`granted_ns`: counted by a store \
                  that lost its state), are `reporting` and ask for the processes back since the outage began \
                  (`processes_since_ns`). Then one probes and the others go without a reservation, within this \
                  process's share (16). The probe is granted, with only this process back: the share still \
                  holds; the next reservation tells the store how long ago the two were sent without it \
                  (`unrecorded_ns`); the one after has nothing left to report; when the store counts the three \
                  back, the whole limit applies again.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "GET", &guild(1))
            .granted_processes(1 * MS, 1, 3)
            .enqueue(100 * MS, "GET", &guild(2))
            .enqueue(100 * MS, "GET", &guild(3))
            .enqueue(100 * MS, "GET", &guild(4))
            .unavailable(110 * MS, 2)
            .unavailable(110 * MS, 3)
            .unavailable(110 * MS, 4)
            .timeout(210 * MS)
            .unavailable(211 * MS, 2)
            .timeout(411 * MS)
            .unavailable(412 * MS, 2)
            .timeout(1_360 * MS)
            .granted_processes(1_361 * MS, 2, 1)
            .enqueue(1_400 * MS, "GET", &guild(5))
            .granted_processes(1_401 * MS, 5, 1)
            .enqueue(1_500 * MS, "GET", &guild(6))
            .granted_processes(1_501 * MS, 6, 3),
    });
    v.push(Case {
        file: "shared_mode_outage_step",
        comment: "Shared mode, fail_closed: store health counts one failure per outage step, not one per reservation. \
                  Three reservations (three channels) answered `unavailable` at the same instant are one failure: one \
                  store_unavailable, and the probe comes retry_base (100 ms) later, not 400 ms; the probe's own \
                  failure is the next step (200 ms); its grant ends the outage and the other two are reserved again.",
        config: shared(OnUnavailable::FailClosed),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue(0, "POST", ch2)
            .enqueue(0, "POST", "/channels/100000000000000003/messages")
            .unavailable(250 * MS, 1)
            .unavailable(250 * MS, 2)
            .unavailable(250 * MS, 3)
            .timeout(350 * MS)
            .unavailable(360 * MS, 1)
            .timeout(560 * MS)
            .granted(562 * MS, 1),
    });
    v.push(Case {
        file: "shared_mode_cancel_close",
        comment: "Shared mode: cancelling a reserving request ends it at once (its slot goes back; the next request \
                  is reserved); its late answer is ignored (ok) and, being a grant, released at the store. close() fails \
                  reserving requests with `closed` like queued ones; their late answers are ignored too. An answer for \
                  a request that is not reserving is invalid_state; for an unknown id, unknown_request.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .cancel(1 * MS, 1)
            .granted(2 * MS, 1)
            .granted(3 * MS, 2)
            .granted(4 * MS, 2)
            .granted(5 * MS, 42)
            .enqueue(10 * MS, "POST", ch2)
            .close(11 * MS)
            .denied(12 * MS, 3, 100 * MS, "bucket")
            .respond(100 * MS, 2, 200, &refs(&b5)),
    });
    v.push(Case {
        file: "shared_mode_deadline",
        comment: "Shared mode: a grant that arrives after the request's deadline does not send it: it fails with \
                  deadline_exceeded and the grant is released at the store.",
        config: shared(OnUnavailable::FailOpen),
        script: Script::new()
            .enqueue_with(0, json!({"method": "POST", "path": ch1, "deadline_ns": 100 * MS}))
            .granted(150 * MS, 1),
    });
    let mut c = shared(OnUnavailable::FailOpen);
    c.invalid_request_limit = 100;
    c.invalid_request_stop_at = 50;
    c.invalid_request_warn_at = 40;
    v.push(Case {
        file: "shared_mode_updates",
        comment: "Shared mode: what other processes must know is shared as updates: a global 429 becomes a `hold` of \
                  scope global, a shared-scope 429 a `hold` of the bucket, a sub-limit 429 a `hold` of the route; \
                  invalid responses (403, non-shared 429) become `invalid` updates; a 2xx without rate-limit headers \
                  marks the route unlimited; a dropped connection releases the grant (reached: true for maybe_sent).",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", "/users/@me")
            .granted(1 * MS, 1)
            .respond(50 * MS, 1, 200, &[])
            .enqueue(60 * MS, "POST", ch1)
            .granted(61 * MS, 2)
            .respond_body(100 * MS, 2, 429, &global_429, json!({"retry_after": 64.57, "global": true}))
            .enqueue(200 * MS, "POST", ch2)
            .timeout(65_100 * MS)
            .granted(65_101 * MS, 2)
            .granted(65_101 * MS, 3)
            .respond_body(65_200 * MS, 2, 429, &shared_429, json!({"retry_after": 1336.57, "global": false}))
            .respond(65_210 * MS, 3, 403, &[])
            .enqueue(65_300 * MS, "PATCH", "/channels/100000000000000003")
            .granted(65_301 * MS, 4)
            .respond(65_400 * MS, 4, 429, &[
                ("Retry-After", "300"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "3"),
                ("X-RateLimit-Reset-After", "599.8"), ("X-RateLimit-Bucket", "rename"),
            ])
            .enqueue(65_500 * MS, "GET", "/guilds/100000000000000009")
            .granted(65_501 * MS, 5)
            .fail(65_600 * MS, 5, "maybe_sent"),
    });

    // 27. A global or host-wide pause fails at once what it makes hopeless.
    let mut c = discord_config();
    c.global_limit = 1;
    c.max_wait = Some(20 * S);
    let pause = [("Retry-After", "60"), ("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")];
    v.push(Case {
        file: "global_pause_fails_fast",
        comment: "max_wait 20 s, global limit 1 per second, three GETs to two channels: the first is answered \
                  with a global 429 and Retry-After 60, which pauses the token for 60 s. Every queued request \
                  (the answered one, requeued, included) fails at once with max_wait_exceeded and its predicted \
                  wait, instead of waiting out its 20 s; a GET to a third channel after the pause fails at once \
                  too. An edge ban does the same for every identity.",
        config: c,
        script: Script::new()
            .enqueue(0, "GET", ch1).enqueue(0, "GET", ch2).enqueue(0, "GET", ch1)
            .respond_body(100 * MS, 1, 429, &pause, json!({"retry_after": 60.0, "global": true}))
            .enqueue(200 * MS, "GET", ch3),
    });

    // 28. With the round trip learned, a window's next request is timed to arrive just after
    // its end.
    let one = |remaining: u32, reset_after: &str| h(1, remaining, reset_after, "react");
    let react = "/channels/100000000000000001/messages/200000000000000001/reactions/x/@me";
    let mut script = Script::new();
    for _ in 0..18 {
        script = script.enqueue(0, "PUT", react);
    }
    // 16 answers, each 20 ms after its send (1 per 50 ms: Reset-After 0.04 at the answer);
    // the 17th send comes then 20 ms minus the jitter before the reset the answer reports.
    let mut sent = 0;
    for id in 1..=16u64 {
        script = script.respond(sent + 20 * MS, id, 200, &refs(&one(0, "0.04")));
        sent += 70 * MS;
        script = script.timeout(sent);
    }
    v.push(Case {
        file: "early_send",
        comment: "A 1-per-50-ms bucket with a 20 ms round trip: until 16 round trips are known, the next \
                  request goes at the reset the answer reports (its arrival plus Reset-After: 70 ms a cycle). \
                  Then it goes the fastest round trip less twice the jitter and 3 ms earlier (here 17 ms: no \
                  jitter), so it arrives at the server just after the window ends: the 17th is sent 53 ms after \
                  the 16th.",
        config: discord_config(),
        script: script.respond(sent + 20 * MS, 17, 200, &refs(&one(0, "0.04"))).timeout(sent + 53 * MS),
    });

    // 29. A shared-scope limit below the bucket is learned from its 429s.
    let pin = "/channels/100000000000000001/pins/200000000000000001";
    let pins = |remaining: u32, reset_after: &str| h(5, remaining, reset_after, "pins");
    let shared = |remaining: &str| {
        vec![
            ("Retry-After".to_string(), "1".to_string()),
            ("X-RateLimit-Limit".to_string(), "5".to_string()),
            ("X-RateLimit-Remaining".to_string(), remaining.to_string()),
            ("X-RateLimit-Reset-After".to_string(), "0.98".to_string()),
            ("X-RateLimit-Bucket".to_string(), "pins".to_string()),
            ("X-RateLimit-Scope".to_string(), "shared".to_string()),
        ]
    };
    let mut script = Script::new();
    for _ in 0..10 {
        script = script.enqueue(0, "PUT", pin);
    }
    v.push(Case {
        file: "shared_scope_learned",
        comment: "Pins, 5 per window for the bot but 3 per window for the resource (scope shared): the first \
                  window's 4th and 5th get shared 429s. From then on the bucket sends 3 per window (the requests \
                  the resource admitted before the first shared 429), so the next window sees no 429; the cap \
                  is remembered for ten windows after the hold.",
        config: discord_config(),
        script: script
            .respond(20 * MS, 1, 200, &refs(&pins(4, "1")))
            .respond(40 * MS, 2, 200, &refs(&pins(3, "0.98")))
            .respond(40 * MS, 3, 200, &refs(&pins(2, "0.98")))
            .respond_body(41 * MS, 4, 429, &refs(&shared("1")), json!({"retry_after": 0.98, "global": false}))
            .respond_body(41 * MS, 5, 429, &refs(&shared("0")), json!({"retry_after": 0.98, "global": false}))
            .timeout(1_030 * MS)
            .respond(1_050 * MS, 4, 200, &refs(&pins(4, "1")))
            .respond(1_060 * MS, 5, 200, &refs(&pins(3, "0.99")))
            .respond(1_060 * MS, 6, 200, &refs(&pins(2, "0.99")))
            .timeout(2_100 * MS),
    });

    // 30. The prior: Discord's reaction routes share one bucket before any answer says so.
    let msg = "/channels/100000000000000001/messages/200000000000000001";
    let react_me = format!("{msg}/reactions/%F0%9F%91%8D/@me");
    let react_user = format!("{msg}/reactions/%F0%9F%91%8D/300000000000000001");
    let react_list = format!("{msg}/reactions/%F0%9F%91%8D");
    let react = |reset_after: &str| h(1, 0, reset_after, "react");
    v.push(Case {
        file: "prior_route_groups",
        comment: "Add a reaction, remove it, list who reacted: three routes Discord counts against one 1-slot \
                  bucket. The prior (config route_groups, Discord's by default) puts them in one queue before \
                  any answer, so one pioneer goes, not three. Its answer names the bucket, which every route of \
                  the group adopts (one bucket_learned each); a later delete of another user's reaction joins \
                  the same queue, and the four go one per window.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "PUT", &react_me)
            .enqueue(0, "DELETE", &react_me)
            .enqueue(0, "GET", &react_list)
            .respond(20 * MS, 1, 200, &refs(&react("0.25")))
            .timeout(270 * MS)
            .respond(290 * MS, 2, 200, &refs(&react("0.25")))
            .enqueue(300 * MS, "DELETE", &react_user)
            .timeout(540 * MS)
            .respond(560 * MS, 3, 200, &refs(&react("0.25")))
            .timeout(810 * MS)
            .respond(830 * MS, 4, 200, &refs(&react("0.25"))),
    });

    // 31. The same without the prior: three pioneers, two 429s.
    let mut no_prior = discord_config();
    no_prior.route_groups = Vec::new();
    let react_429 = [
        ("Retry-After", "1"),
        ("X-RateLimit-Limit", "1"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "0.23"),
        ("X-RateLimit-Bucket", "react"),
        ("X-RateLimit-Scope", "user"),
    ];
    v.push(Case {
        file: "prior_route_groups_off",
        comment: "The reactions of prior_route_groups with the prior turned off (route_groups: []): each route \
                  sends its own pioneer at once, and two of the three meet a 429 from the 1-slot bucket they \
                  share. Their answers merge the routes into the bucket's queue, and the two are retried after \
                  the window.",
        config: no_prior,
        script: Script::new()
            .enqueue(0, "PUT", &react_me)
            .enqueue(0, "DELETE", &react_me)
            .enqueue(0, "GET", &react_list)
            .respond(20 * MS, 1, 200, &refs(&react("0.25")))
            .respond_body(21 * MS, 2, 429, &react_429, json!({"retry_after": 0.23, "global": false}))
            .respond_body(22 * MS, 3, 429, &react_429, json!({"retry_after": 0.23, "global": false}))
            .timeout(270 * MS),
    });

    // 32. Snapshot and restore across a restart.
    let del = msg;
    let wall0 = 1_700_000_000_000u64;
    let msgs_429 = [
        ("Retry-After", "1"),
        ("X-RateLimit-Limit", "1"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "0.95"),
        ("X-RateLimit-Bucket", "msgs"),
        ("X-RateLimit-Scope", "user"),
    ];
    let pause = [("Retry-After", "60"), ("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")];
    v.push(Case {
        file: "snapshot_restore",
        comment: "A bot learns that sending and deleting messages share a 1-slot bucket (after a pioneer 429), \
                  gets a 403 and then a global 429 (60 s), takes a snapshot 3 s in (wall clock 1700000003000) \
                  and restarts. The new limiter restores it 7 s later: one queue for both routes (one pioneer), \
                  the global pause still running until 62 s, the two invalid responses still counted. A second \
                  snapshot shows the same knowledge.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .enqueue(0, "DELETE", del)
            .respond(50 * MS, 1, 200, &refs(&h(1, 0, "1", "msgs")))
            .respond_body(60 * MS, 2, 429, &msgs_429, json!({"retry_after": 0.95, "global": false}))
            .timeout(1_060 * MS)
            .respond(1_110 * MS, 2, 200, &refs(&h(1, 0, "1", "msgs")))
            .enqueue(1_200 * MS, "GET", "/users/@me")
            .respond(1_250 * MS, 3, 403, &[])
            .enqueue(2 * S, "GET", ch2)
            .respond_body(2_050 * MS, 4, 429, &pause, json!({"retry_after": 60.0, "global": true}))
            .snapshot(3 * S, wall0 + 3_000)
            .restart(10 * S)
            .restore(10 * S, wall0 + 10_000, None)
            .enqueue(10 * S, "POST", ch1)
            .enqueue(10 * S, "DELETE", del)
            .snapshot(11 * S, wall0 + 11_000)
            .timeout(62_050 * MS)
            .respond(62_100 * MS, 1, 200, &refs(&h(1, 0, "1", "msgs")))
            .timeout(63_100 * MS)
            .respond(63_150 * MS, 2, 200, &refs(&h(1, 0, "1", "msgs"))),
    });

    // 33. What restore refuses, and a pause already over.
    let doc = |taken_at: u64, profile: &str, pause_until: u64| {
        json!({
            "format": "ratelane.snapshot", "version": 1, "taken_at_ms": taken_at, "profile": profile,
            "routes": [{"route": "POST /channels/:id/messages", "bucket": "msgs"}],
            "windows": [], "global_pauses": [{"identity": "", "until_ms": pause_until}],
            "host_pause": null, "invalid_requests_ms": []
        })
    };
    v.push(Case {
        file: "snapshot_errors",
        comment: "Restore refuses a foreign document (snapshot_foreign: another format, or a snapshot of another \
                  header profile), a newer version (snapshot_version), malformed content (snapshot_malformed), a \
                  limiter that holds requests (limiter_busy) and a closed one (limiter_closed); nothing changes \
                  then. A valid snapshot whose global pause ended before the restore drops the pause: the \
                  request goes at once.",
        config: discord_config(),
        script: Script::new()
            .restore(0, wall0, Some(json!({"format": "something.else", "version": 1})))
            .restore(0, wall0, Some(json!({"routes": []})))
            .restore(0, wall0, Some(json!({"format": "ratelane.snapshot", "version": 2, "routes": {}})))
            .restore(0, wall0, Some(json!({"format": "ratelane.snapshot", "version": 1, "routes": "nope"})))
            .restore(0, wall0, Some(doc(wall0 - 5_000, "github", wall0 + 60_000)))
            .restore(0, wall0, Some(doc(wall0 - 5_000, "discord", wall0 - 1_000)))
            .enqueue(0, "POST", ch1)
            .restore(10 * MS, wall0 + 10, Some(doc(wall0 - 5_000, "discord", wall0 + 60_000)))
            .respond(50 * MS, 1, 200, &refs(&h(5, 4, "5", "msgs")))
            .close(60 * MS)
            .restore(70 * MS, wall0 + 70, Some(doc(wall0 - 5_000, "discord", wall0 + 60_000))),
    });

    // 33b. A snapshot's waits pass the one bound on waits from outside (max_server_wait).
    let ten_years_ms = 315_360_000_000u64;
    v.push(Case {
        file: "snapshot_clamped",
        comment: "A snapshot whose host pause ends ten years after the restore, and whose learned window is ten years \
                  long (a clock far ahead, or a corrupted document), is clamped to max_server_wait (1 h), like \
                  every wait from outside the engine: predict answers 1 h, the request waits 1 h and goes, and a \
                  snapshot taken meanwhile holds the clamped pause.",
        config: discord_config(),
        script: Script::new()
            .restore(0, wall0, Some(json!({
                "format": "ratelane.snapshot", "version": 1, "taken_at_ms": wall0, "profile": "discord",
                "routes": [{"route": "POST /channels/:id/messages", "bucket": "msgs"}],
                "windows": [{"bucket": "msgs", "window_ns": ten_years_ms * 1_000_000}],
                "global_pauses": [], "host_pause": {"until_ms": wall0 + ten_years_ms, "strikes": 1},
                "invalid_requests_ms": []
            })))
            .predict(S, "POST", ch1)
            .enqueue(S, "POST", ch1)
            .snapshot(2 * S, wall0 + 2_000)
            .timeout(3_600 * S)
            .respond(3_600 * S + 50 * MS, 1, 200, &refs(&h(5, 4, "5", "msgs"))),
    });

    // 34. Provider packs (issue 17 item 2): each provider's answers, and what the engine does.
    let chat = "/v1/chat/completions";
    let openai = |rem_req: &'static str, reset_req: &'static str, rem_tok: &'static str, reset_tok: &'static str| {
        vec![
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", rem_req),
            ("x-ratelimit-reset-requests", reset_req),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", rem_tok),
            ("x-ratelimit-reset-tokens", reset_tok),
        ]
    };
    v.push(Case {
        file: "openai_tokens",
        comment: "OpenAI: requests and tokens. The first answer leaves 59 requests but no tokens (reset 6m0s): the \
                  other two wait 6 minutes, not 1 s. A 429 with retry-after-ms 1500 and retry-after 1 waits the \
                  longer 1.5 s.",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue(0, "POST", chat).enqueue(0, "POST", chat).enqueue(0, "POST", chat)
            .respond(100 * MS, 1, 200, &openai("59", "1s", "0", "6m0s"))
            .timeout(360_100 * MS)
            .respond(360_200 * MS, 2, 200, &openai("58", "2s", "140000", "20s"))
            .respond(360_250 * MS, 3, 429, &[("retry-after-ms", "1500"), ("retry-after", "1")])
            .timeout(361_750 * MS)
            .respond(361_850 * MS, 3, 200, &openai("57", "3s", "130000", "30s")),
    });
    v.push(Case {
        file: "azure_openai",
        comment: "Azure OpenAI: only what remains (x-ratelimit-remaining-requests/-tokens, no reset): the 10-second \
                  request window is assumed, so after the last request the next waits 10 s from that answer; a 429's \
                  x-ms-retry-after-ms 2500 holds the route 2.5 s.",
        config: Config::for_profile(HeaderProfile::AzureOpenAi),
        script: Script::new()
            .enqueue(0, "POST", chat).enqueue(0, "POST", chat).enqueue(0, "POST", chat)
            .respond(100 * MS, 1, 200, &[("x-ratelimit-remaining-requests", "1"), ("x-ratelimit-remaining-tokens", "9000"), ("x-ms-region", "East US")])
            .respond(200 * MS, 2, 200, &[("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-remaining-tokens", "8000")])
            .timeout(10_200 * MS)
            .respond(10_300 * MS, 3, 429, &[("x-ms-retry-after-ms", "2500"), ("x-ratelimit-remaining-requests", "3")])
            .timeout(12_800 * MS),
    });
    let wall = 1_755_780_060_000; // 2025-08-21T12:41:00Z
    v.push(Case {
        file: "anthropic_rfc3339",
        comment: "Anthropic: RFC 3339 resets read against the response's wall clock. Requests remain but output \
                  tokens are spent until 12:41:12Z, 12 s after the answer: the next request waits 12 s.",
        config: Config::for_profile(HeaderProfile::Anthropic),
        script: Script::new()
            .enqueue(0, "POST", "/v1/messages").enqueue(0, "POST", "/v1/messages")
            .respond_wall(100 * MS, 1, 200, &[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "49"),
                ("anthropic-ratelimit-requests-reset", "2025-08-21T12:41:01Z"),
                ("anthropic-ratelimit-output-tokens-limit", "8000"),
                ("anthropic-ratelimit-output-tokens-remaining", "0"),
                ("anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:12Z"),
            ], wall)
            .timeout(12_100 * MS),
    });
    v.push(Case {
        file: "github_403",
        comment: "GitHub refusals with 403. A secondary limit (retry-after 30, remaining 4000) is retried and holds \
                  the whole token 30 s (another route waits too); a 403 without a sign of a rate limit is handed \
                  back; one whose body says 'secondary rate limit' waits the documented minute.",
        config: Config::for_profile(HeaderProfile::GitHub),
        script: Script::new()
            .enqueue(0, "POST", "/repos/octo/hello/issues")
            .respond(100 * MS, 1, 403, &[("retry-after", "30"), ("x-ratelimit-remaining", "4000"), ("x-ratelimit-resource", "core")])
            .enqueue(200 * MS, "GET", "/users/octo")
            .timeout(30_100 * MS)
            .respond(30_200 * MS, 2, 403, &[("x-ratelimit-remaining", "3999"), ("x-ratelimit-resource", "core")])
            .respond_body(30_300 * MS, 1, 403, &[("x-ratelimit-remaining", "3998")],
                json!({"errors": ["You have exceeded a secondary rate limit. Please wait before trying again."]}))
            .timeout(90_300 * MS),
    });
    let graphql = "/admin/api/2024-01/graphql.json";
    let cost = |requested: f64, actual: Option<f64>, available: f64| json!({
        "requested": requested, "actual": actual, "maximum_available": 1000.0,
        "currently_available": available, "restore_rate": 50.0,
    });
    v.push(Case {
        file: "shopify",
        comment: "Shopify. REST: X-Shopify-Shop-Api-Call-Limit 39/40 leaves one call, and the bucket leaks 2 per \
                  second, so after that call (40/40) the next waits the 20 s the bucket takes to empty. GraphQL: \
                  the body's cost (101 of 954 points) allows 9 queries like it; a 200 that says THROTTLED is \
                  retried when the bucket is whole again.",
        config: Config::for_profile(HeaderProfile::Shopify),
        script: Script::new()
            .enqueue(0, "GET", "/admin/api/2024-01/products.json")
            .enqueue(0, "GET", "/admin/api/2024-01/products.json")
            .enqueue(0, "GET", "/admin/api/2024-01/products.json")
            .respond(100 * MS, 1, 200, &[("X-Shopify-Shop-Api-Call-Limit", "39/40")])
            .respond(200 * MS, 2, 200, &[("X-Shopify-Shop-Api-Call-Limit", "40/40")])
            .timeout(20_200 * MS)
            .enqueue(20_300 * MS, "POST", graphql)
            .respond_body(20_400 * MS, 4, 200, &[], json!({"cost": cost(101.0, Some(46.0), 954.0)}))
            .enqueue(20_500 * MS, "POST", graphql)
            .respond_body(20_600 * MS, 5, 200, &[], json!({"cost": cost(101.0, None, 50.0), "errors": ["Throttled", "THROTTLED"]}))
            .timeout(39_600 * MS),
    });
    v.push(Case {
        file: "auto_detect",
        comment: "Auto: one limiter for several APIs; each answer is read with the profile its headers name. \
                  OpenAI-style headers with tokens spent hold /v1/chat/completions 20 s; an Anthropic answer on \
                  /v1/messages leaves requests; an unknown API's plain X-RateLimit-Reset 5 is read as seconds.",
        config: Config::for_profile(HeaderProfile::Auto),
        script: Script::new()
            .enqueue(0, "POST", chat).enqueue(0, "POST", chat)
            .enqueue(0, "POST", "/v1/messages").enqueue(0, "POST", "/v1/messages")
            .enqueue(0, "GET", "/other/thing").enqueue(0, "GET", "/other/thing")
            .respond(100 * MS, 1, 200, &openai("10", "1s", "0", "20s"))
            .respond_wall(100 * MS, 3, 200, &[("anthropic-ratelimit-requests-remaining", "4"),
                ("anthropic-ratelimit-requests-reset", "2025-08-21T12:41:05Z")], wall)
            .respond(100 * MS, 5, 200, &[("X-RateLimit-Limit", "1"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "5")])
            .timeout(5_100 * MS)
            .timeout(20_100 * MS),
    });

    // 35. The answer lead is taken from the uplinks of requests sent alone, not a burst's.
    // The server's clock is in the answers (X-RateLimit-Reset beside Reset-After): 1.8e12 ms
    // at t = 0, so an answer stamped at t says Reset = 1_800_000_000 + (t + reset_after) / 1000.
    let stamped = |limit: u32, at_ms: u64, reset_after_ms: u64, bucket: &str| {
        let mut v = h(limit, limit - 1, &format!("{}", reset_after_ms as f64 / 1000.0), bucket);
        let reset_ms = 1_800_000_000_000 + at_ms + reset_after_ms;
        v.push(("X-RateLimit-Reset".into(), format!("{}.{:03}", reset_ms / 1000, reset_ms % 1000)));
        v
    };
    let mut script = Script::new();
    for i in 1..=10u64 {
        script = script.enqueue(0, "GET", &format!("/channels/10000000000000010{}/messages", i - 1));
    }
    let reaction = "/channels/100000000000000001/messages/200000000000000001/reactions/x/@me";
    for _ in 0..11 {
        script = script.enqueue(0, "PUT", reaction);
    }
    // The burst's uplinks are 10 to 23.5 ms (the client's own writes spread them), each answer
    // read 10 ms after its stamp; the reaction pioneer (id 11) goes with them.
    let mut answers: Vec<_> = (1..=10u64)
        .map(|i| {
            let up = 10 + (i - 1) * 3 / 2;
            (up + 10, i, stamped(5, up, 5_000, &format!("ch{i}")))
        })
        .collect();
    answers.push((20, 11, stamped(1, 10, 40, "react")));
    answers.sort_by_key(|&(at, id, _)| (at, id));
    for (at, id, headers) in &answers {
        script = script.respond(at * MS, *id, 200, &refs(headers));
    }
    // Each later reaction goes alone, at a timeout 100 ms after the one before (later than the
    // engine asks for), 10 ms up and 10 ms down: its answer's wait shows the lead.
    let mut sent = 0;
    for id in 12..=21u64 {
        sent += 100;
        script = script.timeout(sent * MS).respond((sent + 20) * MS, id, 200, &refs(&stamped(1, sent + 10, 40, "react")));
    }
    // 33. defer_after: instead of waiting, fail at once with the predicted send time.
    let mut c = discord_config();
    c.max_wait = Some(60 * S);
    c.defer_after = Some(2 * S);
    let ch_a = "/channels/100000000000000001/messages";
    let ch_b = "/channels/100000000000000002/messages";
    let ch_c = "/channels/100000000000000003/messages";
    v.push(Case {
        file: "defer_after",
        comment: "defer_after (config default 2 s, max_wait 60 s): with channel A's bucket spent until ~5.1 s, a \
                  new request fails at once with deferred and retry_at_ns, the predicted send time (5.1 s); one \
                  with its own defer_after_ns of 10 s waits; one with defer_after_ns 10 s and a deadline of 3 s, \
                  predicted behind it at 10.2 s, fails with deadline_exceeded (the deadline wins: a retry then \
                  would be no use). New knowledge \
                  while queued: a 429 with Retry-After 30 on channel B's pioneer makes its queued follower (10 s \
                  budget) hopeless, and it fails at once with deferred and retry_at_ns 30.4 s; the pioneer itself, \
                  requeued for the retry, is deferred too (the config's 2 s). A request still queued when its \
                  budget passes (behind channel C's unanswered pioneer) fails 1 ns later with deferred, retry_at_ns \
                  no earlier than that moment.",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", ch_a)
            .respond(100 * MS, 1, 200, &refs(&h(1, 0, "5", "defer_a")))
            .enqueue(200 * MS, "POST", ch_a)
            .enqueue_with(200 * MS, json!({"method": "POST", "path": ch_a, "defer_after_ns": 10 * S}))
            .enqueue_with(200 * MS, json!({"method": "POST", "path": ch_a, "defer_after_ns": 10 * S, "deadline_ns": 3 * S}))
            .enqueue(300 * MS, "POST", ch_b)
            .enqueue_with(300 * MS, json!({"method": "POST", "path": ch_b, "defer_after_ns": 10 * S}))
            .respond_body(400 * MS, 5, 429, &[("Retry-After", "30"), ("X-RateLimit-Limit", "1"),
                ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "30"), ("X-RateLimit-Bucket", "defer_b"),
                ("X-RateLimit-Scope", "user")], json!({"retry_after": 30.0}))
            .enqueue(500 * MS, "POST", ch_c)
            .enqueue_with(500 * MS, json!({"method": "POST", "path": ch_c, "defer_after_ns": 1 * S}))
            .timeout(1500 * MS + 1)
            .timeout(5100 * MS)
            .respond(5200 * MS, 3, 200, &refs(&h(1, 0, "5", "defer_a"))),
    });

    v.push(Case {
        file: "answer_lead_alone",
        comment: "Answers that tell the server's clock time a window's next request to arrive just after its end \
                  (the answer lead), once the uplinks of requests sent alone are steady. A burst of 10 GETs and a \
                  reaction go at once, their uplinks 10 to 23.5 ms apart as a busy client's writes spread them; \
                  then reactions go alone, 1 per 50 ms window, each uplink 10 ms. From the 8th sample of a request \
                  sent alone (the 7th alone reaction, id 18), the burst is left out of the uplinks' spread and the \
                  next reaction waits 18 ms less than the reported reset (its round trip, 20 ms, less the 2 ms \
                  reading allowance). Counting the burst, the uplinks looked unsteady and every reaction waited \
                  for the reported reset.",
        config: discord_config(),
        script,
    });

    // 35b. A slow cluster at the top of a burst's uplinks does not keep the lead away when
    // enough uplinks below it are steady.
    let mut script = Script::new();
    for i in 0..42u64 {
        script = script.enqueue(0, "GET", &format!("/channels/1000000000000002{i:02}/messages"));
    }
    for _ in 0..5 {
        script = script.enqueue(0, "PUT", reaction);
    }
    // A client busy starting writes them 0 to 6 ms after the sends (so the round trips from
    // the sends are unsteady and give no lead of their own); 36 take 10 to 11.1 ms up, the 6
    // written last 16 to 17 ms (a server still busy with the others). Each answer is read 10 ms
    // after its stamp. The reaction pioneer (id 43) leaves at once, uplink 10 ms. (47
    // requests: within Discord's global 50 per second.)
    let left_ms = |i: u64| if i <= 36 { i % 6 } else { 6 };
    let mut writes: Vec<u64> = (1..=42u64).filter(|&id| left_ms(id) > 0).collect();
    writes.sort_by_key(|&id| (left_ms(id), id));
    for id in writes {
        script = script.written(left_ms(id) * MS, id);
    }
    let mut answers: Vec<_> = (1..=42u64)
        .map(|i| {
            let up_us = if i <= 36 { 10_000 + (i - 1) * 30 } else { 16_000 + (i - 37) * 200 };
            let at_ms = (left_ms(i) * 1000 + up_us).div_ceil(1000);
            (at_ms + 10, i, stamped(5, at_ms, 5_000, &format!("dense{i}")))
        })
        .collect();
    answers.push((20, 43, stamped(1, 10, 40, "react")));
    answers.sort_by_key(|&(at, id, _)| (at, id));
    for (at, id, headers) in &answers {
        script = script.respond(at * MS, *id, 200, &refs(headers));
    }
    let mut sent = 0;
    for id in 44..=47u64 {
        sent += 100;
        script = script.timeout(sent * MS).respond((sent + 20) * MS, id, 200, &refs(&stamped(1, sent + 10, 40, "react")));
    }
    v.push(Case {
        file: "answer_lead_dense",
        comment: "The answer lead where the first burst's uplinks have a slow top: 42 GETs and a reaction go at \
                  once, written 0 to 6 ms after the sends (so the round trips from the sends give no lead); 36 \
                  uplinks lie within 1.1 ms of the fastest (10 ms, by the millisecond-rounded headers 10 to 12 ms), \
                  the 6 written last are 6-7 ms slower (a server still busy with the others); each answer is read 10 \
                  ms after its stamp. Then reactions go alone, 1 per 50 ms window, uplink 10 ms. The fastest nine \
                  tenths look unsteady, the fastest three quarters (33 of 44 samples, at least 32) do not: from the 2nd \
                  sample of a request sent alone (id 44; the burst's first was alone), each next reaction waits \
                  13.6 ms less than the reported reset: its round trip (20 ms) less the reading allowance (2 ms) and \
                  the nine tenths' spread weighted by the samples (6 ms x 32 / 44). Before, every reaction waited \
                  for the reported reset until 8 samples of requests sent alone were in.",
        config: discord_config(),
        script,
    });

    // 35. Costs in several dimensions (issue 17 item 1).
    let tokens = |rem_req: &'static str, rem_tok: &'static str, reset_tok: &'static str| {
        vec![
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", rem_req),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "10000"),
            ("x-ratelimit-remaining-tokens", rem_tok),
            ("x-ratelimit-reset-tokens", reset_tok),
        ]
    };
    let costing = |n: u64| json!({"method": "POST", "path": chat, "costs": {"tokens": n}});
    let usage = |n: u64| json!({"usage": {"prompt_tokens": n / 2, "completion_tokens": n - n / 2, "total_tokens": n}});
    v.push(Case {
        file: "costs",
        comment: "Costs: four requests with token estimates (3000, 3000, 3000, 2000) against 10000 tokens per 6 s. \
                  The pioneer's answer leaves 6000 tokens and says (usage.total_tokens) that it cost 4000. Estimates \
                  are charged at a margin, here the prior (2 before any answer, less 1/8 per answer settled) above \
                  the ratios seen: request 2 is charged 5625 and goes; request 3 (5625 more) waits for the tokens' \
                  reset at 6.1 s. Request 2's answer reports 3000 left (and a reset at 6.2 s). Then 3 and 4 go \
                  (charged 5250 and 3500). A request estimating \
                  20000 tokens, more than the limit, fails at once with insufficient_capacity. One without costs is \
                  not held by the tokens. Request 3 meets a 429 (retry-after-ms 400, 4000 tokens left): its charge comes back \
                  and its queue waits until 6.7 s (the refusal is a budget's: the queue holds for the server's wait, and \
                  its bucket, which no header describes, learns no limit from it); then the \
                  4000 tokens the 429 reported are too few for its charge (6000), so it waits for their reset at 12.4 s \
                  (the latest end reported), and its answer settles at 2500. (The reports' resets, 6 s whatever the \
                  tokens left, are no refilling bucket's: the engine reads these tokens as a window.)",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue_with(0, costing(3000))
            .enqueue_with(0, costing(3000))
            .enqueue_with(0, costing(3000))
            .enqueue_with(0, costing(2000))
            .respond_body(100 * MS, 1, 200, &tokens("59", "6000", "6s"), usage(4000))
            .respond_body(200 * MS, 2, 200, &tokens("58", "3000", "6s"), usage(3000))
            .timeout(6_100 * MS)
            .timeout(6_200 * MS)
            .enqueue_with(6_250 * MS, costing(20_000))
            .enqueue(6_260 * MS, "POST", chat)
            .respond(6_300 * MS, 3, 429, &[tokens("58", "4000", "6s"), vec![("retry-after-ms", "400")]].concat())
            .respond_body(6_350 * MS, 4, 200, &tokens("57", "8000", "6s"), usage(2000))
            .respond(6_400 * MS, 6, 200, &tokens("56", "7900", "6s"))
            .timeout(6_700 * MS)
            .timeout(12_400 * MS)
            .respond_body(12_500 * MS, 3, 200, &tokens("59", "7500", "6s"), usage(2500)),
    });
    v.push(Case {
        file: "costs_insufficient",
        comment: "Costs: a request estimating more tokens than the limit fails with insufficient_capacity (its \
                  dimension, cost and limit) as soon as an answer reports the limit, here the pioneer's; costs \
                  that name requests, a malformed dimension or the same one twice are caller errors.",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue_with(0, costing(500))
            .enqueue_with(0, costing(50_000))
            .enqueue_with(0, costing(700))
            .respond_body(100 * MS, 1, 200, &tokens("59", "9500", "6s"), usage(500))
            .enqueue_with(200 * MS, json!({"method": "POST", "path": chat, "costs": {"requests": 1}}))
            .enqueue_with(200 * MS, json!({"method": "POST", "path": chat, "costs": {"Tokens": 1}}))
            .enqueue_with(200 * MS, json!({"method": "POST", "path": chat, "costs": {"": 1}})),
    });
    let mut c = Config::for_profile(HeaderProfile::OpenAi);
    c.defer_after = Some(2_000 * MS);
    let deferring = |n: u64, defer_s: u64| {
        json!({"method": "POST", "path": chat, "costs": {"tokens": n}, "defer_after_ns": defer_s * 1_000 * MS})
    };
    v.push(Case {
        file: "costs_predict",
        comment: "Costs in predictions: after the pioneer's answer (1000 tokens left until 6.1 s; estimates charged \
                  at the prior of 1.875 after one answer), a request estimating 400 tokens can go now and one \
                  estimating 600 only at the reset; with defer_after 2 s the latter is deferred to 6.1 s, the former \
                  sent. Requests estimating 4000 (charged 7500 of 10000 per 6 s window) go one per window: with a \
                  20 s budget the first three wait (6.1, 12.1, 18.1 s), the fourth is deferred to 24.1 s.",
        config: c,
        script: Script::new()
            .enqueue_with(0, costing(3000))
            .respond_body(100 * MS, 1, 200, &tokens("59", "1000", "6s"), usage(3000))
            .predict_with(200 * MS, costing(400))
            .predict_with(200 * MS, costing(600))
            .enqueue_with(300 * MS, costing(600))
            .enqueue_with(300 * MS, costing(400))
            .enqueue_with(400 * MS, deferring(4000, 20))
            .enqueue_with(400 * MS, deferring(4000, 20))
            .enqueue_with(400 * MS, deferring(4000, 20))
            .enqueue_with(400 * MS, deferring(4000, 20)),
    });
    let anthropic = |rem_in: &'static str, rem_out: &'static str| {
        vec![
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "2025-08-21T12:41:01Z"),
            ("anthropic-ratelimit-input-tokens-limit", "20000"),
            ("anthropic-ratelimit-input-tokens-remaining", rem_in),
            ("anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:41:30Z"),
            ("anthropic-ratelimit-output-tokens-limit", "4000"),
            ("anthropic-ratelimit-output-tokens-remaining", rem_out),
            ("anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:20Z"),
        ]
    };
    let message = |input: u64, output: u64| {
        json!({"method": "POST", "path": "/v1/messages", "costs": {"input_tokens": input, "output_tokens": output}})
    };
    v.push(Case {
        file: "costs_anthropic",
        comment: "Costs in two budgets (Anthropic's input and output tokens, RFC 3339 resets read against the \
                  answer's wall clock). The pioneer's answer leaves 18000 input and 2000 output tokens and its body \
                  (usage.input_tokens, usage.output_tokens) settles it: both cost twice their estimates. The next \
                  request, charged at that ratio (2000 in, 1400 out), goes; the one after would need 1400 output \
                  tokens of the 600 left, so it waits for the output tokens' reset (12:41:20Z, 20 s after the \
                  answers), though the input tokens have room. Request 2's answer reports 1300 left: still too few for \
                  its charge (1750: the worst ratio, 2, widened by the spread of the two seen). \
                  At 20.2 s it goes.",
        config: Config::for_profile(HeaderProfile::Anthropic),
        script: Script::new()
            .enqueue_with(0, message(1000, 500))
            .enqueue_with(0, message(1000, 700))
            .enqueue_with(0, message(1000, 700))
            .respond_body_wall(100 * MS, 1, 200, &anthropic("18000", "2000"), json!({"usage": {"input_tokens": 2000, "output_tokens": 1000}}), wall)
            .respond_body_wall(200 * MS, 2, 200, &anthropic("17000", "1300"), json!({"usage": {"input_tokens": 1000, "output_tokens": 700}}), wall)
            .timeout(20_200 * MS),
    });
    v.push(Case {
        file: "costs_insufficient_429",
        comment: "Costs: the first request estimates 5000 tokens where the limit is 1000, which no answer has \
                  reported yet; its 429 (retry-after-ms 60000) reports it: the request fails with \
                  insufficient_capacity at once instead of waiting a minute to be retried, and so does the \
                  request queued behind it (3000), while one of 400 goes.",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue_with(0, costing(5000))
            .enqueue_with(0, costing(3000))
            .enqueue_with(0, costing(400))
            .respond(100 * MS, 1, 429, &[
                ("x-ratelimit-limit-requests", "60"),
                ("x-ratelimit-remaining-requests", "59"),
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-limit-tokens", "1000"),
                ("x-ratelimit-remaining-tokens", "1000"),
                ("x-ratelimit-reset-tokens", "0s"),
                ("retry-after-ms", "60000"),
            ]),
    });
    let mut c = Config::for_profile(HeaderProfile::OpenAi);
    c.shared = Some(SharedConfig::with_policy(OnUnavailable::FailOpen));
    v.push(Case {
        file: "costs_shared_mode",
        comment: "Costs in shared mode: the store counts 2 live processes, so this one keeps to half of each token \
                  budget. After the pioneer's answer (8000 of 10000 tokens left), a request estimating 2000 (charged \
                  3750 at the prior after one answer) fits in its half (4000) and is reserved; the next one (also \
                  3750) does not, and waits for the tokens' reset at 6.1 s, where it would have gone alone.",
        config: c,
        script: Script::new()
            .enqueue_with(0, costing(1000))
            .granted_processes(2 * MS, 1, 2)
            .respond_body(100 * MS, 1, 200, &tokens("59", "8000", "6s"), usage(1000))
            .enqueue_with(110 * MS, costing(2000))
            .enqueue_with(110 * MS, costing(2000))
            .granted_processes(112 * MS, 2, 2),
    });

    // Per-model budgets (issue 42 item 2): the request's model keys its queue under the LLM profiles.
    let model = |m: &str, n: u64| json!({"method": "POST", "path": chat, "model": m, "costs": {"tokens": n}});
    v.push(Case {
        file: "costs_models",
        comment: "Per-model budgets: under the OpenAI profile a request's model is its major parameter, so two \
                  models never share a queue or a token budget. gpt-a and gpt-b each send a pioneer at once; \
                  gpt-a's second request waits for its own pioneer, whose answer leaves 1000 tokens (too few for \
                  its charge, 5625), so it waits for gpt-a's reset at 6.1 s, while gpt-b's second request goes as \
                  soon as gpt-b's pioneer reports 7000 left. An explicit major wins over the model (it queues \
                  with gpt-a's major \"gpt-a\"); an empty model is a caller error.",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue_with(0, model("gpt-a", 3000))
            .enqueue_with(0, model("gpt-a", 3000))
            .enqueue_with(0, model("gpt-b", 3000))
            .respond_body(100 * MS, 1, 200, &tokens("59", "1000", "6s"), usage(3000))
            .enqueue_with(150 * MS, model("gpt-b", 3000))
            .respond_body(200 * MS, 3, 200, &tokens("59", "7000", "6s"), usage(3000))
            .enqueue_with(250 * MS, json!({"method": "POST", "path": "/v1/chat/completions", "major": "gpt-a", "model": "gpt-b", "costs": {"tokens": 10}}))
            .enqueue_with(260 * MS, model("", 10))
            .timeout(6_100 * MS),
    });

    // Budgets that refill continuously (issue 42 item 1): OpenAI's tokens and requests, a
    // bucket of 6000 tokens refilling in 6 s (a token per ms) and 60 requests per 6 s.
    let refilling = |req_left: u64, tok_left: u64| {
        let ms = |missing: u64, per_unit_ms: u64| format!("{}ms", missing * per_unit_ms);
        vec![
            ("x-ratelimit-limit-requests".to_string(), "60".to_string()),
            ("x-ratelimit-remaining-requests".to_string(), req_left.to_string()),
            ("x-ratelimit-reset-requests".to_string(), ms(60 - req_left, 100)),
            ("x-ratelimit-limit-tokens".to_string(), "6000".to_string()),
            ("x-ratelimit-remaining-tokens".to_string(), tok_left.to_string()),
            ("x-ratelimit-reset-tokens".to_string(), ms(6000 - tok_left, 1)),
        ]
    };
    let owned = |h: Vec<(String, String)>| -> Vec<(&'static str, &'static str)> {
        h.into_iter().map(|(k, v)| (&*Box::leak(k.into_boxed_str()), &*Box::leak(v.into_boxed_str()))).collect()
    };
    v.push(Case {
        file: "costs_refill",
        comment: "Budgets that refill continuously (OpenAI: each reset is the time until the budget is full again): \
                  6000 tokens refilling in 6 s, estimates 1000, 1000, 3000, 3000. The pioneer's answer leaves 5000 \
                  (reset 1 s): one report is not yet a rate, so the tokens read as a window: request 2 (charged 1875 \
                  at the prior) goes, request 3 (5625) would wait for the reset at 1.1 s. Request 2's answer leaves 4100 \
                  (reset 1.9 s): two reports of different depths agree on a period of about 6 s (each bounds it from \
                  above; the least bound, 6.006 s, gives the rate), so what is left refills from there: request 3, \
                  now charged 5250 (the prior after two answers, 1.75), waits only until the 1150 tokens it lacks \
                  have refilled (1.351 s), not for the reset. Request 4 (5250) waits for an answer: even a full \
                  bucket does not hold it beside request 3's charge in flight. A prediction at 1.4 s behind it counts \
                  both charges at the rate (8.358 s). Request 3's answer (2000 left, usage 3000) caps the level at what \
                  it reports plus what refilled since the request left (2148); request 4, now charged 4875 (the prior \
                  after three answers), goes once the rest has refilled (4.228 s).",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue_with(0, costing(1000))
            .enqueue_with(0, costing(1000))
            .enqueue_with(0, costing(3000))
            .enqueue_with(0, costing(3000))
            .respond_body(100 * MS, 1, 200, &owned(refilling(59, 5000)), usage(1000))
            .respond_body(200 * MS, 2, 200, &owned(refilling(58, 4100)), usage(1000))
            .timeout(1_352 * MS)
            .predict_with(1_400 * MS, costing(1000))
            .respond_body(1_500 * MS, 3, 200, &owned(refilling(57, 2000)), usage(3000))
            .timeout(4_229 * MS),
    });

    v.push(Case {
        file: "costs_snapshot",
        comment: "Snapshots carry the cost budgets and margins (issue 42 item 5). As costs_refill: after two answers the \
                  tokens are known to refill in about 6 s, 4100 left at 200 ms; a request of 3000 (charged 5250 at the \
                  prior after two answers, 1.75) waits for the 1150 it lacks. The snapshot at 300 ms keeps the margin's \
                  two ratios and the budget (limit 6000, period 6.006 s, 4100 + 100 refilled - nothing in flight = \
                  4199 left; the request count too, 58 left). The process restarts and restores it 200 ms later: its \
                  first request (estimate 3000) is charged 5250 again, not twice its estimate, and waits for what the \
                  budget lacks (5250 - 4399: 852 ms) although no answer of its own told it anything.",
        config: Config::for_profile(HeaderProfile::OpenAi),
        script: Script::new()
            .enqueue_with(0, costing(1000))
            .enqueue_with(0, costing(1000))
            .respond_body(100 * MS, 1, 200, &owned(refilling(59, 5000)), usage(1000))
            .respond_body(200 * MS, 2, 200, &owned(refilling(58, 4100)), usage(1000))
            .enqueue_with(250 * MS, costing(3000))
            .snapshot(300 * MS, wall0 + 300)
            .restart(10 * S)
            .restore(10 * S, wall0 + 500, None)
            .enqueue_with(10 * S, costing(3000))
            .timeout(10 * S + 853 * MS),
    });

    // A window rolls when its next request goes, and a report counts an answer from before the
    // local reset once.
    let messages = |remaining: &'static str, reset_after: &'static str| {
        [
            ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", remaining),
            ("X-RateLimit-Reset-After", reset_after), ("X-RateLimit-Bucket", "msgs"),
        ]
    };
    let mut c = discord_config();
    c.global_limit = 5;
    v.push(Case {
        file: "window_rolls_at_dispatch",
        comment: "global_limit 5. Channel 1's six messages (ids 1-6) wait for its pioneer, then for the global \
                  budget, which four other channels' pioneers fill; meanwhile channel 1's window (5 per 500 ms) \
                  resets locally. When the budget frees (1.3 s), 2 and 3 go in the next window, though the \
                  queue waited for the budget and was not evaluated again: their reports (4, then 3 left) \
                  describe that window, so 4, 5 and 6 go together when the budget frees again. (Sent in the \
                  old window, 2's answer was kept as a ghost and counted twice, and 6 waited for the reset.)",
        config: c,
        script: Script::new()
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .enqueue(0, "POST", "/channels/100000000000000002/messages")
            .enqueue(200 * MS, "POST", "/channels/100000000000000003/messages")
            .enqueue(200 * MS, "POST", "/channels/100000000000000004/messages")
            .enqueue(250 * MS, "POST", "/channels/100000000000000005/messages")
            .respond(300 * MS, 1, 200, &messages("4", "0.5"))
            .respond(300 * MS, 7, 200, &messages("4", "0.5"))
            .respond(300 * MS, 8, 200, &messages("4", "0.5"))
            .respond(300 * MS, 9, 200, &messages("4", "0.5"))
            .respond(300 * MS, 10, 200, &messages("4", "0.5"))
            .timeout(1_305 * MS)
            .respond(1_315 * MS, 2, 200, &messages("4", "0.5"))
            .respond(1_320 * MS, 3, 200, &messages("3", "0.495"))
            .timeout(1_505 * MS)
            .respond(1_515 * MS, 4, 200, &messages("2", "0.3"))
            .respond(1_516 * MS, 5, 200, &messages("1", "0.299"))
            .respond(1_517 * MS, 6, 200, &messages("0", "0.298"))
            .timeout(1_900 * MS),
    });
    // The pioneer's window (5 per 500 ms) ends locally at 510 ms; 2 goes at 500 ms, before it,
    // reaches the server in the next window and is answered after the local reset (a ghost).
    let straddling = || {
        Script::new()
            .enqueue(0, "POST", "/channels/100000000000000001/messages")
            .respond(10 * MS, 1, 200, &messages("4", "0.5"))
            .enqueue(500 * MS, "POST", "/channels/100000000000000001/messages")
            .enqueue(515 * MS, "POST", "/channels/100000000000000001/messages")
    };
    v.push(Case {
        file: "ghost_counted_once",
        comment: "2 goes at 500 ms, before the local reset (510 ms), and its answer (520 ms) is kept as a ghost: \
                  it may have been counted in either window. 3 went before that answer, so its report (3 left) \
                  may not count 2, and the ghost holds a slot. 4 goes after it, and its report (2 left) counts 2 \
                  (it arrived first): the ghost is dropped, and 5 and 6 both go at 545 ms. (Counting 2 again \
                  held 6 until the reset.)",
        config: discord_config(),
        script: straddling()
            .respond(520 * MS, 2, 200, &messages("4", "0.5"))
            .respond(525 * MS, 3, 200, &messages("3", "0.48"))
            .enqueue(530 * MS, "POST", "/channels/100000000000000001/messages")
            .respond(540 * MS, 4, 200, &messages("2", "0.465"))
            .enqueue(545 * MS, "POST", "/channels/100000000000000001/messages")
            .enqueue(545 * MS, "POST", "/channels/100000000000000001/messages")
            .respond(555 * MS, 5, 200, &messages("1", "0.45"))
            .respond(556 * MS, 6, 200, &messages("0", "0.449"))
            .timeout(1_100 * MS),
    });
    v.push(Case {
        file: "ghost_counted_once_written",
        comment: "As ghost_counted_once, but 4 is let go at 518 ms, before 2's answer (520 ms), and written at \
                  522 ms, after it (reported through handle_written): it reached the server after 2, so its \
                  report counts 2, and 5 and 6 both go at 545 ms.",
        config: discord_config(),
        script: straddling()
            .enqueue(518 * MS, "POST", "/channels/100000000000000001/messages")
            .respond(520 * MS, 2, 200, &messages("4", "0.5"))
            .written(522 * MS, 4)
            .respond(525 * MS, 3, 200, &messages("3", "0.48"))
            .respond(532 * MS, 4, 200, &messages("2", "0.473"))
            .enqueue(545 * MS, "POST", "/channels/100000000000000001/messages")
            .enqueue(545 * MS, "POST", "/channels/100000000000000001/messages")
            .respond(555 * MS, 5, 200, &messages("1", "0.45"))
            .respond(556 * MS, 6, 200, &messages("0", "0.449"))
            .timeout(1_100 * MS),
    });

    // First contact (`ratelane::limiter::contact`): a probe of an unknown route counts in flight
    // in every learned bucket of its major parameter until its answer names its own.
    let message = "/channels/100000000000000001/messages/200000000000000001";
    v.push(Case {
        file: "first_contact_probe_charge",
        comment: "POST and DELETE of channel 1 are both unknown: their probes go at once. POST's answer names \
                  bucket 'shared' with 2 left; DELETE's probe is still out and may count there too, so one more \
                  POST goes, not two. DELETE's answer names 'shared' as well (0 left): the third POST waits for \
                  the reset.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1).enqueue(0, "POST", ch1).enqueue(0, "POST", ch1)
            .enqueue(0, "DELETE", message)
            .respond(100 * MS, 1, 200, &refs(&h(3, 2, "3", "shared")))
            .respond(110 * MS, 4, 200, &refs(&h(3, 0, "2.99", "shared")))
            .respond(120 * MS, 2, 200, &refs(&h(3, 0, "2.98", "shared")))
            .timeout(3_110 * MS),
    });
    v.push(Case {
        file: "first_contact_probe_waits",
        comment: "Channel 1's POST bucket is learned and spent (0 left, reset in 1 s). DELETE's route is unknown \
                  and may share it: its probe waits for that reset instead of going at once; channel 2's DELETE \
                  has no learned bucket beside it and goes at once.",
        config: discord_config(),
        script: Script::new()
            .enqueue(0, "POST", ch1)
            .respond(100 * MS, 1, 200, &refs(&h(1, 0, "1", "posts")))
            .enqueue(200 * MS, "DELETE", message)
            .enqueue(210 * MS, "DELETE", "/channels/100000000000000002/messages/200000000000000002")
            .timeout(1_100 * MS)
            .respond(1_150 * MS, 2, 200, &refs(&h(5, 4, "5", "deletes"))),
    });

    v
}
