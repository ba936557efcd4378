//! Integration tests for csi-conform: one binary, one module per concern.

mod mounts;
mod reference;
mod support;
