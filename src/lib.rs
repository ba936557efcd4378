//! csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.
//!
//! The library is organised one module per concern, in a workspace of crates whose layers the
//! compiler enforces (`crates/`); this crate re-exports every module under its old path and
//! adds the `csi-conform` binary's thin layer (see `src/main.rs` and [`cli`]).

pub mod bundled;
pub mod cli;
pub mod compat;

pub use csi_conform_agent as agent;
pub use csi_conform_bench as bench;
pub use csi_client::{client, fingerprint, mounts, scrub, secrets};
pub use csi_conform_engine::{cleanup, config, journal, orchestrator, parity, session, suite};
pub use csi_conform_report::report;
pub use csi_proto::{proto, units, version, yaml};
pub use csi_reference::reference;
pub use csi_spec::{capability, rules, spec};
