//! First contact: what a limiter knows before its first answer. The prior route groups
//! (`Config::route_groups`, `ratelane::prior`), in virtual time against the simulator.

use ratelane::sim::{BucketSpec, Report, RouteSpec, Server, ServerConfig, SimConfig, Simulation, StopReason};
use ratelane::{Config, HeaderProfile, Limiter, MILLISECOND, Observation, Request, SECOND};

const MSG: &str = "/channels/100000000000000001/messages/200000000000000001";
const PUT: &str = "PUT /channels/:id/messages/:id/reactions/:reaction";
const DEL: &str = "DELETE /channels/:id/messages/:id/reactions/:reaction";
const GET: &str = "GET /channels/:id/messages/:id/reactions/:reaction";

/// The three reaction routes on one message: add mine, remove another user's, list.
fn reactions(i: usize) -> Request {
    match i % 3 {
        0 => Request::new("PUT", format!("{MSG}/reactions/%F0%9F%91%8D/@me")),
        1 => Request::new("DELETE", format!("{MSG}/reactions/%F0%9F%91%8D/30000000000000000{}", i % 10)),
        _ => Request::new("GET", format!("{MSG}/reactions/%F0%9F%91%8D")),
    }
}

/// Discord's server with the three reaction routes on one 1-per-250-ms bucket (GET's bucket
/// may be another).
fn reaction_server(get_bucket: &str) -> ServerConfig {
    ServerConfig::discord()
        .bucket("react", BucketSpec::fixed(1, 250 * MILLISECOND))
        .bucket("react-list", BucketSpec::fixed(5, SECOND))
        .route(PUT, RouteSpec::bucket("react"))
        .route(DEL, RouteSpec::bucket("react"))
        .route(GET, RouteSpec::bucket(get_bucket))
}

fn run(limiter: Limiter, server: ServerConfig, requests: impl IntoIterator<Item = Request>) -> (Report, Simulation) {
    let mut sim = Simulation::new(limiter, Server::new(server), SimConfig::default().seed(11));
    for r in requests {
        sim.enqueue_at(0, r);
    }
    let report = sim.run().unwrap_or_else(|e| panic!("the engine broke the driver contract: {e}"));
    assert_eq!(report.stop, StopReason::Finished, "unfinished: {:?}", report.unfinished());
    assert!(report.all_succeeded(), "{:?}", report.requests.iter().map(|r| &r.outcome).collect::<Vec<_>>());
    (report, sim)
}

fn no_prior() -> Config {
    let mut c = Config::default();
    c.route_groups = Vec::new();
    c
}

fn learned(report: &Report, route: &str) -> Vec<String> {
    report
        .observations
        .iter()
        .filter_map(|(_, o)| match o {
            Observation::BucketLearned { route: r, bucket } if r == route => Some(bucket.clone()),
            _ => None,
        })
        .collect()
}

// ------------------------------------------------------------------------------ the prior

#[test]
fn the_prior_sends_one_pioneer_for_the_reaction_routes() {
    let (with, _) = run(Limiter::new(Config::default()).unwrap(), reaction_server("react"), (0..3).map(reactions));
    assert_eq!(with.count_429(), 0, "one pioneer for the three routes");
    let (without, _) = run(Limiter::new(no_prior()).unwrap(), reaction_server("react"), (0..3).map(reactions));
    assert!(without.count_429() >= 1, "three pioneers meet the 1-slot bucket: {}", without.count_429());
    // Every route of the group knows the bucket after the first answer.
    for route in [PUT, DEL, GET] {
        assert_eq!(learned(&with, route), ["react"], "{route}");
    }
}

#[test]
fn the_prior_holds_over_many_windows_and_channels() {
    let mut requests: Vec<Request> = (0..30).map(reactions).collect();
    // A second channel's reactions have their own bucket state (major parameter).
    requests.extend((0..30).map(|i| {
        let mut r = reactions(i);
        r.path = r.path.replace("100000000000000001", "100000000000000002");
        r
    }));
    let (report, _) = run(Limiter::new(Config::default()).unwrap(), reaction_server("react"), requests);
    assert_eq!(report.count_429(), 0);
    assert!(report.known_limit_violations().is_empty());
    // 30 per channel at 1 per 250 ms, both channels side by side: about 7.5 s, not 15.
    assert!(report.makespan() < 9 * SECOND, "{}", report.makespan());
}

#[test]
fn a_wrong_prior_costs_waiting_not_429s() {
    // The server counts GET against a bucket of its own: the group's queue holds it back until
    // its own answer names that bucket, then it moves out (the hash-change machinery).
    let (report, _) = run(Limiter::new(Config::default()).unwrap(), reaction_server("react-list"), (0..30).map(reactions));
    assert_eq!(report.count_429(), 0);
    let get = learned(&report, GET);
    assert_eq!(get.first().map(String::as_str), Some("react"), "adopted from the group first");
    assert_eq!(get.last().map(String::as_str), Some("react-list"), "then its own answer rules");
}

#[test]
fn a_renamed_group_bucket_is_followed() {
    // Discord renames the reaction bucket at 2 s for PUT only: PUT's own answers move it, the
    // others stay on the old hash; nothing is lost and no known limit is broken.
    let server = reaction_server("react").bucket("react2", BucketSpec::fixed(1, 250 * MILLISECOND)).remap(
        2 * SECOND,
        PUT,
        Some("react2"),
    );
    let (report, _) = run(Limiter::new(Config::default()).unwrap(), server, (0..30).map(reactions));
    assert!(report.known_limit_violations().is_empty());
    assert_eq!(learned(&report, PUT), ["react", "react2"]);
    assert_eq!(report.total_sends(), 30 + report.count_429());
}

#[test]
fn route_groups_are_validated() {
    let mut c = Config::default();
    c.route_groups = vec![vec!["GET /a".into()]];
    assert_eq!(Limiter::new(c).unwrap_err().code(), "invalid_config");
    assert!(Config::for_profile(HeaderProfile::Ietf).route_groups.is_empty());
}
