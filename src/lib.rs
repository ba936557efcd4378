//! csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.

pub mod proto;
