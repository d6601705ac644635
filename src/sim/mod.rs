//! The simulator behind `simulate`: a Deployment of vLLM-like pods under KEDA and the HPA,
//! driven by each policy, so every scaling decision can be tried offline.
//!
//! Rule: the scaler's own policies decide through [`crate::decide::freshness::decide_engine`],
//! the code the server runs on a scraped reading; nothing of the formula is copied here. Uses
//! decide, trigger, source and fake only; the command's flags and output files are in
//! `cli::simulate`. See docs/decisions/0007-simulator.md for the model and its limits.
//!
//! | module | job |
//! |---|---|
//! | [`rng`] | seeded PCG32 + Box–Muller: deterministic per seed |
//! | [`arrivals`] | traffic scenarios and request sizes (CSV traces too) |
//! | [`fleet`] | pods: continuous batching, queues, routing, cold start, drain |
//! | [`view`] | what a policy sees: direct scrape or Prometheus with its lag |
//! | [`hpa`] | the Kubernetes HPA algorithm and KEDA's activation/cooldown |
//! | [`policies`] | backlog, capacity, seed, production-stack, fixed |
//! | [`run`] | one run, and the matrix of runs on threads |
//! | [`report`] | means over seeds, tables, CSV |
//! | [`svg`] | the chart |

pub mod arrivals;
pub mod fleet;
pub mod hpa;
pub mod policies;
pub mod report;
pub mod rng;
pub mod run;
pub mod svg;
pub mod view;
