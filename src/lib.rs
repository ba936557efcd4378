//! csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.
//!
//! The library is organised one module per concern; the `csi-conform` binary is a thin layer
//! over it (see `src/main.rs` and [`cli`]).

pub mod agent;
pub mod capability;
pub mod cleanup;
pub mod cli;
pub mod client;
pub mod compat;
pub mod config;
pub mod fingerprint;
pub mod journal;
pub mod mounts;
pub mod orchestrator;
pub mod parity;
pub mod proto;
pub mod reference;
pub mod rules;
pub mod report;
pub mod scrub;
pub mod secrets;
pub mod spec;
pub mod suite;
pub mod units;
pub mod version;
pub mod yaml;
