//! The real-time Scoreboard: ratelane's drivers and the peers against a Discord imitation over
//! real HTTP, each measured beside the exact bound of the workload and a reference client that
//! reaches it in the same run.
//!
//! Everything that decides a figure is here and tested without a clock:
//! - [`limits`]: Discord's REST limits as the imitation enforces them, scaled in time;
//! - [`imitation`]: what the HTTP server does with a request, on top of [`ratelane::sim::Server`]
//!   (the same model the engine's virtual-time tests use), and the accounting of a run;
//! - [`workload`]: the workloads;
//! - [`schedule`]: the exact lower bound of a workload's makespan and the schedule that
//!   reaches it (the reference client follows it);
//! - [`score`]: the clients' reports and the rows of the Scoreboard;
//! - [`shared`]: shared mode with K processes: the split, the merged report, the store's cost.
//!
//! The HTTP server, the reference client and the orchestrator are in the binary (`src/main.rs`,
//! `src/http.rs`); `README.md` beside this crate says how to run it.

pub mod imitation;
pub mod limits;
pub mod schedule;
pub mod score;
pub mod shared;
pub mod workload;
