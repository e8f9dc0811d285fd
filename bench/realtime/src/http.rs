//! The imitation over real HTTP/1.1, and the reference client.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming as Body};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use ratelane::Nanos;
use ratelane_realtime::imitation::{Imitation, Incoming, Tally};
use ratelane_realtime::limits::Limits;
use ratelane_realtime::score::{ClientReport, Outcome};
use ratelane_realtime::workload::{TOKEN, Workload};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One run's server state: a fresh imitation and the instant its time 0 stands for.
struct Run {
    imitation: Mutex<Imitation>,
    epoch: Instant,
}

/// The server: the limits, and the run in progress (swapped between runs).
pub struct Server {
    limits: Limits,
    run: Mutex<Arc<Run>>,
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn fresh(limits: &Limits) -> Arc<Run> {
    Arc::new(Run {
        imitation: Mutex::new(Imitation::new(limits, wall_ms())),
        epoch: Instant::now(),
    })
}

impl Server {
    /// Binds 127.0.0.1 on a free port and serves until the process ends; returns the server
    /// and its port.
    pub async fn start(limits: Limits) -> std::io::Result<(Arc<Server>, u16)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let server = Arc::new(Server {
            run: Mutex::new(fresh(&limits)),
            limits,
        });
        let accept = Arc::clone(&server);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let server = Arc::clone(&accept);
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let server = Arc::clone(&server);
                        async move { Ok::<_, Infallible>(server.answer(req).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok((server, port))
    }

    /// Starts a new run: fresh limits, time 0 now.
    pub fn reset(&self) {
        *self.run.lock().expect("run lock") = fresh(&self.limits);
    }

    /// The accounting of the run in progress.
    pub fn tally(&self) -> Tally {
        let run = Arc::clone(&self.run.lock().expect("run lock"));
        run.imitation
            .lock()
            .expect("imitation lock")
            .tally()
            .clone()
    }

    /// The arrivals of the run in progress, one CSV line each (time in ms since the run's
    /// start, outcome, status, whether it counted against the global limit, route, major
    /// parameter, `rid`), under a header line.
    pub fn arrivals_csv(&self) -> String {
        let run = Arc::clone(&self.run.lock().expect("run lock"));
        let imitation = run.imitation.lock().expect("imitation lock");
        let mut out = String::from("at_ms,outcome,status,counted_global,route,major,rid\n");
        for (a, rid) in imitation.server().log().iter().zip(imitation.rids()) {
            out.push_str(&format!(
                "{:.3},{:?},{},{},{},{},{}\n",
                a.at as f64 / 1e6,
                a.outcome,
                a.status,
                a.counted_global,
                a.route,
                a.major,
                rid.map_or(String::new(), |r| r.to_string())
            ));
        }
        out
    }

    async fn answer(&self, req: Request<Body>) -> Response<Full<Bytes>> {
        let received = Instant::now();
        let run = Arc::clone(&self.run.lock().expect("run lock"));
        let method = req.method().as_str().to_string();
        let target = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let authorization = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = match req.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let at = received.saturating_duration_since(run.epoch).as_nanos() as Nanos
            + self.limits.latency_request;
        let answer = run.imitation.lock().expect("imitation lock").handle(
            at,
            &Incoming {
                method: &method,
                target: &target,
                authorization: authorization.as_deref(),
                body: &body,
            },
        );
        tokio::time::sleep_until((received + Duration::from_nanos(self.limits.rtt())).into()).await;
        if let Some(key) = &answer.in_flight {
            run.imitation.lock().expect("imitation lock").answered(key);
        }
        // Discord's answers come through Google's front end; discord.py reads a 429 without
        // this header as a Cloudflare ban.
        let mut response = Response::builder()
            .status(answer.status)
            .header("via", "1.1 google");
        for (k, v) in &answer.headers {
            response = response.header(k.as_str(), v.as_str());
        }
        response
            .body(Full::new(Bytes::from(answer.body)))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
    }
}

/// The reference client: sends each request at its planned offset ([`schedule`]), but never
/// before the requests it waits for ([`chains`]) have been answered and `margin` has passed
/// after their arrival plus the window; an arrival is taken as the answer's time less the
/// round trip (never early: the imitation answers exactly one round trip after reading the
/// request). It reports like the other clients.
///
/// [`schedule`]: ratelane_realtime::schedule::schedule
/// [`chains`]: ratelane_realtime::schedule::chains
pub async fn reference(
    base_url: &str,
    workload: &Workload,
    plan: &[Nanos],
    waits: &[Vec<(usize, Nanos)>],
    margin: Nanos,
    rtt: Nanos,
) -> ClientReport {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(usize::MAX)
        .build(connector);
    // Open the connections the first burst needs before time 0 (with log-ins, which the
    // imitation leaves out of the accounting), so the first arrivals are not late by a
    // handshake while later ones are on time.
    let burst = plan.iter().filter(|&&o| o == 0).count().max(1);
    let warm: Vec<_> = (0..burst)
        .map(|_| {
            let client = client.clone();
            let uri = format!("{base_url}/users/@me");
            tokio::spawn(async move {
                let request = Request::builder()
                    .uri(uri)
                    .header("authorization", format!("Bot {TOKEN}"))
                    .body(Full::new(Bytes::new()));
                if let Ok(request) = request
                    && let Ok(response) = client.request(request).await
                {
                    let _ = response.into_body().collect().await;
                }
            })
        })
        .collect();
    for task in warm {
        let _ = task.await;
    }
    let start = tokio::time::Instant::now();
    let arrivals: Vec<_> = (0..workload.requests.len())
        .map(|_| watch::channel(None::<tokio::time::Instant>))
        .collect();
    let mut tasks = Vec::with_capacity(workload.requests.len());
    for (i, (req, &offset)) in workload.requests.iter().zip(plan).enumerate() {
        let client = client.clone();
        let uri = format!("{base_url}{}?rid={}", req.path, req.rid);
        let method = req.method;
        let body = req.json.as_ref().map(|v| v.to_string());
        let auth = req.auth;
        let rid = req.rid;
        let mine = arrivals[i].0.clone();
        let before: Vec<_> = waits[i]
            .iter()
            .map(|&(j, window)| (arrivals[j].1.clone(), window))
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut at = start + Duration::from_nanos(offset);
            for (mut arrived, window) in before {
                if let Ok(t) = arrived.wait_for(Option::is_some).await
                    && let Some(t) = *t
                {
                    at = at.max(t + Duration::from_nanos(window + margin));
                }
            }
            tokio::time::sleep_until(at).await;
            let mut builder = Request::builder().method(method).uri(uri);
            if auth {
                builder = builder.header("authorization", format!("Bot {TOKEN}"));
            }
            if body.is_some() {
                builder = builder.header("content-type", "application/json");
            }
            let request = builder.body(Full::new(Bytes::from(body.unwrap_or_default())));
            let outcome = match request {
                Ok(request) => match client.request(request).await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let _ = response.into_body().collect().await;
                        let ok = (200..300).contains(&status);
                        (Some(status), (!ok).then(|| format!("HTTP {status}")))
                    }
                    Err(e) => (None, Some(format!("transport: {e}"))),
                },
                Err(e) => (None, Some(format!("request: {e}"))),
            };
            let done = tokio::time::Instant::now();
            let _ = mine.send(Some(
                done.checked_sub(Duration::from_nanos(rtt)).unwrap_or(done),
            ));
            Outcome {
                rid,
                t: Some(done.duration_since(start).as_secs_f64()),
                status: outcome.0,
                error: outcome.1,
            }
        }));
    }
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        if let Ok(outcome) = task.await {
            results.push(outcome);
        }
    }
    ClientReport {
        client: "reference".into(),
        library: "hyper (knows every limit)".into(),
        setup_s: 0.0,
        t0_unix_s: None,
        results,
        store: None,
        loop_lag_ms: None,
    }
}
