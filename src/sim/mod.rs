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
//! | [`workload`] | requests and their token counts; the chat and code mixes |
//! | [`trace`] | request-level traces (Mooncake JSONL, Azure CSV) and rate CSVs, `--rate-scale` |
//! | [`arrivals`] | the scenarios, the requests each sends for a seed, the warm-up |
//! | [`model`] | the pod's calibrated constants and its μ for a mix (decision 0014) |
//! | [`pod`] | one vLLM engine step by step: queue, KV budget, chunked prefill, its metrics |
//! | [`fleet`] | the Deployment: routing, cold start, drain |
//! | [`view`] | what a policy sees: direct scrape or Prometheus with its lag |
//! | [`hpa`] | the Kubernetes HPA algorithm and KEDA's activation/cooldown |
//! | [`policies`] | default, capacity, backlog, seed, production-stack, fixed |
//! | [`oracle`] | the clairvoyant lower bound on GPU-hours (decision 0018) |
//! | [`run`] | one run, and the matrix of runs on threads |
//! | [`report`] | means over seeds, tables, CSV |
//! | [`mu_error`] | the learned μ against the pod model's, over seeds |
//! | [`sweep`] | the cold-start sweep's tables |
//! | [`svg`] | the chart |

pub mod arrivals;
pub mod fleet;
pub mod hpa;
pub mod model;
pub mod mu_error;
pub mod oracle;
pub mod pod;
pub mod policies;
pub mod report;
pub mod rng;
pub mod run;
pub mod svg;
pub mod sweep;
pub mod trace;
pub mod view;
pub mod workload;
