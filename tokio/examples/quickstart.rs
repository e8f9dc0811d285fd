use ratelane::{Config, SECOND};
use ratelane_tokio::{RateLimiter, middleware::RateLimitMiddleware};

pub async fn post(api: &str, token: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = Config::default();                       // Discord's defaults
    config.max_wait = Some(30 * SECOND);                      // fail fast past 30 s
    let limiter = RateLimiter::new(config)?;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(RateLimitMiddleware::new(limiter.clone()))      // every call through the limiter
        .build();
    let sent = client
        .post(format!("{api}/channels/123/messages"))
        .header("authorization", format!("Bot {token}"))
        .header("content-type", "application/json")
        .body(r#"{"content": "hi"}"#)
        .send()
        .await;
    match sent {
        Ok(answer) => println!("{}", answer.status()),
        Err(e) => println!("not sent: {e}"),                  // a refusal names the core's code
    }
    limiter.close().await;                                    // queued requests fail with `closed`
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    post("https://discord.com/api/v10", "your bot token").await
}
