//! discord.js (pinned in tests/discordjs/package.json) with `rest.api` pointed at the proxy, in
//! front of the Discord imitation: a burst at the global cap completes, with no 429 at the
//! server. `scripts/tests.d/50-proxy.sh` installs discord.js and runs it (`--include-ignored`).

mod support;

use std::process::Command;

use support::{Imitation, Proxy, TOKEN, settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs discord.js installed: run scripts/tests.d/50-proxy.sh"]
async fn discordjs_through_the_proxy_takes_no_429_at_the_global_cap() {
    let _serial = support::serial().await;
    let imitation = Imitation::start(50).await;
    let mut proxy = Proxy::start(settings(&imitation.base)).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/discordjs/burst.mjs");
    let api = format!("{}/api", proxy.url());
    // 60 channels x 2 messages: the global limit binds (discord.js keeps its own 50 per second
    // too, counted from when it sends, not from when the proxy does).
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node").args([script, api.as_str(), TOKEN, "60", "2"]).output().expect("node runs")
    })
    .await
    .expect("no panic");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "node failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(report["sent"], 120, "{report}");
    assert_eq!(report["ok"], 120, "{report}");
    let tally = imitation.tally();
    assert_eq!(tally.arrivals, 120, "{tally:?}");
    assert_eq!((tally.global_429, tally.bucket_429), (0, 0), "{tally:?}");
    assert_eq!(tally.duplicates(), 0);
    proxy.shutdown();
    proxy.stopped().await;
}
