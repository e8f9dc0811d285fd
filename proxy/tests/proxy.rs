//! One proxy in front of the Discord imitation: bursts of several tokens at their caps, the
//! answers passed back unchanged, refusals answered as Discord would, /metrics, /healthz, and
//! a graceful shutdown that answers every request it holds.

mod support;

use std::time::Duration;

use support::{Imitation, Proxy, TOKEN, http_client, message_path, settings};

/// Sends `n` messages (over `channels` channels, rids from `first`) with `token` to `base`;
/// returns each answer's status, headers and body, in rid order.
async fn burst(base: &str, token: &str, n: u64, channels: u64, first: u64) -> Vec<(u16, reqwest::header::HeaderMap, String)> {
    let client = http_client();
    let mut tasks = tokio::task::JoinSet::new();
    for rid in first..first + n {
        let (client, url, token) = (client.clone(), format!("{base}{}", message_path(rid % channels, rid)), token.to_string());
        tasks.spawn(async move {
            let answer = client
                .post(url)
                .header("authorization", format!("Bot {token}"))
                .header("content-type", "application/json")
                .body(format!(r#"{{"content": "message {rid}"}}"#))
                .send()
                .await
                .expect("the proxy answers every request");
            let (status, headers) = (answer.status().as_u16(), answer.headers().clone());
            (rid, status, headers, answer.text().await.expect("a body"))
        });
    }
    let mut answers = tasks.join_all().await;
    answers.sort_by_key(|a| a.0);
    answers.into_iter().map(|(_, s, h, b)| (s, h, b)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_of_two_tokens_at_their_caps_take_no_429_and_come_back_unchanged() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut proxy = Proxy::start(settings(&imitation.base)).await;
    let other = "bench-token-2";
    let url = proxy.url();
    let (a, b) = tokio::join!(burst(&url, TOKEN, 120, 60, 0), burst(&url, other, 120, 60, 1000));
    for (status, headers, body) in a.iter().chain(&b) {
        assert_eq!(*status, 200, "{body}");
        // Discord's rate-limit headers come back as the upstream sent them.
        assert!(headers.contains_key("x-ratelimit-bucket") && headers.contains_key("x-ratelimit-remaining"), "{headers:?}");
        assert!(headers.get("via").is_some_and(|v| v == "1.1 google"), "{headers:?}");
    }
    let tally = imitation.tally();
    assert_eq!((tally.global_429, tally.bucket_429), (0, 0), "{tally:?}");
    assert_eq!(tally.arrivals, 240, "{tally:?}");
    assert_eq!(tally.duplicates(), 0);
    // The log-in route's body passes through byte for byte.
    let me = http_client()
        .get(format!("{}/api/v10/users/@me", proxy.url()))
        .header("authorization", format!("Bot {TOKEN}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(me.status(), 200);
    let text = me.text().await.expect("a body");
    assert!(text.starts_with(r#"{"id":"100000000000000000","username":"bench""#), "{text}");
    proxy.shutdown();
    proxy.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_is_answered_as_discord_would() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut s = settings(&imitation.base);
    s.config.global_limit = 2;
    s.config.max_wait = Some(300 * ratelane::MILLISECOND);
    let mut proxy = Proxy::start(s).await;
    let answers = burst(&proxy.url(), TOKEN, 8, 8, 0).await;
    let refused: Vec<_> = answers.iter().filter(|a| a.0 == 429).collect();
    assert_eq!(answers.iter().filter(|a| a.0 == 200).count() + refused.len(), 8);
    assert!(refused.len() >= 4, "two per second, max_wait 300 ms: most are refused at once ({})", refused.len());
    for (_, headers, body) in refused {
        assert_eq!(headers.get("x-ratelane-refused").unwrap(), "max_wait_exceeded");
        assert!(headers.get("retry-after").unwrap().to_str().unwrap().parse::<u64>().unwrap() >= 1);
        let json: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert!(json["retry_after"].as_f64().unwrap() > 0.3, "{json}");
        assert_eq!(json["global"], false);
    }
    // The proxy refused them itself: nothing reached the server that it would refuse.
    assert_eq!(imitation.tally().global_429, 0);
    proxy.shutdown();
    proxy.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut proxy = Proxy::start(settings(&imitation.base)).await;
    let _ = burst(&proxy.url(), TOKEN, 10, 10, 0).await;
    let client = http_client();
    let health = client.get(format!("{}/healthz", proxy.url())).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let metrics = client.get(format!("{}/metrics", proxy.url())).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    for line in [
        r#"ratelane_requests_total{ratelane_outcome="sent"} 10"#,
        r#"ratelane_requests_total{ratelane_outcome="answered"} 10"#,
        "ratelane_wait_duration_seconds_count 10",
        "ratelane_requests_in_flight 0",
        "ratelane_queue_depth 0",
        "ratelane_invalid_requests_used 0",
        "ratelane_store_unavailable_total 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
    }
    proxy.shutdown();
    proxy.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_every_request_it_holds() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut s = settings(&imitation.base);
    s.config.global_limit = 4; // 20 requests: five seconds' worth
    let mut proxy = Proxy::start(s).await;
    let url = proxy.url();
    let sending = tokio::spawn(async move { burst(&url, TOKEN, 20, 20, 0).await });
    // Shut down once the first answers are in (bounded wait).
    for _ in 0..200 {
        if imitation.tally().arrivals >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.shutdown();
    let answers = tokio::time::timeout(Duration::from_secs(20), sending).await.expect("answered").expect("no panic");
    let ok = answers.iter().filter(|a| a.0 == 200).count();
    let closed: Vec<_> = answers.iter().filter(|a| a.0 == 503).collect();
    assert_eq!(ok + closed.len(), 20, "every request has an answer: {:?}", answers.iter().map(|a| a.0).collect::<Vec<_>>());
    assert!(ok >= 4 && !closed.is_empty(), "{ok} answered, {} closed", closed.len());
    for (_, headers, body) in closed {
        assert_eq!(headers.get("x-ratelane-refused").unwrap(), "closed");
        let json: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert_eq!(json["ratelane"], "closed");
    }
    // What the server accepted is what the clients were told was answered.
    assert_eq!(imitation.tally().per_rid.values().filter(|&&(_, ok)| ok > 0).count(), ok);
    proxy.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_stops_on_sigterm_after_answering_what_it_holds() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut process = support::ProxyProcess::start(&["--upstream", &imitation.base, "--global-limit", "4"]);
    let url = process.url();
    let sending = tokio::spawn(async move { burst(&url, TOKEN, 12, 12, 0).await });
    for _ in 0..200 {
        if imitation.tally().arrivals >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid = process.child.id().to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(killed.success());
    let answers = tokio::time::timeout(Duration::from_secs(20), sending).await.expect("answered").expect("no panic");
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert!(statuses.iter().all(|&s| s == 200 || s == 503), "{statuses:?}");
    assert!(statuses.contains(&503), "{statuses:?}");
    let exit = tokio::task::spawn_blocking(move || process.child.wait()).await.unwrap().unwrap();
    assert!(exit.success(), "{exit:?}");
}
