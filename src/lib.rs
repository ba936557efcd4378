//! csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.
//!
//! The library is organised one module per concern; the `csi-conform` binary is a thin layer
//! over it (see `src/main.rs` and [`cli`]).

pub mod client;
pub mod fingerprint;
pub mod proto;
pub mod report;
pub mod suite;
