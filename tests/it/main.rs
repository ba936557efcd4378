//! Integration tests for csi-conform: one binary, one module per concern.

mod client;
mod proto;
mod report;
