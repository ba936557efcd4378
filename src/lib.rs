//! csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.

pub mod mounts;
pub mod proto;
pub mod reference;
pub mod secrets;
